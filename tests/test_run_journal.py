"""The run journal in one process: what a run leaves in the store, and the outcomes the
guide promises (a stopped run is not resumable, a conversation that moved on refuses,
two resumers get one run, a forged journal is refused, a store that cannot journal
runs nothing). A process that dies is simulated by a journal that never writes its end
(the lease is then left to lapse); tests/test_run_journal_crash.py kills real ones.
"""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path
from typing import Any

import pytest

from deputy_shiny import Agent, tool, tool_annotations
from deputy_shiny.errors import (
    PersistenceCorruptError,
    RunResumeError,
    StoreUnavailableError,
)
from deputy_shiny.permissions import Permissions
from deputy_shiny.persistence import FileStore, run_journal
from deputy_shiny.persistence.run_journal import RUN_KIND, StoreRunJournal
from deputy_shiny.persistence.store_bridge import bridge_for
from deputy_shiny.testing import ScriptedModel, ScriptedReply, ScriptedToolCall

KEY = b"a key only this server holds"
GUIDE = Path(__file__).resolve().parent.parent / "docs" / "guide" / "interrupted-runs.md"


@pytest.fixture
def dying(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs whose end is never written: as if their process died once its last steps
    were (the last batch goes with the end otherwise: a crash just before loses it)."""

    async def never(self: StoreRunJournal, stop_reason: str) -> None:
        await self.flush()
        self._ended = True

    monkeypatch.setattr(StoreRunJournal, "end", never)
    monkeypatch.setattr(StoreRunJournal, "abandon", lambda self, reason: None)
    return None


def _later(root: Path) -> FileStore:
    """The store as a process sees it after the dead run's lease lapsed."""
    return FileStore(root, key=KEY, clock=lambda: time.time() + run_journal.LEASE_TTL + 5)


def _agent(store: FileStore, replies: list[Any], ledger: list[str]) -> Agent:
    def send(to: str) -> str:
        "Send a message."
        ledger.append(to)
        return f"sent to {to}"

    return Agent(
        ScriptedModel(replies),
        tools=[tool(send, annotations=tool_annotations(open_world_hint=False))],
        store=store,
        agent_id="a1",
        session_id="conv1",
        permissions=Permissions(tool_allowlist=("send",)),
        enable_file_checkpointing=False,
    )


CALL = ScriptedReply(tool_calls=[ScriptedToolCall("send", {"to": "ops"}, id="c1")])


def _steps(store: FileStore) -> list[str]:
    """The kinds of the steps journaled, in order: in the run's record, its step records,
    then its record's tail (written with its end)."""
    bridge = bridge_for(store)
    runs = bridge.call_sync(store.list_records, RUN_KIND, scope="conv1")
    records = bridge.call_sync(store.list_records, "run-step", scope="conv1")
    batches = [
        *(run.payload["steps"] for run in runs),
        *(r.payload["steps"] for r in records),
        *(run.payload.get("tail", []) for run in runs),
    ]
    return [step["kind"] for batch in batches for step in batch]


class CountingStore(FileStore):
    """A FileStore that counts its writes (records, claims, leases)."""

    writes: list[str]

    async def put(self, kind: str, key: str, *args: Any, **kwargs: Any) -> Any:
        self.writes.append(f"put {kind}")
        return await super().put(kind, key, *args, **kwargs)

    async def claim(self, kind: str, key: str, **kwargs: Any) -> Any:
        self.writes.append(f"claim {kind}")
        return await super().claim(kind, key, **kwargs)

    async def acquire_lease(self, *args: Any, **kwargs: Any) -> Any:
        self.writes.append("acquire lease")
        return await super().acquire_lease(*args, **kwargs)

    async def release_lease(self, *args: Any, **kwargs: Any) -> Any:
        self.writes.append("release lease")
        return await super().release_lease(*args, **kwargs)


def test_a_run_writes_its_steps_in_batches_not_one_by_one(tmp_path: Path) -> None:
    store = CountingStore(tmp_path, key=KEY)
    store.writes = []
    result = _agent(store, [CALL, "Sent."], []).run_sync("Tell ops")
    assert result.stop_reason == "complete"
    # Seven steps, five writes: the user's message with the run's record, the response
    # with its call's decision and start (before the tool runs), the call's end with
    # the results (before the next request), the answer with the run's end.
    assert store.writes == [
        "acquire lease",
        "put run",
        "put run-step",
        "put run-step",
        "claim run",
    ]


def test_a_run_leaves_every_step_in_the_store_and_ends_completed(tmp_path: Path) -> None:
    store = FileStore(tmp_path, key=KEY)
    ledger: list[str] = []
    result = _agent(store, [CALL, "Sent."], ledger).run_sync("Tell ops")
    assert result.stop_reason == "complete" and ledger == ["ops"]
    runs = bridge_for(store).call_sync(store.list_records, RUN_KIND, scope="conv1")
    assert [(r.key, r.status) for r in runs] == [(result.run_id, "completed")]
    assert _steps(store) == [
        "turn",  # the user's message
        "turn",  # the response with the call
        "decision",
        "tool_start",
        "tool_end",
        "turn",  # the results
        "turn",  # the answer
    ]


def test_a_stopped_run_is_not_resumable(tmp_path: Path) -> None:
    store = FileStore(tmp_path, key=KEY)
    agent = _agent(store, [ScriptedReply(text="x " * 200, delay=0.01)], [])

    async def stop_it() -> str:
        async for event in agent.run("Go"):
            if event.type == "text":
                agent.interrupt()
        return agent.last_run().stop_reason  # type: ignore[union-attr]

    assert asyncio.run(stop_it()) == "interrupted"
    later = _agent(_later(tmp_path), [], [])
    assert later.interrupted_run() is None
    with pytest.raises(RunResumeError, match="no interrupted run"):
        later.resume_run()


def test_a_dead_run_is_resumed_once_and_only_by_a_conversation_that_did_not_move_on(
    tmp_path: Path, dying: None
) -> None:
    store = FileStore(tmp_path, key=KEY)
    ledger: list[str] = []
    first = _agent(store, [CALL, "Sent."], ledger).run_sync("Tell ops")
    # Still live for anyone who does not see the lease lapse: nobody may take it.
    live = _agent(FileStore(tmp_path, key=KEY), [], ledger)
    assert live.interrupted_run() is None
    with pytest.raises(RunResumeError, match="another process holds it"):
        live.resume_run(first.run_id)

    moved_on = _agent(_later(tmp_path), ["Hi."], ledger)
    moved_on.run_sync("Something else first")
    with pytest.raises(RunResumeError, match="moved on"):
        moved_on.resume_run(first.run_id)

    found = _agent(_later(tmp_path), [], ledger).interrupted_run()
    assert found is not None and found.run_id == first.run_id and found.task == "Tell ops"
    # Its last response had ended: the resumed run ends at once, nothing runs again.
    resumed = _agent(_later(tmp_path), [], ledger).resume_run()
    assert (resumed.stop_reason, resumed.response, resumed.run_id) == (
        "complete",
        "Sent.",
        first.run_id,
    )
    assert ledger == ["ops"]


def test_a_forged_journal_is_refused(tmp_path: Path, dying: None) -> None:
    store = FileStore(tmp_path, key=KEY)
    _agent(store, [CALL, "Sent."], []).run_sync("Tell ops")
    forged = FileStore(tmp_path, key=b"another key, not the server's")
    records = bridge_for(forged).call_sync(
        forged.put, "run-step", "run_x.000001", {"steps": []}, scope="conv1"
    )
    assert records.key == "run_x.000001"
    with pytest.raises(PersistenceCorruptError):
        _agent(_later(tmp_path), [], []).interrupted_run()


def test_a_run_that_cannot_be_journaled_runs_unjournaled_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = FileStore(tmp_path, key=KEY)

    async def down(*args: Any, **kwargs: Any) -> Any:
        raise StoreUnavailableError("the disk is gone")

    ledger: list[str] = []
    agent = _agent(store, [CALL, "Sent."], ledger)
    monkeypatch.setattr(store, "acquire_lease", down)
    result = agent.run_sync("Tell ops")
    assert result.stop_reason == "complete" and ledger == ["ops"]
    warnings = [e for e in result.events if e.type == "warning"]
    assert [(w.code, w.details) for w in warnings] == [  # type: ignore[union-attr]
        ("journal_unavailable", "the disk is gone")
    ]
    assert _steps(store) == []
    monkeypatch.undo()
    assert _agent(_later(tmp_path), [], []).interrupted_run() is None


def _blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", GUIDE.read_text(), re.DOTALL)


@pytest.mark.parametrize("index", range(2))
def test_the_guide_examples_run(index: int, capsys: pytest.CaptureFixture[str]) -> None:
    exec(compile(_blocks()[index], f"{GUIDE}:{index}", "exec"), {})
    if index == 1:
        assert capsys.readouterr().out == "This agent has no interrupted run in its session.\n"
