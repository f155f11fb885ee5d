"""Reading a model's stream under time limits, with a note while nothing arrives.

A provider can accept a request and never answer, or stop halfway through a reply;
litellm's own limit is 600 s a try. :class:`WatchedStream` reads the stream in a reader
task of its own (which opens it, and closes it in its own ``finally``) and hands the
request's task each chunk from a buffer, so the request's task is never parked inside
the provider's client: it can be woken while nothing arrives, to show a
:class:`Waiting` note (after a quarter and three quarters of the limit: at 15 and 45 s
with the default 60 s) or to give up with :class:`_StreamTimeout` at the limit, without
cancelling a read halfway. The limits are the model's ``timeout`` until the first chunk
(never past the request's ``total_timeout``), then ``idle_timeout`` between chunks.

The reader runs in a context of its own (:func:`reader_context`), so that the provider
client's own timers cannot keep the caller's (a Shiny session's) alive. One timer
watches the silence. It is armed when the request's task waits and none is
armed, fires at most once per note or limit, and runs in an empty context
(:func:`~deputy_shiny._util.timeouts.call_at`): a chunk costs a clock read and an append,
never a timer or a task.

Examples:
    >>> import asyncio
    >>> async def silent():
    ...     await asyncio.sleep(10)
    ...     yield "never"
    >>> async def main():
    ...     watched = WatchedStream(silent(), first_byte=0.2, idle=0.2)
    ...     seen = []
    ...     try:
    ...         while True:
    ...             seen.append(await watched.next())
    ...     except _StreamTimeout as exc:
    ...         seen.append(exc.phase)
    ...     finally:
    ...         await watched.aclose()
    ...     return [type(item).__name__ if isinstance(item, Waiting) else item for item in seen]
    >>> asyncio.run(main())
    ['Waiting', 'Waiting', 'first_byte']
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import math
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Final, Literal
from urllib.parse import urlsplit

from .._util import log_context
from .._util.timeouts import call_at
from ..errors import ProviderTimeoutError
from . import _litellm
from ._chat_model import ChatModel

__all__ = [
    "NOTE_FRACTIONS",
    "Waiting",
    "WatchedStream",
    "model_host",
    "timeout_error",
]

NOTE_FRACTIONS: Final = (0.25, 0.75)
"""When a silence gets a :class:`Waiting` note, as fractions of the limit running."""
UNLIMITED_NOTES: Final = (15.0, 45.0)
"""When a silence without a limit gets its first notes (then one every minute)."""

Phase = Literal["first_byte", "idle", "total"]


@dataclass(frozen=True)
class Waiting:
    """Nothing has arrived from the provider for ``seconds`` (``started``: mid-reply)."""

    seconds: float
    limit: float | None
    started: bool


class _StreamTimeout(Exception):
    """The stream was silent for ``waited`` seconds, the limit of ``phase``."""

    def __init__(self, waited: float, phase: Phase) -> None:
        super().__init__(f"nothing for {waited:g} s ({phase})")
        self.waited = waited
        self.phase = phase


class WatchedStream:
    """``source``'s items, one :meth:`next` at a time, under the limits (seconds).

    ``deadline`` is a time on the loop's clock by which the first chunk must have come
    (the request's ``total_timeout``); None: only ``first_byte``. :meth:`aclose` must
    be called (in a ``finally``): it stops the reader and closes ``source`` there.
    """

    def __init__(
        self,
        source: AsyncIterator[Any],
        *,
        first_byte: float | None,
        idle: float | None,
        deadline: float | None = None,
    ) -> None:
        self._loop = asyncio.get_running_loop()
        self._source = source
        self._buffer: collections.deque[Any] = collections.deque()
        self._start = self._last = self._loop.time()
        self._started = False
        self._idle = idle
        self._first = self._first_limit(first_byte, deadline)
        self._notes = 0  # notes given for the current silence
        self._noted_for = self._last  # which silence (its start) they were for
        self._waiter: asyncio.Future[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._reader: asyncio.Task[None] | None = self._loop.create_task(
            self._read(), context=reader_context()
        )
        self._reader.add_done_callback(self._ring, context=contextvars.Context())

    def _first_limit(
        self, first_byte: float | None, deadline: float | None
    ) -> tuple[float, Phase] | None:
        left = deadline - self._start if deadline is not None else math.inf
        limit = first_byte if first_byte is not None else math.inf
        if left < limit:
            return max(left, 0.0), "total"
        return (limit, "first_byte") if limit != math.inf else None

    async def _read(self) -> None:
        source = self._source
        try:
            async for item in source:
                self._buffer.append(item)
                self._last = self._loop.time()
                self._started = True
                waiter = self._waiter
                if waiter is not None and not waiter.done():
                    waiter.set_result(None)
        finally:
            await source.aclose()  # type: ignore[attr-defined]

    def _ring(self, _: object = None) -> None:
        if _ is None:
            self._timer = None  # the timer fired (a done reader passes itself)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def next(self) -> Any:
        """The next item, or a :class:`Waiting` note when one is due; raises
        ``StopAsyncIteration`` after the last, what the source raised, or
        :class:`_StreamTimeout`."""
        while True:
            if self._buffer:
                return self._buffer.popleft()
            reader = self._reader
            if reader is None or reader.done():
                if reader is not None and not reader.cancelled():
                    reader.result()  # the source's own error
                raise StopAsyncIteration
            silence = self._loop.time() - self._last
            if self._noted_for != self._last:
                self._noted_for, self._notes = self._last, 0
            limit = self._limit()
            if limit is not None and silence >= limit[0]:
                raise _StreamTimeout(limit[0], limit[1])
            note = self._note_at(limit[0] if limit is not None else None)
            if silence >= note:
                self._notes += 1
                return Waiting(silence, limit[0] if limit is not None else None, self._started)
            due = self._last + min(note, limit[0] if limit is not None else math.inf)
            await self._wait(due)

    def _limit(self) -> tuple[float, Phase] | None:
        if not self._started:
            return self._first
        return (self._idle, "idle") if self._idle is not None else None

    def _note_at(self, limit: float | None) -> float:
        """The silence (seconds) at which the next note is due."""
        if limit is not None:
            fractions = NOTE_FRACTIONS
            return limit * fractions[self._notes] if self._notes < len(fractions) else math.inf
        if self._notes < len(UNLIMITED_NOTES):
            return UNLIMITED_NOTES[self._notes]
        return UNLIMITED_NOTES[-1] + 60.0 * (self._notes - len(UNLIMITED_NOTES) + 1)

    async def _wait(self, due: float) -> None:
        timer = self._timer
        if timer is not None and timer.when() > due:
            timer.cancel()  # the limit shrank (the reply started): wake sooner
            timer = None
        if timer is None:
            self._timer = call_at(self._loop, due, self._ring)
        waiter = self._waiter = self._loop.create_future()
        try:
            await waiter
        finally:
            self._waiter = None

    async def aclose(self) -> None:
        """Stop the reader (it closes the source) and the timer; nothing is left behind."""
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
        reader, self._reader = self._reader, None
        if reader is None:
            return
        if not reader.done():
            reader.cancel()
            await asyncio.wait((reader,))
        if not reader.cancelled():
            reader.exception()  # retrieved: a failure as it was stopped is not news
        self._buffer.clear()


def reader_context() -> contextvars.Context:
    """The context a stream's reader runs in: the run's log ids and an app's OpenTelemetry
    context, nothing else of the caller's.

    The provider's HTTP client schedules its own timers (its read timeout, 65 s by
    default) in the reader's context, and a cancelled timer stays in the loop's heap
    until its time: in the caller's context, a stopped run would keep a Shiny session
    (its Agent, chat, prompts) alive that long after the browser left.
    """
    carried: list[contextvars.ContextVar[Any]] = [log_context.run_ids, log_context.call_id]
    otel = sys.modules.get("opentelemetry.context")
    var = getattr(getattr(otel, "_RUNTIME_CONTEXT", None), "_current_context", None)
    if isinstance(var, contextvars.ContextVar):
        carried.append(var)
    current = contextvars.copy_context()
    context = contextvars.Context()
    for var in carried:
        if var in current:
            context.run(var.set, current[var])
    return context


def model_host(model: ChatModel) -> str:
    """Where ``model``'s requests go, for people: ``host[:port]`` of its ``api_base`` (or
    of litellm's default endpoint for the provider), else "the <provider> API".

    Never a path, a query or credentials.

    Examples:
        >>> model_host(ChatModel(model="openai/x", api_base="http://user:pw@127.0.0.1:8000/v1"))
        '127.0.0.1:8000'
    """
    base = model.api_base
    if base is None and _litellm.is_loaded() and not _litellm.is_registered(model.provider):
        try:
            base = _litellm.get_litellm().get_llm_provider(model.model)[3]
        except Exception:  # litellm does not know it: the provider's name will do
            base = None
    if isinstance(base, str) and base:
        try:
            parts = urlsplit(base)
            if parts.hostname:
                return f"{parts.hostname}:{parts.port}" if parts.port else parts.hostname
        except ValueError:  # a malformed port
            pass
    return f"the {model.provider} API"


def timeout_error(model: ChatModel, timeout: _StreamTimeout, provider: str) -> ProviderTimeoutError:
    """The typed error for a stream that stayed silent: it names the host and the limit,
    and the setting that changes it.

    Examples:
        >>> model = ChatModel(model="openai/x", api_base="http://127.0.0.1:9/v1", timeout=30)
        >>> error = timeout_error(model, _StreamTimeout(30.0, "first_byte"), "openai")
        >>> print(error)  # doctest: +NORMALIZE_WHITESPACE
        openai: 127.0.0.1:9 sent nothing for 30 s, so the request timed out
        (ChatModel(timeout=...) sets it)
        >>> error.host, error.limit, error.phase
        ('127.0.0.1:9', 30.0, 'first_byte')
    """
    host = model_host(model)
    waited = f"{host} sent nothing for {timeout.waited:g} s, so the request timed out"
    if timeout.phase == "total":
        total = model.total_timeout or timeout.waited
        reason = (
            f"{waited}: its {total:g} s for all attempts are spent "
            "(ChatModel(total_timeout=...) sets it)"
        )
    else:
        setting = "idle_timeout" if timeout.phase == "idle" and model.idle_timeout else "timeout"
        reason = f"{waited} (ChatModel({setting}=...) sets it)"
    return ProviderTimeoutError(
        f"{provider}: {reason}",
        host=host,
        limit=timeout.waited,
        phase=timeout.phase,
        transient=True,
    )
