"""UsageLimits: validation and clamping."""

from __future__ import annotations

import pytest

from deputy_shiny import UsageLimits
from deputy_shiny.errors import InvalidLimitError


def test_defaults_set_no_limits() -> None:
    limits = UsageLimits()
    assert limits.max_requests is None and limits.max_cost_usd is None
    assert limits.on_exceed == "stop"


def test_frozen() -> None:
    with pytest.raises(Exception):  # noqa: B017 - pydantic's frozen error type is internal
        UsageLimits().max_requests = 3  # type: ignore[misc]
    assert UsageLimits(max_requests=3).model_copy(update={"max_requests": 4}).max_requests == 4


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_requests": -1},
        {"max_requests": True},
        {"max_requests": "3"},
        {"max_requests": 2.5},
        {"max_tool_calls": -5},
        {"max_input_tokens": None, "max_output_tokens": "many"},
        {"max_cost_usd": -0.01},
        {"max_cost_usd": float("nan")},
        {"max_cost_usd": "1"},
        {"max_cost_usd": False},
        {"on_exceed": "explode"},
        {"max_request": 3},
    ],
)
def test_bad_values_raise_typed_errors_naming_the_field(kwargs: dict) -> None:
    with pytest.raises(InvalidLimitError) as caught:
        UsageLimits(**kwargs)
    assert next(iter(kwargs)).rstrip("s") in str(caught.value) or "max_" in str(caught.value)


def test_clamp_takes_the_stricter_value_and_fills_gaps() -> None:
    agent = UsageLimits(max_requests=5, max_cost_usd=1.0, on_exceed="error")
    run = UsageLimits(max_requests=50, max_tool_calls=3, max_cost_usd=0.5)
    clamped = run.clamp_to(agent)
    assert clamped.max_requests == 5
    assert clamped.max_tool_calls == 3
    assert clamped.max_cost_usd == 0.5
    assert clamped.on_exceed == "stop"  # the run set limits, so its own on_exceed applies
    assert UsageLimits().clamp_to(agent).on_exceed == "error"
