"""Whose conversation a browser session gets, attacked from other pages in the browser.

The app (``apps/identity.py``) serves the kit at ``/app/`` and an attacker's page at
``/evil/`` on the same origin; the same page is also served from another port of the
same host (``attacker_site``). The attacker's page opens the app's websocket itself in
the victim's browser (so the victim's cookies go with it), plants cookies, reads what
it can, and approves anything it is shown (``tests/e2e/attacker.py``). Every test ends
with the attacker holding nothing of the victim's conversation.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from deputy_shiny.shiny._chat_module import FOREIGN_MESSAGE
from deputy_shiny.shiny.playwright import AgentChat, ApprovalModal
from tests.e2e.attacker import AttackerSite, attacker_site, run_attack
from tests.e2e.conftest import AppServer

E2E_APPS = (
    "identity.py",
    ("identity.py", {"RSTUDIO_PRODUCT": "CONNECT"}),
    ("identity.py", {"DEPUTY_E2E_TAG": "visitors"}),
)

TOKEN = "deputy_shiny_conversation"
BINDING = "deputy_shiny_binding"


@pytest.fixture
def app(serve_app: Callable[..., AppServer]) -> AppServer:
    return serve_app("identity.py")


@pytest.fixture(scope="module")
def elsewhere() -> Iterator[AttackerSite]:
    with attacker_site() as site:
        yield site


def ws_url(app: AppServer) -> str:
    return app.url.replace("http://", "ws://") + "/app/websocket/"


def open_app(context: BrowserContext, app: AppServer) -> tuple[Page, AgentChat]:
    page = context.new_page()
    page.goto(app.url + "/app/")
    chat = AgentChat(page, "agent")
    chat.expect_ready()
    return page, chat


def said(chat: AgentChat, text: str) -> None:
    chat.send(text)
    chat.expect_latest_reply(f"You said: {text}", timeout=20_000)
    chat.expect_idle()


def cookies_of(context: BrowserContext, name: str) -> list[str]:
    return [c["value"] for c in context.cookies() if c["name"] == name]


def token_of(context: BrowserContext) -> str:
    """The context's token cookie, once the kit's script has fetched it."""
    for _ in range(100):
        values = cookies_of(context, TOKEN)
        if values:
            return values[0]
        context.pages[0].wait_for_timeout(100)
    raise AssertionError("no token cookie was set")


def chat_text(page: Page) -> str:
    return page.locator("#agent-chat").inner_text()


def test_a_page_of_another_port_gets_no_conversation_and_decides_nothing(
    page: Page, app: AppServer, elsewhere: AttackerSite
) -> None:
    """Part A: SameSite ignores ports, so the attacker's websocket carries the victim's
    cookie; its Origin is not the app's, so the session gets one line and nothing else."""
    victim = page.context
    page.goto(app.url + "/app/")
    chat = AgentChat(page, "agent")
    chat.expect_ready()
    said(chat, "remember-the-tides")
    chat.send("write note.md secret-content")
    modal = ApprovalModal(page)
    modal.expect_open("write_file")
    token_of(victim)

    loot = run_attack(victim.new_page(), elsewhere.url(ws_url(app)))
    assert loot.received, "the attacker's websocket got no answer at all"
    assert FOREIGN_MESSAGE in loot.text
    assert "remember-the-tides" not in loot.text and "secret-content" not in loot.text
    assert "deputy-approval" not in loot.text and loot.answered == []
    assert TOKEN not in loot.cookie  # HttpOnly: no page reads it, of any port
    # The victim's approval still waits, undecided, and the victim decides it.
    expect(page.locator("#shiny-modal .deputy-approval")).to_be_visible()
    workspace = app.workspace_root / "conversations" / "workspaces"
    assert not list(workspace.glob("*/note.md"))
    modal.approve()
    chat.expect_latest_reply("Tool said:", timeout=20_000)
    assert len(list(workspace.glob("*/note.md"))) == 1


def test_a_page_on_the_same_origin_reads_no_token(page: Page, app: AppServer) -> None:
    """The token is an HttpOnly cookie, the binding useless without it: a page at
    ``/evil/`` reads neither the token nor anything that stands for it."""
    page.goto(app.url + "/app/")
    chat = AgentChat(page, "agent")
    chat.expect_ready()
    said(chat, "my-private-words")
    token = token_of(page.context)
    loot = run_attack(page.context.new_page(), app.url + "/evil/")
    assert token not in loot.text and token.split(".")[0] not in loot.text
    assert TOKEN not in loot.cookie
    assert not any(TOKEN in key or token in value for key, value in loot.storage.items())


def test_on_a_shared_origin_an_anonymous_conversation_is_not_there_to_steal(
    serve_app: Callable[..., AppServer], page: Page
) -> None:
    """On Posit Connect every content shares one origin: a page at ``/evil/`` could open
    the app's websocket with the victim's cookies. So anonymous conversations are not
    saved there (unless the app opts in), and the attacker's session gets nothing."""
    app = serve_app("identity.py", RSTUDIO_PRODUCT="CONNECT")
    page.goto(app.url + "/app/")
    chat = AgentChat(page, "agent")
    chat.expect_ready()
    expect(chat.chat.loc_messages).to_contain_text("signed-in users only")
    said(chat, "words-of-the-victim")
    loot = run_attack(page.context.new_page(), app.url + "/evil/?ws=" + ws_url(app))
    assert loot.received and "words-of-the-victim" not in loot.text
    assert cookies_of(page.context, TOKEN) == []  # no token was ever issued
    # The victim's tab is still theirs (no takeover closed it).
    said(chat, "still-here")
    records = app.workspace_root / "conversations" / "records"
    assert not records.exists() or [p for p in records.iterdir() if p.name[0] != "."] == []


def test_a_planted_cookie_does_not_carry_the_victims_messages_to_the_attacker(
    browser: Browser, new_page: Callable[[], Page], app: AppServer, elsewhere: AttackerSite
) -> None:
    """Fixation: a page of another port plants its own (valid) token for this host,
    before the victim's first visit and beside the victim's own cookie. The victim's
    messages never reach the attacker's conversation."""
    attacker = new_page().context
    attacker_page, attacker_chat = open_app(attacker, app)
    said(attacker_chat, "attacker-was-here")
    planted = token_of(attacker)
    [attacker_binding] = cookies_of(attacker, BINDING)

    # 1. Before the victim's first visit: the planted token (path /app/) does not match
    # the victim's binding, so the victim gets a token of their own instead.
    first = new_page().context
    run_attack(first.new_page(), elsewhere.url("", f"{TOKEN}={planted}; path=/app/"))
    page, chat = open_app(first, app)
    said(chat, "first-victim-secret")
    assert token_of(first) != planted

    # 2. The planted token with the attacker's binding on a longer path: the cookie is
    # sent twice, so nothing is saved, and nothing reaches the attacker.
    second = new_page().context
    run_attack(
        second.new_page(),
        elsewhere.url(
            "",
            f"{TOKEN}={planted}; path=/app/",
            f"{BINDING}={attacker_binding}; path=/app/websocket/",
        ),
    )
    page, chat = open_app(second, app)
    expect(chat.chat.loc_messages).to_contain_text("twice")
    said(chat, "second-victim-secret")

    # 3. A victim with a conversation of their own; the attacker adds a path=/ token.
    third = new_page().context
    page, chat = open_app(third, app)
    said(chat, "third-victim-secret")
    token_of(third)
    run_attack(third.new_page(), elsewhere.url("", f"{TOKEN}={planted}; path=/"))
    page.reload()
    chat.expect_ready()
    expect(chat.chat.loc_messages).to_contain_text("twice")
    said(chat, "third-victim-more")

    attacker_page.reload()
    attacker_chat.expect_ready()
    attacker_chat.expect_latest_reply("You said: attacker-was-here")
    text = chat_text(attacker_page)
    for secret in ("first-victim", "second-victim", "third-victim"):
        assert secret not in text


def test_a_forged_credentials_header_names_nobody(
    browser: Browser, new_page: Callable[[], Page], app: AppServer
) -> None:
    """Outside Posit Connect (and without trust_user_header) a client-sent
    Shiny-Server-Credentials header does not make two browsers one user."""
    forged = {"Shiny-Server-Credentials": json.dumps({"user": "alice", "groups": []})}
    alice = browser.new_context(extra_http_headers=forged)
    mallory = browser.new_context(extra_http_headers=forged)
    try:
        _, alice_chat = open_app(alice, app)
        said(alice_chat, "alice-secret-plans")
        mallory_page, mallory_chat = open_app(mallory, app)
        mallory_page.reload()
        mallory_chat.expect_ready()
        mallory_page.wait_for_timeout(1000)  # a restore would have arrived by now
        assert "alice-secret-plans" not in chat_text(mallory_page)
        expect(mallory_chat.loc_user_messages).to_have_count(0)
        # Alice's tab was not taken over.
        said(alice_chat, "alice-goes-on")
    finally:
        alice.close()
        mallory.close()


def test_a_visitor_who_connects_and_leaves_leaves_nothing(
    serve_app: Callable[..., AppServer], new_page: Callable[[], Page]
) -> None:
    app = serve_app("identity.py", DEPUTY_E2E_TAG="visitors")
    root = app.workspace_root / "conversations"
    for _ in range(4):
        page = new_page()
        page.goto(app.url + "/app/")
        AgentChat(page, "agent").expect_ready()
        token_of(page.context)
        page.context.close()
    # A visitor who did send a message keeps a conversation (the check has teeth).
    page = new_page()
    page.goto(app.url + "/app/")
    chat = AgentChat(page, "agent")
    chat.expect_ready()
    said(chat, "hello")

    def folders(tree: str) -> list[Path]:
        return [p for p in (root / tree).iterdir() if not p.name.startswith(".")]

    for _ in range(100):  # the sessions end a moment after their tabs close
        if len(folders("records")) == 1 and len(folders("workspaces")) == 1:
            break
        page.wait_for_timeout(100)
    assert len(folders("records")) == 1 and len(folders("workspaces")) == 1
    assert (folders("records")[0] / "conversation.json").is_file()
