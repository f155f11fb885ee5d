"""Keep URL fetches that a model chose off the server's own network (an SSRF guard).

(Imports httpx: import this module lazily, where a fetch is set up.)

A tool that fetches a URL the model picked must not become a way into the machine the
app runs on: its loopback services, the cloud metadata endpoint (169.254.169.254), the
private networks behind it. This module holds the address policy and an httpx transport
that enforces it:

- :func:`normalize_host` turns a URL host into an IP address when it is one, however it
  is spelled (``2130706433``, ``0x7f.1``, ``0177.0.0.1``, ``[::ffff:127.0.0.1]``), or
  into a lower-case name without a trailing dot (``localhost.`` -> ``localhost``).
- :func:`address_rule` names why an address is not public (loopback, private,
  link-local, multicast, reserved, unspecified), looking through IPv4-mapped, NAT64 and
  6to4 IPv6 forms to the IPv4 address inside.
- :class:`NetworkPolicy` is the frozen, validated exception list an app may configure.
- :class:`GuardedTransport` resolves each request's host (with an injectable async
  resolver), refuses it when any address is not allowed, and connects to the address it
  checked, with the original Host header and TLS server name, so a DNS answer that
  changes between the check and the connect (rebinding) cannot slip through. Every
  request goes through it, so every redirect hop is checked the same way.

Examples:
    >>> from ipaddress import ip_address
    >>> normalize_host("0x7f.1")
    IPv4Address('127.0.0.1')
    >>> address_rule(ip_address("10.1.2.3"))
    'a private address'
    >>> NetworkPolicy.build(allowed_networks=["10.20.0.0/16"]).allows_address(
    ...     ip_address("10.20.3.4")
    ... )
    True
"""

from __future__ import annotations

import asyncio
import re
import socket
import ssl
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from ipaddress import (
    IPv4Address,
    IPv4Network,
    IPv6Address,
    IPv6Network,
    ip_address,
    ip_network,
)
from typing import TypeAlias
from urllib.parse import unquote

import httpx

from ..errors import AddressRefused

__all__ = [
    "AddressRefused",
    "GuardedTransport",
    "IPAddress",
    "IPNetwork",
    "NetworkPolicy",
    "Resolver",
    "address_rule",
    "check_literal",
    "checked_addresses",
    "normalize_host",
    "system_resolver",
]

IPAddress: TypeAlias = IPv4Address | IPv6Address
IPNetwork: TypeAlias = IPv4Network | IPv6Network
Resolver: TypeAlias = Callable[[str, int], Awaitable[Sequence[str]]]
"""``await resolver(host, port) -> ["93.184.216.34", ...]``: the addresses of a name."""

_DEFAULT_PORTS = {"http": 80, "https": 443}

# Ranges that refusals call private (checked after loopback, link-local and multicast).
_V4_PRIVATE = tuple(
    ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10")
)
_V4_THIS_NETWORK = ip_network("0.0.0.0/8")
_V6_PRIVATE = (ip_network("fc00::/7"), ip_network("fec0::/10"))  # unique local, site-local
_NAT64 = (ip_network("64:ff9b::/96"), ip_network("64:ff9b:1::/48"))
# Something an IPv4 spelling may contain; inet_aton decides whether it is one.
_NUMERIC_V4 = re.compile(r"^[0-9a-fx.]+$")
# One DNS label (underscores are tolerated: real names carry them).
_LABEL = re.compile(r"^(?!-)[a-z0-9_-]{1,63}(?<!-)$")


# --------------------------------------------------------------------------- addresses


def normalize_host(host: str) -> IPAddress | str:
    """An IP address for any spelling of one, else the lower-case name without a final dot.

    Accepts what a URL's host may hold: brackets around IPv6, a ``%25``-escaped zone,
    the decimal, octal and hex IPv4 forms ``inet_aton`` understands (``2130706433``,
    ``017700000001``, ``0x7f.1``, ``127.1``) and trailing dots.

    Examples:
        >>> normalize_host("2130706433"), normalize_host("[::1]")
        (IPv4Address('127.0.0.1'), IPv6Address('::1'))
        >>> normalize_host("LocalHost.")
        'localhost'
    """
    text = host.strip().lower()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    text = unquote(text)  # "fe80::1%25eth0" -> "fe80::1%eth0"
    text = text.rstrip(".")
    try:
        return ip_address(text)
    except ValueError:
        pass
    if text and _NUMERIC_V4.match(text) and text[0].isdigit():
        try:
            return IPv4Address(socket.inet_aton(text))
        except OSError:
            pass
    return text


def _embedded_v4(address: IPv6Address) -> tuple[IPv4Address, str] | None:
    """The IPv4 address inside an IPv4-mapped, NAT64 or 6to4 IPv6 address, and its kind."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped, "an IPv4-mapped IPv6 address"
    if any(address in net for net in _NAT64):
        return IPv4Address(int(address) & 0xFFFFFFFF), "a NAT64 IPv6 address"
    if address.sixtofour is not None:
        return address.sixtofour, "a 6to4 IPv6 address"
    return None


def _plain_rule(address: IPAddress) -> str | None:
    if address.is_unspecified or (isinstance(address, IPv4Address) and address in _V4_THIS_NETWORK):
        return "an unspecified address"
    if address.is_loopback:
        return "a loopback address"
    if address.is_link_local:
        return "a link-local address"
    if address.is_multicast:
        return "a multicast address"
    private = _V4_PRIVATE if isinstance(address, IPv4Address) else _V6_PRIVATE
    if any(address in net for net in private):
        return "a private address"
    if address.is_reserved:
        return "a reserved address"
    if address.is_private or not address.is_global:
        return "a reserved address (special-purpose, not globally routable)"
    return None


def address_rule(address: IPAddress) -> str | None:
    """Why ``address`` is not a public address, or None when it is one.

    IPv4-mapped (``::ffff:0:0/96``), NAT64 (``64:ff9b::/96``) and 6to4 (``2002::/16``)
    IPv6 addresses are judged by the IPv4 address they carry.

    Examples:
        >>> from ipaddress import ip_address
        >>> address_rule(ip_address("169.254.169.254"))
        'a link-local address'
        >>> address_rule(ip_address("::ffff:127.0.0.1"))
        'an IPv4-mapped IPv6 address of 127.0.0.1, a loopback address'
        >>> address_rule(ip_address("93.184.216.34")) is None
        True
    """
    if isinstance(address, IPv6Address):
        embedded = _embedded_v4(address)
        if embedded is not None:
            inner, kind = embedded
            rule = _plain_rule(inner)
            return None if rule is None else f"{kind} of {inner}, {rule}"
    return _plain_rule(address)


# --------------------------------------------------------------------------- policy


def _host_entry(entry: str) -> str | None:
    """A validated allowed-host entry (``name`` or ``*.suffix``), or None if not one."""
    text = entry.strip().lower().rstrip(".")
    wildcard = text.startswith("*.")
    name = text[2:] if wildcard else text
    try:
        name = name.encode("idna").decode("ascii")
    except UnicodeError:
        return None
    labels = name.split(".")
    if not name or not all(_LABEL.match(label) for label in labels):
        return None
    return f"*.{name}" if wildcard else name


@dataclass(frozen=True)
class NetworkPolicy:
    """Which non-public destinations a fetching tool may still reach.

    Build it with :meth:`build`. Public addresses are always allowed; a non-public one
    only when it lies in one of ``networks``, or when the URL's host name is one of
    ``hosts`` (an exact name or ``*.suffix``). ``allow_all`` turns the guard off.

    Examples:
        >>> policy = NetworkPolicy.build(allowed_networks=("10.20.0.0/16", "wiki.corp.example"))
        >>> policy.networks, policy.hosts
        ((IPv4Network('10.20.0.0/16'),), ('wiki.corp.example',))
        >>> NetworkPolicy.build(allowed_networks=["10.20.0.1/16"])
        Traceback (most recent call last):
        ...
        ValueError: allowed_networks: '10.20.0.1/16' has host bits set; did you mean 10.20.0.0/16?
    """

    allow_all: bool = False
    networks: tuple[IPNetwork, ...] = ()
    hosts: tuple[str, ...] = ()

    @classmethod
    def build(
        cls,
        *,
        allow_private_network: bool = False,
        allowed_networks: Iterable[str | IPNetwork | IPAddress] = (),
    ) -> NetworkPolicy:
        """Validate the app's settings; a bad entry raises a ValueError that names it.

        ``allowed_networks`` holds networks in CIDR form (``"10.20.0.0/16"``), single
        addresses (``"10.20.0.5"``, ``"::1"``), ``ipaddress`` objects, or host names
        (``"wiki.corp.example"``, ``"*.corp.example"``).
        """
        if isinstance(allowed_networks, (str, bytes)):
            raise ValueError(
                "allowed_networks must be a list of networks or hosts, "
                f"e.g. ({allowed_networks!r},), not a single string"
            )
        networks: list[IPNetwork] = []
        hosts: list[str] = []
        for entry in allowed_networks:
            if isinstance(entry, (IPv4Network, IPv6Network)):
                networks.append(entry)
                continue
            if isinstance(entry, (IPv4Address, IPv6Address)):
                networks.append(ip_network(entry))
                continue
            if not isinstance(entry, str):
                raise ValueError(
                    f"allowed_networks: {entry!r} is a {type(entry).__name__}, not a network "
                    "(e.g. '10.20.0.0/16'), an address or a host name"
                )
            text = entry.strip()
            try:
                networks.append(ip_network(text.strip("[]")))
                continue
            except ValueError as e:
                if "host bits set" in str(e):
                    fixed = ip_network(text, strict=False)
                    raise ValueError(
                        f"allowed_networks: {entry!r} has host bits set; did you mean {fixed}?"
                    ) from None
                if "/" in text or ":" in text:
                    raise ValueError(
                        f"allowed_networks: {entry!r} is not a valid network "
                        "(write one like '10.20.0.0/16' or 'fd00::/8')"
                    ) from None
            host = _host_entry(text)
            if host is None or isinstance(normalize_host(host), (IPv4Address, IPv6Address)):
                raise ValueError(
                    f"allowed_networks: {entry!r} is neither a network (e.g. '10.20.0.0/16'), "
                    "an IP address nor a host name"
                )
            hosts.append(host)
        return cls(
            allow_all=bool(allow_private_network),
            networks=tuple(dict.fromkeys(networks)),
            hosts=tuple(dict.fromkeys(hosts)),
        )

    def allows_host(self, name: str) -> bool:
        """Whether a (normalized) host name is allowed whatever it resolves to."""
        for entry in self.hosts:
            if entry.startswith("*."):
                if name.endswith(entry[1:]):
                    return True
            elif name == entry:
                return True
        return False

    def allows_address(self, address: IPAddress) -> bool:
        """Whether ``address`` may be connected to: public, or inside an allowed network."""
        if self.allow_all or address_rule(address) is None:
            return True
        candidates: list[IPAddress] = [address]
        if isinstance(address, IPv6Address):
            if address.scope_id:
                candidates.append(IPv6Address(str(address).split("%", 1)[0]))
            embedded = _embedded_v4(address)
            if embedded is not None:
                candidates.append(embedded[0])
        return any(
            candidate.version == net.version and candidate in net
            for candidate in candidates
            for net in self.networks
        )

    def refusal(self, host: str, address: IPAddress, *, resolved: bool) -> AddressRefused:
        """The error for a refused address, naming the rule and how an app allows it."""
        rule = address_rule(address) or "not allowed"
        if resolved:
            what = f"{host} resolves to {address}, {rule}"
        elif normalize_host(host) == address and host.strip("[]").lower() != str(address):
            what = f"{host} is {address}, {rule}"
        else:
            what = f"{address} is {rule}"
        return AddressRefused(
            what,
            host=host,
            address=address,
            rule=rule,
        )


def check_literal(host: str, policy: NetworkPolicy) -> None:
    """Raise :class:`AddressRefused` when ``host`` spells an address ``policy`` refuses.

    For hosts a URL parser rejects (httpx refuses ``0177.0.0.1``): the refusal then names
    the rule rather than the parse error. Names are left alone.

    Examples:
        >>> check_literal("0177.0.0.1", NetworkPolicy())
        Traceback (most recent call last):
        ...
        deputy_shiny.errors.AddressRefused: 0177.0.0.1 is 127.0.0.1, a loopback address
    """
    target = normalize_host(host)
    if isinstance(target, (IPv4Address, IPv6Address)) and not policy.allows_address(target):
        raise policy.refusal(host, target, resolved=False)


# --------------------------------------------------------------------------- resolving


async def system_resolver(host: str, port: int) -> list[str]:
    """The addresses of ``host`` from the system resolver (``loop.getaddrinfo``)."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


async def checked_addresses(
    host: str, port: int, policy: NetworkPolicy, resolver: Resolver
) -> list[IPAddress]:
    """The addresses to connect to for ``host``; raises :class:`AddressRefused` if any is off.

    An IP literal (in any spelling) is checked as it is; a name is resolved with
    ``resolver`` and every address it returns must pass. ``localhost`` and names under it
    are loopback by definition (RFC 6761) and are not looked up: they stand for
    127.0.0.1 and ::1, those of the two the policy allows. A name in ``policy.hosts`` is
    resolved but not checked. Resolver failures propagate (``socket.gaierror``).
    """
    target = normalize_host(host)
    if isinstance(target, (IPv4Address, IPv6Address)):
        if not policy.allows_address(target):
            raise policy.refusal(host, target, resolved=False)
        return [target]
    if not target:
        raise socket.gaierror(socket.EAI_NONAME, "empty host name")
    trusted = policy.allows_host(target)
    if target == "localhost" or target.endswith(".localhost"):
        loopbacks: list[IPAddress] = [IPv4Address("127.0.0.1"), IPv6Address("::1")]
        allowed = [a for a in loopbacks if trusted or policy.allows_address(a)]
        if not allowed:
            raise policy.refusal(host, loopbacks[0], resolved=True)
        return allowed
    answers = await resolver(target, port)
    addresses: list[IPAddress] = []
    for answer in answers:
        try:
            address = ip_address(str(answer))
        except ValueError:
            raise socket.gaierror(
                socket.EAI_FAIL, f"the resolver returned {answer!r}, not an IP address"
            ) from None
        if not trusted and not policy.allows_address(address):
            raise policy.refusal(host, address, resolved=True)
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise socket.gaierror(socket.EAI_NONAME, f"no address associated with {target!r}")
    return addresses


# --------------------------------------------------------------------------- transport


def _url_host(url: httpx.URL) -> str:
    """The host as sent on the wire (IDNA-encoded), for checking and for SNI."""
    return url.raw_host.decode("ascii")


class GuardedTransport(httpx.AsyncBaseTransport):
    """An httpx transport that checks every request's destination and connects to it.

    Each request's host is normalized and resolved (``resolver``, default
    :func:`system_resolver`); if any address is not allowed by ``policy`` the request
    fails with :class:`AddressRefused` before any connection is made. Otherwise it goes
    to the first address that accepts a connection, through a transport pinned to that
    address: the URL carries the IP, the Host header and the TLS server name (SNI and
    certificate check) stay the original name. Connections are pooled per
    (scheme, name, address, port), so a TLS connection made for one name never serves
    another.

    With ``transport`` (an app's own transport, e.g. a proxy or a test mock), requests
    are checked the same way and then handed to it unchanged; that transport decides
    where they connect.

    Examples:
        >>> import asyncio, httpx
        >>> async def main():
        ...     guard = GuardedTransport(NetworkPolicy())
        ...     async with httpx.AsyncClient(transport=guard) as client:
        ...         try:
        ...             await client.get("http://0x7f.1/admin")
        ...         except AddressRefused as e:
        ...             return e.rule
        >>> asyncio.run(main())
        'a loopback address'
    """

    def __init__(
        self,
        policy: NetworkPolicy,
        *,
        resolver: Resolver | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        verify: ssl.SSLContext | bool = True,
        trust_env: bool = True,
    ) -> None:
        self._policy = policy
        self._resolver: Resolver = resolver if resolver is not None else system_resolver
        self._transport = transport
        self._verify = verify
        self._trust_env = trust_env
        self._ssl_context: ssl.SSLContext | None = None
        self._pinned: dict[tuple[str, str, IPAddress, int], httpx.AsyncHTTPTransport] = {}

    def _pinned_transport(
        self, scheme: str, name: str, address: IPAddress, port: int
    ) -> httpx.AsyncHTTPTransport:
        key = (scheme, name, address, port)
        found = self._pinned.get(key)
        if found is None:
            if self._ssl_context is None:
                self._ssl_context = (
                    self._verify
                    if isinstance(self._verify, ssl.SSLContext)
                    else httpx.create_ssl_context(verify=self._verify, trust_env=self._trust_env)
                )
            found = httpx.AsyncHTTPTransport(verify=self._ssl_context, trust_env=False)
            self._pinned[key] = found
        return found

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        host = _url_host(url)
        port = url.port or _DEFAULT_PORTS.get(url.scheme, 80)
        try:
            addresses = await checked_addresses(host, port, self._policy, self._resolver)
        except (socket.gaierror, UnicodeError) as e:
            raise httpx.ConnectError(f"could not resolve {host!r}: {e}", request=request) from e
        if self._transport is not None:
            return await self._transport.handle_async_request(request)
        target = normalize_host(host)
        name = target if isinstance(target, str) else ""
        failure: httpx.ConnectError | None = None
        for address in addresses:
            extensions = dict(request.extensions)
            if url.scheme == "https" and name:
                extensions["sni_hostname"] = name
            pinned = httpx.Request(
                request.method,
                url.copy_with(host=str(address)),
                headers=request.headers,  # the Host header names the original host
                stream=request.stream,
                extensions=extensions,
            )
            transport = self._pinned_transport(url.scheme, name, address, port)
            try:
                return await transport.handle_async_request(pinned)
            except httpx.ConnectError as e:
                failure = e
        assert failure is not None  # addresses is never empty
        raise failure

    async def aclose(self) -> None:
        pinned, self._pinned = list(self._pinned.values()), {}
        for transport in pinned:
            await transport.aclose()
        if self._transport is not None:
            await self._transport.aclose()
