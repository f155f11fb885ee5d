"""The stop button ends a run in every state it can be in, saved or not (#33).

Each state (a reply streaming, a tool running, an approval waiting, an ask_user question
waiting, a subagent working) is stopped once per configuration: no saved conversations
(a live approval handler), ``KitPersistence`` in files, and in a store (SQLite), whose
approvals wait durably, outside any run. Stopped, the modal closes, the input is free
at once, the next message runs, and the stopped call never runs: not later, not after a
reload (no modal comes back, a durable record reads ``stopped``, never ``pending``).
One server per configuration serves all its states (``tests/e2e/apps/stopping.py``).
"""

from __future__ import annotations

import atexit
import itertools
import json
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from deputy_shiny.shiny.playwright import AgentChat, ApprovalModal, QuestionModal
from tests.e2e.conftest import AppServer, open_chat

_STORE_DIR = tempfile.mkdtemp(prefix="deputy-e2e-stop-store-")
atexit.register(shutil.rmtree, _STORE_DIR, True)
STORE_DATABASE = Path(_STORE_DIR) / "kit.db"
CONFIGS: dict[str, dict[str, str]] = {
    "live": {},
    "files": {"DEPUTY_E2E_PERSIST": "files"},
    "store": {
        "DEPUTY_E2E_PERSIST": "store",
        "DEPUTY_STORE_URL": f"sqlite+aiosqlite:///{STORE_DATABASE}",
    },
}
E2E_APPS = tuple(("stopping.py", overrides) for overrides in CONFIGS.values())
STATES = ("streaming", "tool", "approval", "question", "subagent")

# "At once": a quiet machine frees the input in well under half a second.
IDLE_WITHIN_MS = 5_000
_names = itertools.count()


@pytest.fixture(scope="module", params=list(CONFIGS))
def config(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def app(config: str, serve_app: Callable[..., AppServer]) -> AppServer:
    return serve_app("stopping.py", **CONFIGS[config])


def _count(app: AppServer, line: str) -> int:
    return app.events().count(line)


def _wait_count(app: AppServer, line: str, at_least: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while _count(app, line) < at_least:
        assert time.monotonic() < deadline, f"no new {line!r} marker; markers: {app.events()}"
        time.sleep(0.05)


def _approval_statuses(app: AppServer, name: str) -> list[str]:
    """The statuses of the durable records of ``effect(name)``: files under the
    server's conversations, rows of the store's database."""
    statuses = []
    for path in (app.workspace_root / "conversations").rglob("*.approval.json"):
        payload = json.loads(path.read_text())["payload"]
        if payload["request"]["arguments"].get("name") == name:
            statuses.append(payload["status"])
    if STORE_DATABASE.exists():
        with sqlite3.connect(STORE_DATABASE) as db:
            rows = db.execute(
                "SELECT status, payload FROM deputy_records WHERE kind = 'approval'"
            ).fetchall()
        for status, payload in rows:
            if json.loads(payload)["request"]["arguments"].get("name") == name:
                statuses.append(status)
    return statuses


def _start(state: str, page: Page, chat: AgentChat, app: AppServer, name: str) -> None:
    """Send what puts the run in ``state``, and wait until it is there."""
    if state == "streaming":
        chat.send("slow")
        chat.expect_latest_reply("word 005", timeout=60_000)
    elif state == "tool":
        seen = _count(app, "slow_tool started")
        chat.send("sleep")
        _wait_count(app, "slow_tool started", seen + 1)
    elif state == "approval":
        chat.send(f"effect {name}")
        ApprovalModal(page).expect_open("effect", timeout=60_000)
    elif state == "question":
        chat.send("ask")
        QuestionModal(page).expect_open(timeout=60_000)
    else:
        seen = _count(app, "slow_count started")
        chat.send("delegate")
        _wait_count(app, "slow_count started", seen + 1)


@pytest.mark.parametrize("state", STATES)
def test_stop_ends_the_run_and_the_next_message_runs(
    state: str, config: str, page: Page, app: AppServer
) -> None:
    name = f"n{next(_names)}"
    chat = open_chat(page, app)
    _start(state, page, chat, app, name)
    cancelled = {"tool": "slow_tool cancelled", "subagent": "slow_count cancelled"}.get(state)
    seen_cancelled = _count(app, cancelled) if cancelled else 0

    chat.stop()
    # The input is free at once, and no modal is left open.
    chat.expect_idle(timeout=IDLE_WITHIN_MS)
    expect(page.locator("#shiny-modal .modal").filter(visible=True)).to_have_count(0)
    if cancelled:  # the tool's own work was cancelled, not left running
        _wait_count(app, cancelled, seen_cancelled + 1, timeout=10)

    chat.send(f"hello {name}")
    chat.expect_latest_reply(f"You said: hello {name}", timeout=20_000)
    chat.expect_idle()

    # Not after a reload either: no modal comes back, and the stopped call never ran.
    page.reload()
    chat.expect_ready()
    page.wait_for_timeout(1_000)  # a restored approval would show by now
    expect(page.locator("#shiny-modal .modal")).to_have_count(0)
    chat.send(f"again {name}")
    chat.expect_latest_reply(f"You said: again {name}", timeout=20_000)
    assert not (app.markers / f"effect-{name}").exists()
    assert f"effect {name}" not in app.events()
    if state == "approval":
        # A durable record is closed as stopped (a live approval leaves none).
        expected = [] if config == "live" else ["stopped"]
        assert _approval_statuses(app, name) == expected
