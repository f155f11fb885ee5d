"""What a failed provider request was: transient or not, its status, its one-line message.

Whatever litellm raised is classified here (:func:`classify_provider_error`), reduced to
the provider's own words (:func:`provider_error_summary`) and mapped to a typed
:class:`~deputy_shiny.errors.ProviderError` (``_classify_provider_error``); :func:`retry_delay`
says how long to wait before trying again. :mod:`deputy_shiny.models._provider` logs
the error and re-exports all of this, so importing from there keeps working.

Examples:
    >>> from deputy_shiny.models._provider_errors import classify_provider_error
    >>> classify_provider_error(ConnectionResetError())
    (True, None)
"""

from __future__ import annotations

import ast
import json
import random
import re
import socket
import sys
from collections.abc import Iterator, Sequence
from http import HTTPStatus
from typing import Final
from urllib.parse import urlsplit

from .._util.chain import causes
from .._util.redact import redact
from ..errors import (
    CredentialsRefusedError,
    DeputyError,
    MissingCredentialsError,
    ProviderError,
    UnknownModelError,
)
from . import _litellm
from ._chat_model import ChatModel

__all__ = [
    "MAX_BACKOFF",
    "MAX_RETRY_AFTER",
    "SUMMARY_LIMIT",
    "TRANSIENT_STATUS_CODES",
    "classify_provider_error",
    "deputy_error_cause",
    "provider_error_summary",
    "retry_delay",
    "status_phrase",
]

TRANSIENT_STATUS_CODES: Final = frozenset({408, 429, 500, 502, 503, 504})
"""HTTP statuses worth retrying on another model."""


# --------------------------------------------------------------------------- classifying


def classify_provider_error(exc: BaseException) -> tuple[bool, int | None]:
    """Classify what a litellm request raised as (transient?, HTTP status or None).

    Transient means worth trying another model: connection errors, timeouts and HTTP
    408, 429, 500, 502, 503 and 504. ``MidStreamFallbackError`` is unwrapped to the
    error it carries. ``APIConnectionError`` (litellm's status 500 there is a
    placeholder, so the status is None) is transient unless it merely wraps a plain
    programming error such as ``ValueError`` or ``ScriptedModelExhausted``.

    Examples:
        >>> from deputy_shiny.models._provider_errors import classify_provider_error
        >>> classify_provider_error(ConnectionResetError())
        (True, None)
        >>> classify_provider_error(ValueError("bad"))
        (False, None)
    """
    exc = _unwrap(exc)
    openai = sys.modules.get("openai")
    if openai is not None and isinstance(exc, openai.APIConnectionError):
        if isinstance(exc, openai.APITimeoutError):  # litellm.Timeout: 408, or 504
            status = _status_of(exc)
            return True, status if status is not None else 408
        chain = list(causes(exc))
        if not chain or any(_is_transient_cause(cause) for cause in chain):
            return True, None
        return False, None
    status = _status_of(exc)
    if status is not None:
        return status in TRANSIENT_STATUS_CODES, status
    return _is_connection_like(exc), None


# litellm's exception text carries lines meant for its own bug tracker and debugging.
_LITELLM_NOISE = re.compile(
    r"give feedback / get help|litellm\.info:|_turn_on_debug|if you need to debug this error|"
    r"received model group=|available model group fallbacks=|litellm retried:|"
    r"litellm max retries:|this looks like a bug in litellm|file it with one click",
    re.IGNORECASE,
)
# "litellm.MidStreamFallbackError: litellm.RateLimitError: ", "AuthenticationError: ",
# "OpenAIException - ": class names in front of the provider's own words, often repeated.
_ERROR_PREFIX = re.compile(
    r"^(?:(?:litellm\.)?(?:[A-Za-z_][\w.]*)?(?:Error|Exception|Timeout)\b\s*(?::|-)\s*)+"
)
_ORIGINAL_EXCEPTION = re.compile(r"\s*Original exception:.*$", re.IGNORECASE)
_STATUS_PREFIX = re.compile(r"^Error code:\s*\d+\s*-\s*", re.IGNORECASE)  # the openai client's
_JSON_MESSAGE = re.compile(
    r"""(["'])(?:message|detail|error_description)\1\s*:\s*(["'])((?:(?!\2).)+)\2"""
)
SUMMARY_LIMIT: Final = 300
"""At most this many characters of the provider's own words in a one-line summary."""


def provider_error_summary(exc: BaseException) -> str:
    """The provider's own words from what a litellm request raised, as one short line.

    Leaves out what litellm adds around them: tracebacks, its "Give Feedback / Get Help"
    and "LiteLLM.Info" lines, and the (often repeated) ``litellm.XError:`` prefixes;
    a JSON error body is reduced to its message. Not redacted: pass the result
    through the engine's ``redact`` before showing it. Empty when nothing is left.

    Examples:
        >>> from deputy_shiny.models._provider_errors import provider_error_summary
        >>> provider_error_summary(RuntimeError(
        ...     "litellm.AuthenticationError: AuthenticationError: invalid API key\\n"
        ...     "Give Feedback / Get Help: https://github.com/BerriAI/litellm/issues/new"))
        'invalid API key'
    """
    exc = _unwrap(exc)
    message = getattr(exc, "message", None)
    text = message if isinstance(message, str) and message.strip() else str(exc)
    for line in _meaningful_lines(text):
        line = _STATUS_PREFIX.sub("", _ORIGINAL_EXCEPTION.sub("", line).strip())
        if line.startswith(("{", "[")) or _JSON_MESSAGE.search(line):
            line = _json_error_message(line) or line
        line = " ".join(line.split())
        if line:
            if len(line) > SUMMARY_LIMIT:
                line = line[: SUMMARY_LIMIT - 1].rstrip() + "…"
            return line
    return ""


def _meaningful_lines(text: str) -> Iterator[str]:
    """The lines of an exception text, error-class prefixes stripped, without tracebacks
    and litellm's help lines."""
    in_traceback = False
    for raw in text.splitlines():
        line = _ERROR_PREFIX.sub("", raw.strip())
        if line.startswith("Traceback (most recent call last)"):
            in_traceback = True
            continue
        if in_traceback:
            if raw[:1].isspace() or not line:
                continue
            in_traceback = False  # the traceback's last line: "SomeError: message"
        if line and not _LITELLM_NOISE.search(line):
            yield line


def _json_error_message(text: str) -> str | None:
    """The message of a JSON error body (``{"error": {"message": ...}}`` and the like)."""
    start = min((i for i in (text.find("{"), text.find("[")) if i >= 0), default=-1)
    if start >= 0:
        body: object = None
        try:
            body = json.loads(text[start:])
        except ValueError:
            try:  # the openai client shows the body as a Python dict
                body = ast.literal_eval(text[start:])
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                body = None
        found = _message_in(body)
        if found:
            return found
    match = _JSON_MESSAGE.search(text)
    return match.group(3) if match else None


def _message_in(body: object, depth: int = 0) -> str | None:
    if depth > 4:
        return None
    if isinstance(body, list):
        return next((m for item in body if (m := _message_in(item, depth + 1))), None)
    if not isinstance(body, dict):
        return None
    for key in ("error", "detail"):
        if key in body:
            inner = body[key]
            if isinstance(inner, str) and inner.strip():
                return inner
            found = _message_in(inner, depth + 1)
            if found:
                return found
    for key in ("message", "error_description"):
        value = body.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return None


def deputy_error_cause(exc: BaseException) -> DeputyError | None:
    """The :class:`~deputy_shiny.errors.DeputyError` behind a litellm error, if any.

    litellm turns any non-litellm exception raised by a provider into
    ``APIConnectionError`` (or ``MidStreamFallbackError``), so a
    ``ScriptedModelExhausted`` raised by a test model reaches the consumer wrapped;
    this finds it again so it can be re-raised as itself.

    Examples:
        >>> from deputy_shiny.models._provider_errors import deputy_error_cause
        >>> from deputy_shiny.errors import DeputyError
        >>> try:
        ...     try:
        ...         raise DeputyError("original")
        ...     except DeputyError:
        ...         raise RuntimeError("wrapper")
        ... except RuntimeError as exc:
        ...     print(deputy_error_cause(exc))
        original
    """
    for error in (exc, *causes(exc)):
        if isinstance(error, DeputyError):
            return error
    return None


def _unwrap(exc: BaseException) -> BaseException:
    seen = 0
    while seen < 5:
        inner = getattr(exc, "original_exception", None)
        if not isinstance(inner, BaseException) or inner is exc:
            break
        exc = inner
        seen += 1
    return exc


def _status_of(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    if isinstance(status, int) and not isinstance(status, bool):
        return status
    return None


def _is_transient_cause(exc: BaseException) -> bool:
    return _is_connection_like(exc) or _status_of(exc) in TRANSIENT_STATUS_CODES


def _is_connection_like(exc: BaseException) -> bool:
    if isinstance(exc, OSError):  # ConnectionError, TimeoutError (asyncio's too), socket errors
        return True
    httpx = sys.modules.get("httpx")
    if httpx is not None and isinstance(exc, httpx.TransportError):
        return True
    openai = sys.modules.get("openai")
    if openai is not None and isinstance(exc, openai.APIConnectionError):
        return True
    return type(exc).__module__.split(".")[0] == "aiohttp"


def status_phrase(status_code: int) -> str:
    """The standard reason phrase of an HTTP status (``"Too Many Requests"``), or ``"Error"``.

    Examples:
        >>> from deputy_shiny.models._provider_errors import status_phrase
        >>> status_phrase(429)
        'Too Many Requests'
    """
    try:
        return HTTPStatus(status_code).phrase
    except ValueError:
        return "Error"


MAX_BACKOFF: Final = 8.0
"""The longest computed wait between retries (seconds)."""
MAX_RETRY_AFTER: Final = 60.0
"""The longest ``Retry-After`` honoured (seconds); a longer one falls back to backoff."""


def retry_delay(model: ChatModel, retry: int, exc: BaseException | None = None) -> float:
    """Seconds to wait before retry number ``retry`` (from 1) of a request to ``model``.

    The provider's ``Retry-After`` (or ``retry-after-ms``) on the failure, when it asks
    for at most a minute; else ``model.retry_delay`` doubled for each retry, at most
    8 s (or ``retry_delay`` itself if longer), less a random quarter so that many
    sessions do not retry in step.

    Examples:
        >>> from deputy_shiny.models import ChatModel
        >>> retry_delay(ChatModel(model="openai/gpt-4.1-mini", retry_delay=0.0), 3)
        0.0
        >>> 0.375 <= retry_delay(ChatModel(model="openai/gpt-4.1-mini"), 1) <= 0.5
        True
    """
    asked = _retry_after(exc) if exc is not None else None
    if asked is not None:
        return asked
    ceiling = max(MAX_BACKOFF, model.retry_delay)  # a longer first wait is the app's choice
    delay = min(ceiling, model.retry_delay * 2 ** (retry - 1))
    return delay * random.uniform(0.75, 1.0) if delay else 0.0


def _retry_after(exc: BaseException) -> float | None:
    """The wait a failure's response headers ask for, in seconds (None if none or odd)."""
    for error in (exc, _unwrap(exc), *causes(exc)):
        headers = getattr(error, "litellm_response_headers", None)
        if headers is None:
            headers = getattr(getattr(error, "response", None), "headers", None)
        if headers is None or not hasattr(headers, "get"):
            continue
        for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
            try:
                value = float(headers.get(name)) * scale
            except (TypeError, ValueError):
                continue
            if 0 <= value <= MAX_RETRY_AFTER:
                return value
    return None


_MISSING_KEY_TEXT = re.compile(r"missing (credentials|\w+ api key)|api_key client option", re.I)


def _connection_failure(exc: BaseException, model: ChatModel) -> str | None:
    """Why no connection to the provider was made ("the connection to host:port was
    refused"), or None when the request did reach it (or failed otherwise)."""
    chain = [exc, *causes(exc)]
    httpx = sys.modules.get("httpx")
    aiohttp = sys.modules.get("aiohttp")
    kinds: list[type[BaseException]] = [ConnectionRefusedError, socket.gaierror]
    if httpx is not None:
        kinds.append(httpx.ConnectError)
    connector = getattr(getattr(aiohttp, "client_exceptions", None), "ClientConnectorError", None)
    if isinstance(connector, type):
        kinds.append(connector)
    if not any(isinstance(error, tuple(kinds)) for error in chain):
        return None
    host = _request_host(chain, model)
    if any(isinstance(error, ConnectionRefusedError) for error in chain):
        return f"the connection to {host} was refused (is the server running?)"
    if any(isinstance(error, socket.gaierror) for error in chain):
        return f"could not resolve the host {host}"
    return f"could not connect to {host}"


def _request_host(chain: Sequence[BaseException], model: ChatModel) -> str:
    """``host[:port]`` the request went to: never a path, a query or credentials.

    The model's ``api_base``, else the URL the OpenAI client tried (litellm's own
    errors carry a placeholder request, so only the client's is read).
    """
    if model.api_base:
        try:
            parts = urlsplit(model.api_base)
            if parts.hostname:
                return f"{parts.hostname}:{parts.port}" if parts.port else parts.hostname
        except ValueError:  # a malformed port
            pass
    openai = sys.modules.get("openai")
    for error in chain:
        if openai is None or type(error) is not openai.APIConnectionError:
            continue
        try:
            url = error.request.url  # type: ignore[attr-defined]
        except Exception:  # no request recorded
            continue
        host = getattr(url, "host", None)
        if isinstance(host, str) and host:
            port = getattr(url, "port", None)
            return f"{host}:{port}" if isinstance(port, int) else host
    return f"the {model.provider} API"


def _timed_out(exc: BaseException, model: ChatModel) -> str | None:
    """Why the client gave up waiting ("host sent nothing for 30 s"), or None when
    the request did not time out on our side (a server may still send a real 408)."""
    chain = [exc, *causes(exc)]
    httpx = sys.modules.get("httpx")
    kinds: list[type[BaseException]] = [TimeoutError]
    if httpx is not None:
        kinds.append(httpx.TimeoutException)
    if not any(isinstance(error, tuple(kinds)) for error in chain):
        return None
    host = _request_host(chain, model)
    waited = f"for {model.timeout:g} s" if model.timeout is not None else "for too long"
    # A read timeout: before the first chunk or between two, the same words hold.
    return (
        f"{host} sent nothing {waited}, so the request timed out (ChatModel(timeout=...) sets it)"
    )


def _disconnected(exc: BaseException) -> bool:
    """Whether the connection broke once made: the server closed or reset it before the
    reply (or its stream) was complete. litellm calls this a 500 ("Connection error."),
    but nothing answered with one."""
    chain = [exc, *causes(exc)]
    kinds: list[type[BaseException]] = [ConnectionResetError, BrokenPipeError]
    httpx = sys.modules.get("httpx")
    if httpx is not None:
        kinds += [httpx.ReadError, httpx.WriteError]
        # Only the disconnects among its protocol errors ("Server disconnected without
        # sending a response", "peer closed connection ... incomplete chunked read").
        protocol = [e for e in chain if isinstance(e, httpx.RemoteProtocolError)]
        if any(re.search(r"disconnect|closed|incomplete", str(e), re.I) for e in protocol):
            return True
    client = getattr(sys.modules.get("aiohttp"), "client_exceptions", None)
    for name in ("ServerDisconnectedError", "ClientPayloadError"):
        kind = getattr(client, name, None)
        if isinstance(kind, type):
            kinds.append(kind)
    return any(isinstance(error, tuple(kinds)) for error in chain)


def _malformed_stream(exc: BaseException) -> bool:
    """Whether the provider's stream held an event that is not JSON (or not a chunk)."""
    return any(isinstance(error, json.JSONDecodeError) for error in (exc, *causes(exc)))


def _classify_provider_error(exc: Exception, model: ChatModel) -> ProviderError:
    litellm = _litellm.get_litellm()
    ours = deputy_error_cause(exc)
    if ours is not None:
        # ScriptedModelExhausted and friends, raised by our own providers and wrapped by litellm.
        return ProviderError(redact(_one_line(str(ours))), transient=False)
    transient, status = classify_provider_error(exc)
    text = str(exc)
    if "LLM Provider NOT provided" in text:
        return UnknownModelError(
            f"{model.model!r} is not a model litellm knows: check the provider prefix and "
            "the model name.",
            transient=False,
            status_code=status,
        )
    provider = _provider_name(exc, model)
    refused = _connection_failure(exc, model)
    if refused is not None:  # litellm calls this a 500, but nothing answered at all
        return ProviderError(f"{provider}: {refused}", transient=True, status_code=None)
    waited = _timed_out(exc, model)
    if waited is not None:  # litellm calls this a 408, but nothing answered with one
        return ProviderError(f"{provider}: {waited}", transient=True, status_code=status)
    if _disconnected(exc):  # before the headers or mid-stream: the same words hold
        host = _request_host([exc, *causes(exc)], model)
        return ProviderError(
            f"{provider}: the connection to {host} was closed before the reply was complete",
            transient=True,
            status_code=None,
        )
    if _malformed_stream(exc):  # litellm shows the JSON parser's own words
        return ProviderError(
            f"{provider} sent a malformed stream (an event that is not valid JSON), "
            "so the reply was cut off",
            transient=False,
            status_code=status,
        )
    reason = redact(provider_error_summary(exc)) or (
        status_phrase(status) if status is not None else type(exc).__name__
    )
    head = f"{provider} returned {status}" if status is not None else provider
    message = f"{head}: {reason}"
    if _MISSING_KEY_TEXT.search(text):
        if "key" not in reason.lower():
            message += " (check the API key)"
        return MissingCredentialsError(message, transient=False, status_code=status)
    if isinstance(exc, litellm.AuthenticationError):  # a key was sent, and turned down
        return CredentialsRefusedError(
            f"{message} (the API key was refused: check it)",
            transient=False,
            status_code=status,
        )
    if isinstance(exc, litellm.NotFoundError):
        return UnknownModelError(
            f"{message} (check the model name {model.model!r})",
            transient=False,
            status_code=status,
        )
    return ProviderError(message, transient=transient, status_code=status)


def _provider_name(exc: BaseException, model: ChatModel) -> str:
    """The provider a request went to: the model string's prefix, else litellm's guess."""
    if "/" in model.model:
        return model.model.split("/", 1)[0]
    named = getattr(exc, "llm_provider", None)
    return named if isinstance(named, str) and named else model.model


def _one_line(text: str) -> str:
    """The first non-blank line of ``text``, whitespace collapsed."""
    for line in text.splitlines():
        if line.strip():
            return " ".join(line.split())
    return ""
