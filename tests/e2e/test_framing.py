"""Clickjacking: a page of another origin frames the app and lures a real click onto
Approve. The framed app's websocket is its own origin's, so the server cannot tell; the
kit's script refuses to decide anything while framed by another origin, and says why. A
frame of the app's own origin (Posit Connect's dashboard frames content that way) still
decides."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from playwright.sync_api import Page, expect

from deputy_shiny.shiny.playwright import AgentChat, ApprovalModal
from tests.e2e.attacker import AttackerSite, attacker_site
from tests.e2e.conftest import AppServer

E2E_APPS = ("approvals.py",)


@pytest.fixture(scope="module")
def app(serve_app: Callable[..., AppServer]) -> AppServer:
    return serve_app("approvals.py")


@pytest.fixture(scope="module")
def elsewhere() -> Iterator[AttackerSite]:
    with attacker_site() as site:
        yield site


def in_frame(page: Page) -> tuple[AgentChat, ApprovalModal]:
    """The app in the page's iframe: its chat and approval modal, driven in the frame
    (a Frame has the locators the controllers use)."""
    handle = page.wait_for_selector("iframe")
    assert handle is not None
    frame = handle.content_frame()
    assert frame is not None
    chat = AgentChat(frame, "agent")  # type: ignore[arg-type]
    chat.expect_ready()
    return chat, ApprovalModal(frame)  # type: ignore[arg-type]


def test_a_page_of_another_origin_that_frames_the_app_decides_nothing(
    page: Page, app: AppServer, elsewhere: AttackerSite
) -> None:
    page.goto(elsewhere.frame_url(app.url))
    chat, modal = in_frame(page)
    chat.send("write lured.txt from-the-frame")
    modal.expect_open("write_file")
    modal.loc.get_by_role("button", name="Approve").click()  # a real, trusted click
    expect(modal.loc.locator(".deputy-framed")).to_contain_text("inside another site's page")
    expect(modal.loc).to_be_visible()  # still waiting: nothing was decided
    assert not list(app.workspace_root.glob("*/lured.txt"))


def test_a_frame_of_the_apps_own_origin_still_decides(page: Page, app: AppServer) -> None:
    page.goto(app.url)
    page.evaluate(
        "(src) => { document.body.innerHTML = '<iframe style=\"width:1100px;height:750px\">'"
        " + '</iframe>'; document.querySelector('iframe').src = src; }",
        app.url,
    )
    chat, modal = in_frame(page)
    chat.send("write framed.txt same-origin")
    modal.expect_open("write_file")
    modal.approve()
    modal.expect_closed()
    chat.expect_latest_reply("Tool said: Wrote")
    assert len(list(app.workspace_root.glob("*/framed.txt"))) == 1
