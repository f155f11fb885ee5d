"""The README's Python examples run, each alone, offline, and their assertions hold.

So do the examples of the documentation pages that hold what a reader used to find in
the README (the kit's manual, deploy, security): each block names its own imports, as
a reader copies one block, not the page.
"""

from __future__ import annotations

import asyncio
import functools
import re
from pathlib import Path
from typing import Any

from deputy_shiny.testing import ScriptedModel, ScriptedReply, ScriptedToolCall

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
# The pages the README links to for everything after its "Start here".
PAGES = [
    DOCS / "kit" / "index.md",
    DOCS / "kit" / "custom-write-tool.md",
    DOCS / "kit" / "saved-conversations.md",
    DOCS / "kit" / "testing-in-a-browser.md",
    DOCS / "guide" / "agent.md",
    DOCS / "terminal.md",
    DOCS / "deploy.md",
    DOCS / "security.md",
    DOCS / "layout.md",
    DOCS / "benchmarks.md",
]


def python_blocks(*pages: Path) -> list[tuple[Path, str]]:
    """Each page's Python examples, with the page they are on."""
    return [
        (page, block)
        for page in pages
        for block in re.findall(r"```python\n(.*?)```", page.read_text(), re.DOTALL)
    ]


def test_each_example_runs_when_copied_alone() -> None:
    # A reader copies one block, not the page: each names its own imports.
    blocks = python_blocks(README, *PAGES)
    assert len([page for page, _ in blocks if page == README]) >= 1
    assert len(blocks) >= 9
    for page, block in blocks:
        exec(compile(block, str(page), "exec"), {"__name__": "readme"})


def test_the_readme_is_short_and_links_every_page() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= 150
    assert re.findall(r"^## .*", text, re.M)[0] == "## Start here"
    for page in PAGES:
        assert f"]({page.relative_to(ROOT).as_posix()})" in text, page


def test_readme_starts_with_the_two_commands() -> None:
    text = README.read_text()
    commands = re.findall(r"```bash\n(.*?)```", text, re.DOTALL)
    assert commands[0].strip() == "./scripts/run-app"
    assert commands[1].strip() == "./scripts/test"
    assert "./scripts/test" in (README.parent / ".ci" / "run").read_text()


def test_the_docs_show_an_app_without_a_key_and_a_local_endpoint() -> None:
    blocks = [block for _, block in python_blocks(README, *PAGES)]
    # An agent factory on FunctionModel (an app of one's own, with its own tools, offline).
    assert any("FunctionModel(" in b and "def make_offline_agent(ctx)" in b for b in blocks)
    assert any("ChatModel(" in b and "api_base=" in b for b in blocks)


def test_the_docs_show_the_browser_test_as_it_runs() -> None:
    """The kit's browser-test example is ``examples/test_express_app.py``, verbatim."""
    text = (DOCS / "kit" / "testing-in-a-browser.md").read_text()
    example = (ROOT / "examples" / "test_express_app.py").read_text()
    assert f"```py\n{example}```" in text


def page_block(page: Path, heading: str) -> str:
    """The first Python example after ``heading`` on ``page``."""
    section = ("\n" + page.read_text()).split(f"\n{heading}\n", 1)[1]
    found = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert found is not None, f"no example under {heading}"
    return found.group(1)


async def test_the_custom_write_tool_example_asks_in_a_kit_session_and_ask_user_works(
    tmp_path: Path,
) -> None:
    # The documented factory, in a kit session (tests/test_chat_session.py's harness).
    from tests.test_chat_session import cards, start, wait_until

    example: dict[str, Any] = {"__name__": "readme"}
    page = DOCS / "kit" / "custom-write-tool.md"
    block = page_block(page, "# A custom write tool behind an approval")
    # Its own checks block (permissions_check), as a script's do: off the event loop.
    await asyncio.to_thread(exec, compile(block, str(page), "exec"), example)
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
