"""The MCP loop: one process-wide event loop thread that owns every MCP connection.

A connection must live on a loop that keeps running between calls: a script's
``agent.run_sync`` loop stops between calls, and a Shiny app's loop must not carry
server startups. So every connection's owner task runs here, on a daemon thread
started on first use, and callers on any loop or thread reach it through
:func:`on_mcp_loop` (async) or :func:`block_on_mcp_loop` (sync). Cancelling the
awaiting caller cancels the work on the MCP loop too.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from .._sync import ensure_no_running_loop

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None


def mcp_loop() -> asyncio.AbstractEventLoop:
    """The MCP loop, started on first use."""
    global _loop, _thread
    with _lock:
        if _loop is None or _thread is None or not _thread.is_alive():
            loop = asyncio.new_event_loop()
            ready = threading.Event()

            def run() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(ready.set)
                loop.run_forever()

            thread = threading.Thread(target=run, name="deputy-shiny-mcp", daemon=True)
            thread.start()
            ready.wait()
            _loop, _thread = loop, thread
        return _loop


def on_mcp_thread() -> bool:
    """True when called from the MCP loop's own thread."""
    return _thread is not None and threading.current_thread() is _thread


async def on_mcp_loop(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on the MCP loop and await its result from any loop."""
    loop = mcp_loop()
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:  # pragma: no cover - only async callers come here
        running = None
    if running is loop:
        return await coro
    future = asyncio.run_coroutine_threadsafe(coro, loop)
    return await asyncio.wrap_future(future)


def block_on_mcp_loop(coro: Coroutine[Any, Any, T], method: str) -> T:
    """Run ``coro`` on the MCP loop and wait for it (scripts; never inside a running loop)."""
    try:
        ensure_no_running_loop(method)
    except Exception:
        coro.close()
        raise
    return submit(coro).result()


def submit(coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
    """Schedule ``coro`` on the MCP loop from any thread; the future has its result."""
    return asyncio.run_coroutine_threadsafe(coro, mcp_loop())
