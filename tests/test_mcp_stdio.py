"""Real stdio MCP servers: mcp-server-time and mcp-server-git from PyPI, and a faulty one.

Servers die mid-call, outlive timeouts and get closed with their agent or with Python;
after each test no server process of ours is left.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from deputy_shiny import (
    Agent,
    McpConnection,
    ToolInvocationError,
    permissions_full,
    tool_metadata,
    tools_mcp_async,
)
from deputy_shiny.errors import McpConnectionError, McpTimeoutError
from deputy_shiny.mcp import McpConfig, McpStdioServer, live_server_pids
from deputy_shiny.mcp._process import is_alive
from deputy_shiny.testing import ScriptedModel, ScriptedReply, ScriptedToolCall

from .mcp_servers import stdio_config

ROOT = Path(__file__).resolve().parent.parent


def children() -> list[int]:
    """Our live child processes (zombies not counted)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_bytes().rsplit(b")", 1)[-1].split()
        except OSError:
            continue
        if int(stat[1]) == os.getpid() and stat[0] not in (b"Z", b"X"):
            found.append(int(entry.name))
    return found


def wait_gone(pid: int, within: float = 5.0) -> None:
    deadline = time.monotonic() + within
    while is_alive(pid):
        assert time.monotonic() < deadline, f"server process {pid} is still alive"
        time.sleep(0.01)


@pytest.fixture(autouse=True)
def no_process_outlives_the_test() -> Iterator[None]:
    before = set(children())
    yield
    deadline = time.monotonic() + 5
    while live_server_pids() or set(children()) - before:
        assert time.monotonic() < deadline, (live_server_pids(), set(children()) - before)
        gc.collect()  # tools nobody holds (a cycle with their connection) close it
        time.sleep(0.02)


def owner() -> Agent:
    return Agent(ScriptedModel([]))


async def test_mcp_server_time_tools_keep_their_annotations() -> None:
    config = McpConfig(
        servers={
            "time": McpStdioServer(
                name="time",
                command=sys.executable,
                args=("-m", "mcp_server_time", "--local-timezone", "UTC"),
            )
        }
    )
    conn = await McpConnection.open(config, "time", owner(), tools=["get_current_time"])
    try:
        assert conn.pid in live_server_pids()
        (now,) = conn.tools()
        meta = tool_metadata(now)
        assert meta["annotations"] == {
            "read_only_hint": True,
            "destructive_hint": False,
            "open_world_hint": False,
            "idempotent_hint": True,
        }
        assert meta["source"]["server"] == "time" and meta["source"]["tool"] == "get_current_time"
        answer = json.loads(await now.invoke({"timezone": "UTC"}))
        assert answer["timezone"] == "UTC" and answer["datetime"].endswith("+00:00")
        pid = conn.pid
    finally:
        await conn.aclose()
    assert pid is not None
    wait_gone(pid)


def make_repo(path: Path) -> Path:
    env = {**os.environ, "GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@example.com"}
    env |= {"GIT_COMMITTER_NAME": "T", "GIT_COMMITTER_EMAIL": "t@example.com"}
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True, env=env)
    (path / "README.md").write_text("hello\n")
    subprocess.run(["git", "-C", str(path), "add", "README.md"], check=True, env=env)
    subprocess.run(
        ["git", "-C", str(path), "commit", "-q", "-m", "First commit"], check=True, env=env
    )
    (path / "README.md").write_text("hello, world\n")
    return path


async def test_mcp_server_git_in_an_agent_run(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    config = {
        "mcpServers": {
            "git": {
                "command": sys.executable,
                "args": ["-m", "mcp_server_git", "--repository", str(repo)],
            }
        }
    }
    model = ScriptedModel(
        [
            ScriptedReply(tool_calls=[ScriptedToolCall("git_log", {"repo_path": str(repo)})]),
            ScriptedReply(
                tool_calls=[ScriptedToolCall("git_diff_unstaged", {"repo_path": str(repo)})]
            ),
            "One commit.",
        ]
    )
    agent = Agent(model, working_dir=tmp_path, permissions=permissions_full())
    await agent.load_mcp_async(config, servers=["git"])
    try:
        assert {"git_log", "git_status", "git_diff_unstaged"} <= set(agent.mcp_tools())
        result = await agent.run_async("What happened in the repo?")
        ends = [e for e in result.events if e.type == "tool_end"]
        assert "First commit" in ends[0].output and not ends[0].is_error
        assert "hello, world" in ends[1].output and not ends[1].is_error
        assert result.response == "One commit."
        assert agent.mcp_status()[-1].status == "connected"
    finally:
        await agent.aclose()


async def test_a_server_dying_mid_call_fails_clearly_and_fast() -> None:
    conn = await McpConnection.open(
        stdio_config(), "faulty", owner(), tools=["die", "pid"], timeout=20
    )
    pid = conn.pid
    assert pid is not None and is_alive(pid)
    started = time.monotonic()
    with pytest.raises(McpConnectionError, match="closed the connection during tools/call die"):
        await conn.call_tool_result("die", {})
    assert time.monotonic() - started < 5
    assert conn.status == "failed"
    wait_gone(pid)
    with pytest.raises(McpConnectionError, match="never reconnects"):
        await conn.call_tool_result("pid", {})
    await conn.aclose()


async def test_a_dead_server_is_an_error_result_for_the_model() -> None:
    model = ScriptedModel(
        [ScriptedReply(tool_calls=[ScriptedToolCall("die", {})]), "The server died."]
    )
    agent = Agent(model)
    await agent.load_mcp_async(stdio_config(), servers="faulty")
    try:
        result = await agent.run_async("Try it")
        (end,) = [e for e in result.events if e.type == "tool_end"]
        assert end.is_error and "closed the connection" in end.output
        assert result.stop_reason == "complete"
    finally:
        await agent.aclose()


async def test_a_stdio_call_outliving_its_timeout_stops_the_server() -> None:
    conn = await McpConnection.open(stdio_config(), "faulty", owner(), tools=["sleep"])
    pid = conn.pid
    assert pid is not None
    started = time.monotonic()
    with pytest.raises(McpTimeoutError, match=r"took longer than 0\.5 s"):
        # The connection's own request path, with a short limit (startup takes longer).
        await conn._request(
            "tools/call sleep", lambda c: c.call_tool("sleep", {"seconds": 30}), 0.5
        )
    assert time.monotonic() - started < 5
    assert conn.status == "failed"
    wait_gone(pid)


async def test_a_stdio_server_sees_only_the_safe_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-parent-secret")
    monkeypatch.setenv("PASSED_ON", "yes")
    config = stdio_config(env={"FROM_CONFIG": "1", "TOKEN": "${PASSED_ON}"})
    conn = await McpConnection.open(config, "faulty", owner(), tools=["environment"])
    try:
        seen = json.loads(await conn.tools()[0].invoke({}))
    finally:
        await conn.aclose()
    assert "OPENAI_API_KEY" not in seen
    assert "PASSED_ON" not in seen
    assert seen["FROM_CONFIG"] == "1" and seen["TOKEN"] == "yes"
    assert "PATH" in seen
    assert set(seen) <= {"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "FROM_CONFIG"} | {
        "TOKEN",
        "LC_CTYPE",  # Python may set it while starting up
    }


def test_closing_the_agent_stops_its_server_processes() -> None:
    agent = owner()
    agent.load_mcp(stdio_config(), servers=["faulty"])
    conn = McpConnection(stdio_config(), "faulty", agent, tools=["pid"])
    pids = list(live_server_pids())
    assert len(pids) == 2 and conn.pid in pids
    assert all(is_alive(p) for p in pids)
    agent.close()
    for pid in pids:
        wait_gone(pid, within=0.5)  # close() waited for them
    assert conn.status == "closed"
    with pytest.raises(ToolInvocationError, match="closed"):
        asyncio.run(agent.get_tools()["pid"].invoke({}))  # type: ignore[union-attr]


def test_a_server_start_failure_is_a_clear_error() -> None:
    config = {"mcpServers": {"nope": {"command": "/nonexistent/mcp-server"}}}
    with pytest.raises(McpConnectionError, match=r"could not start.*nonexistent"):
        McpConnection(config, "nope", owner())


def test_a_server_that_dies_at_start_is_quoted_in_the_error() -> None:
    script = "import sys; sys.stderr.write('boom: no licence key\\n'); sys.exit(3)"
    config = {"mcpServers": {"dies": {"command": sys.executable, "args": ["-c", script]}}}
    with pytest.raises(McpConnectionError, match=r"could not start.*boom: no licence key"):
        McpConnection(config, "dies", owner())


async def test_a_hostile_listing_loads_nothing_and_says_why(tmp_path: Path) -> None:
    tools = [
        {"name": "fine", "inputSchema": {"type": "object"}},
        {"name": "string_schema", "inputSchema": {"type": "string"}},
    ]
    listing = tmp_path / "tools.json"
    listing.write_text(json.dumps(tools))
    config = {
        "mcpServers": {
            "raw": {
                "command": sys.executable,
                "args": [str(ROOT / "tests" / "mcp_raw_server.py"), str(listing)],
            }
        }
    }
    agent = owner()
    with pytest.warns(UserWarning, match="'raw'.*tools/list failed"):
        await agent.load_mcp_async(config)
    assert agent.get_tools() == {} and agent.mcp_status()[-1].status == "failed"
    listing.write_text(json.dumps(tools[:1]))
    found = await tools_mcp_async(config)
    assert [t.name for t in found] == ["fine"]
    assert tool_metadata(found[0])["annotations"] == {}  # none given, none invented
    del found


def test_python_exit_stops_servers_left_open(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import sys
        from deputy_shiny import tools_mcp
        tools = tools_mcp({stdio_config()!r})
        from deputy_shiny.mcp import live_server_pids
        print(live_server_pids()[0], flush=True)
        """
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=30
    )
    assert out.returncode == 0, out.stderr
    wait_gone(int(out.stdout.strip()), within=3)
