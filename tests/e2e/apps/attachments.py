"""Attachments: two chats, the model recording what it received.

``agent`` accepts every kind, with small caps (150 KB a file, 400 KB a message, 5 MB
unpacked) and images sent to the model (``images_to_model=True``: the test model is
not one litellm knows). ``novision`` accepts images only and asks litellm, which knows
nothing of the test model: images are refused there.

The model writes one marker per request, ``received <json>`` with the user message's
text and the first 30 characters of each image part's URL, and answers ``Received
<n> image(s).``; each session's workspace is under ``DEPUTY_E2E_WORKSPACE``.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from shiny import App, Inputs, Outputs, Session, ui

from deputy_shiny import Agent, warm_up
from deputy_shiny.shiny import (
    AgentChatContext,
    AttachmentPolicy,
    agent_chat_server,
    agent_chat_ui,
)
from deputy_shiny.testing import FunctionModel
from tests.e2e.apps._shared import mark, text_of, workspace_root

threading.Thread(target=warm_up, name="litellm-warm-up", daemon=True).start()

POLICY = AttachmentPolicy(
    max_file_bytes=150_000,
    max_message_bytes=400_000,
    max_unpacked_bytes=5_000_000,
    images_to_model=True,
)


def recorder(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
    content = messages[-1].get("content")
    parts = content if isinstance(content, list) else []
    images = [p["image_url"]["url"][:30] for p in parts if p.get("type") == "image_url"]
    mark("received", json.dumps({"text": text_of(messages[-1]), "images": images}))
    return f"Received {len(images)} image(s)."


def agent(ctx: AgentChatContext) -> Agent:
    return Agent(FunctionModel(recorder), working_dir=ctx.working_dir)


app_ui = ui.page_fillable(
    ui.layout_columns(
        agent_chat_ui("agent", attachments=POLICY, height="420px"),
        agent_chat_ui("novision", attachments=["image"], height="420px"),
    ),
    title="attachments",
)


def server(input: Inputs, output: Outputs, session: Session) -> None:
    agent_chat_server("agent", agent, workspace_root=workspace_root())
    agent_chat_server("novision", agent, workspace_root=workspace_root())


app = App(app_ui, server)
