"""tools_mcp: every tool of the configured MCP servers, as deputy_shiny tools.

The servers are selected by exact name before anything connects. Each server gets
its own connection on the MCP loop; it lives as long as its tools do (it closes when
they are garbage collected, and at exit). For connections that close with an agent,
use ``agent.load_mcp(...)`` or :class:`~deputy_shiny.mcp.McpConnection`.

Examples:
    >>> from mcp.server.mcpserver import MCPServer
    >>> from deputy_shiny.mcp import McpConfig, McpInProcessServer
    >>> server = MCPServer("math")
    >>> @server.tool()
    ... def add(a: int, b: int) -> int:
    ...     "Add two numbers."
    ...     return a + b
    >>> config = McpConfig(servers={"math": McpInProcessServer(name="math", server=server)})
    >>> [t.name for t in tools_mcp(config, servers=["math"])]
    ['add']
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Sequence

from ..errors import ToolNameConflictError
from ..tools import Tool
from ._loop import block_on_mcp_loop, on_mcp_loop
from .config import ConfigInput, McpServerConfig, load_mcp_config
from .connection import McpConnection, McpOwnerAgent

__all__ = ["open_servers", "tools_mcp", "tools_mcp_async"]


def tools_mcp(
    config: ConfigInput = None,
    servers: str | Sequence[str] | None = None,
    *,
    timeout: float | None = None,
) -> list[Tool]:
    """The tools of the configured MCP servers (``servers``: exact names; None: all).

    With no config, no servers or no tools this warns and returns ``[]``; a server
    that fails to start is skipped with a warning. A malformed config or an unknown
    server name raises :class:`~deputy_shiny.errors.McpConfigError`, and two servers
    offering one tool name raise :class:`~deputy_shiny.errors.ToolNameConflictError`.
    For scripts; in async code use :func:`tools_mcp_async`.
    """
    return block_on_mcp_loop(tools_mcp_async(config, servers, timeout=timeout), "tools_mcp")


async def tools_mcp_async(
    config: ConfigInput = None,
    servers: str | Sequence[str] | None = None,
    *,
    timeout: float | None = None,  # noqa: ASYNC109 (each connection's limit, not this call's)
) -> list[Tool]:
    """:func:`tools_mcp` for async code (connecting never blocks the caller's loop)."""
    loaded = load_mcp_config(config)
    if not loaded.servers:
        where = loaded.source or "the given config"
        warnings.warn(f"No MCP servers configured in {where}; no MCP tools.", stacklevel=2)
        return []
    selected = loaded.select(servers)
    opened, failures = await open_servers(selected, None, timeout)
    for failure in failures:
        warnings.warn(failure, UserWarning, stacklevel=2)
    tools = [t for connection in opened for t in connection.tools()]
    clashes = _clashes(opened)
    if clashes:
        await asyncio.gather(*(c.aclose() for c in opened))
        raise ToolNameConflictError(f"MCP servers offer tools with one name: {clashes}.")
    for connection in opened:
        if not connection.tools():
            await connection.aclose()
    if not tools:
        names = ", ".join(s.name for s in selected)
        warnings.warn(f"The MCP servers {names} offer no tools.", UserWarning, stacklevel=2)
    return tools


async def open_servers(
    servers: Sequence[McpServerConfig], agent: McpOwnerAgent | None, limit: float | None
) -> tuple[list[McpConnection], list[str]]:
    """Connect to each server at once, with all its tools; the connections and the failures."""

    async def open_all() -> list[McpConnection | BaseException]:
        return await asyncio.gather(
            *(McpConnection.open_all_tools(s, agent, limit) for s in servers),
            return_exceptions=True,
        )

    results = await on_mcp_loop(open_all())
    opened: list[McpConnection] = []
    failures: list[str] = []
    for server, result in zip(servers, results, strict=True):
        if isinstance(result, McpConnection):
            opened.append(result)
        elif isinstance(result, Exception):
            text = str(result)
            named = text.startswith(f"MCP server {server.name!r}")
            failures.append(text if named else f"MCP server {server.name!r}: {text}")
        else:
            raise result
    return opened, failures


def _clashes(connections: Sequence[McpConnection]) -> str:
    seen: dict[str, str] = {}
    found: list[str] = []
    for connection in connections:
        for t in connection.tools():
            if t.name in seen:
                found.append(f"{t.name!r} ({seen[t.name]} and {connection.server})")
            seen[t.name] = connection.server
    return ", ".join(found)
