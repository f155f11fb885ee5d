"""Models: every request goes through litellm, named by a model string.

An Agent accepts a litellm model string (``"openai/gpt-4.1-mini"``), a frozen
:class:`ChatModel` with credentials and request parameters, or any object with an
``as_chat_model()`` method (the test models in :mod:`deputy_shiny.testing`).

The package owns the wire, in dependency order (each module imports only those above it):

- ``_litellm.py``: the lazy litellm import (offline cost map) and the provider registry;
- ``_chat_model.py``: :class:`ChatModel`, the model-string check and what a model's
  provider needs or offers (:func:`missing_credentials`, :func:`supports_native_web_search`,
  :func:`supports_native_web_fetch`);
- ``_provider_errors.py``: a failed request classified, summarized and typed;
- ``_provider.py``: streaming one request, chunk assembly, provider errors, cost;
- ``_replies.py`` and ``_custom_provider.py``: the scripted replies and the litellm
  ``CustomLLM`` bridge the test models and the demo model stream through;
- ``scripted.py`` (the test models, re-exported by :mod:`deputy_shiny.testing`) and
  ``demo.py`` (the offline ``deputy/demo`` model);
- ``_resolve.py``: :func:`resolve_model`, which knows the demo model.

Examples:
    >>> from deputy_shiny.models import ChatModel, resolve_model
    >>> resolve_model("openai/gpt-4.1-mini").provider
    'openai'
"""

from __future__ import annotations

from ._chat_model import (
    DEMO_MODEL,
    DEMO_PROVIDER,
    ChatModel,
    ModelLike,
    SupportsChatModel,
    check_model_string,
    missing_credentials,
    supports_images,
    supports_native_web_fetch,
    supports_native_web_search,
)
from ._resolve import resolve_model

__all__ = [
    "DEMO_MODEL",
    "DEMO_PROVIDER",
    "ChatModel",
    "ModelLike",
    "SupportsChatModel",
    "check_model_string",
    "missing_credentials",
    "resolve_model",
    "supports_images",
    "supports_native_web_fetch",
    "supports_native_web_search",
]
