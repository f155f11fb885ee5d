"""JSON from a model, parsed without letting its nesting crash the process.

``json.loads`` recurses once per nesting level, so a model (or a prompt injection) that
sends ``[[[[...]]]]`` 5,000 levels deep raises ``RecursionError``, which is not a
``ValueError`` and escapes ordinary handlers. :func:`loads_bounded` measures the depth
first, in one linear pass without recursion, and refuses text nested deeper than
:data:`MAX_JSON_DEPTH` with a ``json.JSONDecodeError`` like any other malformed JSON.

Examples:
    >>> loads_bounded('{"a": [1, 2]}')
    {'a': [1, 2]}
    >>> loads_bounded("[" * 1000 + "]" * 1000)
    Traceback (most recent call last):
    ...
    json.decoder.JSONDecodeError: nested deeper than 100 levels: line 1 column 101 (char 100)
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["MAX_JSON_DEPTH", "loads_bounded"]

MAX_JSON_DEPTH = 100
"""The deepest nesting of arrays and objects accepted in model-supplied JSON."""


def _too_deep_at(text: str, limit: int) -> int | None:
    """The index where nesting first passes ``limit`` (strings skipped), or None."""
    depth = 0
    in_string = escaped = False
    for index, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > limit:
                return index
        elif char in "]}":
            depth -= 1
    return None


def loads_bounded(text: str, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """``json.loads(text)``, refusing nesting deeper than ``max_depth`` as malformed JSON."""
    index = _too_deep_at(text, max_depth)
    if index is not None:
        raise json.JSONDecodeError(f"nested deeper than {max_depth} levels", text, index)
    return json.loads(text)
