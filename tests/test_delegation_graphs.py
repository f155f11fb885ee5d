"""Delegation graphs (issue 10): retained agents that delegate to each other through
route tools, through the real engine on ScriptedModel / FunctionModel."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from deputy_shiny import Agent, Permissions, UsageLimits
from deputy_shiny.delegation import DelegationDisclosure, LeadAgent, RouteSpec
from deputy_shiny.errors import (
    DelegationDisclosureError,
    DelegationGraphError,
    InvalidLimitError,
    RetainedAgentReleasedError,
    RetainError,
)
from deputy_shiny.testing import FunctionModel, ScriptedModel, ScriptedReply, ScriptedToolCall
from deputy_shiny.tools import tool_write_file
from tests.helpers import wait_until

BUDGET = UsageLimits(max_requests=20)


def ask(tool_name: str, task: str) -> ScriptedReply:
    return ScriptedReply(tool_calls=[ScriptedToolCall(tool_name, {"task": task})])


def route(target: str, **changes: Any) -> dict[str, Any]:
    return {"target": target, "description": f"Ask {target}.", **changes}


def tool_ends(result: Any, name: str) -> list[tuple[bool, str]]:
    return [
        (e.is_error, e.output)
        for e in result.events
        if e.type == "tool_end" and e.tool_name == name
    ]


def chain() -> tuple[Agent, Agent, Agent, ScriptedModel, ScriptedModel]:
    """root -> A -> B, each answering once its delegate has."""
    a_model = ScriptedModel([ask("ask_b", "What is 6 x 7?"), "B says 42."])
    b_model = ScriptedModel(["42"])
    root = Agent(ScriptedModel([ask("ask_a", "Find the answer."), "The answer is 42."]))
    return root, Agent(a_model), Agent(b_model), a_model, b_model


ROUTES: dict[str, Any] = {"root": {"ask_a": route("a")}, "a": {"ask_b": route("b")}}


# --------------------------------------------------------------------------- basics


def test_answers_flow_back_along_a_chain() -> None:
    root, a, b, a_model, _ = chain()
    handles = root.retain_agent_graph({"a": a, "b": b}, ROUTES, BUDGET)
    assert set(handles) == {"a", "b"}
    result = root.run_sync("Go")
    assert result.response == "The answer is 42."
    assert tool_ends(result, "ask_a") == [(False, "B says 42.")]
    # B's answer reached A as its route tool's result.
    assert "42" in str(a_model.requests[1]["messages"][-1])
    a_record, b_record = root.list_subagents()
    assert (a_record.agent_name, a_record.status, a_record.handle) == (
        "a",
        "completed",
        handles["a"],
    )
    assert (b_record.agent_name, b_record.response) == ("b", "42")
    assert a_record.parent_delegation_id is None
    assert b_record.parent_delegation_id == a_record.delegation_id
    contexts = root.get_subagent_contexts()
    assert contexts[b_record.delegation_id].depth == 2  # type: ignore[union-attr]
    # Three requests ran in the graph (the root's own two are not in it).
    assert root.delegation_graph_usage().requests == 3


def test_route_tools_are_honest_and_added_before_the_fingerprint() -> None:
    root, a, b, *_ = chain()
    handles = root.retain_agent_graph(
        {"a": a, "b": b},
        {
            "root": {"ask_a": RouteSpec(target="a", description="Ask a.")},
            "a": {"ask_b": route("b")},
        },
        BUDGET,
    )
    ask_b = a.get_tools()["ask_b"]
    annotations = ask_b.annotations  # type: ignore[union-attr]
    assert (annotations.read_only_hint, annotations.destructive_hint) == (True, False)
    assert (annotations.open_world_hint, annotations.idempotent_hint) == (False, False)
    assert ask_b.description == "Ask b."  # type: ignore[union-attr]
    # Adding the route tools did not make the retained agents read as changed.
    assert root.continue_agent(handles["a"], "Find it.").response == "B says 42."


def test_continue_agent_on_a_graph_handle_may_route_further() -> None:
    root, a, b, _, b_model = chain()
    handles = root.retain_agent_graph({"a": a, "b": b}, ROUTES, BUDGET)
    assert root.continue_agent(handles["a"], "Find the answer.").response == "B says 42."
    assert len(b_model.requests) == 1
    first, second = root.list_subagents()
    assert second.parent_delegation_id == first.delegation_id
    with pytest.raises(DelegationGraphError, match="release_agent_graph"):
        root.release_agent(handles["a"])


# --------------------------------------------------------------------------- refusals


def test_a_cycle_back_to_a_running_agent_fails_at_once() -> None:
    a_model = ScriptedModel([ask("ask_b", "check"), "done"])
    b_model = ScriptedModel([ask("ask_a", "back to you"), "could not ask a"])
    root = Agent(ScriptedModel([ask("ask_a", "start"), "finished"]))
    a, b = Agent(a_model), Agent(b_model)
    routes = {"root": {"ask_a": route("a")}, "a": {"ask_b": route("b")}, "b": {"ask_a": route("a")}}
    root.retain_agent_graph({"a": a, "b": b}, routes, BUDGET)
    assert root.run_sync("go").response == "finished"
    error = [m for m in b_model.requests[1]["messages"] if m["role"] == "tool"][-1]["content"]
    assert "Delegation refused" in error and "already running" in error
    _, b_rec, again = root.list_subagents()
    assert (again.agent_name, again.status, again.input_error) == ("a", "not_started", "invalid")
    assert again.parent_delegation_id == b_rec.delegation_id
    assert len(a_model.requests) == 2  # A was never re-entered


def test_limits_add_up_across_the_graph() -> None:
    _, a, b, *_ = chain()
    c_model = ScriptedModel(["never"])
    c = Agent(c_model)
    routes = {**ROUTES, "root": {"ask_a": route("a"), "ask_c": route("c")}}
    root = Agent(ScriptedModel([ask("ask_a", "first"), ask("ask_c", "second"), "end"]))
    root.retain_agent_graph({"a": a, "b": b, "c": c}, routes, UsageLimits(max_requests=3))
    result = root.run_sync("go")
    # A (2 requests) and B (1) spent the graph's 3: C stops before its first request.
    assert result.response == "end"
    assert c_model.requests == []
    *_, c_record = root.list_subagents()
    assert (c_record.agent_name, c_record.stop_reason) == ("c", "request_limit")
    assert root.delegation_graph_usage().requests == 3


def test_a_route_limit_is_clamped_and_the_root_run_pays_too() -> None:
    a_model = ScriptedModel([ask("nothing", "x"), ask("nothing", "y"), "late"])
    root = Agent(
        ScriptedModel([ask("ask_a", "work"), "end"]), usage_limits=UsageLimits(max_requests=3)
    )
    routes = {"root": {"ask_a": route("a", usage_limits=UsageLimits(max_requests=5))}}
    root.retain_agent_graph({"a": Agent(a_model)}, routes, BUDGET)
    result = root.run_sync("go")
    # The root's run budget of 3: its own first request, then A gets the 2 left.
    (record,) = root.list_subagents()
    assert record.stop_reason == "request_limit" and len(a_model.requests) == 2
    assert result.stop_reason == "request_limit"


async def test_max_concurrency_refuses_rather_than_queues() -> None:
    root_holder: dict[str, Agent] = {}

    async def worker(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        # Hold the slot until the other route call has been refused.
        await wait_until(
            lambda: any(r.status == "not_started" for r in root_holder["root"].list_subagents())
        )
        return "worked"

    call_a = ScriptedToolCall("ask_a", {"task": "one"})
    call_b = ScriptedToolCall("ask_b", {"task": "two"})
    root = Agent(ScriptedModel([ScriptedReply(tool_calls=[call_a, call_b]), "end"]))
    root_holder["root"] = root
    routes = {"root": {"ask_a": route("a"), "ask_b": route("b")}}
    a, b = Agent(FunctionModel(worker)), Agent(FunctionModel(worker))
    root.retain_agent_graph({"a": a, "b": b}, routes, BUDGET, max_concurrency=1)
    result = await root.run_async("go")
    outputs = sorted(tool_ends(result, "ask_a") + tool_ends(result, "ask_b"))
    assert outputs[0] == (False, "worked")
    refused = outputs[1]
    assert refused[0] and "max_concurrency" in refused[1]
    assert "refused rather than queued" in refused[1]
    statuses = sorted((r.status, r.input_error) for r in root.list_subagents())
    assert statuses == [("completed", None), ("not_started", "unauthorized")]


def test_max_depth_bounds_the_chain() -> None:
    root, a, b, _, b_model = chain()
    root.retain_agent_graph({"a": a, "b": b}, ROUTES, BUDGET, max_depth=1)
    root.run_sync("go")
    assert b_model.requests == []
    _, refused = root.list_subagents()
    assert (refused.status, refused.input_error) == ("not_started", "unauthorized")
    assert "max_depth" in (refused.error or "")


def test_max_delegations_bounds_the_graph_until_release() -> None:
    root = Agent(ScriptedModel([ask("ask_a", "1"), ask("ask_a", "2"), ask("ask_a", "3"), "end"]))
    a_model = ScriptedModel(["one", "two", "three"])
    handles = root.retain_agent_graph(
        {"a": Agent(a_model)}, {"root": {"ask_a": route("a")}}, BUDGET, max_delegations=2
    )
    result = root.run_sync("go")
    assert [e for e, _ in tool_ends(result, "ask_a")] == [False, False, True]
    assert len(a_model.requests) == 2
    with pytest.raises(DelegationGraphError, match="max_delegations"):
        root.continue_agent(handles["a"], "more")


# --------------------------------------------------------------------------- authority


def write(path: str) -> ScriptedReply:
    return ScriptedReply(
        tool_calls=[ScriptedToolCall("write_file", {"path": path, "content": "x"})]
    )


def test_every_agent_above_in_the_chain_narrows_the_target(tmp_path: Path) -> None:
    full = Permissions(mode="full")
    root = Agent(
        ScriptedModel([ask("ask_a", "plan"), "end"]), working_dir=tmp_path, permissions=full
    )
    a = Agent(
        ScriptedModel([ask("ask_b", "write it"), "asked"]),
        working_dir=tmp_path,
        permissions=Permissions(mode="plan"),
    )
    b_model = ScriptedModel([write("b.txt"), "tried"])
    b = Agent(b_model, tools=[tool_write_file()], working_dir=tmp_path, permissions=full)
    root.retain_agent_graph({"a": a, "b": b}, ROUTES, BUDGET)
    root.run_sync("go")
    assert not (tmp_path / "b.txt").exists()
    denial = [m for m in b_model.requests[1]["messages"] if m["role"] == "tool"][-1]["content"]
    assert "Denied" in denial and "delegating agent" in denial


def test_the_roots_narrowing_reaches_the_end_of_the_chain(tmp_path: Path) -> None:
    full = Permissions(mode="full")
    root = Agent(ScriptedModel([]), working_dir=tmp_path, permissions=full)
    a = Agent(
        ScriptedModel([ask("ask_b", "write it"), "asked"]), working_dir=tmp_path, permissions=full
    )
    b = Agent(
        ScriptedModel([write("d.txt"), "tried"]),
        tools=[tool_write_file()],
        working_dir=tmp_path,
        permissions=full,
    )
    handles = root.retain_agent_graph({"a": a, "b": b}, {"a": {"ask_b": route("b")}}, BUDGET)
    root.set_permission_mode("readonly")
    root.continue_agent(handles["a"], "go")
    assert not (tmp_path / "d.txt").exists()


# --------------------------------------------------------------------------- release


async def test_cancelling_a_member_stops_its_delegations_too() -> None:
    started = asyncio.Event()

    async def slow(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        started.set()
        await asyncio.sleep(30)
        return "never"

    _, a, _, _, _ = chain()
    root, b = Agent(ScriptedModel([])), Agent(FunctionModel(slow))
    handles = root.retain_agent_graph({"a": a, "b": b}, ROUTES, BUDGET)
    task = asyncio.create_task(root.continue_agent_async(handles["a"], "go"))
    await asyncio.wait_for(started.wait(), 5)
    assert root.cancel_agent(handles["a"], "user stopped it") is True
    result = await asyncio.wait_for(task, 5)
    assert result.stop_reason == "user stopped it"
    assert [(r.agent_name, r.status) for r in root.list_subagents()] == [
        ("a", "stopped"),
        ("b", "stopped"),
    ]
    root.release_agent_graph()


async def test_release_errors_while_running_and_works_after() -> None:
    started = asyncio.Event()
    go = asyncio.Event()

    async def slow(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        started.set()
        await go.wait()
        return "slow answer"

    root, a, b, *_ = chain()
    b = Agent(FunctionModel(slow))
    handles = root.retain_agent_graph({"a": a, "b": b}, ROUTES, BUDGET)
    with pytest.raises(DelegationGraphError, match="already has a delegation graph"):
        root.retain_agent_graph({"c": Agent(ScriptedModel([]))}, {}, BUDGET)
    run = asyncio.create_task(root.run_async("go"))
    await asyncio.wait_for(started.wait(), 5)
    with pytest.raises(DelegationGraphError, match="a, b are running"):
        root.release_agent_graph()
    go.set()
    assert (await asyncio.wait_for(run, 5)).response == "The answer is 42."
    root.release_agent_graph()
    assert "ask_a" not in root.get_tools() and "ask_b" not in a.get_tools()
    assert root.list_subagents() == []
    with pytest.raises(RetainedAgentReleasedError):
        await root.continue_agent_async(handles["a"], "again")
    with pytest.raises(DelegationGraphError, match="no delegation graph"):
        root.delegation_graph_usage()
    with pytest.raises(DelegationGraphError, match="no delegation graph"):
        root.release_agent_graph()
    # The members are free again, and a new graph may be retained.
    b.set_permission_mode("readonly")
    root.retain_agent_graph({"a": a}, {}, BUDGET)


def test_what_retain_agent_graph_refuses() -> None:
    root = Agent(ScriptedModel([]))
    a = Agent(ScriptedModel([]), tools=[tool_write_file()])
    cases: list[tuple[Any, Any, Any, type[Exception], str]] = [
        ({"root": a}, {}, BUDGET, DelegationGraphError, "reserved"),
        ({"a": a, "b": a}, {}, BUDGET, DelegationGraphError, "twice"),
        ({"a": a}, {"x": {"t": route("a")}}, BUDGET, DelegationGraphError, "unknown source"),
        ({"a": a}, {"root": {"t": route("zz")}}, BUDGET, DelegationGraphError, "not an agent"),
        ({"a": a}, {"root": {"t": route("root")}}, BUDGET, DelegationGraphError, "not an agent"),
        ({"a": a}, {"a": {"write_file": route("a")}}, BUDGET, DelegationGraphError, "already"),
        ({"a": a}, {"root": {"bad name": route("a")}}, BUDGET, DelegationGraphError, "name"),
        ({"a": a}, {"root": {"t": {"target": "a"}}}, BUDGET, DelegationGraphError, "not a route"),
        ({"a": a}, {}, UsageLimits(), InvalidLimitError, "max_requests"),
        ({"a": LeadAgent(ScriptedModel([]), subagents=[])}, {}, BUDGET, RetainError, "Lead"),
        ({"a": root}, {}, BUDGET, RetainError, "itself"),
    ]
    for agents, routes, limits, error, says in cases:
        with pytest.raises(error, match=says):
            root.retain_agent_graph(agents, routes, limits)
        # Nothing was left behind by a refusal.
        assert list(a.get_tools()) == ["write_file"]
        a.set_permission_mode("standard")  # not retained
    with pytest.raises(DelegationGraphError, match="max_concurrency"):
        root.retain_agent_graph({"a": a}, {}, BUDGET, max_concurrency=0)


# --------------------------------------------------------------------------- records


def test_graph_records_pass_the_disclosure_policy() -> None:
    root, a, b, *_ = chain()
    root = Agent(
        ScriptedModel([ask("ask_a", "Find the answer."), "The answer is 42."]),
        delegation_disclosure=DelegationDisclosure(
            authorize=lambda who, scope, record: who == scope.get("owner")
        ),
        delegation_scope={"owner": "ana"},
    )
    handles = root.retain_agent_graph({"a": a, "b": b}, ROUTES, BUDGET)
    subscription = root.observe_subagents("ana")
    root.run_sync("go")
    views = root.inspect_subagents("ana", transcript=True)
    assert [v["agent_name"] for v in views] == ["a", "b"]
    assert views[1]["retained"]["handle"] == handles["b"]
    assert views[0]["claimed"]["response"] == "B says 42."
    assert any(e.kind == "status" and e.status == "completed" for e in subscription.poll())
    for read in (
        lambda: root.inspect_subagents("eve"),
        lambda: root.export_subagents("eve"),
        lambda: root.observe_subagents("eve"),
        lambda: root.read_subagent_result(
            "eve", views[0]["delegation_id"], views[0]["claimed"]["result_reference"]
        ),
    ):
        with pytest.raises(DelegationDisclosureError):
            read()
