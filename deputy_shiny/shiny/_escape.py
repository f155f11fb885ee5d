"""Strings the kit hands to the browser, made inert for the place they go: one home.

Text from a model, a tool, a hook, a subagent or an MCP server is untrusted, and so is
any message that quotes it (a denial quoting a path, an error quoting a server). Where
it lands decides how it is kept text:

* :func:`html_text`: a place the browser parses as HTML. shinychat renders a tool card's
  *title* that way (``innerHTML``; only the tool name it escapes itself), so a denial's
  title goes through here;
* :func:`markdown_text`: a chat message or note the kit writes itself (shinychat renders
  chat messages as markdown, and its sanitizer still lets ``<img src>`` and more through);
* :func:`code_text`: tool output in a card. shinychat fences it with eight backticks and
  renders the fence as markdown, so a line of eight backticks in the output would close
  the fence and turn the rest into markdown.

htmltools escapes every ``str`` child and attribute itself (the modals and the panels
are built from tags), and model *text* goes through
:class:`~deputy_shiny.shiny._image_guard.ImageGuard`.

Examples:
    >>> html_text('Denied: <img src=x onerror="alert(1)">')
    'Denied: &lt;img src=x onerror=&quot;alert(1)&quot;&gt;'
    >>> print(markdown_text("failed: <b>[x](y)</b>"))
    failed\\: \\<b\\>\\[x\\]\\(y\\)\\<\\/b\\>
"""

from __future__ import annotations

import html
import re

__all__ = ["code_text", "html_text", "markdown_text"]

# Every ASCII punctuation character may be backslash-escaped in CommonMark, and an
# escaped one is always a literal: no emphasis, link, image, HTML, entity or list marker.
_MD_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")
# A line that would close shinychat's eight-backtick fence (up to 3 spaces of indent).
# CommonMark ends a line at "\n", "\r" or "\r\n".
_FENCE_CLOSE = re.compile(r"(?:^|(?<=[\r\n]))( {0,3})`(?=`{7,}[ \t]*(?:[\r\n]|$))")
_ZWSP = "\u200b"


def html_text(text: str) -> str:
    """``text`` for a place the browser parses as HTML: ``& < > " '`` become entities,
    so it shows as exactly these characters and forms no element or attribute.

    Examples:
        >>> html_text("Path '../<svg onload=alert(1)>' uses '..'")
        'Path &#x27;../&lt;svg onload=alert(1)&gt;&#x27; uses &#x27;..&#x27;'
    """
    return html.escape(text, quote=True)


def markdown_text(text: str) -> str:
    """``text`` as markdown that renders as exactly this text (one paragraph).

    Every ASCII punctuation character is backslash-escaped; leading whitespace is dropped
    from each line (four spaces would start a code block) and line breaks stay line
    breaks.

    Examples:
        >>> print(markdown_text("1. *not* a list"))
        1\\. \\*not\\* a list
        >>> print(markdown_text("two\\n    lines"))
        two\\
        lines
    """
    lines = [_MD_PUNCTUATION.sub(r"\\\1", line.strip()) for line in text.splitlines()]
    # A backslash at the end of a line is a hard line break.
    return "\\\n".join(line for line in lines if line)


def code_text(text: str) -> str:
    """Tool output for a card's code block: unchanged, except that a line which would
    close shinychat's eight-backtick fence gets a zero-width space after its first
    backtick (it looks the same, and stays inside the block).

    Examples:
        >>> code_text("<b>ok</b>") == "<b>ok</b>"
        True
        >>> code_text("a\\n````````\\n<img src=x>") == "a\\n`\\u200b```````\\n<img src=x>"
        True
    """
    return _FENCE_CLOSE.sub(lambda m: m.group(1) + "`" + _ZWSP, text)
