"""Who may see a lead's delegations, and how much of their activity is kept.

:class:`DelegationDisclosure` decides, for every read made on someone's behalf
(``inspect_subagents``, ``export_subagents``, ``read_subagent_result``,
``observe_subagents``, ``delegation_history``), whether that requester may see a
delegation. The default denies everyone; an ``authorize`` that raises denies too.
:class:`DelegationObservation` bounds the events kept for ``observe_subagents``.

Examples:
    >>> policy = DelegationDisclosure(authorize=lambda requester, scope, record:
    ...                               requester == scope.get("owner"))
    >>> policy.allows("ana", {"owner": "ana"}, None), DelegationDisclosure().allows("ana", {}, None)
    (True, False)
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import ConfigDict, Field

from ..._util.config import FrozenConfig

__all__ = ["DelegationDisclosure", "DelegationObservation"]

logger = logging.getLogger(__name__)

Authorize = Callable[[Any, Mapping[str, Any], Any], bool]
"""``authorize(requester, scope, record) -> bool``; ``record`` is the SubagentRecord asked
about (None when the question is whether the requester may see anything at all)."""


class DelegationDisclosure(FrozenConfig):
    """Decides who may see a lead's delegations (default: nobody).

    Attributes:
        authorize: ``authorize(requester, scope, record) -> bool`` where ``scope`` is the
            lead's ``delegation_scope`` (e.g. ``{"owner": user_id}``). Only ``True``
            allows; anything else, or an exception, denies.
        redact: Optional ``redact(view: dict) -> dict`` applied to every view an allowed
            requester gets (drop a field, mask a value).

    Examples:
        >>> DelegationDisclosure().allows("anyone", {}, None)
        False
    """

    model_config = ConfigDict(
        frozen=True, extra="forbid", arbitrary_types_allowed=True, defer_build=True
    )

    authorize: Authorize | None = None
    redact: Callable[[dict[str, Any]], dict[str, Any]] | None = None

    def allows(self, requester: Any, scope: Mapping[str, Any], record: Any) -> bool:
        """Whether ``requester`` may see ``record`` (errors deny)."""
        if self.authorize is None:
            return False
        try:
            return self.authorize(requester, dict(scope), record) is True
        except Exception:
            logger.warning("delegation disclosure check failed; denying", exc_info=True)
            return False

    def shown(self, view: dict[str, Any]) -> dict[str, Any]:
        """``view`` after ``redact`` (a failing redact withholds the whole view)."""
        if self.redact is None:
            return view
        try:
            redacted = self.redact(dict(view))
        except Exception:
            logger.warning("delegation redact failed; withholding the view", exc_info=True)
            return {"delegation_id": view.get("delegation_id"), "withheld": True}
        return redacted if isinstance(redacted, dict) else {"withheld": True}


class DelegationObservation(FrozenConfig):
    """How much subagent activity a lead keeps for ``observe_subagents``.

    Attributes:
        max_events: Events kept (oldest dropped first); a subscription that falls
            further behind skips ahead and is told how many it missed.
        max_summary_chars: Longest summary kept per event (text is cut with a note).

    Examples:
        >>> DelegationObservation(max_events=50).max_events
        50
    """

    max_events: int = Field(default=1000, ge=1, le=1_000_000)
    max_summary_chars: int = Field(default=500, ge=20, le=100_000)
