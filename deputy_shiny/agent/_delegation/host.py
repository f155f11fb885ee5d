"""DelegationHost: one agent's delegations, how they run, and what the host may read.

Every delegation an agent makes (a LeadAgent's ``delegate`` call, a continue of a
retained agent, a route of its delegation graph) is a :class:`DelegationItem` here. They
all run the same way (:meth:`DelegationHost.drive`): on the one engine, through
``agent._delegated_run``, with the agents above as :class:`~deputy_shiny._engine.deps.Authority`
and a budget drawn from the runs above. The reads (``list_subagents``, ``inspect_subagents``
...) are the Agent methods of the same names; those made on someone's behalf go through
the agent's :class:`DelegationDisclosure`.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import uuid
import weakref
from collections import deque
from collections.abc import AsyncGenerator, Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict

from ..._engine.budget import SharedBudget
from ..._engine.deps import Authority, Lineage
from ...errors import DelegationDisclosureError, DelegationError
from ...events import AgentEvent, AgentResult, AgentUsage
from ...hooks import HookContext, HookRegistry
from ...messages import Turn
from ...permissions import Permissions
from ...persistence.checkpoints import FileJournal
from ...tools import current_tool_context, tool_annotations
from ...usage import UsageLimits
from .policies import DelegationDisclosure, DelegationObservation
from .records import (
    DelegationEventRecord,
    DelegationManifest,
    DelegationStatus,
    InputError,
    SubagentRecord,
    SubagentResult,
)

__all__ = [
    "DELEGATION_TOOL_ANNOTATIONS",
    "MAX_TASK_BYTES",
    "RESULT_PAGE_CHARS",
    "DelegatingAgent",
    "DelegationHost",
    "DelegationItem",
    "DelegationSubscription",
    "ResultPage",
    "delegation_history",
    "manifest_for",
]

logger = logging.getLogger(__name__)

RESULT_PAGE_CHARS = 8192
MAX_TASK_BYTES = 64 * 1024
"""The longest task (UTF-8 bytes) a delegation accepts."""
_RESULT_SCHEME = "deputy://subagent-result/"
_EXPORT_VERSION = 1

DELEGATION_TOOL_ANNOTATIONS = tool_annotations(
    # A delegation tool (``delegate``, a graph's routes) changes nothing itself: every
    # call the agent it starts makes passes that agent's permissions and those of every
    # agent above it, and is paid from the budgets above.
    read_only_hint=True,
    destructive_hint=False,
    open_world_hint=False,
    idempotent_hint=False,
)


def manifest_for(
    agent: DelegatingAgent,
    item: DelegationItem,
    limits: UsageLimits,
    lead_agent_id: str,
) -> DelegationManifest:
    """What ``agent`` starts ``item`` with, as ``get_subagent_contexts`` reports it."""
    return DelegationManifest(
        agent_name=item.name,
        task=item.task,
        system_prompt=agent.get_system_prompt() or "",
        tools=tuple(sorted(agent.get_tools())),
        model=agent.get_model(),
        permission_mode=agent.get_permission_mode(),
        limits=limits.model_dump(exclude_none=True),
        lead_agent_id=lead_agent_id,
        depth=item.depth,
    )


# The delegation whose run is executing (its tools may delegate further): None in an
# agent's own run.
parent_delegation: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "deputy_parent_delegation", default=None
)


class DelegatingAgent(Protocol):
    """What delegation needs of an agent (an :class:`~deputy_shiny.Agent` has it)."""

    @property
    def agent_id(self) -> str: ...
    @property
    def agent_name(self) -> str | None: ...
    @property
    def session_id(self) -> str: ...
    @property
    def working_dir(self) -> Path: ...
    @property
    def permissions(self) -> Permissions: ...
    @property
    def hooks(self) -> HookRegistry: ...
    @property
    def running(self) -> bool: ...
    @property
    def file_checkpoints(self) -> FileJournal | None: ...

    def get_tools(self) -> dict[str, Any]: ...
    def get_turns(self, include_system_prompt: bool = False) -> list[Turn]: ...
    def get_system_prompt(self) -> str | None: ...
    def get_model(self) -> str: ...
    def get_permission_mode(self) -> str: ...
    def interrupt(self, reason: str = "interrupted") -> bool: ...
    def last_run(self) -> AgentResult | None: ...
    def usage(self) -> AgentUsage: ...
    def _hook_fields(self) -> dict[str, Any]: ...
    def _delegated_run(
        self,
        task: str,
        *,
        parent_budget: SharedBudget,
        ancestors: tuple[Authority, ...],
        usage_limits: UsageLimits,
        lineage: Lineage | None = None,
    ) -> AsyncGenerator[AgentEvent, None]: ...


def now() -> datetime:
    return datetime.now(UTC)


class DelegationItem:
    """One delegation's live state (its record is a snapshot of this)."""

    def __init__(
        self,
        name: str,
        task: str,
        parent: str | None,
        *,
        handle: str | None = None,
        depth: int = 1,
    ) -> None:
        self.id = f"dlg_{uuid.uuid4().hex[:16]}"
        self.name = name
        self.task = task
        self.parent = parent
        self.handle = handle  # the retained agent's handle (None: a built subagent)
        self.handle_budget: SharedBudget | None = None  # that handle's total
        self.depth = depth
        self.status: DelegationStatus = "queued"
        self.stop_reason: str | None = None
        self.input_error: InputError | None = None
        self.hook_error: str | None = None
        self.error: str | None = None
        self.agent: DelegatingAgent | None = None
        self.agent_id: str | None = None  # kept when a built subagent is let go
        self.session_id: str | None = None
        self.run_id: str | None = None
        self.queued_at = now()
        self.started_at: datetime | None = None
        self.completed_at: datetime | None = None
        self.response: str | None = None
        self.manifest: DelegationManifest | None = None
        self.turns_before = 0  # a retained agent's conversation before this task
        self.turns: list[Turn] = []
        self.usage: AgentUsage | None = None
        self.final_context: dict[str, Any] | None = None
        self.result: AgentResult | None = None  # its run's, once it ended
        self.interrupt_reason: str | None = None
        self.ancestors: tuple[Authority, ...] = ()  # every agent above its run

    def refuse(self, kind: InputError, message: str) -> None:
        self.status, self.input_error, self.error = "not_started", kind, message
        self.completed_at = now()

    def current_turns(self) -> list[Turn]:
        """This delegation's turns (so far, while it runs)."""
        if self.completed_at is not None or self.agent is None:
            return list(self.turns)
        return self.agent.get_turns()[self.turns_before :]

    def record(self) -> SubagentRecord:
        agent = self.agent
        usage = self.usage
        if usage is None and agent is not None and self.handle is None:
            usage = agent.usage()
        return SubagentRecord(
            delegation_id=self.id,
            agent_name=self.name,
            task=self.task,
            status=self.status,
            stop_reason=self.stop_reason,
            input_error=self.input_error,
            hook_error=self.hook_error,
            error=self.error,
            agent_id=agent.agent_id if agent is not None else self.agent_id,
            session_id=agent.session_id if agent is not None else self.session_id,
            run_id=self.run_id,
            parent_delegation_id=self.parent,
            handle=self.handle,
            queued_at=self.queued_at,
            started_at=self.started_at,
            completed_at=self.completed_at,
            usage=usage,
            response=self.response,
        )


# How a subagent's stop reason reads as a status; any other reason (a limit, a tool
# loop, a hook's stop) is "completed": the run ended normally, stop_reason says how.
_STATUS_BY_STOP: dict[str, DelegationStatus] = {
    "interrupted": "stopped",
    "approval_pending": "suspended",
    "error": "failed",
    "provider_error": "failed",
}


class ResultPage(BaseModel):
    """One page of a subagent's saved result (``read_subagent_result``).

    Examples:
        >>> ResultPage(text="abc", offset=0, next_offset=None, total_chars=3).next_offset is None
        True
    """

    model_config = ConfigDict(frozen=True, defer_build=True)

    text: str
    offset: int
    next_offset: int | None
    total_chars: int


class DelegationSubscription:
    """New delegation events for one requester, from a cursor on (``observe_subagents``).

    :meth:`poll` returns the events since the last poll that the requester may see
    (the disclosure policy is asked on every poll); :attr:`cursor` is where to resume
    (pass it as ``after`` to a new subscription); :attr:`missed` counts events that
    were dropped (``DelegationObservation.max_events``) before this one saw them.
    Closing stops observing; it never affects a run.
    """

    def __init__(
        self, host: DelegationHost, requester: Any, delegation_id: str | None, after: int
    ) -> None:
        self._host = host
        self._requester = requester
        self._delegation_id = delegation_id
        self.cursor = after
        self.missed = 0
        self.closed = False

    def poll(self) -> list[DelegationEventRecord]:
        """Events newer than :attr:`cursor` (empty once closed)."""
        if self.closed:
            return []
        host = self._host
        events, missed = host.events_after(self.cursor, self._delegation_id)
        self.missed += missed
        self.cursor = max(self.cursor, host.cursor)
        allowed: dict[str, bool] = {}
        shown = []
        for event in events:
            if event.delegation_id not in allowed:
                item = host.find(event.delegation_id)
                allowed[event.delegation_id] = item is not None and host.disclosure.allows(
                    self._requester, host.scope, item.record()
                )
            if allowed[event.delegation_id]:
                shown.append(event)
        return shown

    @property
    def pending(self) -> bool:
        """Whether the host has events past :attr:`cursor` (cheap: nothing is read, and
        the requester may yet see none of them); always False once closed."""
        return not self.closed and self._host.cursor > self.cursor

    def close(self) -> None:
        """Stop observing (the subagents go on)."""
        self.closed = True


class DelegationHost:
    """One agent's delegations: records, observation, disclosure, retained agents.

    Examples:
        >>> DelegationHost.__name__
        'DelegationHost'
    """

    def __init__(
        self,
        owner: DelegatingAgent,
        *,
        disclosure: DelegationDisclosure | None = None,
        observation: DelegationObservation | None = None,
        scope: Mapping[str, Any] | None = None,
    ) -> None:
        if disclosure is not None and not isinstance(disclosure, DelegationDisclosure):
            raise DelegationError("delegation_disclosure must be a DelegationDisclosure")
        if observation is not None and not isinstance(observation, DelegationObservation):
            raise DelegationError("delegation_observation must be a DelegationObservation")
        if scope is not None and not isinstance(scope, Mapping):
            raise DelegationError("delegation_scope must be a mapping (e.g. {'owner': user_id})")
        self._owner_ref = weakref.ref(owner)
        self.disclosure = disclosure or DelegationDisclosure()
        self.observation = observation or DelegationObservation()
        self.scope = dict(scope or {})
        self._items: dict[str, DelegationItem] = {}
        self._events: deque[DelegationEventRecord] = deque(maxlen=self.observation.max_events)
        self._cursor = 0

    @property
    def owner(self) -> DelegatingAgent:
        owner = self._owner_ref()
        if owner is None:  # pragma: no cover - the owner holds this object
            raise DelegationError("the delegating agent is gone")
        return owner

    # ------------------------------------------------------------------ the store

    def add(self, item: DelegationItem) -> DelegationItem:
        self._items[item.id] = item
        return item

    def items(self) -> list[DelegationItem]:
        return list(self._items.values())

    def find(self, delegation_id: str | None) -> DelegationItem | None:
        return self._items.get(delegation_id) if delegation_id else None

    def get(self, delegation_id: str) -> DelegationItem:
        item = self._items.get(delegation_id)
        if item is None:
            raise DelegationError(f"no delegation {delegation_id!r}")
        return item

    def discard(self, keep: Callable[[DelegationItem], bool]) -> None:
        """Forget the delegations ``keep`` refuses (and their observed events)."""
        gone = {i.id for i in self._items.values() if not keep(i)}
        for delegation_id in gone:
            del self._items[delegation_id]
        kept = [e for e in self._events if e.delegation_id not in gone]
        self._events.clear()
        self._events.extend(kept)

    # ------------------------------------------------------------------ authority

    def authority(self, agent: DelegatingAgent, *, lends_tools: bool) -> Authority:
        """``agent`` as an agent above a delegated run, read at each call. With
        ``lends_tools`` (a lead over the subagent it built) the run may only use tools
        ``agent`` has; otherwise (a retained agent brings its own) only its permissions
        apply."""
        ref = weakref.ref(agent)

        def permissions() -> Permissions:
            current = ref()
            if current is None:
                raise DelegationError("the agent above this delegation is gone")
            return current.permissions

        def tool_names() -> frozenset[str]:
            current = ref()
            return frozenset(current.get_tools()) if current is not None else frozenset()

        label = "lead agent" if lends_tools else "delegating agent"
        return Authority(
            name=f"{label} {agent.agent_name}" if agent.agent_name else label,
            agent_id=agent.agent_id,
            permissions=permissions,
            tool_names=tool_names if lends_tools else None,
            working_dir=agent.working_dir,
            # The same journal and its limits below it, since authority never grows
            # through delegation: a delegate never dodges a rewind, a cap, or the
            # journal's working directory.
            file_journal=agent.file_checkpoints,
        )

    def ancestors_below(
        self, parent: DelegationItem | None, *, lends_tools: bool
    ) -> tuple[Authority, ...]:
        """Every agent above a run delegated from ``parent``'s run (None: from the
        owner's own run), nearest first."""
        if parent is None or parent.agent is None:
            return (self.authority(self.owner, lends_tools=lends_tools),)
        return (self.authority(parent.agent, lends_tools=lends_tools), *parent.ancestors)

    # ------------------------------------------------------------------ one run

    async def drive(
        self,
        item: DelegationItem,
        agent: DelegatingAgent,
        *,
        budget: SharedBudget,
        limits: UsageLimits,
        message: str | None = None,
    ) -> None:
        """Run ``item`` on ``agent`` (set up: manifest, ancestors) and record how it ended.

        ``message`` is what the agent is sent, when it is more than the task (a
        definition's ``initial_prompt`` before it).

        Cancelling the caller (its run was interrupted) stops the delegated run too.
        """
        item.agent = agent
        item.turns_before = len(agent.get_turns())
        item.status, item.started_at = "running", now()
        self.observe(item, "status", "running")
        await self.subagent_hook("SubagentStart", item, None)
        token = parent_delegation.set(item.id)
        caller = current_tool_context()  # the delegating run's call (none from host code)
        events = agent._delegated_run(
            message or item.task,
            parent_budget=budget,
            ancestors=item.ancestors,
            usage_limits=limits,
            lineage=Lineage(
                parent_agent_id=caller.agent_id or self.owner.agent_id,
                parent_run_id=caller.run_id,
                delegation_id=item.id,
            ),
        )
        try:
            async for event in events:
                if event.type == "start":
                    item.run_id = event.run_id
                    if item.interrupt_reason is not None:  # cancelled as it started
                        agent.interrupt(item.interrupt_reason)
                self.observe_event(item, event)
        except asyncio.CancelledError:
            agent.interrupt("interrupted")
            item.status, item.stop_reason = "stopped", "interrupted"
            raise
        except Exception as exc:
            item.status, item.error = "failed", f"{type(exc).__name__}: {exc}"
        finally:
            await events.aclose()
            parent_delegation.reset(token)
            result = self._finish(item, agent)
        await self.subagent_hook("SubagentStop", item, item.stop_reason, result=result)
        self.observe(item, "status", item.stop_reason or item.status)

    def _finish(self, item: DelegationItem, agent: DelegatingAgent) -> AgentResult | None:
        """Record how the run ended; returns its result (None: it never started)."""
        result = agent.last_run()
        turns = agent.get_turns()
        item.completed_at = now()
        item.turns = turns[item.turns_before :]
        item.final_context = {"system_prompt": agent.get_system_prompt(), "turns": turns}
        if result is not None and item.run_id is not None and result.run_id == item.run_id:
            item.result = result  # kept: a retained agent's last_run() moves on
            item.stop_reason = result.stop_reason
            item.response = result.response
            item.usage = result.usage
        else:
            result = None  # an earlier run's: this one never started
            if item.handle is None:
                item.usage = agent.usage()
        if item.status == "running":
            stopped = item.interrupt_reason is not None
            status = "stopped" if stopped else _STATUS_BY_STOP.get(item.stop_reason or "")
            item.status = status or "completed"
        item.agent_id, item.session_id = agent.agent_id, agent.session_id
        if item.handle is None:
            # A built subagent is done for good: its record keeps what it did, not the
            # agent (its engine, tools and tool state), so long sessions stay lean.
            item.agent = None
        return result

    async def subagent_hook(
        self, event: str, item: DelegationItem, reason: str | None, **extra: Any
    ) -> None:
        """``SubagentStart`` / ``SubagentStop`` on the lead: its context, with the subagent,
        the task, the delegation and (at ``SubagentStop``, as deputy's ``result``) the
        subagent's :class:`~deputy_shiny.AgentResult` in ``details``."""
        owner = self.owner
        hooks = owner.hooks
        if not hooks.matchers(event):
            return
        details: dict[str, Any] = {
            "subagent": item.name,
            "task": item.task,
            "delegation_id": item.id,
        }
        if event == "SubagentStop":
            details.update(subagent_agent_id=item.agent_id, subagent_run_id=item.run_id)
        context = HookContext(
            event=event,
            run_id=current_tool_context().run_id,
            reason=reason,
            details={**details, **extra},
            **owner._hook_fields(),
        )
        run = await hooks.run(event, context=context)
        if run.failure is not None:
            item.hook_error = f"{event}: {run.failure}"

    def answer(self, item: DelegationItem) -> str:
        """What the delegating model reads back."""
        if item.status == "completed" and item.stop_reason == "complete":
            return item.response or "(The subagent finished without saying anything.)"
        said = f" It said: {item.response}" if item.response else ""
        why = item.error or item.stop_reason or item.status
        return f"The subagent {item.name} ended with {item.status} ({why}).{said}"

    def interrupt(self, delegation_id: str, reason: str = "interrupted") -> bool:
        """Ask a running delegation to stop (its own delegations stop with it).

        False, as the spec answers, when the delegation is unknown or already finished.
        """
        item = self._items.get(delegation_id)
        if item is None or item.status not in ("running", "queued") or item.agent is None:
            return False
        item.interrupt_reason = reason
        return item.agent.interrupt(reason)

    # ------------------------------------------------------------------ observation

    def observe(self, item: DelegationItem, kind: str, summary: str) -> None:
        """Record a status change of ``item`` (``kind`` is ``"status"``)."""
        self._append(item, kind=kind, status=item.status, summary=summary)

    def observe_event(self, item: DelegationItem, event: Any) -> None:
        summary = _summarize(event)
        if summary is not None:
            self._append(item, kind=event.type, status=None, summary=summary)

    def _append(
        self, item: DelegationItem, *, kind: str, status: DelegationStatus | None, summary: str
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
                at=now(),
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

    # ------------------------------------------------------------------ host reads

    def list_subagents(self) -> list[SubagentRecord]:
        return [item.record() for item in self.items()]

    def results(
        self, agent_name: str | None, delegation_id: str | None
    ) -> list[SubagentResult | None]:
        """Each selected delegation's result, oldest first; None while it runs or when
        it never started or ended without one."""
        out: list[SubagentResult | None] = []
        for item in self.items():
            if agent_name is not None and item.name != agent_name:
                continue
            if delegation_id is not None and item.id != delegation_id:
                continue
            result = item.result
            out.append(
                None if result is None else SubagentResult(**dict(result), record=item.record())
            )
        return out

    def messages(self, agent_name: str | None, session_id: str | None) -> dict[str, list[Turn]]:
        out: dict[str, list[Turn]] = {}
        for item in self.items():
            if agent_name is not None and item.name != agent_name:
                continue
            agent = item.agent
            owner_session = agent.session_id if agent is not None else item.session_id
            if session_id is not None and owner_session != session_id:
                continue
            out[item.id] = item.current_turns()
        return out

    def contexts(
        self,
        delegation_id: str | None,
        view: Literal["initial", "current"],
        redact: bool,
    ) -> dict[str, DelegationManifest | dict[str, Any] | None]:
        if view not in ("initial", "current"):
            raise DelegationError('view must be "initial" or "current"')
        if redact and view != "initial":
            raise DelegationError('redact applies to view="initial" only')
        items = [self.get(delegation_id)] if delegation_id is not None else self.items()
        out: dict[str, DelegationManifest | dict[str, Any] | None] = {}
        for item in items:
            if view == "initial":
                manifest = item.manifest
                if redact and manifest is not None:
                    # The task and instructions are the source text; the rest is metadata.
                    manifest = manifest.model_copy(update={"task": "", "system_prompt": ""})
                out[item.id] = manifest
            elif item.completed_at is not None:
                out[item.id] = item.final_context
            elif item.agent is not None:
                out[item.id] = {
                    "system_prompt": item.agent.get_system_prompt(),
                    "turns": item.agent.get_turns(),
                }
            else:
                out[item.id] = None
        return out

    # ------------------------------------------------------------------ disclosed reads

    def require(self, requester: Any) -> None:
        if not self.disclosure.allows(requester, self.scope, None):
            raise DelegationDisclosureError("this requester may not see these delegations")

    def observe_subagents(
        self, requester: Any, delegation_id: str | None, after: int | None
    ) -> DelegationSubscription:
        self.require(requester)
        if delegation_id is not None:
            self.get(delegation_id)
        # As in deputy: no cursor starts from now; pass 0 to replay what is kept.
        start = self.cursor if after is None else after
        return DelegationSubscription(self, requester, delegation_id, start)

    def selected(self, requester: Any, delegation_id: str | None) -> list[DelegationItem]:
        self.require(requester)
        items = [self.get(delegation_id)] if delegation_id else self.items()
        allowed = [i for i in items if self.disclosure.allows(requester, self.scope, i.record())]
        if delegation_id is not None and not allowed:
            raise DelegationDisclosureError("this requester may not see that delegation")
        return allowed

    def inspect(
        self, requester: Any, delegation_id: str | None, transcript: bool
    ) -> list[dict[str, Any]]:
        if delegation_id is not None and delegation_id not in self._items:
            self.require(requester)  # an unknown requester still errors first
            return []  # as the spec answers: an unknown id gives an empty list
        return [self.view(item, transcript) for item in self.selected(requester, delegation_id)]

    def export(self, requester: Any, delegation_id: str | None) -> dict[str, Any]:
        items = self.selected(requester, delegation_id)
        running = [i.id for i in items if i.completed_at is None]
        if running:
            raise DelegationError(f"these delegations are still running: {running}")
        return {
            "version": _EXPORT_VERSION,
            "lead_agent_id": self.owner.agent_id,
            "scope": dict(self.scope),
            "delegations": [self.view(item, transcript=True) for item in items],
        }

    def read_result(
        self, requester: Any, delegation_id: str, reference: str, offset: int
    ) -> ResultPage:
        (item,) = self.selected(requester, delegation_id)
        if reference != _RESULT_SCHEME + item.id:
            raise DelegationError(f"{reference!r} is not a result of delegation {item.id}")
        text = item.response
        if text is None:
            raise DelegationError(f"delegation {item.id} has no result")
        if isinstance(offset, bool) or not isinstance(offset, int) or not 0 <= offset <= len(text):
            raise DelegationError(f"offset must be between 0 and {len(text)}")
        end = min(len(text), offset + RESULT_PAGE_CHARS)
        return ResultPage(
            text=text[offset:end],
            offset=offset,
            next_offset=end if end < len(text) else None,
            total_chars=len(text),
        )

    def view(self, item: DelegationItem, transcript: bool) -> dict[str, Any]:
        record = item.record()
        turns = item.current_turns()
        tools_called = [r.name for t in turns for r in t.tool_requests]
        view: dict[str, Any] = {
            "delegation_id": record.delegation_id,
            "agent_name": record.agent_name,
            "task": record.task,
            "observed": {
                "status": record.status,
                "stop_reason": record.stop_reason,
                "input_error": record.input_error,
                "error": record.error,
                "hook_error": record.hook_error,
                "usage": record.usage.model_dump() if record.usage else None,
                "tools_called": tools_called,
                "started_at": _iso(record.started_at),
                "completed_at": _iso(record.completed_at),
            },
            "claimed": {
                "response": record.response,
                "result_reference": _RESULT_SCHEME + item.id if record.response else None,
            },
            "manifest": item.manifest.model_dump() if item.manifest else None,
        }
        if item.handle is not None:
            total = item.handle_budget.usage() if item.handle_budget is not None else None
            view["retained"] = {
                "handle": item.handle,
                "total_usage": total.model_dump() if total is not None else None,
            }
        if transcript:
            view["transcript"] = [turn.model_dump(mode="json") for turn in turns]
        return self.disclosure.shown(view)


def delegation_history(
    exported: Mapping[str, Any], disclosure: DelegationDisclosure, requester: Any
) -> list[dict[str, Any]]:
    """Read an ``export_subagents()`` record back, checking ``disclosure`` again.

    Raises:
        DelegationDisclosureError: the requester may see none of it.
        DelegationError: not an export of this version.

    Examples:
        >>> policy = DelegationDisclosure(authorize=lambda who, scope, record: who == "ana")
        >>> delegation_history({"version": 1, "scope": {}, "delegations": []}, policy, "ana")
        []
    """
    if not isinstance(exported, Mapping) or exported.get("version") != _EXPORT_VERSION:
        raise DelegationError("not a delegation export (version 1)")
    scope = exported.get("scope") or {}
    if not isinstance(scope, Mapping) or not disclosure.allows(requester, scope, None):
        raise DelegationDisclosureError("this requester may not see these delegations")
    views = exported.get("delegations") or []
    if not isinstance(views, list):
        raise DelegationError("the export's delegations are not a list")
    return [
        disclosure.shown(dict(v))
        for v in views
        if isinstance(v, Mapping) and disclosure.allows(requester, scope, dict(v))
    ]


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


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
