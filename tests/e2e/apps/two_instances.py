"""Two kit instances in an existing-looking host app, plus the permission-mode select.

A navbar page with the host's own ``input_text("note")`` echoed to
``output_text("echo")``, and two chats, ``left`` and ``right``, each with its own
agent. In either chat the message ``write <path> <content>`` makes the model call
``write_file(path, content)`` (which always needs approval); after the tool result it
says ``Tool said: <result>``. Anything else is echoed. Each instance's workspace is
shown in ``output_text("<id>_dir")``. ``permission_mode_ui("mode")`` switches the
``left`` agent's permission mode. The right chat's modals name it "Analyst" (its
``label``); the left's name its module id.
"""

from __future__ import annotations

import threading

from shiny import App, Inputs, Outputs, Session, render, ui

from deputy_shiny import warm_up
from deputy_shiny.shiny import (
    agent_chat_server,
    agent_chat_ui,
    permission_mode_server,
    permission_mode_ui,
)
from tests.e2e.apps._shared import workspace_root, write_agent

threading.Thread(target=warm_up, name="litellm-warm-up", daemon=True).start()

app_ui = ui.page_navbar(
    ui.nav_panel(
        "Agents",
        ui.input_text("note", "Host note"),
        ui.output_text("echo"),
        permission_mode_ui("mode"),
        ui.layout_columns(
            ui.card(
                ui.card_header("Left"),
                ui.output_text("left_dir"),
                agent_chat_ui("left", height="360px"),
            ),
            ui.card(
                ui.card_header("Right"),
                ui.output_text("right_dir"),
                agent_chat_ui("right", height="360px"),
            ),
        ),
    ),
    title="Host app",
)


def server(input: Inputs, output: Outputs, session: Session) -> None:
    left = agent_chat_server("left", write_agent, workspace_root=workspace_root())
    right = agent_chat_server(
        "right", write_agent, workspace_root=workspace_root(), label="Analyst"
    )
    assert left.agent is not None
    permission_mode_server("mode", left.agent)

    @render.text
    def echo() -> str:
        return f"Echo: {input.note()}"

    @render.text
    def left_dir() -> str:
        return str(left.working_dir)

    @render.text
    def right_dir() -> str:
        return str(right.working_dir)


app = App(app_ui, server)
