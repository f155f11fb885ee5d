"""Budgets that hold on every path (issue #32, part 2): every model request made for a
session is checked and charged before it is sent (delegations, retained agents,
compaction summaries, structured-output corrections, retries); sessions that are not
saved are charged too; anonymous visitors share one allowance across processes.

The engine's side runs against an in-memory :class:`~deputy_shiny.usage.RequestGate`;
the kit's against SQLite and a real PostgreSQL, two ``KitPersistence`` on one database
standing in for two app processes (as in tests/test_kit_store.py).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from deputy_shiny import Agent, UsageLimits, tool, tool_annotations
from deputy_shiny.context import ContextPolicy
from deputy_shiny.delegation import AgentDefinition, LeadAgent
from deputy_shiny.errors import CompactionError
from deputy_shiny.shiny import DailyAllowance, KitPersistence, UserBudget
from deputy_shiny.shiny._budget import budget_day
from deputy_shiny.shiny._chat_start import AgentChatContext
from deputy_shiny.shiny._identity import new_binding
from deputy_shiny.shiny._session_budget import (
    ANONYMOUS,
    BUDGET_UNKNOWN_MESSAGE,
    SessionBudget,
    session_budget,
)
from deputy_shiny.shiny._session_conversation import SessionConversation
from deputy_shiny.testing import (
    FunctionModel,
    ProviderFailure,
    ScriptedModel,
    ScriptedReply,
    ScriptedToolCall,
)
from deputy_shiny.usage import TurnUsage, charged_to
from tests import test_kit_store
from tests.test_chat_session import restored, start
from tests.test_context import Talker, with_history
from tests.test_kit_conversations import FakeSession, cookies
from tests.test_kit_store import Make

# The two "processes" on one database (SQLite and PostgreSQL) of tests/test_kit_store.py.
database = test_kit_store.database
make = test_kit_store.make


class Gate:
    """A RequestGate allowing ``allowed`` requests; records what it was told."""

    def __init__(self, allowed: int) -> None:
        self.allowed = allowed
        self.reserved = 0
        self.refused = 0
        self.settled: list[TurnUsage] = []

    async def reserve(self) -> str | None:
        await asyncio.sleep(0)  # a real gate waits for its store
        if self.reserved >= self.allowed:
            self.refused += 1
            return "The test budget is spent."
        self.reserved += 1
        return None

    def settle(self, usage: TurnUsage) -> None:
        self.settled.append(usage)


def delegate(task: str) -> ScriptedReply:
    return ScriptedReply(
        tool_calls=[ScriptedToolCall("delegate", {"agent": "helper", "task": task})]
    )


HELPER = AgentDefinition(name="helper", description="Helps.", prompt="You help.", tools=[])


class Counter:
    """Model requests as the provider sees them (every model of a test)."""

    def __init__(self) -> None:
        self.sent = 0

    def lead(self) -> FunctionModel:
        def reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
            self.sent += 1
            if messages[-1]["role"] == "user":
                return delegate(f"part {self.sent}")
            return f"Lead done {self.sent}."

        return FunctionModel(reply)

    def helper(self) -> FunctionModel:
        def reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
            self.sent += 1
            return f"Helper answer {self.sent}."

        return FunctionModel(reply)

    def lead_agent(self, **options: Any) -> LeadAgent:
        return LeadAgent(
            self.lead(), subagents=[HELPER], subagent_models={"helper": self.helper()}, **options
        )


# ------------------------------------------------------------------ the engine's gate


async def test_a_delegated_run_passes_the_gate_of_the_run_that_started_it() -> None:
    counter = Counter()
    gate = Gate(allowed=2)
    with charged_to(gate):
        result = await counter.lead_agent().run_async("go")
    # The lead's request (the delegation), the helper's; the lead's next is refused.
    assert counter.sent == 2 == gate.reserved and gate.refused == 1
    assert result.stop_reason == "budget_limit"
    assert result.stop_message == "The test budget is spent."
    assert result.usage.requests == 1  # the refused attempt counts nothing
    assert len(gate.settled) == 2  # each sent request's tokens and cost went to the gate


async def test_compaction_summaries_corrections_and_retries_pass_the_gate() -> None:
    talker = Talker(reply_words=120)
    agent = with_history(Agent(talker.model, context_policy=ContextPolicy(max_tokens=600)))
    gate = Gate(allowed=10)
    with charged_to(gate):
        result = await agent.run_async("Go on")
    assert talker.summaries == 1 and talker.requests == 1
    assert gate.reserved == 2 and result.usage.requests == 2

    class City(BaseModel):
        name: str

    model = ScriptedModel(
        [ProviderFailure(503), "Paris.", "not json", '{"name": "Paris"}'], retries=1
    )
    gate = Gate(allowed=10)
    with charged_to(gate):
        result = await Agent(model).run_async("Capital?", type=City, max_corrections=2)
    assert result.structured_output == City(name="Paris")
    assert gate.reserved == 4 == len(model.requests) == result.usage.requests


async def test_a_summary_the_gate_refuses_is_never_sent() -> None:
    talker = Talker(reply_words=120)
    agent = with_history(Agent(talker.model, context_policy=ContextPolicy(max_tokens=600)))
    with charged_to(Gate(allowed=0)):
        result = await agent.run_async("Go on")
    assert talker.summaries == 0 and talker.requests == 0
    assert (result.stop_reason, result.stop_message) == (
        "budget_limit",
        "The test budget is spent.",
    )
    with charged_to(Gate(allowed=0)), pytest.raises(CompactionError, match="test budget is spent"):
        await agent.compact_async()


async def test_a_retained_agents_task_sent_from_a_tool_passes_the_gate() -> None:
    counter = Counter()
    owner = Agent(ScriptedModel([ScriptedReply(tool_calls=[ScriptedToolCall("ask", {})]), "ok"]))
    handle = owner.retain_agent(Agent(counter.helper()), UsageLimits(max_requests=5))

    async def ask() -> str:
        "Ask the retained agent."
        result = await owner.continue_agent_async(handle, "help")
        return result.response

    owner.register_tool(
        tool(ask, annotations=tool_annotations(read_only_hint=True, open_world_hint=False))
    )
    gate = Gate(allowed=2)
    with charged_to(gate):
        result = await owner.run_async("go")
    assert counter.sent == 1  # the retained agent's request was the gate's second
    assert gate.reserved == 2 and result.stop_reason == "budget_limit"


# ------------------------------------------------------------------ the kit's budget


def lead_factory(counter: Counter) -> Any:
    def factory(ctx: AgentChatContext) -> Agent:
        return counter.lead_agent(**ctx.agent_options())

    return factory


async def test_a_delegation_on_a_3_request_budget_makes_at_most_3_requests_across_two_processes(
    tmp_path: Path, make: Make
) -> None:
    budget = UserBudget(max_requests_per_day=3)
    counter = Counter()
    first = start(tmp_path, lead_factory(counter), persistence=make("a", budget=budget))
    await restored(first)
    await first.session.submit("go")
    await first.chat.settled()
    # The lead's delegation and the helper's answer, then the lead's reply (3 of 3).
    assert counter.sent == 3
    await first.session.submit("again")  # refused before it starts
    await first.chat.settled()
    assert "daily budget is spent" in first.chat.said()[-1][1]
    await first.session.end()

    second = start(tmp_path, lead_factory(counter), persistence=make("b", budget=budget))
    await restored(second)
    assert second.values.budget[-1] == "Today: 3 of 3 requests"
    await second.session.submit("go")
    await second.chat.settled()
    assert counter.sent == 3
    said = second.chat.said()[-1][1]
    assert "daily budget is spent (3 of 3 requests today)" in said
    await second.session.end()


async def test_delegations_at_once_in_two_processes_never_pass_the_request_limit(
    make: Make,
) -> None:
    budget = UserBudget(max_requests_per_day=3)
    counter = Counter()
    gates = [
        session_budget(make(process, budget=budget), FakeSession(user="alice"), None)  # type: ignore[arg-type]
        for process in ("a", "b", "a", "b")
    ]

    async def run(gate: SessionBudget | None) -> str:
        with charged_to(gate):
            return (await counter.lead_agent().run_async("go")).stop_reason

    reasons = await asyncio.gather(*(run(gate) for gate in gates))
    assert counter.sent == 3
    assert reasons.count("budget_limit") >= 3


async def test_a_delegation_past_the_budget_is_refused_with_the_budgets_note(
    tmp_path: Path, make: Make
) -> None:
    counter = Counter()
    persistence = make(budget=UserBudget(max_requests_per_day=2))
    kit = start(tmp_path, lead_factory(counter), persistence=persistence)
    await restored(kit)
    await kit.session.submit("go")
    await kit.chat.settled()
    assert counter.sent == 2  # the lead's delegation and the helper's: the lead's next is not sent
    said = kit.chat.said()[-1][1]
    assert "Your daily budget is spent (2 of 2 requests today)" in said
    assert kit.values.budget[-1] == "Today: 2 of 2 requests"
    await kit.session.end()


async def test_sessions_without_a_binding_draw_on_the_anonymous_allowance(
    tmp_path: Path, make: Make
) -> None:
    budget = UserBudget(max_requests_per_day=50, anonymous=DailyAllowance(max_requests_per_day=3))
    counter = Counter()
    helper = counter.helper()

    def factory(ctx: AgentChatContext) -> Agent:
        return Agent(helper, **ctx.agent_options())

    for process in ("a", "b", "a"):  # a reload, another process: no fresh budget
        kit = start(tmp_path, factory, persistence=make(process, budget=budget), user=None)
        assert kit.session.conversation is None  # no local storage: not saved
        for _ in range(2):
            await kit.session.submit("hi")
            await kit.chat.settled()
        await kit.session.end()
    assert counter.sent == 3
    assert "visitors who are not signed in is spent (3 of 3 requests" in kit.chat.said()[-1][1]
    # A signed-in user is not held to the visitors' allowance.
    kit = start(tmp_path, factory, persistence=make(budget=budget), user="alice")
    await restored(kit)
    await kit.session.submit("hi")
    await kit.chat.settled()
    assert counter.sent == 4
    await kit.session.end()


async def test_many_anonymous_browsers_stay_inside_the_anonymous_allowance(make: Make) -> None:
    budget = UserBudget(max_requests_per_day=2, anonymous=DailyAllowance(max_requests_per_day=5))
    processes = [make("a", budget=budget, anonymous=True), make("b", budget=budget, anonymous=True)]
    counter = Counter()
    helper = counter.helper()
    refusals: list[str | None] = []
    for n in range(8):  # each a new browser: a fresh binding, a fresh token
        persistence = processes[n % 2]
        session = FakeSession(cookie=cookies(new_binding()))
        held = SessionConversation(persistence, session, "chat")  # type: ignore[arg-type]
        assert held.kind == "token"
        gate = session_budget(persistence, session, held)  # type: ignore[arg-type]
        assert gate is not None
        for _ in range(2):
            with charged_to(gate):
                result = await Agent(helper).run_async("hi")
            refusals.append(result.stop_message if result.stop_reason == "budget_limit" else None)
        held.release()
    assert counter.sent == 5
    assert refusals[:5] == [None] * 5
    assert all(note and "visitors who are not signed in" in note for note in refusals[5:])


async def test_a_budget_that_cannot_be_checked_sends_nothing(tmp_path: Path) -> None:
    persistence = KitPersistence(tmp_path, budget=UserBudget(max_requests_per_day=5))
    (tmp_path / "records").mkdir(mode=0o700)
    (tmp_path / "records" / ".store").write_text("not a folder")  # the counters' store is broken
    counter = Counter()
    try:
        gate = session_budget(persistence, FakeSession(), None)  # type: ignore[arg-type]
        assert isinstance(gate, SessionBudget)
        assert await gate.check() == BUDGET_UNKNOWN_MESSAGE
        with charged_to(gate):
            result = await Agent(counter.helper()).run_async("hi")
        assert counter.sent == 0
        assert (
            result.stop_reason == "budget_limit" and result.stop_message == BUDGET_UNKNOWN_MESSAGE
        )
    finally:
        persistence.close()


async def test_tokens_and_cost_are_charged_with_the_next_request_and_as_the_run_ends(
    tmp_path: Path,
) -> None:
    persistence = KitPersistence(
        tmp_path, budget=UserBudget(max_tokens_per_day=100), trust_user_header=True
    )
    try:
        gate = session_budget(persistence, FakeSession(user="alice"), None)  # type: ignore[arg-type]
        assert gate is not None
        replies = [ScriptedReply(text="a", usage={"prompt_tokens": 60, "completion_tokens": 30})]
        replies.append(ScriptedReply(text="b", usage={"prompt_tokens": 5, "completion_tokens": 5}))
        agent = Agent(ScriptedModel(replies * 2))
        with charged_to(gate):
            assert (await agent.run_async("one")).response == "a"
            assert (await agent.run_async("two")).response == "b"  # 90 of 100 before it
            third = await agent.run_async("three")  # 100 of 100: not sent
        assert third.stop_reason == "budget_limit"
        assert third.stop_message is not None and "100 of 100 tokens" in third.stop_message
        assert await gate.flush() == "Today: 100 of 100 tokens"
        # The anonymous pool was not drawn on by a signed-in user.
        link = persistence._link
        assert link is not None
        day_totals = await link.run(lambda store: store.usage_totals(ANONYMOUS, budget_day()))
        assert day_totals == {}
    finally:
        persistence.close()
