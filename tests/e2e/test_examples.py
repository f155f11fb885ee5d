"""The apps in ``examples/`` run as they are, offline, in the browser.

(``examples/test_express_app.py`` tests the Express example itself, as the docs' "Testing your
app in a browser" page shows a user testing their own app.)

Each example falls back to an offline model when ``DEPUTY_MODEL`` is not set (the test
servers never set it), so what a reader copies is what runs here.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from deputy_shiny.shiny.playwright import ApprovalModal
from tests.e2e.conftest import ROOT, AppServer, open_chat, open_chats

EXAMPLES = ROOT / "examples"
# The examples keep the kit's default workspace root (the system temp dir): the notes
# example's server gets a temp dir of its own, so the test can find what it saved.
NOTES_TMP = tempfile.mkdtemp(prefix="example-notes-")
E2E_APPS = (
    str(EXAMPLES / "dashboard.py"),
    (str(EXAMPLES / "custom_write_tool.py"), {"TMPDIR": NOTES_TMP}),
)


@pytest.fixture(scope="module")
def servers(serve_app: Callable[..., AppServer]) -> Callable[[str], AppServer]:
    def server(name: str) -> AppServer:
        if name == "custom_write_tool.py":
            return serve_app(str(EXAMPLES / name), TMPDIR=NOTES_TMP)
        return serve_app(str(EXAMPLES / name))

    return server


def test_the_dashboard_analyst_reads_and_the_writer_changes_the_filters(
    page: Page, servers: Callable[[str], AppServer]
) -> None:
    analyst, writer = open_chats(page, servers("dashboard.py"), "analyst", "writer")
    analyst.send("what does it show?")
    analyst.expect_latest_reply(
        "region All, months Jan+Feb+Mar, minimum sales 0: 12 rows, total 1520."
    )
    analyst.expect_idle()
    writer.send("show West")
    modal = ApprovalModal(page)
    modal.expect_open("set_filters")
    expect(modal.argument("region")).to_have_value("West")
    modal.approve()
    modal.expect_closed()
    writer.expect_latest_reply("Done: filters set (region West).")
    expect(page.locator("#region")).to_have_value("West")
    expect(page.locator("#table")).to_contain_text("Total: 380")
    analyst.send("and now?")
    analyst.expect_latest_reply(
        "region West, months Jan+Feb+Mar, minimum sales 0: 3 rows, total 380."
    )
    analyst.expect_idle()
    # A checkbox group and radio buttons, set by a sync tool with no session= (it runs in
    # the app's session, not the writer module's).
    writer.send("months Jan Feb, sort by sales")
    modal.expect_open("set_filters")
    modal.approve()
    modal.expect_closed()
    writer.expect_latest_reply("Done: filters set (months Jan+Feb, order sales).")
    expect(page.locator("#months input[value=Mar]")).not_to_be_checked()
    expect(page.locator("#months input[value=Jan]")).to_be_checked()
    expect(page.locator("#order input[value=sales]")).to_be_checked()
    cells = page.locator("#table td:nth-child(3)")
    expect(cells).to_have_text(["210", "60"])  # the app's table reacted: Feb first
    expect(page.locator("#table")).to_contain_text("Total: 270")
    analyst.send("and now?")
    analyst.expect_latest_reply("region West, months Jan+Feb, minimum sales 0: 2 rows, total 270.")


def test_the_custom_write_tool_asks_then_saves_the_note(
    page: Page, servers: Callable[[str], AppServer]
) -> None:
    chat = open_chat(page, servers("custom_write_tool.py"), "notes")
    chat.send("note: buy oat milk")
    modal = ApprovalModal(page)
    modal.expect_open("save_note")
    assert not list(Path(NOTES_TMP).rglob("*.md"))  # nothing is written before approval
    modal.approve()
    modal.expect_closed()
    chat.expect_latest_reply("Done: Saved buy-oat-milk.md (12 characters).")
    saved = list(Path(NOTES_TMP).rglob("buy-oat-milk.md"))
    assert [p.read_text() for p in saved] == ["# buy oat milk\n\nbuy oat milk\n"]
