"""The offline demo model's walkthrough: ``demo_reply`` branch by branch, then each step
through a real Agent whose tools really run."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from deputy_shiny import (
    Agent,
    Permissions,
    hook_block_dangerous_bash,
    tool_run_bash,
    tools_interactive,
    tools_preset,
)
from deputy_shiny.approvals import ApprovalDecision, ApprovalRequest
from deputy_shiny.delegation import AgentDefinition, LeadAgent
from deputy_shiny.errors import AskUserDeclined
from deputy_shiny.models import demo as demo_module
from deputy_shiny.models.demo import (
    CHUNK_SIZE,
    INTRO,
    MENU,
    NOTE_PATH,
    RESEARCHER_ROLE,
    TOUR_DONE,
    WRITER_ROLE,
    demo_reply,
    menu_for,
)
from deputy_shiny.testing import ScriptedReply
from deputy_shiny.tools.interactive import AskUserContext, Question

WALK_TOOLS = ["list_files", "read_file", "write_file", "ask_user", "run_bash"]


def specs(*names: str) -> list[dict[str, Any]]:
    """Tool definitions as a request carries them (OpenAI format)."""
    return [
        {"type": "function", "function": {"name": n, "description": "", "parameters": {}}}
        for n in names
    ]


ALL = specs(*WALK_TOOLS, "glob_files", "grep_files")


def after_intro(text: str) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": INTRO},
        {"role": "user", "content": text},
    ]


def with_result(
    name: str,
    arguments: dict[str, Any],
    output: str,
    history: list[dict[str, Any]] | None = None,
    call_id: str = "call_1",
) -> list[dict[str, Any]]:
    """A conversation ending with one tool call of the demo and its result."""
    call = {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }
    return [
        *(history if history is not None else after_intro("go")),
        {"role": "assistant", "content": "Scripted step.", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call_id, "content": output},
    ]


def only_call(reply: ScriptedReply) -> tuple[str, dict[str, Any]]:
    assert len(reply.tool_calls) == 1
    call = reply.tool_calls[0]
    assert isinstance(call.arguments, dict)
    return call.name, call.arguments


# --------------------------------------------------------------------------- first reply


def test_first_reply_is_the_honest_intro_and_the_menu() -> None:
    reply = demo_reply([{"role": "user", "content": "Hello"}], specs(*WALK_TOOLS, "delegate"))
    assert reply.text == f"{INTRO}\n\n{MENU}"
    assert "scripted replies, not an LLM" in reply.text
    assert "DEPUTY_MODEL" in reply.text and "API key" in reply.text
    for item in ["list files", "read welcome.md", "write a note", "ask me something"]:
        assert item in MENU
    assert "run a dangerous command" in MENU
    assert reply.tool_calls == [] and reply.cost == 0.0


def test_a_first_message_with_a_keyword_gets_the_intro_and_the_step() -> None:
    reply = demo_reply([{"role": "user", "content": "list files please"}], ALL)
    assert reply.text.startswith(INTRO)
    assert only_call(reply) == ("list_files", {"path": "."})


def test_replies_stream_in_small_chunks_with_a_small_delay() -> None:
    reply = demo_reply([{"role": "user", "content": "Hello"}], ALL)
    assert reply.chunk_size == CHUNK_SIZE <= 16
    assert 0 < reply.delay <= 0.05
    chunks = [reply.text[i : i + CHUNK_SIZE] for i in range(0, len(reply.text), CHUNK_SIZE)]
    assert len(chunks) > 20  # streaming is visible


# --------------------------------------------------------------------------- keywords


@pytest.mark.parametrize(
    ("message", "tool", "arguments"),
    [
        ("list files", "list_files", {"path": "."}),
        ("What files are there?", "list_files", {"path": "."}),
        ("read welcome.md", "read_file", {"path": "welcome.md"}),
        ("Read notes/demo-note.md.", "read_file", {"path": "notes/demo-note.md"}),
        ("please read the file `data.csv`", "read_file", {"path": "data.csv"}),
        ("read it to me", "read_file", {"path": "welcome.md"}),
        ("open README.md", "read_file", {"path": "README.md"}),
        ("run a dangerous command", "run_bash", {"command": "rm -rf /"}),
        ("rm everything", "run_bash", {"command": "rm -rf /"}),
    ],
)
def test_keywords_call_their_tool(message: str, tool: str, arguments: dict[str, Any]) -> None:
    reply = demo_reply(after_intro(message), ALL)
    assert only_call(reply) == (tool, arguments)
    assert reply.text.startswith("Scripted step:")


@pytest.mark.parametrize("message", ["write a note", "Take a note", "try writing something"])
def test_write_and_note_call_write_file_on_the_note(message: str) -> None:
    reply = demo_reply(after_intro(message), ALL)
    name, arguments = only_call(reply)
    assert name == "write_file"
    assert arguments["path"] == NOTE_PATH == "notes/demo-note.md"
    assert arguments["content"].startswith("# A note from the demo")
    assert "approv" in reply.text


@pytest.mark.parametrize("message", ["ask me something", "I have a question", "quiz me"])
def test_ask_and_question_call_ask_user_with_valid_questions(message: str) -> None:
    reply = demo_reply(after_intro(message), ALL)
    name, arguments = only_call(reply)
    assert name == "ask_user"
    questions = [Question.model_validate(q) for q in arguments["questions"]]
    assert 1 <= len(questions) <= 2
    assert all(2 <= len(q.options) <= 4 for q in questions)


@pytest.mark.parametrize(
    ("message", "tool"),
    [
        ("read notes/demo-note.md", "read_file"),  # "notes" comes later
        ("write a note, then list files", "write_file"),
        ("list the files, then read one", "list_files"),
        ("ask me a question about rm", "ask_user"),
    ],
)
def test_the_earliest_keyword_wins(message: str, tool: str) -> None:
    assert only_call(demo_reply(after_intro(message), ALL))[0] == tool


@pytest.mark.parametrize(
    "message",
    ["The weather is warm", "format it", "one task", "already done", "a thread", "notebook"],
)
def test_keywords_match_whole_words_only(message: str) -> None:
    reply = demo_reply(after_intro(message), ALL)
    assert reply.tool_calls == []
    assert message in reply.text


def test_help_shows_the_menu_again() -> None:
    reply = demo_reply(after_intro("help"), ALL)
    assert menu_for([*WALK_TOOLS, "glob_files"]) in reply.text
    assert "scripted demo model" in reply.text and reply.tool_calls == []


def test_the_menu_and_hints_offer_only_the_tools_the_agent_has() -> None:
    first = demo_reply([{"role": "user", "content": "Hello"}], specs("list_files", "read_file"))
    assert "list files" in first.text and "read welcome.md" in first.text
    for missing in ("write a note", "ask me something", "run_bash", "research tides"):
        assert missing not in first.text
    later = demo_reply(after_intro("Tell me about llamas"), specs("read_file"))
    assert "*read welcome.md*" in later.text and "list files" not in later.text
    bare = demo_reply([{"role": "user", "content": "Hello"}], [])
    assert "none of the tools my tour uses" in bare.text and "**list files**" not in bare.text


def test_other_messages_get_canned_replies_with_a_hint() -> None:
    reply = demo_reply(after_intro("Tell me about llamas"), ALL)
    assert "Tell me about llamas" in reply.text and "list files" in reply.text
    assert reply.tool_calls == []
    empty = demo_reply(after_intro("   "), ALL)
    assert "didn't find any text" in empty.text


# --------------------------------------------------------------------------- missing tools


@pytest.mark.parametrize(
    ("message", "tool"),
    [
        ("list files", "list_files"),
        ("read welcome.md", "read_file"),
        ("write a note", "write_file"),
        ("ask me something", "ask_user"),
        ("run a dangerous command", "run_bash"),
    ],
)
def test_a_missing_tool_is_explained_not_called(message: str, tool: str) -> None:
    offered = [n for n in WALK_TOOLS if n != tool]
    reply = demo_reply(after_intro(message), specs(*offered))
    assert reply.tool_calls == []
    assert f"`{tool}`" in reply.text and "wasn't given" in reply.text
    assert "`list_files`" in reply.text or tool == "list_files"


def test_no_tools_at_all_is_explained() -> None:
    reply = demo_reply(after_intro("list files"), [])
    assert reply.tool_calls == [] and "no tools at all" in reply.text
    first = demo_reply([{"role": "user", "content": "write a note"}], [])
    assert first.text.startswith(INTRO) and "no tools at all" in first.text


# --------------------------------------------------------------------------- tool results


def test_after_list_files_it_summarises_the_entries() -> None:
    output = (
        "Contents of the working directory: 3 entries\nnotes/\nwelcome.md\ndata.csv\n"
        "[1 hidden entry not shown; pass include_hidden=true to see them.]"
    )
    reply = demo_reply(with_result("list_files", {"path": "."}, output), ALL)
    assert reply.tool_calls == []
    assert "2 files and 1 folder" in reply.text
    for name in ["`notes/`", "`welcome.md`", "`data.csv`"]:
        assert name in reply.text
    assert "hidden" not in reply.text
    empty = demo_reply(with_result("list_files", {}, "the working directory is empty."), ALL)
    assert "is empty" in empty.text


def test_after_list_files_a_long_listing_is_cut() -> None:
    names = "\n".join(f"file{i}.txt" for i in range(40))
    output = f"Contents of the working directory: 40 entries\n{names}"
    reply = demo_reply(with_result("list_files", {}, output), ALL)
    assert "`file11.txt`" in reply.text and "file12.txt" not in reply.text
    assert "and 28 more" in reply.text


def test_after_read_file_it_quotes_the_first_lines() -> None:
    lines = [f"line {i}" for i in range(1, 9)]
    output = "\n".join(f"{n:6d}\t{text}" for n, text in enumerate(lines, 1))
    output += "\n\n[welcome.md: all 8 lines shown.]"
    reply = demo_reply(with_result("read_file", {"path": "welcome.md"}, output), ALL)
    assert "```text\nline 1\nline 2\nline 3\nline 4\nline 5\n```" in reply.text
    assert "line 6" not in reply.text and "3 more lines not quoted" in reply.text
    assert "\t" not in reply.text


def test_after_read_file_an_error_is_reported() -> None:
    output = "File not found: nope.md. Check the path with list_files or glob_files."
    reply = demo_reply(with_result("read_file", {"path": "nope.md"}, output), ALL)
    assert "could not read `nope.md`" in reply.text and "File not found" in reply.text


def test_quoted_file_content_stays_inside_its_code_fence() -> None:
    output = "     1\t```\n     2\t<img src=x onerror=alert(1)>\n     3\t```"
    reply = demo_reply(with_result("read_file", {"path": "x.md"}, output), ALL)
    assert "````text\n```\n<img src=x onerror=alert(1)>\n```\n````" in reply.text


def test_after_write_file_it_says_the_write_happened() -> None:
    output = "Wrote 120 bytes to notes/demo-note.md (created the file)."
    reply = demo_reply(with_result("write_file", {"path": NOTE_PATH}, output), ALL)
    assert reply.text.startswith("The write happened.") and output in reply.text
    assert f"read {NOTE_PATH}" in reply.text


def test_after_a_denied_write_it_says_nothing_was_written() -> None:
    output = "Denied: Denied by the user: not today"
    reply = demo_reply(with_result("write_file", {"path": NOTE_PATH}, output), ALL)
    assert reply.text.startswith("The write did not happen")
    assert "Denied by the user: not today" in reply.text and "Nothing was written" in reply.text


def test_after_a_failed_write_it_does_not_claim_success() -> None:
    output = "notes is a directory; give a file path to write to."
    reply = demo_reply(with_result("write_file", {"path": "notes"}, output), ALL)
    assert reply.text.startswith("The write did not happen") and "is a directory" in reply.text


def test_after_ask_user_it_reflects_the_answers() -> None:
    output = (
        "The user answered:\n[Experience] How much?\nAnswer: A little\n"
        "[Interests] Which?\nAnswer (free text): mostly hooks"
    )
    reply = demo_reply(with_result("ask_user", {"questions": []}, output), ALL)
    assert "Experience: **A little**" in reply.text
    assert "Interests: **mostly hooks**" in reply.text


def test_after_a_declined_ask_user_it_says_so() -> None:
    output = "The user declined to answer the questions."
    reply = demo_reply(with_result("ask_user", {"questions": []}, output), ALL)
    assert reply.text.startswith("You declined to answer")
    error = "ask_user is not available: no one can answer questions here."
    failed = demo_reply(with_result("ask_user", {"questions": []}, error), ALL)
    assert "did not bring answers back" in failed.text and "not available" in failed.text


def test_after_the_hook_blocks_rm_it_explains_the_denial() -> None:
    output = "Denied: Blocked a dangerous command: it recursively deletes the root directory /."
    reply = demo_reply(with_result("run_bash", {"command": "rm -rf /"}, output), ALL)
    assert reply.text.startswith("Blocked, as it should be.")
    assert "recursively deletes the root directory" in reply.text
    assert "hook_block_dangerous_bash()" in reply.text


def test_a_denial_by_the_permissions_is_explained_as_such() -> None:
    output = "Denied: run_bash is not allowed in readonly mode."
    reply = demo_reply(with_result("run_bash", {"command": "rm -rf /"}, output), ALL)
    assert "denied before it ran" in reply.text and "readonly mode" in reply.text
    assert "hook_block" not in reply.text


def test_if_rm_was_not_blocked_it_says_so() -> None:
    output = "rm: it is dangerous to operate recursively on '/'\n[exit code 1]"
    reply = demo_reply(with_result("run_bash", {"command": "rm -rf /"}, output), ALL)
    assert "**not** blocked" in reply.text and "hook_block_dangerous_bash()" in reply.text
    assert "dangerous to operate" in reply.text


def test_results_of_other_or_unknown_calls_are_quoted() -> None:
    reply = demo_reply(with_result("grep_files", {"pattern": "x"}, "a.txt:1: x"), ALL)
    assert "`grep_files`" in reply.text and "a.txt:1: x" in reply.text
    orphan = [*after_intro("go"), {"role": "tool", "tool_call_id": "nope", "content": "hm"}]
    assert "a tool" in demo_reply(orphan, ALL).text
    alone = [{"role": "tool", "tool_call_id": "nope", "content": "hm"}]
    assert "a tool" in demo_reply(alone, []).text


def test_each_follow_up_suggests_the_next_step_then_ends_the_tour() -> None:
    history = after_intro("go")
    steps = [
        ("list_files", {"path": "."}, "Contents of the working directory: 1 entry\nwelcome.md"),
        ("read_file", {"path": "welcome.md"}, "     1\t# Welcome"),
        ("write_file", {"path": NOTE_PATH}, "Wrote 1 bytes to notes/demo-note.md."),
        ("ask_user", {}, "The user declined to answer the questions."),
        ("run_bash", {"command": "rm -rf /"}, "Denied: Blocked a dangerous command: it does."),
    ]
    hints = ["read welcome.md", "write a note", "ask me something", "run a dangerous command"]
    for index, (name, arguments, output) in enumerate(steps):
        history = with_result(name, arguments, output, history, call_id=f"call_{index}")
        text = demo_reply(history, ALL).text
        if index < len(hints):
            assert f"Next, try **{hints[index]}**" in text
        else:
            assert text.endswith(TOUR_DONE)
        history = [*history, {"role": "assistant", "content": text}]
    again = with_result("list_files", {}, "the working directory is empty.", history, "call_9")
    assert TOUR_DONE not in demo_reply(again, ALL).text  # announced once


def test_hints_skip_steps_whose_tool_is_missing() -> None:
    history = with_result("list_files", {}, "Contents of x: 1 entry\na", after_intro("go"))
    text = demo_reply(history, specs("list_files", "ask_user")).text
    assert "Next, try **ask me something**" in text


# --------------------------------------------------------------------------- honesty, streaming


def _every_kind_of_reply() -> list[ScriptedReply]:
    replies = [
        demo_reply([{"role": "user", "content": "Hello"}], ALL),
        demo_reply(after_intro("help"), ALL),
        demo_reply(after_intro("Why is the sky blue?"), ALL),
        demo_reply(after_intro("llamas"), ALL),
        demo_reply(after_intro(""), ALL),
        demo_reply(after_intro("write a note"), []),
    ]
    for message in ["list files", "read welcome.md", "write a note", "ask me", "rm"]:
        replies.append(demo_reply(after_intro(message), ALL))
    for name, output in [
        ("list_files", "Contents of the working directory: 1 entry\nwelcome.md"),
        ("read_file", "     1\thello"),
        ("read_file", "File not found: x"),
        ("write_file", "Wrote 5 bytes to notes/demo-note.md."),
        ("write_file", "Denied: no"),
        ("write_file", "boom"),
        ("ask_user", "The user answered:\n[A] b?\nAnswer: c"),
        ("ask_user", "The user declined to answer the questions."),
        ("ask_user", "boom"),
        ("run_bash", "Denied: Blocked a dangerous command: yes."),
        ("run_bash", "Denied: not in this mode"),
        ("run_bash", "ran"),
        ("grep_files", "x"),
    ]:
        replies.append(demo_reply(with_result(name, {}, output), ALL))
    team = specs("delegate")
    replies.append(demo_reply(after_intro("research tides"), team))
    for agent, output in [
        ("researcher", "- notes"),
        ("writer", "Text."),
        ("writer", "Delegation refused"),
    ]:
        replies.append(demo_reply(with_result("delegate", {"agent": agent}, output), team))
    for role in (RESEARCHER_ROLE, WRITER_ROLE):
        system = {"role": "system", "content": role}
        replies.append(demo_reply([system, {"role": "user", "content": "Research x: go"}], ALL))
    return replies


def test_every_reply_is_honest_about_being_scripted_and_free() -> None:
    for reply in _every_kind_of_reply():
        assert "scripted" in reply.text.lower() or "not an llm" in reply.text.lower(), reply.text
        assert reply.cost == 0.0


def test_no_reply_streams_one_chunk_100_times() -> None:
    big = "abcdefghijkl" * 2000
    numbered = "\n".join(f"{n:6d}\t{big}" for n in range(1, 50))
    replies = [
        demo_reply(after_intro(big), ALL),
        demo_reply(with_result("read_file", {"path": big}, numbered), ALL),
        demo_reply(with_result("write_file", {}, f"Denied: {big}"), ALL),
        demo_reply(with_result("run_bash", {}, big), ALL),
        demo_reply(with_result("ask_user", {}, f"The user answered:\n[A] b\nAnswer: {big}"), ALL),
        demo_reply(with_result("list_files", {}, "Contents: 40\n" + "\n".join([big] * 40)), ALL),
    ]
    for reply in replies:
        text = reply.text
        chunks = [text[i : i + reply.chunk_size] for i in range(0, len(text), reply.chunk_size)]
        run = longest = 1
        for previous, chunk in itertools.pairwise(chunks):
            run = run + 1 if chunk == previous else 1
            longest = max(longest, run)
        assert longest < 100


# --------------------------------------------------------------------------- through an Agent


@pytest.fixture
def no_delay(monkeypatch: pytest.MonkeyPatch) -> None:
    """The walkthrough tests need no visible streaming; keep them fast."""
    monkeypatch.setattr(demo_module, "CHUNK_DELAY", 0.0)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    (tmp_path / "welcome.md").write_text("# Welcome\n\nThis is the workspace.\nHave fun.\n")
    return tmp_path


def app_like_agent(
    workspace: Path,
    *,
    approve: bool = True,
    answers: list[Any] | None = None,
    permissions: Permissions | None = None,
    hooks: bool = True,
) -> tuple[Agent, list[ApprovalRequest], list[list[Question]]]:
    """An agent set up like app.py's (standard tools, bash, ask_user, writes approved)."""
    approvals: list[ApprovalRequest] = []
    asked: list[list[Question]] = []

    async def handler(request: ApprovalRequest) -> ApprovalDecision:
        approvals.append(request)
        return ApprovalDecision.approve() if approve else ApprovalDecision.deny("not now")

    def ask(questions: list[Question], context: AskUserContext) -> list[Any]:
        asked.append(questions)
        if answers is None:
            raise AskUserDeclined("closed the form")
        return answers

    agent = Agent(
        "deputy/demo",
        tools=[*tools_preset("standard"), tool_run_bash(), *tools_interactive(callback=ask)],
        working_dir=workspace,
        permissions=permissions or Permissions(run_bash=True, approval_effects=("write",)),
        hooks=[hook_block_dangerous_bash()] if hooks else [],
        approval_handler=handler,
    )
    return agent, approvals, asked


def tool_outputs(result: Any) -> list[tuple[str, str]]:
    return [(e.tool_name, e.output) for e in result.events if e.type == "tool_end"]


@pytest.mark.usefixtures("no_delay")
async def test_walkthrough_list_files(workspace: Path) -> None:
    agent, _, _ = app_like_agent(workspace)
    result = await agent.run_async("list files")
    assert tool_outputs(result) == [
        ("list_files", "Contents of the working directory: 1 entry\nwelcome.md")
    ]
    assert "found 1 file in the workspace: `welcome.md`" in result.response
    assert result.stop_reason == "complete" and agent.cost().complete


@pytest.mark.usefixtures("no_delay")
async def test_walkthrough_read_file(workspace: Path) -> None:
    agent, _, _ = app_like_agent(workspace)
    first = await agent.run_async("Hello")
    assert first.response.startswith(INTRO)
    result = await agent.run_async("read welcome.md")
    assert [name for name, _ in tool_outputs(result)] == ["read_file"]
    assert "```text\n# Welcome\n\nThis is the workspace.\nHave fun.\n```" in result.response


@pytest.mark.usefixtures("no_delay")
async def test_walkthrough_write_a_note_when_approved(workspace: Path) -> None:
    agent, approvals, _ = app_like_agent(workspace)
    result = await agent.run_async("write a note")
    note = workspace / NOTE_PATH
    assert note.read_text().startswith("# A note from the demo")
    assert [r.tool_name for r in approvals] == ["write_file"]
    assert approvals[0].arguments["path"] == NOTE_PATH
    assert "The write happened." in result.response
    listed = await agent.run_async("list files")
    assert "`notes/`" in listed.response


@pytest.mark.usefixtures("no_delay")
async def test_walkthrough_write_a_note_when_denied(workspace: Path) -> None:
    agent, approvals, _ = app_like_agent(workspace, approve=False)
    result = await agent.run_async("write a note")
    assert not (workspace / NOTE_PATH).exists()
    assert len(approvals) == 1
    assert tool_outputs(result)[0][1].startswith("Denied:")
    assert "The write did not happen" in result.response and "not now" in result.response


@pytest.mark.usefixtures("no_delay")
async def test_walkthrough_write_in_readonly_mode_is_denied_without_asking(
    workspace: Path,
) -> None:
    agent, approvals, _ = app_like_agent(workspace)
    agent.set_permission_mode("readonly")
    result = await agent.run_async("write a note")
    assert approvals == [] and not (workspace / NOTE_PATH).exists()
    assert "The write did not happen" in result.response


@pytest.mark.usefixtures("no_delay")
async def test_walkthrough_ask_me_something(workspace: Path) -> None:
    agent, _, asked = app_like_agent(workspace, answers=[["A lot"], "mostly the hooks"])
    result = await agent.run_async("ask me something")
    assert [q.header for q in asked[0]] == ["Experience", "Interests"]
    assert "Experience: **A lot**" in result.response
    assert "Interests: **mostly the hooks**" in result.response


@pytest.mark.usefixtures("no_delay")
async def test_walkthrough_ask_me_something_declined(workspace: Path) -> None:
    agent, _, asked = app_like_agent(workspace, answers=None)
    result = await agent.run_async("I have a question for you")
    assert len(asked) == 1
    assert "You declined to answer" in result.response


@pytest.mark.usefixtures("no_delay")
async def test_walkthrough_dangerous_command_is_blocked(workspace: Path) -> None:
    agent, approvals, _ = app_like_agent(workspace)
    result = await agent.run_async("run a dangerous command")
    [(name, output)] = tool_outputs(result)
    assert name == "run_bash" and output.startswith("Denied: Blocked a dangerous command")
    assert approvals == []  # the hook denies before anyone is asked
    assert "Blocked, as it should be." in result.response
    assert (workspace / "welcome.md").exists()


@pytest.mark.usefixtures("no_delay")
async def test_walkthrough_with_a_missing_tool(workspace: Path) -> None:
    agent = Agent("deputy/demo", tools=tools_preset("minimal"), working_dir=workspace)
    result = await agent.run_async("write a note")
    assert tool_outputs(result) == []
    assert "`write_file`" in result.response and "wasn't given" in result.response
    assert not (workspace / NOTE_PATH).exists()


async def test_replies_stream_in_many_text_chunks(workspace: Path) -> None:
    agent, _, _ = app_like_agent(workspace)
    chunks = [e.text async for e in agent.run("Hello") if e.type == "text"]
    assert "".join(chunks).startswith(INTRO)
    assert len(chunks) > 20 and max(len(c) for c in chunks) <= CHUNK_SIZE


# --------------------------------------------------------------------------- research team


def team_lead(workspace: Path) -> LeadAgent:
    """A lead like app.py's: a read-only researcher and a tool-less writer, all on the demo."""
    return LeadAgent(
        "deputy/demo",
        tools=tools_preset("standard"),
        working_dir=workspace,
        subagents=[
            AgentDefinition(
                name="researcher",
                description="Looks through the workspace.",
                prompt=f"{RESEARCHER_ROLE}. Report what the files say.",
                tools=["read_file", "list_files", "grep_files"],
                permission_mode="readonly",
            ),
            AgentDefinition(
                name="writer",
                description="Writes a short answer from notes.",
                prompt=f"{WRITER_ROLE}. Write briefly.",
                tools=[],
                permission_mode="readonly",
            ),
        ],
    )


def test_research_delegates_to_the_researcher_first() -> None:
    name, arguments = only_call(demo_reply(after_intro("research the tides"), specs("delegate")))
    assert name == "delegate" and arguments["agent"] == "researcher"
    assert arguments["task"].startswith("Research the tides:")


def test_research_without_a_team_is_explained() -> None:
    reply = demo_reply(after_intro("research tides"), ALL)
    assert reply.tool_calls == [] and "`delegate`" in reply.text


def test_after_the_researcher_the_writer_then_the_answer() -> None:
    task = "Research tides: look through the workspace files and report what they say."
    history = with_result("delegate", {"agent": "researcher", "task": task}, "- Tides rise.")
    name, arguments = only_call(demo_reply(history, specs("delegate")))
    assert (name, arguments["agent"]) == ("delegate", "writer")
    assert "Tides rise." in arguments["task"]
    history = with_result("delegate", arguments, "On tides: they rise.", history, "call_2")
    final = demo_reply(history, specs("delegate"))
    assert final.tool_calls == [] and "> On tides: they rise." in final.text


def test_a_refused_delegation_ends_the_flow() -> None:
    history = with_result("delegate", {"agent": "researcher"}, "Delegation refused: no.")
    reply = demo_reply(history, specs("delegate"))
    assert reply.tool_calls == [] and "could not finish" in reply.text


@pytest.mark.usefixtures("no_delay")
async def test_walkthrough_research_team(workspace: Path) -> None:
    lead = team_lead(workspace)
    result = await lead.run_async("research tides")
    assert "my team's answer about tides" in result.response
    assert "welcome.md" in result.response
    records = lead.list_subagents()
    assert [(r.agent_name, r.status) for r in records] == [
        ("researcher", "completed"),
        ("writer", "completed"),
    ]
    (researcher_turns, writer_turns) = lead.get_subagent_messages().values()
    called = [c.name for t in researcher_turns for c in t.tool_requests]
    assert called == ["list_files", "read_file"]
    assert not [c for t in writer_turns for c in t.tool_requests]


def test_the_researcher_counts_entries_in_english() -> None:
    task = [
        {"role": "system", "content": f"{RESEARCHER_ROLE}."},
        {"role": "user", "content": "Research tides: look through the workspace files."},
    ]
    listed = with_result("list_files", {"path": "."}, "Contents: 2 entries\na.md\nb.md", task)
    read = with_result("read_file", {"path": "welcome.md"}, "     1\t# Hi", listed, "call_2")
    notes = demo_reply(read, specs("list_files", "read_file")).text
    assert "The workspace holds 2 entries: a.md, b.md." in notes and "entrys" not in notes
