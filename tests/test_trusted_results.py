"""Specification of TrustedResults: one tool per trusted result type, delivered unchanged,
and no tool that could get around it may sit beside it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from deputy_shiny import (
    Agent,
    TrustedResults,
    result_trusted_results,
    skill_create,
    tool,
    tool_read_file,
    tool_run_bash,
    tool_run_python,
    tool_write_file,
)
from deputy_shiny.errors import TrustedResultsError
from deputy_shiny.events import TrustedResultEvent
from deputy_shiny.testing import ScriptedModel, ScriptedReply, ScriptedToolCall
from deputy_shiny.tools import ToolSource
from tests.helpers import local_tool


class Forecast:
    """A value that is not JSON: the app gets this very object back."""

    def __init__(self, city: str) -> None:
        self.city = city
        self.high_c = 21

    def __str__(self) -> str:
        return f"{self.city}: high {self.high_c} C"


def get_forecast(city: str) -> Forecast:
    "The forecast for a city."
    return Forecast(city)


def lookup(term: str) -> str:
    "Look a term up (read-only)."
    return term.upper()


def _model(*replies: Any) -> ScriptedModel:
    return ScriptedModel(list(replies))


def _forecast_call(city: str = "Oslo") -> ScriptedReply:
    return ScriptedReply(tool_calls=[ScriptedToolCall("get_forecast", {"city": city})])


def _agent(policy: TrustedResults, *replies: Any, tools: list[Any] | None = None) -> Agent:
    if tools is None:
        tools = [local_tool(get_forecast), local_tool(lookup)]
    return Agent(_model(*replies), tools=tools, trusted_results=policy)


# ------------------------------------------------------------------ delivery


def test_the_trusted_tool_value_reaches_the_app_unchanged() -> None:
    delivered: list[TrustedResultEvent] = []
    policy = TrustedResults({"forecast": "get_forecast"}, on_result=delivered.append)
    model = _model(_forecast_call(), "It will be mild.")
    agent = Agent(
        model, tools=[local_tool(get_forecast), local_tool(lookup)], trusted_results=policy
    )
    result = agent.run_sync("Weather in Oslo?")
    [event] = result_trusted_results(result)
    assert isinstance(event.value, Forecast) and event.value.city == "Oslo"
    assert delivered == [event]
    assert event.result_type == "forecast" and event.tool_name == "get_forecast"
    assert event.arguments == {"city": "Oslo"}
    assert event.result_id.startswith("trusted_") and event.run_id == result.run_id
    call_id = next(e for e in result.events if e.type == "tool_start").call_id
    assert event.call_id == call_id
    types = [e.type for e in result.events]
    assert types.index("trusted_result") < types.index("tool_end")
    assert result_trusted_results(result, type="forecast") == [event]
    assert result_trusted_results(result, type="other") == []
    assert agent.trusted_results is policy
    # Without a receipt the model sees the tool's ordinary output.
    assert "Oslo: high 21 C" in json.dumps(model.requests[-1]["messages"])


def test_a_model_receipt_withholds_the_value_from_the_model() -> None:
    policy = TrustedResults({"forecast": "get_forecast"}, model_receipt=True)
    model = _model(_forecast_call(), "Delivered.")
    agent = Agent(model, tools=[local_tool(get_forecast)], trusted_results=policy)
    result = agent.run_sync("Weather?")
    [event] = result_trusted_results(result)
    sent = json.dumps(model.requests[-1]["messages"])
    assert "high 21" not in sent
    assert event.result_id in sent and "withheld" in sent


def test_a_failing_on_result_gives_the_model_an_error_and_keeps_the_event() -> None:
    def broken(event: TrustedResultEvent) -> None:
        raise RuntimeError("store down")

    policy = TrustedResults({"forecast": "get_forecast"}, on_result=broken)
    agent = _agent(policy, _forecast_call(), "Sorry.")
    result = agent.run_sync("Weather?")
    assert len(result_trusted_results(result)) == 1
    end = next(e for e in result.events if e.type == "tool_end")
    assert end.is_error and "could not be delivered" in end.output


def test_other_tools_produce_no_trusted_results_and_errors_produce_none() -> None:
    def failing(city: str) -> str:
        "Always fails."
        raise ValueError("no data")

    policy = TrustedResults({"forecast": "failing"})
    model = _model(
        ScriptedReply(
            tool_calls=[
                ScriptedToolCall("failing", {"city": "x"}),
                ScriptedToolCall("lookup", {"term": "x"}),
            ]
        ),
        "ok",
    )
    agent = Agent(model, tools=[local_tool(failing), local_tool(lookup)], trusted_results=policy)
    assert result_trusted_results(agent.run_sync("go")) == []


def test_result_trusted_results_wants_an_agent_result() -> None:
    with pytest.raises(TypeError):
        result_trusted_results("not a result")  # type: ignore[arg-type]


# ------------------------------------------------------------------ the policy value


def test_the_policy_is_frozen_and_checked() -> None:
    policy = TrustedResults({"forecast": "get_forecast"}, exempt_tools=["a", "a"])
    assert policy.exempt_tools == ("a",)
    with pytest.raises(ValidationError):
        policy.model_receipt = True  # type: ignore[misc]
    for bad, match in [
        ({}, "at least one"),
        ({"bad type!": "t"}, "letters"),
        ({"a": "t", "b": "t"}, "only one"),
        ({"a": " "}, "must name one tool"),
    ]:
        with pytest.raises(TrustedResultsError, match=match):
            TrustedResults(bad)
    with pytest.raises(TrustedResultsError, match="cannot also be exempt"):
        TrustedResults({"a": "t"}, exempt_tools=["t"])
    with pytest.raises(TrustedResultsError, match="list of tool names"):
        TrustedResults({"a": "t"}, exempt_tools="t")
    with pytest.raises(TrustedResultsError, match="callable"):
        TrustedResults({"a": "t"}, on_result="print")  # type: ignore[arg-type]


# ------------------------------------------------------------------ no bypass


POLICY = TrustedResults({"forecast": "get_forecast"})


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        (tool_run_bash(), "runs model-written code"),
        (tool_run_python(), "runs model-written code"),
        (tool_write_file(), "may write or reach the open world"),
        (
            tool(lookup, name="lookup_unannotated"),
            "may write or reach the open world",
        ),  # unannotated
    ],
)
def test_a_tool_that_could_get_around_the_policy_cannot_be_registered(
    extra: Any, match: str
) -> None:
    with pytest.raises(TrustedResultsError, match=match):
        _agent(POLICY, tools=[local_tool(get_forecast), extra])
    agent = _agent(POLICY)
    before = sorted(agent.get_tools())
    with pytest.raises(TrustedResultsError, match=match):
        agent.register_tool(extra)
    with pytest.raises(TrustedResultsError, match=match):
        agent.set_tools([local_tool(get_forecast), extra])
    with pytest.raises(TrustedResultsError, match=match):
        agent.load_skill(skill_create("sneaky", tools=[extra]))
    assert sorted(agent.get_tools()) == before


def test_the_trusted_tool_must_stay_and_be_a_local_function_tool() -> None:
    with pytest.raises(TrustedResultsError, match="must stay registered"):
        _agent(POLICY, tools=[local_tool(lookup)])
    agent = _agent(POLICY)
    with pytest.raises(TrustedResultsError, match="must stay registered"):
        agent.set_tools([local_tool(lookup)])
    remote = local_tool(
        get_forecast, source=ToolSource(type="mcp", server="weather", remote_name="forecast")
    )
    with pytest.raises(TrustedResultsError, match="local function tool"):
        agent.register_tool(remote, replace=True)
    with pytest.raises(TrustedResultsError, match="local function tool"):
        _agent(TrustedResults({"x": "run_bash"}), tools=[tool_run_bash()])
    assert agent.get_tools()["get_forecast"].source.type == "function"


def test_exempt_tools_and_read_only_tools_may_sit_beside_trusted_ones() -> None:
    policy = TrustedResults({"forecast": "get_forecast"}, exempt_tools=["notify", "write_file"])

    def notify(text: str) -> str:
        "Send a notification (writes)."
        return "sent"

    agent = _agent(
        policy,
        tools=[local_tool(get_forecast), tool(notify), tool_write_file(), tool_read_file()],
    )
    assert sorted(agent.get_tools()) == ["get_forecast", "notify", "read_file", "write_file"]
    # An MCP tool cannot be exempted, whatever the app asserts.
    mcp_tool = tool(
        notify,
        name="remote_notify",
        source=ToolSource(type="mcp", server="s", remote_name="notify"),
    )
    exempt_mcp = TrustedResults({"forecast": "get_forecast"}, exempt_tools=["remote_notify"])
    with pytest.raises(TrustedResultsError, match="Only local function tools"):
        _agent(exempt_mcp, tools=[local_tool(get_forecast), mcp_tool])


def test_trusted_results_must_be_a_policy() -> None:
    from deputy_shiny import ConfigurationError

    with pytest.raises(ConfigurationError, match="TrustedResults"):
        Agent(_model(), trusted_results={"forecast": "get_forecast"})  # type: ignore[arg-type]


def test_a_delegating_tool_cannot_sit_beside_a_trusted_one() -> None:
    from deputy_shiny import AgentDefinition
    from deputy_shiny.delegation import LeadAgent

    helper = AgentDefinition(name="helper", description="Helps.", prompt="Help.")
    with pytest.raises(TrustedResultsError, match="delegates to another agent"):
        LeadAgent(
            _model(),
            subagents=[helper],
            tools=[local_tool(get_forecast)],
            trusted_results=POLICY,
        )
