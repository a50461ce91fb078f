"""Tests for ``chat.providers.http``: the per-loop client and base URL checks (no network:
``socket.getaddrinfo`` is monkeypatched wherever a host name is involved). No Django, no DB."""

from __future__ import annotations

import asyncio
import socket

import httpx
import pytest

from chat.providers import http


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
    monkeypatch.setattr(http.socket, "getaddrinfo", fake_getaddrinfo(table))
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

    monkeypatch.setattr(http.socket, "getaddrinfo", boom)
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
