"""Delegation through the real engine: a LeadAgent's subagents, their authority (never
more than the lead's, even after the lead narrows mid-run), the budget they share,
concurrency and depth limits, cancellation, observation and disclosure."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from deputy_shiny import (
    Agent,
    HookMatcher,
    Permissions,
    UsageLimits,
    tool,
    tool_annotations,
)
from deputy_shiny.delegation import (
    AgentDefinition,
    DelegationDisclosure,
    DelegationManifest,
    DelegationObservation,
    LeadAgent,
    delegation_history,
)
from deputy_shiny.errors import ConfigurationError, DelegationDisclosureError, DelegationError
from deputy_shiny.testing import ScriptedModel, ScriptedReply, ScriptedToolCall
from deputy_shiny.tools import tool_read_file, tool_write_file
from tests.helpers import assert_consistent, local_tool, wait_until


def delegate(agent: str, task: str, id: str | None = None) -> ScriptedToolCall:
    return ScriptedToolCall("delegate", {"agent": agent, "task": task}, id=id)


def calls(*tool_calls: ScriptedToolCall) -> ScriptedReply:
    return ScriptedReply(tool_calls=list(tool_calls))


def writer(**changes: Any) -> AgentDefinition:
    fields: dict[str, Any] = {
        "name": "writer",
        "description": "Writes files.",
        "prompt": "You write files.",
        "tools": ["write_file", "read_file"],
    }
    fields.update(changes)
    return AgentDefinition(**fields)


def tool_outputs(result: Any, name: str) -> list[str]:
    return [e.output for e in result.events if e.type == "tool_end" and e.tool_name == name]


# --------------------------------------------------------------------------- basics


async def test_a_delegation_runs_the_subagent_and_answers_the_lead(tmp_path: Path) -> None:
    hooks: list[tuple[str, Any]] = []
    sub = ScriptedModel(
        [calls(ScriptedToolCall("write_file", {"path": "a.txt", "content": "hi"})), "Wrote a.txt."]
    )
    lead_model = ScriptedModel([calls(delegate("writer", "Write a.txt")), "Done."])
    lead = LeadAgent(
        lead_model,
        tools=[tool_write_file(), tool_read_file()],
        working_dir=tmp_path,
        permissions=Permissions(mode="full"),
        subagents=[writer()],
        subagent_models={"writer": sub},
        hooks=[
            HookMatcher("SubagentStart", lambda context: hooks.append(("start", context))),
            HookMatcher("SubagentStop", lambda context: hooks.append(("stop", context))),
        ],
    )
    result = await lead.run_async("Get a.txt written")
    assert result.response == "Done."
    assert (tmp_path / "a.txt").read_text() == "hi"
    assert tool_outputs(result, "delegate") == ["Wrote a.txt."]
    (record,) = lead.list_subagents()
    assert (record.agent_name, record.status, record.stop_reason) == (
        "writer",
        "completed",
        "complete",
    )
    assert record.response == "Wrote a.txt." and record.usage is not None
    assert record.usage.requests == 2 and record.agent_id != lead.agent_id
    assert record.session_id == lead.session_id  # the same session (and its sandbox)
    assert [kind for kind, _ in hooks] == ["start", "stop"]
    assert hooks[0][1].details["subagent"] == "writer" and hooks[1][1].reason == "complete"
    # The subagent saw only its task, never the lead's conversation.
    sub_messages = sub.requests[0]["messages"]
    assert [m["role"] for m in sub_messages] == ["system", "user"]
    assert sub_messages[1]["content"] == "Write a.txt"
    manifest = lead.get_subagent_contexts(record.delegation_id)[record.delegation_id]
    assert isinstance(manifest, DelegationManifest)
    assert manifest.tools == ("read_file", "write_file") and manifest.task == "Write a.txt"
    redacted = lead.get_subagent_contexts(redact=True)[record.delegation_id]
    assert isinstance(redacted, DelegationManifest)
    assert (redacted.task, redacted.system_prompt) == ("", "")
    assert redacted.tools == manifest.tools  # the metadata stays
    current = lead.get_subagent_contexts(view="current")[record.delegation_id]
    assert isinstance(current, dict) and current["system_prompt"] == "You write files."
    with pytest.raises(DelegationError, match="initial"):
        lead.get_subagent_contexts(view="current", redact=True)
    turns = lead.get_subagent_messages()[record.delegation_id]
    assert turns[-1].text == "Wrote a.txt."
    assert lead.get_subagent_results(agent_name="writer")[0].delegation_id == record.delegation_id
    assert_consistent(lead)


@pytest.mark.parametrize(
    ("arguments", "input_error", "says"),
    [
        ({"agent": "nobody", "task": "x"}, "invalid", "no subagent 'nobody'"),
        ({"agent": "writer", "task": "   "}, "missing", "task is empty"),
        ({"agent": "writer", "task": "x" * (64 * 1024 + 1)}, "oversized", "over 64 KiB"),
    ],
)
async def test_bad_tasks_are_refused_before_anything_runs(
    tmp_path: Path, arguments: dict[str, str], input_error: str, says: str
) -> None:
    sub = ScriptedModel([])
    lead = LeadAgent(
        ScriptedModel([calls(ScriptedToolCall("delegate", arguments)), "ok"]),
        tools=[tool_write_file(), tool_read_file()],
        working_dir=tmp_path,
        subagents=[writer()],
        subagent_models={"writer": sub},
    )
    result = await lead.run_async("go")
    output = tool_outputs(result, "delegate")[0]
    if input_error == "invalid":
        assert "nobody" in output  # the schema's enum refuses it first
        assert not lead.list_subagents()
    else:
        assert says in output
        (record,) = lead.list_subagents()
        assert (record.status, record.input_error) == ("not_started", input_error)
    assert sub.requests == []


async def test_a_subagent_registered_later_is_offered_and_delegated_to(tmp_path: Path) -> None:
    reader = AgentDefinition(name="reader", description="Reads files.", tools=["read_file"])
    (tmp_path / "a.txt").write_text("hello")
    lead_model = ScriptedModel(
        [
            calls(delegate("reader", "Read a.txt")),  # first run: reader is not there yet
            "No reader.",
            calls(delegate("reader", "Read a.txt")),
            "The reader says hello.",
        ]
    )
    sub = ScriptedModel([calls(ScriptedToolCall("read_file", {"path": "a.txt"})), "It says hello."])
    lead = LeadAgent(
        lead_model,
        tools=[tool_write_file(), tool_read_file()],
        working_dir=tmp_path,
        subagents=[writer()],
        subagent_models={"writer": ScriptedModel([])},
    )
    first = await lead.run_async("Ask the reader")
    assert "reader" in tool_outputs(first, "delegate")[0]  # refused by the tool's schema
    assert lead.list_subagents() == []

    assert lead.register_sub_agent(reader, model=sub) is lead
    assert lead.available_sub_agents() == ["writer", "reader"]
    result = await lead.run_async("Ask the reader again")

    # The model was offered the new choice, in the schema and the description alike.
    (offered,) = [t for t in lead_model.requests[2]["tools"] if t["function"]["name"] == "delegate"]
    function = offered["function"]
    assert function["parameters"]["properties"]["agent"]["enum"] == ["reader", "writer"]
    assert "- reader: Reads files." in function["description"]
    (old,) = [t for t in lead_model.requests[0]["tools"] if t["function"]["name"] == "delegate"]
    assert old["function"]["parameters"]["properties"]["agent"]["enum"] == ["writer"]
    assert result.response == "The reader says hello."
    (record,) = lead.list_subagents()
    assert (record.agent_name, record.status, record.response) == (
        "reader",
        "completed",
        "It says hello.",
    )
    assert "hello" in sub.requests[1]["messages"][-1]["content"]  # it really read the file
    assert_consistent(lead)


def test_register_sub_agent_refuses_a_clash_and_keeps_a_removed_tool_removed(
    tmp_path: Path,
) -> None:
    lead = LeadAgent(ScriptedModel([]), working_dir=tmp_path)
    assert lead.available_sub_agents() == [] and "delegate" not in lead.get_tools()
    lead.register_sub_agent(writer())
    with pytest.raises(ConfigurationError, match="already a subagent named 'writer'"):
        lead.register_sub_agent(writer(description="Another."))
    with pytest.raises(ConfigurationError, match="takes an AgentDefinition"):
        lead.register_sub_agent({"name": "x"})  # type: ignore[arg-type]
    lead.register_sub_agent(writer(description="Writes better."), replace=True)
    assert "Writes better." in lead.get_tools()["delegate"].description
    assert lead.available_sub_agents() == ["writer"]
    # The host took the delegate tool away: registering a subagent never brings it back.
    lead.set_tools([])
    lead.register_sub_agent(AgentDefinition(name="other", description="Other."))
    assert lead.available_sub_agents() == ["writer", "other"]
    assert "delegate" not in lead.get_tools()


# --------------------------------------------------------------------------- authority


async def test_a_subagent_never_gets_a_tool_its_lead_lacks(tmp_path: Path) -> None:
    sub = ScriptedModel([])
    lead = LeadAgent(
        ScriptedModel([calls(delegate("writer", "write")), "ok"]),
        tools=[tool_read_file()],  # no write_file
        working_dir=tmp_path,
        subagents=[writer()],
        subagent_models={"writer": sub},
    )
    result = await lead.run_async("go")
    assert "write_file" in tool_outputs(result, "delegate")[0]
    (record,) = lead.list_subagents()
    assert record.status == "failed" and "write_file" in (record.error or "")
    assert sub.requests == []


async def test_a_subagent_mode_can_only_be_narrower(tmp_path: Path) -> None:
    sub = ScriptedModel([])
    lead = LeadAgent(
        ScriptedModel([calls(delegate("writer", "write")), "ok"]),
        tools=[tool_write_file(), tool_read_file()],
        working_dir=tmp_path,
        permissions=Permissions(mode="plan"),
        subagents=[writer(permission_mode="full")],
        subagent_models={"writer": sub},
    )
    await lead.run_async("go")
    (record,) = lead.list_subagents()
    assert record.status == "failed" and "permissions only narrow" in (record.error or "")
    assert sub.requests == []


async def test_a_plan_mode_lead_keeps_its_subagent_from_writing(tmp_path: Path) -> None:
    sub = ScriptedModel(
        [calls(ScriptedToolCall("write_file", {"path": "a.txt", "content": "x"})), "tried"]
    )
    lead = LeadAgent(
        ScriptedModel([calls(delegate("writer", "write")), "ok"]),
        tools=[tool_write_file(), tool_read_file()],
        working_dir=tmp_path,
        permissions=Permissions(mode="plan"),
        subagents=[writer()],
        subagent_models={"writer": sub},
    )
    await lead.run_async("go")
    assert not (tmp_path / "a.txt").exists()
    (turns,) = lead.get_subagent_messages().values()
    (denied,) = [r for t in turns for r in t.tool_results]
    assert denied.is_error and "Denied" in denied.output


async def test_narrowing_the_lead_mid_run_narrows_its_running_subagent(tmp_path: Path) -> None:
    lead_holder: list[LeadAgent] = []

    def narrow_the_lead() -> str:
        """Narrow the lead (as a person would, from the mode switcher)."""
        lead_holder[0].set_permission_mode("readonly")
        return "narrowed"

    write = "write_file"
    sub = ScriptedModel(
        [
            calls(ScriptedToolCall(write, {"path": "first.txt", "content": "1"})),
            calls(ScriptedToolCall("narrow", {})),
            calls(ScriptedToolCall(write, {"path": "second.txt", "content": "2"})),
            "done",
        ]
    )
    narrow = local_tool(narrow_the_lead, name="narrow")
    lead = LeadAgent(
        ScriptedModel([calls(delegate("writer", "write two files")), "ok"]),
        tools=[tool_write_file(), tool_read_file(), narrow],
        working_dir=tmp_path,
        permissions=Permissions(mode="full"),
        subagents=[writer(tools=["write_file", "read_file", "narrow"])],
        subagent_models={"writer": sub},
    )
    lead_holder.append(lead)
    await lead.run_async("go")
    assert (tmp_path / "first.txt").exists()
    assert not (tmp_path / "second.txt").exists()  # the lead is readonly now
    (turns,) = lead.get_subagent_messages().values()
    last = [r for t in turns for r in t.tool_results][-1]
    assert last.is_error and "lead agent's permissions refuse it" in last.output


async def test_a_tool_taken_from_the_lead_mid_run_is_gone_for_its_subagent(
    tmp_path: Path,
) -> None:
    lead_holder: list[LeadAgent] = []

    def drop_write() -> str:
        """Take write_file away from the lead."""
        lead = lead_holder[0]
        lead.set_tools([t for n, t in lead.get_tools().items() if n != "write_file"])
        return "dropped"

    sub = ScriptedModel(
        [
            calls(ScriptedToolCall("drop", {})),
            calls(ScriptedToolCall("write_file", {"path": "a.txt", "content": "1"})),
            "done",
        ]
    )
    lead = LeadAgent(
        ScriptedModel([calls(delegate("writer", "w")), "ok"]),
        tools=[tool_write_file(), tool_read_file(), local_tool(drop_write, name="drop")],
        working_dir=tmp_path,
        permissions=Permissions(mode="full"),
        subagents=[writer(tools=["write_file", "drop"])],
        subagent_models={"writer": sub},
    )
    lead_holder.append(lead)
    await lead.run_async("go")
    assert not (tmp_path / "a.txt").exists()
    (turns,) = lead.get_subagent_messages().values()
    last = [r for t in turns for r in t.tool_results][-1]
    assert "does not have the tool 'write_file'" in last.output


async def test_the_leads_callback_judges_its_subagents_calls_too(tmp_path: Path) -> None:
    seen: list[str | None] = []

    def policy(name: str, tool_input: dict[str, Any], context: Any) -> Any:
        from deputy_shiny import PermissionResultAllow, PermissionResultDeny

        seen.append(context.agent_id)
        if tool_input.get("path") == "secret.txt":
            return PermissionResultDeny("not that file")
        return PermissionResultAllow()

    sub = ScriptedModel(
        [
            calls(ScriptedToolCall("write_file", {"path": "secret.txt", "content": "x"})),
            "done",
        ]
    )
    lead = LeadAgent(
        ScriptedModel([calls(delegate("writer", "w")), "ok"]),
        tools=[tool_write_file(), tool_read_file()],
        working_dir=tmp_path,
        permissions=Permissions(mode="full", can_use_tool=policy),
        subagents=[writer()],
        subagent_models={"writer": sub},
    )
    await lead.run_async("go")
    assert not (tmp_path / "secret.txt").exists()
    (record,) = lead.list_subagents()
    assert record.agent_id in seen  # the callback was asked about the subagent's call


async def test_subagent_code_runs_in_the_same_session_sandbox(tmp_path: Path) -> None:
    from deputy_shiny import tool_run_bash
    from deputy_shiny.sandbox import prepare_workspace

    workspace = prepare_workspace(tmp_path / "session")
    (tmp_path / "other-session").mkdir()  # a sibling the sandbox must not show
    listing = f"pwd; echo $HOME; ls {tmp_path}"
    sub = ScriptedModel([calls(ScriptedToolCall("run_bash", {"command": listing})), "ran"])
    lead = LeadAgent(
        ScriptedModel([calls(delegate("coder", "run it")), "ok"]),
        tools=[tool_run_bash()],
        working_dir=workspace,
        permissions=Permissions(mode="full", run_bash=True),
        subagents=[AgentDefinition(name="coder", description="Runs code.", tools=["run_bash"])],
        subagent_models={"coder": sub},
    )
    await lead.run_async("go")
    (turns,) = lead.get_subagent_messages().values()
    (result,) = [r for t in turns for r in t.tool_results]
    lines = result.output.splitlines()
    assert lines[0] == str(workspace) and lines[1] == str(workspace)  # the lead's workspace
    assert "session" in lines[2:] and "other-session" not in result.output


# --------------------------------------------------------------------------- budget


async def test_a_subagent_draws_on_the_leads_request_budget(tmp_path: Path) -> None:
    looping = [calls(ScriptedToolCall("read_file", {"path": f"f{i}.txt"})) for i in range(10)]
    sub = ScriptedModel([*looping, "never"])
    lead_model = ScriptedModel([calls(delegate("writer", "read many")), "ok"])
    lead = LeadAgent(
        lead_model,
        tools=[tool_write_file(), tool_read_file()],
        working_dir=tmp_path,
        usage_limits=UsageLimits(max_requests=4),
        subagents=[writer()],
        subagent_models={"writer": sub},
    )
    result = await lead.run_async("go")
    (record,) = lead.list_subagents()
    assert record.stop_reason == "request_limit"
    # The lead's first request, then the subagent's: 4 in all, the lead's budget.
    assert record.usage is not None and record.usage.requests == 3
    assert len(lead_model.requests) == 1
    assert result.stop_reason == "request_limit"  # nothing left for the lead either
    manifest = lead.get_subagent_contexts()[record.delegation_id]
    assert manifest is not None and manifest.limits["max_requests"] == 3


async def test_a_subagent_cannot_spend_more_tool_calls_than_the_lead_has(tmp_path: Path) -> None:
    reads = [ScriptedToolCall("read_file", {"path": f"f{i}.txt"}) for i in range(5)]
    sub = ScriptedModel([calls(*reads), "done"])
    lead = LeadAgent(
        ScriptedModel([calls(delegate("writer", "read")), "ok"]),
        tools=[tool_write_file(), tool_read_file()],
        working_dir=tmp_path,
        usage_limits=UsageLimits(max_tool_calls=3),
        subagents=[writer()],
        subagent_models={"writer": sub},
    )
    await lead.run_async("go")
    (record,) = lead.list_subagents()
    assert record.stop_reason == "tool_call_limit"
    assert record.usage is not None and record.usage.tool_calls == 2  # 3 minus the delegate


# --------------------------------------------------------------------------- limits


async def test_concurrency_is_limited_and_the_rest_queue(tmp_path: Path) -> None:
    running = peak = 0
    release = asyncio.Event()

    async def work() -> str:
        """Work a while."""
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await release.wait()
        running -= 1
        return "worked"

    def sub_reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        if messages[-1]["role"] == "tool":
            return "finished"
        return calls(ScriptedToolCall("work", {}))

    from deputy_shiny.testing import FunctionModel

    lead = LeadAgent(
        ScriptedModel([calls(*(delegate("worker", f"job {i}") for i in range(3))), "ok"]),
        tools=[local_tool(work, name="work")],
        working_dir=tmp_path,
        subagents=[AgentDefinition(name="worker", description="Works.", tools=["work"])],
        subagent_models={"worker": FunctionModel(sub_reply)},
        max_concurrency=1,
    )
    run = asyncio.ensure_future(lead.run_async("go"))
    await wait_until(lambda: running == 1)
    await asyncio.sleep(0.05)
    statuses = sorted(r.status for r in lead.list_subagents())
    assert statuses == ["queued", "queued", "running"]
    release.set()
    result = await asyncio.wait_for(run, 10)
    assert peak == 1
    assert [r.status for r in lead.list_subagents()] == ["completed"] * 3
    assert tool_outputs(result, "delegate") == ["finished"] * 3


async def test_depth_and_count_limits(tmp_path: Path) -> None:
    nested = AgentDefinition(name="manager", description="Delegates again.", tools=["delegate"])
    sub = ScriptedModel([calls(delegate("manager", "deeper")), "tried"])
    lead = LeadAgent(
        ScriptedModel([calls(delegate("manager", "one")), calls(delegate("manager", "two")), "ok"]),
        working_dir=tmp_path,
        subagents=[nested],
        subagent_models={"manager": sub},
        max_depth=1,
        max_delegations=1,
    )
    result = await lead.run_async("go")
    records = lead.list_subagents()
    # The subagent's own delegation is refused (depth), then the lead's second (count).
    assert [(r.status, r.input_error) for r in records] == [
        ("completed", None),
        ("not_started", "unauthorized"),
        ("not_started", "unauthorized"),
    ]
    assert "nest at most 1 deep" in (records[1].error or "")
    assert "at most 1 times" in tool_outputs(result, "delegate")[-1]


async def test_a_nested_delegation_answers_to_every_agent_above(tmp_path: Path) -> None:
    manager = AgentDefinition(
        name="manager", description="Delegates.", tools=["delegate", "write_file"]
    )
    worker = AgentDefinition(name="worker", description="Writes.", tools=["write_file"])
    manager_model = ScriptedModel([calls(delegate("worker", "write")), "managed"])
    worker_model = ScriptedModel(
        [calls(ScriptedToolCall("write_file", {"path": "deep.txt", "content": "x"})), "wrote"]
    )
    lead = LeadAgent(
        ScriptedModel([calls(delegate("manager", "manage")), "ok"]),
        tools=[tool_write_file()],
        working_dir=tmp_path,
        permissions=Permissions(mode="full", tool_denylist=()),
        subagents=[
            manager.model_copy(update={"permission_mode": "plan"}),
            worker,
        ],
        subagent_models={"manager": manager_model, "worker": worker_model},
        max_depth=2,
    )
    await lead.run_async("go")
    # The worker is full, but the plan-mode manager above it refuses the write.
    assert not (tmp_path / "deep.txt").exists()
    records = {r.agent_name: r for r in lead.list_subagents()}
    assert records["worker"].parent_delegation_id == records["manager"].delegation_id
    worker_turns = lead.get_subagent_messages(agent_name="worker")[records["worker"].delegation_id]
    (result,) = [r for t in worker_turns for r in t.tool_results]
    assert "permissions refuse it" in result.output


# --------------------------------------------------------------------------- cancellation


def _blocking_lead(tmp_path: Path, started: asyncio.Event, release: asyncio.Event) -> LeadAgent:
    async def wait_long() -> str:
        """Wait a long time."""
        started.set()
        await release.wait()
        return "waited"

    sub = ScriptedModel([calls(ScriptedToolCall("wait_long", {})), "waited it out"])
    return LeadAgent(
        ScriptedModel([calls(delegate("waiter", "wait")), "lead done"]),
        tools=[local_tool(wait_long, name="wait_long")],
        working_dir=tmp_path,
        subagents=[AgentDefinition(name="waiter", description="Waits.", tools=["wait_long"])],
        subagent_models={"waiter": sub},
    )


async def test_interrupting_the_lead_stops_its_subagent(tmp_path: Path) -> None:
    started, release = asyncio.Event(), asyncio.Event()
    lead = _blocking_lead(tmp_path, started, release)
    run = asyncio.ensure_future(lead.run_async("go"))
    await asyncio.wait_for(started.wait(), 5)
    assert lead.interrupt("the user stopped it")
    result = await asyncio.wait_for(run, 5)
    assert result.stop_reason == "the user stopped it" or result.stop_reason == "interrupted"
    (record,) = lead.list_subagents()
    assert record.status == "stopped" and record.completed_at is not None
    assert_consistent(lead)


async def test_interrupt_subagent_stops_only_the_subagent(tmp_path: Path) -> None:
    started, release = asyncio.Event(), asyncio.Event()
    lead = _blocking_lead(tmp_path, started, release)
    run = asyncio.ensure_future(lead.run_async("go"))
    await asyncio.wait_for(started.wait(), 5)
    (record,) = lead.list_subagents()
    assert lead.interrupt_subagent(record.delegation_id, "enough")
    result = await asyncio.wait_for(run, 5)
    assert result.stop_reason == "complete" and result.response == "lead done"
    (record,) = lead.list_subagents()
    assert record.status == "stopped"
    assert "ended with stopped" in tool_outputs(result, "delegate")[0]
    assert not lead.interrupt_subagent(record.delegation_id)  # no longer running
    assert lead.interrupt_subagent("dlg_unknown") is False  # the spec's answer, not an error


# --------------------------------------------------------------------------- disclosure


def _finished_lead(tmp_path: Path, answer: str = "The report.") -> LeadAgent:
    sub = ScriptedModel([calls(ScriptedToolCall("read_file", {"path": "x.txt"})), answer])
    lead = LeadAgent(
        ScriptedModel([calls(delegate("writer", "report")), "ok"]),
        tools=[tool_write_file(), tool_read_file()],
        working_dir=tmp_path,
        subagents=[writer()],
        subagent_models={"writer": sub},
        delegation_scope={"owner": "ana"},
        delegation_disclosure=DelegationDisclosure(
            authorize=lambda requester, scope, record: requester == scope["owner"]
        ),
    )
    lead.run_sync("go")
    return lead


def test_by_default_nobody_sees_anything(tmp_path: Path) -> None:
    sub = ScriptedModel(["fine"])
    lead = LeadAgent(
        ScriptedModel([calls(delegate("writer", "x")), "ok"]),
        tools=[tool_write_file(), tool_read_file()],
        working_dir=tmp_path,
        subagents=[writer()],
        subagent_models={"writer": sub},
    )
    lead.run_sync("go")
    (record,) = lead.list_subagents()
    for read in (
        lambda: lead.inspect_subagents("ana"),
        lambda: lead.export_subagents("ana"),
        lambda: lead.observe_subagents("ana"),
        lambda: lead.read_subagent_result(
            "ana", record.delegation_id, f"deputy://subagent-result/{record.delegation_id}"
        ),
    ):
        with pytest.raises(DelegationDisclosureError):
            read()


def test_a_denied_requester_gets_nothing_and_an_allowed_one_sees_it_all(tmp_path: Path) -> None:
    lead = _finished_lead(tmp_path)
    (record,) = lead.list_subagents()
    with pytest.raises(DelegationDisclosureError):
        lead.inspect_subagents("bob")
    with pytest.raises(DelegationDisclosureError):
        lead.export_subagents("bob", record.delegation_id)
    assert lead.inspect_subagents("ana", "dlg_unknown") == []  # the spec: an empty list
    with pytest.raises(DelegationDisclosureError):
        lead.inspect_subagents("bob", "dlg_unknown")  # still no answer for a stranger
    (view,) = lead.inspect_subagents("ana", transcript=True)
    assert view["observed"]["status"] == "completed"
    assert view["observed"]["tools_called"] == ["read_file"]
    assert view["claimed"]["response"] == "The report."
    assert view["manifest"]["agent_name"] == "writer"
    assert view["transcript"][0]["role"] == "user"
    exported = lead.export_subagents("ana")
    assert delegation_history(exported, DelegationDisclosure(authorize=lambda *a: True), "x")
    strict = DelegationDisclosure(authorize=lambda who, scope, rec: who == "ana")
    assert delegation_history(exported, strict, "ana")[0]["task"] == "report"
    with pytest.raises(DelegationDisclosureError):
        delegation_history(exported, strict, "bob")


def test_long_results_read_in_pages(tmp_path: Path) -> None:
    answer = "".join(f"line {i:05d}\n" for i in range(2000))  # 22,000 characters
    lead = _finished_lead(tmp_path, answer)
    (record,) = lead.list_subagents()
    reference = f"deputy://subagent-result/{record.delegation_id}"
    pages: list[str] = []
    offset: int | None = 0
    while offset is not None:
        page = lead.read_subagent_result("ana", record.delegation_id, reference, offset)
        pages.append(page.text)
        offset = page.next_offset
    assert "".join(pages) == answer and len(pages) == 3
    with pytest.raises(DelegationDisclosureError):
        lead.read_subagent_result("bob", record.delegation_id, reference)
    with pytest.raises(DelegationError, match="not a result"):
        lead.read_subagent_result("ana", record.delegation_id, "deputy://subagent-result/x")


def test_a_redact_hook_shapes_every_view(tmp_path: Path) -> None:
    lead = _finished_lead(tmp_path)
    lead._delegator.host.disclosure = DelegationDisclosure(
        authorize=lambda *args: True,
        redact=lambda view: {**view, "claimed": {"response": "[redacted]"}},
    )
    (view,) = lead.inspect_subagents("anyone")
    assert view["claimed"] == {"response": "[redacted]"}


# --------------------------------------------------------------------------- observation


def test_observers_follow_new_events_and_resume_from_a_cursor(tmp_path: Path) -> None:
    lead = _finished_lead(tmp_path)
    assert lead.observe_subagents("ana").poll() == []  # no cursor: from now on
    subscription = lead.observe_subagents("ana", after=0)  # replay what is kept
    events = subscription.poll()
    kinds = [(e.kind, e.status) for e in events]
    assert kinds[0] == ("status", "queued") and ("status", "running") in kinds
    assert ("tool_start", None) in kinds and kinds[-1][0] == "status"
    assert subscription.poll() == []  # nothing new
    later = lead.observe_subagents("ana", after=events[1].cursor)
    assert later.poll() == events[2:]
    subscription.close()
    assert subscription.poll() == []
    with pytest.raises(DelegationDisclosureError):
        lead.observe_subagents("bob")


def test_observation_keeps_a_bounded_window(tmp_path: Path) -> None:
    sub = ScriptedModel(
        [calls(*(ScriptedToolCall("read_file", {"path": f"{i}"}) for i in range(6))), "ok"]
    )
    lead = LeadAgent(
        ScriptedModel([calls(delegate("writer", "x")), "ok"]),
        tools=[tool_write_file(), tool_read_file()],
        working_dir=tmp_path,
        subagents=[writer()],
        subagent_models={"writer": sub},
        delegation_disclosure=DelegationDisclosure(authorize=lambda *a: True),
        delegation_observation=DelegationObservation(max_events=5),
    )
    lead.run_sync("go")
    subscription = lead.observe_subagents("anyone", after=0)
    assert len(subscription.poll()) == 5 and subscription.missed > 0


# --------------------------------------------------------------------------- construction


def test_bad_configurations_are_clear_errors() -> None:
    from deputy_shiny import ConfigurationError

    model = ScriptedModel([])
    with pytest.raises(ConfigurationError, match="two subagents"):
        LeadAgent(model, subagents=[writer(), writer()])
    with pytest.raises(ConfigurationError, match="max_depth"):
        LeadAgent(model, subagents=[writer()], max_depth=0)
    with pytest.raises(ConfigurationError, match="unknown subagents"):
        LeadAgent(model, subagents=[writer()], subagent_models={"other": model})
    lead = LeadAgent(model, subagents=[writer()])
    schema = lead.get_tools()["delegate"].parameters  # type: ignore[union-attr]
    assert schema["properties"]["agent"]["enum"] == ["writer"]
    assert "Writes files." in lead.get_tools()["delegate"].description  # type: ignore[union-attr]
    assert isinstance(lead, Agent)


def test_annotations_of_the_delegate_tool() -> None:
    lead = LeadAgent(ScriptedModel([]), subagents=[writer()])
    delegate_tool = lead.get_tools()["delegate"]
    assert delegate_tool.annotations == tool_annotations(  # type: ignore[union-attr]
        read_only_hint=True, destructive_hint=False, open_world_hint=False, idempotent_hint=False
    )
    assert tool is not None


async def test_a_subagent_may_use_its_leads_mcp_tools(tmp_path: Path) -> None:
    from deputy_shiny.tools import tool_metadata
    from tests.mcp_servers import in_process, notes_server

    sub = ScriptedModel([calls(ScriptedToolCall("add", {"a": 2, "b": 3})), "It is 5."])
    lead = LeadAgent(
        ScriptedModel([calls(delegate("adder", "add 2 and 3")), "ok"]),
        working_dir=tmp_path,
        subagents=[AgentDefinition(name="adder", description="Adds.", tools=["add"])],
        subagent_models={"adder": sub},
    )
    await lead.load_mcp_async(in_process(notes=notes_server()), servers=["notes"])
    try:
        assert tool_metadata(lead.get_tools()["add"])["source"]["type"] == "mcp"  # type: ignore[arg-type]
        await lead.run_async("go")
    finally:
        await lead.aclose()
    (record,) = lead.list_subagents()
    assert (record.status, record.response) == ("completed", "It is 5.")
    (turns,) = lead.get_subagent_messages().values()
    assert [r.output for t in turns for r in t.tool_results] == ["5"]
    # Another agent still cannot take the lead's connection's tools.
    from deputy_shiny.errors import InvalidToolError

    with pytest.raises(InvalidToolError):
        Agent(ScriptedModel([])).register_tools([lead.get_tools()["add"]])  # type: ignore[list-item]


@pytest.mark.parametrize("path", ["../outside.txt", "/etc/deputy-outside.txt"])
async def test_a_subagent_cannot_write_outside_its_leads_workspace(
    tmp_path: Path, path: str
) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    sub = ScriptedModel(
        [calls(ScriptedToolCall("write_file", {"path": path, "content": "escaped"})), "tried"]
    )
    lead = LeadAgent(
        ScriptedModel([calls(delegate("writer", "write outside")), "ok"]),
        tools=[tool_write_file(), tool_read_file()],
        working_dir=workspace,
        permissions=Permissions(mode="full"),
        subagents=[writer()],
        subagent_models={"writer": sub},
    )
    await lead.run_async("go")
    assert not (tmp_path / "outside.txt").exists()
    assert not Path("/etc/deputy-outside.txt").exists()
    (turns,) = lead.get_subagent_messages().values()
    (result,) = [r for t in turns for r in t.tool_results]
    assert result.is_error and "Denied" in result.output


async def test_definitions_bring_mcp_servers_skills_and_a_first_message(tmp_path: Path) -> None:
    from deputy_shiny.skills import skill_create
    from tests.mcp_servers import in_process, notes_server

    adder = AgentDefinition(
        name="adder",
        description="Adds.",
        mcp_servers=["notes"],
        skills=["terse"],
        initial_prompt="You report numbers only.",
    )
    sub = ScriptedModel([calls(ScriptedToolCall("add", {"a": 2, "b": 3})), "5"])
    lead = LeadAgent(
        ScriptedModel([calls(delegate("adder", "add 2 and 3")), "ok"]),
        working_dir=tmp_path,
        subagents=[adder],
        subagent_models={"adder": sub},
    )
    lead.load_skill(skill_create("terse", prompt="Be terse."))
    await lead.load_mcp_async(in_process(notes=notes_server()), servers=["notes"])
    try:
        await lead.run_async("go")
    finally:
        await lead.aclose()
    (record,) = lead.list_subagents()
    assert (record.status, record.response, record.task) == ("completed", "5", "add 2 and 3")
    manifest = lead.get_subagent_contexts()[record.delegation_id]
    assert isinstance(manifest, DelegationManifest)
    assert "add" in manifest.tools and "Be terse." in manifest.system_prompt
    first = sub.requests[0]["messages"][-1]["content"]
    assert first == "You report numbers only.\n\nadd 2 and 3"


async def test_a_definition_naming_an_mcp_server_the_lead_lacks_fails_clearly(
    tmp_path: Path,
) -> None:
    sub = ScriptedModel([])
    lead = LeadAgent(
        ScriptedModel([calls(delegate("adder", "add")), "ok"]),
        working_dir=tmp_path,
        subagents=[AgentDefinition(name="adder", description="Adds.", mcp_servers=["notes"])],
        subagent_models={"adder": sub},
    )
    result = await lead.run_async("go")
    assert "no tools from it" in tool_outputs(result, "delegate")[0]
    assert lead.list_subagents()[0].status == "failed" and sub.requests == []


def test_pending_says_whether_a_poll_has_events_without_reading_them(tmp_path: Path) -> None:
    lead = _finished_lead(tmp_path)
    subscription = lead.observe_subagents("ana", after=0)
    assert subscription.pending  # the finished delegation's events are there to read
    assert subscription.pending  # and asking consumed none of them
    assert subscription.poll()
    assert not subscription.pending
    subscription.close()
    assert not lead.observe_subagents("ana", after=0).closed
    assert not subscription.pending
