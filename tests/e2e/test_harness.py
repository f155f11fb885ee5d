"""The harness itself: Debian's Chromium drives a plain Shiny chat; a dead app is reported."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from playwright.sync_api import Browser, Page
from shinychat.playwright import ChatController

from tests.e2e.conftest import CHROMIUM, AppServer

E2E_APPS = ("plain_chat.py",)


def test_chromium_is_debians(browser: Browser) -> None:
    assert browser.browser_type.name == "chromium"
    assert browser.version.split(".")[0].isdigit()
    assert CHROMIUM == "/usr/bin/chromium"


def test_a_plain_shiny_chat_round_trip(page: Page, serve_app: Callable[..., AppServer]) -> None:
    app = serve_app("plain_chat.py")
    page.goto(app.url)
    chat = ChatController(page, "chat")
    chat.set_user_input("hello there")
    chat.send_user_input()
    chat.expect_latest_message("Echo: hello there", timeout=10_000)


def test_an_app_that_dies_is_reported_with_its_output(
    serve_app: Callable[..., AppServer],
) -> None:
    with pytest.raises(RuntimeError, match="broken on purpose") as info:
        serve_app("broken.py")
    assert "exited with code" in str(info.value)
