"""capacity.py's "by hand" app: shinychat's ``Chat`` fed by ``litellm.acompletion(stream=True)``.

Provider mode (no ``CAPACITY_BASE_URL``): the model is a :class:`FunctionModel`, the same
deterministic litellm ``CustomLLM`` provider the kit's test models register, streaming
``_capacity_reply``'s chunks. Wire mode: ``openai/fake-model`` with ``api_base`` at the
fake OpenAI server (``_fake_openai.py``), over HTTP. Either way the app does by hand
what a developer without the kit would: stream, take each delta's text, hand it on.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from _capacity_reply import BASE_URL, INTERVAL, MODEL_NAME, chunk_count, chunks
from shiny import App, Inputs, Outputs, Session, ui
from shinychat import Chat, chat_ui

from deputy_shiny.models._litellm import get_litellm
from deputy_shiny.testing import FunctionModel, ScriptedReply


def scripted(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ScriptedReply:
    """The deterministic provider's reply to the last user message."""
    text = "".join(chunks(chunk_count(str(messages[-1]["content"]))))
    return ScriptedReply(text=text, chunk_size=7, delay=INTERVAL)


# Module level, so the provider stays registered for the life of the app.
MODEL = None if BASE_URL else FunctionModel(scripted)
REQUEST: dict[str, Any] = (
    {"model": f"openai/{MODEL_NAME}", "api_base": BASE_URL, "api_key": "x"}
    if MODEL is None
    else {"model": MODEL.as_chat_model().model}
)
litellm = get_litellm()  # imported before the server serves (as the kit warms it up)


async def reply(prompt: str) -> AsyncIterator[str]:
    """Each text delta of one streamed completion."""
    stream = await litellm.acompletion(
        messages=[{"role": "user", "content": prompt}],
        stream=True,
        stream_options={"include_usage": True},
        **REQUEST,
    )
    async for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            yield chunk.choices[0].delta.content


def server(input: Inputs, output: Outputs, session: Session) -> None:
    chat = Chat("chat")

    @chat.on_user_submit
    async def _reply(user_input: str) -> None:
        await chat.append_message_stream(reply(user_input))


app = App(ui.page_fillable(chat_ui("chat")), server)
