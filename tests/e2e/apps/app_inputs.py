"""Tools that set and read the app's own inputs (Shiny Core): one chat in the app's
server, one inside a module of the app's own (``panel``), each beside its inputs."""

from __future__ import annotations

import threading

from shiny import App, Inputs, Outputs, Session, module, render, ui

from deputy_shiny import warm_up
from deputy_shiny.shiny import agent_chat_server, agent_chat_ui
from tests.e2e.apps._app_inputs import agent_factory, inputs_ui, summary_text
from tests.e2e.apps._shared import workspace_root

threading.Thread(target=warm_up, name="litellm-warm-up", daemon=True).start()


@module.ui
def panel_ui() -> ui.TagList:
    return ui.TagList(inputs_ui(), ui.output_text("summary"), agent_chat_ui("chat"))


@module.server
def panel_server(input: Inputs, output: Outputs, session: Session) -> None:
    @render.text
    def summary() -> str:
        return summary_text(input)

    agent_chat_server("chat", agent_factory(session, input), workspace_root=workspace_root())


app_ui = ui.page_fluid(
    ui.layout_columns(
        ui.div(inputs_ui(), ui.output_text("summary"), agent_chat_ui("chat")),
        ui.div(panel_ui("panel")),
    )
)


def server(input: Inputs, output: Outputs, session: Session) -> None:
    @render.text
    def summary() -> str:
        return summary_text(input)

    agent_chat_server("chat", agent_factory(session, input), workspace_root=workspace_root())
    panel_server("panel")


app = App(app_ui, server)
