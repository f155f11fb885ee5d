"""Reading an OpenAI-compatible stream one layer below litellm's stream wrapper.

For every provider litellm reaches through the OpenAI SDK (OpenAI, Azure and the
OpenAI-compatible servers an ``api_base`` points at), litellm's
``CustomStreamWrapper.completion_stream`` is the SDK's own ``AsyncStream`` of
``ChatCompletionChunk``. The wrapper then turns each of those into a
``ModelResponseStream``: a second pydantic object per chunk, plus its bookkeeping
for callbacks, caching and the Router. Over a real wire that costs more than the
SDK's own parse (about 350 µs against 230 µs a chunk here, ``benchmarks/stream_load.py
--mode wire``), and nothing reads it while no app listens to litellm: the kit
assembles the response itself (:class:`~deputy_shiny.models._provider.Response`).

So, on a stream :func:`~deputy_shiny.models._provider.lighten` found nobody listening
to, :func:`direct_chunks` reads the SDK chunks themselves. What the wrapper would have
done that matters stays, through litellm's own code:

* an error while streaming is mapped by the wrapper's own handler (the same typed
  litellm exception, failure callbacks dispatched);
* a stream that ends before any finish reason is the wrapper's "Stream ended before a
  finish_reason was received", and ``finish_reason="abort"`` its upstream-abort error;
* a read error after the finish reason ends the stream cleanly, as in the wrapper;
* an item that is not a ``ChatCompletionChunk`` goes through the wrapper's converter;
* a provider that reports no usage gets litellm's token count (:func:`counted_usage`),
  as the wrapper's end-of-stream rebuild would have given it.

litellm's post-call rules and its maximum streaming duration are enforced only by the
wrapper: when either is set, the wrapper runs. Anything unexpected about the stream's
shape leaves it to the wrapper too.

Examples:
    >>> from deputy_shiny.models._direct_stream import direct_chunks
    >>> direct_chunks(object()) is None  # not a litellm stream over the OpenAI SDK
    True
"""

from __future__ import annotations

import asyncio
import sys
import weakref
from collections.abc import AsyncIterator, Sequence
from typing import Any, NoReturn

from . import _litellm

__all__ = ["counted_usage", "direct_chunks", "lighten"]

# What the wrapper must have for this path to stand in for it (checked, never assumed).
_WRAPPER_PARTS = ("_log_stream_failure_and_raise", "_stream_eof_error", "chunk_creator", "aclose")


def direct_chunks(stream: Any) -> AsyncIterator[Any] | None:
    """The SDK chunks of a litellm stream, read past its wrapper, or None to keep the wrapper.

    Call it only on a stream that :func:`~deputy_shiny.models._provider.lighten`
    lightened (no app listens to litellm). The chunks are ``ChatCompletionChunk``
    objects (or, for any other item, what the wrapper's converter makes of it): read
    ``choices[0].delta`` and ``usage`` as on litellm's own chunks.
    """
    source = getattr(stream, "completion_stream", None)
    openai = sys.modules.get("openai")
    if openai is None or not isinstance(source, openai.AsyncStream):
        return None
    if any(not hasattr(stream, name) for name in _WRAPPER_PARTS):
        return None
    litellm = _litellm.get_litellm()
    if getattr(litellm, "post_call_rules", None) or _max_streaming_duration() is not None:
        return None
    return _chunks(stream, source)


def _max_streaming_duration() -> object:
    try:
        from litellm.constants import LITELLM_MAX_STREAMING_DURATION_SECONDS
    except ImportError:  # pragma: no cover - a litellm without the setting
        return None
    return LITELLM_MAX_STREAMING_DURATION_SECONDS


async def _chunks(stream: Any, source: Any) -> AsyncIterator[Any]:
    import httpx
    from openai.types.chat import ChatCompletionChunk

    finished = False
    try:
        async for item in source:
            chunk = item
            if not isinstance(item, ChatCompletionChunk):
                chunk = stream.chunk_creator(chunk=item)
                if chunk is None:
                    continue
            choices = chunk.choices
            if choices:
                reason = choices[0].finish_reason
                if reason == "abort":
                    _abort(stream, chunk)
                finished = finished or bool(reason)
            yield chunk
    except (httpx.ReadError, httpx.RemoteProtocolError) as exc:
        if not finished:  # after the finish reason the wrapper, too, ends cleanly
            await _fail(stream, exc)
    except Exception as exc:
        await _fail(stream, exc)
    else:
        if not finished and not getattr(stream, "is_mock", False):
            await _fail(stream, stream._stream_eof_error())


def _abort(stream: Any, chunk: Any) -> NoReturn:
    litellm = _litellm.get_litellm()
    raise litellm.InternalServerError(
        message="Upstream generation aborted (finish_reason=abort)",
        model=getattr(chunk, "model", None) or "",
        llm_provider=getattr(stream, "custom_llm_provider", None) or "",
    )


async def _fail(stream: Any, exc: BaseException) -> NoReturn:
    """Raise what the wrapper would: the mapped litellm error, failure callbacks fired."""
    await stream.aclose()
    stream._log_stream_failure_and_raise(exc)
    raise exc  # pragma: no cover - the wrapper's handler always raises


async def counted_usage(model: str, messages: Sequence[Any], text: str) -> tuple[int, int]:
    """litellm's token count of a request and its reply, for a provider that reported none.

    Counted in a worker thread: a tokenizer may load on first use.
    """
    litellm = _litellm.get_litellm()

    def count() -> tuple[int, int]:
        prompt = litellm.token_counter(model=model, messages=list(messages))
        reply = litellm.token_counter(model=model, text=text, count_response_tokens=True)
        return int(prompt), int(reply)

    return await asyncio.to_thread(count)


def lighten(stream: Any) -> bool:
    """Spare one litellm stream the work only an app's litellm callbacks or cache would read.

    litellm's stream wrapper does, for every stream, work whose only readers are
    litellm's success callbacks and its cache: at the end it rebuilds the whole
    response over all chunks (``stream_chunk_builder``, in a worker thread; a third of
    the process's CPU with 20 users streaming) and then computes the cost and logging
    payload for the callbacks; on each chunk it probes eight absent delta fields for
    the Router's mid-stream continuation (we own fallbacks and never continue a
    stream). This stream is ours alone, so while no app registered a litellm callback
    or cache (``_litellm.app_listens``, nor a per-request callback) those steps
    are switched off on this instance only: the usage chunk is made by litellm's own
    best-effort path (``calculate_total_usage`` over the provider-reported usage, the
    numbers the rebuild keeps). A provider that reports no usage keeps the rebuild,
    which estimates it. Anything unexpected leaves the stream as litellm made it.
    True when the stream was lightened: then nobody but us reads it, and
    :func:`~deputy_shiny.models._direct_stream.direct_chunks` may read below it.
    """
    logging_obj = getattr(stream, "logging_obj", None)
    if _litellm.app_listens() or logging_obj is None or _has_request_callbacks(logging_obj):
        return False
    try:
        from litellm.litellm_core_utils import streaming_handler
    except ImportError:  # pragma: no cover - a litellm without that module
        return False
    total_usage = getattr(streaming_handler, "calculate_total_usage", None)
    rebuild = getattr(type(stream), "_async_build_complete_streaming_response", None)
    if total_usage is None or rebuild is None or not hasattr(stream, "chunks"):
        return False
    # Weakly: the stream holds this function, so a strong reference would make each
    # stream (with all its chunks) a cycle, freed only by a full garbage collection.
    # Only the stream itself calls it, so it is alive then.
    this = weakref.ref(stream)

    async def reported_usage() -> Any:
        stream = this()
        if stream is None:  # pragma: no cover - only the live stream calls this
            return None
        chunks = stream.chunks
        if not any(getattr(chunk, "usage", None) is not None for chunk in chunks):
            return await rebuild(stream)  # nothing reported: litellm estimates it
        return stream.model_response_creator(chunk={"usage": total_usage(chunks=chunks)})

    async def no_listeners(*args: Any, **kwargs: Any) -> None:
        return None

    stream._async_build_complete_streaming_response = reported_usage
    logging_obj.dispatch_success_handlers = no_listeners
    if hasattr(stream, "_emitted_disqualifying_content"):
        stream._emitted_disqualifying_content = True
    return True


def _has_request_callbacks(logging_obj: Any) -> bool:
    """Callbacks passed with the request itself (``success_callback=[...]`` in params)."""
    return any(
        getattr(logging_obj, name, None)
        for name in ("dynamic_success_callbacks", "dynamic_async_success_callbacks")
    )
