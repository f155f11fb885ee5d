"""Delegation as deputy has it (#37, parity rows 40-45): ``agent_definition()`` with
``memory=`` and tool objects, ``get_subagent_results()`` giving results, the lead's
``sub_agent_defs``, ``run_shiny()``, and the lineage ids on every event of a subagent.
Each test ports deputy's example or test for its row."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from deputy_shiny import Agent, AgentResult, Permissions, UsageLimits
from deputy_shiny.delegation import (
    AgentDefinition,
    LeadAgent,
    SubagentRecord,
    SubagentResult,
    agent_definition,
    agent_definition_read,
    agent_definition_resolve,
    agent_definition_write,
)
from deputy_shiny.errors import AgentDefinitionError
from deputy_shiny.skills import skill_create
from deputy_shiny.testing import ScriptedModel, ScriptedReply, ScriptedToolCall
from deputy_shiny.tools import tool_read_file, tool_write_file, tools_file
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


# --------------------------------------------------------------------------- row 40


def test_agent_definition_as_a_function_with_memory_and_initial_prompt(tmp_path: Path) -> None:
    # deputy's test: agent_definition("a", "A", "ROLE", memory = "STATIC",
    #   initial_prompt = "INITIAL"); the subagent's system prompt holds the memory.
    definition = agent_definition("a", "A", "ROLE", memory="STATIC", initial_prompt="INITIAL")
    assert isinstance(definition, AgentDefinition)
    assert (definition.name, definition.description, definition.prompt) == ("a", "A", "ROLE")
    assert definition.memory == ("STATIC",) and definition.disallowed_tools == ()
    sub_model = ScriptedModel(["done"])
    lead = LeadAgent(
        ScriptedModel([_delegate("a", "TASK"), "ok"]),
        working_dir=tmp_path,
        subagents=[definition],
        subagent_models={"a": sub_model},
    )
    lead.run_sync("go")
    (manifest,) = lead.get_subagent_contexts().values()
    assert manifest is not None
    assert manifest.system_prompt == "ROLE\n\n# Memory\nSTATIC"
    (sub,) = lead.get_subagent_results()
    assert sub is not None and sub.turns[0].text == "INITIAL\n\nTASK"
    # deputy's NULL defaults are accepted as None.
    assert agent_definition("b", "B", "P", disallowed_tools=None, mcp_servers=None).memory == ()
    with pytest.raises(AgentDefinitionError, match="memory"):
        agent_definition("c", "C", memory=["  "])


def test_a_definitions_tool_objects_are_the_subagents_own(tmp_path: Path) -> None:
    # deputy's vignette: code_reviewer <- agent_definition(..., tools = tools_file());
    # the lead itself has no file tools.
    (tmp_path / "app.py").write_text("print('hi')\n")
    reviewer = agent_definition(
        "code_reviewer",
        "Reviews code for best practices and potential issues",
        "You are an expert developer. Review code for correctness.",
        tools=tools_file(),
    )
    assert {"read_file", "write_file"} <= {t.name for t in reviewer.tools}
    lead = LeadAgent(
        ScriptedModel([_delegate("code_reviewer", "Review app.py."), "Reviewed."]),
        working_dir=tmp_path,
        subagents=[reviewer],
        subagent_models={
            "code_reviewer": ScriptedModel(
                [_call("read_file", {"path": "app.py"}), "It prints hi."]
            )
        },
    )
    assert "read_file" not in lead.get_tools()
    lead.run_sync("Review the app")
    (sub,) = lead.get_subagent_results()
    assert sub is not None and sub.response == "It prints hi."
    (output,) = sub.tool_results()
    assert not output.is_error and "print('hi')" in output.output


def test_a_definitions_skill_objects_bring_their_prompt_and_tools(tmp_path: Path) -> None:
    # deputy: agent_definition(..., skills = list(skill)): a Skill value, not a name.
    adding = skill_create(
        "adding", prompt="Add with the add tool.", tools=[local_tool(_add, name="add")]
    )
    lead = LeadAgent(
        ScriptedModel([_delegate("adder", "1 + 2?"), "3."]),
        working_dir=tmp_path,
        subagents=[agent_definition("adder", "Adds.", "You add.", skills=[adding])],
        subagent_models={"adder": ScriptedModel([_call("add", {"a": 1, "b": 2}), "3"])},
    )
    lead.run_sync("go")
    (manifest,) = lead.get_subagent_contexts().values()
    assert manifest is not None and "Add with the add tool." in manifest.system_prompt
    (sub,) = lead.get_subagent_results()
    assert sub is not None
    (added,) = sub.tool_results()
    assert (added.output, added.is_error) == ("3", False)


def test_the_leads_permissions_still_bind_a_subagents_own_tools(tmp_path: Path) -> None:
    # Attack: a prompt-injected subagent writes with a tool its definition granted,
    # while the lead may not write files. The lead's permissions still refuse it.
    writer = agent_definition("writer", "Writes.", "Write.", tools=[tool_write_file()])
    lead = LeadAgent(
        ScriptedModel([_delegate("writer", "Write x."), "ok"]),
        working_dir=tmp_path,
        permissions=Permissions(file_write=False),
        subagents=[writer],
        subagent_models={
            "writer": ScriptedModel([_call("write_file", {"path": "x.txt", "content": "x"}), "no"])
        },
    )
    lead.run_sync("go")
    (sub,) = lead.get_subagent_results()
    assert sub is not None
    (denied,) = sub.tool_results()
    assert denied.is_error and not (tmp_path / "x.txt").exists()
    assert "needs file_write" in denied.output
    # A name still needs the lead to have the tool: a definition naming write_file
    # gets nothing from a lead without it.
    named = agent_definition("named", "Names.", tools=["write_file"])
    lead2 = LeadAgent(
        ScriptedModel([_delegate("named", "Write."), "ok"]),
        working_dir=tmp_path,
        subagents=[named],
    )
    lead2.run_sync("go")
    (record,) = lead2.list_subagents()
    assert record.status == "failed" and "write_file" in (record.error or "")


def test_a_definition_file_names_its_tool_objects(tmp_path: Path) -> None:
    read = tool_read_file()
    reviewer = agent_definition("reviewer", "Reviews.", tools=[read], memory=["A", "B"])
    path = tmp_path / "reviewer.yaml"
    agent_definition_write(reviewer, path)
    assert "tools:\n- read_file\n" in path.read_text()
    back = agent_definition_read(path, [read])
    assert back.tools == ("read_file",) and back.memory == ("A", "B")
    assert agent_definition_resolve(back, [read]).tools == (read,)


# --------------------------------------------------------------------------- row 43


async def test_run_shiny_streams_a_run_for_a_shinychat_chat(tmp_path: Path) -> None:
    # deputy: chat_append("chat", agent$run_shiny(input$chat_user_input,
    #   max_tool_calls = 1)): the reply as a content stream, tool calls included, and
    # at most max_tool_calls calls.
    agent = Agent(
        ScriptedModel(
            [
                ScriptedReply("Adding.", tool_calls=[ScriptedToolCall("add", {"a": 1, "b": 2})]),
                _call("add", {"a": 3, "b": 4}, call_id="c2"),
                "never",
            ]
        ),
        working_dir=tmp_path,
        tools=[local_tool(_add, name="add")],
        run_context={"user_id": "ana"},
    )
    chunks = [c async for c in agent.run_shiny("1 + 2?", max_tool_calls=1, run_context={"x": 1})]
    assert [type(c).__name__ for c in chunks] == [
        "ContentText",
        "ContentToolRequest",
        "ContentToolResult",
    ]
    result = agent.last_run()
    assert result is not None and result.stop_reason == "tool_call_limit"
    assert result.run_context == {"user_id": "ana", "x": 1}
    # Without max_tool_calls: the agent's, else 25, never more than the agent's.
    strict = Agent(
        ScriptedModel([_call("add", {"a": 1, "b": 1}), _call("add", {"a": 2, "b": 2}, "c2")]),
        tools=[local_tool(_add, name="add")],
        usage_limits=UsageLimits(max_tool_calls=1),
    )
    _ = [c async for c in strict.run_shiny("go", max_tool_calls=5)]
    strict_result = strict.last_run()
    assert strict_result is not None and strict_result.stop_reason == "tool_call_limit"
    assert strict_result.usage.tool_calls == 1


# --------------------------------------------------------------------------- row 44


def test_the_approval_review_edits_a_list_argument_as_json() -> None:
    # deputy's approval_review_server() shows a non-scalar argument read-only ("deny the
    # call if it is wrong"); the kit's review edits it as JSON, parsed on the server
    # (a bad edit denies with the parser's note) and checked by the tool's schema in
    # the gate before the call runs (tests/e2e/test_approvals.py drives it).
    from deputy_shiny.approvals import ApprovalRequest
    from deputy_shiny.shiny._answers import decision_from_answer
    from deputy_shiny.shiny._modals import approval_modal

    schema = {"type": "object", "properties": {"names": {"type": "array"}}}
    request = ApprovalRequest(
        call_id="c1",
        tool_name="tag",
        arguments={"names": ["draft"], "path": "a.txt"},
        input_schema=schema,
    )
    html = str(approval_modal(request))
    assert 'data-type="json"' in html and '>[\n  "draft"\n]</textarea>' in html
    good = decision_from_answer(request, {"action": "approve", "values": {"names": '["x"]'}})
    assert good.approved and good.updated_input == {"names": ["x"], "path": "a.txt"}
    same = decision_from_answer(request, {"action": "approve", "values": {"names": '[ "draft" ]'}})
    assert same.approved and same.updated_input is None  # reformatted is not edited
    bad = decision_from_answer(request, {"action": "always", "values": {"names": "[1,"}})
    assert not bad.approved and "'names' is not valid JSON" in (bad.message or "")
