"""A tool's image in the chat (#37): the model gets it, the tool card shows it from the
session (its own data: URL), and nothing the tool was made to say becomes markup."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import AppServer, ImageListener, open_chat

E2E_APPS = ("tool_images.py",)


@pytest.fixture(scope="module")
def app(serve_app: Callable[..., AppServer]) -> AppServer:
    return serve_app("tool_images.py")


def test_the_tool_card_shows_the_returned_image_and_nothing_else_loads(
    page: Page, app: AppServer, image_listener: ImageListener
) -> None:
    image_listener.clear()
    chat = open_chat(page, app)
    chat.send(f"plot {image_listener.port}")
    chat.expect_latest_reply("I saw 1 image(s). END-PLOT")
    chat.expect_idle()
    card = chat.loc_tool_cards.last
    expect(card).to_have_count(1)
    card.locator("summary, .card-header, button").first.click()
    image = card.locator("img.shiny-chat-tool-image")
    expect(image).to_have_count(1)
    src = image.get_attribute("src") or ""
    assert src.startswith("data:image/png;base64,")
    page.wait_for_function("el => el.complete && el.naturalWidth === 2", arg=image.element_handle())
    # The hostile text is shown as text; the linked image was never fetched.
    expect(card).to_contain_text("onerror")
    expect(card).to_contain_text("an image link, not fetched or sent")
    page.wait_for_timeout(300)
    assert page.evaluate("window.__pwned ?? null") is None
    assert chat.chat.loc_messages.locator("img:not(.shiny-chat-tool-image)").count() == 0
    assert image_listener.requests == []
