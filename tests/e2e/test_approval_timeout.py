"""An approval nobody answers is denied after ``approval_timeout`` seconds."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from deputy_shiny.shiny.playwright import ApprovalModal
from tests.e2e.conftest import AppServer, open_chat

E2E_APPS = ("approval_timeout.py",)


@pytest.fixture(scope="module")
def app(serve_app: Callable[..., AppServer]) -> AppServer:
    return serve_app("approval_timeout.py")


def test_an_unanswered_approval_times_out_as_a_denial(page: Page, app: AppServer) -> None:
    chat = open_chat(page, app)
    shown = page.locator("#workspace")
    expect(shown).to_contain_text(str(app.workspace_root))
    workspace = Path(shown.inner_text().strip())

    chat.send("write late.txt too-late")
    modal = ApprovalModal(page)
    modal.expect_open("write_file")
    opened = time.monotonic()
    modal.expect_closed(timeout=3_000)
    assert time.monotonic() - opened < 3.0
    chat.expect_latest_reply("Tool said:")
    expect(chat.tool_card_title(chat.loc_tool_cards.last)).to_contain_text("Denied:")
    assert not (workspace / "late.txt").exists()
    assert not list(app.workspace_root.glob("*/late.txt"))
