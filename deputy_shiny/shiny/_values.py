"""Cheap names for the reactive values shiny and shinychat make inside the kit's own calls.

py-shiny 1.8's ``reactive.Value.__init__`` calls ``Value._try_infer_name`` for every
value made without ``name=``. That walks ``inspect.stack()``, which builds a
``FrameInfo`` with source context for every frame of the stack, and each frame's
``inspect.getmodule`` scans ``sys.modules``: once litellm has filled it with thousands
of modules, one value costs milliseconds. shinychat's ``Chat`` makes five such values
and an ``ExtendedTask`` (three more), and every ``append_message_stream`` makes an
``ExtendedTask``: the kit cannot name those, they are made inside shiny and shinychat.

:func:`cheap_value_names` is a context manager the kit wraps around its own calls that
make them. Inside the block, and only for the asyncio task (or, outside any task, the
thread) that entered it, an unnamed Value takes its name from the nearest frames'
source lines by a cheap walk (``sys._getframe`` and ``linecache``, the assignment
patterns shiny uses): ``self._messages = reactive.Value(())`` is ``"_messages"``.
Anywhere else shiny's own method runs, unchanged: an app's Values, another session's
task running while this one awaits, a task or worker thread started inside the block
(they copy the context, but they are not the task that entered it). While no block is
active, ``Value`` is left exactly as shiny made it.

It stays correct across upgrades by checking what it relies on: if a shiny release
renames or removes ``Value._try_infer_name`` (``tests/test_kit_session_start.py``
pins it), the block does nothing, and names are shiny's own again.

Examples:
    >>> from shiny import reactive
    >>> from deputy_shiny.shiny._values import cheap_value_names
    >>> with cheap_value_names():
    ...     counter = reactive.Value(0)
    >>> counter._name
    'counter'
"""

from __future__ import annotations

import asyncio
import contextlib
import linecache
import logging
import re
import sys
import threading
import weakref
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from types import FrameType
from typing import Any

from shiny.reactive import Value

__all__ = ["cheap_value_names", "hook_available"]

_log = logging.getLogger(__name__)

HOOK = "_try_infer_name"  # shiny 1.8: Value.__init__ calls self._try_infer_name() -> str | None
FRAMES = 4  # how many callers of Value.__init__ the cheap walk reads
# shiny's two patterns in one: ``name = Value(`` and ``obj.name = Value(``, either with a
# type annotation (``name: Value[int] = Value(``), ``reactive.`` optional.
_ASSIGNED = re.compile(r"^(?:\w+\.)?(\w+)\s*(?::[^=]+)?\s*=\s*(?:reactive\.)?[Vv]alue\s*[\[\(]")
# A line that continues an assignment: ``reactive.Value(())`` under ``x = (``, or
# ``] = reactive.Value(None)`` under ``x: reactive.Value[`` (shinychat writes both).
_CONTINUED = re.compile(r"^(?:\]\s*=\s*)?(?:reactive\.)?[Vv]alue\s*[\[\(]")
# The target of the assignment such a line continues, on a line above it.
_TARGET = re.compile(r"^(?:\w+\.)?(\w+)\s*[:=]")

_owner_var: ContextVar[weakref.ref[Any] | None] = ContextVar(
    "deputy_shiny_cheap_value_names", default=None
)
_lock = threading.Lock()
_active = 0  # blocks open now, in any task
# shiny's method, kept once captured: a thread that looked the stand-in up just before
# the last block closed still finds it.
_original: Callable[[Value[Any]], str | None] = getattr(Value, HOOK, lambda _value: None)
_own = True  # whether Value itself defined it (else a base class did)


def hook_available() -> bool:
    """True when shiny's ``Value`` has the hook this module replaces in its blocks."""
    return callable(getattr(Value, HOOK, None))


def _owner() -> Any:
    """Who constructs now: the running asyncio task, else the thread."""
    try:
        task = asyncio.current_task()
    except RuntimeError:  # no running loop in this thread
        task = None
    return task if task is not None else threading.current_thread()


def _scoped_infer_name(self: Value[Any]) -> str | None:
    """Stands in for ``Value._try_infer_name`` while a block is open anywhere."""
    entered = _owner_var.get()
    if entered is not None and entered() is _owner():
        try:
            return _cheap_name(sys._getframe(2))  # [0] this, [1] Value.__init__, [2] caller
        except Exception:  # as shiny's own: a name is never worth a failed Value
            return None
    return _original(self)


def _cheap_name(frame: FrameType | None) -> str | None:
    """The assignment target on the nearest of ``FRAMES`` callers' source lines."""
    for _ in range(FRAMES):
        if frame is None:
            return None
        filename, lineno = frame.f_code.co_filename, frame.f_lineno
        line = linecache.getline(filename, lineno).strip()
        if match := _ASSIGNED.match(line):
            return match.group(1)
        if _CONTINUED.match(line):  # ``reactive.Value(())`` under ``x = (``
            for back in range(1, 6):
                previous = linecache.getline(filename, lineno - back).strip()
                if not previous:
                    break
                if target := _TARGET.match(previous):
                    return target.group(1)
            return None
        frame = frame.f_back
    return None


def _install() -> bool:
    """Put the stand-in on ``Value`` (first open block); False when shiny lacks the hook."""
    global _active, _original, _own
    with _lock:
        if _active == 0:
            if not hook_available():
                return False
            current = getattr(Value, HOOK)
            if current is not _scoped_infer_name:
                _original, _own = current, HOOK in Value.__dict__
            setattr(Value, HOOK, _scoped_infer_name)
        _active += 1
        return True


def _uninstall() -> None:
    """Give ``Value`` back its own method (last block closed), unless someone else has
    replaced it meanwhile."""
    global _active
    with _lock:
        _active -= 1
        if _active == 0 and Value.__dict__.get(HOOK) is _scoped_infer_name:
            if _own:
                setattr(Value, HOOK, _original)
            else:  # it was inherited: leave the class without one of its own again
                delattr(Value, HOOK)


@contextlib.contextmanager
def cheap_value_names() -> Iterator[None]:
    """Within this block, this task's unnamed ``reactive.Value``s are named cheaply.

    Wrap it only around the kit's own calls into shiny and shinychat that make values
    (``Chat(...)``, ``chat.append_message_stream(...)``), never around app code: the
    app's factory and callbacks keep shiny's inference. On exit (an exception included)
    the task's state and, once no block is open, ``Value`` are as they were.
    """
    if not _install():
        _log.debug("shiny's Value has no %s: its values keep shiny's own names", HOOK)
        yield
        return
    token = _owner_var.set(weakref.ref(_owner()))
    try:
        yield
    finally:
        _owner_var.reset(token)
        _uninstall()
