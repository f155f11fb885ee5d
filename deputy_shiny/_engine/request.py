"""The engine's model requests: one request with its retries and fallbacks, the
response streamed chunk by chunk (waiting notes, partial text saved to the journal),
and the finished response charged and recorded as a turn (a mixin of
:class:`~deputy_shiny._engine.loop.Engine`)."""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import AsyncIterator
from functools import partial
from typing import TYPE_CHECKING, Any

from .._util.interrupt import Interrupted
from ..conversation import Conversation
from ..events import (
    AgentEvent,
    ContentEvent,
    FallbackEvent,
    RequestEndEvent,
    RequestErrorEvent,
    RequestStartEvent,
    RequestUsage,
    RetryEvent,
    TextCompleteEvent,
    TextEvent,
    TurnEvent,
    UsageEvent,
    WaitingEvent,
)
from ..messages import Turn, TurnUsage
from ..models import ChatModel, supports_audio, supports_images
from ..models._provider import (
    ProviderFailed,
    Response,
    preflight,
    retry_delay,
    stream_response,
)
from ..models._watch import Waiting, model_host
from .budget import response_usage
from .state import RunState

if TYPE_CHECKING:
    from .._util.interrupt import Interrupter


class Requests:
    """The model-request half of the engine (mixed into Engine; private)."""

    if TYPE_CHECKING:
        interrupter: Interrupter

        def _emit(self, st: RunState, cls: type[Any], **fields: Any) -> Any: ...

        def _text_event(self, st: RunState, text: str) -> TextEvent: ...

        def _add_turn(self, st: RunState, turn: Turn) -> None: ...

    # ---------------------------------------------------------------- requests

    async def _request(
        self,
        st: RunState,
        response: Response,
        *,
        tools: list[dict[str, Any]],
        extra: dict[str, Any] | None = None,
        structured: bool = False,
    ) -> AsyncIterator[AgentEvent]:
        """One model request, with retries and fallbacks; fills ``response``
        (``structured``: it asks for the run's structured output).

        Every attempt is a request: it counts as it starts (toward the shared budgets
        too, so that concurrent delegated runs cannot all pass the same last-request
        check) and is charged what it cost when it ends, however it ends. A transient
        failure before the attempt's first chunk is retried on the same model
        (``ChatModel.retries``), then moves to the next fallback model; each further
        attempt must fit the run's request limit.
        """
        sendable: dict[tuple[bool, bool], list[dict[str, Any]]] = {}  # by images, audio may go
        fallbacks = st.deps.fallbacks
        attempt = 1  # on the current model
        loop = asyncio.get_running_loop()
        deadline: float | None = None  # the current model's total_timeout, on the loop's clock
        while True:
            model = st.model
            messages = _messages_for(st.conversation, model, sendable)
            if attempt == 1:
                total = model.total_timeout
                deadline = loop.time() + total if total is not None else None
            try:
                await preflight(model)  # a missing key: nothing is sent, nothing counts
            except ProviderFailed as failed:
                error = failed.error
                yield self._emit(st, RequestErrorEvent, error=str(error), transient=error.transient)
                raise
            await st.meter.admit()  # the host's budget (a user's day), for every attempt
            st.meter.count_request()
            try:
                yield self._emit(
                    st,
                    RequestStartEvent,
                    request_index=st.meter.own.requests,
                    model=model.model,
                    structured=structured,
                )
                async for event in self._stream(
                    st, model, messages, tools, response, extra, deadline
                ):
                    yield event
                return
            except ProviderFailed as failed:
                st.meter.count_response(response_usage(model, response, partial(list, messages)))
                error = failed.error
                yield self._emit(st, RequestErrorEvent, error=str(error), transient=error.transient)
                delay = retry_delay(model, attempt, failed.__cause__)
                # A retry must be able to start before the total deadline; it then
                # waits for its first chunk at most until that deadline.
                fits = deadline is None or loop.time() + delay < deadline
                if error.transient and not response.chunks and attempt <= model.retries and fits:
                    attempt += 1
                    self._limit_before_retry(st, failed)
                    yield self._emit(
                        st,
                        RetryEvent,
                        attempt=attempt,
                        attempts=model.retries + 1,
                        delay=delay,
                        error=str(error),
                    )
                    await self.interrupter.guard(_sleep(delay))
                    response.reset()
                    continue
                can_fall_back = error.transient and not st.progressed
                if not can_fall_back or st.fallbacks_used >= len(fallbacks):
                    raise
                self._limit_before_retry(st, failed)
                # The agent moves to the fallback for good (deps.report tells it).
                fallback = st.model = fallbacks[st.fallbacks_used]
                st.fallbacks_used += 1
                attempt = 1
                yield self._emit(
                    st,
                    FallbackEvent,
                    from_model=model.model,
                    to_model=fallback.model,
                    error=str(error),
                )
                response.reset()
            except (Interrupted, asyncio.CancelledError, GeneratorExit):
                # Stopped mid-attempt: what arrived may be billed (no awaits here).
                st.meter.count_response(response_usage(model, response, partial(list, messages)))
                raise

    def _limit_before_retry(self, st: RunState, failed: ProviderFailed) -> None:
        """Another attempt (a retry or a fallback) must fit the request limit: else the
        run stops with the limit's reason (the failure stays in its request_error)."""
        spent = st.meter.stop_before_request()
        if spent is not None:
            st.stop(*spent)
            raise _LimitStop from failed

    async def _stream(
        self,
        st: RunState,
        model: ChatModel,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        response: Response,
        extra: dict[str, Any] | None,
        deadline: float | None = None,
    ) -> AsyncIterator[AgentEvent]:
        params = {**st.deps.request_extras, **(extra or {})}
        include_partial = st.options.include_partial_messages
        st.partial = response
        journal = st.journal
        clock = time.monotonic
        save_at = clock() + journal.partial_interval if journal is not None else 0.0
        try:
            async for text in stream_response(
                model, messages, tools, params, response, self.interrupter.guard, deadline=deadline
            ):
                if isinstance(text, Waiting):  # nothing arrived for a while: say so
                    yield self._waiting_event(st, model, text)
                    continue
                if journal is not None and clock() >= save_at:  # never per chunk
                    journal.save_partial("".join(response.text))
                    save_at = clock() + journal.partial_interval
                event = self._text_event(st, text)
                if include_partial:
                    yield event
        finally:
            if response.chunks:
                st.progressed = True

    def _waiting_event(self, st: RunState, model: ChatModel, note: Waiting) -> AgentEvent:
        return self._emit(
            st,
            WaitingEvent,
            model=model.model,
            host=model_host(model),
            seconds=round(note.seconds, 1),
            limit=note.limit,
            started=note.started,
        )

    def _finish_response(self, st: RunState, response: Response) -> Turn:
        st.partial = None
        usage = response_usage(st.model, response, st.conversation.messages)
        st.meter.count_response(usage)
        turn = response.turn(usage)
        if st.observer is not None:
            st.observer.on_response(turn)
        self._add_turn(st, turn)
        st.response_text = turn.text
        return turn

    async def _after_request_events(self, st: RunState, turn: Turn) -> AsyncIterator[AgentEvent]:
        for content in turn.contents:  # what is neither text nor a tool call: reasoning
            if content.type not in ("text", "tool_request"):
                yield self._emit(st, ContentEvent, content=content, content_type=content.type)
        if turn.text:
            yield self._emit(st, TextCompleteEvent, text=turn.text)
        usage = turn.usage or TurnUsage()
        yield self._emit(
            st,
            RequestEndEvent,
            usage=RequestUsage(
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                cached_tokens=usage.cached_tokens,
            ),
            cost=usage.cost,
        )
        st.turn_number += 1
        yield self._emit(st, TurnEvent, turn=turn, turn_number=st.turn_number)
        yield self._emit(st, UsageEvent, usage=st.usage(), limits=st.options.limits)


class _LimitStop(Exception):
    """A retry or fallback would pass the run's request limit (its stop is recorded)."""


async def _sleep(seconds: float) -> None:
    """``asyncio.sleep`` whose timer holds no context: a cancelled wait must not keep
    a Shiny session alive until the timer's time (see :mod:`deputy_shiny._util.timeouts`)."""
    if seconds <= 0:
        await asyncio.sleep(0)
        return
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()
    timer = loop.call_later(seconds, _wake, done, context=contextvars.Context())
    try:
        await done
    finally:
        timer.cancel()


def _wake(done: asyncio.Future[None]) -> None:
    if not done.done():
        done.set_result(None)


def _messages_for(
    conversation: Conversation,
    model: ChatModel,
    made: dict[tuple[bool, bool], list[dict[str, Any]]],
) -> list[dict[str, Any]]:
    """The request's messages for ``model``: the images and sound tools returned go only
    to a model that takes them (asked only when there are some); ``made`` keeps each form."""
    images = not conversation.holds_tool_images() or supports_images(model)
    audio = not conversation.holds_tool_audio() or supports_audio(model)
    if (images, audio) not in made:
        made[images, audio] = conversation.messages(images=images, audio=audio)
    return made[images, audio]
