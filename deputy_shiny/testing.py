"""Test models: scripted stand-ins for an LLM, so agents can be tested offline and fast.

:class:`ScriptedModel` answers each request with the next scripted reply;
:class:`FunctionModel` answers with whatever a function of the conversation returns.
Both are real litellm providers (each model registers its own), so an agent streams
from them exactly as from a hosted model: text in chunks, tool calls as tool-call
deltas, usage on the last chunk, errors as the litellm exceptions a provider raises.
Every request is recorded in ``model.requests``.

Importing this module does not import litellm.

Example:
    >>> from deputy_shiny import Agent, tool, tool_annotations
    >>> from deputy_shiny.testing import ScriptedModel, ScriptedReply, ScriptedToolCall
    >>> def add(a: int, b: int) -> int:
    ...     return a + b
    >>> model = ScriptedModel([
    ...     ScriptedReply(tool_calls=[ScriptedToolCall("add", {"a": 1, "b": 2})]),
    ...     "The sum is 3.",
    ... ])
    >>> local = tool_annotations(read_only_hint=True, open_world_hint=False)
    >>> agent = Agent(model, tools=[tool(add, description="Add two numbers.", annotations=local)])
    >>> agent.chat("What is 1 + 2?")
    'The sum is 3.'
    >>> len(model.requests)
    2
"""

from __future__ import annotations

import json
import threading
import uuid
import weakref
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, ClassVar, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

from . import _custom_provider, _litellm
from ._provider import status_phrase
from .errors import ConfigurationError, DeputyError
from .models import ChatModel

__all__ = [
    "FunctionModel",
    "ProviderFailure",
    "ScriptedModel",
    "ScriptedModelExhausted",
    "ScriptedReply",
    "ScriptedToolCall",
]


class ScriptedModelExhausted(DeputyError):
    """A :class:`ScriptedModel` got a request after all its replies were used.

    It reaches a caller of ``litellm.acompletion`` wrapped in
    ``litellm.APIConnectionError`` (litellm wraps every non-litellm exception);
    ``deputy_shiny._provider.deputy_error_cause`` finds it again.

    Example:
        >>> from deputy_shiny.errors import DeputyError
        >>> issubclass(ScriptedModelExhausted, DeputyError)
        True
    """


class ProviderFailure(Exception):
    """A simulated HTTP error from the provider, raised as the litellm exception for its status.

    Use it as a reply (or ``ScriptedReply.error``), or raise or return it from a
    :class:`FunctionModel` function. 429 becomes ``litellm.RateLimitError``, 503
    ``ServiceUnavailableError``, 500 ``InternalServerError``, 502 ``BadGatewayError``,
    408 and 504 ``Timeout``, 401 ``AuthenticationError``, 403
    ``PermissionDeniedError``, 404 ``NotFoundError``, 400 and other 4xx
    ``BadRequestError``, other 5xx ``APIError``: what litellm raises for a real
    provider answering with that status.

    Example:
        >>> failure = ProviderFailure(429)
        >>> failure.status_code, failure.message
        (429, 'Too Many Requests (simulated by deputy_shiny.testing)')
        >>> model = ScriptedModel([ProviderFailure(503), "Recovered."])
    """

    def __init__(self, status_code: int, message: str | None = None) -> None:
        if isinstance(status_code, bool) or not isinstance(status_code, int):
            raise ConfigurationError(f"status_code must be an int, not {status_code!r}")
        if not 400 <= status_code <= 599:
            raise ConfigurationError(
                f"status_code must be an HTTP error status (400-599), not {status_code}"
            )
        if message is None:
            phrase = status_phrase(status_code)
            message = f"{phrase} (simulated by deputy_shiny.testing)"
        super().__init__(message)
        self.status_code = status_code
        self.message = message

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.status_code, self.message))


class ScriptedToolCall(BaseModel):
    """One tool call in a scripted reply.

    ``arguments`` given as a dict is sent as JSON; a str is sent verbatim, so a test
    can send malformed JSON. Without an ``id``, each request that sends the call
    gets a fresh ``"call_<hex>"`` id.

    Example:
        >>> ScriptedToolCall(name="get_weather", arguments={"city": "Paris"}).name
        'get_weather'
        >>> ScriptedToolCall(name="get_weather", arguments='{"city": ', id="call_1").id
        'call_1'
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1)
    arguments: dict[str, Any] | str = Field(default_factory=dict)
    id: str | None = None

    def __init__(
        self, name: str, arguments: dict[str, Any] | str | None = None, id: str | None = None
    ) -> None:
        # Positional arguments allowed: ScriptedToolCall("add", {"a": 1}).
        super().__init__(name=name, arguments={} if arguments is None else arguments, id=id)

    @field_validator("arguments")
    @classmethod
    def _json_serializable(cls, value: dict[str, Any] | str) -> dict[str, Any] | str:
        if isinstance(value, dict):
            try:
                json.dumps(value)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"arguments must be JSON-serializable: {exc}") from exc
        return value


class ScriptedReply(BaseModel):
    """One scripted model reply: text and/or tool calls, usage, cost, pacing and failure.

    Attributes:
        text: The reply text, streamed in ``chunk_size``-character chunks (each a
            separate litellm stream chunk).
        tool_calls: Tool calls, streamed after the text as tool-call deltas (id and
            name on the first delta of each call, arguments in ``chunk_size`` pieces,
            parallel calls with distinct ``index``).
        usage: ``{"prompt_tokens": n, "completion_tokens": m}``; None estimates about
            4 characters a token over the prompt messages' text and over the reply
            text plus tool-call arguments (at least 1 each).
        cost: USD for this request (see ``_provider.reported_cost``); None
            means unknown.
        chunk_size: Characters per streamed chunk.
        delay: Seconds between consecutive chunks (``asyncio.sleep`` when async).
            A non-streaming request waits as long as the stream would have.
        error: Raised in the stream after ``error_after_chunks`` chunks (0: before
            the first chunk but after the request succeeded). To fail the request
            itself, give the exception as the reply instead.
        error_after_chunks: How many chunks stream before ``error``.

    litellm aborts a stream, as a guard against looping models, when a text chunk
    arrives after one chunk of more than 2 characters came 100 times in a row
    (``litellm.REPEATED_STREAMING_CHUNK_LIMIT``): the consumer gets
    ``MidStreamFallbackError`` (status 500) wrapping ``InternalServerError`` "The model
    is repeating the same chunk". This provider does not work around it, so
    ``ScriptedReply(text="ab" * 1000)`` (250 chunks ``"abababab"``) fails exactly as a
    real provider's stream would. Vary the text or change ``chunk_size`` when that is
    not what the test is about.

    Example:
        >>> reply = ScriptedReply(text="Hello, world", chunk_size=5, cost=0.001)
        >>> reply.text, reply.tool_calls
        ('Hello, world', [])
        >>> slow = ScriptedReply(text="x" * 50, delay=0.05)  # lets a test interrupt it
        >>> broken = ScriptedReply(text="partial", error=ProviderFailure(503), error_after_chunks=1)
    """

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    text: str = ""
    tool_calls: list[ScriptedToolCall] = Field(default_factory=list)
    usage: dict[str, int] | None = None
    cost: float | None = Field(default=None, ge=0)
    chunk_size: int = Field(default=8, ge=1)
    delay: float = Field(default=0.0, ge=0)
    error: Exception | None = None
    error_after_chunks: int = Field(default=0, ge=0)

    def __init__(
        self,
        text: str = "",
        tool_calls: list[ScriptedToolCall] | None = None,
        usage: dict[str, int] | None = None,
        cost: float | None = None,
        chunk_size: int = 8,
        delay: float = 0.0,
        error: Exception | None = None,
        error_after_chunks: int = 0,
    ) -> None:
        # Positional arguments allowed, in this order: ScriptedReply("Hello!").
        super().__init__(
            text=text,
            tool_calls=[] if tool_calls is None else tool_calls,
            usage=usage,
            cost=cost,
            chunk_size=chunk_size,
            delay=delay,
            error=error,
            error_after_chunks=error_after_chunks,
        )

    @field_validator("usage")
    @classmethod
    def _usage_keys(cls, value: dict[str, int] | None) -> dict[str, int] | None:
        if value is None:
            return None
        expected = {"prompt_tokens", "completion_tokens"}
        if set(value) != expected:
            raise ValueError(
                f"usage must have exactly the keys {sorted(expected)}, not {sorted(value)}"
            )
        if any(count < 0 for count in value.values()):
            raise ValueError("token counts cannot be negative")
        return value

    @model_validator(mode="after")
    def _error_after_needs_error(self) -> ScriptedReply:
        if self.error_after_chunks and self.error is None:
            raise ValueError("error_after_chunks is set but error is None")
        return self


Reply: TypeAlias = "str | ScriptedReply | Exception"
"""What a scripted model can answer with."""


class _ScriptedChatModel(ChatModel):
    """A ChatModel that keeps its test model alive (so its provider stays registered)."""

    _source: Any = PrivateAttr(default=None)


class _TestModel:
    """Shared machinery: an own litellm provider, request log, unregistration on collection."""

    _kind: ClassVar[str] = "scripted"

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self._provider = f"deputy-scripted-{uuid.uuid4().hex[:12]}"
        _custom_provider.register_source(self._provider, self, weak=True)
        finalizer = weakref.finalize(self, _litellm.forget_provider, self._provider)
        finalizer.atexit = False

    def as_chat_model(self) -> ChatModel:
        """The :class:`~deputy_shiny.models.ChatModel` that sends requests to this model.

        The returned ChatModel keeps this model alive, so an agent holding only the
        ChatModel still reaches it.

        Example:
            >>> ScriptedModel(["Hi"]).as_chat_model().model.endswith("/scripted")
            True
        """
        chat_model = _ScriptedChatModel(model=f"{self._provider}/{self._kind}")
        chat_model._source = self
        return chat_model

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._provider}, {len(self.requests)} requests>"

    def _scripted_response(self, request: dict[str, Any]) -> object:
        raise NotImplementedError


class ScriptedModel(_TestModel):
    """A test model that answers each request with the next scripted reply, in order.

    A str reply is ``ScriptedReply(text=...)``. An exception reply makes the request
    itself fail (``await litellm.acompletion(...)`` raises, before any chunk);
    :class:`ProviderFailure` becomes the litellm exception for its status, other
    litellm exceptions are raised as they are. A request after the last reply raises
    :class:`ScriptedModelExhausted`. ``requests`` records every request as
    ``{"messages": [...], "tools": [...], "params": {...}}``.

    Example:
        >>> from deputy_shiny import Agent
        >>> model = ScriptedModel(["Paris.", ProviderFailure(429)])
        >>> Agent(model).chat("Capital of France?")
        'Paris.'
        >>> model.requests[0]["messages"][-1]
        {'role': 'user', 'content': 'Capital of France?'}
    """

    _kind = "scripted"

    def __init__(self, responses: Iterable[Reply]) -> None:
        if isinstance(responses, str | bytes | ScriptedReply | BaseException):
            raise ConfigurationError(
                "ScriptedModel takes a list of replies, e.g. ScriptedModel(['Hello!'])."
            )
        replies: list[ScriptedReply | Exception] = []
        for position, item in enumerate(responses):
            if isinstance(item, str):
                replies.append(ScriptedReply(text=item))
            elif isinstance(item, ScriptedReply | Exception):
                replies.append(item)
            else:
                raise ConfigurationError(
                    f"Reply {position} is a {type(item).__name__}; a ScriptedModel reply must "
                    "be a str, a ScriptedReply or an exception instance."
                )
        self._replies: deque[ScriptedReply | Exception] = deque(replies)
        self._total = len(replies)
        self._lock = threading.Lock()
        super().__init__()

    @property
    def remaining(self) -> int:
        """How many scripted replies are left.

        Example:
            >>> ScriptedModel(["a", "b"]).remaining
            2
        """
        return len(self._replies)

    def _scripted_response(self, request: dict[str, Any]) -> object:
        with self._lock:
            self.requests.append(request)
            if self._replies:
                return self._replies.popleft()
        raise ScriptedModelExhausted(
            f"ScriptedModel got request {len(self.requests)} but was given only "
            f"{self._total} repl{'y' if self._total == 1 else 'ies'}. Add a reply for "
            "every model request the test makes (each tool round trip is one more request)."
        )


ReplyFunction: TypeAlias = Callable[
    [list[dict[str, Any]], list[dict[str, Any]]], "Reply | Awaitable[Reply]"
]


class FunctionModel(_TestModel):
    """A test model that answers with ``fn(messages, tools)``, sync or async.

    ``messages`` and ``tools`` are in OpenAI chat format (plain dicts, a fresh copy
    per call). ``fn`` returns a str, a :class:`ScriptedReply` or an exception
    (returned or raised: either fails the request, like an exception reply of a
    :class:`ScriptedModel`). A sync ``fn`` may be called in a worker thread (litellm
    dispatches provider calls there); an async one is awaited on the event loop.

    Example:
        >>> def echo(messages, tools):
        ...     return "You said: " + messages[-1]["content"]
        >>> model = FunctionModel(echo)
        >>> async def pick_tool(messages, tools):
        ...     name = tools[0]["function"]["name"]
        ...     return ScriptedReply(tool_calls=[ScriptedToolCall(name=name, arguments={})])
        >>> tool_caller = FunctionModel(pick_tool)
    """

    _kind = "function"

    def __init__(self, fn: ReplyFunction) -> None:
        if not callable(fn):
            raise ConfigurationError(
                f"FunctionModel needs a function (messages, tools) -> reply, "
                f"not {type(fn).__name__}."
            )
        self._fn = fn
        super().__init__()

    def _scripted_response(self, request: dict[str, Any]) -> object:
        self.requests.append(request)
        messages = _custom_provider.plain_copy(request["messages"])
        tools = _custom_provider.plain_copy(request["tools"])
        return self._fn(messages, tools)
