"""Tool progress: ``ToolContext.progress`` in sync and async tools, the ``tool_progress``
events a run emits (latest wins, throttled, none after the call's end), and the kit's
live card update."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from deputy_shiny import Agent
from deputy_shiny._engine.progress import PROGRESS_INTERVAL
from deputy_shiny.events import AgentEvent, ToolProgressEvent
from deputy_shiny.testing import ScriptedModel, ScriptedReply, ScriptedToolCall
from deputy_shiny.tools import ToolContext, current_tool_context

from .helpers import collect, local_tool, without_chunks

REPORTS = 150
WAIT = 10.0  # seconds a tool waits for the consumer (far longer than it takes)


class Crunch:
    """A sync tool (it runs in a worker thread) that reports, waits until the run's
    consumer has seen that report, reports every 2 ms, and waits for the last."""

    def __init__(self) -> None:
        self.seen: dict[str, threading.Event] = {
            "Starting": threading.Event(),
            f"Row {REPORTS} of {REPORTS}": threading.Event(),
        }
        self.reporting = 0.0  # seconds the reports took

    def crunch(self, rows: int) -> str:
        """Crunch rows, reporting as it goes."""
        ctx = current_tool_context()
        ctx.progress("Starting")
        assert self.seen["Starting"].wait(WAIT)
        started = time.monotonic()
        for done in range(1, rows + 1):
            ctx.progress(f"Row {done} of {rows}", fraction=done / rows)
            time.sleep(0.002)
        self.reporting = time.monotonic() - started
        assert self.seen[f"Row {rows} of {rows}"].wait(WAIT)
        return f"crunched {rows}"

    def saw(self, event: AgentEvent) -> None:
        if isinstance(event, ToolProgressEvent) and event.message in self.seen:
            self.seen[event.message].set()


def _progress(events: list[AgentEvent]) -> list[ToolProgressEvent]:
    return [e for e in events if isinstance(e, ToolProgressEvent)]


async def test_a_sync_tool_reports_progress_latest_wins_between_start_and_end() -> None:
    tool = Crunch()
    reply = ScriptedReply(tool_calls=[ScriptedToolCall("crunch", {"rows": REPORTS}, id="c1")])
    agent = Agent(ScriptedModel([reply, "Done."]), tools=[local_tool(tool.crunch)])
    events: list[AgentEvent] = []
    async for event in agent.run("go"):
        tool.saw(event)
        events.append(event)

    kinds = [k for k in without_chunks(events) if k != "tool_progress"]
    assert kinds[kinds.index("tool_start") : kinds.index("tool_end") + 1] == [
        "tool_start",
        "permission",
        "tool_end",
    ]
    types = [e.type for e in events]
    progress = _progress(events)
    first, last = types.index("tool_progress"), len(types) - 1 - types[::-1].index("tool_progress")
    assert types.index("permission") < first and last < types.index("tool_end")
    assert (progress[0].message, progress[0].fraction) == ("Starting", None)
    assert (progress[-1].message, progress[-1].fraction) == (f"Row {REPORTS} of {REPORTS}", 1.0)
    assert {(e.call_id, e.tool_name) for e in progress} == {("c1", "crunch")}
    # Throttled: one event per interval at most (plus the first and the last), not one
    # per report; a slow machine reports for longer and may get more.
    most = 3 + tool.reporting / PROGRESS_INTERVAL
    assert len(progress) <= most < REPORTS / 2, [e.message for e in progress]
    assert next(e for e in events if e.type == "tool_end").output == f"crunched {REPORTS}"


async def test_async_calls_report_concurrently_and_nothing_shows_after_the_end() -> None:
    kept: list[ToolContext] = []

    async def fetch(name: str) -> str:
        """Fetch, reporting halfway."""
        ctx = current_tool_context()
        kept.append(ctx)
        ctx.progress(f"{name}: half", 0.5)
        await asyncio.sleep(0.15 if name == "a" else 0.3)
        ctx.progress(f"{name}: last words", 2)  # clamped to 1; dropped: the call ends first
        return f"fetched {name}"

    reply = ScriptedReply(
        tool_calls=[
            ScriptedToolCall("fetch", {"name": "a"}, id="ca"),
            ScriptedToolCall("fetch", {"name": "b"}, id="cb"),
        ]
    )
    agent = Agent(ScriptedModel([reply, "Done."]), tools=[local_tool(fetch)])
    events = await collect(agent.run("go"))
    shown = [(e.call_id, e.message, e.fraction) for e in _progress(events)]
    assert shown == [("ca", "a: half", 0.5), ("cb", "b: half", 0.5)]
    ends = [e.call_id for e in events if e.type == "tool_end"]
    assert ends == ["ca", "cb"]
    kept[0].progress("after the run")  # the call is over: ignored, no error
    assert _progress(agent.last_run().events) == _progress(events)  # type: ignore[union-attr]


def test_progress_checks_its_arguments() -> None:
    ctx = current_tool_context()
    with pytest.raises(TypeError):
        ctx.progress(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        ctx.progress("x", "half")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        ctx.progress("x", float("nan"))
    ctx.progress("outside a run", 0.5)  # nothing to report to: no error


# ------------------------------------------------------------------ the kit's card


async def _rendered(with_progress: bool) -> tuple[list[tuple[str, Any]], str]:
    from deputy_shiny.shiny import render_events

    sent = asyncio.Event()

    async def stage(parts: int) -> str:
        """Work in parts, reporting each (an async tool)."""
        ctx = current_tool_context()
        for part in range(1, parts + 1):
            sent.clear()
            ctx.progress(f"Part {part} <i>of</i> {parts}", fraction=part / parts)
            if with_progress:  # each report goes out before the next
                await asyncio.wait_for(sent.wait(), WAIT)
            await asyncio.sleep(PROGRESS_INTERVAL)
        ctx.progress("wrapping up")  # dropped: the call ends before it is due
        return f"staged {parts}"

    reply = ScriptedReply(tool_calls=[ScriptedToolCall("stage", {"parts": 2}, id="call_9")])
    agent = Agent(ScriptedModel([reply, "Staged."]), tools=[local_tool(stage)])
    timeline: list[tuple[str, Any]] = []

    async def send(payload: dict[str, Any]) -> None:
        timeline.append(("progress", payload))
        sent.set()

    async for chunk in render_events(
        agent.run("go"), on_progress=send if with_progress else None, flush_interval=0.04
    ):
        blocks = getattr(chunk, "blocks", None)
        timeline.append(("block", blocks[0]) if blocks else ("text", chunk))
    run_id = agent.last_run().run_id  # type: ignore[union-attr]
    return timeline, f"{run_id[-12:]}-call_9"


async def test_the_kit_sends_a_running_cards_progress_then_its_result() -> None:
    timeline, card = await _rendered(with_progress=True)
    kinds = [(kind, item.get("type") if kind == "block" else None) for kind, item in timeline]
    assert kinds[:5] == [
        ("block", "tool_request"),
        ("progress", None),
        ("progress", None),
        ("progress", None),  # the card's end: the script forgets it
        ("block", "tool_result"),
    ]
    request = timeline[0][1]
    assert request["title"] == (
        f'stage()<span class="deputy-tool-progress" data-deputy-progress="{card}"></span>'
    )
    # The tool's text goes as data (the script shows it as text), the latest per card.
    assert [payload for kind, payload in timeline if kind == "progress"] == [
        {"card": card, "message": "Part 1 <i>of</i> 2", "fraction": 0.5},
        {"card": card, "message": "Part 2 <i>of</i> 2", "fraction": 1.0},
        {"card": card, "done": True},
    ]
    result = timeline[4][1]
    assert (result["request_id"], result["status"], "title" in result) == (card, "success", False)
    assert timeline[-1] == ("text", "Staged.")


async def test_without_a_sender_the_card_is_as_before() -> None:
    timeline, _ = await _rendered(with_progress=False)
    assert [kind for kind, _ in timeline] == ["block", "block", "text"]
    assert "title" not in timeline[0][1]


def test_a_card_id_from_the_model_stays_inside_its_attribute() -> None:
    from deputy_shiny.shiny._render import tool_request_block

    hostile = 'r-x"><img src=x onerror=alert(1)>'
    block: dict[str, Any] = dict(
        tool_request_block(hostile, "<b>t</b>", {}, progress=True).blocks[0]
    )
    title = block["title"]
    assert "<img" not in title and "<b>" not in title
    assert 'data-deputy-progress="r-x&quot;&gt;&lt;img src=x onerror=alert(1)&gt;"' in title
