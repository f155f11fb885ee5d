"""Run metadata (``run_context``): validation of its JSON values and credential-free keys.

run_context rides on every event and result, so it ends up in logs, UIs and saved
sessions: a secret there leaks everywhere. Keys are split into words across case,
punctuation and spaces (``apiSecret`` -> api, secret; ``API-KEY`` -> api, key) and
rejected when a word, or two adjacent words run together, name a credential. A value
holding one of the process's own keys (:func:`environment_secrets`) is rejected too,
whatever its key. Values never appear in error messages.
"""

from __future__ import annotations

import functools
import math
import os
import re
from collections.abc import Mapping
from itertools import pairwise
from typing import Any

from ..errors import RunContextError

_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")

_SECRET_WORDS = frozenset(
    {
        "password",
        "passwd",
        "passphrase",
        "pwd",
        "secret",
        "secrets",
        "token",
        "tokens",
        "apikey",
        "credential",
        "credentials",
        "auth",
        "authorization",
        "bearer",
        "cookie",
        "privatekey",
        "accesskey",
        "secretkey",
        "sessionkey",
    }
)


def key_words(key: str) -> list[str]:
    """Split a key into lowercase words: ``"apiSecret"`` -> ``["api", "secret"]``."""
    return [w.lower() for w in _WORD.findall(key)]


@functools.lru_cache(maxsize=1024)
def is_credential_key(key: str) -> bool:
    """True if ``key`` looks like it names a credential, in any spelling.

    Examples:
        >>> [is_credential_key(k) for k in ("API-KEY", "client secret", "secretion_id")]
        [True, True, False]
    """
    words = key_words(key)
    if any(w in _SECRET_WORDS for w in words):
        return True
    pairs = (a + b for a, b in pairwise(words))
    return any(p in _SECRET_WORDS for p in pairs)


MIN_SECRET_CHARS = 8
"""Shorter values of credential-named variables are not treated as secrets (``1``, ``yes``)."""

# Variables whose names only look like credentials ("pwd" is a password's abbreviation).
_NOT_SECRETS = frozenset({"PWD", "OLDPWD", "SSH_AUTH_SOCK"})
# Secrets whose names do not say so: the key that signs every saved record.
_ALSO_SECRETS = frozenset({"DEPUTY_RECORD_KEY"})


def environment_secrets(environ: Mapping[str, str] | None = None) -> frozenset[str]:
    """The values of the credential-named environment variables (``OPENAI_API_KEY``,
    ``GITHUB_TOKEN``...) and of ``DEPUTY_RECORD_KEY``, of at least 8 characters: the
    server's own keys.

    Examples:
        >>> sorted(environment_secrets({"OPENAI_API_KEY": "sk-abcdefgh", "HOME": "/home/a"}))
        ['sk-abcdefgh']
    """
    env = os.environ if environ is None else environ
    return frozenset(
        value
        for key, value in env.items()
        if len(value) >= MIN_SECRET_CHARS
        and key not in _NOT_SECRETS
        and (key in _ALSO_SECRETS or is_credential_key(key))
    )


def validate_run_context(context: object, *, where: str = "run_context") -> dict[str, Any]:
    """Return a copy of ``context`` after checking keys and values.

    Raises:
        RunContextError: a non-dict, a non-str key, a credential-like key (at any
            depth), a value holding one of the process's keys, or a value that is not
            JSON-compatible.
    """
    if not isinstance(context, Mapping):
        raise RunContextError(f"{where} must be a dict of JSON-compatible values")
    secrets = environment_secrets()
    return {
        key: _check(value, f"{where}[{key!r}]", secrets)
        for key, value in _checked_items(context, where)
    }


def _checked_items(mapping: Mapping[Any, Any], where: str) -> list[tuple[str, Any]]:
    items = []
    for key, value in mapping.items():
        if not isinstance(key, str):
            raise RunContextError(f"{where} keys must be strings, not {type(key).__name__}")
        if is_credential_key(key):
            raise RunContextError(
                f"{where} key {key!r} looks like a credential. run_context is attached to "
                "every event and saved session; keep secrets out of it."
            )
        items.append((key, value))
    return items


def _check(value: Any, where: str, secrets: frozenset[str]) -> Any:
    if isinstance(value, str):
        if any(secret in value for secret in secrets):
            raise RunContextError(
                f"{where} holds the value of one of the server's credential environment "
                "variables. run_context is attached to every event and saved session; keep "
                "secrets out of it."
            )
        return value
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise RunContextError(f"{where} must be a finite number")
        return value
    if isinstance(value, list | tuple):
        return [_check(item, f"{where}[{i}]", secrets) for i, item in enumerate(value)]
    if isinstance(value, Mapping):
        return {k: _check(v, f"{where}[{k!r}]", secrets) for k, v in _checked_items(value, where)}
    raise RunContextError(
        f"{where} is a {type(value).__name__}; run_context takes only JSON-compatible "
        "values (str, int, float, bool, None, lists and dicts of them)"
    )


def is_id_key(key: str) -> bool:
    """True for ID fields (keys ending in ``id``: ``user_id``, ``conversationId``, ``id``)."""
    return key.lower().endswith("id")


def merge_run_context(agent_context: Mapping[str, Any], run_context: object) -> dict[str, Any]:
    """Merge a per-run context into the agent's; ID fields the agent sets can't change."""
    extra = validate_run_context(run_context)
    for key, value in extra.items():
        if is_id_key(key) and key in agent_context and agent_context[key] != value:
            raise RunContextError(
                f"run_context key {key!r} is an ID field set on the agent; a run cannot change it"
            )
    return {**agent_context, **extra}
