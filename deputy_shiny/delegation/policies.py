"""Who may see an agent's delegations, and how much of their activity is kept
(defined in ``deputy_shiny.agent._delegation``; this is their public path).

Examples:
    >>> from deputy_shiny.delegation.policies import DelegationDisclosure
    >>> DelegationDisclosure().allows("anyone", {}, None)
    False
"""

from ..agent._delegation.policies import DelegationDisclosure, DelegationObservation

__all__ = ["DelegationDisclosure", "DelegationObservation"]
