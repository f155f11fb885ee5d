"""Tool progress: ``ToolContext.progress`` in sync and async tools, the ``tool_progress``
events a run emits (latest wins, throttled, none after the call's end)."""

from __future__ import annotations

import asyncio
import threading
import time

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
