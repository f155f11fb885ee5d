"""Two processes of the reference app, one PostgreSQL store, behind nginx on one origin.

Processes A and B run ``app.py`` on the demo model with the same ``DEPUTY_STORE_URL``
(a fresh database on the suite's PostgreSQL server), ``DEPUTY_CONVERSATIONS_DIR`` (the
workspaces, storage both see) and ``DEPUTY_RECORD_KEY``, and a per-user budget of
:data:`BUDGET` requests a day. nginx (``tests/_nginx.py``) serves both on one origin and
sends each request to the process its ``route`` cookie names: a test switches a
browser (a context: one user) from A to B by setting that cookie, as a sticky load
balancer that moved the user would. Every page load checks which process served it,
and which one accepted its websocket.

One set of servers serves every test of the module (they start once); each test is a
user of its own (a fresh context, so a fresh anonymous token and budget). The last test
kills A (SIGKILL) while an approval waits, and B shows and decides it.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, Page, expect

from deputy_shiny.shiny._conversations import folder_name
from deputy_shiny.shiny.playwright import (
    AgentChat,
    ApprovalModal,
    ConversationPanel,
    HistoryDrawer,
)
from tests._nginx import ROUTE_COOKIE, UPSTREAM_HEADER, Nginx, start_nginx
from tests._postgres import PostgresServer
from tests.e2e.conftest import ROOT, AppServer

BUDGET = 3  # requests per user per day ("read welcome.md" costs 2: the tool call, the reply)
# The first request on a fresh server waits for litellm's import (test_reference_app.py).
FRESH_SERVER_MS = 60_000
NOTE = Path("notes") / "demo-note.md"  # what the demo's "write a note" writes


@dataclass
class Cluster:
    """The two app processes and the proxy in front of them."""

    processes: dict[str, AppServer]  # "a", "b"
    proxy: Nginx

    def websockets(self, name: str) -> int:
        """How many websockets process ``name`` accepted so far (uvicorn logs each)."""
        return self.processes[name].log().count('"WebSocket /websocket/" [accepted]')

    def expect_websockets(self, name: str, more_than: int) -> None:
        """Wait until process ``name`` accepted more than ``more_than`` websockets (its
        log line may follow the connection by a moment)."""
        deadline = time.monotonic() + 10
        while self.websockets(name) <= more_than:
            assert time.monotonic() < deadline, f"no websocket reached process {name}"
            time.sleep(0.05)


@pytest.fixture(scope="module")
def cluster(
    serve_app: Callable[..., AppServer],
    postgres_server: PostgresServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Cluster]:
    shared = {
        "DEPUTY_STORE_URL": postgres_server.database(),
        "DEPUTY_CONVERSATIONS_DIR": str(tmp_path_factory.mktemp("two-processes")),
        "DEPUTY_RECORD_KEY": secrets.token_hex(32),
        "DEPUTY_BUDGET_REQUESTS_PER_DAY": str(BUDGET),
        # Every test is an anonymous visitor of its own: together they stay well inside.
        "DEPUTY_BUDGET_ANONYMOUS_REQUESTS_PER_DAY": "1000",
    }
    yield from serve_cluster(serve_app, str(ROOT / "app.py"), "two-processes", shared)


def serve_cluster(
    serve_app: Callable[..., AppServer], app: str, tag: str, shared: dict[str, str]
) -> Iterator[Cluster]:
    """Processes A and B of ``app`` (environment ``shared``) and nginx in front of them,
    until the generator is closed (a module fixture yields from it)."""
    for name in ("a", "b"):  # launched side by side: each imports litellm as it starts
        serve_app(app, wait=False, DEPUTY_E2E_TAG=f"{tag}-{name}", **shared)
    processes = {name: serve_app(app, DEPUTY_E2E_TAG=f"{tag}-{name}", **shared) for name in "ab"}
    ports = {name: int(server.url.rsplit(":", 1)[1]) for name, server in processes.items()}
    proxy = start_nginx(ports)
    try:
        yield Cluster(processes, proxy)
    finally:
        proxy.stop()


@pytest.fixture
def user(new_page: Callable[[], Page]) -> BrowserContext:
    """One user: a browser context (its cookies hold the user's token and route)."""
    return new_page().context


def route(context: BrowserContext, cluster: Cluster, name: str) -> None:
    """Send this user's next requests (pages and websockets) to process ``name``."""
    context.add_cookies([{"name": ROUTE_COOKIE, "value": name, "url": cluster.proxy.url}])


def load(page: Page, cluster: Cluster, name: str, *, reload: bool = False) -> AgentChat:
    """Open (or reload) the app in ``page`` through the proxy, on process ``name``; wait
    until its chat is ready, its websocket accepted by that process."""
    route(page.context, cluster, name)
    before = cluster.websockets(name)
    # A fresh server's first page may take long on a loaded machine (seen: over 15 s).
    if reload:
        response = page.reload(timeout=FRESH_SERVER_MS)
    else:
        response = page.goto(cluster.proxy.url, timeout=FRESH_SERVER_MS)
    assert response is not None and response.headers[UPSTREAM_HEADER.lower()] == name
    chat = AgentChat(page, "chat")
    chat.expect_ready(timeout=FRESH_SERVER_MS)
    cluster.expect_websockets(name, before)
    return chat


def open_on(context: BrowserContext, cluster: Cluster, name: str) -> tuple[Page, AgentChat]:
    """A new tab of this user on process ``name``."""
    page = context.new_page()
    return page, load(page, cluster, name)


def exchange(chat: AgentChat, text: str, reply: str) -> None:
    """Send ``text`` and wait until the reply containing ``reply`` has finished."""
    chat.send(text)
    chat.expect_latest_reply(reply, timeout=FRESH_SERVER_MS)
    chat.expect_idle()


def expect_requests(page: Page, count: int) -> None:
    row = page.locator(".deputy-usage-row").filter(has_text="Requests")
    expect(row.locator("dd")).to_have_text(str(count), timeout=20_000)


def workspace(cluster: Cluster, context: BrowserContext) -> Path:
    """The user's workspace (in the folder both processes share), found from the token."""
    token = next(c["value"] for c in context.cookies() if c["name"] == "deputy_shiny_conversation")
    folder = folder_name("token", token.split(".")[0], "chat")
    return cluster.processes["a"].conversations / "workspaces" / folder


def user_messages(chat: AgentChat) -> list[str]:
    return [text.strip() for text in chat.loc_user_messages.all_inner_texts()]


def test_a_conversation_saved_on_a_comes_back_on_b(user: BrowserContext, cluster: Cluster) -> None:
    page, chat = open_on(user, cluster, "a")
    exchange(chat, "read welcome.md", "welcome.md")
    expect_requests(page, 2)

    chat = load(page, cluster, "b", reload=True)
    expect(chat.loc_user_messages).to_have_count(1, timeout=20_000)
    assert user_messages(chat) == ["read welcome.md"]
    expect(chat.tool_card("read_file")).to_have_count(1)
    chat.expect_latest_reply("welcome.md")
    expect_requests(page, 2)
    # B goes on with it and saves, and A sees what B saved.
    exchange(chat, "thank you", "thank you")
    expect_requests(page, 3)

    chat = load(page, cluster, "a", reload=True)
    expect(chat.loc_user_messages).to_have_count(2, timeout=20_000)
    assert user_messages(chat) == ["read welcome.md", "thank you"]
    expect_requests(page, 3)


def test_a_budget_spent_on_a_refuses_the_next_run_on_b(
    user: BrowserContext, cluster: Cluster
) -> None:
    page, chat = open_on(user, cluster, "a")
    exchange(chat, "read welcome.md", "welcome.md")
    exchange(chat, "thank you", "thank you")  # 3 of 3 requests

    chat = load(page, cluster, "b", reload=True)
    expect(chat.loc_user_messages).to_have_count(2, timeout=20_000)
    # B's usage meter reads A's spend from the database before anything runs on B.
    expect(page.locator(".deputy-usage-budget")).to_have_text(
        f"Today: {BUDGET} of {BUDGET} requests", timeout=20_000
    )
    chat.send("one more, please")
    chat.expect_latest_reply(
        f"Your daily budget is spent ({BUDGET} of {BUDGET} requests today); "
        "it renews at midnight UTC."
    )
    chat.expect_idle()
    expect_requests(page, BUDGET)  # refused before its request: nothing was spent


def test_a_delegation_past_the_budget_stops_with_the_budgets_note(
    user: BrowserContext, cluster: Cluster
) -> None:
    """The research team's requests (the lead's and its subagents') are the user's: the
    third is the last one sent, and the chat says why the team stopped."""
    page, chat = open_on(user, cluster, "a")
    chat.send("research tides")
    chat.expect_latest_reply(
        f"Your daily budget is spent ({BUDGET} of {BUDGET} requests today)",
        timeout=FRESH_SERVER_MS,
    )
    chat.expect_idle()
    expect(page.locator(".deputy-usage-budget")).to_have_text(
        f"Today: {BUDGET} of {BUDGET} requests", timeout=20_000
    )


def test_two_tabs_on_a_and_b_never_both_hold_the_conversation(
    user: BrowserContext, cluster: Cluster
) -> None:
    first, first_chat = open_on(user, cluster, "a")
    exchange(first_chat, "read welcome.md", "welcome.md")

    # The same user in a second tab, on B: B takes the conversation over (the lease in
    # the database); A's tab learns it at its next renewal, says so and is let go.
    second, second_chat = open_on(user, cluster, "b")
    expect(second_chat.loc_user_messages).to_have_count(1, timeout=20_000)
    first_chat.expect_latest_reply("continues there", timeout=20_000)
    first.wait_for_function("() => !Shiny.shinyapp.isConnected()")
    exchange(second_chat, "thank you", "thank you")

    # Back to A, in the first tab: A takes it over again, with what B saved; B lets go.
    first_chat = load(first, cluster, "a", reload=True)
    expect(first_chat.loc_user_messages).to_have_count(2, timeout=20_000)
    assert user_messages(first_chat) == ["read welcome.md", "thank you"]
    second_chat.expect_latest_reply("continues there", timeout=20_000)
    second.wait_for_function("() => !Shiny.shinyapp.isConnected()")
    assert "continues there" not in first_chat.latest_reply_text()


def test_a_and_b_list_the_same_conversations_and_a_switch_on_b_is_seen_on_a(
    user: BrowserContext, cluster: Cluster
) -> None:
    page, chat = open_on(user, cluster, "a")
    exchange(chat, "hello", "offline demo model")  # one request each
    drawer = HistoryDrawer(page, "chat")
    with page.expect_navigation(timeout=FRESH_SERVER_MS):
        drawer.new()  # on A
    chat = AgentChat(page, "chat")
    chat.expect_ready()
    exchange(chat, "hi there", "offline demo model")
    drawer.expect_titles(["hi there", "hello"])

    chat = load(page, cluster, "b", reload=True)  # the list comes from the database
    expect(chat.loc_user_messages).to_have_count(1, timeout=20_000)
    assert user_messages(chat) == ["hi there"]
    drawer.expect_titles(["hi there", "hello"])
    before = cluster.websockets("b")
    with page.expect_navigation(timeout=FRESH_SERVER_MS):
        drawer.select("hello")  # on B: the page reloads, still on B
    chat = AgentChat(page, "chat")
    chat.expect_ready()
    cluster.expect_websockets("b", before)
    expect(chat.loc_user_messages).to_have_count(1, timeout=20_000)
    assert user_messages(chat) == ["hello"]

    chat = load(page, cluster, "a", reload=True)  # A opens what B switched to
    expect(chat.loc_user_messages).to_have_count(1, timeout=20_000)
    assert user_messages(chat) == ["hello"]
    drawer.expect_titles(["hi there", "hello"])
    expect(drawer.loc_active).to_have_text("hello")


def test_an_approval_asked_on_a_is_decided_on_b_after_a_is_killed(
    user: BrowserContext, cluster: Cluster
) -> None:
    """Last in the module: it kills process A."""
    page, chat = open_on(user, cluster, "a")
    chat.send("write a note")
    ApprovalModal(page).expect_open("write_file", timeout=FRESH_SERVER_MS)
    # It waits in the database, not in a file of the shared folder (hosts may share none).
    shared = cluster.processes["a"].conversations
    assert list(shared.rglob("*.approval.json")) == []
    a = cluster.processes["a"].process
    a.kill()  # SIGKILL: nothing of A's runs on (no session end, no lease let go)
    a.wait(timeout=10)
    page.wait_for_function("() => !Shiny.shinyapp.isConnected()")

    chat = load(page, cluster, "b", reload=True)
    modal = ApprovalModal(page)
    modal.expect_open("write_file", timeout=30_000)  # the same approval, from the store
    modal.approve()
    chat.expect_latest_reply("The write happened", timeout=FRESH_SERVER_MS)
    chat.expect_idle()
    assert (workspace(cluster, user) / NOTE).is_file()
    # Run exactly once: the journal holds one change since the run began.
    panel = ConversationPanel(page, "conversation")
    panel.expect_changes(0, "1 file change after it")

    # Decided once: a reload shows the outcome, never the modal again.
    chat = load(page, cluster, "b", reload=True)
    chat.expect_latest_reply("The write happened")
    expect(chat.tool_card("write_file")).to_have_count(1)
    expect(page.locator("#shiny-modal .deputy-approval")).to_have_count(0)
    panel.expect_changes(0, "1 file change after it")
