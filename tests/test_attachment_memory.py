"""Issue 8 item 12 (memory side): a turn holds each attachment's bytes once.

Base64 is made while the request body is written, in pieces (``Base64Media``), so sending 8 MiB
of images allocates a small, fixed amount beyond the bytes themselves, in every API style, and
the body the upstream receives is byte for byte what ``json=`` with the full base64 text sends.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import tracemalloc

import httpx
import pytest

from chat.providers import get_adapter
from chat.providers.base import (
    Base64Media,
    ChatMessage,
    ChatRequest,
    ContentPart,
    EndpointConfig,
    encode_json_body,
    json_default,
)

IMAGES = 4
IMAGE_BYTES = 2 * 1024 * 1024
STYLES = ["openai_chat", "anthropic_messages", "openai_responses"]


def request_with_images(images: list[bytes]) -> ChatRequest:
    parts = tuple(ContentPart("image", "image/png", data=data, filename=f"i{i}.png") for i, data in enumerate(images))
    return ChatRequest(model="m", messages=(ChatMessage("user", "What is in these?", parts=parts),))


@pytest.mark.parametrize("style", STYLES)
def test_media_body_equals_the_json_body_and_holds_no_base64_copy(style: str) -> None:
    images = [os.urandom(IMAGE_BYTES) for _ in range(IMAGES)]
    config = EndpointConfig(base_url="http://upstream.test/v1", api_key="sk-x", api_style=style)
    _url, _headers, body = get_adapter(style).build_request(config, request_with_images(images))
    expected = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False,
                          default=json_default).encode()
    assert base64.b64encode(images[0]) in expected  # the images are really in the body
    received = hashlib.sha256()
    count = {"bytes": 0, "content_length": 0, "chunked": False}

    async def upstream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # A bare HTTP/1.1 server that hashes the body as it arrives (httpx's MockTransport would
        # read the whole request into memory first).
        head = (await reader.readuntil(b"\r\n\r\n")).decode().lower()
        count["chunked"] = "transfer-encoding" in head
        count["content_length"] = int(head.split("content-length:")[1].split("\r\n")[0])
        left = count["content_length"]
        while left:
            chunk = await reader.read(min(left, 1 << 16))
            received.update(chunk)
            count["bytes"] += len(chunk)
            left -= len(chunk)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}")
        await writer.drain()
        writer.close()

    async def send() -> int:
        server = await asyncio.start_server(upstream, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with httpx.AsyncClient() as client:
            kwargs = encode_json_body(body)
            headers = kwargs.pop("headers")
            tracemalloc.start()
            tracemalloc.reset_peak()
            response = await client.send(client.build_request(
                "POST", f"http://127.0.0.1:{port}/v1/x", headers=headers, **kwargs))
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            assert response.status_code == 200
        server.close()
        return peak

    peak = asyncio.run(send())
    assert received.hexdigest() == hashlib.sha256(expected).hexdigest()
    assert count["bytes"] == count["content_length"] == len(expected)
    assert not count["chunked"]  # a fixed Content-Length: servers that refuse chunked bodies work
    # Encoding and sending 8 MiB of images allocates well under one base64 copy of one image
    # (the whole base64 text of them all would be 11 MiB; before, three copies were held).
    print(f"peak {peak:,} B")
    assert peak < IMAGE_BYTES, f"peak {peak:,} B while sending {IMAGES * IMAGE_BYTES:,} B of images"


def test_a_body_without_media_goes_as_plain_json() -> None:
    assert encode_json_body({"a": 1}) == {"json": {"a": 1}}


def test_base64_media_pieces_join_into_one_valid_text() -> None:
    data = os.urandom(Base64Media.CHUNK * 2 + 7)
    media = Base64Media(data, "data:image/png;base64,")
    joined = b"".join(media.chunks())
    assert joined.decode() == media.text() == "data:image/png;base64," + base64.b64encode(data).decode()
    assert len(joined) == media.encoded_length()
    assert media == media.text() and repr(media) == f"Base64Media('data:image/png;base64,', {len(data)} bytes)"
