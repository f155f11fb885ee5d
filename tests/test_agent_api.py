"""The Agent's public surface: construction, conversation, registry, adapters."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from deputy_shiny import (
    Agent,
    ConfigurationError,
    ContentText,
    ContentThinking,
    ContentToolRequest,
    ContentToolResult,
    DeputyError,
    Turn,
    UsageLimits,
    tool,
)
from deputy_shiny.errors import (
    AgentBusyError,
    InvalidLimitError,
    InvalidModelError,
    InvalidToolError,
    RunContextError,
    SyncInAsyncError,
    ToolNameConflictError,
)
from deputy_shiny.testing import ScriptedModel, ScriptedReply, ScriptedToolCall

from .helpers import local_tool, wait_until


def shout(text: str) -> str:
    """Uppercase the text."""
    return text.upper()


def whisper(text: str) -> str:
    """Lowercase the text."""
    return text.lower()


# ------------------------------------------------------------------ construction


@pytest.mark.parametrize("bad", ["", "has space/model", "/leading", 42, None, object()])
def test_bad_models_are_typed_errors(bad: object) -> None:
    with pytest.raises(InvalidModelError):
        Agent(bad)  # type: ignore[arg-type]


def test_model_string_shape_only_is_checked_at_construction() -> None:
    agent = Agent("someprovider/some-model")  # unknown provider: found at first request
    assert (agent.model.provider, agent.model.name) == ("someprovider", "some-model")
    assert agent.get_model() == "someprovider/some-model"


@pytest.mark.parametrize(
    "limits",
    [
        {"max_requests": -1},
        {"max_requests": "10"},
        {"max_cost_usd": float("inf")},
        {"max_tool_calls": 1.5},
    ],
)
def test_bad_limits_are_typed_errors(limits: dict) -> None:
    with pytest.raises(InvalidLimitError):
        UsageLimits(**limits)


def test_usage_limits_must_be_usage_limits() -> None:
    with pytest.raises(InvalidLimitError):
        Agent(ScriptedModel([]), usage_limits={"max_requests": 3})  # type: ignore[arg-type]


def test_non_tools_are_rejected_with_a_hint() -> None:
    with pytest.raises(InvalidToolError, match="tool\\("):
        Agent(ScriptedModel([]), tools=[shout])  # type: ignore[list-item]
    with pytest.raises(InvalidToolError):
        tool(42)  # type: ignore[call-overload]


def test_working_dir_must_exist(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError):
        Agent(ScriptedModel([]), working_dir=tmp_path / "missing")
    assert Agent(ScriptedModel([]), working_dir=tmp_path).working_dir == tmp_path.resolve()


def test_ids_are_generated_and_read_only() -> None:
    agent = Agent(ScriptedModel([]), session_id="s-1", agent_name="helper")
    assert agent.session_id == "s-1"
    assert agent.agent_id.startswith("agent_")
    assert agent.agent_name == "helper"
    with pytest.raises(AttributeError):
        agent.session_id = "other"  # type: ignore[misc, assignment]
    with pytest.raises(AttributeError):
        agent.agent_id = "other"  # type: ignore[misc]


@pytest.mark.parametrize(
    "key",
    [
        "api_key",
        "API-KEY",
        "api.key",
        "client secret",
        "apiSecret",
        "password",
        "access-token",
        "github_token",
    ],
)
def test_credential_like_run_context_keys_are_rejected(key: str) -> None:
    with pytest.raises(RunContextError) as caught:
        Agent(ScriptedModel([]), run_context={key: "hunter2-value"})
    assert "hunter2-value" not in str(caught.value)


def test_run_context_accepts_harmless_keys_and_rejects_non_json() -> None:
    Agent(ScriptedModel([]), run_context={"secretion_id": "x", "tags": ["a", 1, None]})
    with pytest.raises(RunContextError):
        Agent(ScriptedModel([]), run_context={"when": object()})
    with pytest.raises(RunContextError):
        Agent(ScriptedModel([]), run_context={"nested": {"password": "x"}})


def test_run_cannot_change_agent_id_fields() -> None:
    agent = Agent(ScriptedModel(["ok"]), run_context={"user_id": "u1"})
    with pytest.raises(RunContextError, match="user_id"):
        agent.run("go", run_context={"user_id": "u2"})
    with pytest.raises(RunContextError):
        agent.run("go", run_context={"token": "t"})
    assert agent.run_sync("go", run_context={"user_id": "u1"}).stop_reason == "complete"


def test_all_errors_share_one_base() -> None:
    for error in (InvalidModelError, InvalidLimitError, InvalidToolError, RunContextError):
        assert issubclass(error, DeputyError)


# ------------------------------------------------------------------ sync wrappers


def test_sync_wrappers_work_from_plain_code() -> None:
    agent = Agent(ScriptedModel(["one", "two", ScriptedReply(text="three four", chunk_size=3)]))
    assert agent.run_sync("a").response == "one"
    assert agent.chat("b") == "two"
    assert list(agent.stream("c")) == ["thr", "ee ", "fou", "r"]
    assert agent.usage().requests == 3


async def test_sync_wrappers_refuse_a_running_loop() -> None:
    agent = Agent(ScriptedModel(["x"]))
    with pytest.raises(SyncInAsyncError, match="run_async"):
        agent.run_sync("go")
    with pytest.raises(SyncInAsyncError):
        agent.chat("go")
    with pytest.raises(SyncInAsyncError):
        agent.stream("go")


# ------------------------------------------------------------------ adapters


async def test_stream_async_text_and_content() -> None:
    model = ScriptedModel(
        [
            ScriptedReply(
                text="Look", tool_calls=[ScriptedToolCall("shout", {"text": "hi"}, id="c1")]
            ),
            ScriptedReply(text="Done!", chunk_size=2),
        ]
    )
    agent = Agent(model, tools=[local_tool(shout)])
    items = [item async for item in agent.stream_async("go", stream="content")]
    assert items == [
        ContentText(text="Look"),
        ContentToolRequest(id="c1", name="shout", arguments={"text": "hi"}),
        ContentToolResult(call_id="c1", name="shout", output="HI"),
        ContentText(text="Do"),
        ContentText(text="ne"),
        ContentText(text="!"),
    ]
    agent2 = Agent(ScriptedModel([ScriptedReply(text="abcdef", chunk_size=4)]))
    assert [c async for c in agent2.stream_async("x")] == ["abcd", "ef"]


async def test_stream_async_raises_provider_errors_after_the_stream() -> None:
    from deputy_shiny import ProviderError
    from deputy_shiny.testing import ProviderFailure

    agent = Agent(ScriptedModel([ProviderFailure(500)]))
    with pytest.raises(ProviderError):
        _ = [c async for c in agent.stream_async("x")]


async def test_chat_async_and_structured() -> None:
    agent = Agent(ScriptedModel(["hello", "ignored", "[1, 2, 3]"]))
    assert await agent.chat_async("hi") == "hello"
    assert await agent.chat_structured_async("numbers", type=list[int]) == [1, 2, 3]
    assert agent.last_run().structured_output == [1, 2, 3]


# The run keywords are declared once (RunKeywords); each adapter takes them as
# ``**kwargs: Unpack[RunKeywords]``. A wrong keyword is a mypy error (the ignores below
# are checked: warn_unused_ignores is on for this module) and a TypeError at run time.

WRONG_KEYWORD = "Unexpected keyword argument 'max_request' for a run.*RunKeywords"


def test_a_wrong_run_keyword_is_a_type_error_in_the_blocking_adapters() -> None:
    agent = Agent(ScriptedModel(["unused"]))
    with pytest.raises(TypeError, match=WRONG_KEYWORD):
        agent.run_sync("go", max_request=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=WRONG_KEYWORD):
        agent.chat("go", max_request=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=WRONG_KEYWORD):
        agent.chat_structured("go", type=int, max_request=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=WRONG_KEYWORD):
        agent.stream("go", max_request=1)  # type: ignore[call-arg]
    assert agent.last_run() is None and agent.usage().requests == 0


async def test_a_wrong_run_keyword_is_a_type_error_in_the_async_adapters() -> None:
    agent = Agent(ScriptedModel(["done"]))
    with pytest.raises(TypeError, match=WRONG_KEYWORD):
        agent.run("go", max_request=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=WRONG_KEYWORD):
        await agent.run_async("go", max_request=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=WRONG_KEYWORD):
        await agent.chat_async("go", max_request=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=WRONG_KEYWORD):
        await agent.chat_structured_async("go", type=int, max_request=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=WRONG_KEYWORD):
        agent.stream_async("go", max_request=1)  # type: ignore[call-overload]
    # include_partial_messages belongs to run() alone: a stream needs its text events.
    with pytest.raises(TypeError, match="include_partial_messages"):
        agent.stream_async("go", include_partial_messages=False)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="include_partial_messages"):
        await agent.chat_async("go", include_partial_messages=False)  # type: ignore[call-arg]
    assert agent.last_run() is None and agent.usage().requests == 0
    # The right keywords reach the run, from every adapter alike.
    limits = UsageLimits(max_requests=1)
    assert await agent.chat_async("go", usage_limits=limits, tool_mode="sequential") == "done"
    result = agent.last_run()
    assert result is not None and result.stop_reason == "complete"


# ------------------------------------------------------------------ conversation


def test_conversation_api() -> None:
    agent = Agent(ScriptedModel(["reply"]), system_prompt="Be kind.")
    agent.add_turn("2+2?", "4")
    assert [t.role for t in agent.get_turns()] == ["user", "assistant"]
    assert agent.get_turns(include_system_prompt=True)[0].text == "Be kind."
    assert agent.last_turn().text == "4"
    assert agent.last_turn("user").text == "2+2?"
    assert agent.last_turn("system").text == "Be kind."
    assert agent.get_context_turns() == agent.get_turns()

    agent.set_system_prompt("Be terse.")
    assert agent.get_system_prompt() == "Be terse."
    agent.chat("again")
    assert agent.get_turns()[-1].text == "reply"

    agent.set_turns([])
    assert agent.get_turns() == []
    with pytest.raises(ConfigurationError):
        agent.set_turns(["not a turn"])  # type: ignore[list-item]


async def test_the_model_cannot_change_during_a_run_but_the_turns_can() -> None:
    agent = Agent(ScriptedModel([ScriptedReply(text="slow " * 30, delay=0.01)]))
    task = asyncio.create_task(agent.run_async("go"))
    await wait_until(lambda: agent.running)

    with pytest.raises(AgentBusyError):
        agent.set_model("openai/gpt-4.1-mini")
    # As deputy's: set_turns during a run; the run takes them as it ends here (no
    # request after this one), never mid-response.
    agent.set_turns([])
    result = await task
    assert result.stop_reason == "complete" and agent.get_turns() == []


def test_set_model_across_providers_drops_thinking() -> None:
    agent = Agent(ScriptedModel([]))
    thought = Turn(
        role="assistant",
        contents=[ContentThinking(thinking="hmm", signature="sig"), ContentText(text="ok")],
    )
    agent.add_turn("q", thought)
    agent.set_model(ScriptedModel([]))  # another provider name: thinking goes
    assert agent.get_turns()[-1].contents == [ContentText(text="ok")]
    agent.set_model("openai/gpt-4.1-mini")
    assert agent.model.provider == "openai"


def test_set_model_keeps_history_and_tools_and_the_new_model_is_used() -> None:
    first = ScriptedModel(["from first"])
    second = ScriptedModel(["from second"])
    agent = Agent(first, tools=[local_tool(shout)])
    agent.chat("one")
    agent.set_model(second)
    assert agent.chat("two") == "from second"
    sent = second.requests[0]
    assert [m["role"] for m in sent["messages"]] == ["user", "assistant", "user"]
    assert sent["tools"][0]["function"]["name"] == "shout"


# ------------------------------------------------------------------ tool registry


def test_register_tools_checks_the_whole_batch_first() -> None:
    agent = Agent(ScriptedModel([]), tools=[local_tool(shout)])
    with pytest.raises(ToolNameConflictError):
        agent.register_tool(local_tool(shout))
    agent.register_tool(local_tool(shout, description="Shout louder."), replace=True)
    assert agent.get_tools()["shout"].description == "Shout louder."

    with pytest.raises(ToolNameConflictError):
        agent.register_tools([local_tool(whisper), local_tool(whisper)], replace=True)
    with pytest.raises(InvalidToolError):
        agent.register_tools([local_tool(whisper), "junk"])  # type: ignore[list-item]
    assert sorted(agent.get_tools()) == ["shout"]  # nothing from the failed batches

    agent.set_tools([local_tool(whisper)])
    assert sorted(agent.get_tools()) == ["whisper"]
    with pytest.raises(InvalidToolError):
        agent.set_tools([local_tool(shout), 3])  # type: ignore[list-item]
    assert sorted(agent.get_tools()) == ["whisper"]


def test_registered_tools_reach_the_model() -> None:
    model = ScriptedModel(["a", "b"])
    agent = Agent(model)
    agent.chat("no tools")
    agent.register_tool(local_tool(shout))
    agent.chat("with tools")
    assert not model.requests[0]["tools"]
    assert [t["function"]["name"] for t in model.requests[1]["tools"]] == ["shout"]


def test_tool_stays_callable() -> None:
    assert local_tool(shout)("hello") == "HELLO"


def test_bad_output_type_fails_when_the_run_is_requested() -> None:
    agent = Agent(ScriptedModel(["never used"]))
    with pytest.raises(ConfigurationError, match="JSON schema"):
        agent.run("go", type=object())
    assert agent.usage().requests == 0


def test_demo_model_is_honest_through_an_agent() -> None:
    agent = Agent("deputy/demo")
    first = agent.chat("Hello")
    assert "scripted replies, not an LLM" in first
    assert "DEPUTY_MODEL" in first
    second = agent.chat("What is the weather in Lisbon?")
    assert "Lisbon" in second and second != first
    assert agent.cost().complete
