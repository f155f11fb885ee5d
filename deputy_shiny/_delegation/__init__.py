"""The delegation state every Agent carries: its records, retained agents and graph.

Any :class:`~deputy_shiny.Agent` can delegate (a LeadAgent through its ``delegate``
tool, any agent to the agents it retains), so each agent owns a
:class:`~deputy_shiny._delegation.host.DelegationHost` that records its delegations and
answers ``list_subagents()``, ``inspect_subagents()`` and the rest. It lives here, not in
:mod:`deputy_shiny.delegation`, because ``agent.py`` imports it while
``deputy_shiny.delegation`` re-exports LeadAgent, which subclasses Agent: importing one
from the other would make an import cycle. The public names are re-exported from
:mod:`deputy_shiny.delegation`.

Example:
    >>> from deputy_shiny._delegation.records import SubagentRecord
    >>> SubagentRecord.__name__
    'SubagentRecord'
"""
