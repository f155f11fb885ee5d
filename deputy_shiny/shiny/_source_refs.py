"""Each function's OpenTelemetry source reference, read once per code object, not per session.

py-shiny 1.8 labels its spans with where a reactive function was defined:
``shiny.otel._attributes.extract_source_ref`` runs ``inspect.getsourcefile`` and
``inspect.getsourcelines`` for every ``Calc``, ``Effect``, renderer and
``ExtendedTask`` as it is made, whether tracing is on or not. ``getsourcelines``
tokenizes the function's whole source to find where it ends, so every session pays it
again for every closure its server function defines (the same code, a new function
object): the kit's conversation panel alone spent more than half its session start
there.

:func:`install` wraps that function, where shiny's modules call it, with a memo keyed
by the code object the reference is read from and the function's name: what
``extract_source_ref`` returns depends on nothing else (the file, the first line and
the ``def`` line come from the code; the name is the function's). Each call still gets
a dict of its own. Functions without a code object (built-ins, callables) go to shiny's
own function unchanged.

It stays correct across upgrades by checking what it wraps: if a shiny release renames
or removes ``extract_source_ref`` (``tests/test_kit_session_start.py`` pins it), nothing
is wrapped. The memo holds at most :data:`LIMIT` references and starts over when full,
so code made at run time (``exec``) cannot grow it without bound.

Examples:
    >>> from deputy_shiny.shiny._source_refs import install, source_ref
    >>> install()
    True
    >>> def total():
    ...     return 1
    >>> source_ref(total)["code.function.name"]
    'total'
"""

from __future__ import annotations

import inspect
import sys
import threading
from collections.abc import Callable
from types import CodeType
from typing import Any

__all__ = ["LIMIT", "install", "source_ref"]

LIMIT = 4096
"""The most source references kept (one per code object and name)."""

# The modules of shiny 1.8 that call it (each imported it by name).
_CALLERS = (
    "shiny.otel._attributes",
    "shiny.reactive._reactives",
    "shiny.reactive._extended_task",
    "shiny.session._session",
)
_NAME = "extract_source_ref"

_lock = threading.Lock()
_memo: dict[tuple[CodeType, str | None], dict[str, Any]] = {}
_original: Callable[[Any], Any] | None = None


def source_ref(func: Any) -> Any:
    """``extract_source_ref(func)``, read from the memo when this code was seen before."""
    original = _original
    if original is None:  # not installed
        from shiny.otel._attributes import extract_source_ref

        return extract_source_ref(func)
    try:
        code = inspect.unwrap(func).__code__
    except (AttributeError, ValueError):  # no code object, or a circular __wrapped__ chain
        return original(func)
    if not isinstance(code, CodeType):
        return original(func)
    key = (code, getattr(func, "__name__", None))
    found = _memo.get(key)
    if found is None:
        found = dict(original(func))
        with _lock:
            if len(_memo) >= LIMIT:
                _memo.clear()
            _memo[key] = found
    return dict(found)


def install() -> bool:
    """Wrap shiny's ``extract_source_ref`` where shiny calls it; True if it is (now) wrapped.

    Idempotent and thread-safe; does nothing (False) on a shiny without the function.
    """
    global _original
    with _lock:
        if _original is not None:
            return True
        attributes = _loaded("shiny.otel._attributes")
        original = getattr(attributes, _NAME, None)
        if not callable(original):
            return False
        _original = original
        for name in _CALLERS:
            caller = _loaded(name)
            if caller is not None and getattr(caller, _NAME, None) is original:
                setattr(caller, _NAME, source_ref)
        return True


def _loaded(name: str) -> Any:
    module = sys.modules.get(name)
    if module is None:
        try:
            __import__(name)
        except ImportError:
            return None
        module = sys.modules.get(name)
    return module
