# The kit in a default Shiny Express page with a sidebar (`page_sidebar`, not fillable).
# The model answers each message with `_shared.long_reply` (taller than a screen).
# (Comments: Express would show a module docstring on the page.)

from __future__ import annotations

from shiny.express import ui

from deputy_shiny.shiny import agent_chat_server, agent_chat_ui
from tests.e2e.apps._shared import long_reply_agent, workspace_root

ui.page_opts(title="express sidebar")

with ui.sidebar():
    ui.input_radio_buttons("tone", "Tone", ["Brief", "Detailed"])
    ui.input_checkbox_group("topics", "Topics", ["Sales", "Costs"])


agent_chat_ui("chat")

handle = agent_chat_server("chat", long_reply_agent, workspace_root=workspace_root())
