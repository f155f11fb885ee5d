"""The MCP methods every Agent has: load_mcp, mcp_tools, mcp_status.

A mixin of :class:`~deputy_shiny.agent.Agent` (only Agent uses it); the work is done in
:mod:`deputy_shiny.mcp` (:class:`~deputy_shiny.mcp.McpLoads`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Self, cast

from .._util import sync as _sync
from ..mcp.config import ConfigInput as McpConfigInput
from ..mcp.loading import LoadingAgent, McpLoads
from ..mcp.records import McpLoadRecord

__all__ = ["McpMethods"]


class McpMethods:
    """An Agent's MCP methods (mixed into :class:`~deputy_shiny.agent.Agent`)."""

    _mcp: McpLoads | None  # set by Agent.__init__

    if TYPE_CHECKING:

        def _ensure_free(self, action: str) -> None: ...

        def _ensure_idle(self, action: str) -> None: ...

    # ------------------------------------------------------------ MCP

    def load_mcp(
        self,
        config: McpConfigInput = None,
        servers: str | Sequence[str] | None = None,
        replace: bool = False,
    ) -> Self:
        """Load the tools of MCP servers from a config (blocking; see :meth:`load_mcp_async`).

        Example:
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
        self._ensure_free("load MCP tools")
        self._ensure_idle("load MCP tools")
        await self._mcp_loads().load(cast(LoadingAgent, self), config, servers, replace)
        return self

    def mcp_tools(self) -> list[str]:
        """The names of the registered tools :meth:`load_mcp` loaded."""
        return self._mcp_loads().tool_names(cast(LoadingAgent, self))

    def mcp_status(self) -> list[McpLoadRecord]:
        """A record of each :meth:`load_mcp` call: status, servers, tools, time, error."""
        return self._mcp_loads().status()

    def _mcp_loads(self) -> McpLoads:
        if self._mcp is None:
            self._mcp = McpLoads()
        return self._mcp
