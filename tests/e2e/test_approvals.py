"""Approvals in the browser: approve, deny with a message, edit arguments, always allow,
isolation between sessions, and closing the tab while an approval is pending."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from deputy_shiny.shiny.playwright import AgentChat, ApprovalModal
from tests.e2e.conftest import AppServer, open_chat

E2E_APPS = ("approvals.py",)

ANSWER = "(answer) => Shiny.setInputValue('deputy_modal_answer', answer, {priority: 'event'})"


@pytest.fixture(scope="module")
def app(serve_app: Callable[..., AppServer]) -> AppServer:
    return serve_app("approvals.py")


def workspace_of(chat: AgentChat, app: AppServer) -> Path:
    """The session's workspace, as the model reports it after a tool result."""
    chat.expect_latest_reply("Workspace:")
    chat.expect_idle()  # the path may still be streaming
    match = re.search(r"Workspace: (\S+)", chat.latest_reply_text())
    assert match, chat.latest_reply_text()
    workspace = Path(match[1]).resolve()
    assert workspace.parent == app.workspace_root.resolve()
    return workspace


def written(app: AppServer, name: str) -> list[Path]:
    return list(app.workspace_root.glob(f"*/{name}"))


def test_approve_writes_the_file_in_the_sessions_workspace(page: Page, app: AppServer) -> None:
    chat = open_chat(page, app)
    chat.send("write approved.txt hello-approve")
    modal = ApprovalModal(page)
    modal.expect_open("write_file")
    expect(modal.loc_description).to_contain_text("Write text to a file")
    expect(modal.loc_badges.filter(has_text="destructive")).to_have_count(1)
    expect(modal.loc_badges.filter(has_text="read-only")).to_have_count(0)
    expect(modal.loc_reason).not_to_be_empty()
    expect(modal.argument("path")).to_have_value("approved.txt")
    expect(modal.argument("content")).to_have_value("hello-approve")
    assert not written(app, "approved.txt")  # nothing runs before the decision
    modal.approve()
    modal.expect_closed()
    workspace = workspace_of(chat, app)
    assert (workspace / "approved.txt").read_text() == "hello-approve"
    chat.expect_latest_reply("Tool said: Wrote")
    # When the session ends its workspace goes too (keep_workspaces is off by default).
    page.close()
    deadline = time.monotonic() + 10
    while workspace.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not workspace.exists()


def test_deny_with_a_message_tells_the_model_and_writes_nothing(page: Page, app: AppServer) -> None:
    chat = open_chat(page, app)
    chat.send("write denied.txt nope")
    modal = ApprovalModal(page)
    modal.expect_open("write_file")
    modal.deny("not today, use drafts instead")
    modal.expect_closed()
    # The model echoes the tool message it got: the user's message reached it.
    chat.expect_latest_reply("not today, use drafts instead")
    assert not written(app, "denied.txt")
    card = chat.loc_tool_cards.last
    expect(chat.expand_tool_card(card)).to_contain_text("not today, use drafts instead")
    expect(chat.tool_card_title(card)).to_contain_text("Denied: ")


def test_edited_arguments_are_used(page: Page, app: AppServer) -> None:
    chat = open_chat(page, app)
    chat.send("write original.txt edited-content")
    modal = ApprovalModal(page)
    modal.expect_open("write_file")
    modal.set_argument("path", "edited.txt")
    modal.approve()
    modal.expect_closed()
    workspace = workspace_of(chat, app)
    assert (workspace / "edited.txt").read_text() == "edited-content"
    assert not (workspace / "original.txt").exists()


def test_a_list_argument_is_edited_as_json_and_checked_before_it_runs(
    page: Page, app: AppServer
) -> None:
    # deputy's approval review shows a non-scalar argument read-only; here it is JSON
    # text, parsed and checked against the tool's schema before the call runs.
    chat = open_chat(page, app)
    modal = ApprovalModal(page)
    cases = [
        ('["final", "ok"]', "Tool said: Tagged: final, ok"),
        ('["final",', "is not valid JSON (Expecting value at line 1, column 10)"),
        ('{"not": "a list"}', "The edited input was refused"),
    ]
    for edit, said in cases:
        chat.send("tags")
        modal.expect_open("tag")
        field = modal.argument("names")
        expect(field).to_have_value('[\n  "draft",\n  "review"\n]')
        modal.set_argument("names", edit)
        modal.approve()
        modal.expect_closed()
        chat.expect_latest_reply(said)
        chat.expect_idle()
    card = chat.loc_tool_cards.last
    expect(chat.tool_card_title(card)).to_contain_text("Denied: ")


def test_always_allow_skips_the_next_approval(page: Page, app: AppServer) -> None:
    chat = open_chat(page, app)
    chat.send("write always-1.txt one")
    modal = ApprovalModal(page)
    modal.expect_open("write_file")
    modal.always_allow()
    modal.expect_closed()
    workspace = workspace_of(chat, app)
    chat.send("write always-2.txt two")
    chat.expect_latest_reply(re.compile(r"Tool said: .*always-2\.txt"))
    expect(modal.loc).to_have_count(0)
    assert (workspace / "always-1.txt").read_text() == "one"
    assert (workspace / "always-2.txt").read_text() == "two"
    assert not [e for e in app.events() if e.startswith("approval-wait") and "always-2" in e]


def test_an_approval_belongs_to_its_own_session(
    page: Page, new_page: Callable[[], Page], app: AppServer
) -> None:
    chat_a = open_chat(page, app)
    page_b = new_page()
    open_chat(page_b, app)
    modal_a, modal_b = ApprovalModal(page), ApprovalModal(page_b)

    chat_a.send("write isolated.txt secret")
    modal_a.expect_open("write_file")
    request_id = modal_a.request_id()
    # Session B neither sees A's approval nor can answer it with A's request id.
    page_b.evaluate(ANSWER, {"request_id": request_id, "action": "approve"})
    page_b.evaluate(ANSWER, {"request_id": request_id, "action": "always"})
    time.sleep(1.0)
    expect(modal_b.loc).to_have_count(0)
    expect(modal_a.loc).to_be_visible()
    assert modal_a.request_id() == request_id
    assert not written(app, "isolated.txt")

    # Not even A's own page script can answer it: an answer needs the prompt's key,
    # which only the kit's handler of a real click sends.
    page.evaluate(ANSWER, {"request_id": request_id, "action": "approve"})
    time.sleep(1.0)
    expect(modal_a.loc).to_be_visible()
    assert not written(app, "isolated.txt")
    # Control: A's user answers it.
    modal_a.deny("answered by A")
    modal_a.expect_closed()
    chat_a.expect_latest_reply("answered by A")
    assert not written(app, "isolated.txt")


def test_closing_the_tab_during_an_approval_ends_the_run(page: Page, app: AppServer) -> None:
    chat = open_chat(page, app)
    chat.send("write closing.txt bye")
    ApprovalModal(page).expect_open("write_file")
    session = app.wait_for_event(r"approval-wait (\S+) closing\.txt")[1]
    page.close()
    # The pending approval wait ends (nothing is left waiting) and the run stops.
    app.wait_for_event(rf"approval-ended {re.escape(session)} closing\.txt \S+", timeout=10)
    app.wait_for_event(rf"run-stop {re.escape(session)} \S+", timeout=10)
    assert not written(app, "closing.txt")


def test_content_approved_untouched_is_written_byte_for_byte(page: Page, app: AppServer) -> None:
    # A textarea drops a leading newline and shows CRLF as LF; an input strips CR.
    # Approving without touching them must write exactly what the model asked for.
    chat = open_chat(page, app)
    chat.send("rawwrite raw")
    modal = ApprovalModal(page)
    modal.expect_open("write_file")
    expect(modal.loc_waiting).to_have_text("1 of 2 waiting")
    first = modal.request_id()
    modal.approve()
    modal.expect_open("write_file")
    expect(modal.loc).not_to_have_attribute("data-request-id", first)
    expect(modal.loc_waiting).to_have_count(0)  # the last one: nothing behind it
    modal.approve()
    modal.expect_closed()
    chat.expect_latest_reply("Tool said:")
    (long,) = written(app, "raw-1.txt")
    (short,) = written(app, "raw-2.txt")
    assert long.read_bytes() == b"\nfirst\r\nsecond\r\n"
    assert short.read_bytes() == b"a\rb"


def test_one_stop_click_ends_a_flood_of_approvals(page: Page, app: AppServer) -> None:
    chat = open_chat(page, app)
    chat.send("flood 30")
    modal = ApprovalModal(page)
    modal.expect_open("write_file")
    expect(modal.loc_waiting).to_have_text("1 of 30 waiting")
    session = app.wait_for_event(r"approval-wait (\S+) flood-0\.txt")[1]
    modal.stop_run()
    modal.expect_closed()
    app.wait_for_event(rf"run-stop {re.escape(session)} interrupted", timeout=10)
    chat.expect_idle()
    expect(modal.loc).to_have_count(0)
    assert not written(app, "flood-*.txt")
    waits = [e for e in app.events() if e.startswith("approval-wait") and session in e]
    assert len(waits) == 1  # one click, no second modal
    # The session is still usable afterwards.
    chat.send("hello again")
    chat.expect_latest_reply("You said: hello again")
