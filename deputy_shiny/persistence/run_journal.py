"""The run journal in a :class:`~deputy_shiny.persistence.store.Store`: every step of a
run, so that another process resumes it when this one dies.

With ``Agent(store=...)`` each run is a record of kind ``run`` (key: the run's id; scope:
the agent's session, so a conversation's runs are listed, swept and deleted with it)
holding the conversation as the run found it. The steps the engine journals
(:mod:`deputy_shiny._engine.journal`) are written in batches: the first with the run's
record (written with them, not before), then records of kind ``run-step`` (key
``<run id>.<number>``, each holding the steps queued since the last write; written
once: a second writer of the same record is refused), the last with the run's final
status (its record's ``tail``). A batch is written when the engine waits for it (before
a tool starts, before a model request, at the end) or :data:`PARTIAL_INTERVAL` seconds
after its first step at the latest. The text being streamed is a ``run-partial``
record, overwritten at most every :data:`PARTIAL_INTERVAL` seconds.

It is the state machine of durable approvals (:mod:`deputy_shiny.persistence.approvals`),
for a whole run: a live run's record is ``continuing`` under the lease ``run:<id>``
(renewed every third of :data:`LEASE_TTL`; left to lapse once the run's end is written:
an ended run needs no liveness, and a release would be one more write). When the run ends
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
from dataclasses import dataclass, field
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
flight skips the next), and at most between a step and its write. A crash loses at most
this much of the streamed text."""

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

    Steps are queued as they happen and written together, in order, by one writer on
    the store's loop: when the engine waits for them (:meth:`flush`: before a tool
    starts, before a model request) and at the latest :attr:`partial_interval` seconds
    after they were queued (a run waiting on a person still has its steps in the store).
    The first steps go in the run's own record (written then, not when the run opens)
    and the last in its final status's write, so a run with one tool call costs five
    store writes, not one per step. A write that fails (the store is down, or another
    process took the run over: its record keys are taken) fails every later
    :meth:`flush`, so the run stops rather than go on unjournaled.
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
        payload: dict[str, Any],
        created: bool,
    ) -> None:
        self.store = store
        self.scope = scope
        self.run_id = run_id
        self.partial_interval = PARTIAL_INTERVAL
        self._lease: Lease | None = lease
        self._seq = seq  # steps queued so far
        self._batch = batch  # step records written so far
        self._status = status
        self._payload = payload  # the run record's (with the steps written in it)
        self._created = created  # the run record is in the store
        self._bridge = bridge_for(store)
        self._lock = threading.Lock()
        self._queue: list[dict[str, Any]] = []
        self._writing = False  # a writer runs (it writes all that is queued); on the loop
        self._writer: asyncio.Task[None] | None = None  # on the store's loop
        self._failed: BaseException | None = None
        self._partial: concurrent.futures.Future[Any] | None = None
        self._renewer: concurrent.futures.Future[Any] | None = None
        self._ticker: concurrent.futures.Future[Any] | None = None
        self._ended = False

    def start_renewing(self, ttl: float) -> None:
        """Renew the run's lease every third of ``ttl``, and write what waits at the
        interval, until the run ends."""
        self._renewer = self._bridge.submit(self._renew, ttl)
        self._ticker = self._bridge.submit(self._tick)

    async def _renew(self, ttl: float) -> None:
        # Lost (taken over): our next write's key is taken, and the run stops.
        await keep_lease(self.store, lambda: self._lease, self._set_lease, ttl)

    async def _tick(self) -> None:
        while not self._ended:
            await asyncio.sleep(self.partial_interval)
            if not self._ended:
                self._start_writer()

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

    def _start_writer(self) -> asyncio.Task[None] | None:
        """The writer, started when steps wait and none runs (on the store's loop)."""
        with self._lock:
            if not self._writing and self._queue:
                self._writing = True
                self._writer = asyncio.get_running_loop().create_task(self._drain())
            return self._writer if self._writing else None

    async def _drain(self) -> None:
        """Write what is queued, one record at a time, until nothing is."""
        while True:
            with self._lock:
                steps, self._queue = self._queue, []
                if not steps or self._failed is not None:
                    self._writing = False
                    if self._failed is not None:
                        raise self._failed
                    return
            try:
                await self._write(steps)
            except BaseException as exc:
                self._failed = exc
                with self._lock:
                    self._writing = False
                raise

    async def _write(self, steps: list[dict[str, Any]]) -> None:
        if not self._created:  # the run's first steps go in its own record
            payload = {**self._payload, "steps": steps}
            await self.store.put(
                RUN_KIND,
                self.run_id,
                payload,
                scope=self.scope,
                status=self._status,
                expect_revision=0,
            )
            self._payload, self._created = payload, True
            return
        self._batch += 1
        key = _step_key(self.run_id, self._batch)
        payload = {"steps": steps, "at": time.time()}
        await self.store.put(STEP_KIND, key, payload, scope=self.scope, expect_revision=0)

    async def _written(self) -> None:
        writer = self._start_writer()
        if writer is not None:
            await asyncio.shield(writer)

    async def flush(self) -> None:
        """Wait until every step queued so far is written (raises what stopped one)."""
        with self._lock:
            idle = not self._queue and not self._writing
        if not idle:
            await self._bridge.call(self._written)
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
        """Write the rest, then the run's final status."""
        if not self._ended:
            await asyncio.wrap_future(self._close(stop_reason))

    def abandon(self, stop_reason: str) -> None:
        """:meth:`end` without waiting for it."""
        if not self._ended:
            self._close(stop_reason)

    def _close(self, stop_reason: str) -> concurrent.futures.Future[None]:
        self._ended = True
        return self._bridge.submit(self._finish, stop_reason)

    async def _finish(self, stop_reason: str) -> None:
        lease, self._lease = self._lease, None
        for task in (self._renewer, self._ticker):
            if task is not None:
                task.cancel()
        try:
            with self._lock:
                writer = self._writer if self._writing else None
            if writer is not None:
                with contextlib.suppress(Exception):  # a run that waited on it logged it
                    await writer
            if self._failed is not None:
                raise self._failed
            with self._lock:
                tail, self._queue = self._queue, []
            await self._final(_final_status(stop_reason), tail)
            lease = None  # ended: the lease protects nothing now, and lapses by itself
            if self._partial is not None:
                with contextlib.suppress(PersistenceError):
                    await self.store.delete(PARTIAL_KIND, self.run_id)
        finally:
            if lease is not None:
                with contextlib.suppress(PersistenceError):
                    await self.store.release_lease(lease)

    async def _final(self, status: str, tail: list[dict[str, Any]]) -> None:
        """The run's final status, with the steps still queued in the same write."""
        if not self._created:
            await self.store.put(
                RUN_KIND,
                self.run_id,
                {**self._payload, "steps": tail},
                scope=self.scope,
                status=status,
                expect_revision=0,
            )
            return
        await self.store.claim(
            RUN_KIND,
            self.run_id,
            expect=self._status,
            to=status,
            payload={**self._payload, "tail": tail} if tail else None,
        )


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
    payload: dict[str, Any] = field(default_factory=dict)


def _rebuild(stored: StoredRecord, steps: list[StoredRecord]) -> _Rebuilt:
    where = f"run {stored.key}"
    try:
        record = _RunRecord.model_validate(stored.payload)
        turns = list(record.turns)
        state = _Rebuilt(
            record, turns, dict(record.compaction), AgentUsage(), 0, {}, {}, {}, None, 0, 0.0
        )
        state.payload = dict(stored.payload)
        # The first steps are in the run's record, the last (of an ended run) with its end.
        for step in list(stored.payload.get("steps") or ()):
            _apply(state, step)
            state.steps += 1
        for stored_steps in steps:
            for step in stored_steps.payload["steps"]:
                _apply(state, step)
                state.steps += 1
            state.batches += 1
            state.updated_at = stored_steps.updated_at
        for step in list(stored.payload.get("tail") or ()):
            _apply(state, step)
            state.steps += 1
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
        """Record a new run as live (``continuing``, its lease held; its record is
        written with its first steps)."""
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
        lease = await bridge_for(self.store).call(self._open, run_id)
        journal = StoreRunJournal(
            self.store,
            self.scope,
            run_id,
            lease,
            seq=0,
            batch=0,
            status="continuing",
            payload=payload,
            created=False,
        )
        journal.start_renewing(self.lease_ttl)
        return journal

    async def _open(self, run_id: str) -> Lease:
        # The record is written with the run's first steps (one write, not two): until
        # then there is nothing to resume, and a crash leaves only a lease that lapses.
        holder = secrets.token_urlsafe(16)
        lease = await self.store.acquire_lease(_lease_name(run_id), holder, self.lease_ttl)
        if lease is None:  # pragma: no cover - a fresh run id has no holder
            raise PersistenceError(f"run {run_id}: its lease is held by another process.")
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
        self._payload = rebuilt.payload
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
            payload=self._payload,
            created=True,
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
