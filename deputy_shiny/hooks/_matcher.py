"""HookMatcher: a callback bound to one hook event, its signature checked up front."""

from __future__ import annotations

import inspect
import math
import re
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

from .._util.callables import is_async_callable
from ..errors import InvalidHookError
from ._events import TOOL_HOOK_EVENTS, HookPoint, _check_event


def _arity(event: str) -> int:
    if event == "PostToolUse":
        return 4
    return 3 if event in TOOL_HOOK_EVENTS else 1


def _callable_name(fn: object) -> str:
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    if name is None:
        name = getattr(type(fn), "__qualname__", type(fn).__name__)
    return str(name)


_SIGNATURES = {
    1: "(context)",
    3: "(tool_name, tool_input, context)",
    4: "(tool_name, tool_input, context, tool_output)",
}

_PARAMETER_NAMES: dict[int, tuple[str, ...]] = {
    1: ("context",),
    3: ("tool_name", "tool_input", "context"),
    4: ("tool_name", "tool_input", "context", "tool_output"),
}
"""The names of the arguments each kind of callback gets, by position."""

_KNOWN_NAMES = frozenset(
    {"tool_name", "tool_input", "tool_output", "tool_result", "tool_error", "context"}
)
"""Hook parameter names (ours and deputy's): found at the wrong position, they mean the
callback was written for another event or argument order, and would bind wrongly."""

DEFAULT_HOOK_TIMEOUT = 30.0
"""Seconds a hook callback may take unless its matcher says otherwise (as in deputy)."""


def _misnamed(signature: inspect.Signature, n: int) -> str | None:
    """Why the callback's positional parameter names don't fit the event (None: they do)."""
    positional = [
        p
        for p in signature.parameters.values()
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    ]
    for position, (parameter, expected) in enumerate(
        zip(positional, _PARAMETER_NAMES[n], strict=False), 1
    ):
        if parameter.name in _KNOWN_NAMES and parameter.name != expected:
            return f"its parameter {position} is named {parameter.name!r}, but gets {expected}"
    return None


@dataclass(frozen=True, slots=True)
class HookMatcher:
    """A callback bound to one hook event, optionally only for some tools.

    Args:
        event: One of :data:`HOOK_EVENTS`.
        callback: A sync or async callable. Tool events call
            ``callback(tool_name, tool_input, context)`` (``PostToolUse`` adds
            ``tool_output`` at the end); other events call ``callback(context)``.
            Sync callbacks run in a worker thread, so they may block.
        pattern: A regex searched for (``re.search``) in the tool name; None matches
            every tool. Only tool events take a pattern.
        timeout: Seconds the callback may take (default 30, as in deputy), or None for
            no limit. A late callback counts as failed; a sync one keeps running in its
            thread, but its result is ignored.

    Raises:
        InvalidHookError: an unknown event, a callback that is not callable or cannot
            take the event's arguments (the wrong number of positional parameters, or
            parameters named for another event or position, such as deputy's
            PostToolUse ``(tool_name, tool_result, tool_error, context)``), a pattern
            that is not a valid regex (or is given for a non-tool event), or a timeout
            that is not a positive number.

    Examples:
        >>> def audit(tool_name, tool_input, context):
        ...     return None
        >>> HookMatcher("PreToolUse", audit, pattern="^write_file$").matches("write_file")
        True
    """

    event: HookPoint
    callback: Callable[..., Any]
    _: KW_ONLY
    pattern: str | None = None
    timeout: float | None = DEFAULT_HOOK_TIMEOUT
    _regex: re.Pattern[str] | None = field(init=False, repr=False, compare=False, default=None)
    _async: bool = field(init=False, repr=False, compare=False, default=False)

    def __post_init__(self) -> None:
        event = _check_event(self.event)
        callback = self.callback
        if not callable(callback):
            raise InvalidHookError(f"callback: must be a function, not {type(callback).__name__}")
        n = _arity(event)
        try:
            signature = inspect.signature(callback)
        except (TypeError, ValueError):  # some builtins have no signature: trust them
            signature = None
        if signature is not None:
            try:
                signature.bind(*([None] * n))
            except TypeError as exc:
                raise InvalidHookError(
                    f"callback: a {event} callback is called as {_SIGNATURES[n]}, but "
                    f"{_callable_name(callback)}{signature} cannot take that ({exc})"
                ) from None
            misnamed = _misnamed(signature, n)
            if misnamed is not None:
                raise InvalidHookError(
                    f"callback: a {event} callback is called as {_SIGNATURES[n]}, but "
                    f"{_callable_name(callback)}{signature} would get the wrong values "
                    f"({misnamed})"
                )
        regex = None
        if self.pattern is not None:
            if not isinstance(self.pattern, str):
                raise InvalidHookError(
                    f"pattern: must be a regular expression string or None, "
                    f"not {type(self.pattern).__name__}"
                )
            if event not in TOOL_HOOK_EVENTS:
                raise InvalidHookError(
                    f"pattern: only tool events ({', '.join(sorted(TOOL_HOOK_EVENTS))}) "
                    f"match tool names; leave it None for {event}"
                )
            try:
                regex = re.compile(self.pattern)
            except re.error as exc:
                raise InvalidHookError(
                    f"pattern: {self.pattern!r} is not a valid regular expression ({exc})"
                ) from None
        timeout = self.timeout
        if timeout is not None:
            if isinstance(timeout, bool) or not isinstance(timeout, int | float):
                raise InvalidHookError(
                    f"timeout: must be a number of seconds or None, not {type(timeout).__name__}"
                )
            if not math.isfinite(timeout) or timeout <= 0:
                raise InvalidHookError(
                    f"timeout: must be a positive number of seconds, not {timeout}"
                )
            object.__setattr__(self, "timeout", float(timeout))
        object.__setattr__(self, "_regex", regex)
        object.__setattr__(self, "_async", is_async_callable(callback))

    def matches(self, tool_name: str | None = None) -> bool:
        """True if this matcher applies to ``tool_name`` (None: only pattern-less matchers).

        Examples:
            >>> m = HookMatcher("PreToolUse", lambda n, i, c: None, pattern="file")
            >>> m.matches("read_file"), m.matches("run_bash"), m.matches(None)
            (True, False, False)
        """
        if self._regex is None:
            return True
        return tool_name is not None and self._regex.search(tool_name) is not None

    @property
    def name(self) -> str:
        """The callback's name, for messages and logs."""
        return _callable_name(self.callback)
