"""The run journal's cost on the run path: the same runs with the journal on and off.

Each run is a fresh Agent on one store (SQLite in a temp dir unless ``--url`` names
another, e.g. PostgreSQL) running a task the scripted model answers with a tool call
and then a streamed reply of ``--chunks`` chunks: the journal writes the run record,
the user's message, two responses, the call's decision, start and end, the results turn
and the end (9 records), and saves the streamed text once a second. With the journal
off the same agent runs with no journal (the store is still there: only the journal
differs). Runs alternate on/off so both see the same machine; the medians of the run
wall time and CPU time (``run_async``; the CPU of every thread, the store's
included) are printed, and last the CPU ratio on/off: what bounds how many sessions a
process holds (waiting for the store costs latency, not capacity).

No delay between chunks: this is the journal's cost against the engine's own work,
the worst case. Against a real model's pace (tens of ms per chunk) the ratio is
closer to 1.

Usage: .venv/bin/python benchmarks/run_journal.py [--runs N] [--chunks C] [--url URL]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from deputy_shiny import Agent, tool, tool_annotations
from deputy_shiny.models._litellm import get_litellm
from deputy_shiny.permissions import Permissions
from deputy_shiny.persistence import SqlStore
from deputy_shiny.testing import FunctionModel, ScriptedReply, ScriptedToolCall


def lookup(q: str) -> str:
    "Look something up."
    return f"found {q}"


def _model(chunks: int) -> FunctionModel:
    text = " ".join(f"w{i}" for i in range(chunks * 2))  # varied: litellm refuses repeats

    def reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        if not any(m["role"] == "tool" for m in messages):
            return ScriptedReply(tool_calls=[ScriptedToolCall("lookup", {"q": "x"})])
        return ScriptedReply(text=text, chunk_size=max(1, len(text) // chunks))

    return FunctionModel(reply)


async def _one(store: Any, model: FunctionModel, index: int, journal: bool) -> tuple[float, float]:
    agent = Agent(
        model,
        tools=[tool(lookup, annotations=tool_annotations(read_only_hint=True))],
        store=store,
        session_id=f"bench-{index}",
        enable_file_checkpointing=False,
        permissions=Permissions(tool_allowlist=("lookup",)),
    )
    if not journal:
        agent._approvals.runs._journals = None  # the same agent and store, no journal
    started, cpu = time.perf_counter(), time.process_time()
    result = await agent.run_async("Look x up")
    elapsed, used = time.perf_counter() - started, time.process_time() - cpu
    assert result.stop_reason == "complete", result.stop_reason
    return elapsed, used


async def main(runs: int = 200, chunks: int = 200, url: str | None = None) -> float:
    get_litellm()
    folder = Path(tempfile.mkdtemp())
    store = SqlStore(url or f"sqlite+aiosqlite:///{folder / 'store.db'}")
    model = _model(chunks)
    for index in range(3):  # warm up both paths (schemas, the store's connection)
        await _one(store, model, -1 - index, index % 2 == 0)
    on: list[tuple[float, float]] = []
    off: list[tuple[float, float]] = []
    for index in range(runs):
        journal = index % 2 == 0
        (on if journal else off).append(await _one(store, model, index, journal))
    await store.close()
    print(f"runs: {len(on)} with the journal, {len(off)} without; {chunks} chunks a reply")
    medians = {}
    for name, which, label in (("wall", 0, "wall time"), ("cpu", 1, "CPU time")):
        on_ms = statistics.median(r[which] for r in on) * 1000
        off_ms = statistics.median(r[which] for r in off) * 1000
        medians[name] = on_ms / off_ms
        print(f"median run {label}, journal on: {on_ms:.2f} ms, off: {off_ms:.2f} ms")
    print(f"ratio journal on/off, wall time: {medians['wall']:.3f}")
    # CPU is what bounds how many sessions a process holds (waiting for the store is not)
    print(f"ratio journal on/off, CPU time: {medians['cpu']:.3f}")
    return medians["cpu"]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--chunks", type=int, default=200)
    parser.add_argument("--url", default=None, help="a SQLAlchemy URL (default: SQLite)")
    args = parser.parse_args()
    asyncio.run(main(args.runs, args.chunks, args.url))
