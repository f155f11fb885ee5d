"""run_python per browser session: separate interpreters, and none outlives its session."""

from __future__ import annotations

import contextlib
import secrets
import time
from collections.abc import Callable
from pathlib import Path

from playwright.sync_api import Page

from tests.e2e.conftest import AppServer, open_chat

E2E_APPS = ("python_session.py",)


def host_processes(marker: str) -> list[int]:
    """Host pids whose command line contains ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                if marker in cmdline:
                    found.append(int(entry.name))
    return found


def test_sessions_get_their_own_interpreter_which_ends_with_the_session(
    new_page: Callable[[], Page], serve_app: Callable[..., AppServer]
) -> None:
    app = serve_app("python_session.py")
    chat_a = open_chat(new_page(), app)
    chat_b = open_chat(new_page(), app)
    chat_a.send("python secret = 'only-for-a'")
    chat_a.expect_latest_reply("Tool said: (no output)")
    chat_b.send("python 'secret' in globals()")
    chat_b.expect_latest_reply("Tool said: [result] False")
    # A child the code starts (in its own session, as a daemon would) lives on...
    seconds = f"{3000 + secrets.randbelow(900)}.25"
    chat_a.send(
        f"python import subprocess as sp; sp.Popen(['sleep', '{seconds}'], start_new_session=True)"
    )
    chat_a.expect_latest_reply("Tool said:")
    assert host_processes(f"sleep {seconds}")
    # ...until the browser session ends: within 5 s nothing of it is left.
    chat_a.page.context.close()
    deadline = time.monotonic() + 5
    while host_processes(f"sleep {seconds}") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not host_processes(f"sleep {seconds}")
    chat_b.send("python 6 * 7")  # the other session's interpreter is untouched
    chat_b.expect_latest_reply("Tool said: [result] 42")
