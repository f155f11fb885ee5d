"""The newest reply and the input stay on screen in every layout, on a laptop and a phone.

After six replies taller than the screen, the end of the newest one and the chat's input
are inside the viewport, and the page did not scroll to show them (the chat scrolls its
own messages): in the README's Core snippet, the common Core layouts (``layouts.py``:
one server, a layout per query), a default Express page with a sidebar, the examples and
the reference app, at 1280x800 and 390x844. Also the spacing a person would notice:
check boxes and radio buttons apart from their labels, the download row's label apart
from its buttons, and no module docstring shown as text on the Express example's page.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from playwright.sync_api import Page, ViewportSize, expect

from deputy_shiny.shiny.playwright import AgentChat, QuestionModal
from tests.e2e.conftest import ROOT, AppServer

EXAMPLES = ROOT / "examples"
E2E_APPS = (
    "layouts.py",
    "express_sidebar.py",
    str(EXAMPLES / "express_app.py"),
    str(EXAMPLES / "dashboard.py"),
    str(EXAMPLES / "custom_write_tool.py"),
    str(ROOT / "app.py"),
)
VIEWPORTS: tuple[ViewportSize, ...] = (
    {"width": 1280, "height": 800},
    {"width": 390, "height": 844},
)
# A message long enough that six turns overflow the screen even with a one-line reply.
LONG_QUESTION = (
    "Question {n}: what do the figures say about each region and each month, how do they "
    "compare with last quarter, which rows should I look at first, and what would you put "
    "in a short summary for the weekly report to the whole sales team?"
)
# The demo model's menu ends with this ("help" brings it back) for an agent with the
# research team (the reference app); the menu offers only the steps whose tools the
# agent has, so the Express example's (list, write, ask) ends with ask_user's line.
MENU_END = "shows them at work"
ASK_MENU_END = "you answer in a form"


@dataclass(frozen=True)
class Layout:
    """An app (and the page's query) with its chat, what to send, how a reply ends."""

    app: str
    module_id: str = "chat"
    query: str = ""
    message: str = "tell me more"
    reply_end: str = "End of reply {n}."
    only_chat: bool = False  # nothing else on the page: it must not grow past the screen


LAYOUTS = {
    "readme-core-page_fillable": Layout("layouts.py", query="?layout=fillable", only_chat=True),
    "core-page_sidebar": Layout("layouts.py", query="?layout=sidebar"),
    "core-card": Layout("layouts.py", query="?layout=card", only_chat=True),
    "core-columns": Layout("layouts.py", query="?layout=columns"),
    "express-default-sidebar": Layout("express_sidebar.py"),
    "example-express_app": Layout(
        str(EXAMPLES / "express_app.py"), message="help", reply_end=ASK_MENU_END
    ),
    "example-dashboard": Layout(
        str(EXAMPLES / "dashboard.py"), "analyst", message=LONG_QUESTION, reply_end="total"
    ),
    "example-custom_write_tool": Layout(
        str(EXAMPLES / "custom_write_tool.py"),
        "notes",
        message=LONG_QUESTION,
        reply_end="after you approve",
    ),
    "reference-app": Layout(str(ROOT / "app.py"), message="help", reply_end=MENU_END),
}

# Where the newest reply's end, the input and the page are, and what is scrolled.
_MEASURE = """(id) => {
  const chat = document.getElementById(id + "-chat");
  const replies = chat.querySelectorAll(".shiny-chat-messages-content > .shiny-chat-message");
  const reply = replies[replies.length - 1].getBoundingClientRect();
  const input = chat.querySelector(".shiny-chat-input").getBoundingClientRect();
  const list = chat.querySelector(".shiny-chat-messages").getBoundingClientRect();
  const scrolled = [...document.querySelectorAll("*")]
    .filter((el) => el.scrollTop > 0 && !chat.contains(el))
    .map((el) => el.tagName.toLowerCase() + "." + [...el.classList].join("."));
  return {
    reply_bottom: reply.bottom, list_top: list.top, list_bottom: list.bottom,
    input_top: input.top, input_bottom: input.bottom, input_right: input.right,
    width: window.innerWidth, height: window.innerHeight, scroll_y: window.scrollY,
    page_height: document.documentElement.scrollHeight, scrolled: scrolled,
  };
}"""


def _problems(m: dict[str, Any], only_chat: bool) -> list[str]:
    """What a person would see wrong in the measurement ``m`` (empty: all in view)."""
    problems = []
    if m["scroll_y"] != 0 or m["scrolled"]:
        problems.append(f"the page scrolled: {m['scroll_y']} px, boxes {m['scrolled']}")
    if not (m["input_top"] >= 0 and m["input_bottom"] <= m["height"]):
        problems.append("the input is off screen")
    if m["input_right"] > m["width"] + 1:
        problems.append("the input is wider than the screen")
    if not (m["list_top"] < m["reply_bottom"] <= min(m["input_top"], m["list_bottom"]) + 1):
        problems.append("the newest reply's end is not in view above the input")
    if only_chat and m["page_height"] > m["height"]:
        problems.append("the page grew taller than the screen")
    return problems


def _six_replies_in_view(page: Page, layout: Layout, url: str) -> None:
    chat = AgentChat(page, layout.module_id)
    page.goto(url + layout.query)
    chat.expect_ready()
    for n in range(1, 7):
        chat.send(layout.message.format(n=n))
        # The last message is this turn's reply once it arrived (the user's until then).
        # A fresh server's first reply may wait for litellm's import (seconds on 2 cores).
        expect(chat.chat.loc_latest_message).to_contain_text(
            layout.reply_end.format(n=n), timeout=90_000 if n == 1 else 15_000
        )
        chat.expect_idle()
    # shinychat follows the newest message with a short scroll animation: let it settle.
    deadline = 50
    measured = page.evaluate(_MEASURE, layout.module_id)
    while _problems(measured, layout.only_chat) and deadline:
        page.wait_for_timeout(100)
        deadline -= 1
        measured = page.evaluate(_MEASURE, layout.module_id)
    problems = _problems(measured, layout.only_chat)
    assert not problems, f"{problems} at {page.viewport_size}: {measured}"


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_after_six_long_replies_the_newest_and_the_input_are_on_screen(
    name: str, new_page: Callable[[], Page], serve_app: Callable[..., AppServer]
) -> None:
    layout = LAYOUTS[name]
    server = serve_app(layout.app)
    for viewport in VIEWPORTS:
        page = new_page()  # a fresh session (and, for the reference app, conversation)
        page.set_viewport_size(viewport)
        _six_replies_in_view(page, layout, server.url)


# Each check box's and radio button's gap to its label's first text, in px.
_CHECK_GAPS = """() => [...document.querySelectorAll("input[type=radio], input[type=checkbox]")]
  .filter((box) => box.getClientRects().length > 0)
  .map((box) => {
    const label = box.closest("label") || document.querySelector(`label[for="${box.id}"]`);
    const walker = document.createTreeWalker(label, NodeFilter.SHOW_TEXT,
      { acceptNode: (node) => node.textContent.trim() ? 1 : 3 });
    const range = document.createRange();
    range.selectNodeContents(walker.nextNode());
    return [label.innerText.trim().split("\\n")[0], range.getBoundingClientRect().left -
      box.getBoundingClientRect().right];
  })"""


def _check_gaps(page: Page) -> dict[str, float]:
    return dict(page.evaluate(_CHECK_GAPS))


def test_check_boxes_and_radio_buttons_stand_apart_from_their_labels(
    new_page: Callable[[], Page], serve_app: Callable[..., AppServer]
) -> None:
    page = new_page()
    page.goto(serve_app("layouts.py").url + "?layout=sidebar")  # Shiny's own inputs
    AgentChat(page, "chat").expect_ready()
    gaps = _check_gaps(page)
    assert set(gaps) == {"Brief", "Detailed", "Sales", "Costs", "Show notes"}
    assert min(gaps.values()) >= 4, gaps

    page = new_page()
    page.goto(serve_app(str(ROOT / "app.py")).url)  # the kit's question dialog
    chat = AgentChat(page, "chat")
    chat.expect_ready()
    chat.send("ask me something")
    QuestionModal(page).expect_open(timeout=60_000)  # a fresh server
    gaps = _check_gaps(page)
    assert {"Never", "A little", "Approvals", "Usage limits"} <= set(gaps)
    assert min(gaps.values()) >= 4, gaps


def test_the_download_row_keeps_its_label_apart_from_its_buttons(
    new_page: Callable[[], Page], serve_app: Callable[..., AppServer]
) -> None:
    for viewport in VIEWPORTS:
        page = new_page()
        page.set_viewport_size(viewport)
        page.goto(serve_app(str(ROOT / "app.py")).url)
        AgentChat(page, "chat").expect_ready()
        if viewport["width"] < 576:  # on a phone the sidebar starts closed
            page.get_by_role("button", name="Toggle sidebar").click()
        expect(page.locator("#conversation-checkpoints")).not_to_be_empty()  # rendered above
        # The label and the buttons, measured at once (outputs above may still move them).
        boxes = page.locator(".deputy-download-conversation").evaluate(
            """(row) => [...row.children].map((el) => {
                const box = el.getBoundingClientRect();
                return [el.textContent.trim(), box.left, box.top, box.right, box.bottom];
            })"""
        )
        assert [box[0] for box in boxes] == ["Download conversation", "Markdown", "JSON"]
        for i, (_, left, top, right, bottom) in enumerate(boxes):
            for _, left2, top2, right2, bottom2 in boxes[i + 1 :]:
                apart = max(left2 - right, left - right2, top2 - bottom, top - bottom2)
                assert apart >= 4, (viewport, boxes)


def test_the_express_example_shows_no_module_docstring(
    page: Page, serve_app: Callable[..., AppServer]
) -> None:
    page.goto(serve_app(str(EXAMPLES / "express_app.py")).url)
    AgentChat(page, "chat").expect_ready()
    expect(page.locator("body")).not_to_contain_text("Run it with")
