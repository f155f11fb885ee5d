"""The subagent panel in the browser: live events while a delegation runs, the Stop
button, and disclosure (another session, or a requester the policy refuses, sees none
of it; a forged click changes nothing)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from playwright.sync_api import Page, expect

from deputy_shiny.shiny.playwright import SubagentPanel
from tests.e2e.conftest import AppServer, open_chat

E2E_APPS = ("subagents.py",)


@pytest.fixture(scope="module")
def app(serve_app: Callable[..., AppServer]) -> AppServer:
    return serve_app("subagents.py")


def test_a_delegation_shows_live_then_completes(page: Page, app: AppServer) -> None:
    chat = open_chat(page, app)
    team, spy = SubagentPanel(page, "team"), SubagentPanel(page, "spy")
    team.expect_note("No delegations yet")
    spy.expect_note("may not see")
    chat.send("delegate 15")
    row = team.row("helper")
    team.expect_status(row, "running")
    team.expect_event(row, "calls slow_count")
    # The task's HTML shows as text.
    expect(row.locator(".deputy-subagent-task")).to_have_text("Count to 15 slowly <b>bold</b>")
    expect(row.locator(".deputy-subagent-task b")).to_have_count(0)
    team.expect_status(row, "completed", timeout=10_000)
    team.expect_event(row, "Counted to 15.")
    expect(row.locator(".deputy-subagent-usage")).to_contain_text("2 requests")
    chat.expect_latest_reply("Lead done: Counted to 15.")
    transcript = team.open_transcript(row)
    expect(transcript).to_contain_text("slow_count result")
    expect(transcript).to_contain_text("counted 15")
    spy.expect_note("may not see")
    expect(spy.loc_rows).to_have_count(0)


def test_stop_interrupts_a_running_delegation_and_the_lead_goes_on(
    page: Page, app: AppServer
) -> None:
    chat = open_chat(page, app)
    team = SubagentPanel(page, "team")
    chat.send("delegate 100")
    row = team.row("helper")
    team.expect_event(row, "calls slow_count")
    team.interrupt(row)
    team.expect_status(row, "stopped", timeout=5_000)
    chat.expect_latest_reply("Lead done: The subagent helper ended with stopped")
    chat.expect_idle()
    expect(row.locator(".deputy-subagent-btn-interrupt")).to_have_count(0)
    chat.send("hello")
    chat.expect_latest_reply("You said: hello")


def test_another_session_sees_none_and_cannot_stop_it(
    page: Page, new_page: Callable[[], Page], app: AppServer
) -> None:
    chat_a = open_chat(page, app)
    team_a = SubagentPanel(page, "team")
    chat_a.send("delegate 30")
    row_a = team_a.row("helper")
    team_a.expect_status(row_a, "running")
    delegation_id = team_a.delegation_id(row_a)

    page_b = new_page()
    open_chat(page_b, app)
    team_b = SubagentPanel(page_b, "team")
    team_b.expect_note("No delegations yet")
    # B forges A's interrupt (and transcript) click on its own panels: nothing happens.
    for panel in ("team", "spy"):
        for action in ("interrupt", "transcript"):
            page_b.evaluate(
                "([id, value]) => Shiny.setInputValue(id, value, {priority: 'event'})",
                [f"{panel}-action", {"delegation_id": delegation_id, "action": action}],
            )
    # A's spy panel (a requester the policy refuses) cannot stop it either.
    page.evaluate(
        "([id, value]) => Shiny.setInputValue(id, value, {priority: 'event'})",
        ["spy-action", {"delegation_id": delegation_id, "action": "interrupt"}],
    )
    team_a.expect_status(row_a, "completed", timeout=10_000)
    chat_a.expect_latest_reply("Lead done: Counted to 30.")
    team_b.expect_note("No delegations yet")
    expect(team_b.loc_rows).to_have_count(0)
    expect(page_b.locator(f"[data-delegation='{delegation_id}']")).to_have_count(0)
