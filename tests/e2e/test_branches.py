"""Editing a past message in the browser: a branch, and the files go back with it.

The app (``apps/branches.py``) has file checkpoints on: ``write <path> <content>`` writes
a file, ``launch <name>`` waits for approval (and leaves a marker if it ever runs).
"""

from __future__ import annotations

import atexit
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from playwright.sync_api import Locator, Page, expect

from deputy_shiny.shiny.playwright import AgentChat, ApprovalModal
from tests.e2e.conftest import AppServer

# The saved variant's store: a database file known at import (launched ahead too).
_STORE_DIR = tempfile.mkdtemp(prefix="deputy-e2e-branches-")
atexit.register(shutil.rmtree, _STORE_DIR, True)
STORE_URL = f"sqlite+aiosqlite:///{Path(_STORE_DIR) / 'kit.db'}"
E2E_APPS = ("branches.py", ("branches.py", {"DEPUTY_STORE_URL": STORE_URL}))
WORKSPACE = re.compile(r"Workspace: (\S+)")


@pytest.fixture
def app(serve_app: Callable[..., AppServer]) -> AppServer:
    return serve_app("branches.py")


def open_chat(page: Page, app: AppServer) -> AgentChat:
    page.goto(app.url)
    chat = AgentChat(page, "agent")
    chat.expect_ready()
    return chat


def say(chat: AgentChat, text: str, reply: str) -> None:
    chat.send(text)
    chat.expect_latest_reply(reply, timeout=20_000)
    chat.expect_idle()


def workspace(chat: AgentChat) -> Path:
    match = WORKSPACE.search(chat.latest_reply_text())
    assert match is not None
    return Path(match[1].strip("`"))


def files(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(folder.iterdir()) if p.is_file()}


def send_edit(
    page: Page, index: object, content: str, attachments: tuple[object, ...] = ()
) -> None:
    """What shinychat's client sends for an edit (``sendMessageEdit``)."""
    page.evaluate(
        "([index, content, attachments]) => Shiny.setInputValue('agent-chat_message_edit',"
        " {index, content, attachments, ts: Date.now()})",
        [index, content, list(attachments)],
    )


def bodies(chat: AgentChat) -> Locator:
    """The user's messages, as text (without the "‹ 1 / 2 ›" under them)."""
    return chat.loc_user_messages.locator(".shiny-chat-message-body")


def confirm(page: Page, text: str, button: str) -> None:
    modal = page.locator("#shiny-modal .deputy-confirm")
    expect(modal).to_contain_text(text)
    modal.get_by_role("button", name=button).click()
    expect(modal).to_have_count(0)


def test_an_edit_rewinds_the_files_changed_after_it_and_going_back_restores_them(
    page: Page, app: AppServer
) -> None:
    chat = open_chat(page, app)
    say(chat, "write a.md one", "Tool said")
    folder = workspace(chat)
    say(chat, "write b.md two", "Tool said")
    say(chat, "write a.md three", "Tool said")
    # shinychat's edit control, and none of its history selector (no list to show).
    expect(chat.loc_user_messages.first.get_by_role("button", name="Edit message")).to_be_attached()
    expect(chat.loc.get_by_role("button", name="Conversation history")).to_have_count(0)
    assert files(folder) == {"a.md": "three", "b.md": "two"}

    chat.edit_message(1, "write c.md four")
    confirm(page, "2 files restored: a.md, b.md", "Edit and rerun")
    chat.expect_latest_reply("Tool said", timeout=20_000)
    chat.expect_idle()
    # As when "write b.md two" was first sent, then the edited message's run.
    assert files(folder) == {"a.md": "one", "c.md": "four"}
    expect(bodies(chat)).to_have_text(["write a.md one", "write c.md four"])
    nav = chat.versions(1)
    expect(nav).to_contain_text("2 / 2")

    nav.get_by_role("button", name="Previous version").click()
    confirm(page, "3 files restored: a.md, b.md, c.md", "Open")
    expect(bodies(chat)).to_have_text(["write a.md one", "write b.md two", "write a.md three"])
    assert files(folder) == {"a.md": "three", "b.md": "two"}
    expect(nav).to_contain_text("1 / 2")
    # Every branch's requests count: three runs and the edited one, two requests each.
    chat.expect_usage(re.compile(r"Requests: 8 "))

    nav.get_by_role("button", name="Next version").click()
    confirm(page, "files restored", "Open")
    expect(bodies(chat)).to_have_text(["write a.md one", "write c.md four"])
    expect(nav).to_contain_text("2 / 2")
    assert files(folder) == {"a.md": "one", "c.md": "four"}


def test_a_waiting_approval_of_the_abandoned_branch_never_runs(page: Page, app: AppServer) -> None:
    chat = open_chat(page, app)
    say(chat, "write a.md one", "Tool said")
    folder = workspace(chat)
    chat.send("launch rocket")
    modal = ApprovalModal(page)
    modal.expect_open("launch")

    # shinychat hides its edit control while a reply streams (the approval waits inside
    # it); its client's own message arrives anyway from a page that sends it.
    send_edit(page, 0, "write z.md zed")
    modal.expect_closed()  # withdrawn: the run stopped, the call denied
    confirm(page, "1 file restored: a.md", "Edit and rerun")
    chat.expect_latest_reply("Tool said", timeout=20_000)
    chat.expect_idle()
    assert files(folder) == {"z.md": "zed"}

    # Back on the old branch, the call is still not run, and nothing asks for it again.
    nav = chat.versions(0)
    nav.get_by_role("button", name="Previous version").click()
    confirm(page, "2 files restored: a.md, z.md", "Open")
    expect(bodies(chat)).to_have_text(["write a.md one", "launch rocket"])
    assert files(folder) == {"a.md": "one"}
    page.wait_for_timeout(500)
    expect(page.locator("#shiny-modal")).to_have_count(0)
    assert not [line for line in app.events() if line.startswith("launched")]


def test_a_forged_edit_is_refused_and_changes_nothing(
    page: Page, new_page: Callable[[], Page], app: AppServer
) -> None:
    chat = open_chat(page, app)
    say(chat, "write a.md one", "Tool said")
    folder = workspace(chat)
    say(chat, "write b.md two", "Tool said")
    # Another session's page names message 0, which in its own chat does not exist.
    other = new_page()
    open_chat(other, app)
    send_edit(other, 0, "write evil.md x")
    # Forged indices: a reply, past the end, negative, not a number.
    for index in (1, 99, -1, "0", True):
        send_edit(page, index, "write evil.md x")
    page.evaluate(
        "Shiny.setInputValue('agent-chat_message_navigate',"
        " {index: 0, direction: 'prev', ts: Date.now()})"
    )
    page.wait_for_timeout(1_000)
    expect(page.locator("#shiny-modal")).to_have_count(0)
    expect(bodies(chat)).to_have_text(["write a.md one", "write b.md two"])
    assert files(folder) == {"a.md": "one", "b.md": "two"}
    assert "an edit or navigation naming message 99 was refused" in app.log()
    assert "a malformed edit input was refused" in app.log()
    say(chat, "hello", "You said: hello")  # the chat still works
    # An edit with attachments resends the text, and says the files are not sent again.
    send_edit(page, 4, "hello again", ({"name": "x.txt", "mime": "text/plain"},))
    chat.expect_latest_reply("You said: hello again", timeout=20_000)
    expect(chat.loc_replies.filter(has_text="Attachments are not sent again")).to_have_count(1)


def test_a_saved_conversation_comes_back_on_its_branch_and_edits_again(
    page: Page, serve_app: Callable[..., AppServer]
) -> None:
    """With a store (the journal and the branches in it too): a reload shows the branch
    the edit left, with its files; the old branch is still reachable, going back to it
    restores its files, and its messages can be edited again."""
    saved = serve_app("branches.py", DEPUTY_STORE_URL=STORE_URL)
    chat = open_chat(page, saved)
    say(chat, "write a.md one", "Tool said")
    folder = workspace(chat)
    say(chat, "write b.md two", "Tool said")
    chat.edit_message(1, "write c.md four")
    confirm(page, "1 file restored: b.md", "Edit and rerun")
    chat.expect_latest_reply("Tool said", timeout=20_000)
    chat.expect_idle()
    assert files(folder) == {"a.md": "one", "c.md": "four"}

    page.reload()
    chat.expect_ready()
    expect(bodies(chat)).to_have_text(["write a.md one", "write c.md four"])
    nav = chat.versions(1)
    expect(nav).to_contain_text("2 / 2")
    nav.get_by_role("button", name="Previous version").click()
    confirm(page, "2 files restored: b.md, c.md", "Open")
    expect(bodies(chat)).to_have_text(["write a.md one", "write b.md two"])
    assert files(folder) == {"a.md": "one", "b.md": "two"}
    expect(nav).to_contain_text("1 / 2")

    page.reload()  # the branch the user went back to is the one that comes back
    chat.expect_ready()
    expect(bodies(chat)).to_have_text(["write a.md one", "write b.md two"])
    expect(chat.versions(1)).to_contain_text("1 / 2")
    chat.edit_message(0, "write d.md five")
    confirm(page, "2 files restored: a.md, b.md", "Edit and rerun")
    chat.expect_latest_reply("Tool said", timeout=20_000)
    chat.expect_idle()
    assert files(folder) == {"d.md": "five"}
    expect(chat.versions(0)).to_contain_text("2 / 2")
