"""Sandboxed Python through mcp-repl: a persistent interpreter in an OS sandbox.

`mcp-repl <https://github.com/posit-dev/mcp-repl>`_ (PyPI ``posit-mcp-repl``) is an MCP
server whose one tool, ``repl``, runs code in a long-lived Python (or R) session that
it confines itself (bubblewrap + seccomp on Linux, Seatbelt on macOS). Use it when
model-written code needs an OS sandbox rather than this process's authority:

- :func:`tools_mcp_repl` / :func:`tools_mcp_repl_async`: its tools, for any agent.
- :func:`mcp_repl_connection` / :func:`mcp_repl_connection_async`: an
  :class:`McpReplConnection` owned by one agent (its tools refuse any other).
- :func:`mcp_repl_control` / :func:`mcp_repl_control_async`: interrupt the running
  code or reset the session; the upstream result comes back for you to inspect.

Only the named server of the configuration is used, and before any process starts its
entry is checked (:func:`mcp_repl_server`): a local command whose arguments deputy_shiny
understands, ``--interpreter python``, and a final ``--sandbox`` (``--sandbox X`` or
``--sandbox=X``) equal to the requested mode, ``read-only`` or ``workspace-write``.
A missing mode, ``danger-full-access``, ``inherit-codex``, a mismatch, any ``--config``
(mcp-repl's keys all override its sandbox or network policy: ``sandbox_mode``,
``sandbox_workspace_write.*``, ``permissions.network.*``...), ``--add-allowed-domain``,
a flag that lets it write outside its working directory (``--add-writable-root``,
``--add-writeable-root``, ``--debug-dir``, in any spelling or ``--flag=value`` form), or
an ``MCP_REPL_*`` / ``CODEX_*`` variable in ``env`` other than those that only bound
output or pick the interpreter raise :class:`~deputy_shiny.errors.McpReplConfigError`:
each would change the policy deputy_shiny checked. mcp-repl then owns the confinement,
including failing at startup on hosts where it cannot sandbox.

Session control is mcp-repl's own: input starting with ``\\u0003`` interrupts the
running code (the session and its variables survive), ``\\u0004`` ends the session and
starts a fresh one. Like every request, a control request fails with
:class:`~deputy_shiny.errors.McpBusyError` while another request on the connection is
active; a ``repl`` call given ``timeout_ms`` answers "busy" in time and leaves the
connection free for an interrupt. Tools carry ``source.sandbox`` and
``source.connection_id`` in :func:`~deputy_shiny.tool_metadata`, so permission
callbacks and hooks see both.

Examples:
    >>> config = {"mcpServers": {"py": {"command": "mcp-repl", "args": [
    ...     "--interpreter", "python", "--sandbox", "workspace-write"]}}}
    >>> mcp_repl_server(config, "py", "workspace-write").name
    'py'
    >>> try:
    ...     mcp_repl_server(config, "py", "read-only")
    ... except McpReplConfigError as e:
    ...     print(e)  # doctest: +ELLIPSIS
    MCP server 'py': its final --sandbox is 'workspace-write', but 'read-only' was ...
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Literal, get_args

from ..errors import ConfigurationError, McpError, McpReplConfigError
from ..tools import Tool
from ._loop import block_on_mcp_loop, on_mcp_loop
from .config import ConfigInput, McpConfig, McpServerConfig, McpStdioServer, load_mcp_config
from .connection import McpConnection, McpOwnerAgent

__all__ = [
    "MCP_REPL_TOOL",
    "McpReplConnection",
    "ReplControl",
    "ReplSandbox",
    "mcp_repl_connection",
    "mcp_repl_connection_async",
    "mcp_repl_control",
    "mcp_repl_control_async",
    "mcp_repl_server",
    "tools_mcp_repl",
    "tools_mcp_repl_async",
]

ReplSandbox = Literal["read-only", "workspace-write"]
"""The mcp-repl sandbox modes deputy_shiny accepts: both confine writes and the network."""

ReplControl = Literal["interrupt", "reset"]
"""What :func:`mcp_repl_control` asks of mcp-repl."""

MCP_REPL_TOOL = "repl"
"""The name of mcp-repl's tool (``{"input": "...", "timeout_ms": 10000}``)."""

_CONTROL_INPUT: dict[str, str] = {"interrupt": "\u0003", "reset": "\u0004"}
_SANDBOXES: tuple[str, ...] = get_args(ReplSandbox)
# mcp-repl 0.3.0's server flags that take a value and deputy_shiny lets through (some
# only to refuse them with a reason); anything else is refused, so an unknown flag
# (``--worker-spec``: a custom worker) cannot slip past the check.
_VALUE_FLAGS = frozenset(
    {"--sandbox", "--interpreter", "--config", "-c", "--add-allowed-domain", "--oversized-output"}
)
# Flags that make mcp-repl (or the code it runs) write outside its working directory,
# normalized (no leading dashes, lower case, "-" for "_"): refused by name, whatever
# the spelling, so the error says why. "add-writ..." covers both spellings and prefixes.
_WRITES_OUTSIDE = {
    "add-writ": "adds a directory sandboxed code may write",
    "debug-dir": "makes mcp-repl write debug artifacts to a directory of its own",
}
# MCP_REPL_* variables that only bound output or pick the interpreter; every other
# MCP_REPL_* or CODEX_* variable may change where it writes or what it may reach
# (MCP_REPL_DEBUG_DIR, MCP_REPL_STARTUP_LOG_PATH, MCP_REPL_ALLOWED_DOMAINS, CODEX_HOME...).
_HARMLESS_ENV = frozenset(
    {
        "MCP_REPL_INTERPRETER",
        "MCP_REPL_PYTHON_EXECUTABLE",
        "MCP_REPL_OUTPUT_BUNDLE_MAX_BYTES",
        "MCP_REPL_OUTPUT_BUNDLE_MAX_COUNT",
        "MCP_REPL_OUTPUT_BUNDLE_MAX_TOTAL_BYTES",
        "MCP_REPL_PAGER_PAGE_CHARS",
        "MCP_REPL_PAGER_PAGE_BYTES",
    }
)
_LAUNCHER = Path(__file__).resolve().with_name("_repl_launch.py")


def mcp_repl_server(config: ConfigInput, server: str, sandbox: str) -> McpStdioServer:
    """The checked entry of mcp-repl server ``server`` (see the module doc); starts nothing.

    Raises:
        McpUnknownServerError: no server of that name.
        McpReplConfigError: the entry or ``sandbox`` does not pin a checkable sandbox.

    Examples:
        >>> entry = mcp_repl_server({"mcpServers": {"py": {"command": "mcp-repl", "args": [
        ...     "--interpreter=python", "--sandbox=read-only"]}}}, "py", "read-only")
        >>> entry.args
        ('--interpreter=python', '--sandbox=read-only')
    """
    entry = load_mcp_config(config).server(server)
    where = f"MCP server {server!r}"
    if sandbox not in _SANDBOXES:
        why = (
            "gives the code the full authority of this process"
            if sandbox == "danger-full-access"
            else "is not a mode deputy_shiny can check"
        )
        raise McpReplConfigError(
            f"{where}: sandbox {sandbox!r} {why}; use 'read-only' or 'workspace-write'."
        )
    final = _final_sandbox(entry)
    if final != sandbox:
        raise McpReplConfigError(
            f"{where}: its final --sandbox is {final!r}, but {sandbox!r} was requested; "
            "make them the same."
        )
    assert isinstance(entry, McpStdioServer)  # _final_sandbox checked it
    return entry


def _final_sandbox(entry: McpServerConfig) -> str:
    """The sandbox mode the entry's arguments leave mcp-repl in (read-only/workspace-write)."""
    where = f"MCP server {entry.name!r}"
    if not isinstance(entry, McpStdioServer):
        raise McpReplConfigError(
            f"{where}: mcp-repl must be a local command (its sandbox is set by its arguments), "
            f"not a {entry.type} server."
        )
    options = _options(where, entry.args)
    for flag, value in options:
        if flag in ("--config", "-c") and value.partition("=")[0].strip() == "sandbox_mode":
            raise McpReplConfigError(
                f"{where}: {flag} {value!r} overrides the sandbox mode; put the mode in "
                "--sandbox only, so the checked mode is the one mcp-repl uses."
            )
        if flag == "-c":
            raise McpReplConfigError(f"{where}: mcp-repl has no -c option; use --config.")
        key = value.partition("=")[0].strip().lower()
        if flag == "--config":
            # Every key mcp-repl 0.3.0 supports is a sandbox or network override.
            raise McpReplConfigError(
                f"{where}: --config changes the sandbox or network policy deputy_shiny "
                f"checked ({key!r}); remove it (the mode goes in --sandbox only)."
            )
        if flag == "--add-allowed-domain":
            raise McpReplConfigError(
                f"{where}: --add-allowed-domain opens the network to sandboxed code, which "
                "the checked modes exclude; remove it."
            )
    for name in entry.env:
        upper = name.upper()
        if upper.startswith("MCP_REPL") and ("SANDBOX" in upper or "BWRAP" in upper):
            raise McpReplConfigError(
                f"{where}: its env sets {name}, which changes the sandbox deputy_shiny "
                "checked; remove it."
            )
        if upper.startswith(("MCP_REPL", "CODEX_")) and upper not in _HARMLESS_ENV:
            raise McpReplConfigError(
                f"{where}: its env sets {name}, a setting of mcp-repl's that deputy_shiny "
                "does not check (it may write outside its working directory or open the "
                f"network); remove it. Allowed: {', '.join(sorted(_HARMLESS_ENV))}."
            )
    interpreters = [value for flag, value in options if flag == "--interpreter"]
    if not interpreters or interpreters[-1] != "python":
        found = repr(interpreters[-1]) if interpreters else "missing"
        raise McpReplConfigError(
            f"{where}: needs --interpreter python (this is a Python runtime); it is {found}."
        )
    modes = [value for flag, value in options if flag == "--sandbox"]
    if not modes:
        raise McpReplConfigError(
            f"{where}: has no --sandbox; add --sandbox read-only or --sandbox workspace-write."
        )
    final = modes[-1]
    if final == "danger-full-access":
        raise McpReplConfigError(
            f"{where}: --sandbox danger-full-access runs code with no sandbox; use "
            "read-only or workspace-write."
        )
    if final not in _SANDBOXES:
        raise McpReplConfigError(
            f"{where}: --sandbox {final!r} is not a mode deputy_shiny can check (e.g. "
            "inherit-codex takes the policy from each call); use read-only or workspace-write."
        )
    return final


def _options(where: str, args: tuple[str, ...]) -> list[tuple[str, str]]:
    """mcp-repl's arguments as (flag, value) pairs, in order; unknown ones are refused."""
    pairs: list[tuple[str, str]] = []
    index = 0
    while index < len(args):
        arg = args[index]
        flag, eq, value = arg.partition("=")
        name = flag.lstrip("-").lower().replace("_", "-")
        for prefix, why in _WRITES_OUTSIDE.items():
            if name.startswith(prefix) and flag.startswith("-"):
                raise McpReplConfigError(
                    f"{where}: {flag} {why}, outside its working directory; the checked "
                    "modes allow writes only there (and in temp). Remove it."
                )
        if eq and flag.startswith("--") and flag in _VALUE_FLAGS:
            pairs.append((flag, value))
            index += 1
        elif arg in _VALUE_FLAGS:
            if index + 1 >= len(args):
                raise McpReplConfigError(f"{where}: {arg} needs a value.")
            pairs.append((arg, args[index + 1]))
            index += 2
        else:
            raise McpReplConfigError(
                f"{where}: the argument {arg!r} is not one deputy_shiny checks for mcp-repl "
                f"(allowed: {', '.join(sorted(f for f in _VALUE_FLAGS if f != '-c'))})."
            )
    return pairs


def _launchable(entry: McpStdioServer) -> McpStdioServer:
    """The entry as started: on Linux through the launcher (see ``_repl_launch.py``)."""
    if not sys.platform.startswith("linux"):
        return entry
    args = ("-I", "-S", str(_LAUNCHER), entry.command, *entry.args)
    return entry.model_copy(update={"command": sys.executable, "args": args})


class McpReplConnection(McpConnection):
    """An :class:`~deputy_shiny.mcp.McpConnection` to mcp-repl, whose sandbox was checked.

    Get one from :func:`mcp_repl_connection`. Any way of opening it checks the server
    entry first (:func:`mcp_repl_server`'s rules, with the entry's own final mode), and
    its tools carry ``source.sandbox``. It speaks the classic ``initialize`` handshake:
    mcp-repl 0.3.0 (rmcp 1.8) exits when the first request is anything else.
    """

    _connect_mode = "legacy"

    def _setup(
        self,
        server: McpServerConfig,
        agent: McpOwnerAgent | None,
        tools: Any,
        resources: Any,
        prompts: Any,
    ) -> None:
        self._sandbox: str = _final_sandbox(server)
        self._repl_tools: list[Tool] | None = None
        assert isinstance(server, McpStdioServer)
        super()._setup(_launchable(server), agent, tools, resources, prompts)

    @property
    def sandbox(self) -> str:
        """The sandbox mode mcp-repl was started with (``read-only`` / ``workspace-write``)."""
        return self._sandbox

    def tools(self) -> list[Tool]:
        """The ``repl`` tool, with ``source.sandbox`` and ``source.connection_id`` set."""
        if self._repl_tools is None:
            self._repl_tools = [
                Tool(t, source=t.source.model_copy(update={"sandbox": self._sandbox}))
                for t in super().tools()
                if t.source.remote_name == MCP_REPL_TOOL
            ]
        return list(self._repl_tools)

    def __repr__(self) -> str:
        return (
            f"<McpReplConnection {self.id} server={self.server!r} sandbox={self._sandbox} "
            f"status={self.status}>"
        )


def mcp_repl_connection(
    config: ConfigInput,
    agent: McpOwnerAgent,
    server: str,
    sandbox: str,
    *,
    timeout: float | None = None,
) -> McpReplConnection:
    """Start mcp-repl server ``server`` for ``agent`` and wait until it is ready (scripts).

    Each call starts its own REPL process, even for the same server name. Register its
    tools with ``agent.register_tools(connection.tools())``; close it with
    ``connection.close()`` (or ``agent.close()``). In async code use
    :func:`mcp_repl_connection_async`.

    Args:
        config: The MCP config (path, dict, :class:`McpConfig`; None: the default file).
        agent: The agent that owns the connection; its tools refuse any other agent.
        server: The configured server name; only that entry is used.
        sandbox: ``"read-only"`` or ``"workspace-write"``; must equal the entry's final
            ``--sandbox``.
        timeout: Seconds for startup and each request (default: the config's).

    Raises:
        McpReplConfigError: the entry does not pin that sandbox (nothing is started).
        McpConnectionError: mcp-repl could not start (e.g. it cannot sandbox this host).
    """
    mcp_repl_server(config, server, sandbox)
    return block_on_mcp_loop(
        mcp_repl_connection_async(config, agent, server, sandbox, timeout=timeout),
        "mcp_repl_connection",
    )


async def mcp_repl_connection_async(
    config: ConfigInput,
    agent: McpOwnerAgent,
    server: str,
    sandbox: str,
    *,
    timeout: float | None = None,  # noqa: ASYNC109 (the connection's limit, not this call's)
) -> McpReplConnection:
    """:func:`mcp_repl_connection` for async code (starting never blocks the caller's loop)."""
    entry = mcp_repl_server(config, server, sandbox)
    isolated = McpConfig(servers={entry.name: entry})
    connection = await McpReplConnection.open(
        isolated, entry.name, agent, tools=[MCP_REPL_TOOL], timeout=timeout
    )
    assert isinstance(connection, McpReplConnection)  # open builds cls
    return connection


def tools_mcp_repl(
    config: ConfigInput, server: str, sandbox: str, *, timeout: float | None = None
) -> list[Tool]:
    """The tools of mcp-repl server ``server`` (its ``repl`` tool), for any agent (scripts).

    The REPL process lives as long as the tools do (and stops at exit). Same checks and
    errors as :func:`mcp_repl_connection`; in async code use :func:`tools_mcp_repl_async`.
    """
    mcp_repl_server(config, server, sandbox)
    return block_on_mcp_loop(
        tools_mcp_repl_async(config, server, sandbox, timeout=timeout), "tools_mcp_repl"
    )


async def tools_mcp_repl_async(
    config: ConfigInput,
    server: str,
    sandbox: str,
    *,
    timeout: float | None = None,  # noqa: ASYNC109 (the connection's limit, not this call's)
) -> list[Tool]:
    """:func:`tools_mcp_repl` for async code."""
    entry = mcp_repl_server(config, server, sandbox)

    async def open_repl() -> McpReplConnection:
        connection = await McpReplConnection.open_all_tools(entry, None, timeout)
        if not connection.tools():
            await connection.aclose()
            raise McpError(
                f"MCP server {server!r} offers no {MCP_REPL_TOOL!r} tool; is it mcp-repl?"
            )
        assert isinstance(connection, McpReplConnection)  # open_all_tools builds cls
        return connection

    return (await on_mcp_loop(open_repl())).tools()


def mcp_repl_control(
    connection: McpReplConnection, action: ReplControl, *, timeout_ms: int | None = None
) -> Any:
    """Blocking :func:`mcp_repl_control_async`, for scripts."""
    return block_on_mcp_loop(
        mcp_repl_control_async(connection, action, timeout_ms=timeout_ms), "mcp_repl_control"
    )


async def mcp_repl_control_async(
    connection: McpReplConnection, action: ReplControl, *, timeout_ms: int | None = None
) -> Any:
    """Interrupt the code mcp-repl is running, or reset its session; the upstream result.

    ``"interrupt"`` sends Ctrl-C (``\\u0003``): the running code gets a
    KeyboardInterrupt and the session's variables survive. ``"reset"`` sends Ctrl-D
    (``\\u0004``): the session ends and a fresh one starts. Inspect the returned
    ``CallToolResult`` (``.content``, ``.is_error``) before assuming it worked; an
    interpreter can restart inside one connection, so the connection id alone does not
    prove its state survived. Fails with :class:`~deputy_shiny.errors.McpBusyError`
    while another request on the connection is active.

    Interrupt after mcp-repl answered "busy" (a ``repl`` call with ``timeout_ms``). With
    mcp-repl 0.3.0 in its Linux sandbox, an interrupt while the interpreter is idle ends
    the session: the next call starts a fresh one.
    """
    if not isinstance(connection, McpReplConnection):
        raise ConfigurationError(
            "mcp_repl_control needs an McpReplConnection (from mcp_repl_connection), "
            f"not {type(connection).__name__}."
        )
    if action not in _CONTROL_INPUT:
        raise ConfigurationError(f"action must be 'interrupt' or 'reset', not {action!r}.")
    arguments: dict[str, Any] = {"input": _CONTROL_INPUT[action]}
    if timeout_ms is not None:
        arguments["timeout_ms"] = int(timeout_ms)
    return await connection.call_tool_result(MCP_REPL_TOOL, arguments)
