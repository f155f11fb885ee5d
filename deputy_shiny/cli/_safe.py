"""Untrusted text made safe for a terminal: what a model or a tool writes never becomes
an escape sequence (a colour, a cursor move, a title, a hyperlink, a clipboard write)
or rich markup.

Examples:
    >>> safe_text("[bold]hi\\x1b[31m!").plain
    '[bold]hi!'
"""

from __future__ import annotations

import re

from rich.text import Text

__all__ = ["safe_text", "terminal_safe"]

# Escape sequences whole (CSI, OSC up to its terminator, the two-character ones), so
# their parameters do not print either; then any control character left, C1 included
# (U+009B starts a CSI on some terminals), and the bidirectional overrides that make
# text read in another order than it is.
_ESCAPES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor moves, erases
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC: titles, hyperlinks, clipboard
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"  # DCS, SOS, PM, APC strings
    r"|\x1b[ -~]?"  # any other escape
    r"|\x9b[0-?]*[ -/]*[@-~]"  # the one-byte (C1) CSI
    r"|\x9d[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"  # the one-byte OSC
)
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def terminal_safe(text: str) -> str:
    """``text`` with escape sequences and control characters removed (newline and tab kept).

    Examples:
        >>> terminal_safe("\\x1b]0;pwned\\x07a\\x1b[2Jb\\rc\\u202ed")
        'abcd'
    """
    return _CONTROLS.sub("", _ESCAPES.sub("", text.replace("\r\n", "\n")))


def safe_text(text: str, style: str = "") -> Text:
    """A rich ``Text`` of untrusted ``text``: never markup, never an escape sequence."""
    return Text(terminal_safe(text), style=style)
