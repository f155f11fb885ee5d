"""Agent events to shinychat stream chunks: the one place that knows shinychat's blocks.

The kit streams ``agent.run()`` events into ``chat.append_message_stream`` as:

* ``text`` events: plain ``str`` chunks of markdown, made inert first by
  :class:`~deputy_shiny.shiny._image_guard.ImageGuard` (no raw HTML; images only from
  origins the app allowed);
* ``tool_start`` / ``tool_end``: a ``tool_request`` block, then the matching
  ``tool_result`` block (shinychat pairs them into one collapsible card). The block
  schema is private to shinychat (``_chat_types.py``), so it is built here only. Tool
  output is sent as ``code``: it never renders as HTML or markdown. A denied call is an
  error card titled ``Denied: <reason>``;
* a readable note when the run ends for any reason other than ``complete``.

Every string in a block is inert where shinychat puts it (:mod:`._escape`): the title
is HTML there, so it is escaped; the output is fenced code, so it cannot close its fence;
the tool name and the arguments shinychat shows as text itself.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

from shinychat.types import ChatMessage

from ..events import AgentEvent, PermissionEvent, StopEvent, TextEvent, ToolEndEvent, ToolStartEvent
from ._escape import code_text, html_text, markdown_text
from ._image_guard import ImageGuard

_STOP_NOTES = {
    "interrupted": "Stopped.",
    "request_limit": "Stopped: the request limit for one run was reached.",
    "tool_call_limit": "Stopped: the tool-call limit for one run was reached.",
    "input_token_limit": "Stopped: the input-token limit was reached.",
    "output_token_limit": "Stopped: the output-token limit was reached.",
    "total_token_limit": "Stopped: the token limit was reached.",
    "cost_limit": "Stopped: the cost limit was reached.",
    "cost_unavailable": "Stopped: the provider reports no cost, so the cost limit can't be kept.",
    "tool_loop": "Stopped: the model kept repeating the same tool call.",
    "hook_requested_stop": "Stopped by a hook.",
}


def tool_request_block(
    card_id: str, tool_name: str, arguments: dict[str, Any], *, title: str | None = None
) -> ChatMessage:
    """A shinychat message holding a ``tool_request`` block (titled cards stand alone).

    ``title`` is plain text (it is escaped here: shinychat renders titles as HTML).

    Example:
        >>> block = tool_request_block("c1", "read_file", {"path": "<b>"}, title="Denied: <b>")
        >>> block.blocks[0]["title"], block.blocks[0]["arguments"]
        ('Denied: &lt;b&gt;', '{"path": "<b>"}')
    """
    block: dict[str, Any] = {
        "type": "tool_request",
        "version": 1,
        "request_id": card_id,
        # shinychat escapes the tool name itself (a title takes its place, when given).
        "tool_name": tool_name,
        # One line of JSON inside shinychat's fence: it can never start a line with the
        # backticks that would close the fence.
        "arguments": json.dumps(arguments, ensure_ascii=False, default=str),
    }
    if title is not None:
        # shinychat takes a card's header from its request's title.
        block["title"] = html_text(title)
        block["grouping"] = "none"
    return ChatMessage(content="", blocks=[block])  # type: ignore[list-item]


def tool_result_block(
    card_id: str, tool_name: str, output: str, *, is_error: bool, title: str | None = None
) -> ChatMessage:
    """A shinychat message holding the ``tool_result`` block of a card (output as code).

    ``title`` is plain text, escaped here like :func:`tool_request_block`'s.

    Example:
        >>> block = tool_result_block("c1", "read_file", "<i>", is_error=True, title="Denied: <i>")
        >>> block.blocks[0]["title"], block.blocks[0]["value"], block.blocks[0]["value_type"]
        ('Denied: &lt;i&gt;', '<i>', 'code')
    """
    block: dict[str, Any] = {
        "type": "tool_result",
        "version": 1,
        "request_id": card_id,
        "tool_name": tool_name,
        "status": "error" if is_error else "success",
        "value": code_text(output),
        "value_type": "code",
    }
    if title is not None:
        # A titled card (a denial) stands alone: in a group shinychat shows only the
        # group's "Used <tool>" title.
        block["title"] = html_text(title)
        block["grouping"] = "none"
    return ChatMessage(content="", blocks=[block])  # type: ignore[list-item]


def stop_note(reason: str, message: str) -> str | None:
    """The note shown when a run ends other than ``complete`` (None when it completed).

    A failure is one line: the engine's message is already one (the log has the
    details), and only its first line is shown should another give more.

    Example:
        >>> stop_note("provider_error", "openai returned 401: invalid API key")
        'The model request failed: openai returned 401: invalid API key'
    """
    if reason == "complete":
        return None
    line = _first_line(message)
    if reason == "provider_error":
        return f"The model request failed: {line}" if line else "The model request failed."
    if reason == "error":
        return f"The run failed: {line}" if line else "The run failed."
    return _STOP_NOTES.get(reason, f"Stopped: {line or reason}.")


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return " ".join(line.split())
    return ""


def note_chunk(text: str) -> str:
    """A note at the end of a chat message, as inert markdown: notes quote error
    messages from providers and tools, so they are kept out of markdown.

    Example:
        >>> note_chunk("Stopped: <b>")
        '\\n\\n> Stopped\\\\: \\\\<b\\\\>\\n'
    """
    quoted = markdown_text(text).replace("\n", "\n> ")
    return f"\n\n> {quoted}\n"


async def render_events(
    events: AsyncIterator[AgentEvent],
    *,
    allowed_image_origins: Iterable[str] = (),
    on_event: Callable[[AgentEvent], Any] | None = None,
) -> AsyncIterator[str | ChatMessage]:
    """Turn a run's events into shinychat chunks; ``on_event`` sees every event first.

    Example:
        >>> import asyncio
        >>> from deputy_shiny import Agent
        >>> from deputy_shiny.testing import ScriptedModel
        >>> async def main():
        ...     agent = Agent(ScriptedModel(["Hi there"]))
        ...     return [c async for c in render_events(agent.run("Hello"))]
        >>> asyncio.run(main())
        ['Hi there']
    """
    guard = ImageGuard(allowed_image_origins)
    # A card's request is held until the call is allowed (then it shows as running) or
    # has ended: a denied call's card is then sent whole, titled with its denial, so it
    # stands alone. Every denial's result starts with "Denied: " (the engine's format).
    waiting: dict[str, ToolStartEvent] = {}
    async for event in events:
        if on_event is not None:
            on_event(event)
        if isinstance(event, TextEvent):
            safe = guard.feed(event.text)
            if safe:
                yield safe
            continue
        held = guard.flush()
        if held:
            yield held
        if isinstance(event, ToolStartEvent):
            waiting[event.call_id] = event
        elif isinstance(event, PermissionEvent) and event.decision == "allow":
            start = waiting.pop(event.call_id, None)
            if start is not None:
                yield tool_request_block(_card(start), start.tool_name, start.arguments)
        elif isinstance(event, ToolEndEvent):
            denied = event.is_error and event.output.startswith("Denied: ")
            title = event.output.splitlines()[0][:300] if denied else None
            start = waiting.pop(event.call_id, None)
            if start is not None:
                yield tool_request_block(
                    _card(start), start.tool_name, start.arguments, title=title
                )
            yield tool_result_block(
                _card(event), event.tool_name, event.output, is_error=event.is_error, title=title
            )
        elif isinstance(event, StopEvent):
            note = stop_note(event.stop_reason, event.message)
            if note:
                yield note_chunk(note)
    held = guard.flush()
    if held:
        yield held


def _card(event: Any) -> str:
    # Model call ids can repeat across runs ("call_1"): cards are keyed per run.
    return f"{event.run_id[-12:]}-{event.call_id}"
