"""Nothing a model writes becomes markup: script in every field a model, a tool, a hook,
a subagent or an MCP server controls shows as text, live and when a saved conversation
is rebuilt after a reload; and a decision counts only from a real user gesture.

The app (``apps/xss.py``) puts :data:`PAYLOAD` everywhere. Had any of it become elements,
``window.__xss`` would be set and a dialog would open; the checks also look for the
elements and attributes it would have made.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from playwright.sync_api import Dialog, Locator, Page, expect

from deputy_shiny.shiny.playwright import AgentChat, ApprovalModal, QuestionModal, SubagentPanel
from tests.e2e.apps.xss import PAYLOAD
from tests.e2e.conftest import AppServer, open_chat

E2E_APPS = ("xss.py",)

# What markup from the payload would leave behind, anywhere in the page: an event
# handler attribute, a javascript: URL, a script or an element the payload names.
ACTIVE_MARKUP = """() => {
  const found = [];
  for (const el of document.body.querySelectorAll('*')) {
    for (const name of el.getAttributeNames()) {
      const value = (el.getAttribute(name) || '').trim().toLowerCase();
      if (name.startsWith('on')) found.push(`${el.tagName} ${name}`);
      if (['href', 'src', 'action', 'formaction', 'xlink:href'].includes(name)
          && value.startsWith('javascript:')) found.push(`${el.tagName} ${name}=${value}`);
    }
    if (el.tagName === 'SCRIPT' && el.textContent.includes('__xss')) found.push('SCRIPT');
    if (el.tagName === 'IMG' && el.getAttribute('src') === 'x') found.push('IMG src=x');
  }
  return found;
}"""

# A click from page script, three ways: element.click(), a synthetic MouseEvent, and the
# Shiny input the buttons use, with the request id read from the page.
SYNTHETIC = """(action) => {
  const root = document.querySelector('#shiny-modal [data-request-id]');
  const button = root.querySelector(`[data-deputy-action="${action}"]`);
  button.click();
  button.dispatchEvent(new MouseEvent('click', {bubbles: true, cancelable: true}));
  const answer = {request_id: root.dataset.requestId, action: action, values: {},
                  message: '', answers: [['plain']]};
  Shiny.setInputValue('deputy_modal_answer', answer, {priority: 'event'});
}"""

PAYLOAD_TEXT = PAYLOAD  # as text: every character shown, none turned into elements


@dataclass
class Watch:
    """A page and the dialogs it opened."""

    page: Page
    dialogs: list[str] = field(default_factory=list)

    def observe(self) -> dict[str, object]:
        """What the payload managed to do: set the flag, open a dialog, leave markup."""
        self.page.wait_for_timeout(300)  # time for any handler to fire
        return {
            "window.__xss": self.page.evaluate("window.__xss ?? null"),
            "dialogs": list(self.dialogs),
            "active markup": self.page.evaluate(ACTIVE_MARKUP),
        }


INERT: dict[str, object] = {"window.__xss": None, "dialogs": [], "active markup": []}


@pytest.fixture(scope="module")
def app(serve_app: Callable[..., AppServer]) -> AppServer:
    return serve_app("xss.py")


@pytest.fixture
def watch(page: Page) -> Watch:
    watched = Watch(page)

    def on_dialog(dialog: Dialog) -> None:
        watched.dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", on_dialog)
    return watched


def ask(chat: AgentChat, text: str, reply: str | re.Pattern[str]) -> None:
    chat.send(text)
    chat.expect_latest_reply(reply)
    chat.expect_idle()


def title(chat: AgentChat, pattern: str) -> Locator:
    """The title of the one tool card whose title matches ``pattern``."""
    titles = chat.loc.locator(".shiny-chat-tool-group__title").filter(has_text=re.compile(pattern))
    expect(titles).to_have_count(1)
    return titles


def check_transcript(chat: AgentChat) -> None:
    """Each field shows the payload as text."""
    # The path rule's denial quotes the path (repr: quotes kept as they are).
    expect(title(chat, "^Denied: Path")).to_contain_text(f"Path '../{PAYLOAD_TEXT}' uses '..'")
    # A hook's reason quoting the input.
    expect(title(chat, "^Denied: echo refused")).to_have_text(
        f"Denied: echo refused {PAYLOAD_TEXT}"
    )
    # The tool name the model made up, on its card.
    named = chat.loc.locator(".shiny-chat-tool-group__toolname").filter(has_text="<img")
    expect(named).to_have_text(PAYLOAD_TEXT)
    # A tool's error and a tool's arguments and output, inside their cards.
    failed = chat.expand_tool_card(chat.tool_card("explode").first)
    expect(failed).to_contain_text(f"ValueError: {PAYLOAD_TEXT}")
    used_echo = chat.page.locator(".shiny-chat-tool-group__toolname").filter(
        has_text=re.compile("^echo$")
    )
    echoed = chat.expand_tool_card(chat.loc_tool_cards.filter(has=used_echo).first)
    expect(echoed).to_contain_text("args " + PAYLOAD_TEXT)
    # Model text: the markup is there as characters (broken by a zero-width space).
    text = chat.loc_replies.filter(has_text="Text START")
    expect(text).to_contain_text(re.compile(r"<\u200bimg src=x onerror="))
    expect(text).to_contain_text("md-link")


def test_denials_errors_and_names_quoting_model_input_show_as_text_live_and_after_reload(
    watch: Watch, app: AppServer
) -> None:
    page = watch.page
    chat = open_chat(page, app)
    ask(chat, "path", "END-TOOL")
    # The reported attack: the denial's title held the path as HTML.
    assert watch.observe() == INERT
    ask(chat, "hook", "END-TOOL")
    ask(chat, "fail", "END-TOOL")
    ask(chat, "name", "END-TOOL")
    ask(chat, "args", "END-TOOL")
    ask(chat, "text", "END-TEXT")
    ask(chat, "crash", "The model request failed")
    expect(chat.loc_latest_reply).to_contain_text("onerror=")
    check_transcript(chat)
    assert watch.observe() == INERT

    # The saved conversation, rebuilt from its turns, renders just as inert.
    page.reload()
    chat.expect_ready()
    expect(chat.loc_user_messages).to_have_count(7)
    check_transcript(chat)
    assert watch.observe() == INERT


def expect_undecided(page: Page, app: AppServer, modal: ApprovalModal, request_id: str) -> None:
    time.sleep(1.0)  # time for a decision to reach the server and close the modal
    expect(modal.loc).to_be_visible()
    assert modal.request_id() == request_id
    expect(modal.button("Approve")).to_be_enabled()
    assert not [e for e in app.events() if e.startswith("wrote ")]


def test_an_approval_shows_model_input_as_text_and_page_script_cannot_decide_it(
    watch: Watch, app: AppServer
) -> None:
    page = watch.page
    chat = open_chat(page, app)
    chat.send("write")
    modal = ApprovalModal(page)
    modal.expect_open("write_file")
    expect(modal.argument("content")).to_have_value(PAYLOAD)
    request_id = modal.request_id()
    assert watch.observe() == INERT

    for action in ("approve", "always", "stop"):
        page.evaluate(SYNTHETIC, action)
        expect_undecided(page, app, modal, request_id)

    # The approval is saved: after a reload it is back, and still undecided by script.
    page.reload()
    chat.expect_ready()
    modal.expect_open("write_file", timeout=30_000)
    restored = modal.request_id()
    page.evaluate(SYNTHETIC, "approve")
    expect_undecided(page, app, modal, restored)
    assert watch.observe() == INERT

    # A real click decides.
    modal.approve()
    modal.expect_closed()
    chat.expect_latest_reply("END-TOOL", timeout=20_000)
    app.wait_for_event(r'wrote \S+ "xss-note.txt"')
    assert watch.observe() == INERT


def test_a_question_shows_model_input_as_text_and_page_script_cannot_answer_it(
    watch: Watch, app: AppServer
) -> None:
    page = watch.page
    chat = open_chat(page, app)
    chat.send("ask")
    modal = QuestionModal(page)
    modal.expect_open()
    expect(modal.question(0).locator(".deputy-question-text")).to_have_text(PAYLOAD)
    expect(modal.question(0).locator("legend")).to_have_text("<b>h</b>")
    expect(modal.question(0)).to_contain_text(PAYLOAD[:40])
    request_id = modal.request_id()
    page.evaluate(SYNTHETIC, "submit")
    time.sleep(1.0)
    expect(modal.loc).to_be_visible()
    assert modal.request_id() == request_id
    assert watch.observe() == INERT
    modal.cancel()
    modal.expect_closed()
    chat.expect_latest_reply("END-TOOL")


def test_a_subagents_task_and_name_and_an_mcp_servers_error_show_as_text(
    watch: Watch, app: AppServer
) -> None:
    page = watch.page
    chat = open_chat(page, app)
    team = SubagentPanel(page, "team")
    ask(chat, "delegate", "END-TOOL")
    row = team.row("helper")
    team.expect_status(row, "completed")
    # The task, cut for the row (the whole of it in the row's tooltip and transcript).
    expect(row.locator(".deputy-subagent-task")).to_contain_text(PAYLOAD[:150])
    expect(row).to_have_attribute("title", PAYLOAD)
    team.expect_event(row, "Helper says <img")
    expect(team.open_transcript(row)).to_contain_text("Helper says " + PAYLOAD)
    # A delegation to an agent the model named with markup: the error names it as text.
    ask(chat, "delegate-name", "END-TOOL")
    detail = chat.expand_tool_card(chat.loc_tool_cards.last)
    expect(detail).to_contain_text(PAYLOAD)
    assert watch.observe() == INERT

    hostile = page.locator(".deputy-mcp-server[data-server=hostile]")
    hostile.get_by_role("button", name="Connect").click()
    expect(hostile.locator(".deputy-mcp-state")).to_have_text("failed", timeout=15_000)
    expect(hostile.locator(".deputy-mcp-error")).to_contain_text(PAYLOAD)
    chat.expect_latest_reply("MCP server hostile failed to connect")
    chat.expect_latest_reply(PAYLOAD)
    assert watch.observe() == INERT
