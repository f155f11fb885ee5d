"""Delegation graphs: retained agents that delegate to each other through route tools.

``root.retain_agent_graph(agents, routes, usage_limits)`` retains every agent of
``agents`` (each as ``retain_agent`` would) and adds to each route source (an agent
name, or ``"root"`` for the retaining agent itself) one *route tool* per route: the
tool takes a ``task`` and runs it on the route's target as a task of its handle, the
same way ``continue_agent`` does (the one engine, through ``DelegationHost.drive``).
Every route call is a delegation of the root: it shows in ``root.list_subagents()``
with ``parent_delegation_id`` naming the delegation whose run called it.

Budgets. One :class:`~deputy_shiny._engine.budget.SharedBudget` holds the graph's
``usage_limits``; each member's handle budget draws on it, and each task draws on its
handle's budget and on the run that called the route (so on the caller's chain up to
the graph budget, and on the root's own run when the root called it). Limits add up
across the graph; a route's own ``usage_limits`` are clamped to what is left.

Authority. A task's run has as :class:`~deputy_shiny._engine.deps.Authority` the agent
that called the route and every agent above it in the chain, up to the root:
permissions only (each member brings its own tools), read at each call.

Limits. An agent runs one task at a time, so a route to an agent already running
(a cycle back into the chain, or a member busy elsewhere) is refused at once. A task
refused for ``max_depth`` (the chain's length; the root's own delegates are at depth
1), ``max_delegations`` (tasks over the graph's life, until release) or
``max_concurrency`` (members running at once) is refused at once too, never queued:
an agent waiting on its own delegate holds its slot, so waiting for a slot could
deadlock the chain. A refused route call is a tool error for the model and a
``not_started`` record with its ``input_error``.

Examples:
    >>> RouteSpec(target="b", description="Ask b.").usage_limits is None
    True
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..._engine.budget import SharedBudget
from ...errors import DelegationGraphError, InvalidLimitError, InvalidToolError, ToolInvocationError
from ...events import AgentUsage
from ...tools import Tool, tool
from ...usage import UsageLimits
from .host import DELEGATION_TOOL_ANNOTATIONS, MAX_TASK_BYTES, DelegationItem
from .records import InputError
from .retained import RetainableAgent, Retention, _Entry

__all__ = ["ROOT", "DelegationGraph", "RouteSpec", "retain_graph"]

ROOT = "root"
"""The name routes use for the retaining agent (no agent of the graph may take it)."""


class RouteSpec(BaseModel):
    """One route of a delegation graph: a tool on its source that delegates to ``target``.

    ``retain_agent_graph`` also accepts a plain mapping with these keys.

    Attributes:
        target: The name (in ``agents``) of the agent the route delegates to.
        description: What the source's model reads to decide when to use the route.
        usage_limits: Limits for each task sent through the route, clamped to what the
            graph (and the calling run) has left; None: the target's own limits.

    Examples:
        >>> from deputy_shiny import UsageLimits
        >>> RouteSpec(target="reviewer", description="Review a diff.",
        ...           usage_limits=UsageLimits(max_requests=3)).target
        'reviewer'
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    target: str = Field(min_length=1)
    description: str = Field(min_length=1)
    usage_limits: UsageLimits | None = None


class GraphAgent(RetainableAgent, Protocol):
    """What a graph needs of its agents and its root (an Agent has it)."""

    def _add_route_tools(self, tools: list[Tool]) -> None: ...
    def _remove_route_tools(self, tools: list[Tool]) -> None: ...


class DelegationGraph:
    """One root's delegation graph: its members, routes, budget and limits."""

    def __init__(
        self,
        retention: Retention,
        budget: SharedBudget,
        *,
        max_depth: int,
        max_delegations: int,
        max_concurrency: int,
    ) -> None:
        self.retention = retention
        self.budget = budget
        self.max_depth = max_depth
        self.max_delegations = max_delegations
        self.max_concurrency = max_concurrency
        self.members: dict[str, _Entry] = {}
        self.routes: dict[str, dict[str, RouteSpec]] = {}
        self.tools: list[tuple[GraphAgent, list[Tool]]] = []  # route tools, by agent
        self.delegations = 0  # tasks started over the graph's life
        self.released = False

    def running(self) -> list[str]:
        """The members running a task now."""
        return [n for n, e in self.members.items() if e.item is not None or e.agent.running]

    def refusal(self, depth: int) -> tuple[InputError, type[DelegationGraphError], str] | None:
        """Why the graph cannot start one more task at ``depth`` now (None: it can)."""
        if depth > self.max_depth:
            return (
                "unauthorized",
                DelegationGraphError,
                f"delegations in this graph may nest at most {self.max_depth} deep "
                f"(max_depth); this one would be at depth {depth}",
            )
        if self.delegations >= self.max_delegations:
            return (
                "unauthorized",
                DelegationGraphError,
                f"this graph has used all of its {self.max_delegations} delegations "
                "(max_delegations)",
            )
        running = sum(e.item is not None for e in self.members.values())
        if running >= self.max_concurrency:
            return (
                "unauthorized",
                DelegationGraphError,
                f"{running} agents of this graph are running, its max_concurrency; "
                "delegations are refused rather than queued (an agent waiting on its own "
                "delegate holds its slot), so try again once one has finished",
            )
        return None

    async def route(self, source: str, name: str, task: object) -> str:
        """Run ``task`` through the route ``name`` of ``source`` (a route tool's call)."""
        if self.released:
            raise ToolInvocationError("Delegation refused: this delegation graph was released.")
        spec = self.routes[source][name]
        entry = self.members[spec.target]
        host = self.retention.host
        parent = None if source == ROOT else self.members[source].item
        depth = parent.depth + 1 if parent is not None else 1
        text = task if isinstance(task, str) else ""
        item = host.add(
            DelegationItem(
                entry.name,
                text,
                parent.id if parent is not None else None,
                handle=entry.handle,
                depth=depth,
            )
        )
        refused = _task_refusal(task)
        if refused is None and source != ROOT and parent is None:
            refused = "unauthorized", f"{source} is not running a task of this graph"
        if refused is None:
            found = self.retention.refusal(entry, depth)
            refused = (found[0], found[2]) if found is not None else None
        if refused is not None:
            kind, message = refused
            item.refuse(kind, message)
            host.observe(item, "status", message)
            raise ToolInvocationError(f"Delegation refused: {message}.")
        await self.retention.start(entry, item, parent, spec.usage_limits)
        return host.answer(item)

    def handles(self) -> dict[str, str]:
        """Each member's handle, by name."""
        return {name: entry.handle for name, entry in self.members.items()}

    def usage(self) -> AgentUsage:
        return self.budget.usage()

    def release(self) -> None:
        busy = self.running()
        if busy:
            raise DelegationGraphError(
                f"cannot release the delegation graph while {', '.join(busy)} "
                f"{'is' if len(busy) == 1 else 'are'} running; cancel_agent() or "
                "interrupt_subagent() and wait for the tasks to end first"
            )
        for agent, tools in self.tools:
            agent._remove_route_tools(tools)
        for entry in self.members.values():
            self.retention.drop(entry)
        handles = {entry.handle for entry in self.members.values()}
        self.retention.host.discard(lambda item: item.handle not in handles)
        self.released = True


def _task_refusal(task: object) -> tuple[InputError, str] | None:
    if not isinstance(task, str) or not task.strip():
        return "missing", "the task is empty"
    if len(task.encode("utf-8", "surrogatepass")) > MAX_TASK_BYTES:
        return "oversized", f"the task is over {MAX_TASK_BYTES // 1024} KiB"
    return None


def _whole(name: str, value: object, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise DelegationGraphError(f"{name} must be a whole number of at least {least}")
    return value


def retain_graph(
    retention: Retention,
    agents: Mapping[str, GraphAgent],
    routes: Mapping[str, Mapping[str, RouteSpec | Mapping[str, Any]]],
    usage_limits: UsageLimits,
    *,
    max_depth: int,
    max_delegations: int,
    max_concurrency: int,
    max_runs: int,
) -> DelegationGraph:
    """Check everything, then retain ``agents`` as a graph of ``retention``'s owner and
    add the route tools (see the module docstring)."""
    if not isinstance(usage_limits, UsageLimits):
        raise InvalidLimitError("usage_limits must be a UsageLimits (the whole graph's total)")
    if usage_limits.max_requests is None:
        raise InvalidLimitError("a delegation graph's usage_limits must set max_requests")
    _whole("max_depth", max_depth, 1)
    _whole("max_delegations", max_delegations, 0)
    _whole("max_concurrency", max_concurrency, 1)
    _whole("max_runs", max_runs, 1)
    members = _check_agents(retention, agents, usage_limits, max_runs)
    specs = _check_routes(routes, members)
    owner: GraphAgent = retention.host.owner  # type: ignore[assignment]
    by_name: dict[str, GraphAgent] = {ROOT: owner, **members}
    graph = DelegationGraph(
        retention,
        SharedBudget(usage_limits, label="delegation graph"),
        max_depth=max_depth,
        max_delegations=max_delegations,
        max_concurrency=max_concurrency,
    )
    graph.routes = specs
    built = {
        source: _route_tools(graph, source, by_name[source], table)
        for source, table in specs.items()
    }
    # Route tools go on before the agents are retained, so their fingerprints hold them.
    try:
        for source, tools in built.items():
            by_name[source]._add_route_tools(tools)
            graph.tools.append((by_name[source], tools))
    except Exception:
        for agent, tools in graph.tools:
            agent._remove_route_tools(tools)
        raise
    for name, agent in members.items():
        budget = SharedBudget(UsageLimits(), parent=graph.budget, label=f"graph agent {name}")
        entry = retention.add(agent, budget, max_runs, name=name)
        entry.graph = graph
        graph.members[name] = entry
    return graph


def _check_agents(
    retention: Retention,
    agents: Mapping[str, GraphAgent],
    usage_limits: UsageLimits,
    max_runs: int,
) -> dict[str, GraphAgent]:
    if not isinstance(agents, Mapping) or not agents:
        raise DelegationGraphError("agents must be a non-empty mapping of names to Agents")
    members: dict[str, GraphAgent] = {}
    seen: set[int] = set()
    for name, agent in agents.items():
        if not isinstance(name, str) or not name.strip():
            raise DelegationGraphError("every agent of a graph needs a non-empty string name")
        if name == ROOT:
            raise DelegationGraphError(
                f"the name {ROOT!r} is reserved for the retaining agent; rename that agent"
            )
        if id(agent) in seen:
            raise DelegationGraphError(f"the agent named {name!r} appears twice in the graph")
        seen.add(id(agent))
        retention.check(agent, usage_limits, max_runs)
        members[name] = agent
    retention.check_room(len(members))
    return members


def _check_routes(
    routes: Mapping[str, Mapping[str, RouteSpec | Mapping[str, Any]]],
    members: Mapping[str, GraphAgent],
) -> dict[str, dict[str, RouteSpec]]:
    if not isinstance(routes, Mapping):
        raise DelegationGraphError("routes must be a mapping: routes[source][tool_name] = route")
    specs: dict[str, dict[str, RouteSpec]] = {}
    for source, table in routes.items():
        if source != ROOT and source not in members:
            raise DelegationGraphError(
                f"routes names an unknown source {source!r} (known: {ROOT}, "
                f"{', '.join(sorted(members))})"
            )
        if not isinstance(table, Mapping):
            raise DelegationGraphError(f"routes[{source!r}] must map tool names to routes")
        specs[source] = {}
        for tool_name, value in table.items():
            where = f"routes[{source!r}][{tool_name!r}]"
            try:
                spec = value if isinstance(value, RouteSpec) else RouteSpec.model_validate(value)
            except ValidationError as exc:
                raise DelegationGraphError(f"{where} is not a route: {exc}") from exc
            if spec.target not in members:
                raise DelegationGraphError(
                    f"{where} targets {spec.target!r}, which is not an agent of the graph "
                    f"(agents: {', '.join(sorted(members))})"
                )
            specs[source][tool_name] = spec
    return specs


def _route_tools(
    graph: DelegationGraph, source: str, agent: GraphAgent, table: Mapping[str, RouteSpec]
) -> list[Tool]:
    ref = weakref.ref(graph)
    tools = []
    for name, spec in table.items():
        if name in agent.get_tools():
            raise DelegationGraphError(
                f"routes[{source!r}][{name!r}]: {source} already has a tool named {name!r}"
            )
        try:
            tools.append(_route_tool(ref, source, name, spec))
        except InvalidToolError as exc:
            raise DelegationGraphError(f"routes[{source!r}][{name!r}]: {exc}") from exc
    return tools


def _route_tool(ref: weakref.ref[DelegationGraph], source: str, name: str, spec: RouteSpec) -> Tool:
    async def route(task: str) -> str:
        graph = ref()
        if graph is None:
            raise ToolInvocationError("Delegation refused: this delegation graph is gone.")
        return await graph.route(source, name, task)

    schema = {
        "type": "object",
        "properties": {
            "task": {
                "type": "string",
                "description": f"Everything {spec.target} needs to know: it sees nothing "
                "of this conversation beyond its own earlier tasks.",
            }
        },
        "required": ["task"],
        "additionalProperties": False,
    }
    return tool(
        route,
        name=name,
        description=spec.description,
        arguments=schema,
        annotations=DELEGATION_TOOL_ANNOTATIONS,
    )
