"""Delegation: subagents a lead agent hands work to.

Built so far: agent definitions (:mod:`deputy_shiny.delegation.definitions`), a
subagent described as data and read from or written to strict YAML.

Example:
    >>> from deputy_shiny.delegation import AgentDefinition
    >>> AgentDefinition(name="reviewer", description="Reviews code.").model
    'inherit'
"""

from .definitions import (
    AGENT_DEFINITION_VERSION,
    MAX_AGENT_DEFINITION_BYTES,
    AgentDefinition,
    ResolvedAgentDefinition,
    SkillRegistry,
    ToolRegistry,
    agent_definition_read,
    agent_definition_resolve,
    agent_definition_write,
)

__all__ = [
    "AGENT_DEFINITION_VERSION",
    "MAX_AGENT_DEFINITION_BYTES",
    "AgentDefinition",
    "ResolvedAgentDefinition",
    "SkillRegistry",
    "ToolRegistry",
    "agent_definition_read",
    "agent_definition_resolve",
    "agent_definition_write",
]
