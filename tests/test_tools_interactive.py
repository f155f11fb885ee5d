"""ask_user: argument validation, callbacks (sync, async, declining), routing, fallbacks."""

from __future__ import annotations

import asyncio
import builtins
import io
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from deputy_shiny import Agent
from deputy_shiny.errors import ToolArgumentsError, ToolInvocationError
from deputy_shiny.testing import ScriptedModel, ScriptedReply, ScriptedToolCall
from deputy_shiny.tools import Tool, ToolContext, tool_context, tool_metadata
from deputy_shiny.tools.interactive import (
    AskUserContext,
    AskUserDeclined,
    Option,
    Question,
    set_ask_user_callback,
    tool_ask_user,
    tools_interactive,
)


def question(
    header: str = "Format",
    text: str = "Which output format?",
    labels: tuple[str, ...] = ("CSV", "JSON"),
    multi_select: bool = False,
) -> dict[str, Any]:
    return {
        "header": header,
        "question": text,
        "options": [{"label": label, "description": f"{label} output"} for label in labels],
        "multi_select": multi_select,
    }


TWO_QUESTIONS = {
    "questions": [
        question(),
        question("Parts", "Which parts?", ("src", "tests", "docs"), multi_select=True),
    ]
}


async def ask(t: Tool, arguments: dict[str, Any] = TWO_QUESTIONS) -> str:
    return str(await t.invoke(t.parse_arguments(arguments)))


@pytest.fixture(autouse=True)
def no_fallback() -> Iterator[None]:
    previous = set_ask_user_callback(None)
    yield
    set_ask_user_callback(previous)


# ------------------------------------------------------------------ arguments


def test_schema_and_annotations() -> None:
    t = tool_ask_user(callback=lambda qs, ctx: [])
    assert t.name == "ask_user"
    assert t.parameters["required"] == ["questions"]
    assert tool_metadata(t)["annotations"] == {
        "read_only_hint": True,
        "destructive_hint": False,
        "open_world_hint": False,
        "idempotent_hint": False,
    }
    assert [x.name for x in tools_interactive()] == ["ask_user"]
    assert tools_interactive()[0] is not tools_interactive()[0]


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"questions": []}, "at least 1"),
        ({"questions": [question()] * 5}, "at most 4"),
        ({"questions": [question(header="A header too long")]}, "at most 12"),
        ({"questions": [question(labels=("only",))]}, "at least 2"),
        ({"questions": [question(labels=("a", "b", "c", "d", "e"))]}, "at most 4"),
        ({"questions": [question(labels=("same", "same"))]}, "unique"),
        ({"questions": [{**question(), "extra": 1}]}, "'questions[0].extra': unknown field"),
        (
            {"questions": [{k: v for k, v in question().items() if k != "multi_select"}]},
            "multi_select': missing",
        ),
        ({"questions": [{**question(), "question": ""}]}, "at least 1"),
    ],
)
def test_malformed_questions_are_argument_errors(arguments: dict[str, Any], problem: str) -> None:
    t = tool_ask_user(callback=lambda qs, ctx: [])
    with pytest.raises(ToolArgumentsError) as info:
        t.parse_arguments(arguments)
    assert problem in str(info.value)


# ------------------------------------------------------------------ callbacks


async def test_sync_callback_answers_and_the_output_lists_each_header() -> None:
    seen: list[tuple[list[Question], AskUserContext, str]] = []

    def callback(questions: list[Question], context: AskUserContext) -> list[Any]:
        seen.append((questions, context, threading.current_thread().name))
        return [["JSON"], ["src", "docs"]]

    out = await ask(tool_ask_user(callback=callback))
    questions, context, thread = seen[0]
    assert thread != threading.main_thread().name  # sync callbacks run in a worker thread
    assert [q.header for q in questions] == ["Format", "Parts"]
    assert questions[1].multi_select and questions[1].options[2] == Option(
        label="docs", description="docs output"
    )
    assert context.value is None
    assert out == (
        "The user answered:\n"
        "[Format] Which output format?\n"
        "Answer: JSON\n"
        "[Parts] Which parts?\n"
        "Answer: src, docs"
    )


async def test_async_callback_free_text_and_empty_multi_select() -> None:
    async def callback(questions: list[Question], context: AskUserContext) -> list[Any]:
        await asyncio.sleep(0)
        return ["Markdown, please", []]

    out = await ask(tool_ask_user(callback=callback))
    assert "Answer (free text): Markdown, please" in out
    assert "[Parts] Which parts?\nAnswer: (none selected)" in out


async def test_declining_is_a_normal_result() -> None:
    def callback(questions: list[Question], context: AskUserContext) -> list[Any]:
        raise AskUserDeclined("closed the dialog")

    assert "the user declined to answer" in (await ask(tool_ask_user(callback=callback))).lower()


@pytest.mark.parametrize(
    ("answers", "problem"),
    [
        ("JSON", "returned str"),
        (42, "returned int"),
        ({"Format": "JSON"}, "questions that were not asked: 'Format'"),
        ({"Which output format?": ["JSON"]}, "no answer for 'Which parts?'"),
        ({"Which output format?": ["XML"], "Which parts?": ["src"]}, "'XML', not among"),
        ({"Which output format?": 3, "Which parts?": ["src"]}, "is a int"),
        ([["JSON"]], "1 answers for 2 questions"),
        ([["JSON"], ["src"], ["x"]], "3 answers for 2 questions"),
        ([["CSV", "JSON"], ["src"]], "2 options for a single-choice question"),
        ([[], ["src"]], "0 options for a single-choice question"),
        ([["XML"], ["src"]], "'XML', not among the options"),
        ([42, ["src"]], "is a int"),
        ([["JSON"], [1]], "as strings"),
    ],
)
async def test_bad_answers_are_error_results(answers: Any, problem: str) -> None:
    t = tool_ask_user(callback=lambda qs, ctx: answers)
    with pytest.raises(ToolInvocationError) as info:
        await ask(t)
    assert problem in str(info.value)


async def test_a_dict_of_answers_by_question_text_comes_back_in_question_order() -> None:
    def callback(questions: list[Question], context: AskUserContext) -> dict[str, Any]:
        # deputy's named list: keyed by question text, in any order.
        return {"Which parts?": ["docs", "src"], "Which output format?": "Markdown, please"}

    out = await ask(tool_ask_user(callback=callback))
    assert out == (
        "The user answered:\n"
        "[Format] Which output format?\n"
        "Answer (free text): Markdown, please\n"
        "[Parts] Which parts?\n"
        "Answer: docs, src"
    )


async def test_a_dict_with_missing_and_unknown_questions_names_both() -> None:
    t = tool_ask_user(callback=lambda qs, ctx: {"Which parts?": ["src"], "Which colour?": "red"})
    with pytest.raises(ToolInvocationError) as info:
        await ask(t)
    message = str(info.value)
    assert "no answer for 'Which output format?'" in message
    assert "questions that were not asked: 'Which colour?'" in message
    assert "map each question's text to its answer" in message


async def test_a_failing_callback_is_a_clean_error() -> None:
    def callback(questions: list[Question], context: AskUserContext) -> list[Any]:
        raise RuntimeError("form crashed")

    with pytest.raises(ToolInvocationError, match="form crashed"):
        await ask(tool_ask_user(callback=callback))


# ------------------------------------------------------------------ context and routing


async def test_context_carries_routing_value_and_tool_context_ids(tmp_path: Path) -> None:
    seen: list[AskUserContext] = []
    counter = iter(range(100))

    async def callback(questions: list[Question], context: AskUserContext) -> list[Any]:
        seen.append(context)
        return [["CSV"], ["src"]]

    static = tool_ask_user(callback=callback, context={"room": "blue"})
    dynamic = tool_ask_user(callback=callback, context=lambda: {"n": next(counter)})
    ctx = ToolContext(
        working_dir=tmp_path,
        read_roots=(tmp_path,),
        write_roots=(),
        agent_id="agent-1",
        session_id="session-1",
        run_id="run-1",
        call_id="call-1",
        tool_name="ask_user",
        run_context={"user": "ada"},
    )
    with tool_context(ctx):
        await ask(static)
        await ask(dynamic)
        await ask(dynamic)
    assert seen[0] == AskUserContext(
        value={"room": "blue"},
        agent_id="agent-1",
        session_id="session-1",
        run_id="run-1",
        call_id="call-1",
    )
    assert seen[0].run_context == {"user": "ada"}
    assert [c.value for c in seen[1:]] == [{"n": 0}, {"n": 1}]  # evaluated at each call
    with pytest.raises(AttributeError):
        seen[0].value = "other"  # type: ignore[misc]


async def test_two_agents_never_see_each_others_questions(tmp_path: Path) -> None:
    """Two tools with their own callbacks, called concurrently and interleaved."""
    inbox: dict[str, list[tuple[str, Any]]] = {"a": [], "b": []}
    release = {"a": asyncio.Event(), "b": asyncio.Event()}

    def make_callback(name: str) -> Any:
        async def callback(questions: list[Question], context: AskUserContext) -> list[Any]:
            inbox[name].append((questions[0].question, context.value))
            await release[name].wait()  # a user thinking for a while
            return [f"answer from {name}"]

        return callback

    tool_a = tools_interactive(callback=make_callback("a"), context="route-a")[0]
    tool_b = tools_interactive(callback=make_callback("b"), context="route-b")[0]

    async def call(t: Tool, agent: str, text: str) -> str:
        ctx = ToolContext(tmp_path, (tmp_path,), (), agent_id=agent, call_id=text)
        with tool_context(ctx):
            return await ask(t, {"questions": [question(text=text)]})

    tasks = [
        asyncio.create_task(call(tool_a, "agent-a", "A1?")),
        asyncio.create_task(call(tool_b, "agent-b", "B1?")),
        asyncio.create_task(call(tool_a, "agent-a", "A2?")),
        asyncio.create_task(call(tool_b, "agent-b", "B2?")),
    ]
    for _ in range(50):
        await asyncio.sleep(0)
        if len(inbox["a"]) == 2 and len(inbox["b"]) == 2:
            break
    # Both are waiting at the same time: the loop is not blocked by a pending answer.
    assert sorted(inbox["a"]) == [("A1?", "route-a"), ("A2?", "route-a")]
    assert sorted(inbox["b"]) == [("B1?", "route-b"), ("B2?", "route-b")]
    release["b"].set()
    release["a"].set()
    results = await asyncio.gather(*tasks)
    assert ["answer from a" in r for r in results] == [True, False, True, False]
    assert ["answer from b" in r for r in results] == [False, True, False, True]


async def test_a_slow_sync_callback_does_not_block_the_loop() -> None:
    def slow(questions: list[Question], context: AskUserContext) -> list[Any]:
        time.sleep(0.3)
        return [["CSV"], ["src"]]

    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    task = asyncio.create_task(ticker())
    try:
        await ask(tool_ask_user(callback=slow))
    finally:
        task.cancel()
    assert ticks >= 10


# ------------------------------------------------------------------ fallbacks


async def test_own_callback_wins_over_the_process_wide_fallback() -> None:
    set_ask_user_callback(lambda qs, ctx: ["fallback", ["src"]])
    own = tool_ask_user(callback=lambda qs, ctx: ["own", ["src"]])
    assert "Answer (free text): own" in await ask(own)
    assert "Answer (free text): fallback" in await ask(tool_ask_user())
    assert set_ask_user_callback(None) is not None
    with pytest.raises(TypeError):
        set_ask_user_callback("not callable")  # type: ignore[arg-type]


async def test_no_callback_and_no_console_fails_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    def never(*args: Any) -> str:
        raise AssertionError("input() must not be called")

    monkeypatch.setattr(builtins, "input", never)
    monkeypatch.setattr("sys.stdin", io.StringIO(""))  # not a tty
    started = time.monotonic()
    with pytest.raises(ToolInvocationError, match="no callback and no interactive console"):
        await ask(tool_ask_user())
    assert time.monotonic() - started < 0.5


class _FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


async def test_console_prompt_when_stdin_is_a_tty(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Q1: "7" is out of range, "1,2" is two choices for one, "4" is Other -> free text.
    # Q2: "" is no answer, "2" picks JSON. Q3: "2, 3" picks two of a multi-select.
    replies = iter(["7", "1,2", "4", "a custom answer", "", "2", "2, 3"])
    prompts: list[str] = []

    def fake_input(prompt: str = "") -> str:
        prompts.append(prompt)
        return next(replies)

    monkeypatch.setattr(builtins, "input", fake_input)
    monkeypatch.setattr("sys.stdin", _FakeTTY())
    out = await ask(
        tool_ask_user(),
        {
            "questions": [
                question(labels=("CSV", "JSON", "XML")),
                question("Name", "Which one?"),
                question("Parts", "Which parts?", ("src", "tests", "docs"), multi_select=True),
            ]
        },
    )
    printed = capsys.readouterr().out
    assert "[Format] Which output format?" in printed
    assert "  1. CSV - CSV output" in printed
    assert "  4. Other (type your own answer)" in printed
    assert "Choose numbers from 1 to 4." in printed and "Choose one number." in printed
    assert "Please choose an option or type an answer." in printed
    assert out == (
        "The user answered:\n"
        "[Format] Which output format?\n"
        "Answer (free text): a custom answer\n"
        "[Name] Which one?\n"
        "Answer: JSON\n"
        "[Parts] Which parts?\n"
        "Answer: tests, docs"
    )
    assert prompts.count("Your answer: ") == 1


async def test_console_end_of_input_declines(monkeypatch: pytest.MonkeyPatch) -> None:
    def eof(prompt: str = "") -> str:
        raise EOFError

    monkeypatch.setattr(builtins, "input", eof)
    monkeypatch.setattr("sys.stdin", _FakeTTY())
    assert "declined" in await ask(tool_ask_user())


# ------------------------------------------------------------------ through an agent


async def test_ask_user_through_an_agent() -> None:
    arguments = {"questions": [question()]}
    model = ScriptedModel(
        [
            ScriptedReply(tool_calls=[ScriptedToolCall("ask_user", arguments, id="call_q")]),
            "Writing JSON.",
        ]
    )
    asked: list[AskUserContext] = []

    async def callback(questions: list[Question], context: AskUserContext) -> list[Any]:
        asked.append(context)
        return [["JSON"]]

    agent = Agent(
        model,
        tools=tools_interactive(callback=callback, context={"tab": 1}),
        agent_id="agent-x",
        session_id="session-x",
    )
    assert await agent.chat_async("Export the data") == "Writing JSON."
    tool_message = model.requests[1]["messages"][-1]
    assert tool_message["role"] == "tool" and tool_message["tool_call_id"] == "call_q"
    assert tool_message["content"] == (
        "The user answered:\n[Format] Which output format?\nAnswer: JSON"
    )
    assert (asked[0].value, asked[0].agent_id, asked[0].session_id, asked[0].call_id) == (
        {"tab": 1},
        "agent-x",
        "session-x",
        "call_q",
    )


@pytest.mark.parametrize(
    "answers",
    [
        [["JSON"], "only the tests"],
        {"Which parts?": "only the tests", "Which output format?": ["JSON"]},
    ],
)
async def test_list_and_dict_answers_reach_the_model_the_same_way(answers: Any) -> None:
    model = ScriptedModel(
        [
            ScriptedReply(tool_calls=[ScriptedToolCall("ask_user", TWO_QUESTIONS, id="call_q")]),
            "Thanks.",
        ]
    )
    agent = Agent(model, tools=tools_interactive(callback=lambda qs, ctx: answers))
    assert await agent.chat_async("Export the data") == "Thanks."
    tool_message = model.requests[1]["messages"][-1]
    assert tool_message["tool_call_id"] == "call_q"
    assert tool_message["content"] == (
        "The user answered:\n"
        "[Format] Which output format?\n"
        "Answer: JSON\n"
        "[Parts] Which parts?\n"
        "Answer (free text): only the tests"
    )


async def test_a_bad_dict_of_answers_is_an_error_result_in_a_run_not_a_crash() -> None:
    model = ScriptedModel(
        [
            ScriptedReply(tool_calls=[ScriptedToolCall("ask_user", TWO_QUESTIONS, id="call_q")]),
            "I will assume JSON.",
        ]
    )
    agent = Agent(
        model, tools=tools_interactive(callback=lambda qs, ctx: {"Which format?": "JSON"})
    )
    result = await agent.run_async("Export the data")
    assert (result.stop_reason, result.response) == ("complete", "I will assume JSON.")
    end = next(e for e in result.events if e.type == "tool_end")
    assert end.is_error
    tool_message = model.requests[1]["messages"][-1]
    assert tool_message["tool_call_id"] == "call_q"
    assert "no answer for 'Which output format?', 'Which parts?'" in tool_message["content"]
    assert "questions that were not asked: 'Which format?'" in tool_message["content"]
