"""What a running tool may know about the call: the agent's directories, identity and state.

The engine sets a :class:`ToolContext` in a ``contextvars.ContextVar`` around each tool
call (``asyncio.to_thread`` copies it into the worker thread), so built-in tools find
the working directory and the directories they may touch without an extra argument in
their JSON schema. Called outside an agent, a tool sees the default context: the
current directory, for reading and writing.

Tool state belongs to the agent, never to the tool object: one ``run_python`` tool
registered with two agents gives each its own interpreter. A stateful tool keeps its
state in ``context.state`` (a :class:`ToolState`, one per agent, closed with the agent).

A long tool reports how far it has got with ``context.progress(message, fraction)``;
the run emits it as a ``tool_progress`` event (and the Shiny kit shows it in the call's
card). Outside an agent it does nothing.

Examples:
    >>> from deputy_shiny.tools import current_tool_context
    >>> current_tool_context().tool_name is None
    True
    >>> current_tool_context().progress("Loading", 0.5)  # outside an agent: nothing
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import os
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from ..identity import CallIdentity

T = TypeVar("T", bound="Closable")

ProgressSink = Callable[[str, float | None], None]
"""Where a call's progress goes: ``sink(message, fraction)``, callable from any thread
(the engine gives each call its own; it keeps the latest report)."""

MAX_PROGRESS_CHARS = 500
"""A progress message longer than this is cut (it is a status line, not output)."""


class FileChangeRecorder(Protocol):
    """What records a file's previous contents before a file tool changes it (the
    agent's file checkpoint journal, :class:`~deputy_shiny.persistence.FileJournal`).

    ``record(path)`` raises a :class:`~deputy_shiny.errors.DeputyError` to refuse the
    change (a cap, a symlink, a path outside the working directory); the tool then
    writes nothing.
    """

    def record(self, path: Path) -> None: ...


class Closable(Protocol):
    """What a :class:`ToolState` entry must offer: a ``close()`` that is safe to repeat."""

    def close(self) -> None: ...


class ToolState:
    """The state of stateful tools for one agent (e.g. each ``run_python``'s interpreter).

    Entries are created on first use, keyed (weakly) by the tool's own object, and
    closed together by :meth:`close` (the agent's ``close()``, or the kit when the
    browser session ends). After :meth:`close` the next use creates fresh entries. An
    entry whose tool is garbage collected is dropped with it.

    Examples:
        >>> class Counter:
        ...     closed = False
        ...     def close(self): self.closed = True
        >>> class Key: ...
        >>> state = ToolState()
        >>> key = Key()
        >>> first = state.get(key, Counter)
        >>> state.get(key, Counter) is first, len(state)
        (True, 1)
        >>> state.close(); first.closed, len(state)
        (True, 0)
    """

    def __init__(self) -> None:
        self._entries: weakref.WeakKeyDictionary[object, Closable] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def get(self, key: object, factory: Callable[[], T]) -> T:
        """The entry for ``key`` (weakly referenced), made with ``factory()`` the first time."""
        with self._lock:
            found = self._entries.get(key)
            if found is None:
                found = self._entries[key] = factory()
            return found  # type: ignore[return-value]

    def __len__(self) -> int:
        return len(self._entries)

    def close(self) -> None:
        """Close every entry (stopping processes they hold); safe to repeat."""
        with self._lock:
            entries = list(self._entries.values())
            self._entries.clear()
        for entry in entries:
            with contextlib.suppress(Exception):  # one broken entry must not keep others open
                entry.close()


_PROCESS_STATE = ToolState()  # tools called outside any agent


@dataclass(frozen=True)
class ToolContext(CallIdentity):
    """The context of one tool call.

    Attributes:
        working_dir: Relative paths resolve against it.
        read_roots: Directories file tools may read (already resolved).
        write_roots: Directories file tools may write (empty: no writes).
        agent_id / session_id / run_id / call_id / tool_name: Who is calling.
        run_context: The run's JSON-compatible context.
        state: The calling agent's :class:`ToolState` (outside an agent: one per process).
        file_journal: Records files before ``write_file``, ``edit_file`` and
            ``multi_edit`` change them (None: file checkpointing is off).
        progress_sink: Where :meth:`progress` reports go (None: outside a run).
    """

    working_dir: Path
    read_roots: tuple[Path, ...]
    write_roots: tuple[Path, ...]
    tool_name: str | None = None
    run_context: dict[str, Any] = field(default_factory=dict)
    state: ToolState = field(default=_PROCESS_STATE, repr=False, compare=False)
    file_journal: FileChangeRecorder | None = field(default=None, repr=False, compare=False)
    progress_sink: ProgressSink | None = field(default=None, repr=False, compare=False)

    def progress(self, message: str, fraction: float | None = None) -> None:
        """Report how far this call has got: ``message`` (plain text) and, when known,
        ``fraction`` done, from 0 to 1 (clamped).

        Call it as often as you like, from the tool's thread or its event loop: the run
        keeps the latest report of each call and emits at most a few ``tool_progress``
        events a second; reports made after the call returned are dropped.

        Raises:
            TypeError: ``message`` is not a string, or ``fraction`` not a number.
            ValueError: ``fraction`` is NaN or infinite.

        Examples:
            >>> from deputy_shiny.tools import current_tool_context
            >>> def crunch(rows: int) -> str:
            ...     ctx = current_tool_context()
            ...     for done in range(1, rows + 1):
            ...         ctx.progress(f"Row {done} of {rows}", fraction=done / rows)
            ...     return "crunched"
            >>> crunch(3)  # outside an agent the reports go nowhere
            'crunched'
        """
        if not isinstance(message, str):
            raise TypeError(f"progress message must be a string, not {type(message).__name__}")
        if fraction is not None:
            if isinstance(fraction, bool) or not isinstance(fraction, int | float):
                raise TypeError(f"fraction must be a number or None, not {type(fraction).__name__}")
            if not math.isfinite(fraction):
                raise ValueError(f"fraction must be finite (got {fraction!r})")
            fraction = min(1.0, max(0.0, float(fraction)))
        sink = self.progress_sink
        if sink is not None:
            sink(message[:MAX_PROGRESS_CHARS], fraction)


def default_tool_context() -> ToolContext:
    """The context outside an agent: the current directory for reads and writes."""
    cwd = Path(os.getcwd()).resolve()
    return ToolContext(working_dir=cwd, read_roots=(cwd,), write_roots=(cwd,))


_current: contextvars.ContextVar[ToolContext | None] = contextvars.ContextVar(
    "deputy_shiny_tool_context", default=None
)


def current_tool_context() -> ToolContext:
    """The context of the tool call in progress (or :func:`default_tool_context`)."""
    return _current.get() or default_tool_context()


@contextmanager
def tool_context(context: ToolContext) -> Iterator[ToolContext]:
    """Set the context for the calls made inside the ``with`` block."""
    token = _current.set(context)
    try:
        yield context
    finally:
        _current.reset(token)
