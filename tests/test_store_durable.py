"""Checkpoint journals, offloaded tool results and durable approvals kept in a Store
(``Agent(store=...)``): on FileStore and SQLite in one process, each record authenticated,
and what one agent saved read back by another agent on its own store object (as another
process would)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from deputy_shiny import Agent, tool, tool_annotations
from deputy_shiny.context import ContextPolicy
from deputy_shiny.errors import (
    ApprovalDecidedError,
    ApprovalResumeError,
    ConfigurationError,
    PersistenceNotAuthenticError,
)
from deputy_shiny.messages import ContentToolResult
from deputy_shiny.permissions import Permissions
from deputy_shiny.persistence import FileStore, SqlStore, Store, approval_read
from deputy_shiny.persistence.store_bridge import bridge_for
from deputy_shiny.testing import ScriptedModel, ScriptedReply, ScriptedToolCall

KEY = b"a key only this server holds, 32b"


@pytest.fixture(params=["file", "sqlite"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path):  # type: ignore[no-untyped-def]
    def make(key: bytes = KEY) -> Store:
        if request.param == "file":
            return FileStore(tmp_path / "store", key=key)
        return SqlStore(f"sqlite+aiosqlite:///{tmp_path / 'store.db'}", key=key)

    return make


def test_a_journal_in_the_store_rewinds_from_another_agent(make_store, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from deputy_shiny.persistence import FileJournal

    work = tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("v1")
    journal = FileJournal(work, store=make_store(), scope="conv1")
    first = journal.checkpoint("before")
    journal.record(work / "a.txt")
    (work / "a.txt").write_text("v2")
    again = FileJournal(work, store=make_store(), scope="conv1")  # another process
    assert [c.changes for c in again.list_checkpoints()] == [1]
    assert again.rewind(first.id).paths == ("a.txt",)
    assert (work / "a.txt").read_text() == "v1"
    assert FileJournal(work, store=make_store(), scope="conv2").list_checkpoints() == []


def test_an_offloaded_result_is_read_back_by_another_agent_of_the_session(
    make_store, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    from deputy_shiny._engine.offload import ToolResultStore

    big = ContentToolResult(call_id="c1", name="dump", output="x" * 5000 + "end")
    shown = ToolResultStore(None, "conv1", store=make_store()).offload(big, limit=1000)
    assert shown.output.startswith("[Tool result too large")
    assert ToolResultStore(None, "conv1", store=make_store()).resolve(shown.output).endswith("end")
    with pytest.raises(Exception, match="Unknown tool result"):
        ToolResultStore(None, "conv2", store=make_store()).resolve(shown.output)


def _agent(store: Store, tmp_path: Path, log: list[str], *, resumes: bool = False) -> Agent:
    def send(to: str) -> str:
        "Send a message."
        log.append(to)
        return f"sent to {to}"

    call = ScriptedReply(tool_calls=[ScriptedToolCall("send", {"to": "ops"}, id="c1")])
    model = ScriptedModel(["Sent."] if resumes else [call, "Sent."])
    return Agent(
        model,
        tools=[tool(send, annotations=tool_annotations(open_world_hint=False))],
        working_dir=tmp_path,
        store=store,
        agent_id="a1",
        session_id="conv1",
        permissions=Permissions(tool_allowlist=("send",), approval_tools=("send",)),
    )


def test_an_approval_in_the_store_is_decided_once_by_another_agent(
    make_store, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    log: list[str] = []
    first = _agent(make_store(), tmp_path, log)
    assert first.run_sync("Tell ops").stop_reason == "approval_pending"
    ref = first.pending_approval().source.path  # type: ignore[union-attr]
    later = _agent(
        make_store(), tmp_path, log, resumes=True
    )  # a new process: finds it in the store
    assert asyncio.run(later.pending_approval_async()).source.path == ref  # type: ignore[union-attr]
    assert later.resume_approval(ref, "approve").response == "Sent."
    assert log == ["ops"]
    record = approval_read(ref, store=make_store())
    assert record.status == "completed"
    assert [e["event"] for e in record.effects] == ["decided", "executing", "executed", "completed"]
    with pytest.raises(ApprovalDecidedError):
        first.resume_approval(ref, "approve")
    assert log == ["ops"]  # never twice
    with pytest.raises(ApprovalResumeError):
        first.resume_approval(tmp_path / "x.approval.json", "approve")  # not a store's


def test_a_record_written_without_the_key_is_refused(make_store, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    log: list[str] = []
    agent = _agent(make_store(b"someone else's key, not ours!!!"), tmp_path, log)
    assert agent.run_sync("Tell ops").stop_reason == "approval_pending"
    ref = agent.pending_approval().source.path  # type: ignore[union-attr]
    with pytest.raises(PersistenceNotAuthenticError):
        _agent(make_store(), tmp_path, log).resume_approval(ref, "approve")
    assert log == []


def test_the_store_takes_the_place_of_the_directories(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "store", key=KEY)
    with pytest.raises(ConfigurationError, match="approval_dir"):
        Agent(ScriptedModel([]), store=store, approval_dir=tmp_path)
    with pytest.raises(ConfigurationError, match="offload_dir"):
        Agent(ScriptedModel([]), store=store, context_policy=ContextPolicy(offload_dir=tmp_path))
    with pytest.raises(ConfigurationError, match="Store"):
        Agent(ScriptedModel([]), store="sqlite://")  # type: ignore[arg-type]


def test_the_bridge_keeps_the_callers_loop_free(tmp_path: Path) -> None:
    """A coroutine awaiting the store's loop lets its own loop run meanwhile."""
    store = FileStore(tmp_path / "store", key=KEY)
    bridge = bridge_for(store)
    ticks: list[int] = []

    async def slow() -> str:
        await asyncio.sleep(0.2)
        return "done"

    async def main() -> str:
        async def tick() -> None:
            for i in range(5):
                ticks.append(i)
                await asyncio.sleep(0.01)

        ticker = asyncio.ensure_future(tick())
        result = await bridge.call(slow)
        await ticker
        return result

    assert asyncio.run(main()) == "done"
    assert ticks == [0, 1, 2, 3, 4]
