"""Test your own app in a browser: shiny starts it, Debian's Chromium drives it.

``deputy_shiny.shiny.playwright`` has controllers for the kit's chat and its dialogs
(``AgentChat``, ``ApprovalModal``, ``QuestionModal``), so a test reads like a user.
Playwright drives the system's Chromium (``executable_path``): no browser download.
"""

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, sync_playwright
from shiny.run import run_shiny_app

from deputy_shiny.shiny.playwright import AgentChat, ApprovalModal

APP = Path(__file__).parent / "express_app.py"


@pytest.fixture(scope="module")
def app_url() -> Iterator[str]:
    app = run_shiny_app(APP, timeout_secs=90)  # a free port; waits until it serves
    yield app.url
    app.close()


@pytest.fixture(scope="module")
def page() -> Iterator[Page]:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path="/usr/bin/chromium", args=["--no-sandbox"]
        )
        yield browser.new_page()
        browser.close()


def test_a_write_waits_for_approval(page: Page, app_url: str) -> None:
    page.goto(app_url)
    chat = AgentChat(page, "chat")
    chat.expect_ready()
    chat.send("write a note")  # the offline demo model then calls write_file
    modal = ApprovalModal(page)
    modal.expect_open("write_file")
    modal.approve()
    chat.expect_latest_reply("Wrote")
