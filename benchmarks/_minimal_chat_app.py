"""The baseline session_churn.py compares the kit with: a minimal shinychat app.

One ``Chat`` per session, no agent: each message gets a short streamed echo.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from shiny import App, Inputs, Outputs, Session, ui
from shinychat import Chat, chat_ui


def server(input: Inputs, output: Outputs, session: Session) -> None:
    chat = Chat("chat")

    @chat.on_user_submit
    async def _reply(user_input: str) -> None:
        async def words() -> AsyncIterator[str]:
            for word in f"You said: {user_input}".split():
                yield word + " "

        await chat.append_message_stream(words())


app = App(ui.page_fillable(chat_ui("chat")), server)
