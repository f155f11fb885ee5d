"""Interrupting a run at the exact await it is parked on, from any thread.

A run spends its time awaiting: the next streamed chunk, a tool, an approval. To stop
it promptly we cancel that await only: :meth:`Interrupter.guard` records which task is
waiting, and :meth:`Interrupter.request` cancels it with ``Task.cancel`` and turns the
CancelledError back into :class:`Interrupted` with ``Task.uncancel``, the same dance
``asyncio.timeout`` does. The cancel never lands in the consumer's own code (shinychat's
stream task, say), because outside a guarded await nothing is cancelled: the reason
is only recorded and the next guarded await raises at once.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from ..errors import Interrupted

T = TypeVar("T")

Guard = Callable[[Coroutine[Any, Any, T]], Coroutine[Any, Any, T]]
"""What ``Interrupter.guard`` is: wraps one await so an interrupt lands exactly there."""


class Interrupter:
    """One run's interrupt switch; safe to trigger from any thread."""

    def __init__(self) -> None:
        self.reason: str | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._waiting: asyncio.Task[object] | None = None
        self._fired = False
        self._lock = threading.Lock()

    def arm(self) -> None:
        """Start a run on the current event loop (clears any earlier reason)."""
        with self._lock:
            self._loop = asyncio.get_running_loop()
            self.reason = None
            self._fired = False

    def disarm(self) -> None:
        """End the run: later requests report that nothing was running."""
        with self._lock:
            self._loop = None
            self._waiting = None

    @property
    def running(self) -> bool:
        return self._loop is not None

    def request(self, reason: str = "interrupted") -> bool:
        """Ask the run to stop; returns False if no run is active."""
        with self._lock:
            loop = self._loop
            if loop is None:
                return False
            if self.reason is None:
                self.reason = reason
        try:
            on_loop = asyncio.get_running_loop() is loop
        except RuntimeError:
            on_loop = False
        if on_loop:
            self._fire()
        else:
            loop.call_soon_threadsafe(self._fire)
        return True

    def _fire(self) -> None:
        task = self._waiting
        if task is not None and not self._fired and not task.done():
            self._fired = True
            task.cancel()

    def check(self) -> None:
        """Raise :class:`Interrupted` if a stop was requested."""
        if self.reason is not None:
            raise Interrupted(self.reason)

    async def guard(self, awaitable: Awaitable[T]) -> T:
        """Await ``awaitable``; raise :class:`Interrupted` if the run is interrupted meanwhile."""
        if self.reason is not None:
            _close(awaitable)
            raise Interrupted(self.reason)
        task = asyncio.current_task()
        self._waiting = task
        try:
            return await awaitable
        except asyncio.CancelledError:
            if self._fired and task is not None:
                self._fired = False
                # Someone else cancelled too: their cancellation wins.
                if task.uncancel() == 0:
                    raise Interrupted(self.reason or "interrupted") from None
            raise
        finally:
            self._waiting = None


def _close(awaitable: Awaitable[object]) -> None:
    close = getattr(awaitable, "close", None)
    if callable(close):
        close()
