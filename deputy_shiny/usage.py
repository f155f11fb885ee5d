"""Usage and its limits: what requests, tool calls, tokens and dollars a run used.

``TurnUsage`` is one request's tokens and cost (on an assistant turn),
``RequestUsage`` the tokens of a ``request_end`` event, ``AgentUsage`` a run's or a
conversation's totals, ``CostSummary`` / ``ConversationCost`` the cost views of a run
and a conversation, and :class:`UsageLimits` what one run may spend
(:func:`limit_reached` is the check the engine makes after each request).
:func:`format_cost` is the one wording of a cost the kit and the app show.
A :class:`RequestGate` is a host's own budget over every request made on someone's
behalf (the kit's per-user daily budget): :func:`charged_to` puts one in charge.

Every attempt sent to a provider counts as a request (a retry, a fallback, a failed or
interrupted one), with the tokens and cost known for it: what a provider may bill.

Examples:
    >>> from deputy_shiny.usage import AgentUsage, UsageLimits, limit_reached
    >>> usage = AgentUsage(requests=1, input_tokens=900, output_tokens=200)
    >>> limit_reached(UsageLimits(max_total_tokens=1000), usage)
    ('total_token_limit', 'The run used 1100 tokens, over its limit of 1000.')
"""

from __future__ import annotations

import contextvars
import math
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any, ClassVar, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ._util.config import FrozenConfig
from .errors import ConfigurationError, InvalidLimitError

__all__ = [
    "AgentUsage",
    "ConversationCost",
    "CostSummary",
    "RequestGate",
    "RequestUsage",
    "TurnTokens",
    "TurnUsage",
    "UsageLimits",
    "charged_to",
    "format_cost",
    "limit_reached",
]


class TurnUsage(BaseModel):
    """Tokens and cost of the request that produced an assistant turn."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0  # the part of input_tokens the provider read from its cache
    cost: float | None = None


class RequestUsage(BaseModel):
    """Tokens of one model request (the ``usage`` of a ``request_end`` event);
    ``cached_tokens`` is the part of the input the provider read from its prompt cache."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0


class AgentUsage(BaseModel):
    """Usage of a run (or of a whole conversation).

    Attributes:
        requests: Model requests made.
        tool_calls: Tool calls the model asked for that the agent handled.
        input_tokens / output_tokens: Summed over requests.
        total_tokens: input plus output.
        cached_tokens: The part of ``input_tokens`` providers read from their prompt
            cache (``prompt_tokens_details.cached_tokens``; 0 when none was reported).
        cost: US dollars, or None when any request's cost was unknown.
        cost_missing: How many requests had no known cost.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    requests: int = 0
    tool_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    cached_tokens: int = 0
    cost: float | None = 0.0
    cost_missing: int = 0

    @model_validator(mode="before")
    @classmethod
    def _total(cls, data: Any) -> Any:
        if isinstance(data, dict) and "total_tokens" not in data:
            data = {
                **data,
                "total_tokens": data.get("input_tokens", 0) + data.get("output_tokens", 0),
            }
        return data

    def __add__(self, other: AgentUsage) -> AgentUsage:
        missing = self.cost_missing + other.cost_missing
        cost = (
            None if missing or self.cost is None or other.cost is None else self.cost + other.cost
        )
        return AgentUsage(
            requests=self.requests + other.requests,
            tool_calls=self.tool_calls + other.tool_calls,
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
            cost=cost,
            cost_missing=missing,
        )


class CostSummary(BaseModel):
    """The cost of a run: ``total`` is None unless every request's cost was known;
    its tokens split into input, output and cached (the cached part of the input).

    Examples:
        >>> CostSummary(total=None, complete=False, missing=1, input_tokens=10).total is None
        True
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    total: float | None = 0.0
    complete: bool = True
    missing: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0

    @classmethod
    def of(cls, usage: AgentUsage) -> CostSummary:
        """The cost view of ``usage``."""
        return cls(
            total=usage.cost,
            complete=usage.cost_missing == 0,
            missing=usage.cost_missing,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cached_tokens=usage.cached_tokens,
        )


class ConversationCost(BaseModel):
    """Tokens and cost of a whole conversation (see :meth:`Agent.cost`): input,
    output and cached tokens (the cached part of the input, as providers report it).

    ``total`` is None unless every request's cost was known (``complete``);
    ``missing`` counts the requests whose cost was unknown.

    Examples:
        >>> cost = ConversationCost(
        ...     input_tokens=10, output_tokens=5, total=None, complete=False, missing=1
        ... )
        >>> cost.total is None
        True
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    input_tokens: int
    output_tokens: int
    total: float | None
    complete: bool
    missing: int
    cached_tokens: int = 0


class TurnTokens(BaseModel):
    """One assistant turn's tokens and cost (a row of :meth:`Agent.get_tokens`).

    ``turn`` is the turn's index in ``agent.get_turns()``; ``cost`` is None when unknown.

    Examples:
        >>> TurnTokens(turn=1, input_tokens=12, output_tokens=3).cost is None
        True
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    turn: int
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cost: float | None = None


_COUNT_FIELDS = (
    "max_requests",
    "max_tool_calls",
    "max_input_tokens",
    "max_output_tokens",
    "max_total_tokens",
)


class UsageLimits(FrozenConfig):
    """Limits applied to each run separately; None means no limit on that measure.

    Attributes:
        max_requests: Model requests per run (each structured-output attempt counts).
        max_tool_calls: Tool calls per run (denied and failed calls count too).
        max_input_tokens: Prompt tokens summed over the run's requests.
        max_output_tokens: Completion tokens summed over the run's requests.
        max_total_tokens: Input plus output tokens.
        max_cost_usd: Cost in US dollars. When a request's cost is unknown the run
            stops with ``cost_unavailable``, since the limit can no longer be enforced.
        on_exceed: ``"stop"`` ends the run with the limit's stop reason; ``"error"``
            also raises :class:`~deputy_shiny.errors.UsageLimitExceeded`.

    Examples:
        >>> UsageLimits(max_requests=3, on_exceed="error").on_exceed
        'error'
    """

    _config_error: ClassVar[type[ConfigurationError]] = InvalidLimitError

    max_requests: int | None = Field(default=None, strict=True, ge=0)
    max_tool_calls: int | None = Field(default=None, strict=True, ge=0)
    max_input_tokens: int | None = Field(default=None, strict=True, ge=0)
    max_output_tokens: int | None = Field(default=None, strict=True, ge=0)
    max_total_tokens: int | None = Field(default=None, strict=True, ge=0)
    max_cost_usd: float | None = Field(default=None, ge=0)
    on_exceed: Literal["stop", "error"] = "stop"

    @field_validator("max_cost_usd", mode="before")
    @classmethod
    def _cost_is_a_number(cls, value: object) -> object:
        if value is None:
            return value
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError("must be a number of US dollars")
        if not math.isfinite(value):
            raise ValueError("must be finite")
        return float(value)

    def clamp_to(self, ceiling: UsageLimits) -> UsageLimits:
        """Combine per-run limits (self) with the agent's (ceiling).

        A field left None takes the ceiling's value; a looser value is clamped to it.
        ``on_exceed`` is taken from self when self sets a limit, else from the ceiling.
        """
        merged: dict[str, object] = {}
        for name in (*_COUNT_FIELDS, "max_cost_usd"):
            own, cap = getattr(self, name), getattr(ceiling, name)
            merged[name] = cap if own is None else own if cap is None else min(own, cap)
        own_sets_any = any(getattr(self, n) is not None for n in (*_COUNT_FIELDS, "max_cost_usd"))
        merged["on_exceed"] = self.on_exceed if own_sets_any else ceiling.on_exceed
        return UsageLimits(**merged)  # type: ignore[arg-type]


def limit_reached(limits: UsageLimits, usage: AgentUsage) -> tuple[str, str] | None:
    """The token or cost limit a run's ``usage`` has passed: (stop reason, message), or None.

    A cost limit with a request of unknown cost is ``cost_unavailable``: the limit can
    no longer be enforced.
    """
    checks = (
        ("input_token_limit", limits.max_input_tokens, usage.input_tokens, "input tokens"),
        ("output_token_limit", limits.max_output_tokens, usage.output_tokens, "output tokens"),
        ("total_token_limit", limits.max_total_tokens, usage.total_tokens, "tokens"),
    )
    for reason, limit, used, what in checks:
        if limit is not None and used > limit:
            return reason, f"The run used {used} {what}, over its limit of {limit}."
    if limits.max_cost_usd is None:
        return None
    if usage.cost_missing:
        return (
            "cost_unavailable",
            "The run has a cost limit but the provider reported no cost for a request, so "
            "the limit cannot be enforced.",
        )
    cost = usage.cost or 0.0
    if cost > limits.max_cost_usd:
        return (
            "cost_limit",
            f"The run cost ${cost:.6f}, over its limit of ${limits.max_cost_usd:.6f}.",
        )
    return None


def format_cost(usage: AgentUsage) -> str:
    """A cost as the kit's usage line and the app's meter show it: ``"unknown"`` when
    any request's cost is unknown (a model litellm has no price for, or a provider that
    reports none), else the amount in US dollars.

    The same model reads the same after a failed request as after a successful one:
    a failed request is charged the price of no tokens, which is unknown for a model
    without a price (see :func:`deputy_shiny._engine.budget.response_usage`).

    Examples:
        >>> [format_cost(AgentUsage(cost=c)) for c in (0.0, 0.01234, 1.5, 0.00001)]
        ['$0.00', '$0.0123', '$1.50', '<$0.0001']
        >>> format_cost(AgentUsage(requests=2, cost=None, cost_missing=2))
        'unknown'
    """
    cost = usage.cost
    if cost is None or usage.cost_missing:
        return "unknown"
    if cost == 0 or cost >= 1:
        return f"${cost:.2f}"
    if cost < 0.0001:
        return "<$0.0001"  # never "$0.0000" for a request that did cost something
    return f"${cost:.4f}"


class RequestGate(Protocol):
    """A host's budget over every model request made on someone's behalf: the engine
    asks it before each attempt is sent and tells it what each attempt cost.

    It is asked by every run in the context of :func:`charged_to` (a lead's run, every
    run delegated under it and every retained agent's task it sends, compaction
    summaries, structured-output corrections, retries and fallbacks alike): one
    :meth:`reserve` per attempt, one :meth:`settle` per attempt that was sent. A refused
    attempt is never sent, counts as no request, and stops the run with
    ``budget_limit`` and the gate's message.
    """

    async def reserve(self) -> str | None:
        """Before an attempt is sent: charge one request (None), or refuse it (the
        message the run stops with). It must not block the event loop."""

    def settle(self, usage: TurnUsage) -> None:
        """An attempt ended, however: its tokens and cost (on the event loop, so it
        only takes note; the next :meth:`reserve` may charge it)."""


request_gate: contextvars.ContextVar[RequestGate | None] = contextvars.ContextVar(
    "deputy_shiny_request_gate", default=None
)
"""The gate every model request in this context passes (None: none)."""


@contextmanager
def charged_to(gate: RequestGate | None) -> Iterator[None]:
    """Runs started inside (and every task they start) pass ``gate`` before each request.

    Examples:
        >>> from deputy_shiny import Agent
        >>> from deputy_shiny.testing import ScriptedModel
        >>> class OneRequest:
        ...     left = 1
        ...     async def reserve(self):
        ...         self.left -= 1
        ...         return None if self.left >= 0 else "The budget is spent."
        ...     def settle(self, usage):
        ...         pass
        >>> agent = Agent(ScriptedModel(["one", "two"]))
        >>> with charged_to(OneRequest()):
        ...     first, second = agent.run_sync("1"), agent.run_sync("2")
        >>> (first.response, second.stop_reason, second.stop_message, second.usage.requests)
        ('one', 'budget_limit', 'The budget is spent.', 0)
    """
    token = request_gate.set(gate)
    try:
        yield
    finally:
        # An async generator closed by the loop's finalizer ends in another context.
        with suppress(ValueError):
            request_gate.reset(token)
