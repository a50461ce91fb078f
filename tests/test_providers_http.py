"""Tests for ``chat.providers.http``: the per-loop client, base URL checks, the DNS-pinned
transport and SSE line splitting (no network: ``socket.getaddrinfo`` is monkeypatched or a
resolver is injected wherever a host name is involved; servers listen on loopback). No Django,
no DB."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import socket
import ssl

import httpcore
import httpx
import pytest

from chat.providers import anthropic_messages, base, get_adapter, http, openai_chat, transport
from chat.providers.base import ChatMessage, ChatRequest, EndpointConfig, ProviderError


def fake_getaddrinfo(table: dict[str, list[str]]):
    """A getaddrinfo that resolves names from ``table`` (and literal IPs as themselves)."""
    real = socket.getaddrinfo

    def getaddrinfo(host, port, *args, **kwargs):
        if host in table:
            out = []
            for address in table[host]:
                family = socket.AF_INET6 if ":" in address else socket.AF_INET
                sockaddr = (address, port, 0, 0) if family == socket.AF_INET6 else (address, port)
                out.append((family, socket.SOCK_STREAM, 6, "", sockaddr))
            return out
        try:
            return real(host, port, *args, flags=socket.AI_NUMERICHOST)
        except socket.gaierror:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known") from None

    return getaddrinfo


@pytest.fixture
def dns(monkeypatch):
    table: dict[str, list[str]] = {
        "localhost": ["127.0.0.1", "::1"],
        "api.sambanova.ai": ["34.120.20.10"],
        "evil.example": ["169.254.169.254"],
        "mixed.example": ["93.184.215.14", "169.254.10.1"],
        "v6-linklocal.example": ["fe80::1%eth0"],
        "lan.example": ["192.168.1.20"],
        "aws-v6.example": ["fd00:ec2::254"],
    }
    monkeypatch.setattr(transport.socket, "getaddrinfo", fake_getaddrinfo(table))
    return table


# ---- base URL checks ----------------------------------------------------------------------

REFUSED_ALWAYS = [
    ("http://169.254.169.254/latest/meta-data/", "cloud metadata"),
    ("http://[fd00:ec2::254]/", "cloud metadata"),
    ("http://100.100.100.200/latest/meta-data", "cloud metadata"),
    ("http://metadata.google.internal/computeMetadata/v1", "cloud metadata"),
    ("http://METADATA.GOOGLE.INTERNAL./computeMetadata/v1", "cloud metadata"),
    ("http://169.254.1.1:8080/v1", "link-local"),
    ("http://[fe80::1]:8080/v1", "link-local"),
    ("http://[::ffff:169.254.169.254]/", "cloud metadata"),
    ("http://[64:ff9b::a9fe:a9fe]/", "cloud metadata"),
    ("http://[2002:a9fe:0101::1]/", "link-local"),
    ("http://0.0.0.0:8000/v1", "unspecified"),
    ("http://[::]:8000/v1", "unspecified"),
    ("http://224.0.0.1/v1", "multicast"),
    ("http://[ff02::1]/v1", "multicast"),
    ("http://255.255.255.255/v1", "broadcast"),
    ("http://evil.example/v1", "resolves to 169.254.169.254"),
    ("https://mixed.example/v1", "link-local"),
    ("https://v6-linklocal.example/v1", "link-local"),
    ("https://aws-v6.example/v1", "cloud metadata"),
    ("ftp://api.sambanova.ai/v1", "http:// or https://"),
    ("api.sambanova.ai/v1", "http:// or https://"),
    ("file:///etc/passwd", "http:// or https://"),
    ("https:///v1", "no host"),
    ("https://user:pw@api.sambanova.ai/v1", "user name or password"),
    ("https://api.sambanova.ai/v1?x=1", "query string"),
    ("https://api.sambanova.ai/v1#frag", "fragment"),
    ("https://api.sambanova.ai:99999/v1", "Invalid base URL"),
    ("https://nowhere.invalid/v1", "Could not resolve"),
]


@pytest.mark.parametrize(("url", "fragment"), REFUSED_ALWAYS)
@pytest.mark.parametrize("allow_private", [True, False])
def test_refused(dns, url, fragment, allow_private):
    with pytest.raises(ValueError) as info:
        http.check_base_url(url, allow_private=allow_private)
    assert fragment in str(info.value)


ALLOWED_BY_DEFAULT = [
    "http://127.0.0.1:8080/v1",
    "http://localhost:11434/v1",
    "http://[::1]:8000/v1",
    "http://10.0.0.5/v1",
    "http://172.16.3.4:8000/v1",
    "http://lan.example/v1",
    "http://[fd12:3456::1]/v1",
    "http://[::ffff:127.0.0.1]/v1",
]


@pytest.mark.parametrize("url", ALLOWED_BY_DEFAULT)
def test_loopback_and_private_allowed_by_default(dns, url):
    assert http.check_base_url(url) is None


@pytest.mark.parametrize("url", ALLOWED_BY_DEFAULT)
def test_loopback_and_private_refused_when_disabled(dns, url):
    with pytest.raises(ValueError, match="private addresses are disabled"):
        http.check_base_url(url, allow_private=False)


@pytest.mark.parametrize(
    "url", ["https://api.sambanova.ai/v1", "https://api.sambanova.ai/v1/", "http://8.8.8.8/v1"]
)
def test_public_hosts_allowed_even_without_private(dns, url):
    assert http.check_base_url(url, allow_private=False) is None


def test_message_names_the_resolved_address(dns):
    with pytest.raises(ValueError) as info:
        http.check_base_url("http://evil.example/v1")
    assert str(info.value) == (
        "The base URL host 'evil.example' resolves to 169.254.169.254, which is "
        "a cloud metadata address and cannot be used"
    )


def test_metadata_hostname_refused_without_dns(monkeypatch):
    def boom(*args, **kwargs):  # pragma: no cover - must not be called
        raise AssertionError("resolved")

    monkeypatch.setattr(transport.socket, "getaddrinfo", boom)
    with pytest.raises(ValueError, match="cloud metadata"):
        http.check_base_url("http://metadata.google.internal/")


async def test_async_variant(dns):
    await http.acheck_base_url("https://api.sambanova.ai/v1")
    with pytest.raises(ValueError, match="link-local"):
        await http.acheck_base_url("http://169.254.0.9/")
    with pytest.raises(ValueError, match="loopback"):
        await http.acheck_base_url("http://localhost:8080/v1", allow_private=False)


# ---- the per-loop client ------------------------------------------------------------------


async def test_client_settings():
    client = http.get_client()
    try:
        assert isinstance(client, httpx.AsyncClient)
        assert client.follow_redirects is False
        timeout = client.timeout
        assert (timeout.connect, timeout.read, timeout.write, timeout.pool) == (5, 600, 30, 10)
        assert http.get_client() is client
    finally:
        await http.close_clients()
    assert client.is_closed


async def test_closed_client_is_replaced():
    first = http.get_client()
    await http.close_clients()
    second = http.get_client()
    assert second is not first and not second.is_closed
    await http.close_clients()


def test_one_client_per_loop():
    seen = []

    async def grab():
        client = http.get_client()
        assert http.get_client() is client
        seen.append(client)
        await http.close_clients()

    asyncio.run(grab())
    asyncio.run(grab())
    assert len(seen) == 2 and seen[0] is not seen[1]


async def test_concurrent_tasks_share_the_loop_client():
    async def grab():
        await asyncio.sleep(0)
        return http.get_client()

    clients = await asyncio.gather(*(grab() for _ in range(5)))
    assert len({id(c) for c in clients}) == 1
    await http.close_clients()


def test_get_client_needs_a_running_loop():
    with pytest.raises(RuntimeError):
        http.get_client()


async def test_make_client_does_not_follow_redirects():
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(str(request.url))
        return httpx.Response(302, headers={"location": "https://elsewhere.test/"})

    async with http.make_client(transport=httpx.MockTransport(handler)) as client:
        response = await client.get("https://upstream.test/v1/models")
    assert response.status_code == 302
    assert calls == ["https://upstream.test/v1/models"]


def test_clients_of_closed_loops_are_forgotten():
    async def grab():
        return http.get_client()

    first = asyncio.run(grab())  # its loop ends without close_clients()

    async def grab_and_close():
        http.get_client()
        await http.close_clients()

    asyncio.run(grab_and_close())
    assert not any(client is first for client in http._clients.values())


# ---- IPv6 spellings of IPv4 addresses (issue 8 item 4) -------------------------------------

TEREDO_METADATA = "2001:0:4136:e378:8000:63bf:5601:5601"  # Teredo client 169.254.169.254


@pytest.mark.parametrize(
    ("url", "fragment"),
    [
        ("http://[::169.254.169.254]/", "cloud metadata"),  # IPv4-compatible
        ("http://[::a9fe:101]/v1", "link-local"),  # IPv4-compatible, hex spelling
        ("http://[::ffff:0:169.254.169.254]/", "cloud metadata"),  # SIIT
        ("http://[::ffff:0:a9fe:a9fe]/", "cloud metadata"),  # SIIT, hex spelling
        ("http://[::ffff:0:0.0.0.0]/", "unspecified"),
        ("http://[64:ff9b:1::a9fe:a9fe]/", "cloud metadata"),  # local-use NAT64 (RFC 8215)
        (f"http://[{TEREDO_METADATA}]/", "cloud metadata"),
    ],
)
@pytest.mark.parametrize("allow_private", [True, False])
def test_ipv6_spellings_of_refused_ipv4(dns, url, fragment, allow_private):
    with pytest.raises(ValueError, match=fragment):
        http.check_base_url(url, allow_private=allow_private)


def test_ipv4_compatible_loopback_is_judged_as_loopback(dns):
    assert http.check_base_url("http://[::127.0.0.1]:8000/v1") is None
    with pytest.raises(ValueError, match="loopback"):
        http.check_base_url("http://[::127.0.0.1]:8000/v1", allow_private=False)
    # :: and ::1 are themselves, not IPv4-compatible 0.0.0.0 / 0.0.0.1
    assert http.check_base_url("http://[::1]:8000/v1") is None
    with pytest.raises(ValueError, match="unspecified"):
        http.check_base_url("http://[::]:8000/v1")


# ---- the pinned transport (issue 8 item 4) -------------------------------------------------


class Recorder(httpcore.AsyncNetworkBackend):
    """The project's asyncio backend, recording every address it was asked to connect to."""

    def __init__(self) -> None:
        self.inner = http.AsyncioBackend()
        self.connects: list[tuple[str, int]] = []

    async def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):  # noqa: ASYNC109
        self.connects.append((host, port))
        return await self.inner.connect_tcp(host, port, timeout=timeout)

    async def sleep(self, seconds):
        await self.inner.sleep(seconds)


class Answers:
    """A resolver that answers from a list, one answer per lookup (the last one repeats)."""

    def __init__(self, *answers: list[str]) -> None:
        self.answers = list(answers)
        self.lookups: list[str] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.lookups.append(host)
        return self.answers[min(len(self.lookups), len(self.answers)) - 1]


MODELS_BODY = b'{"object":"list","data":[{"id":"m1"}]}'


@contextlib.asynccontextmanager
async def http_server(*, close: bool = False, ssl_context=None, drop: bool = False):
    """A loopback HTTP/1.1 server answering every request with a model list. Yields
    ``(port, seen)``; ``seen`` collects ``(host header, sni)`` per request. ``close``: say
    ``connection: close`` and close; ``drop``: promise keep-alive, then close anyway."""
    seen: list[tuple[str, str | None]] = []
    sni: list[str | None] = []
    if ssl_context is not None:
        ssl_context.sni_callback = lambda sslobj, name, ctx: sni.append(name)

    async def handle(reader, writer):
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                host = next((v.split(":", 1)[1].strip() for v in lines if v.lower().startswith("host:")), "")
                seen.append((host, sni[-1] if sni else None))
                connection = b"close" if close else b"keep-alive"
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
                    + str(len(MODELS_BODY)).encode() + b"\r\nconnection: " + connection + b"\r\n\r\n" + MODELS_BODY
                )
                await writer.drain()
                if close or drop:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=ssl_context)
    port = server.sockets[0].getsockname()[1]
    try:
        yield port, seen
    finally:
        server.close()
        await server.wait_closed()


def pinned_client(resolver, recorder, **kwargs):
    transport = http.PinnedTransport(resolver=resolver, backend=recorder, **kwargs)
    return http.make_client(transport=transport)


async def test_a_second_lookup_cannot_redirect_the_connection():
    """The first connection goes to the address the first lookup gave and checked; when a
    new connection is needed, the new answer (a metadata address) is checked before any
    connection is made and refused."""
    resolver = Answers(["127.0.0.1"], ["169.254.169.254"])
    recorder = Recorder()
    async with http_server(close=True) as (port, seen):
        config = EndpointConfig(base_url=f"http://rebind.test:{port}/v1")
        async with pinned_client(resolver, recorder) as client:
            assert [m.id for m in await openai_chat.list_models(client, config)] == ["m1"]
            with pytest.raises(ProviderError) as info:
                await openai_chat.list_models(client, config)
    assert info.value.code == "base_url_refused"
    assert "169.254.169.254" in info.value.message and "cloud metadata" in info.value.message
    assert resolver.lookups == ["rebind.test", "rebind.test"]
    assert recorder.connects == [("127.0.0.1", port)]  # never to the second answer
    assert seen == [(f"rebind.test:{port}", None)]  # the Host header is the host name


async def test_one_lookup_per_connection_and_the_checked_address_is_used():
    resolver = Answers(["127.0.0.1"])
    recorder = Recorder()
    async with http_server() as (port, seen):
        config = EndpointConfig(base_url=f"http://keepalive.test:{port}/v1")
        async with pinned_client(resolver, recorder) as client:
            for _ in range(3):
                await openai_chat.list_models(client, config)
    assert resolver.lookups == ["keepalive.test"]  # a kept-alive connection needs no lookup
    assert recorder.connects == [("127.0.0.1", port)]
    assert len(seen) == 3


async def test_every_resolved_address_is_checked():
    resolver = Answers(["127.0.0.1", "169.254.10.1"])
    recorder = Recorder()
    async with pinned_client(resolver, recorder) as client:
        with pytest.raises(ProviderError) as info:
            await openai_chat.list_models(client, EndpointConfig(base_url="http://mixed.test:9/v1"))
    assert info.value.code == "base_url_refused" and "link-local" in info.value.message
    assert recorder.connects == []


async def test_allow_private_per_endpoint_and_module_default(monkeypatch):
    resolver = Answers(["127.0.0.1"])
    recorder = Recorder()
    async with http_server() as (port, _seen):
        url = f"http://lan.test:{port}/v1"
        async with pinned_client(resolver, recorder) as client:
            with pytest.raises(ProviderError) as info:
                await openai_chat.list_models(client, EndpointConfig(base_url=url, allow_private=False))
            assert info.value.code == "base_url_refused" and "private addresses are disabled" in info.value.message
            # the simulator (loopback) keeps working when the caller allows it explicitly
            assert await openai_chat.list_models(client, EndpointConfig(base_url=url, allow_private=True))
            monkeypatch.setattr(base, "ALLOW_PRIVATE", False)
            with pytest.raises(ProviderError, match="private addresses are disabled"):
                await openai_chat.list_models(client, EndpointConfig(base_url=url))
    # the refused requests never connected; the allowed one did, once
    assert recorder.connects == [("127.0.0.1", port)]


def _self_signed(host: str, tmp_path):
    """A self-signed certificate for ``host``: (server context, client context trusting it)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(host)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_pem = cert.public_bytes(serialization.Encoding.PEM)
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    (tmp_path / "cert.pem").write_bytes(cert_pem)
    (tmp_path / "key.pem").write_bytes(key_pem)
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    client = ssl.create_default_context(cadata=cert_pem.decode())
    return server, client


async def test_tls_keeps_the_host_name_for_sni_and_certificate_checks(tmp_path):
    server_ctx, client_ctx = _self_signed("upstream.test", tmp_path)
    resolver = Answers(["127.0.0.1"])
    recorder = Recorder()
    async with http_server(ssl_context=server_ctx) as (port, seen):
        config = EndpointConfig(base_url=f"https://upstream.test:{port}/v1", api_key="sk-tls-1234")
        async with pinned_client(resolver, recorder, verify=client_ctx) as client:
            models = await openai_chat.list_models(client, config)
    assert [m.id for m in models] == ["m1"]
    assert recorder.connects == [("127.0.0.1", port)]  # connected to the checked IP …
    assert seen == [(f"upstream.test:{port}", "upstream.test")]  # … with Host and SNI the name


async def test_tls_certificate_for_another_name_is_refused(tmp_path):
    server_ctx, client_ctx = _self_signed("other.test", tmp_path)
    recorder = Recorder()
    async with http_server(ssl_context=server_ctx) as (port, seen):
        config = EndpointConfig(base_url=f"https://upstream.test:{port}/v1")
        async with pinned_client(Answers(["127.0.0.1"]), recorder, verify=client_ctx) as client:
            with pytest.raises(ProviderError) as info:
                await openai_chat.list_models(client, config)
    assert info.value.code == "connection_error"
    assert seen == []


async def test_make_client_pins_by_default_and_asks_only_for_bounded_encodings():
    client = http.make_client()
    try:
        assert isinstance(client._transport, http.PinnedTransport)
        assert client.headers["accept-encoding"] == "gzip, deflate"
    finally:
        await client.aclose()


async def test_streams_go_through_the_pinned_transport():
    """A chat stream (not only /models) is refused before connecting."""
    recorder = Recorder()
    async with pinned_client(Answers(["169.254.169.254"]), recorder) as client:
        config = EndpointConfig(base_url="http://evil.test/v1")
        request = ChatRequest(model="m", messages=(ChatMessage("user", "hi"),))
        for style in ("openai_chat", "anthropic_messages", "openai_responses"):
            with pytest.raises(ProviderError) as info:
                async for _ in get_adapter(style).stream(client, config, request):
                    pass
            assert info.value.code == "base_url_refused", style
        with pytest.raises(ProviderError, match="cloud metadata"):
            await anthropic_messages.count_tokens(client, config, request)
    assert recorder.connects == []


# ---- SSE line splitting --------------------------------------------------------------------


async def _sse_of(pieces: list[bytes]) -> list[tuple[str, str]]:
    class Pieces(httpx.AsyncByteStream):
        async def __aiter__(self):
            for piece in pieces:
                yield piece

    response = httpx.Response(200, stream=Pieces())
    return [item async for item in http.iter_sse(response, base.Limits())]


@pytest.mark.parametrize(
    ("pieces", "expected"),
    [
        ([b"data: a\r", b"\ndata: b\r\n\r\n"], [("", "a\nb")]),  # CRLF split across reads
        ([b"data: a\r", b"\r"], [("", "a")]),  # CR line ends, body ends after a CR
        ([b"\xef\xbb\xbfdata: x\n\n"], [("", "x")]),  # a BOM is dropped
        ([b"event: ping\ndata: 1\n\n: c\n\ndata: 2\n", b"\n"], [("ping", "1"), ("", "2")]),
        ([b"data: caf\xc3", b"\xa9\n\n"], [("", "café")]),  # UTF-8 split inside a character
        ([b"data: half"], [(http.INCOMPLETE, "half")]),  # the body ended inside an event
    ],
)
async def test_iter_sse(pieces, expected):
    assert await _sse_of(pieces) == expected


async def test_a_dropped_keepalive_connection_is_not_reused():
    """The server promised keep-alive but closed the idle connection: the asyncio stream
    reports it readable (EOF), so the pool opens a new connection instead of failing."""
    resolver = Answers(["127.0.0.1"])
    recorder = Recorder()
    async with http_server(drop=True) as (port, seen):
        config = EndpointConfig(base_url=f"http://drop.test:{port}/v1")
        async with pinned_client(resolver, recorder) as client:
            await openai_chat.list_models(client, config)
            await asyncio.sleep(0.05)  # the FIN arrives
            await openai_chat.list_models(client, config)
    assert len(seen) == 2
    assert recorder.connects == [("127.0.0.1", port), ("127.0.0.1", port)]


async def test_asyncio_backend_connection_errors_are_httpcore_errors():
    backend = http.AsyncioBackend()
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(httpcore.ConnectError):
        await backend.connect_tcp("127.0.0.1", port, timeout=2)
