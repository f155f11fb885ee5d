"""An MCP server's image in the chat (#37): the tool card shows it from the session (its
own data: URL, within a CSP that allows images only from the app and data:), and what a
hostile server sends as an image shows as a note, never as markup."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from playwright.sync_api import Locator, Page, expect

from deputy_shiny.shiny.playwright import AgentChat
from tests.e2e.conftest import AppServer, open_chat

E2E_APPS = ("mcp_images.py",)

# Every CSP violation of the page, recorded from its first script on.
RECORD_VIOLATIONS = """
window.__violations = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__violations.push(e.violatedDirective + " " + e.blockedURI);
});
"""


@pytest.fixture(scope="module")
def app(serve_app: Callable[..., AppServer]) -> AppServer:
    return serve_app("mcp_images.py")


def card_after(page: Page, app: AppServer, task: str, reply: str) -> Locator:
    """Open the app, send ``task``, wait for ``reply``; the tool card, opened."""
    chat = open_recorded(page, app)
    chat.send(task)
    chat.expect_latest_reply(reply)
    chat.expect_idle()
    card = chat.loc_tool_cards.last
    card.locator("summary, .card-header, button").first.click()
    return card


def open_recorded(page: Page, app: AppServer) -> AgentChat:
    page.add_init_script(RECORD_VIOLATIONS)
    headers = page.request.get(app.url).headers
    assert headers["content-security-policy"] == "img-src 'self' data:"
    chat = open_chat(page, app)
    state = page.locator(".deputy-mcp-server[data-server='media'] .deputy-mcp-state")
    expect(state).to_have_text("connected", timeout=20_000)  # connected as the session starts
    return chat


def test_the_card_shows_the_server_s_image_from_the_session(page: Page, app: AppServer) -> None:
    card = card_after(page, app, "plot", "Done: I saw 1 image(s). END-plot")
    image = card.locator("img.shiny-chat-tool-image")
    expect(image).to_have_count(1)
    src = image.get_attribute("src") or ""
    assert src.startswith("data:image/png;base64,iVBORw0KGgo")
    page.wait_for_function("el => el.complete && el.naturalWidth === 2", arg=image.element_handle())
    expect(card).to_contain_text("the sales plot")
    # Every image of the page is the app's own or a data: URL, and the CSP held.
    sources = page.eval_on_selector_all("img", "els => els.map(e => e.currentSrc || e.src)")
    origin = app.url.rstrip("/")
    assert all(s.startswith(("data:", origin)) for s in sources), sources
    assert page.evaluate("window.__violations") == []


def test_a_hostile_server_s_images_show_as_notes(page: Page, app: AppServer) -> None:
    card = card_after(page, app, "hostile", "Done: I saw 0 image(s). END-hostile")
    expect(card).to_contain_text("image refused: declared image/svg+xml")
    expect(card).to_contain_text("declared image/jpeg, but the data is image/png")
    expect(card).to_contain_text("onerror")  # the server's markup, shown as text
    assert card.locator("img, svg image, script").count() == 0
    page.wait_for_timeout(300)
    assert page.evaluate("window.__pwned ?? null") is None
    assert page.evaluate("window.__violations") == []
