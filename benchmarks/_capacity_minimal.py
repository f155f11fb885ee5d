"""capacity.py's baseline: shinychat's ``Chat`` fed by a plain async generator (no model).

The generator yields the same chunks at the same pace as every other capacity app
(``_capacity_reply``); nothing else happens per chunk.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from _capacity_reply import INTERVAL, chunk_count, chunks
from shiny import App, Inputs, Outputs, Session, ui
from shinychat import Chat, chat_ui


async def reply(prompt: str) -> AsyncIterator[str]:
    """The reply's chunks, ``INTERVAL`` apart (the first at once, as a provider's)."""
    for i, chunk in enumerate(chunks(chunk_count(prompt))):
        if i:
            await asyncio.sleep(INTERVAL)
        yield chunk


def server(input: Inputs, output: Outputs, session: Session) -> None:
    chat = Chat("chat")

    @chat.on_user_submit
    async def _reply(user_input: str) -> None:
        await chat.append_message_stream(reply(user_input))


app = App(ui.page_fillable(chat_ui("chat")), server)
