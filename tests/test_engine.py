"""The run loop, end to end through litellm with deterministic models."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest
from pydantic import BaseModel

from deputy_shiny import (
    Agent,
    ProviderError,
    StructuredOutputError,
    UsageLimitExceeded,
    UsageLimits,
)
from deputy_shiny.errors import (
    AgentBusyError,
    CredentialsRefusedError,
    MissingCredentialsError,
    ToolRejectedError,
    UnknownModelError,
)
from deputy_shiny.events import TextEvent
from deputy_shiny.testing import (
    FunctionModel,
    ProviderFailure,
    ScriptedModel,
    ScriptedReply,
    ScriptedToolCall,
)

from .helpers import assert_consistent, collect, local_tool, wait_until, without_chunks


def call(name: str, arguments: dict | str, id: str | None = None) -> ScriptedReply:
    return ScriptedReply(tool_calls=[ScriptedToolCall(name, arguments, id=id)])


def echo(text: str) -> str:
    """Echo the text back."""
    return f"echo: {text}"


# ------------------------------------------------------------------ text runs


async def test_text_run_event_sequence_and_result() -> None:
    agent = Agent(ScriptedModel([ScriptedReply(text="Hello there, friend!", chunk_size=5)]))
    events = await collect(agent.run("Hi"))

    assert without_chunks(events) == [
        "start",
        "request_start",
        "text",
        "text_complete",
        "request_end",
        "turn",
        "usage",
        "usage",
        "stop",
    ]
    assert [e.text for e in events if e.type == "text"] == ["Hello", " ther", "e, fr", "iend!"]
    assert events[0].task == "Hi"
    assert events[-1].stop_reason == "complete"
    result = agent.last_run()
    assert result is not None
    assert result.response == "Hello there, friend!"
    assert result.usage.requests == 1
    assert result.events == events
    assert {e.run_id for e in events} == {result.run_id}
    assert {e.session_id for e in events} == {agent.session_id}
    assert [t.role for t in agent.get_turns()] == ["user", "assistant"]


async def test_include_partial_messages_false_hides_chunks_but_result_keeps_them() -> None:
    agent = Agent(ScriptedModel([ScriptedReply(text="abcdefgh", chunk_size=2)]))
    events = await collect(agent.run("x", include_partial_messages=False))
    assert "text" not in [e.type for e in events]
    assert next(e for e in events if e.type == "text_complete").text == "abcdefgh"
    result = agent.last_run()
    assert result is not None
    assert [e.text for e in result.events if e.type == "text"] == ["ab", "cd", "ef", "gh"]


async def test_request_carries_system_prompt_history_and_tools() -> None:
    model = ScriptedModel(["first", "second"])
    agent = Agent(model, system_prompt="Be brief.", tools=[local_tool(echo)])
    await agent.run_async("one")
    await agent.run_async("two")
    messages = model.requests[1]["messages"]
    assert messages[0] == {"role": "system", "content": "Be brief."}
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[-1]["content"] == "two"
    tools = model.requests[1]["tools"]
    assert tools[0]["function"]["name"] == "echo"
    assert tools[0]["function"]["parameters"]["properties"]["text"]["type"] == "string"


# ------------------------------------------------------------------ tools


async def test_tool_call_round_trip() -> None:
    model = ScriptedModel([call("echo", {"text": "hi"}, id="call_1"), "The tool said hi."])
    agent = Agent(model, tools=[local_tool(echo)])
    events = await collect(agent.run("Use echo"))

    assert without_chunks(events) == [
        "start",
        "request_start",
        "request_end",
        "turn",
        "usage",
        "tool_start",
        "permission",
        "tool_end",
        "request_start",
        "text",
        "text_complete",
        "request_end",
        "turn",
        "usage",
        "usage",
        "stop",
    ]
    start = next(e for e in events if e.type == "tool_start")
    end = next(e for e in events if e.type == "tool_end")
    assert (start.call_id, start.tool_name, start.arguments) == ("call_1", "echo", {"text": "hi"})
    assert (end.output, end.is_error) == ("echo: hi", False)
    assert end.duration >= 0
    tool_message = model.requests[1]["messages"][-1]
    assert tool_message == {"role": "tool", "tool_call_id": "call_1", "content": "echo: hi"}
    assert agent.last_run().usage.tool_calls == 1  # type: ignore[union-attr]
    assert_consistent(agent)


async def test_parallel_calls_run_concurrently() -> None:
    both_started = asyncio.Event()
    started: list[str] = []

    async def meet(name: str) -> str:
        """Wait until both calls are running."""
        started.append(name)
        if len(started) == 2:
            both_started.set()
        await asyncio.wait_for(both_started.wait(), timeout=2)
        return f"met {name}"

    reply = ScriptedReply(
        tool_calls=[
            ScriptedToolCall("meet", {"name": "a"}),
            ScriptedToolCall("meet", {"name": "b"}),
        ]
    )
    agent = Agent(ScriptedModel([reply, "done"]), tools=[local_tool(meet)])
    result = await agent.run_async("go")
    outputs = sorted(e.output for e in result.events if e.type == "tool_end")
    assert outputs == ["met a", "met b"]


async def test_sequential_mode_runs_calls_in_order() -> None:
    order: list[str] = []

    async def step(name: str) -> str:
        """Record a step."""
        order.append(f"start {name}")
        await asyncio.sleep(0.01 if name == "a" else 0)
        order.append(f"end {name}")
        return name

    reply = ScriptedReply(
        tool_calls=[
            ScriptedToolCall("step", {"name": "a"}),
            ScriptedToolCall("step", {"name": "b"}),
        ]
    )
    agent = Agent(ScriptedModel([reply, "done"]), tools=[local_tool(step)])
    await agent.run_async("go", tool_mode="sequential")
    assert order == ["start a", "end a", "start b", "end b"]


async def test_sync_tool_runs_in_a_worker_thread_and_loop_stays_free() -> None:
    threads: list[int] = []

    def slow(seconds: float) -> str:
        """Sleep, blocking."""
        threads.append(threading.get_ident())
        time.sleep(seconds)
        return "slept"

    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    ticking = asyncio.create_task(ticker())
    agent = Agent(ScriptedModel([call("slow", {"seconds": 0.3}), "ok"]), tools=[local_tool(slow)])
    await agent.run_async("go")
    ticking.cancel()
    assert threads and threads[0] != threading.get_ident()
    assert ticks >= 10  # the event loop kept running while the tool slept


async def test_tool_errors_become_error_results_and_the_run_goes_on() -> None:
    def boom(x: int) -> int:
        """Always fails."""
        raise RuntimeError("disk on fire")

    model = ScriptedModel(
        [
            ScriptedReply(
                tool_calls=[
                    ScriptedToolCall("boom", {"x": 1}, id="c1"),
                    ScriptedToolCall("boom", '{"x": 1', id="c2"),  # malformed JSON
                    ScriptedToolCall("boom", {"x": "not a number"}, id="c3"),
                    ScriptedToolCall("nope", {}, id="c4"),
                ]
            ),
            "I see the errors.",
        ]
    )
    agent = Agent(model, tools=[local_tool(boom)])
    result = await agent.run_async("go")

    ends = {e.call_id: e for e in result.events if e.type == "tool_end"}
    assert all(e.is_error for e in ends.values())
    assert "RuntimeError: disk on fire" in ends["c1"].output
    assert "JSON" in ends["c2"].output
    assert "x" in ends["c3"].output
    assert "Unknown tool 'nope'" in ends["c4"].output and "boom" in ends["c4"].output
    assert result.stop_reason == "complete"
    assert result.response == "I see the errors."
    # The malformed arguments are replayed verbatim, so the provider sees what it sent.
    sent = model.requests[1]["messages"][1]["tool_calls"][1]["function"]["arguments"]
    assert sent == '{"x": 1'
    assert_consistent(agent)


async def test_tool_loop_stops_the_run() -> None:
    model = ScriptedModel([call("echo", {"text": "same"}) for _ in range(5)])
    agent = Agent(model, tools=[local_tool(echo)])
    result = await agent.run_async("loop")
    assert result.stop_reason == "tool_loop"
    assert result.usage.tool_calls == 3
    assert len(model.requests) == 3
    assert_consistent(agent)


async def test_tool_callbacks_observe_and_reject() -> None:
    seen_requests: list[str] = []
    seen_results: list[str] = []

    def no_secret(request) -> None:  # type: ignore[no-untyped-def]
        seen_requests.append(request.arguments.get("text", ""))
        if request.arguments.get("text") == "secret":
            raise ToolRejectedError("not that one")

    model = ScriptedModel(
        [
            ScriptedReply(
                tool_calls=[
                    ScriptedToolCall("echo", {"text": "fine"}, id="a"),
                    ScriptedToolCall("echo", {"text": "secret"}, id="b"),
                ]
            ),
            "done",
            call("echo", {"text": "later"}),
            "done again",
        ]
    )
    agent = Agent(model, tools=[local_tool(echo)])
    remove_request = agent.on_tool_request(no_secret)
    remove_result = agent.on_tool_result(lambda r: seen_results.append(r.output))
    result = await agent.run_async("go")
    ends = {e.call_id: e for e in result.events if e.type == "tool_end"}
    assert ends["a"].output == "echo: fine"
    assert ends["b"].is_error and ends["b"].output == "Tool call rejected: not that one"
    # A rejected call is answered at once, before the accepted ones run.
    assert seen_results == ["Tool call rejected: not that one", "echo: fine"]

    remove_request()
    remove_result()
    await agent.run_async("again")
    assert seen_requests == ["fine", "secret"]
    assert len(seen_results) == 2


# ------------------------------------------------------------------ limits


async def test_request_limit_keeps_conversation_consistent() -> None:
    model = ScriptedModel([call("echo", {"text": "a"}), call("echo", {"text": "b"}), "never"])
    agent = Agent(model, tools=[local_tool(echo)], usage_limits=UsageLimits(max_requests=2))
    result = await agent.run_async("go")
    assert result.stop_reason == "request_limit"
    assert result.usage.requests == 2
    assert len(model.requests) == 2
    assert_consistent(agent)


async def test_per_run_limit_looser_than_agent_is_clamped() -> None:
    model = ScriptedModel([call("echo", {"text": "a"}), "never"])
    agent = Agent(model, tools=[local_tool(echo)], usage_limits=UsageLimits(max_requests=1))
    result = await agent.run_async("go", usage_limits=UsageLimits(max_requests=50))
    assert result.stop_reason == "request_limit"
    assert len(model.requests) == 1


async def test_tool_call_limit_answers_the_calls_it_did_not_run() -> None:
    reply = ScriptedReply(
        tool_calls=[
            ScriptedToolCall("echo", {"text": "1"}, id="one"),
            ScriptedToolCall("echo", {"text": "2"}, id="two"),
        ]
    )
    agent = Agent(ScriptedModel([reply, "never"]), tools=[local_tool(echo)])
    result = await agent.run_async("go", usage_limits=UsageLimits(max_tool_calls=1))
    assert result.stop_reason == "tool_call_limit"
    results = {r.call_id: r for r in agent.get_turns()[-1].tool_results}
    assert results["one"].output == "echo: 1"
    assert results["two"].is_error and "not run" in results["two"].output
    assert_consistent(agent)


@pytest.mark.parametrize(
    ("limits", "reason"),
    [
        (UsageLimits(max_input_tokens=99), "input_token_limit"),
        (UsageLimits(max_output_tokens=49), "output_token_limit"),
        (UsageLimits(max_total_tokens=149), "total_token_limit"),
        (UsageLimits(max_cost_usd=0.01), "cost_limit"),
    ],
)
async def test_token_and_cost_limits(limits: UsageLimits, reason: str) -> None:
    usage = {"prompt_tokens": 100, "completion_tokens": 50}
    model = ScriptedModel(
        [
            ScriptedReply(
                tool_calls=[ScriptedToolCall("echo", {"text": "x"})], usage=usage, cost=0.02
            )
        ]
    )
    agent = Agent(model, tools=[local_tool(echo)])
    result = await agent.run_async("go", usage_limits=limits)
    assert result.stop_reason == reason
    assert result.usage.input_tokens == 100 and result.usage.output_tokens == 50
    assert_consistent(agent)  # the tool call the limit stopped got a "not run" result


async def test_unknown_cost_under_a_cost_limit_stops() -> None:
    agent = Agent(ScriptedModel([ScriptedReply(text="hi", cost=None)]))
    result = await agent.run_async("go", usage_limits=UsageLimits(max_cost_usd=1.0))
    assert result.stop_reason == "cost_unavailable"
    assert result.cost.total is None and result.cost.missing == 1


async def test_on_exceed_error_raises_with_partial_result() -> None:
    model = ScriptedModel([call("echo", {"text": "a"}), "never"])
    agent = Agent(model, tools=[local_tool(echo)])
    limits = UsageLimits(max_requests=1, on_exceed="error")
    with pytest.raises(UsageLimitExceeded) as caught:
        await agent.run_async("go", usage_limits=limits)
    assert caught.value.stop_reason == "request_limit"
    assert caught.value.result is not None and caught.value.result.usage.requests == 1

    # run() yields the stop event first, then raises.
    seen: list[str] = []

    async def consume() -> None:
        async for event in Agent(ScriptedModel([call("x", {})]), usage_limits=limits).run("go"):
            seen.append(event.type)

    with pytest.raises(UsageLimitExceeded):
        await consume()
    assert seen[-1] == "stop"


# ------------------------------------------------------------------ usage and cost


async def test_usage_and_cost_accumulate_over_the_conversation() -> None:
    usage = {"prompt_tokens": 10, "completion_tokens": 5}
    model = ScriptedModel(
        [
            ScriptedReply(text="a", usage=usage, cost=0.25),
            ScriptedReply(text="b", usage=usage, cost=0.5),
        ]
    )
    agent = Agent(model)
    first = await agent.run_async("1")
    await agent.run_async("2")
    assert first.cost.total == 0.25 and first.cost.complete
    assert agent.usage().requests == 2
    assert agent.usage().total_tokens == 30
    assert agent.cost().total == pytest.approx(0.75)
    assert agent.cost().complete


async def test_unknown_cost_makes_conversation_cost_unknown() -> None:
    agent = Agent(ScriptedModel([ScriptedReply(text="a", cost=0.1), ScriptedReply(text="b")]))
    await agent.run_async("1")
    await agent.run_async("2")
    assert agent.cost().total is None
    assert agent.cost().missing == 1
    event = next(e for e in agent.last_run().events if e.type == "request_end")  # type: ignore[union-attr]
    assert event.cost is None


# ------------------------------------------------------------------ interrupt


async def test_interrupt_mid_stream_keeps_partial_text() -> None:
    text = "".join(f"word{i} " for i in range(200))
    agent = Agent(ScriptedModel([ScriptedReply(text=text, chunk_size=6, delay=0.01), "next"]))
    seen = 0
    async for event in agent.run("talk"):
        if event.type == "text":
            seen += 1
            if seen == 3:
                assert agent.interrupt("user pressed stop")
    result = agent.last_run()
    assert result is not None
    assert result.stop_reason == "user pressed stop"
    assert result.events[-1].type == "stop"
    assert result.response == text[:18]
    assert agent.get_turns()[-1].text == text[:18]
    assert not agent.running
    assert (await agent.run_async("again")).response == "next"


async def test_interrupt_while_waiting_for_a_slow_first_chunk() -> None:
    async def stall(messages, tools):  # type: ignore[no-untyped-def]
        await asyncio.sleep(30)
        return "too late"

    agent = Agent(FunctionModel(stall))
    asyncio.get_running_loop().call_later(0.2, agent.interrupt)
    started = time.monotonic()
    result = await agent.run_async("go")
    assert result.stop_reason == "interrupted"
    assert time.monotonic() - started < 5


async def test_interrupt_while_a_tool_runs() -> None:
    forever = asyncio.Event()
    running = threading.Event()

    async def wait_forever() -> str:
        """Never returns."""
        running.set()
        await forever.wait()
        return "unreachable"

    agent = Agent(
        ScriptedModel([call("wait_forever", {}), "never"]), tools=[local_tool(wait_forever)]
    )
    run = asyncio.create_task(agent.run_async("go"))
    await wait_until(running.is_set)
    agent.interrupt()
    result = await asyncio.wait_for(run, timeout=5)
    assert result.stop_reason == "interrupted"
    assert_consistent(agent)
    last = agent.get_turns()[-1].tool_results[0]
    assert last.is_error and "not run" in last.output


async def test_interrupt_a_sync_tool_returns_promptly() -> None:
    running = threading.Event()

    def sleepy() -> str:
        """Block for a while."""
        running.set()
        time.sleep(1.5)
        return "woke"

    agent = Agent(ScriptedModel([call("sleepy", {}), "never"]), tools=[local_tool(sleepy)])
    run = asyncio.create_task(agent.run_async("go"))
    await wait_until(running.is_set)
    started = time.monotonic()
    agent.interrupt()
    result = await asyncio.wait_for(run, timeout=5)
    assert result.stop_reason == "interrupted"
    assert time.monotonic() - started < 1.0
    assert_consistent(agent)


async def test_interrupt_from_another_thread() -> None:
    agent = Agent(
        ScriptedModel([ScriptedReply(text="x" * 10 + "y" * 400, chunk_size=3, delay=0.01)])
    )
    threading.Timer(0.1, agent.interrupt, args=("from thread",)).start()
    result = await agent.run_async("go")
    assert result.stop_reason == "from thread"


async def test_consumer_walking_away_leaves_agent_idle_and_consistent() -> None:
    model = ScriptedModel([call("echo", {"text": "a"}), "done", "later"])
    agent = Agent(model, tools=[local_tool(echo)])
    events = agent.run("go")
    async for event in events:
        if event.type == "tool_start":
            break
    await events.aclose()  # type: ignore[attr-defined]
    assert not agent.running
    assert_consistent(agent)
    assert agent.last_run() is not None
    assert (await agent.run_async("again")).stop_reason == "complete"


async def test_interrupt_when_idle_returns_false() -> None:
    assert Agent(ScriptedModel([])).interrupt() is False


async def test_second_concurrent_run_is_refused() -> None:
    agent = Agent(ScriptedModel([ScriptedReply(text="slow " * 20, delay=0.01), "x"]))
    first = asyncio.create_task(agent.run_async("one"))
    await wait_until(lambda: agent.running)
    with pytest.raises(AgentBusyError):
        await agent.run_async("two")
    assert (await first).stop_reason == "complete"


# ------------------------------------------------------------------ providers and fallbacks


async def test_transient_failure_falls_back_and_stays_there() -> None:
    primary = ScriptedModel([ProviderFailure(503), "primary again"])
    backup = ScriptedModel(["from backup", "backup again"])
    agent = Agent(primary, fallback_models=[backup])
    events = await collect(agent.run("go"))
    assert without_chunks(events)[:4] == ["start", "request_start", "request_error", "fallback"]
    error = next(e for e in events if e.type == "request_error")
    assert error.transient
    fallback = next(e for e in events if e.type == "fallback")
    assert fallback.from_model == primary.as_chat_model().model
    assert fallback.to_model == backup.as_chat_model().model
    assert agent.last_run().response == "from backup"  # type: ignore[union-attr]
    assert agent.get_model() == backup.as_chat_model().model
    assert (await agent.run_async("again")).response == "backup again"
    # The backup saw the same history the primary would have.
    assert backup.requests[0]["messages"] == primary.requests[0]["messages"]


async def test_non_transient_failure_does_not_fall_back() -> None:
    backup = ScriptedModel(["unused"])
    agent = Agent(ScriptedModel([ProviderFailure(401)]), fallback_models=[backup])
    with pytest.raises(CredentialsRefusedError) as caught:
        await agent.run_async("go")
    assert caught.value.result is not None
    assert caught.value.result.stop_reason == "provider_error"
    assert backup.requests == []


async def test_failure_mid_stream_does_not_fall_back() -> None:
    failing = ScriptedReply(
        text="partial answer here", chunk_size=4, error=ProviderFailure(503), error_after_chunks=2
    )
    backup = ScriptedModel(["unused"])
    agent = Agent(ScriptedModel([failing]), fallback_models=[backup])
    events = await collect(agent.run("go"))
    assert events[-1].stop_reason == "provider_error"
    assert "request_error" in [e.type for e in events]
    assert "fallback" not in [e.type for e in events]
    assert backup.requests == []
    assert agent.get_turns()[-1].text == "partial "  # nothing already shown is lost


async def test_failure_after_a_tool_ran_does_not_fall_back() -> None:
    backup = ScriptedModel(["unused"])
    agent = Agent(
        ScriptedModel([call("echo", {"text": "a"}), ProviderFailure(503)]),
        tools=[local_tool(echo)],
        fallback_models=[backup],
    )
    with pytest.raises(ProviderError) as caught:
        await agent.run_async("go")
    assert caught.value.transient
    assert backup.requests == []


async def test_unknown_provider_is_a_typed_error_at_first_request() -> None:
    agent = Agent("no-such-provider-xyz/some-model")
    with pytest.raises(UnknownModelError, match="no-such-provider-xyz/some-model"):
        await agent.run_async("hi")


async def test_missing_api_key_is_a_typed_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    agent = Agent("openai/gpt-4.1-mini")
    with pytest.raises(MissingCredentialsError, match="API key"):
        await agent.run_async("hi")


# ------------------------------------------------------------------ structured output


class City(BaseModel):
    name: str
    population: int


async def test_structured_output_with_corrections() -> None:
    model = ScriptedModel(
        [
            "Paris is the capital.",
            '{"name": "Paris"}',  # schema failure
            '{"name": "paris", "population": 2100000}',  # validate rejects
            '```json\n{"name": "Paris", "population": 2100000}\n```',
        ]
    )

    def capitalised(city: City) -> bool | str:
        return True if city.name[0].isupper() else "Capitalise the name."

    agent = Agent(model)
    result = await agent.run_async(
        "Capital of France?", type=City, validate=capitalised, max_corrections=2
    )
    assert result.structured_output == City(name="Paris", population=2100000)
    attempts = [e for e in result.events if e.type == "structured_attempt"]
    assert [a.accepted for a in attempts] == [False, False, True]
    assert "population" in attempts[0].message
    assert attempts[1].message == "Capitalise the name."
    assert result.usage.requests == 4
    assert "Capitalise the name." in model.requests[3]["messages"][-1]["content"]
    assert "json_schema" in json.dumps(model.requests[1]["params"])


async def test_structured_output_still_rejected_is_an_error() -> None:
    agent = Agent(ScriptedModel(["x", "not json", "still not"]))
    with pytest.raises(StructuredOutputError) as caught:
        await agent.run_async("go", type=City, max_corrections=1)
    assert caught.value.result is not None
    assert caught.value.result.stop_reason == "error"


async def test_structured_attempts_count_toward_limits() -> None:
    agent = Agent(ScriptedModel(["x", "bad", "bad", "bad"]))
    result = await agent.run_async(
        "go", type=City, max_corrections=5, usage_limits=UsageLimits(max_requests=3)
    )
    assert result.stop_reason == "request_limit"
    assert result.usage.requests == 3


async def test_validate_returning_nonsense_ends_the_run() -> None:
    agent = Agent(ScriptedModel(["x", '{"name": "A", "population": 1}']))
    with pytest.raises(StructuredOutputError, match="validate must return"):
        await agent.run_async("go", type=City, validate=lambda v: None)


# ------------------------------------------------------------------ run context


async def test_run_context_rides_on_every_event_and_result() -> None:
    agent = Agent(ScriptedModel(["a"]), run_context={"user_id": "u1"})
    result = await agent.run_async("go", run_context={"topic": "maps"})
    assert {tuple(sorted(e.run_context.items())) for e in result.events} == {
        (("topic", "maps"), ("user_id", "u1"))
    }
    assert result.run_context == {"user_id": "u1", "topic": "maps"}
    assert agent.run_context == {"user_id": "u1"}


async def test_text_events_are_ordinary_validated_events() -> None:
    agent = Agent(ScriptedModel([ScriptedReply(text="abcdef", chunk_size=3)]), run_context={"k": 1})
    result = await agent.run_async("x")
    for event in (e for e in result.events if e.type == "text"):
        rebuilt = TextEvent.model_validate(event.model_dump())
        assert rebuilt == event
        assert event.model_fields_set >= {"text", "run_id"}
        assert event.run_context == {"k": 1}
        assert event.model_dump_json()
