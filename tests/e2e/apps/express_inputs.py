"""Tools that set and read the app's own inputs (Shiny Express): one chat in the app
body, one inside an Express module of the app's own (``panel``)."""

from __future__ import annotations

import threading

from shiny import Inputs, Session, render
from shiny.express import expressify, input, module, session, ui

from deputy_shiny import warm_up
from deputy_shiny.shiny import agent_chat_server, agent_chat_ui
from tests.e2e.apps._app_inputs import agent_factory, inputs_ui, summary_text
from tests.e2e.apps._shared import workspace_root

threading.Thread(target=warm_up, name="litellm-warm-up", daemon=True).start()

ui.page_opts(title="express inputs")


@expressify
def place(input: Inputs, session: Session) -> None:
    """The inputs, the app's output of them and a chat, in the current namespace."""
    inputs_ui()

    @render.text
    def summary() -> str:
        return summary_text(input)

    agent_chat_ui("chat")
    agent_chat_server("chat", agent_factory(session, input), workspace_root=workspace_root())


@module
def panel(input, output, session):  # type: ignore[no-untyped-def]
    place(input, session)


with ui.layout_columns():
    with ui.div():
        place(input, session)
    with ui.div():
        panel("panel")
