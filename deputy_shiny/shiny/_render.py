"""Agent events to shinychat stream chunks: the one place that knows shinychat's blocks.

The kit streams ``agent.run()`` events into ``chat.append_message_stream`` as:

* ``text`` events: plain ``str`` chunks of markdown, made inert first by
  :class:`~deputy_shiny.shiny._image_guard.ImageGuard` (no raw HTML; images only from
  origins the app allowed), coalesced to at most one every ``flush_interval`` seconds:
  each chunk costs shinychat and the websocket a message (~40 us of shinychat's Python
  and ~150 us to send, here), while a model sends tens of chunks a second;
* ``tool_start`` / ``tool_end``: a ``tool_request`` block, then the matching
  ``tool_result`` block (shinychat pairs them into one collapsible card). The block
  schema is private to shinychat (``_chat_types.py``), so it is built here only. Tool
  output is sent as ``code``: it never renders as HTML or markdown. A denied call is an
  error card titled ``Denied: <reason>``;
* ``tool_progress``: the running card's live status line (the tool's text, and a bar
  when it gave a fraction), replaced by the result when the call ends. shinychat cannot
  update a card in place (a second request block adds a second card), so the running
  card's title holds an empty placeholder and each report goes to the kit's script as
  a custom message (:data:`PROGRESS_MESSAGE`, sent by ``on_progress``), which fills the
  placeholder with text nodes, never markup. The engine already sends at most one
  report per call every 0.1 s, the newest;
* ``retry``: a note "<the failure> — retrying (2 of 3)…", sent at once like a card;
* ``waiting``: a note ``Still waiting for <host> (45 s)… Stop to give up`` while the
  provider sends nothing (twice per silent attempt by default);
* ``warning``: a note "Warning: <its message>" (inert text, like every note); the
  ``turn`` and ``content`` events show nothing (the reply's text already streamed, and
  the model's reasoning stays out of the chat);
* a readable note when the run ends for any reason other than ``complete``; a card
  still running then resolves as stopped.

``agent.stream_async`` chunks in an app's own ``Chat`` show as these cards too, their
text guarded the same way (:mod:`._inert_stream`).

Every string in a block is inert where shinychat puts it (:mod:`._escape`): the title
is HTML there, so it is escaped; the output is fenced code, so it cannot close its fence;
the tool name and the arguments shinychat shows as text itself.
"""

from __future__ import annotations

import asyncio
import contextvars
import enum
import json
import math
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterable, Sequence
from typing import Any

from shinychat.types import ChatMessage

from ..errors import ConfigurationError
from ..events import (
    AgentEvent,
    PermissionEvent,
    RetryEvent,
    StopEvent,
    TextEvent,
    ToolEndEvent,
    ToolProgressEvent,
    ToolStartEvent,
    WaitingEvent,
    WarningEvent,
)
from ..messages import ContentImage
from ..tools._content import checked_image
from ._escape import code_text, html_text, markdown_text
from ._image_guard import ImageGuard
from ._strings import DEFAULT_STRINGS, KitStrings

DEFAULT_FLUSH_INTERVAL = 0.04
"""Seconds between text updates a chat session sends (the agent chat module's default):
about 25 a second, smooth to read, instead of one websocket message per model chunk."""

PROGRESS_MESSAGE = "deputy-tool-progress"
"""The custom message that carries a running card's progress to the kit's script:
``{"card": <card id>, "message": <plain text>, "fraction": <0-1 or None>}``, and
``{"card": <card id>, "done": True}`` once the card has its result."""

ProgressSender = Callable[[dict[str, Any]], Awaitable[None]]
"""Sends one :data:`PROGRESS_MESSAGE` payload to the browser (the kit's session)."""

# A run's stop reason -> the KitStrings field that words its note.
_STOP_NOTES = {
    "interrupted": "stopped",
    "request_limit": "stopped_request_limit",
    "tool_call_limit": "stopped_tool_call_limit",
    "input_token_limit": "stopped_input_token_limit",
    "output_token_limit": "stopped_output_token_limit",
    "total_token_limit": "stopped_total_token_limit",
    "cost_limit": "stopped_cost_limit",
    "cost_unavailable": "stopped_cost_unavailable",
    "tool_loop": "stopped_tool_loop",
    "hook_requested_stop": "stopped_by_hook",
}


def tool_request_block(
    card_id: str,
    tool_name: str,
    arguments: dict[str, Any],
    *,
    title: str | None = None,
    progress: bool = False,
) -> ChatMessage:
    """A shinychat message holding a ``tool_request`` block (titled cards stand alone).

    ``title`` is plain text (it is escaped here: shinychat renders titles as HTML).
    ``progress`` gives a running card the placeholder its progress fills in (the title
    shinychat would show, ``tool_name()``, then an empty element naming the card).

    Examples:
        >>> block = tool_request_block("c1", "read_file", {"path": "<b>"}, title="Denied: <b>")
        >>> block.blocks[0]["title"], block.blocks[0]["arguments"]
        ('Denied: &lt;b&gt;', '{"path": "<b>"}')
        >>> tool_request_block("r-c1", "crunch", {}, progress=True).blocks[0]["title"]
        'crunch()<span class="deputy-tool-progress" data-deputy-progress="r-c1"></span>'
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
    elif progress:
        # Only while it runs: once the result arrives shinychat drops the running call
        # and its title with it. The card id is model-chosen in part: escaped.
        block["title"] = (
            f'{html_text(tool_name)}()<span class="deputy-tool-progress" '
            f'data-deputy-progress="{html_text(card_id)}"></span>'
        )
    return ChatMessage(content="", blocks=[block])  # type: ignore[list-item]


def tool_result_block(
    card_id: str,
    tool_name: str,
    output: str,
    *,
    is_error: bool,
    title: str | None = None,
    images: Sequence[ContentImage] = (),
) -> ChatMessage:
    """A shinychat message holding the ``tool_result`` block of a card (output as code).

    ``title`` is plain text, escaped here like :func:`tool_request_block`'s. ``images``
    (the inline images a tool or an MCP server returned) show in the card under the
    output, as shinychat's ``content_extra`` value: ``<img>`` elements whose source is
    the image's own ``data:`` URL, never markup and never a link. Each is checked again
    here, by its bytes, as the engine checked it (a transcript or a stream of another
    origin may hold anything): a link, an SVG or bytes of no image type are left out.

    Examples:
        >>> block = tool_result_block("c1", "read_file", "<i>", is_error=True, title="Denied: <i>")
        >>> block.blocks[0]["title"], block.blocks[0]["value"], block.blocks[0]["value_type"]
        ('Denied: &lt;i&gt;', '<i>', 'code')
    """
    value, value_type = code_text(output), "code"
    checked = [checked_image(i) for i in images]
    shown = [{"type": "image", "src": i.to_url()} for i in checked if isinstance(i, ContentImage)]
    if shown:
        text = {"type": "text", "value": value, "value_type": "code"}
        value, value_type = json.dumps([text, *shown]), "content_extra"
    block: dict[str, Any] = {
        "type": "tool_result",
        "version": 1,
        "request_id": card_id,
        "tool_name": tool_name,
        "status": "error" if is_error else "success",
        "value": value,
        "value_type": value_type,
    }
    if title is not None:
        # A titled card (a denial) stands alone: in a group shinychat shows only the
        # group's "Used <tool>" title.
        block["title"] = html_text(title)
        block["grouping"] = "none"
    return ChatMessage(content="", blocks=[block])  # type: ignore[list-item]


def stop_note(reason: str, message: str, strings: KitStrings = DEFAULT_STRINGS) -> str | None:
    """The note shown when a run ends other than ``complete`` (None when it completed).

    A failure is one line: the engine's message is already one (the log has the
    details), and only its first line is shown should another give more.

    Examples:
        >>> stop_note("provider_error", "openai returned 401: invalid API key")
        'The model request failed: openai returned 401: invalid API key'
    """
    if reason == "complete":
        return None
    line = _first_line(message)
    if reason == "provider_error":
        if line:
            return strings.format("model_request_failed_because", error=line)
        return strings.model_request_failed
    if reason == "error":
        return strings.format("run_failed_because", error=line) if line else strings.run_failed
    if reason == "budget_limit":  # the budget's own note says whose, and until when
        return line or strings.stopped_budget
    if reason in _STOP_NOTES:
        text: str = getattr(strings, _STOP_NOTES[reason])
        return text
    return strings.format("stopped_because", reason=line or reason)


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return " ".join(line.split())
    return ""


def note_chunk(text: str) -> str:
    """A note at the end of a chat message, as inert markdown: notes quote error
    messages from providers and tools, so they are kept out of markdown.

    Examples:
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
    flush_interval: float = 0.0,
    on_progress: ProgressSender | None = None,
    strings: KitStrings = DEFAULT_STRINGS,
) -> AsyncGenerator[str | ChatMessage, None]:
    """Turn a run's events into shinychat chunks; ``on_event`` sees every event first.

    ``on_progress`` sends a running card's ``tool_progress`` to the browser, where the
    kit's script shows it in the card (:data:`PROGRESS_MESSAGE`); without it, progress
    is not shown. ``strings`` word the notes and stopped cards (the app's ``KitStrings``).

    ``flush_interval`` (seconds) coalesces text: at most one text chunk every that long,
    what arrives meanwhile is buffered and goes out when the interval has passed, even if
    the model pauses (a timer, not the next event, sends it). Anything else (a tool card,
    a note, the end) first sends the buffered text, then goes out at once. ``0`` yields
    one chunk per text event. The agent chat module passes
    :data:`DEFAULT_FLUSH_INTERVAL`.

    Examples:
        >>> import asyncio
        >>> from deputy_shiny import Agent
        >>> from deputy_shiny.testing import ScriptedModel
        >>> async def main():
        ...     agent = Agent(ScriptedModel(["Hi there"]))
        ...     return [c async for c in render_events(agent.run("Hello"), flush_interval=0.04)]
        >>> asyncio.run(main())
        ['Hi there']
    """
    interval = check_flush_interval(flush_interval)
    guard = ImageGuard(allowed_image_origins)
    # A card's request is held until the call is allowed (then it shows as running) or
    # has ended: a denied call's card is then sent whole, titled with its denial, so it
    # stands alone. Every denial's result starts with "Denied: " (the engine's format).
    waiting: dict[str, ToolStartEvent] = {}
    cards = _Cards(strings)
    paced = _Paced(events, interval, on_event)
    try:
        while True:
            try:
                event = await paced.next()
            except Exception:
                held = _release(guard, paced.take(), end=True)  # the text so far still shows
                if held:
                    yield held
                for stopped in cards.stopped():
                    yield stopped
                raise
            if event is _Mark.END:
                break
            if event is _Mark.FLUSH:
                # The guard runs per flush and holds back a construct still open (an
                # image's URL, a "<"), so what goes out never ends in a half-open tag.
                safe = guard.feed(paced.take())
                if safe:
                    paced.sent()
                    yield safe
                continue
            if on_event is not None:
                on_event(event)
            update = None
            if isinstance(event, ToolProgressEvent | ToolEndEvent) and on_progress is not None:
                update = cards.progress(event)
            chunks = _event_chunks(
                event, waiting, cards, progress=on_progress is not None, strings=strings
            )
            # Text first, in order: nothing waits. A card starts a new markdown document
            # in the browser, so the guard starts afresh after it.
            card = bool(chunks) and isinstance(chunks[0], ChatMessage)
            held = _release(guard, paced.take(), end=card)
            if held:
                yield held
            if update is not None and on_progress is not None:
                await on_progress(update)
            for chunk in chunks:
                yield chunk
    finally:
        await paced.aclose()
    held = _release(guard, paced.take(), end=True)
    if held:
        yield held
    for stopped in cards.stopped():  # a run whose stop was not shown (see _chat_session)
        yield stopped


def _release(guard: ImageGuard, text: str, *, end: bool = False) -> str:
    """``text`` through the guard, nothing held back (the text part has ended; with
    ``end``, the markdown too: a card or the message's end follows)."""
    return (guard.feed(text) if text else "") + (guard.end() if end else guard.flush())


def _event_chunks(
    event: AgentEvent,
    waiting: dict[str, ToolStartEvent],
    cards: _Cards,
    *,
    progress: bool = False,
    strings: KitStrings = DEFAULT_STRINGS,
) -> list[str | ChatMessage]:
    """The chunks a non-text event shows: tool cards, a stop note (or none)."""
    if isinstance(event, ToolStartEvent):
        waiting[event.call_id] = event
    elif isinstance(event, PermissionEvent) and event.decision == "allow":
        start = waiting.pop(event.call_id, None)
        if start is not None:
            cards.running[start.call_id] = start
            card = _card(start)
            return [tool_request_block(card, start.tool_name, start.arguments, progress=progress)]
    elif isinstance(event, ToolEndEvent):
        cards.running.pop(event.call_id, None)
        denied = event.is_error and event.output.startswith("Denied: ")
        title = event.output.splitlines()[0][:300] if denied else None
        chunks: list[str | ChatMessage] = []
        start = waiting.pop(event.call_id, None)
        if start is not None:
            chunks.append(
                tool_request_block(_card(start), start.tool_name, start.arguments, title=title)
            )
        chunks.append(
            tool_result_block(
                _card(event),
                event.tool_name,
                event.output,
                is_error=event.is_error,
                title=title,
                images=event.images,
            )
        )
        return chunks
    elif isinstance(event, RetryEvent):
        line = strings.format(
            "retrying",
            error=_first_line(event.error),
            attempt=event.attempt,
            attempts=event.attempts,
        )
        # A blank line after it: the retried reply's text must not join the quote.
        return [note_chunk(line) + "\n"]
    elif isinstance(event, WaitingEvent):
        return [note_chunk(waiting_note(event, strings)) + "\n"]
    elif isinstance(event, WarningEvent):
        # A muted note, as a retry's: the message quoted as inert text.
        return [note_chunk(strings.format("warning", message=_first_line(event.message))) + "\n"]
    elif isinstance(event, StopEvent):
        # Every card resolves as the run ends: a call still running was stopped.
        ended: list[str | ChatMessage] = list(cards.stopped())
        note = stop_note(event.stop_reason, event.message, strings)
        if note:
            ended.append(note_chunk(note))
        return ended
    return []


def waiting_note(event: WaitingEvent, strings: KitStrings = DEFAULT_STRINGS) -> str:
    """The note the chat shows while the provider sends nothing.

    Examples:
        >>> event = WaitingEvent(agent_id="a", session_id="s", run_id="r", model="openai/x",
        ...                      host="127.0.0.1:8000", seconds=45.2, limit=60)
        >>> waiting_note(event)
        'Still waiting for 127.0.0.1:8000 (45 s)… Stop to give up'
    """
    name = "still_waiting_rest" if event.started else "still_waiting"
    return strings.format(name, host=event.host, seconds=f"{event.seconds:.0f}")


def _stopped_block(start: ToolStartEvent, strings: KitStrings) -> ChatMessage:
    output = strings.stopped_card_output
    message = tool_result_block(_card(start), start.tool_name, output, is_error=True)
    result: dict[str, Any] = message.blocks[0]  # type: ignore[assignment]
    # The card's header says so ("Stopped: <tool>" rather than "Used <tool>"); escaped,
    # as shinychat renders a title as HTML.
    result["title"] = html_text(strings.format("stopped_card_title", tool=start.tool_name))
    return message


class _Cards:
    """The cards shown as running (request sent, no result yet), by call id."""

    def __init__(self, strings: KitStrings = DEFAULT_STRINGS) -> None:
        self.strings = strings
        self.running: dict[str, ToolStartEvent] = {}
        self.reported: set[str] = set()  # running cards that showed progress

    def progress(self, event: ToolProgressEvent | ToolEndEvent) -> dict[str, Any] | None:
        """The :data:`PROGRESS_MESSAGE` for ``event``: a running card's report, or the
        end of a card that showed one (the script forgets it); None otherwise (a card
        not shown as running has no placeholder)."""
        card = _card(event)
        if isinstance(event, ToolEndEvent):
            if card not in self.reported:
                return None
            self.reported.discard(card)
            return {"card": card, "done": True}
        if event.call_id not in self.running:
            return None
        self.reported.add(card)
        return {"card": card, "message": event.message, "fraction": event.fraction}

    def stopped(self) -> list[ChatMessage]:
        """A "stopped" result for each card still running; none run any more."""
        ended = [_stopped_block(start, self.strings) for start in self.running.values()]
        self.running.clear()
        return ended


class _Mark(enum.Enum):
    """What :meth:`_Paced.next` returns when it returns no event."""

    FLUSH = "flush"  # the text gathered is due: take it
    END = "end"  # the run's events are over


class _Paced:
    """A run's events, its text gathered until it is due (every ``interval`` seconds).

    With no text waiting, :meth:`next` awaits the run in the caller's task, as ``async
    for`` does: no task, no timer. Once text waits for its time, a reader task takes
    the run's events, gathering text (and calling ``on_event`` for it) until a non-text
    event or the end, while :meth:`next` waits for the text's deadline, for text after
    a flush, or for the reader. So a model pausing mid-reply delays nothing: the
    deadline sends the text, the reader's step is never cancelled on a timeout, and a
    stream of text costs one timer per flush, not a task per event. The run keeps no
    cancel scope or context variable across a yield, so a step running in the reader
    cannot tell. :meth:`aclose` cancels a step still running and closes the events.
    """

    def __init__(
        self,
        events: AsyncIterator[AgentEvent],
        interval: float,
        on_event: Callable[[AgentEvent], Any] | None,
    ) -> None:
        self._events = events
        self._interval = interval
        self._on_event = on_event
        self._loop = asyncio.get_running_loop()
        self._text: list[str] = []  # raw model text not yet taken
        self._sent_at = -math.inf  # when text last went out (the loop's clock)
        self._reader: asyncio.Task[AgentEvent | _Mark] | None = None
        self._waiter: asyncio.Future[None] | None = None  # next() waiting on the reader

    def take(self) -> str:
        """The text gathered so far (it is no longer held here)."""
        text = "".join(self._text)
        self._text.clear()
        return text

    def sent(self) -> None:
        """Text just went out: the next goes an interval from now."""
        self._sent_at = self._loop.time()

    async def next(self) -> AgentEvent | _Mark:
        """``FLUSH`` when the gathered text is due, else the next non-text event (text
        events are gathered), or ``END`` after the last."""
        while True:
            if self._text and self._loop.time() >= self._sent_at + self._interval:
                return _Mark.FLUSH
            reader = self._reader
            if reader is None:
                if not self._text:
                    event = await _step(self._events)  # the fast path
                    if not isinstance(event, TextEvent):
                        return event
                    self._gather(event)
                    continue
                reader = self._reader = self._loop.create_task(self._read())
            if not reader.done():
                await self._wait(reader, self._sent_at + self._interval if self._text else None)
            if reader.done():
                self._reader = None
                return reader.result()  # text gathered before it is taken first

    async def _read(self) -> AgentEvent | _Mark:
        while True:
            event = await _step(self._events)
            if not isinstance(event, TextEvent):
                return event
            self._gather(event)

    def _gather(self, event: TextEvent) -> None:
        if self._on_event is not None:
            self._on_event(event)
        self._text.append(event.text)
        waiter = self._waiter
        if len(self._text) == 1 and waiter is not None and not waiter.done():
            waiter.set_result(None)  # text after a flush: next() sets its deadline

    async def _wait(self, reader: asyncio.Task[Any], deadline: float | None) -> None:
        """Until the reader is done, text arrives while none waits, or ``deadline``.

        The timer and the callback run in an empty context: a cancelled timer stays in
        the loop's heap until its time, and must not keep the session's context alive
        meanwhile (see :mod:`deputy_shiny._util.timeouts`).
        """
        waiter = self._waiter = self._loop.create_future()

        def wake(_: object = None) -> None:
            if not waiter.done():
                waiter.set_result(None)

        timer = None
        if deadline is not None:
            timer = self._loop.call_at(deadline, wake, context=contextvars.Context())
        reader.add_done_callback(wake, context=contextvars.Context())
        try:
            await waiter
        finally:
            self._waiter = None
            if timer is not None:
                timer.cancel()
            reader.remove_done_callback(wake)

    async def aclose(self) -> None:
        """Stop a step still running (the stream was cancelled or closed), then close
        the events, so no task is left behind and no exception goes unretrieved."""
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.cancel()
            await asyncio.wait((reader,))
            if not reader.cancelled():
                reader.exception()  # retrieved: a step that failed as it was stopped
        close = getattr(self._events, "aclose", None)
        if close is not None:
            await close()


async def _step(events: AsyncIterator[AgentEvent]) -> AgentEvent | _Mark:
    try:
        return await anext(events)
    except StopAsyncIteration:
        return _Mark.END


def check_flush_interval(value: float) -> float:
    """``value`` as a flush interval in seconds: a finite number, at least 0.

    Examples:
        >>> check_flush_interval(0.04)
        0.04
        >>> try:
        ...     check_flush_interval(float("nan"))
        ... except ConfigurationError as exc:
        ...     print(exc)
        flush_interval must be a finite number of seconds, at least 0 (got nan)
    """
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < 0
    ):
        raise ConfigurationError(
            f"flush_interval must be a finite number of seconds, at least 0 (got {value!r})"
        )
    return float(value)


def _card(event: Any) -> str:
    # Model call ids can repeat across runs ("call_1"): cards are keyed per run.
    return f"{event.run_id[-12:]}-{event.call_id}"
