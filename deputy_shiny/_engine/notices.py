"""What a run tells the app besides its reply: ``warning`` events and the ``Notification``
hook (private; the engine's loop and tool calls use it).

As in deputy, a notice has a ``message`` for people, a ``level`` and a stable ``code``
for code; :mod:`deputy_shiny.hooks` lists the codes. A ``warning`` event is a notice the
run also reports as an event (something it survived, or a limit it nears); permission
denials and the limit that stopped a run already have their events (``permission``,
``stop``), so they only fire the hook.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ..events import LIMIT_STOP_REASONS, AgentEvent, WarningEvent
from ..usage import AgentUsage, UsageLimits, format_cost
from .state import RunState

logger = logging.getLogger(__name__)

COST_WARNING_SHARE = 0.9
"""The share of its cost limit a run may spend before it warns (once), as deputy does."""

_LIMIT_FIELDS = {
    "request_limit": "max_requests",
    "tool_call_limit": "max_tool_calls",
    "input_token_limit": "max_input_tokens",
    "output_token_limit": "max_output_tokens",
    "total_token_limit": "max_total_tokens",
    "cost_limit": "max_cost_usd",
    "cost_unavailable": "max_cost_usd",
}


async def notify(
    st: RunState, code: str, message: str, *, level: str = "warning", **details: Any
) -> list[AgentEvent]:
    """Run the ``Notification`` hooks (their failures are logged, never fatal); returns
    their ``hook`` events. Nothing is built when no hook listens."""
    hooks = st.deps.hooks
    if not hooks.matchers("Notification"):
        return []
    call_id = details.pop("call_id", None)
    context = st.gate.hook_context(
        "Notification",
        call_id=call_id,
        details={"message": message, "level": level, "code": code, **details},
    )
    run = await hooks.run("Notification", context=context)
    if run.failure is not None:
        logger.warning("Notification hook failed: %s", run.failure)
    return st.gate.hook_events("Notification", run)


async def warn(
    st: RunState, emit: Callable[..., Any], code: str, message: str, details: str = "", **extra: Any
) -> list[AgentEvent]:
    """A ``warning`` event, then the ``Notification`` hooks with the same code."""
    events: list[AgentEvent] = [emit(WarningEvent, message=message, code=code, details=details)]
    events.extend(await notify(st, code, message, **extra))
    return events


async def cost_nearing(st: RunState, emit: Callable[..., Any]) -> list[AgentEvent]:
    """Warn once per run when its spending (delegated runs included, as the limit
    counts it) first reaches :data:`COST_WARNING_SHARE` of its cost limit."""
    limit = st.options.limits.max_cost_usd
    if st.cost_warned or not limit:
        return []
    usage = st.budget.usage()
    if usage.cost is None or usage.cost < limit * COST_WARNING_SHARE:
        return []
    st.cost_warned = True
    message = (
        f"The run has spent {format_cost(usage)} of its cost limit of "
        f"{format_cost(AgentUsage(cost=limit))}; "
        "it stops when it reaches it."
    )
    return await warn(
        st,
        emit,
        "cost_limit_warning",
        message,
        details=f"{usage.cost} of {limit}",
        usage=usage,
        limit=limit,
    )


async def limit_notice(st: RunState) -> list[AgentEvent]:
    """The ``Notification`` of a run a usage limit stopped (code: the stop reason), or
    a provider's failure ended (``provider_error``, with the run's usage, as deputy)."""
    reason = st.stop_reason
    if reason == "provider_error":
        message = f"The model provider failed, so the run ended: {st.stop_message}"
        return await notify(st, reason, message, usage=st.usage())
    if reason not in LIMIT_STOP_REASONS:
        return []
    return await notify(
        st, reason, st.stop_message, usage=st.usage(), limit=limit_of(st.options.limits, reason)
    )


def limit_of(limits: UsageLimits, reason: str) -> int | float | None:
    """The run's own limit behind a limit stop reason (None: not set on this run).

    Examples:
        >>> limit_of(UsageLimits(max_requests=3), "request_limit")
        3
    """
    field = _LIMIT_FIELDS.get(reason)
    return getattr(limits, field) if field is not None else None


__all__ = ["COST_WARNING_SHARE", "cost_nearing", "limit_notice", "limit_of", "notify", "warn"]
