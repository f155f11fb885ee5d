"""Models: every request goes through litellm, named by a model string.

An Agent accepts a litellm model string (``"openai/gpt-4.1-mini"``), a frozen
:class:`ChatModel` with credentials and request parameters, or any object with an
``as_chat_model()`` method (the test models in :mod:`deputy_shiny.testing`).

The package holds :class:`ChatModel`, :func:`resolve_model` and
:func:`missing_credentials`; beside them, ``scripted.py`` (the test models, re-exported
by :mod:`deputy_shiny.testing`), ``demo.py`` (the offline ``deputy/demo`` model) and
``_custom_provider.py`` (the litellm ``CustomLLM`` bridge both stream through).

Example:
    >>> from deputy_shiny.models import ChatModel, resolve_model
    >>> resolve_model("openai/gpt-4.1-mini").provider
    'openai'
"""

from __future__ import annotations

from .._chat_model import (
    DEMO_MODEL,
    DEMO_PROVIDER,
    ChatModel,
    ModelLike,
    SupportsChatModel,
    check_model_string,
    missing_credentials,
)
from ..errors import InvalidModelError

__all__ = [
    "DEMO_MODEL",
    "DEMO_PROVIDER",
    "ChatModel",
    "ModelLike",
    "SupportsChatModel",
    "check_model_string",
    "missing_credentials",
    "resolve_model",
]


def resolve_model(model: object) -> ChatModel:
    """Turn a model string, :class:`ChatModel` or test model into a :class:`ChatModel`.

    Raises:
        InvalidModelError: for anything else, or a string that is not a model string.
    """
    if isinstance(model, ChatModel):
        return model
    if isinstance(model, str):
        if check_model_string(model).startswith(f"{DEMO_PROVIDER}/"):
            from .demo import ensure_demo_registered

            ensure_demo_registered()
        return ChatModel(model=model)
    if isinstance(model, SupportsChatModel):
        resolved = model.as_chat_model()
        if not isinstance(resolved, ChatModel):
            raise InvalidModelError(
                f"{type(model).__name__}.as_chat_model() returned {type(resolved).__name__}, "
                "not a ChatModel."
            )
        return resolved
    raise InvalidModelError(
        f"Cannot use a {type(model).__name__} as a model. Pass a litellm model string "
        "('openai/gpt-4.1-mini'), a deputy_shiny.ChatModel, or a test model from "
        "deputy_shiny.testing."
    )
