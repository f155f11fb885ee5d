"""An approval nobody answers: ``approval_timeout=1.5`` denies it.

The user's message ``write <path> <content>`` makes the model call
``write_file(path, content)`` (which always needs approval); after the tool result the
model says ``Tool said: <result>``. The session's workspace is shown in
``output_text("workspace")``.
"""

from __future__ import annotations

import threading

from shiny import App, Inputs, Outputs, Session, render, ui

from deputy_shiny import warm_up
from deputy_shiny.shiny import agent_chat_server, agent_chat_ui
from tests.e2e.apps._shared import workspace_root, write_agent

threading.Thread(target=warm_up, name="litellm-warm-up", daemon=True).start()

app_ui = ui.page_fillable(
    ui.output_text("workspace"), agent_chat_ui("agent"), title="approval timeout"
)


def server(input: Inputs, output: Outputs, session: Session) -> None:
    handle = agent_chat_server(
        "agent", write_agent, workspace_root=workspace_root(), approval_timeout=1.5
    )

    @render.text
    def workspace() -> str:
        return str(handle.working_dir)


app = App(app_ui, server)
