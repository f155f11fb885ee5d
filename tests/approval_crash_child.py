"""Crash harness for durable approvals (run by tests/test_approval_crash.py).

``python -m tests.approval_crash_child <root> <store URL or -> ...`` imports deputy_shiny
and litellm once,
then forks one child process per step so each step is a fresh process that pays no
import cost. For every stage of an approval's life it:

1. forks a process that runs an agent until its call waits for approval, then is
   killed (SIGKILL) right after the record is written;
2. forks a process that resumes it (approve) and is killed at the stage: ``resuming``
   (in a PreToolUse hook, before the tool), ``executing`` (inside the tool, after it
   logged its line), ``continuing`` (in the model request after the tool) — or, for
   ``pending``, completes normally;
3. forks a process that tries to resume it again.

The tool appends one line to ``<stage>/effects.log`` per execution. A last scenario
forks two processes that resume the same approval at once. It prints one JSON summary
per root, as one JSON list (one interpreter serves every store).

With a store URL the approvals live in that ``SqlStore`` (SQLite or PostgreSQL) instead
of an ``approval_dir``; each process makes its own store (never one made before a fork).
A resumer killed there leaves its lease behind until it expires: the process that tries
again runs ``LEASE_TTL`` seconds later by its clock (a store clock moved forward), as a
worker arriving after the lease lapsed would.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from deputy_shiny import Agent, HookMatcher, tool, tool_annotations
from deputy_shiny.errors import ApprovalDecidedError
from deputy_shiny.models._litellm import get_litellm
from deputy_shiny.permissions import Permissions
from deputy_shiny.persistence.approval_records import LEASE_TTL
from deputy_shiny.testing import FunctionModel, ScriptedModel, ScriptedReply, ScriptedToolCall

STAGES = ("pending", "resuming", "executing", "continuing")


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


STORE: str | None = None  # the SqlStore URL, or None: files in an approval_dir


def _store(later: bool = False) -> Any:
    from deputy_shiny.persistence import SqlStore

    assert STORE is not None
    ahead = LEASE_TTL + 5.0 if later else 0.0
    return SqlStore(STORE, clock=lambda: time.time() + ahead)


def log_execution(log: Path, to: str) -> None:
    """The tool's one line per execution, on disk before anything else can happen."""
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, f"send:{to}:{os.getpid()}\n".encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def _agent(folder: Path, *, kill_at: str | None, slow: float = 0.0, later: bool = False) -> Agent:
    log = folder / "effects.log"

    def send(to: str) -> str:
        "Send a message."
        log_execution(log, to)
        if kill_at == "executing":
            _die()
        time.sleep(slow)
        return f"sent to {to}"

    def reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        if not any(m["role"] == "tool" for m in messages):
            return ScriptedReply(tool_calls=[ScriptedToolCall("send", {"to": "ops"}, id="c1")])
        if kill_at == "continuing":
            _die()
        return "Sent."

    def before_tool(tool_name: str, tool_input: dict[str, Any], context: Any) -> None:
        if kill_at == "resuming":
            _die()

    where: dict[str, Any] = (
        {"approval_dir": folder / "approvals"} if STORE is None else {"store": _store(later)}
    )
    return Agent(
        FunctionModel(reply),
        tools=[tool(send, annotations=tool_annotations(open_world_hint=False))],
        working_dir=folder,
        **where,
        agent_id="crash-agent",
        session_id="crash-session",
        permissions=Permissions(tool_allowlist=("send",), approval_tools=("send",)),
        hooks=[HookMatcher("PreToolUse", before_tool)],
    )


def _in_child(step: Any) -> int:
    """Run ``step()`` in a forked process; return how it ended (signal number, or -exit)."""
    pid = os.fork()
    if pid == 0:  # the child: never returns into the harness
        code = 0
        try:
            step()
        except BaseException as exc:  # reported through the exit code and a file
            print(f"child failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            code = 3
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return os.WTERMSIG(status)
    return -os.WEXITSTATUS(status)


def _pause(folder: Path) -> None:
    agent = _agent(folder, kill_at=None)
    result = agent.run_sync("Send the report")
    assert result.stop_reason == "approval_pending", result.stop_reason
    pending = agent.pending_approval()
    assert pending is not None
    (folder / "path.txt").write_text(pending.source.path)
    _die()  # killed right after the pending record was written


def _resume(
    folder: Path, kill_at: str | None, outcome: str, slow: float = 0.0, later: bool = False
) -> None:
    agent = _agent(folder, kill_at=kill_at, slow=slow, later=later)
    path = (folder / "path.txt").read_text()
    try:
        result = agent.resume_approval(path, "approve")
        text = f"ok:{result.stop_reason}"
    except ApprovalDecidedError as exc:
        text = f"decided:{exc.status}"
    (folder / outcome).write_text(text)


def _warm_up() -> None:
    """Pay litellm's import and first-request costs once, here, before any fork; then
    wait until no thread but this one is left (a fork copies only the calling thread)."""
    get_litellm()
    if STORE is not None:  # the SQL libraries too (the store itself is made after a fork)
        import aiosqlite  # noqa: F401
        import alembic.config
        import alembic.runtime.environment
        import alembic.runtime.migration
        import alembic.script  # noqa: F401
        import psycopg  # noqa: F401

        import deputy_shiny.persistence.sql_store  # noqa: F401
    # asyncio.run, not run_sync: its loop and executor thread end before we fork.
    asyncio.run(Agent(ScriptedModel(["warm"])).run_async("warm up"))
    deadline = time.monotonic() + 5
    while threading.active_count() > 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    if threading.active_count() > 1:
        raise RuntimeError(f"threads left before fork: {threading.enumerate()}")


def main(root: Path) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for stage in STAGES:
        folder = root / stage
        (folder / "approvals").mkdir(parents=True)
        kill_at = None if stage == "pending" else stage
        summary[stage] = {
            "pause": _in_child(lambda f=folder: _pause(f)),
            "resume": _in_child(lambda f=folder, k=kill_at: _resume(f, k, "first.txt")),
            "again": _in_child(lambda f=folder: _resume(f, None, "again.txt", later=True)),
        }
    # Two processes resume one approval at the same moment: one wins.
    folder = root / "race"
    (folder / "approvals").mkdir(parents=True)
    summary["race"] = {"pause": _in_child(lambda: _pause(folder))}
    pids = []
    for name in ("one.txt", "two.txt"):
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                _resume(folder, None, name, slow=0.3)
            except BaseException as exc:
                print(f"child failed: {type(exc).__name__}: {exc}", file=sys.stderr)
                code = 3
            os._exit(code)
        pids.append(pid)
    summary["race"]["resumers"] = [os.waitpid(pid, 0)[1] for pid in pids]
    return summary


if __name__ == "__main__":
    summaries = []
    pairs = sys.argv[1:]
    if any(url != "-" for url in pairs[1::2]):
        STORE = "warm"  # _warm_up imports the SQL libraries too
    _warm_up()
    for root, url in zip(pairs[::2], pairs[1::2], strict=True):
        STORE = None if url == "-" else url
        summaries.append(main(Path(root)))
    print(json.dumps(summaries))
