"""The reference app (app.py) on the offline demo model, in the browser."""

from __future__ import annotations

import atexit
import json
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from playwright.sync_api import Page, expect
from shinychat.playwright import ChatController

from deputy_shiny.shiny.playwright import ApprovalModal, SubagentPanel
from tests.e2e.conftest import ROOT, AppServer, open_chat

SERVER_KEY = "sk-e2e-server-" + "5f3a9c1e77d04b2a"
# The MCP config's server is known at import, so it is launched ahead of the module
# with the others (started in the test, its start would add seconds to the test).
_MCP_DIR = tempfile.mkdtemp(prefix="deputy-e2e-mcp-")
atexit.register(shutil.rmtree, _MCP_DIR, True)
MCP_CONFIG = Path(_MCP_DIR) / "config.json"
MCP_CONFIG.write_text(
    json.dumps(
        {"mcpServers": {"time": {"command": sys.executable, "args": ["-m", "mcp_server_time"]}}}
    )
)
E2E_APPS = (
    str(ROOT / "app.py"),
    (str(ROOT / "app.py"), {"OPENAI_API_KEY": SERVER_KEY}),
    (str(ROOT / "app.py"), {"DEPUTY_MCP_CONFIG": str(MCP_CONFIG)}),
    (str(ROOT / "app.py"), {"RSTUDIO_PRODUCT": "CONNECT"}),
)
# The first request on a fresh server waits for litellm's import (the app warms it up in
# a thread as it starts): 4.5-13.5 s measured at a load of 7 on 2 cores, so 15 s was not
# enough. A server that never answers still fails, after a minute.
FRESH_SERVER_MS = 60_000


def test_the_demo_model_answers_in_the_browser(
    page: Page, serve_app: Callable[..., AppServer]
) -> None:
    app = serve_app(str(ROOT / "app.py"))
    page.goto(app.url)
    container = page.locator("shiny-chat-container").first
    expect(container).to_be_visible()
    chat_id = container.get_attribute("id")
    assert chat_id
    chat = ChatController(page, chat_id)
    chat.set_user_input("Hello")
    chat.send_user_input()
    replies = chat.loc_messages.locator("> .shiny-chat-message")
    expect(replies.last).to_contain_text("not an LLM", timeout=FRESH_SERVER_MS)


def test_the_sidebar_tells_an_anonymous_visitor_on_connect_the_truth(
    page: Page, serve_app: Callable[..., AppServer]
) -> None:
    """On Connect an anonymous visitor's conversation is not saved: the chat says so, and
    the sidebar no longer promises "Saved as you go"; the mode hint names only the modes
    its select offers."""
    app = serve_app(str(ROOT / "app.py"), RSTUDIO_PRODUCT="CONNECT")
    page.goto(app.url)
    messages = page.locator("shiny-chat-container").first
    expect(messages).to_contain_text("signed-in users only", timeout=FRESH_SERVER_MS)
    section = page.locator(".deputy-conversation-section")
    expect(section).to_contain_text("Not saved: this conversation ends with the page")
    expect(section).not_to_contain_text("Saved as you go")
    mode = page.locator(".deputy-mode")
    expect(mode).to_contain_text("Read-only refuses them")
    expect(mode).not_to_contain_text("Plan")


def test_research_shows_the_team_at_work_in_the_sidebar(
    page: Page, serve_app: Callable[..., AppServer]
) -> None:
    app = serve_app(str(ROOT / "app.py"))
    chat = open_chat(page, app, "chat")
    team = SubagentPanel(page, "team")
    team.expect_note("No delegations yet")
    chat.send("research tides")
    researcher, writer = team.row("researcher"), team.row("writer")
    team.expect_status(researcher, "completed", timeout=FRESH_SERVER_MS)
    team.expect_event(researcher, "calls read_file")
    team.expect_status(writer, "completed", timeout=20_000)
    chat.expect_latest_reply("my team's answer about tides", timeout=20_000)
    chat.expect_latest_reply("welcome.md")
    transcript = team.open_transcript(researcher)
    expect(transcript).to_contain_text("list_files result")


def test_bash_in_one_session_sees_neither_another_session_nor_the_servers_key(
    new_page: Callable[[], Page], serve_app: Callable[..., AppServer]
) -> None:
    app = serve_app(str(ROOT / "app.py"), OPENAI_API_KEY=SERVER_KEY)
    page_b, page_a = new_page(), new_page()
    # Session B writes its note (approved in B's own modal).
    chat_b = open_chat(page_b, app, "chat")
    chat_b.send("write a note")
    modal_b = ApprovalModal(page_b)
    modal_b.expect_open("write_file", timeout=FRESH_SERVER_MS)  # a fresh server: its own env
    modal_b.approve()
    chat_b.expect_latest_reply("The write happened", timeout=20_000)
    # Session A's bash, approved, looks for B's note and the server's secrets.
    chat_a = open_chat(page_a, app, "chat")
    command = (
        "ls ..; ls; cat ../*/notes/demo-note.md; env; cat /proc/1/environ; echo; "
        "cat /proc/*/environ"
    )
    chat_a.send(f"run `{command}`")
    modal_a = ApprovalModal(page_a)
    modal_a.expect_open("run_bash")
    modal_a.approve()
    chat_a.expect_latest_reply("The command ran in the sandbox", timeout=20_000)
    chat_a.expect_latest_reply("(Scripted demo reply.)")  # the whole output has streamed
    chat_a.expect_idle()
    reply = chat_a.latest_reply_text()
    assert "welcome.md" in reply  # the command did run, in A's own workspace
    assert "No such file" in reply  # B's note is not there to read
    assert "A note from the demo" not in reply
    assert SERVER_KEY not in reply
    card = chat_a.expand_tool_card(chat_a.tool_card("run_bash").last)
    expect(card).to_contain_text("welcome.md")
    assert SERVER_KEY not in (card.text_content() or "")


def test_with_an_mcp_config_the_sidebar_connects_its_servers(
    page: Page, serve_app: Callable[..., AppServer]
) -> None:
    app = serve_app(str(ROOT / "app.py"), DEPUTY_MCP_CONFIG=str(MCP_CONFIG))
    page.goto(app.url)
    time_row = page.locator(".deputy-mcp-server[data-server='time']")
    expect(time_row.locator(".deputy-mcp-state")).to_have_text("not connected", timeout=20_000)
    time_row.get_by_role("button", name="Connect").click()
    expect(time_row.locator(".deputy-mcp-state")).to_have_text("connected", timeout=20_000)
    expect(time_row.locator(".deputy-mcp-tools")).to_have_text("2 tools")


def test_the_sidebar_sub_heading_looks_like_its_section_labels(
    page: Page, serve_app: Callable[..., AppServer]
) -> None:
    app = serve_app(str(ROOT / "app.py"))
    open_chat(page, app, "chat")
    style = "(el) => [getComputedStyle(el).fontSize, getComputedStyle(el).textTransform]"
    section = page.locator(".deputy-conversation-section .deputy-section-title")
    rewind = page.get_by_role("heading", name="Rewind files")
    expect(rewind).to_be_visible()
    assert rewind.evaluate(style) == section.evaluate(style) == ["12px", "uppercase"]


def test_without_an_mcp_config_there_is_no_mcp_panel(
    page: Page, serve_app: Callable[..., AppServer]
) -> None:
    app = serve_app(str(ROOT / "app.py"))
    open_chat(page, app, "chat")
    expect(page.locator(".deputy-mcp-section")).to_have_count(0)
