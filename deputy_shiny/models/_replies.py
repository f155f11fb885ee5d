"""The values a scripted model answers with: a reply, a tool call, a provider failure.

They are plain values shared by the test models (:mod:`deputy_shiny.models.scripted`),
the demo model and the litellm bridge that streams them; nothing here talks to
litellm. Import them from :mod:`deputy_shiny.testing`.

Examples:
    >>> from deputy_shiny.testing import ScriptedReply, ScriptedToolCall
    >>> ScriptedReply(tool_calls=[ScriptedToolCall("add", {"a": 1})]).tool_calls[0].name
    'add'
"""

from __future__ import annotations

import json
from typing import Any, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..errors import ConfigurationError
from ._provider import status_phrase

__all__ = ["ProviderFailure", "Reply", "ScriptedReply", "ScriptedToolCall"]


class ProviderFailure(Exception):
    """A simulated HTTP error from the provider, raised as the litellm exception for its status.

    Use it as a reply (or ``ScriptedReply.error``), or raise or return it from a
    :class:`FunctionModel` function. 429 becomes ``litellm.RateLimitError``, 503
    ``ServiceUnavailableError``, 500 ``InternalServerError``, 502 ``BadGatewayError``,
    408 and 504 ``Timeout``, 401 ``AuthenticationError``, 403
    ``PermissionDeniedError``, 404 ``NotFoundError``, 400 and other 4xx
    ``BadRequestError``, other 5xx ``APIError``: what litellm raises for a real
    provider answering with that status.

    Examples:
        >>> failure = ProviderFailure(429)
        >>> failure.status_code, failure.message
        (429, 'Too Many Requests (simulated by deputy_shiny.testing)')
        >>> from deputy_shiny.testing import ScriptedModel
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

    Examples:
        >>> ScriptedToolCall(name="get_weather", arguments={"city": "Paris"}).name
        'get_weather'
        >>> ScriptedToolCall(name="get_weather", arguments='{"city": ', id="call_1").id
        'call_1'
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

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
        usage: ``{"prompt_tokens": n, "completion_tokens": m}``, optionally with
            ``"cached_tokens": k`` (sent as ``prompt_tokens_details.cached_tokens``,
            as a provider with a prompt cache reports it); None estimates about
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

    Examples:
        >>> reply = ScriptedReply(text="Hello, world", chunk_size=5, cost=0.001)
        >>> reply.text, reply.tool_calls
        ('Hello, world', [])
        >>> slow = ScriptedReply(text="x" * 50, delay=0.05)  # lets a test interrupt it
        >>> broken = ScriptedReply(text="partial", error=ProviderFailure(503), error_after_chunks=1)
    """

    model_config = ConfigDict(
        frozen=True, extra="forbid", arbitrary_types_allowed=True, defer_build=True
    )

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
        if set(value) - {"cached_tokens"} != expected:
            raise ValueError(
                f"usage must have exactly the keys {sorted(expected)} (and optionally "
                f"'cached_tokens'), not {sorted(value)}"
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
