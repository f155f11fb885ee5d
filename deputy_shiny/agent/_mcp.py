"""MCP: the :class:`McpTools` component and the Agent methods over it (load_mcp,
mcp_tools, mcp_status).

The work is done in :mod:`deputy_shiny.mcp` (:class:`~deputy_shiny.mcp.McpLoads`, made on
first use); the Agent holds one :class:`McpTools`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Self, cast

from .._util import sync as _sync
from ..mcp.config import ConfigInput as McpConfigInput
from ..mcp.loading import LoadingAgent, McpLoads
from ..mcp.records import McpLoadRecord
from ._guard import Guard

__all__ = ["McpMethods", "McpTools"]


class McpTools:
    """One agent's MCP loads (``guard``: the agent's; loading waits for it to be free)."""

    def __init__(self, guard: Guard) -> None:
        self._guard = guard
        self._loads: McpLoads | None = None

    def loads(self) -> McpLoads:
        """The loads so far (made on first use)."""
        if self._loads is None:
            self._loads = McpLoads()
        return self._loads

    async def load(
        self,
        agent: LoadingAgent,
        config: McpConfigInput,
        servers: str | Sequence[str] | None,
        replace: bool,
    ) -> None:
        """Load servers' tools into ``agent`` (this component's agent)."""
        self._guard.ready("load MCP tools")
        await self.loads().load(agent, config, servers, replace)


class McpMethods:
    """An Agent's MCP methods, façades over its :class:`McpTools`."""

    _mcp: McpTools  # made by Agent.__init__

    # ------------------------------------------------------------ MCP

    def load_mcp(
        self,
        config: McpConfigInput = None,
        servers: str | Sequence[str] | None = None,
        replace: bool = False,
    ) -> Self:
        """Load the tools of MCP servers from a config (blocking; see :meth:`load_mcp_async`).

        Examples:
            >>> import warnings
            >>> from deputy_shiny import Agent
            >>> from deputy_shiny.testing import ScriptedModel
            >>> agent = Agent(ScriptedModel([]))
            >>> with warnings.catch_warnings(action="ignore"):
            ...     _ = agent.load_mcp({"mcpServers": {}})
            >>> agent.mcp_status()[0].status, agent.mcp_tools()
            ('unavailable', [])
        """
        return _sync.run_sync(self.load_mcp_async(config, servers, replace), "load_mcp")

    async def load_mcp_async(
        self,
        config: McpConfigInput = None,
        servers: str | Sequence[str] | None = None,
        replace: bool = False,
    ) -> Self:
        """Load the tools of MCP servers (``servers``: exact names; None: all configured).

        ``config`` is a path, a dict or an ``McpConfig`` (None: ``$DEPUTY_MCP_CONFIG``
        or ``~/.config/mcptools/config.json``). The servers stop when the agent is
        closed. ``replace=True`` swaps the tools loaded earlier from these servers
        (dropping those a server no longer offers); with ``replace=False`` a clash with
        them is an error. A clash with any other tool (the app's own, another server's)
        is always a ``ToolNameConflictError``: a server's tool never replaces one the
        agent has. A server that fails is skipped with a warning; tools of connections
        that have since closed are removed. :meth:`mcp_status` records every call.
        """
        await self._mcp.load(cast(LoadingAgent, self), config, servers, replace)
        return self

    def mcp_tools(self) -> list[str]:
        """The names of the registered tools :meth:`load_mcp` loaded."""
        return self._mcp.loads().tool_names(cast(LoadingAgent, self))

    def mcp_status(self) -> list[McpLoadRecord]:
        """A record of each :meth:`load_mcp` call: status, servers, tools, time, error."""
        return self._mcp.loads().status()
