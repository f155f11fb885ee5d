"""An Agent works where shinychat expects an ellmer/chatlas chat (#37, row 15): a plain
``Chat("chat", client=agent)`` streams the agent's replies and keeps its conversation."""

from __future__ import annotations

from collections.abc import Callable

from playwright.sync_api import Page, expect
from shinychat.playwright import ChatController

from tests.e2e.conftest import AppServer

E2E_APPS = ("shinychat_client.py",)


def test_an_agent_is_a_shinychat_client(page: Page, serve_app: Callable[..., AppServer]) -> None:
    app = serve_app("shinychat_client.py")
    page.goto(app.url)
    chat = ChatController(page, "chat")
    chat.set_user_input("hello")
    chat.send_user_input()
    expect(chat.loc_latest_message).to_contain_text(
        "You said hello (1 messages so far)", timeout=60_000
    )
    chat.set_user_input("again")
    chat.send_user_input()
    expect(chat.loc_latest_message).to_contain_text(
        "You said again (2 messages so far)", timeout=60_000
    )
