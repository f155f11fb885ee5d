"""Coming from chatlas: a chatlas ``Chat`` stands for the model it talks to.

A chatlas user has a ``ChatOpenAI(model=..., api_key=..., base_url=...)`` (or another
``Chat*``) already. Wherever the package takes a model, it takes that ``Chat`` too:
:func:`chat_model` reads the provider, the model name, the key and the endpoint the
chat holds and makes the :class:`~deputy_shiny.models.ChatModel` that reaches the same
model through litellm. Only the model is taken: the chat's turns, tools and system
prompt stay with chatlas (pass ``system_prompt=chat.system_prompt`` to the Agent to keep
it).

chatlas is never imported here: a chat is recognised by its class's module and the
attributes every chatlas provider has (``provider.name``, ``provider.model``, and the
OpenAI-compatible ones' ``_client`` with ``api_key`` and ``base_url``). A provider this
module does not know raises :class:`~deputy_shiny.errors.InvalidModelError` naming it,
with the model string to use instead; it is never guessed.

Examples:
    >>> from deputy_shiny.models._chatlas import litellm_prefix
    >>> litellm_prefix("Anthropic"), litellm_prefix("OpenRouter")
    ('anthropic', 'openrouter')
"""

from __future__ import annotations

from typing import Any, Final
from urllib.parse import urlsplit

from ..errors import InvalidModelError
from ._chat_model import ChatModel

__all__ = ["chat_model", "is_chatlas_chat", "litellm_prefix"]

# chatlas's provider names (``Chat*().provider.name``) and litellm's provider prefixes.
_PREFIXES: Final = {
    "openai": "openai",
    "anthropic": "anthropic",
    "google/gemini": "gemini",
    "google": "gemini",
    "gemini": "gemini",
    "groq": "groq",
    "deepseek": "deepseek",
    "openrouter": "openrouter",
    "perplexity": "perplexity",
    "mistral": "mistral",
    "ollama": "ollama_chat",
    "huggingface": "huggingface",
    "cloudflare": "cloudflare",
    "portkey": "openai",
}
# Endpoints a provider reaches without being told: anything else is passed as api_base.
_DEFAULT_HOSTS: Final = (
    "api.openai.com",
    "api.anthropic.com",
    "api.groq.com",
    "api.deepseek.com",
    "openrouter.ai",
    "api.perplexity.ai",
    "api.mistral.ai",
    "generativelanguage.googleapis.com",
)


def is_chatlas_chat(value: object) -> bool:
    """True for a chatlas ``Chat`` (recognised without importing chatlas)."""
    module = type(value).__module__ or ""
    provider = getattr(value, "provider", None)
    return (
        module.split(".")[0] == "chatlas"
        and isinstance(getattr(provider, "name", None), str)
        and isinstance(getattr(provider, "model", None), str)
    )


def litellm_prefix(provider_name: str) -> str | None:
    """litellm's provider prefix for a chatlas provider name, or None when unknown."""
    return _PREFIXES.get(provider_name.strip().lower())


def chat_model(chat: Any) -> ChatModel:
    """The :class:`ChatModel` that reaches the model a chatlas ``Chat`` talks to.

    Raises:
        InvalidModelError: for a provider this mapping does not know.
    """
    provider = chat.provider
    name: str = provider.name
    prefix = litellm_prefix(name)
    if prefix is None:
        raise InvalidModelError(
            f"A chatlas chat on {name!r} has no litellm mapping here: pass the litellm model "
            f"string instead, e.g. ChatModel(model='<provider>/{provider.model}', api_key=...)."
        )
    client = getattr(provider, "_client", None)
    key = getattr(client, "api_key", None)
    base = getattr(client, "base_url", None)
    api_base = str(base).rstrip("/") if base is not None else None
    if api_base is not None and urlsplit(api_base).hostname in _DEFAULT_HOSTS:
        api_base = None  # the provider's own endpoint: litellm knows it
    return ChatModel(
        model=f"{prefix}/{provider.model}",
        api_key=key if isinstance(key, str) and key else None,
        api_base=api_base,
    )
