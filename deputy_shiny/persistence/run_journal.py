"""The run journal in a :class:`~deputy_shiny.persistence.store.Store`: every step of a
run, so that another process resumes it when this one dies.

With ``Agent(store=...)`` each run is a record of kind ``run`` (key: the run's id; scope:
the agent's session, so a conversation's runs are listed, swept and deleted with it)
holding the conversation as the run found it, and the steps the engine journals
(:mod:`deputy_shiny._engine.journal`) are records of kind ``run-step`` (key
``<run id>.<number>``, each holding the steps recorded while the one before was being
written; written once: a second writer of the same record is refused).
The text being streamed is a ``run-partial`` record, overwritten at most every
:data:`PARTIAL_INTERVAL` seconds.

It is the state machine of durable approvals (:mod:`deputy_shiny.persistence.approvals`),
for a whole run: a live run's record is ``continuing`` under the lease ``run:<id>``
(renewed every third of :data:`LEASE_TTL`, let go when the run ends). When the run ends
it becomes ``completed`` or ``stopped`` (a user's Stop is an end too), or ``pending``
when it paused for a durable approval (that approval's record carries it on). A record
still ``continuing`` or ``resuming`` whose lease is gone reads ``interrupted``: its
process died. Resuming claims it (the lease first, then ``-> resuming`` in one
conditional update, so of any number of processes exactly one wins), rebuilds the
conversation from its steps and moves it to ``continuing``: the run goes on. A tool call
journaled as started and never ended is the ``executing`` state of an approval whose
process died: it is not run again (``indeterminate``), unless the tool is idempotent.

Examples:
    >>> import asyncio, tempfile
    >>> from deputy_shiny.conversation import Conversation
    >>> from deputy_shiny.persistence import FileStore
    >>> from deputy_shiny.usage import AgentUsage, UsageLimits
    >>> store = FileStore(tempfile.mkdtemp(), key=b"a key only this server holds")
    >>> journals = StoreRunJournals(store, "conv1", agent_id="a1", session_id="conv1")
    >>> async def main() -> list[str]:
    ...     journal = await journals.open("run_1", Conversation(), {}, UsageLimits())
    ...     journal.record("turn", {"turn": {"role": "user", "contents": []}}, AgentUsage())
    ...     await journal.end("complete")
    ...     return [r.status for r in await store.list_records(RUN_KIND, scope="conv1")]
    >>> asyncio.run(main())
    ['completed']
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import secrets
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..conversation import Conversation
from ..errors import PersistenceCorruptError, PersistenceError, RunResumeError
from ..messages import ContentText, ContentToolResult, Turn
from ..usage import AgentUsage, UsageLimits
from .store import Lease, Store, StoredRecord
from .store_bridge import bridge_for, keep_lease

__all__ = [
    "LEASE_TTL",
    "PARTIAL_INTERVAL",
    "RUN_KIND",
    "InterruptedRun",
    "RunClaim",
    "StoreRunJournal",
    "StoreRunJournals",
]

RUN_KIND = "run"
STEP_KIND = "run-step"
PARTIAL_KIND = "run-partial"
LEASE_TTL = 30.0
"""Seconds a live run's lease lasts unless renewed: how long after a crash its run
reads ``interrupted`` (and may be resumed elsewhere)."""
PARTIAL_INTERVAL = 1.0
"""Seconds between two saves of a response's streamed text (at most: a save still in
flight skips the next). A crash loses at most this much of the streamed text."""

_IN_FLIGHT = ("continuing", "resuming")


def _lease_name(run_id: str) -> str:
    return f"run:{run_id}"


def _step_key(run_id: str, seq: int) -> str:
    return f"{run_id}.{seq:06d}"


def _final_status(stop_reason: str) -> str:
    if stop_reason == "complete":
        return "completed"
    return "pending" if stop_reason == "approval_pending" else "stopped"


class StoreRunJournal:
    """One run's journal in a store (what the engine's ``RunJournal`` protocol asks).

    Steps are queued as they happen and written in order by one writer on the store's
    loop: the steps queued while a write is in flight go together in the next record
    (one write for several steps, so the journal costs a few writes a run, not one a
    step). A write that fails (the store is down, or another process took the run over:
    its record keys are taken) fails every later :meth:`flush`, so the run stops rather
    than go on unjournaled.
    """

    def __init__(
        self,
        store: Store,
        scope: str,
        run_id: str,
        lease: Lease,
        *,
        seq: int,
        batch: int,
        status: str,
    ) -> None:
        self.store = store
        self.scope = scope
        self.run_id = run_id
        self.partial_interval = PARTIAL_INTERVAL
        self._lease: Lease | None = lease
        self._seq = seq  # steps queued so far
        self._batch = batch  # step records written so far
        self._status = status
        self._bridge = bridge_for(store)
        self._lock = threading.Lock()
        self._queue: list[dict[str, Any]] = []
        self._writer: concurrent.futures.Future[None] | None = None
        self._writing = False  # a writer is running (it writes all that is queued)
        self._failed: BaseException | None = None
        self._partial: concurrent.futures.Future[Any] | None = None
        self._renewer: concurrent.futures.Future[None] | None = None
        self._ended = False

    def start_renewing(self, ttl: float) -> None:
        """Renew the run's lease every third of ``ttl`` until the run ends."""
        self._renewer = self._bridge.submit(self._renew, ttl)

    async def _renew(self, ttl: float) -> None:
        # Lost (taken over): our next write's key is taken, and the run stops.
        await keep_lease(self.store, lambda: self._lease, self._set_lease, ttl)

    def _set_lease(self, lease: Lease) -> None:
        self._lease = lease

    def record(self, kind: str, data: Mapping[str, Any], usage: AgentUsage) -> None:
        """Queue a step; it is written after the steps before it."""
        if self._ended:
            return
        step = {"kind": kind, "data": dict(data), "usage": usage.model_dump(mode="json")}
        with self._lock:
            self._seq += 1
            self._queue.append(step)
            if not self._writing:  # else the writer takes it before it stops
                self._writing = True
                self._writer = self._bridge.submit(self._drain)

    async def _drain(self) -> None:
        """Write what is queued, one record at a time, until nothing is."""
        while True:
            with self._lock:
                steps, self._queue = self._queue, []
                if not steps:
                    self._writing = False
                    return
            if self._failed is not None:
                with self._lock:
                    self._writing = False
                raise self._failed
            self._batch += 1
            key = _step_key(self.run_id, self._batch)
            payload = {"steps": steps, "at": time.time()}
            try:
                await self.store.put(STEP_KIND, key, payload, scope=self.scope, expect_revision=0)
            except BaseException as exc:
                self._failed = exc
                with self._lock:
                    self._writing = False
                raise

    async def flush(self) -> None:
        """Wait until every step queued so far is written (raises what stopped one)."""
        with self._lock:
            writer = self._writer
        if writer is not None:
            await asyncio.wrap_future(writer)
        if self._failed is not None:
            raise self._failed

    def save_partial(self, text: str) -> None:
        """Save the streamed text so far, in the background."""
        if self._ended or (self._partial is not None and not self._partial.done()):
            return
        payload = {"text": text, "seq": self._seq}
        self._partial = self._bridge.submit(
            self.store.put, PARTIAL_KIND, self.run_id, payload, scope=self.scope
        )

    async def end(self, stop_reason: str) -> None:
        """Write the rest, then the run's final status; let the lease go."""
        if not self._ended:
            await asyncio.wrap_future(self._close(stop_reason))

    def abandon(self, stop_reason: str) -> None:
        """:meth:`end` without waiting for it."""
        if not self._ended:
            self._close(stop_reason)

    def _close(self, stop_reason: str) -> concurrent.futures.Future[None]:
        self._ended = True
        with self._lock:
            writer = self._writer
        return self._bridge.submit(self._finish, writer, stop_reason)

    async def _finish(
        self, writer: concurrent.futures.Future[None] | None, stop_reason: str
    ) -> None:
        lease, self._lease = self._lease, None
        if self._renewer is not None:
            self._renewer.cancel()
        try:
            if writer is not None:
                with contextlib.suppress(Exception):  # a run that waited on it logged it
                    await asyncio.wrap_future(writer)
            await self._drain()  # what was queued after the writer finished
            await self.store.claim(
                RUN_KIND, self.run_id, expect=self._status, to=_final_status(stop_reason)
            )
            if self._partial is not None:
                with contextlib.suppress(PersistenceError):
                    await self.store.delete(PARTIAL_KIND, self.run_id)
        finally:
            if lease is not None:
                with contextlib.suppress(PersistenceError):
                    await self.store.release_lease(lease)


class InterruptedRun(BaseModel):
    """A run whose process died before it ended: it can be resumed
    (:meth:`~deputy_shiny.Agent.resume_run`). An inspection value.

    Attributes:
        run_id: The run's id (a resumed run keeps it).
        task: The text of the user's message that started it.
        steps: How many steps were journaled.
        partial_text: The text of the response that was being streamed when it stopped,
            as far as it was saved (the resumed run asks the model again).
        interrupted_calls: Names of the tool calls that were running when it stopped.
        started_at / updated_at: Unix times (the run's start, its last journaled step).
        turns: The turns the run added to the conversation, as journaled: the user's
            message, each finished response and its tools' results (what a UI shows of
            it before it goes on).
        held: True when the run's lease is still held: its process may have just died
            (the lease lapses within ``LEASE_TTL`` seconds of its last renewal) or may
            still be running it; it cannot be resumed until the lease lapses. Only
            ``interrupted_run_async(include_held=True)`` returns such a run.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    run_id: str
    task: str = ""
    steps: int = 0
    partial_text: str = ""
    interrupted_calls: list[str] = Field(default_factory=list)
    started_at: float = 0.0
    updated_at: float = 0.0
    turns: list[Turn] = Field(default_factory=list)
    held: bool = False


class _RunRecord(BaseModel):
    """A ``run`` record's payload, checked as untrusted input."""

    model_config = ConfigDict(extra="ignore", defer_build=True)

    run_id: str
    agent_id: str
    session_id: str
    turns: list[Turn] = Field(default_factory=list)
    compaction: dict[str, Any] = Field(default_factory=dict)
    run_context: dict[str, Any] = Field(default_factory=dict)
    limits: UsageLimits = Field(default_factory=UsageLimits)
    started_at: float = 0.0


@dataclass
class _Rebuilt:
    """A journaled run read back: its conversation and what its open calls became."""

    record: _RunRecord
    turns: list[Turn]
    compaction: dict[str, Any]
    usage: AgentUsage
    turn_number: int
    results: dict[str, ContentToolResult]
    started: dict[str, dict[str, Any]]
    allowed: dict[str, dict[str, Any]]
    approval: str | None
    steps: int
    updated_at: float
    batches: int = 0


def _rebuild(stored: StoredRecord, steps: list[StoredRecord]) -> _Rebuilt:
    where = f"run {stored.key}"
    try:
        record = _RunRecord.model_validate(stored.payload)
        turns = list(record.turns)
        state = _Rebuilt(
            record, turns, dict(record.compaction), AgentUsage(), 0, {}, {}, {}, None, 0, 0.0
        )
        for stored_steps in steps:
            for step in stored_steps.payload["steps"]:
                _apply(state, step)
                state.steps += 1
            state.batches += 1
            state.updated_at = stored_steps.updated_at
    except (ValidationError, KeyError, TypeError, ValueError) as exc:
        raise PersistenceCorruptError(f"{where}: its journal is not valid ({exc}).") from None
    return state


def _apply(state: _Rebuilt, step: Mapping[str, Any]) -> None:
    kind, data = step["kind"], step["data"]
    state.usage = AgentUsage.model_validate(step["usage"])
    if kind == "turn":
        turn = Turn.model_validate(data["turn"])
        state.turns.append(turn)
        if turn.role == "assistant":
            state.turn_number += 1
            state.results, state.started, state.allowed = {}, {}, {}
    elif kind == "decision":
        state.allowed[str(data["call_id"])] = dict(data.get("arguments") or {})
    elif kind == "tool_start":
        call_id = str(data["call_id"])
        state.started[call_id] = state.allowed.pop(call_id, {})
    elif kind == "tool_end":
        result = ContentToolResult.model_validate(data["result"])
        state.results[result.call_id] = result
        state.started.pop(result.call_id, None)
        state.allowed.pop(result.call_id, None)
    elif kind == "compaction":
        state.compaction = dict(data)
    elif kind == "approval":
        state.approval = str(data["ref"])


def _task_text(turns: list[Turn], base: int) -> str:
    for turn in turns[base:]:
        if turn.role == "user":
            return "".join(c.text for c in turn.contents if isinstance(c, ContentText))
    return ""


class StoreRunJournals:
    """Opens, lists and claims the journaled runs of one agent and session in a store
    (package-internal; the engine's ``JournalOpener``)."""

    def __init__(
        self,
        store: Store,
        scope: str,
        *,
        agent_id: str,
        session_id: str,
        lease_ttl: float | None = None,
    ) -> None:
        self.store = store
        self.scope = scope
        self.agent_id = agent_id
        self.session_id = session_id
        self.lease_ttl = LEASE_TTL if lease_ttl is None else lease_ttl

    async def open(
        self,
        run_id: str,
        conversation: Conversation,
        run_context: Mapping[str, Any],
        limits: UsageLimits,
    ) -> StoreRunJournal:
        """Record a new run as live (``continuing``, its lease held)."""
        payload = {
            "run_id": run_id,
            "agent_id": self.agent_id,
            "session_id": self.session_id,
            "turns": [t.model_dump(mode="json") for t in conversation.turns],
            "compaction": conversation.view_state(),
            "run_context": dict(run_context),
            "limits": limits.model_dump(mode="json"),
            "started_at": time.time(),
        }
        lease = await bridge_for(self.store).call(self._open, run_id, payload)
        journal = StoreRunJournal(
            self.store, self.scope, run_id, lease, seq=0, batch=0, status="continuing"
        )
        journal.start_renewing(self.lease_ttl)
        return journal

    async def _open(self, run_id: str, payload: dict[str, Any]) -> Lease:
        holder = secrets.token_urlsafe(16)
        lease = await self.store.acquire_lease(_lease_name(run_id), holder, self.lease_ttl)
        if lease is None:  # pragma: no cover - a fresh run id has no holder
            raise PersistenceError(f"run {run_id}: its lease is held by another process.")
        try:
            await self.store.put(
                RUN_KIND, run_id, payload, scope=self.scope, status="continuing", expect_revision=0
            )
        except BaseException:
            with contextlib.suppress(PersistenceError):
                await self.store.release_lease(lease)
            raise
        return lease

    # ------------------------------------------------------------ reading

    async def interrupted(self, *, include_held: bool = False) -> list[InterruptedRun]:
        """This agent's interrupted runs in the session, oldest first (``include_held``:
        with the runs whose lease is still held, ``held=True``)."""
        return await bridge_for(self.store).call(self._interrupted, include_held)

    async def _interrupted(self, include_held: bool = False) -> list[InterruptedRun]:
        found: list[InterruptedRun] = []
        for stored in await self.store.list_records(RUN_KIND, scope=self.scope):
            if stored.status not in _IN_FLIGHT or not self._mine(stored):
                continue
            held = await self.store.lease_holder(_lease_name(stored.key)) is not None
            if held and not include_held:
                continue  # live, or being resumed
            rebuilt = _rebuild(stored, await self._steps(stored.key))
            # Nothing is decided about a run another process may hold.
            if not held and rebuilt.steps == 0:
                # Its process died before even the user's message was written: there is
                # nothing to go on from (the run never made a request).
                await self.store.claim(RUN_KIND, stored.key, expect=stored.status, to="stopped")
                continue
            if not held and rebuilt.approval is not None:
                # It paused for a durable approval before its end was written: the
                # approval carries it on (decided once, with resume_approval).
                await self.store.claim(RUN_KIND, stored.key, expect=stored.status, to="pending")
                continue
            found.append(await self._described(stored, rebuilt, held))
        return sorted(found, key=lambda run: run.started_at)

    async def _described(
        self, stored: StoredRecord, rebuilt: _Rebuilt, held: bool
    ) -> InterruptedRun:
        base = len(rebuilt.record.turns)
        return InterruptedRun(
            run_id=stored.key,
            task=_task_text(rebuilt.turns, base),
            steps=rebuilt.steps,
            partial_text=await self._partial(stored.key, rebuilt.steps),
            interrupted_calls=[
                r.name
                for t in rebuilt.turns[-1:]
                for r in t.tool_requests
                if r.id in rebuilt.started
            ],
            started_at=rebuilt.record.started_at,
            updated_at=rebuilt.updated_at or stored.updated_at,
            turns=rebuilt.turns[base:],
            held=held,
        )

    def _mine(self, stored: StoredRecord) -> bool:
        payload = stored.payload
        return (payload.get("agent_id"), payload.get("session_id")) == (
            self.agent_id,
            self.session_id,
        )

    async def _steps(self, run_id: str) -> list[StoredRecord]:
        prefix = f"{run_id}."
        steps = await self.store.list_records(STEP_KIND, scope=self.scope)
        return [s for s in steps if s.key.startswith(prefix)]

    async def _partial(self, run_id: str, steps: int) -> str:
        stored = await self.store.get(PARTIAL_KIND, run_id)
        seq = None if stored is None else stored.payload.get("seq")
        if stored is None or not isinstance(seq, int) or seq < steps:
            return ""  # none, or an earlier response's (it ended and was journaled)
        text = stored.payload.get("text")
        return text if isinstance(text, str) else ""

    # ------------------------------------------------------------ resuming

    async def claim(self, run_id: str) -> RunClaim:
        """Claim an interrupted run for resuming, once: its lease, then ``-> resuming``.

        Raises:
            RunResumeError: no such run of this agent and session, another process holds
                it, or it is not interrupted.
            PersistenceCorruptError: its journal is not authentic or not valid.
        """
        return await bridge_for(self.store).call(self._claim, run_id)

    async def _claim(self, run_id: str) -> RunClaim:
        store = self.store
        holder = secrets.token_urlsafe(16)
        lease = await store.acquire_lease(_lease_name(run_id), holder, self.lease_ttl)
        if lease is None:
            raise RunResumeError(
                f"run {run_id}: another process holds it (it is running, or being resumed).",
                status="continuing",
            )
        try:
            stored = await store.get(RUN_KIND, run_id)
            if stored is None or not self._mine(stored):
                raise RunResumeError(f"run {run_id}: no such run of this agent and session.")
            if stored.status not in _IN_FLIGHT:
                raise RunResumeError(
                    f"run {run_id}: is not interrupted (status {stored.status!r}).",
                    status=stored.status,
                )
            rebuilt = _rebuild(stored, await self._steps(run_id))
            if rebuilt.steps == 0:
                await store.claim(RUN_KIND, run_id, expect=stored.status, to="stopped")
                raise RunResumeError(
                    f"run {run_id}: its process ended before its first step was written.",
                    status="stopped",
                )
            if rebuilt.approval is not None:
                await store.claim(RUN_KIND, run_id, expect=stored.status, to="pending")
                raise RunResumeError(
                    f"run {run_id}: waits for the approval {rebuilt.approval}; decide it with "
                    "resume_approval.",
                    status="pending",
                )
            won = await store.claim(RUN_KIND, run_id, expect=stored.status, to="resuming")
            if won is None:
                raise RunResumeError(f"run {run_id}: another process claimed it first.")
        except BaseException:
            with contextlib.suppress(PersistenceError):
                await store.release_lease(lease)
            raise
        return RunClaim(self, run_id, lease, rebuilt)


class RunClaim:
    """An interrupted run this process claimed (``resuming``, its lease held): the
    conversation to resume from, and what became of its open response's calls."""

    def __init__(
        self, owner: StoreRunJournals, run_id: str, lease: Lease, rebuilt: _Rebuilt
    ) -> None:
        self._owner = owner
        self.run_id = run_id
        self._lease: Lease | None = lease
        self.base_turns = list(rebuilt.record.turns)
        self.turns = rebuilt.turns
        self.compaction = rebuilt.compaction
        self.run_context = rebuilt.record.run_context
        self.limits = rebuilt.record.limits
        self.task = _task_text(rebuilt.turns, len(self.base_turns))
        self.steps = rebuilt.steps
        self._batches = rebuilt.batches
        self.prior_usage = rebuilt.usage
        self.turn_number = rebuilt.turn_number
        self.results = dict(rebuilt.results)
        self.started = dict(rebuilt.started)
        self.allowed = dict(rebuilt.allowed)

    async def continue_run(self) -> StoreRunJournal:
        """The run goes on (``resuming -> continuing``): its journal, open again."""
        owner, lease = self._owner, self._lease
        assert lease is not None
        store = owner.store
        won = await bridge_for(store).call(
            store.claim, RUN_KIND, self.run_id, expect="resuming", to="continuing"
        )
        if won is None:
            raise RunResumeError(f"run {self.run_id}: another process ended it while resuming.")
        self._lease = None
        journal = StoreRunJournal(
            store,
            owner.scope,
            self.run_id,
            lease,
            seq=self.steps,
            batch=self._batches,
            status="continuing",
        )
        journal.start_renewing(owner.lease_ttl)
        return journal

    async def release(self) -> None:
        """Let the run go without resuming it (it reads ``interrupted`` again)."""
        lease, self._lease = self._lease, None
        if lease is None:
            return
        store = self._owner.store

        async def back() -> None:
            await store.claim(RUN_KIND, self.run_id, expect="resuming", to="continuing")
            await store.release_lease(lease)

        with contextlib.suppress(PersistenceError):
            await bridge_for(store).call(back)
