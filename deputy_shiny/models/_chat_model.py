"""ChatModel: one litellm model string with its credentials and request parameters.

Import it from :mod:`deputy_shiny.models`. It is the wire's own module: the provider
module (:mod:`deputy_shiny.models._provider`) and the models built on it (scripted,
demo) need only this, never the package's ``__init__`` (whose
:func:`~deputy_shiny.models.resolve_model` knows the demo model, so importing it from
the wire would be a cycle).

Examples:
    >>> from deputy_shiny.models import ChatModel
    >>> ChatModel(model="anthropic/claude-sonnet-4-5", params={"temperature": 0}).name
    'claude-sonnet-4-5'
"""

from __future__ import annotations

import logging
import os
import re
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from ..errors import InvalidModelError
from . import _litellm

logger = logging.getLogger(__name__)

# Shape only: litellm knows the providers, and asking it means importing it. An optional
# "provider/" prefix, then a model name that may itself contain slashes
# ("openrouter/meta-llama/llama-3-70b").
_MODEL_SHAPE = re.compile(r"^[A-Za-z0-9][\w.\-:@]*(/[\w.\-:@+]+)*$")


DEFAULT_TIMEOUT = 60.0
"""``ChatModel.timeout`` by default: seconds for a reply to start (and between chunks)."""
DEFAULT_TOTAL_TIMEOUT = 180.0
"""``ChatModel.total_timeout`` by default: seconds for a request over all its attempts."""
CLIENT_TIMEOUT_MARGIN = 5.0
"""Seconds the HTTP client's own timeout is set past the longest of the agent's limits."""


class ChatModel(BaseModel):
    """A model to send requests to, through litellm.

    Attributes:
        model: litellm model string, ``"provider/name"``.
        api_key: Key for the provider; None reads the provider's usual environment
            variable (``OPENAI_API_KEY`` and so on). Never logged or saved.
        api_base: Alternative endpoint, e.g. a local OpenAI-compatible server.
        params: Extra ``litellm.acompletion`` parameters (``temperature``, ``max_tokens``...).
        timeout: Seconds to wait for a reply to start (the connection, the headers and
            its first chunk) before the attempt is abandoned: 60 by default (litellm's
            own 600 s would hold a session ten minutes per try). None: no limit.
        idle_timeout: Seconds to wait for each next chunk once the reply started; None
            (the default) uses ``timeout``.
        total_timeout: Seconds one request may take to start replying over all its
            attempts and the waits between them: no retry starts that could not begin
            before it, and the last attempt's wait ends at it. 180 by default, so a
            provider that accepts requests and never answers ends the run within three
            minutes (then the fallback models, each with its own). None: no limit.
        retries: How many times a request that failed transiently (a connection error,
            a timeout, HTTP 408, 429, 500, 502, 503, 504) before its first chunk is sent
            to this model again, before any fallback model is tried. Each attempt counts
            as a request in the usage and toward ``max_requests``. litellm's and the
            provider clients' own hidden retries are off: every attempt is the agent's.
        retry_delay: Seconds before the first retry, doubled for each next one (up to
            8 s, or this if longer); a provider's ``Retry-After`` of up to 60 s is
            honoured instead.

    Examples:
        >>> ChatModel(model="openai/gpt-4.1-mini", params={"temperature": 0.2}).provider
        'openai'
        >>> ChatModel(model="openai/gpt-4.1-mini", retries=0).retries
        0
        >>> slow = ChatModel(model="openai/o3", timeout=300, total_timeout=600)
        >>> (slow.timeout, slow.reply_idle_timeout, slow.total_timeout)
        (300.0, 300.0, 600.0)
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    model: str
    api_key: SecretStr | None = None
    api_base: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    timeout: float | None = Field(default=DEFAULT_TIMEOUT, gt=0)
    idle_timeout: float | None = Field(default=None, gt=0)
    total_timeout: float | None = Field(default=DEFAULT_TOTAL_TIMEOUT, gt=0)
    retries: int = Field(default=2, ge=0, le=10, strict=True)
    retry_delay: float = Field(default=0.5, ge=0, le=60)

    @field_validator("model")
    @classmethod
    def _check_shape(cls, value: str) -> str:
        check_model_string(value)
        return value

    @field_validator("params")
    @classmethod
    def _no_reserved_params(cls, value: dict[str, Any]) -> dict[str, Any]:
        reserved = {"model", "messages", "tools", "stream", "stream_options", "api_key"}
        clash = sorted(reserved & set(value))
        if clash:
            raise ValueError(f"params may not set {clash}: the agent sets them itself")
        hidden = sorted({"max_retries", "num_retries"} & set(value))
        if hidden:
            # Retries inside litellm or the provider's client would be invisible: not
            # counted as requests, not bounded by max_requests, not shown in the chat.
            raise ValueError(f"params may not set {hidden}: use ChatModel(retries=...)")
        return value

    @property
    def provider(self) -> str:
        """The provider prefix (``"openai"``), or ``"openai"`` for a bare model name."""
        return self.model.split("/", 1)[0] if "/" in self.model else "openai"

    @property
    def reply_idle_timeout(self) -> float | None:
        """The longest wait between two chunks of a reply: ``idle_timeout``, else ``timeout``."""
        return self.idle_timeout if self.idle_timeout is not None else self.timeout

    @property
    def name(self) -> str:
        """The model name without the provider prefix."""
        return self.model.split("/", 1)[1] if "/" in self.model else self.model

    def request_kwargs(self) -> dict[str, Any]:
        """The keyword arguments for ``litellm.acompletion`` that this config contributes."""
        kwargs: dict[str, Any] = {"model": self.model, **self.params}
        if self.api_key is not None:
            kwargs["api_key"] = self.api_key.get_secret_value()
        if self.api_base is not None:
            kwargs["api_base"] = self.api_base
        limits = [t for t in (self.timeout, self.reply_idle_timeout) if t is not None]
        if limits:
            # The agent's own timer enforces the limits (and says which one ran out); the
            # client's timeout, a little later, is only a backstop. Both unset: litellm's.
            kwargs["timeout"] = max(limits) + CLIENT_TIMEOUT_MARGIN
        # The agent retries itself (``retries``): the OpenAI client would otherwise retry
        # twice unseen, each attempt billed but never counted.
        kwargs["max_retries"] = 0
        return kwargs


@runtime_checkable
class SupportsChatModel(Protocol):
    """Anything that can describe itself as a :class:`ChatModel` (e.g. ``ScriptedModel``)."""

    def as_chat_model(self) -> ChatModel: ...


class ChatlasChatLike(Protocol):
    """A chatlas ``Chat`` (its ``provider`` names the model it talks to: ``_chatlas``)."""

    @property
    def provider(self) -> Any: ...


ModelLike = str | ChatModel | SupportsChatModel | ChatlasChatLike


def missing_credentials(model: ChatModel) -> list[str]:
    """Environment variables the model's provider needs for a key and does not have.

    Only API keys and tokens count: providers that need no key (a local Ollama) or
    authenticate otherwise (Vertex's application credentials) are not blocked. An
    explicit ``api_key`` or ``api_base`` skips the check. Imports litellm.

    Examples:
        >>> missing_credentials(ChatModel(model="openai/gpt-4.1-mini", api_key="sk-test"))
        []
    """
    if (
        model.api_key is not None
        or model.api_base is not None
        or _litellm.is_registered(model.provider)
    ):
        return []
    try:
        report = _litellm.get_litellm().validate_environment(model=model.model)
    except Exception:  # litellm does not know the model: the request will say so
        return []
    missing = [str(k) for k in report.get("missing_keys") or []]
    # litellm counts a variable set to "" as present; a request would still fail.
    conventional = f"{model.provider.upper().replace('-', '_')}_API_KEY"
    if conventional in os.environ and not os.environ[conventional].strip():
        missing.append(conventional)
    return sorted({k for k in missing if k.endswith(("_API_KEY", "_TOKEN", "_KEY"))})


def supports_native_web_search(model: ChatModel) -> bool:
    """True when the model's provider searches the web itself for this model (litellm's
    ``supports_web_search``), so an agent may register provider-native ``web_search``.

    The test and demo models (providers registered here) never do; a model litellm
    cannot answer for does not. Imports litellm unless the provider is registered.

    Examples:
        >>> supports_native_web_search(ChatModel(model="openai/gpt-4o-search-preview"))
        True
        >>> supports_native_web_search(ChatModel(model="openai/gpt-4o-mini"))
        False
    """
    return _litellm_says(model, "supports_web_search", registered=False)


def supports_native_web_fetch(model: ChatModel) -> bool:
    """True when the model's provider reads web pages itself for this model (litellm's
    ``supports_url_context``: Gemini's URL context), so an agent may register
    provider-native ``web_fetch``.

    The test and demo models (providers registered here) never do; a model litellm
    cannot answer for does not. Imports litellm unless the provider is registered.

    Examples:
        >>> supports_native_web_fetch(ChatModel(model="gemini/gemini-2.5-flash"))
        True
        >>> supports_native_web_fetch(ChatModel(model="openai/gpt-4o-search-preview"))
        False
    """
    return _litellm_says(model, "supports_url_context", registered=False)


def supports_images(model: ChatModel) -> bool:
    """True when the model takes image content (litellm's ``supports_vision``).

    The test and demo models (providers registered here) take whatever they are sent;
    a model litellm cannot answer for takes none (its images become a note).

    Examples:
        >>> supports_images(ChatModel(model="openai/gpt-4o-mini"))
        True
        >>> supports_images(ChatModel(model="openai/gpt-3.5-turbo"))
        False
    """
    return _litellm_says(model, "supports_vision", registered=True)


def _litellm_says(model: ChatModel, check: str, *, registered: bool) -> bool:
    """litellm's ``check`` (``supports_vision``...) for the model; ``registered`` for the
    providers registered here; False for a model litellm cannot answer for."""
    if _litellm.is_registered(model.provider):
        return registered
    try:
        return bool(getattr(_litellm.get_litellm(), check)(model=model.model))
    except Exception:  # litellm does not know the model: it has no such capability
        logger.debug("%s failed for %s", check, model.model, exc_info=True)
        return False


def check_model_string(value: object) -> str:
    """Raise :class:`InvalidModelError` unless ``value`` is shaped like a litellm model string."""
    if not isinstance(value, str) or not _MODEL_SHAPE.match(value):
        raise InvalidModelError(
            f"{value!r} is not a model string. Use a litellm model string such as "
            "'openai/gpt-4.1-mini' or 'anthropic/claude-sonnet-4-5', or 'deputy/demo' "
            "for the offline demo model."
        )
    return value


DEMO_PROVIDER = "deputy"
DEMO_MODEL = "deputy/demo"
