"""The ``Store`` interface: what must outlive a process, or be seen by another one.

Everything deputy_shiny keeps between runs and processes goes through one
:class:`Store`, async first. Two implement it:
:class:`~deputy_shiny.persistence.file_store.FileStore` (files under one folder, the
default) and :class:`~deputy_shiny.persistence.sql_store.SqlStore` (SQLite for one
machine, PostgreSQL for several). Every behaviour below holds for both:

- **Records**, by ``kind`` and ``key`` (conversation sessions, durable approvals,
  checkpoint journal entries, offloaded tool results). A record holds a JSON payload, an
  optional ``scope`` (the group it belongs to, e.g. the conversation, so that a
  conversation's records are listed, swept and deleted together), an optional
  ``status`` and a ``revision`` that grows with every write. Each is authenticated with
  an HMAC under the server's record key (:mod:`deputy_shiny.persistence.keys`), over its
  kind, key, scope, status and payload: a record written or changed by anyone without
  the key is refused on read with
  :class:`~deputy_shiny.errors.PersistenceNotAuthenticError`. The HMAC proves who wrote
  a record, not that it is the newest: whoever can write the store can put back an
  older authentic copy (row or file whole, its revision with it) and it verifies.
  Binding the revision into the HMAC would not help (the old copy carries its own);
  write access to the store is guarded like the key (the documentation's Security
  model, "The server's own secrets").
- **Claims**: :meth:`Store.claim` moves a record's status from what the caller expects
  to a new one in one conditional update, so of many workers (in any process, on any
  host sharing the store) exactly one wins.
- **Leases**: a named lease has one holder until it expires; a newer holder may take it
  over (``take_over=True``), and the old holder learns it on its next renewal. Its
  ``token`` grows with every new holder (a fencing token).
- **Counters**: amounts added to a user's day atomically (per-user budgets), and the
  totals read back. Counters and leases are bookkeeping, not records: they carry no
  HMAC (whoever can write the store can change them, and gains nothing but its own
  budget).
- **The TTL sweep**: :meth:`Store.sweep` deletes what has not been used since a cutoff;
  :meth:`Store.claim_sweep` lets one process (of all that share the store) sweep at a
  time, at most every so often.

Times are Unix seconds from the store's ``clock`` (``time.time`` unless given): hosts
sharing a store keep their clocks in step (NTP), and lease lengths are seconds, not
milliseconds.

Names are checked before anything is stored (a :class:`~deputy_shiny.errors.ConfigurationError`):
a kind is ``[a-z][a-z0-9_-]{0,63}``; a key, scope, lease name or holder is 1-200
characters of ``[A-Za-z0-9._:-]`` not starting with a dot; a day is 1-32 characters of
``[A-Za-z0-9_-]`` (e.g. ``2026-11-19``); a counter's metric is like a kind; a user is
any non-empty string of at most 500 characters.

Examples:
    >>> import asyncio, tempfile
    >>> from deputy_shiny.persistence import FileStore
    >>> async def main() -> tuple[object, ...]:
    ...     store = FileStore(tempfile.mkdtemp(), key=b"a key only this server holds")
    ...     await store.put("approval", "a1", {"tool": "send"}, status="pending")
    ...     won = await store.claim("approval", "a1", expect="pending", to="resuming")
    ...     again = await store.claim("approval", "a1", expect="pending", to="resuming")
    ...     return won is not None, again, (await store.get("approval", "a1")).status
    >>> asyncio.run(main())
    (True, None, 'resuming')
"""

from __future__ import annotations

import abc
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigurationError
from .files import canonical_json, record_mac

__all__ = [
    "Lease",
    "RecordRef",
    "Store",
    "StoredRecord",
    "check_day",
    "check_kind",
    "check_name",
    "check_user",
    "store_record_mac",
]

_KIND = re.compile(r"[a-z][a-z0-9_-]{0,63}")
_NAME = re.compile(r"[A-Za-z0-9_:-][A-Za-z0-9._:-]{0,199}")
_DAY = re.compile(r"[A-Za-z0-9_-]{1,32}")
_MAC_KIND = "store-record"


def check_kind(kind: object, what: str = "kind") -> str:
    """``kind`` if it is a valid record kind (or counter metric), else a ConfigurationError.

    Examples:
        >>> check_kind("approval")
        'approval'
    """
    if not isinstance(kind, str) or not _KIND.fullmatch(kind):
        raise ConfigurationError(f"A store {what} must match [a-z][a-z0-9_-]{{0,63}}: {kind!r}")
    return kind


def check_name(name: object, what: str = "key") -> str:
    """``name`` if it is a valid key, scope, lease name or holder, else a ConfigurationError.

    Examples:
        >>> check_name("session_1")
        'session_1'
    """
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ConfigurationError(
            f"A store {what} must be 1-200 characters of [A-Za-z0-9._:-], not starting "
            f"with a dot: {name!r}"
        )
    return name


def check_day(day: object) -> str:
    """``day`` if it is a valid counter period (e.g. ``2026-11-19``).

    Examples:
        >>> check_day("2026-11-19")
        '2026-11-19'
    """
    if not isinstance(day, str) or not _DAY.fullmatch(day):
        raise ConfigurationError(f"A counter day must be 1-32 characters of [A-Za-z0-9_-]: {day!r}")
    return day


def check_user(user: object) -> str:
    """``user`` if it is a non-empty string of at most 500 characters.

    Examples:
        >>> check_user("alice@example.com")
        'alice@example.com'
    """
    if not isinstance(user, str) or not 0 < len(user) <= 500:
        raise ConfigurationError("A counter user must be a non-empty string of at most 500 chars")
    return user


def store_record_mac(
    kind: str,
    key: str,
    scope: str | None,
    status: str | None,
    payload: Mapping[str, Any],
    *,
    secret: bytes,
) -> str:
    """The HMAC a store record carries: over its kind, key, scope, status and payload.

    Examples:
        >>> store_record_mac("note", "n1", None, None, {}, secret=bytes(16)).startswith("sha256:")
        True
    """
    body = {"kind": kind, "key": key, "scope": scope, "status": status, "payload": dict(payload)}
    return record_mac(_MAC_KIND, 1, body, key=secret)


def payload_text(payload: Mapping[str, Any]) -> str:
    """The canonical JSON text of a payload (a ValueError/TypeError when it is not JSON)."""
    return canonical_json(dict(payload)).decode("utf-8")


@dataclass(frozen=True, slots=True)
class RecordRef:
    """Which record: its kind, key and scope (what :meth:`Store.sweep` reports)."""

    kind: str
    key: str
    scope: str | None


@dataclass(frozen=True, slots=True)
class StoredRecord:
    """One record as read back (already authenticated).

    Attributes:
        kind / key: What it is and which one.
        payload: Its JSON data.
        scope: The group it belongs to (a conversation), or None.
        status: Its status (what :meth:`Store.claim` compares), or None.
        revision: 1 when first written, one more with every write or claim.
        updated_at: When it was last written or touched (Unix seconds).
    """

    kind: str
    key: str
    payload: dict[str, Any]
    scope: str | None
    status: str | None
    revision: int
    updated_at: float


@dataclass(frozen=True, slots=True)
class Lease:
    """A lease as held: who holds it until when.

    Attributes:
        name: The lease's name (e.g. a conversation's).
        holder: Who holds it (e.g. a browser session's id).
        token: Grows by one with every new holder: a holder whose token is not the
            lease's current one has lost it.
        expires_at: When it is free again unless renewed (Unix seconds).
    """

    name: str
    holder: str
    token: int
    expires_at: float


class Store(abc.ABC):
    """What deputy_shiny keeps beyond one process: records, claims, leases, counters and
    the TTL sweep (see :mod:`deputy_shiny.persistence.store`). Every method is a
    coroutine; a store that cannot be reached raises
    :class:`~deputy_shiny.errors.StoreUnavailableError` (never hangs).

    Examples:
        >>> import asyncio, tempfile
        >>> from deputy_shiny.persistence import FileStore
        >>> store = FileStore(tempfile.mkdtemp(), key=b"a key only this server holds")
        >>> isinstance(store, Store)
        True
        >>> asyncio.run(store.add_usage("alice", "2026-11-19", {"requests": 1}))
        {'requests': 1.0}
    """

    # ---------------------------------------------------------------- records

    @abc.abstractmethod
    async def get(self, kind: str, key: str) -> StoredRecord | None:
        """The record, or None when there is none.

        Raises:
            PersistenceNotAuthenticError: its HMAC does not verify (written or changed
                without the key).
            PersistenceCorruptError: it is not a record deputy_shiny wrote.
        """

    @abc.abstractmethod
    async def put(
        self,
        kind: str,
        key: str,
        payload: Mapping[str, Any],
        *,
        scope: str | None = None,
        status: str | None = None,
        expect_revision: int | None = None,
    ) -> StoredRecord:
        """Write the record (whole) and return it as stored.

        ``expect_revision``: None writes whatever is there; 0 writes only if there is
        no such record (creates it); n writes only over revision n.

        Raises:
            StoreConflictError: ``expect_revision`` did not match.
            PersistenceError: the payload is not plain JSON.
        """

    @abc.abstractmethod
    async def delete(self, kind: str, key: str) -> bool:
        """Delete the record; False when there was none."""

    @abc.abstractmethod
    async def touch(self, kind: str, key: str) -> bool:
        """Mark the record used now (for the sweep), leaving it as it is; False when
        there is none."""

    @abc.abstractmethod
    async def list_records(
        self, kind: str, *, scope: str | None = None, status: str | None = None
    ) -> list[StoredRecord]:
        """The records of ``kind`` (of ``scope`` and with ``status`` when given),
        ordered by key. A record that fails authentication raises, as in :meth:`get`."""

    @abc.abstractmethod
    async def delete_scope(self, scope: str) -> int:
        """Delete every record of ``scope`` (all kinds); how many were deleted."""

    @abc.abstractmethod
    async def claim(
        self,
        kind: str,
        key: str,
        *,
        expect: str | Collection[str],
        to: str,
        payload: Mapping[str, Any] | None = None,
    ) -> StoredRecord | None:
        """Move the record's status from ``expect`` (one status or several) to ``to``,
        with ``payload`` replacing its payload when given, in one conditional update:
        the record as claimed when this caller won, None when it did not (no record,
        another status, or another caller claimed it first). Of many concurrent
        claimers, in any process, exactly one wins.

        Raises:
            PersistenceNotAuthenticError: the record is not authentic (never claimed).
        """

    # ---------------------------------------------------------------- leases

    @abc.abstractmethod
    async def acquire_lease(
        self, name: str, holder: str, ttl: float, *, take_over: bool = False
    ) -> Lease | None:
        """Hold the lease ``name`` for ``ttl`` seconds: the lease when it was free,
        expired, already ``holder``'s (then renewed, same token) or ``take_over`` is
        true (a new token); None when another holder has it."""

    @abc.abstractmethod
    async def renew_lease(self, lease: Lease, ttl: float) -> Lease | None:
        """Extend a held lease by ``ttl`` seconds from now; None when it was lost (taken
        over, or expired and taken by another). An expired lease nobody took is renewed."""

    @abc.abstractmethod
    async def release_lease(self, lease: Lease) -> bool:
        """Let the lease go; False when it was no longer ``lease``'s (nothing changed)."""

    @abc.abstractmethod
    async def lease_holder(self, name: str) -> Lease | None:
        """The lease as held now, or None when it is free (never held, released, expired)."""

    # ---------------------------------------------------------------- counters

    @abc.abstractmethod
    async def add_usage(
        self, user: str, day: str, amounts: Mapping[str, float]
    ) -> dict[str, float]:
        """Add ``amounts`` (metric -> amount, e.g. ``{"requests": 1, "cost": 0.02}``) to
        the user's totals for ``day``, atomically; the totals of every metric of that
        day after the addition."""

    @abc.abstractmethod
    async def usage_totals(self, user: str, day: str) -> dict[str, float]:
        """The user's totals for ``day`` (metric -> total; empty when nothing was added)."""

    # ---------------------------------------------------------------- the sweep

    @abc.abstractmethod
    async def sweep(self, cutoff: float, *, keep_scopes: Collection[str] = ()) -> list[RecordRef]:
        """Delete what has not been used since ``cutoff``: each scope whose most recent
        record was written or touched before it (all its records together; a scope in
        ``keep_scopes`` stays), each such record without a scope, the counters of days
        last added to before it and the leases that expired before it. Returns the
        records deleted. It also records now as the last sweep."""

    @abc.abstractmethod
    async def claim_sweep(self, every: float) -> bool:
        """True (and now becomes the last sweep) when no sweep was claimed in the last
        ``every`` seconds by any process sharing the store; else False."""

    @abc.abstractmethod
    async def last_sweep(self) -> float | None:
        """When the last sweep was claimed or run (Unix seconds), or None."""

    # ---------------------------------------------------------------- lifetime

    async def close(self) -> None:  # noqa: B027 - a store without resources needs nothing
        """Let go of connections (the store may not be used after)."""

    async def __aenter__(self) -> Store:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def expected_statuses(expect: str | Collection[str]) -> tuple[str, ...]:
    """``claim``'s ``expect`` as a tuple of checked statuses."""
    statuses = (expect,) if isinstance(expect, str) else tuple(expect)
    if not statuses:
        raise ConfigurationError("claim needs at least one expected status")
    return tuple(check_name(s, "status") for s in statuses)
