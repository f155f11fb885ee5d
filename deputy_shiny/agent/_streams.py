"""Streams for callers: a run's events as text chunks or as content objects.

``Agent.stream_async`` hands a run's events to :func:`text_chunks` (``str`` chunks, as
shinychat and chatlas consume them) or :func:`content_chunks` (text, tool requests
and tool results as content objects). Both call ``finish`` after the last event, so
an error that ended the run raises after the stream, as ``run_async`` raises it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

from ..events import AgentEvent
from ..messages import ContentText, ContentToolRequest, ContentToolResult

__all__ = ["StreamContent", "content_chunks", "text_chunks"]

StreamContent = ContentText | ContentToolRequest | ContentToolResult
"""What a ``stream="content"`` stream yields."""


async def text_chunks(
    events: AsyncIterator[AgentEvent], finish: Callable[[], object]
) -> AsyncIterator[str]:
    """The text of each ``text`` event, then ``finish()``."""
    async for event in events:
        if event.type == "text":
            yield event.text
    finish()


async def content_chunks(
    events: AsyncIterator[AgentEvent], finish: Callable[[], object]
) -> AsyncIterator[StreamContent]:
    """Text chunks, a tool request as each call starts and its result as it ends."""
    async for event in events:
        if event.type == "text":
            yield ContentText(text=event.text)
        elif event.type == "tool_start":
            yield ContentToolRequest(
                id=event.call_id, name=event.tool_name, arguments=event.arguments
            )
        elif event.type == "tool_end":
            yield ContentToolResult(
                call_id=event.call_id,
                name=event.tool_name,
                output=event.output,
                is_error=event.is_error,
            )
    finish()
