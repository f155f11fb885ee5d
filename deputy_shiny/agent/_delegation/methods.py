"""What an agent delegates: the :class:`Delegator` component and the Agent methods over it.

Reads of its delegations, the agents it retains and its delegation graph. The work is
done in :mod:`deputy_shiny.agent._delegation` (the host that records delegations,
:class:`~deputy_shiny.agent._delegation.retained.Retention`,
:class:`~deputy_shiny.agent._delegation.graph.DelegationGraph`); :class:`Delegator` owns
them, and the Agent's methods here are its public entry points.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from ..._util import sync as _sync
from ...errors import ConfigurationError, DelegationGraphError
from ...events import AgentResult, AgentUsage
from ...messages import Turn
from ...usage import UsageLimits
from .._guard import Guard
from .graph import DelegationGraph, GraphAgent, RouteSpec, retain_graph
from .host import DelegationHost, DelegationSubscription, ResultPage
from .records import DelegationManifest, SubagentRecord, SubagentResult
from .retained import RetainableAgent, Retention

__all__ = ["DelegationMethods", "Delegator"]


class Delegator:
    """One agent's delegations: the host recording them, its retained agents, its graph.

    Args:
        host: Records this agent's delegations (it holds the agent weakly).
        guard: The agent's guard (retaining is refused while it is retained itself).
    """

    def __init__(self, host: DelegationHost, guard: Guard) -> None:
        self.host = host
        self._guard = guard
        self._retention: Retention | None = None  # the agents it retains (made on first use)
        self._graph: DelegationGraph | None = None  # its delegation graph, if any

    def retention(self) -> Retention:
        """The agents this agent retains (made on first use)."""
        if self._retention is None:
            self._retention = Retention(self.host)
        return self._retention

    def retains_others(self) -> bool:
        """True while this agent retains another agent."""
        return self._retention is not None and self._retention.count() > 0

    def retain(self, agent: RetainableAgent, usage_limits: UsageLimits, max_runs: int) -> str:
        """See :meth:`DelegationMethods.retain_agent`."""
        self._guard.free("retain agents")
        if not isinstance(agent, DelegationMethods):
            raise ConfigurationError(f"retain_agent takes an Agent, not {type(agent).__name__}")
        return self.retention().retain(agent, usage_limits, max_runs)

    def retain_graph(
        self,
        agents: Mapping[str, GraphAgent],
        routes: Mapping[str, Mapping[str, RouteSpec | Mapping[str, Any]]],
        usage_limits: UsageLimits,
        *,
        max_depth: int,
        max_delegations: int,
        max_concurrency: int,
        max_runs: int,
    ) -> dict[str, str]:
        """See :meth:`DelegationMethods.retain_agent_graph`."""
        self._guard.free("retain agents")
        if self._graph is not None:
            raise DelegationGraphError(
                "this agent already has a delegation graph; release_agent_graph() it first"
            )
        for name, agent in agents.items() if isinstance(agents, Mapping) else ():
            if not isinstance(agent, DelegationMethods):
                raise ConfigurationError(
                    f"retain_agent_graph takes Agents; {name!r} is a {type(agent).__name__}"
                )
        self._graph = retain_graph(
            self.retention(),
            agents,
            routes,
            usage_limits,
            max_depth=max_depth,
            max_delegations=max_delegations,
            max_concurrency=max_concurrency,
            max_runs=max_runs,
        )
        return self._graph.handles()

    def graph_usage(self) -> AgentUsage:
        """See :meth:`DelegationMethods.delegation_graph_usage`."""
        if self._graph is None:
            raise DelegationGraphError("this agent has no delegation graph")
        return self._graph.usage()

    def release_graph(self) -> None:
        """See :meth:`DelegationMethods.release_agent_graph`."""
        if self._graph is None:
            raise DelegationGraphError("this agent has no delegation graph")
        self._graph.release()
        self._graph = None


class DelegationMethods:
    """An Agent's delegation methods, façades over its :class:`Delegator`."""

    _delegator: Delegator  # made by Agent.__init__

    # ------------------------------------------------------------ delegations: reads

    def list_subagents(self) -> list[SubagentRecord]:
        """Every delegation this agent made, oldest first, running ones included (host
        code only: no disclosure check). Records are kept in memory only.

        Examples:
            >>> from deputy_shiny import Agent
            >>> from deputy_shiny.testing import ScriptedModel
            >>> Agent(ScriptedModel([])).list_subagents()
            []
        """
        return self._delegator.host.list_subagents()

    def get_subagent_results(
        self, agent_name: str | None = None, delegation_id: str | None = None
    ) -> list[SubagentResult | None]:
        """The result of each delegation (of one subagent, or only one delegation), oldest
        first, as deputy's: a :class:`SubagentResult` (an
        :class:`~deputy_shiny.AgentResult` with the subagent run's turns, events, usage
        and ids, and the delegation's ``record``), or None for a run still going, one
        that never started (a refused task) or one that failed without a result.

        Examples:
            >>> from deputy_shiny.delegation import AgentDefinition, LeadAgent
            >>> from deputy_shiny.testing import ScriptedModel, ScriptedReply, ScriptedToolCall
            >>> call = ScriptedToolCall("delegate", {"agent": "helper", "task": "Say hi"})
            >>> lead = LeadAgent(
            ...     ScriptedModel([ScriptedReply(tool_calls=[call]), "It said hi."]),
            ...     subagents=[AgentDefinition(name="helper", description="Says things.")],
            ...     subagent_models={"helper": ScriptedModel(["hi"])})
            >>> _ = lead.run_sync("Ask the helper")
            >>> [(r.response, r.n_turns(), r.status) for r in lead.get_subagent_results()]
            [('hi', 2, 'completed')]
        """
        return self._delegator.host.results(agent_name, delegation_id)

    def get_subagent_messages(
        self, agent_name: str | None = None, session_id: str | None = None
    ) -> dict[str, list[Turn]]:
        """Each delegation's turns (so far, for a running one), by delegation id.

        Reading them adds nothing to this agent's context. No disclosure check: use
        :meth:`inspect_subagents` before showing history to a person.
        """
        return self._delegator.host.messages(agent_name, session_id)

    def get_subagent_contexts(
        self,
        delegation_id: str | None = None,
        view: Literal["initial", "current"] = "initial",
        redact: bool = False,
    ) -> dict[str, DelegationManifest | dict[str, Any] | None]:
        """What each subagent (or only ``delegation_id``) started with (``initial``: its
        :class:`DelegationManifest`) or what its model context holds (``current``: system
        prompt and turns; at the end for a finished one). ``redact`` (initial only)
        leaves out the task and instructions and keeps the rest. Nothing is sent to a
        model; no disclosure check."""
        return self._delegator.host.contexts(delegation_id, view, redact)

    def interrupt_subagent(self, delegation_id: str, reason: str = "interrupted") -> bool:
        """Ask a running subagent to stop at its next safe point (its own delegations
        stop too). No disclosure check: make sure the user may do this. Returns True if
        it was running; False if the delegation is unknown or already finished.

        Examples:
            >>> from deputy_shiny import Agent
            >>> from deputy_shiny.testing import ScriptedModel
            >>> Agent(ScriptedModel([])).interrupt_subagent("dlg_unknown")
            False
        """
        return self._delegator.host.interrupt(delegation_id, reason)

    def observe_subagents(
        self, requester: Any, delegation_id: str | None = None, after: int | None = None
    ) -> DelegationSubscription:
        """Follow delegation events as they happen, as ``requester`` may see them.

        Raises:
            DelegationDisclosureError: the requester may see nothing here.
        """
        return self._delegator.host.observe_subagents(requester, delegation_id, after)

    def inspect_subagents(
        self, requester: Any, delegation_id: str | None = None, transcript: bool = False
    ) -> list[dict[str, Any]]:
        """A snapshot of each delegation ``requester`` may see: its task, what the runtime
        observed (status, stop reason, usage, tools called, errors) kept apart from what
        the subagent claimed (its answer), and the manifest it started from; with
        ``transcript`` its turns too. A retained agent's task also reports the handle's
        total usage. Every view passes the disclosure policy. An unknown
        ``delegation_id`` gives an empty list.

        Raises:
            DelegationDisclosureError: the requester may see none of them.
        """
        return self._delegator.host.inspect(requester, delegation_id, transcript)

    def export_subagents(self, requester: Any, delegation_id: str | None = None) -> dict[str, Any]:
        """A JSON-ready record of the finished delegations ``requester`` may see, for
        :func:`~deputy_shiny.delegation.delegation_history`. Raises if a selected
        delegation is still running."""
        return self._delegator.host.export(requester, delegation_id)

    def read_subagent_result(
        self, requester: Any, delegation_id: str, reference: str, offset: int = 0
    ) -> ResultPage:
        """Read 8,192 characters of a subagent's full answer from ``offset`` (``reference``
        as in its :meth:`inspect_subagents` view). Nothing is run.

        Raises:
            DelegationDisclosureError: the requester may not see this delegation.
            DelegationError: no such delegation, result or offset.
        """
        return self._delegator.host.read_result(requester, delegation_id, reference, offset)

    # ------------------------------------------------------------ delegations: retained

    def retain_agent(
        self, agent: RetainableAgent, usage_limits: UsageLimits, max_runs: int = 32
    ) -> str:
        """Retain ``agent`` to send it tasks with :meth:`continue_agent`; returns its handle.

        The retained agent keeps its conversation between tasks. Until
        :meth:`release_agent`, it cannot be run directly and its conversation, prompt,
        model, tools, hooks, tool observers and permissions cannot change
        (:class:`~deputy_shiny.errors.AgentRetainedError`); observers it already has keep
        working. Each of its tool calls must also pass this agent's current permissions.

        Args:
            agent: A plain Agent (not a LeadAgent, not this one, not retained, not
                retaining others) without fallback models or provider-native tools.
            usage_limits: The total of all its tasks until release (each task is also
                capped by the agent's own per-run limits).
            max_runs: How many tasks it may be sent.

        Raises:
            RetainError: ``agent`` cannot be retained, or this agent holds 32 already.

        Examples:
            >>> from deputy_shiny import Agent, UsageLimits
            >>> from deputy_shiny.testing import ScriptedModel
            >>> owner = Agent(ScriptedModel([]))
            >>> analyst = Agent(ScriptedModel(["Sales rose 4%.", "The north did."]))
            >>> handle = owner.retain_agent(analyst, UsageLimits(max_requests=10))
            >>> owner.continue_agent(handle, "Summarise sales.").response
            'Sales rose 4%.'
            >>> owner.continue_agent(handle, "Which region drove it?").response
            'The north did.'
            >>> len(analyst.get_turns()), [r.status for r in owner.list_subagents()]
            (4, ['completed', 'completed'])
            >>> owner.release_agent(handle)
        """
        return self._delegator.retain(agent, usage_limits, max_runs)

    async def continue_agent_async(
        self, handle: str, task: str, usage_limits: UsageLimits | None = None
    ) -> AgentResult:
        """Send a retained agent its next task (it still has its earlier conversation).

        The task runs on the same engine, recorded as a delegation of this agent
        (:meth:`list_subagents`). Its usage is charged to the handle's total and, when
        called from inside one of this agent's runs (from a tool), to that run's budget
        too; its limits are ``usage_limits`` (None: the agent's own) clamped to what
        both have left.

        Raises (all before any request):
            RetainedHandleError: the handle is another agent's or unknown
                (RetainedAgentReleasedError: released).
            RetainedAgentBusyError: it is running a task.
            RetainedAgentChangedError: it was changed since it was retained.
            RetainedAgentExhaustedError: ``max_runs`` tasks were sent already.
            DelegationTaskError: the task is empty or over 64 KiB.
        """
        return await self._delegator.retention().continue_(handle, task, usage_limits)

    def continue_agent(
        self, handle: str, task: str, usage_limits: UsageLimits | None = None
    ) -> AgentResult:
        """Blocking :meth:`continue_agent_async` (an error inside a running event loop)."""
        return _sync.run_sync(
            self.continue_agent_async(handle, task, usage_limits), "continue_agent"
        )

    def cancel_agent(self, handle: str, reason: str = "interrupted") -> bool:
        """Ask a retained agent to stop its current task at the next safe point (the
        conversation so far is kept). True if a task was running; repeating is harmless."""
        return self._delegator.retention().cancel(handle, reason)

    def release_agent(self, handle: str) -> None:
        """Stop retaining an agent so it can be used on its own again.

        This also discards the delegation records of its tasks (save them first with
        :meth:`export_subagents`). Its tools and connections stay open.

        Raises:
            RetainedAgentBusyError: it is running (``cancel_agent`` and wait first).
            RetainedHandleError: the handle is another agent's, unknown or released.
        """
        self._delegator.retention().release(handle)

    # ------------------------------------------------------------ delegations: graph

    def retain_agent_graph(
        self,
        agents: Mapping[str, GraphAgent],
        routes: Mapping[str, Mapping[str, RouteSpec | Mapping[str, Any]]],
        usage_limits: UsageLimits,
        *,
        max_depth: int = 3,
        max_delegations: int = 16,
        max_concurrency: int = 4,
        max_runs: int = 32,
    ) -> dict[str, str]:
        """Retain several agents as a graph whose members delegate to each other through
        route tools; returns each agent's handle by name (for :meth:`continue_agent`).

        This agent is the graph's root (routes name it ``"root"``) and records every
        delegation in it (:meth:`list_subagents`, with ``parent_delegation_id`` for
        nested ones). ``routes[source][tool_name]`` adds to ``source`` (an agent's name
        or ``"root"``) a tool ``tool_name(task)`` that sends ``task`` to the route's
        target as its next task: a :class:`~deputy_shiny.delegation.RouteSpec` or a
        mapping with ``target``, ``description`` and optional ``usage_limits`` (each
        task's limits, clamped to what is left). Every run in the graph draws on the one
        budget ``usage_limits`` (its ``max_requests`` is required), and a route the
        root's own run calls draws on that run too. Each call a member makes must also
        pass the current permissions of every agent above it in the chain, so a route
        from a plan-mode agent gives its target no write.

        Routes may form cycles, but a route to an agent that is already running (one
        in the chain, or busy elsewhere) is refused at once. So are routes past
        ``max_depth`` (the root's own delegates are at depth 1), past
        ``max_delegations`` (tasks in the graph until release, ``continue_agent`` ones
        included) or past ``max_concurrency`` (members running at once): a refusal,
        never a queue, since an agent waiting on its own delegate holds its slot and
        queueing could deadlock. A refused route call is a tool error for the model and
        a ``not_started`` record. Each member meets :meth:`retain_agent`'s conditions
        and, until :meth:`release_agent_graph`, is retained like one (``max_runs`` tasks
        each; the members count toward the 32 agents one agent may retain).

        Raises:
            DelegationGraphError: a graph already exists, an agent is named ``root`` or
                appears twice, a route's source or target is unknown, a route tool's
                name is invalid or clashes with its source's tools, or a limit is not a
                whole number of at least 1 (``max_delegations``: 0).
            RetainError: an agent cannot be retained.
            InvalidLimitError: ``usage_limits`` is not a UsageLimits with max_requests.

        Examples:
            >>> from deputy_shiny import Agent, UsageLimits
            >>> from deputy_shiny.testing import ScriptedModel, ScriptedReply, ScriptedToolCall
            >>> def ask(tool, task):
            ...     return ScriptedReply(tool_calls=[ScriptedToolCall(tool, {"task": task})])
            >>> root = Agent(ScriptedModel([ask("ask_planner", "Plan a trip."), "Booked."]))
            >>> planner = Agent(ScriptedModel([ask("ask_booker", "Book it."), "Trip planned."]))
            >>> booker = Agent(ScriptedModel(["Booked a train."]))
            >>> handles = root.retain_agent_graph(
            ...     {"planner": planner, "booker": booker},
            ...     {
            ...         "root": {"ask_planner": {"target": "planner", "description": "Plans."}},
            ...         "planner": {"ask_booker": {"target": "booker", "description": "Books."}},
            ...     },
            ...     UsageLimits(max_requests=10),
            ... )
            >>> root.run_sync("Get me to Lyon.").response
            'Booked.'
            >>> [(r.agent_name, r.response) for r in root.list_subagents()]
            [('planner', 'Trip planned.'), ('booker', 'Booked a train.')]
            >>> root.delegation_graph_usage().requests
            3
            >>> root.release_agent_graph()
        """
        return self._delegator.retain_graph(
            agents,
            routes,
            usage_limits,
            max_depth=max_depth,
            max_delegations=max_delegations,
            max_concurrency=max_concurrency,
            max_runs=max_runs,
        )

    def delegation_graph_usage(self) -> AgentUsage:
        """The total usage of every run in this agent's delegation graph so far (running
        ones included; the root's own requests are not in it).

        Raises:
            DelegationGraphError: this agent has no delegation graph.
        """
        return self._delegator.graph_usage()

    def release_agent_graph(self) -> None:
        """Release the delegation graph: its route tools and handles go, its members can
        be used on their own again (their own tools and connections stay), and the
        graph's delegation records are discarded (save them first with
        :meth:`export_subagents`). A new graph may then be retained.

        Raises:
            DelegationGraphError: no graph, or an agent in it is running (cancel it with
                :meth:`cancel_agent` and wait for the task to end first).
        """
        self._delegator.release_graph()
