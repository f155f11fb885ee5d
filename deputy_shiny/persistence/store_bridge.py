"""One event loop thread that runs a :class:`~deputy_shiny.persistence.store.Store`'s coroutines.

The durable parts of the runtime (approvals, checkpoint journals, offloaded tool
results) use a store from two kinds of callers: coroutines on the app's event loop (the
engine pausing and resuming an approval) and plain functions in worker threads (a file
tool journaling a file, ``read_tool_result``). A :class:`StoreBridge` serves both
without blocking any event loop on database I/O: every call runs on its own loop, in a
daemon thread started on first use; :meth:`StoreBridge.call` awaits it from a
coroutine (the caller's loop stays free), :meth:`StoreBridge.call_sync` waits for it
from a thread.

One loop for all of a store's work also keeps an async database engine on the loop it
was first used on (SQLAlchemy's pooled connections belong to one loop), whichever loop
or thread the caller runs on: ``asyncio.run`` per ``run_sync`` call, the Shiny loop,
worker threads. :func:`bridge_for` gives the one bridge of a store. After ``fork`` the
child starts its own thread (a fork copies only the calling thread).

Examples:
    >>> import tempfile
    >>> from deputy_shiny.persistence import FileStore
    >>> store = FileStore(tempfile.mkdtemp(), key=b"a key only this server holds")
    >>> bridge = bridge_for(store)
    >>> record = bridge.call_sync(store.put, "note", "n1", {"text": "hi"})
    >>> bridge.call_sync(store.get, "note", "n1").payload
    {'text': 'hi'}
    >>> bridge_for(store) is bridge
    True
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import hashlib
import os
import threading
import weakref
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from ..errors import ConfigurationError, PersistenceError, StoreUnavailableError
from .store import Lease, Store, check_name

__all__ = ["StoreBridge", "bridge_for", "keep_lease", "scope_for"]

_T = TypeVar("_T")
_BRIDGES_LOCK = threading.Lock()
_WAIT = 120.0  # seconds a caller waits at most; a store bounds its own calls far below


class StoreBridge:
    """Runs one store's coroutines on a loop thread of its own (see the module docs).

    Examples:
        >>> import tempfile
        >>> from deputy_shiny.persistence import FileStore
        >>> bridge = StoreBridge(FileStore(tempfile.mkdtemp(), key=b"k" * 16))
        >>> bridge.call_sync(bridge.store.usage_totals, "alice", "2026-11-19")
        {}
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pid = 0

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._pid != os.getpid():
                # A fork copied the loop object but not its thread: start another.
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name="deputy-store-loop", daemon=True
                )
                thread.start()
                self._loop, self._thread, self._pid = loop, thread, os.getpid()
                # The thread ends with the bridge (the store gone), not with the process.
                weakref.finalize(self, _stop_loop, loop)
            return self._loop

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the loop thread (the store was closed); a later call starts another."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
            if loop is None or self._pid != os.getpid():
                return
        _stop_loop(loop)
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
            if not thread.is_alive():
                loop.close()

    def submit(
        self, fn: Callable[..., Coroutine[Any, Any, _T]], *args: Any, **kwargs: Any
    ) -> concurrent.futures.Future[_T]:
        """Start ``fn(*args, **kwargs)`` on the store's loop; its future."""
        loop = self._running_loop()
        if _current_loop() is loop:
            raise RuntimeError("StoreBridge calls cannot be made from the store's own loop")
        return asyncio.run_coroutine_threadsafe(fn(*args, **kwargs), loop)

    def call_sync(
        self, fn: Callable[..., Coroutine[Any, Any, _T]], *args: Any, **kwargs: Any
    ) -> _T:
        """Run ``fn(*args, **kwargs)`` on the store's loop and wait for it (from a thread:
        on an event loop use :meth:`call`)."""
        future = self.submit(fn, *args, **kwargs)
        try:
            return future.result(_WAIT)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise StoreUnavailableError(
                f"The store {self.store!r} did not answer in {_WAIT:.0f} s."
            ) from None

    async def call(
        self, fn: Callable[..., Coroutine[Any, Any, _T]], *args: Any, **kwargs: Any
    ) -> _T:
        """Run ``fn(*args, **kwargs)`` on the store's loop; the caller's loop stays free
        (already on the store's loop, it is simply awaited)."""
        if self._loop is not None and _current_loop() is self._loop:
            return await fn(*args, **kwargs)
        return await asyncio.wrap_future(self.submit(fn, *args, **kwargs))


def _stop_loop(loop: asyncio.AbstractEventLoop) -> None:
    with contextlib.suppress(RuntimeError):  # closed already
        loop.call_soon_threadsafe(_cancel_then_stop, loop)


def _cancel_then_stop(loop: asyncio.AbstractEventLoop) -> None:
    """On the loop: cancel what still runs there (a run's lease renewal whose run never
    ended), then stop once the cancellations are handled, so no task is left pending
    for the garbage collector to report."""
    for task in asyncio.all_tasks(loop):
        task.cancel()
    loop.call_soon(loop.stop)


def _current_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def bridge_for(store: Store) -> StoreBridge:
    """The one :class:`StoreBridge` of ``store`` (made on first use)."""
    with _BRIDGES_LOCK:
        # Kept on the store itself: a process-wide table would keep every store alive.
        bridge = store.__dict__.get("_deputy_bridge")
        if not isinstance(bridge, StoreBridge):
            bridge = StoreBridge(store)
            store.__dict__["_deputy_bridge"] = bridge
        return bridge


def scope_for(session_id: str) -> str:
    """The store scope of a session's records: its id when that is a valid store name,
    else a digest of it (any non-empty string is a session id).

    Examples:
        >>> scope_for("conv1"), scope_for("a b").startswith("session-")
        ('conv1', True)
    """
    try:
        return check_name(session_id, "scope")
    except ConfigurationError:
        return "session-" + hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()


async def keep_lease(
    store: Store,
    current: Callable[[], Lease | None],
    renewed: Callable[[Lease], None],
    ttl: float,
) -> None:
    """Renew a held lease every third of ``ttl`` while ``current()`` returns it (its
    holder sets it to None when done); ``renewed`` gets each renewal. It stops when the
    lease was lost (the holder's next conditional write learns it); a store that is down
    for now is tried again (the lease may lapse meanwhile). Run it on the store's loop.
    """
    while current() is not None:
        await asyncio.sleep(ttl / 3)
        lease = current()
        if lease is None:
            return
        try:
            again = await store.renew_lease(lease, ttl)
        except PersistenceError:
            continue
        if again is None:
            return
        renewed(again)
