"""Accessibility: every dialog and panel of the kit on one page, with a dark-mode switch.

A sidebar holds the conversation panel, the permission mode, the MCP panel (one server
that exits at once) and a subagent panel, beside the chat; ``ui.input_dark_mode`` (id
``dark``) switches the theme. The model, by the user's text: ``write <path> <content>``
calls ``write_file`` (which needs approval), ``ask`` calls ``ask_user``, ``delegate``
hands the ``helper`` subagent a task; anything else is echoed. Markers:
``wrote <path>`` when ``write_file`` has run.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from shiny import App, Inputs, Outputs, Session, ui

from deputy_shiny import Agent, HookMatcher, Permissions, warm_up
from deputy_shiny.delegation import AgentDefinition, DelegationDisclosure, LeadAgent
from deputy_shiny.shiny import (
    AgentChatContext,
    agent_chat_server,
    agent_chat_ui,
    conversation_panel_server,
    conversation_panel_ui,
    mcp_panel_server,
    mcp_panel_ui,
    permission_mode_server,
    permission_mode_ui,
    subagent_panel_server,
    subagent_panel_ui,
)
from deputy_shiny.testing import FunctionModel, Reply, ScriptedReply, ScriptedToolCall
from deputy_shiny.tools import tool_write_file, tools_interactive
from tests.e2e.apps._shared import COLOR, last_user_text, mark, text_of, workspace_root, write_reply

threading.Thread(target=warm_up, name="litellm-warm-up", daemon=True).start()

MCP_CONFIG = {"mcpServers": {"gone": {"command": sys.executable, "args": ["-c", "pass"]}}}


def helper_reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
    task = next((text_of(m) for m in messages if m.get("role") == "user"), "")
    return f"Helper did {task}"


app_ui = ui.page_sidebar(
    ui.sidebar(
        ui.input_dark_mode(id="dark", mode="light"),
        conversation_panel_ui("conversation"),
        permission_mode_ui("mode"),
        ui.h2("Team", class_="h6"),
        subagent_panel_ui("team"),
        ui.h2("MCP servers", class_="h6"),
        mcp_panel_ui("mcp"),
    ),
    agent_chat_ui("agent"),
    title="a11y",
)


def server(input: Inputs, output: Outputs, session: Session) -> None:
    def make_agent(ctx: AgentChatContext) -> Agent:
        def reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
            text = last_user_text(messages) or ""
            if text == "ask" and messages[-1].get("role") == "user":
                call = ScriptedToolCall("ask_user", {"questions": [COLOR]})
                return ScriptedReply(tool_calls=[call])
            if text == "delegate" and messages[-1].get("role") == "user":
                call = ScriptedToolCall("delegate", {"agent": "helper", "task": "a chore"})
                return ScriptedReply(tool_calls=[call])
            return write_reply(messages, tools, workspace=ctx.working_dir)

        def wrote(tool_name: str, tool_input: dict[str, Any], context: Any, output: Any) -> None:
            mark("wrote", tool_input.get("path"))

        return LeadAgent(
            FunctionModel(reply),
            tools=[tool_write_file(), *tools_interactive(callback=ctx.ask_user)],
            subagents=[AgentDefinition(name="helper", description="Helps.", tools=[])],
            subagent_models={"helper": FunctionModel(helper_reply)},
            delegation_scope={"owner": "me"},
            delegation_disclosure=DelegationDisclosure(authorize=lambda who, scope, rec: True),
            working_dir=ctx.working_dir,
            approval_handler=ctx.approval_handler,
            permissions=Permissions(approval_tools=("write_file",)),
            hooks=[HookMatcher("PostToolUse", wrote, pattern="^write_file$")],
        )

    handle = agent_chat_server(
        "agent", make_agent, mcp_config=MCP_CONFIG, workspace_root=workspace_root()
    )
    conversation_panel_server("conversation", handle)
    permission_mode_server("mode", lambda: handle.agent)
    subagent_panel_server("team", lambda: handle.agent, "me")
    mcp_panel_server("mcp", handle)


app = App(app_ui, server)
