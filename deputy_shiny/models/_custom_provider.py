"""The bridge from scripted models to litellm's ``CustomLLM`` providers.

Each test model (:mod:`deputy_shiny.testing`) and the demo model registers a litellm
custom provider whose handler asks a *reply source* for a reply and streams it as
litellm ``GenericStreamingChunk`` dicts, so the engine talks to it exactly as to a real
provider (``litellm.acompletion(..., stream=True, stream_options={"include_usage": True})``).
Nothing here imports litellm at module level.

What the engine gets, found by running litellm 1.110.2 (``tests/test_testing.py`` checks it):

Cost
    litellm's ``completion_cost`` does not know custom providers, so the handler puts
    the scripted cost in ``provider_specific_fields[COST_FIELD]`` of its last stream
    chunk. The stream wrapper copies it onto the delta of an extra, empty-content chunk
    (``chunk.choices[0].delta.provider_specific_fields``) that reaches the consumer with
    or without ``stream_options``, before the finish chunk; in a non-streaming response
    it is on ``choices[0].message.provider_specific_fields``. :func:`reported_cost`
    reads both. The cost also goes into the usage block as ``usage["cost"]``, which
    litellm keeps on the final usage chunk and as ``_hidden_params["response_cost"]``,
    but litellm writes its *own* bill into ``usage.cost`` for real providers, so that
    field cannot tell a scripted cost from litellm's estimate; the namespaced key can.

Usage
    Usage on the last handler chunk never reaches the consumer on that chunk: the
    wrapper strips it and, with ``include_usage``, sends a final chunk (``choices == []``)
    whose ``usage`` is recomputed by ``litellm.stream_chunk_builder`` over *all* chunks
    (it keeps the handler's numbers). For a 20,000-chunk stream that rebuild alone takes
    about 2 s (in a worker thread), and litellm spends about 0.25 ms per chunk in the
    wrapper, whatever the handler does. The engine's streams skip that rebuild while no
    app listens to litellm (:func:`~deputy_shiny.models._provider.lighten`): their
    usage chunk then carries the handler's numbers through litellm's
    ``calculate_total_usage``.

Errors a consumer of ``litellm.acompletion`` sees when the handler raises
    * At request time (ScriptedModel exception replies, a sync FunctionModel function
      raising or returning one, :class:`~deputy_shiny.testing.ProviderFailure`): raised
      by ``await litellm.acompletion(...)`` itself, streaming or not. litellm exceptions
      pass through unchanged (``RateLimitError`` 429, ``ServiceUnavailableError`` 503,
      ``InternalServerError`` 500, ``BadGatewayError`` 502, ``Timeout`` 408 or 504,
      ``APIConnectionError``, ``AuthenticationError`` 401, ``NotFoundError`` 404,
      ``BadRequestError`` 400...), ``status_code`` intact. Any other exception
      (``ConnectionError``, ``TimeoutError``, ``ValueError``, our own
      ``ScriptedModelExhausted``...) becomes ``litellm.APIConnectionError`` with
      ``status_code == 500`` and a message holding the original text plus a traceback;
      the original is only reachable as its ``__context__``.
    * In the stream (``ScriptedReply(error=..., error_after_chunks=N)``, also N == 0):
      raised by ``__anext__`` after N chunks. Status 4xx other than 429 (including
      ``Timeout`` 408) is raised as that litellm exception, unwrapped. Everything else
      (429, 5xx, ``Timeout`` with status 504, plain exceptions after the
      ``APIConnectionError`` mapping above) is wrapped in
      ``litellm.exceptions.MidStreamFallbackError`` (a ``ServiceUnavailableError``
      subclass, not exported at the top of ``litellm``) whose
      ``status_code`` is the original's (429, 500, 502, 503, 504; 500 for plain
      exceptions), with the mapped exception in ``original_exception``,
      ``is_pre_first_chunk`` and ``generated_content``. Sync ``litellm.completion``
      streams behave the same. An *async* FunctionModel function is awaited in the
      stream, so its failure arrives this way too, before the first chunk.
    * Real providers (probed against a local HTTP server) look the same: HTTP 429/500/
      502/503 map to the classes above, 504 to ``Timeout`` with ``status_code == 504``,
      a refused connection to ``InternalServerError`` (500), a read timeout to
      ``Timeout`` (408); HTTP 529 ("overloaded") becomes ``APIError`` 529 from
      OpenAI-compatible providers but ``InternalServerError`` 500 from Anthropic.

:func:`classify_provider_error` unwraps all of that into (transient?, status).

Other litellm facts about custom providers
    * ``acompletion`` calls the handler's ``astreaming``/``acompletion`` in a worker
      thread (``run_in_executor``); only the returned async generator or coroutine
      runs on the event loop. So a FunctionModel's *sync* function runs in a worker
      thread, an *async* one on the loop.
    * litellm rejects parameters a custom provider does not declare (e.g.
      ``reasoning_effort`` raises ``UnsupportedParamsError``); ``temperature``,
      ``max_tokens``, ``top_p``, ``stop``, ``seed``, ``tools``, ``tool_choice``,
      ``parallel_tool_calls``, ``response_format`` (a pydantic class arrives as a JSON
      schema dict), ``top_k`` and ``extra_body`` reach the handler.
    * litellm aborts a stream when a text chunk arrives after one chunk longer than 2
      characters came ``REPEATED_STREAMING_CHUNK_LIMIT`` (100) times in a row: the
      consumer gets ``MidStreamFallbackError`` (500) wrapping ``InternalServerError``,
      which :func:`classify_provider_error` calls transient. Exactly 100 identical
      chunks followed only by the finish chunk pass.
    * The stream wrapper never yields to the event loop between chunks, so the
      handler does (``asyncio.sleep(0)`` every 32 chunks when there is no delay);
      otherwise a long scripted stream would starve every other task and could not be
      cancelled until it ended.
    * litellm scans ``custom_provider_map`` (and ``provider_list``, a list) on every
      request, so test models unregister their provider when garbage collected.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import math
import threading
import time
import uuid
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Final, Protocol

from . import _litellm
from ._provider import COST_FIELD
from ._replies import ProviderFailure, ScriptedReply

# Parameters never copied into ``model.requests[i]["params"]``: set by every request,
# recorded separately, or possibly secret.
_UNRECORDED_PARAMS: Final = frozenset(
    {
        "stream",
        "stream_options",
        "tools",
        "api_key",
        "api_base",
        "extra_headers",
        "headers",
        "max_retries",
    }
)
_SECRET_HINTS: Final = ("key", "secret", "password", "authorization", "credential")
# With no delay, a long stream never suspends and would starve the event loop (and
# could not be cancelled); yield to the loop every this many chunks.
_YIELD_EVERY: Final = 32


def provider_exception(
    failure: ProviderFailure, *, provider: str, model: str, litellm: ModuleType | None = None
) -> Exception:
    """The litellm exception a real provider raises for ``failure.status_code``.

    Mirrors litellm's own status mapping (``_map_exception_by_status``): 400 and other
    unlisted 4xx -> ``BadRequestError``, 401 ``AuthenticationError``, 402
    ``PaymentRequiredError``, 403 ``PermissionDeniedError``, 404 ``NotFoundError``,
    408 ``Timeout``, 429 ``RateLimitError``, 500 ``InternalServerError``, 502
    ``BadGatewayError``, 503 ``ServiceUnavailableError``, 504 ``Timeout`` (status 504),
    other 5xx ``APIError`` with that status.

    Examples:
        >>> from deputy_shiny.testing import ProviderFailure
        >>> from deputy_shiny.models._custom_provider import provider_exception
        >>> provider_exception(ProviderFailure(429), provider="p", model="p/m").status_code
        429
    """
    lm = litellm if litellm is not None else _litellm.get_litellm()
    import httpx

    status, message = failure.status_code, failure.message
    common: dict[str, Any] = {"message": message, "llm_provider": provider, "model": model}
    if status == 401:
        return lm.AuthenticationError(**common)
    if status == 402:
        return lm.PaymentRequiredError(**common)
    if status == 403:
        request = httpx.Request("POST", f"https://{provider}.invalid/v1/chat/completions")
        return lm.PermissionDeniedError(**common, response=httpx.Response(403, request=request))
    if status == 404:
        return lm.NotFoundError(**common)
    if status in (408, 504):
        return lm.Timeout(**common, exception_status_code=status)
    if status == 429:
        return lm.RateLimitError(**common)
    if status == 500:
        return lm.InternalServerError(**common)
    if status == 502:
        return lm.BadGatewayError(**common)
    if status == 503:
        return lm.ServiceUnavailableError(**common)
    if status < 500:
        return lm.BadRequestError(**common)
    return lm.APIError(status_code=status, **common)


# --------------------------------------------------------------------------- bridge


class ReplySource(Protocol):
    """What a scripted provider asks for each request (ScriptedModel, FunctionModel, demo).

    Examples:
        >>> class Echo:
        ...     def _scripted_response(self, request):
        ...         return "You said: " + request["messages"][-1]["content"]
        >>> Echo()._scripted_response({"messages": [{"role": "user", "content": "hi"}]})
        'You said: hi'
    """

    def _scripted_response(self, request: dict[str, Any]) -> object:
        """Return ``str | ScriptedReply | Exception`` (or an awaitable of one) for a request.

        ``request`` is ``{"messages": [...], "tools": [...], "params": {...}}`` in
        OpenAI chat format, a fresh copy owned by the source.
        """
        ...


def register_source(
    provider: str, source: ReplySource, *, weak: bool, lacks: Iterable[str] = ()
) -> None:
    """Register litellm provider ``provider`` answering from ``source``.

    With ``weak=True`` the handler holds ``source`` only weakly (test models, which
    unregister themselves when collected); the demo model passes ``weak=False``.
    ``lacks``: the capabilities its models lack (``supports_vision``...).
    Deferred until litellm is imported, like every :func:`_litellm.register_provider`.

    Examples:
        >>> from deputy_shiny.models._custom_provider import register_source
        >>> from deputy_shiny.models import _litellm
        >>> class Echo:
        ...     def _scripted_response(self, request):
        ...         return request["messages"][-1]["content"]
        >>> register_source("deputy-doc-echo", Echo(), weak=False)
        >>> _litellm.unregister_provider("deputy-doc-echo")
    """
    getter: Callable[[], ReplySource | None]
    if weak:
        getter = weakref.ref(source)
    else:

        def getter() -> ReplySource | None:
            return source

    def factory(litellm: ModuleType) -> Any:
        return _handler_class(litellm)(provider, getter)

    _litellm.register_provider(provider, factory, lacks=lacks)


@dataclass(slots=True)
class _Plan:
    """One reply, resolved into exactly what to stream."""

    text: str
    chunk_size: int
    calls: list[tuple[str, str, str]]  # (id, name, arguments)
    usage: dict[str, Any]
    cost: float | None
    delay: float
    error: BaseException | None
    error_after: int
    finish_reason: str

    @property
    def content_chunks(self) -> int:
        size = self.chunk_size
        return -(-len(self.text) // size) + sum(
            max(1, -(-len(args) // size)) for _, _, args in self.calls
        )


_handler_lock = threading.Lock()
_handler_cls: type | None = None


def _handler_class(litellm: ModuleType) -> type:
    """The ``CustomLLM`` subclass, defined once (it needs litellm imported)."""
    global _handler_cls
    with _handler_lock:
        if _handler_cls is None:
            _handler_cls = _define_handler(litellm)
        return _handler_cls


def _define_handler(litellm: ModuleType) -> type:
    from litellm.llms.custom_llm import CustomLLM

    class ScriptedHandler(CustomLLM):
        """litellm handler that streams the replies of one reply source."""

        def __init__(self, provider: str, source: Callable[[], ReplySource | None]) -> None:
            super().__init__()
            self.provider = provider
            self._source = source

        # litellm calls these with keyword arguments only.
        def streaming(self, **kwargs: Any) -> Iterator[dict[str, Any]]:
            outcome, request, model = self._start(kwargs)
            plan = self._plan(_run_sync(outcome), request, model)
            return _stream(plan)

        def astreaming(self, **kwargs: Any) -> AsyncIterator[dict[str, Any]]:
            # Runs in litellm's worker thread: request-time errors raise from
            # ``await litellm.acompletion``; an async FunctionModel is awaited in the stream.
            outcome, request, model = self._start(kwargs)
            if inspect.isawaitable(outcome):
                return self._astream_awaiting(outcome, request, model)
            return _astream(self._plan(outcome, request, model))

        async def _astream_awaiting(
            self, outcome: Awaitable[object], request: dict[str, Any], model: str
        ) -> AsyncIterator[dict[str, Any]]:
            plan = self._plan(await _guarded(outcome, self.provider, model), request, model)
            async for chunk in _astream(plan):
                yield chunk

        async def acompletion(self, **kwargs: Any) -> Any:
            outcome, request, model = self._start(kwargs)
            if inspect.isawaitable(outcome):
                outcome = await _guarded(outcome, self.provider, model)
            plan = self._plan(outcome, request, model)
            wait = _blocking_time(plan)
            if wait:
                await asyncio.sleep(wait)
            return self._respond(plan, kwargs["model_response"], model)

        def completion(self, **kwargs: Any) -> Any:
            outcome, request, model = self._start(kwargs)
            plan = self._plan(_run_sync(outcome), request, model)
            wait = _blocking_time(plan)
            if wait:
                time.sleep(wait)
            return self._respond(plan, kwargs["model_response"], model)

        def _start(self, kwargs: dict[str, Any]) -> tuple[object, dict[str, Any], str]:
            model = f"{self.provider}/{kwargs.get('model', '')}"
            source = self._source()
            if source is None:
                raise RuntimeError(
                    f"The scripted model behind {model!r} was garbage collected; keep a "
                    "reference to the ScriptedModel or FunctionModel while it is used."
                )
            request = _request_record(kwargs.get("messages"), kwargs.get("optional_params"))

            try:
                return source._scripted_response(request), request, model
            except ProviderFailure as failure:
                raise provider_exception(
                    failure, provider=self.provider, model=model, litellm=litellm
                ) from failure

        def _plan(self, outcome: object, request: dict[str, Any], model: str) -> _Plan:
            return _make_plan(outcome, request, provider=self.provider, model=model)

        def _respond(self, plan: _Plan, model_response: Any, model: str) -> Any:
            if plan.error is not None:
                raise plan.error
            fields = None if plan.cost is None else {COST_FIELD: plan.cost}
            tool_calls = [
                {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}
                for call_id, name, args in plan.calls
            ]
            message = litellm.Message(
                role="assistant",
                content=plan.text if plan.text or not tool_calls else None,
                tool_calls=tool_calls or None,
                provider_specific_fields=fields,
            )
            model_response.choices = [
                litellm.Choices(index=0, finish_reason=plan.finish_reason, message=message)
            ]
            model_response.model = model
            model_response.usage = litellm.Usage(**plan.usage)
            return model_response

    return ScriptedHandler


async def _guarded(outcome: Awaitable[object], provider: str, model: str) -> object:
    """Await an async FunctionModel's result, turning a raised ProviderFailure into litellm's."""

    try:
        return await outcome
    except ProviderFailure as failure:
        raise provider_exception(failure, provider=provider, model=model) from failure


def _run_sync(outcome: object) -> object:
    if not inspect.isawaitable(outcome):
        return outcome
    try:
        asyncio.get_running_loop()
    except RuntimeError:

        async def wait() -> object:
            return await outcome

        return asyncio.run(wait())
    if inspect.iscoroutine(outcome):
        outcome.close()
    raise RuntimeError(
        "An async FunctionModel function cannot answer a synchronous litellm.completion() "
        "call made inside a running event loop; use litellm.acompletion()."
    )


def _request_record(messages: object, optional_params: object) -> dict[str, Any]:
    params = dict(optional_params) if isinstance(optional_params, dict) else {}
    tools = params.get("tools") or []
    recorded = {
        key: value
        for key, value in params.items()
        if key not in _UNRECORDED_PARAMS and not any(hint in key.lower() for hint in _SECRET_HINTS)
    }
    return {
        "messages": plain_copy(messages or []),
        "tools": plain_copy(tools),
        "params": plain_copy(recorded),
    }


def plain_copy(value: Any) -> Any:
    """A deep copy of ``value`` as plain JSON data (pydantic objects become dicts).

    Examples:
        >>> from deputy_shiny.models._custom_provider import plain_copy
        >>> plain_copy([{"role": "user", "content": "hi"}])
        [{'role': 'user', 'content': 'hi'}]
    """
    return json.loads(json.dumps(value, default=_jsonable))


def _jsonable(obj: Any) -> Any:
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        return dump(exclude_none=True)
    if isinstance(obj, set | tuple | frozenset):
        return list(obj)
    return repr(obj)


def _make_plan(outcome: object, request: dict[str, Any], *, provider: str, model: str) -> _Plan:

    if isinstance(outcome, ProviderFailure):
        raise provider_exception(outcome, provider=provider, model=model) from outcome
    if isinstance(outcome, BaseException):
        raise outcome
    if isinstance(outcome, str):
        reply = ScriptedReply(text=outcome)
    elif isinstance(outcome, ScriptedReply):
        reply = outcome
    else:
        raise TypeError(
            f"A scripted model must answer with a str, a ScriptedReply or an exception, "
            f"not {type(outcome).__name__}: {outcome!r}"
        )
    calls = [
        (
            call.id or f"call_{uuid.uuid4().hex[:24]}",
            call.name,
            call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments),
        )
        for call in reply.tool_calls
    ]
    error: BaseException | None = reply.error
    if isinstance(error, ProviderFailure):
        error = provider_exception(error, provider=provider, model=model)
    if reply.usage is not None:
        prompt_tokens = reply.usage["prompt_tokens"]
        completion_tokens = reply.usage["completion_tokens"]
    else:
        prompt_tokens = estimate_tokens(_prompt_chars(request["messages"]))
        completion_tokens = estimate_tokens(
            len(reply.text) + sum(len(args) for _, _, args in calls)
        )
    usage: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    if reply.usage is not None and "cached_tokens" in reply.usage:
        usage["prompt_tokens_details"] = {"cached_tokens": reply.usage["cached_tokens"]}
    if reply.cost is not None:
        usage["cost"] = reply.cost
    return _Plan(
        text=reply.text,
        chunk_size=reply.chunk_size,
        calls=calls,
        usage=usage,
        cost=reply.cost,
        delay=reply.delay,
        error=error,
        error_after=reply.error_after_chunks,
        finish_reason="tool_calls" if calls else "stop",
    )


def estimate_tokens(chars: int) -> int:
    """Estimated tokens for ``chars`` characters: about 4 characters a token, at least 1.

    Examples:
        >>> from deputy_shiny.models._custom_provider import estimate_tokens
        >>> estimate_tokens(0), estimate_tokens(4), estimate_tokens(9)
        (1, 1, 3)
    """
    return max(1, math.ceil(chars / 4))


def _prompt_chars(messages: list[Any]) -> int:
    total = 0
    for message in messages:
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        if isinstance(content, str):
            total += len(content)
        elif isinstance(content, list):
            for part in content:
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    total += len(part["text"])
        for call in message.get("tool_calls") or ():
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict):
                total += len(str(function.get("name") or "")) + len(
                    str(function.get("arguments") or "")
                )
    return total


def _blocking_time(plan: _Plan) -> float:
    """How long a non-streaming request takes: the delays its chunks would have had."""
    if not plan.delay:
        return 0.0
    chunks = plan.error_after if plan.error is not None else plan.content_chunks
    return plan.delay * max(0, chunks - 1)


def _content_chunks(plan: _Plan) -> Iterator[dict[str, Any]]:
    text, size = plan.text, plan.chunk_size
    for start in range(0, len(text), size):
        yield {
            "text": text[start : start + size],
            "is_finished": False,
            "finish_reason": "",
            "usage": None,
            "index": 0,
        }
    for index, (call_id, name, args) in enumerate(plan.calls):
        for start in range(0, max(len(args), 1), size):
            first = start == 0
            yield {
                "text": "",
                "tool_use": {
                    "id": call_id if first else None,
                    "type": "function",
                    "function": {
                        "name": name if first else None,
                        "arguments": args[start : start + size],
                    },
                    "index": index,
                },
                "is_finished": False,
                "finish_reason": "",
                "usage": None,
                "index": 0,
            }


def _final_chunk(plan: _Plan) -> dict[str, Any]:
    chunk: dict[str, Any] = {
        "text": "",
        "is_finished": True,
        "finish_reason": plan.finish_reason,
        "usage": plan.usage,
        "index": 0,
    }
    if plan.cost is not None:
        chunk["provider_specific_fields"] = {COST_FIELD: plan.cost}
    return chunk


async def _astream(plan: _Plan) -> AsyncIterator[dict[str, Any]]:
    delay, error = plan.delay, plan.error
    limit = plan.error_after if error is not None else -1
    for sent, chunk in enumerate(_content_chunks(plan)):
        if sent == limit and error is not None:
            raise error
        if sent:
            if delay:
                await asyncio.sleep(delay)
            elif not sent % _YIELD_EVERY:
                await asyncio.sleep(0)
        yield chunk
    if error is not None:
        raise error
    yield _final_chunk(plan)


def _stream(plan: _Plan) -> Iterator[dict[str, Any]]:
    delay, error = plan.delay, plan.error
    limit = plan.error_after if error is not None else -1
    for sent, chunk in enumerate(_content_chunks(plan)):
        if sent == limit and error is not None:
            raise error
        if sent and delay:
            time.sleep(delay)
        yield chunk
    if error is not None:
        raise error
    yield _final_chunk(plan)
