"""An MCP server's images in the chat (#37), served under a Content-Security-Policy that
lets images come only from the app itself and ``data:`` URLs.

The session connects ``media`` (``tests/mcp_media_server.py``, a real stdio server) as
it starts (the MCP panel shows when it is connected). ``plot`` -> the model calls the
server's ``plot`` (a caption and a 2x1 PNG);
``hostile`` -> its ``hostile`` (an SVG with scripts declared as an image, a PNG
declared as JPEG, markup as text). Then the model says ``Done: I saw <n> image(s).
END-<tool>``.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

from shiny import App, Inputs, Outputs, Session, ui

from deputy_shiny import Agent, warm_up
from deputy_shiny.shiny import (
    AgentChatContext,
    agent_chat_server,
    agent_chat_ui,
    mcp_panel_server,
    mcp_panel_ui,
)
from deputy_shiny.testing import FunctionModel, ScriptedReply, ScriptedToolCall
from tests.e2e.apps._shared import last_tool_text, last_user_text, workspace_root

threading.Thread(target=warm_up, name="litellm-warm-up", daemon=True).start()

SERVER = Path(__file__).resolve().parents[2] / "mcp_media_server.py"
CONFIG = {"mcpServers": {"media": {"command": sys.executable, "args": [str(SERVER)]}}}
CSP = "img-src 'self' data:"

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


def reply(messages: list[dict[str, Any]], tools: Any) -> Any:
    last = messages[-1].get("content") if messages else None
    if isinstance(last, list):  # the images the tool returned follow its result
        seen = sum(1 for part in last if part.get("type") == "image_url")
        return f"Done: I saw {seen} image(s). END-plot"
    if last_tool_text(messages) is not None:
        return "Done: I saw 0 image(s). END-hostile"
    text = last_user_text(messages) or ""
    if text in ("plot", "hostile"):
        return ScriptedReply(tool_calls=[ScriptedToolCall(text, {})])
    return "Say plot or hostile."


def make_agent(ctx: AgentChatContext) -> Agent:
    return Agent(FunctionModel(reply), working_dir=ctx.working_dir)


app_ui = ui.page_sidebar(
    ui.sidebar(ui.h6("MCP servers"), mcp_panel_ui("mcp")),
    agent_chat_ui("agent"),
    title="mcp images",
)


def server(input: Inputs, output: Outputs, session: Session) -> None:
    handle = agent_chat_server(
        "agent",
        make_agent,
        workspace_root=workspace_root(),
        mcp_config=CONFIG,
        mcp_servers=("media",),
    )
    mcp_panel_server("mcp", handle)  # the test waits for the server's "connected"


shiny_app = App(app_ui, server)


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    """The app, each HTTP response carrying the CSP (what a deployment may send)."""
    if scope["type"] != "http":
        await shiny_app(scope, receive, send)  # type: ignore[arg-type]
        return

    async def send_with_csp(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            headers = list(message.get("headers", []))
            headers.append((b"content-security-policy", CSP.encode()))
            message["headers"] = headers
        await send(message)

    await shiny_app(scope, receive, send_with_csp)  # type: ignore[arg-type]
