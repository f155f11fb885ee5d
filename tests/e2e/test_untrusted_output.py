"""Model text and tool output are untrusted: active HTML stays inert, remote images load
only from the app's allowed origins."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from playwright.sync_api import Page, expect

from deputy_shiny.shiny.playwright import AgentChat
from tests.e2e.apps._payloads import END
from tests.e2e.apps.untrusted import CODE, INLINE
from tests.e2e.conftest import AppServer, ImageListener, open_chat

E2E_APPS = ("untrusted.py",)


@pytest.fixture(scope="module")
def app(serve_app: Callable[..., AppServer]) -> AppServer:
    return serve_app("untrusted.py")


@pytest.fixture(scope="module")
def allowing_app(serve_app: Callable[..., AppServer], image_listener: ImageListener) -> AppServer:
    return serve_app("untrusted.py", DEPUTY_E2E_IMAGE_ORIGINS=image_listener.origin)


@pytest.fixture(scope="module", autouse=True)
def _both_apps_started(app: AppServer, allowing_app: AppServer) -> None:
    """Start the second app with the first, so it warms up while the first is tested."""


@pytest.fixture
def listeners(
    image_listener: ImageListener, other_image_listener: ImageListener
) -> tuple[ImageListener, ImageListener]:
    image_listener.clear()
    other_image_listener.clear()
    return image_listener, other_image_listener


ACTIVE_MARKUP = """(root) => {
  const found = [];
  for (const el of root.querySelectorAll('*')) {
    for (const name of el.getAttributeNames()) {
      const value = (el.getAttribute(name) || '').trim().toLowerCase();
      if (name.startsWith('on')) found.push(`${el.tagName} ${name}`);
      if (['href', 'src', 'action', 'formaction', 'xlink:href', 'srcdoc'].includes(name)
          && (value.startsWith('javascript:') || name === 'srcdoc')) {
        found.push(`${el.tagName} ${name}=${value}`);
      }
    }
  }
  return found;
}"""


def observe(page: Page, chat: AgentChat, *listeners: ImageListener) -> dict[str, object]:
    """What untrusted output managed to do: run script, leave active markup, fetch URLs."""
    page.wait_for_timeout(500)  # time for any handler to fire or image to load
    return {
        "window.__pwned": page.evaluate("window.__pwned ?? null"),
        "active markup": chat.chat.loc_messages.evaluate(ACTIVE_MARKUP),
        "fetched": fetched(*listeners),
    }


def fetched(*listeners: ImageListener) -> list[str]:
    """The distinct paths the listeners were asked for, sorted."""
    return sorted({path for listener in listeners for path in listener.requests})


INERT: dict[str, object] = {"window.__pwned": None, "active markup": [], "fetched": []}


def test_model_text_renders_inert_and_loads_no_remote_image(
    page: Page, app: AppServer, listeners: tuple[ImageListener, ImageListener]
) -> None:
    chat = open_chat(page, app)
    chat.send(f"xss text {listeners[0].port} {listeners[1].port}")
    chat.expect_latest_reply("END-OF-PAYLOAD")
    chat.expect_latest_reply("Untrusted START")
    assert observe(page, chat, *listeners) == INERT


def test_the_hostile_payloads_every_shinychat_path_gets_hold_in_the_kit(
    page: Page, app: AppServer, listeners: tuple[ImageListener, ImageListener]
) -> None:
    # The same payloads as tests/e2e/test_shinychat_paths.py, through the kit.
    chat = open_chat(page, app)
    chat.send(f"xss hostile {listeners[0].port}")
    chat.expect_latest_reply(END)
    assert observe(page, chat, *listeners) == INERT


def test_copied_code_is_byte_exact_and_no_markup_forms(page: Page, app: AppServer) -> None:
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=app.url)
    chat = open_chat(page, app)
    chat.send("code")
    chat.expect_latest_reply("END-CODE")
    reply = chat.loc_latest_reply
    exact = CODE + "\n"  # a code block's text ends with its last line's break
    code = reply.locator("pre code").first
    assert code.evaluate("el => el.textContent") == exact
    reply.locator("pre .code-copy-button").first.click(force=True)
    # The wait is the check: the clipboard held exactly the code. (A second read after it
    # once got "" on a busy CI machine: Chromium reads the clipboard only while the page
    # has focus, which a headless page can lose for a moment.)
    page.wait_for_function(f"async () => (await navigator.clipboard.readText()) === {exact!r}")
    # Inline code streamed in 3-character chunks: its text is exact; the tricks after it
    # (backticks the browser pairs otherwise) form no element.
    inline = reply.locator(":not(pre) > code").evaluate_all("els => els.map(e => e.textContent)")
    assert inline[: len(INLINE)] == INLINE
    assert reply.locator("div[id^=formed], img, iframe, script, style").count() == 0
    assert observe(page, chat) == INERT


def test_a_fence_left_open_before_a_tool_card_does_not_carry_over(
    page: Page, app: AppServer
) -> None:
    chat = open_chat(page, app)
    chat.send("fence tool")
    chat.expect_latest_reply("END-FENCE")
    chat.expect_idle()
    reply = chat.loc_latest_reply
    expect(chat.loc_tool_cards).to_have_count(1)
    # Before the card, the open fence is code (the text streamed in 3-character chunks).
    assert reply.locator("pre code").first.evaluate("el => el.textContent") == "open = 1\n"
    # After the card, a new markdown document: the <img> is not code, and forms nothing.
    assert reply.locator("img").count() == 0
    expect(reply).to_contain_text("<img src=x onerror=")
    # The spans after a link, the last closing with the message, are byte-exact (the
    # card's own title names the tool in code: not model text).
    inline = reply.locator(":not(pre) > code").evaluate_all(
        "els => els.filter(e => !e.closest('.shiny-chat-tool-group')).map(e => e.textContent)"
    )
    assert inline == INLINE
    assert observe(page, chat) == INERT


def test_tool_output_renders_as_inert_text(
    page: Page, app: AppServer, listeners: tuple[ImageListener, ImageListener]
) -> None:
    chat = open_chat(page, app)
    chat.send(f"xss tool {listeners[0].port} {listeners[1].port}")
    chat.expect_latest_reply("END-TOOL")
    detail = chat.expand_tool_card(chat.loc_tool_cards.last)
    # Shown as text: the markup is visible as characters, not turned into elements.
    expect(detail).to_contain_text("<script>")
    expect(detail).to_contain_text("onerror=")
    expect(detail).to_contain_text("END-OF-PAYLOAD")
    expect(detail.locator("img, script, iframe, svg[onload]")).to_have_count(0)
    assert observe(page, chat, *listeners) == INERT


def test_no_other_remote_resource_loads_from_model_text(
    page: Page, app: AppServer, listeners: tuple[ImageListener, ImageListener]
) -> None:
    # CSS backgrounds, stylesheets, frames, objects, media posters, SVG images, srcset:
    # each would let untrusted text make the browser call any URL, like an <img>.
    chat = open_chat(page, app)
    chat.send(f"xss resources {listeners[0].port} {listeners[1].port}")
    chat.expect_latest_reply("END-OF-PAYLOAD")
    chat.expect_latest_reply("Resources START")
    page.wait_for_timeout(500)
    paths = fetched(*listeners)
    assert paths == [], f"untrusted text made the browser fetch {paths}"


def test_an_allowed_origin_loads_and_no_other(
    page: Page, allowing_app: AppServer, listeners: tuple[ImageListener, ImageListener]
) -> None:
    allowed, other = listeners
    chat = open_chat(page, allowing_app)
    chat.send(f"xss text {allowed.port} {other.port}")
    chat.expect_latest_reply("END-OF-PAYLOAD")
    deadline = time.monotonic() + 10
    while "/md.png" not in allowed.requests and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "/md.png" in allowed.requests
    allowed.clear()
    assert observe(page, chat, other) == INERT
