"""Accessibility of the kit's dialogs and panels: focus, labels, Escape, and an axe-core
check (no serious or critical WCAG 2.1 A/AA violation) in light and dark mode.

axe-core is the npm package ``scripts/test`` installs into ``.axe/``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from deputy_shiny.shiny.playwright import AgentChat, ApprovalModal, QuestionModal
from tests.e2e.conftest import ROOT, AppServer, open_chat

E2E_APPS = ("a11y.py",)
AXE = ROOT / ".axe" / "node_modules" / "axe-core" / "axe.min.js"
# Where the focus is: on the kit's dialog itself, in the chat's input.
ON_DIALOG = "() => document.activeElement.id === 'shiny-modal'"
IN_CHAT = "() => document.activeElement.matches('#agent-chat [role=textbox]')"
# The kit's own elements: its dialog, its chat and its panels (the page around them is the
# app's, and Shiny's and bslib's).
KIT = [
    ["#shiny-modal"],
    ["#agent-chat"],
    ["#agent-usage"],
    [".deputy-conversation-panel"],
    ["#mode-mode"],
    [".deputy-mcp-panel"],
    ["#team-delegations"],
]


@pytest.fixture(scope="module")
def app(serve_app: Callable[..., AppServer]) -> AppServer:
    return serve_app("a11y.py")


def open_approval(page: Page, app: AppServer, path: str) -> tuple[AgentChat, ApprovalModal]:
    chat = open_chat(page, app)
    chat.send(f"write {path} hello")
    modal = ApprovalModal(page)
    modal.expect_open("write_file")
    return chat, modal


def test_the_dialog_takes_the_focus_is_labelled_and_gives_it_back(
    page: Page, app: AppServer
) -> None:
    chat, modal = open_approval(page, app, "focus.txt")
    dialog = page.locator("#shiny-modal")
    expect(dialog).to_have_attribute("role", "dialog")
    expect(dialog).not_to_have_attribute("aria-modal", "true")
    expect(dialog).to_have_accessible_name("Allow write_file?")
    # The focus is on the dialog itself (not in the chat input, not on Approve).
    page.wait_for_function(ON_DIALOG)
    # From there Tab reaches the fields, then Approve: a few presses, not 12.
    presses = 0
    while page.evaluate("() => document.activeElement.dataset.deputyAction") != "approve":
        assert presses < 4, "Approve is more than 4 Tabs away"
        page.keyboard.press("Tab")
        presses += 1
    page.wait_for_timeout(800)  # past the guard against keys in flight (GUARD_MS)
    page.keyboard.press("Enter")  # a person's key on Approve
    modal.expect_closed()
    app.wait_for_event(r"wrote focus\.txt")
    chat.expect_idle()
    page.wait_for_function(IN_CHAT)
    chat.expect_latest_reply("Tool said:")


def test_keys_in_flight_and_escape_never_decide(page: Page, app: AppServer) -> None:
    chat, modal = open_approval(page, app, "flight.txt")
    page.wait_for_function(ON_DIALOG)
    # What the person was typing into the chat as the dialog opened lands on nothing.
    page.keyboard.type("more text")
    page.keyboard.press("Enter")
    expect(modal.argument("path")).to_have_value("flight.txt")
    # Escape: the focus goes back to the chat input and the prompt keeps waiting.
    modal.argument("path").focus()
    page.keyboard.press("Escape")
    page.wait_for_function(IN_CHAT)
    expect(modal.loc).to_be_visible()
    page.keyboard.press("Escape")  # in the chat input: nothing happens to the prompt
    page.wait_for_timeout(300)
    expect(modal.loc).to_be_visible()
    assert not [e for e in app.events() if "flight.txt" in e]
    modal.deny()
    modal.expect_closed()
    chat.expect_latest_reply("Denied")
    assert not [e for e in app.events() if "flight.txt" in e]


def test_the_question_dialog_takes_the_focus(page: Page, app: AppServer) -> None:
    chat = open_chat(page, app)
    chat.send("ask")
    modal = QuestionModal(page)
    modal.expect_open()
    expect(page.locator("#shiny-modal")).to_have_accessible_name("The agent has a question")
    page.wait_for_function(ON_DIALOG)
    page.keyboard.press("Tab")
    assert page.evaluate("() => document.activeElement.type") == "radio"
    page.keyboard.press("Escape")
    page.wait_for_function(IN_CHAT)
    modal.choose(0, "Blue")
    modal.submit()
    modal.expect_closed()
    chat.expect_latest_reply("Blue")


def serious_violations(page: Page) -> list[dict[str, Any]]:
    """axe-core's serious and critical WCAG 2.1 A/AA violations in the kit's elements."""
    if not AXE.is_file():
        raise AssertionError(f"axe-core is missing ({AXE}): run scripts/test, which installs it")
    if not page.evaluate("() => !!window.axe"):
        page.add_script_tag(path=str(AXE))
    result = page.evaluate(
        """async (include) => {
            const present = include.filter((sel) => document.querySelector(sel[0]));
            const r = await axe.run({ include: present }, {
                runOnly: { type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"] },
                resultTypes: ["violations"],
            });
            return r.violations.filter((v) => v.impact === "serious" || v.impact === "critical")
                .map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.map(
                    (n) => [n.target.join(" "), n.failureSummary]) }));
        }""",
        KIT,
    )
    return list(result)


@pytest.mark.parametrize("mode", ["light", "dark"])
def test_axe_finds_no_serious_violation(page: Page, app: AppServer, mode: str) -> None:
    chat = open_chat(page, app)
    if mode == "dark":
        page.locator("#dark button").click()
    page.wait_for_function(f"() => document.documentElement.dataset.bsTheme === '{mode}'")
    chat.send("delegate")
    expect(page.locator("#team-delegations")).to_contain_text("helper")
    chat.expect_idle()
    page.wait_for_timeout(600)  # the new tool card's fade-in: axe reads the final colours
    found: dict[str, list[dict[str, Any]]] = {"panels": serious_violations(page)}
    chat.send("write axe.txt hello")
    approval = ApprovalModal(page)
    approval.expect_open("write_file")
    page.wait_for_timeout(400)  # the fade-in's end: axe reads the final colours
    found["approval"] = serious_violations(page)
    approval.deny()
    approval.expect_closed()
    chat.expect_latest_reply("Denied")
    chat.expect_idle()
    chat.send("ask")
    question = QuestionModal(page)
    question.expect_open()
    page.wait_for_timeout(400)
    found["question"] = serious_violations(page)
    question.cancel()
    question.expect_closed()
    chat.expect_idle()
    page.locator("#conversation-new").click()
    confirm = page.locator("#shiny-modal .deputy-confirm")
    expect(confirm).to_be_visible()
    page.wait_for_timeout(400)
    found["confirm"] = serious_violations(page)
    assert found == {"panels": [], "approval": [], "question": [], "confirm": []}
