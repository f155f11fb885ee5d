"""Sandboxed Python through mcp-repl: the sandbox checks (no process), and a real
``mcp-repl --interpreter python --sandbox workspace-write`` run by an agent: state
persists, interrupt and reset, the sandbox holds, processes go away."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from deputy_shiny import (
    Agent,
    ConfigurationError,
    PermissionResultAllow,
    Permissions,
    tool_metadata,
)
from deputy_shiny.errors import (
    InvalidToolError,
    McpBusyError,
    McpConfigError,
    McpConnectionError,
    McpReplConfigError,
    McpUnknownServerError,
)
from deputy_shiny.mcp import (
    McpReplConnection,
    mcp_repl_connection,
    mcp_repl_connection_async,
    mcp_repl_control,
    mcp_repl_control_async,
    mcp_repl_server,
    tools_mcp_repl,
    tools_mcp_repl_async,
)
from deputy_shiny.mcp.connection import McpConnection
from deputy_shiny.testing import ScriptedModel, ScriptedReply, ScriptedToolCall

from .helpers import wait_until
from .mcp_servers import in_process, notes_server

MCP_REPL = str(Path(sys.executable).with_name("mcp-repl"))
PY = ["--interpreter", "python"]


def config(args: list[str], command: str = MCP_REPL, **entry: Any) -> dict[str, Any]:
    return {"mcpServers": {"py": {"command": command, "args": args, **entry}}}


# --------------------------------------------------------------------------- checks


@pytest.fixture
def tripwire(tmp_path: Path) -> tuple[str, Path]:
    """A stand-in 'mcp-repl' that leaves a mark if it is ever started."""
    mark = tmp_path / "started"
    script = tmp_path / "fake-mcp-repl"
    script.write_text(f"#!/bin/sh\ntouch {mark}\n")
    script.chmod(0o755)
    return str(script), mark


REJECTED = {
    "missing --sandbox": (PY, "workspace-write", "has no --sandbox"),
    "danger-full-access": (
        [*PY, "--sandbox", "danger-full-access"],
        "workspace-write",
        "danger-full-access runs code with no sandbox",
    ),
    "final danger after a good one": (
        ["--sandbox", "workspace-write", *PY, "--sandbox=danger-full-access"],
        "workspace-write",
        "danger-full-access",
    ),
    "inherit-codex": ([*PY, "--sandbox", "inherit-codex"], "workspace-write", "inherit-codex"),
    "inherit alias": ([*PY, "--sandbox=inherit"], "read-only", "'inherit' is not a mode"),
    "mismatch": ([*PY, "--sandbox", "read-only"], "workspace-write", "final --sandbox is"),
    "mismatch, = form last": (
        [*PY, "--sandbox", "workspace-write", "--sandbox=read-only"],
        "workspace-write",
        "final --sandbox is 'read-only'",
    ),
    "--config override": (
        [*PY, "--sandbox", "read-only", "--config", "sandbox_mode=danger-full-access"],
        "read-only",
        "overrides the sandbox mode",
    ),
    "--config= override": (
        [*PY, "--sandbox", "read-only", "--config=sandbox_mode=read-only"],
        "read-only",
        "overrides the sandbox mode",
    ),
    "spaced --config override": (
        [*PY, "--sandbox", "read-only", "--config", " sandbox_mode = 'workspace-write'"],
        "read-only",
        "overrides the sandbox mode",
    ),
    "-c override": (
        [*PY, "--sandbox", "read-only", "-c", "sandbox_mode=danger-full-access"],
        "read-only",
        "-c 'sandbox_mode=danger-full-access' overrides",
    ),
    "requested danger-full-access": (
        [*PY, "--sandbox", "danger-full-access"],
        "danger-full-access",
        "full authority of this process",
    ),
    "requested inherit-codex": (
        [*PY, "--sandbox", "inherit-codex"],
        "inherit-codex",
        "not a mode deputy_shiny can check",
    ),
    "no interpreter": (["--sandbox", "read-only"], "read-only", "needs --interpreter python"),
    "R interpreter": (
        ["--interpreter", "python", "--interpreter=r", "--sandbox", "read-only"],
        "read-only",
        "it is 'r'",
    ),
    "custom worker": (
        [*PY, "--sandbox", "read-only", "--worker-spec", "w.json"],
        "read-only",
        "'--worker-spec' is not one",
    ),
    "install subcommand": (["install", *PY, "--sandbox", "read-only"], "read-only", "'install'"),
    "dangling --sandbox": ([*PY, "--sandbox"], "read-only", "--sandbox needs a value"),
    "network through --config": (
        [
            *PY,
            "--sandbox",
            "workspace-write",
            "--config",
            "sandbox_workspace_write.network_access=true",
        ],
        "workspace-write",
        "changes the sandbox or network policy",
    ),
    "bubblewrap off through --config": (
        [*PY, "--sandbox", "read-only", "--config", "use_linux_sandbox_bwrap=false"],
        "read-only",
        "changes the sandbox or network policy",
    ),
    "an allowed domain": (
        [*PY, "--sandbox", "read-only", "--add-allowed-domain", "example.org"],
        "read-only",
        "opens the network",
    ),
    # mcp-repl's --config keys all change its sandbox or network policy, whatever the name.
    "network domains through --config": (
        [
            *PY,
            "--sandbox",
            "read-only",
            "--config",
            'permissions.network.allowed_domains=["x.org"]',
        ],
        "read-only",
        "--config changes the sandbox or network policy",
    ),
    "an unknown --config key": (
        [*PY, "--sandbox", "workspace-write", "--config", "history.max_bytes=1000"],
        "workspace-write",
        "--config changes the sandbox or network policy",
    ),
}
# Every spelling of a flag that lets the REPL write outside its working directory.
WRITES_OUTSIDE = {
    "--add-writable-root": ["--add-writable-root", "/srv"],
    "--add-writable-root=": ["--add-writable-root=/srv"],
    "--add-writeable-root": ["--add-writeable-root", "/srv"],
    "--add-writeable-root=": ["--add-writeable-root=/srv"],
    "--debug-dir": ["--debug-dir", "/srv/debug"],
    "--debug-dir=": ["--debug-dir=/srv/debug"],
    "upper case": ["--ADD-WRITABLE-ROOT", "/srv"],
    "underscores": ["--add_writable_root=/srv"],
    "one dash": ["-add-writeable-root", "/srv"],
    "a prefix": ["--add-writ", "/srv"],
    "--debug_dir=": ["--Debug_Dir=/srv/debug"],
}
for _name, _extra in WRITES_OUTSIDE.items():
    REJECTED[f"writes outside: {_name}"] = (
        [*PY, "--sandbox", "workspace-write", *_extra],
        "workspace-write",
        "outside its working directory",
    )


@pytest.mark.parametrize(("args", "sandbox", "message"), REJECTED.values(), ids=REJECTED.keys())
async def test_unsafe_entries_are_rejected_before_anything_starts(
    tripwire: tuple[str, Path], args: list[str], sandbox: str, message: str
) -> None:
    command, mark = tripwire
    cfg = config(args, command=command)
    with pytest.raises(McpReplConfigError, match=message) as caught:
        mcp_repl_server(cfg, "py", sandbox)
    assert str(caught.value).startswith("MCP server 'py': ")
    assert isinstance(caught.value, McpConfigError)
    with pytest.raises(McpReplConfigError, match=message):
        await mcp_repl_connection_async(cfg, Agent(ScriptedModel([])), "py", sandbox)
    with pytest.raises(McpReplConfigError, match=message):
        await tools_mcp_repl_async(cfg, "py", sandbox)
    with pytest.raises(McpReplConfigError, match=message):
        mcp_repl_connection(cfg, Agent(ScriptedModel([])), "py", sandbox)
    with pytest.raises(McpReplConfigError, match=message):
        tools_mcp_repl(cfg, "py", sandbox)
    assert not mark.exists()


def test_any_way_of_opening_a_repl_connection_checks_the_entry(
    tripwire: tuple[str, Path],
) -> None:
    command, mark = tripwire
    cfg = config([*PY, "--sandbox", "danger-full-access"], command=command)
    with pytest.raises(McpReplConfigError):
        asyncio.run(McpReplConnection.open(cfg, "py", Agent(ScriptedModel([])), tools=["repl"]))
    with pytest.raises(McpReplConfigError):
        McpReplConnection(cfg, "py", Agent(ScriptedModel([])), tools=["repl"])
    with pytest.raises(McpReplConfigError, match="must be a local command"):
        mcp_repl_server({"mcpServers": {"py": {"url": "https://x.example/mcp"}}}, "py", "read-only")
    with pytest.raises(McpUnknownServerError):
        mcp_repl_server(cfg, "nope", "read-only")
    assert not mark.exists()


def test_accepted_entries() -> None:
    for args, sandbox in [
        ([*PY, "--sandbox", "workspace-write"], "workspace-write"),
        (["--sandbox=read-only", "--interpreter=python"], "read-only"),
        (["--sandbox=danger-full-access", *PY, "--sandbox", "read-only"], "read-only"),
        ([*PY, "--oversized-output", "files", "--sandbox", "workspace-write"], "workspace-write"),
    ]:
        assert mcp_repl_server(config(args), "py", sandbox).args == tuple(args)


async def test_control_needs_a_repl_connection_and_a_known_action() -> None:
    conn = await McpConnection.open(
        in_process(notes=notes_server()), "notes", Agent(ScriptedModel([]))
    )
    try:
        with pytest.raises(ConfigurationError, match="McpReplConnection"):
            await mcp_repl_control_async(conn, "interrupt")  # type: ignore[arg-type]
    finally:
        await conn.aclose()


# --------------------------------------------------------------------------- real mcp-repl


def repl_config(workspace: Path, sandbox: str = "workspace-write", **extra: Any) -> dict[str, Any]:
    """The server under test, plus an entry that must never start (isolation)."""
    never = workspace / "never-started"
    return {
        "mcpServers": {
            "py": {
                "command": MCP_REPL,
                "args": [*PY, "--sandbox", sandbox],
                "cwd": str(workspace),
                "timeout": 20,
                **extra,
            },
            "other": {"command": "/bin/sh", "args": ["-c", f"touch {never}"]},
        }
    }


def text(result: Any) -> str:
    return "\n".join(getattr(part, "text", "") for part in result.content)


def processes_in(directory: Path) -> list[int]:
    """Live processes whose working directory is ``directory`` (mcp-repl and its worker)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.readlink(entry / "cwd") == str(directory):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def repl_call(code: str, **more: Any) -> ScriptedReply:
    return ScriptedReply(tool_calls=[ScriptedToolCall("repl", {"input": code, **more})])


async def test_an_agent_runs_sandboxed_python_whose_state_persists(tmp_path: Path) -> None:
    seen: list[Any] = []

    def policy(name: str, tool_input: dict[str, Any], context: Any) -> Any:
        seen.append(context.tool_metadata["source"])
        return PermissionResultAllow()

    model = ScriptedModel([repl_call("x = 41\n"), repl_call("x + 1\n"), "x + 1 is 42"])
    permissions = Permissions(tool_allowlist=["repl"], can_use_tool=policy)
    agent = Agent(model, permissions=permissions, agent_id="a1")
    conn = await mcp_repl_connection_async(repl_config(tmp_path), agent, "py", "workspace-write")
    try:
        assert isinstance(conn, McpReplConnection) and conn.sandbox == "workspace-write"
        assert conn.status == "connected" and conn.pid is not None
        agent.register_tools(conn.tools())
        source = tool_metadata(conn.tools()[0])["source"]
        assert source == {
            "type": "mcp",
            "server": "py",
            "tool": "repl",
            "remote_name": "repl",
            "connection_id": conn.id,
            "sandbox": "workspace-write",
        }
        with pytest.raises(InvalidToolError, match="belongs to agent 'a1'"):
            Agent(ScriptedModel([]), agent_id="a2").register_tools(conn.tools())

        result = await agent.run_async("What is x + 1?")
        ends = [e for e in result.events if e.type == "tool_end"]
        assert [e.is_error for e in ends] == [False, False], [e.output for e in ends]
        assert ends[1].output.strip() == "42"
        assert seen == [source, source]
        assert not (tmp_path / "never-started").exists()

        reset = await mcp_repl_control_async(conn, "reset")
        assert "new session started" in text(reset) and not reset.is_error
        after = await conn.call_tool_result("repl", {"input": "x\n"})
        assert "NameError" in text(after)
    finally:
        await agent.aclose()
    assert str(conn.status) == "closed"
    await wait_until(lambda: not processes_in(tmp_path), within=5)


async def test_the_sandbox_confines_writes_and_the_network(tmp_path: Path) -> None:
    conn = await mcp_repl_connection_async(
        repl_config(tmp_path), Agent(ScriptedModel([])), "py", "workspace-write"
    )
    probe = Path.home() / f".deputy-repl-probe-{os.getpid()}"
    code = (
        "import socket\n"
        "open('inside.txt', 'w').write('ok')\n"
        f"try:\n    open({str(probe)!r}, 'w')\nexcept OSError as e:\n    print('outside:', e)\n"
        "try:\n    socket.create_connection(('1.1.1.1', 53), timeout=1)\n"
        "except OSError as e:\n    print('network:', type(e).__name__)\n"
    )
    try:
        out = text(await conn.call_tool_result("repl", {"input": code}))
    finally:
        await conn.aclose()
    assert (tmp_path / "inside.txt").read_text() == "ok"
    assert "outside: [Errno 30] Read-only file system" in out
    assert "network: " in out and not probe.exists()


async def test_interrupt_stops_running_code_and_keeps_the_session(tmp_path: Path) -> None:
    conn = await mcp_repl_connection_async(
        repl_config(tmp_path), Agent(ScriptedModel([])), "py", "workspace-write"
    )
    try:
        await conn.call_tool_result("repl", {"input": "import time\nx = 41\n"})
        busy = await conn.call_tool_result("repl", {"input": "time.sleep(30)\n", "timeout_ms": 200})
        assert "busy" in text(busy)
        poll = asyncio.create_task(conn.call_tool_result("repl", {"input": "", "timeout_ms": 300}))
        await asyncio.sleep(0.05)
        with pytest.raises(McpBusyError, match="one request at a time"):
            await mcp_repl_control_async(conn, "interrupt")
        await poll
        with pytest.raises(ConfigurationError, match="'interrupt' or 'reset'"):
            await mcp_repl_control_async(conn, "restart")  # type: ignore[arg-type]
        interrupted = await mcp_repl_control_async(conn, "interrupt")
        assert "KeyboardInterrupt" in text(interrupted)
        assert text(await conn.call_tool_result("repl", {"input": "x + 1\n"})).strip() == "42"
    finally:
        await conn.aclose()


def test_scripts_use_the_blocking_twins(tmp_path: Path) -> None:
    tools = tools_mcp_repl(repl_config(tmp_path, "read-only"), "py", "read-only")
    assert [t.name for t in tools] == ["repl"]
    source = tool_metadata(tools[0])["source"]
    assert source["sandbox"] == "read-only" and source["connection_id"].startswith("mcp_")
    assert asyncio.run(tools[0].invoke({"input": "6 * 7\n"})).strip() == "42"
    # Unbound tools: any agent may register them.
    Agent(ScriptedModel([]), tools=tools)

    agent = Agent(ScriptedModel([]))
    conn = mcp_repl_connection(repl_config(tmp_path), agent, "py", "workspace-write")
    try:
        assert "new session started" in text(mcp_repl_control(conn, "reset"))
    finally:
        conn.close()


async def test_a_repl_that_cannot_start_is_a_typed_error(tmp_path: Path) -> None:
    cfg = repl_config(tmp_path)
    cfg["mcpServers"]["py"]["args"] += ["--oversized-output", "neither"]
    # mcp-repl exits at once ("invalid --oversized-output value (expected files|pager)").
    with pytest.raises(McpConnectionError, match=r"MCP server 'py'.*could not start"):
        await mcp_repl_connection_async(cfg, Agent(ScriptedModel([])), "py", "workspace-write")
    await wait_until(lambda: not processes_in(tmp_path), within=5)


def test_an_env_that_turns_the_sandbox_off_is_rejected(tripwire: tuple[str, Path]) -> None:
    command, mark = tripwire
    entry = {
        "command": command,
        "args": [*PY, "--sandbox", "read-only"],
        "env": {"MCP_REPL_USE_LINUX_BWRAP": "0"},
    }
    with pytest.raises(McpReplConfigError, match="MCP_REPL_USE_LINUX_BWRAP"):
        mcp_repl_server({"mcpServers": {"py": entry}}, "py", "read-only")
    assert not mark.exists()


@pytest.mark.parametrize(
    "variable",
    [
        "MCP_REPL_DEBUG_DIR",  # --debug-dir's variable: writes outside the working dir
        "MCP_REPL_STARTUP_LOG_PATH",
        "MCP_REPL_ALLOWED_DOMAINS",  # opens the network
        "MCP_REPL_MANAGED_NETWORK",
        "mcp_repl_keep_session_tmpdir",
        "CODEX_HOME",  # a Codex config it may read policy from
    ],
)
def test_an_env_that_widens_the_repl_is_rejected(tripwire: tuple[str, Path], variable: str) -> None:
    command, mark = tripwire
    entry = {"command": command, "args": [*PY, "--sandbox", "workspace-write"]}
    with pytest.raises(McpReplConfigError, match=variable):
        mcp_repl_server(
            {"mcpServers": {"py": {**entry, "env": {variable: "/srv"}}}}, "py", "workspace-write"
        )
    assert not mark.exists()
    # Settings that only bound output or pick the interpreter stay allowed.
    harmless = {"MCP_REPL_OUTPUT_BUNDLE_MAX_BYTES": "1000", "MCP_REPL_PAGER_PAGE_CHARS": "500"}
    checked = {"mcpServers": {"py": {**entry, "env": harmless}}}
    assert mcp_repl_server(checked, "py", "workspace-write").env == harmless
