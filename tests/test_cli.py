"""The ``deputy`` command, in process: its flags, what it prints, how it asks, its loop.

Output goes to a rich Console on a StringIO (no terminal, so no colour codes: what is
asserted is the text a person reads). Input comes from scripted lines. The real
console script in a real terminal is tests/test_cli_tmux.py.
"""

from __future__ import annotations

import asyncio
import io
import re
import time
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from deputy_shiny import Agent, ApprovalRequest, Permissions
from deputy_shiny.cli import main
from deputy_shiny.cli._args import CommandLineError, choose_model, parse_args
from deputy_shiny.cli._printer import EventPrinter, terminal_safe
from deputy_shiny.cli._prompts import LineReader, ScriptedLines, TerminalPrompts
from deputy_shiny.cli._session import Interrupts, Terminal, chat, exit_status, run_task
from deputy_shiny.events import (
    PermissionEvent,
    RequestEndEvent,
    RunErrorEvent,
    StopEvent,
    TextCompleteEvent,
    TextEvent,
    ToolEndEvent,
    ToolStartEvent,
)
from deputy_shiny.testing import FunctionModel, ScriptedModel, ScriptedReply, ScriptedToolCall
from deputy_shiny.tools import tool_write_file, tools_interactive
from deputy_shiny.tools.interactive import AskUserContext, Option, Question
from deputy_shiny.usage import RequestUsage

IDS: dict[str, Any] = {"agent_id": "a", "session_id": "s", "run_id": "r"}
HOSTILE = (
    "[bold red]boom[/] \x1b[31mred\x1b[0m \x1b]8;;https://evil.example\x1b\\link\x1b]8;;\x1b\\"
)


def console() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=False, width=100, highlight=False), out


def terminal(lines: list[str]) -> tuple[Terminal, io.StringIO]:
    con, out = console()
    return Terminal(con, ScriptedLines(lines), Interrupts()), out


# --------------------------------------------------------------------------- printing


def test_model_text_with_markup_and_escapes_prints_literally() -> None:
    con, out = console()
    printer = EventPrinter(con)
    for chunk in ("Say ", HOSTILE[:14], HOSTILE[14:], "\rdone\x07"):
        printer.handle(TextEvent(text=chunk, **IDS))
    printer.handle(TextCompleteEvent(text="ignored: already streamed", **IDS))
    text = out.getvalue()
    assert text == "Say [bold red]boom[/] red link\ndone\n".replace("\n", "", 1)
    assert "\x1b" not in text and "evil.example" not in text and "\x07" not in text


def test_tool_calls_results_denials_and_errors_print_as_text() -> None:
    con, out = console()
    printer = EventPrinter(con)
    printer.handle(TextEvent(text="Let me look", **IDS))
    printer.handle(
        ToolStartEvent(call_id="c1", tool_name="[b]grep[/b]", arguments={"q": HOSTILE}, **IDS)
    )
    output = "\n".join(f"line {i}" for i in range(1, 21))
    printer.handle(
        ToolEndEvent(call_id="c1", tool_name="grep", output=output, duration=0.25, **IDS)
    )
    printer.handle(
        ToolEndEvent(call_id="c2", tool_name="cat", output="[i]no[/i]", is_error=True, **IDS)
    )
    printer.handle(
        PermissionEvent(
            call_id="c3", tool_name="rm", decision="deny", reason="[red]no[/red]", **IDS
        )
    )
    printer.handle(RunErrorEvent(error="provider said \x1b[2Jno", **IDS))
    printer.handle(StopEvent(stop_reason="error", message="it broke", **IDS))
    text = out.getvalue()
    assert text.startswith("Let me look\n╭─ [b]grep[/b] ")  # the text's line ends first
    # Arguments show as JSON: the escapes a model hid are visible, and inert.
    assert '"q": "[bold red]boom[/] \\u001b[31mred' in text
    assert "grep done in 0.2s" in text and "line 8" in text and "line 9 " not in text
    assert "… 12 more lines" in text
    assert "cat failed" in text and "[i]no[/i]" in text
    assert "Denied rm: [red]no[/red]" in text
    assert "Error: provider said no" in text and "Stopped (error): it broke" in text
    assert "\x1b" not in text


def test_a_complete_stop_prints_nothing_and_the_usage_line_ends_the_run() -> None:
    con, out = console()
    printer = EventPrinter(con)
    result = Agent(ScriptedModel([ScriptedReply(text="Hi", cost=0.0125)])).run_sync("x")
    printer.handle(StopEvent(stop_reason="complete", **IDS))
    printer.finish(result)
    assert out.getvalue().startswith("1 request · 0 tool calls · ")
    assert out.getvalue().endswith("cost $0.0125\n")


def markdown_console() -> tuple[Console, io.StringIO]:
    """A console that renders as a colour terminal does (its escape codes are in ``out``)."""
    out = io.StringIO()
    return Console(file=out, force_terminal=True, color_system="standard", width=100), out


def unstyled(text: str) -> str:
    """``text`` without rich's own colours and styles (SGR codes)."""
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def test_a_reply_renders_as_markdown_a_block_at_a_time() -> None:
    con, out = markdown_console()
    printer = EventPrinter(con, markdown=True)
    reply = "# Plan\n\nThis is **important** and `code`.\n\n- first\n- second\n\n1. one\n"
    chunks = [reply[i : i + 7] for i in range(0, len(reply), 7)]
    for chunk in chunks[:5]:  # "# Plan\n\nThis is **impo": the heading's block is done
        printer.handle(TextEvent(text=chunk, **IDS))
    assert "Plan" in out.getvalue() and "This" not in out.getvalue()
    for chunk in chunks[5:]:
        printer.handle(TextEvent(text=chunk, **IDS))
    printer.handle(TextCompleteEvent(text=reply, **IDS))
    text = out.getvalue()
    assert "**" not in text and "# Plan" not in text and "`" not in text and "- first" not in text
    assert "\x1b[1mimportant\x1b[0m" in text  # bold, as the terminal shows it
    plain = unstyled(text)
    assert " • first" in plain and " • second" in plain and " 1 one" in plain
    assert text.count("important") == 1  # the complete text is not printed again


def test_model_written_escapes_and_links_stay_inert_in_markdown() -> None:
    con, out = markdown_console()
    printer = EventPrinter(con, markdown=True)
    hostile = (
        "See [the docs](http://md-evil.example/x) and <http://auto-evil.example>, "
        "\x1b]8;;http://osc-evil.example/\x1b\\click\x1b]8;;\x1b\\ "
        "\x1b[31mred\x1b[0m \x1b]52;c;cHduZWQ=\x07[bold]not markup[/bold] "
        "![pic](http://img-evil.example/p.png)\n"
    )
    for i in range(0, len(hostile), 5):  # escapes split over chunks are removed whole
        printer.handle(TextEvent(text=hostile[i : i + 5], **IDS))
    printer.finish(None)
    text = out.getvalue()
    assert "\x1b]" not in text  # no OSC at all: no hyperlink, no clipboard, no title
    assert "osc-evil" not in text and "cHduZWQ" not in text
    assert "\x1b[31m" not in text  # the model's red never reaches the terminal
    plain = unstyled(text)
    assert "the docs (http://md-evil.example/x)" in plain  # the address shows, as text
    assert "http://auto-evil.example" in plain
    assert "[bold]not markup[/bold]" in plain and "click" in plain and "red" in plain


def test_a_long_code_block_streams_in_time_proportional_to_its_length() -> None:
    """A model writing a file in a code block: 100 KB in 8-character chunks. Each line is
    looked at once (0.1 s on a quiet machine; rescanning the block per chunk took 56 s)."""
    out = io.StringIO()
    printer = EventPrinter(Console(file=out, width=80, color_system=None), markdown=True)
    reply = "```text\n" + "".join(f"line {i} of the file\n" for i in range(5000)) + "```\n"
    started = time.monotonic()
    for i in range(0, len(reply), 8):
        printer.handle(TextEvent(text=reply[i : i + 8], **IDS))
    assert time.monotonic() - started < 5.0
    assert out.getvalue() == ""  # the block is not finished until the reply ends
    printer.handle(TextCompleteEvent(text=reply, **IDS))
    assert "line 4999 of the file" in out.getvalue() and "```" not in out.getvalue()


def test_plain_output_streams_markdown_as_written() -> None:
    con, out = console()  # not a terminal (a pipe, a file): the text as the model wrote it
    printer = EventPrinter(con, markdown=False)
    printer.handle(TextEvent(text="**bold** [x](http://a.example)", **IDS))
    printer.handle(TextCompleteEvent(text="", **IDS))
    assert out.getvalue() == "**bold** [x](http://a.example)\n"


def test_verbose_shows_calls_and_results_whole_and_each_request() -> None:
    con, out = console()
    printer = EventPrinter(con, verbose=True)
    printer.handle(
        ToolStartEvent(call_id="c1", tool_name="write", arguments={"text": "y" * 500}, **IDS)
    )
    output = "\n".join(f"line {i}" for i in range(1, 21))
    printer.handle(ToolEndEvent(call_id="c1", tool_name="grep", output=output, **IDS))
    printer.handle(
        RequestEndEvent(usage=RequestUsage(input_tokens=1200, output_tokens=34), cost=0.002, **IDS)
    )
    text = out.getvalue()
    assert "line 20" in text and "more lines" not in text
    assert "y" * 300 in text.replace("│", "").replace("\n", "").replace(" ", "")
    assert "request: 1,200 tokens in, 34 out, cost $0.0020" in text


def test_terminal_safe_removes_every_kind_of_escape() -> None:
    hostile = "a\x1b[1;31mb\x1b]0;title\x07c\x1bPdcs\x1b\\d\x9b2Je\u202ef\x1b"
    assert terminal_safe(hostile) == "abcdef"
    assert terminal_safe("tab\tand\r\nnewline") == "tab\tand\nnewline"


# --------------------------------------------------------------------------- prompts


def request(**kwargs: Any) -> ApprovalRequest:
    return ApprovalRequest(
        call_id="c1", tool_name="write_file", arguments={"path": "a.txt"}, reason="writes", **kwargs
    )


@pytest.mark.parametrize(
    ("lines", "approved", "always", "stop"),
    [
        (["y"], True, False, False),
        (["A"], True, True, False),
        (["no"], False, False, False),
        (["s"], False, False, True),
        (["maybe", "", "y"], True, False, False),
        (["what", "?", "huh"], False, False, False),
        ([], False, False, False),
    ],
)
async def test_approval_answers(lines: list[str], approved: bool, always: bool, stop: bool) -> None:
    con, out = console()
    decision = await TerminalPrompts(con, ScriptedLines(lines)).approve(request(calls_after=2))
    assert (decision.approved, decision.always, decision.stop) == (approved, always, stop)
    text = out.getvalue()
    assert "Approve write_file? (+2 more waiting)" in text and '{"path": "a.txt"}' in text
    if len(lines) > 1:
        assert "Type y, a, n or s." in text


async def test_approval_shows_model_arguments_as_text() -> None:
    con, out = console()
    hostile = ApprovalRequest(
        call_id="c", tool_name="[blink]x[/blink]", arguments={"cmd": HOSTILE}, reason="[u]r[/u]"
    )
    await TerminalPrompts(con, ScriptedLines(["n"])).approve(hostile)
    text = out.getvalue()
    assert "Approve [blink]x[/blink]?" in text and "[u]r[/u]" in text
    assert "[bold red]boom[/] \\u001b[31mred" in text and "\x1b" not in text


QUESTIONS = [
    Question(
        header="[b]Pick",
        question="Which one?",
        multi_select=False,
        options=[Option(label="CSV", description="[i]table"), Option(label="JSON", description="")],
    ),
    Question(
        header="Many",
        question="Which ones?",
        multi_select=True,
        options=[Option(label="a", description="A"), Option(label="b", description="B")],
    ),
]


@pytest.mark.parametrize(
    ("lines", "answers"),
    [
        (["2", "2,1"], [["JSON"], ["b", "a"]]),
        (["just text", "3", "my own"], ["just text", "my own"]),
        (["1,2", "9", "1", "1, 1"], [["CSV"], ["a"]]),
    ],
)
async def test_ask_user_answers(lines: list[str], answers: list[Any]) -> None:
    con, out = console()
    prompts = TerminalPrompts(con, ScriptedLines(lines))
    assert await prompts.ask_user(QUESTIONS, AskUserContext()) == answers
    text = out.getvalue()
    assert "[[b]Pick] Which one?" in text and "1. CSV - [i]table" in text and "3. Other" in text


async def test_ask_user_declines_at_end_of_input() -> None:
    from deputy_shiny.errors import AskUserDeclined

    con, _ = console()
    with pytest.raises(AskUserDeclined):
        await TerminalPrompts(con, ScriptedLines(["1"])).ask_user(QUESTIONS, AskUserContext())


async def test_line_reader_reads_lines_across_reads_and_survives_a_cancelled_wait(
    tmp_path: Path,
) -> None:
    import os

    read_fd, write_fd = os.pipe()
    reader = LineReader(read_fd)
    try:
        waiting = asyncio.ensure_future(reader.readline())
        await asyncio.sleep(0.01)
        waiting.cancel()  # Ctrl-C while a prompt waits: the next read gets the next line
        with pytest.raises(asyncio.CancelledError):
            await waiting
        os.write(write_fd, b"first\r\nsecond\npar")
        assert await reader.readline() == "first"
        assert await reader.readline() == "second"
        os.write(write_fd, "tial é\n".encode())
        assert await reader.readline() == "partial é"
        os.write(write_fd, b"last")
        os.close(write_fd)
        assert await reader.readline() == "last"
        assert await reader.readline() is None
    finally:
        os.close(read_fd)
    regular = tmp_path / "input.txt"
    regular.write_text("from a file\n")
    with regular.open("rb") as fh:  # a regular file cannot be polled: a thread reads it
        assert await LineReader(fh.fileno()).readline() == "from a file"


# --------------------------------------------------------------------------- arguments


def test_parse_args_forms() -> None:
    assert parse_args([]).command == "chat"
    chat_options = parse_args(["--model", "deputy/demo", "--permissions", "plan"])
    assert (chat_options.command, chat_options.model, chat_options.permissions) == (
        "chat",
        "deputy/demo",
        "plan",
    )
    assert parse_args(["chat"]).command == "chat"
    run = parse_args(["run", "do it", "--save", "s.json"])
    assert (run.task, run.save) == ("do it", Path("s.json"))


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--bogus"], "unrecognized arguments: --bogus"),
        (["run"], "the following arguments are required: task"),
        (["run", "  "], "the task is empty"),
        (["run", "x", "--permissions", "god"], "invalid choice: 'god'"),
        (["run", "x", "--resume", "/nonexistent/s.json"], "no such file"),
        (["run", "x", "--save", "/nonexistent/dir/s.json"], "does not exist"),
    ],
)
def test_bad_command_lines_are_usage_errors(argv: list[str], message: str) -> None:
    with pytest.raises(CommandLineError, match=message):
        parse_args(argv)


def test_a_bad_command_line_is_one_line_and_status_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "x", "--flag"]) == 2
    assert main(["run", "x", "--model", "not a model"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [
        "deputy: unrecognized arguments: --flag",
        "deputy: --model: 'not a model' is not a litellm model string (like openai/gpt-4.1-mini)",
    ]


def test_model_choice() -> None:
    no_key = {"DEPUTY_MODEL": "openai/gpt-4.1-mini"}
    assert choose_model(None, {}).model == "deputy/demo"
    assert "offline demo model" in (choose_model(None, {}).note or "")
    assert choose_model(None, no_key, missing=lambda m: []).model == "openai/gpt-4.1-mini"
    fallback = choose_model(None, no_key, missing=lambda m: ["OPENAI_API_KEY"])
    assert fallback.model == "deputy/demo" and "OPENAI_API_KEY" in (fallback.note or "")
    assert choose_model("deputy/demo", no_key).model == "deputy/demo"
    with pytest.raises(CommandLineError, match="needs OPENAI_API_KEY, which is not set"):
        choose_model("openai/gpt-4.1-mini", {}, missing=lambda m: ["OPENAI_API_KEY"])
    with pytest.raises(CommandLineError, match="names no provider litellm knows \\('nosuch'\\)"):
        choose_model("nosuch/model", {}, missing=lambda m: [])


# --------------------------------------------------------------------------- sessions


def writer_model() -> FunctionModel:
    """``write <name>`` writes the file (it needs approval); anything else is echoed."""

    def reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        last = messages[-1]
        if last["role"] == "tool":
            return f"Tool said: {last['content']}"
        text = str(last["content"])
        turns = sum(1 for m in messages if m["role"] == "user")
        if text.startswith("write "):
            call = ScriptedToolCall("write_file", {"path": text.split()[1], "content": "hi"})
            return ScriptedReply(tool_calls=[call])
        return f"Echo {turns}: {text}"

    return FunctionModel(reply)


def writer_agent(tmp_path: Path, term: Terminal) -> Agent:
    prompts = term.prompts
    return Agent(
        writer_model(),
        tools=[tool_write_file(), *tools_interactive(callback=prompts.ask_user)],
        working_dir=tmp_path,
        permissions=Permissions(approval_effects=("write",)),
        approval_handler=prompts.approve,
    )


async def test_chat_runs_tasks_until_exit_and_saves_and_resumes(tmp_path: Path) -> None:
    term, out = terminal(["write a.txt", "y", "", "hello", "/exit", "never read"])
    agent = writer_agent(tmp_path, term)
    saved = tmp_path / "s.json"
    assert await chat(agent, term, saved) == 0
    text = out.getvalue()
    assert "› write a.txt\n" in text and "Run it? [y]es, [a]lways, [n]o, [s]top the run: y" in text
    assert "write_file done" in text and "Tool said: Wrote 2 bytes to a.txt" in text
    assert "Echo 2: hello" in text and "never read" not in text
    assert (tmp_path / "a.txt").read_text() == "hi"
    resumed_term, resumed_out = terminal([])
    resumed = writer_agent(tmp_path, resumed_term).load_session(saved)
    result = await run_task(resumed, "again", resumed_term)
    assert exit_status(result) == 0
    assert "Echo 3: again" in resumed_out.getvalue()  # the saved conversation continued


async def test_chat_ends_at_end_of_input_and_a_denied_write_does_not_run(tmp_path: Path) -> None:
    term, out = terminal(["write b.txt", "n"])
    assert await chat(writer_agent(tmp_path, term), term) == 0
    assert not (tmp_path / "b.txt").exists()
    assert "write_file failed" in out.getvalue()


class CtrlCAtThePrompt:
    """Lines where the user presses Ctrl-C at the ``n``-th prompt, then types on."""

    echoes = False

    def __init__(self, interrupts: Interrupts, at: int, then: list[str]) -> None:
        self.interrupts, self.at, self.then, self.asked = interrupts, at, then, 0

    async def readline(self) -> str | None:
        self.asked += 1
        if self.asked == self.at:
            asyncio.get_running_loop().call_soon(self.interrupts.fire)
            await asyncio.Event().wait()  # blocks until the interrupt cancels it
        return self.then.pop(0) if self.then else None


async def test_ctrl_c_during_an_approval_stops_the_run_not_the_session(tmp_path: Path) -> None:
    con, out = console()
    interrupts = Interrupts()
    term = Terminal(con, CtrlCAtThePrompt(interrupts, 2, ["write c.txt", "hello"]), interrupts)
    agent = writer_agent(tmp_path, term)
    # prompt 1: "write c.txt"; prompt 2 (the approval): Ctrl-C; prompt 3: "hello"; then EOF.
    async with asyncio.timeout(30):  # an interrupt that goes nowhere would wait forever
        assert await chat(agent, term) == 0
    text = out.getvalue()
    assert "Stopped (interrupted)" in text and not (tmp_path / "c.txt").exists()
    assert "Echo 2: hello" in text


async def test_ctrl_c_at_the_prompt_clears_it(tmp_path: Path) -> None:
    con, out = console()
    interrupts = Interrupts()
    term = Terminal(con, CtrlCAtThePrompt(interrupts, 1, ["hello"]), interrupts)
    async with asyncio.timeout(30):
        assert await chat(writer_agent(tmp_path, term), term) == 0
    assert "(Ctrl-C stops a run; /exit or Ctrl-D leaves)" in out.getvalue()
    assert "Echo 1: hello" in out.getvalue()


async def test_a_failed_run_prints_its_error_and_exits_1() -> None:
    term, out = terminal([])
    agent = Agent(ScriptedModel(["ok", RuntimeError("provider down")]))
    assert exit_status(await run_task(agent, "a", term)) == 0
    assert exit_status(await run_task(agent, "b", term)) == 1
    assert "provider down" in out.getvalue() and "Stopped (provider_error)" in out.getvalue()


def test_a_resume_file_that_is_not_a_session_is_one_line_and_status_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.json").write_text('{"not": "a session"}')
    assert main(["run", "x", "--model", "deputy/demo", "--resume", "bad.json"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1
    assert err.startswith("deputy: --resume bad.json: ")
