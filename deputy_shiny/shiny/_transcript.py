"""A restored conversation's turns back as chat messages, rendered as a live run is.

When a saved conversation comes back (``KitPersistence``), the chat is rebuilt from the
agent's turns, not from a saved copy of the page: the turns are the one record of what
happened, and they go through the same inert rendering as a live run (model text made
safe by :class:`~deputy_shiny.shiny._image_guard.ImageGuard`, tool output as ``code``
cards, a denial as a card titled with its reason, escaped by the same block builders:
the reason quotes model input). Notes a live run showed at its end
("Stopped.") are not part of the turns and do not come back.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from shinychat.types import ChatMessage

from ..messages import ContentText, ContentToolRequest, ContentToolResult, Turn
from ._image_guard import ImageGuard
from ._render import tool_request_block, tool_result_block

__all__ = ["TranscriptMessage", "transcript_messages"]

Chunk = str | ChatMessage


@dataclass
class TranscriptMessage:
    """One chat message to show: the user's text, or an assistant message's chunks."""

    role: Literal["user", "assistant"]
    chunks: list[Chunk] = field(default_factory=list)
    turns_to: int = 0
    """How many of the turns it shows up to its end (the reply's conversation)."""


def transcript_messages(
    turns: Sequence[Turn],
    allowed_image_origins: Iterable[str] = (),
    waiting_calls: Collection[str] = (),
) -> list[TranscriptMessage]:
    """The chat messages that show ``turns``.

    A user turn with text is a user message; the assistant's turns up to the next one
    are one assistant message: its text, and a card for each tool call that has a
    result. A call in ``waiting_calls`` (still waiting for approval: its result is a
    placeholder) shows no card; the modal stands for it.

    Examples:
        >>> from deputy_shiny.messages import Turn, ContentText
        >>> turns = [Turn(role="user", contents=[ContentText(text="Hi <b>there</b>")]),
        ...          Turn(role="assistant", contents=[ContentText(text="Hello!")])]
        >>> user, assistant = transcript_messages(turns)
        >>> user.role, "<b>" in user.chunks[0], assistant.chunks
        ('user', False, ['Hello!'])
    """
    origins = tuple(allowed_image_origins)
    messages: list[TranscriptMessage] = []
    requests: dict[str, ContentToolRequest] = {}
    current: TranscriptMessage | None = None
    for index, turn in enumerate(turns):
        if turn.role == "system":
            continue
        texts = [c.text for c in turn.contents if isinstance(c, ContentText)]
        if turn.role == "user":
            for result in (c for c in turn.contents if isinstance(c, ContentToolResult)):
                request = requests.pop(result.call_id, None)
                if result.call_id in waiting_calls:
                    continue
                if current is None:
                    current = TranscriptMessage("assistant")
                    messages.append(current)
                current.chunks.extend(_card(index, request, result))
                current.turns_to = index + 1
            text = "\n\n".join(t for t in texts if t)
            if text:
                messages.append(TranscriptMessage("user", [_safe(text, origins)]))
                current = None
            continue
        if current is None:
            current = TranscriptMessage("assistant")
            messages.append(current)
        current.turns_to = index + 1
        text = "".join(texts)
        if text:
            current.chunks.append(_safe(text, origins))
        for request in (c for c in turn.contents if isinstance(c, ContentToolRequest)):
            requests[request.id] = request
    return [m for m in messages if m.chunks]


def _safe(text: str, origins: tuple[str, ...]) -> str:
    guard = ImageGuard(origins)
    return guard.feed(text) + guard.flush()


def _card(index: int, request: ContentToolRequest | None, result: ContentToolResult) -> list[Chunk]:
    card = f"saved{index}-{result.call_id}"
    denied = result.is_error and result.output.startswith("Denied: ")
    title = result.output.splitlines()[0][:300] if denied else None
    chunks: list[Chunk] = []
    if request is not None:
        chunks.append(tool_request_block(card, request.name, request.arguments, title=title))
    chunks.append(
        tool_result_block(
            card,
            result.name,
            result.output,
            is_error=result.is_error,
            title=title,
            images=result.images,
        )
    )
    return chunks
