"""A provider that accepts the request and never answers, in the browser: the chat says it
is still waiting, Stop ends the run at once, and left alone the run ends with a readable
error at the model's limit (``apps/silent_provider.py``: a loopback server)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import AppServer, open_chat

E2E_APPS = ("silent_provider.py",)
NOTE = re.compile(r"Still waiting for 127\.0\.0\.1:\d+ \(\d+ s\)… Stop to give up")


@pytest.fixture(scope="module")
def app(serve_app: Callable[..., AppServer]) -> AppServer:
    return serve_app("silent_provider.py")


def test_a_silent_provider_shows_a_note_stops_at_once_and_times_out(
    page: Page, app: AppServer
) -> None:
    chat = open_chat(page, app)
    chat.send("hello?")
    app.wait_for_event(r"\brequest\b", timeout=20)
    expect(chat.loc_latest_reply).to_contain_text(NOTE, use_inner_text=True, timeout=10_000)
    stop_clicked = time.monotonic()
    chat.stop()
    chat.expect_idle(timeout=5_000)
    assert time.monotonic() - stop_clicked < 5  # not the 6 s limit, let alone 600 s
    app.wait_for_event("hung up", timeout=5)  # the request was closed, not left open
    reply = chat.latest_reply_text()
    assert "The model request failed" not in reply, reply
    # The composer is idle: the next message runs, and left alone it ends at the limit
    # with one readable line naming the host and the limit.
    chat.send("anyone?")
    chat.expect_latest_reply("The model request failed", timeout=20_000)
    reply = " ".join(chat.latest_reply_text().split())
    assert re.search(
        r"The model request failed: openai: 127\.0\.0\.1:\d+ sent nothing for 6 s, so the "
        r"request timed out \(ChatModel\(timeout=\.\.\.\) sets it\)",
        reply,
    ), reply
    assert NOTE.search(reply)
    chat.expect_idle()
