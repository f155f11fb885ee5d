"""The one credential scrubber: masks secrets in text and in nested values.

:func:`redact` masks things that look like API keys inside free text (provider error
messages); :func:`redact_values` masks the values of credential-like keys in nested
mappings (tool arguments before they are logged).

Example:
    >>> redact("Bearer abc.def")
    'Bearer …'
    >>> redact_values({"path": "a.txt", "api_key": "sk-123"})
    {'path': 'a.txt', 'api_key': '<redacted>'}
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .metadata import is_credential_key

__all__ = ["REDACTED", "redact", "redact_values"]

_SECRET = re.compile(
    r"(sk-[A-Za-z0-9_\-]{4})[A-Za-z0-9_\-*]+"  # OpenAI, Anthropic, OpenRouter... keys
    r"|(Bearer\s+)\S+"
    r"|((?:x-)?api[_-]?key[\"']?\s*[=:]\s*[\"']?)[^\s\"',&]+"
    r"|([?&](?:key|api_key|token|access_token)=)[^&\s\"']+"  # keys in URLs (Gemini)
    r"|(AIza)[0-9A-Za-z_\-]{8,}",  # Google API keys
    re.I,
)


def redact(text: str) -> str:
    """Mask things that look like API keys in provider error messages.

    Example:
        >>> redact("invalid key sk-test-SECRET123, see https://x.example/?key=abc")
        'invalid key sk-test…, see https://x.example/?key=…'
    """
    return _SECRET.sub(lambda m: next(g for g in m.groups() if g is not None) + "…", text)


REDACTED = "<redacted>"
"""What :func:`redact_values` shows instead of a credential."""


def redact_values(value: Any, depth: int = 0) -> Any:
    """``value`` with the values of credential-like keys (``api_key``, ``token``...) masked.

    Mappings become dicts and sequences lists; below six levels the rest is ``"…"``.
    """
    if depth > 6:
        return "…"
    if isinstance(value, Mapping):
        return {
            k: REDACTED
            if isinstance(k, str) and is_credential_key(k)
            else redact_values(v, depth + 1)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact_values(v, depth + 1) for v in value]
    return value
