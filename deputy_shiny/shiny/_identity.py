"""Who a saved conversation belongs to: the rules, kept apart from Shiny sessions.

Two sources, and only these:

- **A user the deployment vouches for.** py-shiny fills ``session.user`` from the
  ``Shiny-Server-Credentials`` request header, which any client can send. It counts
  only where a trusted proxy sets it and strips the client's own: on Posit Connect
  (detected from the environment Connect gives its content, :func:`on_posit_connect`),
  or where the app says so (``KitPersistence(trust_user_header=True)``).
- **An anonymous browser token**, issued by the server in an ``HttpOnly``,
  ``SameSite=Strict`` cookie scoped to the app's path, so no script reads it. A token
  is ``<id>.<mac>``: 256 random bits and an HMAC (SHA-256, a server-held key) over the
  id and the browser's *binding*, a random value the kit's script keeps in the
  origin's ``localStorage`` and sends in a cookie of its own. A page on another port or
  a sibling subdomain can plant cookies for this host (cookies ignore ports) but cannot
  write this origin's ``localStorage``: a planted token does not match the victim's
  binding, and is ignored. A request carrying either cookie twice (a planted duplicate
  beside the real one) is refused outright, never resolved by "last wins".

Examples:
    >>> key = b"k" * 32
    >>> binding = new_binding()
    >>> token = issue_token(key, binding)
    >>> token_id(key, token, binding) == token.split(".")[0]
    True
    >>> token_id(key, token, new_binding()) is None
    True
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "BINDING_COOKIE",
    "TOKEN_COOKIE",
    "CookieClaim",
    "cookie_values",
    "is_binding",
    "issue_token",
    "new_binding",
    "on_posit_connect",
    "read_claim",
    "token_id",
    "trusted_session_user",
    "trusted_user",
]

TOKEN_COOKIE = "deputy_shiny_conversation"
"""The HttpOnly cookie holding the browser's token (set by the server only)."""

BINDING_COOKIE = "deputy_shiny_binding"
"""The cookie the kit's script sets from ``localStorage`` before the page connects."""

_PART = re.compile(r"[A-Za-z0-9_-]{43}")
_TOKEN = re.compile(r"([A-Za-z0-9_-]{43})\.([A-Za-z0-9_-]{43})")
_MAC_LABEL = b"deputy_shiny kit token v1\0"


def on_posit_connect(environ: Mapping[str, str] | None = None) -> bool:
    """True when the app runs on Posit Connect (``RSTUDIO_PRODUCT=CONNECT``, or
    ``CONNECT_SERVER`` set: Connect sets both for the content it runs).

    Examples:
        >>> on_posit_connect({"RSTUDIO_PRODUCT": "CONNECT"}), on_posit_connect({})
        (True, False)
    """
    env = os.environ if environ is None else environ
    return env.get("RSTUDIO_PRODUCT", "").upper() == "CONNECT" or bool(env.get("CONNECT_SERVER"))


def trusted_user(
    user: str | None, *, trust_header: bool | None, environ: Mapping[str, str] | None = None
) -> str | None:
    """``session.user`` when the deployment vouches for it, else None.

    ``trust_header`` None: trusted on Posit Connect only; True: a proxy the app names
    sets the credentials header (and drops the client's); False: never.

    Examples:
        >>> trusted_user("alice", trust_header=None, environ={})
        >>> trusted_user("alice", trust_header=True, environ={})
        'alice'
    """
    trusted = on_posit_connect(environ) if trust_header is None else trust_header
    if not trusted or not isinstance(user, str) or not user:
        return None
    return user


def trusted_session_user(session: Any, *, trust_header: bool | None = None) -> str | None:
    """A Shiny session's ``session.user`` when the deployment vouches for it (Posit
    Connect, or ``trust_header=True`` when a proxy the app names sets the credentials
    header), else None: use it wherever the user's name decides what they may see.

    Examples:
        >>> class Session:
        ...     user = "mallory"  # from a header the client sent
        >>> trusted_session_user(Session(), trust_header=False) is None
        True
    """
    return trusted_user(getattr(session, "user", None), trust_header=trust_header)


def new_binding() -> str:
    """A fresh binding value, shaped as the kit's script makes one (test helper)."""
    return secrets.token_urlsafe(32)


def is_binding(value: object) -> bool:
    """True for a string shaped like a binding (43 URL-safe characters)."""
    return isinstance(value, str) and _PART.fullmatch(value) is not None


def _mac(key: bytes, token_id_: str, binding: str) -> str:
    digest = hmac.new(
        key, _MAC_LABEL + token_id_.encode() + b"\0" + binding.encode(), hashlib.sha256
    ).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def issue_token(key: bytes, binding: str) -> str:
    """A new token for the browser whose binding is ``binding``."""
    if not is_binding(binding):
        raise ValueError("not a binding value")
    new_id = secrets.token_urlsafe(32)
    return f"{new_id}.{_mac(key, new_id, binding)}"


def token_id(key: bytes, token: object, binding: object) -> str | None:
    """The token's id if it is well formed and was issued by this key to this binding,
    else None (a guessed, malformed, planted or foreign-key token)."""
    if not isinstance(token, str) or not is_binding(binding):
        return None
    match = _TOKEN.fullmatch(token)
    if match is None:
        return None
    assert isinstance(binding, str)
    if not hmac.compare_digest(match.group(2), _mac(key, match.group(1), binding)):
        return None
    return match.group(1)


def cookie_values(header: str | None, name: str) -> list[str]:
    """Every value of the cookie ``name`` in a raw ``Cookie`` header, in order: a
    duplicate stays visible (Starlette's parsed cookies keep only the last one).

    Examples:
        >>> cookie_values("a=1; b=2; a=3", "a")
        ['1', '3']
    """
    if not header:
        return []
    found = []
    for part in header.split(";"):
        cookie_name, sep, value = part.strip().partition("=")
        if sep and cookie_name.strip() == name:
            found.append(value.strip().strip('"'))
    return found


@dataclass(frozen=True)
class CookieClaim:
    """What a websocket's cookies say about the anonymous browser.

    ``status``: ``"ok"`` (one binding, and at most one token), ``"duplicate"`` (a cookie
    sent twice: refused), ``"no_binding"`` (the kit's script did not set its binding
    before the page connected, or set a malformed one).
    """

    status: Literal["ok", "duplicate", "no_binding"]
    binding: str | None = None
    token: str | None = None


def read_claim(cookie_header: str | None) -> CookieClaim:
    """Read the token and binding cookies from a raw ``Cookie`` header.

    Examples:
        >>> read_claim("deputy_shiny_conversation=a; deputy_shiny_conversation=b").status
        'duplicate'
    """
    tokens = cookie_values(cookie_header, TOKEN_COOKIE)
    bindings = cookie_values(cookie_header, BINDING_COOKIE)
    if len(tokens) > 1 or len(bindings) > 1:
        return CookieClaim("duplicate")
    if not bindings or not is_binding(bindings[0]):
        return CookieClaim("no_binding")
    return CookieClaim("ok", bindings[0], tokens[0] if tokens else None)
