"""A plain shinychat app (no kit): checks the harness and shinychat's own controller."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from shiny import App, Inputs, Outputs, Session, ui
from shinychat import Chat, chat_ui

app_ui = ui.page_fillable(chat_ui("chat", enable_cancel=True), title="plain chat")


def server(input: Inputs, output: Outputs, session: Session) -> None:
    chat = Chat("chat")

    @chat.on_user_submit
    async def _(user_input: str) -> None:
        async def reply() -> AsyncIterator[str]:
            for word in ("Echo:", *user_input.split()):
                await asyncio.sleep(0.05)
                yield word + " "

        await chat.append_message_stream(reply())


app = App(app_ui, server)
