"""Delegation: subagents a lead agent hands work to.

- :class:`LeadAgent` delegates self-contained tasks to subagents through its
  ``delegate`` tool; each subagent runs on the same engine with at most the lead's
  authority, drawing on the lead's budget.
- Any :class:`~deputy_shiny.Agent` can retain other agents (``retain_agent``,
  ``continue_agent``) or a graph of them (``retain_agent_graph``), and reads its
  delegations with ``list_subagents()``, ``inspect_subagents()`` and the rest.
- Agent definitions (:mod:`deputy_shiny.delegation.definitions`, made with
  :func:`agent_definition`): a subagent described as data, read from or written to
  strict YAML (:mod:`deputy_shiny.delegation.definition_files`).
- :class:`DelegationDisclosure` decides who may see the delegations;
  :class:`DelegationObservation` bounds what observers can replay.

Examples:
    >>> from deputy_shiny.delegation import AgentDefinition
    >>> AgentDefinition(name="reviewer", description="Reviews code.").model
    'inherit'
"""

from ..agent._delegation.graph import RouteSpec
from ..agent._delegation.host import MAX_TASK_BYTES
from ._manager import DELEGATE_TOOL
from .definition_files import agent_definition_read, agent_definition_write
from .definitions import (
    AGENT_DEFINITION_VERSION,
    MAX_AGENT_DEFINITION_BYTES,
    AgentDefinition,
    ResolvedAgentDefinition,
    SkillRegistry,
    ToolRegistry,
    agent_definition,
    agent_definition_resolve,
)
from .lead import (
    RESULT_PAGE_CHARS,
    DelegationSubscription,
    LeadAgent,
    ResultPage,
    delegation_history,
)
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
    "AGENT_DEFINITION_VERSION",
    "DELEGATE_TOOL",
    "MAX_AGENT_DEFINITION_BYTES",
    "MAX_TASK_BYTES",
    "RESULT_PAGE_CHARS",
    "AgentDefinition",
    "DelegationDisclosure",
    "DelegationEventRecord",
    "DelegationManifest",
    "DelegationObservation",
    "DelegationStatus",
    "DelegationSubscription",
    "InputError",
    "LeadAgent",
    "ResolvedAgentDefinition",
    "ResultPage",
    "RouteSpec",
    "SkillRegistry",
    "SubagentRecord",
    "SubagentResult",
    "ToolRegistry",
    "agent_definition",
    "agent_definition_read",
    "agent_definition_resolve",
    "agent_definition_write",
    "delegation_history",
]
