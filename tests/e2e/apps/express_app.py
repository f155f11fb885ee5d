"""The kit in a Shiny Express app: the module's UI and server called in the app body.

The model streams ``Express says: <message>`` and then ``word 001, ... END.`` in small
chunks.
"""

from __future__ import annotations

import threading
from typing import Any

from shiny.express import ui

from deputy_shiny import Agent, warm_up
from deputy_shiny.shiny import AgentChatContext, agent_chat_server, agent_chat_ui
from deputy_shiny.testing import FunctionModel, Reply, ScriptedReply
from tests.e2e.apps._shared import last_user_text, numbered_words, workspace_root

threading.Thread(target=warm_up, name="litellm-warm-up", daemon=True).start()

ui.page_opts(title="express", fillable=True)


def reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
    text = f"Express says: {last_user_text(messages) or ''} {numbered_words(12, 'END.')}"
    return ScriptedReply(text, chunk_size=6, delay=0.03)


def make_agent(ctx: AgentChatContext) -> Agent:
    return Agent(
        FunctionModel(reply), working_dir=ctx.working_dir, approval_handler=ctx.approval_handler
    )


agent_chat_ui("chat")

handle = agent_chat_server("chat", make_agent, workspace_root=workspace_root())
