"""A hostile (prompt-injected) model through the real engine: it must not freeze the server.

Issue #14, so far: a catastrophic regular expression in ``grep_files``, and tool
arguments nested thousands of levels deep.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from deputy_shiny import Agent, Permissions, warm_up
from deputy_shiny.testing import FunctionModel, ScriptedModel, ScriptedReply, ScriptedToolCall
from deputy_shiny.tools import tool_grep_files, tool_read_file
from tests.helpers import assert_consistent, local_tool

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


# --------------------------------------------------------------------------- deep nesting


def _takes_anything(value: dict[str, Any]) -> str:
    """Accept any JSON object."""
    return "accepted"


@pytest.mark.parametrize("depth", [1_000, 5_000, 100_000])
async def test_deeply_nested_arguments_are_an_error_result_and_the_run_completes(
    depth: int,
) -> None:
    raw = '{"value": ' + "[" * depth + "]" * depth + "}"
    model = ScriptedModel(
        [ScriptedReply(tool_calls=[ScriptedToolCall("take", raw, id="deep")]), "understood"]
    )
    agent = Agent(model, tools=[local_tool(_takes_anything, name="take")])
    result = await agent.run_async("go")
    assert result.stop_reason == "complete" and result.response == "understood"
    end = next(e for e in result.events if e.type == "tool_end")
    assert end.is_error and "nested deeper than 100 levels" in end.output
    assert len(end.output) < 2_000  # the error quotes an excerpt, not the whole text
    assert_consistent(agent)
    answered = model.requests[1]["messages"][-1]
    assert answered["role"] == "tool" and answered["tool_call_id"] == "deep"


async def test_ordinary_nesting_is_still_accepted() -> None:
    raw = '{"value": {"a": ' + "[" * 50 + "1" + "]" * 50 + "}}"
    model = ScriptedModel([ScriptedReply(tool_calls=[ScriptedToolCall("take", raw)]), "ok"])
    agent = Agent(model, tools=[local_tool(_takes_anything, name="take")])
    result = await agent.run_async("go")
    end = next(e for e in result.events if e.type == "tool_end")
    assert (end.output, end.is_error) == ("accepted", False)


# --------------------------------------------------------------------------- oversized arguments


async def test_an_error_result_never_echoes_a_huge_argument_whole(tmp_path: Path) -> None:
    # 100 KB: far over the cap. (10 MB works the same, but the scripted provider takes
    # minutes to stream a tool call that large through litellm.)
    huge = "a.txt" + "x" * 100_000
    model = ScriptedModel(
        [ScriptedReply(tool_calls=[ScriptedToolCall("read_file", {"path": huge})]), "ok"]
    )
    agent = Agent(model, tools=[tool_read_file()], working_dir=tmp_path)
    result = await agent.run_async("read it")
    end = next(e for e in result.events if e.type == "tool_end")
    assert end.is_error and len(end.output) < 5_000
    assert "characters of this error cut" in end.output
    sent = model.requests[1]["messages"][-1]["content"]
    assert len(sent) < 5_000  # the next request carries the capped text, not 100 KB


# --------------------------------------------------------------------------- duplicate ids


def _shout(word: str) -> str:
    """Shout a word."""
    return word.upper()


async def test_duplicate_call_ids_in_one_response_each_get_their_own_result() -> None:
    model = ScriptedModel(
        [
            ScriptedReply(
                tool_calls=[
                    ScriptedToolCall("shout", {"word": "first"}, id="dup"),
                    ScriptedToolCall("shout", {"word": "second"}, id="dup"),
                ]
            ),
            "done",
        ]
    )
    agent = Agent(model, tools=[local_tool(_shout, name="shout")])
    result = await agent.run_async("go")
    assert result.stop_reason == "complete"
    assert_consistent(agent)
    messages = model.requests[1]["messages"]
    calls = next(m for m in messages if m.get("tool_calls"))["tool_calls"]
    ids = [c["id"] for c in calls]
    assert ids[0] == "dup" and len(set(ids)) == 2
    results = {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}
    by_word = {json.loads(c["function"]["arguments"])["word"]: c["id"] for c in calls}
    assert results[by_word["first"]] == "FIRST"
    assert results[by_word["second"]] == "SECOND"
