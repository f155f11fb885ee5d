"""Another language: one ``KitStrings`` words the whole kit (modals, notes, panels, the
usage line, the script's own line), and an app's string is text, never markup."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

import pytest
from playwright.sync_api import Dialog, Page, expect

from deputy_shiny.shiny.playwright import ApprovalModal, QuestionModal
from tests.e2e.apps.strings import HOSTILE
from tests.e2e.attacker import AttackerSite, attacker_site
from tests.e2e.conftest import AppServer, open_chat
from tests.e2e.test_framing import in_frame

E2E_APPS = ("strings.py",)


@pytest.fixture(scope="module")
def app(serve_app: Callable[..., AppServer]) -> AppServer:
    return serve_app("strings.py")


@pytest.fixture(scope="module")
def elsewhere() -> Iterator[AttackerSite]:
    with attacker_site() as site:
        yield site


def no_hostile_element(page: Page) -> None:
    """No element formed from the app's strings (the markup shows as text instead)."""
    assert page.locator("img[src=x]").count() == 0
    assert page.evaluate("() => document.querySelectorAll('[onerror]').length") == 0


def test_the_chat_modals_notes_and_panels_speak_german(page: Page, app: AppServer) -> None:
    dialogs: list[str] = []

    def on_dialog(dialog: Dialog) -> None:  # an onerror=alert(1) that ran
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", on_dialog)
    chat = open_chat(page, app)
    # The page as first drawn (agent_chat_ui, the panels' UI) and the server's parts.
    expect(chat.chat.loc_input).to_have_attribute("data-placeholder", "Frag den Agenten etwas")
    expect(page.locator("#conversation-new")).to_have_text(f"{HOSTILE} Neues Gespräch")
    expect(page.locator(".deputy-download-conversation")).to_contain_text("Gespräch herunterladen")
    expect(page.get_by_label("Berechtigungsmodus")).to_be_visible()
    expect(page.locator("#mode-mode option:checked")).to_have_text("Standard (de)")
    expect(page.locator(".deputy-no-checkpoints")).to_have_text("Noch keine Dateiänderungen.")
    expect(page.locator(".deputy-mcp-panel")).to_have_text("Keine MCP-Server eingerichtet.")
    chat.expect_usage("Anfragen: 0 · Tokens: 0 · Werkzeugaufrufe: 0 · Kosten: $0.00")

    # The approval modal, worded by the app; its hostile "why" label is text.
    chat.send("write de.txt hallo")
    modal = ApprovalModal(page)
    modal.expect_open("write_file")
    expect(page.locator("#shiny-modal")).to_have_accessible_name("write_file erlauben?")
    for action, words in [
        ("approve", "Genehmigen"),
        ("deny", "Ablehnen"),
        ("always", "Immer erlauben"),
        ("stop", "Lauf beenden"),
    ]:
        expect(modal.action(action)).to_have_text(words)
    expect(modal.loc_reason).to_contain_text(f"{HOSTILE} Warum:")
    expect(modal.loc_modal.get_by_label("Nachricht an das Modell beim Ablehnen")).to_be_visible()
    # A note in the chat: the app's button sends while the approval waits.
    # (shinychat shows it once the streaming reply has ended.)
    page.locator("#again").click()
    modal.approve()
    modal.expect_closed()
    busy = chat.loc_replies.filter(has_text=f"{HOSTILE} Der Agent arbeitet noch")
    expect(busy).to_have_count(1)
    expect(chat.loc_replies.filter(has_text="Tool said: Wrote")).to_have_count(1)
    no_hostile_element(page)
    # The rewind list of the conversation panel.
    panel = page.locator(".deputy-conversation-panel")
    expect(panel.locator(".deputy-subsection-title")).to_have_text("Dateien zurücksetzen")
    expect(panel.locator(".deputy-checkpoint-label")).to_contain_text("Beginn von Lauf 1")
    expect(panel.locator(".deputy-checkpoint-changes")).to_have_text("1 Dateiänderung danach")
    expect(panel.locator("button.deputy-rewind")).to_have_text("Zurücksetzen")
    chat.expect_usage(re.compile(r"^Anfragen: 2 · Tokens: \d+ · Werkzeugaufrufe: 1"))

    # The question modal.
    chat.send("ask")
    question = QuestionModal(page)
    question.expect_open()
    expect(page.locator("#shiny-modal")).to_have_accessible_name("Der Agent hat eine Frage")
    expect(question.action("submit")).to_have_text("Absenden")
    expect(question.action("cancel")).to_have_text("Abbrechen")
    other = question.question(0).locator("input.deputy-other")
    expect(other).to_have_attribute("placeholder", "Andere Antwort (selbst schreiben)")
    question.cancel()
    question.expect_closed()
    chat.expect_idle()
    no_hostile_element(page)
    assert dialogs == []


def test_the_scripts_own_line_speaks_german_as_text(
    page: Page, app: AppServer, elsewhere: AttackerSite
) -> None:
    page.goto(elsewhere.frame_url(app.url))
    chat, modal = in_frame(page)
    chat.send("write framed.txt hallo")
    modal.expect_open("write_file")
    modal.action("approve").click()  # framed by another site: refused, and said why
    note = modal.loc.locator(".deputy-framed")
    expect(note).to_have_text(
        f"{HOSTILE} Diese App ist in eine fremde Seite eingebettet: hier wird nichts entschieden."
    )
    assert modal.loc_modal.locator("img").count() == 0
    expect(modal.loc).to_be_visible()  # still waiting: nothing was decided
