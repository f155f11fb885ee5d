"""Timeouts whose timer does not keep the caller's context alive.

``asyncio.timeout`` schedules its timer with ``loop.call_at`` in the current context.
CPython's ``Handle.cancel`` drops a timer's callback but keeps its context, and a
cancelled timer leaves the loop's heap only when it reaches the head (about its due
time, on a server that always has earlier timers) or when cancelled timers are most of
the heap. Code running for a Shiny session runs in a context that holds the session
(Shiny's session context variable), so a 600 s approval wait that ended after 2 s kept
the session (its Agent, chat, modal queue) alive for another 598 s after the browser
left. :func:`timeout` schedules the same timer in an empty context instead; what it
cancels on expiry is still only the current task.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable
from types import TracebackType


class DetachedTimeout:
    """``asyncio.timeout(seconds)`` whose timer is scheduled in an empty context."""

    def __init__(self, seconds: float | None) -> None:
        self._seconds = seconds
        self._inner = asyncio.timeout(None)

    async def __aenter__(self) -> asyncio.Timeout:
        await self._inner.__aenter__()
        if self._seconds is not None:
            when = asyncio.get_running_loop().time() + self._seconds
            contextvars.Context().run(self._inner.reschedule, when)
        return self._inner

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._inner.__aexit__(exc_type, exc, tb)


def timeout(seconds: float | None) -> DetachedTimeout:
    """``asyncio.timeout(seconds)`` without tying the caller's context to the loop.

    Examples:
        >>> import asyncio
        >>> async def main() -> str:
        ...     try:
        ...         async with timeout(0.01):
        ...             await asyncio.sleep(1)
        ...     except TimeoutError:
        ...         return "timed out"
        ...     return "finished"
        >>> asyncio.run(main())
        'timed out'
    """
    return DetachedTimeout(seconds)


def call_at(
    loop: asyncio.AbstractEventLoop, when: float, callback: Callable[[], object]
) -> asyncio.TimerHandle:
    """``loop.call_at(when, callback)`` in an empty context: cancelling it leaves no
    reference to the caller's context (its session) in the loop's heap.

    Examples:
        >>> import asyncio
        >>> async def main() -> list[str]:
        ...     loop, rang = asyncio.get_running_loop(), []
        ...     call_at(loop, loop.time() + 0.01, lambda: rang.append("rang"))
        ...     await asyncio.sleep(0.05)
        ...     return rang
        >>> asyncio.run(main())
        ['rang']
    """
    return loop.call_at(when, callback, context=contextvars.Context())


__all__ = ["DetachedTimeout", "call_at", "timeout"]
