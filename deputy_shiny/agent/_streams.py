"""Streams for callers: a run's events as text chunks or as content objects.

``Agent.stream_async`` hands a run's events to :func:`text_chunks` (:class:`TextChunk`
chunks: plain ``str`` to every consumer) or :func:`content_chunks` (text, tool requests
and tool results as content objects). Both call ``finish`` after the last event, so
an error that ended the run raises after the stream, as ``run_async`` raises it.

A stream its consumer abandons frees the agent at once, however it is abandoned:
``aclose()``, a ``break`` out of ``async for``, an exception in the loop's body, or the
stream simply dropped. An async generator could not promise that: ``async for`` never
closes what it leaves, and a dropped generator is closed later, by a task its event loop
schedules, so the next ``stream_async`` would find the agent still running
(``AgentBusyError``). So a stream is an object of its own (:class:`RunStream`) that
closes the run's events when it is closed or collected. Closing the events ends the run
as interrupted ("The run was abandoned."), its conversation consistent; the engine's
clean-up runs synchronously, so it completes inside ``__del__``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from typing import Generic, TypeVar

from ..events import AgentEvent
from ..messages import ContentText, ContentToolRequest, ContentToolResult

__all__ = ["RunStream", "StreamContent", "TextChunk", "content_chunks", "text_chunks"]

logger = logging.getLogger(__name__)

StreamContent = ContentText | ContentToolRequest | ContentToolResult
"""What a ``stream="content"`` stream yields."""


class TextChunk(str):
    """A chunk of model text from ``stream="text"``: a ``str`` to every consumer.

    Its own type tells a renderer that the text is the model's, so untrusted: importing
    ``deputy_shiny.shiny`` registers one with shinychat that makes it inert in a
    browser (the runtime itself never imports shinychat).

    Examples:
        >>> chunk = TextChunk("Hi")
        >>> chunk == "Hi", "".join([chunk, "!"])
        (True, 'Hi!')
    """

    __slots__ = ()


T = TypeVar("T")


class RunStream(Generic[T]):
    """A run's chunks: an async iterator that frees the agent however it ends.

    ``convert`` maps an event to its chunk (None: the event shows nothing). After the
    last event, ``finish()`` raises the error that ended the run, if any.

    Examples:
        >>> import asyncio
        >>> from deputy_shiny import Agent
        >>> from deputy_shiny.testing import ScriptedModel
        >>> agent = Agent(ScriptedModel(["Hello there", "Again"]))
        >>> async def main():
        ...     async for chunk in agent.stream_async("Hi"):
        ...         break  # abandoned after the first chunk: the agent is free
        ...     return "".join([c async for c in agent.stream_async("Hi again")])
        >>> asyncio.run(main())
        'Again'
    """

    __slots__ = ("_convert", "_events", "_finish", "_open")

    def __init__(
        self,
        events: AsyncIterator[AgentEvent],
        finish: Callable[[], object],
        convert: Callable[[AgentEvent], T | None],
    ) -> None:
        self._events = events
        self._finish = finish
        self._convert = convert
        self._open = True  # until the events end, fail, or are closed

    def __aiter__(self) -> RunStream[T]:
        return self

    async def __anext__(self) -> T:
        if not self._open:
            raise StopAsyncIteration
        convert = self._convert
        try:
            async for event in self._events:
                chunk = convert(event)
                if chunk is not None:
                    return chunk
        except BaseException:
            self._open = False  # the run raised or was cancelled: it has ended
            raise
        self._open = False
        self._finish()
        raise StopAsyncIteration

    async def aclose(self) -> None:
        """End the run now, if it is still going (the agent is free when this returns)."""
        if self._open:
            self._open = False
            close = getattr(self._events, "aclose", None)
            if close is not None:
                await close()

    def __del__(self) -> None:
        # Dropped mid-run (a break, an exception in the consumer): close the run now,
        # not when the loop gets to it, so the agent can run again straight away.
        if getattr(self, "_open", False):
            self._open = False
            _close_now(self._events)


def _close_now(events: AsyncIterator[AgentEvent]) -> None:
    """Close ``events`` synchronously: the engine's clean-up never awaits."""
    close = getattr(events, "aclose", None)
    if close is None:
        return
    closing = close()
    try:
        closing.send(None)
    except StopIteration:
        return  # closed
    except BaseException:  # e.g. being iterated elsewhere: not ours to close
        logger.debug("an abandoned run's events could not be closed", exc_info=True)
        return
    # It awaited while closing (not the engine's own events): stop it there.
    closing.close()
    logger.warning("an abandoned run's events awaited while closing; they were cut short")


def _text(event: AgentEvent) -> TextChunk | None:
    return TextChunk(event.text) if event.type == "text" else None


def _content(event: AgentEvent) -> StreamContent | None:
    if event.type == "text":
        return ContentText(text=event.text)
    if event.type == "tool_start":
        return ContentToolRequest(id=event.call_id, name=event.tool_name, arguments=event.arguments)
    if event.type == "tool_end":
        return ContentToolResult(
            call_id=event.call_id,
            name=event.tool_name,
            output=event.output,
            is_error=event.is_error,
        )
    return None


def text_chunks(
    events: AsyncIterator[AgentEvent], finish: Callable[[], object]
) -> RunStream[TextChunk]:
    """The text of each ``text`` event, then ``finish()``."""
    return RunStream(events, finish, _text)


def content_chunks(
    events: AsyncIterator[AgentEvent], finish: Callable[[], object]
) -> RunStream[StreamContent]:
    """Text chunks, a tool request as each call starts and its result as it ends."""
    return RunStream(events, finish, _content)
