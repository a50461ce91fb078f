"""HTTP plumbing shared by every adapter: one ``httpx.AsyncClient`` per event loop, base URL checks.

* :func:`get_client` returns the client of the running event loop (an ``httpx.AsyncClient`` is
  bound to the loop it first ran on, so one process-wide client would break under tests and
  under ``async_to_sync``). Clients never follow redirects: a redirect must never carry an API
  key to another host (DESIGN.md, "Storage and scale").
* :func:`check_base_url` / :func:`acheck_base_url` refuse base URLs that point at link-local,
  cloud-metadata, unspecified or multicast addresses *after DNS resolution*; loopback and private
  addresses are allowed for self-hosted servers unless ``allow_private=False``.

It also holds the request/response helpers every adapter shares: building a request without
leaking a key into an exception, sending it with the response always closed, reading a capped
error body, a lenient httpx-sse ``EventSource``, :func:`transport_error` (httpx exception →
``ProviderError``), and :func:`stream_sse`, the SSE request loop of the ``anthropic_messages``
and ``openai_responses`` adapters (each adapter supplies only a :class:`StreamState` that turns
one SSE event into events).

May import: the standard library, httpx, httpx-sse and ``.base``/``.errors`` (no Django).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import socket
import weakref
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol
from urllib.parse import urlsplit

import httpx
from httpx_sse import EventSource, SSEError

from .base import (
    EndpointConfig,
    Event,
    ProviderError,
    RawEvent,
    ResponseStarted,
    scrub,
)
from .errors import (
    model_output_from_body,
    parse_error,
    request_id_from_headers,
    secret_variants,
)

#: Explicit timeouts, in seconds. ``read`` is the longest silence allowed between two reads
#: (reasoning models can think for minutes before the first byte of the answer).
TIMEOUT = httpx.Timeout(connect=5.0, read=600.0, write=30.0, pool=10.0)

#: Connection pool limits for the process-wide (per-loop) client.
LIMITS = httpx.Limits(max_connections=100, max_keepalive_connections=20, keepalive_expiry=30.0)

USER_AGENT = "llm-playground/0.1 (+httpx)"

#: At most this many bytes of an error body are read.
ERROR_BODY_LIMIT = 64 * 1024

STREAM_CUT_MESSAGE = "The upstream closed the stream before it finished"

_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = (
    weakref.WeakKeyDictionary()
)


def make_client(**overrides: object) -> httpx.AsyncClient:
    """Build a client with the project's settings (``follow_redirects=False``, :data:`TIMEOUT`,
    :data:`LIMITS`). ``overrides`` are passed to ``httpx.AsyncClient`` (tests pass ``transport``).
    """
    kwargs: dict[str, object] = {
        "follow_redirects": False,
        "timeout": TIMEOUT,
        "limits": LIMITS,
        "headers": {"User-Agent": USER_AGENT},
    }
    kwargs.update(overrides)
    return httpx.AsyncClient(**kwargs)  # type: ignore[arg-type]


def get_client() -> httpx.AsyncClient:
    """Return the shared ``httpx.AsyncClient`` of the running event loop, creating it once.

    One client per loop, kept in a ``WeakKeyDictionary`` keyed by the loop; entries of closed
    loops are dropped when a new client is made. A client that was closed is replaced. Call
    :func:`close_clients` before a loop ends (tests, shutdown) to close its connections cleanly.

    Raises ``RuntimeError`` when called outside a running event loop.
    """
    loop = asyncio.get_running_loop()
    client = _clients.get(loop)
    if client is None or client.is_closed:
        # A client's open connections reference its loop, so a WeakKeyDictionary alone never
        # drops the entry of a loop that ended without close_clients(): forget those here.
        for dead in [other for other in _clients if other.is_closed()]:
            _clients.pop(dead, None)
        client = make_client()
        _clients[loop] = client
    return client


async def close_clients() -> None:
    """Close the running loop's client (tests, shutdown). Clients of other loops are only
    forgotten: a client must be closed on its own loop, and those loops may be gone already.
    """
    loop = asyncio.get_running_loop()
    for other_loop, client in list(_clients.items()):
        if other_loop is loop:
            await client.aclose()
        _clients.pop(other_loop, None)


# ---- base URL checks ----------------------------------------------------------------------

#: Cloud metadata services (AWS/Azure/GCP/Oracle IPv4, AWS IPv6, Alibaba).
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a) for a in ("169.254.169.254", "fd00:ec2::254", "100.100.100.200")
)
METADATA_HOSTNAMES = frozenset({"metadata.google.internal", "metadata.goog"})
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


def _classify(ip: ipaddress.IPv4Address | ipaddress.IPv6Address, allow_private: bool) -> str | None:
    """Why ``ip`` is refused (a phrase for the error message), or None when it is allowed."""
    if isinstance(ip, ipaddress.IPv6Address):  # an IPv4 address inside IPv6 is judged as IPv4
        if ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        elif ip in _NAT64:
            ip = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        elif ip.sixtofour is not None:
            ip = ip.sixtofour
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


def check_base_url(url: str, *, allow_private: bool = True) -> None:
    """Refuse a base URL that must never be called; return None when it is acceptable.

    Rules: scheme http/https; no credentials, query or fragment; the host name is resolved with
    ``socket.getaddrinfo`` and *every* address it resolves to must pass: link-local
    (169.254.0.0/16, fe80::/10), cloud metadata (169.254.169.254, fd00:ec2::254,
    100.100.100.200 and the host name ``metadata.google.internal``), unspecified (0.0.0.0, ::),
    multicast and broadcast are always refused (IPv4-mapped, NAT64 and 6to4 IPv6 addresses are
    checked as the IPv4 address they carry). Loopback and private addresses are allowed unless
    ``allow_private=False`` (then only global addresses pass).

    This blocks (DNS); in async code use :func:`acheck_base_url`. Raises ``ValueError`` with a
    message fit for the user, also when the host does not resolve.
    """
    host, port = _parse(url)
    if host in METADATA_HOSTNAMES:
        raise ValueError(f"The base URL host {host!r} is a cloud metadata service")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError, OSError) as exc:
        raise ValueError(f"Could not resolve the base URL host {host!r}: {exc}") from None
    if not infos:
        raise ValueError(f"Could not resolve the base URL host {host!r}")
    for _family, _type, _proto, _canon, sockaddr in infos:
        address = str(sockaddr[0]).split("%", 1)[0]  # drop an IPv6 zone ("fe80::1%eth0")
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            raise ValueError(f"The base URL host {host!r} resolved to {address!r}") from None
        reason = _classify(ip, allow_private)
        if reason:
            shown = host if host == address else f"{host!r} resolves to {address}, which"
            raise ValueError(f"The base URL host {shown} is {reason} and cannot be used")


async def acheck_base_url(url: str, *, allow_private: bool = True) -> None:
    """:func:`check_base_url` with the DNS resolution run in a worker thread."""
    await asyncio.to_thread(check_base_url, url, allow_private=allow_private)


# ---- request / response helpers shared by the adapters ------------------------------------


def host_of(url: str) -> str:
    """``host[:port]`` of a URL, never its credentials."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return "the upstream"
    if not host:
        return "the upstream"
    if ":" in host:
        host = f"[{host}]"
    return f"{host}:{port}" if port else host


def merge_headers(base: dict[str, str], extra: dict[str, str]) -> dict[str, str]:
    """``base`` updated with ``extra``; an extra header replaces a base one of any case."""
    merged = dict(base)
    for name, value in extra.items():
        for existing in [k for k in merged if k.lower() == name.lower()]:
            del merged[existing]
        merged[name] = value
    return merged


def build_http_request(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    headers: dict[str, str],
    secrets: list[str],
    **kwargs: Any,
) -> httpx.Request:
    """``client.build_request`` with bad configuration turned into ``ProviderError``
    (``code="invalid_config"``): an invalid URL, or a key / header value HTTP cannot carry.
    The original exception is dropped: its arguments can hold the header value (the key)."""
    try:
        return client.build_request(method, url, headers=headers, **kwargs)
    except UnicodeEncodeError:
        message = "The API key or an extra header contains characters HTTP headers cannot carry"
    except (httpx.InvalidURL, ValueError, TypeError) as exc:
        message = scrub(f"Invalid base URL or header: {exc}", secrets)
    raise ProviderError(message, code="invalid_config")


@contextlib.asynccontextmanager
async def send_stream(
    client: httpx.AsyncClient, request: httpx.Request
) -> AsyncIterator[httpx.Response]:
    """``client.send(stream=True)`` whose response is always closed (like ``client.stream``)."""
    response = await client.send(request, stream=True)
    try:
        yield response
    finally:
        await response.aclose()


async def read_capped(response: httpx.Response, limit: int = ERROR_BODY_LIMIT) -> bytes:
    """Up to ``limit`` bytes of the body; a transport error just ends the read."""
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in response.aiter_bytes():
            chunks.append(chunk)
            size += len(chunk)
            if size >= limit:
                break
    except httpx.HTTPError:
        pass
    return b"".join(chunks)[:limit]


class LenientEventSource(EventSource):
    """httpx-sse's EventSource without the ``Content-Type: text/event-stream`` check: some
    OpenAI-compatible servers stream SSE as ``text/plain`` or without a content type."""

    def _check_content_type(self) -> None:
        return None


def _timeout_setting(exc: httpx.HTTPError, name: str) -> str:
    try:
        value = exc.request.extensions.get("timeout", {}).get(name)
    except RuntimeError:
        value = None
    return f" after {value:g} s" if isinstance(value, (int, float)) else ""


def transport_error(
    exc: httpx.HTTPError, host: str, secrets: list[str], *, started: bool
) -> ProviderError:
    """Map an httpx exception to ``ProviderError`` (status None), message scrubbed.

    ``started``: whether response headers had arrived. Codes: ``timeout`` (connect / read /
    write / pool, named in the message), ``connection_error`` (refused, DNS, TLS, closed before
    a response), ``stream_cut`` (read error after the headers), ``stream_error`` (other failures
    while reading the body), ``invalid_config`` (h11 refused to send a header value).
    """
    detail = scrub(str(exc) or type(exc).__name__, secrets)
    if isinstance(exc, httpx.ConnectTimeout):
        return ProviderError(
            f"Timed out connecting to {host}{_timeout_setting(exc, 'connect')}", code="timeout"
        )
    if isinstance(exc, httpx.ReadTimeout):
        wait = _timeout_setting(exc, "read")
        if started:
            message = f"{host} stopped sending data mid-stream (no data{wait})"
        else:
            message = f"{host} sent no response{wait}"
        return ProviderError(message, code="timeout")
    if isinstance(exc, httpx.WriteTimeout):
        return ProviderError(
            f"Timed out sending the request to {host}{_timeout_setting(exc, 'write')}",
            code="timeout",
        )
    if isinstance(exc, httpx.PoolTimeout):
        return ProviderError(
            f"Timed out waiting for a free connection to {host} (too many requests at once)",
            code="timeout",
        )
    if isinstance(exc, httpx.TimeoutException):
        return ProviderError(f"Timed out talking to {host}: {detail}", code="timeout")
    if isinstance(exc, httpx.LocalProtocolError):
        return ProviderError(f"The request could not be sent: {detail}", code="invalid_config")
    if isinstance(exc, httpx.ConnectError):
        return ProviderError(f"Could not connect to {host}: {detail}", code="connection_error")
    if isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError)):
        if started:
            return ProviderError(f"{STREAM_CUT_MESSAGE} ({detail})", code="stream_cut")
        return ProviderError(
            f"{host} closed the connection without a response: {detail}",
            code="connection_error",
        )
    if started:
        return ProviderError(
            f"Error reading the response from {host}: {detail}", code="stream_error"
        )
    return ProviderError(f"Request to {host} failed: {detail}", code="connection_error")


# ---- the SSE request loop shared by the adapters ------------------------------------------

#: Seconds spent reading the rest of the body after the terminal event (see :func:`drain`).
DRAIN_AFTER_DONE_S = 0.5

#: Transport failures that, once the answer is complete, only lose trailing events.
INTERRUPTIONS = (httpx.RemoteProtocolError, httpx.ReadError, httpx.ReadTimeout)

NOT_JSON: Any = object()


def loads(text: str) -> Any:
    """``json.loads`` or :data:`NOT_JSON`. No exception escapes: a ``JSONDecodeError`` carries
    the whole document (which may echo a key) and would be chained to what is raised next."""
    try:
        return json.loads(text)
    except ValueError:
        return NOT_JSON


async def drain(events: AsyncIterator[Any]) -> None:
    """Read what follows the terminal event (normally only the end of the chunked body) for at
    most :data:`DRAIN_AFTER_DONE_S`, so the connection can go back to the pool instead of being
    closed half-read. What comes after the terminal event is ignored."""
    with contextlib.suppress(TimeoutError, httpx.HTTPError):
        async with asyncio.timeout(DRAIN_AFTER_DONE_S):
            async for _ in events:
                pass


class StreamState(Protocol):
    """Per-stream interpretation used by :func:`stream_sse`.

    ``finished``: the answer is complete (a stop reason arrived), so a connection lost now only
    loses trailing events. ``done``: the terminal event arrived; stop reading.
    """

    finished: bool
    done: bool

    def interpret(self, event: str, data: str) -> list[Event]:
        """Events for one SSE event (``event`` is "" without an ``event:`` line). Raises
        ``ProviderError`` for an error event, after putting events to release (usage, a
        ``ModelOutputError``) where :meth:`end` returns them."""
        ...

    def relay_json(self, text: str) -> list[Event]:
        """Events for a whole 2xx JSON body (a server that ignored ``stream: true``)."""
        ...

    def end(self) -> list[Event]:
        """Events still held (called at the end and before an error is raised; idempotent)."""
        ...


async def stream_sse(
    client: httpx.AsyncClient,
    config: EndpointConfig,
    url: str,
    headers: dict[str, str],
    body: dict[str, Any],
    make_state: Callable[[list[str], str | None], StreamState],
) -> AsyncIterator[Event]:
    """POST ``body`` as JSON to ``url`` and relay the SSE answer through a :class:`StreamState`.

    ``make_state(secrets, request_id)`` is called once the 2xx headers arrived (``secrets``:
    every form of the endpoint's secrets, for scrubbing). Yields ``ResponseStarted(status,
    request_id)``, then per SSE event a ``RawEvent(event, data)`` (scrubbed; comments are not
    events) followed by what the state makes of it. ``data: [DONE]`` or a state that says
    ``done`` ends the stream (the rest of the body is drained for ≤ 0.5 s); a 2xx JSON body is
    one ``RawEvent`` plus ``state.relay_json``.

    Raises ``ProviderError`` only: :func:`chat.providers.errors.parse_error` for a non-2xx status
    (preceded by a ``ModelOutputError`` event when the body carries the model's raw output);
    the state's error for an error event; ``stream_cut`` when the body ends (or a read error
    happens) before the state is ``finished`` or ``done``; :func:`transport_error` codes for
    transport failures. A transport failure after ``finished`` ends the stream normally.
    Cancellation or ``aclose()`` closes the upstream response.
    """
    secrets = secret_variants(config.secrets())
    host = host_of(url)
    http_request = build_http_request(client, "POST", url, headers, secrets, json=body)
    started = False
    state: StreamState | None = None
    failure: httpx.HTTPError | None = None
    try:
        async with send_stream(client, http_request) as response:
            started = True
            if not response.is_success:
                raw = await read_capped(response)
                error = parse_error(response.status_code, response.headers, raw, secrets)
                output = model_output_from_body(raw, secrets)
                if output is not None:
                    yield output
                raise error
            request_id = request_id_from_headers(response.headers)
            state = make_state(secrets, request_id)
            yield ResponseStarted(response.status_code, request_id)

            content_type = response.headers.get("content-type", "").lower()
            if "json" in content_type and "event-stream" not in content_type:
                text = (await response.aread()).decode("utf-8", errors="replace")
                yield RawEvent("", scrub(text, secrets))
                for event in state.relay_json(text):
                    yield event
                state.done = True
                for event in state.end():
                    yield event
                return

            response.encoding = "utf-8"  # SSE is always UTF-8 (WHATWG HTML §9.2.5)
            source = LenientEventSource(response)
            async with contextlib.aclosing(source.aiter_sse()) as sse_events:
                async for sse in sse_events:
                    # httpx-sse reports an absent ``event:`` field as "message" (the SSE default)
                    name = "" if sse.event == "message" else sse.event
                    if not sse.data and not name:
                        continue  # a blank dispatch after an id:/retry: line
                    yield RawEvent(name, scrub(sse.data, secrets))
                    if sse.data.strip() == "[DONE]":
                        state.done = True
                        break
                    for event in state.interpret(name, sse.data):
                        yield event
                    if state.done:
                        break
                if state.done:
                    await drain(sse_events)
            for event in state.end():
                yield event
            if not state.done and not state.finished:
                raise ProviderError(STREAM_CUT_MESSAGE, code="stream_cut")
    except ProviderError as exc:
        if state is not None:
            for event in state.end():
                yield event
        raise exc from None
    except SSEError as exc:  # pragma: no cover - only if httpx-sse changes its content check
        raise ProviderError(
            scrub(f"The upstream did not send an event stream: {exc}", secrets), code="stream_error"
        ) from None
    except httpx.HTTPError as exc:
        failure = exc  # handled below, outside the except block, so it is not chained
    if failure is not None:
        if state is not None:
            for event in state.end():
                yield event
            if state.finished and isinstance(failure, INTERRUPTIONS):
                return  # the answer was complete; only trailing events were lost
        raise transport_error(failure, host, secrets, started=started)
