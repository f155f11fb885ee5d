"""UsageLimits, at its original import path (it lives in :mod:`deputy_shiny.usage`).

Example:
    >>> from deputy_shiny.limits import UsageLimits
    >>> limits = UsageLimits(max_requests=10, max_cost_usd=0.50)
    >>> limits.clamp_to(UsageLimits(max_requests=5)).max_requests
    5
"""

from __future__ import annotations

from .usage import UsageLimits

__all__ = ["UsageLimits"]
