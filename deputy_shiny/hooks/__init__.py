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

from ..errors import InvalidHookError
from ._context import HookContext
from ._events import HOOK_EVENTS, TOOL_HOOK_EVENTS, HookPoint
from ._matcher import DEFAULT_HOOK_TIMEOUT, HookMatcher
from ._registry import MAX_ERROR_LOG, HookCallRecord, HookError, HookRegistry, HookRun
from ._results import HookResultPostToolUse, HookResultPreCompact, HookResultPreToolUse

__all__ = [
    "DEFAULT_HOOK_TIMEOUT",
    "HOOK_EVENTS",
    "MAX_ERROR_LOG",
    "TOOL_HOOK_EVENTS",
    "HookCallRecord",
    "HookContext",
    "HookError",
    "HookMatcher",
    "HookPoint",
    "HookRegistry",
    "HookResultPostToolUse",
    "HookResultPreCompact",
    "HookResultPreToolUse",
    "HookRun",
    "InvalidHookError",
]
