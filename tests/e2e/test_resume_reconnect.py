"""A reply whose process is SIGKILLed mid-stream finishes live on the other process.

Two processes of ``apps/resume.py`` share one PostgreSQL store and one conversations
folder behind nginx (the helpers of ``test_two_processes``). The user sends ``go`` on
A: the model calls ``record_step`` (one line in a ledger outside the app), then streams
a long reply. Mid-reply A is killed; the page reloads on B, which shows the conversation
as far as the journal holds it (the message, the tool's card), waits for A's lease on
the run to lapse (3 s in this app), and resumes the run: the same reply streams live to
its end, and the tool is not run again.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests._postgres import PostgresServer
from tests.e2e.conftest import AppServer
from tests.e2e.test_two_processes import (
    FRESH_SERVER_MS,
    Cluster,
    load,
    open_on,
    serve_cluster,
)

APP = "resume.py"
END = "REPLY-END."


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("resume-ledger") / "ledger"


@pytest.fixture(scope="module")
def cluster(
    serve_app: Callable[..., AppServer],
    postgres_server: PostgresServer,
    tmp_path_factory: pytest.TempPathFactory,
    ledger: Path,
) -> Iterator[Cluster]:
    shared = {
        "DEPUTY_STORE_URL": postgres_server.database(),
        "DEPUTY_CONVERSATIONS_DIR": str(tmp_path_factory.mktemp("resume")),
        "DEPUTY_RECORD_KEY": secrets.token_hex(32),
        "DEPUTY_E2E_LEDGER": str(ledger),
    }
    yield from serve_cluster(serve_app, APP, "resume", shared)


def test_a_reply_killed_mid_stream_on_a_finishes_live_on_b(
    new_page: Callable[[], Page], cluster: Cluster, ledger: Path
) -> None:
    user = new_page().context  # one user: its cookies hold its token and route
    page, chat = open_on(user, cluster, "a")
    chat.send("go")
    chat.expect_latest_reply("word 020,", timeout=FRESH_SERVER_MS)  # mid-reply
    assert END not in chat.latest_reply_text()
    a = cluster.processes["a"].process
    a.kill()  # SIGKILL: no session end, no run end, its leases held until they lapse
    a.wait(timeout=10)
    assert ledger.read_text().splitlines() == [f"one {a.pid}"]
    page.wait_for_function("() => !Shiny.shinyapp.isConnected()")

    chat = load(page, cluster, "b", reload=True)
    # The conversation as far as it went: the message and the tool's card, then the
    # same reply, streamed again by B (live: it is seen before its end).
    expect(chat.loc_user_messages).to_have_count(1, timeout=20_000)
    expect(chat.tool_card("record_step")).to_have_count(1, timeout=20_000)
    chat.expect_latest_reply("word 010,", timeout=30_000)
    assert END not in chat.latest_reply_text()
    chat.expect_latest_reply(END, timeout=30_000)
    chat.expect_idle()
    reply = chat.latest_reply_text()
    assert reply.count("word 001,") == 1 and "After recorded one:" in reply
    expect(chat.tool_card("record_step")).to_have_count(1)
    # The tool ran once, on A: B replayed its result from the journal.
    assert ledger.read_text().splitlines() == [f"one {a.pid}"]

    # The finished run was saved: a reload on B shows it whole, with nothing to resume.
    chat = load(page, cluster, "b", reload=True)
    chat.expect_latest_reply(END, timeout=20_000)
    chat.expect_idle()
    assert "goes on here" not in chat.latest_reply_text()
    assert ledger.read_text().splitlines() == [f"one {a.pid}"]
