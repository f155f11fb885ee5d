"""The offline demo model, ``deputy/demo``: scripted replies, not an LLM.

It lets the app and the examples run with no API key and no network. It says so
plainly: its first reply introduces it as a scripted demo and explains how to use a
real model; later replies are canned text that quotes the user's message back.

Example:
    >>> from deputy_shiny.demo import demo_reply
    >>> reply = demo_reply([{"role": "user", "content": "Hello"}], [])
    >>> "scripted replies, not an LLM" in reply.text
    True
"""

from __future__ import annotations

import re
import threading
from typing import Any, Final

from . import _custom_provider, _litellm
from .models import DEMO_PROVIDER
from .testing import ScriptedReply

__all__ = ["demo_reply", "ensure_demo_registered"]

INTRO: Final = (
    "Hi! I'm the offline demo model — scripted replies, not an LLM. I don't understand "
    "what you write; I answer with canned text so you can try this app without an API "
    "key or network access. To use a real model, set DEPUTY_MODEL to a litellm model "
    "string (for example openai/gpt-4.1-mini or anthropic/claude-sonnet-4-5) and set "
    "that provider's API key (for example OPENAI_API_KEY or ANTHROPIC_API_KEY), then "
    "restart the app."
)

_LATER: Final = (
    'You wrote "{quote}". I can only echo that back: I\'m the scripted demo model, '
    "so I can't reason about it.",
    'Reply number {turn} from the demo model. Your message had {words} and began "{quote}". '
    "A real model would answer it properly.",
    'Noted: "{quote}". That is all a scripted demo can do with it; set DEPUTY_MODEL to a '
    "real model for an actual answer.",
    'Still the offline demo here (turn {turn}). I received "{quote}", {words} long, and I '
    "have no opinion about it because I'm not an LLM.",
)
_QUESTION: Final = (
    "You asked \"{quote}\" I can't answer questions: I'm the scripted demo model, not an "
    "LLM. With DEPUTY_MODEL set to a real model and its API key, you'd get an answer."
)
_EMPTY: Final = (
    "I didn't find any text in your message. (I'm the scripted demo model, not an LLM; "
    "set DEPUTY_MODEL and an API key to use a real one.)"
)
_QUOTE_LIMIT: Final = 60

_lock = threading.Lock()


def demo_reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ScriptedReply:
    """The demo model's answer to a conversation (OpenAI chat format), free of charge.

    The first answer (no assistant message yet) is the :data:`INTRO`; later ones rotate
    through canned replies that quote the last user message (shortened, so a long or
    repetitive message never streams as 100 identical chunks).

    Example:
        >>> history = [
        ...     {"role": "user", "content": "Hello"},
        ...     {"role": "assistant", "content": "Hi!"},
        ...     {"role": "user", "content": "What is 2 + 2?"},
        ... ]
        >>> "What is 2 + 2?" in demo_reply(history, []).text
        True
    """
    turn = sum(1 for message in messages if message.get("role") == "assistant")
    user_text = _last_user_text(messages)
    if turn == 0:
        return ScriptedReply(text=INTRO, cost=0.0)
    if not user_text:
        return ScriptedReply(text=_EMPTY, cost=0.0)
    quote = _shorten(user_text)
    count = len(user_text.split())
    words = f"{count} word{'s' if count != 1 else ''}"
    asked = user_text.rstrip().endswith("?")
    template = _QUESTION if asked else _LATER[(turn - 1) % len(_LATER)]
    return ScriptedReply(text=template.format(quote=quote, turn=turn + 1, words=words), cost=0.0)


def ensure_demo_registered() -> None:
    """Register the ``deputy/demo`` provider with litellm (idempotent, thread-safe).

    Registration is deferred until litellm is imported; nothing is imported here.

    Example:
        >>> from deputy_shiny.demo import ensure_demo_registered
        >>> ensure_demo_registered()
        >>> ensure_demo_registered()  # a second call does nothing
    """
    with _lock:
        if not _litellm.is_registered(DEMO_PROVIDER):
            _custom_provider.register_source(DEMO_PROVIDER, _DemoSource(), weak=False)


class _DemoSource:
    """Answers demo requests without recording them (the demo runs for the app's lifetime)."""

    def _scripted_response(self, request: dict[str, Any]) -> object:
        return demo_reply(request["messages"], request["tools"])


def _last_user_text(messages: list[dict[str, Any]]) -> str:
    for message in reversed(messages):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content.strip()
        if isinstance(content, list):
            parts = [
                part["text"]
                for part in content
                if isinstance(part, dict) and isinstance(part.get("text"), str)
            ]
            return " ".join(parts).strip()
        return ""
    return ""


def _shorten(text: str) -> str:
    flat = re.sub(r"\s+", " ", text).strip()
    if len(flat) <= _QUOTE_LIMIT:
        return flat
    return flat[: _QUOTE_LIMIT - 1].rstrip() + "…"
