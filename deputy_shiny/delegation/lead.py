"""LeadAgent: an Agent that hands self-contained tasks to subagents through a tool.

The lead's model calls ``delegate(agent, task)``. The subagent is built then, from its
:class:`~deputy_shiny.delegation.AgentDefinition` and what the lead has at that moment,
and runs on the same engine: its authority is at most the lead's (only the lead's
tools, a mode no wider, and every call checked against the lead's *current*
permissions too), its usage is drawn from the lead's run budget, and interrupting the
lead stops it. The host reads what happened with :meth:`LeadAgent.list_subagents` and
friends; showing it to a person goes through :class:`DelegationDisclosure`.

Example:
    >>> from deputy_shiny.delegation import AgentDefinition, LeadAgent
    >>> from deputy_shiny.testing import ScriptedModel, ScriptedReply, ScriptedToolCall
    >>> call = ScriptedToolCall("delegate", {"agent": "helper", "task": "Say hi"})
    >>> lead = LeadAgent(
    ...     ScriptedModel([ScriptedReply(tool_calls=[call]), "hi", "The helper said hi."]),
    ...     subagents=[AgentDefinition(name="helper", description="Says things.")],
    ... )
    >>> lead.run_sync("Ask the helper").response
    'The helper said hi.'
    >>> [(r.agent_name, r.status, r.response) for r in lead.list_subagents()]
    [('helper', 'completed', 'hi')]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from ..agent import Agent, ModelLike
from ..errors import DelegationDisclosureError, DelegationError
from ..messages import Turn
from ._manager import Delegations
from .definitions import AgentDefinition
from .policies import DelegationDisclosure, DelegationObservation
from .records import DelegationEventRecord, DelegationManifest, SubagentRecord

__all__ = [
    "RESULT_PAGE_CHARS",
    "DelegationSubscription",
    "LeadAgent",
    "ResultPage",
    "delegation_history",
]

RESULT_PAGE_CHARS = 8192
_RESULT_SCHEME = "deputy://subagent-result/"
_EXPORT_VERSION = 1


class ResultPage(BaseModel):
    """One page of a subagent's saved result (``read_subagent_result``).

    Example:
        >>> ResultPage(text="abc", offset=0, next_offset=None, total_chars=3).next_offset is None
        True
    """

    model_config = ConfigDict(frozen=True)

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
        self, lead: LeadAgent, requester: Any, delegation_id: str | None, after: int
    ) -> None:
        self._lead = lead
        self._requester = requester
        self._delegation_id = delegation_id
        self.cursor = after
        self.missed = 0
        self.closed = False

    def poll(self) -> list[DelegationEventRecord]:
        """Events newer than :attr:`cursor` (empty once closed)."""
        if self.closed:
            return []
        manager = self._lead._delegations
        events, missed = manager.events_after(self.cursor, self._delegation_id)
        self.missed += missed
        self.cursor = max(self.cursor, manager.cursor)
        allowed: dict[str, bool] = {}
        shown = []
        for event in events:
            if event.delegation_id not in allowed:
                record = manager.get(event.delegation_id).record()
                allowed[event.delegation_id] = manager.disclosure.allows(
                    self._requester, manager.scope, record
                )
            if allowed[event.delegation_id]:
                shown.append(event)
        return shown

    def close(self) -> None:
        """Stop observing (the subagents go on)."""
        self.closed = True


class LeadAgent(Agent):
    """An Agent that delegates to subagents (see the module docstring).

    Args:
        model: As for :class:`~deputy_shiny.Agent`.
        subagents: The :class:`AgentDefinition` of each subagent it may call.
        subagent_models: Models for named subagents, overriding their definition's
            ``model`` (e.g. test models).
        max_depth: How deep delegations may nest (1: subagents cannot delegate).
        max_concurrency: Subagents running at once within one lead run (more queue).
        max_delegations: Delegations one lead run may start.
        delegation_disclosure: Who may see the delegations (default: nobody).
        delegation_observation: How many events are kept for observers.
        delegation_scope: What this lead belongs to (``{"owner": user_id}``), passed to
            the disclosure policy.
        **agent_options: Everything else :class:`~deputy_shiny.Agent` takes.
    """

    def __init__(
        self,
        model: ModelLike,
        *,
        subagents: Sequence[AgentDefinition],
        subagent_models: Mapping[str, ModelLike] | None = None,
        max_depth: int = 1,
        max_concurrency: int = 4,
        max_delegations: int = 16,
        delegation_disclosure: DelegationDisclosure | None = None,
        delegation_observation: DelegationObservation | None = None,
        delegation_scope: Mapping[str, Any] | None = None,
        **agent_options: Any,
    ) -> None:
        super().__init__(model, **agent_options)
        self._delegations = Delegations(
            self,
            list(subagents),
            models=subagent_models,
            max_depth=max_depth,
            max_concurrency=max_concurrency,
            max_delegations=max_delegations,
            disclosure=delegation_disclosure,
            observation=delegation_observation,
            scope=delegation_scope,
        )
        self.register_tool(self._delegations.tool())

    # ------------------------------------------------------------------ host reads

    def list_subagents(self) -> list[SubagentRecord]:
        """Every delegation so far, oldest first (no disclosure check: host code only)."""
        return [item.record() for item in self._delegations.items()]

    def get_subagent_results(
        self, agent_name: str | None = None, delegation_id: str | None = None
    ) -> list[SubagentRecord]:
        """The finished delegations (optionally of one subagent, or one delegation)."""
        return [
            r
            for r in self.list_subagents()
            if r.completed_at is not None
            and (agent_name is None or r.agent_name == agent_name)
            and (delegation_id is None or r.delegation_id == delegation_id)
        ]

    def get_subagent_messages(
        self, agent_name: str | None = None, session_id: str | None = None
    ) -> dict[str, list[Turn]]:
        """Each delegation's turns (so far, for a running one), by delegation id.

        Reading them adds nothing to the lead's context. No disclosure check: use
        :meth:`inspect_subagents` before showing history to a person.
        """
        out: dict[str, list[Turn]] = {}
        for item in self._delegations.items():
            if agent_name is not None and item.name != agent_name:
                continue
            agent = item.agent
            if session_id is not None and (agent is None or agent.session_id != session_id):
                continue
            out[item.id] = item.turns if item.completed_at else (agent.get_turns() if agent else [])
        return out

    def get_subagent_contexts(
        self, view: Literal["initial", "current"] = "initial"
    ) -> dict[str, DelegationManifest | dict[str, Any] | None]:
        """What each subagent started with (``initial``: its manifest) or what its model
        context holds (``current``: system prompt and turns; at the end for a finished
        one). Nothing is sent to a model; no disclosure check."""
        if view not in ("initial", "current"):
            raise DelegationError('view must be "initial" or "current"')
        out: dict[str, DelegationManifest | dict[str, Any] | None] = {}
        for item in self._delegations.items():
            if view == "initial":
                out[item.id] = item.manifest
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

    def interrupt_subagent(self, delegation_id: str, reason: str = "interrupted") -> bool:
        """Ask a running subagent to stop at its next safe point (its own delegations
        stop too). No disclosure check: make sure the user may do this. Returns True if
        it was running."""
        return self._delegations.interrupt(delegation_id, reason)

    # ------------------------------------------------------------------ disclosed reads

    def observe_subagents(
        self, requester: Any, delegation_id: str | None = None, after: int | None = None
    ) -> DelegationSubscription:
        """Follow delegation events as they happen, as ``requester`` may see them.

        Raises:
            DelegationDisclosureError: the requester may see nothing here.
        """
        self._require(requester)
        if delegation_id is not None:
            self._delegations.get(delegation_id)
        return DelegationSubscription(self, requester, delegation_id, after or 0)

    def inspect_subagents(
        self, requester: Any, delegation_id: str | None = None, transcript: bool = False
    ) -> list[dict[str, Any]]:
        """A snapshot of each delegation ``requester`` may see: its task, what the runtime
        observed (status, stop reason, usage, tools called, errors) kept apart from what
        the subagent claimed (its answer), and the manifest it started from; with
        ``transcript`` its turns too. Every view passes the disclosure policy.

        Raises:
            DelegationDisclosureError: the requester may see none of them.
        """
        views = [self._view(item, transcript) for item in self._selected(requester, delegation_id)]
        return views

    def export_subagents(self, requester: Any, delegation_id: str | None = None) -> dict[str, Any]:
        """A JSON-ready record of the finished delegations ``requester`` may see, for
        :func:`delegation_history`. Raises if a selected delegation is still running."""
        items = self._selected(requester, delegation_id)
        running = [i.id for i in items if i.completed_at is None]
        if running:
            raise DelegationError(f"these delegations are still running: {running}")
        return {
            "version": _EXPORT_VERSION,
            "lead_agent_id": self.agent_id,
            "scope": dict(self._delegations.scope),
            "delegations": [self._view(item, transcript=True) for item in items],
        }

    def read_subagent_result(
        self, requester: Any, delegation_id: str, reference: str, offset: int = 0
    ) -> ResultPage:
        """Read 8,192 characters of a subagent's full answer from ``offset`` (the lead's
        model saw a cut one with this ``reference``). Nothing is run.

        Raises:
            DelegationDisclosureError: the requester may not see this delegation.
            DelegationError: no such delegation, result or offset.
        """
        (item,) = self._selected(requester, delegation_id)
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

    # ------------------------------------------------------------------ helpers

    def _require(self, requester: Any) -> None:
        manager = self._delegations
        if not manager.disclosure.allows(requester, manager.scope, None):
            raise DelegationDisclosureError("this requester may not see these delegations")

    def _selected(self, requester: Any, delegation_id: str | None) -> list[Any]:
        manager = self._delegations
        self._require(requester)
        items = [manager.get(delegation_id)] if delegation_id else manager.items()
        allowed = [
            i for i in items if manager.disclosure.allows(requester, manager.scope, i.record())
        ]
        if delegation_id is not None and not allowed:
            raise DelegationDisclosureError("this requester may not see that delegation")
        return allowed

    def _view(self, item: Any, transcript: bool) -> dict[str, Any]:
        record: SubagentRecord = item.record()
        turns = item.turns if item.completed_at else (item.agent.get_turns() if item.agent else [])
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
        if transcript:
            view["transcript"] = [turn.model_dump(mode="json") for turn in turns]
        return self._delegations.disclosure.shown(view)


def delegation_history(
    exported: Mapping[str, Any], disclosure: DelegationDisclosure, requester: Any
) -> list[dict[str, Any]]:
    """Read an ``export_subagents()`` record back, checking ``disclosure`` again.

    Raises:
        DelegationDisclosureError: the requester may see none of it.
        DelegationError: not an export of this version.

    Example:
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
