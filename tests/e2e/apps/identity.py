"""Saved conversations on a shared origin: the kit's app at ``/app/``, another page at
``/evil/`` on the same origin (what Posit Connect's other content is).

The agent saves its conversation (``KitPersistence`` under
``$DEPUTY_E2E_WORKSPACE/conversations``). ``write <path> <content>`` calls write_file,
which needs approval; anything else is echoed (``You said: ...``). ``/evil/`` serves
:data:`tests.e2e.attacker.ATTACKER_PAGE`, the page the attack tests also serve from
another port.

``DEPUTY_E2E_ANONYMOUS=1`` opts anonymous users in (``KitPersistence(anonymous=True)``).
"""

from __future__ import annotations

import os
import threading

from shiny import App, Inputs, Outputs, Session, ui
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse
from starlette.routing import Mount, Route

from deputy_shiny import Agent, Permissions, warm_up
from deputy_shiny.shiny import (
    AgentChatContext,
    KitPersistence,
    agent_chat_server,
    agent_chat_ui,
)
from deputy_shiny.testing import FunctionModel
from deputy_shiny.tools import tool_write_file
from tests.e2e.apps._shared import workspace_root, write_reply
from tests.e2e.attacker import ATTACKER_PAGE

threading.Thread(target=warm_up, name="litellm-warm-up", daemon=True).start()

PERSISTENCE = KitPersistence(
    workspace_root() / "conversations",
    anonymous=True if os.environ.get("DEPUTY_E2E_ANONYMOUS") == "1" else None,
)


def make_agent(ctx: AgentChatContext) -> Agent:
    return Agent(
        FunctionModel(write_reply),
        tools=[tool_write_file()],
        working_dir=ctx.working_dir,
        session_id=ctx.session_id,
        agent_id=ctx.agent_id,
        approval_handler=ctx.approval_handler,
        approval_dir=ctx.approval_dir,
        permissions=Permissions(approval_tools=("write_file",)),
    )


def server(input: Inputs, output: Outputs, session: Session) -> None:
    agent_chat_server("agent", make_agent, persistence=PERSISTENCE)


shiny_app = App(ui.page_fillable(agent_chat_ui("agent")), server)


async def evil(request: Request) -> HTMLResponse:
    return HTMLResponse(ATTACKER_PAGE)


async def index(request: Request) -> PlainTextResponse:
    return PlainTextResponse("the app is at /app/, another page at /evil/")


app = Starlette(
    routes=[
        Route("/", index),
        Route("/evil/", evil),
        Mount("/app", app=shiny_app),
    ]
)
