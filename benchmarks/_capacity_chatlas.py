"""capacity.py's peer over the wire: chatlas + shinychat, as chatlas's docs stream into Chat.

One ``ChatOpenAICompletions`` client per session, pointed at the fake OpenAI server
(``CAPACITY_BASE_URL``); each submit is ``await client.stream_async(text)`` handed to
``chat.append_message_stream``.
"""

from __future__ import annotations

from _capacity_reply import BASE_URL, MODEL_NAME
from chatlas import ChatOpenAICompletions
from shiny import App, Inputs, Outputs, Session, ui
from shinychat import Chat, chat_ui


def server(input: Inputs, output: Outputs, session: Session) -> None:
    chat = Chat("chat")
    client = ChatOpenAICompletions(base_url=BASE_URL, api_key="x", model=MODEL_NAME)

    @chat.on_user_submit
    async def _reply(user_input: str) -> None:
        response = await client.stream_async(user_input)
        await chat.append_message_stream(response)


app = App(ui.page_fillable(chat_ui("chat")), server)
