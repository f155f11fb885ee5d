"""Retained agents: another agent kept, with its conversation, for further tasks.

``owner.retain_agent(other, usage_limits)`` gives a handle; ``continue_agent(handle,
task)`` runs ``task`` on ``other`` through the one engine (``_delegated_run``), its
conversation kept between tasks, and records it as a delegation of ``owner``.

Budgets. The handle holds one :class:`~deputy_shiny._engine.budget.SharedBudget` with the
``usage_limits`` given to ``retain_agent``: the total of all its tasks until release.
Each task gets a budget node that draws on the handle's budget *and* on the budget of
the run executing the call, if any (``current_budget``: the owner's run when its tool
continues the agent). So a task is charged to both and stops when either is spent,
and its own limits are clamped to what both have left: "drawn from the owner's
remaining budget" holds inside a run; from host code outside any run only the
handle's total (and the retained agent's own per-run limits) apply.

Authority. Every call the retained agent makes passes its own permissions and the
owner's *current* permissions (read at each call), so narrowing the owner's mode
narrows the retained agent at its next call. The retained agent brings its own tools:
the owner need not have them (as in deputy, only the owner's permissions apply).

"Changed". At retain time and after each task the handle stores the agent's
fingerprint (model, system prompt, tools, permissions, hooks, observers, approval
handler, working directory and the conversation's turns). The public mutators refuse
while retained (:class:`~deputy_shiny.errors.AgentRetainedError`), but a hook added
through ``agent.hooks`` or any private change still shows: the next continue raises
:class:`~deputy_shiny.errors.RetainedAgentChangedError` before any request.
"""

from __future__ import annotations

import secrets
from typing import Any, Protocol

from ..._engine.budget import SharedBudget, current_budget
from ...errors import (
    DelegationError,
    DelegationGraphError,
    DelegationTaskError,
    InvalidLimitError,
    RetainedAgentBusyError,
    RetainedAgentChangedError,
    RetainedAgentExhaustedError,
    RetainedAgentReleasedError,
    RetainedHandleError,
    RetainError,
)
from ...events import AgentResult, AgentUsage
from ...usage import UsageLimits
from .host import (
    MAX_TASK_BYTES,
    DelegatingAgent,
    DelegationHost,
    DelegationItem,
    manifest_for,
)
from .host import parent_delegation as _parent_delegation
from .records import InputError

__all__ = ["MAX_RETAINED", "Retention"]

MAX_RETAINED = 32
"""How many agents one agent may retain at a time."""


class RetainableAgent(DelegatingAgent, Protocol):
    """What retaining needs of an agent beyond delegation (an Agent has it)."""

    def _retain_refusal(self) -> str | None: ...
    def _set_retained(self, owner_id: str | None) -> None: ...
    def _fingerprint(self) -> tuple[Any, ...]: ...


Refusal = tuple[InputError, type[DelegationError], str]
"""Why a task cannot start: the record's input_error, the error host code gets, and
the message."""


class GraphLimits(Protocol):
    """What a retained agent's delegation graph (``graph.py``) limits of its tasks."""

    delegations: int

    def refusal(self, depth: int) -> Refusal | None: ...


class _Entry:
    def __init__(
        self,
        handle: str,
        agent: RetainableAgent,
        budget: SharedBudget,
        max_runs: int,
        name: str | None = None,
    ) -> None:
        self.handle = handle
        self.agent = agent
        self.name = name or agent.agent_name or agent.agent_id
        self.budget = budget
        self.max_runs = max_runs
        self.runs = 0
        self.fingerprint = agent._fingerprint()
        self.item: DelegationItem | None = None  # the task running now
        self.graph: GraphLimits | None = None  # the graph it belongs to, if any


class Retention:
    """The agents one agent retains, by handle (part of its DelegationHost)."""

    def __init__(self, host: DelegationHost) -> None:
        self.host = host
        self._entries: dict[str, _Entry] = {}
        self._released: set[str] = set()

    def count(self) -> int:
        return len(self._entries)

    # ------------------------------------------------------------------ retain

    def check(self, agent: RetainableAgent, usage_limits: UsageLimits, max_runs: int) -> None:
        """Raise RetainError (or InvalidLimitError) unless ``agent`` may be retained."""
        if agent is self.host.owner:
            raise RetainError("an agent cannot retain itself")
        why = agent._retain_refusal()
        if why is not None:
            raise RetainError(f"cannot retain this agent: {why}")
        if agent.running:
            raise RetainError("cannot retain an agent while it is running a task")
        if not isinstance(usage_limits, UsageLimits):
            raise InvalidLimitError("usage_limits must be a UsageLimits (the total of all tasks)")
        if isinstance(max_runs, bool) or not isinstance(max_runs, int) or max_runs < 1:
            raise RetainError("max_runs must be a whole number of at least 1")

    def check_room(self, more: int) -> None:
        if len(self._entries) + more > MAX_RETAINED:
            raise RetainError(
                f"an agent may retain at most {MAX_RETAINED} agents at a time; release one first"
            )

    def retain(self, agent: RetainableAgent, usage_limits: UsageLimits, max_runs: int) -> str:
        self.check(agent, usage_limits, max_runs)
        self.check_room(1)
        name = agent.agent_name or agent.agent_id
        budget = SharedBudget(usage_limits, label=f"retained agent {name}'s total")
        return self.add(agent, budget, max_runs).handle

    def add(
        self, agent: RetainableAgent, budget: SharedBudget, max_runs: int, name: str | None = None
    ) -> _Entry:
        """Retain a checked ``agent`` under a new handle (its fingerprint is taken now)."""
        handle = f"{self.host.owner.agent_id}/retained_{secrets.token_urlsafe(12)}"
        agent._set_retained(self.host.owner.agent_id)
        entry = self._entries[handle] = _Entry(handle, agent, budget, max_runs, name)
        return entry

    def drop(self, entry: _Entry) -> None:
        """Stop retaining ``entry`` (checked idle by the caller); its handle is released."""
        del self._entries[entry.handle]
        self._released.add(entry.handle)
        entry.agent._set_retained(None)

    def entry(self, handle: str) -> _Entry:
        found = self._entries.get(handle) if isinstance(handle, str) else None
        if found is not None:
            return found
        if handle in self._released:
            raise RetainedAgentReleasedError(f"the handle {handle!r} was released")
        owner_id = self.host.owner.agent_id
        if isinstance(handle, str) and not handle.startswith(owner_id + "/"):
            raise RetainedHandleError(
                "this handle belongs to another agent (or was never issued); only the "
                "agent that retained an agent can continue it"
            )
        raise RetainedHandleError(f"no retained agent has the handle {handle!r}")

    def total_usage(self, handle: str) -> AgentUsage | None:
        found = self._entries.get(handle)
        return found.budget.usage() if found is not None else None

    # ------------------------------------------------------------------ continue

    def refusal(self, entry: _Entry, depth: int) -> Refusal | None:
        """Why a task for ``entry`` at ``depth`` cannot start now (None: it can)."""
        if entry.item is not None or entry.agent.running:
            return (
                "invalid",
                RetainedAgentBusyError,
                f"the agent {entry.name} is already running a task (an agent runs one task "
                "at a time, so a delegation may not go back to an agent in its own chain); "
                "wait for it to end or cancel_agent() it",
            )
        if entry.agent._fingerprint() != entry.fingerprint:
            return (
                "stale",
                RetainedAgentChangedError,
                f"the retained agent {entry.name} was changed since it was retained; "
                "release it and retain it again",
            )
        if entry.runs >= entry.max_runs:
            return (
                "unauthorized",
                RetainedAgentExhaustedError,
                f"the agent {entry.name} has used all of its {entry.max_runs} tasks (max_runs)",
            )
        if entry.graph is not None:
            return entry.graph.refusal(depth)
        return None

    async def continue_(
        self, handle: str, task: str, usage_limits: UsageLimits | None
    ) -> AgentResult:
        """Run ``task`` on the handle's agent (every check happens before any request)."""
        entry = self.entry(handle)
        check_task(task)
        if usage_limits is not None and not isinstance(usage_limits, UsageLimits):
            raise InvalidLimitError("usage_limits must be a UsageLimits or None")
        host = self.host
        parent = host.find(_parent_delegation.get())
        depth = parent.depth + 1 if parent else 1
        refused = self.refusal(entry, depth)
        if refused is not None:
            _, error, message = refused
            raise error(message)
        item = host.add(
            DelegationItem(
                entry.name, task, parent.id if parent else None, handle=entry.handle, depth=depth
            )
        )
        await self.start(entry, item, parent, usage_limits)
        result = entry.agent.last_run()
        if result is None or result.run_id != item.run_id:
            raise DelegationError(f"the task did not run: {item.error or item.status}")
        return result

    async def start(
        self,
        entry: _Entry,
        item: DelegationItem,
        parent: DelegationItem | None,
        usage_limits: UsageLimits | None,
    ) -> None:
        """Run the checked ``item`` on ``entry``'s agent to its end (it holds the agent,
        and a graph slot, until then)."""
        entry.runs += 1
        if entry.graph is not None:
            entry.graph.delegations += 1
        item.handle_budget = entry.budget
        entry.item = item
        try:
            await self._run(entry, item, parent, usage_limits)
        finally:
            entry.item = None
            entry.fingerprint = entry.agent._fingerprint()

    async def _run(
        self,
        entry: _Entry,
        item: DelegationItem,
        parent: DelegationItem | None,
        usage_limits: UsageLimits | None,
    ) -> None:
        host = self.host
        agent = entry.agent
        # This task draws on the handle's total and on the run that sent it (if any).
        budget = SharedBudget(
            UsageLimits(), parent=entry.budget, label="task", also=current_budget.get()
        )
        limits = (usage_limits or UsageLimits()).clamp_to(budget.remaining())
        item.ancestors = host.ancestors_below(parent, lends_tools=False)
        item.manifest = manifest_for(agent, item, limits, host.owner.agent_id)
        host.observe(item, "status", "queued")
        await host.drive(item, agent, budget=budget, limits=limits)

    # ------------------------------------------------------------------ cancel, release

    def cancel(self, handle: str, reason: str) -> bool:
        entry = self.entry(handle)
        if entry.item is None:
            return False
        return self.host.interrupt(entry.item.id, reason)

    def release(self, handle: str) -> None:
        entry = self.entry(handle)
        if entry.graph is not None:
            raise DelegationGraphError(
                f"the agent {entry.name} belongs to this agent's delegation graph; "
                "release it with release_agent_graph()"
            )
        if entry.item is not None or entry.agent.running:
            raise RetainedAgentBusyError(
                f"the retained agent {entry.name} is running; cancel_agent() it and wait "
                "for the task to end before releasing it"
            )
        self.drop(entry)
        self.host.discard(lambda item: item.handle != handle)


def check_task(task: object) -> None:
    """A task is a non-empty string of at most 64 KiB (UTF-8)."""
    if not isinstance(task, str) or not task.strip():
        raise DelegationTaskError("the task must be a non-empty string")
    if len(task.encode("utf-8", "surrogatepass")) > MAX_TASK_BYTES:
        raise DelegationTaskError(f"the task is over {MAX_TASK_BYTES // 1024} KiB")
