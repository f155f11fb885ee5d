"""A lead's delegations: the ``delegate`` tool, the runs it starts, and their records.

A delegation builds a subagent from an :class:`AgentDefinition` at the moment of the
call, from what the lead has *then*: only tools the lead has (looked up by name in its
registry) or the host gave the definition as objects, a permission mode no wider than
the lead's, the lead's tool hooks, approval
handler, working directory and session. It runs on the same engine as every agent,
over deps that name the lead (and every agent above it) as :class:`Authority`, so each
call must also pass their current permissions, and the lead's run budget as parent, so
its usage is drawn from what the lead has left.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from .._engine.budget import SharedBudget, current_budget
from .._engine.deps import Authority
from ..agent._delegation.host import (
    DELEGATION_TOOL_ANNOTATIONS,
    MAX_TASK_BYTES,
    DelegationHost,
    DelegationItem,
    manifest_for,
    now,
    parent_delegation,
)
from ..agent._delegation.records import InputError
from ..errors import ConfigurationError, DelegationError
from ..permissions import narrow_mode
from ..tools import Tool, tool
from ..usage import UsageLimits
from .definitions import AgentDefinition, agent_definition_resolve

if TYPE_CHECKING:
    from ..agent import Agent

__all__ = ["DELEGATE_TOOL", "MAX_TASK_BYTES", "Delegations"]

logger = logging.getLogger(__name__)

DELEGATE_TOOL = "delegate"

_TOOL_HOOK_EVENTS = ("PermissionRequest", "PreToolUse", "PostToolUse", "PostToolUseFailure")

# How deep the delegation in progress is: 0 in a lead's own run, 1 inside its subagent.
_depth: contextvars.ContextVar[int] = contextvars.ContextVar("deputy_delegation_depth", default=0)


class _RunSlots:
    """The concurrency and count limits of one lead run's delegations."""

    def __init__(self, max_concurrency: int) -> None:
        self.semaphore = asyncio.Semaphore(max_concurrency)
        self.started = 0


class Delegations:
    """A lead's subagent definitions and its ``delegate`` tool (the records of what it
    delegated live in the lead's :class:`~deputy_shiny.agent._delegation.host.DelegationHost`).

    Examples:
        >>> Delegations.__name__
        'Delegations'
    """

    def __init__(
        self,
        lead: Agent,
        host: DelegationHost,
        definitions: Sequence[AgentDefinition],
        *,
        models: Mapping[str, Any] | None = None,
        max_depth: int = 1,
        max_concurrency: int = 4,
        max_delegations: int = 16,
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
        self._host = host
        self.definitions = by_name
        self._tool: Tool | None = None  # the delegate tool this object last registered
        self._models = dict(models or {})
        self.max_depth = max_depth
        self.max_concurrency = max_concurrency
        self.max_delegations = max_delegations
        self._slots: weakref.WeakKeyDictionary[SharedBudget, _RunSlots] = (
            weakref.WeakKeyDictionary()
        )

    # ------------------------------------------------------------------ definitions

    def register(
        self, definition: AgentDefinition, *, model: Any = None, replace: bool = False
    ) -> None:
        """Add (or with ``replace``, replace) a subagent, and bring the tool in step.

        The ``delegate`` tool's choices and description list every subagent, so it is
        registered again: on the lead's next run the model sees the new one. A lead
        whose ``delegate`` tool was taken away (``set_tools``) does not get it back.
        """
        if not isinstance(definition, AgentDefinition):
            raise ConfigurationError(
                f"register_sub_agent() takes an AgentDefinition, not {type(definition).__name__}"
            )
        if definition.name in self.definitions and not replace:
            raise ConfigurationError(
                f"there is already a subagent named {definition.name!r}; pass replace=True "
                "to replace it"
            )
        # Copied, not changed in place: a delegation under way keeps reading a whole table.
        self.definitions = {**self.definitions, definition.name: definition}
        if model is not None:
            self._models[definition.name] = model
        elif replace:
            self._models.pop(definition.name, None)
        self.install()

    def install(self) -> None:
        """Register the ``delegate`` tool for the current definitions (none: no tool)."""
        lead = self._lead
        if not self.definitions:
            return
        current = lead.get_tools().get(DELEGATE_TOOL)
        if self._tool is not None and current is not self._tool:
            return  # the host removed or replaced it: registering is not authorizing
        self._tool = self.tool()
        lead.register_tool(self._tool, replace=current is not None)

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
            annotations=DELEGATION_TOOL_ANNOTATIONS,
        )

    async def delegate(self, name: str, task: str) -> str:
        """Run ``task`` on the subagent ``name`` (from the lead's run); its answer or why not."""
        host = self._host
        item = host.add(DelegationItem(name, task, parent_delegation.get()))
        refused = self._refusal(item)
        budget = current_budget.get()
        if refused is None and budget is None:
            refused = "unauthorized", "delegation runs only from the lead's own run"
        slots = None
        if refused is None and budget is not None:
            slots = self._slots.get(_root(budget))
            if slots is None:
                slots = self._slots[_root(budget)] = _RunSlots(self.max_concurrency)
            if slots.started >= self.max_delegations:
                refused = (
                    "unauthorized",
                    (f"this run may delegate at most {self.max_delegations} times"),
                )
        if refused is not None or slots is None or budget is None:
            kind, message = refused or ("unauthorized", "no budget")
            item.refuse(kind, message)
            host.observe(item, "status", message)
            return f"Delegation refused: {message.rstrip('.')}."
        slots.started += 1
        host.observe(item, "status", "queued")
        async with slots.semaphore:
            return await self._run(item, budget)

    def _refusal(self, item: DelegationItem) -> tuple[InputError, str] | None:
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

    async def _run(self, item: DelegationItem, budget: SharedBudget) -> str:
        host = self._host
        definition = self.definitions[item.name]
        try:
            sub, limits = self._build(definition, budget)
        except Exception as exc:
            item.status, item.error = "failed", str(exc)
            item.completed_at = now()
            host.observe(item, "status", f"could not start: {exc}")
            return f"Delegation failed before it started: {exc}"
        item.depth = _depth.get() + 1
        item.manifest = manifest_for(sub, item, limits, self._lead.agent_id)
        # A lead lends its subagent its own tools: the run may use only tools the lead
        # (and, nested, every subagent above) has now, under their permissions now.
        item.ancestors = _granting(
            host.ancestors_below(host.find(item.parent), lends_tools=True),
            definition.granted_tool_names(),
        )
        depth = _depth.set(item.depth)
        try:
            message = (
                f"{definition.initial_prompt}\n\n{item.task}" if definition.initial_prompt else None
            )
            await host.drive(item, sub, budget=budget, limits=limits, message=message)
        finally:
            _depth.reset(depth)
            await sub.aclose()
        return host.answer(item)

    def _build(
        self, definition: AgentDefinition, budget: SharedBudget
    ) -> tuple[Agent, UsageLimits]:
        from ..agent import Agent

        lead = self._lead
        available = {n: t for n, t in lead.get_tools().items() if isinstance(t, Tool)}
        resolved = agent_definition_resolve(definition, available, lead.skills())
        lent = list(resolved.tools)
        for server in definition.mcp_servers:
            # A definition names MCP servers; its subagent gets the tools the lead has
            # from them (never a connection of its own, so never more than the lead).
            from_server = [
                t
                for t in available.values()
                if t.source.type == "mcp" and t.source.server == server and t not in lent
            ]
            if not from_server and not any(
                t.source.type == "mcp" and t.source.server == server for t in lent
            ):
                raise DelegationError(
                    f"subagent {definition.name!r} needs MCP server {server!r}, but the lead "
                    "has no tools from it (load it into the lead first)"
                )
            lent.extend(from_server)
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
            model = lead.model
        else:
            model = definition.model
        sub = Agent(
            model,
            system_prompt=definition.system_prompt() or None,
            usage_limits=limits,
            working_dir=lead.working_dir,
            session_id=lead.session_id,
            agent_name=definition.name,
            permissions=permissions,
            hooks=lead.hooks.select(_TOOL_HOOK_EVENTS),
            approval_handler=lead.approval_handler,
        )
        sub._lend_tools(lent, lead)
        for skill in resolved.skills:
            # Its prompt joins the subagent's; its tools still need the lead to have them
            # (every call is checked against the lead's tools).
            sub.load_skill(skill, allow_conflicts=True)
        return sub, limits


def _granting(ancestors: tuple[Authority, ...], granted: frozenset[str]) -> tuple[Authority, ...]:
    """``ancestors``, each lending agent also counting ``granted`` (the tools the host gave
    the subagent as objects in its definition) among the tools it has: the host granted
    them, not the lead. Their permissions still apply to every call."""
    if not granted:
        return ancestors
    return tuple(
        a if a.tool_names is None else replace(a, tool_names=_with_granted(a.tool_names, granted))
        for a in ancestors
    )


def _with_granted(
    names: Callable[[], frozenset[str]], granted: frozenset[str]
) -> Callable[[], frozenset[str]]:
    return lambda: names() | granted


def _root(budget: SharedBudget) -> SharedBudget:
    root = budget
    while root.parent is not None:
        root = root.parent
    return root
