"""HookRegistry: an agent's hooks, run in order; HookRun and HookCallRecord record a run."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import inspect
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from .._util.text import truncate
from .._util.timeouts import timeout
from ..errors import HookExecutionError, InvalidHookError
from ._context import HookContext
from ._events import _GATING_EVENTS, _MAX_ERROR_CHARS, TOOL_HOOK_EVENTS, _check_event
from ._matcher import HookMatcher
from ._results import (
    _RESULT_TYPES,
    HookResultPostToolUse,
    HookResultPreCompact,
    HookResultPreToolUse,
)

Outcome = Literal["none", "result", "error", "timeout"]


def _describe(value: Any) -> dict[str, Any]:
    """A small, JSON-safe description of what a callback returned."""
    out: dict[str, Any] = {"type": type(value).__name__}
    if isinstance(value, HookResultPreToolUse):
        out.update(permission=value.permission, reason=value.reason)
        if value.updated_input is not None:
            out["updated_input"] = True
        if value.additional_context is not None:
            out["additional_context"] = True
    elif isinstance(value, HookResultPostToolUse):
        out["updated_tool_output"] = value.updated_tool_output is not None
        out["suppress_output"] = value.suppress_output
        if value.additional_context is not None:
            out["additional_context"] = True
    elif isinstance(value, HookResultPreCompact):
        out["summary"] = value.summary is not None
    else:
        out["repr"] = truncate(repr(value), 200)
    if getattr(value, "continue_", True) is False:
        out["continue"] = False
        out["stop_reason"] = getattr(value, "stop_reason", None)
    return out


@dataclass(frozen=True, slots=True)
class HookCallRecord:
    """What one callback did in a :class:`HookRun`.

    Attributes:
        index: The matcher's position in the registry.
        matcher: The matcher whose callback ran.
        outcome: ``"none"`` (returned None), ``"result"`` (returned a result, which ended
            the run), ``"error"`` (raised, or returned the wrong type) or ``"timeout"``.
        error: What went wrong, for ``"error"`` and ``"timeout"``.
        duration: Seconds the callback took (up to its timeout).
        result: What it returned, for ``"result"``.
        exception: The exception it raised, if any (for debugging; not in summaries).

    Examples:
        >>> m = HookMatcher("Stop", lambda context: None)
        >>> HookCallRecord(0, m, "none", None, 0.001).summary()["outcome"]
        'none'
    """

    index: int
    matcher: HookMatcher
    outcome: Outcome
    error: str | None
    duration: float
    result: Any = None
    exception: BaseException | None = field(default=None, repr=False, compare=False)

    def summary(self) -> dict[str, Any]:
        """A JSON-safe summary, the ``result`` of the engine's ``hook`` event.

        Examples:
            >>> m = HookMatcher("Stop", lambda context: 1 / 0)
            >>> HookCallRecord(2, m, "error", "ZeroDivisionError", 0.0).summary()["error"]
            'ZeroDivisionError'
        """
        out: dict[str, Any] = {
            "index": self.index,
            "callback": self.matcher.name,
            "outcome": self.outcome,
            "duration": round(self.duration, 6),
        }
        if self.error is not None:
            out["error"] = self.error
        if self.outcome == "result":
            out["result"] = _describe(self.result)
        return out


@dataclass(frozen=True, slots=True)
class HookRun:
    """The outcome of running one event's hooks (:meth:`HookRegistry.run`).

    Attributes:
        event: The hook event.
        tool_name: The tool, for tool events.
        result: The first non-None value a callback returned, as is (None if none did).
            For ``PermissionRequest`` this is whatever the callback returned (e.g. a
            ``PermissionResultAllow``); the caller interprets it.
        decided_by: The registry index of the matcher that returned ``result``.
        matcher: That matcher.
        records: One :class:`HookCallRecord` per callback that ran, in order.

    Examples:
        >>> HookRun("Stop").failure is None
        True
    """

    event: str
    tool_name: str | None = None
    result: Any = None
    decided_by: int | None = None
    matcher: HookMatcher | None = None
    records: tuple[HookCallRecord, ...] = ()

    @property
    def errors(self) -> tuple[HookCallRecord, ...]:
        """The records of callbacks that raised, returned the wrong type, or timed out."""
        return tuple(r for r in self.records if r.outcome in ("error", "timeout"))

    @property
    def failed(self) -> bool:
        """True if any callback failed (see :attr:`errors`)."""
        return any(r.outcome in ("error", "timeout") for r in self.records)

    @property
    def failure(self) -> str | None:
        """A one-line account of the first failure, or None if nothing failed.

        Examples:
            >>> m = HookMatcher("Stop", lambda context: None)
            >>> rec = HookCallRecord(0, m, "timeout", "timed out after 1 s", 1.0)
            >>> HookRun("Stop", records=(rec,)).failure
            'hook 0 (<lambda>) timed out after 1 s'
        """
        for r in self.records:
            if r.outcome == "timeout":
                return f"hook {r.index} ({r.matcher.name}) {r.error}"
            if r.outcome == "error":
                return f"hook {r.index} ({r.matcher.name}) failed: {r.error}"
        return None

    def raise_for_failure(self) -> None:
        """Raise :class:`~deputy_shiny.errors.HookExecutionError` for the first failed
        callback (chained to what it raised); do nothing when none failed.

        For an app that runs hooks itself and wants deputy's ``deputy_hook`` error; the
        engine records failures instead (see :meth:`HookRegistry.last_errors`).

        Examples:
            >>> import asyncio
            >>> registry = HookRegistry([HookMatcher("Stop", lambda context: 1 / 0)])
            >>> run = asyncio.run(registry.run("Stop", context=HookContext(event="Stop")))
            >>> try:
            ...     run.raise_for_failure()
            ... except HookExecutionError as err:
            ...     print(err.hook_event, err.callback, type(err.__cause__).__name__)
            Stop <lambda> ZeroDivisionError
        """
        failed = next((r for r in self.records if r.outcome in ("error", "timeout")), None)
        if failed is None:
            return
        raise HookExecutionError(
            self.failure or f"a {self.event} hook failed",
            hook_event=self.event,
            tool_name=self.tool_name,
            callback=failed.matcher.name,
        ) from failed.exception

    @property
    def stop_requested(self) -> bool:
        """True if the deciding result set ``continue_=False``."""
        return getattr(self.result, "continue_", True) is False

    @property
    def stop_reason(self) -> str | None:
        """The deciding result's ``stop_reason`` when it asked to stop, else None."""
        if not self.stop_requested:
            return None
        reason = getattr(self.result, "stop_reason", None)
        return reason if isinstance(reason, str) else f"A {self.event} hook asked to stop."

    def summary(self) -> dict[str, Any] | None:
        """A JSON-safe summary of the whole run (None when no callback ran).

        Examples:
            >>> HookRun("Stop").summary() is None
            True
        """
        if not self.records:
            return None
        out: dict[str, Any] = {"event": self.event, "calls": [r.summary() for r in self.records]}
        if self.tool_name is not None:
            out["tool_name"] = self.tool_name
        if self.result is not None:
            out["decided_by"] = self.decided_by
            out["result"] = _describe(self.result)
        return out


async def _invoke(matcher: HookMatcher, args: tuple[Any, ...]) -> tuple[Any, Exception | None]:
    """Call the callback; exceptions come back as values so a timeout is unambiguous."""
    try:
        if matcher._async:
            value = await matcher.callback(*args)
        else:
            value = await asyncio.to_thread(matcher.callback, *args)
            if inspect.isawaitable(value):
                value = await value
        return value, None
    except Exception as exc:
        return None, exc


def _error_text(exc: BaseException) -> str:
    text = str(exc)
    return truncate(
        f"{type(exc).__name__}: {text}" if text else type(exc).__name__, _MAX_ERROR_CHARS
    )


MAX_ERROR_LOG = 1000
"""The most failures :meth:`HookRegistry.last_errors` keeps (the oldest go first)."""


@dataclass(frozen=True, slots=True)
class HookError:
    """One failed callback in a registry's error log (:meth:`HookRegistry.last_errors`).

    Attributes:
        event: The hook event.
        tool_name: The tool, for tool events (None otherwise).
        error: What went wrong (an exception's type and message, or the timeout).
        timestamp: When it failed (seconds since the epoch).
        callback: The callback's name.
        outcome: ``"error"`` (raised, or returned the wrong type) or ``"timeout"``.

    Examples:
        >>> HookError("Stop", None, "ValueError: boom", 0.0, "save", "error").event
        'Stop'
    """

    event: str
    tool_name: str | None
    error: str
    timestamp: float
    callback: str
    outcome: Outcome


class HookRegistry:
    """An agent's hooks, in the order added; runs the ones that match an event.

    Adding and removing are thread-safe; a run works on the matchers present when it
    started.

    Examples:
        >>> import asyncio
        >>> registry = HookRegistry()
        >>> registry.add(HookMatcher("Stop", lambda context: "saw it"))
        >>> asyncio.run(registry.run("Stop", context=HookContext(event="Stop"))).result
        'saw it'
    """

    def __init__(self, matchers: Iterable[HookMatcher] = ()) -> None:
        self._lock = threading.Lock()
        self._errors: deque[HookError] = deque(maxlen=MAX_ERROR_LOG)
        self._matchers: tuple[HookMatcher, ...] = ()
        self.add(matchers)

    def add(self, matcher: HookMatcher | Iterable[HookMatcher]) -> None:
        """Add a matcher, or several (as :func:`~deputy_shiny.hooks_builtin.hook_log_tools`
        returns), at the end.

        Examples:
            >>> from deputy_shiny.hooks_builtin import hook_log_tools
            >>> registry = HookRegistry()
            >>> registry.add(hook_log_tools())
            >>> len(registry)
            3
        """
        items: list[Any]
        try:
            items = [matcher] if isinstance(matcher, HookMatcher) else list(matcher)
        except TypeError:
            items = [matcher]  # not iterable: reported below
        for item in items:
            if not isinstance(item, HookMatcher):
                raise InvalidHookError(
                    f"hook: must be a HookMatcher (or a list of them), not {type(item).__name__}"
                )
        with self._lock:
            self._matchers = (*self._matchers, *items)

    def snapshot(self) -> tuple[HookMatcher, ...]:
        """Every matcher now, in order (a retained agent's fingerprint compares them).

        Examples:
            >>> HookRegistry().snapshot()
            ()
        """
        with self._lock:
            return self._matchers

    def select(self, events: Iterable[str]) -> HookRegistry:
        """A new registry with this one's matchers for ``events`` only (a subagent gets its
        lead's tool hooks this way, not its Stop or SessionStart hooks).

        Examples:
            >>> registry = HookRegistry([HookMatcher("Stop", lambda context: None)])
            >>> len(registry.select(["PreToolUse"])), len(registry.select(["Stop"]))
            (0, 1)
        """
        wanted = set(events)
        with self._lock:
            return HookRegistry(m for m in self._matchers if m.event in wanted)

    def remove(self, matcher: HookMatcher) -> bool:
        """Remove the first matcher equal to ``matcher``; False if there was none.

        Examples:
            >>> m = HookMatcher("Stop", lambda context: None)
            >>> registry = HookRegistry([m])
            >>> registry.remove(m), registry.remove(m)
            (True, False)
        """
        with self._lock:
            items = list(self._matchers)
            for i, item in enumerate(items):
                if item is matcher or item == matcher:
                    del items[i]
                    self._matchers = tuple(items)
                    return True
        return False

    def matchers(self, event: str, tool_name: str | None = None) -> tuple[HookMatcher, ...]:
        """The matchers that would run for ``event`` (and ``tool_name``), in order.

        With ``tool_name`` None, matchers with a pattern are left out.

        Examples:
            >>> from deputy_shiny.hooks_builtin import hook_block_dangerous_bash
            >>> registry = HookRegistry([hook_block_dangerous_bash()])
            >>> len(registry.matchers("PreToolUse", "run_bash"))
            1
            >>> registry.matchers("PreToolUse", "read_file")
            ()
        """
        _check_event(event)
        return tuple(m for m in self._matchers if m.event == event and m.matches(tool_name))

    def last_errors(self) -> list[HookError]:
        """Every callback failure since the registry was made or :meth:`clear_errors`,
        oldest first (as deputy's ``last_errors()``; at most :data:`MAX_ERROR_LOG`).

        Failures never stop a run (a failed ``PreToolUse`` or ``PermissionRequest``
        hook denies the call instead), so an app checks here that its audit and
        logging hooks work.

        Examples:
            >>> import asyncio
            >>> registry = HookRegistry([HookMatcher("Stop", lambda context: 1 / 0)])
            >>> _ = asyncio.run(registry.run("Stop", context=HookContext(event="Stop")))
            >>> [(e.event, e.error) for e in registry.last_errors()]
            [('Stop', 'ZeroDivisionError: division by zero')]
            >>> registry.clear_errors()
            >>> registry.last_errors()
            []
        """
        with self._lock:
            return list(self._errors)

    def clear_errors(self) -> None:
        """Empty the error log (see :meth:`last_errors`)."""
        with self._lock:
            self._errors.clear()

    def __len__(self) -> int:
        return len(self._matchers)

    def __iter__(self) -> Iterator[HookMatcher]:
        return iter(self._matchers)

    def __repr__(self) -> str:
        return f"HookRegistry({list(self._matchers)!r})"

    def _log_error(self, event: str, tool_name: str | None, record: HookCallRecord) -> None:
        with self._lock:
            self._errors.append(
                HookError(
                    event,
                    tool_name,
                    record.error or record.outcome,
                    time.time(),
                    record.matcher.name,
                    record.outcome,
                )
            )

    async def run(
        self,
        event: str,
        *,
        tool_name: str | None = None,
        tool_input: Any = None,
        tool_output: Any = None,
        context: HookContext,
    ) -> HookRun:
        """Run the callbacks matching ``event`` until one returns something other than None.

        Callbacks run one at a time in the order added. An exception, a timeout, or a
        result of the wrong type (anything but None or the event's ``HookResult*``
        class for ``PreToolUse``, ``PostToolUse`` and ``PreCompact``) is recorded as a
        failure and never raised. For ``PreToolUse`` and ``PermissionRequest`` the first
        failure also ends the run (callers treat it as a denial); for other events the
        next callback runs. Each callback gets its own copy of ``tool_input``: to change
        the input, return ``HookResultPreToolUse(updated_input=...)``.

        Raises:
            InvalidHookError: ``event`` is not a hook event name.

        Examples:
            >>> import asyncio
            >>> async def deny_all(tool_name, tool_input, context):
            ...     return HookResultPreToolUse(permission="deny", reason="no")
            >>> registry = HookRegistry([HookMatcher("PreToolUse", deny_all)])
            >>> run = asyncio.run(registry.run(
            ...     "PreToolUse", tool_name="read_file", tool_input={"path": "a.txt"},
            ...     context=HookContext(event="PreToolUse"),
            ... ))
            >>> run.result.reason, run.decided_by
            ('no', 0)
        """
        _check_event(event)
        if context.event != event:
            context = dataclasses.replace(context, event=event)
        expected = _RESULT_TYPES.get(event)
        stop_on_failure = event in _GATING_EVENTS
        records: list[HookCallRecord] = []
        for index, matcher in enumerate(self._matchers):
            if matcher.event != event or not matcher.matches(tool_name):
                continue
            args = _arguments(event, tool_name, tool_input, tool_output, context)
            started = time.perf_counter()
            timed_out = False
            try:
                async with timeout(matcher.timeout):
                    value, exc = await _invoke(matcher, args)
            except TimeoutError:
                timed_out, value, exc = True, None, None
            duration = time.perf_counter() - started
            if timed_out:
                assert matcher.timeout is not None
                record = HookCallRecord(
                    index, matcher, "timeout", f"timed out after {matcher.timeout:g} s", duration
                )
            elif exc is not None:
                record = HookCallRecord(
                    index, matcher, "error", _error_text(exc), duration, exception=exc
                )
            elif value is None:
                record = HookCallRecord(index, matcher, "none", None, duration)
            elif expected is not None and not isinstance(value, expected):
                record = HookCallRecord(
                    index,
                    matcher,
                    "error",
                    f"returned {type(value).__name__}; a {event} hook must return None "
                    f"or {expected.__name__}",
                    duration,
                )
            else:
                records.append(HookCallRecord(index, matcher, "result", None, duration, value))
                return HookRun(event, tool_name, value, index, matcher, tuple(records))
            records.append(record)
            if record.outcome in ("error", "timeout"):
                self._log_error(event, tool_name, record)
            if stop_on_failure and record.outcome != "none":
                break
        return HookRun(event, tool_name, records=tuple(records))


def _arguments(
    event: str, tool_name: str | None, tool_input: Any, tool_output: Any, context: HookContext
) -> tuple[Any, ...]:
    if event not in TOOL_HOOK_EVENTS:
        return (context,)
    try:
        own_input = copy.deepcopy(tool_input)
    except Exception:
        own_input = tool_input
    if event == "PostToolUse":
        return (tool_name, own_input, context, tool_output)
    return (tool_name, own_input, context)
