"""Many conversations per user in shinychat's history drawer, in the browser.

One server of ``apps/drawer.py`` serves the module: conversations in a SQLite store,
each browser context a user of its own (its HttpOnly token). The drawer lists the
user's conversations newest first, titled by their first message; picking one reloads
the page, which restores it (transcript, files, checkpoints) as a reload always does.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, Page, expect

from deputy_shiny.shiny.playwright import AgentChat, ApprovalModal, ConversationPanel, HistoryDrawer
from tests.e2e.conftest import AppServer
from tests.e2e.test_a11y import serious_violations

_STORE_DIR = tempfile.mkdtemp(prefix="deputy-e2e-drawer-")
atexit.register(shutil.rmtree, _STORE_DIR, True)
STORE_URL = f"sqlite+aiosqlite:///{Path(_STORE_DIR) / 'kit.db'}"
E2E_APPS = (("drawer.py", {"DEPUTY_STORE_URL": STORE_URL}),)


@pytest.fixture
def app(serve_app: Callable[..., AppServer]) -> AppServer:
    return serve_app("drawer.py", DEPUTY_STORE_URL=STORE_URL)


@pytest.fixture
def user(new_page: Callable[[], Page]) -> BrowserContext:
    """One user: a browser context (its cookie holds the user's token)."""
    return new_page().context


def open_app(context: BrowserContext, app: AppServer) -> tuple[Page, AgentChat, HistoryDrawer]:
    page = context.pages[0] if context.pages else context.new_page()
    page.goto(app.url)
    chat = AgentChat(page, "agent")
    chat.expect_ready()
    return page, chat, HistoryDrawer(page, "agent")


def say(chat: AgentChat, text: str) -> None:
    chat.send(text)
    chat.expect_latest_reply(f"You said: {text}", timeout=20_000)
    chat.expect_idle()


def reloaded(page: Page, action: Callable[[], None]) -> AgentChat:
    """Do ``action`` (a switch, "New", a delete) and wait for the page it reloads."""
    with page.expect_navigation(timeout=20_000):
        action()
    chat = AgentChat(page, "agent")
    chat.expect_ready()
    return chat


def user_messages(chat: AgentChat) -> list[str]:
    return [text.strip() for text in chat.loc_user_messages.all_inner_texts()]


def conversation_id(drawer: HistoryDrawer, title: str) -> str:
    """The id the drawer holds for a conversation (what a forged message would name)."""
    drawer.open()
    value = drawer.item(title).locator("[data-menu-id]").get_attribute("data-menu-id")
    assert value
    return value


def test_conversations_are_listed_and_a_switch_restores_each(
    user: BrowserContext, app: AppServer
) -> None:
    page, chat, drawer = open_app(user, app)
    chat.send("write a.txt one")
    ApprovalModal(page).expect_open("write_file", timeout=20_000)
    ApprovalModal(page).approve()
    chat.expect_latest_reply("Tool said:", timeout=20_000)
    chat.expect_idle()
    drawer.expect_titles(["write a.txt one"])

    chat = reloaded(page, drawer.new)  # "New" adds a conversation, forgetting none
    expect(chat.loc_user_messages).to_have_count(0)
    say(chat, "hello two")
    drawer.expect_titles(["hello two", "write a.txt one"])
    expect(drawer.loc_active).to_have_text("hello two")
    panel = ConversationPanel(page, "conversation")
    expect(panel.loc_rows).to_have_count(0)

    chat = reloaded(page, lambda: drawer.select("write a.txt one"))
    expect(chat.loc_user_messages).to_have_count(1, timeout=20_000)
    assert user_messages(chat) == ["write a.txt one"]
    expect(chat.tool_card("write_file")).to_have_count(1)
    panel.expect_changes(0, "1 file change after it")  # its checkpoints came back
    # Ordered by their last message (opening one does not move it).
    drawer.expect_titles(["hello two", "write a.txt one"])
    expect(drawer.loc_active).to_have_text("write a.txt one")

    page.reload()  # a reload opens the conversation picked last
    chat = AgentChat(page, "agent")
    chat.expect_ready()
    expect(chat.loc_user_messages).to_have_count(1, timeout=20_000)
    assert user_messages(chat) == ["write a.txt one"]


def test_rename_search_and_delete(user: BrowserContext, app: AppServer) -> None:
    page, chat, drawer = open_app(user, app)
    say(chat, "plan the trip")
    chat = reloaded(page, drawer.new)
    say(chat, "buy <b>bread</b>")  # a title is text, never markup
    drawer.expect_titles(["buy <b>bread</b>", "plan the trip"])
    expect(drawer.loc.locator("b")).to_have_count(0)
    assert serious_violations(page) == []  # the open drawer, by axe-core

    drawer.rename("plan the trip", "Holiday\u0007 plans")
    drawer.expect_titles(["buy <b>bread</b>", "Holiday plans"])
    drawer.search("holi")
    expect(drawer.loc_titles).to_have_text(["Holiday plans"])
    drawer.search("")

    drawer.delete("Holiday plans")
    drawer.expect_titles(["buy <b>bread</b>"])
    page.reload()
    AgentChat(page, "agent").expect_ready()
    drawer.expect_titles(["buy <b>bread</b>"])

    # Deleting the conversation shown starts a new one.
    chat = reloaded(page, lambda: drawer.delete("buy <b>bread</b>"))
    expect(chat.loc_user_messages).to_have_count(0)
    drawer.open()
    expect(drawer.loc_titles).to_have_count(0)


def test_two_users_never_see_or_reach_each_others_conversations(
    new_page: Callable[[], Page], app: AppServer
) -> None:
    alice_page, alice, alice_drawer = open_app(new_page().context, app)
    say(alice, "alice private one")
    alice = reloaded(alice_page, alice_drawer.new)
    say(alice, "alice private two")
    alice_drawer.expect_titles(["alice private two", "alice private one"])
    # Her second one's id (a first conversation's id is "main" for everyone: each user's
    # own, as every id names a conversation of the user's own list only).
    target = conversation_id(alice_drawer, "alice private two")
    assert target != "main"

    bob_page, bob, bob_drawer = open_app(new_page().context, app)
    say(bob, "bob here")
    bob_drawer.expect_titles(["bob here"])
    # Bob's page names Alice's conversation (a forged message, another user's id).
    for what in ("select", "delete", "rename"):
        bob_page.evaluate(
            "([name, id]) => Shiny.setInputValue(name, {id, title: 'pwned', ts: Date.now()},"
            " {priority: 'event'})",
            [f"agent-chat_history_{what}", target],
        )
    bob_page.wait_for_timeout(1500)  # a reload would have begun by now
    assert user_messages(bob) == ["bob here"]
    bob_drawer.expect_titles(["bob here"])
    log = app.log()
    for what in ("open", "delete", "rename"):
        assert f"refused to {what} a conversation that is not in this user's list" in log

    alice_page.reload()
    AgentChat(alice_page, "agent").expect_ready()
    alice_drawer.expect_titles(["alice private two", "alice private one"])


def pick(page: Page, conversation: str) -> None:
    """What the drawer sends when a conversation is picked (its item is disabled while a
    reply streams, so a test of the server's answer sends it itself)."""
    page.evaluate(
        "id => Shiny.setInputValue('agent-chat_history_select', {id, ts: Date.now()},"
        " {priority: 'event'})",
        conversation,
    )


def test_a_running_reply_is_stopped_after_a_confirm_before_switching(
    user: BrowserContext, app: AppServer
) -> None:
    page, chat, drawer = open_app(user, app)
    say(chat, "the quiet one")
    quiet = conversation_id(drawer, "the quiet one")
    chat = reloaded(page, drawer.new)
    chat.send("slow")
    expect(chat.loc_latest_reply).to_contain_text("word 010", timeout=20_000)
    drawer.open()  # shinychat's drawer offers no switch while a reply streams
    expect(drawer.item("the quiet one").locator("button").first).to_be_disabled()
    panel = ConversationPanel(page, "conversation")

    pick(page, quiet)
    expect(panel.loc_confirm).to_contain_text("working on a reply: it is stopped first")
    panel.loc_confirm.locator('[data-deputy-action="cancel"]').click()
    expect(panel.loc_confirm).to_have_count(0)
    expect(chat.loc_latest_reply).to_contain_text("word 060", timeout=20_000)  # runs on

    pick(page, quiet)
    with page.expect_navigation(timeout=20_000):
        panel.loc_confirm.locator('[data-deputy-action="confirm"]').click()
    chat = AgentChat(page, "agent")
    chat.expect_ready()
    expect(chat.loc_user_messages).to_have_count(1, timeout=20_000)
    assert user_messages(chat) == ["the quiet one"]
    # The stopped one is kept, its reply cut short where it stopped.
    drawer.expect_titles(["slow", "the quiet one"])
    chat = reloaded(page, lambda: drawer.select("slow"))
    expect(chat.loc_user_messages).to_have_count(1, timeout=20_000)
    expect(chat.loc_latest_reply).not_to_contain_text("SLOW-END")
