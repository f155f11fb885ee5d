"""An Agent as a plain shinychat ``Chat``'s client (``Chat("chat", client=agent)``), as an
ellmer chat is in R: shinychat calls ``await agent.stream_async(text, content="all",
controller=...)`` for each message and keeps the conversation in the agent.

The model answers ``You said <text> (<n> messages so far)``, ``<n>`` counting the user
messages it was sent, so a second message shows the first was kept.
"""

from __future__ import annotations

from typing import Any

from shiny import App, Inputs, Outputs, Session, ui
from shinychat import Chat, chat_ui

import deputy_shiny.shiny  # noqa: F401 - registers the inert renderers with shinychat
from deputy_shiny import Agent, warm_up
from deputy_shiny.testing import FunctionModel, ScriptedReply
from tests.e2e.apps._shared import last_user_text

warm_up()


def reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ScriptedReply:
    users = [m for m in messages if m.get("role") == "user"]
    text = last_user_text(users[-1:]) or ""
    return ScriptedReply(f"You said {text} ({len(users)} messages so far)", chunk_size=5)


app_ui = ui.page_fillable(chat_ui("chat"), title="shinychat client")


def server(input: Inputs, output: Outputs, session: Session) -> None:
    # shinychat's annotation names chatlas's Chat; the Agent has the shape it calls.
    agent: Any = Agent(FunctionModel(reply))
    Chat("chat", client=agent, history=False)


app = App(app_ui, server)
