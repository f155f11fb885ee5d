"""MCP in the kit: a panel of configured servers and a chat whose model uses their tools.

Configured servers: ``time`` (PyPI ``mcp-server-time``, a real stdio server) and
``broken`` (a command that exits at once). ``DEPUTY_E2E_AUTOCONNECT=time`` connects
``time`` as each session starts (``agent_chat_server(mcp_servers=...)``).
``DEPUTY_E2E_APP_TOOL=convert_time`` gives the agent the app's own tool of that name
(it answers ``the app's own convert_time``), which the server's must never replace.

The model: ``time`` calls ``get_current_time(timezone="UTC")``, ``convert`` calls
``convert_time`` with the arguments the server's tool needs, and then it says ``Tool
said: <result>``; anything else is echoed. Marker after each run:
``tools <session> <this session's time connection id or -> <connection ids of the
agent's MCP tools, comma-separated or ->``.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

from shiny import App, Inputs, Outputs, Session, ui

from deputy_shiny import Agent, HookMatcher, tool, tool_annotations, warm_up
from deputy_shiny.shiny import (
    AgentChatContext,
    agent_chat_server,
    agent_chat_ui,
    mcp_panel_server,
    mcp_panel_ui,
)
from deputy_shiny.testing import FunctionModel, Reply, ScriptedReply, ScriptedToolCall
from deputy_shiny.tools import tool_metadata
from tests.e2e.apps._shared import last_tool_text, last_user_text, mark, workspace_root

threading.Thread(target=warm_up, name="litellm-warm-up", daemon=True).start()

CONFIG = {
    "mcpServers": {
        "time": {
            "command": sys.executable,
            "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"],
        },
        "broken": {"command": sys.executable, "args": ["-c", "import sys; sys.exit(3)"]},
    }
}
AUTOCONNECT = tuple(s for s in os.environ.get("DEPUTY_E2E_AUTOCONNECT", "").split(",") if s)
APP_TOOL = os.environ.get("DEPUTY_E2E_APP_TOOL")
CONVERT = {"source_timezone": "UTC", "time": "12:00", "target_timezone": "UTC"}


def app_tools() -> list[Any]:
    if not APP_TOOL:
        return []

    def own(source_timezone: str = "", time: str = "", target_timezone: str = "") -> str:
        """The app's own tool."""
        return f"the app's own {APP_TOOL}"

    closed = tool_annotations(read_only_hint=True, open_world_hint=False)
    return [tool(own, name=APP_TOOL, description="The app's own tool.", annotations=closed)]


def reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
    tool_text = last_tool_text(messages)
    if tool_text is not None:
        return f"Tool said: {tool_text}"
    text = last_user_text(messages) or ""
    if text == "time":
        call = ScriptedToolCall("get_current_time", {"timezone": "UTC"})
        return ScriptedReply(tool_calls=[call])
    if text == "convert":
        return ScriptedReply(tool_calls=[ScriptedToolCall("convert_time", CONVERT)])
    return f"You said: {text}"


app_ui = ui.page_sidebar(
    ui.sidebar(ui.h6("MCP servers"), mcp_panel_ui("mcp")),
    agent_chat_ui("agent"),
    title="mcp",
)


def server(input: Inputs, output: Outputs, session: Session) -> None:
    handle: Any = None

    def on_stop(*_: object) -> None:
        connection = handle.mcp.connection("time")
        agent_ids = sorted(
            {
                str(tool_metadata(t)["source"].get("connection_id"))
                for t in handle.agent.get_tools().values()
                if tool_metadata(t)["source"]["type"] == "mcp"
            }
        )
        own = connection.id if connection is not None else "-"
        mark("tools", session.id, own, ",".join(agent_ids) or "-")

    def make_agent(ctx: AgentChatContext) -> Agent:
        return Agent(
            FunctionModel(reply),
            tools=app_tools(),
            working_dir=ctx.working_dir,
            approval_handler=ctx.approval_handler,
            hooks=[HookMatcher("Stop", on_stop)],
            session_id=ctx.session_id,
        )

    handle = agent_chat_server(
        "agent",
        make_agent,
        workspace_root=workspace_root(),
        mcp_config=CONFIG,
        mcp_servers=AUTOCONNECT,
    )
    mcp_panel_server("mcp", handle)


app = App(app_ui, server)
