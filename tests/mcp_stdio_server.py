"""A stdio MCP server whose tools misbehave on purpose (run: ``python mcp_stdio_server.py``).

``die`` exits mid-call, ``environment`` reports what the process sees, ``sleep``
outlives timeouts, ``pid`` says which process answers. It imports only the MCP SDK:
a stdio server gets a scrubbed environment (no PYTHONPATH).
"""

from __future__ import annotations

import asyncio
import os

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

READ_ONLY = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, open_world_hint=False, idempotent_hint=True
)

server = MCPServer("faulty")


@server.tool(annotations=READ_ONLY)
def die() -> str:
    """Exit the server process in the middle of the call."""
    os._exit(3)


@server.tool(annotations=READ_ONLY)
def environment() -> dict[str, str]:
    """The environment the server process sees."""
    return dict(os.environ)


@server.tool(annotations=READ_ONLY)
async def sleep(seconds: float) -> str:
    """Sleep, then answer."""
    await asyncio.sleep(seconds)
    return "slept"


@server.tool(annotations=READ_ONLY)
def pid() -> int:
    """The server's process id."""
    return os.getpid()


if __name__ == "__main__":
    server.run()
