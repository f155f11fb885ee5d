"""web_fetch does not reach the server's own network (issue 12: the SSRF guard).

Every case runs through the engine: a scripted model asks for ``web_fetch``, the agent
runs it, and the test reads the ``tool_end`` event. Local HTTP listeners count the
connections and requests they get:

- ``own`` on 127.0.0.1 stands for a service on the server's loopback (refused),
- ``public`` on 127.0.0.2 stands for the internet: the tools under test declare it
  allowed with ``allowed_networks=("127.0.0.2/32",)``, so nothing leaves the machine,
- ``other`` on 127.0.0.3, and ``own6`` on ::1 when the machine has IPv6.

All listen on the same port, so a host name that resolves to a different address is
the only thing that changes where a request lands (which is what DNS rebinding needs).
Destinations that no local listener can stand for (10/8, 169.254.169.254, ...) are
fetched through a counting mock transport: the guard checks before it hands a request
to any transport, so a broken guard shows up as a call, never as a real connection.
"""

from __future__ import annotations

import datetime
import ipaddress
import socket
import ssl
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from deputy_shiny import Agent
from deputy_shiny.events import ToolEndEvent
from deputy_shiny.permissions import Permissions
from deputy_shiny.testing import FunctionModel, ScriptedModel, ScriptedReply, ScriptedToolCall
from deputy_shiny.tools import Tool
from deputy_shiny.tools._net_guard import (
    AddressRefused,
    GuardedTransport,
    NetworkPolicy,
    address_rule,
    normalize_host,
)
from deputy_shiny.tools.web import tool_web_fetch, tools_web

from .helpers import collect

PUBLIC = ("127.0.0.2/32",)  # the listener that stands for the internet


# --------------------------------------------------------------------------- listeners


@dataclass
class Listener:
    """A local HTTP server that counts what reaches it."""

    host: str
    server: ThreadingHTTPServer
    connections: int = 0
    requests: list[tuple[str, str]] = field(default_factory=list)  # (path, Host header)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    @property
    def hits(self) -> int:
        return self.connections + len(self.requests)

    def url(self, path: str = "/") -> str:
        shown = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{shown}:{self.port}{path}"

    def reset(self) -> None:
        with self.lock:
            self.connections = 0
            self.requests.clear()


class _Handler(BaseHTTPRequestHandler):
    listener: Listener

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        with self.listener.lock:
            self.listener.requests.append((self.path, self.headers.get("Host", "")))
        parts = urlsplit(self.path)
        if parts.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", parse_qs(parts.query)["to"][0])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = f"page {parts.path} served by {self.listener.host}".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def _serve(
    host: str,
    port: int,
    family: socket.AddressFamily = socket.AF_INET,
    tls: ssl.SSLContext | None = None,
) -> Listener:
    listener: Listener

    class Server(ThreadingHTTPServer):
        address_family = family
        daemon_threads = True

        def process_request(self, request: Any, client_address: Any) -> None:
            with listener.lock:
                listener.connections += 1
            super().process_request(request, client_address)

    handler = type("Handler", (_Handler,), {})
    server = Server((host, port), handler)
    listener = Listener(host=host, server=server)
    handler.listener = listener  # type: ignore[attr-defined]
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    ).start()
    return listener


@dataclass
class Net:
    own: Listener
    public: Listener
    other: Listener
    own6: Listener | None

    @property
    def port(self) -> int:
        return self.public.port

    def all(self) -> list[Listener]:
        return [x for x in (self.own, self.public, self.other, self.own6) if x is not None]


@pytest.fixture(scope="module")
def net() -> Iterator[Net]:
    started: list[Listener] = []
    for _ in range(20):  # find a port free on every address
        for listener in started:
            listener.server.shutdown()
            listener.server.server_close()
        started = []
        try:
            public = _serve("127.0.0.2", 0)
            started.append(public)
            started.append(_serve("127.0.0.1", public.port))
            started.append(_serve("127.0.0.3", public.port))
        except OSError:
            continue
        break
    else:
        raise RuntimeError("could not bind 127.0.0.1, .2 and .3 on one port")
    own6: Listener | None = None
    try:
        own6 = _serve("::1", started[0].port, socket.AF_INET6)
        started.append(own6)
    except OSError:
        own6 = None
    try:
        yield Net(own=started[1], public=started[0], other=started[2], own6=own6)
    finally:
        for listener in started:
            listener.server.shutdown()
            listener.server.server_close()


@pytest.fixture(autouse=True)
def _fresh_counts(request: pytest.FixtureRequest) -> None:
    if "net" in request.fixturenames:
        for listener in request.getfixturevalue("net").all():
            listener.reset()


def static_resolver(table: dict[str, Sequence[str]]) -> Callable[[str, int], Any]:
    """An injectable resolver that answers from ``table`` (and fails for other names)."""

    async def resolve(host: str, port: int) -> list[str]:
        if host not in table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return list(table[host])

    return resolve


class CountingTransport(httpx.AsyncBaseTransport):
    """Stands in for the network: counts what it is handed and answers 200."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.calls.append(str(request.url))
        return httpx.Response(200, text="reached", headers={"Content-Type": "text/plain"})


# --------------------------------------------------------------------------- the engine


async def fetch_through_agent(url: str, **tool_options: Any) -> ToolEndEvent:
    """Run an agent whose model calls web_fetch(url) once; return the tool_end event."""
    model = ScriptedModel(
        [
            ScriptedReply(tool_calls=[ScriptedToolCall("web_fetch", {"url": url}, id="c1")]),
            "done",
        ]
    )
    tool = tool_web_fetch(timeout=5, **tool_options)
    agent = Agent(model, tools=[tool], permissions=Permissions(web=True))
    events = await collect(agent.run(f"Fetch {url}"))
    ends = [e for e in events if isinstance(e, ToolEndEvent)]
    assert len(ends) == 1, [e.type for e in events]
    sent_back = model.requests[1]["messages"][-1]
    assert sent_back["role"] == "tool" and sent_back["content"] == ends[0].output
    return ends[0]


def assert_refused(end: ToolEndEvent, rule: str) -> None:
    assert end.is_error, end.output
    assert end.output.startswith("web_fetch refused "), end.output
    assert rule in end.output, end.output
    assert "server's own network" in end.output
    assert "allowed_networks" in end.output


def assert_untouched(*listeners: Listener | None) -> None:
    for listener in listeners:
        if listener is not None:
            assert listener.hits == 0, (listener.host, listener.connections, listener.requests)


async def assert_public_still_works(net: Net, **tool_options: Any) -> None:
    """The same configuration fetches the allowed listener normally."""
    before = len(net.public.requests)
    end = await fetch_through_agent(net.public.url("/ok"), **tool_options)
    assert not end.is_error, end.output
    assert "page /ok served by 127.0.0.2" in end.output
    assert len(net.public.requests) == before + 1


# --------------------------------------------------------------------------- loopback spellings


@pytest.mark.parametrize(
    ("host", "rule"),
    [
        ("127.0.0.1", "127.0.0.1 is a loopback address"),
        ("2130706433", "2130706433 is 127.0.0.1, a loopback address"),  # decimal
        ("0x7f.1", "0x7f.1 is 127.0.0.1, a loopback address"),  # hex, short form
        ("0x7f000001", "is 127.0.0.1, a loopback address"),  # one hex number
        ("0177.0.0.1", "0177.0.0.1 is 127.0.0.1, a loopback address"),  # octal
        ("017700000001", "is 127.0.0.1, a loopback address"),  # one octal number
        ("127.1", "127.1 is 127.0.0.1, a loopback address"),  # short dotted
        ("127.0.0.1.", "is 127.0.0.1, a loopback address"),  # trailing dot
        ("localhost", "localhost resolves to 127.0.0.1, a loopback address"),
        ("localhost.", "resolves to 127.0.0.1, a loopback address"),
        ("LocalHost", "resolves to 127.0.0.1, a loopback address"),
        ("admin.localhost", "resolves to 127.0.0.1, a loopback address"),
        ("example.com@127.0.0.1", "127.0.0.1 is a loopback address"),  # userinfo trick
        ("user:pw@0x7f.1", "is 127.0.0.1, a loopback address"),
        ("0.0.0.0", "0.0.0.0 is an unspecified address"),  # reaches local services
        ("0", "is 0.0.0.0, an unspecified address"),
    ],
)
async def test_loopback_in_every_spelling_is_refused(net: Net, host: str, rule: str) -> None:
    end = await fetch_through_agent(f"http://{host}:{net.port}/admin", allowed_networks=PUBLIC)
    assert_refused(end, rule)
    assert_untouched(net.own, net.public, net.other, net.own6)
    await assert_public_still_works(net, allowed_networks=PUBLIC)


@pytest.mark.parametrize(
    ("host", "rule"),
    [
        ("[::1]", "::1 is a loopback address"),
        ("[0:0:0:0:0:0:0:1]", "is ::1, a loopback address"),
        ("[::]", ":: is an unspecified address"),
        ("[::ffff:127.0.0.1]", "IPv4-mapped IPv6 address of 127.0.0.1, a loopback address"),
        ("[::ffff:7f00:1]", "IPv4-mapped IPv6 address of 127.0.0.1, a loopback address"),
        ("[64:ff9b::127.0.0.1]", "NAT64 IPv6 address of 127.0.0.1, a loopback address"),
        ("[64:ff9b::a9fe:a9fe]", "NAT64 IPv6 address of 169.254.169.254, a link-local"),
        ("[2002:7f00:1::]", "6to4 IPv6 address of 127.0.0.1, a loopback address"),
        ("[::ffff:10.0.0.1]", "IPv4-mapped IPv6 address of 10.0.0.1, a private address"),
    ],
)
async def test_ipv6_loopback_and_mapped_forms_are_refused(net: Net, host: str, rule: str) -> None:
    end = await fetch_through_agent(f"http://{host}:{net.port}/admin", allowed_networks=PUBLIC)
    assert_refused(end, rule)
    assert_untouched(net.own, net.public, net.other, net.own6)
    await assert_public_still_works(net, allowed_networks=PUBLIC)


async def test_the_ipv6_listener_is_reachable_only_when_allowed(net: Net) -> None:
    assert net.own6 is not None, "this machine has no IPv6 loopback (::1) to listen on"
    allowed = await fetch_through_agent(net.own6.url("/v6"), allowed_networks=("::1/128",))
    assert not allowed.is_error and "served by ::1" in allowed.output
    assert len(net.own6.requests) == 1
    net.own6.reset()
    refused = await fetch_through_agent(net.own6.url("/v6"), allowed_networks=PUBLIC)
    assert_refused(refused, "::1 is a loopback address")
    assert_untouched(net.own6)


# ------------------------------------------------------------------ names that resolve inward


async def test_a_public_looking_name_that_resolves_to_loopback_is_refused(net: Net) -> None:
    resolver = static_resolver({"www.example.com": ["127.0.0.1"]})
    url = f"http://www.example.com:{net.port}/admin"
    end = await fetch_through_agent(url, allowed_networks=PUBLIC, resolver=resolver)
    assert_refused(end, "www.example.com resolves to 127.0.0.1, a loopback address")
    assert_untouched(net.own, net.public, net.other, net.own6)
    await assert_public_still_works(net, allowed_networks=PUBLIC)


async def test_one_inward_address_among_several_is_enough_to_refuse(net: Net) -> None:
    resolver = static_resolver({"mixed.example": ["127.0.0.2", "127.0.0.1"]})
    url = f"http://mixed.example:{net.port}/admin"
    end = await fetch_through_agent(url, allowed_networks=PUBLIC, resolver=resolver)
    assert_refused(end, "mixed.example resolves to 127.0.0.1, a loopback address")
    assert_untouched(net.own, net.public)


async def test_a_name_resolving_to_a_mapped_address_is_refused(net: Net) -> None:
    resolver = static_resolver({"v6.example": ["::ffff:127.0.0.1"]})
    end = await fetch_through_agent(
        f"http://v6.example:{net.port}/", allowed_networks=PUBLIC, resolver=resolver
    )
    assert_refused(end, "IPv4-mapped IPv6 address of 127.0.0.1, a loopback address")
    assert_untouched(net.own, net.public, net.own6)


async def test_an_allowed_name_is_fetched_at_the_checked_address_with_its_host_header(
    net: Net,
) -> None:
    resolver = static_resolver({"www.example.com": ["127.0.0.2"]})
    end = await fetch_through_agent(
        f"http://www.example.com:{net.port}/hello", allowed_networks=PUBLIC, resolver=resolver
    )
    assert not end.is_error, end.output
    assert f"URL: http://www.example.com:{net.port}/hello" in end.output
    assert net.public.requests == [("/hello", f"www.example.com:{net.port}")]
    assert_untouched(net.own, net.other)


# --------------------------------------------------------------------------- redirects


@pytest.mark.parametrize(
    ("target", "rule"),
    [
        ("http://127.0.0.1:{port}/admin", "127.0.0.1 is a loopback address"),
        ("http://2130706433:{port}/admin", "2130706433 is 127.0.0.1, a loopback address"),
        ("http://localhost.:{port}/admin", "resolves to 127.0.0.1, a loopback address"),
        ("http://[::ffff:127.0.0.1]:{port}/admin", "IPv4-mapped IPv6 address of 127.0.0.1"),
        ("http://inward.example:{port}/admin", "inward.example resolves to 127.0.0.1"),
    ],
)
async def test_a_redirect_from_an_allowed_listener_to_loopback_is_refused(
    net: Net, target: str, rule: str
) -> None:
    start = net.public.url("/redirect?to=" + target.format(port=net.port))
    resolver = static_resolver({"inward.example": ["127.0.0.1"]})
    end = await fetch_through_agent(start, allowed_networks=PUBLIC, resolver=resolver)
    assert_refused(end, rule)
    assert f"(redirected from {start})" in end.output
    assert len(net.public.requests) == 1  # the first hop, and nothing after it
    assert_untouched(net.own, net.other, net.own6)


async def test_a_redirect_between_allowed_addresses_is_followed(net: Net) -> None:
    resolver = static_resolver({"www.example.com": ["127.0.0.2"]})
    target = f"http://www.example.com:{net.port}/landing"
    end = await fetch_through_agent(
        net.public.url("/redirect?to=" + target), allowed_networks=PUBLIC, resolver=resolver
    )
    assert not end.is_error, end.output
    assert f"URL: {target}" in end.output
    assert [p for p, _ in net.public.requests][-1] == "/landing"
    assert_untouched(net.own, net.other)


# --------------------------------------------------------------------------- no rebinding


def rebinding_getaddrinfo(lookups: list[str]) -> Callable[..., Any]:
    """socket.getaddrinfo, except that rebind.example is 127.0.0.2 once, then 127.0.0.1."""
    real_getaddrinfo = socket.getaddrinfo

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else host  # anyio passes bytes
        if name == "rebind.example":
            lookups.append(name)
            host = "127.0.0.2" if len(lookups) == 1 else "127.0.0.1"
        elif name not in ("127.0.0.1", "127.0.0.2", "127.0.0.3", "::1"):
            raise socket.gaierror(socket.EAI_NONAME, "no lookups leave this test")
        return real_getaddrinfo(host, port, *args, **kwargs)

    return getaddrinfo


async def test_dns_rebinding_cannot_move_the_connection(
    net: Net, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The system resolver answers the allowed address first and loopback afterwards.

    The guard looks the name up once and connects to that address; a client that looked
    it up again to connect would land on the ``own`` listener (same port).
    """
    lookups: list[str] = []

    monkeypatch.setattr(socket, "getaddrinfo", rebinding_getaddrinfo(lookups))
    end = await fetch_through_agent(
        f"http://rebind.example:{net.port}/page", allowed_networks=PUBLIC
    )
    assert not end.is_error, end.output
    assert "page /page served by 127.0.0.2" in end.output
    assert lookups == ["rebind.example"]
    assert net.public.requests == [("/page", f"rebind.example:{net.port}")]
    assert_untouched(net.own)


async def test_rebinding_between_redirect_hops_is_caught(
    net: Net, monkeypatch: pytest.MonkeyPatch
) -> None:
    lookups: list[str] = []

    monkeypatch.setattr(socket, "getaddrinfo", rebinding_getaddrinfo(lookups))
    again = f"http://rebind.example:{net.port}/admin"
    end = await fetch_through_agent(
        f"http://rebind.example:{net.port}/redirect?to={again}", allowed_networks=PUBLIC
    )
    assert_refused(end, "rebind.example resolves to 127.0.0.1, a loopback address")
    assert len(lookups) == 2
    assert [p for p, _ in net.public.requests] == [f"/redirect?to={again}"]
    assert_untouched(net.own)


# --------------------------------------------------------------------------- opting out


async def test_allowed_networks_lets_exactly_one_range_through(net: Net) -> None:
    options = {"allowed_networks": ("127.0.0.2/32",)}
    assert not (await fetch_through_agent(net.public.url("/in"), **options)).is_error
    for listener in (net.own, net.other):
        end = await fetch_through_agent(listener.url("/out"), **options)
        assert_refused(end, f"{listener.host} is a loopback address")
    assert [p for p, _ in net.public.requests] == ["/in"]
    assert_untouched(net.own, net.other)


async def test_a_wider_range_lets_its_addresses_through(net: Net) -> None:
    options = {"allowed_networks": ("127.0.0.2/31",)}  # .2 and .3, not .1
    for listener in (net.public, net.other):
        end = await fetch_through_agent(listener.url("/in"), **options)
        assert not end.is_error, end.output
        assert len(listener.requests) == 1
    assert_refused(await fetch_through_agent(net.own.url("/x"), **options), "loopback")
    assert_untouched(net.own)


async def test_an_allowed_host_name_may_resolve_inward(net: Net) -> None:
    resolver = static_resolver(
        {
            "wiki.corp.test": ["127.0.0.1"],
            "api.corp.test": ["127.0.0.1"],
            "evil.test": ["127.0.0.1"],
        }
    )
    options: dict[str, Any] = {
        "allowed_networks": ("wiki.corp.test", "*.corp.test", *PUBLIC),
        "resolver": resolver,
    }
    for name in ("wiki.corp.test", "api.corp.test"):
        end = await fetch_through_agent(f"http://{name}:{net.port}/page", **options)
        assert not end.is_error, end.output
    assert net.own.requests == [
        ("/page", f"wiki.corp.test:{net.port}"),
        ("/page", f"api.corp.test:{net.port}"),
    ]
    net.own.reset()
    refused = await fetch_through_agent(f"http://evil.test:{net.port}/page", **options)
    assert_refused(refused, "evil.test resolves to 127.0.0.1")
    assert_untouched(net.own)


async def test_localhost_follows_the_allowed_loopback_family(net: Net) -> None:
    async def no_lookups(host: str, port: int) -> list[str]:
        raise AssertionError(f"localhost names are not looked up ({host})")

    url = f"http://localhost:{net.port}/lo"
    v4 = await fetch_through_agent(url, allowed_networks=("127.0.0.0/8",), resolver=no_lookups)
    assert not v4.is_error and "served by 127.0.0.1" in v4.output
    assert net.own.requests == [("/lo", f"localhost:{net.port}")]
    assert_untouched(net.public, net.other, net.own6)
    if net.own6 is not None:
        net.own.reset()
        v6 = await fetch_through_agent(url, allowed_networks=("::1",), resolver=no_lookups)
        assert not v6.is_error and "served by ::1" in v6.output
        assert len(net.own6.requests) == 1
        assert_untouched(net.own)


async def test_allow_private_network_turns_the_guard_off(net: Net) -> None:
    end = await fetch_through_agent(net.own.url("/admin"), allow_private_network=True)
    assert not end.is_error and "served by 127.0.0.1" in end.output
    assert len(net.own.requests) == 1


async def test_the_default_tool_refuses_every_local_listener(net: Net) -> None:
    for listener in net.all():
        end = await fetch_through_agent(listener.url("/"))
        assert_refused(end, "a loopback address")
    assert_untouched(*net.all())


# --------------------------------------------------------------------------- other networks


@pytest.mark.parametrize(
    ("url", "rule"),
    [
        ("http://169.254.169.254/latest/meta-data/", "169.254.169.254 is a link-local address"),
        ("http://[fd00:ec2::254]/latest/", "fd00:ec2::254 is a private address"),
        ("http://10.0.0.1/", "10.0.0.1 is a private address"),
        ("http://10.255.255.255:8080/", "10.255.255.255 is a private address"),
        ("http://172.16.0.1/", "172.16.0.1 is a private address"),
        ("http://172.31.255.254/", "172.31.255.254 is a private address"),
        ("http://192.168.1.1/", "192.168.1.1 is a private address"),
        ("http://100.64.0.1/", "100.64.0.1 is a private address"),
        ("http://[fc00::1]/", "fc00::1 is a private address"),
        ("http://[fe80::1]/", "fe80::1 is a link-local address"),
        ("http://[fe80::1%25eth0]/", "is fe80::1%eth0, a link-local address"),
        ("http://224.0.0.1/", "224.0.0.1 is a multicast address"),
        ("http://[ff02::1]/", "ff02::1 is a multicast address"),
        ("http://240.0.0.1/", "240.0.0.1 is a reserved address"),
        ("http://255.255.255.255/", "255.255.255.255 is a reserved address"),
        ("http://192.0.2.10/", "192.0.2.10 is a reserved address"),
        ("https://0xa9.0xfe.0xa9.0xfe/", "is 169.254.169.254, a link-local address"),
        ("http://metadata.google.internal/", "resolves to 169.254.169.254, a link-local"),
        ("http://intranet.example/", "intranet.example resolves to 192.168.0.7, a private"),
    ],
)
async def test_private_link_local_multicast_and_reserved_are_refused(url: str, rule: str) -> None:
    transport = CountingTransport()
    resolver = static_resolver(
        {
            "metadata.google.internal": ["169.254.169.254"],
            "intranet.example": ["93.184.216.34", "192.168.0.7"],
        }
    )
    end = await fetch_through_agent(url, transport=transport, resolver=resolver)
    assert_refused(end, rule)
    assert transport.calls == []
    # The same tool setup reaches a public address.
    ok = await fetch_through_agent("http://93.184.216.34/", transport=transport, resolver=resolver)
    assert not ok.is_error and "reached" in ok.output
    assert transport.calls == ["http://93.184.216.34/"]


async def test_an_app_transport_is_handed_only_checked_requests() -> None:
    transport = CountingTransport()
    resolver = static_resolver({"www.example.org": ["93.184.216.34"]})
    end = await fetch_through_agent(
        "http://www.example.org/x", transport=transport, resolver=resolver
    )
    assert not end.is_error
    assert transport.calls == ["http://www.example.org/x"]  # unchanged: it connects itself


async def test_a_function_model_sees_the_refusal() -> None:
    seen: list[str] = []

    def model(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        if messages[-1]["role"] == "tool":
            seen.append(messages[-1]["content"])
            return "I may not read that."
        return ScriptedReply(
            tool_calls=[ScriptedToolCall("web_fetch", {"url": "http://127.0.0.1:9/"})]
        )

    agent = Agent(FunctionModel(model), tools=[tool_web_fetch()], permissions=Permissions(web=True))
    assert await agent.chat_async("read it") == "I may not read that."
    assert seen and seen[0].startswith("web_fetch refused http://127.0.0.1:9/")


# ------------------------------------------------------------------ TLS: SNI and certificate


def _self_signed(tmp: Path, name: str) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp / "cert.pem", tmp / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


async def test_tls_uses_the_original_name_for_sni_and_the_certificate(tmp_path: Path) -> None:
    cert, key = _self_signed(tmp_path, "secure.test")
    server_names: list[str | None] = []
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(cert, key)

    def record_sni(sock: ssl.SSLObject, name: str | None, ctx: ssl.SSLContext) -> None:
        server_names.append(name)

    server_ctx.sni_callback = record_sni
    listener = _serve("127.0.0.2", 0, tls=server_ctx)
    try:
        client_ctx = ssl.create_default_context(cafile=str(cert))
        resolver = static_resolver({"secure.test": ["127.0.0.2"], "impostor.test": ["127.0.0.2"]})
        guard = GuardedTransport(
            NetworkPolicy.build(allowed_networks=PUBLIC), resolver=resolver, verify=client_ctx
        )
        async with httpx.AsyncClient(transport=guard) as client:
            response = await client.get(f"https://secure.test:{listener.port}/tls")
            assert response.status_code == 200
            assert response.text == "page /tls served by 127.0.0.2"
            assert server_names == ["secure.test"]
            assert listener.requests == [("/tls", f"secure.test:{listener.port}")]
            # Same address, another name: the certificate is checked against that name.
            with pytest.raises(httpx.ConnectError, match=r"CERTIFICATE_VERIFY_FAILED|match"):
                await client.get(f"https://impostor.test:{listener.port}/tls")
        assert len(listener.requests) == 1
    finally:
        listener.server.shutdown()
        listener.server.server_close()


# --------------------------------------------------------------------------- configuration, schema


def test_the_model_visible_schema_is_unchanged() -> None:
    plain = tool_web_fetch()
    configured = tool_web_fetch(
        allowed_networks=("10.20.0.0/16", "wiki.corp.example"),
        resolver=static_resolver({}),
    )
    opened = tool_web_fetch(allow_private_network=True)
    assert plain.parameters == configured.parameters == opened.parameters
    assert sorted(plain.parameters["properties"]) == ["max_chars", "url"]


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("10.20.0.0/33", "is not a valid network"),
        ("10.20.0.1/16", "has host bits set; did you mean 10.20.0.0/16?"),
        ("fd00::1/8", "did you mean fd00::/8?"),
        ("not a host!", "neither a network"),
        ("1.2.3", "neither a network"),
        (42, "is a int, not a network"),
    ],
)
def test_bad_allowed_networks_fail_at_tool_creation(entry: Any, message: str) -> None:
    with pytest.raises(ValueError, match="allowed_networks") as info:
        tool_web_fetch(allowed_networks=(entry,))
    assert message in str(info.value)


async def test_tools_web_passes_the_network_settings_on(net: Net) -> None:
    with pytest.raises(ValueError, match=r"did you mean 10\.0\.0\.0/8"):
        tools_web(allowed_networks=("10.0.0.1/8",))
    fetch = tools_web(allowed_networks=PUBLIC)[0]
    assert isinstance(fetch, Tool) and fetch.name == "web_fetch"
    agent = Agent(
        ScriptedModel(
            [
                ScriptedReply(
                    tool_calls=[ScriptedToolCall("web_fetch", {"url": net.own.url("/a")})]
                ),
                ScriptedReply(
                    tool_calls=[ScriptedToolCall("web_fetch", {"url": net.public.url("/b")})]
                ),
                "done",
            ]
        ),
        tools=[fetch],
        permissions=Permissions(web=True),
    )
    events = await collect(agent.run("fetch both"))
    refused, fetched = [e for e in events if isinstance(e, ToolEndEvent)]
    assert_refused(refused, "127.0.0.1 is a loopback address")
    assert not fetched.is_error and "served by 127.0.0.2" in fetched.output
    assert_untouched(net.own)
    assert [p for p, _ in net.public.requests] == ["/b"]


def test_a_single_string_is_not_taken_for_a_list() -> None:
    with pytest.raises(ValueError, match="not a single string"):
        tool_web_fetch(allowed_networks="10.0.0.0/8")


def test_the_policy_is_frozen_and_normalized() -> None:
    policy = NetworkPolicy.build(
        allowed_networks=(
            " 10.20.0.0/16 ",
            ipaddress.ip_network("fd00::/8"),
            ipaddress.ip_address("192.168.1.5"),
            "[::1]",
            "Wiki.Corp.Example.",
            "*.Intra.Example",
            "bücher.example",
            "10.20.0.0/16",
        )
    )
    assert policy.networks == (
        ipaddress.ip_network("10.20.0.0/16"),
        ipaddress.ip_network("fd00::/8"),
        ipaddress.ip_network("192.168.1.5/32"),
        ipaddress.ip_network("::1/128"),
    )
    assert policy.hosts == ("wiki.corp.example", "*.intra.example", "xn--bcher-kva.example")
    assert policy.allows_host("a.intra.example") and not policy.allows_host("intra.example")
    assert policy.allows_address(ipaddress.ip_address("::ffff:10.20.1.1"))
    assert not policy.allows_address(ipaddress.ip_address("10.21.0.1"))
    with pytest.raises(AttributeError):
        policy.allow_all = True  # type: ignore[misc]


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("2130706433", "127.0.0.1"),
        ("0x7f.1", "127.0.0.1"),
        ("0X7F.0.0.1", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"),
        ("127.1", "127.0.0.1"),
        ("10.1", "10.0.0.1"),
        ("[::ffff:127.0.0.1]", "::ffff:7f00:1"),
        ("localhost.", "localhost"),
        ("Example.COM..", "example.com"),
        ("0xdeadbeef.example", "0xdeadbeef.example"),
        ("1.2.3.4.5", "1.2.3.4.5"),
        ("08.1", "08.1"),
        ("face.cafe", "face.cafe"),
    ],
)
def test_normalize_host(host: str, expected: str) -> None:
    assert str(normalize_host(host)) == expected


@pytest.mark.parametrize(
    ("address", "rule"),
    [
        ("8.8.8.8", None),
        ("2606:4700:4700::1111", None),
        ("::ffff:8.8.8.8", None),
        ("64:ff9b::808:808", None),
        ("0.1.2.3", "an unspecified address"),
        ("198.18.0.1", "a reserved address (special-purpose, not globally routable)"),
        ("2001:db8::1", "a reserved address (special-purpose, not globally routable)"),
        ("fec0::1", "a private address"),
        ("::127.0.0.1", "a reserved address"),
    ],
)
def test_address_rules(address: str, rule: str | None) -> None:
    assert address_rule(ipaddress.ip_address(address)) == rule


async def test_the_guard_refuses_before_the_resolver_for_literals() -> None:
    calls: list[str] = []

    async def resolver(host: str, port: int) -> list[str]:
        calls.append(host)
        return ["127.0.0.1"]

    guard = GuardedTransport(NetworkPolicy(), resolver=resolver, transport=CountingTransport())
    async with httpx.AsyncClient(transport=guard) as client:
        with pytest.raises(AddressRefused) as info:
            await client.get("http://[::1]/")
        assert info.value.rule == "a loopback address"
        with pytest.raises(AddressRefused):
            await client.get("http://localhost/")
    assert calls == []
