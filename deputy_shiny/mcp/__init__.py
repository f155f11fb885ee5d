"""MCP: tools, resources and prompts from Model Context Protocol servers.

- :func:`load_mcp_config` reads the common ``{"mcpServers": {...}}`` configuration.
- :func:`tools_mcp` / :func:`tools_mcp_async` return every tool of the chosen servers.
- ``agent.load_mcp(...)``, ``agent.mcp_tools()`` and ``agent.mcp_status()`` load
  them into an agent, whose ``close()`` stops their servers.
- :class:`McpConnection` is one agent's own connection, limited to allowlisted tools,
  resources and prompts.
- :func:`tools_mcp_repl`, :func:`mcp_repl_connection` and :func:`mcp_repl_control`:
  sandboxed Python through mcp-repl (:mod:`deputy_shiny.mcp.repl`).

Importing this package does not import the MCP SDK; connecting does.

Examples:
    >>> load_mcp_config({"mcpServers": {"time": {"command": "mcp-server-time"}}}).names()
    ('time',)
"""

from ..errors import (
    McpBusyError,
    McpConfigError,
    McpConnectionError,
    McpError,
    McpReplConfigError,
    McpTimeoutError,
    McpUnknownServerError,
)
from ._convert import RejectedTool
from ._owner import McpStatus
from ._process import live_server_pids
from .config import (
    DEFAULT_MCP_CONFIG,
    DEFAULT_MCP_TIMEOUT,
    MCP_CONFIG_ENV,
    McpConfig,
    McpHttpServer,
    McpInProcessServer,
    McpServerConfig,
    McpStdioServer,
    default_config_path,
    load_mcp_config,
)
from .connection import McpConnection, McpOwnerAgent
from .loading import McpLoads
from .records import McpLoadRecord, McpLoadStatus, McpPage, McpPromptMessage
from .repl import (
    MCP_REPL_TOOL,
    McpReplConnection,
    ReplControl,
    ReplSandbox,
    mcp_repl_connection,
    mcp_repl_connection_async,
    mcp_repl_control,
    mcp_repl_control_async,
    mcp_repl_server,
    tools_mcp_repl,
    tools_mcp_repl_async,
)
from .tools import tools_mcp, tools_mcp_async

__all__ = [
    "DEFAULT_MCP_CONFIG",
    "DEFAULT_MCP_TIMEOUT",
    "MCP_CONFIG_ENV",
    "MCP_REPL_TOOL",
    "McpBusyError",
    "McpConfig",
    "McpConfigError",
    "McpConnection",
    "McpConnectionError",
    "McpError",
    "McpHttpServer",
    "McpInProcessServer",
    "McpLoadRecord",
    "McpLoadStatus",
    "McpLoads",
    "McpOwnerAgent",
    "McpPage",
    "McpPromptMessage",
    "McpReplConfigError",
    "McpReplConnection",
    "McpServerConfig",
    "McpStatus",
    "McpStdioServer",
    "McpTimeoutError",
    "McpUnknownServerError",
    "RejectedTool",
    "ReplControl",
    "ReplSandbox",
    "default_config_path",
    "live_server_pids",
    "load_mcp_config",
    "mcp_repl_connection",
    "mcp_repl_connection_async",
    "mcp_repl_control",
    "mcp_repl_control_async",
    "mcp_repl_server",
    "tools_mcp",
    "tools_mcp_async",
    "tools_mcp_repl",
    "tools_mcp_repl_async",
]
