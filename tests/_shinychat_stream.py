"""What shinychat's browser code makes of a streamed message, ported to Python for tests.

shinychat (0.7.2, its ``shinychat.js``) does two things with the chunks a stream sends:

* its *stream splitter* (``f7`` in the bundle) reads each chunk as it arrives and cuts it
  into ``content`` and ``thinking`` segments: a ``<thinking>`` tag at a line start,
  outside what it takes for a fence, opens a thinking block. Its fence rules are its
  own: an opening fence counts at a line start, a closing fence at the start of *any
  chunk* (its regular expression's ``^`` matches at the chunk's first character);
* the message keeps a list of blocks: content segments join the last content block, a
  tool card (``block_insert``) ends it, and each block renders as its own markdown
  document. When the stream ends (``chunk_end``), a content block holding a complete
  ``<thinking>...</thinking>`` outside what ``Wk`` takes for code is split again.

:func:`stream_blocks` replays that for a list of chunks (``CARD`` marks a tool card), and
:func:`render` renders each block with markdown-it (CommonMark, GFM tables and
strikethrough, raw HTML *allowed*: stricter than shinychat's sanitizer, so any element the
model's text forms shows). The port follows the minified source; JavaScript's ``^`` and
``$`` in multiline mode also break lines at ``\\r``, U+2028 and U+2029, as here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from html.parser import HTMLParser

from markdown_it import MarkdownIt

CARD = object()
"""A tool card in a chunk list: it ends the content block (``block_insert``)."""

_LT = "\n\r\u2028\u2029"  # JavaScript's line terminators for ^ and $ in multiline mode
_BOL = f"(?:^|(?<=[{_LT}]))"  # ^ with the m flag
_EOL = f"(?=[{_LT}]|\\Z)"  # $ with the m flag
_DOT = f"[^{_LT}]"  # . without the s flag
_OPEN = re.compile(f"{_BOL}(`{{3,}}|~{{3,}})[^\\n]*(?:\\n|{_EOL})")  # l7
_THINK, _THINK_NL = "<thinking>", "<thinking>\n"
_UNTHINK, _NL_UNTHINK = "</thinking>", "\n</thinking>"
_COMPLETE = re.compile(r"<thinking>\n?([\s\S]*?)\n?</thinking>\n*")  # eT
_WK_FENCE = re.compile(  # QU
    f"{_BOL} {{0,3}}((`|~)\\2{{2,}}){_DOT}*\\n[\\s\\S]*?{_BOL} {{0,3}}\\1\\2*[ \\t]*{_EOL}"
)


def _closer(marker: str) -> re.Pattern[str]:  # u7
    return re.compile(f"{_BOL}{re.escape(marker[0])}{{{len(marker)},}}[ \\t]*(?:\\n|{_EOL})")


def _partial(text: str, tag: str) -> int:  # iM: how much of tag's start text ends with
    for n in range(min(len(tag) - 1, len(text)), 0, -1):
        if text.endswith(tag[:n]):
            return n
    return 0


def _js_blank(text: str) -> bool:
    return text.strip() == ""  # str.strip and String.trim agree on these characters


@dataclass
class _Splitter:
    thinking: bool = False
    buffer: str = ""
    fence: bool = False
    marker: str = ""

    def split(self, chunk: str, line_start: bool) -> list[tuple[str, str]]:  # f7
        rest = self.buffer + chunk
        mode = "thinking" if self.thinking else "fence" if self.fence else "outside"
        marker, start = self.marker, True if self.buffer else line_start
        out: list[tuple[str, str]] = []
        buffer = ""
        while rest:
            if mode == "outside":
                fence = _OPEN.search(rest)
                counts = fence is not None and (fence.start() > 0 or start)
                f = rest.find(_THINK_NL)
                tag_at = f if f != -1 else rest.find(_THINK)
                tag = _THINK_NL if f != -1 else _THINK
                if fence is not None and counts and (tag_at == -1 or fence.start() < tag_at):
                    head = rest[: fence.end()]
                    out.append(("content", head))
                    start, marker, mode = head.endswith("\n"), fence.group(1), "fence"
                    rest = rest[fence.end() :]
                elif tag_at != -1:
                    head = rest[:tag_at]
                    if _js_blank(head) and ("\n" in head or start):
                        if head:
                            out.append(("content", head))
                        mode, rest = "thinking", rest[tag_at + len(tag) :]
                    else:
                        out.append(("content", rest))
                        start, rest = rest.endswith("\n"), ""
                else:
                    n = _partial(rest, _THINK)
                    head = rest[: len(rest) - n]
                    if n > 0 and _js_blank(head) and ("\n" in head or start):
                        buffer = rest[len(rest) - n :]
                        if head:
                            out.append(("content", head))
                    else:
                        out.append(("content", rest))
                        start = rest.endswith("\n")
                    rest = ""
            elif mode == "fence":
                close = _closer(marker).search(rest)
                if close is not None:
                    head = rest[: close.end()]
                    if head:
                        out.append(("content", head))
                    start, mode, marker = head.endswith("\n"), "outside", ""
                    rest = rest[close.end() :]
                else:
                    out.append(("content", rest))
                    start, rest = rest.endswith("\n"), ""
            else:
                u = rest.find(_NL_UNTHINK)
                at = u if u != -1 else rest.find(_UNTHINK)
                tag = _NL_UNTHINK if u != -1 else _UNTHINK
                if at != -1:
                    if rest[:at]:
                        out.append(("thinking", rest[:at]))
                    mode, start, rest = "outside", True, rest[at + len(tag) :]
                    for _ in range(2):
                        rest = rest[1:] if rest.startswith("\n") else rest
                else:
                    n = _partial(rest, _UNTHINK)
                    if n > 0:
                        buffer = rest[len(rest) - n :]
                        if rest[: len(rest) - n]:
                            out.append(("thinking", rest[: len(rest) - n]))
                    else:
                        out.append(("thinking", rest))
                    rest = ""
        self.thinking, self.buffer = mode == "thinking", buffer
        self.fence, self.marker = mode == "fence", marker
        return out


@dataclass
class Blocks:
    """A message's blocks as they stand: ``(kind, text)``, kind "content", "thinking" or
    "card"."""

    blocks: list[list[str]] = field(default_factory=list)
    splitter: _Splitter = field(default_factory=_Splitter)

    def _line_start(self) -> bool:  # c7
        if not self.blocks:
            return True
        kind, text = self.blocks[-1]
        return kind != "content" or text == "" or text.endswith("\n")

    def chunk(self, text: str) -> None:
        """One ``chunk`` action (a string the stream yielded)."""
        s = self.splitter
        if s.fence or "<" in text or "```" in text or "~~~" in text:
            segments = s.split(text, self._line_start())
        else:
            segments = [("content", text)]
        for kind, part in segments:
            last = self.blocks[-1] if self.blocks else None
            if last is not None and last[0] == kind:
                last[1] += part
            elif part:
                self.blocks.append([kind, part])

    def card(self) -> None:
        """A ``block_insert`` (a tool card): the content block ends."""
        self.blocks.append(["card", ""])

    def end(self) -> list[tuple[str, str]]:
        """``chunk_end``: complete thinking tags in content blocks split out (p7, _m)."""
        out: list[tuple[str, str]] = []
        for kind, text in self.blocks:
            if kind != "content" or not _COMPLETE.search(text):
                out.append((kind, text))
                continue
            code = _code_ranges(text)
            at = 0
            for match in _COMPLETE.finditer(text):
                if any(a <= match.start() < b for a, b in code):
                    continue
                if text[at : match.start()]:
                    out.append(("content", text[at : match.start()]))
                out.append(("thinking", match.group(1)))
                at = match.end()
            if text[at:]:
                out.append(("content", text[at:]))
        return out

    def now(self) -> list[tuple[str, str]]:
        """The blocks while streaming."""
        return [(kind, text) for kind, text in self.blocks]


def _code_ranges(text: str) -> list[tuple[int, int]]:  # Wk
    ranges = [(m.start(), m.end()) for m in _WK_FENCE.finditer(text)]
    runs = [(m.start(), len(m.group())) for m in re.finditer("`+", text)]
    i = 0
    while i < len(runs):
        start, size = runs[i]
        nl = text.find("\n", start)
        line_end = len(text) if nl == -1 else nl
        for j in range(i + 1, len(runs)):
            if runs[j][0] >= line_end:
                break
            if runs[j][1] == size:
                ranges.append((start, runs[j][0] + runs[j][1]))
                i = j
                break
        i += 1
    return ranges


def stream_blocks(
    chunks: Sequence[object],
) -> tuple[list[list[tuple[str, str]]], list[tuple[str, str]]]:
    """Every state the message passes through while streaming, and its final blocks."""
    blocks = Blocks()
    states = []
    for chunk in chunks:
        if chunk is CARD:
            blocks.card()
        else:
            assert isinstance(chunk, str)
            blocks.chunk(chunk)
        states.append(blocks.now())
    return states, blocks.end()


_MD = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
# What markdown itself makes, with the attributes it gives them.
MARKDOWN_TAGS = {
    "p": set(),
    "code": {"class"},
    "pre": set(),
    "a": {"href", "title"},
    "em": set(),
    "strong": set(),
    "s": set(),
    "ul": set(),
    "ol": {"start"},
    "li": set(),
    "blockquote": set(),
    "hr": set(),
    "br": set(),
    "table": set(),
    "thead": set(),
    "tbody": set(),
    "tr": set(),
    "th": {"style"},
    "td": {"style"},
    **{f"h{n}": set() for n in range(1, 7)},
}


class _Elements(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.formed: list[str] = []  # elements or attributes markdown does not make
        self.code: list[str] = []  # each <code> element's text
        self._depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        allowed = MARKDOWN_TAGS.get(tag)
        if allowed is None:
            self.formed.append(tag)
        else:
            self.formed.extend(f"{tag}[{name}]" for name, _ in attrs if name not in allowed)
        if tag == "code":
            self._depth += 1
            self.code.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == "code" and self._depth:
            self._depth -= 1

    def handle_data(self, data: str) -> None:
        if self._depth:
            self.code[-1] += data


def render(blocks: list[tuple[str, str]]) -> tuple[list[str], list[str]]:
    """Each content and thinking block as markdown: (elements or attributes that markdown
    does not make, the text of every ``<code>``)."""
    formed: list[str] = []
    code: list[str] = []
    for kind, text in blocks:
        if kind == "card":
            continue
        parser = _Elements()
        parser.feed(_MD.render(text))
        parser.close()
        formed += parser.formed
        code += parser.code
    return formed, code
