"""An approval nobody answers: ``approval_timeout=1.5`` denies it.

The user's message ``write <path> <content>`` makes the model call
``write_file(path, content)`` (which always needs approval); after the tool result the
model says ``Tool said: <result>``. The session's workspace is shown in
``output_text("workspace")``.
"""

from __future__ import annotations

import re
import threading
from typing import Any

from shiny import App, Inputs, Outputs, Session, render, ui

from deputy_shiny import Agent, warm_up
from deputy_shiny.permissions import Permissions
from deputy_shiny.shiny import AgentChatContext, agent_chat_server, agent_chat_ui
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


app_ui = ui.page_fillable(
    ui.output_text("workspace"), agent_chat_ui("agent"), title="approval timeout"
)


def server(input: Inputs, output: Outputs, session: Session) -> None:
    handle = agent_chat_server(
        "agent", make_agent, workspace_root=workspace_root(), approval_timeout=1.5
    )

    @render.text
    def workspace() -> str:
        return str(handle.working_dir)


app = App(app_ui, server)
