"""Durable approvals in a :class:`~deputy_shiny.persistence.store.Store`: decided once, by any
process sharing the store.

With ``Agent(store=...)`` a call waiting for approval is saved as a record of kind
``approval`` (key: the approval's unguessable id; scope: the agent's session, so a
conversation's approvals are listed, swept and deleted with it) instead of a file in
``approval_dir``. Its reference, ``deputy://approval/<id>``, takes the place of the
path (``source.path``, the ``approval`` event's ``path``); the record itself is the
:class:`~deputy_shiny.persistence.approvals.ApprovalContinuation` of the file case, and
its status the record's ``status``, so the statuses are those of
:mod:`deputy_shiny.persistence.approvals`.

Deciding is one conditional update, :meth:`Store.claim` from ``pending`` to
``resuming``: of any number of resumers on any host exactly one wins. Before it, the
winner takes the lease ``approval:<id>`` (its liveness: it renews the lease while it
resumes, on the store's loop, and lets it go when the run ends). Every later step
(``executing`` before the tool, ``continuing`` after it, the final status) is again a
claim from the status this resumer last wrote, so a resumer that lost the record learns
it and writes nothing over it. A record in flight whose lease is gone (expired: its
resumer died, or released without a final status) reads as its final state, exactly as
a file record whose lock is free: ``executing`` becomes ``indeterminate`` (the tool may
have run; it never runs again), ``resuming`` and ``continuing`` become ``stopped``.
Nothing is retried automatically.

The store authenticates every record (its HMAC under the server's record key), so a
record written or changed without the key is refused
(:class:`~deputy_shiny.errors.PersistenceNotAuthenticError`, a
:class:`~deputy_shiny.errors.PersistenceCorruptError`).

Examples:
    >>> import tempfile
    >>> from deputy_shiny import Agent, tool, tool_annotations
    >>> from deputy_shiny.permissions import Permissions
    >>> from deputy_shiny.persistence import FileStore
    >>> from deputy_shiny.testing import ScriptedModel, ScriptedReply, ScriptedToolCall
    >>> def send(to: str) -> str:
    ...     "Send a message."
    ...     return f"sent to {to}"
    >>> model = ScriptedModel([
    ...     ScriptedReply(tool_calls=[ScriptedToolCall("send", {"to": "ops"}, id="c1")]),
    ...     "Sent.",
    ... ])
    >>> store = FileStore(tempfile.mkdtemp(), key=b"a key only this server holds")
    >>> agent = Agent(model, tools=[tool(send, annotations=tool_annotations(
    ...     open_world_hint=False))], store=store, session_id="conv1",
    ...     permissions=Permissions(tool_allowlist=("send",), approval_tools=("send",)))
    >>> agent.run_sync("Tell ops").stop_reason
    'approval_pending'
    >>> ref = agent.pending_approval().source.path
    >>> ref.startswith("deputy://approval/")
    True
    >>> agent.resume_approval(ref, "approve").response
    'Sent.'
    >>> approval_read(ref, store=store).status
    'completed'
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..approvals import ApprovalDecision, Suspension
from ..errors import ApprovalDecidedError, ApprovalResumeError, PersistenceError
from ..permissions import Permissions
from ..tools import Tool
from ..usage import UsageLimits
from .approvals import (
    APPROVAL_KIND,
    ApprovalContinuation,
    ApprovalStore,
    ResumeClaim,
    decided_record,
    reconciled,
    refuse_decided,
    validated_record,
)
from .approvals import approval_read as _file_approval_read
from .store import Lease, Store, StoredRecord
from .store_bridge import bridge_for, keep_lease

__all__ = [
    "APPROVAL_REF",
    "LEASE_TTL",
    "StoreApprovals",
    "StoreClaim",
    "approval_read",
    "approval_ref_id",
]

APPROVAL_REF = "deputy://approval/"
"""How a store approval's reference starts (``deputy://approval/<id>``)."""
LEASE_TTL = 30.0
"""Seconds a resumer's lease lasts unless renewed (renewed every third of it)."""

_ID = re.compile(r"[A-Za-z0-9_-]{20,100}")
_IN_FLIGHT = ("resuming", "executing", "continuing")


def approval_ref_id(ref: object) -> str | None:
    """The approval id in a store reference, or None when ``ref`` is not one.

    Examples:
        >>> approval_ref_id("deputy://approval/" + "a" * 32) == "a" * 32
        True
        >>> approval_ref_id("/tmp/x.approval.json") is None
        True
    """
    if not isinstance(ref, str) or not ref.startswith(APPROVAL_REF):
        return None
    approval_id = ref[len(APPROVAL_REF) :]
    return approval_id if _ID.fullmatch(approval_id) else None


def _lease_name(approval_id: str) -> str:
    return f"approval:{approval_id}"


def _checked_id(ref: object) -> str:
    approval_id = approval_ref_id(ref)
    if approval_id is None:
        raise ApprovalResumeError(
            f"{ref!r}: is not a durable approval reference ({APPROVAL_REF}<id>)."
        )
    return approval_id


async def _read(store: Store, approval_id: str) -> tuple[StoredRecord, ApprovalContinuation]:
    ref = APPROVAL_REF + approval_id
    stored = await store.get(APPROVAL_KIND, approval_id)
    if stored is None:
        raise PersistenceError(f"{ref}: no such approval in {store!r}.")
    record = validated_record(stored.payload, approval_id, ref)
    if record.status != stored.status:
        raise PersistenceError(f"{ref}: its status does not match its record's.")
    return stored, record


async def _current(store: Store, approval_id: str) -> tuple[StoredRecord, ApprovalContinuation]:
    """The record, and as it reads now: in flight with nobody holding its lease, its
    final state (not written)."""
    stored, record = await _read(store, approval_id)
    if record.status in _IN_FLIGHT and await store.lease_holder(_lease_name(approval_id)) is None:
        return stored, reconciled(record)
    return stored, record


def approval_read(
    ref: str, *, store: Store | None = None, key: bytes | str | None = None
) -> ApprovalContinuation:
    """Read a durable approval without running anything: from ``store`` for a
    ``deputy://approval/<id>`` reference, else the file at ``ref`` (see
    :func:`deputy_shiny.persistence.approvals.approval_read`; ``key`` applies there: a
    store checks records with its own key). Blocking: on an event loop use
    :func:`approval_read_async`.

    Raises:
        ApprovalResumeError: a store reference without a store.
        PersistenceError / PersistenceCorruptError: no such record, or not authentic.

    Examples:
        >>> import tempfile
        >>> from deputy_shiny.persistence import FileStore
        >>> store = FileStore(tempfile.mkdtemp(), key=b"k" * 16)
        >>> approval_read("deputy://approval/" + "a" * 32, store=store)
        Traceback (most recent call last):
        ...
        deputy_shiny.errors.PersistenceError: deputy://approval/...: no such approval in ...
    """
    if approval_ref_id(ref) is None:
        return _file_approval_read(ref, key=key)
    if store is None:
        raise ApprovalResumeError(f"{ref}: is an approval in a store; pass store=.")
    return bridge_for(store).call_sync(approval_read_async, ref, store=store)


async def approval_read_async(ref: str, *, store: Store) -> ApprovalContinuation:
    """:func:`approval_read` of a store reference, as a coroutine (the loop stays free)."""
    approval_id = _checked_id(ref)

    async def read() -> ApprovalContinuation:
        return (await _current(store, approval_id))[1]

    return await bridge_for(store).call(read)


@dataclass
class StoreApprovals:
    """Saves an agent's paused calls in a store and claims them for resuming
    (package-internal; the store counterpart of
    :class:`~deputy_shiny.persistence.approvals.ApprovalStore`)."""

    store: Store
    scope: str
    working_dir: Any
    agent_id: str
    session_id: str
    permissions: Permissions
    budget_ceiling: UsageLimits
    tools: Mapping[str, Tool]
    on_suspend: Callable[[str], None] = field(default=lambda ref: None)
    lease_ttl: float = LEASE_TTL

    def _files(self) -> ApprovalStore:
        """The file store's record builder, with this agent's fields."""
        return ApprovalStore(
            approval_dir=self.working_dir,  # unused: only new_record and fingerprints
            working_dir=self.working_dir,
            agent_id=self.agent_id,
            session_id=self.session_id,
            permissions=self.permissions,
            budget_ceiling=self.budget_ceiling,
            tools=self.tools,
        )

    def fingerprints(self) -> dict[str, str]:
        """The fingerprint of each tool, by name."""
        return self._files().fingerprints()

    async def suspend(self, suspension: Suspension) -> str:
        """Save a paused call as a new pending record; return its reference."""
        approval_id = secrets.token_urlsafe(24)
        ref = APPROVAL_REF + approval_id
        record = self._files().new_record(suspension, approval_id, ref, "")
        await bridge_for(self.store).call(
            self.store.put,
            APPROVAL_KIND,
            approval_id,
            record.model_dump(mode="json"),
            scope=self.scope,
            status="pending",
            expect_revision=0,
        )
        self.on_suspend(ref)
        return ref

    async def find_pending(self) -> ApprovalContinuation | None:
        """The newest pending approval of this agent and session in the store."""

        async def find() -> ApprovalContinuation | None:
            best: ApprovalContinuation | None = None
            for stored in await self.store.list_records(
                APPROVAL_KIND, scope=self.scope, status="pending"
            ):
                try:
                    record = validated_record(stored.payload, stored.key, APPROVAL_REF + stored.key)
                except PersistenceError:
                    continue  # not this agent's to decide
                source = record.source
                if (source.agent_id, source.session_id) != (self.agent_id, self.session_id):
                    continue
                if best is None or record.created_at > best.created_at:
                    best = record
            return best

        return await bridge_for(self.store).call(find)

    async def read(self, ref: str) -> ApprovalContinuation:
        """The record at ``ref`` as it reads now (see :func:`approval_read`)."""
        return await approval_read_async(ref, store=self.store)

    async def claim(
        self,
        ref: str,
        decision: ApprovalDecision,
        check: Callable[[ApprovalContinuation], None],
    ) -> StoreClaim:
        """Decide a pending record, once: take its lease, check it with ``check`` (which
        raises to refuse; nothing is recorded then), then claim it ``pending ->
        resuming`` in one conditional update.

        Raises:
            ApprovalResumeError: ``ref`` is not a store approval reference.
            ApprovalDecidedError: decided already, or being resumed now.
            PersistenceError / PersistenceCorruptError: it cannot be read as a record.
        """
        approval_id = _checked_id(ref)
        return await bridge_for(self.store).call(self._claim, approval_id, decision, check)

    async def _claim(
        self,
        approval_id: str,
        decision: ApprovalDecision,
        check: Callable[[ApprovalContinuation], None],
    ) -> StoreClaim:
        ref = APPROVAL_REF + approval_id
        store = self.store
        holder = secrets.token_urlsafe(16)
        # The lease first: a reader that finds the record resuming finds its holder too.
        lease = await store.acquire_lease(_lease_name(approval_id), holder, self.lease_ttl)
        if lease is None:
            raise ApprovalDecidedError(
                f"{ref}: another process is resuming this approval now.", status="resuming"
            )
        try:
            _stored, record = await _read(store, approval_id)
            if record.status != "pending":
                final = reconciled(record)
                if final is not record:
                    # Ours is the lease now, so its resumer is gone: record the end.
                    await store.claim(
                        APPROVAL_KIND,
                        approval_id,
                        expect=record.status,
                        to=final.status,
                        payload=_payload(final),
                    )
                raise refuse_decided(ref, final.status)
            check(record)
            record = decided_record(record, decision)
            won = await store.claim(
                APPROVAL_KIND,
                approval_id,
                expect="pending",
                to="resuming",
                payload=_payload(record),
            )
            if won is None:
                raise refuse_decided(ref)
        except BaseException:
            with contextlib.suppress(Exception):
                await store.release_lease(lease)
            raise
        claim = StoreClaim(self, approval_id, lease, record)
        claim.start_renewing()
        return claim


def _payload(record: ApprovalContinuation) -> dict[str, Any]:
    return record.model_dump(mode="json")


class StoreClaim(ResumeClaim):
    """A store record this process decided and is resuming: it holds (and renews) the
    record's lease until :meth:`finish`, and commits each state as a claim from the
    status it wrote last (the state machine is
    :class:`~deputy_shiny.persistence.approvals.ResumeClaim`'s)."""

    def __init__(
        self, owner: StoreApprovals, approval_id: str, lease: Lease, record: ApprovalContinuation
    ) -> None:
        super().__init__(APPROVAL_REF + approval_id, record)
        self._owner = owner
        self._id = approval_id
        self._lease: Lease | None = lease
        self._renewer: asyncio.Task[None] | None = None
        self.ref = self.path

    def start_renewing(self) -> None:
        """Renew the lease every third of its life, on the store's loop (called there)."""
        self._renewer = asyncio.get_running_loop().create_task(self._renew())

    async def _renew(self) -> None:
        await keep_lease(
            self._owner.store, lambda: self._lease, self._set_lease, self._owner.lease_ttl
        )

    def _set_lease(self, lease: Lease) -> None:
        self._lease = lease

    async def _commit(self, record: ApprovalContinuation) -> bool:
        """A claim from the status this resumer wrote last: refused when another process
        ended the record (our lease had lapsed)."""
        store = self._owner.store
        won = await bridge_for(store).call(
            store.claim,
            APPROVAL_KIND,
            self._id,
            expect=self.record.status,
            to=record.status,
            payload=_payload(record),
        )
        return won is not None

    async def release(self) -> None:
        """Stop renewing and let the lease go."""
        lease, self._lease = self._lease, None
        if lease is None:
            return
        store = self._owner.store

        async def release() -> None:
            if self._renewer is not None:
                self._renewer.cancel()
            with contextlib.suppress(PersistenceError):
                await store.release_lease(lease)

        await bridge_for(store).call(release)
