"""deputy's approval_review_ui() / approval_review_server() in the browser: a durable
approval a run left waiting is reviewed in the kit's modal, its edit is used, and the
run goes on; a page script cannot decide it."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from deputy_shiny.shiny.playwright import ApprovalModal
from tests.e2e.conftest import AppServer

E2E_APPS = ("approval_review.py",)


@pytest.fixture(scope="module")
def app(serve_app: Callable[..., AppServer]) -> AppServer:
    return serve_app("approval_review.py")


def _workspace(page: Page) -> Path:
    expect(page.locator("#workspace")).to_contain_text("Workspace: ")
    match = re.search(r"Workspace: (\S+)", page.locator("#workspace").inner_text())
    assert match
    return Path(match[1])


def test_a_waiting_approval_is_reviewed_edited_and_resumed(page: Page, app: AppServer) -> None:
    page.goto(app.url)
    review = page.locator(".deputy-approval-review")
    expect(review).to_contain_text("No tool call is waiting for review.", timeout=60_000)
    workspace = _workspace(page)
    page.get_by_role("button", name="Run").click()
    modal = ApprovalModal(page)
    modal.expect_open("write_file", timeout=30_000)
    expect(review).to_contain_text("Waiting for your review: write_file")
    assert not (workspace / "review.txt").exists()  # nothing runs before the decision
    # A page script cannot answer it: only a real click with the prompt's key counts.
    page.evaluate(
        "Shiny.setInputValue('deputy_modal_answer', {action: 'approve', values: {}},"
        " {priority: 'event'})"
    )
    page.wait_for_timeout(500)
    expect(modal.loc).to_be_visible()
    modal.set_argument("content", "final")
    modal.approve()
    modal.expect_closed()
    expect(page.locator("#outcome")).to_contain_text("Outcome: approve Tool said: Wrote")
    assert (workspace / "review.txt").read_text() == "final"
    expect(review).to_contain_text("No tool call is waiting for review.")
