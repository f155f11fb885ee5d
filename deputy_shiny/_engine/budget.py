"""What runs spend: the one usage accumulator, the one charge rule, and the budgets
runs share (a lead's run and every delegated run under it).

* :class:`UsageTally` is the one accumulator: requests, tool calls, tokens and cost,
  added up in one place (a run's own usage and every budget hold one);
* :func:`response_usage` is the one charge rule: what a model response costs, the
  provider's counts or, when it reports none, an estimate;
* :class:`Meter` is what one run (or one ``agent.compact()``) spends: its own tally,
  the budget it draws on, and its limits' checks;
* :class:`SharedBudget` is the usage charged to a run by itself and by every run
  delegated under it;
* the host's :class:`~deputy_shiny.usage.RequestGate` (the kit's per-user daily
  budget), in charge where the run was started (:func:`~deputy_shiny.usage.charged_to`),
  is asked before every attempt a :class:`Meter` counts (:meth:`Meter.admit`) and told
  what each cost: a delegated run started from a run's tool inherits it, so its
  requests are the same user's.

Each run's usage limits hold for the run itself (the engine counts them). A delegated
run also draws on the budget of every run above it: its requests, tool calls, tokens
and cost are charged to its own :class:`SharedBudget` and to each ancestor's, and it
stops as soon as any of them is spent. So a lead with ``max_requests=10`` can never
reach more than 10 requests in total, however many subagents it starts, and the
limits of a delegation graph add up across it.

The engine makes one budget per run (parented to the budget its deps name) and puts
it in :data:`current_budget` while the run's tools execute, so a delegation tool finds
the budget it must draw from without being handed it.

Examples:
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
from collections.abc import Callable, Iterator
from typing import Any

from ..events import AgentUsage
from ..models import ChatModel
from ..models._provider import Response, estimate_prompt_tokens, known_cost
from ..usage import RequestGate, TurnUsage, UsageLimits, limit_reached, request_gate

__all__ = [
    "Meter",
    "SharedBudget",
    "UsageTally",
    "_RequestRefused",
    "current_budget",
    "response_usage",
]


class _RequestRefused(Exception):
    """The host's gate refused a request: it is not sent, and the run stops with
    ``budget_limit`` and this message."""


class UsageTally:
    """Usage counters, added up in this one place (not thread-safe: a budget locks)."""

    __slots__ = (
        "cached_tokens",
        "cost",
        "cost_missing",
        "input_tokens",
        "output_tokens",
        "requests",
        "tool_calls",
    )

    def __init__(self) -> None:
        self.requests = 0
        self.tool_calls = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.cached_tokens = 0
        self.cost = 0.0
        self.cost_missing = 0

    def add_tokens(
        self, input_tokens: int, output_tokens: int, cost: float | None, cached_tokens: int = 0
    ) -> None:
        """A response's tokens and cost (None: unknown, counted as missing);
        ``cached_tokens`` are the part of the input the provider read from its cache."""
        self.input_tokens += input_tokens
        self.output_tokens += output_tokens
        self.cached_tokens += cached_tokens
        if cost is None:
            self.cost_missing += 1
        else:
            self.cost += cost

    def add(self, usage: AgentUsage) -> None:
        """Usage counted elsewhere (a paused run's, before it resumed)."""
        self.requests += usage.requests
        self.tool_calls += usage.tool_calls
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        self.cached_tokens += usage.cached_tokens
        self.cost_missing += usage.cost_missing
        self.cost += usage.cost or 0.0

    def usage(self) -> AgentUsage:
        """The counts as an :class:`~deputy_shiny.usage.AgentUsage` (cost None when any
        is unknown)."""
        return AgentUsage(
            requests=self.requests,
            tool_calls=self.tool_calls,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            cached_tokens=self.cached_tokens,
            cost=None if self.cost_missing else self.cost,
            cost_missing=self.cost_missing,
        )


def response_usage(
    model: ChatModel, response: Response, messages: Callable[[], list[dict[str, Any]]]
) -> TurnUsage:
    """What one attempt at a model request costs: a whole response, or what arrived of
    a failed or interrupted one (every attempt may be billed, so every one is charged).

    The tokens and cost the provider reported count. A count it did not report is
    estimated (about four characters a token: ``messages()``, the messages sent, for
    the input; the reply's text so far for the output), so that token limits still
    hold; an unreported cost comes from litellm's price table (None when it has no
    price for the model, which counts in ``cost_missing``). An attempt that received
    nothing (refused, or answered with an error status) is charged no tokens: its cost
    is the price of none, $0 for a priced model and unknown for one without a price,
    so a model's cost reads the same after a failure as after a success.
    """
    if not response.chunks:
        cost = response.cost if response.cost is not None else known_cost(model, 0, 0)
        return TurnUsage(input_tokens=0, output_tokens=0, cost=cost)
    cached_tokens = response.cached_tokens or 0
    input_tokens = response.input_tokens
    if input_tokens is None:
        input_tokens = estimate_prompt_tokens(messages())
    output_tokens = response.output_tokens
    if output_tokens is None:
        output_tokens = max(1, len("".join(response.text)) // 4)
    cost = response.cost
    if cost is None:
        cost = known_cost(model, input_tokens, output_tokens)
    return TurnUsage(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cached_tokens=min(cached_tokens, input_tokens),
        cost=cost,
    )


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
        self._tally = UsageTally()

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
            return self._tally.usage()

    # ------------------------------------------------------------------ charges

    def charge_request(self) -> None:
        """A request starts: one more request here and above."""
        for budget in self._chain():
            with budget._lock:
                budget._tally.requests += 1

    def charge_tool_call(self) -> None:
        """A tool call starts: one more tool call here and above."""
        for budget in self._chain():
            with budget._lock:
                budget._tally.tool_calls += 1

    def charge_tokens(
        self, input_tokens: int, output_tokens: int, cost: float | None, cached_tokens: int = 0
    ) -> None:
        """A response arrived: its tokens and cost (None: unknown) here and above."""
        for budget in self._chain():
            with budget._lock:
                budget._tally.add_tokens(input_tokens, output_tokens, cost, cached_tokens)

    def charge_usage(self, usage: AgentUsage) -> None:
        """Work done before this run that counts toward its limits (a resumed approval's
        run, before it paused): charged here and above."""
        for budget in self._chain():
            with budget._lock:
                budget._tally.add(usage)

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


class Meter:
    """What one run spends (or one compaction outside a run): its own usage, charged
    to the budget it draws on as well, and the checks of its limits.

    Every attempt sent to a provider is a request (retries and fallbacks included): it
    counts toward the run's usage and the budgets as it starts (:meth:`count_request`,
    so that concurrent delegated runs cannot all pass one last-request check), and its
    tokens and cost when it ends, however it ends (:meth:`count_response`).
    """

    __slots__ = ("budget", "gate", "limits", "own")

    def __init__(self, limits: UsageLimits, budget: SharedBudget) -> None:
        self.limits = limits
        self.budget = budget
        self.own = UsageTally()
        # The host's gate where the run starts (a delegated run inherits its lead's).
        self.gate: RequestGate | None = request_gate.get()

    def usage(self) -> AgentUsage:
        """The run's own usage (without the runs it delegated to)."""
        return self.own.usage()

    async def admit(self) -> None:
        """Before an attempt is sent, after the run's own limits: the host's gate
        charges it, or refuses it (:class:`_RequestRefused`: nothing is sent or counted)."""
        refused = None if self.gate is None else await self.gate.reserve()
        if refused is not None:
            raise _RequestRefused(refused)

    def count_request(self) -> None:
        """An attempt at a model request starts: the run's and every budget's."""
        self.own.requests += 1
        self.budget.charge_request()

    def count_response(self, usage: TurnUsage) -> None:
        """An attempt's tokens and cost (see :func:`response_usage`): the run's and every
        budget's."""
        cached = usage.cached_tokens
        self.own.add_tokens(usage.input_tokens, usage.output_tokens, usage.cost, cached)
        self.budget.charge_tokens(usage.input_tokens, usage.output_tokens, usage.cost, cached)
        if self.gate is not None:
            self.gate.settle(usage)

    def count_tool_call(self) -> None:
        """A tool call starts: the run's and every budget's."""
        self.own.tool_calls += 1
        self.budget.charge_tool_call()

    def count_prior(self, usage: AgentUsage) -> None:
        """A resumed run's usage before it paused: the run's and every budget's."""
        self.own.add(usage)
        self.budget.charge_usage(usage)

    def charge_summary(
        self, model: ChatModel, response: Response, messages: list[dict[str, Any]]
    ) -> None:
        """A compaction's summary request (automatic or manual alike, failed or not): one
        request, and what its response costs."""
        self.count_request()
        self.count_response(response_usage(model, response, lambda: messages))

    # ------------------------------------------------------------------ checks

    def stop_before_request(self) -> tuple[str, str] | None:
        """The stop reason and message when no request is left (the budget counts the
        runs delegated under this one too)."""
        limit = self.limits.max_requests
        if limit is not None and self.budget.usage().requests >= limit:
            return "request_limit", f"The run reached its limit of {limit} model requests."
        return self.budget.ancestor_stop_before_request()

    def may_request(self) -> bool:
        """Whether one more request is allowed (a compaction's summary asks)."""
        return self.stop_before_request() is None

    def stop_before_tool_call(self) -> tuple[str, str] | None:
        """The stop reason and message when no tool call is left."""
        limit = self.limits.max_tool_calls
        if limit is not None and self.budget.usage().tool_calls >= limit:
            return "tool_call_limit", f"The run reached its limit of {limit} tool calls."
        return self.budget.ancestor_stop_before_tool_call()

    def stop_after_request(self) -> tuple[str, str] | None:
        """The token or cost limit passed, this run's or a budget's above."""
        reached = limit_reached(self.limits, self.budget.usage())
        if reached is None:
            reached = self.budget.ancestor_stop_after_request()
        return reached


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
