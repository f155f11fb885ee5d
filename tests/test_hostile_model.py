"""A hostile (prompt-injected) model through the real engine: it must not freeze the server.

Issue #14: a catastrophic regular expression in ``grep_files``, tool arguments nested
thousands of levels deep, huge arguments quoted in errors, duplicate call ids, a flood
of approvals (one "stop the run" answer ends them), and slow sync tools (they queue in
their own bounded executor instead of starving the event loop's).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from deputy_shiny import Agent, ApprovalDecision, ApprovalRequest, Permissions, warm_up
from deputy_shiny.testing import FunctionModel, ScriptedModel, ScriptedReply, ScriptedToolCall
from deputy_shiny.tools import tool_grep_files, tool_read_file, tool_write_file
from tests.helpers import assert_consistent, local_tool, wait_until

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


async def _heartbeats(stop: asyncio.Event) -> list[float]:
    """When (``time.time()``) the event loop ran this heartbeat, every 10 ms it can."""
    beats: list[float] = []
    while not stop.is_set():
        await asyncio.sleep(0.01)
        beats.append(time.time())
    return beats


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
    heartbeat = asyncio.create_task(_heartbeats(stop))
    started = time.monotonic()
    result = await agent.run_async("search")
    elapsed = time.monotonic() - started
    stop.set()
    beats = await heartbeat
    start = next(e for e in result.events if e.type == "tool_start").timestamp
    end = next(e for e in result.events if e.type == "tool_end")
    assert end.is_error and "too expensive" in end.output
    assert result.stop_reason == "complete"
    # While the pattern ran out its budget the loop must have kept beating. Counting beats
    # in that window, not the longest gap, tells a freeze from a busy machine: a match
    # holding the GIL (concurrent=False) left 1-2 beats (measured), a healthy loop about
    # 300 at a load of 6-10 on 2 cores, where single gaps reached 0.28 s.
    during = [b for b in beats if start < b < end.timestamp]
    assert len(during) >= 20, f"the event loop ran {len(during)} times while the pattern ran"
    assert elapsed < 60  # the budget stops it: an unbounded match takes minutes


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
    # 10 MB, streamed in 64 KiB pieces: litellm spends about 0.5 ms a chunk (more for
    # its usage rebuild over all chunks), so the default 8-character chunks would take
    # minutes here, though nothing in the engine grows faster than the argument.
    huge = "a.txt" + "x" * 10_000_000
    call = ScriptedToolCall("read_file", {"path": huge})
    model = ScriptedModel([ScriptedReply(tool_calls=[call], chunk_size=65_536), "ok"])
    agent = Agent(model, tools=[tool_read_file()], working_dir=tmp_path)
    result = await agent.run_async("read it")
    end = next(e for e in result.events if e.type == "tool_end")
    assert end.is_error and len(end.output) < 5_000
    assert "characters of this error cut" in end.output
    sent = model.requests[1]["messages"][-1]["content"]
    assert len(sent) < 5_000  # the next request carries the capped text, not 10 MB


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


# --------------------------------------------------------------------------- approval floods


def _flood_model(count: int) -> ScriptedModel:
    calls = [
        ScriptedToolCall("write_file", {"path": f"f{i}.txt", "content": "x"}) for i in range(count)
    ]
    return ScriptedModel([ScriptedReply(tool_calls=calls), "never sent"])


async def test_one_stop_answer_ends_a_flood_of_approvals(tmp_path: Path) -> None:
    seen: list[ApprovalRequest] = []

    async def handler(request: ApprovalRequest) -> ApprovalDecision:
        seen.append(request)
        return ApprovalDecision.stop_run("too many")

    model = _flood_model(30)
    agent = Agent(
        model,
        tools=[tool_write_file()],
        working_dir=tmp_path,
        permissions=Permissions(approval_tools=("write_file",)),
        approval_handler=handler,
    )
    result = await agent.run_async("go")
    assert result.stop_reason == "interrupted"
    assert [r.calls_after for r in seen] == [29]  # asked once; 29 more were waiting
    assert not list(tmp_path.iterdir())
    assert len(model.requests) == 1  # no further request
    assert_consistent(agent)  # every call has a result ("not run" for the rest)
    ends = [e for e in result.events if e.type == "tool_end"]
    assert "The user stopped the run: too many" in ends[0].output


async def test_stopping_at_the_second_approval_runs_not_even_the_first(tmp_path: Path) -> None:
    answers = iter([ApprovalDecision.approve(), ApprovalDecision.stop_run()])

    async def handler(request: ApprovalRequest) -> ApprovalDecision:
        return next(answers)

    agent = Agent(
        _flood_model(3),
        tools=[tool_write_file()],
        working_dir=tmp_path,
        permissions=Permissions(approval_tools=("write_file",)),
        approval_handler=handler,
    )
    result = await agent.run_async("go")
    assert result.stop_reason == "interrupted"
    assert not list(tmp_path.iterdir())  # nothing of that response ran
    assert_consistent(agent)


def test_a_stop_decision_cannot_approve() -> None:
    with pytest.raises(ValueError, match="cannot approve"):
        ApprovalDecision(approved=True, stop=True)


# --------------------------------------------------------------------------- slow sync tools


async def test_slow_sync_tools_queue_in_their_own_pool_and_starve_nothing_else() -> None:
    from deputy_shiny import set_tool_threads, tool_threads

    release = threading.Event()
    lock = threading.Lock()
    running = peak = 0

    def slow(n: int) -> str:
        """Block until released."""
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        try:
            release.wait(10)
        finally:
            with lock:
                running -= 1
        return f"slow {n} done"

    def agent_for(n: int) -> Agent:
        call = ScriptedToolCall("slow", {"n": n})
        return Agent(
            ScriptedModel([ScriptedReply(tool_calls=[call]), "ok"]),
            tools=[local_tool(slow, name="slow")],
        )

    before = tool_threads()
    set_tool_threads(2)
    try:
        runs = [asyncio.ensure_future(agent_for(n).run_async("go")) for n in range(5)]
        await wait_until(lambda: peak >= 2, within=10)
        # The tool pool is full and three calls wait; asyncio's own pool is untouched.
        started = time.monotonic()
        assert await asyncio.to_thread(lambda: "free") == "free"
        assert time.monotonic() - started < 0.5
        await asyncio.sleep(0.1)
        assert peak == 2
        release.set()
        results = await asyncio.wait_for(asyncio.gather(*runs), 10)
    finally:
        release.set()
        set_tool_threads(before)
    assert [r.stop_reason for r in results] == ["complete"] * 5
    assert peak == 2


def test_the_tool_pool_size_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    from deputy_shiny import set_tool_threads
    from deputy_shiny.tools._tool_threads import _configured_size

    with pytest.raises(ValueError, match="at least 1 thread"):
        set_tool_threads(0)
    monkeypatch.setenv("DEPUTY_TOOL_THREADS", "many")
    with pytest.raises(ValueError, match="DEPUTY_TOOL_THREADS"):
        _configured_size()
    monkeypatch.setenv("DEPUTY_TOOL_THREADS", "3")
    assert _configured_size() == 3
