"""Retained agents: retain, continue, cancel, release (issue 10), through the real engine."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

import pytest

from deputy_shiny import Agent, Permissions, UsageLimits
from deputy_shiny.delegation import AgentDefinition, DelegationDisclosure, LeadAgent
from deputy_shiny.errors import (
    AgentRetainedError,
    DelegationDisclosureError,
    DelegationTaskError,
    RetainedAgentBusyError,
    RetainedAgentChangedError,
    RetainedAgentExhaustedError,
    RetainedAgentReleasedError,
    RetainedHandleError,
    RetainError,
)
from deputy_shiny.hooks import HookMatcher
from deputy_shiny.testing import FunctionModel, ScriptedModel, ScriptedReply, ScriptedToolCall
from deputy_shiny.tools import tool_write_file
from tests.helpers import local_tool, wait_until

BUDGET = UsageLimits(max_requests=20)


def write(path: str) -> ScriptedReply:
    return ScriptedReply(
        tool_calls=[ScriptedToolCall("write_file", {"path": path, "content": "x"})]
    )


def test_a_retained_agent_keeps_its_conversation_between_tasks() -> None:
    owner = Agent(ScriptedModel([]))
    model = ScriptedModel(["first answer", "second answer"])
    analyst = Agent(model, agent_name="analyst")
    handle = owner.retain_agent(analyst, BUDGET)
    assert owner.continue_agent(handle, "one").response == "first answer"
    assert owner.continue_agent(handle, "two").response == "second answer"
    # The second request carried the first task's conversation.
    texts = [m.get("content") for m in model.requests[1]["messages"]]
    assert "one" in str(texts) and "first answer" in str(texts)
    records = owner.list_subagents()
    assert [(r.agent_name, r.status, r.handle) for r in records] == [
        ("analyst", "completed", handle),
        ("analyst", "completed", handle),
    ]
    assert owner.get_subagent_messages()[records[1].delegation_id][0].text == "two"


def test_a_retained_agent_cannot_be_run_or_reconfigured_until_released() -> None:
    owner = Agent(ScriptedModel([]))
    other = Agent(ScriptedModel(["mine again"]))
    handle = owner.retain_agent(other, BUDGET)
    for attempt in (
        lambda: other.run_sync("hi"),
        lambda: other.chat("hi"),
        lambda: other.set_system_prompt("x"),
        lambda: other.set_model("openai/gpt-4.1-mini"),
        lambda: other.set_tools([]),
        lambda: other.register_tool(tool_write_file()),
        lambda: other.add_hook(HookMatcher("Stop", lambda context: None)),
        lambda: other.set_permission_mode("readonly"),
        lambda: other.set_turns([]),
        lambda: other.on_tool_result(lambda result: None),
    ):
        with pytest.raises(AgentRetainedError):
            attempt()
    owner.release_agent(handle)
    assert other.chat("hi") == "mine again"
    assert owner.list_subagents() == []


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda: LeadAgent(ScriptedModel([]), subagents=[]), "LeadAgent"),
        (lambda: Agent(ScriptedModel([]), fallback_models=[ScriptedModel([])]), "fallback"),
        (
            lambda: Agent(ScriptedModel([]), approval_dir=tempfile.mkdtemp()),
            "approval_dir",
        ),
    ],
)
def test_what_cannot_be_retained(make: Any, says: str) -> None:
    owner = Agent(ScriptedModel([]))
    with pytest.raises(RetainError, match=says):
        owner.retain_agent(make(), BUDGET)
    with pytest.raises(RetainError, match="itself"):
        owner.retain_agent(owner, BUDGET)
    other = Agent(ScriptedModel([]))
    owner.retain_agent(other, BUDGET)
    with pytest.raises(RetainError, match="already retained"):
        Agent(ScriptedModel([])).retain_agent(other, BUDGET)


def test_at_most_32_at_a_time() -> None:
    owner = Agent(ScriptedModel([]))
    handles = [owner.retain_agent(Agent(ScriptedModel([])), BUDGET) for _ in range(32)]
    with pytest.raises(RetainError, match="at most 32"):
        owner.retain_agent(Agent(ScriptedModel([])), BUDGET)
    owner.release_agent(handles[0])
    owner.retain_agent(Agent(ScriptedModel([])), BUDGET)


def test_every_refusal_happens_before_any_request() -> None:
    owner, stranger = Agent(ScriptedModel([])), Agent(ScriptedModel([]))
    model = ScriptedModel(["done"] * 4)
    other = Agent(model)
    handle = owner.retain_agent(other, BUDGET, max_runs=1)
    with pytest.raises(RetainedHandleError, match="another agent"):
        stranger.continue_agent(handle, "task")
    with pytest.raises(DelegationTaskError, match="non-empty"):
        owner.continue_agent(handle, "  ")
    with pytest.raises(DelegationTaskError, match="64 KiB"):
        owner.continue_agent(handle, "x" * (64 * 1024 + 1))
    other.hooks.add(HookMatcher("Stop", lambda context: None))  # a change behind its back
    with pytest.raises(RetainedAgentChangedError):
        owner.continue_agent(handle, "task")
    assert model.requests == []
    owner.release_agent(handle)
    with pytest.raises(RetainedAgentReleasedError):
        owner.continue_agent(handle, "task")
    handle = owner.retain_agent(other, BUDGET, max_runs=1)
    owner.continue_agent(handle, "task")
    with pytest.raises(RetainedAgentExhaustedError):
        owner.continue_agent(handle, "again")
    assert len(model.requests) == 1


async def test_busy_cancel_and_release_while_running() -> None:
    started = asyncio.Event()

    async def slow(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        started.set()
        await asyncio.sleep(30)
        return "never"

    owner = Agent(ScriptedModel([]))
    model = FunctionModel(slow)
    handle = owner.retain_agent(Agent(model), BUDGET)
    task = asyncio.create_task(owner.continue_agent_async(handle, "long job"))
    await asyncio.wait_for(started.wait(), 5)
    with pytest.raises(RetainedAgentBusyError):
        await owner.continue_agent_async(handle, "another")
    with pytest.raises(RetainedAgentBusyError):
        owner.release_agent(handle)
    assert owner.cancel_agent(handle, "user stopped it") is True
    result = await asyncio.wait_for(task, 5)
    assert result.stop_reason == "user stopped it"
    (record,) = owner.list_subagents()
    assert record.status == "stopped"
    assert owner.cancel_agent(handle) is False
    owner.release_agent(handle)
    assert len(model.requests) == 1


def test_the_handle_budget_holds_across_tasks(tmp_path: Path) -> None:
    # Its own workspace: with the default (the cwd) it left a.txt and b.txt in the repo.
    owner = Agent(ScriptedModel([]), working_dir=tmp_path)
    model = ScriptedModel([write("a.txt"), "one", write("b.txt"), "two", "three"])
    other = Agent(model, tools=[tool_write_file()], working_dir=tmp_path)
    handle = owner.retain_agent(other, UsageLimits(max_requests=3))
    assert owner.continue_agent(handle, "first").stop_reason == "complete"  # 2 requests
    second = owner.continue_agent(handle, "second")
    assert second.stop_reason == "request_limit" and len(model.requests) == 3
    assert "limit of 1 model requests" in second.stop_message  # clamped to what was left


async def test_a_narrowed_owner_narrows_the_retained_agent(tmp_path: Path) -> None:
    owner = Agent(ScriptedModel([]), working_dir=tmp_path, permissions=Permissions())
    model = ScriptedModel([write("a.txt"), "wrote", write("b.txt"), "tried"])
    other = Agent(model, tools=[tool_write_file()], working_dir=tmp_path)
    handle = owner.retain_agent(other, BUDGET)
    await owner.continue_agent_async(handle, "write a")
    assert (tmp_path / "a.txt").exists()
    owner.set_permission_mode("readonly")
    result = await owner.continue_agent_async(handle, "write b")
    assert not (tmp_path / "b.txt").exists()
    denied = [e for e in result.events if e.type == "permission" and e.decision == "deny"]
    assert denied and "delegating agent" in denied[0].reason


async def test_a_narrowing_during_a_task_applies_at_the_next_call(tmp_path: Path) -> None:
    owner = Agent(ScriptedModel([]), working_dir=tmp_path)

    def script(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        if messages[-1]["role"] == "user":
            owner.set_permission_mode("readonly")  # mid-task, before its first call
            return write("c.txt")
        return "tried"

    other = Agent(FunctionModel(script), tools=[tool_write_file()], working_dir=tmp_path)
    handle = owner.retain_agent(other, BUDGET)
    await owner.continue_agent_async(handle, "write c")
    assert not (tmp_path / "c.txt").exists()


def test_a_task_sent_from_the_owners_run_draws_on_that_run() -> None:
    other_model = ScriptedModel(["a", "b", "c"])
    other = Agent(other_model)
    holder: dict[str, str] = {}

    async def ask_specialist(task: str) -> str:
        "Ask the retained specialist."
        result = await owner.continue_agent_async(holder["handle"], task)
        return result.response

    owner = Agent(
        ScriptedModel(
            [
                ScriptedReply(tool_calls=[ScriptedToolCall("ask_specialist", {"task": "t1"})]),
                ScriptedReply(tool_calls=[ScriptedToolCall("ask_specialist", {"task": "t2"})]),
                "done",
            ]
        ),
        tools=[local_tool(ask_specialist)],
        usage_limits=UsageLimits(max_requests=3),
    )
    holder["handle"] = owner.retain_agent(other, BUDGET)
    result = owner.run_sync("go")
    # 2 owner requests + 1 specialist request use up the owner's run budget of 3.
    assert result.stop_reason == "request_limit"
    assert len(other_model.requests) == 1
    second = owner.list_subagents()[1]
    assert (second.status, second.stop_reason) == ("completed", "request_limit")


def test_disclosure_of_retained_tasks() -> None:
    owner = Agent(
        ScriptedModel([]),
        delegation_disclosure=DelegationDisclosure(
            authorize=lambda who, scope, record: who == scope.get("owner")
        ),
        delegation_scope={"owner": "ana"},
    )
    handle = owner.retain_agent(Agent(ScriptedModel(["secret result"])), BUDGET)
    owner.continue_agent(handle, "task")
    (view,) = owner.inspect_subagents("ana")
    assert view["claimed"]["response"] == "secret result"
    assert view["retained"]["handle"] == handle
    assert view["retained"]["total_usage"]["requests"] == 1
    for read in (
        lambda: owner.inspect_subagents("eve"),
        lambda: owner.export_subagents("eve"),
        lambda: owner.observe_subagents("eve"),
    ):
        with pytest.raises(DelegationDisclosureError):
            read()


async def test_observers_see_retained_tasks() -> None:
    owner = Agent(
        ScriptedModel([]), delegation_disclosure=DelegationDisclosure(authorize=lambda *a: True)
    )
    handle = owner.retain_agent(Agent(ScriptedModel(["ok"])), BUDGET)
    subscription = owner.observe_subagents("ana")
    await owner.continue_agent_async(handle, "task")
    await wait_until(lambda: bool(owner.list_subagents()))
    kinds = [(e.kind, e.status) for e in subscription.poll()]
    assert ("status", "running") in kinds and kinds[-1] == ("status", "completed")


def test_a_definition_lead_still_works_beside_retained_agents(tmp_path: Path) -> None:
    lead = LeadAgent(
        ScriptedModel(
            [
                ScriptedReply(
                    tool_calls=[ScriptedToolCall("delegate", {"agent": "h", "task": "hi"})]
                ),
                "lead done",
            ]
        ),
        subagents=[AgentDefinition(name="h", description="Says hi.")],
        subagent_models={"h": ScriptedModel(["hi"])},
        working_dir=tmp_path,
    )
    handle = lead.retain_agent(Agent(ScriptedModel(["kept"])), BUDGET)
    assert lead.run_sync("go").response == "lead done"
    assert lead.continue_agent(handle, "x").response == "kept"
    assert [r.handle is None for r in lead.list_subagents()] == [True, False]
