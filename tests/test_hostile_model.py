"""A hostile (prompt-injected) model through the real engine: it must not freeze the server.

Issue #14, first part: a catastrophic regular expression in ``grep_files``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

from deputy_shiny import Agent, Permissions, warm_up
from deputy_shiny.testing import FunctionModel, ScriptedReply, ScriptedToolCall
from deputy_shiny.tools import tool_grep_files

# Backtracks without end in a backtracking engine (the backreference defeats the
# `regex` engine's own safeguards); the stdlib `re` blocks for minutes, holding the GIL.
CATASTROPHIC = r"(a|aa|aaa)+\1z"


def _workspace(tmp_path: Path) -> Path:
    (tmp_path / "bait.txt").write_text(("a" * 45 + "\n") * 50)
    return tmp_path


def _grep_model(pattern: str) -> FunctionModel:
    def reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        if messages[-1]["role"] == "tool":
            return "done"
        return ScriptedReply(tool_calls=[ScriptedToolCall("grep_files", {"pattern": pattern})])

    return FunctionModel(reply)


async def _largest_gap(stop: asyncio.Event) -> float:
    """The longest the event loop went without running this heartbeat."""
    largest, last = 0.0, time.monotonic()
    while not stop.is_set():
        await asyncio.sleep(0.01)
        now = time.monotonic()
        largest, last = max(largest, now - last), now
    return largest


async def test_a_catastrophic_pattern_is_an_error_result_and_the_loop_keeps_running(
    tmp_path: Path,
) -> None:
    agent = Agent(
        _grep_model(CATASTROPHIC),
        tools=[tool_grep_files()],
        working_dir=_workspace(tmp_path),
        permissions=Permissions(mode="readonly"),
    )
    warm_up()  # litellm's first import holds the GIL for seconds: not what is measured here
    stop = asyncio.Event()
    heartbeat = asyncio.create_task(_largest_gap(stop))
    started = time.monotonic()
    result = await agent.run_async("search")
    elapsed = time.monotonic() - started
    stop.set()
    gap = await heartbeat
    end = next(e for e in result.events if e.type == "tool_end")
    assert end.is_error and "too expensive" in end.output
    assert result.stop_reason == "complete"
    assert gap < 0.25, f"the event loop stalled for {gap:.2f} s"
    assert elapsed < 10


async def test_interrupt_from_another_thread_ends_the_run_quickly(tmp_path: Path) -> None:
    agent = Agent(
        _grep_model(CATASTROPHIC),
        tools=[tool_grep_files()],
        working_dir=_workspace(tmp_path),
        permissions=Permissions(mode="readonly"),
    )
    run = asyncio.create_task(agent.run_async("search"))
    await asyncio.sleep(0.5)  # the model asked for grep_files: a worker thread is matching
    assert agent.running and not run.done()
    sent = time.monotonic()
    threading.Thread(target=agent.interrupt).start()
    result = await run
    assert time.monotonic() - sent < 0.5  # well inside the 2 s pattern budget
    assert result.stop_reason == "interrupted"


async def test_an_ordinary_pattern_still_finds_its_lines(tmp_path: Path) -> None:
    (tmp_path / "notes.md").write_text("alpha\nbeta needle\n")
    agent = Agent(
        _grep_model(r"ne+dle"),
        tools=[tool_grep_files()],
        working_dir=tmp_path,
        permissions=Permissions(mode="readonly"),
    )
    result = await agent.run_async("search")
    end = next(e for e in result.events if e.type == "tool_end")
    assert (end.output, end.is_error) == ("notes.md:2: beta needle", False)
