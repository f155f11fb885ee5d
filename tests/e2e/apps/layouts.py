"""The kit's chat in the layouts a Shiny user builds, one per ``?layout=`` of the page.

``fillable`` is the README's Core snippet (``page_fillable(agent_chat_ui("chat"))``);
``sidebar`` a ``page_sidebar`` (not fillable: its default); ``card`` the chat in a
card; ``columns`` two cards side by side under a heading, as a dashboard has them.
The model answers each message at once with a reply taller than a screen that ends
``End of reply <n>.`` (``_shared.long_reply``).
"""

from __future__ import annotations

import threading
from typing import Any

from shiny import App, Inputs, Outputs, Session, ui
from starlette.requests import Request

from deputy_shiny import warm_up
from deputy_shiny.shiny import agent_chat_server, agent_chat_ui
from tests.e2e.apps._shared import long_reply_agent, workspace_root

# The page is built per request, so no agent_chat_ui() call warms litellm up as the app
# is imported: start it here, so the first reply does not wait for all of it.
threading.Thread(target=warm_up, name="litellm-warm-up", daemon=True).start()


def _sidebar() -> Any:
    return ui.sidebar(
        ui.input_radio_buttons("tone", "Tone", ["Brief", "Detailed"]),
        ui.input_checkbox_group("topics", "Topics", ["Sales", "Costs"]),
        ui.input_checkbox("notes", "Show notes"),
    )


def app_ui(request: Request) -> Any:
    layout = request.query_params.get("layout", "fillable")
    chat = agent_chat_ui("chat")
    if layout == "sidebar":
        return ui.page_sidebar(_sidebar(), chat, title="sidebar")
    if layout == "card":
        return ui.page_fillable(ui.card(ui.card_header("Assistant"), chat), title="card")
    if layout == "columns":
        return ui.page_fillable(
            ui.h4("Dashboard"),
            ui.layout_columns(
                ui.card(ui.card_header("Assistant"), chat),
                ui.card(ui.card_header("Notes"), ui.p("Other content.")),
            ),
            title="columns",
        )
    return ui.page_fillable(chat, title="fillable")


def server(input: Inputs, output: Outputs, session: Session) -> None:
    agent_chat_server("chat", long_reply_agent, workspace_root=workspace_root())


app = App(app_ui, server)
