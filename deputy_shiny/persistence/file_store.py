"""``FileStore``: the :class:`~deputy_shiny.persistence.store.Store` on files under one folder.

The default store, for one machine (or several sharing a filesystem with working
``flock``)::

    <root>/                       0700
        .locks/<nn>.lock          64 lock files: an OS lock (fcntl.flock) per stripe
        records/<kind>/<key>.json one authenticated document per record
        leases/<name>.json        the holder, token and expiry of each lease
        counters/<sha256 of user>/<day>.json   a user's totals for one day
        sweep.json                when the last sweep was claimed

Every file is a document of :mod:`deputy_shiny.persistence.files` (atomic writes, never
through a symlink, HMAC under the record key), so a record edited by hand is refused on
read. A record's last use is its file's modification time. Whatever reads, changes and
writes a file back (a claim, a conditional put, a lease, a counter, the sweep's claim)
holds the lock of that file's stripe meanwhile: the kernel's lock, so processes exclude
each other too, and a process that dies lets go. The work runs in a worker thread, never
on the event loop. A folder that cannot be used (a network mount that is gone) raises
:class:`~deputy_shiny.errors.StoreUnavailableError`.

Examples:
    >>> import asyncio, tempfile
    >>> store = FileStore(tempfile.mkdtemp(), key=b"a key only this server holds")
    >>> async def main() -> list[str]:
    ...     await store.put("session", "s1", {"turns": []}, scope="conv1")
    ...     return [r.key for r in await store.list_records("session", scope="conv1")]
    >>> asyncio.run(main())
    ['s1']
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import os
import threading
import time
import weakref
from collections.abc import Callable, Collection, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

from ..errors import (
    PersistenceCorruptError,
    PersistenceError,
    PersistenceNotAuthenticError,
    StoreConflictError,
    StoreUnavailableError,
)
from .files import read_document, write_document
from .keys import record_key
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
)

__all__ = ["FileStore", "file_store_at"]

_RECORD = "store-record"
_LEASE = "store-lease"
_COUNTER = "store-counter"
_SWEEP = "store-sweep"
_STRIPES = 64
_T = TypeVar("_T")


class FileStore(Store):
    """The store on files under ``root`` (see :mod:`deputy_shiny.persistence.file_store`).

    Args:
        root: The folder (created, mode 0700, if missing).
        key: The record key (None: the server's, see :mod:`deputy_shiny.persistence.keys`).
        clock: The time in Unix seconds (tests pass a fake one).

    Examples:
        >>> import asyncio, tempfile
        >>> store = FileStore(tempfile.mkdtemp(), key=b"a key only this server holds")
        >>> lease = asyncio.run(store.acquire_lease("conv1", "tab-a", ttl=30))
        >>> lease.holder, asyncio.run(store.acquire_lease("conv1", "tab-b", ttl=30))
        ('tab-a', None)
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        key: bytes | str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.root = Path(root).absolute()
        self._secret = record_key(key)
        self._clock = clock
        self._made = False

    def __repr__(self) -> str:
        return f"FileStore({str(self.root)!r})"

    # ---------------------------------------------------------------- plumbing

    async def _run(self, fn: Callable[..., _T], *args: Any) -> _T:
        return await asyncio.to_thread(self._guarded, fn, *args)

    def _guarded(self, fn: Callable[..., _T], *args: Any) -> _T:
        try:
            self._layout()
            return fn(*args)
        except PersistenceError:
            raise
        except OSError as exc:
            raise StoreUnavailableError(
                f"The file store {self.root} cannot be used ({exc.strerror or exc})."
            ) from None

    def _layout(self) -> None:
        if self._made:
            return
        for sub in ("", ".locks", "records", "leases", "counters"):
            (self.root / sub).mkdir(mode=0o700, parents=True, exist_ok=True)
        self._made = True

    @contextlib.contextmanager
    def _locked(self, *parts: str) -> Iterator[None]:
        """Hold the OS lock of the stripe that ``parts`` fall in."""
        stripe = int.from_bytes(hashlib.sha256("\0".join(parts).encode()).digest()[:4]) % _STRIPES
        path = self.root / ".locks" / f"{stripe:02d}.lock"
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing lets the lock go

    def _record_path(self, kind: str, key: str) -> Path:
        return self.root / "records" / kind / f"{key}.json"

    def _stamp(self, path: Path, when: float | None = None) -> None:
        now = self._clock() if when is None else when
        os.utime(path, (now, now), follow_symlinks=False)

    def _write(self, path: Path, kind: str, payload: Mapping[str, Any]) -> None:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_document(path, kind, payload, key=self._secret)
        self._stamp(path)

    def _read(self, path: Path, kind: str) -> dict[str, Any] | None:
        if not os.path.lexists(path):
            return None
        try:
            return read_document(path, kind, key=self._secret)
        except PersistenceCorruptError:
            raise
        except PersistenceError:
            if not os.path.lexists(path):  # removed meanwhile
                return None
            raise

    # ---------------------------------------------------------------- records

    def _load(self, kind: str, key: str) -> StoredRecord | None:
        path = self._record_path(kind, key)
        body = self._read(path, _RECORD)
        if body is None:
            return None
        if body.get("kind") != kind or body.get("key") != key:
            raise PersistenceNotAuthenticError(
                f"{path}: is an authentic record of another kind or key, moved here; not read."
            )
        try:
            return StoredRecord(
                kind=kind,
                key=key,
                payload=dict(body["payload"]),
                scope=body["scope"],
                status=body["status"],
                revision=int(body["revision"]),
                updated_at=path.lstat().st_mtime,
            )
        except (KeyError, TypeError, ValueError):
            raise PersistenceCorruptError(f"{path}: is not a store record.") from None

    def _store(
        self,
        kind: str,
        key: str,
        payload: Mapping[str, Any],
        scope: str | None,
        status: str | None,
        revision: int,
    ) -> StoredRecord:
        path = self._record_path(kind, key)
        body = {
            "kind": kind,
            "key": key,
            "scope": scope,
            "status": status,
            "revision": revision,
            "payload": dict(payload),
        }
        self._write(path, _RECORD, body)
        return StoredRecord(kind, key, dict(payload), scope, status, revision, self._clock())

    async def get(self, kind: str, key: str) -> StoredRecord | None:
        """See :meth:`Store.get`."""
        check_kind(kind)
        check_name(key)
        return await self._run(self._load, kind, key)

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

        def put() -> StoredRecord:
            with self._locked("record", kind, key):
                try:
                    old = self._load(kind, key)
                except PersistenceCorruptError:
                    if expect_revision is not None:
                        raise
                    old = None  # an unconditional put replaces what is not authentic
                revision = 0 if old is None else old.revision
                if expect_revision is not None and expect_revision != revision:
                    raise StoreConflictError(
                        f"The {kind} record {key!r} is at revision {revision}, not "
                        f"{expect_revision}: another writer changed it first."
                    )
                return self._store(kind, key, payload, scope, status, revision + 1)

        return await self._run(put)

    async def delete(self, kind: str, key: str) -> bool:
        """See :meth:`Store.delete`."""
        check_kind(kind)
        check_name(key)

        def delete() -> bool:
            with self._locked("record", kind, key):
                try:
                    os.unlink(self._record_path(kind, key))
                except FileNotFoundError:
                    return False
                return True

        return await self._run(delete)

    async def touch(self, kind: str, key: str) -> bool:
        """See :meth:`Store.touch`."""
        check_kind(kind)
        check_name(key)

        def touch() -> bool:
            try:
                self._stamp(self._record_path(kind, key))
            except FileNotFoundError:
                return False
            return True

        return await self._run(touch)

    def _keys(self, kind: str) -> list[str]:
        folder = self.root / "records" / kind
        if not folder.is_dir():
            return []
        return sorted(
            entry.name[: -len(".json")]
            for entry in os.scandir(folder)
            if entry.name.endswith(".json") and not entry.name.startswith(".")
        )

    async def list_records(
        self, kind: str, *, scope: str | None = None, status: str | None = None
    ) -> list[StoredRecord]:
        """See :meth:`Store.list_records`."""
        check_kind(kind)

        def listed() -> list[StoredRecord]:
            found = []
            for key in self._keys(kind):
                record = self._load(kind, key)
                if record is None or (scope is not None and record.scope != scope):
                    continue
                if status is None or record.status == status:
                    found.append(record)
            return found

        return await self._run(listed)

    def _all_refs(self) -> Iterator[tuple[RecordRef, float]]:
        """Every record (its ref and last use); ones that fail authentication are left."""
        records = self.root / "records"
        for kind in sorted(os.listdir(records)):
            if not (records / kind).is_dir():
                continue
            for key in self._keys(kind):
                try:
                    record = self._load(kind, key)
                except (PersistenceCorruptError, PersistenceError):
                    continue  # not ours to judge here: a reader reports it
                if record is not None:
                    yield RecordRef(kind, key, record.scope), record.updated_at

    async def delete_scope(self, scope: str) -> int:
        """See :meth:`Store.delete_scope`."""
        check_name(scope, "scope")

        def delete() -> int:
            count = 0
            for ref, _ in list(self._all_refs()):
                if ref.scope == scope:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(self._record_path(ref.kind, ref.key))
                        count += 1
            return count

        return await self._run(delete)

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

        def claim() -> StoredRecord | None:
            with self._locked("record", kind, key):
                record = self._load(kind, key)
                if record is None or record.status not in statuses:
                    return None
                body = record.payload if payload is None else payload
                return self._store(kind, key, body, record.scope, to, record.revision + 1)

        return await self._run(claim)

    # ---------------------------------------------------------------- leases

    def _lease_path(self, name: str) -> Path:
        return self.root / "leases" / f"{name}.json"

    def _load_lease(self, name: str) -> Lease | None:
        path = self._lease_path(name)
        body = self._read(path, _LEASE)
        if body is None:
            return None
        try:
            lease = Lease(
                name=str(body["name"]),
                holder=str(body["holder"]),
                token=int(body["token"]),
                expires_at=float(body["expires_at"]),
            )
        except (KeyError, TypeError, ValueError):
            raise PersistenceCorruptError(f"{path}: is not a lease.") from None
        if lease.name != name:
            raise PersistenceNotAuthenticError(f"{path}: is another lease, moved here.")
        return lease

    def _save_lease(self, lease: Lease) -> Lease:
        body = {
            "name": lease.name,
            "holder": lease.holder,
            "token": lease.token,
            "expires_at": lease.expires_at,
        }
        self._write(self._lease_path(lease.name), _LEASE, body)
        return lease

    async def acquire_lease(
        self, name: str, holder: str, ttl: float, *, take_over: bool = False
    ) -> Lease | None:
        """See :meth:`Store.acquire_lease`."""
        check_name(name, "lease name")
        check_name(holder, "lease holder")

        def acquire() -> Lease | None:
            with self._locked("lease", name):
                now = self._clock()
                old = self._load_lease(name)
                if old is not None and old.holder == holder:
                    return self._save_lease(
                        Lease(name, holder, old.token, now + ttl)
                    )  # ours already: renewed, same token
                if old is not None and old.expires_at > now and not take_over:
                    return None
                token = 1 if old is None else old.token + 1
                return self._save_lease(Lease(name, holder, token, now + ttl))

        return await self._run(acquire)

    async def renew_lease(self, lease: Lease, ttl: float) -> Lease | None:
        """See :meth:`Store.renew_lease`."""
        check_name(lease.name, "lease name")

        def renew() -> Lease | None:
            with self._locked("lease", lease.name):
                now = self._clock()
                old = self._load_lease(lease.name)
                if old is None or (old.holder, old.token) != (lease.holder, lease.token):
                    return None
                return self._save_lease(Lease(lease.name, lease.holder, lease.token, now + ttl))

        return await self._run(renew)

    async def release_lease(self, lease: Lease) -> bool:
        """See :meth:`Store.release_lease`."""
        check_name(lease.name, "lease name")

        def release() -> bool:
            with self._locked("lease", lease.name):
                old = self._load_lease(lease.name)
                if old is None or (old.holder, old.token) != (lease.holder, lease.token):
                    return False
                # Kept (expired at once), so the next holder's token still grows.
                self._save_lease(Lease(lease.name, lease.holder, lease.token, 0.0))
                return True

        return await self._run(release)

    async def lease_holder(self, name: str) -> Lease | None:
        """See :meth:`Store.lease_holder`."""
        check_name(name, "lease name")

        def holder() -> Lease | None:
            lease = self._load_lease(name)
            return lease if lease is not None and lease.expires_at > self._clock() else None

        return await self._run(holder)

    # ---------------------------------------------------------------- counters

    def _counter_path(self, user: str, day: str) -> Path:
        folder = hashlib.sha256(user.encode("utf-8")).hexdigest()[:40]
        return self.root / "counters" / folder / f"{day}.json"

    def _totals(self, user: str, day: str) -> dict[str, float]:
        path = self._counter_path(user, day)
        body = self._read(path, _COUNTER)
        if body is None:
            return {}
        if body.get("user") != user or body.get("day") != day:
            raise PersistenceNotAuthenticError(f"{path}: is another user's counter, moved here.")
        totals = body.get("totals")
        if not isinstance(totals, dict):
            raise PersistenceCorruptError(f"{path}: is not a counter.")
        return {str(k): float(v) for k, v in totals.items()}

    async def add_usage(
        self, user: str, day: str, amounts: Mapping[str, float]
    ) -> dict[str, float]:
        """See :meth:`Store.add_usage`."""
        check_user(user)
        check_day(day)
        adding = {check_kind(metric, "metric"): float(value) for metric, value in amounts.items()}

        def add() -> dict[str, float]:
            with self._locked("counter", user, day):
                totals = self._totals(user, day)
                for metric, value in adding.items():
                    totals[metric] = totals.get(metric, 0.0) + value
                body = {"user": user, "day": day, "totals": totals}
                self._write(self._counter_path(user, day), _COUNTER, body)
                return dict(sorted(totals.items()))

        return await self._run(add)

    async def usage_totals(self, user: str, day: str) -> dict[str, float]:
        """See :meth:`Store.usage_totals`."""
        check_user(user)
        check_day(day)
        return await self._run(lambda: dict(sorted(self._totals(user, day).items())))

    # ---------------------------------------------------------------- the sweep

    async def sweep(self, cutoff: float, *, keep_scopes: Collection[str] = ()) -> list[RecordRef]:
        """See :meth:`Store.sweep`."""
        kept = set(keep_scopes)

        def sweep() -> list[RecordRef]:
            refs = list(self._all_refs())
            newest: dict[str, float] = {}
            for ref, used in refs:
                if ref.scope is not None:
                    newest[ref.scope] = max(used, newest.get(ref.scope, used))
            deleted = []
            for ref, used in refs:
                last = used if ref.scope is None else newest[ref.scope]
                if last >= cutoff or ref.scope in kept:
                    continue
                path = self._record_path(ref.kind, ref.key)
                with (
                    self._locked("record", ref.kind, ref.key),
                    contextlib.suppress(FileNotFoundError),
                ):
                    if path.lstat().st_mtime < cutoff:  # not used meanwhile
                        path.unlink()
                        deleted.append(ref)
            self._sweep_files(cutoff)
            self._write(self.root / "sweep.json", _SWEEP, {"at": self._clock()})
            return deleted

        return await self._run(sweep)

    def _sweep_files(self, cutoff: float) -> None:
        """Counters last added to, and leases that expired, before ``cutoff``."""
        for folder in (self.root / "counters").iterdir():
            for path in folder.glob("*.json"):
                if path.lstat().st_mtime < cutoff:
                    path.unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                folder.rmdir()  # only when empty
        for path in (self.root / "leases").glob("*.json"):
            name = path.name[: -len(".json")]
            with self._locked("lease", name):
                try:
                    lease = self._load_lease(name)
                except PersistenceError:
                    continue
                if lease is not None and lease.expires_at < cutoff:
                    path.unlink(missing_ok=True)

    def _last_sweep(self) -> float | None:
        body = self._read(self.root / "sweep.json", _SWEEP)
        return None if body is None else float(body["at"])

    async def claim_sweep(self, every: float) -> bool:
        """See :meth:`Store.claim_sweep`."""

        def claim() -> bool:
            with self._locked("sweep"):
                now = self._clock()
                last = self._last_sweep()
                if last is not None and now - last < every:
                    return False
                self._write(self.root / "sweep.json", _SWEEP, {"at": now})
                return True

        return await self._run(claim)

    async def last_sweep(self) -> float | None:
        """See :meth:`Store.last_sweep`."""
        return await self._run(self._last_sweep)


_SHARED: weakref.WeakValueDictionary[Path, FileStore] = weakref.WeakValueDictionary()
_SHARED_LOCK = threading.Lock()


def file_store_at(root: str | os.PathLike[str]) -> FileStore:
    """The one :class:`FileStore` of this process on ``root`` under the server's record
    key: what a directory option (``approval_dir``, ``checkpoint_dir``, ``offload_dir``)
    is a shorthand for. One per folder, so the agents of one folder share one store
    (and its one loop thread, :func:`~deputy_shiny.persistence.store_bridge.bridge_for`).

    Examples:
        >>> import tempfile
        >>> folder = tempfile.mkdtemp()
        >>> file_store_at(folder) is file_store_at(folder + "/.")
        True
    """
    path = Path(os.path.realpath(root))
    with _SHARED_LOCK:
        store = _SHARED.get(path)
        if store is None:
            store = FileStore(path)
            _SHARED[path] = store
        return store
