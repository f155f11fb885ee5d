"""Web tools: fetch a page as readable text, search the web, or use a provider's own search.

``web_fetch`` downloads one http(s) URL with httpx (redirects followed hop by hop, each
hop's scheme and destination checked, a total deadline and a byte cap enforced while the
body streams) and turns HTML into Markdown with ``markdownify`` (scripts, styles and
other non-content elements dropped). By default it does not reach the server's own
network: loopback, private, link-local and other non-public addresses are refused (see
:func:`tool_web_fetch`). ``web_search`` asks an injectable backend; the default one uses
DuckDuckGo through the ``ddgs`` package (the ``web`` extra). :func:`tools_web` returns
both, or, for a model whose provider searches natively, ``web_fetch`` plus a
:class:`NativeWebSearch` marker that the agent turns into request parameters, and
for one that reads pages natively, a :class:`NativeWebFetch` marker in ``web_fetch``'s
place.

Examples:
    >>> from deputy_shiny.tools.web import tools_web
    >>> [t.name for t in tools_web()]
    ['web_fetch', 'web_search']
"""

from __future__ import annotations

import logging
import re
import socket
from collections.abc import Iterable
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network
from typing import TYPE_CHECKING, Annotated, Any, Literal
from urllib.parse import urljoin, urlsplit

from pydantic import BaseModel, ConfigDict, Field

from .._util.chain import causes
from .._util.timeouts import timeout as _timeout
from ..errors import ToolInvocationError
from ._tool import Tool, ToolAnnotations, builtin_source, tool, tool_annotations
from ._tool_threads import run_in_tool_thread
from ._web_search import (
    WEB_SEARCH_ANNOTATIONS as WEB_SEARCH_ANNOTATIONS,
)
from ._web_search import (
    NativeWebSearch,
    SearchBackend,
    SearchResult,
    bind_native_web_search,
    ddgs_search,
    tool_web_search,
)

if TYPE_CHECKING:
    import httpx

    from ._net_guard import NetworkPolicy, Resolver

__all__ = [
    "NativeWebFetch",
    "NativeWebSearch",
    "NativeWebTool",
    "SearchBackend",
    "SearchResult",
    "bind_native_web_fetch",
    "bind_native_web_search",
    "ddgs_search",
    "tool_web_fetch",
    "tool_web_search",
    "tools_web",
]

logger = logging.getLogger(__name__)


WEB_FETCH_ANNOTATIONS = tool_annotations(
    read_only_hint=True, destructive_hint=False, open_world_hint=True, idempotent_hint=True
)

_ALLOWED_SCHEMES = ("http", "https")
_MAX_REDIRECTS = 10
_USER_AGENT = "deputy_shiny-web_fetch/0.1 (+https://pypi.org/project/deputy_shiny/)"
_ACCEPT = "text/html,application/xhtml+xml,text/plain;q=0.9,text/*;q=0.8,*/*;q=0.5"

# application/* subtypes that are text (besides any "+json" / "+xml" suffix).
_TEXT_APPLICATION_TYPES = frozenset(
    {
        "json",
        "xml",
        "javascript",
        "ecmascript",
        "x-javascript",
        "x-yaml",
        "yaml",
        "toml",
        "x-toml",
        "csv",
        "x-sh",
        "x-python",
        "sql",
        "graphql",
        "markdown",
        "x-markdown",
        "x-ndjson",
        "ndjson",
        "x-www-form-urlencoded",
        "x-tex",
        "x-latex",
        "rtf",
    }
)
_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
# Types whose body is read and sniffed: the server did not say what it is.
_UNKNOWN_TYPES = frozenset({"", "application/octet-stream", "binary/octet-stream"})
# Elements that carry no readable content.
_DROP_TAGS = (
    "script",
    "style",
    "noscript",
    "template",
    "svg",
    "canvas",
    "iframe",
    "object",
    "embed",
    "link",
    "meta",
    "head",
    "img",
    "picture",
    "video",
    "audio",
    "source",
    "track",
    "map",
    "button",
    "input",
    "select",
    "textarea",
)


# --------------------------------------------------------------------------- web_fetch


class _Page:
    """What was downloaded: final URL, content type, charset, body, and whether it was cut."""

    def __init__(
        self, url: str, content_type: str, charset: str | None, body: bytes, capped: bool
    ) -> None:
        self.url = url
        self.content_type = content_type
        self.charset = charset
        self.body = body
        self.capped = capped


def _check_scheme(url: str, *, hop: str = "") -> None:
    scheme = url.split(":", 1)[0].lower() if ":" in url else ""
    if scheme not in _ALLOWED_SCHEMES:
        where = f" ({hop})" if hop else ""
        shown = url if len(url) <= 200 else url[:200] + "..."
        raise ToolInvocationError(
            f"web_fetch fetches only http:// and https:// URLs{where}; got {shown!r}."
        )


def _media_type(header: str | None) -> str:
    return (header or "").split(";", 1)[0].strip().lower()


def _kind(media_type: str) -> Literal["html", "text", "binary", "unknown"]:
    if media_type in _HTML_TYPES:
        return "html"
    if media_type in _UNKNOWN_TYPES:
        return "unknown"
    main, _, sub = media_type.partition("/")
    if main == "text":
        return "text"
    if main == "application" and (
        sub in _TEXT_APPLICATION_TYPES or sub.endswith(("+json", "+xml", "+yaml"))
    ):
        return "text"
    return "binary"


def _looks_binary(data: bytes) -> bool:
    head = data[:4096]
    if b"\x00" in head:
        return True
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as e:
        return e.start < len(head) - 4  # a character cut at the end of the sample is fine
    return False


def _looks_like_html(text: str) -> bool:
    start = text.lstrip()[:512].lower()
    return start.startswith(("<!doctype html", "<html")) or "<html" in start


def _binary_refusal(url: str, media_type: str) -> ToolInvocationError:
    return ToolInvocationError(
        f"web_fetch returns text only: {url} is {media_type or 'binary data'} (a binary "
        "type), so it was not downloaded. Fetch an HTML or text page instead."
    )


def _connect_problem(exc: BaseException, url: httpx.URL) -> str:
    chain = [exc, *causes(exc, suppressed=True)]
    root = chain[-1]
    text = str(root) or type(root).__name__
    lowered = " ".join(str(e) for e in chain).lower()
    host = url.host
    if any(isinstance(e, socket.gaierror) for e in chain) or any(
        marker in lowered
        for marker in (
            "name or service not known",
            "nodename nor servname",
            "getaddrinfo failed",
            "no address associated",
            "temporary failure in name resolution",
            "name resolution",
        )
    ):
        return f"could not resolve host {host!r} (DNS lookup failed)"
    if any(isinstance(e, ConnectionRefusedError) for e in chain) or "refused" in lowered:
        port = url.port or (443 if url.scheme == "https" else 80)
        return f"connection refused by {host}:{port}"
    return f"could not connect to {host}: {text}"


def _refusal(
    exc: Exception, url: httpx.URL | str, came_from: httpx.URL | None
) -> ToolInvocationError:
    hop = f" (redirected from {came_from})" if came_from is not None else ""
    return ToolInvocationError(
        f"web_fetch refused {url}{hop}: {exc}. web_fetch does not reach the server's own "
        "network (loopback, private, link-local and other non-public addresses); the app "
        "can allow a destination with tool_web_fetch(allowed_networks=[...])."
    )


def _parse_url(text: str, policy: NetworkPolicy, came_from: httpx.URL | None) -> httpx.URL:
    """``httpx.URL(text)``; a host httpx rejects but that spells a refused address is
    refused by name (``http://0177.0.0.1/``) rather than reported as a malformed URL."""
    import httpx

    from ._net_guard import AddressRefused, check_literal

    try:
        return httpx.URL(text)
    except httpx.InvalidURL:
        try:
            host = urlsplit(text).hostname or ""
        except ValueError:
            host = ""
        if host and not policy.allow_all:
            try:
                check_literal(host, policy)
            except AddressRefused as e:
                shown = text if len(text) <= 200 else text[:200] + "..."
                raise _refusal(e, shown, came_from) from None
        raise


async def _download(
    url: str,
    *,
    seconds: float,
    max_bytes: int,
    transport: httpx.AsyncBaseTransport | None,
    user_agent: str,
    policy: NetworkPolicy,
    resolver: Resolver | None,
) -> _Page:
    """GET ``url``, following redirects by hand so every hop's scheme is checked.

    Unless ``policy.allow_all``, every request (each redirect hop) goes through a
    :class:`~deputy_shiny.tools._net_guard.GuardedTransport`, which checks its destination and
    connects to the checked address.
    """
    import httpx

    from ._net_guard import AddressRefused, GuardedTransport

    client_transport: httpx.AsyncBaseTransport | None = transport
    if not policy.allow_all:
        # Environment proxies would bypass the guard (the client mounts them over it).
        client_transport = GuardedTransport(policy, resolver=resolver, transport=transport)
    headers = {"User-Agent": user_agent, "Accept": _ACCEPT}
    async with httpx.AsyncClient(
        transport=client_transport,
        timeout=httpx.Timeout(seconds),
        follow_redirects=False,
        headers=headers,
        trust_env=client_transport is None,
    ) as client:
        came_from: httpx.URL | None = None
        current = _parse_url(url, policy, came_from)
        for _ in range(_MAX_REDIRECTS + 1):
            request = client.build_request("GET", current)
            try:
                response = await client.send(request, stream=True)
            except AddressRefused as e:
                raise _refusal(e, current, came_from) from None
            except httpx.TimeoutException:
                raise ToolInvocationError(
                    f"web_fetch timed out after {seconds:g} s waiting for {current}."
                ) from None
            except httpx.ConnectError as e:
                raise ToolInvocationError(
                    f"web_fetch failed: {_connect_problem(e, current)}."
                ) from None
            except httpx.HTTPError as e:
                raise ToolInvocationError(
                    f"web_fetch failed for {current}: {type(e).__name__}: {e}"
                ) from None
            try:
                if response.is_redirect:
                    location = response.headers.get("location", "")
                    if not location.strip():
                        raise ToolInvocationError(
                            f"web_fetch: {current} answered HTTP {response.status_code} "
                            "(a redirect) without a Location header."
                        )
                    target = urljoin(str(current), location.strip())
                    _check_scheme(target, hop=f"redirected from {current}")
                    came_from, current = current, _parse_url(target, policy, current)
                    continue
                if response.status_code >= 400:
                    reason = response.reason_phrase or ""
                    raise ToolInvocationError(
                        f"web_fetch: HTTP {response.status_code} {reason}".rstrip()
                        + f" for {current}."
                    )
                media_type = _media_type(response.headers.get("content-type"))
                if _kind(media_type) == "binary":
                    raise _binary_refusal(str(current), media_type)
                chunks: list[bytes] = []
                size = 0
                capped = False
                try:
                    async for chunk in response.aiter_bytes():
                        if size + len(chunk) > max_bytes:  # stop reading: the cap is reached
                            chunks.append(chunk[: max_bytes - size])
                            capped = True
                            break
                        chunks.append(chunk)
                        size += len(chunk)
                except httpx.TimeoutException:
                    raise ToolInvocationError(
                        f"web_fetch timed out after {seconds:g} s reading {current}."
                    ) from None
                except httpx.HTTPError as e:
                    raise ToolInvocationError(
                        f"web_fetch: the connection to {current.host} failed while reading "
                        f"the page ({type(e).__name__}: {e})."
                    ) from None
                return _Page(
                    url=str(current),
                    content_type=media_type,
                    charset=response.charset_encoding,
                    body=b"".join(chunks),
                    capped=capped,
                )
            finally:
                await response.aclose()
        raise ToolInvocationError(f"web_fetch: stopped after {_MAX_REDIRECTS} redirects at {url}.")


def _html_to_markdown(html: bytes, charset: str | None, base_url: str) -> tuple[str | None, str]:
    """(title, markdown) of an HTML document; runs in a worker thread."""
    from bs4 import BeautifulSoup
    from markdownify import MarkdownConverter

    soup = BeautifulSoup(html, "html.parser", from_encoding=charset)
    title_tag = soup.find("title")
    title = title_tag.get_text(" ", strip=True) if title_tag is not None else None
    for name in _DROP_TAGS:
        for element in soup.find_all(name):
            element.decompose()
    for anchor in soup.find_all("a", href=True):
        href = anchor.get("href")
        if isinstance(href, str) and not href.startswith(("#", "javascript:", "data:")):
            anchor["href"] = urljoin(base_url, href)
    if not title:
        heading = soup.find("h1")
        title = heading.get_text(" ", strip=True) if heading is not None else None
    body = soup.find("body") or soup
    markdown = MarkdownConverter(heading_style="ATX", bullets="-").convert_soup(body)
    markdown = re.sub(r"[ \t]+\n", "\n", markdown)
    markdown = re.sub(r"\n{3,}", "\n\n", markdown).strip()
    return title or None, markdown


def _decode(body: bytes, charset: str | None) -> str:
    for encoding in (charset, "utf-8"):
        if not encoding:
            continue
        try:
            return body.decode(encoding, errors="replace")
        except LookupError:
            continue
    return body.decode("utf-8", errors="replace")


def _render_page(page: _Page, max_chars: int, max_bytes: int) -> str:
    kind = _kind(page.content_type)
    if kind == "unknown":
        if _looks_binary(page.body):
            raise _binary_refusal(page.url, page.content_type or "of no declared type")
        kind = "html" if _looks_like_html(_decode(page.body[:2048], page.charset)) else "text"
    title: str | None
    if kind == "html":
        title, content = _html_to_markdown(page.body, page.charset, page.url)
    else:
        title, content = None, _decode(page.body, page.charset).strip()
    lines = []
    if title:
        lines.append(f"Title: {title}")
    lines.append(f"URL: {page.url}")
    lines.append(f"Content-Type: {page.content_type or 'unknown'}")
    notes = []
    if page.capped:
        notes.append(
            f"[The response was larger than {max_bytes:,} bytes; only the first "
            f"{max_bytes:,} were read.]"
        )
    if not content:
        content = "(no text content)"
    if len(content) > max_chars:
        total = len(content)
        content = content[:max_chars].rstrip()
        notes.append(
            f"[Content truncated: showing the first {max_chars:,} of {total:,} characters. "
            "Call web_fetch with a larger max_chars to see more.]"
        )
    text = "\n".join(lines) + "\n\n" + content
    if notes:
        text += "\n\n" + "\n".join(notes)
    return text


AllowedNetwork = str | IPv4Network | IPv6Network | IPv4Address | IPv6Address
"""An ``allowed_networks`` entry: ``"10.20.0.0/16"``, ``"10.20.0.5"``, ``"wiki.corp.example"``."""


def tool_web_fetch(
    *,
    timeout: float = 30.0,
    max_bytes: int = 5_000_000,
    user_agent: str = _USER_AGENT,
    transport: httpx.AsyncBaseTransport | None = None,
    allow_private_network: bool = False,
    allowed_networks: Iterable[AllowedNetwork] = (),
    resolver: Resolver | None = None,
) -> Tool:
    """Create the ``web_fetch`` tool: fetch an http(s) URL and return its text as Markdown.

    HTML is converted to Markdown (scripts, styles, images and forms dropped, links made
    absolute); other text types come back as they are; binary types (images, PDFs,
    archives) are refused. The result starts with the page title, final URL and content
    type, and the content is cut at ``max_chars`` with a note. Redirects are followed
    (at most 10) and every hop must stay on http or https. Failures (DNS, refused
    connection, HTTP 4xx/5xx, timeout) are clean error results.

    The server's own network is off limits by default. Before connecting, every hop's
    host is normalized (decimal, octal and hex IPv4 spellings, trailing dots, userinfo)
    and resolved, and the request is refused, as an error result naming the rule, when
    any address is loopback, private, link-local, multicast, reserved or unspecified,
    also inside an IPv4-mapped, NAT64 or 6to4 IPv6 address. The connection then goes to
    the address that was checked (with the original Host header and TLS server name), so
    DNS rebinding cannot slip past the check. Proxy environment variables are not used
    while the guard is on. An app whose agent should read an intranet lists what it may
    reach in ``allowed_networks``, or turns the guard off with
    ``allow_private_network=True``.

    Args:
        timeout: Seconds for the whole download, redirects included.
        max_bytes: Bytes of body read at most; the download stops there (with a note).
        user_agent: The User-Agent header sent.
        transport: An httpx async transport (tests, proxies); None for the network. With
            the guard on, requests are checked first and then handed to it as they are.
        allow_private_network: True turns the guard off: any address may be fetched.
        allowed_networks: Non-public destinations that may still be fetched: networks
            (``"10.20.0.0/16"``), addresses (``"10.20.0.5"``, ``"::1"``) or host names
            (``"wiki.corp.example"``, ``"*.corp.example"``). A bad entry raises
            ValueError here.
        resolver: ``async resolver(host, port) -> [ip, ...]`` for the check (tests);
            None for the system resolver.

    Examples:
        >>> t = tool_web_fetch(timeout=10)
        >>> t.name, sorted(t.parameters["properties"])
        ('web_fetch', ['max_chars', 'url'])
        >>> intranet = tool_web_fetch(allowed_networks=("10.20.0.0/16", "wiki.corp.example"))
        >>> tool_web_fetch(allowed_networks=("10.20.0.0/33",))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: allowed_networks: '10.20.0.0/33' is not a valid network ...
    """
    if timeout <= 0:
        raise ValueError("timeout must be a positive number of seconds")
    if max_bytes <= 0:
        raise ValueError("max_bytes must be positive")
    if resolver is not None and not callable(resolver):
        raise TypeError(f"resolver must be an async function, got {type(resolver).__name__}")
    from ._net_guard import NetworkPolicy

    policy = NetworkPolicy.build(
        allow_private_network=allow_private_network, allowed_networks=allowed_networks
    )

    async def web_fetch(
        url: str,
        max_chars: Annotated[int, Field(ge=1, le=200_000)] = 20_000,
    ) -> str:
        """Fetch a web page (http or https) and return its title, URL and text as Markdown.

        Args:
            url: The absolute http:// or https:// URL to fetch.
            max_chars: The most characters of page content to return.
        """
        url = url.strip()
        _check_scheme(url)
        try:
            async with _timeout(timeout):
                page = await _download(
                    url,
                    seconds=timeout,
                    max_bytes=max_bytes,
                    transport=transport,
                    user_agent=user_agent,
                    policy=policy,
                    resolver=resolver,
                )
        except TimeoutError:
            raise ToolInvocationError(
                f"web_fetch timed out after {timeout:g} s fetching {url}."
            ) from None
        except ToolInvocationError:
            raise
        except Exception as e:  # e.g. httpx.InvalidURL for a malformed URL
            raise ToolInvocationError(
                f"web_fetch could not fetch {url!r}: {type(e).__name__}: {e}"
            ) from None
        return await run_in_tool_thread(_render_page, page, max_chars, max_bytes)

    return tool(
        web_fetch,
        name="web_fetch",
        annotations=WEB_FETCH_ANNOTATIONS,
        source=builtin_source("web"),
    )


class NativeWebFetch(BaseModel):
    """A provider-native web fetch: the provider reads the pages, no function runs here.

    The fetch half of :class:`NativeWebSearch` (same life cycle: authorized once at
    registration, then sent with every request). litellm says which models read URLs
    themselves (``supports_url_context``: Gemini's URL context); their requests carry
    the tool ``{"url_context": {}}``. Its name is ``web_fetch``, so permission rules
    written for the universal tool apply to it.

    Unbound (as :func:`tools_web` makes it) it is a request: the agent registering it
    binds it to its model when that model fetches natively, and otherwise registers the
    universal :func:`tool_web_fetch` made with the network options kept here.

    Examples:
        >>> native = NativeWebFetch(provider="gemini", model="gemini/gemini-2.5-flash")
        >>> native.name, native.request_kwargs()
        ('web_fetch', {'tools': [{'url_context': {}}]})
    """

    model_config = ConfigDict(
        frozen=True, extra="forbid", defer_build=True, arbitrary_types_allowed=True
    )

    name: Literal["web_fetch"] = "web_fetch"
    provider: str | None = None
    model: str | None = None
    # The universal web_fetch's options, for a model that does not fetch natively.
    allow_private_network: bool = False
    allowed_networks: tuple[AllowedNetwork, ...] = ()

    @property
    def bound(self) -> bool:
        """True once it names the provider and model that fetch."""
        return self.provider is not None and self.model is not None

    @property
    def annotations(self) -> ToolAnnotations:
        """The same annotations as the universal ``web_fetch`` tool."""
        return WEB_FETCH_ANNOTATIONS

    def request_kwargs(self) -> dict[str, Any]:
        """What to add to ``litellm.acompletion``: a tool entry, sent beside the function
        tools (a fresh copy)."""
        return {"tools": [{"url_context": {}}]}


NativeWebTool = NativeWebSearch | NativeWebFetch
"""A provider-native web tool: search or fetch."""


def bind_native_web_fetch(
    request: NativeWebFetch, *, supported: bool, provider: str, model: str
) -> NativeWebFetch | Tool:
    """What an unbound :class:`NativeWebFetch` becomes for one agent's model: bound to
    it when it fetches natively (``supported``, from
    :func:`deputy_shiny.models.supports_native_web_fetch`), else the universal
    ``web_fetch`` with the request's network options.

    Examples:
        >>> request = NativeWebFetch()
        >>> bind_native_web_fetch(request, supported=True, provider="gemini", model="g/x").model
        'g/x'
        >>> type(bind_native_web_fetch(request, supported=False, provider="o", model="x"))
        <class 'deputy_shiny.tools._tool.Tool'>
    """
    if request.bound:
        return request
    if not supported:
        return tool_web_fetch(
            allow_private_network=request.allow_private_network,
            allowed_networks=request.allowed_networks,
        )
    return request.model_copy(update={"provider": provider, "model": model})


def tools_web(
    model: object | None = None,
    use_native: bool = True,
    *,
    allow_private_network: bool = False,
    allowed_networks: Iterable[AllowedNetwork] = (),
) -> list[Tool | NativeWebTool]:
    """The web tools: ``[web_fetch, web_search]``, each fresh.

    With ``model`` (e.g. ``agent.model``), as deputy's ``tools_web(chat)``, both are
    unbound provider-native requests (:class:`NativeWebFetch`, :class:`NativeWebSearch`):
    the agent that registers them uses the provider's own fetch and search where litellm
    says its model has them (``supports_url_context``, ``supports_web_search``) and the
    universal tools otherwise. A provider-native tool needs ``web=True``, a
    ``tool_allowlist`` entry and no ``can_use_tool`` callback when it is registered.

    Args:
        model: The model the tools are for; None for the universal tools. The agent
            registering the tools asks its own model, which is the one requests go to.
        use_native: False gives the universal tools even with ``model``, as deputy's
            ``tools_web(chat, use_native = FALSE)`` (every request checked here, no
            provider's extra cost).
        allow_private_network: Passed to :func:`tool_web_fetch` (True: no network guard).
        allowed_networks: Passed to :func:`tool_web_fetch`: non-public networks or hosts
            web_fetch may still reach.

    Examples:
        >>> [t.name for t in tools_web()]
        ['web_fetch', 'web_search']
        >>> [type(t).__name__ for t in tools_web("openai/gpt-4o-search-preview")]
        ['NativeWebFetch', 'NativeWebSearch']
        >>> type(tools_web("openai/gpt-4o-search-preview", use_native=False)[1]).__name__
        'Tool'
    """
    if not isinstance(use_native, bool):
        raise TypeError(f"use_native must be True or False, not {use_native!r}")
    if model is not None and use_native:
        fetch = NativeWebFetch(
            allow_private_network=allow_private_network, allowed_networks=tuple(allowed_networks)
        )
        return [fetch, NativeWebSearch()]
    return [
        tool_web_fetch(
            allow_private_network=allow_private_network, allowed_networks=allowed_networks
        ),
        tool_web_search(),
    ]
