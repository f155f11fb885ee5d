"""Make model text inert before it reaches the browser: no raw HTML, no foreign images.

shinychat renders model text as markdown and sanitizes it, but its sanitizer keeps
enough raw HTML that a model, or a prompt injection in a tool result, can load remote
resources (``<iframe>``, ``<object>``, ``<style>``, ``<video poster>``...), run script
through an ``<iframe srcdoc>``, or restyle the page (hide the Deny button). So
:class:`ImageGuard` rewrites the streamed text on the server:

* raw HTML never forms: every ``<`` that could open a tag (followed by a letter,
  ``/``, ``!`` or ``?``) gets a zero-width space after it, so the browser shows the
  text ``<iframe ...>`` instead of making an element. Fenced code blocks opened at the
  left margin pass byte-exact (markdown shows their content as text, and the copy
  button copies it as sent): their opening and closing lines are tracked by
  CommonMark's rules. A fence inside a list, a quote or indented ends that trust for
  the rest of the message (where the browser closes it depends on the container), and
  so does one shinychat's stream splitter reads otherwise (it starts a ``<thinking>``
  block at a line start outside what it takes for fences): a backtick in the info
  string, an indented or CRLF closing fence, a U+2028/U+2029 in the text.
  Inline code spans pass byte-exact too where the browser provably reads them as code:
  a run of N backticks closed by the next run of exactly N on the same line, holding
  no ``|`` (a table splits cells there), with nothing earlier in the paragraph that
  could pair backticks otherwise (a backtick run left open, a link destination or
  label holding a backtick, quote, ``(``, ``<`` or backslash, a definition ``]:``, a
  footnote ``[^``, an image ``![``, a URL literal ``://`` ``www.`` reaching a backtick
  before whitespace, or a ``<`` that could start an autolink). Anywhere else a span's
  ``<`` still gets the zero-width space. ``<thinking`` gets it even in code:
  shinychat's stream splitter reads fences its own way and would open a thinking
  block there. A span closing as the text ends is closed, with a line break after it;
  :meth:`ImageGuard.end` (before a tool card, at the end) starts afresh, as the
  browser renders the text after a card as a new markdown document;
* markdown images (``![alt](url)``) load only from the allowed origins (or ``data:``
  images); any other becomes the inert text ``[image blocked: alt (origin)]``.
  Reference-style images (``![alt][ref]``) can't be checked, so their ``!`` is
  escaped and they render as links, which load nothing by themselves.

It is streaming-safe: text after a possible image start (``![``) or a trailing ``<``
is held back until the construct is complete or clearly is not one, so a URL split
across chunks is still caught.

Examples:
    >>> guard = ImageGuard(["https://images.example"])
    >>> guard.feed("See ![a cat](https://evil.example/cat.png) and ") + guard.flush()
    'See *[image blocked: a cat (`https://evil.example`)]* and '
    >>> guard.feed("![ok](https://images.example/x.png)") + guard.flush()
    '![ok](https://images.example/x.png)'
    >>> guard.feed("<script>x</script>") + guard.flush() == "<\\u200bscript>x<\\u200b/script>"
    True
    >>> guard = ImageGuard()  # a new message
    >>> guard.feed("Filter with `df[df.sales<limit]`.") + guard.flush()
    'Filter with `df[df.sales<limit]`.'
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable
from urllib.parse import urlsplit

# A markdown inline image, ![alt](url "optional title") with alt on one line, or else a
# lone "![" (the start of a reference-style image we can't resolve).
_MD_IMAGE = re.compile(
    r"(?<!\\)(?P<image>!\[(?P<alt>[^\]\n]{0,500})\]\(\s*<?(?P<url>[^)\s>]*)>?"
    r"(?:\s+\"[^\"]*\")?\s*\))|(?<!\\)!\["
)
_TAG_OPEN = re.compile(r"<(?=[A-Za-z/!?])")
_BREAK = "<\u200b"
_STARTS = re.compile(r"!\[|!$|<$")
# The first characters that complete a seam (see ImageGuard.flush): a tag's start, an
# image's "[", anything a backslash escapes.
_SEAMS = {
    "<": re.compile(r"[A-Za-z/!?]"),
    "!": re.compile(r"\["),
    "\\": re.compile(f"[{re.escape(string.punctuation)}]"),
}
_HOLD_LIMIT = 4000  # an "image" longer than this is not one: let it through
# A fenced code block's opening line at the left margin (CommonMark: a backtick fence's
# info string has no backtick).
_FENCE_OPEN = re.compile(r"(`{3,})[^`\r\n]*|(~{3,})[^\r\n]*")
# What may stand before a fence in a container line: indent, quote and list markers.
_CONTAINER_CHARS = " \t>-+*0123456789.)"
# Inline code (outside fences). Outside a span: where a run or an escape starts; inside:
# where a run starts or a "|" gives the span up.
_TICK_OR_ESCAPE = re.compile(r"[`\\]")
_TICK_OR_PIPE = re.compile(r"[`|]")
_TICKS = re.compile(r"`+")
# A span's text is sent as it comes until one of these: the text stage rewrites from
# them ("<" tags, "![" images, "\" before "![" changes that), so they wait for the span's end.
_NOT_INERT = re.compile(r"[<!\\]")
# Text before a span after which the browser may pair backticks otherwise than the
# code-span rule alone: a link destination or reference label, a definition, a footnote,
# an image the text stage rewrites, an autolink that may hold a backtick ("<1`a@b.c>",
# GFM "www."/"://"). A "<" before a letter, "/", "!" or "?" is broken, so it opens nothing.
_RISKY = re.compile(r"\]:|\[\^|!\[|<[^A-Za-z/!?\s]")
# A link's destination or reference label: trusted when it holds none of what could take a
# backtick or reach past its end (quotes start a title, "(" nests, "<" a bracketed one).
_LINK_START = re.compile(r"\]\(|\]\[")
_LINK_STOP = {"(": re.compile(r"[)`\"'(<\\]"), "[": re.compile(r"[\]`\[\\]")}
_LINK_END = {"(": ")", "[": "]"}
# A GFM autolink literal ("www.", "://") runs to the next whitespace or "<": a backtick
# before that may be part of its URL.
_URL = re.compile(r"://|www\.", re.IGNORECASE)
_URL_STOP = re.compile(r"[\s`\\]")
# shinychat's stream splitter and its final pass take "<thinking" for a thinking block,
# by their own reading of fences and code spans: that "<" is broken even inside code.
_THINKING = re.compile(r"<(?=/?thinking)")
_THINKING_PREFIXES = ("<thinking", "</thinking")
_JS_LINE_BREAK = re.compile("[\u2028\u2029]")
_ESCAPABLE = frozenset(string.punctuation)  # what a backslash escapes (ASCII punctuation)


def _line_end(text: str) -> int:
    """The index just after the first line break of ``text`` (-1: none yet).

    A final "\r" is no break yet: with a "\n" after it, the two are one break.
    """
    match = re.search(r"\r\n|\n|\r(?=[\s\S])", text)
    return -1 if match is None else match.end()


def _origin(url: str) -> str | None:
    parts = urlsplit(url.strip())
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        return None
    port = parts.port
    default = {"http": 80, "https": 443}[parts.scheme.lower()]
    host = parts.hostname.lower()
    return f"{parts.scheme.lower()}://{host}" + (f":{port}" if port and port != default else "")


def normalize_origins(origins: Iterable[str]) -> frozenset[str]:
    """``scheme://host[:port]`` for each allowed origin (default ports dropped)."""
    out = set()
    for origin in origins:
        normal = _origin(origin)
        if normal is None:
            raise ValueError(f"{origin!r} is not an http(s) origin such as https://images.example")
        out.add(normal)
    return frozenset(out)


class ImageGuard:
    """A streaming rewriter of model text; one per streamed message."""

    def __init__(self, allowed_origins: Iterable[str] = ()) -> None:
        self.allowed = normalize_origins(allowed_origins)
        self._reset()

    def _reset(self) -> None:
        self._held = ""  # the text stage's held text (a possible image or tag start)
        self._line = ""  # the start of a line whose kind is not known yet
        self._mode = "text"  # "text", "fence" (inside fenced code) or "uncertain"
        self._fence = ""  # the opening fence's backticks or tildes
        self._routing: str | None = None  # the current line's stage, once known
        # Inline code in text lines (outside fences):
        self._clean = True  # nothing in this paragraph yet stops trusting code spans
        self._pend = ""  # a trailing backslash or backtick run, its meaning not known yet
        self._ctx = ""  # the last characters outside code on this line (tokens over chunks)
        self._open = 0  # the open span's backtick count (0: outside a span)
        self._code = ""  # the open span's text held back from its first non-inert character
        self._blank = True  # this line so far holds only spaces and tabs
        self._link = ""  # "(" or "[": inside a link's destination or reference label
        self._url = False  # inside a possible autolink literal (to the next whitespace)
        self._fence_tail = ""  # fenced code held back: a possible "<thinking" start
        self._seam = ""  # what flushed text ended with that the next text could complete

    def _allowed(self, url: str) -> bool:
        url = url.strip()
        if url.lower().startswith("data:image/"):
            return True
        return _origin(url) in self.allowed

    def _rewrite_markdown(self, match: re.Match[str]) -> str:
        if match.group("image") is None:
            return "\\!["  # a reference-style image: escaped, it renders as a link
        alt, url = match.group("alt"), match.group("url")
        if self._allowed(url):
            return match.group(0)
        origin = _origin(url) or "a non-web address"
        # The origin in a code span: shown as text, not turned into a link.
        return f"*[image blocked: {alt.strip() or 'image'} (`{origin}`)]*"

    def _rewrite(self, text: str) -> str:
        text = _MD_IMAGE.sub(self._rewrite_markdown, text)
        return _TAG_OPEN.sub(_BREAK, text)

    def _text_feed(self, chunk: str) -> str:
        """The text stage (outside fenced code): images checked, tags broken."""
        text = self._held + chunk
        start = _STARTS.search(text)
        if start is None:
            self._held = ""
            return self._rewrite(text)
        head, tail = text[: start.start()], text[start.start() :]
        done, rest = self._complete_prefix(tail)
        ready = head + done
        if ready.endswith("<"):
            # Whether this "<" opens a tag depends on the next character: keep it back.
            ready, rest = ready[:-1], "<" + rest
        self._held = rest
        return self._rewrite(ready)

    def _complete_prefix(self, tail: str) -> tuple[str, str]:
        """Split ``tail`` into what can be decided now and what must wait for more text."""
        position = 0
        while True:
            start = _STARTS.search(tail, position)
            if start is None:
                return tail, ""
            begin = start.start()
            end = _construct_end(tail, begin)
            if end is None:
                if len(tail) - begin > _HOLD_LIMIT:
                    position = begin + 1
                    continue
                return tail[:begin], tail[begin:]
            position = max(end, begin + 1)

    def _text_flush(self) -> str:
        text, self._held = self._held, ""
        return self._rewrite(text)

    def feed(self, chunk: str) -> str:
        """Take a chunk; return the text that is safe to send now."""
        if self._seam and chunk:
            # The text flushed last ended with a "<", "!" or escaping backslash the
            # browser would join to this chunk's first character (a tag, an image, an
            # escape the guard never saw): a zero-width space keeps them apart.
            if _SEAMS[self._seam].match(chunk):
                chunk = "\u200b" + chunk
            self._seam = ""
        split = None if self._mode == "uncertain" else _JS_LINE_BREAK.search(chunk)
        if split is None:
            return self._feed(chunk)
        # shinychat's stream splitter (JavaScript) starts a line after U+2028/U+2029,
        # markdown does not: from here the two may disagree on where fences are.
        out = self._feed(chunk[: split.start()])
        line, self._line = self._line, ""
        out += self._inline_stop(closing=False) + self._text_feed(line)
        self._mode, self._routing = "uncertain", None
        return out + self._text_feed(chunk[split.start() :])

    def _feed(self, chunk: str) -> str:
        text, self._line = self._line + chunk, ""
        out: list[str] = []
        while text:
            if self._mode == "uncertain":
                out.append(self._text_feed(text))
                break
            if self._routing is not None:  # inside a line whose kind is known
                end = _line_end(text)
                if end < 0 and text.endswith("\r"):  # "\r\n" may be split: wait for the "\n"
                    text, self._line = text[:-1], "\r"
                part, text = (text, "") if end < 0 else (text[:end], text[end:])
                out.append(
                    self._fence_code(part) if self._routing == "code" else self._inline_feed(part)
                )
                if end >= 0:
                    self._routing = None
                continue
            end = _line_end(text)
            line = text if end < 0 else text[:end]
            kind = self._classify(line, complete=end >= 0)
            if kind is None:  # the line's start does not tell yet
                self._line = text
                break
            out.append(self._start_line(kind, line if end >= 0 else ""))
            if end >= 0:
                text, self._routing = text[end:], None
        return "".join(out)

    def _classify(self, line: str, *, complete: bool) -> str | None:
        """What a line is: "code", "text", "open", "close", "uncertain"; None: wait."""
        if self._mode == "fence":
            closer = re.compile(rf" {{0,3}}{re.escape(self._fence[0])}*[ \t]*")
            if closer.fullmatch(line.rstrip("\r\n")) is None:
                return "code"
            if not complete:
                return None
            bare = line.rstrip("\r\n").strip(" \t")
            closes = len(bare) >= len(self._fence) and len(line) - len(line.lstrip(" ")) <= 3
            if closes and (line.startswith(" ") or "\r" in line):
                # Markdown closes here, shinychat's stream splitter does not (it wants the
                # fence at the margin, ending in "\n"): it would close at a later fence
                # that opens one here, and read "<thinking>" inside that as its own tag.
                return "uncertain"
            return "close" if closes else "code"
        stripped = line.lstrip(_CONTAINER_CHARS)
        if len(stripped) < 3 and (not complete) and all(c in "`~" for c in stripped):
            return None  # could still be a fence
        if not stripped.startswith(("```", "~~~")):
            return "text"
        if not complete:
            return None
        if stripped == line and _FENCE_OPEN.fullmatch(line.rstrip("\r\n")):
            return "open"
        # A fence inside a list, a quote or indented: whether and where the browser's
        # markdown closes it depends on the container, so from here on no code is
        # trusted to be code (every tag breaks, as everywhere outside code).
        # At the margin but no fence (a backtick in the info string): a paragraph line for
        # markdown, a fence for shinychat's stream splitter; they would disagree later.
        return "uncertain"

    def _start_line(self, kind: str, line: str) -> str:
        """Act on a line's kind; ``line`` is the whole line when complete, else ""."""
        if kind == "code":
            self._routing = "code"
            return self._fence_code(line)
        if kind == "close":
            self._mode, self._fence = "text", ""
            return line
        if kind == "open":
            # Text held before (an image's start) must not run into the fence line.
            out = self._text_flush() + self._text_feed(line) + self._text_flush()
            fence = _FENCE_OPEN.fullmatch(line.rstrip("\r\n"))
            assert fence is not None
            self._mode, self._fence = "fence", fence.group(1) or fence.group(2)
            self._clean = True  # a fence ends the paragraph: the next one starts afresh
            return out
        if kind == "uncertain":
            self._mode = "uncertain"
            return self._text_feed(line)
        self._routing = "text"
        return self._inline_feed(line) if line else ""

    def flush(self) -> str:
        """The text part ends for now: release what was held (rewritten).

        More text may still follow in the same markdown (after an event that shows
        nothing), so the guard keeps its place: inside fenced code, inside a line. A span
        whose closing run came last is closed, and a line break after it keeps a later
        backtick from growing that run. What it releases cannot be completed by the next
        text: a last ``<``, ``!`` or escaping backslash is kept from the next text's first
        character by a zero-width space, and a line start that may still become a fence
        ends the trust in code for the rest of the message.

        Examples:
            >>> guard = ImageGuard()
            >>> guard.feed("see !") + guard.flush() + guard.feed("[x](https://e.example/)")
            'see !\u200b[x](https://e.example/)'
        """
        line, self._line = self._line, ""
        mid_line = bool(line) or self._routing is not None
        if self._mode == "fence":
            out = self._fence_code(line, final=True)
            if line:  # a closing fence may still be completing: from here, trust no code
                self._mode, self._routing = "uncertain", None
        elif self._mode == "uncertain":
            out = self._text_feed(line)
        else:
            out = self._inline_feed(line) + self._inline_stop(closing=False, final=True)
            if line:  # a line start that may still become a fence: from here, trust no code
                self._mode, self._routing = "uncertain", None
            elif out.endswith("\n") or not mid_line:
                self._routing = None
            else:
                self._routing = "text"
        out += self._text_flush()
        if out and self._mode != "fence" and not self._open:
            self._seam = _seam(out)
        return out

    def end(self) -> str:
        """The markdown ends here (a tool card or the message's end follows): release
        what was held, and start afresh, as the browser starts a new markdown document
        after a card.

        Examples:
            >>> guard = ImageGuard()
            >>> guard.feed("```\\nopen fence") + guard.end() + guard.feed("<b>")
            '```\\nopen fence<\\u200bb>'
        """
        out = self.flush()
        self._reset()
        return out

    def _fence_code(self, text: str, *, final: bool = False) -> str:
        """Fenced code as sent: byte-exact, but for a ``<`` that starts ``<thinking``
        (held back while it might)."""
        text, self._fence_tail = self._fence_tail + text, ""
        if not final:
            cut = text.rfind("<")
            if cut >= 0 and any(p.startswith(text[cut:]) for p in _THINKING_PREFIXES):
                text, self._fence_tail = text[:cut], text[cut:]
        return _THINKING.sub(_BREAK, text if not final else _break_partial(text))

    # ------------------------------------------------------------------ inline code

    def _inline_feed(self, part: str) -> str:
        """A text line's part (at most one line break, at its end) through inline code."""
        body = part.rstrip("\r\n")
        if body.strip(" \t"):
            self._blank = False
        out = self._scan(self._pend + body) if self._clean else self._text_feed(body)
        if len(body) == len(part):
            return out
        out += self._inline_stop(closing=True) + self._text_feed(part[len(body) :])
        if self._link:  # a destination or label left open may go on: a title, a label
            self._clean = False
        self._link, self._url = "", False
        if self._blank:  # a blank line ends the paragraph; no rewrite may reach across it
            out += self._text_flush()
            self._clean = True
        self._ctx, self._blank = "", True
        return out

    def _scan(self, text: str) -> str:
        """Text of a clean paragraph: trusted spans verbatim, the rest to the text stage."""
        self._pend = ""
        out: list[str] = []
        position = 0
        while position < len(text) and self._clean:
            step = self._scan_code if self._open else self._scan_text
            position = step(text, position, out)
        if position < len(text):  # the paragraph stopped trusting spans
            out.append(self._text_feed(text[position:]))
        return "".join(out)

    def _scan_text(self, text: str, position: int, out: list[str]) -> int:
        """Outside a span: up to and through the next escape or backtick run."""
        if self._link or self._url:
            return self._scan_link(text, position, out)
        match = _TICK_OR_ESCAPE.search(text, position)
        special = len(text) if match is None else match.start()
        window = self._ctx + text[position : special + 1]
        risky = _RISKY.search(window)
        link = _new(_LINK_START, window, len(self._ctx)) or _new(_URL, window, len(self._ctx))
        if risky is not None and (link is None or risky.start() < link.start()):
            self._clean = False
            return position
        if link is not None:
            # Up to the link's "(" / "[" or the URL's start: then its own rules.
            end = position + link.end() - len(self._ctx)
            self._plain(text[position:end], out)
            if link.group().startswith("]"):
                self._link = link.group()[1]
            else:
                self._url = True
            return end
        plain = text[position:special]
        self._plain(plain, out)
        if special == len(text):
            return special
        if text[special] == "\\":
            if special + 1 == len(text):
                self._pend = "\\"  # what it escapes comes next
                return len(text)
            escaped = text[special : special + (2 if text[special + 1] in _ESCAPABLE else 1)]
            self._plain(escaped, out)  # an escaped backtick opens nothing
            return special + len(escaped)
        run = _TICKS.match(text, special)
        assert run is not None
        if run.end() == len(text):
            self._pend = run.group()  # the run may go on
            return len(text)
        out.append(self._text_flush() + run.group())  # what the text stage held goes first
        self._open, self._ctx = len(run.group()), ""
        return run.end()

    def _plain(self, text: str, out: list[str]) -> None:
        """Text outside code, to the text stage; its end kept for tokens over chunks."""
        out.append(self._text_feed(text))
        self._ctx = (self._ctx + text)[-3:]

    def _scan_link(self, text: str, position: int, out: list[str]) -> int:
        """Inside a link's destination or label, or a possible URL: to where it ends.

        A destination ``(...)`` or label ``[...]`` holding none of ``_LINK_STOP`` takes no
        backtick whether or not the browser makes it a link, and ends at its ``)`` or
        ``]``; a URL ends at whitespace. Anything else stops trusting spans.
        """
        stop = (_LINK_STOP[self._link] if self._link else _URL_STOP).search(text, position)
        end = len(text) if stop is None else stop.start()
        plain = text[position:end]
        if self._link and _URL.search(self._ctx + plain):
            self._url = True  # not a link after all? then a URL, to the next whitespace
        self._plain(plain, out)
        if stop is None:
            return end
        char = text[end]
        if self._link and char == _LINK_END[self._link]:
            self._link = ""
            self._plain(char, out)
            return end + 1
        if not self._link and char.isspace():
            self._url = False
            return end
        self._clean, self._link, self._url = False, "", False
        return end

    def _scan_code(self, text: str, position: int, out: list[str]) -> int:
        """Inside a span: up to and through the next backtick run (or a "|")."""
        match = _TICK_OR_PIPE.search(text, position)
        special = len(text) if match is None else match.start()
        self._code_text(text[position:special], out)
        if len(self._code) > _HOLD_LIMIT or text[special : special + 1] == "|":
            out.append(self._distrust())
            return special
        if special == len(text):
            return special
        run = _TICKS.match(text, special)
        assert run is not None
        if run.end() == len(text):
            self._pend = run.group()
            return len(text)
        self._code_run(run.group(), out)
        return run.end()

    def _code_run(self, run: str, out: list[str]) -> None:
        """A complete backtick run inside a span: its closer, or part of its text."""
        if len(run) != self._open:
            self._code_text(run, out)
            return
        # Closed on its line: code for the browser too (but for "<thinking", see there).
        out.append(_THINKING.sub(_BREAK, self._code) + run)
        self._code, self._open, self._ctx = "", 0, "`"

    def _code_text(self, text: str, out: list[str]) -> None:
        """A span's text: sent now while inert, held from its first "<", "!" or "\\"."""
        if not self._code:
            match = _NOT_INERT.search(text)
            if match is None:
                out.append(text)
                return
            out.append(text[: match.start()])
            text = text[match.start() :]
        self._code += text

    def _distrust(self) -> str:
        """Stop trusting spans in this paragraph; a span's held text goes to the text stage."""
        code, self._code, self._open, self._clean = self._code, "", 0, False
        return self._text_feed(code)

    def _inline_stop(self, *, closing: bool, final: bool = False) -> str:
        """The line's end (``closing``) or a flush (``final``): decide the pending run
        and the open span."""
        pend, self._pend = self._pend, ""
        out: list[str] = []
        if pend.startswith("`") and self._open and (closing or final):
            closes = len(pend) == self._open
            self._code_run(pend, out)
            if closes and not closing:
                out.append("\n")  # a later backtick would make the closing run longer
                self._ctx, self._blank, self._link, self._url = "", True, "", False
        elif pend:
            if self._open:
                self._code += pend  # maybe not the whole run: more text may follow
            else:
                out.append(self._text_feed(pend))
                self._clean = self._clean and pend == "\\"  # an opener left open distrusts
        if self._open:
            out.append(self._distrust())  # open at the line's end: maybe a multi-line span
        return "".join(out)


def rewrite_images(text: str, allowed_origins: Iterable[str] = ()) -> str:
    """Markdown images in a whole ``text`` checked as :class:`ImageGuard` checks them.

    Examples:
        >>> rewrite_images("![a](https://evil.example/a.png) ![b][ref]")
        '*[image blocked: a (`https://evil.example`)]* \\\\![b][ref]'
    """
    return _MD_IMAGE.sub(ImageGuard(allowed_origins)._rewrite_markdown, text)


def _new(pattern: re.Pattern[str], window: str, seen: int) -> re.Match[str] | None:
    """The first match of ``pattern`` in ``window`` that ends after its first ``seen``
    characters (those were scanned before: a match inside them was acted on then)."""
    return next((m for m in pattern.finditer(window) if m.end() > seen), None)


def _seam(text: str) -> str:
    """What released ``text`` ends with that the next text could complete: ``<``, an
    unescaped ``!``, an odd run of backslashes, or nothing ("")."""
    backslashes = len(text) - len(text.rstrip("\\"))
    if backslashes % 2:
        return "\\"
    if text.endswith("<"):
        return "<"
    if text.endswith("!") and (len(text) - 1 - len(text[:-1].rstrip("\\"))) % 2 == 0:
        return "!"
    return ""


def _break_partial(text: str) -> str:
    """``text`` with a trailing start of ``<thinking`` broken too."""
    cut = text.rfind("<")
    if cut >= 0 and any(p.startswith(text[cut:]) for p in _THINKING_PREFIXES):
        return text[:cut] + _BREAK + text[cut + 1 :]
    return text


def _construct_end(text: str, begin: int) -> int | None:
    """Where the construct starting at ``begin`` ends, or None if it may still grow."""
    rest = text[begin:]
    if rest == "<" or rest == "!":
        return None  # the next character decides
    if rest.startswith("<"):
        return begin + 1
    if rest[1] != "[":
        return begin + 1
    close = rest.find("]")
    if close == -1:
        return None if "\n" not in rest else begin + 1
    after = rest[close + 1 : close + 2]
    if after == "":
        return None
    if after != "(":
        return begin + close + 1
    paren = rest.find(")", close)
    return None if paren == -1 else begin + paren + 1
