"""Server processes: which stdio servers are alive, and stopping them for good.

The SDK's ``stdio_client`` starts each server in its own process group and, when the
connection closes, closes its stdin, waits, then terminates and kills the group. What
it cannot do is stop servers when Python exits with connections still open (a daemon
thread's loop never gets to close them). So each server process is recorded here
while its connection is open (:func:`capture_spawns` learns its pid as the SDK starts
it), and an ``atexit`` handler terminates, then kills, whatever is still recorded.
"""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

__all__ = [
    "capture_spawns",
    "is_alive",
    "live_server_pids",
    "stop_process_group",
    "stop_process_groups",
]

KILL_GRACE = 1.0
"""Seconds between terminate and kill when this module stops a server itself."""

_live: set[int] = set()
_live_lock = threading.Lock()
_on_spawn: contextvars.ContextVar[Callable[[int], None] | None] = contextvars.ContextVar(
    "deputy_shiny_mcp_on_spawn", default=None
)
_installed = False


def live_server_pids() -> list[int]:
    """The pids of the stdio servers whose connections are open now."""
    with _live_lock:
        return sorted(_live)


def track(pid: int) -> None:
    with _live_lock:
        _live.add(pid)


def untrack(pid: int) -> None:
    with _live_lock:
        _live.discard(pid)


@contextlib.contextmanager
def capture_spawns(callback: Callable[[int], None]) -> Iterator[None]:
    """Call ``callback(pid)`` for each server process the SDK starts in this context."""
    _install()
    token = _on_spawn.set(callback)
    try:
        yield
    finally:
        _on_spawn.reset(token)


def _install() -> None:
    """Wrap the SDK's process start (mcp 2.3.0: ``stdio._create_platform_compatible_process``)
    to learn each pid; the wrapper only reports, the SDK still starts and stops it."""
    global _installed
    if _installed:
        return
    from mcp.client import stdio

    original = stdio._create_platform_compatible_process

    async def spawn(*args: Any, **kwargs: Any) -> Any:
        process = await original(*args, **kwargs)
        callback = _on_spawn.get()
        pid = getattr(process, "pid", None)
        if callback is not None and isinstance(pid, int):
            callback(pid)
        return process

    stdio._create_platform_compatible_process = spawn
    _installed = True


def is_alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie that was not reaped yet counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[-1].split()[0]
        return state not in (b"Z", b"X")
    except FileNotFoundError:
        return False
    except OSError:  # pragma: no cover - no /proc (macOS)
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


def stop_process_group(pid: int, grace: float = KILL_GRACE) -> None:
    """Terminate the process group ``pid`` leads, then kill it after ``grace`` seconds."""
    stop_process_groups([pid], grace)


def stop_process_groups(pids: list[int], grace: float = KILL_GRACE) -> None:
    """Terminate these process groups together, then kill what is left after ``grace``."""
    remaining = [p for p in pids if is_alive(p)]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in remaining:
            try:
                os.killpg(pid, sig)
            except (ProcessLookupError, PermissionError):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, sig)
        deadline = time.monotonic() + grace
        while remaining and time.monotonic() < deadline:
            for pid in remaining:
                _reap(pid)
            remaining = [p for p in remaining if is_alive(p)]
            if remaining:
                time.sleep(0.01)
        if not remaining:
            return


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


@atexit.register
def _stop_all_at_exit() -> None:
    with _live_lock:
        pids = sorted(_live)
        _live.clear()
    stop_process_groups(pids)
