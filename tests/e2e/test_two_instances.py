"""Two kit instances in one host page: one modal at a time, both approvals land, the
host's own outputs keep working; and the permission-mode select narrows the agent."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from deputy_shiny.shiny.playwright import ApprovalModal
from tests.e2e.conftest import AppServer, open_chats

E2E_APPS = ("two_instances.py",)


@pytest.fixture(scope="module")
def app(serve_app: Callable[..., AppServer]) -> AppServer:
    return serve_app("two_instances.py")


def workspace(page: Page, app: AppServer, id: str) -> Path:
    shown = page.locator(f"#{id}_dir")
    expect(shown).to_contain_text(str(app.workspace_root))
    path = Path(shown.inner_text().strip())
    assert path.parent.resolve() == app.workspace_root.resolve()
    return path


def test_two_chats_queue_their_approvals_and_the_host_keeps_working(
    page: Page, app: AppServer
) -> None:
    left, right = open_chats(page, app, "left", "right")
    left_dir, right_dir = workspace(page, app, "left"), workspace(page, app, "right")
    assert left_dir != right_dir
    expect(page.get_by_text("Host app").first).to_be_visible()

    # Both are sent in one go, so both runs ask at once.
    left.chat.set_user_input("write left.txt from-left")
    right.chat.set_user_input("write right.txt from-right")
    page.evaluate(
        """() => ["left", "right"].forEach((id) =>
            document.querySelector(`#${id}-chat .shiny-chat-btn-send`).click())"""
    )
    modal = ApprovalModal(page)
    modal.expect_open("write_file")
    # Both calls wait (the second one queued), but only one modal shows at a time.
    expect(right.loc_stop).to_be_visible()
    expect(left.loc_stop).to_be_visible()
    time.sleep(0.5)
    expect(modal.loc).to_have_count(1)
    first = modal.request_id()
    first_path = modal.argument("path").input_value()
    assert first_path in ("left.txt", "right.txt")

    modal.approve()
    modal.expect_closed(request_id=first)
    modal.expect_open("write_file")
    second = modal.request_id()
    assert second != first
    second_path = modal.argument("path").input_value()
    assert {first_path, second_path} == {"left.txt", "right.txt"}
    expect(modal.loc).to_have_count(1)
    modal.approve()
    modal.expect_closed()

    left.expect_latest_reply("Tool said: Wrote")
    right.expect_latest_reply("Tool said: Wrote")
    assert (left_dir / "left.txt").read_text() == "from-left"
    assert (right_dir / "right.txt").read_text() == "from-right"
    assert not (left_dir / "right.txt").exists()
    assert not (right_dir / "left.txt").exists()

    # The host app's own input and output still work.
    page.locator("#note").fill("still alive")
    expect(page.locator("#echo")).to_have_text("Echo: still alive")


def test_an_open_approval_leaves_the_other_chat_usable_and_its_count_current(
    page: Page, app: AppServer
) -> None:
    left, right = open_chats(page, app, "left", "right")
    left_dir, right_dir = workspace(page, app, "left"), workspace(page, app, "right")
    left.send("write writer.txt from-writer")
    modal = ApprovalModal(page)
    modal.expect_open("write_file")
    writers = modal.request_id()
    expect(modal.loc_asker).to_have_text("Asked by left")  # the module id by default
    expect(modal.loc_waiting).to_have_count(0)

    # The analyst chat takes a real click, the keys and the send button (no backdrop
    # covers it, no focus trap pulls the keys into the modal), and it answers.
    right.chat.loc_input.click()
    page.keyboard.type("how are sales?")
    expect(right.chat.loc_input).to_be_focused()
    right.loc_send.click()
    right.expect_latest_reply("You said: how are sales?")
    expect(modal.loc).to_have_attribute("data-request-id", writers)

    # Its own approval queues behind the open one, and the open modal's count follows.
    right.chat.loc_input.click()
    page.keyboard.type("write analyst.txt from-analyst")
    right.loc_send.click()
    expect(modal.loc_waiting).to_have_text("1 of 2 waiting")
    expect(modal.loc).to_have_attribute("data-request-id", writers)
    modal.approve()
    modal.expect_closed(request_id=writers)
    modal.expect_open("write_file")
    expect(modal.loc_asker).to_have_text("Asked by Analyst")  # the app's label
    expect(modal.argument("path")).to_have_value("analyst.txt")
    expect(modal.loc_waiting).to_have_count(0)
    modal.approve()
    modal.expect_closed()
    left.expect_latest_reply("Tool said: Wrote")
    right.expect_latest_reply("Tool said: Wrote")
    assert (left_dir / "writer.txt").read_text() == "from-writer"
    assert (right_dir / "analyst.txt").read_text() == "from-analyst"


def test_permission_mode_select_narrows_to_read_only(page: Page, app: AppServer) -> None:
    left, _ = open_chats(page, app, "left", "right")
    left_dir = workspace(page, app, "left")
    select = page.locator("#mode-mode")
    expect(select).to_have_value("standard")
    options = select.locator("option")
    expect(options).to_have_text(["Standard", "Read-only"])
    hint = page.locator("#mode-hint")
    expect(hint).to_have_text("")

    select.select_option(label="Read-only")
    expect(select).to_have_value("readonly")
    expect(options).to_have_text(["Read-only"])
    # Standard is gone, and the page says why.
    expect(hint).to_have_text(
        "The mode only narrows during a session: Standard is no longer offered."
    )

    left.send("write blocked.txt nope")
    left.expect_latest_reply("Tool said:")
    expect(left.tool_card_title(left.loc_tool_cards.last)).to_contain_text("Denied:")
    expect(ApprovalModal(page).loc).to_have_count(0)
    assert not (left_dir / "blocked.txt").exists()
