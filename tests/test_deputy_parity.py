"""The rest of deputy (#24): accessors, result helpers, events and smaller pieces that a
user porting R code reaches for, each checked against what it reports."""

from __future__ import annotations

import asyncio
import base64
import json
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from deputy_shiny import Agent, AgentResult, ContextPolicy, Permissions, UsageLimits
from deputy_shiny._engine.compaction import _turn_tokens, context_tokens
from deputy_shiny.conversation import Conversation
from deputy_shiny.delegation import AgentDefinition, LeadAgent
from deputy_shiny.errors import (
    ConfigurationError,
    InvalidHookError,
    InvalidToolError,
    ProviderError,
    ToolArgumentsError,
    ToolInvocationError,
)
from deputy_shiny.hooks import (
    HookContext,
    HookMatcher,
    HookResultPostToolUse,
    HookResultPreCompact,
)
from deputy_shiny.hooks_builtin import hook_block_dangerous_bash, hook_limit_file_writes
from deputy_shiny.messages import ContentImage, ContentText, ContentToolResult, user_turn
from deputy_shiny.models import ChatModel, supports_images
from deputy_shiny.permissions import PermissionResultDeny
from deputy_shiny.testing import ProviderFailure, ScriptedModel, ScriptedReply, ScriptedToolCall
from deputy_shiny.tools import (
    Tool,
    content_image_file,
    content_image_inline,
    tool,
    tool_write_file,
)
from deputy_shiny.tools._content import PNG_1PX
from tests.helpers import READ_ONLY, local_tool


class Stop(BaseModel):
    city: str
    nights: int


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


def test_a_subagents_result_names_who_delegated_it(tmp_path: Path) -> None:
    task = {"agent": "writer", "task": "x"}
    lead = LeadAgent(
        ScriptedModel([ScriptedReply(tool_calls=[ScriptedToolCall("delegate", task)]), "ok"]),
        working_dir=tmp_path,
        subagents=[AgentDefinition(name="writer", description="Writes.", prompt="Write.")],
        subagent_models={"writer": ScriptedModel(["The report."])},
    )
    lead_result = lead.run_sync("go")
    (record,) = lead.list_subagents()
    (sub_result,) = lead.get_subagent_results()
    assert sub_result is not None
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


# --------------------------------------------------------------------------- hooks (#37)
# Each test ports deputy's own example or test for its row (R/hooks.R, the hook tests).


def _failing_tool() -> Tool:
    def explode(path: str) -> str:
        """Fail on purpose."""
        raise ValueError(f"cannot read {path}")

    return local_tool(explode, name="explode")


def _call(name: str, arguments: dict[str, Any], call_id: str = "c1") -> ScriptedReply:
    return ScriptedReply(tool_calls=[ScriptedToolCall(name, arguments, id=call_id)])


def test_hook_contexts_carry_what_deputys_carry(tmp_path: Path) -> None:
    # deputy's example: message("Tool: ", tool_name, " in ", context$working_dir)
    seen: dict[str, HookContext] = {}

    def keep(context: HookContext) -> None:
        seen[context.event] = context

    def pre(tool_name: str, tool_input: Any, context: HookContext) -> None:
        seen["PreToolUse"] = context

    limits = UsageLimits(max_requests=5)
    agent = Agent(
        ScriptedModel(
            [
                ScriptedReply(
                    tool_calls=[ScriptedToolCall("add", {"a": 1, "b": 2}, id="c1")],
                    usage={"prompt_tokens": 10, "completion_tokens": 2},
                    cost=0.5,
                ),
                ScriptedReply(text="3", cost=0.25),
            ]
        ),
        tools=[local_tool(_add, name="add")],
        working_dir=tmp_path,
        usage_limits=limits,
        hooks=[
            HookMatcher("SessionStart", keep),
            HookMatcher("PreToolUse", pre),
            HookMatcher("Stop", keep),
        ],
    )
    agent.run_sync("1 + 2?")
    start, tool_use, stop = seen["SessionStart"], seen["PreToolUse"], seen["Stop"]
    assert start.working_dir == tmp_path and tool_use.working_dir == tmp_path
    assert start.permissions == agent.permissions and start.tools_count == 1
    provider, model = agent.get_model().split("/", 1)
    assert start.provider == {"name": provider, "model": model}
    assert tool_use.usage is not None and tool_use.usage.requests == 1
    assert tool_use.usage_limits == limits and tool_use.call_id == "c1"
    assert stop.usage is not None and stop.usage.requests == 2
    assert stop.cost is not None and stop.cost.total == 0.75
    assert stop.total_turns == 4  # user, assistant (call), user (result), assistant
    assert (start.parent_agent_id, start.parent_run_id, start.delegation_id) == (None,) * 3


def test_a_subagents_hooks_carry_the_delegation_ids_and_subagent_stop_the_result(
    tmp_path: Path,
) -> None:
    stops: list[HookContext] = []
    inner: list[HookContext] = []
    writer = AgentDefinition(name="writer", description="Writes.", prompt="Write.", tools=["add"])
    lead = LeadAgent(
        ScriptedModel([_call("delegate", {"agent": "writer", "task": "x"}), "ok"]),
        working_dir=tmp_path,
        tools=[local_tool(_add, name="add")],
        subagents=[writer],
        subagent_models={"writer": ScriptedModel([_call("add", {"a": 1, "b": 1}), "2"])},
        hooks=[
            HookMatcher("SubagentStop", stops.append),
            HookMatcher("PreToolUse", lambda name, args, context: inner.append(context)),
        ],
    )
    lead_result = lead.run_sync("go")
    (record,) = lead.list_subagents()
    (stop,) = stops
    result = stop.details["result"]
    assert isinstance(result, AgentResult) and result.response == "2"
    assert stop.details["subagent"] == "writer" and stop.reason == "complete"
    assert stop.details["delegation_id"] == record.delegation_id
    assert stop.details["subagent_run_id"] == result.run_id
    delegated = [c for c in inner if c.delegation_id is not None]
    (sub_call,) = delegated  # the subagent's add call: its hooks know who delegated it
    assert (sub_call.parent_agent_id, sub_call.parent_run_id, sub_call.delegation_id) == (
        lead.agent_id,
        lead_result.run_id,
        record.delegation_id,
    )


def test_post_tool_use_fires_after_every_call_then_post_tool_use_failure(
    tmp_path: Path,
) -> None:
    # deputy: PostToolUse after every call (tool_error set on failure), then
    # PostToolUseFailure when tool_error is not NULL.
    order: list[tuple[str, str, Any, str | None]] = []

    def post(tool_name: str, tool_input: Any, context: HookContext, tool_output: Any) -> None:
        order.append(("PostToolUse", tool_name, tool_output, context.error))

    def failure(tool_name: str, tool_input: Any, context: HookContext) -> None:
        order.append(("PostToolUseFailure", tool_name, None, context.error))

    agent = Agent(
        ScriptedModel(
            [_call("add", {"a": 1, "b": 2}), _call("explode", {"path": "a"}, "c2"), "done"]
        ),
        tools=[local_tool(_add, name="add"), _failing_tool()],
        working_dir=tmp_path,
        hooks=[HookMatcher("PostToolUse", post), HookMatcher("PostToolUseFailure", failure)],
    )
    result = agent.run_sync("go")
    error = "Error: ValueError: cannot read a"
    assert order == [
        ("PostToolUse", "add", "3", None),
        ("PostToolUse", "explode", None, error),
        ("PostToolUseFailure", "explode", None, error),
    ]
    hooks = [e.hook_event for e in result.events if e.type == "hook"]
    assert hooks == ["PostToolUse", "PostToolUse", "PostToolUseFailure"]


def test_post_tool_use_additional_context_reaches_the_model(tmp_path: Path) -> None:
    def note(tool_name: str, tool_input: Any, context: HookContext, tool_output: Any) -> Any:
        return HookResultPostToolUse(additional_context="Remember: results are in metres.")

    model = ScriptedModel([_call("add", {"a": 1, "b": 2}), "3 metres"])
    agent = Agent(
        model,
        tools=[local_tool(_add, name="add")],
        working_dir=tmp_path,
        hooks=[HookMatcher("PostToolUse", note)],
    )
    result = agent.run_sync("1 + 2?")
    (tool_result,) = result.tool_results()
    assert tool_result.output == "3\n\nRemember: results are in metres."
    sent = str(model.requests[-1])
    assert "Remember: results are in metres." in sent
    hook = next(e for e in result.events if e.type == "hook")
    assert hook.result["result"]["additional_context"] is True


def test_a_permission_request_deny_replaces_the_reason(tmp_path: Path) -> None:
    # deputy: return PermissionResultDeny() to replace the denial reason.
    def explain(tool_name: str, tool_input: Any, context: HookContext) -> Any:
        return PermissionResultDeny("Writes wait for the release freeze to end.")

    agent = Agent(
        ScriptedModel([_call("write_file", {"path": "a.txt", "content": "x"}), "ok"]),
        tools=[tool_write_file()],
        working_dir=tmp_path,
        permissions=Permissions(mode="readonly"),
        hooks=[HookMatcher("PermissionRequest", explain)],
    )
    result = agent.run_sync("write")
    (denied,) = result.tool_results()
    assert denied.is_error
    assert denied.output == "Denied: Writes wait for the release freeze to end."
    assert not (tmp_path / "a.txt").exists()
    last = [e for e in result.events if e.type == "permission"][-1]
    assert (last.decision, last.step) == ("deny", "permission_request_hook")


def test_pre_compact_gets_the_turns_so_a_hook_can_write_the_summary() -> None:
    # deputy: function(turns_to_compact, turns_to_keep, context) ->
    #   HookResultPreCompact(summary = ...)
    got: dict[str, Any] = {}

    def summarise(context: HookContext) -> HookResultPreCompact:
        got.update(context.details)
        said = "; ".join(t.text for t in context.details["turns_to_compact"] if t.text)
        return HookResultPreCompact(summary=f"Earlier: {said}")

    agent = Agent(
        ScriptedModel(["Paris.", "Berlin.", "Rome."]),
        context_policy=ContextPolicy(),
        hooks=[HookMatcher("PreCompact", summarise)],
    )
    for question in ("France?", "Germany?", "Italy?"):
        agent.run_sync(question)
    record = agent.compact(keep_last=2)
    assert record is not None and record.method == "hook"
    assert [t.text for t in got["turns_to_compact"]] == ["France?", "Paris.", "Germany?", "Berlin."]
    assert [t.text for t in got["turns_to_keep"]] == ["Italy?", "Rome."]
    assert got["compact_count"] == got["turns_to_remove"] == 4
    assert "Earlier: France?; Paris.; Germany?; Berlin." in str(agent.get_system_prompt())
    # The hook got copies: changing them changes nothing.
    got["turns_to_keep"][0].contents.clear()
    assert agent.get_turns()[-2].text == "Italy?"


def test_notifications_for_checkpoints_rewinds_and_provider_errors(tmp_path: Path) -> None:
    notices: list[dict[str, Any]] = []
    hook = HookMatcher("Notification", lambda context: notices.append(dict(context.details)))
    agent = Agent(
        ScriptedModel([ProviderFailure(500, "overloaded")]),
        working_dir=tmp_path,
        enable_file_checkpointing=True,
        hooks=[hook],
    )
    checkpoint_id = agent.checkpoint("before")
    (tmp_path / "a.txt").write_text("x")
    agent.rewind_files(checkpoint_id)
    with pytest.raises(ProviderError) as raised:
        agent.run_sync("hi")
    assert raised.value.result is not None
    assert raised.value.result.stop_reason == "provider_error"
    codes = [n["code"] for n in notices]
    assert codes == ["file_checkpoint_created", "files_rewound", "provider_error"]
    created, rewound, failed = notices
    assert (created["checkpoint_id"], created["checkpoint_name"]) == (checkpoint_id, "before")
    assert created["level"] == rewound["level"] == "info" and failed["level"] == "warning"
    assert rewound["checkpoint_id"] == checkpoint_id and rewound["restored_changes"] == 0
    assert failed["usage"].requests >= 1 and "overloaded" in failed["message"]


def test_a_refused_checkpoint_capture_is_a_notice(tmp_path: Path) -> None:
    notices: list[dict[str, Any]] = []
    agent = Agent(
        ScriptedModel([_call("write_file", {"path": "big.txt", "content": "x"}), "ok"]),
        tools=[tool_write_file()],
        working_dir=tmp_path,
        enable_file_checkpointing=True,
        file_checkpoint_max_file_bytes=10,
        hooks=[HookMatcher("Notification", lambda c: notices.append(dict(c.details)))],
    )
    (tmp_path / "big.txt").write_text("y" * 100)
    result = agent.run_sync("overwrite")
    (failed,) = result.tool_results()
    assert failed.is_error and "File checkpointing refused" in failed.output
    assert (tmp_path / "big.txt").read_text() == "y" * 100
    (notice,) = notices
    assert notice["code"] == "file_checkpoint_capture_failed"
    assert (notice["tool_name"], notice["level"]) == ("write_file", "warning")


def test_the_registry_keeps_an_error_log_until_cleared(tmp_path: Path) -> None:
    # deputy: errors of non-gating hooks are logged, the run goes on, and
    # registry$last_errors() / clear_errors() give and reset them.
    def audit(tool_name: str, tool_input: Any, context: HookContext, tool_output: Any) -> None:
        raise OSError("audit log is full")

    agent = Agent(
        ScriptedModel([_call("add", {"a": 1, "b": 2}), "3", _call("add", {"a": 2, "b": 2}), "4"]),
        tools=[local_tool(_add, name="add")],
        working_dir=tmp_path,
        hooks=[HookMatcher("PostToolUse", audit)],
    )
    assert agent.run_sync("1 + 2?").response == "3"
    assert agent.run_sync("2 + 2?").response == "4"
    errors = agent.hooks.last_errors()
    assert [(e.event, e.tool_name, e.error, e.outcome) for e in errors] == [
        ("PostToolUse", "add", "OSError: audit log is full", "error")
    ] * 2
    assert errors[0].callback == "test_the_registry_keeps_an_error_log_until_cleared.<locals>.audit"
    assert errors[0].timestamp <= errors[1].timestamp
    agent.hooks.clear_errors()
    assert agent.hooks.last_errors() == []


def test_block_dangerous_bash_takes_deputys_patterns() -> None:
    # deputy's example: hook_block_dangerous_bash(additional_patterns = c("my_custom_pattern"))
    extra = hook_block_dangerous_bash(additional_patterns=["my_custom_pattern", r"git\s+push"])
    deny = extra.callback("run_bash", {"command": "git  push origin main"}, None)
    assert deny.permission == "deny" and "git\\\\s+push" in deny.reason
    assert extra.callback("run_bash", {"command": "rm -rf /"}, None).permission == "deny"
    assert extra.callback("run_bash", {"command": "git status"}, None) is None
    # patterns= replaces the default check; matching ignores case, as deputy's grepl.
    own = hook_block_dangerous_bash(patterns=["DROP TABLE"])
    assert own.callback("run_bash", {"command": "psql -c 'drop table x'"}, None).permission == (
        "deny"
    )
    assert own.callback("run_bash", {"command": "rm -rf /"}, None) is None
    bad_lists: list[Any] = [["("], [3], [""], 7]
    for bad in bad_lists:
        with pytest.raises(InvalidHookError, match=r"^patterns:"):
            hook_block_dangerous_bash(patterns=bad)
    with pytest.raises(InvalidHookError, match=r"^additional_patterns:"):
        hook_block_dangerous_bash(additional_patterns=["[unclosed"])


def test_limit_file_writes_takes_a_directory_as_deputys(tmp_path: Path) -> None:
    # deputy's example: agent$add_hook(hook_limit_file_writes("./output"))
    (tmp_path / "output").mkdir()
    outside = tmp_path.parent / f"{tmp_path.name}-sibling"
    agent = Agent(
        ScriptedModel(
            [
                _call("write_file", {"path": "output/ok.txt", "content": "fine"}),
                _call("write_file", {"path": "notes.txt", "content": "no"}, "c2"),
                _call("write_file", {"path": "output2/x.txt", "content": "no"}, "c3"),
                "done",
            ]
        ),
        tools=[tool_write_file()],
        working_dir=tmp_path,
        hooks=[hook_limit_file_writes("./output")],
    )
    result = agent.run_sync("write")
    allowed, refused, prefix = result.tool_results()
    assert not allowed.is_error and (tmp_path / "output" / "ok.txt").read_text() == "fine"
    real = (tmp_path / "output").resolve()
    assert refused.output == f"Denied: File writes are only allowed in {real}."
    assert prefix.is_error  # output2 only shares a prefix with output
    assert not (tmp_path / "notes.txt").exists() and not (tmp_path / "output2").exists()
    assert not outside.exists()
    # A link inside the directory that leads out of it is refused too.
    (tmp_path / "output" / "out").symlink_to(tmp_path)
    hook = hook_limit_file_writes(tmp_path / "output")
    context = HookContext(event="PreToolUse", working_dir=tmp_path)
    assert hook.callback("write_file", {"path": "output/out/x.txt"}, context) is not None


# --------------------------------------------------------------------------- tools (#37)


def test_tool_takes_its_description_by_position_as_ellmers(tmp_path: Path) -> None:
    # ellmer: tool(add, "Add two numbers together")
    add_tool = tool(_add, "Add two numbers together", annotations=READ_ONLY)
    assert (add_tool.name, add_tool.description) == ("_add", "Add two numbers together")
    assert add_tool.parameters["required"] == ["a", "b"]
    agent = Agent(
        ScriptedModel([_call("_add", {"a": 2, "b": 3}), "5"]),
        tools=[add_tool],
        working_dir=tmp_path,
    )
    assert agent.run_sync("2 + 3?").tool_results()[0].output == "5"
    with pytest.raises(InvalidToolError, match="description= must be a string"):
        tool(_add, 42)  # type: ignore[call-overload]


def test_tool_convert_false_gives_the_function_the_json_values(tmp_path: Path) -> None:
    # ellmer: convert = FALSE leaves the JSON inputs as they came.
    seen: list[tuple[Any, Any]] = []

    def plan(day: date, stops: list[Stop]) -> str:
        """Plan a trip."""
        seen.append((day, stops))
        return "planned"

    arguments = {"day": "2026-12-24", "stops": [{"city": "Oslo", "nights": 2}]}
    for convert in (True, False):
        agent = Agent(
            ScriptedModel([_call("plan", arguments), "ok"]),
            tools=[local_tool(plan, convert=convert)],
            working_dir=tmp_path,
        )
        agent.run_sync("plan it")
    converted, plain = seen
    assert converted == (date(2026, 12, 24), [Stop(city="Oslo", nights=2)])
    assert plain == ("2026-12-24", [{"city": "Oslo", "nights": 2}])
    # The arguments are still checked against the schema.
    strict = local_tool(plan, convert=False)
    assert not strict.convert
    with pytest.raises(ToolArgumentsError, match="nights"):
        strict.parse_arguments({"day": "2026-12-24", "stops": [{"city": "Oslo", "nights": "x"}]})
    with pytest.raises(InvalidToolError, match="convert="):
        tool(plan, convert="no")  # type: ignore[call-overload]
    # A re-wrapped tool keeps the setting.
    assert not tool(strict, name="plan_again").convert


def _returns(value: Any) -> Tool:
    def render(name: str) -> Any:
        """Render a figure."""
        return value

    return local_tool(render, name="render")


def _run_returning(value: Any, tmp_path: Path, **agent: Any) -> tuple[AgentResult, ScriptedModel]:
    model = ScriptedModel([_call("render", {"name": "sales"}), "Seen."])
    result = Agent(model, tools=[_returns(value)], working_dir=tmp_path, **agent).run_sync("go")
    return result, model


def test_a_tool_returning_content_gives_the_model_content_not_json(tmp_path: Path) -> None:
    # ellmer: a tool may return a Content object, a list of them, or a ContentToolResult.
    result, _ = _run_returning(ContentText(text="Three bars, one tall."), tmp_path)
    assert result.tool_results()[0].output == "Three bars, one tall."
    both = [ContentText(text="Sales by month"), ContentText(text="(in dollars)")]
    result, _ = _run_returning(both, tmp_path)
    assert result.tool_results()[0].output == "Sales by month\n\n(in dollars)"
    failures: list[str] = []
    own = ContentToolResult(call_id="ignored", name="ignored", output="No data.", is_error=True)
    result, _ = _run_returning(
        own,
        tmp_path,
        hooks=[HookMatcher("PostToolUseFailure", lambda n, i, c: failures.append(c.error))],
    )
    (returned,) = result.tool_results()
    assert (returned.output, returned.is_error, returned.call_id) == ("No data.", True, "c1")
    assert failures == ["No data."]


def test_a_tool_returning_an_image_sends_the_model_the_image(tmp_path: Path) -> None:
    # ellmer: return content_image_file("plot.png") and the model sees the plot.
    plot = tmp_path / "plot.png"
    plot.write_bytes(PNG_1PX)
    result, model = _run_returning(
        [ContentText(text="The plot:"), content_image_file(plot)], tmp_path
    )
    (returned,) = result.tool_results()
    assert returned.output == f"The plot:\n\n[image 1: image/png, {len(PNG_1PX)} bytes]"
    assert [i.media_type for i in returned.images] == ["image/png"]
    messages = model.requests[-1]["messages"]
    tool_message = next(m for m in messages if m["role"] == "tool")
    assert tool_message["content"] == returned.output  # text only where tools take text
    image_message = messages[messages.index(tool_message) + 1]
    assert image_message["role"] == "user"
    text, image = image_message["content"]
    assert text == {"type": "text", "text": "The image(s) the render call (c1) returned:"}
    encoded = base64.b64encode(PNG_1PX).decode()
    assert image == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{encoded}"}}
    # A model that takes no images reads a note instead (litellm knows which do).
    assert supports_images(ChatModel(model="openai/gpt-4o-mini"))
    assert not supports_images(ChatModel(model="openai/gpt-3.5-turbo"))
    plain = Conversation(turns=result.turns).messages(images=False)
    assert "image_url" not in str(plain) and "takes no images" in str(plain)


def test_images_a_tool_is_made_to_return_are_checked(tmp_path: Path) -> None:
    # A prompt-injected model can steer what a tool returns: a link is never fetched or
    # sent, markup (SVG) and non-images are not images, whatever the media type says.
    svg = base64.b64encode(b"<svg onload='alert(1)'/>").decode()
    hostile = [
        ContentImage(url="https://attacker.example/pixel.png"),
        ContentImage(data=svg, media_type="image/png"),
        ContentImage(data="not base64!", media_type="image/png"),
        ContentImage(data=base64.b64encode(PNG_1PX).decode(), media_type="text/html"),
    ]
    result, model = _run_returning(hostile, tmp_path)
    (returned,) = result.tool_results()
    assert [i.media_type for i in returned.images] == ["image/png"]  # the real PNG only
    sent = str(model.requests[-1]["messages"])
    assert "attacker.example" not in sent  # not even as text
    assert "an image link, not fetched or sent" in returned.output
    assert returned.output.count(", not sent]") == 2  # the SVG and the bad base64
    with pytest.raises(ToolInvocationError, match="Not an image"):
        content_image_inline(b"<svg/>")
    many = [content_image_inline(PNG_1PX)] * 9
    result, _ = _run_returning(many, tmp_path)
    (returned,) = result.tool_results()
    assert len(returned.images) == 8 and "at most 8 images a call" in returned.output


async def test_the_chat_card_shows_a_returned_image_from_the_session(tmp_path: Path) -> None:
    # The kit's tool card: the image as shinychat's content_extra <img> whose source is
    # the image's own data: URL (no link, no markup); the output stays code text.
    from deputy_shiny.shiny import render_events

    png = content_image_inline(PNG_1PX)
    said = ContentText(text="<img src=x onerror=alert(1)>")
    model = ScriptedModel([_call("render", {"name": "sales"}), "Seen."])
    agent = Agent(model, tools=[_returns([said, png])], working_dir=tmp_path)
    chunks = [c async for c in render_events(agent.run("go"))]
    (block,) = [
        b
        for c in chunks
        if not isinstance(c, str)
        for b in (c.blocks or [])
        if b["type"] == "tool_result"  # type: ignore[index]
    ]
    assert block["value_type"] == "content_extra"  # type: ignore[index]
    text, image = json.loads(block["value"])  # type: ignore[index]
    assert image == {"type": "image", "src": f"data:image/png;base64,{png.data}"}
    assert text["value_type"] == "code" and "onerror" in text["value"]
    # A transcript replayed from the conversation shows the same card.
    (result,) = [r for t in agent.get_turns() for r in t.tool_results]
    assert result.images == [png]
