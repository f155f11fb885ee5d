"""run_python in the kit: each session's interpreter ends with its browser session.

The user's message ``python <code>`` makes the model call ``run_python(code)``; after
the result the model says ``Tool said: <output>``. The test starts a child process in
the session's interpreter, closes the tab and checks from the host that nothing of it
is left.
"""

from __future__ import annotations

import threading
from typing import Any

from shiny import App, Inputs, Outputs, Session, ui

from deputy_shiny import Agent, Permissions, warm_up
from deputy_shiny.shiny import AgentChatContext, agent_chat_server, agent_chat_ui
from deputy_shiny.testing import FunctionModel, Reply, ScriptedReply, ScriptedToolCall
from deputy_shiny.tools import tool_run_python
from tests.e2e.apps._shared import last_tool_text, last_user_text, workspace_root

threading.Thread(target=warm_up, name="litellm-warm-up", daemon=True).start()

SHARED_TOOL = tool_run_python()  # one tool object for every session: state stays apart


def reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
    result = last_tool_text(messages)
    if result is not None:
        return f"Tool said: {result}"
    text = last_user_text(messages) or ""
    if text.startswith("python "):
        code = text.removeprefix("python ")
        return ScriptedReply(tool_calls=[ScriptedToolCall("run_python", {"code": code})])
    return f"echo: {text}"


def make_agent(ctx: AgentChatContext) -> Agent:
    return Agent(
        FunctionModel(reply),
        tools=[SHARED_TOOL],
        working_dir=ctx.working_dir,
        permissions=Permissions(run_python=True),
    )


app_ui = ui.page_fillable(agent_chat_ui("agent"), title="python session")


def server(input: Inputs, output: Outputs, session: Session) -> None:
    agent_chat_server("agent", make_agent, workspace_root=workspace_root())


app = App(app_ui, server)
