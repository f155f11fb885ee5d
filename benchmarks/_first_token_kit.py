"""first_token.py's kit app: ``agent_chat_server`` on a deterministic model.

The model streams the same chunks, with the same delay, as the minimal app. The app
never calls ``warm_up()``: the kit starts importing litellm itself as the app starts.
"""

from __future__ import annotations

from typing import Any

from _first_token_reply import CHUNK_DELAY, CHUNK_SIZE, reply_text
from shiny import App, Inputs, Outputs, Session, ui

from deputy_shiny import Agent
from deputy_shiny.shiny import AgentChatContext, agent_chat_server, agent_chat_ui
from deputy_shiny.testing import FunctionModel, ScriptedReply


def reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ScriptedReply:
    return ScriptedReply(text=reply_text(), chunk_size=CHUNK_SIZE, delay=CHUNK_DELAY)


def make_agent(ctx: AgentChatContext) -> Agent:
    return Agent(FunctionModel(reply), working_dir=ctx.working_dir)


def server(input: Inputs, output: Outputs, session: Session) -> None:
    agent_chat_server("chat", make_agent)


app = App(ui.page_fillable(agent_chat_ui("chat")), server)
