r"""Structured output: the prompts that ask for a JSON value, and the check of each reply.

After a task, a run with ``type=`` asks the model for one JSON value matching the
type's schema (:func:`structured_prompt`, with a ``response_format`` from
:func:`json_format`), parses and validates the reply (:func:`check_structured`), and
asks again with :func:`correction_prompt` while corrections remain.

Examples:
    >>> from pydantic import TypeAdapter
    >>> from deputy_shiny.messages import ContentText, Turn
    >>> reply = Turn(role="assistant", contents=[ContentText(text="```json\n[1, 2]\n```")])
    >>> check_structured(TypeAdapter(list[int]), reply, None)
    (True, [1, 2], 'accepted')
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from pydantic import TypeAdapter, ValidationError

from .._util.text import problems as text_problems
from ..errors import StructuredOutputError
from ..messages import Turn

__all__ = [
    "Validator",
    "check_structured",
    "correction_prompt",
    "json_format",
    "structured_prompt",
]

Validator = Callable[[Any], object]
"""Checks an extracted value: True accepts, False or a message rejects."""


def structured_prompt(schema: dict[str, Any]) -> str:
    """The request for one JSON value matching ``schema``."""
    return (
        "Now give the requested data as one JSON value that matches this JSON schema. "
        "Reply with the JSON only, no other text.\n\nSchema:\n" + json.dumps(schema)
    )


def correction_prompt(message: str) -> str:
    """The request to correct a rejected value."""
    return f"That value was rejected: {message}\nPlease correct it and reply with the JSON only."


def check_structured(
    adapter: TypeAdapter[Any], turn: Turn, validate: Validator | None
) -> tuple[bool, Any, str]:
    """Parse and validate one structured-output reply: (accepted, value, feedback)."""
    text = strip_fences(turn.text)
    try:
        value = adapter.validate_json(text)
    except ValidationError as exc:
        problems = text_problems(exc)
        return False, None, f"it does not match the schema ({problems})"
    if validate is None:
        return True, value, "accepted"
    try:
        verdict = validate(value)
    except Exception as exc:
        raise StructuredOutputError(
            f"The validate function failed: {type(exc).__name__}: {exc}"
        ) from exc
    if verdict is True:
        return True, value, "accepted"
    if verdict is False:
        return False, value, "the value did not pass validation"
    if isinstance(verdict, str):
        return False, value, verdict
    raise StructuredOutputError(
        f"validate must return True, False or a message, not {type(verdict).__name__}"
    )


def json_format(schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "structured_output", "schema": schema},
        }
    }


_FENCE = re.compile(r"^\s*```[\w-]*\s*\n(.*?)\n\s*```\s*$", re.DOTALL)


def strip_fences(text: str) -> str:
    match = _FENCE.match(text)
    return match.group(1) if match else text.strip()
