"""HookContext: what a callback learns about the run it is called from."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..identity import CallIdentity
from ._events import _check_event

if TYPE_CHECKING:  # values only: the hooks never read them, the engine fills them in
    from ..permissions import Permissions
    from ..usage import AgentUsage, CostSummary, UsageLimits


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
        working_dir: The agent's working directory.
        usage / cost: The run's :class:`~deputy_shiny.usage.AgentUsage` and
            :class:`~deputy_shiny.usage.CostSummary` so far (None outside a run).
        usage_limits: The run's :class:`~deputy_shiny.usage.UsageLimits`.
        total_turns: How many turns the conversation holds now.
        permissions: The agent's :class:`~deputy_shiny.permissions.Permissions`.
        provider: ``{"name": ..., "model": ...}`` of the model requests go to.
        tools_count: How many tools the agent has.
        parent_agent_id / parent_run_id / delegation_id: For a delegated run, the agent
            and run that delegated it and the delegation (None otherwise).

    Unlike deputy, which sets some of these at some events only (``permissions`` at
    ``SessionStart``, ``cost`` at ``Stop``...), every event of a run gets every field
    it knows; a field is None where it is not known (a hook run outside a run, as
    ``ConfigChange`` and ``agent.compact()`` may be, has no ``usage``).

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
    working_dir: Path | None = None
    usage: AgentUsage | None = None
    usage_limits: UsageLimits | None = None
    cost: CostSummary | None = None
    total_turns: int | None = None
    permissions: Permissions | None = None
    provider: Mapping[str, str] | None = None
    tools_count: int | None = None
    parent_agent_id: str | None = None
    parent_run_id: str | None = None
    delegation_id: str | None = None

    def __post_init__(self) -> None:
        _check_event(self.event)
        object.__setattr__(self, "run_context", dict(self.run_context))
        object.__setattr__(self, "details", dict(self.details))
        if self.provider is not None:
            object.__setattr__(self, "provider", dict(self.provider))
