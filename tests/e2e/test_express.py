"""The kit in a Shiny Express app: a streamed text reply shows up."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from playwright.sync_api import Page

from tests.e2e.apps._shared import numbered_words
from tests.e2e.conftest import AppServer, open_chat

E2E_APPS = ("express_app.py",)


@pytest.fixture(scope="module")
def app(serve_app: Callable[..., AppServer]) -> AppServer:
    return serve_app("express_app.py")


def test_a_text_reply_streams_in_express(page: Page, app: AppServer) -> None:
    chat = open_chat(page, app, "chat")
    chat.send("hello express")
    chat.expect_latest_reply("Express says: hello express")
    chat.expect_latest_reply("END.")
    text = " ".join(chat.latest_reply_text().split())
    assert text == f"Express says: hello express {numbered_words(12, 'END.')}"
    chat.expect_idle()
    chat.expect_usage("Requests: 1")
