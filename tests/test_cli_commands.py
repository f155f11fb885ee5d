"""The ``deputy`` command's slash commands and deputy's options, in process.

Slash commands run in a chat session fed scripted lines, on a model that records what
it was sent (no command may reach it). Each option is checked by its effect on the
agent the command builds, or on a run of it. The same in a real terminal is
tests/test_cli_tmux.py.
"""

from __future__ import annotations

import io
import json
import logging
import sys
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from deputy_shiny.cli import main
from deputy_shiny.cli._args import CommandLineError, parse_args
from deputy_shiny.cli._main import SYSTEM_PROMPT, build_agent, load_mcp
from deputy_shiny.cli._prompts import ScriptedLines
from deputy_shiny.cli._session import Interrupts, Terminal, chat, run_task
from deputy_shiny.testing import FunctionModel, ScriptedModel, ScriptedReply, ScriptedToolCall
from tests.mcp_servers import SCRIPT


class Recorder:
    """A model that echoes, and keeps every user message it was sent."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.model = FunctionModel(self.reply)

    def reply(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        last = messages[-1]
        if last["role"] == "user" and "summar" not in str(last["content"]).lower():
            self.sent.append(str(last["content"]))
        return f"Echo: {str(last['content'])[:40]}"


def session(lines: list[str]) -> tuple[Terminal, io.StringIO]:
    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=120, highlight=False)
    return Terminal(console, ScriptedLines(lines), Interrupts()), out


def agent_for(argv: list[str], model: Any, term: Terminal, folder: Path) -> Any:
    agent, _ = build_agent(parse_args(argv), model, term.prompts, folder)
    return agent


# --------------------------------------------------------------------------- slash commands


async def test_slash_commands_act_on_the_session_and_never_reach_the_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    recorder = Recorder()
    lines = [
        "first task",
        "second task",
        "/turns",
        "/cost",
        "/help",
        "/bogus now",
        "/save kept.json",
        "/compact 2",
        "/turns",
        "/compact many",
        "/clear",
        "/turns",
        "//help",
        "/etc/hosts: what is it?",
        "/q",
        "never read",
    ]
    term, out = session(lines)
    agent = agent_for([], recorder.model, term, tmp_path)
    saved = tmp_path / "auto.json"
    assert await chat(agent, term, saved) == 0
    text = out.getvalue()
    # Only tasks reached the model: "//help" sends "/help", a path is a task.
    assert recorder.sent == ["first task", "second task", "/help", "/etc/hosts: what is it?"]
    assert "never read" not in text
    assert "The conversation has 4 turns." in text
    assert "Input tokens: 2" in text and "Total cost: unknown" in text  # FunctionModel: no price
    assert "(2 requests with no known price)" in text
    assert "/compact [n]" in text and "/save [path]" in text and "/exit, /quit, /q" in text
    assert "Unknown command: /bogus. Type /help for the commands." in text
    assert "Session saved to kept.json" in text
    kept = json.loads((tmp_path / "kept.json").read_text())
    assert "second task" in json.dumps(kept)
    assert "Compacted: 2 older turns summarised" in text
    assert "The conversation has 4 turns (2 in the model's context, the rest summarised)." in text
    assert "Not a number of turns: 'many'; keeping 4." in text
    assert "Conversation cleared" in text and "The conversation has 0 turns." in text
    # After /clear the model saw only what came after it, and --save followed the session.
    assert agent.get_turns()[0].text == "/help"
    assert "first task" not in (tmp_path / "auto.json").read_text()


async def test_save_without_a_path_and_a_save_that_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    term, out = session(["hello", "/save", f"/save {tmp_path}/missing/dir/s.json", "/compact"])
    assert await chat(agent_for([], Recorder().model, term, tmp_path), term) == 0
    (default,) = tmp_path.glob("deputy_session_*.json")
    assert "hello" in default.read_text()
    text = out.getvalue()
    assert f"Session saved to {default.name}" in text
    assert "Could not save the session to" in text and "missing/dir/s.json" in text
    assert "Nothing to compact" in text  # two turns, keeping 4


# --------------------------------------------------------------------------- options


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--tools", "everything"], "invalid choice: 'everything'"),
        (["--max-requests", "0"], "'0' is not a whole number of at least 1"),
        (["--max-requests", "lots"], "'lots' is not a whole number of at least 1"),
        (["--max-cost", "-1"], "'-1' is not an amount of US dollars above 0"),
        (["--max-cost", "nan"], "'nan' is not an amount of US dollars above 0"),
        (["--max-cost", "inf"], "'inf' is not an amount"),
        (["--system-prompt", " "], "--system-prompt: the prompt is empty"),
        (["--system-prompt-file", "/nonexistent/p.md"], "no such file"),
        (["--system-prompt", "a", "--system-prompt-file", "p"], "not allowed with argument"),
        (["--mcp-config", "/nonexistent/mcp.json"], "--mcp-config /nonexistent/mcp.json: no such"),
        (["--dir", "/nonexistent/folder"], "--dir /nonexistent/folder: no such folder"),
        (["--debug-file", "/nonexistent/d/log"], "the folder /nonexistent/d does not exist"),
    ],
)
def test_bad_option_values_are_usage_errors(argv: list[str], message: str) -> None:
    with pytest.raises(CommandLineError, match=message.replace("(", r"\(")):
        parse_args(["run", "x", *argv])


def test_option_files_are_read_and_checked(tmp_path: Path) -> None:
    prompt = tmp_path / "prompt.md"
    prompt.write_text("\nYou are a pirate.\n")
    options = parse_args(["--system-prompt-file", str(prompt), "-d", str(tmp_path), "-G", "x"])
    assert options.system_prompt == "You are a pirate."
    assert options.dir == tmp_path.resolve() and options.debug  # a debug file turns debug on
    (tmp_path / "empty.md").write_text("  \n")
    (tmp_path / "binary.md").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(CommandLineError, match=r"empty\.md: the file is empty"):
        parse_args(["--system-prompt-file", str(tmp_path / "empty.md")])
    with pytest.raises(CommandLineError, match=r"binary\.md: it is not UTF-8 text"):
        parse_args(["--system-prompt-file", str(tmp_path / "binary.md")])
    with pytest.raises(CommandLineError, match="no such folder"):
        parse_args(["--dir", str(prompt)])  # a file is no folder


def test_defaults_are_deputys() -> None:
    options = parse_args([])
    assert (options.tools, options.max_requests, options.max_cost) == ("standard", 25, None)
    assert not (options.no_ask or options.verbose or options.no_color or options.debug)


def tool_names(argv: list[str], tmp_path: Path) -> list[str]:
    term, _ = session([])
    return list(agent_for(argv, Recorder().model, term, tmp_path).get_tools())


def test_tools_and_no_ask_choose_the_agents_tools(tmp_path: Path) -> None:
    standard = tool_names([], tmp_path)
    assert standard[:8] == [
        "read_file",
        "read_markdown",
        "list_files",
        "glob_files",
        "grep_files",
        "write_file",
        "edit_file",
        "multi_edit",
    ]
    assert standard[-1] == "ask_user"
    minimal = tool_names(["--tools", "minimal", "--no-ask"], tmp_path)
    assert minimal == ["read_file", "read_markdown", "list_files", "glob_files", "grep_files"]
    full = tool_names(["-t", "full"], tmp_path)
    assert {"web_fetch", "web_search", "read_csv"} <= set(full)
    assert full.count("ask_user") == 1  # the terminal's, not the preset's
    assert "ask_user" not in tool_names(["-t", "full", "-A"], tmp_path)


async def test_the_terminals_ask_user_is_asked_in_the_terminal(tmp_path: Path) -> None:
    question = {"header": "Pick", "question": "Which?", "multi_select": False}
    question["options"] = [
        {"label": "A", "description": "a"},
        {"label": "B", "description": "b"},
    ]
    model = ScriptedModel(
        [
            ScriptedReply(tool_calls=[ScriptedToolCall("ask_user", {"questions": [question]})]),
            "ok",
        ]
    )
    term, out = session(["2"])
    agent = agent_for(["-t", "full"], model, term, tmp_path)
    await run_task(agent, "ask", term)
    assert "[Pick] Which?" in out.getvalue()
    assert "B" in agent.get_turns()[2].contents[0].model_dump_json()


async def test_max_requests_and_max_cost_limit_each_run(tmp_path: Path) -> None:
    def always_a_tool(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        return ScriptedReply(tool_calls=[ScriptedToolCall("list_files", {"path": "."})])

    term, out = session([])
    agent = agent_for(["--max-requests", "2"], FunctionModel(always_a_tool), term, tmp_path)
    result = await run_task(agent, "loop", term)
    assert result is not None and result.stop_reason == "request_limit"
    assert result.usage.requests == 2 and "Stopped (request_limit)" in out.getvalue()

    def costly(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        call = ScriptedToolCall("list_files", {"path": "."})
        return ScriptedReply(tool_calls=[call], cost=0.03)

    agent = agent_for(["--max-cost", "$0.05"], FunctionModel(costly), term, tmp_path)
    result = await run_task(agent, "spend", term)
    assert result is not None and result.stop_reason == "cost_limit"
    assert result.usage.requests == 2  # 0.03, then 0.06: over, and no third request


async def test_system_prompt_and_dir_reach_the_model_and_the_tools(tmp_path: Path) -> None:
    seen: list[str] = []

    def reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        if messages[-1]["role"] == "tool":
            return f"Got: {messages[-1]['content']}"
        seen.append(str(messages[0]["content"]))
        return ScriptedReply(tool_calls=[ScriptedToolCall("read_file", {"path": "here.txt"})])

    work = tmp_path / "work"
    work.mkdir()
    (work / "here.txt").write_text("found in --dir")
    term, out = session([])
    argv = ["--system-prompt", "Talk like a pirate.", "--dir", str(work)]
    options = parse_args(argv)
    assert options.dir is not None
    agent, _ = build_agent(options, FunctionModel(reply), term.prompts, options.dir)
    await run_task(agent, "read it", term)
    assert seen == ["Talk like a pirate."]
    assert "Got: " in out.getvalue() and "found in --dir" in out.getvalue()
    agent, _ = build_agent(parse_args([]), FunctionModel(reply), term.prompts, work)
    await run_task(agent, "again", term)
    assert seen[-1] == SYSTEM_PROMPT


async def test_mcp_options_load_the_servers_tools(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "mcp.json"
    server = {"command": sys.executable, "args": [str(SCRIPT)]}
    broken = {"command": sys.executable, "args": ["-c", "raise SystemExit(3)"]}
    config.write_text(json.dumps({"mcpServers": {"faulty": server, "broken": broken}}))
    term, out = session([])
    # --mcp reads the default config ($DEPUTY_MCP_CONFIG); --mcp-server picks servers.
    monkeypatch.setenv("DEPUTY_MCP_CONFIG", str(config))
    for argv in (["--mcp-config", str(config), "--mcp-server", "faulty"], ["-M"]):
        options = parse_args(argv)
        assert options.mcp
        agent, _ = build_agent(options, Recorder().model, term.prompts, tmp_path)
        try:
            await load_mcp(options, agent, term.console)
            assert {"pid", "environment"} <= set(agent.mcp_tools())
            assert {"pid", "environment"} <= set(agent.get_tools())
        finally:
            await agent.aclose()
    text = out.getvalue()
    assert text.count("MCP: 4 tools: ") == 2
    assert text.count("MCP: ") == 3 and "broken" in text  # the server that failed: a note
    with pytest.raises(CommandLineError, match=r"--mcp-server nope: not in the MCP config"):
        build_agent(
            parse_args(["-M", "--mcp-server", "faulty,nope"]), "deputy/demo", term.prompts, tmp_path
        )
    config.write_text('{"mcpServers": {"x": {"args": []}}}')  # no command, no url
    with pytest.raises(CommandLineError, match=r'--mcp-config .*mcp\.json: .*needs "command"'):
        build_agent(parse_args(["-C", str(config)]), "deputy/demo", term.prompts, tmp_path)
    assert not parse_args([]).mcp


def test_options_through_the_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``deputy run`` with several options, its output not a terminal (plain text)."""
    monkeypatch.chdir(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    log = tmp_path / "debug.log"
    argv = ["run", "hello", "--model", "deputy/demo", "--dir", str(work), "--tools", "minimal"]
    argv += ["--no-ask", "--debug-file", str(log), "--no-color"]
    library = logging.getLogger("deputy_shiny")
    before = (library.level, library.propagate, list(library.handlers))
    assert main(argv) == 0
    # --debug leaves the library's logging as it found it (records reach the root again).
    assert (library.level, library.propagate, list(library.handlers)) == before
    out, err = capsys.readouterr()
    assert "**list files**" in out  # not a terminal: the Markdown as written
    assert "ask me something" not in out and "write a note" not in out  # minimal, no ask
    assert "\x1b" not in out + err
    assert "run `deputy --model openai/gpt-4.1-mini`" in out  # the demo in a terminal
    lines = log.read_text().splitlines()
    assert any(
        "[deputy-debug] deputy_shiny.cli: agent: model deputy/demo, tools minimal" in line
        for line in lines
    )
    assert any(line.endswith("run stopped: complete") for line in lines)
    assert main(["run", "x", "--max-requests", "none"]) == 2
    assert capsys.readouterr().err == (
        "deputy: argument -n/--max-requests: 'none' is not a whole number of at least 1\n"
    )
