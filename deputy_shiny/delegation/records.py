"""What an agent records of its delegations (defined in ``deputy_shiny.agent._delegation``,
where every Agent's delegation state lives; this is their public path).

Examples:
    >>> from deputy_shiny.delegation.records import SubagentRecord
    >>> SubagentRecord.__name__
    'SubagentRecord'
"""

from ..agent._delegation.records import (
    DelegationEventRecord,
    DelegationManifest,
    DelegationStatus,
    InputError,
    SubagentRecord,
    SubagentResult,
)

__all__ = [
    "DelegationEventRecord",
    "DelegationManifest",
    "DelegationStatus",
    "InputError",
    "SubagentRecord",
    "SubagentResult",
]
