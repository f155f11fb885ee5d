"""The rest of deputy (#24): accessors, result helpers, events and smaller pieces that a
user porting R code reaches for, each checked against what it reports."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from deputy_shiny import Agent, AgentResult, Permissions, UsageLimits
from deputy_shiny._engine.compaction import _turn_tokens, context_tokens
from deputy_shiny.agent._delegation.host import DelegationHost
from deputy_shiny.delegation import AgentDefinition, LeadAgent
from deputy_shiny.errors import ConfigurationError
from deputy_shiny.messages import user_turn
from deputy_shiny.testing import ScriptedModel, ScriptedReply, ScriptedToolCall
from tests.helpers import local_tool


def _add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


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


# --------------------------------------------------------------------------- AgentResult


def test_result_helpers_read_the_runs_turns_and_events() -> None:
    reply = ScriptedReply(
        text="Let me add.", tool_calls=[ScriptedToolCall("add", {"a": 1, "b": 2}, id="c1")]
    )
    agent = Agent(
        ScriptedModel([reply, ScriptedReply(text="It is 3.", chunk_size=3)]),
        tools=[local_tool(_add, name="add")],
    )
    result = agent.run_sync("1 + 2?")
    assert result.is_success()
    assert result.n_turns() == 4  # user, assistant (call), user (result), assistant
    assert [(c.id, c.name, c.arguments) for c in result.tool_calls()] == [
        ("c1", "add", {"a": 1, "b": 2})
    ]
    assert [(r.call_id, r.output, r.is_error) for r in result.tool_results()] == [
        ("c1", "3", False)
    ]
    assert result.text_chunks() == ["Let me a", "dd.", "It ", "is ", "3."]
    assert (result.parent_agent_id, result.parent_run_id, result.delegation_id) == (None,) * 3


def test_a_limit_is_not_a_success() -> None:
    agent = Agent(ScriptedModel(["never sent"]), usage_limits=UsageLimits(max_requests=0))
    result = agent.run_sync("hi")
    assert result.stop_reason == "request_limit" and not result.is_success()
    assert result.n_turns() == 1 and result.text_chunks() == []


def test_a_subagents_result_names_who_delegated_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A built subagent is dropped when it ends: catch its result as the host records it.
    results: list[AgentResult] = []
    finish = DelegationHost._finish

    def keep(self: DelegationHost, item: Any, agent: Any) -> None:
        results.append(agent.last_run())
        finish(self, item, agent)

    monkeypatch.setattr(DelegationHost, "_finish", keep)
    task = {"agent": "writer", "task": "x"}
    lead = LeadAgent(
        ScriptedModel([ScriptedReply(tool_calls=[ScriptedToolCall("delegate", task)]), "ok"]),
        working_dir=tmp_path,
        subagents=[AgentDefinition(name="writer", description="Writes.", prompt="Write.")],
        subagent_models={"writer": ScriptedModel(["The report."])},
    )
    lead_result = lead.run_sync("go")
    (record,) = lead.list_subagents()
    (sub_result,) = results
    assert record.status == "completed" and sub_result.response == "The report."
    assert (sub_result.parent_agent_id, sub_result.parent_run_id, sub_result.delegation_id) == (
        lead.agent_id,
        lead_result.run_id,
        record.delegation_id,
    )
    assert lead_result.delegation_id is None and lead_result.parent_agent_id is None

    owner = Agent(ScriptedModel([]))
    handle = owner.retain_agent(Agent(ScriptedModel(["Sales rose."])), UsageLimits(max_requests=3))
    retained = owner.continue_agent(handle, "Summarise.")
    (retained_record,) = owner.list_subagents()
    assert (retained.parent_agent_id, retained.parent_run_id, retained.delegation_id) == (
        owner.agent_id,
        None,  # host code sent the task, not one of the owner's runs
        retained_record.delegation_id,
    )


# --------------------------------------------------------------------------- accessors


def _priced(text: str, prompt: int, completion: int, cost: float | None) -> ScriptedReply:
    usage = {"prompt_tokens": prompt, "completion_tokens": completion}
    return ScriptedReply(text=text, usage=usage, cost=cost)


def test_get_tokens_and_get_cost_read_usage_by_turn() -> None:
    agent = Agent(ScriptedModel([_priced("one", 10, 2, 0.5), _priced("two", 20, 3, 0.25)]))
    assert agent.get_tokens() == [] and agent.get_cost() == 0.0 and agent.get_cost("last") == 0.0
    agent.chat("first")
    agent.chat("second")
    rows = [(t.turn, t.input_tokens, t.output_tokens, t.cost) for t in agent.get_tokens()]
    assert rows == [(1, 10, 2, 0.5), (3, 20, 3, 0.25)]
    assert (agent.get_cost(), agent.get_cost("last")) == (0.75, 0.25)
    unknown = Agent(ScriptedModel([_priced("x", 1, 1, None)]))
    unknown.chat("hi")
    assert unknown.get_cost() is None and unknown.get_cost("last") is None
    with pytest.raises(ConfigurationError):
        agent.get_cost("first")  # type: ignore[arg-type]


def test_token_count_is_the_count_compaction_uses() -> None:
    agent = Agent(ScriptedModel(["Sure."]), system_prompt="Be brief.", tools=[local_tool(_add)])
    agent.chat("Hello there")
    new = agent.token_count("How many words is this?")
    assert new == _turn_tokens(user_turn("How many words is this?"))
    context = context_tokens(agent._conversation, agent._tools.schemas())
    assert agent.token_count("How many words is this?", include="complete") == new + context
    assert context > new > 0


async def test_clone_copies_the_conversation_and_shares_no_state(tmp_path: Path) -> None:
    def slow(text: str) -> ScriptedReply:
        return ScriptedReply(text=text, chunk_size=2, delay=0.01)

    agent = Agent(
        ScriptedModel(["Hi!", slow("original again"), slow("second")]),
        system_prompt="Be brief.",
        tools=[local_tool(_add)],
        working_dir=tmp_path,
        usage_limits=UsageLimits(max_requests=7),
        run_context={"user": "ana"},
        permissions=Permissions(mode="readonly"),
    )
    await agent.chat_async("Hello")
    twin = agent.clone()
    assert twin.agent_id != agent.agent_id and twin.session_id == agent.session_id
    assert twin.get_turns() == agent.get_turns() and twin.get_system_prompt() == "Be brief."
    assert (twin.usage_limits, twin.run_context, twin.working_dir) == (
        agent.usage_limits,
        agent.run_context,
        agent.working_dir,
    )
    assert twin.get_permission_mode() == "readonly" and list(twin.get_tools()) == ["_add"]
    assert twin.usage() == agent.usage()
    assert twin._engine is not agent._engine and twin.tool_state is not agent.tool_state
    assert twin._guard is not agent._guard and twin._conversation is not agent._conversation
    # Changing one changes nothing in the other.
    twin.set_system_prompt("Be long.")
    twin.add_turn("Another question", "Another answer")
    assert agent.get_system_prompt() == "Be brief." and len(agent.get_turns()) == 2
    # Both run at once (the model object is shared, as a model string would be).
    first, second = await asyncio.gather(agent.run_async("a"), twin.run_async("b"))
    assert {first.response, second.response} == {"original again", "second"}
    assert len(agent.get_turns()) == 4 and len(twin.get_turns()) == 6
    assert first.stop_reason == second.stop_reason == "complete"


# --------------------------------------------------------------------------- the CLI (rows 3, 48)


async def test_cli_process_command_as_deputys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """deputy's R/cli.R ``cli_process_command``: each command, what it does to the agent."""
    import io

    from rich.console import Console

    from deputy_shiny.cli._commands import parse_command, run_command

    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    console = Console(file=out, width=120)
    agent = Agent(ScriptedModel(["Summary of the talk."]), system_prompt="Be brief.")
    for n in range(3):
        agent.add_turn(f"question {n}", f"answer {n}")

    async def command(line: str) -> str:
        parsed = parse_command(line)
        assert parsed is not None, line
        return await run_command(*parsed, agent, console)

    assert parse_command("not a command") is None  # is_command = FALSE
    assert [await command(q) for q in ("/quit", "/exit", "/q", "/QUIT")] == ["quit"] * 4
    await command("/turns")
    assert "The conversation has 6 turns." in out.getvalue()
    await command("/save s.json")
    assert len(Agent(ScriptedModel([])).load_session(tmp_path / "s.json").get_turns()) == 6
    await command("/compact zero")  # an invalid keep value: deputy warns and uses 4
    assert "Not a number of turns: 'zero'; keeping 4." in out.getvalue()
    assert len(agent.get_context_turns()) == 4 and len(agent.get_turns()) == 6
    await command("/cost")
    assert "Input tokens:" in out.getvalue() and "Total cost:" in out.getvalue()
    await command("/help")
    assert all(c in out.getvalue() for c in ("/save [path]", "/compact [n]", "/cost", "/turns"))
    assert await command("/clear") == "changed" and agent.get_turns() == []
    assert await command("/nope") == "continue"
    assert "Unknown command: /nope. Type /help for the commands." in out.getvalue()


def test_cli_options_as_deputys(tmp_path: Path) -> None:
    """deputy's exec/deputy flags, short forms included, with its defaults."""
    from deputy_shiny.cli._args import parse_args

    prompt = tmp_path / "prompt.md"
    prompt.write_text("Be terse.")
    flags = ["-t", "dev", "-n", "5", "-c", "0.25", "-f", str(prompt), "-A", "-d", str(tmp_path)]
    options = parse_args([*flags, "-v", "--no-color", "-g"])
    assert (options.tools, options.max_requests, options.max_cost) == ("dev", 5, 0.25)
    assert (options.system_prompt, options.no_ask, options.dir) == ("Be terse.", True, tmp_path)
    assert options.verbose and options.no_color and options.debug
    assert parse_args(["-y", "Be kind."]).system_prompt == "Be kind."
    servers = parse_args(["--mcp-server", "git, time", "--mcp-server", "git"])
    assert servers.mcp and servers.mcp_server == ("git", "time")  # deputy's split_csv_values
    assert parse_args(["-M"]).mcp and parse_args(["-M"]).mcp_config is None
    defaults = parse_args(["run", "a task"])  # deputy's -x TASK is `deputy run TASK` here
    assert (defaults.tools, defaults.max_requests, defaults.permissions) == (
        "standard",
        25,
        "standard",
    )
