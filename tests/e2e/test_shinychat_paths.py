"""Model text handed to a plain shinychat ``Chat`` by every path the docs present for it
renders inert, as in the kit: hostile text (``tests/e2e/apps/_payloads.py``) fetches
nothing and runs no script, and code through ``inert_stream`` stays byte-exact."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from playwright.sync_api import Page, expect
from shinychat.playwright import ChatController

from tests.e2e.apps._payloads import CODE, END
from tests.e2e.conftest import AppServer, ImageListener

E2E_APPS = ("shinychat_paths.py",)
# The app's paths (``shinychat_paths.PATHS``; importing the app would import litellm).
PATHS = ("content", "text", "inert-content", "inert-text", "run-shiny")
# What the payloads would form as markup: loaders, script, styles (the chat's own
# controls hold none of these).
FORMED = (
    "img, picture, video, audio, iframe, object, embed, input[type=image], image, "
    "table[background], style, link, script, [srcset], [poster], [srcdoc]"
)


@pytest.fixture(scope="module")
def app(serve_app: Callable[..., AppServer]) -> AppServer:
    return serve_app("shinychat_paths.py")


def _ask(page: Page, app: AppServer, text: str, done: str) -> ChatController:
    page.goto(app.url)
    chat = ChatController(page, "chat")
    chat.set_user_input(text)
    chat.send_user_input()
    expect(chat.loc_latest_message).to_contain_text(done, timeout=60_000)
    return chat


@pytest.mark.parametrize("path", PATHS)
def test_hostile_model_text_is_inert_on_every_shinychat_path(
    path: str, page: Page, app: AppServer, image_listener: ImageListener
) -> None:
    image_listener.clear()
    chat = _ask(page, app, f"{path} hostile {image_listener.port}", END)
    page.wait_for_timeout(500)  # time for any image to load, any handler to fire
    reply = chat.loc_latest_message
    seen = {
        "fetched": sorted(set(image_listener.requests)),
        "script ran": page.evaluate("window.__pwned ?? null"),
        "formed": reply.locator(FORMED).evaluate_all("els => els.map(e => e.outerHTML)"),
    }
    assert seen == {"fetched": [], "script ran": None, "formed": []}
    # The text still shows, as text.
    expect(reply).to_contain_text("HOSTILE START")
    expect(reply).to_contain_text("<video poster=")


@pytest.mark.parametrize("path", ["inert-content", "inert-text"])
def test_code_through_inert_stream_is_byte_exact(path: str, page: Page, app: AppServer) -> None:
    chat = _ask(page, app, f"{path} code", "END-CODE")
    code = chat.loc_latest_message.locator("pre code").first
    assert code.evaluate("el => el.textContent") == CODE + "\n"
