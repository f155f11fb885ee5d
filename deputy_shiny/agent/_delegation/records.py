"""What a lead records of its delegations: records, manifests and observed events.

Frozen pydantic values, so ``pandas.DataFrame([r.model_dump() for r in records])``
makes a table of them.

Examples:
    >>> SubagentRecord(delegation_id="d1", agent_name="reviewer", task="Review a.py",
    ...                status="queued").stop_reason is None
    True
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ...events import AgentResult
from ...usage import AgentUsage

__all__ = [
    "DelegationEventRecord",
    "DelegationManifest",
    "DelegationStatus",
    "InputError",
    "SubagentRecord",
    "SubagentResult",
]

DelegationStatus = Literal[
    "queued", "running", "completed", "failed", "stopped", "not_started", "suspended"
]
"""Where a delegation is: waiting for a slot, running, or how it ended. ``completed``
means the subagent finished normally, not that it did the task well (see
``stop_reason``); ``not_started`` means its task was refused before it ran (see
``input_error``)."""

InputError = Literal["invalid", "missing", "stale", "unauthorized", "oversized"]
"""Why a task was refused before it ran."""


class DelegationManifest(BaseModel):
    """What a subagent started with (``get_subagent_contexts(view="initial")``).

    Examples:
        >>> DelegationManifest(agent_name="r", task="t", system_prompt="", tools=(),
        ...                    model="m", permission_mode="readonly").tools
        ()
    """

    model_config = ConfigDict(frozen=True, defer_build=True)

    agent_name: str
    task: str
    system_prompt: str
    tools: tuple[str, ...] = Field(description="The tools it could call.")
    model: str
    permission_mode: str = Field(description="Its own mode (its lead's still applies too).")
    limits: dict[str, Any] = Field(
        default_factory=dict, description="Its usage limits, clamped to what its lead had left."
    )
    lead_agent_id: str | None = None
    depth: int = Field(default=1, description="1 for a lead's own subagent, 2 below that...")


class SubagentRecord(BaseModel):
    """One delegation, as ``list_subagents()`` reports it.

    Times and ids are None until known; ``completed_at`` is set when the run ends.
    ``handle`` is the retained agent's handle for a task sent to a retained agent
    (``continue_agent`` or a graph route), None for a subagent a lead built.
    ``response`` is what the subagent *said* (its final text); ``stop_reason`` and
    ``usage`` are what the runtime *observed*.

    Examples:
        >>> SubagentRecord(delegation_id="d1", agent_name="r", task="t",
        ...                status="not_started", input_error="oversized").input_error
        'oversized'
    """

    model_config = ConfigDict(frozen=True, defer_build=True)

    delegation_id: str
    agent_name: str
    task: str
    status: DelegationStatus
    stop_reason: str | None = None
    input_error: InputError | None = None
    hook_error: str | None = None
    error: str | None = None
    agent_id: str | None = None
    session_id: str | None = None
    run_id: str | None = None
    parent_delegation_id: str | None = None
    handle: str | None = None
    queued_at: datetime | None = None
    started_at: datetime | None = None
    completed_at: datetime | None = None
    usage: AgentUsage | None = None
    response: str | None = None


class SubagentResult(AgentResult):
    """A subagent's :class:`~deputy_shiny.AgentResult` (``get_subagent_results()``), with
    the delegation's :class:`SubagentRecord` as ``record``.

    Everything an AgentResult has (``turns``, ``events``, ``usage``, ``cost``, the
    lineage ids...) is the subagent run's own; the record's fields an AgentResult lacks
    (``task``, ``status``, ``error``, ``completed_at``...) read through, so code written
    for the records ``get_subagent_results()`` used to return keeps working.

    Examples:
        >>> SubagentResult.model_fields["record"].annotation.__name__
        'SubagentRecord'
    """

    record: SubagentRecord

    @property
    def task(self) -> str:
        """The task the subagent was given."""
        return self.record.task

    @property
    def status(self) -> DelegationStatus:
        """The delegation's status (see :class:`SubagentRecord`)."""
        return self.record.status

    @property
    def error(self) -> str | None:
        """Why the delegation failed, if it did."""
        return self.record.error

    @property
    def input_error(self) -> InputError | None:
        """Always None here: a refused task has no result."""
        return self.record.input_error

    @property
    def hook_error(self) -> str | None:
        """Errors of hooks watching the subagent."""
        return self.record.hook_error

    @property
    def handle(self) -> str | None:
        """The retained agent's handle (None for a subagent a lead built)."""
        return self.record.handle

    @property
    def parent_delegation_id(self) -> str | None:
        """The delegation whose run made this one (None: the owner's own run)."""
        return self.record.parent_delegation_id

    @property
    def queued_at(self) -> datetime | None:
        """When the delegation was asked for."""
        return self.record.queued_at

    @property
    def started_at(self) -> datetime | None:
        """When its run started."""
        return self.record.started_at

    @property
    def completed_at(self) -> datetime | None:
        """When its run ended."""
        return self.record.completed_at


class DelegationEventRecord(BaseModel):
    """One observed event of a delegation (``observe_subagents``), with its cursor.

    ``kind`` is ``status`` (the delegation's status changed; ``status`` says to what)
    or the subagent's own event type (``tool_start``, ``tool_end``, ``text_complete``,
    ``stop``...); ``summary`` is a short, display-ready description.

    Examples:
        >>> DelegationEventRecord(cursor=1, delegation_id="d1", agent_name="r",
        ...                       kind="status", status="running", summary="started").cursor
        1
    """

    model_config = ConfigDict(frozen=True, defer_build=True)

    cursor: int
    delegation_id: str
    agent_name: str
    kind: str
    status: DelegationStatus | None = None
    summary: str = ""
    data: dict[str, Any] = Field(default_factory=dict)
    at: datetime | None = None
