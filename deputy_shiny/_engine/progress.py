"""Progress of running tool calls: the latest report of each, and when it is due (private).

A tool reports with ``ToolContext.progress(message, fraction)``, from the event loop (an
async tool) or from its worker thread (a sync tool), as often as it likes. The engine
gives each call a sink on one :class:`ProgressBoard`; the board keeps only the newest
report of each call (latest wins) and wakes the engine, which emits a ``tool_progress``
event for a call at most every :data:`PROGRESS_INTERVAL` seconds. So a tool reporting
in a tight loop costs the run a few events a second, not one per report, and the
browser a few updates. A report made after the call ended is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading

from ..tools._context import ProgressSink

PROGRESS_INTERVAL = 0.1
"""Seconds between two ``tool_progress`` events of one call (the newest report goes)."""


class ProgressBoard:
    """The latest unsent progress report of each open call of one batch of tool calls.

    Made on the engine's event loop; :meth:`sink` may be called from any thread.

    Examples:
        >>> import asyncio
        >>> async def main():
        ...     board = ProgressBoard(interval=0.0)
        ...     report = board.sink("c1", "crunch")
        ...     report("Row 1", 0.1)
        ...     report("Row 2", 0.2)  # latest wins
        ...     await board.wait()
        ...     return board.take_due()
        >>> asyncio.run(main())
        [('c1', 'crunch', 'Row 2', 0.2)]
    """

    def __init__(self, interval: float = PROGRESS_INTERVAL) -> None:
        self._interval = interval
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()
        self._lock = threading.Lock()
        self._open: dict[str, str] = {}  # call id -> tool name, while the call runs
        self._latest: dict[str, tuple[str, float | None]] = {}  # unsent, newest only
        self._sent_at: dict[str, float] = {}
        self._woken = asyncio.Event()

    def sink(self, call_id: str, tool_name: str) -> ProgressSink:
        """Where call ``call_id`` reports (thread-safe); open until :meth:`close`."""
        with self._lock:
            self._open[call_id] = tool_name

        def report(message: str, fraction: float | None) -> None:
            with self._lock:
                if call_id not in self._open:
                    return  # the call has ended: nothing shows after its result
                first = not self._latest
                self._latest[call_id] = (message, fraction)
            if first:  # later reports wait for the engine's timer: no wake-up per report
                self._wake_soon()

        return report

    def _wake_soon(self) -> None:
        if threading.get_ident() == self._thread:
            self._woken.set()
            return
        with contextlib.suppress(RuntimeError):  # the loop closed: the run is over
            self._loop.call_soon_threadsafe(self._woken.set)

    def wake(self, _: object = None) -> None:
        """Wake :meth:`wait` (on the loop; a tool task's done callback)."""
        self._woken.set()

    def close(self, call_id: str) -> None:
        """Call ``call_id`` ended: its unsent report is dropped, later ones ignored."""
        with self._lock:
            self._open.pop(call_id, None)
            self._latest.pop(call_id, None)
            self._sent_at.pop(call_id, None)

    def close_all(self) -> None:
        """Every call ended (the batch is over, or stopped)."""
        with self._lock:
            self._open.clear()
            self._latest.clear()

    async def wait(self) -> None:
        """Until a report arrives while none waited, a report waiting becomes due, or
        :meth:`wake`. The timer runs in an empty context: a cancelled one stays in the
        loop's heap until its time and must not keep the caller's context alive."""
        if not self._woken.is_set():
            deadline = self._deadline()
            timer = None
            if deadline is not None:
                timer = self._loop.call_at(deadline, self.wake, context=contextvars.Context())
            try:
                await self._woken.wait()
            finally:
                if timer is not None:
                    timer.cancel()
        self._woken.clear()

    def _deadline(self) -> float | None:
        with self._lock:
            waiting = [self._sent_at.get(c, -self._interval) for c in self._latest]
        return min(waiting) + self._interval if waiting else None

    def take_due(self) -> list[tuple[str, str, str, float | None]]:
        """``(call_id, tool_name, message, fraction)`` of each report now due, in the
        order the calls began; they are no longer held."""
        now = self._loop.time()
        due: list[tuple[str, str, str, float | None]] = []
        with self._lock:
            for call_id, tool_name in self._open.items():
                report = self._latest.get(call_id)
                if report is None or now < self._sent_at.get(call_id, -self._interval) + (
                    self._interval
                ):
                    continue
                del self._latest[call_id]
                self._sent_at[call_id] = now
                due.append((call_id, tool_name, *report))
        return due
