"""capacity.py's kit app: ``agent_chat_server`` with one Agent per session, no tools.

Provider mode (no ``CAPACITY_BASE_URL``): the Agent's model is a :class:`FunctionModel`
streaming ``_capacity_reply``'s chunks, as in ``_sessions_app.py``. Wire mode:
``ChatModel("openai/fake-model", api_base=...)`` at the fake OpenAI server, over HTTP.
The kit warms litellm up itself as the app starts (``deputy_shiny/shiny/_warm.py``).
"""

from __future__ import annotations

from typing import Any

from _capacity_reply import BASE_URL, INTERVAL, MODEL_NAME, chunk_count, chunks
from shiny import App, Inputs, Outputs, Session, ui

from deputy_shiny import Agent
from deputy_shiny.models import ChatModel
from deputy_shiny.shiny import AgentChatContext, agent_chat_server, agent_chat_ui
from deputy_shiny.testing import FunctionModel, ScriptedReply


def scripted(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ScriptedReply:
    """The deterministic provider's reply to the last user message."""
    text = "".join(chunks(chunk_count(str(messages[-1]["content"]))))
    return ScriptedReply(text=text, chunk_size=7, delay=INTERVAL)


MODEL: FunctionModel | ChatModel = (
    ChatModel(model=f"openai/{MODEL_NAME}", api_base=BASE_URL, api_key="x")
    if BASE_URL
    else FunctionModel(scripted)
)


def make_agent(ctx: AgentChatContext) -> Agent:
    return Agent(MODEL, working_dir=ctx.working_dir, approval_handler=ctx.approval_handler)


def server(input: Inputs, output: Outputs, session: Session) -> None:
    agent_chat_server("chat", make_agent)


app = App(ui.page_fillable(agent_chat_ui("chat")), server)
