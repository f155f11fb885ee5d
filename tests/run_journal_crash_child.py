"""Crash harness for the run journal (run by tests/test_run_journal_crash.py).

``python -m tests.run_journal_crash_child <root> <store URL> ...`` imports deputy_shiny
and litellm once, then for each kill point forks a process that runs an agent on the
store and SIGKILLs itself at that point, then forks another that finds the interrupted
run and resumes it (with a store whose clock is past the dead run's lease, as a process
arriving after the lease lapsed), then a third that tries to resume it again. Every
tool appends a line to ``<point>/ledger`` per execution. The resumer writes what it saw
to ``<point>/resumed.json``. It prints one JSON summary (the exit of each process) per
root, as one JSON list.

Kill points: ``streaming`` (mid-reply, after part of it was saved), ``between`` (after
the first of two calls of one response ended, before the second started), ``tool``
(inside a tool that is not idempotent), ``idempotent`` (inside one that is),
``approval`` (while a call waits for a durable approval), ``compaction`` (in the summary
request) and ``subagent`` (inside a tool of a subagent's run).
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

from deputy_shiny import Agent, tool, tool_annotations
from deputy_shiny._engine.compaction import SUMMARY_INSTRUCTIONS
from deputy_shiny.context import ContextPolicy
from deputy_shiny.delegation import AgentDefinition, LeadAgent
from deputy_shiny.errors import ApprovalDecidedError, RunResumeError
from deputy_shiny.models._litellm import get_litellm
from deputy_shiny.permissions import Permissions
from deputy_shiny.persistence import run_journal
from deputy_shiny.persistence.run_journal import StoreRunJournal
from deputy_shiny.testing import FunctionModel, ScriptedModel, ScriptedReply, ScriptedToolCall

POINTS = ("streaming", "between", "tool", "idempotent", "approval", "compaction", "subagent")
STORE = ""
LONG = " ".join(f"word{i}" for i in range(120))  # varied text: litellm refuses repeats


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _store(later: bool = False) -> Any:
    from deputy_shiny.persistence import SqlStore

    ahead = run_journal.LEASE_TTL + 5.0 if later else 0.0
    return SqlStore(STORE, clock=lambda: time.time() + ahead)


def _log(ledger: Path, line: str) -> None:
    fd = os.open(ledger, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, f"{line}\n".encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def _tools(folder: Path, point: str, dying: bool) -> list[Any]:
    ledger = folder / "ledger"

    def send(to: str) -> str:
        "Send a message (not idempotent)."
        _log(ledger, f"send:{to}")
        if dying and point in ("tool", "subagent"):
            _die()
        return f"sent to {to}"

    def lookup(q: str) -> str:
        "Look something up (idempotent)."
        _log(ledger, f"lookup:{q}")
        if dying and point == "idempotent":
            _die()
        return f"found {q}"

    closed = tool_annotations(open_world_hint=False)
    return [
        tool(send, annotations=closed),
        tool(lookup, annotations=tool_annotations(open_world_hint=False, idempotent_hint=True)),
    ]


def _reply(point: str, dying: bool, seen: list[str]) -> Any:
    def reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        system = messages[0]["content"] if messages and messages[0]["role"] == "system" else ""
        if system == SUMMARY_INSTRUCTIONS:
            if dying:
                _die()
            return "Summary: a message was sent."
        results = [m["content"] for m in messages if m["role"] == "tool"]
        seen.extend(str(r) for r in results)
        user = next(m["content"] for m in messages if m["role"] == "user")
        if "worker task" in str(user):  # the subagent's run
            if not results:
                return ScriptedReply(tool_calls=[ScriptedToolCall("send", {"to": "sub"})])
            return "Worker done."
        if point == "streaming":
            return ScriptedReply(text=LONG, chunk_size=6, delay=0.01)
        if not results:
            return ScriptedReply(tool_calls=_calls(point))
        if point == "compaction" and "sent to b" not in results:  # a second round: it compacts
            return ScriptedReply(tool_calls=[ScriptedToolCall("send", {"to": "b"}, id="c2")])
        return "All done."

    return reply


def _calls(point: str) -> list[ScriptedToolCall]:
    if point == "between":
        return [
            ScriptedToolCall("send", {"to": "a"}, id="c1"),
            ScriptedToolCall("send", {"to": "b"}, id="c2"),
        ]
    if point == "idempotent":
        return [ScriptedToolCall("lookup", {"q": "x"}, id="c1")]
    if point == "subagent":
        return [ScriptedToolCall("delegate", {"agent": "worker", "task": "worker task"}, id="c1")]
    if point == "compaction":
        return [ScriptedToolCall("send", {"to": f"a {LONG}"}, id="c1")]
    return [ScriptedToolCall("send", {"to": "ops"}, id="c1")]


def _agent(folder: Path, point: str, *, dying: bool, later: bool = False) -> Any:
    seen: list[str] = []
    options: dict[str, Any] = {
        "tools": _tools(folder, point, dying),
        "working_dir": folder,
        "store": _store(later),
        "agent_id": f"agent-{point}",
        "session_id": f"session-{point}",
        "permissions": Permissions(
            tool_allowlist=("send", "lookup", "delegate"),
            approval_tools=("send",) if point == "approval" else (),
        ),
    }
    if point == "compaction":
        options["context_policy"] = ContextPolicy(max_tokens=300, max_tool_result_bytes=None)
    model = FunctionModel(_reply(point, dying, seen))
    if point == "subagent":
        worker = AgentDefinition(name="worker", description="Sends things.", tools=["send"])
        agent: Any = LeadAgent(model, subagents=[worker], **options)
    else:
        agent = Agent(model, **options)
    agent.seen = seen
    return agent


def _run(folder: Path, point: str) -> None:
    if point == "streaming":
        save = StoreRunJournal.save_partial

        def save_then_die(self: StoreRunJournal, text: str) -> None:
            if len(text) <= 40:
                save(self, text)
                return
            if self._partial is not None:
                self._partial.result(10)  # a save in flight would skip this one
            save(self, text)
            assert self._partial is not None
            self._partial.result(10)  # saved: now the process dies mid-reply
            _die()

        StoreRunJournal.save_partial = save_then_die  # type: ignore[method-assign]
        run_journal.PARTIAL_INTERVAL = 0.05
    agent = _agent(folder, point, dying=True)
    if point == "between":

        def after(result: Any) -> None:
            if result.call_id == "c1":  # c1 ended; its end is journaled before c2 starts
                _wait_for_step(agent, "tool_end")
                _die()

        agent.on_tool_result(after)
    result = agent.run_sync("Please do the task", tool_mode="sequential")
    if point == "approval":
        assert result.stop_reason == "approval_pending", result.stop_reason
        _die()  # killed while the approval waits
    raise AssertionError(f"{point}: the run was not killed ({result.stop_reason})")


def _wait_for_step(agent: Any, kind: str) -> None:
    from deputy_shiny.persistence.store_bridge import bridge_for

    store = agent.store
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        steps = bridge_for(store).call_sync(store.list_records, "run-step")
        if any(step["kind"] == kind for s in steps for step in s.payload["steps"]):
            return
        time.sleep(0.01)


def _resume(folder: Path, point: str) -> None:
    agent = _agent(folder, point, dying=False, later=True)
    found = agent.interrupted_run()
    out: dict[str, Any] = {"interrupted": None if found is None else found.model_dump()}
    if point == "approval":
        pending = agent.pending_approval()
        (folder / "path.txt").write_text(pending.source.path)
        result = agent.resume_approval(pending.source.path, "approve")
    else:
        result = agent.resume_run()
    out.update(
        stop_reason=result.stop_reason,
        response=result.response,
        run_id=result.run_id,
        usage=result.usage.model_dump(mode="json"),
        turns=[t.model_dump(mode="json") for t in agent.get_turns()],
        seen=agent.seen,
        events=[e.type for e in result.events],
        again=agent.interrupted_run() is not None,
    )
    (folder / "resumed.json").write_text(json.dumps(out))


def _again(folder: Path, point: str) -> None:
    agent = _agent(folder, point, dying=False, later=True)
    try:
        if point == "approval":
            agent.resume_approval((folder / "path.txt").read_text(), "approve")
        else:
            agent.resume_run()
        text = "resumed twice"
    except (RunResumeError, ApprovalDecidedError) as exc:
        text = f"refused: {type(exc).__name__}"
    (folder / "again.txt").write_text(text)


def _in_child(step: Any) -> int:
    """Run ``step()`` in a forked process; how it ended (signal number, or -exit code)."""
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            step()
        except BaseException as exc:
            print(f"child failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            code = 3
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.WTERMSIG(status) if os.WIFSIGNALED(status) else -os.WEXITSTATUS(status)


def _warm_up() -> None:
    """Pay the imports once before any fork; then wait until only this thread is left."""
    get_litellm()
    import aiosqlite  # noqa: F401
    import alembic.config
    import alembic.runtime.environment
    import alembic.runtime.migration
    import alembic.script  # noqa: F401
    import psycopg  # noqa: F401

    import deputy_shiny.persistence.sql_store  # noqa: F401

    asyncio.run(Agent(ScriptedModel(["warm"])).run_async("warm up"))
    deadline = time.monotonic() + 5
    while threading.active_count() > 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    if threading.active_count() > 1:
        raise RuntimeError(f"threads left before fork: {threading.enumerate()}")


def main(root: Path) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for point in POINTS:
        folder = root / point
        folder.mkdir(parents=True)
        summary[point] = {
            "run": _in_child(lambda f=folder, p=point: _run(f, p)),
            "resume": _in_child(lambda f=folder, p=point: _resume(f, p)),
            "again": _in_child(lambda f=folder, p=point: _again(f, p)),
        }
    return summary


if __name__ == "__main__":
    pairs = sys.argv[1:]
    _warm_up()
    summaries = []
    for root, url in zip(pairs[::2], pairs[1::2], strict=True):
        STORE = url
        summaries.append(main(Path(root)))
    print(json.dumps(summaries))
