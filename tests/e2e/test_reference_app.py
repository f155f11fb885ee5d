"""The reference app (app.py) on the offline demo model, in the browser."""

from __future__ import annotations

from collections.abc import Callable

from playwright.sync_api import Page, expect
from shinychat.playwright import ChatController

from tests.e2e.conftest import ROOT, AppServer

E2E_APPS = (str(ROOT / "app.py"),)


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
    expect(replies.last).to_contain_text("not an LLM", timeout=20_000)
