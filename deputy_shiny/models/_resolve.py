"""resolve_model: what an Agent was given as a model, as a :class:`ChatModel`.

It sits above the wire because it knows the demo model (``deputy/demo``), which is built
on the wire: the wire (``_provider.py``) needs only :class:`ChatModel`, never this.

Examples:
    >>> from deputy_shiny.models import resolve_model
    >>> resolve_model("deputy/demo").provider
    'deputy'
"""

from __future__ import annotations

from ..errors import InvalidModelError
from ._chat_model import DEMO_PROVIDER, ChatModel, SupportsChatModel, check_model_string
from ._chatlas import chat_model, is_chatlas_chat
from .demo import ensure_demo_registered


def resolve_model(model: object) -> ChatModel:
    """Turn a model string, :class:`ChatModel`, test model or chatlas ``Chat`` into a
    :class:`ChatModel` (a chatlas chat gives the model it talks to: ``_chatlas``).

    Raises:
        InvalidModelError: for anything else, or a string that is not a model string.
    """
    if isinstance(model, ChatModel):
        return model
    if isinstance(model, str):
        if check_model_string(model).startswith(f"{DEMO_PROVIDER}/"):
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
    if is_chatlas_chat(model):
        return chat_model(model)
    raise InvalidModelError(
        f"Cannot use a {type(model).__name__} as a model. Pass a litellm model string "
        "('openai/gpt-4.1-mini'), a deputy_shiny.ChatModel, a chatlas Chat, or a test "
        "model from deputy_shiny.testing."
    )
