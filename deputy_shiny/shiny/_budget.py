"""Daily budgets: :class:`UserBudget`, checked and charged before every model request.

``KitPersistence(..., budget=UserBudget(...))`` bounds what one user spends in a UTC
day across all of their sessions and every process sharing the store: the totals are
the store's counters (``add_usage`` / ``usage_totals``) under a hash of the user's
identity (the identity itself is never stored). Every model request made for a
session is charged before it is sent: the lead agent's, every subagent's and retained
agent's, compaction summaries, structured-output corrections, retries and fallbacks
(:mod:`._session_budget`, the engine's :class:`~deputy_shiny.usage.RequestGate`). A
request past a limit is not sent: the run stops with the budget's note. Its tokens and
cost are charged as it ends.

Visitors without an identity of their own (a browser's token, or a session that is
not saved: no local storage, a duplicate cookie, an anonymous visitor on Posit Connect)
also draw on one allowance for all of them together, :attr:`UserBudget.anonymous`, so a
new browser never brings a fresh budget: what the deployment spends on anonymous
visitors is bounded. A session whose budget cannot be checked (the store is down) sends
nothing.

Requests are charged one at a time in the store, atomically, so two runs that start at
once (two tabs, two processes) never pass a request limit together. Tokens and cost are
known only once a request ends: two requests in flight at once may together go past a
token or cost limit by what one request costs. Set those limits with that margin in
mind.

Examples:
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

from ._strings import DEFAULT_STRINGS, KitStrings

__all__ = [
    "DailyAllowance",
    "UserBudget",
    "budget_day",
    "budget_line",
    "budget_refusal",
    "budget_user",
]


class DailyAllowance(BaseModel):
    """What may be spent in a UTC day; None leaves that measure unbounded.

    Attributes:
        max_cost_per_day: US dollars (a request of unknown cost counts as 0 here).
        max_requests_per_day: Model requests, every attempt counted (retries, failures).
        max_tokens_per_day: Input plus output tokens.

    Examples:
        >>> DailyAllowance(max_requests_per_day=500).max_requests_per_day
        500
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_cost_per_day: float | None = Field(default=None, ge=0)
    max_requests_per_day: int | None = Field(default=None, ge=0)
    max_tokens_per_day: int | None = Field(default=None, ge=0)


class UserBudget(DailyAllowance):
    """What one user may spend in a UTC day, across all sessions and processes, and
    what all anonymous visitors may spend together.

    Attributes:
        max_cost_per_day: US dollars per user (a request of unknown cost counts as 0).
        max_requests_per_day: Model requests per user, every attempt counted.
        max_tokens_per_day: Input plus output tokens per user.
        anonymous: What every visitor without an identity of their own spends
            together in a day, across processes: sessions known only by a browser
            token (each also has a user's allowance) and sessions that are not saved.
            None (the default): together, as much as one user;
            ``DailyAllowance()`` leaves them unbounded together.

    Examples:
        >>> budget = UserBudget(
        ...     max_requests_per_day=100,
        ...     anonymous=DailyAllowance(max_requests_per_day=2000, max_cost_per_day=5.0),
        ... )
        >>> budget.anonymous_allowance().max_requests_per_day
        2000
        >>> UserBudget(max_requests_per_day=100).anonymous_allowance().max_requests_per_day
        100
    """

    anonymous: DailyAllowance | None = None

    def anonymous_allowance(self) -> DailyAllowance:
        """What all anonymous visitors spend together (see :attr:`anonymous`)."""
        if self.anonymous is not None:
            return self.anonymous
        return DailyAllowance(
            max_cost_per_day=self.max_cost_per_day,
            max_requests_per_day=self.max_requests_per_day,
            max_tokens_per_day=self.max_tokens_per_day,
        )


def budget_day(now: datetime.datetime | None = None) -> str:
    """Today's counter day, as a UTC date.

    Examples:
        >>> budget_day(datetime.datetime(2026, 11, 19, 23, 59, tzinfo=datetime.UTC))
        '2026-11-19'
    """
    moment = datetime.datetime.now(datetime.UTC) if now is None else now
    return moment.astimezone(datetime.UTC).date().isoformat()


def budget_user(kind: str, key: str) -> str:
    """The counters' name for a user (a hash: no identity reaches the store).

    Examples:
        >>> budget_user("user", "alice") == budget_user("token", "alice")
        False
    """
    return "user-" + hashlib.sha256(f"budget\0{kind}\0{key}".encode()).hexdigest()[:40]


def _limits(budget: DailyAllowance, totals: dict[str, float]) -> list[tuple[str, float, float]]:
    """(what, spent, limit) for each measure the budget bounds."""
    found = []
    if budget.max_requests_per_day is not None:
        found.append(("requests", totals.get("requests", 0.0), float(budget.max_requests_per_day)))
    if budget.max_tokens_per_day is not None:
        found.append(("tokens", totals.get("tokens", 0.0), float(budget.max_tokens_per_day)))
    if budget.max_cost_per_day is not None:
        found.append(("cost", totals.get("cost", 0.0), budget.max_cost_per_day))
    return found


def _words(what: str, spent: float, limit: float, strings: KitStrings) -> str:
    if what == "cost":
        return strings.format("budget_cost", spent=f"{spent:.2f}", limit=f"{limit:.2f}")
    return strings.format(f"budget_{what}", spent=f"{spent:,.0f}", limit=f"{limit:,.0f}")


def budget_refusal(
    budget: DailyAllowance,
    totals: dict[str, float],
    *,
    anonymous: bool = False,
    strings: KitStrings = DEFAULT_STRINGS,
) -> str | None:
    """The note that refuses a request when today's ``totals`` reached a limit, else
    None (``anonymous``: the limit all anonymous visitors share).

    Examples:
        >>> budget_refusal(DailyAllowance(max_requests_per_day=9), {"requests": 9.0},
        ...                anonymous=True)  # doctest: +NORMALIZE_WHITESPACE
        'The daily budget of visitors who are not signed in is spent (9 of 9 requests
        today); it renews at midnight UTC.'
    """
    for what, spent, limit in _limits(budget, totals):
        if spent >= limit:
            words = _words(what, spent, limit, strings)
            name = "budget_spent_anonymous" if anonymous else "budget_spent"
            return strings.format(name, amount=words)
    return None


def budget_line(
    budget: DailyAllowance, totals: dict[str, float], strings: KitStrings = DEFAULT_STRINGS
) -> str:
    """Today's spend against the budget, for the usage line."""
    limits = _limits(budget, totals)
    parts = [_words(what, spent, limit, strings) for what, spent, limit in limits]
    return strings.format("budget_today", amounts=" · ".join(parts)) if parts else ""
