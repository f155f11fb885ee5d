"""Feedback on replies (``agent_chat_ui(id, feedback=True)``), stored in an SQLite store.

The conversations and ratings are kept in ``$DEPUTY_STORE_URL`` (a test's SQLite file)
under the record key ``$DEPUTY_RECORD_KEY``, so the test reads and exports them with
the same key. "list" makes the model call ``list_files`` first; every reply is
``You said: <message>`` and costs $0.01 a request. Each accepted rating is marked
(``feedback <rating> <comment>``) by the app's ``on_feedback`` callback.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from shiny import App, Inputs, Outputs, Session, ui

from deputy_shiny import Agent, warm_up
from deputy_shiny.feedback import FeedbackRecord
from deputy_shiny.shiny import AgentChatContext, KitPersistence, agent_chat_server, agent_chat_ui
from deputy_shiny.testing import FunctionModel, Reply, ScriptedReply, ScriptedToolCall
from deputy_shiny.tools import tool_list_files
from tests.e2e.apps._shared import last_tool_text, last_user_text, mark, workspace_root

threading.Thread(target=warm_up, name="litellm-warm-up", daemon=True).start()

PERSISTENCE = KitPersistence(
    workspace_root() / "conversations", store=os.environ["DEPUTY_STORE_URL"], anonymous=True
)


def reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
    if last_tool_text(messages) is not None:
        return ScriptedReply(text="Listed the files.", cost=0.01)
    text = last_user_text(messages) or ""
    if text == "list":
        return ScriptedReply(tool_calls=[ScriptedToolCall("list_files", {})], cost=0.01)
    return ScriptedReply(text=f"You said: {text}", cost=0.01)


def make_agent(ctx: AgentChatContext) -> Agent:
    return Agent(FunctionModel(reply), tools=[tool_list_files()], **ctx.agent_options())


app_ui = ui.page_fillable(agent_chat_ui("chat", feedback=True), title="feedback")


def server(input: Inputs, output: Outputs, session: Session) -> None:
    handle = agent_chat_server("chat", make_agent, persistence=PERSISTENCE)

    def noted(record: FeedbackRecord) -> None:
        mark("feedback", record.rating, record.comment)

    handle.on_feedback(noted)


app = App(app_ui, server)
