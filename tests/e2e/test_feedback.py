"""Feedback on replies in the browser: a rating lands in the store, in the export, and
the export loads in pydantic-evals; a forged rating lands nowhere.

The app (``apps/feedback.py``) keeps conversations and ratings in an SQLite store of this
module's own, under a record key the test knows, so the test reads the store and runs
``deputy feedback export`` on it as an operator would.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect
from pydantic_evals import Dataset

from deputy_shiny.feedback import FeedbackRecord, load_feedback
from deputy_shiny.persistence.sql_store import SqlStore
from deputy_shiny.shiny.playwright import AgentChat
from tests.e2e.conftest import AppServer

_STORE_DIR = tempfile.mkdtemp(prefix="deputy-e2e-feedback-")
atexit.register(shutil.rmtree, _STORE_DIR, True)
STORE_URL = f"sqlite+aiosqlite:///{Path(_STORE_DIR) / 'kit.db'}"
RECORD_KEY = "5e" * 32  # hex, as `secrets.token_hex(32)` makes one
ENV = {"DEPUTY_STORE_URL": STORE_URL, "DEPUTY_RECORD_KEY": RECORD_KEY}
E2E_APPS = (("feedback.py", ENV),)


@pytest.fixture
def app(serve_app: Callable[..., AppServer]) -> AppServer:
    return serve_app("feedback.py", **ENV)


def stored() -> list[FeedbackRecord]:
    async def read() -> list[FeedbackRecord]:
        async with SqlStore(STORE_URL, key=RECORD_KEY) as store:
            return await load_feedback(store)

    # Playwright's sync API runs an event loop in this thread: read from another one.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, read()).result()


def wait_for_event(app: AppServer, line: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while line not in app.events():
        assert time.monotonic() < deadline, f"no {line!r} in {app.events()}"
        time.sleep(0.1)


def open_chat(page: Page, app: AppServer) -> AgentChat:
    page.goto(app.url)
    chat = AgentChat(page, "chat")
    chat.expect_ready()
    return chat


def test_a_thumbs_down_with_a_comment_lands_in_the_store_and_the_export(
    page: Page, app: AppServer, tmp_path: Path
) -> None:
    chat = open_chat(page, app)
    chat.send("list")
    chat.expect_latest_reply("Listed the files.", timeout=20_000)
    chat.expect_idle()
    reply = chat.loc_replies.last
    bar = reply.get_by_role("group", name="Rate this reply")
    expect(bar).to_be_visible()
    # Keyboard only: the buttons are real buttons, reached and pressed from the keyboard.
    bar.get_by_role("button", name="Bad reply").focus()
    page.keyboard.press("Enter")
    expect(bar.get_by_role("button", name="Bad reply")).to_have_attribute("aria-pressed", "true")
    comment = "It listed <b>files</b> but I asked for a summary"
    bar.get_by_label("Comment (optional)").fill(comment)
    bar.get_by_role("button", name="Send comment").click()
    wait_for_event(app, f"feedback down {comment}")
    expect(bar.get_by_role("status")).to_have_text("Thanks: your feedback is saved.")
    # The comment stays text: no element was made of it anywhere.
    assert page.locator(".deputy-feedback b").count() == 0

    [record] = [r for r in stored() if r.comment == comment]
    assert record.rating == "down"
    assert record.prompt == "list" and record.reply == "Listed the files."
    assert record.tools == ["list_files"]
    assert record.usage["requests"] == 2 and record.cost == pytest.approx(0.02)
    assert record.run_id and record.model and record.chat == "chat"
    assert record.user_id.startswith("user-") and record.user is None  # an anonymous visitor
    assert [t["role"] for t in record.turns] == ["user", "assistant", "user", "assistant"]

    output = tmp_path / "feedback.json"
    env = {**os.environ, "DEPUTY_RECORD_KEY": RECORD_KEY}
    command = [sys.executable, "-m", "deputy_shiny.cli", "feedback", "export"]
    options = ["--store", STORE_URL, "--format", "pydantic-evals", "--output", str(output)]
    done = subprocess.run([*command, *options], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    # pydantic-evals reads it as it is.
    dataset = Dataset[dict[str, Any], str, dict[str, Any]].from_file(output)
    [case] = [c for c in dataset.cases if c.metadata and c.metadata["comment"] == comment]
    assert case.inputs["prompt"] == "list" and case.expected_output is None
    assert case.metadata is not None and case.metadata["rated_reply"] == "Listed the files."


def test_a_forged_rating_is_refused(page: Page, app: AppServer) -> None:
    chat = open_chat(page, app)
    chat.send("hello there")
    chat.expect_latest_reply("You said: hello there", timeout=20_000)
    chat.expect_idle()
    before = len(stored())
    # Another script of the page makes up a reply id, and a huge comment: no gesture,
    # no reply of this session.
    page.evaluate(
        """() => {
          Shiny.setInputValue("chat-feedback",
            {reply: "made-up-reply-id", rating: "down", comment: "forged"},
            {priority: "event"});
        }"""
    )
    bar = chat.loc_replies.last.get_by_role("group", name="Rate this reply")
    # The page's own buttons still work, and that rating (only) is stored.
    bar.get_by_role("button", name="Good reply").click()
    wait_for_event(app, "feedback up ")
    assert "feedback down forged" not in app.events()
    assert "a rating was refused: no such reply in this session" in app.log()
    after = stored()
    assert len(after) == before + 1 and after[-1].rating == "up"
    # The next reply gets its own buttons; the rated one keeps its own and its state.
    chat.send("and again")
    chat.expect_latest_reply("You said: and again", timeout=20_000)
    chat.expect_idle()
    groups = chat.chat.loc_messages.get_by_role("group", name="Rate this reply")
    expect(groups).to_have_count(2)
    expect(groups.first.get_by_role("button", name="Good reply")).to_have_attribute(
        "aria-pressed", "true"
    )
    expect(groups.last.get_by_role("button", name="Good reply")).to_have_attribute(
        "aria-pressed", "false"
    )


def test_replies_restored_on_reload_are_rated_with_their_own_runs(
    page: Page, app: AppServer
) -> None:
    chat = open_chat(page, app)
    chat.send("hello from before")
    chat.expect_latest_reply("You said: hello from before", timeout=20_000)
    chat.expect_idle()
    chat.send("list")
    chat.expect_latest_reply("Listed the files.", timeout=20_000)
    chat.expect_idle()
    live = chat.loc_replies.last.get_by_role("group", name="Rate this reply")
    live.get_by_role("button", name="Good reply").click()
    wait_for_event(app, "feedback up ")
    [first] = [r for r in stored() if r.prompt == "list" and r.rating == "up"]

    page.reload()  # the conversation comes back: its replies may be rated there too
    chat.expect_ready()
    chat.expect_latest_reply("Listed the files.", timeout=20_000)
    bars = chat.loc_replies.get_by_role("group", name="Rate this reply")
    expect(bars).to_have_count(2)
    bars.last.get_by_role("button", name="Bad reply").click()
    bars.first.get_by_role("button", name="Bad reply").click()
    deadline = time.monotonic() + 20
    # The module's store holds the other tests' ratings too: this one is found by its run.
    while not [r for r in stored() if r.rating == "down" and r.run_id == first.run_id]:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    [again] = [r for r in stored() if r.rating == "down" and r.run_id == first.run_id]
    # The restored reply's rating names its own run, with its tools, usage and turns.
    assert again.run_id == first.run_id and again.model == first.model
    assert again.tools == ["list_files"] and again.usage == first.usage
    assert again.turns == first.turns
    while not [r for r in stored() if r.prompt == "hello from before"]:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    [older] = [r for r in stored() if r.prompt == "hello from before"]
    assert older.run_id and older.run_id != first.run_id and older.tools == []
    assert older.reply == "You said: hello from before" and len(older.turns) == 2
