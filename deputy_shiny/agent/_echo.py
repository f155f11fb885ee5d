"""``echo=`` of the chat methods, as deputy's: print the reply unless it is ``"none"``.

deputy reads ``echo`` as ellmer does: None is the default (``"none"`` here: ellmer reads
an R option), True is ``"output"``, False ``"none"``, ``"text"`` ``"output"``; then one
of ``"none"``, ``"output"``, ``"all"``. Any mode but ``"none"`` prints the reply.

Examples:
    >>> echo_mode(True), echo_mode(None), echo_mode("text")
    ('output', 'none', 'output')
    >>> echo_reply("Hello!", "output")
    Hello!
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic_core import to_jsonable_python

from ..errors import ConfigurationError

__all__ = ["Echo", "echo_mode", "echo_reply", "echo_value"]

Echo = bool | Literal["none", "output", "all", "text"] | None
"""What ``echo=`` takes."""

EchoMode = Literal["none", "output", "all"]


def echo_mode(echo: object) -> EchoMode:
    """``echo`` as one of ``"none"``, ``"output"``, ``"all"`` (checked before the run)."""
    if echo is None or echo is False:
        return "none"
    if echo is True or echo == "text":
        return "output"
    if echo in ("none", "output", "all"):
        return echo
    raise ConfigurationError(
        f'echo must be "none", "output", "all", "text", True, False or None, not {echo!r}'
    )


def echo_reply(text: str, mode: EchoMode) -> None:
    """Print the reply unless ``mode`` is ``"none"``."""
    if mode != "none":
        print(text)


def echo_value(value: Any, mode: EchoMode) -> None:
    """Print a structured value as JSON unless ``mode`` is ``"none"``."""
    if mode != "none":
        print(json.dumps(to_jsonable_python(value), ensure_ascii=False))
