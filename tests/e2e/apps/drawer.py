"""Many conversations per user, in shinychat's history drawer (``KitPersistence``).

The agent keeps its conversations in ``DEPUTY_STORE_URL``'s store (the e2e tests give
it a fresh SQLite file) with the workspaces under the workspace root; every browser
context is a user of its own (an anonymous HttpOnly token). ``write <path> <content>``
calls write_file (approval needed); ``slow`` answers with 400 words, slowly (long
enough to be stopped); anything else is echoed (``You said: ...``).
"""

from __future__ import annotations

import os
import threading
from typing import Any

from shiny import App, Inputs, Outputs, Session, ui

from deputy_shiny import Agent, Permissions, warm_up
from deputy_shiny.shiny import (
    AgentChatContext,
    KitPersistence,
    agent_chat_server,
    agent_chat_ui,
    conversation_panel_server,
    conversation_panel_ui,
)
from deputy_shiny.testing import FunctionModel, Reply, ScriptedReply
from deputy_shiny.tools import tool_write_file
from tests.e2e.apps._shared import last_user_text, numbered_words, workspace_root, write_reply

threading.Thread(target=warm_up, name="litellm-warm-up", daemon=True).start()

PERSISTENCE = KitPersistence(
    workspace_root() / "conversations",
    anonymous=True,
    store=os.environ["DEPUTY_STORE_URL"],
    max_conversations=int(os.environ.get("DEPUTY_E2E_MAX_CONVERSATIONS", "200")),
)
SLOW_TEXT = numbered_words(400, "SLOW-END.")


def reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
    if last_user_text(messages) == "slow":
        return ScriptedReply(SLOW_TEXT, chunk_size=8, delay=0.05)
    return write_reply(messages, tools)


def make_agent(ctx: AgentChatContext) -> Agent:
    return Agent(
        FunctionModel(reply),
        tools=[tool_write_file()],
        permissions=Permissions(approval_tools=("write_file",)),
        **ctx.agent_options(file_checkpointing=True),
    )


def server(input: Inputs, output: Outputs, session: Session) -> None:
    handle = agent_chat_server("agent", make_agent, persistence=PERSISTENCE)
    conversation_panel_server("conversation", handle)


app = App(
    ui.page_sidebar(ui.sidebar(conversation_panel_ui("conversation")), agent_chat_ui("agent")),
    server,
)
