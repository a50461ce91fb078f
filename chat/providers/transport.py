"""Where an upstream call may connect: the address rules and the DNS-pinned transport.

* :func:`check_base_url` / :func:`acheck_base_url` refuse base URLs that point at link-local,
  cloud-metadata, unspecified or multicast addresses *after DNS resolution* (for forms, before
  anything is sent); loopback and private addresses are allowed for self-hosted servers unless
  ``allow_private=False``. Every IPv6 spelling of an IPv4 address is judged as that address
  (:func:`embedded_ipv4`).
* :class:`PinnedTransport` (the transport of every client ``chat.providers.http.make_client``
  builds) resolves a host once per new connection, checks every address it resolved to with the
  same rules, and connects to a checked address while keeping the original ``Host`` header and
  TLS server name (SNI and certificate verification use the host name), so DNS rebinding cannot
  swap the address between the check and the connection (DESIGN.md, "Storage and scale").
* :class:`AsyncioBackend` makes the connections with asyncio's own streams (cheaper per read
  than httpcore's anyio backend; see ``bench/micro.py``).

May import: the standard library, httpx and httpcore (httpx's own transport layer), and
``.base`` (no Django).
"""

from __future__ import annotations

import asyncio
import ipaddress
import select
import socket
import ssl
from collections.abc import Awaitable, Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

import httpcore
import httpx

#: Connection pool limits for the process-wide (per-loop) client.
POOL_LIMITS = httpx.Limits(max_connections=100, max_keepalive_connections=20, keepalive_expiry=30.0)

#: The request extension that carries an endpoint's ``allow_private`` to the transport.
ALLOW_PRIVATE_EXTENSION = "playground.allow_private"


# ---- address rules ------------------------------------------------------------------------

#: Cloud metadata services (AWS/Azure/GCP/Oracle IPv4, AWS IPv6, Alibaba).
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a) for a in ("169.254.169.254", "fd00:ec2::254", "100.100.100.200")
)
METADATA_HOSTNAMES = frozenset({"metadata.google.internal", "metadata.goog"})
_NAT64 = (ipaddress.IPv6Network("64:ff9b::/96"), ipaddress.IPv6Network("64:ff9b:1::/48"))
#: IPv4-compatible (``::a.b.c.d``, RFC 4291 §2.5.5.1, deprecated) and SIIT / IPv4-translated
#: (``::ffff:0:a.b.c.d``, RFC 2765) addresses carry an IPv4 address in their last 32 bits.
_V4_COMPATIBLE = ipaddress.IPv6Network("::/96")
_SIIT = ipaddress.IPv6Network("::ffff:0:0:0/96")


def embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries, in every spelling a host may resolve to:
    IPv4-mapped (``::ffff:a.b.c.d``), IPv4-compatible (``::a.b.c.d``, except ``::`` and
    ``::1``), SIIT (``::ffff:0:a.b.c.d``), NAT64 (``64:ff9b::/96``, ``64:ff9b:1::/48``), 6to4
    (``2002::/16``) and Teredo's client address; None for a plain IPv6 address."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    low32 = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip in _V4_COMPATIBLE:
        return None if int(ip) in (0, 1) else low32
    if ip in _SIIT or any(ip in net for net in _NAT64):
        return low32
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    return None


def _classify(ip: ipaddress.IPv4Address | ipaddress.IPv6Address, allow_private: bool) -> str | None:
    """Why ``ip`` is refused (a phrase for the error message), or None when it is allowed."""
    if isinstance(ip, ipaddress.IPv6Address):  # an IPv4 address inside IPv6 is judged as IPv4
        inner = embedded_ipv4(ip)
        if inner is not None:
            ip = inner
    if ip in METADATA_ADDRESSES:
        return "a cloud metadata address"
    if ip.is_unspecified:
        return "an unspecified address"
    if ip.is_link_local:
        return "a link-local address"
    if ip.is_multicast:
        return "a multicast address"
    if isinstance(ip, ipaddress.IPv4Address) and ip == ipaddress.IPv4Address("255.255.255.255"):
        return "the broadcast address"
    if not allow_private:
        if ip.is_loopback:
            return "a loopback address (private addresses are disabled)"
        if not ip.is_global:
            return "a private address (private addresses are disabled)"
    return None


def _parse(url: str) -> tuple[str, int]:
    """Validate the URL's shape; return (host, port). Raises ValueError."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"Invalid base URL: {exc}") from None
    if parts.scheme not in ("http", "https"):
        raise ValueError("The base URL must start with http:// or https://")
    host = parts.hostname
    if not host:
        raise ValueError("The base URL has no host name")
    if parts.username is not None or parts.password is not None:
        raise ValueError(
            "The base URL must not contain a user name or password; "
            "put credentials in the API key or extra headers"
        )
    if parts.query or parts.fragment:
        raise ValueError("The base URL must not contain a query string or fragment")
    if port is None:
        port = 443 if parts.scheme == "https" else 80
    return host.rstrip(".").lower(), port



def resolve(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to (``socket.getaddrinfo``, TCP), IPv6 zones dropped,
    in the resolver's order. Blocks. Raises ``ValueError`` when it does not resolve."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError, OSError) as exc:
        raise ValueError(f"Could not resolve the base URL host {host!r}: {exc}") from None
    addresses: list[str] = []
    for _family, _type, _proto, _canon, sockaddr in infos:
        address = str(sockaddr[0]).split("%", 1)[0]  # drop an IPv6 zone ("fe80::1%eth0")
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise ValueError(f"Could not resolve the base URL host {host!r}")
    return addresses


def check_addresses(host: str, addresses: Iterable[str], *, allow_private: bool) -> None:
    """Refuse (``ValueError``, a message fit for the user) when ``host`` is a metadata host
    name or any of ``addresses`` is refused by the rules of :func:`check_base_url`."""
    if host.rstrip(".").lower() in METADATA_HOSTNAMES:
        raise ValueError(f"The base URL host {host!r} is a cloud metadata service")
    for address in addresses:
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            raise ValueError(f"The base URL host {host!r} resolved to {address!r}") from None
        reason = _classify(ip, allow_private)
        if reason:
            shown = host if host == address else f"{host!r} resolves to {address}, which"
            raise ValueError(f"The base URL host {shown} is {reason} and cannot be used")


def check_base_url(url: str, *, allow_private: bool = True) -> None:
    """Refuse a base URL that must never be called; return None when it is acceptable.

    Rules: scheme http/https; no credentials, query or fragment; the host name is resolved with
    ``socket.getaddrinfo`` and *every* address it resolves to must pass: link-local
    (169.254.0.0/16, fe80::/10), cloud metadata (169.254.169.254, fd00:ec2::254,
    100.100.100.200 and the host name ``metadata.google.internal``), unspecified (0.0.0.0, ::),
    multicast and broadcast are always refused (IPv4-mapped, IPv4-compatible, SIIT, NAT64, 6to4
    and Teredo IPv6 addresses are checked as the IPv4 address they carry, see
    :func:`embedded_ipv4`). Loopback and private addresses are allowed unless
    ``allow_private=False`` (then only global addresses pass).

    This is the early check (forms, before anything is sent); the connection itself is checked
    again by :class:`PinnedTransport` against the address it connects to. It blocks (DNS); in
    async code use :func:`acheck_base_url`. Raises ``ValueError`` with a message fit for the
    user, also when the host does not resolve.
    """
    host, port = _parse(url)
    if host in METADATA_HOSTNAMES:
        raise ValueError(f"The base URL host {host!r} is a cloud metadata service")
    check_addresses(host, resolve(host, port), allow_private=allow_private)


async def acheck_base_url(url: str, *, allow_private: bool = True) -> None:
    """:func:`check_base_url` with the DNS resolution run in a worker thread."""
    await asyncio.to_thread(check_base_url, url, allow_private=allow_private)


# ---- the pinned transport -----------------------------------------------------------------

Resolver = Callable[[str, int], Awaitable[list[str]]]


async def default_resolver(host: str, port: int) -> list[str]:
    """:func:`resolve` in a worker thread (``ValueError`` when the host does not resolve); an
    IP address literal is its own answer, without a thread."""
    try:
        return [str(ipaddress.ip_address(host.split("%", 1)[0]))]
    except ValueError:
        return await asyncio.to_thread(resolve, host, port)


class AddressRefused(httpx.ConnectError):
    """The host of a request resolved to an address the rules refuse; nothing was sent.
    ``str(exc)`` is the user-facing reason (see :func:`check_addresses`)."""


class AsyncioStream(httpcore.AsyncNetworkStream):
    """An httpcore network stream on asyncio's own streams (``StreamReader``/``StreamWriter``).

    The read path of every upstream event goes through :meth:`read`; asyncio streams cost less
    per read than httpcore's anyio backend (``bench/micro.py``, one event per network read:
    about 120 against 185 µs of CPU per read for the raw httpx read on this machine), with the
    same behaviour: httpcore's timeout and error classes, TLS through
    ``StreamWriter.start_tls`` (server name and certificate check as httpcore asks), and
    ``is_readable`` for the pool's check of idle keep-alive connections.
    """

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:  # noqa: ASYNC109 - httpcore's interface
        try:
            async with asyncio.timeout(timeout):
                return await self._reader.read(max_bytes)
        except TimeoutError:
            raise httpcore.ReadTimeout("timed out reading from the upstream") from None
        except OSError as exc:
            raise httpcore.ReadError(str(exc) or type(exc).__name__) from None

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:  # noqa: ASYNC109 - httpcore's interface
        if not buffer:
            return
        try:
            self._writer.write(buffer)
            async with asyncio.timeout(timeout):
                await self._writer.drain()
        except TimeoutError:
            raise httpcore.WriteTimeout("timed out writing to the upstream") from None
        except OSError as exc:
            raise httpcore.WriteError(str(exc) or type(exc).__name__) from None

    async def aclose(self) -> None:
        # close() starts closing (TLS shutdown, then the socket) without waiting: aclose also
        # runs while a cancelled turn unwinds, where awaiting would be cut short anyway
        self._writer.close()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
    ) -> httpcore.AsyncNetworkStream:
        try:
            async with asyncio.timeout(timeout):
                await self._writer.start_tls(ssl_context, server_hostname=server_hostname)
        except TimeoutError:
            self._writer.close()
            raise httpcore.ConnectTimeout("timed out in the TLS handshake") from None
        except (OSError, ssl.SSLError) as exc:
            self._writer.close()
            raise httpcore.ConnectError(str(exc) or type(exc).__name__) from None
        return self

    def get_extra_info(self, info: str) -> Any:
        if info == "ssl_object":
            return self._writer.get_extra_info("ssl_object")
        if info == "client_addr":
            return self._writer.get_extra_info("sockname")
        if info == "server_addr":
            return self._writer.get_extra_info("peername")
        if info == "socket":
            return self._writer.get_extra_info("socket")
        if info == "is_readable":  # an idle connection with data or EOF is dead to the pool
            if self._reader.at_eof() or self._reader.exception() is not None:
                return True
            if self._writer.transport.is_closing():
                return True
            sock = self._writer.get_extra_info("socket")
            if sock is None or sock.fileno() < 0:
                return True
            poller = select.poll()
            poller.register(sock.fileno(), select.POLLIN)
            return bool(poller.poll(0))
        return None


class AsyncioBackend(httpcore.AsyncNetworkBackend):
    """httpcore network backend on ``asyncio.open_connection`` (see :class:`AsyncioStream`).
    Connection failures raise httpcore's ``ConnectError`` / ``ConnectTimeout``."""

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's backend interface
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        local = (local_address, 0) if local_address else None
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_connection(host, port, local_addr=local)
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"timed out connecting to {host}:{port}") from None
        except OSError as exc:
            raise httpcore.ConnectError(str(exc) or type(exc).__name__) from None
        sock = writer.get_extra_info("socket")
        for option in socket_options or ():
            sock.setsockopt(*option)
        return AsyncioStream(reader, writer)

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's backend interface
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:  # pragma: no cover - clients never use a socket path
        raise httpcore.ConnectError("Unix sockets are not used for upstreams")

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class PinnedBackend(httpcore.AsyncNetworkBackend):
    """An httpcore network backend that resolves a host once per connection, checks every
    address (:func:`check_addresses`, with ``allow_private``), then connects to the checked
    addresses in order until one answers. httpcore still does TLS with the URL's host name as
    server name, so SNI and certificate verification are unchanged; the ``Host`` header comes
    from the URL as always.

    ``resolver(host, port) -> [address, …]`` is injectable (tests); ``backend`` is the backend
    that makes the actual connections (:class:`AsyncioBackend` by default).
    """

    def __init__(
        self,
        *,
        allow_private: bool,
        resolver: Resolver | None = None,
        backend: httpcore.AsyncNetworkBackend | None = None,
    ) -> None:
        self.allow_private = allow_private
        self.resolver = resolver or default_resolver
        self.backend = backend or AsyncioBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's backend interface
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            async with asyncio.timeout(timeout):
                addresses = await self.resolver(host, port)
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"Timed out resolving {host}") from None
        except ValueError as exc:
            raise httpcore.ConnectError(str(exc)) from None
        try:
            check_addresses(host, addresses, allow_private=self.allow_private)
        except ValueError as exc:
            raise AddressRefused(str(exc)) from None
        last: Exception | None = None
        for address in addresses:
            try:
                return await self.backend.connect_tcp(
                    address,
                    port,
                    timeout=timeout,
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last = exc
        assert last is not None
        raise last

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's backend interface
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:  # pragma: no cover - clients never use a socket path
        raise httpcore.ConnectError("Unix sockets are not used for upstreams")

    async def sleep(self, seconds: float) -> None:
        await self.backend.sleep(seconds)


class _PinnedHTTPTransport(httpx.AsyncHTTPTransport):
    """httpx's transport with its connection pool built on a :class:`PinnedBackend`."""

    def __init__(
        self,
        *,
        backend: PinnedBackend,
        verify: Any = True,
        limits: httpx.Limits = POOL_LIMITS,
        trust_env: bool = True,
    ) -> None:
        super().__init__(verify=verify, limits=limits, trust_env=trust_env)
        ssl_context = httpx.create_ssl_context(verify=verify, trust_env=trust_env)
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            http1=True,
            http2=False,
            network_backend=backend,
        )


class PinnedTransport(httpx.AsyncBaseTransport):
    """The transport of every upstream call: DNS is resolved once per connection, every
    address checked, and the connection made to a checked address (see :class:`PinnedBackend`).

    A request's policy comes from its ``playground.allow_private`` extension (set from
    ``EndpointConfig.allow_private`` by the adapters), else ``allow_private`` given here, else
    :data:`chat.providers.base.ALLOW_PRIVATE`. Each policy has its own connection pool, so a
    connection opened under one is never reused under the other. A refused address raises
    :class:`AddressRefused` (→ ``ProviderError(code="base_url_refused")``) before anything is
    sent. ``verify`` (``True`` or an ``ssl.SSLContext``) and ``resolver`` are for tests.
    """

    def __init__(
        self,
        *,
        allow_private: bool | None = None,
        resolver: Resolver | None = None,
        verify: Any = True,
        limits: httpx.Limits = POOL_LIMITS,
        backend: httpcore.AsyncNetworkBackend | None = None,
    ) -> None:
        self.allow_private = allow_private
        self.resolver = resolver
        self.verify = verify
        self.limits = limits
        self.backend = backend
        self._transports: dict[bool, _PinnedHTTPTransport] = {}

    def _transport(self, allow_private: bool) -> _PinnedHTTPTransport:
        transport = self._transports.get(allow_private)
        if transport is None:
            backend = PinnedBackend(
                allow_private=allow_private, resolver=self.resolver, backend=self.backend
            )
            transport = _PinnedHTTPTransport(backend=backend, verify=self.verify, limits=self.limits)
            self._transports[allow_private] = transport
        return transport

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        policy = request.extensions.get(ALLOW_PRIVATE_EXTENSION)
        if not isinstance(policy, bool):
            policy = self.allow_private
        if policy is None:
            from . import base  # read at call time: the settings layer may change it

            policy = base.ALLOW_PRIVATE
        return await self._transport(policy).handle_async_request(request)

    async def aclose(self) -> None:
        for transport in self._transports.values():
            await transport.aclose()
        self._transports.clear()
