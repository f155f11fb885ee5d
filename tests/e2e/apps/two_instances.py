"""Two kit instances in an existing-looking host app, plus the permission-mode select.

A navbar page with the host's own ``input_text("note")`` echoed to
``output_text("echo")``, and two chats, ``left`` and ``right``, each with its own
agent. In either chat the message ``write <path> <content>`` makes the model call
``write_file(path, content)`` (which always needs approval); after the tool result it
says ``Tool said: <result>``. Anything else is echoed. Each instance's workspace is
shown in ``output_text("<id>_dir")``. ``permission_mode_ui("mode")`` switches the
``left`` agent's permission mode.
"""

from __future__ import annotations

import re
import threading
from typing import Any

from shiny import App, Inputs, Outputs, Session, render, ui

from deputy_shiny import Agent, warm_up
from deputy_shiny.permissions import Permissions
from deputy_shiny.shiny import (
    AgentChatContext,
    agent_chat_server,
    agent_chat_ui,
    permission_mode_server,
    permission_mode_ui,
)
from deputy_shiny.testing import FunctionModel, Reply, ScriptedReply, ScriptedToolCall
from deputy_shiny.tools import tool_write_file
from tests.e2e.apps._shared import last_tool_text, last_user_text, workspace_root

threading.Thread(target=warm_up, name="litellm-warm-up", daemon=True).start()

WRITE = re.compile(r"^write (\S+) (\S+)$")


def reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
    tool_text = last_tool_text(messages)
    if tool_text is not None:
        return f"Tool said: {tool_text}"
    text = last_user_text(messages) or ""
    match = WRITE.match(text)
    if match:
        call = ScriptedToolCall("write_file", {"path": match[1], "content": match[2]})
        return ScriptedReply(tool_calls=[call])
    return f"You said: {text}"


def make_agent(ctx: AgentChatContext) -> Agent:
    return Agent(
        FunctionModel(reply),
        tools=[tool_write_file()],
        working_dir=ctx.working_dir,
        permissions=Permissions(approval_tools=("write_file",)),
        approval_handler=ctx.approval_handler,
    )


app_ui = ui.page_navbar(
    ui.nav_panel(
        "Agents",
        ui.input_text("note", "Host note"),
        ui.output_text("echo"),
        permission_mode_ui("mode"),
        ui.layout_columns(
            ui.card(
                ui.card_header("Left"),
                ui.output_text("left_dir"),
                agent_chat_ui("left", height="360px"),
            ),
            ui.card(
                ui.card_header("Right"),
                ui.output_text("right_dir"),
                agent_chat_ui("right", height="360px"),
            ),
        ),
    ),
    title="Host app",
)


def server(input: Inputs, output: Outputs, session: Session) -> None:
    left = agent_chat_server("left", make_agent, workspace_root=workspace_root())
    right = agent_chat_server("right", make_agent, workspace_root=workspace_root())
    assert left.agent is not None
    permission_mode_server("mode", left.agent)

    @render.text
    def echo() -> str:
        return f"Echo: {input.note()}"

    @render.text
    def left_dir() -> str:
        return str(left.working_dir)

    @render.text
    def right_dir() -> str:
        return str(right.working_dir)


app = App(app_ui, server)
