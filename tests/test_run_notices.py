"""The ``turn``, ``content`` and ``warning`` events, and the ``Notification`` and
``ConfigChange`` hooks, through the real litellm path (scripted models, and a local
OpenAI-compatible wire for reasoning content)."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Iterator
from typing import Any

import pytest
from rich.console import Console

from deputy_shiny import Agent, ChatModel, HookMatcher, Permissions, UsageLimits
from deputy_shiny.cli._printer import EventPrinter
from deputy_shiny.context import ContextPolicy
from deputy_shiny.events import ContentEvent, TurnEvent, WarningEvent
from deputy_shiny.hooks import HookContext, HookPoint
from deputy_shiny.messages import ContentText, ContentThinking, Turn
from deputy_shiny.testing import FunctionModel, ScriptedModel, ScriptedReply, ScriptedToolCall

from .helpers import collect, local_tool, sse_chat_server, without_chunks
from .test_context import is_summary_request, varied_text, with_history


def echo(text: str) -> str:
    """Echo the text."""
    return f"echo: {text}"


def call(name: str, args: dict[str, Any], **kwargs: Any) -> ScriptedReply:
    return ScriptedReply(tool_calls=[ScriptedToolCall(name, args, id="call_1")], **kwargs)


def recorder(event: HookPoint, seen: list[HookContext]) -> HookMatcher:
    return HookMatcher(event, seen.append)


IDS = {"agent_id": "a", "session_id": "s", "run_id": "r"}


# ------------------------------------------------------------------ turn


async def test_a_turn_event_follows_each_model_response_with_its_usage() -> None:
    usage = {"prompt_tokens": 30, "completion_tokens": 7}
    model = ScriptedModel(
        [call("echo", {"text": "hi"}, usage=usage, cost=0.01), ScriptedReply("Done.", cost=0.02)]
    )
    agent = Agent(model, tools=[local_tool(echo)])
    events = await collect(agent.run("Use echo"))

    turns = [e for e in events if isinstance(e, TurnEvent)]
    assert [t.turn_number for t in turns] == [1, 2]
    # Each is the assistant turn as the conversation holds it, after its request_end.
    assistant = [t for t in agent.get_turns() if t.role == "assistant"]
    assert [t.turn for t in turns] == assistant
    assert turns[0].turn.tool_requests[0].name == "echo" and turns[1].turn.text == "Done."
    assert turns[0].turn.usage is not None
    assert (turns[0].turn.usage.input_tokens, turns[0].turn.usage.output_tokens) == (30, 7)
    assert [t.turn.usage.cost for t in turns if t.turn.usage] == [0.01, 0.02]
    sequence = without_chunks(events)
    for index in [i for i, kind in enumerate(sequence) if kind == "turn"]:
        assert sequence[index - 1 : index + 2] == ["request_end", "turn", "usage"]
    # The result keeps them; the text streams are unchanged by them.
    assert [e.type for e in agent.last_run().events].count("turn") == 2  # type: ignore[union-attr]
    again = Agent(ScriptedModel(["Plain text."]))
    assert "".join([c async for c in again.stream_async("Hi")]) == "Plain text."


# ------------------------------------------------------------------ content


def _reasoning_server() -> Iterator[str]:
    """An OpenAI-compatible server whose reply streams reasoning, then text."""
    deltas: list[dict[str, Any]] = [
        {"reasoning_content": "First <b>check</b> "},
        {"reasoning_content": "the file."},
        {"content": "It is "},
        {"content": "fine."},
    ]
    usage = {"prompt_tokens": 11, "completion_tokens": 9, "total_tokens": 20}
    yield from sse_chat_server(deltas, usage)


@pytest.fixture
def reasoning_wire() -> Iterator[str]:
    yield from _reasoning_server()


async def test_reasoning_from_the_wire_is_a_content_event_before_text_complete(
    reasoning_wire: str,
) -> None:
    from deputy_shiny.shiny._render import render_events

    model = ChatModel(model="openai/x", api_base=reasoning_wire, api_key="sk-test")
    agent = Agent(model)
    events = await collect(agent.run("Is it fine?"))

    contents = [e for e in events if isinstance(e, ContentEvent)]
    assert [(c.content_type, c.content) for c in contents] == [
        ("thinking", ContentThinking(thinking="First <b>check</b> the file."))
    ]
    sequence = without_chunks(events)
    assert sequence[sequence.index("content") :][:4] == [
        "content",
        "text_complete",
        "request_end",
        "turn",
    ]
    assert agent.last_run().response == "It is fine."  # type: ignore[union-attr]

    # The kit shows no reasoning (and no turn), only the reply; the CLI prints none.
    async def replay() -> Any:
        for event in events:
            yield event

    chunks = [c async for c in render_events(replay())]
    assert "".join(c for c in chunks if isinstance(c, str)) == "It is fine."
    out = io.StringIO()
    printer = EventPrinter(Console(file=out, force_terminal=False, width=80))
    for event in events:
        printer.handle(event)
    assert "check" not in out.getvalue() and "It is fine." in out.getvalue()


# ------------------------------------------------------------------ warning


async def test_nearing_the_cost_limit_warns_once_and_notifies() -> None:
    seen: list[HookContext] = []
    replies = [call("echo", {"text": str(n)}, cost=c) for n, c in enumerate((0.05, 0.042, 0.001))]
    model = ScriptedModel([*replies, ScriptedReply("Done.", cost=0.001)])
    agent = Agent(
        model,
        tools=[local_tool(echo)],
        usage_limits=UsageLimits(max_cost_usd=0.1),
        hooks=[recorder("Notification", seen)],
    )
    events = await collect(agent.run("Spend"))

    warnings = [e for e in events if isinstance(e, WarningEvent)]
    assert [(w.code, w.message) for w in warnings] == [
        (
            "cost_limit_warning",
            "The run has spent $0.0920 of its cost limit of $0.1000; it stops when it reaches it.",
        )
    ]
    # After the second request's usage (0.05 + 0.042 >= 90% of 0.1), before its tools.
    sequence = without_chunks(events)
    second_turn = [i for i, kind in enumerate(sequence) if kind == "turn"][1]
    assert sequence[second_turn + 1 : second_turn + 4] == ["usage", "warning", "hook"]
    assert events[-1].stop_reason == "complete"
    [notice] = seen
    assert {k: notice.details[k] for k in ("code", "level", "limit")} == {
        "code": "cost_limit_warning",
        "level": "warning",
        "limit": 0.1,
    }
    assert notice.details["message"] == warnings[0].message
    assert notice.details["usage"].cost == pytest.approx(0.092)
    assert (notice.run_id, notice.agent_id) == (events[0].run_id, agent.agent_id)


async def test_a_survived_compaction_failure_is_a_warning() -> None:
    def broken(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        if is_summary_request(messages):
            return RuntimeError("summaries are down")
        return varied_text(120, len(messages))

    seen: list[HookContext] = []
    agent = with_history(
        Agent(
            FunctionModel(broken),
            context_policy=ContextPolicy(max_tokens=600, fallback="text"),
            hooks=[recorder("Notification", seen)],
        )
    )
    events = await collect(agent.run("Next"))

    kinds = without_chunks(events)
    at = kinds.index("compaction_error")
    assert kinds[at + 1 : at + 3] == ["warning", "hook"]
    warning = next(e for e in events if isinstance(e, WarningEvent))
    assert warning.code == "compact_fallback" and "summaries are down" in warning.details
    assert [c.details["code"] for c in seen] == ["compact_fallback"]
    assert "summaries are down" in seen[0].details["error"]
    assert events[-1].stop_reason == "complete"


def test_a_warning_is_a_muted_note_in_the_chat_and_a_line_in_the_terminal() -> None:
    from deputy_shiny.shiny._render import _Cards, _event_chunks

    warning = WarningEvent(message="Costs near <img src=x onerror=alert(1)> *limit*", **IDS)
    [note] = _event_chunks(warning, {}, _Cards())
    assert isinstance(note, str) and note.startswith("\n\n> Warning")
    # Inert text: every markup character escaped (note_chunk, as every note).
    assert "\\<img src\\=x" in note and "\\*limit\\*" in note
    assert note.count("<") == note.count("\\<")
    for quiet in (
        TurnEvent(
            turn=Turn(role="assistant", contents=[ContentText(text="x")]), turn_number=1, **IDS
        ),
        ContentEvent(content=ContentThinking(thinking="<b>"), content_type="thinking", **IDS),
    ):
        assert _event_chunks(quiet, {}, _Cards()) == []

    out = io.StringIO()
    EventPrinter(Console(file=out, force_terminal=False, width=80)).handle(
        WarningEvent(message="[bold]near\x1b[31m the limit", **IDS)
    )
    assert out.getvalue() == "Warning: [bold]near the limit\n"


# ------------------------------------------------------------------ Notification


async def test_a_denied_call_fires_notification_with_the_call() -> None:
    seen: list[HookContext] = []
    model = ScriptedModel([call("echo", {"text": "hi"}), "Denied, so I stop."])
    agent = Agent(
        model,
        tools=[local_tool(echo)],
        permissions=Permissions(mode="readonly"),
        hooks=[recorder("Notification", seen)],
    )
    events = await collect(agent.run("Use echo"))

    kinds = without_chunks(events)
    at = kinds.index("permission")
    assert kinds[at : at + 3] == ["permission", "hook", "tool_end"]
    denial = next(e for e in events if e.type == "permission")
    assert denial.decision == "deny"
    [notice] = seen
    assert notice.event == "Notification" and notice.call_id == "call_1"
    assert notice.details == {
        "message": denial.reason,
        "level": "warning",
        "code": "permission_denied",
        "tool_name": "echo",
        "tool_input": {"text": "hi"},
    }
    hook = next(e for e in events if e.type == "hook")
    assert hook.hook_event == "Notification"


async def test_a_limit_that_stops_the_run_fires_notification_before_stop() -> None:
    order: list[str] = []
    seen: list[HookContext] = []

    def notice(context: HookContext) -> None:
        order.append("Notification")
        seen.append(context)

    model = ScriptedModel([call("echo", {"text": "hi"}), "never sent"])
    agent = Agent(
        model,
        tools=[local_tool(echo)],
        usage_limits=UsageLimits(max_requests=1),
        hooks=[
            HookMatcher("Notification", notice),
            HookMatcher("Stop", lambda context: order.append("Stop")),
        ],
    )
    events = await collect(agent.run("Use echo"))

    assert events[-1].stop_reason == "request_limit"
    assert order == ["Notification", "Stop"]
    [context] = seen
    assert context.details["code"] == "request_limit"
    assert context.details["message"] == events[-1].message
    assert context.details["limit"] == 1 and context.details["usage"].requests == 1
    assert not any(isinstance(e, WarningEvent) for e in events)  # the stop says it


async def test_a_failing_notification_hook_never_breaks_the_run() -> None:
    def broken(context: HookContext) -> None:
        raise RuntimeError("the pager is down")

    model = ScriptedModel([call("echo", {"text": "hi"}), "Fine."])
    agent = Agent(
        model,
        tools=[local_tool(echo)],
        permissions=Permissions(mode="readonly"),
        hooks=[HookMatcher("Notification", broken)],
    )
    result = await agent.run_async("Use echo")
    assert result.stop_reason == "complete" and result.response == "Fine."
    hook = next(e for e in result.events if e.type == "hook")
    assert "the pager is down" in hook.result["error"]


# ------------------------------------------------------------------ ConfigChange


def test_config_changes_fire_at_once_outside_an_event_loop() -> None:
    seen: list[tuple[str, dict[str, Any]]] = []
    agent = Agent(
        ScriptedModel([]),
        run_context={"user_id": "u1"},
        hooks=[
            HookMatcher("ConfigChange", lambda c: seen.append((c.event, dict(c.details)))),
            HookMatcher("Notification", lambda c: seen.append((c.event, dict(c.details)))),
        ],
    )
    agent.set_permission_mode("standard")  # the same mode: no change, no hook
    assert seen == []
    agent.set_permission_mode("readonly")
    agent.set_model("openai/gpt-4.1-mini")
    old_model = seen[-1][1]["old_value"] if seen else None
    assert seen == [
        (
            "ConfigChange",
            {"key": "permission_mode", "old_value": "standard", "new_value": "readonly"},
        ),
        (
            "Notification",
            {
                "message": "Permission mode changed from standard to readonly.",
                "level": "info",
                "code": "permission_mode_changed",
                "previous_mode": "standard",
                "permission_mode": "readonly",
            },
        ),
        (
            "ConfigChange",
            {"key": "model", "old_value": old_model, "new_value": "openai/gpt-4.1-mini"},
        ),
    ]
    assert old_model is not None and old_model != "openai/gpt-4.1-mini"


async def test_a_config_change_inside_a_loop_never_waits_for_its_hooks() -> None:
    release = asyncio.Event()
    seen: list[HookContext] = []

    async def slow(context: HookContext) -> None:
        await release.wait()
        seen.append(context)

    agent = Agent(ScriptedModel([]), hooks=[HookMatcher("ConfigChange", slow)])
    agent.set_permission_mode("readonly")  # returns while the hook still waits
    assert seen == [] and agent.get_permission_mode() == "readonly"
    release.set()
    await asyncio.wait_for(agent._hook_firer.settle(), 5)
    [context] = seen
    assert (context.details["key"], context.details["new_value"]) == ("permission_mode", "readonly")
    assert context.agent_id == agent.agent_id and context.session_id == agent.session_id
