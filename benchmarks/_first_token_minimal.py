"""first_token.py's baseline: shinychat's ``Chat`` fed by a plain async generator.

It streams the same chunks, with the same delay, as the kit app's model does.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from _first_token_reply import CHUNK_DELAY, chunks
from shiny import App, Inputs, Outputs, Session, ui
from shinychat import Chat, chat_ui


def server(input: Inputs, output: Outputs, session: Session) -> None:
    chat = Chat("chat")

    @chat.on_user_submit
    async def _reply(user_input: str) -> None:
        async def stream() -> AsyncIterator[str]:
            for index, piece in enumerate(chunks()):
                if index:
                    await asyncio.sleep(CHUNK_DELAY)
                yield piece

        await chat.append_message_stream(stream())


app = App(ui.page_fillable(chat_ui("chat")), server)
