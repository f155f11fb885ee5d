"""The kit's link to a :class:`~deputy_shiny.persistence.Store`: one loop thread per store.

A store's calls are coroutines, and an SQL store's connections belong to the event
loop that opened them. The kit's calls come from the Shiny loop (a session's tasks),
and one comes from a session's synchronous start (the saved conversation's ids, which
the app's ``agent_factory`` needs before anything is awaited). So every call to a
store goes through :class:`KitStore`, which runs the store on an event loop of its own
in a daemon thread: an ``await`` from the Shiny loop waits there without blocking it,
the synchronous start waits a bounded time (:data:`START_WAIT`), and the store's
connections live on one loop whatever loop the caller is on.

That loop is the store's :class:`~deputy_shiny.persistence.store_bridge.StoreBridge`,
the one the sessions' agents use for their approvals, checkpoint journals and offloaded
results (``Agent(store=...)``): one engine, one pool and one thread per store for the
whole process, however many sessions there are.

Examples:
    >>> import asyncio, tempfile
    >>> from deputy_shiny.persistence import FileStore
    >>> link = KitStore(FileStore(tempfile.mkdtemp(), key=b"a key only this server holds"))
    >>> link.wait(lambda store: store.add_usage("alice", "2026-11-19", {"requests": 1}))
    {'requests': 1.0}
    >>> link.close()
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from ..errors import StoreUnavailableError
from ..persistence.store import Store
from ..persistence.store_bridge import bridge_for

logger = logging.getLogger(__name__)

__all__ = ["FIRST_WAIT", "START_WAIT", "KitStore", "open_store"]

T = TypeVar("T")

START_WAIT = 3.0
"""Seconds a session's start waits for the store (it holds up the Shiny loop meanwhile:
a store that does not answer in time leaves that session unsaved, and says so)."""
FIRST_WAIT = 15.0
"""The same before the store ever answered (it is being opened and its schema checked
or migrated: started as the app starts, see :meth:`KitStore.warm_up`)."""


def open_store(store: Store | str) -> Store:
    """``store`` as a Store: a SQLAlchemy URL opens a
    :class:`~deputy_shiny.persistence.SqlStore` (imported only then)."""
    if isinstance(store, Store):
        return store
    from ..persistence.sql_store import SqlStore

    return SqlStore(store)


class KitStore:
    """A store run on its own event loop thread (see :mod:`._kit_store`).

    Args:
        store: The store; from now on only this object calls it.

    Examples:
        >>> import tempfile
        >>> from deputy_shiny.persistence import FileStore
        >>> link = KitStore(FileStore(tempfile.mkdtemp(), key=b"a key only this server holds"))
        >>> link.wait(lambda store: store.lease_holder("c1")) is None
        True
        >>> link.close()
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        self._bridge = bridge_for(store)  # the loop its agents use too
        self._closed = False
        self.answered = False  # the store has answered a call (it is open)

    def warm_up(self) -> None:
        """Open the store now, in the background (an SQL store imports SQLAlchemy and
        checks or migrates its schema), so the first session does not wait for it."""
        self.later(lambda store: store.lease_holder("warm-up"), "opening the store")

    def __repr__(self) -> str:
        return f"KitStore({self.store!r})"

    def _submit(self, call: Callable[[Store], Awaitable[T]]) -> concurrent.futures.Future[T]:
        async def run() -> T:
            result = await call(self.store)
            self.answered = True
            return result

        if self._closed:
            raise StoreUnavailableError(f"{self!r} is closed.")
        return self._bridge.submit(run)

    async def run(self, call: Callable[[Store], Awaitable[T]]) -> T:
        """``await call(store)`` on the store's loop; the caller's loop is never blocked."""
        return await asyncio.wrap_future(self._submit(call))

    def wait(self, call: Callable[[Store], Awaitable[T]], timeout: float | None = None) -> T:
        """``call(store)`` from synchronous code, waiting at most ``timeout`` seconds
        (None: :data:`START_WAIT`, or :data:`FIRST_WAIT` before the store ever answered).

        Raises:
            StoreUnavailableError: the store did not answer in time (the call goes on
                on the store's loop; its result is dropped).
        """
        if timeout is None:
            timeout = START_WAIT if self.answered else FIRST_WAIT
        future = self._submit(call)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise StoreUnavailableError(
                f"The store did not answer within {timeout:g} seconds."
            ) from None

    def later(self, call: Callable[[Store], Awaitable[Any]], what: str) -> None:
        """Run ``call(store)`` without waiting for it; a failure is logged (``what`` it was)."""

        def done(future: concurrent.futures.Future[Any]) -> None:
            if not future.cancelled() and future.exception() is not None:
                logger.warning("%s failed: %s", what, future.exception())

        self._submit(call).add_done_callback(done)

    def close(self, timeout: float = 5.0) -> None:
        """Close the store and stop its thread (the link may not be used after)."""
        if self._closed:
            return

        async def drain_and_close(store: Store) -> None:
            # Calls still under way (a lease let go as a session ended) finish first.
            others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            if others:
                await asyncio.wait(others, timeout=timeout / 2)
            await store.close()

        try:
            self._submit(drain_and_close).result(timeout)
        except Exception:  # closing is best effort: the process may be ending
            logger.warning("closing the store failed", exc_info=True)
        self._closed = True
        self._bridge.stop(timeout)
