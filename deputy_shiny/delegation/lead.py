"""LeadAgent: an Agent that hands self-contained tasks to subagents through a tool.

The lead's model calls ``delegate(agent, task)``. The subagent is built then, from its
:class:`~deputy_shiny.delegation.AgentDefinition` and what the lead has at that moment,
and runs on the same engine: its authority is at most the lead's (only the lead's
tools, a mode no wider, and every call checked against the lead's *current*
permissions too), its usage is drawn from the lead's run budget, and interrupting the
lead stops it. The host reads what happened with ``list_subagents()`` and the other
delegation reads every :class:`~deputy_shiny.Agent` has; showing it to a person goes
through the agent's :class:`DelegationDisclosure`.

Examples:
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
from types import MappingProxyType
from typing import Any, ClassVar

from ..agent import Agent, ModelLike
from ..agent._delegation.host import (
    RESULT_PAGE_CHARS,
    DelegationSubscription,
    ResultPage,
    delegation_history,
)
from ._manager import Delegations
from .definitions import AgentDefinition

__all__ = [
    "RESULT_PAGE_CHARS",
    "DelegationSubscription",
    "LeadAgent",
    "ResultPage",
    "delegation_history",
]


class LeadAgent(Agent):
    """An Agent that delegates to subagents (see the module docstring).

    What it delegated is read like any agent's delegations (``list_subagents()``,
    ``inspect_subagents()``...); the disclosure options (``delegation_disclosure``,
    ``delegation_observation``, ``delegation_scope``) are :class:`~deputy_shiny.Agent`'s.
    A LeadAgent cannot itself be retained by another agent.

    Args:
        model: As for :class:`~deputy_shiny.Agent`.
        subagents: The :class:`AgentDefinition` of each subagent it may call (more
            can be added with :meth:`register_sub_agent`; with none, the lead has no
            ``delegate`` tool until one is registered).
        subagent_models: Models for named subagents, overriding their definition's
            ``model`` (e.g. test models).
        max_depth: How deep delegations may nest (1: subagents cannot delegate).
        max_concurrency: Subagents running at once within one lead run (more queue).
        max_delegations: Delegations one lead run may start.
        **agent_options: Everything else :class:`~deputy_shiny.Agent` takes.
    """

    _retainable: ClassVar[bool] = False

    def __init__(
        self,
        model: ModelLike,
        *,
        subagents: Sequence[AgentDefinition] = (),
        subagent_models: Mapping[str, ModelLike] | None = None,
        max_depth: int = 1,
        max_concurrency: int = 4,
        max_delegations: int = 16,
        **agent_options: Any,
    ) -> None:
        super().__init__(model, **agent_options)
        self._delegations = Delegations(
            self,
            self._delegator.host,
            list(subagents),
            models=subagent_models,
            max_depth=max_depth,
            max_concurrency=max_concurrency,
            max_delegations=max_delegations,
        )
        self._delegations.install()

    def register_sub_agent(
        self,
        definition: AgentDefinition,
        *,
        model: ModelLike | None = None,
        replace: bool = False,
    ) -> LeadAgent:
        """Add a subagent after construction; the lead's next run can delegate to it.

        The ``delegate`` tool is registered again with the new choice in its schema and
        description (so register between runs: a run under way keeps the tool it
        started with). A name already taken is a ConfigurationError unless
        ``replace=True``. ``model`` overrides the definition's model, as
        ``subagent_models`` does.

        Examples:
            >>> from deputy_shiny.testing import ScriptedModel
            >>> lead = LeadAgent(ScriptedModel([]))
            >>> lead.available_sub_agents(), "delegate" in lead.get_tools()
            ([], False)
            >>> _ = lead.register_sub_agent(AgentDefinition(name="helper", description="Helps."))
            >>> lead.available_sub_agents(), "delegate" in lead.get_tools()
            (['helper'], True)
        """
        self._delegations.register(definition, model=model, replace=replace)
        return self

    @property
    def sub_agent_defs(self) -> Mapping[str, AgentDefinition]:
        """The lead's subagent definitions by name, in registration order: a read-only
        view (the definitions are frozen; add one with :meth:`register_sub_agent`).

        Examples:
            >>> from deputy_shiny.testing import ScriptedModel
            >>> lead = LeadAgent(ScriptedModel([]), subagents=[
            ...     AgentDefinition(name="reviewer", description="Reviews code.")])
            >>> lead.sub_agent_defs["reviewer"].description
            'Reviews code.'
            >>> lead.sub_agent_defs["x"] = lead.sub_agent_defs["reviewer"]
            Traceback (most recent call last):
            ...
            TypeError: 'mappingproxy' object does not support item assignment
        """
        return MappingProxyType(self._delegations.definitions)

    def available_sub_agents(self) -> list[str]:
        """The names of the subagents the lead can delegate to, in registration order.

        Examples:
            >>> from deputy_shiny.testing import ScriptedModel
            >>> LeadAgent(ScriptedModel([]), subagents=[
            ...     AgentDefinition(name="b", description="B."),
            ...     AgentDefinition(name="a", description="A.")]).available_sub_agents()
            ['b', 'a']
        """
        return list(self._delegations.definitions)
