"""The README's Python examples run, each alone, offline, and their assertions hold."""

from __future__ import annotations

import asyncio
import functools
import re
from pathlib import Path
from typing import Any

from deputy_shiny.testing import ScriptedModel, ScriptedReply, ScriptedToolCall

README = Path(__file__).resolve().parent.parent / "README.md"


def test_each_readme_example_runs_when_copied_alone() -> None:
    # A reader copies one block, not the README: each names its own imports.
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.DOTALL)
    assert len(blocks) >= 4
    for block in blocks:
        exec(compile(block, str(README), "exec"), {"__name__": "readme"})


def test_readme_starts_with_the_two_commands() -> None:
    text = README.read_text()
    commands = re.findall(r"```bash\n(.*?)```", text, re.DOTALL)
    assert commands[0].strip() == "./scripts/run-app"
    assert commands[1].strip() == "./scripts/test"
    assert "./scripts/test" in (README.parent / ".ci" / "run").read_text()


def test_readme_shows_an_app_without_a_key_and_a_local_endpoint() -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.DOTALL)
    # An agent factory on FunctionModel (an app of one's own, with its own tools, offline).
    assert any("FunctionModel(" in b and "def make_offline_agent(ctx)" in b for b in blocks)
    assert any("ChatModel(" in b and "api_base=" in b for b in blocks)


def test_readme_shows_the_browser_test_as_it_runs() -> None:
    """The README's browser-test example is ``examples/test_express_app.py``, verbatim."""
    text = README.read_text()
    example = (README.parent / "examples" / "test_express_app.py").read_text()
    assert f"```py\n{example}```" in text


def readme_block(heading: str) -> str:
    """The first Python example after ``heading``."""
    section = README.read_text().split(f"\n{heading}\n", 1)[1]
    found = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert found is not None, f"no example under {heading}"
    return found.group(1)


async def test_the_custom_write_tool_example_asks_in_a_kit_session_and_ask_user_works(
    tmp_path: Path,
) -> None:
    # The README's own factory, in a kit session (tests/test_chat_session.py's harness).
    from tests.test_chat_session import cards, start, wait_until

    example: dict[str, Any] = {"__name__": "readme"}
    block = readme_block("### A custom write tool behind an approval")
    # Its own checks block (permissions_check), as a script's do: off the event loop.
    await asyncio.to_thread(exec, compile(block, str(README), "exec"), example)
    question = {
        "header": "Shop",
        "question": "Which shop?",
        "options": [{"label": "corner", "description": ""}, {"label": "market", "description": ""}],
        "multi_select": False,
    }
    model = ScriptedModel(
        [
            ScriptedReply(
                tool_calls=[ScriptedToolCall("save_note", {"title": "todo", "text": "milk"})]
            ),
            ScriptedReply(tool_calls=[ScriptedToolCall("ask_user", {"questions": [question]})]),
            "Saved, and noted your shop.",
        ]
    )
    kit = start(tmp_path, functools.partial(example["make_note_agent"], model=model))
    note = kit.session.working_dir / "notes" / "todo.md"
    await kit.session.submit("note it")
    await wait_until(lambda: kit.prompts.showing is not None)
    assert "save_note" in kit.browser.modals[-1]  # asked for, not denied
    assert not note.exists()  # nothing runs before the approval
    assert kit.click("approve", values={})
    # The question's modal, or the run's end (ask_user denied: the test fails below).
    await wait_until(lambda: len(kit.browser.modals) == 2 or not kit.agent.running)
    assert "Which shop?" in kit.browser.modals[-1]  # ask_user is allowed, as it should be
    assert kit.click("submit", answers=[["corner"]])
    await kit.chat.settled()
    assert note.read_text() == "milk"
    [reply] = kit.chat.messages
    assert cards(reply) == [
        ("tool_request", "save_note"),
        ("tool_result", "success"),
        ("tool_request", "ask_user"),
        ("tool_result", "success"),
    ]
    assert reply.plain.endswith("Saved, and noted your shop.")
    last = kit.agent.last_run()
    assert last is not None
    decisions = [(e.tool_name, e.decision) for e in last.events if e.type == "permission"]
    assert decisions == [("save_note", "ask"), ("ask_user", "allow")]
    assert "corner" in model.requests[2]["messages"][-1]["content"]
    await kit.session.end()
