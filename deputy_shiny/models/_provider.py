"""The provider side of a request: streaming through litellm, assembly, errors, cost.

The engine hands :func:`stream_response` a model, the messages and the tools; it gets
the response's text chunk by chunk while the :class:`Response` fills with thinking,
tool calls, usage and a reported cost. Text and tool calls are assembled incrementally
(``stream_chunk_builder`` would cost as much as litellm itself per chunk).

Whatever litellm raises becomes one typed :class:`~deputy_shiny.errors.ProviderError`
(:func:`provider_error`) whose message is one readable line, secrets redacted; the
whole error, redacted too, goes to the log; the classifying itself (and the retry
wait) lives in :mod:`deputy_shiny.models._provider_errors`, re-exported here. A missing
API key is found before any network traffic (:func:`check_credentials`). The
scripted-model bridge
(:mod:`deputy_shiny.models._custom_provider`) builds on this module, never the reverse.

Examples:
    >>> from deputy_shiny.models._provider import classify_provider_error, redact
    >>> classify_provider_error(ConnectionResetError())
    (True, None)
    >>> redact("bad key sk-test-SECRET123")
    'bad key sk-test…'
"""

from __future__ import annotations

import asyncio
import json
import logging
import traceback
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

from .._util.interrupt import Guard, Interrupted
from .._util.redact import redact
from ..errors import (
    MissingCredentialsError,
    ProviderError,
    ProviderFailed,
)
from ..messages import (
    Content,
    ContentText,
    ContentThinking,
    Turn,
    TurnUsage,
    tool_request_from_json,
)
from . import _litellm
from ._chat_model import ChatModel, missing_credentials
from ._direct_stream import counted_usage, direct_chunks, lighten
from ._provider_errors import (
    MAX_BACKOFF,
    MAX_RETRY_AFTER,
    SUMMARY_LIMIT,
    TRANSIENT_STATUS_CODES,
    _classify_provider_error,
    _provider_name,
    classify_provider_error,
    deputy_error_cause,
    provider_error_summary,
    retry_delay,
    status_phrase,
)
from ._watch import Waiting, WatchedStream, _StreamTimeout, timeout_error

__all__ = [
    "COST_FIELD",
    "MAX_BACKOFF",
    "MAX_RETRY_AFTER",
    "SUMMARY_LIMIT",
    "TRANSIENT_STATUS_CODES",
    "ProviderFailed",
    "Response",
    "check_credentials",
    "classify_provider_error",
    "deputy_error_cause",
    "estimate_prompt_tokens",
    "known_cost",
    "load_litellm",
    "preflight",
    "provider_error",
    "provider_error_summary",
    "redact",
    "reported_cost",
    "retry_delay",
    "status_phrase",
    "stream_response",
]

logger = logging.getLogger(__name__)
T = TypeVar("T")

COST_FIELD: Final = "deputy_cost"
"""Key of the scripted cost (USD) in a chunk's ``provider_specific_fields``."""

# --------------------------------------------------------------------------- cost


def reported_cost(chunk: object) -> float | None:
    """The cost (USD) a scripted provider reported on this chunk or response, else None.

    Call it on every streamed chunk (and on a non-streaming ``ModelResponse``) and keep
    the first non-None value. Real providers never set it: use litellm's own cost
    calculation for them.

    Examples:
        >>> from deputy_shiny.models._provider import reported_cost
        >>> reported_cost(object()) is None
        True
    """
    choices = getattr(chunk, "choices", None)
    if choices:
        choice = choices[0]
        holder = getattr(choice, "delta", None)
        if holder is None:
            holder = getattr(choice, "message", None)
        cost = _cost_in(getattr(holder, "provider_specific_fields", None))
        if cost is not None:
            return cost
    return _cost_in(getattr(chunk, "provider_specific_fields", None))


def _cost_in(fields: object) -> float | None:
    if not isinstance(fields, dict):
        return None
    value = fields.get(COST_FIELD)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


# --------------------------------------------------------------------------- responses


@dataclass
class Response:
    """One model response being assembled from stream chunks."""

    text: list[str] = field(default_factory=list)
    thinking: list[str] = field(default_factory=list)
    calls: dict[int, dict[str, Any]] = field(default_factory=dict)
    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_tokens: int | None = None  # of the input, read from the provider's prompt cache
    cost: float | None = None
    chunks: int = 0  # chunks received: once any arrived, fallbacks no longer apply

    def reset(self) -> None:
        """Forget a failed attempt (before a fallback model tries again)."""
        self.text.clear()
        self.thinking.clear()
        self.calls.clear()
        self.input_tokens = self.output_tokens = self.cached_tokens = self.cost = None
        self.chunks = 0

    def turn(self, usage: TurnUsage | None) -> Turn:
        contents: list[Content] = []
        if self.thinking:
            contents.append(ContentThinking(thinking="".join(self.thinking)))
        if self.text:
            contents.append(ContentText(text="".join(self.text)))
        seen: set[str] = set()
        for index in sorted(self.calls):
            call = self.calls[index]
            call_id = call["id"]
            if not call_id or call_id in seen:
                # A missing id, or one this response already used: results are matched to
                # calls by id, so a duplicate would get the other call's result. The turn
                # replayed to the model carries the new id, so request and result agree.
                call_id = f"call_{uuid.uuid4().hex[:24]}"
            seen.add(call_id)
            contents.append(tool_request_from_json(call_id, call["name"], "".join(call["args"])))
        return Turn(role="assistant", contents=contents, usage=usage)


# --------------------------------------------------------------------------- streaming


async def stream_response(
    model: ChatModel,
    messages: list[dict[str, Any]],
    tools: Sequence[dict[str, Any]],
    params: Mapping[str, Any],
    response: Response,
    guard: Guard[Any],
    *,
    deadline: float | None = None,
) -> AsyncIterator[str | Waiting]:
    """Stream one request, yielding its text chunks and filling ``response``.

    ``params`` are extra request parameters (provider-native tools, a response
    format); ``guard`` wraps every await so an interrupt lands exactly there. While
    nothing arrives it yields a :class:`~deputy_shiny.models._watch.Waiting` note now and
    then; past the model's limits (``deadline``, on the loop's clock, caps the wait for
    the first chunk) it raises :class:`ProviderFailed` with a
    :class:`~deputy_shiny.errors.ProviderTimeoutError`, as for anything the provider (or
    litellm) raised.
    """
    litellm = await load_litellm()
    check_credentials(model)
    kwargs = model.request_kwargs()
    kwargs.update(params)
    if tools:
        # provider-native tool entries (``{"url_context": {}}``) ride beside the functions
        kwargs["tools"] = [*tools, *kwargs.get("tools", ())]
    opened: list[Any] = []  # the litellm stream, once the reader has it
    watched = WatchedStream(
        _chunks(litellm, messages, kwargs, opened),
        first_byte=model.timeout,
        idle=model.reply_idle_timeout,
        deadline=deadline,
    )
    try:
        while True:
            try:
                chunk = await guard(watched.next())
            except StopAsyncIteration:
                break
            if type(chunk) is Waiting:
                yield chunk
                continue
            response.chunks += 1
            usage = getattr(chunk, "usage", None)
            if usage is not None:
                response.input_tokens = usage.prompt_tokens
                response.output_tokens = usage.completion_tokens
                response.cached_tokens = cached_tokens(usage)
            choices = chunk.choices
            text = choices[0].delta.content if choices else None
            if text:
                response.text.append(text)
                yield text
            else:
                # Probing a pydantic chunk for an absent attribute is slow, so only
                # chunks without text are probed: a reported cost rides on an empty
                # chunk, and reasoning chunks carry no content.
                if response.cost is None:
                    response.cost = reported_cost(chunk)
                if choices:
                    reasoning = getattr(choices[0].delta, "reasoning_content", None)
                    if reasoning:
                        response.thinking.append(reasoning)
            if not choices:
                continue
            delta = choices[0].delta
            if delta.tool_calls:
                _add_tool_call_deltas(response, delta.tool_calls)
        if opened and opened[-1] and response.input_tokens is None:
            # The wrapper's rebuild would have counted them: litellm counts them here.
            response.input_tokens, response.output_tokens = await guard(
                counted_usage(opened[0].model or model.model, messages, "".join(response.text))
            )
    except (Interrupted, asyncio.CancelledError, GeneratorExit):
        raise
    except _StreamTimeout as late:
        error = timeout_error(model, late, _provider_name(late, model))
        logger.warning("model request to %s failed: %s", model.model, error)
        raise ProviderFailed(error) from None
    except Exception as exc:
        raise ProviderFailed(provider_error(exc, model)) from exc
    finally:
        await watched.aclose()


async def _chunks(
    litellm: Any, messages: list[dict[str, Any]], kwargs: dict[str, Any], opened: list[Any]
) -> AsyncIterator[Any]:
    """The request's chunks, read in the :class:`WatchedStream`'s reader task, which opens
    the stream and closes it. ``opened`` gets the stream, then whether it was read
    directly (below litellm's wrapper)."""
    stream = await litellm.acompletion(
        messages=messages, stream=True, stream_options={"include_usage": True}, **kwargs
    )
    direct: AsyncIterator[Any] | None = None
    try:
        direct = direct_chunks(stream) if lighten(stream) else None
        opened += [stream, direct is not None]
        async for chunk in direct if direct is not None else stream:
            yield chunk
    finally:
        if direct is not None:
            await direct.aclose()  # type: ignore[attr-defined]
        await _close_stream(stream)


def cached_tokens(usage: Any) -> int | None:
    """The cached part of a request's input tokens, as a usage block reports it.

    litellm's ``Usage`` and the OpenAI SDK's ``CompletionUsage`` (the direct path's
    chunks) both carry it as ``prompt_tokens_details.cached_tokens``; either may be
    absent or None (a provider without a prompt cache).
    """
    details = getattr(usage, "prompt_tokens_details", None)
    value = getattr(details, "cached_tokens", None)
    if value is None and isinstance(details, dict):
        value = details.get("cached_tokens")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


async def preflight(model: ChatModel) -> None:
    """What a request to ``model`` checks before anything is sent: litellm is loaded and
    the provider's key is set (else :class:`ProviderFailed`). Nothing was sent then, so
    the engine counts no request for it."""
    await load_litellm()
    check_credentials(model)


async def load_litellm() -> Any:
    if _litellm.is_loaded():
        return _litellm.get_litellm()
    # The first import takes seconds: never on the event loop.
    return await asyncio.to_thread(_litellm.get_litellm)


def _add_tool_call_deltas(response: Response, deltas: Sequence[Any]) -> None:
    for delta in deltas:
        index = getattr(delta, "index", None) or 0
        call = response.calls.get(index)
        if call is None:
            call = response.calls[index] = {"id": None, "name": "", "args": []}
        if delta.id:
            call["id"] = delta.id
        function = delta.function
        if function is not None:
            if function.name:
                call["name"] += function.name
            if function.arguments:
                call["args"].append(function.arguments)


async def _close_stream(stream: Any) -> None:
    for name in ("aclose", "close"):
        close = getattr(stream, name, None)
        if close is None:
            continue
        try:
            outcome = close()
            if asyncio.iscoroutine(outcome):
                await outcome
        except Exception:
            logger.debug("closing a model stream failed", exc_info=True)
        return


def estimate_prompt_tokens(messages: list[dict[str, Any]]) -> int:
    return max(1, len(json.dumps(messages, default=str)) // 4)


def known_cost(model: ChatModel, input_tokens: int, output_tokens: int) -> float | None:
    """The cost from litellm's price table, or None for models it has no price for."""
    if not _litellm.is_registered(model.provider):
        litellm = _litellm.get_litellm()
        try:
            prompt_cost, completion_cost = litellm.cost_per_token(
                model=model.model, prompt_tokens=input_tokens, completion_tokens=output_tokens
            )
        except Exception:
            return None
        return float(prompt_cost + completion_cost)
    return None


_CHECKED_CREDENTIALS: set[str] = set()


def check_credentials(model: ChatModel) -> None:
    """Fail before any network traffic when the provider's API key is not set.

    Some providers' clients (Mistral, Groq) would otherwise try to connect first.
    A key found in the environment is remembered per model string; a model with its
    own ``api_key`` or ``api_base`` needs no check, and is never remembered (the same
    string without them must still be checked).
    """
    if model.api_key is not None or model.api_base is not None:
        return
    if model.model in _CHECKED_CREDENTIALS:
        return
    missing = missing_credentials(model)
    if missing:
        raise ProviderFailed(
            MissingCredentialsError(
                f"{model.model}: no API key. Set {' or '.join(missing)} in the environment, "
                "or pass ChatModel(model=..., api_key=...).",
                transient=False,
            )
        )
    _CHECKED_CREDENTIALS.add(model.model)


def provider_error(exc: Exception, model: ChatModel) -> ProviderError:
    """Map whatever litellm raised to a typed ProviderError whose message is one clean line.

    The message is what users see (events, the chat): "<provider> returned <status>:
    <the provider's own words>", secrets redacted, without litellm's tracebacks and
    help text; a connection that failed names the host it went to instead (nothing
    returned a status), and a stream that could not be parsed says so. The log gets
    the one line at WARNING and the whole error, redacted too, at DEBUG.
    """
    error = _classify_provider_error(exc, model)
    logger.warning(
        "model request to %s failed (status %s, %s): %s",
        model.model,
        error.status_code,
        "transient" if error.transient else "not transient",
        error,
    )
    if logger.isEnabledFor(logging.DEBUG):
        logger.debug(
            "model request to %s failed: the whole error\n%s",
            model.model,
            redact(_error_detail(exc)).rstrip(),
        )
    return error


def _error_detail(exc: BaseException) -> str:
    """The whole error for the log: type, message and the traceback of every link in its chain."""
    try:
        return "".join(traceback.format_exception(exc))
    except Exception:  # a broken __str__ must not hide the failure itself
        return f"{type(exc).__name__}: {exc!r}"
