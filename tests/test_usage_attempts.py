"""Every attempt sent to a provider counts, and the kit words cost and retries honestly.

The rule (CONTRACTS §2): ``AgentUsage.requests`` counts every attempt that may be
billed: the first try, each retry (``ChatModel.retries``, so a request retried three
times counts 4), each fallback, failed and interrupted ones. ``max_requests`` bounds
attempts. A run's ``request_start`` events are exactly its requests.
"""

from __future__ import annotations

import re
import time
from typing import Any

import pytest
from pydantic import ValidationError

from deputy_shiny import Agent, AgentEvent, UsageLimits
from deputy_shiny._engine.budget import Meter, SharedBudget
from deputy_shiny.events import RetryEvent
from deputy_shiny.models import ChatModel
from deputy_shiny.models._provider import retry_delay
from deputy_shiny.shiny import render_events
from deputy_shiny.shiny._chat_module import _usage_text
from deputy_shiny.testing import ProviderFailure, ScriptedModel, ScriptedReply
from deputy_shiny.usage import AgentUsage, format_cost

from .helpers import collect


def starts(events: list[AgentEvent]) -> int:
    return sum(1 for e in events if e.type == "request_start")


async def test_a_500_retried_three_times_counts_four_requests() -> None:
    model = ScriptedModel([ProviderFailure(500)] * 4, retries=3)
    agent = Agent(model)
    events = await collect(agent.run("hi"))
    result = agent.last_run()
    assert result is not None and result.stop_reason == "provider_error"
    assert result.usage.requests == 4 == starts(events) == len(model.requests)
    assert agent.usage().requests == 4
    retries = [e for e in events if isinstance(e, RetryEvent)]
    assert [(e.attempt, e.attempts) for e in retries] == [(2, 4), (3, 4), (4, 4)]
    assert [e.request_index for e in events if e.type == "request_start"] == [1, 2, 3, 4]
    # The order each attempt reports in: start, error, then the retry (if any is left).
    kinds = [e.type for e in events if e.type in ("request_start", "request_error", "retry")]
    assert kinds == ["request_start", "request_error", "retry"] * 3 + [
        "request_start",
        "request_error",
    ]


async def test_a_retry_that_succeeds_keeps_the_reply_and_counts_each_attempt() -> None:
    agent = Agent(ScriptedModel([ProviderFailure(503), "Recovered."], retries=1))
    result = await agent.run_async("hi")
    assert result.response == "Recovered." and result.stop_reason == "complete"
    assert result.usage.requests == 2
    assert [t.role for t in agent.get_turns()] == ["user", "assistant"]


async def test_no_retry_by_default_for_a_scripted_model_nor_for_a_lasting_error() -> None:
    agent = Agent(ScriptedModel([ProviderFailure(503), "unused"]))
    events = await collect(agent.run("hi"))
    assert events[-1].stop_reason == "provider_error" and starts(events) == 1  # type: ignore[union-attr]
    lasting = Agent(ScriptedModel([ProviderFailure(400), "unused"], retries=2))
    events = await collect(lasting.run("hi"))
    assert not any(e.type == "retry" for e in events)
    assert starts(events) == 1


async def test_max_requests_stops_the_retry_that_would_be_the_third_attempt() -> None:
    model = ScriptedModel([ProviderFailure(429)] * 3 + ["never sent"], retries=3)
    agent = Agent(model)
    events = await collect(agent.run("hi", usage_limits=UsageLimits(max_requests=2)))
    result = agent.last_run()
    assert result is not None and result.stop_reason == "request_limit"
    assert result.usage.requests == 2 == len(model.requests) == starts(events)
    assert [e.type for e in events].count("request_error") == 2
    assert "limit of 2 model requests" in result.stop_message


async def test_fallback_attempts_count_and_are_bounded_too() -> None:
    backup = ScriptedModel(["From the backup."])
    agent = Agent(ScriptedModel([ProviderFailure(503)]), fallback_models=[backup])
    result = await agent.run_async("hi")
    assert result.response == "From the backup." and result.usage.requests == 2
    bounded = Agent(ScriptedModel([ProviderFailure(503)]), fallback_models=[ScriptedModel(["x"])])
    limited = await bounded.run_async("hi", usage_limits=UsageLimits(max_requests=1))
    assert limited.stop_reason == "request_limit" and limited.usage.requests == 1


async def test_an_interrupted_stream_counts_one_request_with_what_arrived() -> None:
    text = "".join(f"word{i} " for i in range(200))
    agent = Agent(ScriptedModel([ScriptedReply(text=text, chunk_size=6, delay=0.01, cost=0.5)]))
    seen = 0
    events: list[AgentEvent] = []
    async for event in agent.run("talk"):
        events.append(event)
        if event.type == "text":
            seen += 1
            if seen == 3:
                agent.interrupt()
    result = agent.last_run()
    assert result is not None and result.stop_reason == "interrupted"
    assert result.usage.requests == 1 == starts(events)
    assert result.usage.input_tokens > 0 and result.usage.output_tokens > 0  # estimated
    # The scripted cost rides on the last chunk, which never came: unknown, not $0.
    assert result.usage.cost is None and result.usage.cost_missing == 1
    assert agent.usage().requests == 1


async def test_a_provider_error_after_partial_streaming_counts_and_is_not_retried() -> None:
    reply = ScriptedReply(
        text="partial answer here", chunk_size=4, error=ProviderFailure(503), error_after_chunks=2
    )
    agent = Agent(ScriptedModel([reply, "not a retry"], retries=2))
    events = await collect(agent.run("hi"))
    result = agent.last_run()
    assert result is not None and result.stop_reason == "provider_error"
    assert result.usage.requests == 1 == starts(events)  # text was shown: no retry
    assert result.usage.output_tokens > 0 and result.usage.input_tokens > 0


def test_a_budget_above_counts_each_attempt_of_a_delegated_run() -> None:
    lead = SharedBudget(UsageLimits(max_requests=3))
    meter = Meter(UsageLimits(), SharedBudget(UsageLimits(), parent=lead))
    for _ in range(3):
        meter.count_request()
    assert lead.usage().requests == 3 and meter.usage().requests == 3
    assert meter.stop_before_request() is not None


def test_retry_delay_doubles_and_honours_retry_after() -> None:
    model = ChatModel(model="openai/gpt-4.1-mini", retry_delay=1.0)
    assert 0.75 <= retry_delay(model, 1) <= 1.0
    assert 3.0 <= retry_delay(model, 3) <= 4.0
    assert retry_delay(model, 10) <= 8.0

    class Limited(Exception):
        def __init__(self, retry_after: str) -> None:
            self.litellm_response_headers = {"retry-after": retry_after}

    assert retry_delay(model, 1, Limited("2")) == 2.0
    assert retry_delay(model, 1, Limited("3600")) <= 1.0  # too long: backoff


def test_hidden_retries_cannot_be_set_through_params() -> None:
    with pytest.raises(ValidationError, match="retries"):
        ChatModel(model="openai/gpt-4.1-mini", params={"max_retries": 5})
    assert ChatModel(model="openai/gpt-4.1-mini").request_kwargs()["max_retries"] == 0


# --------------------------------------------------------------------------- cost wording


async def test_one_cost_wording_after_errors_and_after_successes() -> None:
    # A model without a price reads "unknown" whether its requests failed or not.
    failing = Agent(ScriptedModel([ProviderFailure(500)]))
    await collect(failing.run("hi"))
    failed = failing.last_run()
    assert failed is not None
    answered = await Agent(ScriptedModel(["Hello."])).run_async("hi")
    assert format_cost(failed.usage) == format_cost(answered.usage) == "unknown"
    assert failed.usage.requests == 1 and failed.usage.cost_missing == 1
    priced = await Agent(ScriptedModel([ScriptedReply(text="Hi.", cost=0.0123)])).run_async("x")
    assert _usage_text(priced.usage).endswith("Cost: $0.0123")
    assert _usage_text(failed.usage) == "Requests: 1 · Tokens: 0 · Tool calls: 0 · Cost: unknown"


def test_format_cost_never_shows_zero_for_a_cost() -> None:
    assert format_cost(AgentUsage()) == "$0.00"
    assert format_cost(AgentUsage(requests=1, cost=0.00002)) == "<$0.0001"
    assert format_cost(AgentUsage(requests=1, cost=2.5)) == "$2.50"
    assert format_cost(AgentUsage(requests=2, cost=None, cost_missing=1)) == "unknown"


# --------------------------------------------------------------------------- the kit


async def test_the_kit_shows_each_retry_at_once_before_the_reply() -> None:
    slow = ScriptedReply(text="Recovered after a while.", chunk_size=5, delay=0.01)
    agent = Agent(ScriptedModel([ProviderFailure(503), ProviderFailure(503), slow], retries=2))
    chunks: list[Any] = []
    async for chunk in render_events(agent.run("hi"), flush_interval=0.04):
        chunks.append(chunk)
    texts = [c for c in chunks if isinstance(c, str)]
    plain = [re.sub(r"\\(.)", r"\1", c) for c in texts]
    notes = [i for i, c in enumerate(plain) if "retrying" in c]
    assert len(notes) == 2
    first = plain[notes[0]].strip()
    assert first.endswith("(simulated by deputy_shiny.testing) — retrying (2 of 3)…")
    assert "retrying (3 of 3)…" in plain[notes[1]]
    # Each note is its own chunk, sent before any of the reply's text, and ends a
    # paragraph: the reply does not join the quote.
    first_text = next(i for i, c in enumerate(plain) if "Recov" in c)
    assert notes[1] < first_text and texts[notes[1]].endswith("\n\n")
    assert "".join(plain).endswith("Recovered after a while.")


async def test_the_retry_wait_is_interruptible() -> None:
    model = ScriptedModel([ProviderFailure(503), "never"], retries=1)
    agent = Agent(model.as_chat_model().model_copy(update={"retry_delay": 30.0}))
    started = time.monotonic()
    async for event in agent.run("hi"):
        if event.type == "retry":
            assert event.delay > 20
            agent.interrupt()  # the engine waits next: the wait ends at once
    result = agent.last_run()
    assert result is not None and result.stop_reason == "interrupted"
    assert result.usage.requests == 1 and len(model.requests) == 1
    assert time.monotonic() - started < 10


async def test_a_missing_key_sends_nothing_and_counts_no_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    agent = Agent("openai/gpt-4.1-mini")
    events = await collect(agent.run("hi"))
    assert [e.type for e in events if e.type.startswith("request")] == ["request_error"]
    assert "no API key" in events[-1].message  # type: ignore[union-attr]
    assert agent.usage().requests == 0
