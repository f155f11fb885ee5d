"""The one credential scrubber: masks secrets in text and in nested values.

:func:`redact` masks things that look like API keys inside free text (provider error
messages); :func:`redact_values` masks the values of credential-like keys in nested
mappings (tool arguments before they are logged); :func:`scrub_secrets` masks the
process's own keys (the values of its credential environment variables, such as
``OPENAI_API_KEY``) wherever they occur in nested values (every saved document). Both
of the first two mask those keys too.

Examples:
    >>> redact("Bearer abc.def")
    'Bearer …'
    >>> redact_values({"path": "a.txt", "api_key": "sk-123"})
    {'path': 'a.txt', 'api_key': '<redacted>'}
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .metadata import environment_secrets, is_credential_key

__all__ = ["REDACTED", "credential_values", "redact", "redact_values", "scrub_secrets"]

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

    Examples:
        >>> redact("invalid key sk-test-SECRET123, see https://x.example/?key=abc")
        'invalid key sk-test…, see https://x.example/?key=…'
    """
    for secret in environment_secrets():
        text = text.replace(secret, REDACTED)
    return _SECRET.sub(lambda m: next(g for g in m.groups() if g is not None) + "…", text)


REDACTED = "<redacted>"
"""What :func:`redact_values` shows instead of a credential."""


def redact_values(value: Any, depth: int = 0, *, also: frozenset[str] = frozenset()) -> Any:
    """``value`` with the values of credential-like keys (``api_key``, ``token``...) masked,
    and the process's own keys, and every string in ``also``, masked wherever they occur.

    Mappings become dicts and sequences lists; below six levels the rest is ``"…"``.
    ``also`` is for values known to be secret from elsewhere, such as
    :func:`credential_values` of a tool call's arguments when its result is logged.

    Examples:
        >>> redact_values("denied for key k-42", also=frozenset({"k-42"}))
        'denied for key <redacted>'
    """
    return _redact_values(value, depth, environment_secrets() | also)


def credential_values(value: Any, depth: int = 0) -> frozenset[str]:
    """Every string held under a credential-like key (``api_key``, ``token``...) anywhere
    in ``value`` (nested mappings and sequences), so it can be masked where it is quoted
    back (a tool's error or result). Numbers count by their text; empty strings do not.

    Examples:
        >>> sorted(credential_values({"api_key": "k-1", "opts": [{"password": 1234}], "n": 5}))
        ['1234', 'k-1']
    """
    found: set[str] = set()
    _collect_credentials(value, depth, False, found)
    return frozenset(found)


def _collect_credentials(value: Any, depth: int, secret: bool, found: set[str]) -> None:
    if depth > 6:
        return
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        text = value if isinstance(value, str) else str(value)
        if secret and text:
            found.add(text)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            named = secret or (isinstance(key, str) and is_credential_key(key))
            _collect_credentials(item, depth + 1, named, found)
    elif isinstance(value, list | tuple | set | frozenset):
        for item in value:
            _collect_credentials(item, depth + 1, secret, found)


def _redact_values(value: Any, depth: int, secrets: frozenset[str]) -> Any:
    if depth > 6:
        return "…"
    if isinstance(value, str):
        return _scrub_text(value, secrets)
    if isinstance(value, Mapping):
        return {
            k: REDACTED
            if isinstance(k, str) and is_credential_key(k)
            else _redact_values(v, depth + 1, secrets)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [_redact_values(v, depth + 1, secrets) for v in value]
    return value


def scrub_secrets(value: Any) -> Any:
    """``value`` (JSON-like) with every occurrence of one of the process's own keys
    (:func:`~deputy_shiny._util.metadata.environment_secrets`) replaced by ``<redacted>``;
    the same object when there is none to find.

    Examples:
        >>> import os
        >>> os.environ["EXAMPLE_API_KEY"] = "sk-example-123456"
        >>> scrub_secrets({"args": ["use sk-example-123456 now"], "n": 1})
        {'args': ['use <redacted> now'], 'n': 1}
        >>> del os.environ["EXAMPLE_API_KEY"]
    """
    secrets = environment_secrets()
    return _scrub(value, secrets) if secrets else value


def _scrub(value: Any, secrets: frozenset[str]) -> Any:
    if isinstance(value, str):
        return _scrub_text(value, secrets)
    if isinstance(value, Mapping):
        return {_scrub(k, secrets): _scrub(v, secrets) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_scrub(v, secrets) for v in value]
    return value


def _scrub_text(text: str, secrets: frozenset[str]) -> str:
    # Longest first: a secret that contains another is masked whole, not around it.
    for secret in sorted(secrets, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text
