"""The worker threads sync tools run in: one bounded pool per process, apart from asyncio's.

``asyncio.to_thread`` shares the event loop's default executor with everything else
that needs a thread now and then (the kit's workspace clean-up, litellm's warm-up,
DNS). If sync tools used it too, a few sessions running slow tools would take every
worker, and those small jobs would wait behind them. Tools get their own pool instead:
when it is full, further tool calls queue (in any session) and nothing else waits.

Size it once at startup with :func:`set_tool_threads` or the ``DEPUTY_TOOL_THREADS``
environment variable (default 16).

Examples:
    >>> import asyncio
    >>> from deputy_shiny.tools._tool_threads import run_in_tool_thread
    >>> asyncio.run(run_in_tool_thread(sum, [1, 2, 3]))
    6
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")

DEFAULT_TOOL_THREADS = 16
ENV_VAR = "DEPUTY_TOOL_THREADS"

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_size: int | None = None


def _configured_size() -> int:
    raw = os.environ.get(ENV_VAR, "").strip()
    if not raw:
        return DEFAULT_TOOL_THREADS
    try:
        size = int(raw)
    except ValueError:
        raise ValueError(f"{ENV_VAR} must be a whole number of threads, not {raw!r}") from None
    return _checked(size)


def _checked(size: int) -> int:
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"the tool thread pool needs at least 1 thread, not {size!r}")
    return size


def set_tool_threads(max_workers: int) -> None:
    """Size the process's pool of threads for sync tools (call it once, at startup).

    Calls already running finish in the old pool; later calls use the new one.

    Examples:
        >>> from deputy_shiny import set_tool_threads, tool_threads
        >>> set_tool_threads(8); tool_threads()
        8
    """
    global _pool, _size
    size = _checked(max_workers)
    with _lock:
        old, _pool, _size = _pool, None, size
    if old is not None:
        old.shutdown(wait=False)


def tool_threads() -> int:
    """How many threads sync tools may use at once in this process.

    Examples:
        >>> from deputy_shiny import tool_threads
        >>> tool_threads() >= 1
        True
    """
    with _lock:
        if _size is None:
            return _configured_size()
        return _size


def _executor() -> ThreadPoolExecutor:
    global _pool, _size
    with _lock:
        if _pool is None:
            if _size is None:
                _size = _configured_size()
            _pool = ThreadPoolExecutor(max_workers=_size, thread_name_prefix="deputy-tool")
        return _pool


async def run_in_tool_thread(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """Run ``fn`` in the tool pool, with the caller's context variables (as ``to_thread``)."""
    context = contextvars.copy_context()
    call = functools.partial(context.run, fn, *args, **kwargs)
    return await asyncio.get_running_loop().run_in_executor(_executor(), call)
