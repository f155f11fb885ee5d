"""The MCP loop: one process-wide event loop thread that owns every MCP connection.

A connection must live on a loop that keeps running between calls: a script's
``agent.run_sync`` loop stops between calls, and a Shiny app's loop must not carry
server startups. So every connection's owner task runs here, on a daemon thread
started on first use, and callers on any loop or thread reach it through
:func:`on_mcp_loop` (async) or :func:`block_on_mcp_loop` (sync). Cancelling the
awaiting caller cancels the work on the MCP loop too.

An app whose own loop lives as long as its connections (a Shiny app) may open them on
that loop instead (``McpConnection.open(..., loop="current")``): a call then needs no
hop between threads, which under load costs a GIL hand-over each way. The functions
here take the owning loop for that case.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from .._util.sync import ensure_no_running_loop
from ..errors import McpConnectionError

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


def _check_alive(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any]) -> None:
    if loop.is_closed() or not loop.is_running():
        coro.close()
        raise McpConnectionError(
            "the event loop that owns this MCP connection has stopped, so the connection "
            "is closed; open a new one"
        )


async def on_loop(coro: Coroutine[Any, Any, T], loop: asyncio.AbstractEventLoop | None = None) -> T:
    """Run ``coro`` on ``loop`` (default: the MCP loop) and await its result from any loop.

    On ``loop`` itself this is a plain await; from another loop it hops threads.
    """
    loop = loop or mcp_loop()
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:  # pragma: no cover - only async callers come here
        running = None
    if running is loop:
        return await coro
    _check_alive(loop, coro)
    future = asyncio.run_coroutine_threadsafe(coro, loop)
    return await asyncio.wrap_future(future)


async def on_mcp_loop(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on the MCP loop and await its result from any loop."""
    return await on_loop(coro)


def block_on_mcp_loop(
    coro: Coroutine[Any, Any, T], method: str, loop: asyncio.AbstractEventLoop | None = None
) -> T:
    """Run ``coro`` on ``loop`` (default: the MCP loop) and wait for it (scripts; never
    inside a running loop)."""
    try:
        ensure_no_running_loop(method)
    except Exception:
        coro.close()
        raise
    return submit(coro, loop).result()


def submit(
    coro: Coroutine[Any, Any, T], loop: asyncio.AbstractEventLoop | None = None
) -> concurrent.futures.Future[T]:
    """Schedule ``coro`` on ``loop`` (default: the MCP loop) from any thread."""
    loop = loop or mcp_loop()
    _check_alive(loop, coro)
    return asyncio.run_coroutine_threadsafe(coro, loop)
