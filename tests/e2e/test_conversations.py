"""Saved conversations (KitPersistence) in the reference app, in the browser.

Each test's browser context is one user: its token lives in the context's HttpOnly
cookie (and its binding in the context's localStorage), so a reload or a new page of the
same context is the same user, and another context is another user. The app
keeps conversations under a folder of this module's own.
"""

from __future__ import annotations

import atexit
import json
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import BrowserContext, Page, expect
from websockets import Origin
from websockets.sync.client import connect

from deputy_shiny.shiny._conversations import folder_name
from deputy_shiny.shiny.playwright import (
    AgentChat,
    ApprovalModal,
    ConversationPanel,
    HistoryDrawer,
)
from tests.e2e.conftest import ROOT, AppServer

# A server of this module's own (the tag only tells it apart from test_reference_app's),
# so that it is launched ahead of the module too.
# The store's server too, on a database file known at import (so it is launched ahead).
_STORE_DIR = tempfile.mkdtemp(prefix="deputy-e2e-store-")
atexit.register(shutil.rmtree, _STORE_DIR, True)
STORE_DATABASE = Path(_STORE_DIR) / "kit.db"
STORE_URL = f"sqlite+aiosqlite:///{STORE_DATABASE}"
E2E_APPS = (
    (str(ROOT / "app.py"), {"DEPUTY_E2E_TAG": "conversations"}),
    (str(ROOT / "app.py"), {"DEPUTY_STORE_URL": STORE_URL}),
)

NOTE = Path("notes") / "demo-note.md"


@pytest.fixture
def app(serve_app: Callable[..., AppServer]) -> AppServer:
    return serve_app(str(ROOT / "app.py"), DEPUTY_E2E_TAG="conversations")


@pytest.fixture
def conversations(app: AppServer) -> Path:
    """Where the app keeps its conversations (``DEPUTY_CONVERSATIONS_DIR``)."""
    return app.conversations


@pytest.fixture
def user(new_page: Callable[[], Page]) -> BrowserContext:
    """One user: a browser context (its cookies hold the user's token). A script error
    on any of its pages fails the test (``new_page``)."""
    return new_page().context


def token(page: Page) -> str | None:
    """The user's token: the HttpOnly cookie the server set (Playwright reads it; the
    page's scripts cannot). Waits a moment for it, as the kit's script fetches it."""
    for _ in range(100):
        for cookie in page.context.cookies():
            if cookie["name"] == "deputy_shiny_conversation":
                assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
                assert "deputy_shiny_conversation" not in page.evaluate("document.cookie")
                return cookie["value"]
        page.wait_for_timeout(100)
    return None


def open_app(context: BrowserContext, app: AppServer) -> tuple[Page, AgentChat]:
    page = context.new_page()
    page.goto(app.url)
    chat = AgentChat(page, "chat")
    chat.expect_ready()
    return page, chat


def workspace(conversations: Path, page: Page) -> Path:
    """The workspace of the user of ``page`` (found from the user's token)."""
    key = token(page)
    assert key is not None
    return conversations / "workspaces" / folder_name("token", key.split(".")[0], "chat")


def records(conversations: Path, page: Page) -> Path:
    """The records folder of the user of ``page`` (beside the workspaces, not in them)."""
    return conversations / "records" / workspace(conversations, page).name


def chatted(context: BrowserContext, app: AppServer, text: str) -> tuple[Page, AgentChat]:
    """Open the app and send ``text`` (which the demo answers naming welcome.md)."""
    page, chat = open_app(context, app)
    chat.send(text)
    chat.expect_latest_reply("welcome.md", timeout=20_000)
    chat.expect_idle()
    return page, chat


def expect_requests(page: Page, count: int) -> None:
    row = page.locator(".deputy-usage-row").filter(has_text="Requests")
    expect(row.locator("dd")).to_have_text(str(count), timeout=20_000)


def user_messages(chat: AgentChat) -> list[str]:
    messages = chat.loc_user_messages
    return [text.strip() for text in messages.all_inner_texts()]


def test_a_reload_brings_back_the_transcript_and_the_turns(
    user: BrowserContext, app: AppServer
) -> None:
    page, chat = chatted(user, app, "read welcome.md")
    expect_requests(page, 2)

    page.reload()
    chat.expect_ready()
    # The transcript: the user's message, the tool card and the reply are back.
    expect(chat.loc_user_messages).to_have_count(1)
    assert user_messages(chat) == ["read welcome.md"]
    expect(chat.tool_card("read_file")).to_have_count(1)
    chat.expect_latest_reply("welcome.md")
    # The turns: the agent's usage came back with them, and the conversation goes on.
    expect_requests(page, 2)
    # A narrowed mode is part of the conversation: it comes back after a reload.
    page.locator("#mode-mode").select_option(label="Read-only")
    chat.send("list files")
    chat.expect_latest_reply("welcome.md", timeout=20_000)
    expect_requests(page, 4)
    chat.expect_idle()
    page.reload()
    chat.expect_ready()
    expect(page.locator("#mode-mode")).to_have_value("readonly")
    expect(page.locator("#mode-mode option")).to_have_count(1)


def test_the_conversation_downloads_as_markdown_and_json_to_its_session_only(
    user: BrowserContext, app: AppServer, new_page: Callable[[], Page]
) -> None:
    page, _chat = chatted(user, app, "read welcome.md")
    panel = ConversationPanel(page, "conversation")
    markdown = panel.download("markdown")
    # The agent's turns: the user's message, the tool call and its result, the reply.
    assert markdown.startswith("# Conversation\n\n## User\n\nread welcome.md\n\n## Assistant")
    assert "**Tool call** read\\_file" in markdown
    assert "**Tool result** read\\_file" in markdown
    assert "You are the assistant" not in markdown  # app.py's system prompt: the app's
    document = json.loads(panel.download("json"))
    assert document["format"] == "deputy_shiny.conversation/1"
    roles = [turn["role"] for turn in document["turns"]]
    assert roles[0] == "user" and roles[-1] == "assistant" and "system" not in roles
    assert document["turns"][0]["contents"][0]["text"] == "read welcome.md"
    with page.expect_download() as info:
        panel.page.locator("#conversation-download_json").click()
    assert re.fullmatch(r"conversation-\d{8}-\d{6}\.json", info.value.suggested_filename)

    session_id = page.evaluate("Shiny.shinyapp.config.sessionId")
    assert isinstance(session_id, str) and session_id
    # Another user's browser, with this session's id: no route of this session serves the
    # conversation (with render.download_button this URL gave it to anyone who had it).
    other = new_page()
    other.goto(app.url)
    AgentChat(other, "chat").expect_ready()
    for name in ("download_markdown", "download_json", "download"):
        url = f"session/{session_id}/download/conversation-{name}?w="
        assert other.evaluate("u => fetch(u).then(r => r.status)", url) == 404
    # What the other session can ask is its own conversation (a new user's: empty).
    assert ConversationPanel(other, "conversation").download("markdown") == "# Conversation\n"
    asked = (
        "() => new Promise((ok, no) => Shiny.shinyapp.makeRequest('conversation-download',"
        " ['json'], ok, no))"
    )
    assert json.loads(other.evaluate(asked)["text"])["turns"] == []


def _start_and_ask(url: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Start a session over Shiny's protocol: the messages up to its first ``values``, and
    the answer to one download request. (The sync client: Playwright's loop is running.)"""
    parts = urlsplit(url)
    address = f"ws://{parts.netloc}{parts.path.rstrip('/')}/websocket/"
    with connect(address, origin=Origin(f"{parts.scheme}://{parts.netloc}")) as ws:
        # As a browser that shows the panel: every output it has is visible (else Shiny
        # leaves hidden outputs suspended and sends nothing of them).
        visible = {
            f".clientdata_output_conversation-{name}_hidden": False
            for name in ("download_markdown", "download_json", "checkpoints")
        }
        ws.send(json.dumps({"method": "init", "data": visible}))
        start: list[dict[str, Any]] = []
        while not start or "values" not in start[-1]:
            start.append(json.loads(ws.recv(timeout=60)))
        ws.send(json.dumps({"method": "conversation-download", "args": ["markdown"], "tag": 7}))
        while True:
            message = json.loads(ws.recv(timeout=60))
            if "response" in message:
                return start, message["response"]


def test_a_session_starts_without_download_outputs(app: AppServer) -> None:
    start, response = _start_and_ask(app.url)
    # No output, effect or URL for the downloads in the session's start: nothing of theirs
    # is recalculated or sent until a click asks.
    assert not [m for m in start if "download" in json.dumps(m)]
    # The session did start, and the panel's one output came (the checkpoint list).
    assert "conversation-checkpoints" in start[-1]["values"]
    assert response["tag"] == 7
    assert response["value"]["text"] == "# Conversation\n"
    assert re.fullmatch(r"conversation-\d{8}-\d{6}\.md", response["value"]["filename"])


def test_an_approval_waits_across_a_closed_tab_and_runs_once(
    user: BrowserContext, app: AppServer, conversations: Path
) -> None:
    page, chat = open_app(user, app)
    chat.send("write a note")
    # Run alone, this is a fresh server's first reply: litellm may still be warming up.
    ApprovalModal(page).expect_open("write_file", timeout=60_000)
    folder = workspace(conversations, page)
    assert len(list((records(conversations, page) / "approvals").glob("*.approval.json"))) == 1
    page.close()  # the tab closes while the approval waits

    page, chat = open_app(user, app)
    modal = ApprovalModal(page)
    modal.expect_open("write_file", timeout=30_000)  # the same approval, still waiting
    modal.approve()
    chat.expect_latest_reply("The write happened", timeout=20_000)
    chat.expect_idle()
    assert (folder / NOTE).is_file()
    # Written exactly once: the journal holds one change since the run began.
    panel = ConversationPanel(page, "conversation")
    panel.expect_changes(0, "1 file change after it")

    # Decided once: a reload shows the outcome, never the modal again.
    page.reload()
    chat.expect_ready()
    chat.expect_latest_reply("The write happened")
    expect(chat.tool_card("write_file")).to_have_count(1)
    expect(page.locator("#shiny-modal .deputy-approval")).to_have_count(0)
    panel.expect_changes(0, "1 file change after it")


def test_another_user_sees_nothing_of_a_conversation(
    user: BrowserContext, new_page: Callable[[], Page], app: AppServer
) -> None:
    page, chat = open_app(user, app)
    chat.send("write a note")
    ApprovalModal(page).expect_open("write_file")

    other_page, other_chat = open_app(new_page().context, app)
    other_page.reload()  # now with its own token, never the first user's
    other_chat.expect_ready()
    expect(other_chat.loc_user_messages).to_have_count(0)
    expect(other_page.locator("#shiny-modal .deputy-approval")).to_have_count(0)
    assert "write a note" not in other_chat.chat.loc_messages.inner_text()
    mine, theirs = token(page), token(other_page)
    assert mine and theirs and mine != theirs and len(mine) == len(theirs) == 87
    # The first user's approval is still theirs, still waiting.
    expect(page.locator("#shiny-modal .deputy-approval")).to_be_visible()


def test_rewind_from_the_sidebar_restores_the_files(
    user: BrowserContext, app: AppServer, conversations: Path
) -> None:
    page, chat = open_app(user, app)
    chat.send("write a note")
    modal = ApprovalModal(page)
    modal.expect_open("write_file")
    modal.approve()
    chat.expect_latest_reply("The write happened", timeout=20_000)
    chat.expect_idle()
    note = workspace(conversations, page) / NOTE
    assert note.is_file()
    panel = ConversationPanel(page, "conversation")
    panel.expect_changes(0, "1 file change after it")
    chat.send("list files")  # a run that changes no file adds no row
    chat.expect_latest_reply("list_files found", timeout=20_000)
    chat.expect_idle()
    expect(panel.loc_rows).to_have_count(1)
    panel.expect_changes(0, "1 file change after it")

    panel.rewind(0, confirm=False)  # cancelled: nothing changes
    assert note.is_file()
    panel.rewind(0)
    expect(page.locator(".shiny-notification-content")).to_contain_text("1 file change undone")
    assert not note.exists()  # the note did not exist before that run
    expect(page.locator(".deputy-workspace")).not_to_contain_text("demo-note.md")
    assert (note.parent.parent / "welcome.md").is_file()
    # The conversation itself is unchanged, and the rewind was saved with it.
    page.reload()
    chat.expect_ready()
    chat.expect_latest_reply("list_files found")
    # Nothing is left to rewind, so no run is listed (only runs that changed files are).
    expect(panel.loc_rows).to_have_count(0)
    expect(panel.loc.locator(".deputy-no-checkpoints")).to_contain_text("No file changes")


def test_a_new_conversation_starts_empty_and_keeps_the_last_in_the_drawer(
    user: BrowserContext, app: AppServer
) -> None:
    page, chat = chatted(user, app, "list files")
    panel = ConversationPanel(page, "conversation")
    panel.new_conversation(confirm=False)
    assert user_messages(chat) == ["list files"]
    panel.new_conversation()  # the page reloads with an empty chat
    expect(chat.loc_user_messages).to_have_count(0, timeout=20_000)
    chat.expect_ready()
    expect_requests(page, 0)
    page.reload()  # and it stays empty
    chat.expect_ready()
    expect(chat.loc_user_messages).to_have_count(0)
    HistoryDrawer(page, "chat").expect_titles(["list files"])  # to switch back to


def test_a_second_tab_takes_the_conversation_over(user: BrowserContext, app: AppServer) -> None:
    first, first_chat = chatted(user, app, "list files")

    _, second_chat = open_app(user, app)  # the same user, another tab
    expect(second_chat.loc_user_messages).to_have_count(1, timeout=20_000)
    # The first tab is told, and let go (its session ended).
    first_chat.expect_latest_reply("continues there")
    first.wait_for_function("() => !Shiny.shinyapp.isConnected()")
    second_chat.send("read welcome.md")
    second_chat.expect_latest_reply("welcome.md", timeout=20_000)
    second_chat.expect_idle()
    expect(second_chat.loc_user_messages).to_have_count(2)


def test_with_a_store_url_the_conversation_comes_back_from_the_database(
    serve_app: Callable[..., AppServer],
    new_page: Callable[[], Page],
) -> None:
    """``DEPUTY_STORE_URL``: the reference app keeps conversations in the database, and
    its conversations folder only the workspaces."""
    app = serve_app(str(ROOT / "app.py"), DEPUTY_STORE_URL=STORE_URL)
    context = new_page().context
    page, chat = chatted(context, app, "read welcome.md")
    expect_requests(page, 2)
    page.reload()
    chat.expect_ready()
    expect(chat.loc_user_messages).to_have_count(1, timeout=20_000)
    assert user_messages(chat) == ["read welcome.md"]
    chat.expect_latest_reply("welcome.md")
    expect_requests(page, 2)
    assert STORE_DATABASE.is_file()
    assert (workspace(app.conversations, page) / "welcome.md").is_file()
    saved = [p.name for p in app.conversations.rglob("*.json")]
    assert "session.json" not in saved and "conversation.json" not in saved

    # An approval waits in the database across a closed tab, and runs once.
    chat.send("write a note")
    ApprovalModal(page).expect_open("write_file", timeout=30_000)
    folder = workspace(app.conversations, page)
    page.close()
    page, chat = open_app(context, app)
    modal = ApprovalModal(page)
    modal.expect_open("write_file", timeout=30_000)
    modal.approve()
    chat.expect_latest_reply("The write happened", timeout=20_000)
    chat.expect_idle()
    assert (folder / NOTE).is_file()
    panel = ConversationPanel(page, "conversation")
    panel.expect_changes(0, "1 file change after it")  # the journal is the database's
    page.reload()
    chat.expect_ready()
    chat.expect_latest_reply("The write happened")
    expect(page.locator("#shiny-modal .deputy-approval")).to_have_count(0)
    panel.expect_changes(0, "1 file change after it")
    files = [p for p in app.conversations.rglob("*") if p.is_file()]
    assert not [p for p in files if "records" in p.parts and p.name != ".token-key"]
