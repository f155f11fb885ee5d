"""deputy's standalone approval review: an agent with a durable approval store and no
chat. The "Run" button starts ``write_file("review.txt", "draft")``, which needs approval:
with no live handler the run stops ``approval_pending``, and ``approval_review_server``
shows the call in the kit's modal. The outcome of the decision is shown as text.

One agent per browser session (made in ``server``), its workspace a fresh directory
under the app's workspace root.
"""

from __future__ import annotations

import asyncio
import tempfile
import threading
from pathlib import Path

from shiny import App, Inputs, Outputs, Session, reactive, render, ui

from deputy_shiny import Agent, Permissions, warm_up
from deputy_shiny.shiny import approval_review_server, approval_review_ui
from deputy_shiny.testing import FunctionModel
from deputy_shiny.tools import tool_write_file
from tests.e2e.apps._shared import workspace_root, write_reply

threading.Thread(target=warm_up, name="litellm-warm-up", daemon=True).start()

app_ui = ui.page_fluid(
    ui.input_action_button("run", "Run"),
    approval_review_ui("review"),
    ui.output_text("outcome"),
    ui.output_text("workspace"),
    title="approval review",
)


def server(input: Inputs, output: Outputs, session: Session) -> None:
    folder = Path(tempfile.mkdtemp(dir=workspace_root()))
    (folder / ".approvals").mkdir()
    agent = Agent(
        FunctionModel(write_reply),
        tools=[tool_write_file()],
        working_dir=folder,
        permissions=Permissions(approval_tools=("write_file",)),
        approval_dir=folder / ".approvals",
    )
    review = approval_review_server("review", agent)
    runs: set[asyncio.Task[object]] = set()

    @reactive.effect
    @reactive.event(input.run)
    def _start() -> None:
        task = asyncio.create_task(agent.run_async("write review.txt draft"))
        runs.add(task)
        task.add_done_callback(runs.discard)

    @render.text
    def outcome() -> str:
        done = review.outcome()
        if done is None:
            return "Outcome: none"
        result = done.get("result")
        said = getattr(result, "response", None) or done.get("error")
        return f"Outcome: {done['decision']} {said}"

    @render.text
    def workspace() -> str:
        return f"Workspace: {folder}"


app = App(app_ui, server)
