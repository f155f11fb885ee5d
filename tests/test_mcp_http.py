"""A streamable HTTP MCP server on localhost: tools over HTTP, ${VAR} headers sent."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

from deputy_shiny import Agent, McpConnection
from deputy_shiny.errors import McpConnectionError
from deputy_shiny.testing import ScriptedModel


@pytest.fixture(scope="module")
def http_server() -> Iterator[tuple[str, list[dict[str, str]]]]:
    server = MCPServer("web")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
    def echo(text: str) -> str:
        """Echo the text."""
        return text

    seen: list[dict[str, str]] = []
    app = server.streamable_http_app()

    async def recording(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            seen.append({k.decode(): v.decode() for k, v in scope["headers"]})
        await app(scope, receive, send)

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = uvicorn.Config(recording, host="127.0.0.1", port=port, log_level="error")
    web = uvicorn.Server(config)
    thread = threading.Thread(target=web.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not web.started:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    yield f"http://127.0.0.1:{port}/mcp", seen
    web.should_exit = True
    thread.join(5)


async def test_tools_over_streamable_http_with_expanded_headers(
    http_server: tuple[str, list[dict[str, str]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, seen = http_server
    monkeypatch.setenv("WEB_TOKEN", "t0ken")
    config = {"mcpServers": {"web": {"url": url, "headers": {"X-Token": "${WEB_TOKEN}"}}}}
    conn = await McpConnection.open(config, "web", Agent(ScriptedModel([])), tools=["echo"])
    try:
        assert await conn.tools()[0].invoke({"text": "over http"}) == "over http"
        assert conn.pid is None
    finally:
        await conn.aclose()
    assert seen and all(h.get("x-token") == "t0ken" for h in seen)


async def test_an_unreachable_url_is_a_connection_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here any more
    config = {"mcpServers": {"gone": {"url": f"http://127.0.0.1:{port}/mcp", "timeout": 5}}}
    with pytest.raises(McpConnectionError, match="'gone'"):
        await McpConnection.open(config, "gone", Agent(ScriptedModel([])))
