"""ask_user: the model asks the user multiple-choice questions in a modal.

- ``ask`` -> one single-choice question (header ``Color``: Red / Blue);
- ``ask two`` -> that question plus a multi-select one (header ``Extras``: Salt /
  Pepper / Lemon).

After the tool result the model says ``Answers: <result>``, so the test sees exactly
what the model was told.
"""

from __future__ import annotations

import threading
from typing import Any

from shiny import App, Inputs, Outputs, Session, ui

from deputy_shiny import Agent, warm_up
from deputy_shiny.shiny import AgentChatContext, agent_chat_server, agent_chat_ui
from deputy_shiny.testing import FunctionModel, Reply, ScriptedReply, ScriptedToolCall
from deputy_shiny.tools import tools_interactive
from tests.e2e.apps._shared import COLOR, last_tool_text, last_user_text, workspace_root

threading.Thread(target=warm_up, name="litellm-warm-up", daemon=True).start()

EXTRAS = {
    "header": "Extras",
    "question": "What should we add?",
    "multi_select": True,
    "options": [
        {"label": "Salt", "description": "A pinch"},
        {"label": "Pepper", "description": "Freshly ground"},
        {"label": "Lemon", "description": "A squeeze"},
    ],
}


def reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
    tool_text = last_tool_text(messages)
    if tool_text is not None:
        return f"Answers: {tool_text}"
    text = last_user_text(messages) or ""
    if text == "ask":
        questions = [COLOR]
    elif text == "ask two":
        questions = [COLOR, EXTRAS]
    else:
        return f"You said: {text}"
    return ScriptedReply(tool_calls=[ScriptedToolCall("ask_user", {"questions": questions})])


def make_agent(ctx: AgentChatContext) -> Agent:
    return Agent(
        FunctionModel(reply),
        tools=tools_interactive(callback=ctx.ask_user),
        working_dir=ctx.working_dir,
        approval_handler=ctx.approval_handler,
    )


app_ui = ui.page_fillable(agent_chat_ui("agent"), title="questions")


def server(input: Inputs, output: Outputs, session: Session) -> None:
    agent_chat_server("agent", make_agent, workspace_root=workspace_root())


app = App(app_ui, server)
