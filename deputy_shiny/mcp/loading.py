"""McpLoads: what ``agent.load_mcp()`` loaded, from which connection, and the log of calls.

Each load opens one connection per selected server (owned by the agent, so
``agent.close()`` stops them) and registers its tools. ``replace=True`` first removes
the tools earlier loads took from those servers (also when a server now offers none),
leaving every other tool alone. A server's tool never replaces one the agent already has
otherwise (the app's built-in, a custom tool, another server's): such a clash is a
:class:`~deputy_shiny.errors.ToolNameConflictError` whatever ``replace`` says, since a
``write_file`` that claims to be read-only would skip the app's approval. Tools whose
connection is no longer connected are removed at the next load, whether it succeeds or
not; tools of working connections stay. Every call is recorded
(:class:`~deputy_shiny.mcp.McpLoadRecord`).
"""

from __future__ import annotations

import asyncio
import os
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from ..errors import McpConfigError, ToolNameConflictError
from ..tools import NativeWebTool, Tool
from .config import ConfigInput, McpConfig, load_mcp_config
from .connection import McpConnection, McpOwnerAgent
from .records import McpLoadRecord, McpLoadStatus
from .tools import open_servers

__all__ = ["McpLoads", "taken_names"]


class LoadingAgent(McpOwnerAgent, Protocol):
    """What a load needs of the agent (an :class:`~deputy_shiny.Agent` has it)."""

    def get_tools(self) -> dict[str, Tool | NativeWebTool]: ...

    def set_tools(self, tools: Iterable[Tool | NativeWebTool]) -> Any: ...

    def register_tools(
        self, tools: Iterable[Tool | NativeWebTool], replace: bool = False
    ) -> Any: ...


@dataclass
class _Loaded:
    server: str
    connection: McpConnection
    tools: list[Tool]


class McpLoads:
    """One agent's MCP loads (the agent keeps one; see the module docstring)."""

    def __init__(self) -> None:
        self._records: list[McpLoadRecord] = []
        self._loaded: list[_Loaded] = []

    def status(self) -> list[McpLoadRecord]:
        """Every load call so far, oldest first."""
        return list(self._records)

    def tool_names(self, agent: LoadingAgent) -> list[str]:
        """The names of the loaded tools still registered with ``agent``."""
        registered = agent.get_tools()
        return [
            t.name for entry in self._loaded for t in entry.tools if registered.get(t.name) is t
        ]

    async def load(
        self,
        agent: LoadingAgent,
        config: ConfigInput,
        servers: str | Sequence[str] | None,
        replace: bool,
    ) -> None:
        """Load the tools of ``servers`` (None: all) from ``config`` into ``agent``."""
        label = _label(config)
        asked = (servers,) if isinstance(servers, str) else tuple(servers or ())
        try:
            loaded = load_mcp_config(config)
            selected = loaded.select(servers) if loaded.servers or servers else []
        except McpConfigError as exc:
            self._record("failed", label, asked, (), str(exc))
            raise
        label = loaded.source or label
        await self._drop_invalidated(agent)
        if not selected:
            message = f"No MCP servers configured in {label or 'the given config'}."
            warnings.warn(message, UserWarning, stacklevel=3)
            self._record("unavailable", label, asked, (), message)
            return
        names = tuple(s.name for s in selected)
        opened, failures = await open_servers(selected, agent, None)
        try:
            self._register(agent, opened, replace)
        except Exception as exc:
            await asyncio.gather(*(c.aclose() for c in opened))
            self._record("failed", label, names, (), str(exc))
            raise
        await self._close_replaced(opened, replace)
        new = [t.name for c in opened for t in c.tools()]
        for failure in failures:
            warnings.warn(failure, UserWarning, stacklevel=3)
        status: McpLoadStatus = "failed" if failures else "connected" if new else "empty"
        self._record(status, label, names, tuple(new), "; ".join(failures) or None)

    def _register(self, agent: LoadingAgent, opened: list[McpConnection], replace: bool) -> None:
        new = [t for c in opened for t in c.tools()]
        servers = {c.server for c in opened}
        own = [t for e in self._loaded if e.server in servers for t in e.tools] if replace else []
        swapped = {id(t) for t in own}
        others = {n: t for n, t in agent.get_tools().items() if id(t) not in swapped}
        clashes = taken_names(new, others)
        if clashes:
            raise ToolNameConflictError(
                f"The agent already has tools named {', '.join(clashes)}: a server's tool "
                "never replaces one the agent has (the app's own, or another server's). "
                "Leave that server out, or rename the agent's tool"
                + ("." if replace else "; replace=True reloads a server's own tools.")
            )
        _remove(agent, own)
        agent.register_tools(new)
        for connection in opened:
            self._loaded.append(_Loaded(connection.server, connection, connection.tools()))

    async def _close_replaced(self, opened: list[McpConnection], replace: bool) -> None:
        """Close replaced connections (``replace``) and those with no tools."""
        fresh = {id(c) for c in opened}
        servers = {c.server for c in opened}
        closing = [
            e
            for e in self._loaded
            if (replace and e.server in servers and id(e.connection) not in fresh)
            or (id(e.connection) in fresh and not e.tools)
        ]
        self._loaded = [e for e in self._loaded if e not in closing]
        await asyncio.gather(*(e.connection.aclose() for e in closing))

    async def _drop_invalidated(self, agent: LoadingAgent) -> None:
        """Remove the tools of connections that are no longer connected."""
        dead = [e for e in self._loaded if e.connection.status != "connected"]
        if not dead:
            return
        _remove(agent, [t for e in dead for t in e.tools])
        self._loaded = [e for e in self._loaded if e not in dead]
        await asyncio.gather(*(e.connection.aclose() for e in dead))

    def _record(
        self,
        status: McpLoadStatus,
        config: str | None,
        servers: tuple[str, ...],
        tools: tuple[str, ...],
        error: str | None,
    ) -> None:
        self._records.append(
            McpLoadRecord(
                status=status,
                config=config,
                servers=servers,
                tools=tools,
                loaded_at=datetime.now(UTC),
                error=error,
            )
        )


def taken_names(tools: Iterable[Tool], registered: Iterable[str]) -> list[str]:
    """The names of ``tools`` that a registered tool already has, in ``tools``' order.

    Case is ignored: tool gating ignores it too, and a ``Write_File`` beside the app's
    ``write_file`` would read as the same tool on a card or in an approval.

    Examples:
        >>> from deputy_shiny import tool
        >>> def write_file(path: str) -> str:
        ...     "Pretend to write."
        ...     return path
        >>> taken_names([tool(write_file)], ["Write_File", "read_file"])
        ['write_file']
    """
    have = {name.casefold() for name in registered}
    return [t.name for t in tools if t.name.casefold() in have]


def _remove(agent: LoadingAgent, tools: list[Tool]) -> None:
    """Unregister exactly these tool objects (a same-named unrelated tool stays)."""
    if not tools:
        return
    gone = {id(t) for t in tools}
    kept = [t for t in agent.get_tools().values() if id(t) not in gone]
    if len(kept) != len(agent.get_tools()):
        agent.set_tools(kept)


def _label(config: ConfigInput) -> str | None:
    if isinstance(config, McpConfig):
        return config.source
    if isinstance(config, str | os.PathLike):
        return str(config)
    return None
