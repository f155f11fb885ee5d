"""web_fetch against a local HTTP server, web_search with injected backends, tools_web."""

from __future__ import annotations

import asyncio
import socket
import sys
import threading
import time
import types
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from deputy_shiny import Agent
from deputy_shiny.errors import ToolArgumentsError, ToolInvocationError
from deputy_shiny.models import ChatModel, supports_native_web_search
from deputy_shiny.permissions import Permissions
from deputy_shiny.testing import ScriptedModel, ScriptedReply, ScriptedToolCall
from deputy_shiny.tools import Tool, tool_metadata
from deputy_shiny.tools.web import (
    NativeWebFetch,
    NativeWebSearch,
    bind_native_web_search,
    ddgs_search,
    tool_web_fetch,
    tool_web_search,
    tools_web,
)

PAGE = b"""<!doctype html>
<html><head><title>Local Test Page</title>
<style>body { color: red; }</style>
<script>var secret = "SCRIPT-CONTENT";</script>
</head>
<body>
<h1>Welcome</h1>
<p>Some <b>bold</b> text and a <a href="/plain.txt">relative link</a>.</p>
<ul><li>first item</li><li>second item</li></ul>
<noscript>NOSCRIPT-CONTENT</noscript>
<img src="/image.png" alt="an image">
</body></html>"""

LONG_HTML = (
    b"<html><head><title>Long</title></head><body>"
    + b"".join(b"<p>paragraph %d lorem ipsum dolor sit amet</p>" % i for i in range(2000))
    + b"</body></html>"
)

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4


class _Handler(BaseHTTPRequestHandler):
    stop: threading.Event  # set on the server class in the fixture

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass

    def _send(self, status: int, body: bytes, content_type: str | None, **headers: str) -> None:
        self.send_response(status)
        if content_type is not None:
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in headers.items():
            self.send_header(key.replace("_", "-"), value)
        self.end_headers()
        self.wfile.write(body)

    def _redirect(self, location: str) -> None:
        self.send_response(302)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        path = self.path
        try:
            if path == "/page.html":
                self._send(200, PAGE, "text/html; charset=utf-8")
            elif path == "/long.html":
                self._send(200, LONG_HTML, "text/html")
            elif path == "/plain.txt":
                self._send(200, b"Just plain text.\nSecond line.", "text/plain")
            elif path == "/data.json":
                self._send(200, b'{"answer": 42}', "application/json")
            elif path == "/latin1.txt":
                self._send(200, "café crème".encode("latin-1"), "text/plain; charset=iso-8859-1")
            elif path == "/untyped":
                self._send(200, b"<html><title>Sniffed</title><p>hello</p></html>", None)
            elif path == "/untyped-binary":
                self._send(200, b"\x00\x01\x02binary", "application/octet-stream")
            elif path == "/image.png":
                self._send(200, PNG, "image/png")
            elif path == "/doc.pdf":
                self._send(200, b"%PDF-1.4 ...", "application/pdf")
            elif path == "/missing":
                self._send(404, b"nope", "text/plain")
            elif path == "/boom":
                self._send(500, b"server broke", "text/plain")
            elif path == "/redirect-ok":
                self._redirect("/plain.txt")
            elif path == "/redirect-twice":
                self._redirect("/redirect-ok")
            elif path == "/redirect-ftp":
                self._redirect("ftp://127.0.0.1/secret.txt")
            elif path == "/redirect-file":
                self._redirect("file:///etc/passwd")
            elif path == "/loop":
                self._redirect("/loop")
            elif path == "/huge":
                # An endless body: only a cap enforced while streaming can stop it.
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                chunk = b"x" * 65536
                for _ in range(16384):  # 1 GiB at most
                    if self.stop.is_set():
                        break
                    self.wfile.write(chunk)
            elif path == "/slow":
                # Headers at once, then one byte every 50 ms: each read is quick, the page is not.
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                while not self.stop.wait(0.05):
                    self.wfile.write(b".")
                    self.wfile.flush()
            else:
                self._send(404, b"unknown path", "text/plain")
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client stopped reading, as it should


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    stop = threading.Event()
    handler = type("Handler", (_Handler,), {"stop": stop})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    thread = threading.Thread(
        target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        stop.set()
        httpd.shutdown()
        httpd.server_close()


# The listeners here are on loopback, which web_fetch refuses unless the app allows it
# (tests/test_web_ssrf.py covers the guard itself).
LOCAL_LISTENERS = ("127.0.0.0/8",)


def local_web_fetch(**kwargs: Any) -> Tool:
    """web_fetch allowed to reach the loopback listeners of these tests."""
    return tool_web_fetch(allowed_networks=LOCAL_LISTENERS, **kwargs)


async def fetch(url: str, **arguments: Any) -> str:
    t = local_web_fetch(timeout=5)
    return str(await t.invoke(t.parse_arguments({"url": url, **arguments})))


async def fetch_error(t: Tool, url: str) -> str:
    with pytest.raises(ToolInvocationError) as info:
        await t.invoke(t.parse_arguments({"url": url}))
    return str(info.value)


# ------------------------------------------------------------------ web_fetch: content


async def test_html_becomes_markdown_without_scripts_or_styles(server: str) -> None:
    out = await fetch(f"{server}/page.html")
    head, _, body = out.partition("\n\n")
    assert head.splitlines() == [
        "Title: Local Test Page",
        f"URL: {server}/page.html",
        "Content-Type: text/html",
    ]
    assert "# Welcome" in body
    assert "**bold**" in body
    assert f"[relative link]({server}/plain.txt)" in body  # links made absolute
    assert "- first item" in body
    for hidden in ("SCRIPT-CONTENT", "color: red", "NOSCRIPT-CONTENT", "image.png"):
        assert hidden not in out


async def test_text_json_and_charsets_come_back_as_is(server: str) -> None:
    plain = await fetch(f"{server}/plain.txt")
    assert plain.endswith("\n\nJust plain text.\nSecond line.")
    assert "Title:" not in plain
    assert '{"answer": 42}' in await fetch(f"{server}/data.json")
    assert "café crème" in await fetch(f"{server}/latin1.txt")


async def test_untyped_bodies_are_sniffed(server: str) -> None:
    out = await fetch(f"{server}/untyped")
    assert "Title: Sniffed" in out and "hello" in out
    message = await fetch_error(local_web_fetch(), f"{server}/untyped-binary")
    assert "text only" in message


async def test_content_is_truncated_with_a_note(server: str) -> None:
    out = await fetch(f"{server}/long.html", max_chars=500)
    content = out.split("\n\n", 1)[1]
    assert "paragraph 0 lorem" in content
    assert "paragraph 1999" not in content
    assert "[Content truncated: showing the first 500 of" in out
    assert "larger max_chars" in out
    short = await fetch(f"{server}/plain.txt", max_chars=5)
    assert "Just\n\n[Content truncated" in short


async def test_redirects_are_followed_and_the_final_url_reported(server: str) -> None:
    out = await fetch(f"{server}/redirect-twice")
    assert f"URL: {server}/plain.txt" in out
    assert "Just plain text." in out


# ------------------------------------------------------------------ web_fetch: refusals


@pytest.mark.parametrize(
    "url", ["ftp://127.0.0.1/x", "file:///etc/passwd", "javascript:alert(1)", "example.com/page"]
)
async def test_only_http_and_https_urls_are_fetched(url: str) -> None:
    message = await fetch_error(tool_web_fetch(), url)
    assert "only http:// and https://" in message


@pytest.mark.parametrize("path", ["/redirect-ftp", "/redirect-file"])
async def test_each_redirect_hop_must_stay_on_http(server: str, path: str) -> None:
    message = await fetch_error(local_web_fetch(), f"{server}{path}")
    assert "only http:// and https://" in message
    assert "redirected from" in message


async def test_redirect_loops_stop(server: str) -> None:
    message = await fetch_error(local_web_fetch(), f"{server}/loop")
    assert "stopped after 10 redirects" in message


@pytest.mark.parametrize(
    ("path", "media_type"), [("/image.png", "image/png"), ("/doc.pdf", "application/pdf")]
)
async def test_binary_types_are_refused(server: str, path: str, media_type: str) -> None:
    message = await fetch_error(local_web_fetch(), f"{server}{path}")
    assert f"is {media_type}" in message and "text only" in message


@pytest.mark.parametrize(("path", "status"), [("/missing", "HTTP 404 Not Found"), ("/boom", "500")])
async def test_http_errors_are_clean(server: str, path: str, status: str) -> None:
    message = await fetch_error(local_web_fetch(), f"{server}{path}")
    assert status in message and path in message


# ------------------------------------------------------------------ web_fetch: limits, failures


async def test_body_size_is_capped_while_streaming(server: str) -> None:
    t = local_web_fetch(timeout=5, max_bytes=200_000)
    started = time.monotonic()
    out = str(await t.invoke(t.parse_arguments({"url": f"{server}/huge", "max_chars": 200_000})))
    assert time.monotonic() - started < 3
    assert "only the first 200,000 were read" in out
    assert out.count("x") >= 200_000 - 10


async def test_a_slow_page_times_out(server: str) -> None:
    t = local_web_fetch(timeout=0.4)
    started = time.monotonic()
    message = await fetch_error(t, f"{server}/slow")
    assert time.monotonic() - started < 2
    assert "timed out after 0.4 s" in message


async def test_connection_refused_is_clean() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    message = await fetch_error(local_web_fetch(timeout=2), f"http://127.0.0.1:{port}/")
    assert f"connection refused by 127.0.0.1:{port}" in message


async def test_dns_failure_is_clean() -> None:
    async def no_such_name(host: str, port: int) -> list[str]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    t = tool_web_fetch(resolver=no_such_name)
    message = await fetch_error(t, "https://no-such-host.invalid/")
    assert "could not resolve host 'no-such-host.invalid'" in message


async def test_dns_failure_inside_a_transport_is_clean() -> None:
    def no_dns(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("[Errno -2] Name or service not known", request=request)

    # No guard: the app's transport is the first to look the name up.
    t = tool_web_fetch(transport=httpx.MockTransport(no_dns), allow_private_network=True)
    message = await fetch_error(t, "https://no-such-host.invalid/")
    assert "could not resolve host 'no-such-host.invalid'" in message


def test_arguments_are_validated() -> None:
    t = tool_web_fetch()
    with pytest.raises(ToolArgumentsError):
        t.parse_arguments({"url": "https://example.org", "max_chars": 0})
    with pytest.raises(ToolArgumentsError):
        t.parse_arguments({})
    with pytest.raises(ValueError, match="timeout"):
        tool_web_fetch(timeout=0)


def test_annotations_match_the_contract() -> None:
    fetch_meta = tool_metadata(tool_web_fetch())
    search_meta = tool_metadata(tool_web_search(backend=lambda q, n: []))
    assert fetch_meta["annotations"] == {
        "read_only_hint": True,
        "destructive_hint": False,
        "open_world_hint": True,
        "idempotent_hint": True,
    }
    assert search_meta["annotations"] == {
        "read_only_hint": True,
        "destructive_hint": False,
        "open_world_hint": True,
        "idempotent_hint": False,
    }
    assert fetch_meta["source"] == {"type": "package", "package": "deputy_shiny"}
    assert (fetch_meta["name"], search_meta["name"]) == ("web_fetch", "web_search")


async def test_web_fetch_through_an_agent(server: str) -> None:
    url = f"{server}/page.html"
    model = ScriptedModel(
        [
            ScriptedReply(tool_calls=[ScriptedToolCall("web_fetch", {"url": url}, id="call_1")]),
            "The page welcomes you.",
        ]
    )
    agent = Agent(model, tools=[local_web_fetch(timeout=5)], permissions=Permissions(web=True))
    assert await agent.chat_async("What does the page say?") == "The page welcomes you."
    tool_message = model.requests[1]["messages"][-1]
    assert tool_message["role"] == "tool" and tool_message["tool_call_id"] == "call_1"
    assert "Title: Local Test Page" in tool_message["content"]
    assert "# Welcome" in tool_message["content"]


# ------------------------------------------------------------------ web_search


HITS = [
    {"title": f"Result {i}", "url": f"https://example.org/{i}", "snippet": f"snippet {i}"}
    for i in range(1, 9)
]


async def search(t: Tool, **arguments: Any) -> str:
    return str(await t.invoke(t.parse_arguments(arguments)))


async def test_sync_backend_gets_query_and_max_results() -> None:
    calls: list[tuple[str, int, str]] = []

    def backend(query: str, max_results: int) -> list[dict[str, str]]:
        calls.append((query, max_results, threading.current_thread().name))
        return HITS

    out = await search(tool_web_search(backend=backend), query="  deputy agents ", max_results=3)
    assert calls[0][:2] == ("deputy agents", 3)
    assert calls[0][2] != threading.main_thread().name  # ran in a worker thread
    assert out.splitlines()[:4] == [
        "Search results for 'deputy agents':",
        "",
        "1. Result 1",
        "   URL: https://example.org/1",
    ]
    assert "3. Result 3" in out and "Result 4" not in out  # capped at max_results


async def test_async_backend_and_result_aliases() -> None:
    async def backend(query: str, max_results: int) -> list[dict[str, str]]:
        await asyncio.sleep(0)
        return [{"title": "T", "href": "https://a.example", "body": "multi\n  line   body"}]

    out = await search(tool_web_search(backend=backend), query="q")
    assert "1. T\n   URL: https://a.example\n   multi line body" in out


async def test_default_max_results_is_five() -> None:
    seen: list[int] = []

    def backend(query: str, max_results: int) -> list[dict[str, str]]:
        seen.append(max_results)
        return HITS

    out = await search(tool_web_search(backend=backend), query="q")
    assert seen == [5] and "5. Result 5" in out and "6. Result 6" not in out


async def test_no_results_and_empty_query() -> None:
    t = tool_web_search(backend=lambda q, n: [])
    assert await search(t, query="nothing") == "No results found for 'nothing'."
    with pytest.raises(ToolInvocationError, match="empty"):
        await search(t, query="   ")


async def test_backend_failures_are_clean_errors() -> None:
    def broken(query: str, max_results: int) -> list[dict[str, str]]:
        raise RuntimeError("rate limited")

    with pytest.raises(ToolInvocationError, match="web_search failed: RuntimeError: rate limited"):
        await search(tool_web_search(backend=broken), query="q")

    def returns_text(query: str, max_results: int) -> Any:
        return "oops"

    def returns_ints(query: str, max_results: int) -> Any:
        return [1, 2]

    with pytest.raises(ToolInvocationError, match="not a list"):
        await search(tool_web_search(backend=returns_text), query="q")
    with pytest.raises(ToolInvocationError, match="not a dict"):
        await search(tool_web_search(backend=returns_ints), query="q")


def test_search_arguments_are_validated() -> None:
    t = tool_web_search(backend=lambda q, n: [])
    with pytest.raises(ToolArgumentsError):
        t.parse_arguments({"query": "q", "max_results": 0})
    with pytest.raises(ToolArgumentsError):
        t.parse_arguments({"query": "q", "max_results": 21})


async def test_missing_ddgs_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ddgs", None)  # import ddgs -> ImportError
    with pytest.raises(ToolInvocationError, match=r"pip install 'deputy_shiny\[web\]'"):
        await search(tool_web_search(), query="q")


def test_ddgs_backend_maps_results(monkeypatch: pytest.MonkeyPatch) -> None:
    """The default backend, with a fake ddgs module (no network)."""
    calls: list[tuple[str, dict[str, Any]]] = []

    class FakeDDGSException(Exception):
        pass

    class FakeDDGS:
        def __init__(self, timeout: int = 5) -> None:
            pass

        def text(self, query: str, **kwargs: Any) -> list[dict[str, str]]:
            calls.append((query, kwargs))
            if query == "empty":
                raise FakeDDGSException("No results found.")
            return [{"title": "Hit", "href": "https://hit.example", "body": "Body"}]

    fake = types.ModuleType("ddgs")
    fake.DDGS = FakeDDGS  # type: ignore[attr-defined]
    fake_exceptions = types.ModuleType("ddgs.exceptions")
    fake_exceptions.DDGSException = FakeDDGSException  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "ddgs", fake)
    monkeypatch.setitem(sys.modules, "ddgs.exceptions", fake_exceptions)
    assert ddgs_search("python", 3) == [
        {"title": "Hit", "url": "https://hit.example", "snippet": "Body"}
    ]
    assert calls[0] == ("python", {"max_results": 3, "backend": "duckduckgo"})
    assert ddgs_search("empty", 3) == []


# ------------------------------------------------------------------ tools_web


def test_tools_web_returns_fresh_universal_tools() -> None:
    first, second = tools_web(), tools_web()
    assert [t.name for t in first] == ["web_fetch", "web_search"]
    assert all(isinstance(t, Tool) for t in first)
    assert first[0] is not second[0] and first[1] is not second[1]


def test_tools_web_uses_native_search_when_the_model_supports_it() -> None:
    tools = tools_web("openai/gpt-4o-search-preview")
    # web_fetch is a request too: this model does not read URLs itself, so the agent
    # registers the universal web_fetch in its place
    assert isinstance(tools[0], NativeWebFetch) and not tools[0].bound
    request = tools[1]
    assert isinstance(request, NativeWebSearch) and not request.bound  # the agent binds it
    model = ChatModel(model="openai/gpt-4o-search-preview")
    assert supports_native_web_search(model)  # the model's answer, not the tool's
    native = bind_native_web_search(
        request, supported=True, provider=model.provider, model=model.model
    )
    assert isinstance(native, NativeWebSearch)
    assert (native.name, native.provider, native.model) == (
        "web_search",
        "openai",
        "openai/gpt-4o-search-preview",
    )
    assert native.request_kwargs() == {"web_search_options": {"search_context_size": "medium"}}
    assert native.annotations.open_world_hint is True
    with pytest.raises(ValueError):  # frozen
        native.provider = "x"  # type: ignore[misc]
    # An agent on that model registers it bound to its own model.
    agent = Agent(model, permissions=Permissions(web=True, tool_allowlist=("web_search",)))
    agent.register_tools(tools_web(agent.model))
    registered = agent.get_tools()["web_search"]
    assert isinstance(registered, NativeWebSearch) and registered.model == model.model


def test_tools_web_falls_back_for_models_without_native_search() -> None:
    for model in ("openai/gpt-4o-mini", ScriptedModel(["x"])):
        agent = Agent(model, permissions=Permissions(web=True))
        assert not supports_native_web_search(agent.model)
        agent.register_tools(tools_web(agent.model))
        tools = agent.get_tools()
        assert [type(t) for t in tools.values()] == [Tool, Tool]
        assert sorted(tools) == ["web_fetch", "web_search"]
    fallback = bind_native_web_search(
        NativeWebSearch(), supported=False, provider="openai", model="x"
    )
    assert isinstance(fallback, Tool) and fallback.name == "web_search"
