"""UsageLimits: how much one run may spend, and what happens when it would spend more.

Example:
    >>> from deputy_shiny.limits import UsageLimits
    >>> limits = UsageLimits(max_requests=10, max_cost_usd=0.50)
    >>> limits.clamp_to(UsageLimits(max_requests=5)).max_requests
    5
"""

from __future__ import annotations

import math
from typing import ClassVar, Literal

from pydantic import Field, field_validator

from ._config import FrozenConfig
from .errors import ConfigurationError, InvalidLimitError

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

    Example:
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
