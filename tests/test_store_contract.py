"""One contract, three stores: FileStore, SqlStore on SQLite, SqlStore on a real PostgreSQL.

Every test runs against each store (``store_kit``): records round-trip, a record edited
behind the store's back is refused, of many concurrent claimers (two store instances,
and another process) exactly one wins, leases are taken over and expire, counters add up
under concurrency, the TTL sweep deletes by scope. The SQL tests then check the schema's
migrations (from empty, a too-new schema refused, an old one refused when automatic
migration is off) and that a database that is down gives ``StoreUnavailableError`` in
bounded time, and works again once it is back.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from deputy_shiny.errors import (
    ConfigurationError,
    PersistenceError,
    PersistenceNotAuthenticError,
    StoreConflictError,
    StoreSchemaError,
    StoreUnavailableError,
)
from deputy_shiny.persistence import FileStore, SqlStore, Store
from deputy_shiny.persistence.sql_schema import METADATA, RECORDS, VERSION_TABLE

KEY = b"the test server's record key!!"
ROOT = Path(__file__).resolve().parent.parent


class Clock:
    """A clock the test moves by hand (shared by every store of one kit)."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class StoreKit:
    """How to make stores of one backend over the same storage, and edit it behind them."""

    name: str
    location: str  # the root folder or the database URL
    clock: Clock
    made: list[Store]

    def make(self, **options: Any) -> Store:
        options.setdefault("key", KEY)
        options.setdefault("clock", self.clock)
        store: Store
        if self.name == "file":
            store = FileStore(self.location, **options)
        else:
            store = SqlStore(self.location, **options)
        self.made.append(store)
        return store

    async def tamper(self, kind: str, key: str, payload: dict[str, Any]) -> None:
        """Change a record's payload as someone without the key would."""
        if self.name == "file":
            path = Path(self.location) / "records" / kind / f"{key}.json"
            document = json.loads(path.read_text())
            document["payload"]["payload"] = payload
            path.write_text(json.dumps(document))
            return
        engine = SqlStore(self.location, key=KEY).engine
        try:
            async with engine.begin() as connection:
                await connection.execute(
                    sa.update(RECORDS)
                    .where(RECORDS.c.kind == kind, RECORDS.c.key == key)
                    .values(payload=json.dumps(payload, separators=(",", ":")))
                )
        finally:
            await engine.dispose()


@pytest.fixture(params=["file", "sqlite", "postgres"])
async def kit(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StoreKit]:
    if request.param == "file":
        location = str(tmp_path / "store")
    elif request.param == "sqlite":
        location = f"sqlite+aiosqlite:///{tmp_path / 'store.db'}"
    else:
        location = request.getfixturevalue("postgres_url")
    made: list[Store] = []
    yield StoreKit(request.param, location, Clock(), made)
    for store in made:
        await store.close()


# ------------------------------------------------------------------ records


async def test_records_round_trip_with_revisions_scopes_and_statuses(kit: StoreKit) -> None:
    store = kit.make()
    assert await store.get("session", "s1") is None
    first = await store.put("session", "s1", {"turns": [1, "two"]}, scope="conv-1")
    assert (first.revision, first.scope, first.status) == (1, "conv-1", None)
    kit.clock.now += 5
    await store.put("approval", "a1", {"tool": "send"}, scope="conv-1", status="pending")
    await store.put("approval", "a2", {"tool": "mail"}, scope="conv-2", status="pending")
    again = await store.put("session", "s1", {"turns": []}, scope="conv-1")
    assert again.revision == 2
    got = await store.get("session", "s1")
    assert got is not None
    assert (got.payload, got.revision, got.updated_at) == ({"turns": []}, 2, kit.clock.now)
    # Another instance over the same storage sees the same.
    other = kit.make()
    assert [r.key for r in await other.list_records("approval")] == ["a1", "a2"]
    assert [r.key for r in await other.list_records("approval", scope="conv-2")] == ["a2"]
    assert await other.list_records("approval", status="done") == []
    with pytest.raises(StoreConflictError):
        await other.put("session", "s1", {"x": 1}, expect_revision=1)
    with pytest.raises(StoreConflictError):
        await other.put("session", "s1", {"x": 1}, expect_revision=0)
    written = await other.put("session", "s1", {"x": 1}, scope="conv-1", expect_revision=2)
    assert written.revision == 3
    assert (await other.put("session", "s9", {}, expect_revision=0)).revision == 1
    kit.clock.now += 5
    assert await other.touch("session", "s9") and not await other.touch("session", "nope")
    touched = await store.get("session", "s9")
    assert touched is not None and touched.updated_at == kit.clock.now
    assert await store.delete("session", "s9") and not await store.delete("session", "s9")
    assert await store.delete_scope("conv-1") == 2
    assert await store.get("session", "s1") is None
    assert [r.key for r in await store.list_records("approval")] == ["a2"]


async def test_bad_names_and_values_are_refused_before_anything_is_stored(kit: StoreKit) -> None:
    store = kit.make()
    for kind, key in (("Session", "s1"), ("session", "../etc"), ("session", ".hidden")):
        with pytest.raises(ConfigurationError):
            await store.put(kind, key, {})
    with pytest.raises(PersistenceError):
        await store.put("session", "s1", {"x": float("nan")})
    assert await store.list_records("session") == []


async def test_a_record_changed_without_the_key_is_refused(kit: StoreKit) -> None:
    store = kit.make()
    await store.put("approval", "a1", {"tool": "send", "to": "ops"}, status="pending")
    await kit.tamper("approval", "a1", {"tool": "send", "to": "attacker"})
    with pytest.raises(PersistenceNotAuthenticError):
        await store.get("approval", "a1")
    with pytest.raises(PersistenceNotAuthenticError):
        await store.list_records("approval")
    with pytest.raises(PersistenceNotAuthenticError):
        await store.claim("approval", "a1", expect="pending", to="resuming")
    # Written with another key: refused as well.
    await kit.make(key=b"someone else's key, 16+ bytes").put("note", "n1", {"a": 1})
    with pytest.raises(PersistenceNotAuthenticError):
        await store.get("note", "n1")


# ------------------------------------------------------------------ claims


async def test_of_many_concurrent_claimers_exactly_one_wins(kit: StoreKit) -> None:
    first, second = kit.make(), kit.make()
    await first.put("approval", "a1", {"tool": "send"}, status="pending")
    claimers = [
        (first if i % 2 else second).claim(
            "approval", "a1", expect="pending", to="resuming", payload={"by": i}
        )
        for i in range(24)
    ]
    won = [r for r in await asyncio.gather(*claimers) if r is not None]
    assert len(won) == 1
    stored = await first.get("approval", "a1")
    assert stored is not None
    assert (stored.status, stored.payload, stored.revision) == ("resuming", won[0].payload, 2)
    assert await second.claim("approval", "a1", expect="pending", to="resuming") is None
    assert await second.claim("approval", "missing", expect="pending", to="x") is None
    moved = await second.claim("approval", "a1", expect=("resuming", "executing"), to="done")
    assert moved is not None and moved.payload == won[0].payload


CLAIMER = f"""
import asyncio, sys
from deputy_shiny.persistence import FileStore, SqlStore
async def main():
    stores = [FileStore(sys.argv[1], key={KEY!r}), SqlStore(sys.argv[2], key={KEY!r})]
    n = int(sys.argv[3])
    await stores[1].migrate()
    print('ready', flush=True)
    sys.stdin.readline()
    won = await asyncio.gather(*[
        store.claim('approval', 'r' + str(i), expect='pending', to='child')
        for store in stores for i in range(n)])
    await stores[1].close()
    print(sum(w is not None for w in won[:n]), sum(w is not None for w in won[n:]), flush=True)
asyncio.run(main())
"""


# SQLite is one machine's database: the two-instance race above covers it.
async def test_claims_race_another_process_and_each_record_has_one_winner(
    tmp_path: Path, postgres_url: str
) -> None:
    """One other process (one interpreter, both stores) races this one for 20 records."""
    stores: list[Store] = [FileStore(tmp_path / "store", key=KEY), SqlStore(postgres_url, key=KEY)]
    records = 20
    for store in stores:
        for i in range(records):
            await store.put("approval", f"r{i}", {}, status="pending")
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-c", CLAIMER, str(tmp_path / "store"), postgres_url, str(records),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT,
    )  # fmt: skip
    assert child.stdout is not None and child.stdin is not None
    try:
        assert await child.stdout.readline() == b"ready\n"
        child.stdin.write(b"go\n")  # both sides start claiming at once
        won_here = await asyncio.gather(
            *[
                store.claim("approval", f"r{i}", expect="pending", to="parent")
                for store in stores
                for i in range(records)
            ]
        )
        won_there = [int(n) for n in (await child.communicate())[0].split()]
        for index, store in enumerate(stores):
            here = sum(w is not None for w in won_here[index * records : (index + 1) * records])
            assert here + won_there[index] == records, store
            statuses = [r.status for r in await store.list_records("approval")]
            assert (statuses.count("parent"), statuses.count("child")) == (here, won_there[index])
    finally:
        if child.returncode is None:
            child.kill()
            await child.wait()
        await stores[1].close()


# ------------------------------------------------------------------ leases


async def test_a_lease_is_held_taken_over_renewed_and_expires(kit: StoreKit) -> None:
    tab_a, tab_b = kit.make(), kit.make()
    lease_a = await tab_a.acquire_lease("conv-1", "tab-a", ttl=30)
    assert lease_a is not None and lease_a.token == 1
    assert await tab_b.acquire_lease("conv-1", "tab-b", ttl=30) is None
    again = await tab_a.acquire_lease("conv-1", "tab-a", ttl=30)  # its own: renewed
    assert again is not None and again.token == 1
    holder = await tab_b.lease_holder("conv-1")
    assert holder is not None and holder.holder == "tab-a"
    # A newer tab takes it over; the older one finds out when it renews.
    lease_b = await tab_b.acquire_lease("conv-1", "tab-b", ttl=30, take_over=True)
    assert lease_b is not None and lease_b.token == 2
    assert await tab_a.renew_lease(lease_a, ttl=30) is None
    assert not await tab_a.release_lease(lease_a)
    kit.clock.now += 20
    renewed = await tab_b.renew_lease(lease_b, ttl=30)
    assert renewed is not None and renewed.expires_at == kit.clock.now + 30
    # Expired: free for anyone, with a new token.
    kit.clock.now += 31
    assert await tab_a.lease_holder("conv-1") is None
    lease_c = await tab_a.acquire_lease("conv-1", "tab-c", ttl=30)
    assert lease_c is not None and lease_c.token == 3
    assert await tab_b.renew_lease(lease_b, ttl=30) is None
    assert await tab_a.release_lease(lease_c)
    assert await tab_b.lease_holder("conv-1") is None
    lease_d = await tab_b.acquire_lease("conv-1", "tab-d", ttl=30)
    assert lease_d is not None and lease_d.token == 4


async def test_concurrent_acquirers_of_a_free_lease_get_one_holder(kit: StoreKit) -> None:
    first, second = kit.make(), kit.make()
    got = await asyncio.gather(
        *[(first if i % 2 else second).acquire_lease("conv-9", f"h{i}", ttl=30) for i in range(16)]
    )
    held = [lease for lease in got if lease is not None]
    assert len(held) == 1
    current = await first.lease_holder("conv-9")
    assert current is not None and current.holder == held[0].holder


# ------------------------------------------------------------------ counters


async def test_usage_counters_add_up_under_concurrency(kit: StoreKit) -> None:
    first, second = kit.make(), kit.make()
    adds = [
        (first if i % 2 else second).add_usage(
            "alice@example.com", "2026-11-19", {"requests": 1, "cost": 0.25, "tokens": 10}
        )
        for i in range(24)
    ]
    results = await asyncio.gather(*adds)
    assert max(r["requests"] for r in results) == 24
    assert await first.usage_totals("alice@example.com", "2026-11-19") == {
        "cost": 6.0,
        "requests": 24.0,
        "tokens": 240.0,
    }
    assert await second.usage_totals("alice@example.com", "2026-11-20") == {}
    assert await second.usage_totals("bob", "2026-11-19") == {}


# ------------------------------------------------------------------ the sweep


async def test_the_sweep_deletes_unused_scopes_whole_and_remembers_when(kit: StoreKit) -> None:
    store = kit.make()
    start = kit.clock.now
    await store.put("session", "old", {}, scope="conv-old")
    await store.put("approval", "old-a", {}, scope="conv-old", status="pending")
    await store.put("session", "kept", {}, scope="conv-kept")
    await store.put("tool-result", "loose-old", {})
    await store.put("approval", "live-a", {}, scope="conv-live", status="pending")
    await store.add_usage("alice", "day-1", {"requests": 1})
    await store.acquire_lease("conv-old", "tab", ttl=10)
    kit.clock.now = start + 100
    await store.put("session", "live", {}, scope="conv-live")  # the scope was used lately
    await store.put("tool-result", "loose-new", {})
    await store.add_usage("alice", "day-2", {"requests": 1})
    assert await store.last_sweep() is None
    deleted = await store.sweep(start + 50, keep_scopes={"conv-kept"})
    assert sorted((r.kind, r.key, r.scope) for r in deleted) == [
        ("approval", "old-a", "conv-old"),
        ("session", "old", "conv-old"),
        ("tool-result", "loose-old", None),
    ]
    left = {
        r.key
        for kind in ("session", "approval", "tool-result")
        for r in await store.list_records(kind)
    }
    assert left == {"kept", "live", "live-a", "loose-new"}
    assert await store.usage_totals("alice", "day-1") == {}
    assert await store.usage_totals("alice", "day-2") == {"requests": 1.0}
    assert await store.last_sweep() == kit.clock.now
    # One sweep per interval, whichever process asks first.
    other = kit.make()
    assert not await other.claim_sweep(every=600)
    kit.clock.now += 601
    assert await other.claim_sweep(every=600)
    assert not await store.claim_sweep(every=600)
    assert await store.last_sweep() == kit.clock.now


# ------------------------------------------------------------------ SQL: the schema


@pytest.fixture(params=["sqlite", "postgres"])
async def sql_kit(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StoreKit]:
    if request.param == "sqlite":
        location = f"sqlite+aiosqlite:///{tmp_path / 'store.db'}"
    else:
        location = request.getfixturevalue("postgres_url")
    made: list[Store] = []
    yield StoreKit(request.param, location, Clock(), made)
    for store in made:
        await store.close()


def _schema_diff(connection: sa.Connection) -> list[Any]:
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    context = MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE})
    return list(compare_metadata(context, METADATA))


def _revision(connection: sa.Connection) -> str | None:
    from alembic.runtime.migration import MigrationContext

    context = MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE})
    return context.get_current_revision()


async def test_an_empty_database_is_migrated_to_the_codes_schema(sql_kit: StoreKit) -> None:
    from deputy_shiny.persistence.sql_migrate import head_revision

    store = sql_kit.make()
    assert isinstance(store, SqlStore)
    await store.put("session", "s1", {"a": 1})  # the first use migrates
    async with store.engine.connect() as connection:
        assert await connection.run_sync(_revision) == head_revision()
        # The migrations build exactly the tables the code declares.
        assert await connection.run_sync(_schema_diff) == []
    # Several processes starting together: each checks, one migrates, all work.
    others = [sql_kit.make() for _ in range(3)]
    await asyncio.gather(*[s.get("session", "s1") for s in others])


async def test_a_schema_newer_than_the_code_is_refused(sql_kit: StoreKit) -> None:
    store = sql_kit.make()
    assert isinstance(store, SqlStore)
    await store.migrate()
    async with store.engine.begin() as connection:
        versions = sa.table(VERSION_TABLE, sa.column("version_num"))
        await connection.execute(sa.update(versions).values(version_num="9999_future"))
    with pytest.raises(StoreSchemaError, match="Upgrade deputy_shiny") as caught:
        await sql_kit.make().get("session", "s1")
    assert "9999_future" in str(caught.value)


async def test_an_old_schema_with_auto_migrate_off_is_refused_with_the_command(
    sql_kit: StoreKit,
) -> None:
    from deputy_shiny.persistence.sql_migrate import MIGRATE_COMMAND, main

    with pytest.raises(StoreSchemaError) as caught:
        await sql_kit.make(auto_migrate=False).put("session", "s1", {})
    message = str(caught.value)
    assert "automatic migration is off" in message and MIGRATE_COMMAND in message
    # The command it names migrates the database (run as the message says) ...
    url = message.split(f"{MIGRATE_COMMAND} ")[1].strip("'")
    assert await asyncio.to_thread(main, [url]) == 0
    # ... after which a store that may not migrate works.
    stored = await sql_kit.make(auto_migrate=False).put("session", "s1", {"ok": True})
    assert stored.revision == 1


# ------------------------------------------------------------------ SQL: a database that is down


async def test_a_database_that_refuses_connections_is_unavailable_at_once() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again: nothing listens there
    store = SqlStore(f"postgresql://nobody@127.0.0.1:{port}/db", key=KEY, connect_timeout=2)
    started = time.monotonic()
    with pytest.raises(StoreUnavailableError, match="cannot be reached"):
        await store.get("session", "s1")
    await store.close()
    assert time.monotonic() - started < 20  # 10x a quiet run


async def test_a_database_that_never_answers_is_unavailable_within_the_timeouts() -> None:
    with socket.socket() as silent:  # accepts connections (the kernel does), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        store = SqlStore(
            f"postgresql://nobody@127.0.0.1:{port}/db", key=KEY, connect_timeout=0.5, timeout=0.5
        )
        started = time.monotonic()
        with pytest.raises(StoreUnavailableError):
            await store.get("session", "s1")
        elapsed = time.monotonic() - started
        await store.close()
    assert 0.9 < elapsed < 10  # bounded by the timeouts (1 s here), with 10x headroom


class Proxy:
    """A TCP proxy to the database that the test can cut (dropping every connection)."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = 0
        self.server: asyncio.Server | None = None
        self.links: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._link, "127.0.0.1", self.port)
        self.port = self.server.sockets[0].getsockname()[1]

    async def cut(self) -> None:
        assert self.server is not None
        self.server.close()
        for writer in list(self.links):
            writer.transport.abort()
        await self.server.wait_closed()

    async def _link(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        self.links |= {writer, up_writer}

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            try:
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                sink.transport.abort()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))


async def test_a_database_down_mid_run_is_unavailable_then_works_again(
    postgres_url: str,
) -> None:
    url = sa.make_url(postgres_url)
    assert url.port is not None
    proxy = Proxy(url.port)
    await proxy.start()
    through = url.set(port=proxy.port).render_as_string(hide_password=False)
    store = SqlStore(through, key=KEY, connect_timeout=2, timeout=2)
    try:
        await store.put("session", "s1", {"n": 1})
        await proxy.cut()  # the database goes away, pooled connection and all
        for _ in range(2):
            with pytest.raises(StoreUnavailableError):
                await store.put("session", "s1", {"n": 2})
        await proxy.start()  # back, on the same port
        assert (await store.put("session", "s1", {"n": 3})).revision == 2
        got = await store.get("session", "s1")
        assert got is not None and got.payload == {"n": 3}
    finally:
        await store.close()
        await proxy.cut()


def test_a_url_of_another_database_is_refused_and_plain_urls_get_the_async_drivers() -> None:
    with pytest.raises(ConfigurationError, match="not 'mysql'"):
        SqlStore("mysql://app@db/deputy", key=KEY)
    with pytest.raises(ConfigurationError):
        SqlStore("not a url", key=KEY)
    assert SqlStore("sqlite://", key=KEY).url.drivername == "sqlite+aiosqlite"
    plain = SqlStore("postgresql://app:secret@db/deputy", key=KEY)
    assert plain.url.drivername == "postgresql+psycopg"
    assert "secret" not in repr(plain)


async def test_an_in_memory_sqlite_store_has_one_winner_too() -> None:
    """Its one shared connection (StaticPool) must not interleave two transactions."""
    async with SqlStore("sqlite+aiosqlite://", key=b"k" * 32) as store:
        await store.put("approval", "a1", {"tool": "send"}, status="pending")
        claims = [store.claim("approval", "a1", expect="pending", to="resuming") for _ in range(8)]
        won = [record for record in await asyncio.gather(*claims) if record is not None]
        assert len(won) == 1
