"""The MCP connections of one browser session: ``handle.mcp`` (and ``ctx.mcp``).

Every connection made here belongs to this session's agent: its tools join that agent
only, its server process is this session's own (two sessions connecting the same
configured server start two processes), and it closes when the session ends. A
server's tool named like one the agent already has (the app's own, or another
server's) is refused, never swapped in: the rest of that server's tools load, the
panel lists the refused names and the chat is told. Servers
start on the MCP loop (a thread of its own), so connecting never holds up the page
or another session; the panel and the chat learn how it went through
:attr:`SessionMcp.version`, a reactive counter set only for the moment of the change.

Examples:
    >>> SessionMcp(None).configured
    ()
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field
from shiny import reactive

from ..errors import McpError
from ..mcp import McpConnection, load_mcp_config
from ..mcp.config import ConfigInput, McpConfig
from ..mcp.loading import taken_names

if TYPE_CHECKING:
    from ..agent import Agent

logger = logging.getLogger(__name__)

McpServerState = Literal["not connected", "connecting", "connected", "failed", "closed"]


class McpServerView(BaseModel):
    """One configured server as this session sees it (what the MCP panel shows).

    Examples:
        >>> McpServerView(server="time", state="connecting").tools
        0
    """

    model_config = ConfigDict(frozen=True)

    server: str
    state: McpServerState = "not connected"
    tools: int = Field(default=0, description="How many of its tools the agent has.")
    error: str | None = Field(default=None, description="The last error, if any.")
    refused: tuple[str, ...] = Field(
        default=(),
        description="Its tools refused because the agent already has a tool by that name.",
    )


class SessionMcp:
    """This browser session's MCP connections (``handle.mcp``, ``ctx.mcp``).

    Args:
        config: The app's MCP config (path, dict or :class:`~deputy_shiny.mcp.McpConfig`),
            or None for none: then :meth:`connect` needs servers it cannot find.
        on_failure: Called (awaited) with a message when a connection fails or some of
            its tools are refused, e.g. to tell the chat. The message is plain text
            quoting the server's error (escape it for wherever it is shown).

    Examples:
        >>> mcp = SessionMcp({"mcpServers": {"time": {"command": "mcp-server-time"}}})
        >>> mcp.configured, mcp.views()[0].state
        (('time',), 'not connected')
    """

    def __init__(
        self,
        config: ConfigInput | McpConfig | None,
        on_failure: Callable[[str], Awaitable[None]] | None = None,
    ) -> None:
        self._config = load_mcp_config(config) if config is not None else None
        self._on_failure = on_failure
        self._agent: Agent | None = None
        self._connections: dict[str, McpConnection] = {}
        self._views: dict[str, McpServerView] = {
            name: McpServerView(server=name) for name in self.configured
        }
        self._closed = False
        self._changes = 0  # a plain count: tasks may not read reactive values
        self.version = reactive.value(0, name="deputy_mcp_version")

    @property
    def configured(self) -> tuple[str, ...]:
        """The server names in the app's config, in its order."""
        return () if self._config is None else self._config.names()

    def views(self) -> list[McpServerView]:
        """Every configured (or connected) server with its state, tool count and error."""
        return list(self._views.values())

    def check_server(self, server: str) -> None:
        """Raise if ``server`` is not in the app's config (no connection is made)."""
        if self._config is None:
            raise McpError("the app has no MCP config (agent_chat_server(mcp_config=...))")
        self._config.server(server)

    def connection(self, server: str) -> McpConnection | None:
        """The live connection to ``server``, if this session has one."""
        return self._connections.get(server)

    def bind(self, agent: Agent) -> None:
        """Attach the session's agent (the kit does this right after the factory)."""
        self._agent = agent

    async def connect(
        self,
        server: str,
        *,
        tools: Sequence[str] | None = None,
        resources: Sequence[str] = (),
        prompts: Sequence[str] = (),
        timeout: float | None = None,  # noqa: ASYNC109 (the connection's limit)
    ) -> McpConnection:
        """Connect ``server`` for this session and give its tools to the session's agent.

        ``tools=None`` allows every tool the server offers when it connects; a list
        allows exactly those. A server already connected is disconnected first, so its
        old tools never linger beside the new ones. A tool named like one the agent
        already has (case ignored) is refused; the others join, and the view's
        ``refused`` and ``on_failure`` say which were left out.

        Raises:
            McpError: the session has ended, or the server is unknown or failed to start
                (the state says ``failed`` and the chat is told).
        """
        if self._closed:
            raise McpError("this browser session has ended; it cannot connect servers")
        agent = self._agent
        if agent is None:
            raise McpError("connect MCP servers after the agent exists (not in its factory)")
        if self._config is None:
            raise McpError("the app has no MCP config (agent_chat_server(mcp_config=...))")
        await self.disconnect(server)
        await self._show(server, state="connecting", tools=0, error=None, refused=())
        connection: McpConnection | None = None
        try:
            config = self._config.server(server)
            if tools is None:
                # Owned on the app's loop (it outlives every session): calls skip the hop
                # to the MCP loop thread.
                connection = await McpConnection.open_all_tools(
                    config, agent, timeout, loop="current"
                )
            else:
                connection = await McpConnection.open(
                    self._config,
                    server,
                    agent,
                    tools=tools,
                    resources=resources,
                    prompts=prompts,
                    timeout=timeout,
                    loop="current",
                )
            if self._closed:  # the session ended while the server started (closed below)
                raise McpError("this browser session ended while the server started")
            # Never replace=True: a server's "read-only" write_file would take the
            # app's place, skip its approval and get the file's content.
            refused = taken_names(connection.tools(), agent.get_tools())
            accepted = [t for t in connection.tools() if t.name not in refused]
            agent.register_tools(accepted)
        except Exception as exc:
            if connection is not None:  # it connected, but its tools did not join
                await connection.aclose()
            message = str(exc) or type(exc).__name__
            await self._show(server, state="failed", error=message)
            if self._on_failure is not None and not self._closed:
                await self._on_failure(f"MCP server {server} failed to connect: {message}")
            if isinstance(exc, McpError):
                raise
            raise McpError(f"MCP server {server!r} failed to connect: {message}") from exc
        self._connections[server] = connection
        await self._show(
            server, state="connected", tools=len(accepted), error=None, refused=tuple(refused)
        )
        if refused and self._on_failure is not None:
            names = ", ".join(refused)  # plain text: the caller escapes it for the chat
            rest = "Its other tools loaded." if accepted else "None of its tools loaded."
            await self._on_failure(
                f"MCP server {server}: refused {names}, because the agent already has a "
                f"tool by that name (a server's tool never replaces one). {rest}"
            )
        return connection

    async def disconnect(self, server: str) -> None:
        """Close this session's connection to ``server`` and take its tools away."""
        connection = self._connections.pop(server, None)
        if connection is None:
            return
        self._remove_tools(connection)
        await connection.aclose()
        await self._show(server, state="closed", tools=0, refused=())

    async def aclose(self) -> None:
        """Close every connection (the session ended); later connects fail, and the
        agent is let go (so the ended session's objects are freed by reference count,
        not left for a full garbage collection)."""
        self._closed = True
        for server in list(self._connections):
            connection = self._connections.pop(server)
            try:
                await connection.aclose()
            except Exception:  # one failing close must not keep the others open
                logger.warning("closing MCP server %r failed", server, exc_info=True)
        self._agent = None

    def _remove_tools(self, connection: McpConnection) -> None:
        agent = self._agent
        if agent is None:
            return
        theirs = {id(t) for t in connection.tools()}
        kept = [t for t in agent.get_tools().values() if id(t) not in theirs]
        agent.set_tools(kept)

    async def _show(self, server: str, **changes: object) -> None:
        view = self._views.get(server) or McpServerView(server=server)
        self._views[server] = view.model_copy(update=changes)
        if self._closed:
            return
        # Set from a task, not an effect: hold Shiny's lock only for the set.
        async with reactive.lock():
            self._changes += 1
            self.version.set(self._changes)
            await reactive.flush()


__all__ = ["McpServerState", "McpServerView", "SessionMcp"]
