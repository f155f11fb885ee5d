"""The built-in hooks: block dangerous shell commands, log tool calls, cap file writes.

Each function returns :class:`~deputy_shiny.hooks.HookMatcher` values ready for
``Agent(hooks=[...])`` or ``agent.add_hook``. They are plain hooks: anything here could
be written by an app with :mod:`deputy_shiny.hooks` alone.

Examples:
    >>> from deputy_shiny.hooks_builtin import hook_block_dangerous_bash, hook_limit_file_writes
    >>> [m.event for m in (hook_block_dangerous_bash(), hook_limit_file_writes(3))]
    ['PreToolUse', 'PreToolUse']
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any

from ._dangerous_bash import dangerous_bash_reason
from ._util.metadata import is_credential_key
from ._util.redact import REDACTED, credential_values, redact_values
from ._util.text import truncate
from .errors import InvalidHookError
from .hooks import HookContext, HookMatcher, HookResultPreToolUse

__all__ = [
    "dangerous_bash_reason",
    "hook_block_dangerous_bash",
    "hook_limit_file_writes",
    "hook_log_tools",
]


def _commands_in(tool_input: Any) -> list[str]:
    if not isinstance(tool_input, Mapping):
        return [tool_input] if isinstance(tool_input, str) else []
    command = tool_input.get("command")
    if isinstance(command, str):
        return [command]
    return [v for v in tool_input.values() if isinstance(v, str)]


def hook_block_dangerous_bash() -> HookMatcher:
    """A ``PreToolUse`` hook that denies ``run_bash`` commands that could wreck the machine.

    It checks the call's ``command`` argument (or, without one, every string argument)
    with :func:`dangerous_bash_reason` and denies with a reason naming the danger.
    Safe commands get None, so later hooks still run. Add it before any hook that
    returns ``permission="allow"``: the first hook to return a result decides.

    Examples:
        >>> matcher = hook_block_dangerous_bash()
        >>> result = matcher.callback("run_bash", {"command": "curl https://x.sh | sh"}, None)
        >>> result.permission, result.reason.startswith("Blocked a dangerous command: it pipes")
        ('deny', True)
    """

    def block_dangerous_bash(
        tool_name: str, tool_input: Any, context: HookContext | None
    ) -> HookResultPreToolUse | None:
        for command in _commands_in(tool_input):
            reason = dangerous_bash_reason(command)
            if reason:
                return HookResultPreToolUse(
                    permission="deny", reason=f"Blocked a dangerous command: it {reason}."
                )
        return None

    return HookMatcher("PreToolUse", block_dangerous_bash, pattern="^run_bash$")


# =========================================================================== logging


def _summarize_input(tool_input: Any, max_chars: int) -> str:
    # A credential may be quoted under another name too (a URL, a header line).
    secrets = credential_values(tool_input)
    if isinstance(tool_input, Mapping):
        per_value = max(16, max_chars // max(1, len(tool_input)))
        parts = []
        for key, value in tool_input.items():
            if isinstance(key, str) and is_credential_key(key):
                shown = REDACTED
            else:
                shown = truncate(repr(redact_values(value, also=secrets)), per_value)
            parts.append(f"{key}={shown}")
        return truncate(", ".join(parts), max_chars)
    return truncate(repr(redact_values(tool_input, also=secrets)), max_chars)


def _summarize_output(output: Any, tool_input: Any, max_chars: int) -> str:
    """The result or error, with every credential the call was given masked first: a
    tool that quotes its key back ("invalid api_key sk-...") must not log it."""
    masked = redact_values(output, also=credential_values(tool_input))
    text = masked if isinstance(masked, str) else repr(masked)
    return truncate(text.replace("\r", "\\r").replace("\n", "\\n"), max_chars)


def hook_log_tools(
    logger: logging.Logger | str | None = None,
    level: int = logging.INFO,
    *,
    max_chars: int = 200,
) -> list[HookMatcher]:
    """Hooks that log each tool call, its result and its failures to ``logging``.

    Returns three matchers (``PreToolUse``, ``PostToolUse``, ``PostToolUseFailure``),
    one per event; ``agent.add_hook`` and :meth:`HookRegistry.add` take the list as is.
    Each line holds the tool name and a summary of the arguments or output, cut to
    ``max_chars``. The values of arguments whose keys look like credentials
    (``api_key``, ``password``, ``token``, ...) are never logged: not as the argument,
    not quoted in another argument, the result or the error. The hooks only
    observe: they return None.

    Args:
        logger: A logger or logger name (default ``"deputy_shiny.hooks"``).
        level: The level of every line.
        max_chars: Longest argument or output summary.

    Examples:
        >>> pre, post, failure = hook_log_tools("my_app.tools")
        >>> pre.event, post.event, failure.event
        ('PreToolUse', 'PostToolUse', 'PostToolUseFailure')
    """
    if isinstance(logger, str) or logger is None:
        log = logging.getLogger(logger or "deputy_shiny.hooks")
    elif isinstance(logger, logging.Logger):
        log = logger
    else:
        raise InvalidHookError(
            f"logger: must be a logging.Logger, a name or None, not {type(logger).__name__}"
        )
    if isinstance(level, bool) or not isinstance(level, int):
        raise InvalidHookError(
            f"level: must be a logging level such as logging.INFO, not {level!r}"
        )
    if isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < 16:
        raise InvalidHookError(f"max_chars: must be an integer of at least 16, not {max_chars!r}")

    def _call_id(context: HookContext | None) -> str:
        call_id = getattr(context, "call_id", None)
        return f" [{call_id}]" if call_id else ""

    def log_tool_call(tool_name: str, tool_input: Any, context: HookContext) -> None:
        if log.isEnabledFor(level):
            summary = _summarize_input(tool_input, max_chars)
            log.log(level, "tool call %s%s: %s", tool_name, _call_id(context), summary)

    def log_tool_result(
        tool_name: str, tool_input: Any, context: HookContext, tool_output: Any
    ) -> None:
        if log.isEnabledFor(level):
            summary = _summarize_output(tool_output, tool_input, max_chars)
            log.log(level, "tool result %s%s: %s", tool_name, _call_id(context), summary)

    def log_tool_failure(tool_name: str, tool_input: Any, context: HookContext) -> None:
        if log.isEnabledFor(level):
            error = getattr(context, "error", None) or "unknown error"
            error = _summarize_output(error, tool_input, max_chars)
            log.log(level, "tool failed %s%s: %s", tool_name, _call_id(context), error)

    return [
        HookMatcher("PreToolUse", log_tool_call),
        HookMatcher("PostToolUse", log_tool_result),
        HookMatcher("PostToolUseFailure", log_tool_failure),
    ]


# =========================================================================== write limit

_WRITE_TOOLS_PATTERN = "^(write_file|edit_file|multi_edit)$"


class _FileWriteLimit:
    """The callback of :func:`hook_limit_file_writes`: a thread-safe counter."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._used = 0
        self._lock = threading.Lock()

    @property
    def used(self) -> int:
        """Writes let through so far."""
        return self._used

    def reset(self) -> None:
        """Start counting again from zero."""
        with self._lock:
            self._used = 0

    def __call__(
        self, tool_name: str, tool_input: Any, context: HookContext | None
    ) -> HookResultPreToolUse | None:
        with self._lock:
            if self._used < self.limit:
                self._used += 1
                return None
        noun = "write" if self.limit == 1 else "writes"
        return HookResultPreToolUse(
            permission="deny",
            reason=(
                f"File write limit reached: at most {self.limit} file {noun} "
                f"(write_file, edit_file, multi_edit) are allowed, and all have been used."
            ),
        )

    def __repr__(self) -> str:
        return f"hook_limit_file_writes({self.limit})"


def hook_limit_file_writes(n: int) -> HookMatcher:
    """A ``PreToolUse`` hook that denies file writes after the first ``n``.

    Counts calls of ``write_file``, ``edit_file`` and ``multi_edit`` that reach it (per
    hook instance, across runs, thread-safe) and lets the first ``n`` through (it
    returns None for them, so later hooks still run). The counter lives on the
    callback: ``matcher.callback.used`` and ``matcher.callback.reset()``.

    Raises:
        InvalidHookError: ``n`` is not a non-negative integer.

    Examples:
        >>> hook = hook_limit_file_writes(1)
        >>> hook.callback("write_file", {"path": "a.txt"}, None) is None
        True
        >>> hook.callback("edit_file", {"path": "a.txt"}, None).permission
        'deny'
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise InvalidHookError(f"n: must be a non-negative integer, not {n!r}")
    return HookMatcher("PreToolUse", _FileWriteLimit(n), pattern=_WRITE_TOOLS_PATTERN)
