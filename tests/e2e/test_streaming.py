"""Streaming replies, the stop button (mid-stream and mid-tool), usage and provider errors."""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import pytest
from playwright.sync_api import Page, WebSocket, expect

from deputy_shiny.shiny.playwright import AgentChat
from tests.e2e.apps._shared import numbered_words
from tests.e2e.conftest import AppServer, open_chat

E2E_APPS = ("streaming.py",)
BURST_TEXT = numbered_words(120, "BURST-END.")  # as the app streams it for "burst"


@pytest.fixture(scope="module")
def app(serve_app: Callable[..., AppServer]) -> AppServer:
    return serve_app("streaming.py")


@pytest.fixture
def chat(page: Page, app: AppServer) -> AgentChat:
    return open_chat(page, app)


def _normal(text: str) -> str:
    return " ".join(text.split())


def test_text_arrives_incrementally(chat: AgentChat) -> None:
    full = _normal(numbered_words(25, "DONE."))
    chat.send("stream")
    chat.expect_latest_reply("word 001")
    samples: list[str] = []
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        samples.append(_normal(chat.latest_reply_text()))
        if "DONE." in samples[-1]:
            break
        time.sleep(0.05)
    assert samples[-1] == full
    partial = [s for s in samples if s != full]
    # The reply took ~1.6 s to stream: the page showed it growing, not all at once.
    assert len({len(s) for s in partial}) >= 3, partial
    assert all(full.startswith(s) for s in partial), partial
    assert [len(s) for s in partial] == sorted(len(s) for s in partial)
    chat.expect_usage(re.compile(r"\bRequests: 1\b"))
    chat.expect_usage(re.compile(r"\bTokens: 150\b"))
    chat.expect_usage(re.compile(r"\bCost: \$0\.0012\b"))
    chat.expect_idle()


def test_coalesced_text_arrives_whole_with_its_tool_card(page: Page, app: AppServer) -> None:
    # The model sends ~430 small chunks in about a second; the kit coalesces them
    # (flush_interval 0.04 by default), and the browser still shows all of it, the card,
    # and the text after the card.
    frames: list[str | bytes] = []

    def record(socket: WebSocket) -> None:
        # A function, not the bound builtin ``frames.append`` (Playwright can't wrap it).
        def received(frame: str | bytes) -> None:
            frames.append(frame)

        socket.on("framereceived", received)

    page.on("websocket", record)
    chat = open_chat(page, app)
    chat.send("burst")
    expect(chat.tool_card("quick_tool")).to_be_visible()
    chat.expect_latest_reply("Tool finished: looked at ok")
    chat.expect_idle()
    shown = _normal(chat.latest_reply_text())
    assert shown.startswith(_normal(BURST_TEXT)), shown
    assert shown.endswith("Tool finished: looked at ok"), shown
    model_chunks = -(-len(BURST_TEXT) // 3)
    chunks = [f for f in frames if isinstance(f, str) and '"type": "chunk"' in f]
    # Far fewer websocket messages than model chunks (one per chunk without coalescing).
    assert 2 <= len(chunks) < model_chunks / 4, (len(chunks), model_chunks)


def test_stop_mid_stream_keeps_the_partial_text_and_frees_the_input(chat: AgentChat) -> None:
    chat.send("slow")
    chat.expect_latest_reply("word 005")
    chat.stop()
    chat.expect_idle(timeout=5_000)
    time.sleep(0.2)
    stopped = _normal(chat.latest_reply_text())
    time.sleep(0.6)  # unstopped, the reply would grow by ~100 characters meanwhile
    assert _normal(chat.latest_reply_text()) == stopped
    assert "word 005" in stopped
    assert "SLOW-END" not in stopped
    chat.send("hello again")
    chat.expect_latest_reply("You said: hello again", timeout=10_000)


def test_stop_mid_tool_frees_the_chat_within_seconds(chat: AgentChat, app: AppServer) -> None:
    before = len(app.events())
    chat.send("sleep")
    expect(chat.loc_tool_cards.last).to_be_visible()
    app.wait_for_event("slow_tool started")
    stop_clicked = time.monotonic()
    chat.stop()
    chat.expect_idle(timeout=5_000)
    # The card resolves as stopped (no spinner left), and the reply has one stop line:
    # shinychat's "Response cancelled", not also the kit's "Stopped.".
    card = chat.loc_tool_cards.last
    expect(card.locator(".shiny-chat-tool-group__glyph.running")).to_have_count(0)
    expect(chat.tool_card_title(card)).to_have_text("Stopped: slow_tool")
    expect(chat.expand_tool_card(card)).to_contain_text("Stopped: the run ended before")
    reply = chat.latest_reply_text()
    assert reply.count("Response cancelled") == 1, reply
    assert "Stopped." not in reply, reply
    chat.send("after the tool")
    chat.expect_latest_reply("You said: after the tool", timeout=5_000)
    assert time.monotonic() - stop_clicked < 8
    # The 30 s tool was cancelled, not left sleeping in the background.
    app.wait_for_event("slow_tool cancelled", timeout=5)
    assert "slow_tool finished" not in app.events()[before:]


def test_a_long_tool_shows_its_progress_live_in_its_card(chat: AgentChat, app: AppServer) -> None:
    chat.send("progress")
    card = chat.tool_card("progress_tool")
    status = card.locator(".deputy-tool-progress").first
    # The tool's text, as text: its "<b>" is shown, never made an element.
    expect(status).to_have_text("Step 1 of 2 <b>bold?</b>")
    expect(status.locator("b")).to_have_count(0)
    expect(status.locator("progress")).to_have_attribute("aria-label", "50%")
    assert status.locator("progress").evaluate("bar => bar.value") == 0.5
    (app.markers / "step2").touch()
    expect(status).to_have_text("Step 2 of 2")  # no fraction: no bar
    expect(status.locator("progress")).to_have_count(0)
    (app.markers / "finish").touch()
    chat.expect_latest_reply("Tool finished: did 2 steps")
    # The result replaced the running card, and its status with it.
    expect(card.locator(".deputy-tool-progress")).to_have_count(0)
    expect(chat.tool_card_title(card)).not_to_contain_text("Step")
    chat.expect_idle()


def test_provider_error_shows_a_readable_message(chat: AgentChat) -> None:
    chat.send("fail")
    chat.expect_latest_reply("The model request failed", timeout=15_000)
    reply = chat.latest_reply_text().strip()
    # One line naming the provider and the status; litellm's own text stays in the log.
    assert re.fullmatch(r"The model request failed: \S+ returned 503: Service Unavailable.*", reply)
    assert "Traceback" not in reply and "litellm" not in reply.lower()
    chat.expect_idle()
    chat.send("still there?")
    chat.expect_latest_reply("You said: still there?")
