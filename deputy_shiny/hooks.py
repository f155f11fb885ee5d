"""Hooks: callbacks that run at set points of an agent's run and may change it.

A :class:`HookMatcher` ties a callback to one :data:`HookPoint` (and, for tool events,
to tool names matching a regex). A :class:`HookRegistry` holds an agent's matchers and
runs them: in the order added, sync callbacks in a worker thread, async ones awaited,
each under its own timeout, stopping at the first callback that returns something.
Failures never escape :meth:`HookRegistry.run`; they are recorded in the
:class:`HookRun` it returns, and the caller decides what they mean (the engine denies
the tool call when a ``PreToolUse`` or ``PermissionRequest`` hook fails).

Callback signatures:

- ``PreToolUse``, ``PostToolUseFailure``, ``PermissionRequest``:
  ``callback(tool_name, tool_input, context)``
- ``PostToolUse``: ``callback(tool_name, tool_input, context, tool_output)`` (the
  output is added at the end, so ``context`` is third for every tool event)
- every other event: ``callback(context)``

A callback that cannot take its event's arguments is an :class:`InvalidHookError` when
the :class:`HookMatcher` is made: too many or too few positional parameters, or
parameters named for another position or event (say deputy's PostToolUse
``(tool_name, tool_result, tool_error, context)``, or ``tool_output`` before
``context``). Unknown names (``name``, ``args``, ``ctx``...) and ``*args``/``**kwargs``
are accepted. Each callback has a timeout, 30 seconds unless the matcher says
otherwise (None waits forever); a late callback counts as failed.

``context`` is a :class:`HookContext`. The built-in hooks
(:func:`~deputy_shiny.hooks_builtin.hook_block_dangerous_bash`,
:func:`~deputy_shiny.hooks_builtin.hook_log_tools`,
:func:`~deputy_shiny.hooks_builtin.hook_limit_file_writes`) live in
:mod:`deputy_shiny.hooks_builtin`.

Examples:
    >>> import asyncio
    >>> from deputy_shiny.hooks import HookContext, HookRegistry
    >>> from deputy_shiny.hooks_builtin import hook_block_dangerous_bash
    >>> registry = HookRegistry([hook_block_dangerous_bash()])
    >>> run = asyncio.run(registry.run(
    ...     "PreToolUse", tool_name="run_bash", tool_input={"command": "sudo rm -rf /"},
    ...     context=HookContext(event="PreToolUse"),
    ... ))
    >>> run.result.permission
    'deny'
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import difflib
import inspect
import math
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, ClassVar, Literal, get_args

from pydantic import Field

from ._util.callables import is_async_callable
from ._util.config import FrozenConfig
from ._util.text import truncate
from ._util.timeouts import timeout
from .errors import ConfigurationError, InvalidHookError
from .identity import CallIdentity

__all__ = [
    "DEFAULT_HOOK_TIMEOUT",
    "HOOK_EVENTS",
    "TOOL_HOOK_EVENTS",
    "HookCallRecord",
    "HookContext",
    "HookMatcher",
    "HookPoint",
    "HookRegistry",
    "HookResultPostToolUse",
    "HookResultPreCompact",
    "HookResultPreToolUse",
    "HookRun",
    "InvalidHookError",
]

HookPoint = Literal[
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "PermissionRequest",
    "SessionStart",
    "UserPromptSubmit",
    "Stop",
    "SessionEnd",
    "SubagentStart",
    "SubagentStop",
    "PreCompact",
    "PostCompact",
    "Notification",
    "ConfigChange",
]
"""The points of a run where hooks fire.

As in deputy, ``SessionStart`` fires as each run starts (before ``UserPromptSubmit``)
and ``SessionEnd`` as each run ends (after ``Stop``), for every run of an agent, not
only its first; both get the run's ``run_id``, and ``SessionEnd`` the stop reason.

``PreCompact`` fires before compaction summarises the conversation (its callback may
return :class:`HookResultPreCompact` to cancel or supply the summary; ``reason`` is
``"auto"`` or ``"manual"``, ``details`` has ``tokens`` and ``turns_to_remove``), and
``PostCompact`` after it (``details``: the
:class:`~deputy_shiny.context.CompactionRecord` as a dict).

``Notification`` fires when the agent has something to tell the app outside a run's
reply, as in deputy; ``context.details`` holds ``message`` (for people), ``level``
(``"info"`` or ``"warning"``), ``code`` (for code) and what the notice is about:

- ``permission_denied``: a tool call was denied (``tool_name``, ``tool_input``,
  ``call_id``; the denial's reason is the ``message``);
- a limit's stop reason (``request_limit``, ``cost_limit``...): a usage limit ended the
  run (``usage``, ``limit``: the run's own limit, None when a budget above it stopped it,
  or the host's :class:`~deputy_shiny.usage.RequestGate`, ``budget_limit``);
- ``cost_limit_warning``: the run has spent 90% of its cost limit (``usage``,
  ``limit``); ``compact_fallback``: compaction used a plain digest (``error``), both
  also ``warning`` events;
- ``permission_mode_changed`` (level ``info``): ``set_permission_mode`` narrowed the
  mode (``previous_mode``, ``permission_mode``).

``ConfigChange`` fires when the agent's configuration changes at runtime:
``details`` holds ``key`` (``"permission_mode"`` or ``"model"``), ``old_value`` and
``new_value``. Outside a run (these two, and ``set_model``'s) hooks fire at once when
no event loop runs in the calling thread; inside one they run in a task of their own,
so the call that changed the configuration never waits for them.

``SubagentStart`` and ``SubagentStop`` fire as a lead agent starts and ends a subagent.

``events.HookEvent`` is the *event record* the engine emits after a hook ran; this is
the name of the hook point.
"""

HOOK_EVENTS: tuple[str, ...] = get_args(HookPoint)
"""Every hook event name, in a stable order."""

TOOL_HOOK_EVENTS: frozenset[str] = frozenset(
    {"PreToolUse", "PostToolUse", "PostToolUseFailure", "PermissionRequest"}
)
"""Events about one tool call: their callbacks get the tool's name and input."""

_GATING_EVENTS = frozenset({"PreToolUse", "PermissionRequest"})
_MAX_ERROR_CHARS = 500


def _check_event(event: object, where: str = "event") -> str:
    if not isinstance(event, str):
        raise InvalidHookError(
            f"{where}: must be a hook event name (one of {', '.join(HOOK_EVENTS)}), "
            f"not {type(event).__name__}"
        )
    if event not in HOOK_EVENTS:
        by_case = {name.lower(): name for name in HOOK_EVENTS}
        close = [by_case[event.lower()]] if event.lower() in by_case else []
        close = close or difflib.get_close_matches(event, HOOK_EVENTS, n=1, cutoff=0.5)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise InvalidHookError(
            f"{where}: unknown hook event {event!r}.{hint} "
            f"Hook events are: {', '.join(HOOK_EVENTS)}."
        )
    return event


# --------------------------------------------------------------------------- results


class HookResultPreToolUse(FrozenConfig):
    """What a ``PreToolUse`` callback returns to change a tool call (None changes nothing).

    Attributes:
        permission: ``"deny"`` refuses the call, ``"ask"`` sends an allowed call to a
            person, ``"allow"`` changes nothing (it can never lift a denial). None
            leaves the decision alone.
        reason: Why; the model sees it when the call is denied.
        updated_input: Replacement arguments. They are checked again like the model's.
        additional_context: Text added to what the model sees with the tool result.
        continue_: False ends the run after this call (stop reason
            ``hook_requested_stop``).
        stop_reason: The message recorded when ``continue_`` is False.

    Examples:
        >>> HookResultPreToolUse(permission="deny", reason="not on Fridays").permission
        'deny'
    """

    _config_error: ClassVar[type[ConfigurationError]] = InvalidHookError

    permission: Literal["allow", "deny", "ask"] | None = None
    reason: str = Field(default="", strict=True)
    updated_input: dict[str, Any] | None = Field(default=None, strict=True)
    additional_context: str | None = Field(default=None, strict=True)
    continue_: bool = Field(default=True, strict=True)
    stop_reason: str | None = Field(default=None, strict=True)


class HookResultPostToolUse(FrozenConfig):
    """What a ``PostToolUse`` callback returns to change a tool's result (None changes nothing).

    Attributes:
        updated_tool_output: Replaces the output the model sees (None keeps it).
        suppress_output: True withholds the output from the model.
        continue_: False ends the run after this call (stop reason
            ``hook_requested_stop``).
        stop_reason: The message recorded when ``continue_`` is False.

    Examples:
        >>> HookResultPostToolUse(updated_tool_output="[redacted]").updated_tool_output
        '[redacted]'
    """

    _config_error: ClassVar[type[ConfigurationError]] = InvalidHookError

    updated_tool_output: Any = None
    suppress_output: bool = Field(default=False, strict=True)
    continue_: bool = Field(default=True, strict=True)
    stop_reason: str | None = Field(default=None, strict=True)


class HookResultPreCompact(FrozenConfig):
    """What a ``PreCompact`` callback returns: cancel compaction, or supply the summary.

    Compaction (automatic, or ``agent.compact()``) fires ``PreCompact`` first; the first
    callback that returns one decides.

    Attributes:
        continue_: False cancels this compaction.
        summary: Use this summary instead of asking the model for one.

    Examples:
        >>> HookResultPreCompact(summary="We fixed the parser.").continue_
        True
    """

    _config_error: ClassVar[type[ConfigurationError]] = InvalidHookError

    continue_: bool = Field(default=True, strict=True)
    summary: str | None = Field(default=None, strict=True)


_RESULT_TYPES: dict[str, type[FrozenConfig]] = {
    "PreToolUse": HookResultPreToolUse,
    "PostToolUse": HookResultPostToolUse,
    "PreCompact": HookResultPreCompact,
}


# --------------------------------------------------------------------------- context


@dataclass(frozen=True, slots=True, kw_only=True)
class HookContext(CallIdentity):
    """What a callback learns about the run it is called from.

    Attributes:
        event: The hook event being run.
        agent_id / session_id / run_id: Who is running (None when not known yet).
        run_context: The run's ``run_context`` (a copy; changing it changes nothing).
        call_id: The tool call's ID, for tool events.
        reason: Why the event fired: the stop reason at ``Stop``, ``SessionEnd`` and
            ``SubagentStop``, ``"manual"`` or ``"auto"`` at ``PreCompact`` and
            ``PostCompact``.
        error: The error message at ``PostToolUseFailure``.
        permission_reason: At ``PermissionRequest``, why the call was denied or needs
            approval.
        prompt: The user's message at ``UserPromptSubmit``.
        details: Anything else the event carries (for example ``subagent`` and ``task``
            at ``SubagentStart``/``SubagentStop``; ``message``, ``level`` and ``code`` at
            ``Notification``; ``key``, ``old_value`` and ``new_value`` at
            ``ConfigChange``).
        tool_metadata: At tool events, :func:`~deputy_shiny.tools.tool_metadata` of the
            tool (its source: an MCP tool's server, remote name and connection id), as
            permission callbacks get it; None at other events.
        tool_annotations: At tool events, the tool's annotations as supplied (missing
            ones absent); None at other events.

    Examples:
        >>> HookContext(event="Stop", run_id="run_1", reason="complete").reason
        'complete'
    """

    event: str
    run_context: Mapping[str, Any] = field(default_factory=dict)
    reason: str | None = None
    error: str | None = None
    permission_reason: str | None = None
    prompt: str | None = None
    details: Mapping[str, Any] = field(default_factory=dict)
    tool_metadata: Mapping[str, Any] | None = None
    tool_annotations: Mapping[str, bool] | None = None

    def __post_init__(self) -> None:
        _check_event(self.event)
        object.__setattr__(self, "run_context", dict(self.run_context))
        object.__setattr__(self, "details", dict(self.details))


# --------------------------------------------------------------------------- matcher


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


# --------------------------------------------------------------------------- runs

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

    def __len__(self) -> int:
        return len(self._matchers)

    def __iter__(self) -> Iterator[HookMatcher]:
        return iter(self._matchers)

    def __repr__(self) -> str:
        return f"HookRegistry({list(self._matchers)!r})"

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
