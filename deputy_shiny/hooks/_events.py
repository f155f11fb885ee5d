"""Hook points: the names of the events hooks fire at, and their check."""

from __future__ import annotations

import difflib
from typing import Literal, get_args

from ..errors import InvalidHookError

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
``"auto"`` or ``"manual"``, ``details`` has ``tokens``, ``turns_to_remove`` and, as
deputy's arguments, ``turns_to_compact`` and ``turns_to_keep``: copies of the turns), and
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
- ``provider_error``: a failed model request ended the run (``usage``);
- ``file_checkpoint_capture_failed``: the checkpoint journal refused a file a tool was
  about to write (``tool_name``, ``call_id``), so the call failed;
- at level ``info``: ``permission_mode_changed`` (``set_permission_mode`` narrowed the
  mode: ``previous_mode``, ``permission_mode``), ``file_checkpoint_created``
  (``agent.checkpoint()``: ``checkpoint_id``, ``checkpoint_name``) and ``files_rewound``
  (``agent.rewind_files()``: ``checkpoint_id``, ``restored_changes``, ``paths``).

``ConfigChange`` fires when the agent's configuration changes at runtime:
``details`` holds ``key`` (``"permission_mode"`` or ``"model"``), ``old_value`` and
``new_value``. Outside a run (these two, and ``set_model``'s) hooks fire at once when
no event loop runs in the calling thread; inside one they run in a task of their own,
so the call that changed the configuration never waits for them.

``SubagentStart`` and ``SubagentStop`` fire as a lead agent starts and ends a subagent
(``details``: ``subagent``, ``task``, ``delegation_id``; at ``SubagentStop`` also
``result``, the subagent's :class:`~deputy_shiny.AgentResult`, None if it never ran).

``PostToolUse`` fires after every tool call, as in deputy: on a failure its
``tool_output`` is None and ``context.error`` holds the error; ``PostToolUseFailure``
fires after it when the call failed.

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
