"""A lead's delegations: the ``delegate`` tool, the runs it starts, and their records.

A delegation builds a subagent from an :class:`AgentDefinition` at the moment of the
call, from what the lead has *then*: only tools the lead has (looked up by name in its
registry), a permission mode no wider than the lead's, the lead's tool hooks, approval
handler, working directory and session. It runs on the same engine as every agent,
over deps that name the lead (and every agent above it) as :class:`Authority`, so each
call must also pass their current permissions, and the lead's run budget as parent, so
its usage is drawn from what the lead has left.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import uuid
import weakref
from collections import deque
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from .._budget import SharedBudget, current_budget
from .._run_deps import Authority
from ..errors import ConfigurationError, DelegationError
from ..hooks import HookContext, HookRegistry
from ..messages import Turn
from ..permissions import narrow_mode
from ..tools import Tool, current_tool_context, tool, tool_annotations
from ..usage import UsageLimits
from .definitions import AgentDefinition, agent_definition_resolve
from .policies import DelegationDisclosure, DelegationObservation
from .records import (
    DelegationEventRecord,
    DelegationManifest,
    DelegationStatus,
    InputError,
    SubagentRecord,
)

if TYPE_CHECKING:
    from ..agent import Agent

__all__ = ["DELEGATE_TOOL", "MAX_TASK_BYTES", "Delegations"]

logger = logging.getLogger(__name__)

DELEGATE_TOOL = "delegate"
MAX_TASK_BYTES = 64 * 1024
"""The longest task (UTF-8 bytes) a delegation accepts."""

_TOOL_HOOK_EVENTS = ("PermissionRequest", "PreToolUse", "PostToolUse", "PostToolUseFailure")

# How deep the delegation in progress is: 0 in a lead's own run, 1 inside its subagent.
_depth: contextvars.ContextVar[int] = contextvars.ContextVar("deputy_delegation_depth", default=0)
_parent_delegation: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "deputy_parent_delegation", default=None
)

_DELEGATE_ANNOTATIONS = tool_annotations(
    # The call itself changes nothing: every call its subagent makes passes the
    # subagent's permissions and the lead's (and the lead's budget pays for it).
    read_only_hint=True,
    destructive_hint=False,
    open_world_hint=False,
    idempotent_hint=False,
)


def _now() -> datetime:
    return datetime.now(UTC)


class _Delegation:
    """One delegation's live state (its record is a snapshot of this)."""

    def __init__(self, delegation_id: str, name: str, task: str, parent: str | None) -> None:
        self.id = delegation_id
        self.name = name
        self.task = task
        self.parent = parent
        self.status: DelegationStatus = "queued"
        self.stop_reason: str | None = None
        self.input_error: InputError | None = None
        self.hook_error: str | None = None
        self.error: str | None = None
        self.agent: Agent | None = None
        self.run_id: str | None = None
        self.queued_at = _now()
        self.started_at: datetime | None = None
        self.completed_at: datetime | None = None
        self.response: str | None = None
        self.manifest: DelegationManifest | None = None
        self.turns: list[Turn] = []
        self.usage: Any = None
        self.final_context: dict[str, Any] | None = None
        self.interrupt_reason: str | None = None
        self.ancestors: tuple[Authority, ...] = ()  # every agent above its subagent

    def record(self) -> SubagentRecord:
        agent = self.agent
        return SubagentRecord(
            delegation_id=self.id,
            agent_name=self.name,
            task=self.task,
            status=self.status,
            stop_reason=self.stop_reason,
            input_error=self.input_error,
            hook_error=self.hook_error,
            error=self.error,
            agent_id=agent.agent_id if agent is not None else None,
            session_id=agent.session_id if agent is not None else None,
            run_id=self.run_id,
            parent_delegation_id=self.parent,
            queued_at=self.queued_at,
            started_at=self.started_at,
            completed_at=self.completed_at,
            usage=self.usage if self.usage is not None else (agent.usage() if agent else None),
            response=self.response,
        )


class _RunSlots:
    """The concurrency and count limits of one lead run's delegations."""

    def __init__(self, max_concurrency: int) -> None:
        self.semaphore = asyncio.Semaphore(max_concurrency)
        self.started = 0


class Delegations:
    """A lead's delegations (the engine of :class:`~deputy_shiny.delegation.LeadAgent`).

    Example:
        >>> Delegations.__name__
        'Delegations'
    """

    def __init__(
        self,
        lead: Agent,
        definitions: Sequence[AgentDefinition],
        *,
        models: Mapping[str, Any] | None = None,
        max_depth: int = 1,
        max_concurrency: int = 4,
        max_delegations: int = 16,
        disclosure: DelegationDisclosure | None = None,
        observation: DelegationObservation | None = None,
        scope: Mapping[str, Any] | None = None,
    ) -> None:
        by_name: dict[str, AgentDefinition] = {}
        for definition in definitions:
            if not isinstance(definition, AgentDefinition):
                raise ConfigurationError(
                    f"subagents must be AgentDefinitions, not {type(definition).__name__}"
                )
            if definition.name in by_name:
                raise ConfigurationError(f"two subagents are named {definition.name!r}")
            by_name[definition.name] = definition
        for name, value in (("max_depth", max_depth), ("max_concurrency", max_concurrency)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigurationError(f"{name} must be a whole number of at least 1")
        if isinstance(max_delegations, bool) or not isinstance(max_delegations, int):
            raise ConfigurationError("max_delegations must be a whole number")
        if max_delegations < 0:
            raise ConfigurationError("max_delegations must be 0 or more")
        unknown = set(models or {}) - set(by_name)
        if unknown:
            raise ConfigurationError(f"models names unknown subagents: {sorted(unknown)}")
        self._lead_ref = weakref.ref(lead)
        self.definitions = by_name
        self._models = dict(models or {})
        self.max_depth = max_depth
        self.max_concurrency = max_concurrency
        self.max_delegations = max_delegations
        self.disclosure = disclosure or DelegationDisclosure()
        self.observation = observation or DelegationObservation()
        self.scope = dict(scope or {})
        self._delegations: dict[str, _Delegation] = {}
        self._slots: weakref.WeakKeyDictionary[SharedBudget, _RunSlots] = (
            weakref.WeakKeyDictionary()
        )
        self._events: deque[DelegationEventRecord] = deque(maxlen=self.observation.max_events)
        self._cursor = 0

    # ------------------------------------------------------------------ the tool

    @property
    def _lead(self) -> Agent:
        lead = self._lead_ref()
        if lead is None:  # pragma: no cover - the lead owns this object
            raise DelegationError("the lead agent is gone")
        return lead

    def tool(self) -> Tool:
        """The ``delegate`` tool the lead's model calls."""
        names = sorted(self.definitions)
        listing = "\n".join(f"- {n}: {self.definitions[n].description}" for n in names)

        async def delegate(agent: str, task: str) -> str:
            return await self.delegate(agent, task)

        schema = {
            "type": "object",
            "properties": {
                "agent": {"type": "string", "enum": names, "description": "Which subagent."},
                "task": {
                    "type": "string",
                    "description": "Everything the subagent needs to know: it sees nothing "
                    "of this conversation.",
                },
            },
            "required": ["agent", "task"],
            "additionalProperties": False,
        }
        return tool(
            delegate,
            name=DELEGATE_TOOL,
            description=(
                "Hand a self-contained task to a subagent and get its answer. Subagents:\n"
                + listing
            ),
            arguments=schema,
            annotations=_DELEGATE_ANNOTATIONS,
        )

    async def delegate(self, name: str, task: str) -> str:
        """Run ``task`` on the subagent ``name`` (from the lead's run); its answer or why not."""
        parent = _parent_delegation.get()
        item = _Delegation(f"dlg_{uuid.uuid4().hex[:16]}", name, task, parent)
        self._delegations[item.id] = item
        refused = self._refusal(item)
        if refused is not None:
            kind, message = refused
            item.status, item.input_error, item.error = "not_started", kind, message
            item.completed_at = _now()
            self._observe(item, "status", message)
            return f"Delegation refused: {message}"
        budget = current_budget.get()
        if budget is None:
            item.status, item.input_error = "not_started", "unauthorized"
            item.error = "delegation runs only from the lead's own run"
            item.completed_at = _now()
            self._observe(item, "status", item.error)
            return f"Delegation refused: {item.error}."
        slots = self._slots.get(_root(budget))
        if slots is None:
            slots = self._slots[_root(budget)] = _RunSlots(self.max_concurrency)
        if slots.started >= self.max_delegations:
            item.status, item.input_error = "not_started", "unauthorized"
            item.error = f"this run may delegate at most {self.max_delegations} times"
            item.completed_at = _now()
            self._observe(item, "status", item.error)
            return f"Delegation refused: {item.error}."
        slots.started += 1
        self._observe(item, "status", "queued")
        async with slots.semaphore:
            return await self._run(item, budget)

    def _refusal(self, item: _Delegation) -> tuple[InputError, str] | None:
        if item.name not in self.definitions:
            known = ", ".join(sorted(self.definitions)) or "none"
            return "invalid", f"there is no subagent {item.name!r} (known: {known})"
        if not isinstance(item.task, str) or not item.task.strip():
            return "missing", "the task is empty"
        if len(item.task.encode("utf-8", "surrogatepass")) > MAX_TASK_BYTES:
            return "oversized", f"the task is over {MAX_TASK_BYTES // 1024} KiB"
        if _depth.get() >= self.max_depth:
            return "unauthorized", (
                f"delegations may nest at most {self.max_depth} deep; this one would not"
            )
        return None

    # ------------------------------------------------------------------ one run

    async def _run(self, item: _Delegation, budget: SharedBudget) -> str:
        lead = self._lead
        definition = self.definitions[item.name]
        try:
            sub, limits = self._build(definition, budget)
        except Exception as exc:
            item.status, item.error, item.completed_at = "failed", str(exc), _now()
            self._observe(item, "status", f"could not start: {exc}")
            return f"Delegation failed before it started: {exc}"
        item.agent = sub
        item.manifest = DelegationManifest(
            agent_name=definition.name,
            task=item.task,
            system_prompt=sub.get_system_prompt() or "",
            tools=tuple(sorted(sub.get_tools())),
            model=sub.get_model(),
            permission_mode=sub.get_permission_mode(),
            limits=limits.model_dump(exclude_none=True),
            lead_agent_id=lead.agent_id,
            depth=_depth.get() + 1,
        )
        item.status, item.started_at = "running", _now()
        self._observe(item, "status", "running")
        await self._subagent_hook("SubagentStart", item, None)
        item.ancestors = self._ancestors_for(item)
        depth = _depth.set(_depth.get() + 1)
        parent = _parent_delegation.set(item.id)
        events = sub._delegated_run(
            item.task, parent_budget=budget, ancestors=item.ancestors, usage_limits=limits
        )
        try:
            async for event in events:
                if event.type == "start":
                    item.run_id = event.run_id
                self._observe_event(item, event)
        except asyncio.CancelledError:
            # The lead was interrupted (or its tool call cancelled): stop the subagent too.
            sub.interrupt("interrupted")
            item.status, item.stop_reason = "stopped", "interrupted"
            raise
        except Exception as exc:
            item.status, item.error = "failed", f"{type(exc).__name__}: {exc}"
        finally:
            await events.aclose()
            _depth.reset(depth)
            _parent_delegation.reset(parent)
            self._finish(item, sub)
            await sub.aclose()
        await self._subagent_hook("SubagentStop", item, item.stop_reason)
        self._observe(item, "status", item.stop_reason or item.status)
        return self._answer(item)

    def _build(
        self, definition: AgentDefinition, budget: SharedBudget
    ) -> tuple[Agent, UsageLimits]:
        from ..agent import Agent

        lead = self._lead
        available = {n: t for n, t in lead.get_tools().items() if isinstance(t, Tool)}
        resolved = agent_definition_resolve(definition, available)
        permissions = lead.permissions
        if definition.permission_mode is not None:
            permissions = narrow_mode(permissions, definition.permission_mode)
        if definition.disallowed_tools:
            permissions = permissions.model_copy(
                update={
                    "tool_denylist": (
                        *permissions.tool_denylist,
                        *definition.disallowed_tools,
                    )
                }
            )
        own = UsageLimits(max_requests=definition.max_requests)
        limits = own.clamp_to(budget.remaining())
        if definition.name in self._models:
            model: Any = self._models[definition.name]
        elif definition.model == "inherit":
            model = lead._model
        else:
            model = definition.model
        sub = Agent(
            model,
            system_prompt=definition.prompt or None,
            usage_limits=limits,
            working_dir=lead.working_dir,
            session_id=lead.session_id,
            agent_name=definition.name,
            permissions=permissions,
            hooks=lead._hooks.select(_TOOL_HOOK_EVENTS),
            approval_handler=lead._approval_handler,
        )
        sub._lend_tools(resolved.tools, lead)
        return sub, limits

    def _ancestors_for(self, item: _Delegation) -> tuple[Authority, ...]:
        """The lead; or, for a delegation made inside a subagent's run, that subagent and
        every agent above it (nearest first)."""
        parent = self._delegations.get(item.parent) if item.parent else None
        if parent is None or parent.agent is None:
            return (self._authority(self._lead),)
        return (self._authority(parent.agent), *parent.ancestors)

    def _authority(self, lead: Agent) -> Authority:
        lead_ref = weakref.ref(lead)

        def permissions() -> Any:
            agent = lead_ref()
            if agent is None:
                raise DelegationError("the lead agent is gone")
            return agent.permissions

        def tool_names() -> frozenset[str]:
            agent = lead_ref()
            return frozenset(agent.get_tools()) if agent is not None else frozenset()

        return Authority(
            name=f"lead agent {lead.agent_name}" if lead.agent_name else "lead agent",
            agent_id=lead.agent_id,
            permissions=permissions,
            tool_names=tool_names,
            working_dir=lead.working_dir,
        )

    def _finish(self, item: _Delegation, sub: Agent) -> None:
        result = sub.last_run()
        item.completed_at = _now()
        item.turns = sub.get_turns()
        item.usage = sub.usage()
        item.final_context = {
            "system_prompt": sub.get_system_prompt(),
            "turns": sub.get_turns(),
        }
        if result is not None:
            item.stop_reason = result.stop_reason
            item.response = result.response
        if item.status == "running":
            stopped = item.interrupt_reason is not None
            status = "stopped" if stopped else _STATUS_BY_STOP.get(item.stop_reason or "")
            item.status = status or "completed"

    def _answer(self, item: _Delegation) -> str:
        if item.status == "completed" and item.stop_reason == "complete":
            return item.response or "(The subagent finished without saying anything.)"
        said = f" It said: {item.response}" if item.response else ""
        why = item.error or item.stop_reason or item.status
        return f"The subagent {item.name} ended with {item.status} ({why}).{said}"

    async def _subagent_hook(self, event: str, item: _Delegation, reason: str | None) -> None:
        lead = self._lead
        hooks: HookRegistry = lead._hooks
        if not hooks.matchers(event):
            return
        context = HookContext(
            event=event,
            agent_id=lead.agent_id,
            session_id=lead.session_id,
            run_id=current_tool_context().run_id,
            reason=reason,
            details={"subagent": item.name, "task": item.task, "delegation_id": item.id},
        )
        run = await hooks.run(event, context=context)
        if run.failure is not None:
            item.hook_error = f"{event}: {run.failure}"

    # ------------------------------------------------------------------ observation

    def _observe(self, item: _Delegation, kind: str, summary: str) -> None:
        """Record a status change of ``item`` (``kind`` is always ``"status"`` here)."""
        self._append(item, kind=kind, status=item.status, summary=summary)

    def _observe_event(self, item: _Delegation, event: Any) -> None:
        summary = _summarize(event)
        if summary is not None:
            self._append(item, kind=event.type, status=None, summary=summary)

    def _append(
        self, item: _Delegation, *, kind: str, status: DelegationStatus | None, summary: str
    ) -> None:
        limit = self.observation.max_summary_chars
        if len(summary) > limit:
            summary = summary[: limit - 12] + " [... cut]"
        self._cursor += 1
        self._events.append(
            DelegationEventRecord(
                cursor=self._cursor,
                delegation_id=item.id,
                agent_name=item.name,
                kind=kind,
                status=status,
                summary=summary,
                at=_now(),
            )
        )

    def events_after(
        self, after: int, delegation_id: str | None = None
    ) -> tuple[list[DelegationEventRecord], int]:
        """Kept events with a cursor above ``after`` (and how many were dropped unseen)."""
        events = list(self._events)
        first = events[0].cursor if events else self._cursor + 1
        missed = max(0, first - after - 1)
        chosen = [
            e
            for e in events
            if e.cursor > after and (delegation_id is None or e.delegation_id == delegation_id)
        ]
        return chosen, missed

    @property
    def cursor(self) -> int:
        """The cursor of the newest event (0 before any)."""
        return self._cursor

    # ------------------------------------------------------------------ reading

    def items(self) -> list[_Delegation]:
        return list(self._delegations.values())

    def get(self, delegation_id: str) -> _Delegation:
        item = self._delegations.get(delegation_id)
        if item is None:
            raise DelegationError(f"no delegation {delegation_id!r}")
        return item

    def interrupt(self, delegation_id: str, reason: str = "interrupted") -> bool:
        """Ask a running delegation to stop (its own delegations stop with it)."""
        item = self.get(delegation_id)
        if item.status not in ("running", "queued") or item.agent is None:
            return False
        item.interrupt_reason = reason
        return item.agent.interrupt(reason)


# How a subagent's stop reason reads as a status; any other reason (a limit, a tool
# loop, a hook's stop) is "completed": the run ended normally, stop_reason says how.
_STATUS_BY_STOP: dict[str, DelegationStatus] = {
    "interrupted": "stopped",
    "approval_pending": "suspended",
    "error": "failed",
    "provider_error": "failed",
}


def _root(budget: SharedBudget) -> SharedBudget:
    root = budget
    for above in budget.ancestors():
        root = above
    return root


def _summarize(event: Any) -> str | None:
    kind = event.type
    if kind == "tool_start":
        return f"calls {event.tool_name}"
    if kind == "tool_end":
        return f"{event.tool_name}: {'error' if event.is_error else 'done'}"
    if kind == "text_complete":
        return str(event.text)
    if kind == "approval":
        return f"approval {event.status}"
    if kind == "stop":
        return f"stopped: {event.stop_reason}"
    return None
