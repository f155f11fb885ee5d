"""Delegation as deputy has it (#37, parity rows 40-45): ``agent_definition()`` with
``memory=`` and tool objects, ``get_subagent_results()`` giving results, the lead's
``sub_agent_defs``, ``run_shiny()``, and the lineage ids on every event of a subagent.
Each test ports deputy's example or test for its row."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from deputy_shiny import Agent, AgentResult, UsageLimits
from deputy_shiny.delegation import AgentDefinition, LeadAgent, SubagentRecord, SubagentResult
from deputy_shiny.testing import ScriptedModel, ScriptedReply, ScriptedToolCall
from tests.helpers import local_tool


def _add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def _call(name: str, arguments: dict[str, Any], call_id: str = "c1") -> ScriptedReply:
    return ScriptedReply(tool_calls=[ScriptedToolCall(name, arguments, id=call_id)])


def _delegate(agent: str, task: str, call_id: str = "d1") -> ScriptedReply:
    return _call("delegate", {"agent": agent, "task": task}, call_id)


# --------------------------------------------------------------------------- row 41


def test_get_subagent_results_gives_each_delegations_agent_result(tmp_path: Path) -> None:
    # deputy: results <- lead$get_subagent_results(); results[[1]]$response, $turns...
    # One delegation completes, one is refused (a blank task): NULL for it.
    lead = LeadAgent(
        ScriptedModel(
            [
                _delegate("writer", "Write the report."),
                _delegate("writer", "   ", call_id="d2"),
                "Done.",
            ]
        ),
        working_dir=tmp_path,
        tools=[local_tool(_add, name="add")],
        subagents=[AgentDefinition(name="writer", description="Writes.", tools=["add"])],
        subagent_models={"writer": ScriptedModel([_call("add", {"a": 1, "b": 2}), "It is 3."])},
    )
    lead_result = lead.run_sync("Report")
    written, refused = lead.get_subagent_results()
    assert refused is None  # the refused task never ran: no result, as deputy's NULL
    assert isinstance(written, SubagentResult) and isinstance(written, AgentResult)
    assert written.response == "It is 3." and written.is_success()
    assert written.n_turns() == 4  # task, call, result, answer: the subagent's own turns
    assert [(c.name, c.arguments) for c in written.tool_calls()] == [("add", {"a": 1, "b": 2})]
    assert (written.events[0].type, written.events[-1].type) == ("start", "stop")
    assert written.text_chunks() == ["It is 3."]
    (record, refused_record) = lead.list_subagents()
    assert (written.parent_agent_id, written.parent_run_id, written.delegation_id) == (
        lead.agent_id,
        lead_result.run_id,
        record.delegation_id,
    )
    # Code written for the records this used to return keeps working.
    assert written.record == record and isinstance(written.record, SubagentRecord)
    assert (written.status, written.task, written.agent_name) == (
        "completed",
        "Write the report.",
        "writer",
    )
    assert written.completed_at == record.completed_at and written.error is None
    # Filters, as deputy's agent_name= and delegation_id=.
    assert lead.get_subagent_results(agent_name="writer") == [written, None]
    assert lead.get_subagent_results(delegation_id=record.delegation_id) == [written]
    assert lead.get_subagent_results(delegation_id=refused_record.delegation_id) == [None]
    assert lead.get_subagent_results(agent_name="reviewer") == []


def test_a_retained_agents_results_stay_each_tasks_own(tmp_path: Path) -> None:
    owner = Agent(ScriptedModel([]), working_dir=tmp_path)
    helper = Agent(ScriptedModel(["Sales rose.", "Costs fell."]), working_dir=tmp_path)
    handle = owner.retain_agent(helper, UsageLimits(max_requests=4))
    owner.continue_agent(handle, "Sales?")
    owner.continue_agent(handle, "Costs?")
    first, second = owner.get_subagent_results()
    assert first is not None and second is not None
    # The first task's result is kept, though the agent's last_run() moved on.
    assert (first.response, first.task, first.handle) == ("Sales rose.", "Sales?", handle)
    assert (second.response, second.n_turns()) == ("Costs fell.", 2)
    assert first.run_id != second.run_id


# --------------------------------------------------------------------------- row 42


def test_the_leads_definitions_are_public_and_read_only() -> None:
    # deputy: lead$sub_agent_defs (a named list of the AgentDefinitions)
    reviewer = AgentDefinition(name="reviewer", description="Reviews code.")
    analyst = AgentDefinition(name="analyst", description="Analyses data.")
    lead = LeadAgent(ScriptedModel([]), subagents=[reviewer, analyst])
    defs = lead.sub_agent_defs
    assert list(defs) == ["reviewer", "analyst"] and defs["reviewer"] is reviewer
    with pytest.raises(TypeError):
        defs["writer"] = reviewer  # type: ignore[index]
    lead.register_sub_agent(AgentDefinition(name="writer", description="Writes."))
    assert list(lead.sub_agent_defs) == ["reviewer", "analyst", "writer"]
    assert list(defs) == ["reviewer", "analyst"]  # a view taken before stays as it was
    with pytest.raises(AttributeError):
        lead.sub_agent_defs = {}  # type: ignore[misc]


# --------------------------------------------------------------------------- row 45


def test_every_event_of_a_subagent_names_who_delegated_it(tmp_path: Path) -> None:
    # deputy: each AgentEvent of a delegated run carries parent_agent_id,
    # parent_run_id and delegation_id (the correlation ids); a lead's own do not.
    lead = LeadAgent(
        ScriptedModel([_delegate("writer", "Add."), "ok"]),
        working_dir=tmp_path,
        tools=[local_tool(_add, name="add")],
        subagents=[AgentDefinition(name="writer", description="Writes.", tools=["add"])],
        subagent_models={
            "writer": ScriptedModel(
                [_call("add", {"a": 1, "b": 1}), ScriptedReply(text="It is 2.", chunk_size=3)]
            )
        },
    )
    lead_result = lead.run_sync("go")
    (sub,) = lead.get_subagent_results()
    assert sub is not None
    ids = (lead.agent_id, lead_result.run_id, sub.delegation_id)
    types = {e.type for e in sub.events}
    assert {"start", "text", "tool_start", "tool_end", "usage", "stop"} <= types
    assert {(e.parent_agent_id, e.parent_run_id, e.delegation_id) for e in sub.events} == {ids}
    assert {(e.parent_agent_id, e.parent_run_id, e.delegation_id) for e in lead_result.events} == {
        (None, None, None)
    }
    # The ids survive a round trip through JSON, as saved sessions carry events.
    start = sub.events[0]
    assert type(start).model_validate_json(start.model_dump_json()).delegation_id == ids[2]
