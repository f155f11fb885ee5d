"""A hostile model in the browser: one session's catastrophic grep never stalls another."""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import pytest
from playwright.sync_api import Page

from deputy_shiny.shiny.playwright import AgentChat
from tests.e2e.conftest import AppServer, open_chat

E2E_APPS = ("hostile.py",)
# A quiet round trip takes 0.1-0.3 s, a busy machine's (a load of 10 on 2 cores) up to
# 1.2 s; a loop frozen by the grep holds it for the rest of the app's 8 s pattern budget
# (measured: 8.6-12 s).
ROUND_TRIP_LIMIT = 3.0

# Waits for the text in the newest reply, checking every animation frame (Playwright's
# own expect backs off to 500 ms between checks, too coarse to time a round trip).
_REPLIED = """(text) => {
  const replies = document.querySelectorAll('.shiny-chat-message');
  return replies.length > 0 && replies[replies.length - 1].textContent.includes(text);
}"""


@pytest.fixture(scope="module")
def app(serve_app: Callable[..., AppServer]) -> AppServer:
    return serve_app("hostile.py")


def _round_trip(chat: AgentChat, text: str) -> float:
    chat.expect_idle()
    chat.send(text)
    started = time.monotonic()  # from the click: typing is the test's own time
    chat.page.wait_for_function(_REPLIED, arg=f"You said: {text}", polling="raf")
    return time.monotonic() - started


def test_another_session_stays_responsive_while_one_greps_a_catastrophic_pattern(
    page: Page, new_page: Callable[[], Page], app: AppServer
) -> None:
    attacker = open_chat(page, app)
    bystander = open_chat(new_page(), app)
    _round_trip(bystander, "warm-up")
    attacker.send("grep")
    session = app.wait_for_event(r"grep-start (\S+)")[1]
    for n in range(3):
        trip = _round_trip(bystander, f"ping {n}")
        assert trip < ROUND_TRIP_LIMIT, f"round trip {n} took {trip:.2f} s during the grep"
        ended = [e for e in app.events() if e == f"grep-end {session}"]
        assert not ended, "the grep ended before the round trip: the test measured nothing"
    # The grep itself ends with a clear error, within its (8 s) budget.
    attacker.expect_latest_reply(
        re.compile("too (long|expensive)|timed out|budget"), timeout=30_000
    )
