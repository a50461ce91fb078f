"""HTTP plumbing shared by every adapter: the client, limits on bodies, the SSE loop.

* :func:`get_client` returns the client of the running event loop (an ``httpx.AsyncClient`` is
  bound to the loop it first ran on, so one process-wide client would break under tests and
  under ``async_to_sync``). Clients never follow redirects: a redirect must never carry an API
  key to another host (DESIGN.md, "Storage and scale"); their transport is
  :class:`chat.providers.transport.PinnedTransport` (DNS resolved once, every address checked,
  the connection made to the checked address). The URL checks of that module
  (:func:`check_base_url`, :func:`acheck_base_url`) are re-exported here.
* Bodies are read through :func:`iter_body` (decompression with a cap on *decoded* bytes) and
  :func:`read_body`; SSE through :func:`iter_sse` (own line splitting feeding httpx-sse's
  ``SSEDecoder``, which keeps the WHATWG field rules); every limit is a field of
  :class:`chat.providers.base.Limits`.
* :func:`stream_sse` is the one SSE request loop of every adapter (each supplies a
  :class:`StreamState` that turns one SSE event into events); :func:`request_json` is the one
  non-streaming call (``/models``, ``count_tokens``).

May import: the standard library, httpx, httpx-sse and this package (no Django).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import weakref
import zlib
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any, Protocol
from urllib.parse import urlsplit

import httpx

# SSEDecoder holds the WHATWG field rules; httpx-sse 0.4 does not re-export it.
from httpx_sse._decoders import SSEDecoder

from .base import (
    EndpointConfig,
    Event,
    ProviderError,
    ResponseStarted,
    encode_json_body,
    limit_error,
    scrub,
)
from .errors import (
    EXCERPT_CHARS,
    model_output_from_body,
    parse_error,
    request_id_from_headers,
    route_error,
    secret_variants,
)
from .text import StreamGuard
from .transport import (  # noqa: F401 - re-exported: callers import the URL checks from here
    ALLOW_PRIVATE_EXTENSION,
    POOL_LIMITS,
    AddressRefused,
    AsyncioBackend,
    PinnedBackend,
    PinnedTransport,
    acheck_base_url,
    check_addresses,
    check_base_url,
    embedded_ipv4,
    resolve,
)

#: Explicit timeouts, in seconds. ``read`` is the longest silence allowed between two reads
#: (reasoning models can think for minutes before the first byte of the answer).
TIMEOUT = httpx.Timeout(connect=5.0, read=600.0, write=30.0, pool=10.0)

#: Connection pool limits for the process-wide (per-loop) client.
LIMITS = POOL_LIMITS

USER_AGENT = "llm-playground/0.1 (+httpx)"

#: Only encodings :func:`iter_body` can inflate with a cap on the decoded size are asked for
#: (never ``br`` or ``zstd``, even when their libraries are installed).
ACCEPT_ENCODING = "gzip, deflate"

#: At most this many bytes of an error body are read (``Limits.max_error_body_bytes``'s
#: default; kept for callers that pass no limits).
ERROR_BODY_LIMIT = 64 * 1024

STREAM_CUT_MESSAGE = "The upstream closed the stream before it finished"

_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = (
    weakref.WeakKeyDictionary()
)


def make_client(**overrides: object) -> httpx.AsyncClient:
    """Build a client with the project's settings (``follow_redirects=False``, :data:`TIMEOUT`,
    :data:`LIMITS`, ``Accept-Encoding: gzip, deflate``, a :class:`PinnedTransport`).
    ``overrides`` are passed to ``httpx.AsyncClient`` (tests pass ``transport``). A client with
    its own transport ignores proxy environment variables (a proxy would defeat the pinning).
    """
    kwargs: dict[str, object] = {
        "follow_redirects": False,
        "timeout": TIMEOUT,
        "limits": LIMITS,
        "headers": {"User-Agent": USER_AGENT, "Accept-Encoding": ACCEPT_ENCODING},
    }
    kwargs.update(overrides)
    if "transport" not in kwargs:
        kwargs["transport"] = PinnedTransport(limits=kwargs["limits"])  # type: ignore[arg-type]
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
    config: EndpointConfig | None = None,
    **kwargs: Any,
) -> httpx.Request:
    """``client.build_request`` with bad configuration turned into ``ProviderError``
    (``code="invalid_config"``): an invalid URL, or a key / header value HTTP cannot carry.
    The original exception is dropped: its arguments can hold the header value (the key).
    With ``config``, the request carries its ``allow_private`` policy for
    :class:`PinnedTransport`."""
    if config is not None:
        extensions = dict(kwargs.pop("extensions", None) or {})
        extensions[ALLOW_PRIVATE_EXTENSION] = config.effective_allow_private()
        kwargs["extensions"] = extensions
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


# ---- bounded bodies -----------------------------------------------------------------------

#: Decoded bytes produced per inflate step (bounds memory per step, whatever the ratio).
_INFLATE_STEP = 256 * 1024


class _Inflater:
    """One ``Content-Encoding`` layer (gzip or deflate) inflated in bounded steps."""

    def __init__(self, encoding: str) -> None:
        self.encoding = encoding
        wbits = zlib.MAX_WBITS | 16 if encoding in ("gzip", "x-gzip") else zlib.MAX_WBITS
        self._inflate = zlib.decompressobj(wbits)
        self._first = encoding == "deflate"  # raw deflate (no zlib header) is retried once

    def feed(self, data: bytes) -> Iterable[bytes]:
        while data:
            try:
                out = self._inflate.decompress(data, _INFLATE_STEP)
            except zlib.error:
                if not self._first:
                    raise
                self._first = False
                self._inflate = zlib.decompressobj(-zlib.MAX_WBITS)
                continue
            self._first = False
            data = self._inflate.unconsumed_tail
            if out:
                yield out

    def flush(self) -> Iterable[bytes]:
        try:
            out = self._inflate.flush()
        except zlib.error:  # pragma: no cover - flush of a truncated stream
            return []
        return [out] if out else []


def _inflaters(response: httpx.Response) -> list[_Inflater]:
    """The decoders for the response's ``Content-Encoding`` (outermost last), or
    ``ProviderError(code="bad_response")`` for an encoding whose decoded size cannot be capped
    while decoding (``br``, ``zstd``, … : never asked for, see :data:`ACCEPT_ENCODING`)."""
    header = response.headers.get("content-encoding", "")
    layers = [v.strip().lower() for v in header.split(",") if v.strip()]
    inflaters = []
    for encoding in reversed(layers):
        if encoding == "identity":
            continue
        if encoding not in ("gzip", "x-gzip", "deflate"):
            raise ProviderError(
                f"The upstream sent a body encoded as {encoding!r}, which the playground does "
                f"not decode (it asks for {ACCEPT_ENCODING})",
                status=response.status_code,
                code="bad_response",
            )
        inflaters.append(_Inflater(encoding))
    return inflaters


async def iter_body(response: httpx.Response, limit: int | None = None) -> AsyncIterator[bytes]:
    """The body's bytes after ``Content-Encoding`` is undone, at most ``limit`` decoded bytes
    in total (``Limits.max_decoded_bytes`` when None): a gzip or deflate bomb is stopped while
    inflating, a step of at most 256 KiB at a time, never after.

    Raises ``ProviderError``: ``limit_exceeded`` past the limit, ``bad_response`` for an
    unsupported or corrupt encoding; httpx transport errors pass through.
    """
    if limit is None:
        from . import base

        limit = base.DEFAULT_LIMITS.max_decoded_bytes
    if response.is_stream_consumed:  # an in-memory response (tests): already decoded by httpx
        content = response.content
        if len(content) > limit:
            raise limit_error("max_decoded_bytes", limit, "The upstream's response body (bytes)")
        if content:
            yield content
        return
    inflaters = _inflaters(response)
    left = limit
    async for raw in response.aiter_raw():
        pieces: Iterable[bytes] = (raw,)
        try:
            for inflater in inflaters:
                pieces = [out for piece in pieces for out in inflater.feed(piece)]
        except zlib.error:
            raise ProviderError(
                "The upstream's compressed body could not be decoded",
                status=response.status_code,
                code="bad_response",
            ) from None
        for piece in pieces:
            left -= len(piece)
            if left < 0:
                raise limit_error(
                    "max_decoded_bytes", limit, "The upstream's response body (bytes, decoded)"
                )
            yield piece
    tail: list[bytes] = []
    for inflater in inflaters:
        tail = [out for piece in tail for out in inflater.feed(piece)] + list(inflater.flush())
    for piece in tail:
        left -= len(piece)
        if left < 0:
            raise limit_error(
                "max_decoded_bytes", limit, "The upstream's response body (bytes, decoded)"
            )
        yield piece


async def read_body(
    response: httpx.Response,
    cap: int,
    *,
    truncate: bool,
    name: str = "max_json_body_bytes",
    what: str = "The upstream's JSON body (bytes)",
    limits_decoded: int | None = None,
) -> bytes:
    """The whole decoded body, at most ``cap`` bytes. ``truncate=True`` (error bodies): the
    first ``cap`` bytes, and a transport error just ends the read. ``truncate=False``: more
    than ``cap`` bytes raises ``ProviderError(code="limit_exceeded")`` naming ``name``."""
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in iter_body(response, limits_decoded):
            chunks.append(chunk)
            size += len(chunk)
            if size > cap:
                if truncate:
                    break
                raise limit_error(name, cap, what)
    except httpx.HTTPError:
        if not truncate:
            raise
    except ProviderError:
        if not truncate:
            raise
    return b"".join(chunks)[:cap]


async def read_capped(response: httpx.Response, limit: int = ERROR_BODY_LIMIT) -> bytes:
    """Up to ``limit`` decoded bytes of the body; a transport error just ends the read."""
    return await read_body(response, limit, truncate=True)


# ---- SSE ----------------------------------------------------------------------------------

#: What :func:`iter_sse` yields as the event name when the body ended inside an event.
INCOMPLETE = "\x00incomplete"


async def iter_sse(response: httpx.Response, limits: Any) -> AsyncIterator[tuple[str, str]]:
    """``(event, data)`` for each SSE event of the body (``event`` is "" when the event has no
    ``event:`` field or says ``message``).

    Lines are split here, on the decoded bytes (:func:`iter_body`): CR, LF and CRLF end a line
    (a CR at the end of a read waits for the next read); the complete lines of a read are
    decoded as UTF-8 together, so a multibyte character split across reads stays whole
    (invalid bytes become U+FFFD); a leading BOM is dropped. Each line then goes through
    httpx-sse's ``SSEDecoder`` (WHATWG rules: comments, ``event``/``data``/``id``/``retry``
    fields, multi-line data joined with ``\n``, dispatch on a blank line). A line longer than
    ``limits.max_sse_line_bytes`` raises ``ProviderError(code="limit_exceeded")``. When the
    body ends inside an event (data lines not followed by a blank line), the last item is
    ``(INCOMPLETE, <its data so far>)``.
    """
    max_line = limits.max_sse_line_bytes
    decode = SSEDecoder().decode
    buf = b""
    first = True
    pending: list[str] = []  # lines fed since the last blank line (for INCOMPLETE)
    async for chunk in iter_body(response, limits.max_decoded_bytes):
        if first:
            first = False
            if chunk.startswith(b"\xef\xbb\xbf"):
                chunk = chunk[3:]
        buf = buf + chunk if buf else chunk
        held = b""
        if b"\r" in buf:
            if buf.endswith(b"\r"):  # maybe the first half of a CRLF: decide with the next read
                buf, held = buf[:-1], b"\r"
            buf = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        complete, newline, rest = buf.rpartition(b"\n")
        buf = rest + held
        if len(buf) > max_line:
            raise limit_error("max_sse_line_bytes", max_line, "A line of the event stream (bytes)")
        if not newline:
            continue
        if len(complete) > max_line and any(len(x) > max_line for x in complete.split(b"\n")):
            raise limit_error("max_sse_line_bytes", max_line, "A line of the event stream (bytes)")
        lines = complete.decode("utf-8", "replace").split("\n")
        for line in lines:
            if line:
                decode(line)
                continue
            sse = decode("")
            if sse is not None:
                event = sse.event
                yield ("" if event == "message" else event), sse.data
        if "" in lines:
            pending = lines[len(lines) - lines[::-1].index("") :]
        else:
            pending.extend(lines)
    if buf.endswith(b"\r"):  # the body ended right after a CR: that line is complete
        line = buf[:-1].decode("utf-8", "replace")
        buf = b""
        if line:
            decode(line)
            pending.append(line)
        else:
            sse = decode("")
            pending = []
            if sse is not None:
                yield ("" if sse.event == "message" else sse.event), sse.data
    if buf:
        pending.append(buf.decode("utf-8", "replace"))
    data_lines = [line for line in pending if line.startswith("data")]
    if data_lines:
        data = "\n".join(line.partition(":")[2].removeprefix(" ") for line in data_lines)
        yield INCOMPLETE, data



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
    write / pool, named in the message), ``base_url_refused`` (the host resolved to an address
    the rules refuse, :class:`AddressRefused`), ``connection_error`` (refused, DNS, TLS, closed before
    a response), ``stream_cut`` (read error after the headers), ``stream_error`` (other failures
    while reading the body), ``invalid_config`` (h11 refused to send a header value).
    """
    detail = scrub(str(exc) or type(exc).__name__, secrets)
    if isinstance(exc, AddressRefused):
        return ProviderError(str(exc), code="base_url_refused")
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

_raw_decode = json.JSONDecoder().raw_decode
_WHITESPACE = " \t\n\r"


def loads(text: str) -> Any:
    """``json.loads`` or :data:`NOT_JSON`. No exception escapes: a ``JSONDecodeError`` carries
    the whole document (which may echo a key) and would be chained to what is raised next; JSON
    nested too deeply raises ``RecursionError``, also caught.

    On the hot path (one call per SSE event) it calls ``JSONDecoder.raw_decode`` directly
    (same parser and result as ``json.loads``; ``bench/micro.py`` measured 1.9 against 3.2 µs
    for a typical chunk) and checks that only whitespace follows; text with leading whitespace
    goes through ``json.loads``."""
    try:
        if text[:1] in _WHITESPACE:
            return json.loads(text)
        value, end = _raw_decode(text)
    except (ValueError, RecursionError):
        return NOT_JSON
    if end != len(text) and not text[end:].isspace():
        return NOT_JSON  # "Extra data", as json.loads would say
    return value


async def drain(events: AsyncIterator[Any]) -> None:
    """Read what follows the terminal event (normally only the end of the chunked body) for at
    most :data:`DRAIN_AFTER_DONE_S`, so the connection can go back to the pool instead of being
    closed half-read. What comes after the terminal event is ignored."""
    with contextlib.suppress(TimeoutError, httpx.HTTPError, ProviderError):
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

    def interpret(self, event: str, payload: Any, data: str) -> list[Event]:
        """Events for one SSE event: ``event`` is "" without an ``event:`` line, ``payload``
        the decoded JSON data (None only for an ``error`` event whose data is not JSON),
        ``data`` the raw text. Raises ``ProviderError`` for an error event, after putting
        events to release (usage, a ``ModelOutputError``) where :meth:`end` returns them."""
        ...

    def relay_json(self, text: str) -> list[Event]:
        """Events for a whole 2xx JSON body (a server that ignored ``stream: true``)."""
        ...

    def end(self) -> list[Event]:
        """Events still held (called at the end and before an error is raised; idempotent)."""
        ...


async def _failing(error: ProviderError) -> AsyncIterator[Event]:
    raise error
    yield  # pragma: no cover - makes this an async generator


def stream_sse(
    client: httpx.AsyncClient,
    config: EndpointConfig,
    url: str,
    headers: dict[str, str],
    body: dict[str, Any],
    make_state: Callable[[list[str], str | None], StreamState],
    *,
    error: ProviderError | None = None,
    api_style: str = "",
) -> AsyncIterator[Event]:
    """POST ``body`` as JSON to ``url`` and relay the SSE answer through a :class:`StreamState`.

    ``make_state(secrets, request_id)`` is called once the 2xx headers arrived (``secrets``:
    every form of the endpoint's secrets, for scrubbing). Yields ``ResponseStarted(status,
    request_id)``, then per SSE event a ``RawEvent(event, data)`` (scrubbed and within the
    Inspect budget; comments are not events) followed by what the state makes of it, passed
    through a :class:`chat.providers.text.StreamGuard` (valid Unicode, answer budget). Data
    that is not JSON gives a ``StreamWarning`` (never silence); so does a body that ends inside
    an event. ``data: [DONE]`` or a state that says ``done`` ends the stream (the rest of the
    body is drained for ≤ 0.5 s); a 2xx JSON body is one ``RawEvent`` plus
    ``state.relay_json``. ``error`` (e.g. unsupported attachments) is raised at the first
    iteration, before anything is sent. ``api_style`` names the adapter in error messages
    (default: ``config.api_style``).

    Raises ``ProviderError`` only: :func:`chat.providers.errors.parse_error` for a non-2xx
    status (preceded by a ``ModelOutputError`` event when the body carries the model's raw
    output; a 404/405 whose body does not mention a model becomes ``path_not_found``, see
    :func:`chat.providers.errors.route_error`); the state's error for an error event;
    ``limit_exceeded`` past a :class:`chat.providers.base.Limits` limit; ``stream_cut`` when
    the body ends (or a read error happens) before the state is ``finished`` or ``done``;
    :func:`transport_error` codes for transport failures (``base_url_refused`` when the host
    resolves to a refused address). A transport failure after ``finished`` ends the stream
    normally. Cancellation or ``aclose()`` closes the upstream response.
    """
    if error is not None:
        return _failing(error)
    return _stream_sse(
        client, config, url, headers, body, make_state, api_style or config.api_style
    )


async def _stream_sse(
    client: httpx.AsyncClient,
    config: EndpointConfig,
    url: str,
    headers: dict[str, str],
    body: dict[str, Any],
    make_state: Callable[[list[str], str | None], StreamState],
    api_style: str,
) -> AsyncIterator[Event]:
    limits = config.effective_limits()
    secrets = secret_variants(config.secrets())
    host = host_of(url)
    encoded = encode_json_body(body)
    if "headers" in encoded:
        headers = {**headers, **encoded.pop("headers")}
    http_request = build_http_request(client, "POST", url, headers, secrets, config, **encoded)
    guard = StreamGuard(limits, secrets)
    started = False
    state: StreamState | None = None
    failure: httpx.HTTPError | None = None
    try:
        async with send_stream(client, http_request) as response:
            started = True
            if not response.is_success:
                raw = await read_body(
                    response, limits.max_error_body_bytes, truncate=True,
                    limits_decoded=limits.max_decoded_bytes,
                )
                error = parse_error(response.status_code, response.headers, raw, secrets)
                error = route_error(error, raw, url, api_style)
                output = model_output_from_body(raw, secrets)
                if output is not None:
                    for event in guard.process([output]):
                        yield event
                raise error
            request_id = request_id_from_headers(response.headers)
            state = make_state(secrets, request_id)
            yield ResponseStarted(response.status_code, request_id)

            content_type = response.headers.get("content-type", "").lower()
            if "json" in content_type and "event-stream" not in content_type:
                raw = await read_body(
                    response, limits.max_json_body_bytes, truncate=False,
                    limits_decoded=limits.max_decoded_bytes,
                )
                text = raw.decode("utf-8", errors="replace")
                yield guard.raw("", text)
                for event in guard.process(state.relay_json(text)):
                    yield event
                if guard.error is not None:
                    raise guard.error
                state.done = True
                for event in guard.process(state.end()) + guard.flush():
                    yield event
                return

            process = guard.process
            interpret = state.interpret
            async with contextlib.aclosing(iter_sse(response, limits)) as sse_events:
                async for name, data in sse_events:
                    if not data and not name:
                        continue  # a blank dispatch after an id:/retry: line
                    if name is INCOMPLETE:
                        yield guard.warning(data, "incomplete_event")
                        continue
                    yield guard.raw(name, data)
                    if data == "[DONE]" or (data[:1].isspace() and data.strip() == "[DONE]"):
                        state.done = True
                        break
                    payload = loads(data)
                    if payload is NOT_JSON:
                        if name != "error":
                            yield guard.warning(data)
                            continue
                        payload = None
                    events = interpret(name, payload, data)
                    if events:
                        for event in process(events):
                            yield event
                        if guard.error is not None:
                            raise guard.error
                    if state.done:
                        break
                if state.done:
                    await drain(sse_events)
            for event in guard.process(state.end()) + guard.flush():
                yield event
            if guard.error is not None:
                raise guard.error
            if not state.done and not state.finished:
                raise ProviderError(STREAM_CUT_MESSAGE, code="stream_cut")
    except ProviderError as exc:
        if state is not None:
            for event in guard.process(state.end()) + guard.flush():
                yield event
        raise exc from None
    except httpx.HTTPError as exc:
        failure = exc  # handled below, outside the except block, so it is not chained
    if failure is not None:
        if state is not None:
            for event in guard.process(state.end()) + guard.flush():
                yield event
            if state.finished and isinstance(failure, INTERRUPTIONS):
                return  # the answer was complete; only trailing events were lost
        raise transport_error(failure, host, secrets, started=started)


# ---- the non-streaming call shared by the adapters ----------------------------------------


async def request_json(
    client: httpx.AsyncClient,
    config: EndpointConfig,
    method: str,
    url: str,
    headers: dict[str, str],
    *,
    body: dict[str, Any] | None = None,
    what: str = "answer",
) -> tuple[httpx.Response, Any, str]:
    """One non-streaming call that answers JSON (``GET /models``, ``POST count_tokens``):
    ``(response, payload, text)`` for a 2xx JSON body (``payload`` decoded, strings not yet
    checked; ``text`` the body, for excerpts).

    The body is read through :func:`iter_body` within ``Limits.max_json_body_bytes``; the
    request carries the endpoint's ``allow_private`` policy. Raises ``ProviderError``:
    :func:`chat.providers.errors.parse_error` for a non-2xx status (error body read within
    ``max_error_body_bytes``), :func:`transport_error` codes, ``limit_exceeded``,
    ``bad_response`` ("The <what> is not JSON") for a 2xx body that is not JSON.
    """
    limits = config.effective_limits()
    secrets = secret_variants(config.secrets())
    kwargs: dict[str, Any] = encode_json_body(body) if body is not None else {}
    if "headers" in kwargs:
        headers = {**headers, **kwargs.pop("headers")}
    http_request = build_http_request(client, method, url, headers, secrets, config, **kwargs)
    failure: httpx.HTTPError | None = None
    try:
        async with send_stream(client, http_request) as response:
            if not response.is_success:
                raw = await read_body(
                    response, limits.max_error_body_bytes, truncate=True,
                    limits_decoded=limits.max_decoded_bytes,
                )
                raise parse_error(response.status_code, response.headers, raw, secrets)
            raw = await read_body(
                response, limits.max_json_body_bytes, truncate=False,
                what=f"The {what} (bytes)", limits_decoded=limits.max_decoded_bytes,
            )
    except httpx.HTTPError as exc:
        failure = exc  # raised below, outside the except block, so it is not chained
    if failure is not None:
        raise transport_error(failure, host_of(url), secrets, started=False)
    text = raw.decode("utf-8", errors="replace")
    payload = loads(text)
    if payload is NOT_JSON:
        raise ProviderError(
            f"The {what} is not JSON",
            status=response.status_code,
            code="bad_response",
            body_excerpt=scrub(text, secrets)[:EXCERPT_CHARS],
        )
    return response, payload, text
