"""Every log record of a run carries its run, session, agent and (inside a tool call)
call ids as record attributes, through RunLogFilter, and JsonLogFormatter writes them:
from the engine itself, from a sync tool in its worker thread, and from a subagent's run
(its own ids), never outside a run."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from deputy_shiny import Agent, JsonLogFormatter, RunLogFilter
from deputy_shiny.delegation import AgentDefinition, LeadAgent
from deputy_shiny.testing import ScriptedModel, ScriptedReply, ScriptedToolCall
from tests.helpers import JsonLogCapture, capture_root_logs, local_tool

log = logging.getLogger("tests.tool_code")


@pytest.fixture
def captured() -> Iterator[JsonLogCapture]:
    yield from capture_root_logs()


def ids(record: logging.LogRecord) -> tuple[object, ...]:
    return tuple(getattr(record, k) for k in ("run_id", "session_id", "agent_id", "call_id"))


def noted(text: str) -> str:
    """Logs from the tool's worker thread (a sync tool)."""
    log.info("tool saw %s", text)
    return text


async def test_records_carry_the_run_and_call_ids(captured: JsonLogCapture) -> None:
    def failing_observer(result: object) -> None:
        raise RuntimeError("observer broke")  # the engine logs a warning about it

    log.info("before any run")
    agent = Agent(
        ScriptedModel(
            [ScriptedReply(tool_calls=[ScriptedToolCall("noted", {"text": "x"}, id="c1")]), "ok"]
        ),
        tools=[local_tool(noted)],
    )
    agent.on_tool_result(failing_observer)
    result = await agent.run_async("go")
    log.info("after the run")

    by_message = {r.getMessage(): r for r in captured.records}
    run = (result.run_id, agent.session_id, agent.agent_id)
    assert ids(by_message["before any run"]) == (None, None, None, None)
    assert ids(by_message["tool saw x"]) == (*run, "c1")
    assert by_message["tool saw x"].threadName != "MainThread"  # from the worker thread
    engine_warning = by_message["on_tool_result callback failed"]
    assert engine_warning.name.startswith("deputy_shiny.")
    assert ids(engine_warning) == (*run, None)  # logged after the call, within the run
    assert ids(by_message["after the run"]) == (None, None, None, None)
    line = json.loads(captured.lines[captured.records.index(by_message["tool saw x"])])
    assert {k: line[k] for k in ("message", "run_id", "session_id", "agent_id", "call_id")} == {
        "message": "tool saw x",
        "run_id": result.run_id,
        "session_id": agent.session_id,
        "agent_id": agent.agent_id,
        "call_id": "c1",
    }
    assert line["level"] == "INFO" and line["logger"] == "tests.tool_code"


async def test_a_subagents_records_carry_its_own_ids(
    tmp_path: Path, captured: JsonLogCapture
) -> None:
    sub = ScriptedModel(
        [ScriptedReply(tool_calls=[ScriptedToolCall("noted", {"text": "sub"}, id="s1")]), "ok"]
    )
    lead = LeadAgent(
        ScriptedModel(
            [
                ScriptedReply(
                    tool_calls=[
                        ScriptedToolCall("noted", {"text": "lead"}, id="l1"),
                        ScriptedToolCall("delegate", {"agent": "n", "task": "t"}, id="l2"),
                    ]
                ),
                "done",
            ]
        ),
        tools=[local_tool(noted)],
        working_dir=tmp_path,
        subagents=[AgentDefinition(name="n", description="d", prompt="p", tools=["noted"])],
        subagent_models={"n": sub},
    )
    result = await lead.run_async("go")
    (record,) = lead.list_subagents()
    by_message = {r.getMessage(): r for r in captured.records}
    assert ids(by_message["tool saw lead"]) == (result.run_id, lead.session_id, lead.agent_id, "l1")
    assert ids(by_message["tool saw sub"]) == (
        record.run_id,
        lead.session_id,
        record.agent_id,
        "s1",
    )
    assert record.run_id != result.run_id and record.agent_id != lead.agent_id


def test_a_callers_extra_fields_are_kept() -> None:
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "m", None, None)
    record.run_id = "mine"
    assert RunLogFilter().filter(record) is True
    assert (getattr(record, "run_id"), getattr(record, "call_id")) == ("mine", None)  # noqa: B009
    data = json.loads(JsonLogFormatter().format(record))
    assert (data["run_id"], data["message"]) == ("mine", "m")
