"""Whose page opened a session's websocket: the ``Origin`` check.

A browser attaches an app's cookies to a websocket that *any* page opens to the app:
SameSite ignores ports and covers sibling subdomains, and websockets have no CORS. So a
page on ``http://host:9000`` that opens ``ws://host:8000/websocket/`` would connect as
the user of ``http://host:8000``. Every browser sends the page's ``Origin`` with the
websocket handshake; the kit compares it with the origin the request was addressed to
(``Host``, and the scheme) and with the origins the app allows. A session whose page is
of another origin is *foreign*: it gets no conversation, no agent, no prompts.

Behind a reverse proxy the ``Host`` the app sees may be the proxy's upstream address;
the origin the browser used is then in ``X-Forwarded-Host`` / ``X-Forwarded-Proto``,
which count only when the app says its proxy sets them (``trust_forwarded=True``):
otherwise any client could send them. On Posit Connect the server's own address
(``CONNECT_SERVER``) is also allowed.

A handshake without ``Origin`` is not a browser's (scripts and test clients send none);
it carries only the cookies its sender already has, so it is let through.

Examples:
    >>> foreign_origin({"origin": "http://host:9000", "host": "host:8000"}, "ws")
    'http://host:9000'
    >>> foreign_origin({"origin": "http://host:8000", "host": "host:8000"}, "ws") is None
    True
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping
from urllib.parse import urlsplit

from shiny.session import Session

from ._identity import on_posit_connect

logger = logging.getLogger(__name__)

__all__ = ["foreign_origin", "normalize_allowed_origins", "origin_of", "session_foreign_origin"]


def origin_of(url: str) -> str | None:
    """``scheme://host[:port]`` (lower case, default port dropped) of an http(s) URL or
    origin, else None.

    Examples:
        >>> origin_of("HTTPS://Example.org:443/path"), origin_of("null")
        ('https://example.org', None)
    """
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        return None
    if parts.username is not None or parts.password is not None:
        return None
    host = parts.hostname.lower()
    if ":" in host:
        host = f"[{host}]"  # IPv6, as browsers write it
    default = {"http": 80, "https": 443}[scheme]
    return f"{scheme}://{host}" + (f":{port}" if port is not None and port != default else "")


def normalize_allowed_origins(origins: Iterable[str]) -> frozenset[str]:
    """The app's extra allowed origins, checked (a ``ConfigurationError``-style
    ``ValueError`` names one that is not an http(s) origin)."""
    if isinstance(origins, str):
        origins = (origins,)
    out = set()
    for origin in origins:
        normal = origin_of(origin) if isinstance(origin, str) else None
        if normal is None:
            raise ValueError(f"{origin!r} is not an http(s) origin such as https://chat.example")
        out.add(normal)
    return frozenset(out)


def _first(value: str | None) -> str | None:
    """The first entry of a comma-separated proxy header (the client-facing hop)."""
    if value is None:
        return None
    first = value.split(",", 1)[0].strip()
    return first or None


def own_origin(headers: Mapping[str, str], scheme: str, *, trust_forwarded: bool) -> str | None:
    """The origin the browser addressed: scheme + ``Host`` (or, with ``trust_forwarded``,
    the proxy's ``X-Forwarded-Proto`` + ``X-Forwarded-Host``)."""
    secure = scheme.lower() in ("https", "wss")
    host = headers.get("host")
    if trust_forwarded:
        host = _first(headers.get("x-forwarded-host")) or host
        proto = (_first(headers.get("x-forwarded-proto")) or "").lower()
        if proto in ("https", "wss"):
            secure = True
        elif proto in ("http", "ws"):
            secure = False
    if not host or any(c in host for c in "/@?#\\ "):
        return None
    return origin_of(f"{'https' if secure else 'http'}://{host}")


def foreign_origin(
    headers: Mapping[str, str],
    scheme: str,
    *,
    allowed: frozenset[str] = frozenset(),
    trust_forwarded: bool = False,
) -> str | None:
    """The page's origin when it is not the app's own nor an allowed one (the session is
    foreign), else None. ``headers`` are the handshake's, with lower-case names."""
    sent = headers.get("origin")
    if sent is None:
        return None  # not a browser (see the module docstring)
    page = origin_of(sent)
    if page is None:
        return sent.strip()[:200] or "null"  # "null": a sandboxed frame, a file:// page
    if page == own_origin(headers, scheme, trust_forwarded=trust_forwarded) or page in allowed:
        return None
    if on_posit_connect():
        connect = origin_of(os.environ.get("CONNECT_SERVER", ""))
        if connect is not None and page == connect:
            return None
    return page


def session_foreign_origin(
    session: Session, allowed: frozenset[str], *, trust_forwarded: bool
) -> str | None:
    """:func:`foreign_origin` for a Shiny session's websocket (None for a session with no
    HTTP connection, e.g. a test's mock session)."""
    http_conn = getattr(session.root_scope(), "http_conn", None)
    if http_conn is None:
        return None
    headers = {k.lower(): v for k, v in http_conn.headers.items()}
    scheme = str((getattr(http_conn, "url", None) and http_conn.url.scheme) or "ws")
    found = foreign_origin(headers, scheme, allowed=allowed, trust_forwarded=trust_forwarded)
    if found is not None:
        logger.warning(
            "refused a session opened by a page of another origin (%r; the app's is %r)",
            found,
            own_origin(headers, scheme, trust_forwarded=trust_forwarded),
        )
    return found
