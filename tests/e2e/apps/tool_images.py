"""A tool that returns an image (#37): ``plot <port>`` -> the model calls ``plot``, which
returns hostile text, the image of a 2x1 PNG and an image by link to the listener on
``<port>``; then the model says ``Plotted. END-PLOT``."""

from __future__ import annotations

import base64
import re
import threading
from typing import Any

from shiny import App, Inputs, Outputs, Session, ui

from deputy_shiny import (
    Agent,
    ContentImage,
    ContentText,
    content_image_inline,
    tool,
    tool_annotations,
    warm_up,
)
from deputy_shiny.shiny import AgentChatContext, agent_chat_server, agent_chat_ui
from deputy_shiny.testing import FunctionModel, ScriptedReply, ScriptedToolCall
from tests.e2e.apps._shared import last_tool_text, last_user_text, workspace_root

threading.Thread(target=warm_up, name="litellm-warm-up", daemon=True).start()

# A 2x1 PNG: the test reads the image's natural size in the browser.
PNG_2X1 = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAIAAAABCAIAAAB7QOjdAAAAEElEQVR4nGP4z8DAwMDAAAAH/gH/AXW9LgAAAABJRU5ErkJggg=="
)
PLOT = re.compile(r"^plot (\d+)$")
HOSTILE = "<img src=x onerror=\"window.__pwned = 'card'\"> the chart"


def plot(port: int) -> list[Any]:
    """Plot the sales."""
    return [
        ContentText(text=HOSTILE),
        content_image_inline(PNG_2X1),
        ContentImage(url=f"http://127.0.0.1:{port}/linked.png"),
    ]


def reply(messages: list[dict[str, Any]], tools: Any) -> Any:
    last = messages[-1].get("content") if messages else None
    if isinstance(last, list):  # the images the tool returned follow its result
        seen = sum(1 for part in last if part.get("type") == "image_url")
        return f"Plotted: I saw {seen} image(s). END-PLOT"
    if last_tool_text(messages) is not None:
        return "Plotted without images. END-PLOT"
    match = PLOT.match(last_user_text(messages) or "")
    if not match:
        return "Say plot <port>."
    return ScriptedReply(tool_calls=[ScriptedToolCall("plot", {"port": int(match[1])})])


def make_agent(ctx: AgentChatContext) -> Agent:
    local = tool_annotations(read_only_hint=True, open_world_hint=False)
    return Agent(
        FunctionModel(reply),
        tools=[tool(plot, annotations=local)],
        working_dir=ctx.working_dir,
    )


app_ui = ui.page_fillable(agent_chat_ui("agent"), title="tool images")


def server(input: Inputs, output: Outputs, session: Session) -> None:
    agent_chat_server("agent", make_agent, workspace_root=workspace_root())


app = App(app_ui, server)
