"""A provider that accepts requests and never answers: a loopback server in this process.

The agent's model is ``openai/gpt-4.1-mini`` at that server (``timeout=6``, no retries):
while nothing comes back the chat shows "Still waiting for 127.0.0.1:<port> (2 s)… Stop
to give up" (at 1.5 and 4.5 s), and at 6 s the run ends with a readable error. The
server marks ``request`` when a request arrives and ``hung up`` when the client closes
its connection.
"""

from __future__ import annotations

import threading

from shiny import App, Inputs, Outputs, Session, ui

from deputy_shiny import Agent, ChatModel, warm_up
from deputy_shiny.shiny import AgentChatContext, agent_chat_server, agent_chat_ui
from tests.e2e.apps._shared import mark, workspace_root
from tests.helpers import silent_chat_server

threading.Thread(target=warm_up, name="litellm-warm-up", daemon=True).start()

# The server lives as long as this process: the generator is kept (closing it, as its
# collection would, stops the server).
_SERVING = silent_chat_server()
PROVIDER = next(_SERVING)
PROVIDER.on_hang_up = lambda: mark("hung up")
PROVIDER.on_request = lambda: mark("request")


def make_agent(ctx: AgentChatContext) -> Agent:
    model = ChatModel(
        model="openai/gpt-4.1-mini",
        api_base=PROVIDER.url,
        api_key="sk-test-e2e-silent",
        timeout=6,
        retries=0,
    )
    return Agent(model, working_dir=ctx.working_dir, approval_handler=ctx.approval_handler)


app_ui = ui.page_fillable(agent_chat_ui("agent"), title="silent provider")


def server(input: Inputs, output: Outputs, session: Session) -> None:
    agent_chat_server("agent", make_agent, workspace_root=workspace_root())


app = App(app_ui, server)
