"""Budgets that runs share: a lead's run and every delegated run under it.

Each run's usage limits hold for the run itself (the engine counts them). A delegated
run also draws on the budget of every run above it: its requests, tool calls, tokens
and cost are charged to its own :class:`SharedBudget` and to each ancestor's, and it
stops as soon as any of them is spent. So a lead with ``max_requests=10`` can never
reach more than 10 requests in total, however many subagents it starts, and the
limits of a delegation graph add up across it.

The engine makes one budget per run (parented to the budget its deps name) and puts
it in :data:`current_budget` while the run's tools execute, so a delegation tool finds
the budget it must draw from without being handed it.

Example:
    >>> from deputy_shiny.usage import UsageLimits
    >>> lead = SharedBudget(UsageLimits(max_requests=2))
    >>> sub = SharedBudget(UsageLimits(), parent=lead)
    >>> sub.charge_request(); sub.charge_request()
    >>> sub.ancestor_stop_before_request()[0]
    'request_limit'
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Iterator

from ..events import AgentUsage
from ..usage import UsageLimits, limit_reached

__all__ = ["SharedBudget", "current_budget"]


class SharedBudget:
    """The usage charged to one run, by itself and by every run delegated under it."""

    def __init__(
        self,
        limits: UsageLimits,
        parent: SharedBudget | None = None,
        label: str = "lead",
        *,
        also: SharedBudget | None = None,
    ) -> None:
        self.limits = limits
        self.parent = parent
        # A second budget this one also draws on (a retained agent's task draws on its
        # handle's total and on the run that sent it): charged and checked like parent.
        self.also = also
        self.label = label  # how stop messages name whose budget ran out
        self._lock = threading.Lock()
        self._requests = 0
        self._tool_calls = 0
        self._input_tokens = 0
        self._output_tokens = 0
        self._cost = 0.0
        self._cost_missing = 0

    def ancestors(self) -> Iterator[SharedBudget]:
        """The budgets above this one, nearest first, each once (``parent``'s line,
        then ``also``'s)."""
        seen: set[int] = {id(self)}
        pending = [b for b in (self.parent, self.also) if b is not None]
        while pending:
            budget = pending.pop(0)
            if id(budget) in seen:
                continue
            seen.add(id(budget))
            yield budget
            pending[:0] = [b for b in (budget.parent, budget.also) if b is not None]

    def _chain(self) -> Iterator[SharedBudget]:
        yield self
        yield from self.ancestors()

    def usage(self) -> AgentUsage:
        """Everything charged here so far (this run and every run under it)."""
        with self._lock:
            return AgentUsage(
                requests=self._requests,
                tool_calls=self._tool_calls,
                input_tokens=self._input_tokens,
                output_tokens=self._output_tokens,
                cost=None if self._cost_missing else self._cost,
                cost_missing=self._cost_missing,
            )

    # ------------------------------------------------------------------ charges

    def charge_request(self) -> None:
        """A request starts: one more request here and above."""
        for budget in self._chain():
            with budget._lock:
                budget._requests += 1

    def charge_tool_call(self) -> None:
        """A tool call starts: one more tool call here and above."""
        for budget in self._chain():
            with budget._lock:
                budget._tool_calls += 1

    def charge_tokens(self, input_tokens: int, output_tokens: int, cost: float | None) -> None:
        """A response arrived: its tokens and cost (None: unknown) here and above."""
        for budget in self._chain():
            with budget._lock:
                budget._input_tokens += input_tokens
                budget._output_tokens += output_tokens
                if cost is None:
                    budget._cost_missing += 1
                else:
                    budget._cost += cost

    def charge_usage(self, usage: AgentUsage) -> None:
        """Work done before this run that counts toward its limits (a resumed approval's
        run, before it paused): charged here and above."""
        for budget in self._chain():
            with budget._lock:
                budget._requests += usage.requests
                budget._tool_calls += usage.tool_calls
                budget._input_tokens += usage.input_tokens
                budget._output_tokens += usage.output_tokens
                budget._cost_missing += usage.cost_missing
                budget._cost += usage.cost or 0.0

    # ------------------------------------------------------------------ checks

    def ancestor_stop_before_request(self) -> tuple[str, str] | None:
        """The stop reason and message when a budget above has no request left."""
        for budget in self.ancestors():
            limit = budget.limits.max_requests
            if limit is not None and budget.usage().requests >= limit:
                return "request_limit", (
                    f"The {budget.label}'s budget of {limit} model requests is spent "
                    "(delegated runs count toward it)."
                )
        return None

    def ancestor_stop_before_tool_call(self) -> tuple[str, str] | None:
        """The stop reason and message when a budget above has no tool call left."""
        for budget in self.ancestors():
            limit = budget.limits.max_tool_calls
            if limit is not None and budget.usage().tool_calls >= limit:
                return "tool_call_limit", (
                    f"The {budget.label}'s budget of {limit} tool calls is spent "
                    "(delegated runs count toward it)."
                )
        return None

    def ancestor_stop_after_request(self) -> tuple[str, str] | None:
        """The token or cost limit a budget above has passed, if any."""
        for budget in self.ancestors():
            reached = limit_reached(budget.limits, budget.usage())
            if reached is not None:
                reason, message = reached
                return reason, f"The {budget.label}'s budget: {message} (delegations count)."
        return None

    def remaining(self) -> UsageLimits:
        """The tightest limits left for a new delegated run, over this budget and above.

        A delegated run's own limits are clamped to this, so it cannot even start past
        what its ancestors have left.
        """
        merged: dict[str, object] = {}
        for budget in self._chain():
            used = budget.usage()
            left = {
                "max_requests": _left(budget.limits.max_requests, used.requests),
                "max_tool_calls": _left(budget.limits.max_tool_calls, used.tool_calls),
                "max_input_tokens": _left(budget.limits.max_input_tokens, used.input_tokens),
                "max_output_tokens": _left(budget.limits.max_output_tokens, used.output_tokens),
                "max_total_tokens": _left(budget.limits.max_total_tokens, used.total_tokens),
                "max_cost_usd": _left_cost(budget.limits.max_cost_usd, used.cost),
            }
            for name, value in left.items():
                current = merged.get(name)
                if value is not None and (current is None or value < current):  # type: ignore[operator]
                    merged[name] = value
        return UsageLimits(**merged)  # type: ignore[arg-type]


def _left(limit: int | None, used: int) -> int | None:
    return None if limit is None else max(0, limit - used)


def _left_cost(limit: float | None, used: float | None) -> float | None:
    if limit is None:
        return None
    return max(0.0, limit - (used or 0.0))


current_budget: contextvars.ContextVar[SharedBudget | None] = contextvars.ContextVar(
    "deputy_shiny_current_budget", default=None
)
"""The budget of the run whose tool is executing (None outside a run's tools)."""
