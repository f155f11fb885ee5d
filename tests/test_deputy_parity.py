"""The rest of deputy (#24): accessors, result helpers, events and smaller pieces that a
user porting R code reaches for, each checked against what it reports."""

from __future__ import annotations

from deputy_shiny import Agent
from deputy_shiny.testing import ScriptedModel, ScriptedReply

# --------------------------------------------------------------------------- cached tokens


def test_cached_tokens_add_up_in_usage_result_cost_and_conversation_cost() -> None:
    agent = Agent(
        ScriptedModel(
            [
                ScriptedReply(
                    text="first answer",
                    usage={"prompt_tokens": 100, "completion_tokens": 5, "cached_tokens": 60},
                    cost=0.01,
                ),
                ScriptedReply(
                    text="second answer", usage={"prompt_tokens": 40, "completion_tokens": 3}
                ),
            ]
        )
    )
    first = agent.run_sync("one")
    assert (first.usage.input_tokens, first.usage.cached_tokens) == (100, 60)
    assert (first.cost.input_tokens, first.cost.output_tokens, first.cost.cached_tokens) == (
        100,
        5,
        60,
    )
    assert first.cost.total == 0.01
    (end,) = [e for e in first.events if e.type == "request_end"]
    assert end.usage.cached_tokens == 60
    second = agent.run_sync("two")
    assert second.usage.cached_tokens == 0  # this provider reported no cache hit
    cost = agent.cost()
    assert (cost.input_tokens, cost.output_tokens, cost.cached_tokens) == (140, 8, 60)
    assert agent.usage().cached_tokens == 60
