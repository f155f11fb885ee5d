"""Per-user daily budgets: :class:`UserBudget`, checked before a run and charged after.

``KitPersistence(..., budget=UserBudget(...))`` bounds what one user spends in a UTC
day across all of their sessions and every process sharing the store: the totals are
the store's counters (``add_usage`` / ``usage_totals``) under a hash of the user's
identity (the identity itself is never stored). A run whose user has reached a limit
is refused before its first request, with a note in the chat; each run is charged what
it used when it ends (failed and interrupted runs too: its usage counts every request
attempt, retries included).

Two runs that start at once (two tabs, two processes) both pass the check and may
together go past a limit by what one run costs: the check and the charge are not one
transaction, since a run's cost is known only as it ends. Set the limits with that
margin in mind.

Example:
    >>> budget = UserBudget(max_requests_per_day=50, max_cost_per_day=1.0)
    >>> budget_refusal(budget, {"requests": 50.0})
    'Your daily budget is spent (50 of 50 requests today); it renews at midnight UTC.'
    >>> budget_line(budget, {"requests": 3.0, "cost": 0.02})
    'Today: 3 of 50 requests · $0.02 of $1.00'
"""

from __future__ import annotations

import datetime
import hashlib

from pydantic import BaseModel, ConfigDict, Field

from ..events import AgentUsage

__all__ = [
    "UserBudget",
    "budget_day",
    "budget_line",
    "budget_refusal",
    "budget_user",
    "usage_amounts",
    "usage_since",
]


class UserBudget(BaseModel):
    """What one user may spend in a UTC day, across all sessions and processes.

    Attributes:
        max_cost_per_day: US dollars (a request of unknown cost counts as 0 here).
        max_requests_per_day: Model requests, every attempt counted (retries, failures).
        max_tokens_per_day: Input plus output tokens.

    None leaves that measure unbounded.

    Example:
        >>> UserBudget(max_requests_per_day=100).max_requests_per_day
        100
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_cost_per_day: float | None = Field(default=None, ge=0)
    max_requests_per_day: int | None = Field(default=None, ge=0)
    max_tokens_per_day: int | None = Field(default=None, ge=0)


def budget_day(now: datetime.datetime | None = None) -> str:
    """Today's counter day, as a UTC date.

    Example:
        >>> budget_day(datetime.datetime(2026, 11, 19, 23, 59, tzinfo=datetime.UTC))
        '2026-11-19'
    """
    moment = datetime.datetime.now(datetime.UTC) if now is None else now
    return moment.astimezone(datetime.UTC).date().isoformat()


def budget_user(kind: str, key: str) -> str:
    """The counters' name for a user (a hash: no identity reaches the store).

    Example:
        >>> budget_user("user", "alice") == budget_user("token", "alice")
        False
    """
    return "user-" + hashlib.sha256(f"budget\0{kind}\0{key}".encode()).hexdigest()[:40]


def usage_since(before: AgentUsage, after: AgentUsage) -> AgentUsage:
    """What was used between two readings of a conversation's usage."""
    return AgentUsage(
        requests=max(0, after.requests - before.requests),
        tool_calls=max(0, after.tool_calls - before.tool_calls),
        input_tokens=max(0, after.input_tokens - before.input_tokens),
        output_tokens=max(0, after.output_tokens - before.output_tokens),
        cost=max(0.0, (after.cost or 0.0) - (before.cost or 0.0)),
    )


def usage_amounts(usage: AgentUsage) -> dict[str, float]:
    """A run's usage as the counters' amounts (empty when it used nothing).

    Example:
        >>> usage_amounts(AgentUsage(requests=2, input_tokens=10, output_tokens=5, cost=0.1))
        {'requests': 2.0, 'tokens': 15.0, 'cost': 0.1}
    """
    amounts = {
        "requests": float(usage.requests),
        "tokens": float(usage.total_tokens),
        "cost": float(usage.cost or 0.0),
    }
    return amounts if any(amounts.values()) else {}


def _limits(budget: UserBudget, totals: dict[str, float]) -> list[tuple[str, float, float]]:
    """(what, spent, limit) for each measure the budget bounds."""
    found = []
    if budget.max_requests_per_day is not None:
        found.append(("requests", totals.get("requests", 0.0), float(budget.max_requests_per_day)))
    if budget.max_tokens_per_day is not None:
        found.append(("tokens", totals.get("tokens", 0.0), float(budget.max_tokens_per_day)))
    if budget.max_cost_per_day is not None:
        found.append(("cost", totals.get("cost", 0.0), budget.max_cost_per_day))
    return found


def _words(what: str, spent: float, limit: float) -> str:
    if what == "cost":
        return f"${spent:.2f} of ${limit:.2f}"
    return f"{spent:,.0f} of {limit:,.0f} {what}"


def budget_refusal(budget: UserBudget, totals: dict[str, float]) -> str | None:
    """The note that refuses a run when today's ``totals`` reached a limit, else None."""
    for what, spent, limit in _limits(budget, totals):
        if spent >= limit:
            return (
                f"Your daily budget is spent ({_words(what, spent, limit)} today); "
                "it renews at midnight UTC."
            )
    return None


def budget_line(budget: UserBudget, totals: dict[str, float]) -> str:
    """Today's spend against the budget, for the usage line."""
    parts = [_words(what, spent, limit) for what, spent, limit in _limits(budget, totals)]
    return "Today: " + " · ".join(parts) if parts else ""
