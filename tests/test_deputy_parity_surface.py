"""The ellmer-shaped surface of deputy's Agent (#37, rows 4-16 and 35 of the parity
check): each test ports the deputy call a user porting R code makes, and checks what it
does, not only that it is accepted."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from chatlas import AssistantTurn, ChatOpenAI, StreamController, UserTurn
from pydantic import BaseModel

from deputy_shiny import Agent, UsageLimits
from deputy_shiny.errors import AgentRetainedError, ConfigurationError
from deputy_shiny.events import (
    AgentEvent,
    StartEvent,
    StopEvent,
    TextCompleteEvent,
    TextEvent,
    UsageEvent,
    agent_event_adapter,
)
from deputy_shiny.messages import ContentText, ContentThinking, ContentToolRequest, Turn
from deputy_shiny.models import ChatModel, Provider
from deputy_shiny.testing import FunctionModel, ScriptedModel, ScriptedReply, ScriptedToolCall
from deputy_shiny.tools import tool
from tests.helpers import READ_ONLY, local_tool, sse_chat_server


class Stop(BaseModel):
    city: str
    nights: int


def _chunks(text: str) -> ScriptedReply:
    return ScriptedReply(text, chunk_size=4)


# ------------------------------------------------------------------ row 4: run_sync


def test_run_sync_takes_include_partial_messages_and_keeps_the_text_events() -> None:
    # deputy: agent$run_sync("x", include_partial_messages = FALSE)
    agent = Agent(ScriptedModel([_chunks("Hello there, friend")]))
    result = agent.run_sync("x", include_partial_messages=False)
    # "It doesn't change the returned result, which always includes the text events."
    assert result.text_chunks() == ["Hell", "o th", "ere,", " fri", "end"]
    assert result.response == "Hello there, friend"
    with pytest.raises(ConfigurationError, match="include_partial_messages"):
        agent.run_sync("x", include_partial_messages="no")  # type: ignore[arg-type]
    assert agent.usage().requests == 1


async def test_run_without_partial_messages_yields_no_text_chunks() -> None:
    agent = Agent(ScriptedModel([_chunks("Hello there")]))
    events = [e async for e in agent.run("x", include_partial_messages=False)]
    assert not any(isinstance(e, TextEvent) for e in events)
    assert [e.text for e in events if isinstance(e, TextCompleteEvent)] == ["Hello there"]


# ------------------------------------------------------------------ rows 5-7: echo, convert


def test_chat_echo_prints_the_reply_as_deputy_does(capsys: pytest.CaptureFixture[str]) -> None:
    agent = Agent(ScriptedModel(["Quiet.", "Loud.", "Also loud."]))
    assert agent.chat("1") == "Quiet."  # echo = NULL: "none"
    assert agent.chat("2", echo=True) == "Loud."
    assert agent.chat("3", echo="output") == "Also loud."
    assert capsys.readouterr().out == "Loud.\nAlso loud.\n"
    # A wrong echo is refused before anything is sent.
    with pytest.raises(ConfigurationError, match="echo must be"):
        agent.chat("4", echo="loudly")  # type: ignore[arg-type]
    assert agent.usage().requests == 3


def test_chat_structured_convert_false_gives_json_data(capsys: pytest.CaptureFixture[str]) -> None:
    # deputy: agent$chat_structured("...", type = type_stop, convert = FALSE, echo = "output")
    reply = '{"city": "Lyon", "nights": 2}'
    agent = Agent(ScriptedModel(["Lyon, two nights.", reply, "Again.", reply]))
    data = agent.chat_structured("Plan a stop", type=Stop, convert=False, echo="output")
    assert data == {"city": "Lyon", "nights": 2} and type(data) is dict
    assert json.loads(capsys.readouterr().out) == {"city": "Lyon", "nights": 2}
    assert agent.chat_structured("Again", type=Stop) == Stop(city="Lyon", nights=2)
    assert capsys.readouterr().out == ""
    with pytest.raises(ConfigurationError, match="convert"):
        agent.chat_structured("x", type=Stop, convert="no")  # type: ignore[arg-type]


async def test_chat_structured_async_takes_echo_and_convert(
    capsys: pytest.CaptureFixture[str],
) -> None:
    agent = Agent(ScriptedModel(["Two.", "[1, 2]"]))
    value = await agent.chat_structured_async("Two numbers", type=list[int], convert=False)
    assert value == [1, 2]
    agent = Agent(ScriptedModel(["Two.", '{"city": "Nice", "nights": 1}']))
    stop = await agent.chat_structured_async("Stop", type=Stop, echo=True)
    assert stop == Stop(city="Nice", nights=1)
    assert json.loads(capsys.readouterr().out) == {"city": "Nice", "nights": 1}


# ------------------------------------------------------------------ row 8: controller, type


def test_a_cancelled_controller_stops_the_stream_and_is_reset_by_the_next() -> None:
    # ellmer: controller <- stream_controller(); chat$stream(..., controller = controller)
    words = " ".join(f"word{i}" for i in range(60))
    agent = Agent(ScriptedModel([ScriptedReply(words, chunk_size=6), "Second reply."]))
    controller = StreamController()
    seen: list[str] = []
    for chunk in agent.stream("Talk", controller=controller):
        seen.append(str(chunk))
        if len(seen) == 2:
            controller.cancel()
    result = agent.last_run()
    assert result is not None and result.stop_reason == "cancelled"
    assert len(seen) < 10 and "".join(seen) in words
    assert agent.get_turns()[-1].text.startswith("".join(seen))  # partial text kept
    # "As in ellmer, a cancelled controller is reset when the new run starts."
    assert "".join(map(str, agent.stream("Again", controller=controller))) == "Second reply."
    assert controller.cancelled is False
    with pytest.raises(ConfigurationError, match="controller"):
        agent.stream("x", controller=object())


async def test_a_controller_cancelled_while_a_tool_runs_stops_the_run() -> None:
    started = asyncio.Event()

    async def wait_long() -> str:
        """Wait a long time."""
        started.set()
        await asyncio.sleep(30)
        return "done"

    calls = [ScriptedToolCall("wait_long", {})]
    agent = Agent(
        ScriptedModel([ScriptedReply(tool_calls=calls), "never"]),
        tools=[tool(wait_long, annotations=READ_ONLY)],
    )
    controller = StreamController()

    async def consume() -> list[Any]:
        stream = await agent.stream_async("Go", content="all", controller=controller)
        return [c async for c in stream]

    task = asyncio.create_task(consume())
    await asyncio.wait_for(started.wait(), 10)
    controller.cancel("user stopped")  # no event arrives meanwhile: the stream polls
    chunks = await asyncio.wait_for(task, 10)
    assert isinstance(chunks[0], ContentToolRequest)
    result = agent.last_run()
    assert result is not None and result.stop_reason == "user stopped"


def test_stream_type_streams_the_structured_output() -> None:
    # deputy: agent$stream("Plan a stop", type = type_stop)
    reply = '{"city": "Lyon", "nights": 2}'
    agent = Agent(ScriptedModel([_chunks("Lyon looks good."), _chunks(reply)]))
    chunks = list(agent.stream("Plan a stop", type=Stop))
    assert len(chunks) > 1  # streamed, not one block
    assert Stop.model_validate_json("".join(map(str, chunks))) == Stop(city="Lyon", nights=2)
    result = agent.last_run()
    assert result is not None and result.structured_output == Stop(city="Lyon", nights=2)
    # The task's own reply is in the conversation, not in the stream.
    assert "Lyon looks good." not in "".join(map(str, chunks))
    assert agent.get_turns()[1].text == "Lyon looks good."


# ------------------------------------------------------------------ row 9: thinking


@pytest.fixture
def reasoning_wire() -> Iterator[str]:
    deltas: list[dict[str, Any]] = [
        {"reasoning_content": "First check "},
        {"reasoning_content": "the file."},
        {"content": "It is "},
        {"content": "fine."},
    ]
    yield from sse_chat_server(deltas, {"prompt_tokens": 5, "completion_tokens": 5})


async def test_stream_content_yields_thinking(reasoning_wire: str) -> None:
    model = ChatModel(model="openai/x", api_base=reasoning_wire, api_key="sk-test")
    agent = Agent(model)
    chunks = [c async for c in agent.stream_async("Is it fine?", stream="content")]
    assert ContentThinking(thinking="First check the file.") in chunks
    assert "".join(c.text for c in chunks if isinstance(c, ContentText)) == "It is fine."
    text_only = [c async for c in Agent(model).stream_async("Is it fine?")]
    assert "".join(text_only) == "It is fine."


# ------------------------------------------------------------------ row 10: set_turns


def test_set_turns_during_a_run_takes_effect_before_the_next_request() -> None:
    sent: list[list[str]] = []
    fresh = [
        Turn(role="user", contents=[ContentText(text="Start over")]),
        Turn(role="assistant", contents=[ContentText(text="Fresh start.")]),
    ]

    def reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        sent.append([str(m.get("content")) for m in messages if m["role"] != "system"])
        if len(sent) == 1:
            return ScriptedReply(tool_calls=[ScriptedToolCall("reset", {})])
        return "Done after the reset."

    agent = Agent(FunctionModel(reply), system_prompt="Be brief.")

    def reset() -> str:
        """Reset the conversation."""
        agent.set_turns(fresh)  # from inside the run, as a deputy tool may
        assert agent.get_turns() == fresh  # the new turns read at once
        return "reset"

    agent.register_tool(local_tool(reset))
    agent.add_turn("Old question", "Old answer")
    result = agent.run_sync("Please reset")
    assert result.response == "Done after the reset."
    # The next request sent the new conversation (no tool call left dangling in it).
    assert sent[1] == ["Start over", "Fresh start."]
    assert agent.get_turns()[:2] == fresh and agent.get_turns()[2].text == "Done after the reset."
    # "During a run, usage counted so far still counts."
    assert result.usage.requests == 2 and agent.usage().requests == 2


def test_set_turns_takes_turns_as_json_and_refuses_other_things() -> None:
    agent = Agent(ScriptedModel(["Hi!"]))
    agent.chat("Hello")
    saved = json.loads(json.dumps([t.model_dump(mode="json") for t in agent.get_turns()]))
    restored = Agent(ScriptedModel([])).set_turns(saved)
    assert restored.get_turns() == agent.get_turns()
    with pytest.raises(ConfigurationError, match="cannot read"):
        restored.set_turns([{"role": "robot"}])
    with pytest.raises(ConfigurationError, match="Turn objects"):
        restored.set_turns(["Hello"])  # type: ignore[list-item]
    assert restored.get_turns() == agent.get_turns()  # nothing lost


def test_a_retained_agent_still_refuses_set_turns() -> None:
    owner, worker = Agent(ScriptedModel([])), Agent(ScriptedModel([]))
    owner.retain_agent(worker, UsageLimits(max_requests=2))
    with pytest.raises(AgentRetainedError):
        worker.set_turns([])


# ------------------------------------------------------------------ rows 11-14


def test_get_provider_and_get_model_object() -> None:
    model = ChatModel(model="anthropic/claude-sonnet-4-5", params={"temperature": 0.2})
    agent = Agent(model)
    assert agent.get_provider() == Provider(name="anthropic", model="claude-sonnet-4-5")
    assert agent.get_model_object() is model
    assert agent.get_model_object().params == {"temperature": 0.2}


def test_set_chat_moves_the_conversation_to_a_chatlas_chat() -> None:
    agent = Agent(ScriptedModel([]), system_prompt="Be brief.")
    thought = Turn(
        role="assistant",
        contents=[ContentThinking(thinking="hmm", signature="s"), ContentText(text="4")],
    )
    agent.add_turn("2+2?", thought)
    chat = ChatOpenAI(model="gpt-4.1-mini", api_key="sk-test", system_prompt="Ignored.")
    assert agent.set_chat(chat) is agent
    assert agent.get_model() == "openai/gpt-4.1-mini"
    assert agent.get_provider().name == "openai"
    # The conversation and prompt stay the agent's; thinking goes with the provider.
    assert agent.get_system_prompt() == "Be brief."
    assert agent.get_turns()[-1].contents == [ContentText(text="4")]
    # One Chat may serve many agents: only its model is taken.
    assert Agent(ScriptedModel([])).set_chat(chat).get_model() == "openai/gpt-4.1-mini"


def test_set_chat_refuses_a_chat_with_turns_or_tools() -> None:
    agent = Agent(ScriptedModel([]))
    before = agent.get_model()
    talked = ChatOpenAI(model="gpt-4.1-mini", api_key="sk-test")
    talked.set_turns([UserTurn("Hi"), AssistantTurn("Hello")])
    with pytest.raises(ConfigurationError, match="set_turns"):
        agent.set_chat(talked)
    tooled = ChatOpenAI(model="gpt-4.1-mini", api_key="sk-test")

    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    tooled.register_tool(add)
    with pytest.raises(ConfigurationError, match="register_tools"):
        agent.set_chat(tooled)
    assert agent.get_model() == before  # unchanged


def test_session_id_is_callable_as_in_r() -> None:
    # deputy: agent$session_id()
    agent = Agent(ScriptedModel([]), session_id="s-42")
    assert agent.session_id() == "s-42" and type(agent.session_id()) is str
    assert agent.session_id == "s-42"  # the property's users are unchanged
    assert json.dumps({"id": agent.session_id}) == '{"id": "s-42"}'


# ------------------------------------------------------------------ row 15: as a chat


async def test_the_agent_works_where_shinychat_expects_a_chatlas_chat() -> None:
    from shinychat._history_client import as_turns_adapter

    agent = Agent(ScriptedModel([_chunks("First reply."), _chunks("Second reply.")]))
    controller = StreamController()
    # What shinychat's Chat(client=agent) does for each user message:
    stream = await agent.stream_async("Hi", content="all", controller=controller)
    chunks = [c async for c in stream]
    assert "".join(c.text for c in chunks if isinstance(c, ContentText)) == "First reply."
    # Its conversation history: turns as JSON out, and back in.
    adapter = as_turns_adapter(agent)
    saved = json.loads(json.dumps(adapter.get_turns_json(), default=lambda t: t.model_dump()))
    agent.set_turns([])
    adapter.set_turns_json(saved)
    assert [t.text for t in agent.get_turns()] == ["Hi", "First reply."]
    stream = await agent.stream_async("Again", content="all", controller=controller)
    assert [c.text async for c in stream if isinstance(c, ContentText)] != []
    assert len(agent.get_turns()) == 4


# ------------------------------------------------------------------ rows 16, 35: events


def test_agent_event_is_a_constructor_as_in_deputy() -> None:
    # deputy: AgentEvent("start", task = "Analyze data.csv"). A type checker reads
    # AgentEvent as the union of the event classes (hence the ignores): typed code calls
    # make_event(), which this is.
    start = AgentEvent("start", task="Analyze data.csv")  # type: ignore[operator]
    assert isinstance(start, StartEvent) and start.task == "Analyze data.csv"
    event = AgentEvent("text", text="Hello", is_complete=False)  # type: ignore[operator]
    assert isinstance(event, TextEvent) and event.text == "Hello"
    assert isinstance(AgentEvent("text", text="Hello", is_complete=True), TextCompleteEvent)  # type: ignore[operator]
    assert isinstance(start, AgentEvent) and not isinstance("start", AgentEvent)
    # Unknown types and deputy's renamed fields are refused, saying what to use.
    with pytest.raises(ConfigurationError, match=r"Unknown event type .begin.; .* start"):
        AgentEvent("begin")  # type: ignore[operator]
    with pytest.raises(ConfigurationError, match="'reason' is 'stop_reason' here"):
        AgentEvent("stop", reason="complete")  # type: ignore[operator]
    # The union still validates and dispatches.
    data = start.model_dump(mode="json")
    assert agent_event_adapter.validate_python(data) == start


def test_usage_carries_the_limits_and_stop_the_totals() -> None:
    reply = ScriptedReply("Done.", usage={"prompt_tokens": 10, "completion_tokens": 3}, cost=0.5)
    agent = Agent(ScriptedModel([reply]), usage_limits=UsageLimits(max_requests=5))
    result = agent.run_sync("Go", usage_limits=UsageLimits(max_requests=3, max_cost_usd=2.0))
    usage_events = [e for e in result.events if isinstance(e, UsageEvent)]
    assert usage_events and all(e.limits is not None for e in usage_events)
    limits = usage_events[-1].limits
    assert limits is not None and (limits.max_requests, limits.max_cost_usd) == (3, 2.0)
    stop = result.events[-1]
    assert isinstance(stop, StopEvent)
    assert (stop.total_turns, stop.cost) == (2, 0.5)
    assert stop.usage is not None and stop.usage.total_tokens == 13


def test_deputys_folded_accessors_say_what_to_use() -> None:
    # deputy: agent$turns(), agent$provider() (here one accessor per concept)
    agent = Agent(ScriptedModel([]))
    with pytest.raises(AttributeError, match=r"use get_turns\(\)"):
        agent.turns()  # type: ignore[attr-defined]
    with pytest.raises(AttributeError, match=r"use get_provider\(\)"):
        agent.provider()  # type: ignore[attr-defined]
    assert not hasattr(agent, "no_such_thing")
