"""Branches: editing a past message, with file checkpoints on.

``write <path> <content>`` makes the model call ``write_file`` (allowed without asking);
``launch <name>`` calls ``launch``, which always needs approval and, when it runs, leaves
the marker ``launched <session> <name>``. After a tool result the model says
``Tool said: <result> Workspace: <working dir>``; anything else is echoed ("You said:").

``DEPUTY_STORE_URL`` set: the conversation is saved (``KitPersistence`` in that store,
anonymous users), its checkpoint journal too.
"""

from __future__ import annotations

import os
import re
import threading
from typing import Any

from shiny import App, Inputs, Outputs, Session, ui

from deputy_shiny import Agent, Permissions, tool, warm_up
from deputy_shiny.shiny import (
    AgentChatContext,
    KitPersistence,
    agent_chat_server,
    agent_chat_ui,
)
from deputy_shiny.testing import FunctionModel, Reply, ScriptedReply, ScriptedToolCall
from deputy_shiny.tools import tool_write_file
from tests.e2e.apps._shared import last_user_text, mark, workspace_root, write_reply

threading.Thread(target=warm_up, name="litellm-warm-up", daemon=True).start()

LAUNCH = re.compile(r"^launch (\S+)$")
_STORE = os.environ.get("DEPUTY_STORE_URL")
PERSISTENCE = (
    None
    if not _STORE
    else KitPersistence(workspace_root() / "conversations", anonymous=True, store=_STORE)
)


def make_agent(ctx: AgentChatContext) -> Agent:
    session = ctx.session_id

    def launch(name: str) -> str:
        """Launch the named thing (it always asks first)."""
        mark("launched", session, name)
        return f"launched {name}"

    def reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
        match = LAUNCH.match(last_user_text(messages) or "")
        if match:
            return ScriptedReply(tool_calls=[ScriptedToolCall("launch", {"name": match[1]})])
        return write_reply(messages, tools, workspace=ctx.working_dir)

    return Agent(
        FunctionModel(reply),
        tools=[tool_write_file(), tool(launch, annotations={"open_world_hint": False})],
        permissions=Permissions(
            approval_tools=("launch",), tool_allowlist=("write_file", "launch")
        ),
        **ctx.agent_options(file_checkpointing=True),
    )


app_ui = ui.page_fillable(agent_chat_ui("agent"), title="branches")


def server(input: Inputs, output: Outputs, session: Session) -> None:
    agent_chat_server("agent", make_agent, workspace_root=workspace_root(), persistence=PERSISTENCE)


app = App(app_ui, server)
