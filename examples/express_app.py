# The kit in a Shiny Express app: one chat, and a switch that narrows its permissions.
#
# Run it with `shiny run examples/express_app.py`. The model is DEPUTY_MODEL (any
# litellm model string, with the provider's key variable set), else the offline demo
# model `deputy/demo`: say *write a note* and approve the dialog, or *ask me something*.
#
# (Comments, not a module docstring: Shiny Express shows every top-level expression on
# the page, a docstring too.)

from __future__ import annotations

import os

from shiny.express import ui

from deputy_shiny import Agent, Permissions, tool_list_files, tool_write_file, tools_interactive
from deputy_shiny.shiny import (
    AgentChatContext,
    agent_chat_server,
    agent_chat_ui,
    permission_mode_server,
    permission_mode_ui,
)

MODEL = os.environ.get("DEPUTY_MODEL", "deputy/demo")


def make_agent(ctx: AgentChatContext) -> Agent:
    """One agent per browser session, working in that session's own directory."""
    return Agent(
        MODEL,
        tools=[tool_list_files(), tool_write_file(), *tools_interactive(callback=ctx.ask_user)],
        working_dir=ctx.working_dir,
        approval_handler=ctx.approval_handler,  # writes open a dialog in this session
        permissions=Permissions(approval_effects=["write"]),
    )


ui.page_opts(title="My assistant", fillable=True)

with ui.sidebar():
    permission_mode_ui("mode")

agent_chat_ui("chat")

# In Express, these lines may stand alone: what they return renders as nothing.
handle = agent_chat_server("chat", make_agent)
permission_mode_server("mode", lambda: handle.agent)
