"""The delegation state every Agent carries: its records, retained agents and graph.

Any :class:`~deputy_shiny.Agent` can delegate (a LeadAgent through its ``delegate``
tool, any agent to the agents it retains), so each agent owns a
:class:`~deputy_shiny.agent._delegation.host.DelegationHost` that records its delegations and
answers ``list_subagents()``, ``inspect_subagents()`` and the rest. It is part of the Agent
(every agent has one), while :mod:`deputy_shiny.delegation` builds on the Agent
(LeadAgent subclasses it) and re-exports the public names.

Examples:
    >>> from deputy_shiny.agent._delegation.records import SubagentRecord
    >>> SubagentRecord.__name__
    'SubagentRecord'
"""
