"""Streams for callers: a run's events as text chunks or as content objects.

``Agent.stream_async`` hands a run's events to :func:`stream_chunks`: :class:`TextChunk`
chunks (plain ``str`` to every consumer), or content objects (text, thinking, tool
requests and tool results); with ``type=`` only the structured output's JSON text. It
calls ``finish`` after the last event, so an error that ended the run raises after the
stream, as ``run_async`` raises it. A stream controller (ellmer's, chatlas's
``StreamController``) is reset as the stream starts; cancelling it interrupts the run.

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

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Generator
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from ..errors import ConfigurationError
from ..events import (
    AgentEvent,
    ContentEvent,
    RequestStartEvent,
    TextEvent,
    ToolEndEvent,
    ToolStartEvent,
)
from ..messages import ContentText, ContentThinking, ContentToolRequest, ContentToolResult

__all__ = [
    "RunStream",
    "StreamContent",
    "StreamController",
    "TextChunk",
    "checked_controller",
    "stream_chunks",
]

logger = logging.getLogger(__name__)

StreamContent = ContentText | ContentThinking | ContentToolRequest | ContentToolResult
"""What a ``stream="content"`` stream yields."""

# How often a stream looks at its controller while no event arrives (a tool running, a
# model thinking): a cancel takes effect within this, or at the next event.
CONTROLLER_POLL = 0.1


@runtime_checkable
class StreamController(Protocol):
    """What ``stream(controller=)`` takes: chatlas's ``StreamController`` (ellmer's
    ``stream_controller()``), or any object with these. ``cancel()`` it from anywhere to
    stop the run; a stream resets it as it starts."""

    @property
    def cancelled(self) -> bool: ...

    @property
    def reason(self) -> str | None: ...

    def reset(self) -> None: ...


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

    __slots__ = ("_control", "_convert", "_events", "_finish", "_open", "_watch")

    def __init__(
        self,
        events: AsyncIterator[AgentEvent],
        finish: Callable[[], object],
        convert: Callable[[AgentEvent], T | None],
        control: _Control | None = None,
    ) -> None:
        self._events = events
        self._finish = finish
        self._convert = convert
        self._open = True  # until the events end, fail, or are closed
        self._control = control
        self._watch: asyncio.Task[None] | None = None

    def __aiter__(self) -> RunStream[T]:
        return self

    def __await__(self) -> Generator[Any, None, RunStream[T]]:
        # chatlas's stream_async is a coroutine that gives the stream: shinychat's
        # Chat(client=) awaits it. Awaiting this stream gives itself.
        yield from ()
        return self

    async def __anext__(self) -> T:
        if not self._open:
            raise StopAsyncIteration
        convert = self._convert
        control = self._control
        if control is not None and self._watch is None:
            self._watch = asyncio.get_running_loop().create_task(control.watch())
        try:
            async for event in self._events:
                if control is not None:
                    control.check()
                chunk = convert(event)
                if chunk is not None:
                    return chunk
        except BaseException:
            self._end()  # the run raised or was cancelled: it has ended
            raise
        self._end()
        self._finish()
        raise StopAsyncIteration

    def _end(self) -> None:
        self._open = False
        if self._watch is not None:
            self._watch.cancel()

    async def aclose(self) -> None:
        """End the run now, if it is still going (the agent is free when this returns)."""
        if self._open:
            self._end()
            close = getattr(self._events, "aclose", None)
            if close is not None:
                await close()

    def __del__(self) -> None:
        # Dropped mid-run (a break, an exception in the consumer): close the run now,
        # not when the loop gets to it, so the agent can run again straight away.
        if getattr(self, "_open", False):
            self._end()
            _close_now(self._events)


class _Control:
    """A stream's controller, as ellmer's: reset as the stream starts; once cancelled,
    the run is interrupted with the controller's reason (its stop reason)."""

    __slots__ = ("_controller", "_interrupt")

    def __init__(self, controller: StreamController, interrupt: Callable[[str], object]) -> None:
        controller.reset()
        self._controller = controller
        self._interrupt = interrupt

    def check(self) -> bool:
        """Interrupt the run if the controller was cancelled (True then)."""
        controller = self._controller
        if not controller.cancelled:
            return False
        self._interrupt(controller.reason or "cancelled")
        return True

    async def watch(self) -> None:
        """Check while no event arrives, until cancelled (the stream ends)."""
        # Polled: a foreign controller (chatlas's) has no event to wait on.
        while not self.check():  # noqa: ASYNC110
            await asyncio.sleep(CONTROLLER_POLL)


def checked_controller(controller: object, interrupt: Callable[[str], object]) -> _Control | None:
    """The stream's control over ``controller`` (None: no controller), or a
    ConfigurationError for something that is not one."""
    if controller is None:
        return None
    if not isinstance(controller, StreamController):
        raise ConfigurationError(
            "controller must be a stream controller: chatlas.StreamController(), or an "
            "object with cancelled, reason and reset()"
        )
    return _Control(controller, interrupt)


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


class _Chunks:
    """Converts a run's events to a stream's chunks: text (``TextChunk``), or content
    objects (``content``: text, thinking, tool requests and results). ``structured_only``
    (``type=``): text only from the requests for the structured output, so the stream is
    the JSON value as the model writes it."""

    __slots__ = ("_content", "_in_json", "_structured_only")

    def __init__(self, content: bool, structured_only: bool) -> None:
        self._content = content
        self._structured_only = structured_only
        self._in_json = False

    def __call__(self, event: AgentEvent) -> Any:
        if isinstance(event, TextEvent):
            if self._structured_only and not self._in_json:
                return None
            return ContentText(text=event.text) if self._content else TextChunk(event.text)
        if isinstance(event, RequestStartEvent):
            self._in_json = event.structured
        elif not self._content:
            return None
        elif isinstance(event, ContentEvent) and isinstance(event.content, ContentThinking):
            return event.content
        elif isinstance(event, ToolStartEvent):
            return ContentToolRequest(
                id=event.call_id, name=event.tool_name, arguments=event.arguments
            )
        elif isinstance(event, ToolEndEvent):
            return ContentToolResult(
                call_id=event.call_id,
                name=event.tool_name,
                output=event.output,
                is_error=event.is_error,
            )
        return None


def stream_chunks(
    events: AsyncIterator[AgentEvent],
    finish: Callable[[], object],
    *,
    content: bool = False,
    structured_only: bool = False,
    control: _Control | None = None,
) -> RunStream[Any]:
    """A run's events as a stream's chunks (see :class:`_Chunks`), then ``finish()``."""
    return RunStream(events, finish, _Chunks(content, structured_only), control)
