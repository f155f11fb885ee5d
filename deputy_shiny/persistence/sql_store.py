"""``SqlStore``: the :class:`~deputy_shiny.persistence.store.Store` in a SQL database.

SQLAlchemy 2's async engine, on SQLite (``sqlite+aiosqlite:///path``, one machine) or
PostgreSQL (``postgresql+psycopg://user:pw@host/db``, any number of processes and
hosts); ``sqlite://`` and ``postgresql://`` URLs get those drivers. The tables are those
of :mod:`deputy_shiny.persistence.sql_schema`, migrated by
:mod:`deputy_shiny.persistence.sql_migrate` before the first use.

Every change is one statement, so the database decides races: a claim is an ``UPDATE``
conditional on the status and revision read, a lease an ``INSERT ... ON CONFLICT DO
UPDATE`` conditional on the lease being free, expired or the caller's, a counter an
upsert adding to the total. A record's payload is kept as the canonical JSON text its
HMAC covers, and read back as untrusted input.

A database that is down, refuses the connection or does not answer raises
:class:`~deputy_shiny.errors.StoreUnavailableError` within ``connect_timeout`` plus
``timeout`` seconds; connections are checked before use, so the store works again once
the database is back.

Examples:
    >>> import asyncio
    >>> key = b"a key only this server holds"
    >>> async def main() -> tuple[object, ...]:
    ...     async with SqlStore("sqlite+aiosqlite://", key=key) as store:
    ...         await store.put("session", "s1", {"turns": []}, scope="conv1")
    ...         record = await store.get("session", "s1")
    ...         return record.payload, record.revision
    >>> asyncio.run(main())
    ({'turns': []}, 1)
"""

from __future__ import annotations

import asyncio
import hmac
import math
import time
from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from .._util.json import loads_bounded
from .._util.timeouts import timeout
from ..errors import (
    ConfigurationError,
    PersistenceCorruptError,
    PersistenceError,
    PersistenceNotAuthenticError,
    StoreConflictError,
    StoreUnavailableError,
)
from .keys import record_key
from .sql_migrate import ensure_schema, store_url
from .sql_schema import COUNTERS, LEASES, META, RECORDS
from .store import (
    Lease,
    RecordRef,
    Store,
    StoredRecord,
    check_day,
    check_kind,
    check_name,
    check_user,
    expected_statuses,
    payload_text,
    store_record_mac,
)

__all__ = ["SqlStore", "store_url"]

_T = TypeVar("_T")
_CLAIM_TRIES = 20  # re-reads when a write that kept the status raced the claim
_LAST_SWEEP = "last_sweep"


class SqlStore(Store):
    """The store in a SQL database (see :mod:`deputy_shiny.persistence.sql_store`).

    Args:
        url: A SQLAlchemy URL (SQLite or PostgreSQL).
        key: The record key (None: the server's, see :mod:`deputy_shiny.persistence.keys`).
        auto_migrate: Migrate an empty or older schema before the first use (else it is
            refused with the command that migrates it).
        connect_timeout: Seconds to wait for a connection.
        timeout: Seconds one statement (and one call) may take beyond connecting.
        clock: The time in Unix seconds (tests pass a fake one).

    Examples:
        >>> import asyncio
        >>> store = SqlStore("sqlite+aiosqlite://", key=b"a key only this server holds")
        >>> asyncio.run(store.add_usage("alice", "2026-11-19", {"requests": 2}))
        {'requests': 2.0}
    """

    def __init__(
        self,
        url: str | sa.URL,
        *,
        key: bytes | str | None = None,
        auto_migrate: bool = True,
        connect_timeout: float = 5.0,
        timeout: float = 10.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.url = store_url(url)
        self._secret = record_key(key)
        self._auto_migrate = auto_migrate
        self._timeout = connect_timeout + timeout
        self._clock = clock
        self._ready = False
        self._ready_lock: asyncio.Lock | None = None
        self.engine: AsyncEngine = _engine(self.url, connect_timeout, timeout)
        # An in-memory SQLite database lives in one connection that every transaction
        # shares (StaticPool): two transactions at once would interleave on it, and both
        # claims of a race could win. Its transactions take turns instead.
        self._one_at_a_time: asyncio.Lock | None = (
            asyncio.Lock() if isinstance(self.engine.pool, sa.pool.StaticPool) else None
        )

    def __repr__(self) -> str:
        return f"SqlStore({self.url.render_as_string(hide_password=True)!r})"

    # ---------------------------------------------------------------- plumbing

    async def migrate(self) -> None:
        """Check the schema and migrate it as allowed (done before the first use anyway).

        Raises:
            StoreSchemaError: see :mod:`deputy_shiny.persistence.sql_migrate`.
            StoreUnavailableError: the database cannot be reached.
        """
        if self._ready_lock is None:
            self._ready_lock = asyncio.Lock()
        async with self._ready_lock:
            if not self._ready:
                await self._guard(ensure_schema(self.engine, auto_migrate=self._auto_migrate))
                self._ready = True

    async def _guard(self, work: Awaitable[_T]) -> _T:
        shown = self.url.render_as_string(hide_password=True)
        try:
            async with timeout(self._timeout):
                return await work
        except PersistenceError:
            raise
        except sa.exc.IntegrityError:
            raise
        except (
            TimeoutError,
            OSError,
            sa.exc.TimeoutError,  # no pooled connection came free in time
            sa.exc.OperationalError,
            sa.exc.InterfaceError,
        ) as exc:
            raise StoreUnavailableError(
                f"The store {shown} cannot be reached now ({_reason(exc)})."
            ) from None
        except sa.exc.DBAPIError as exc:
            if exc.connection_invalidated:
                raise StoreUnavailableError(
                    f"The store {shown} lost its connection ({_reason(exc)})."
                ) from None
            raise PersistenceError(
                f"The store {shown} refused a statement ({_reason(exc)})."
            ) from None
        except sa.exc.SQLAlchemyError as exc:
            raise PersistenceError(f"The store {shown} failed ({_reason(exc)}).") from None

    async def _do(self, fn: Callable[[AsyncConnection], Awaitable[_T]]) -> _T:
        """Run ``fn`` in one transaction, after the schema check, with the timeouts."""
        if not self._ready:
            await self.migrate()

        async def run() -> _T:
            if self._one_at_a_time is None:
                async with self.engine.begin() as connection:
                    return await fn(connection)
            async with self._one_at_a_time, self.engine.begin() as connection:
                return await fn(connection)

        return await self._guard(run())

    def _insert(self, table: sa.Table) -> Any:
        """The dialect's INSERT, which has ``on_conflict_do_update``."""
        if self.engine.dialect.name == "postgresql":
            return postgresql.insert(table)
        return sqlite.insert(table)

    def _verified(self, row: sa.Row[Any]) -> StoredRecord:
        kind, key = row.kind, row.key
        where = f"The {kind} record {key!r}"
        try:
            payload = loads_bounded(row.payload)
        except (TypeError, ValueError):
            raise PersistenceCorruptError(f"{where}: its payload is not JSON.") from None
        if not isinstance(payload, dict):
            raise PersistenceCorruptError(f"{where}: its payload is not a JSON object.")
        try:
            expected = store_record_mac(
                kind, key, row.scope, row.status, payload, secret=self._secret
            )
        except (TypeError, ValueError):
            raise PersistenceCorruptError(f"{where}: holds values that are not JSON.") from None
        mac = row.mac if isinstance(row.mac, str) else ""
        if not hmac.compare_digest(mac.encode("utf-8", "surrogatepass"), expected.encode()):
            raise PersistenceNotAuthenticError(
                f"{where}: is not authentic: its HMAC does not verify with this server's "
                "record key (written or changed by someone without the key, or damaged)."
            )
        return StoredRecord(
            kind, key, payload, row.scope, row.status, int(row.revision), float(row.updated_at)
        )

    def _row(
        self,
        kind: str,
        key: str,
        payload: Mapping[str, Any],
        scope: str | None,
        status: str | None,
    ) -> dict[str, Any]:
        try:
            text = payload_text(payload)
            mac = store_record_mac(kind, key, scope, status, payload, secret=self._secret)
        except (TypeError, ValueError) as exc:
            raise PersistenceError(
                f"The {kind} record {key!r} is not plain JSON ({exc})."
            ) from None
        return {
            "kind": kind,
            "key": key,
            "scope": scope,
            "status": status,
            "payload": text,
            "mac": mac,
            "updated_at": self._clock(),
        }

    async def close(self) -> None:
        """Close the engine's connections."""
        await self.engine.dispose()

    # ---------------------------------------------------------------- records

    def _where(self, kind: str, key: str) -> sa.ColumnElement[bool]:
        return sa.and_(RECORDS.c.kind == kind, RECORDS.c.key == key)

    async def _select(self, connection: AsyncConnection, kind: str, key: str) -> sa.Row[Any] | None:
        result = await connection.execute(sa.select(RECORDS).where(self._where(kind, key)))
        return result.first()

    async def get(self, kind: str, key: str) -> StoredRecord | None:
        """See :meth:`Store.get`."""
        check_kind(kind)
        check_name(key)
        row = await self._do(lambda c: self._select(c, kind, key))
        return None if row is None else self._verified(row)

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
        """See :meth:`Store.put`."""
        check_kind(kind)
        check_name(key)
        if scope is not None:
            check_name(scope, "scope")
        if status is not None:
            check_name(status, "status")
        values = self._row(kind, key, payload, scope, status)

        async def put(connection: AsyncConnection) -> int | None:
            if expect_revision is None:
                statement = self._insert(RECORDS).values(revision=1, **values)
                changed = {k: v for k, v in values.items() if k not in ("kind", "key")}
                statement = statement.on_conflict_do_update(
                    index_elements=[RECORDS.c.kind, RECORDS.c.key],
                    set_={**changed, "revision": RECORDS.c.revision + 1},
                ).returning(RECORDS.c.revision)
                return int((await connection.execute(statement)).scalar_one())
            if expect_revision == 0:
                await connection.execute(sa.insert(RECORDS).values(revision=1, **values))
                return 1
            result = await connection.execute(
                sa.update(RECORDS)
                .where(self._where(kind, key), RECORDS.c.revision == expect_revision)
                .values(revision=expect_revision + 1, **values)
            )
            return expect_revision + 1 if result.rowcount == 1 else None

        try:
            revision = await self._do(put)
        except sa.exc.IntegrityError:
            revision = None
        if revision is None:
            raise StoreConflictError(
                f"The {kind} record {key!r} is not at revision {expect_revision}: another "
                "writer changed or created it first."
            )
        return StoredRecord(
            kind, key, dict(payload), scope, status, revision, float(values["updated_at"])
        )

    async def delete(self, kind: str, key: str) -> bool:
        """See :meth:`Store.delete`."""
        check_kind(kind)
        check_name(key)

        async def delete(connection: AsyncConnection) -> bool:
            result = await connection.execute(sa.delete(RECORDS).where(self._where(kind, key)))
            return bool(result.rowcount)

        return await self._do(delete)

    async def touch(self, kind: str, key: str) -> bool:
        """See :meth:`Store.touch`."""
        check_kind(kind)
        check_name(key)

        async def touch(connection: AsyncConnection) -> bool:
            statement = (
                sa.update(RECORDS).where(self._where(kind, key)).values(updated_at=self._clock())
            )
            return bool((await connection.execute(statement)).rowcount)

        return await self._do(touch)

    async def list_records(
        self, kind: str, *, scope: str | None = None, status: str | None = None
    ) -> list[StoredRecord]:
        """See :meth:`Store.list_records`."""
        check_kind(kind)
        statement = sa.select(RECORDS).where(RECORDS.c.kind == kind).order_by(RECORDS.c.key)
        if scope is not None:
            statement = statement.where(RECORDS.c.scope == scope)
        if status is not None:
            statement = statement.where(RECORDS.c.status == status)

        async def listed(connection: AsyncConnection) -> list[sa.Row[Any]]:
            return list((await connection.execute(statement)).all())

        return [self._verified(row) for row in await self._do(listed)]

    async def delete_scope(self, scope: str) -> int:
        """See :meth:`Store.delete_scope`."""
        check_name(scope, "scope")

        async def delete(connection: AsyncConnection) -> int:
            result = await connection.execute(sa.delete(RECORDS).where(RECORDS.c.scope == scope))
            return int(result.rowcount)

        return await self._do(delete)

    async def claim(
        self,
        kind: str,
        key: str,
        *,
        expect: str | Collection[str],
        to: str,
        payload: Mapping[str, Any] | None = None,
    ) -> StoredRecord | None:
        """See :meth:`Store.claim`."""
        check_kind(kind)
        check_name(key)
        statuses = expected_statuses(expect)
        check_name(to, "status")
        for _ in range(_CLAIM_TRIES):
            row = await self._do(lambda c: self._select(c, kind, key))
            if row is None:
                return None
            record = self._verified(row)  # never claim a record that is not authentic
            if record.status not in statuses:
                return None
            body = record.payload if payload is None else payload
            values = self._row(kind, key, body, record.scope, to)
            statement = (
                sa.update(RECORDS)
                .where(
                    self._where(kind, key),
                    RECORDS.c.revision == record.revision,
                    RECORDS.c.status == record.status,
                )
                .values(revision=record.revision + 1, **values)
            )

            async def update(connection: AsyncConnection, statement: Any = statement) -> int:
                return int((await connection.execute(statement)).rowcount)

            if await self._do(update) == 1:
                updated = float(values["updated_at"])
                return StoredRecord(
                    kind, key, dict(body), record.scope, to, record.revision + 1, updated
                )
        return None  # written over again and again meanwhile: treat as lost

    # ---------------------------------------------------------------- leases

    async def acquire_lease(
        self, name: str, holder: str, ttl: float, *, take_over: bool = False
    ) -> Lease | None:
        """See :meth:`Store.acquire_lease`."""
        check_name(name, "lease name")
        check_name(holder, "lease holder")
        now = self._clock()
        expires = now + ttl
        statement = self._insert(LEASES).values(
            name=name, holder=holder, token=1, expires_at=expires
        )
        free = sa.or_(LEASES.c.expires_at <= now, LEASES.c.holder == holder)
        statement = statement.on_conflict_do_update(
            index_elements=[LEASES.c.name],
            set_={
                "holder": holder,
                # The same holder keeps its token; a new one gets the next.
                "token": sa.case(
                    (LEASES.c.holder == holder, LEASES.c.token), else_=LEASES.c.token + 1
                ),
                "expires_at": expires,
            },
            where=None if take_over else free,
        ).returning(LEASES.c.token)

        async def acquire(connection: AsyncConnection) -> int | None:
            token = (await connection.execute(statement)).scalar_one_or_none()
            return None if token is None else int(token)

        token = await self._do(acquire)
        return None if token is None else Lease(name, holder, token, expires)

    def _held(self, lease: Lease) -> sa.ColumnElement[bool]:
        return sa.and_(
            LEASES.c.name == lease.name,
            LEASES.c.holder == lease.holder,
            LEASES.c.token == lease.token,
        )

    async def renew_lease(self, lease: Lease, ttl: float) -> Lease | None:
        """See :meth:`Store.renew_lease`."""
        check_name(lease.name, "lease name")
        expires = self._clock() + ttl
        statement = sa.update(LEASES).where(self._held(lease)).values(expires_at=expires)

        async def renew(connection: AsyncConnection) -> int:
            return int((await connection.execute(statement)).rowcount)

        if await self._do(renew) != 1:
            return None
        return Lease(lease.name, lease.holder, lease.token, expires)

    async def release_lease(self, lease: Lease) -> bool:
        """See :meth:`Store.release_lease`."""
        check_name(lease.name, "lease name")
        # Kept (expired at once), so the next holder's token still grows.
        statement = sa.update(LEASES).where(self._held(lease)).values(expires_at=0.0)

        async def release(connection: AsyncConnection) -> bool:
            return bool((await connection.execute(statement)).rowcount)

        return await self._do(release)

    async def lease_holder(self, name: str) -> Lease | None:
        """See :meth:`Store.lease_holder`."""
        check_name(name, "lease name")
        statement = sa.select(LEASES).where(
            LEASES.c.name == name, LEASES.c.expires_at > self._clock()
        )

        async def holder(connection: AsyncConnection) -> sa.Row[Any] | None:
            return (await connection.execute(statement)).first()

        row = await self._do(holder)
        if row is None:
            return None
        return Lease(row.name, row.holder, int(row.token), float(row.expires_at))

    # ---------------------------------------------------------------- counters

    def _totals_query(self, user: str, day: str) -> sa.Select[Any]:
        return (
            sa.select(COUNTERS.c.metric, COUNTERS.c.total)
            .where(COUNTERS.c.user == user, COUNTERS.c.day == day)
            .order_by(COUNTERS.c.metric)
        )

    async def add_usage(
        self, user: str, day: str, amounts: Mapping[str, float]
    ) -> dict[str, float]:
        """See :meth:`Store.add_usage`."""
        check_user(user)
        check_day(day)
        adding = {check_kind(m, "metric"): float(v) for m, v in sorted(amounts.items())}
        bad = [metric for metric, value in adding.items() if not math.isfinite(value)]
        if bad:
            raise ConfigurationError(f"Counter amounts must be finite numbers: {bad}")
        now = self._clock()
        rows = [
            {"user": user, "day": day, "metric": m, "total": v, "updated_at": now}
            for m, v in adding.items()
        ]

        async def add(connection: AsyncConnection) -> dict[str, float]:
            if rows:
                statement = self._insert(COUNTERS).values(rows)
                statement = statement.on_conflict_do_update(
                    index_elements=[COUNTERS.c.user, COUNTERS.c.day, COUNTERS.c.metric],
                    set_={
                        "total": COUNTERS.c.total + statement.excluded.total,
                        "updated_at": statement.excluded.updated_at,
                    },
                )
                await connection.execute(statement)
            found = await connection.execute(self._totals_query(user, day))
            return {row.metric: float(row.total) for row in found}

        return await self._do(add)

    async def usage_totals(self, user: str, day: str) -> dict[str, float]:
        """See :meth:`Store.usage_totals`."""
        check_user(user)
        check_day(day)

        async def totals(connection: AsyncConnection) -> dict[str, float]:
            found = await connection.execute(self._totals_query(user, day))
            return {row.metric: float(row.total) for row in found}

        return await self._do(totals)

    # ---------------------------------------------------------------- the sweep

    async def sweep(self, cutoff: float, *, keep_scopes: Collection[str] = ()) -> list[RecordRef]:
        """See :meth:`Store.sweep`."""
        stale_scopes = (
            sa.select(RECORDS.c.scope)
            .where(RECORDS.c.scope.is_not(None))
            .group_by(RECORDS.c.scope)
            .having(sa.func.max(RECORDS.c.updated_at) < cutoff)
        )
        if keep_scopes:
            stale_scopes = stale_scopes.where(RECORDS.c.scope.not_in(list(keep_scopes)))
        returned = (RECORDS.c.kind, RECORDS.c.key, RECORDS.c.scope)
        scoped = sa.delete(RECORDS).where(RECORDS.c.scope.in_(stale_scopes)).returning(*returned)
        unscoped = (
            sa.delete(RECORDS)
            .where(RECORDS.c.scope.is_(None), RECORDS.c.updated_at < cutoff)
            .returning(*returned)
        )

        async def sweep(connection: AsyncConnection) -> list[RecordRef]:
            deleted = [
                RecordRef(row.kind, row.key, row.scope)
                for statement in (scoped, unscoped)
                for row in await connection.execute(statement)
            ]
            await connection.execute(sa.delete(COUNTERS).where(COUNTERS.c.updated_at < cutoff))
            await connection.execute(sa.delete(LEASES).where(LEASES.c.expires_at < cutoff))
            await connection.execute(self._set_last_sweep(self._clock()))
            return sorted(deleted, key=lambda r: (r.kind, r.key))

        return await self._do(sweep)

    def _set_last_sweep(self, now: float, *, unless_since: float | None = None) -> Any:
        statement = self._insert(META).values(name=_LAST_SWEEP, value=now)
        where = None if unless_since is None else META.c.value <= unless_since
        return statement.on_conflict_do_update(
            index_elements=[META.c.name], set_={"value": now}, where=where
        ).returning(META.c.value)

    async def claim_sweep(self, every: float) -> bool:
        """See :meth:`Store.claim_sweep`."""
        now = self._clock()
        statement = self._set_last_sweep(now, unless_since=now - every)

        async def claim(connection: AsyncConnection) -> bool:
            return (await connection.execute(statement)).first() is not None

        return await self._do(claim)

    async def last_sweep(self) -> float | None:
        """See :meth:`Store.last_sweep`."""
        statement = sa.select(META.c.value).where(META.c.name == _LAST_SWEEP)

        async def last(connection: AsyncConnection) -> float | None:
            value = (await connection.execute(statement)).scalar_one_or_none()
            return None if value is None else float(value)

        return await self._do(last)


def _engine(url: sa.URL, connect_timeout: float, statement_timeout: float) -> AsyncEngine:
    """The async engine, with every wait bounded."""
    if url.get_backend_name() == "postgresql":
        milliseconds = max(1, int(statement_timeout * 1000))
        connect_args: dict[str, Any] = {
            # libpq counts whole seconds, at least 2.
            "connect_timeout": max(2, math.ceil(connect_timeout)),
            "options": f"-c statement_timeout={milliseconds} -c lock_timeout={milliseconds}",
        }
        return create_async_engine(
            url, connect_args=connect_args, pool_pre_ping=True, pool_timeout=statement_timeout
        )
    # SQLite: wait for another writer's lock up to the statement timeout.
    return create_async_engine(url, connect_args={"timeout": statement_timeout})


def _reason(exc: BaseException) -> str:
    """One line of why (a driver's text can run to many)."""
    if isinstance(exc, TimeoutError):
        return "no answer in time"
    inner = getattr(exc, "orig", None) or exc
    text = str(inner).strip().splitlines()
    return text[0][:300] if text else type(inner).__name__
