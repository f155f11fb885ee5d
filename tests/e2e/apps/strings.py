"""Another language: the kit in German through one ``KitStrings``, with a hostile string.

A sidebar holds the conversation panel, the permission mode and the MCP panel (no
server configured), beside the chat; every kit call gets the same ``STRINGS``. A few
strings carry ``HOSTILE`` markup, which must show as text. The model, by the user's
text: ``write <path> <content>`` calls ``write_file`` (which needs approval), ``ask``
calls ``ask_user``; anything else is echoed. The app's button ``again`` sends a
message through the handle (while a run waits: the busy note).
"""

from __future__ import annotations

import threading
from typing import Any

from shiny import App, Inputs, Outputs, Session, reactive, ui

from deputy_shiny import Agent, Permissions, warm_up
from deputy_shiny.shiny import (
    AgentChatContext,
    KitStrings,
    agent_chat_server,
    agent_chat_ui,
    conversation_panel_server,
    conversation_panel_ui,
    mcp_panel_server,
    mcp_panel_ui,
    permission_mode_server,
    permission_mode_ui,
)
from deputy_shiny.testing import FunctionModel, Reply, ScriptedReply, ScriptedToolCall
from deputy_shiny.tools import tool_write_file, tools_interactive
from tests.e2e.apps._shared import COLOR, last_user_text, workspace_root, write_reply

threading.Thread(target=warm_up, name="litellm-warm-up", daemon=True).start()

HOSTILE = "<img src=x onerror=alert(1)>"

STRINGS = KitStrings(
    input_placeholder="Frag den Agenten etwas",
    approval_title="{tool} erlauben?",
    why=f"{HOSTILE} Warum:",
    deny_message_label="Nachricht an das Modell beim Ablehnen (optional)",
    approve="Genehmigen",
    deny="Ablehnen",
    always_allow="Immer erlauben",
    stop_run="Lauf beenden",
    question_title="Der Agent hat eine Frage",
    other_answer="Andere Antwort (selbst schreiben)",
    submit="Absenden",
    cancel="Abbrechen",
    framed=f"{HOSTILE} Diese App ist in eine fremde Seite eingebettet: hier wird nichts "
    "entschieden.",
    busy=f"{HOSTILE} Der Agent arbeitet noch; erst stoppen oder warten.",
    usage_line="Anfragen: {requests} · Tokens: {tokens} · Werkzeugaufrufe: {tool_calls} · "
    "Kosten: {cost}",
    new_conversation=f"{HOSTILE} Neues Gespräch",
    download_conversation="Gespräch herunterladen",
    rewind_heading="Dateien zurücksetzen",
    rewind="Zurücksetzen",
    no_checkpoints="Noch keine Dateiänderungen.",
    checkpoint_run="Beginn von Lauf {number}",
    changes_after_one="1 Dateiänderung danach",
    changes_after_many="{count} Dateiänderungen danach",
    mcp_none="Keine MCP-Server eingerichtet.",
    mode_label="Berechtigungsmodus",
    mode_standard="Standard (de)",
    mode_plan="Planen",
    mode_readonly="Nur lesen",
)


app_ui = ui.page_sidebar(
    ui.sidebar(
        conversation_panel_ui("conversation", strings=STRINGS),
        permission_mode_ui("mode", strings=STRINGS),
        mcp_panel_ui("mcp"),
        ui.input_action_button("again", "again"),
    ),
    agent_chat_ui("agent", strings=STRINGS),
    title="strings",
)


def make_agent(ctx: AgentChatContext) -> Agent:
    def reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
        if last_user_text(messages) == "ask":
            return ScriptedReply(tool_calls=[ScriptedToolCall("ask_user", {"questions": [COLOR]})])
        return write_reply(messages, tools)

    return Agent(
        FunctionModel(reply),
        tools=[tool_write_file(), *tools_interactive(callback=ctx.ask_user)],
        working_dir=ctx.working_dir,
        approval_handler=ctx.approval_handler,
        permissions=Permissions(approval_tools=("write_file",)),
        enable_file_checkpointing=True,
    )


def server(input: Inputs, output: Outputs, session: Session) -> None:
    handle = agent_chat_server(
        "agent", make_agent, workspace_root=workspace_root(), strings=STRINGS
    )
    conversation_panel_server("conversation", handle)
    permission_mode_server("mode", lambda: handle.agent, strings=handle.strings)
    mcp_panel_server("mcp", handle)

    @reactive.effect
    @reactive.event(input.again)
    async def _again() -> None:
        await handle.submit("hello again")


app = App(app_ui, server)
