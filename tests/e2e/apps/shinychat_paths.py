"""A plain shinychat ``Chat`` (no kit) fed by ``Agent.stream_async``, one path per message.

The message ``<path> hostile <port>`` streams a reply along ``<path>``: first
``Before the card.`` and a call of ``echo`` (a tool card in the content paths), then
:func:`~tests.e2e.apps._payloads.hostile_text` for ``http://127.0.0.1:<port>``, in
9-character chunks. ``<path> code`` streams a fenced code block (``CODE``) in
3-character chunks, then ``END-CODE``. The paths:

* ``content``: ``stream="content"`` straight into the chat (the content renderers
  ``deputy_shiny.shiny`` registers with shinychat);
* ``text``: ``stream="text"`` straight into the chat;
* ``inert-content`` / ``inert-text``: each mode through ``inert_stream``;
* ``run-shiny``: deputy's ``agent.run_shiny(prompt)`` straight into the chat (the
  session's own agent, made in ``server``, as deputy's examples make it).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from typing import Any

from shiny import App, Inputs, Outputs, Session, ui
from shinychat import Chat, chat_ui

from deputy_shiny import Agent, tool, tool_annotations, warm_up
from deputy_shiny.shiny import inert_stream
from deputy_shiny.testing import FunctionModel, Reply, ScriptedReply, ScriptedToolCall
from tests.e2e.apps._payloads import CODE, hostile_text
from tests.e2e.apps._shared import last_tool_text, last_user_text

# Before the app serves: a plain Chat has no kit to wait for litellm's first import.
warm_up()

_ASK = re.compile(r"^\S+ (hostile (\d+)|code)$")


def echo(text: str) -> str:
    """Return the text unchanged.

    Args:
        text: The text to return.
    """
    return text


def reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
    users = [m for m in messages if m.get("role") == "user"]
    asked = _ASK.match(last_user_text(users[-1:]) or "")
    if asked is None:
        return "Say '<path> hostile <port>' or '<path> code'."
    if asked[2] is None:
        return ScriptedReply(f"Code START\n```python\n{CODE}\n```\nEND-CODE", chunk_size=3)
    if last_tool_text(messages) is None:
        call = ScriptedToolCall("echo", {"text": "card"})
        return ScriptedReply("Before the card.", tool_calls=[call])
    return ScriptedReply(hostile_text(f"http://127.0.0.1:{asked[2]}"), chunk_size=9)


PATHS: dict[str, Callable[[Agent, str], AsyncIterator[Any]]] = {
    "content": lambda agent, text: agent.stream_async(text, stream="content"),
    "text": lambda agent, text: agent.stream_async(text, stream="text"),
    "inert-content": lambda agent, text: inert_stream(agent.stream_async(text, stream="content")),
    "inert-text": lambda agent, text: inert_stream(agent.stream_async(text)),
    "run-shiny": lambda agent, text: agent.run_shiny(text),
}

app_ui = ui.page_fillable(chat_ui("chat"), title="shinychat paths")


def server(input: Inputs, output: Outputs, session: Session) -> None:
    chat = Chat("chat")
    local = tool_annotations(read_only_hint=True, open_world_hint=False)
    agent = Agent(FunctionModel(reply), tools=[tool(echo, annotations=local)])

    @chat.on_user_submit
    async def _(text: str) -> None:
        path = text.split(" ", 1)[0]
        await chat.append_message_stream(PATHS[path](agent, text))


app = App(app_ui, server)
