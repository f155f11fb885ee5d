"""MCP in the browser: connect a server from the panel, use its tool, and the server
process ends with the tab; two sessions never share a server or its tools."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from playwright.sync_api import Locator, Page, expect

from tests.e2e.conftest import AppServer, open_chat

E2E_APPS = (
    "mcp_app.py",
    ("mcp_app.py", {"DEPUTY_E2E_AUTOCONNECT": "time"}),
    ("mcp_app.py", {"DEPUTY_E2E_APP_TOOL": "convert_time"}),
)


@pytest.fixture(scope="module")
def app(serve_app: Callable[..., AppServer]) -> AppServer:
    return serve_app("mcp_app.py")


def server_processes(app: AppServer, marker: str = "mcp_server_time") -> list[int]:
    """The app's descendant processes whose command line contains ``marker``."""
    parents: dict[int, int] = {}
    commands: dict[int, str] = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text()
            commands[int(proc.name)] = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        parents[int(proc.name)] = int(stat.rsplit(")", 1)[1].split()[1])

    def descends(pid: int) -> bool:
        while pid > 1:
            pid = parents.get(pid, 0)
            if pid == app.process.pid:
                return True
        return False

    return [pid for pid, cmd in commands.items() if marker in cmd and descends(pid)]


def wait_for_processes(app: AppServer, count: int, within: float = 5.0) -> list[int]:
    deadline = time.monotonic() + within
    while len(pids := server_processes(app)) != count:
        if time.monotonic() > deadline:
            raise AssertionError(f"expected {count} server processes, found {pids}")
        time.sleep(0.05)
    return pids


def row(page: Page, server: str) -> Locator:
    return page.locator(f".deputy-mcp-server[data-server='{server}']")


def connect(page: Page, server: str) -> None:
    row(page, server).get_by_role("button", name="Connect").click()


def last_tools_marker(app: AppServer, session: str | None = None) -> list[str]:
    lines = [e.split() for e in app.events() if e.startswith("tools ")]
    if session is not None:
        lines = [line for line in lines if line[1] == session]
    assert lines, app.events()
    return lines[-1]


def test_connect_from_the_panel_use_its_tool_and_the_server_ends_with_the_tab(
    page: Page, app: AppServer
) -> None:
    chat = open_chat(page, app)
    time_row = row(page, "time")
    expect(time_row.locator(".deputy-mcp-state")).to_have_text("not connected")
    connect(page, "time")
    expect(time_row.locator(".deputy-mcp-state")).to_have_text("connected", timeout=15_000)
    expect(time_row.locator(".deputy-mcp-tools")).to_have_text("2 tools")
    (pid,) = wait_for_processes(app, 1)

    chat.send("time")
    chat.expect_latest_reply(re.compile(r"Tool said: .*UTC"), timeout=15_000)
    card = chat.loc_tool_cards.last
    expect(chat.tool_card_title(card)).to_contain_text("get_current_time")

    page.close()
    deadline = time.monotonic() + 5
    while pid in server_processes(app) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pid not in server_processes(app), "the session's MCP server outlived its tab"


def test_two_sessions_start_their_own_server_and_never_see_each_others_tools(
    page: Page, new_page: Callable[[], Page], app: AppServer
) -> None:
    chat_a = open_chat(page, app)
    page_b = new_page()
    chat_b = open_chat(page_b, app)
    connect(page, "time")
    expect(row(page, "time").locator(".deputy-mcp-state")).to_have_text("connected", timeout=15_000)
    # B's panel is B's own: A's connection does not show there.
    expect(row(page_b, "time").locator(".deputy-mcp-state")).to_have_text("not connected")
    connect(page_b, "time")
    expect(row(page_b, "time").locator(".deputy-mcp-state")).to_have_text(
        "connected", timeout=15_000
    )
    assert len(wait_for_processes(app, 2)) == 2

    chat_a.send("time")
    chat_a.expect_latest_reply("Tool said:", timeout=15_000)
    chat_b.send("time")
    chat_b.expect_latest_reply("Tool said:", timeout=15_000)
    chat_a.expect_idle()
    chat_b.expect_idle()
    markers = [e.split() for e in app.events() if e.startswith("tools ")]
    by_session = {line[1]: line for line in markers[-2:]}
    assert len(by_session) == 2, markers
    (_, _, own_a, agent_a), (_, _, own_b, agent_b) = by_session.values()
    assert own_a != own_b
    assert agent_a == own_a and agent_b == own_b  # each agent has only its own tools

    # Disconnecting takes the tools away from that session only.
    row(page, "time").get_by_role("button", name="Disconnect").click()
    expect(row(page, "time").locator(".deputy-mcp-state")).to_have_text("closed")
    wait_for_processes(app, 1)
    chat_a.send("hello")
    chat_a.expect_latest_reply("You said: hello")
    chat_a.expect_idle()
    session_a = next(s for s, line in by_session.items() if line[2] == own_a)
    assert last_tools_marker(app, session_a)[2:] == ["-", "-"]


def test_a_server_that_fails_to_start_says_so(page: Page, app: AppServer) -> None:
    chat = open_chat(page, app)
    connect(page, "broken")
    broken = row(page, "broken")
    expect(broken.locator(".deputy-mcp-state")).to_have_text("failed", timeout=15_000)
    expect(broken.locator(".deputy-mcp-error")).not_to_be_empty()
    chat.expect_latest_reply("MCP server broken failed to connect")
    # The chat goes on working.
    chat.send("still here")
    chat.expect_latest_reply("You said: still here")


def test_servers_named_in_the_kit_connect_as_the_session_starts(
    page: Page, serve_app: Callable[..., AppServer]
) -> None:
    app = serve_app("mcp_app.py", DEPUTY_E2E_AUTOCONNECT="time")
    chat = open_chat(page, app)
    expect(row(page, "time").locator(".deputy-mcp-state")).to_have_text("connected", timeout=15_000)
    chat.send("time")
    chat.expect_latest_reply(re.compile(r"Tool said: .*UTC"), timeout=15_000)


def test_a_server_tool_named_like_the_apps_own_is_refused_and_the_apps_stays(
    page: Page, serve_app: Callable[..., AppServer]
) -> None:
    app = serve_app("mcp_app.py", DEPUTY_E2E_APP_TOOL="convert_time")
    chat = open_chat(page, app)
    time_row = row(page, "time")
    connect(page, "time")
    expect(time_row.locator(".deputy-mcp-state")).to_have_text("connected", timeout=15_000)
    expect(time_row.locator(".deputy-mcp-tools")).to_have_text("1 tools")
    expect(time_row.locator(".deputy-mcp-refused")).to_contain_text("convert_time")
    chat.expect_latest_reply(re.compile(r"MCP server time: refused convert_time"))

    chat.send("convert")  # the app's own tool answers, not the server's
    chat.expect_latest_reply("Tool said: the app's own convert_time", timeout=15_000)
    row(page, "time").get_by_role("button", name="Disconnect").click()
    expect(time_row.locator(".deputy-mcp-state")).to_have_text("closed", timeout=15_000)
    expect(time_row.locator(".deputy-mcp-refused")).to_have_count(0)
    chat.send("convert")  # still there after the server's tools went
    chat.expect_latest_reply("Tool said: the app's own convert_time", timeout=15_000)
