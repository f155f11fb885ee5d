"""Running the async API from synchronous code (scripts, notebooks without a loop).

Each thread gets one private event loop that is reused across calls, rather than a new
loop per call via ``asyncio.run``: litellm caches HTTP clients per loop, and a closed
loop would break the next request.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Coroutine, Iterator
from typing import Any, TypeVar

from ..errors import SyncInAsyncError

T = TypeVar("T")
_local = threading.local()


def _loop() -> asyncio.AbstractEventLoop:
    loop: asyncio.AbstractEventLoop | None = getattr(_local, "loop", None)
    if loop is None or loop.is_closed():
        loop = asyncio.new_event_loop()
        _local.loop = loop
    return loop


def ensure_no_running_loop(method: str) -> None:
    """Raise :class:`SyncInAsyncError` if called inside a running event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise SyncInAsyncError(
        f"{method}() blocks, so it cannot run inside a running event loop (Shiny, Jupyter, "
        f"async code). Use the async version there, e.g. `await agent.run_async(...)`."
    )


def run_sync(coro: Coroutine[Any, Any, T], method: str) -> T:
    """Run a coroutine to completion on this thread's private loop."""
    try:
        ensure_no_running_loop(method)
    except SyncInAsyncError:
        coro.close()
        raise
    return _loop().run_until_complete(coro)


def iterate_sync(agen: AsyncIterator[T], method: str) -> Iterator[T]:
    """Drive an async iterator step by step from synchronous code."""
    ensure_no_running_loop(method)
    loop = _loop()
    try:
        while True:
            try:
                yield loop.run_until_complete(agen.__anext__())
            except StopAsyncIteration:
                return
    finally:
        aclose = getattr(agen, "aclose", None)
        if aclose is not None:
            loop.run_until_complete(aclose())
