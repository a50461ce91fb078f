"""Adapter for ``POST {base}/embeddings`` (seed 002 ``EmbeddingsRequest`` /
``EmbeddingsResponse``; llama-server ``/v1/embeddings``).

One non-streaming call through :func:`chat.providers.http.request_json` (pinned transport,
body limits, errors parsed as for chat). ``encoding_format`` ``float`` gives JSON numbers;
``base64`` gives the vector as base64 of little-endian float32 (seed 002), decoded here.

May import: the standard library, httpx and this package (no Django).
"""

from __future__ import annotations

import base64
import binascii
import math
import struct
from dataclasses import dataclass, field
from typing import Any

import httpx

from .base import EndpointConfig, ProviderError, Usage, scrub
from .errors import secret_variants
from .http import request_json
from .openai_chat import _auth_headers, normalize_usage

API_STYLE = "openai_embeddings"
PATH = "/embeddings"


@dataclass(frozen=True)
class EmbeddingsRequest:
    """``inputs``: the texts (one vector each); ``encoding_format``: ``"float"``, ``"base64"``
    or ``""`` (left out of the request, the server's default)."""

    model: str
    inputs: tuple[str, ...]
    encoding_format: str = ""


@dataclass(frozen=True)
class EmbeddingsResult:
    """The decoded answer: ``vectors[i]`` is the vector of ``inputs[i]`` (ordered by the
    response's ``index``), floats; ``usage`` as for chat; ``model`` as the server named it;
    ``raw``: the body text (for Inspect), scrubbed; ``request_id`` from the headers."""

    vectors: list[list[float]]
    usage: Usage
    model: str = ""
    raw: str = field(default="", repr=False)
    request_id: str | None = None


def build_request(config: EndpointConfig, request: EmbeddingsRequest) -> tuple[str, dict[str, str], dict[str, Any]]:
    """``(url, headers, json_body)`` (pure; headers carry the key: redact before showing)."""
    url = config.base_url.rstrip("/") + PATH
    headers = _auth_headers(config, "application/json")
    headers.update(config.extra_headers)
    body: dict[str, Any] = {"model": request.model, "input": list(request.inputs)}
    if request.encoding_format:
        body["encoding_format"] = request.encoding_format
    return url, headers, body


def decode_vector(value: Any) -> list[float]:
    """One ``embedding`` value: a list of numbers, or base64 of little-endian float32.
    Raises ``ProviderError(code="bad_response")`` for anything else (non-finite numbers too)."""
    if isinstance(value, str):
        try:
            raw = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ProviderError("An embedding is not valid base64", code="bad_response") from exc
        if len(raw) % 4:
            raise ProviderError("A base64 embedding is not a whole number of float32 values", code="bad_response")
        vector = list(struct.unpack(f"<{len(raw) // 4}f", raw))
    elif isinstance(value, list) and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
        vector = [float(v) for v in value]
    else:
        raise ProviderError("An embedding is neither a list of numbers nor base64", code="bad_response")
    if not all(math.isfinite(v) for v in vector):
        raise ProviderError("An embedding holds a value that is not a finite number", code="bad_response")
    return vector


def parse_response(payload: Any, expected: int) -> tuple[list[list[float]], Usage, str]:
    """``(vectors, usage, model)`` of an ``EmbeddingsResponse`` with ``expected`` inputs.
    llama-server's bare list (``[{"index", "embedding"}]``) is read too. Raises
    ``ProviderError(code="bad_response")`` when vectors are missing or of different lengths."""
    data = payload.get("data") if isinstance(payload, dict) else payload
    if not isinstance(data, list):
        raise ProviderError("The embeddings answer has no data list", code="bad_response")
    items = sorted((d for d in data if isinstance(d, dict)), key=lambda d: d.get("index", 0) if isinstance(d.get("index"), int) else 0)
    vectors = []
    for item in items:
        value = item.get("embedding")
        if isinstance(value, list) and value and isinstance(value[0], list):  # llama-server pooling none
            value = value[0]
        vectors.append(decode_vector(value))
    if len(vectors) != expected:
        raise ProviderError(f"The embeddings answer has {len(vectors)} vectors for {expected} inputs", code="bad_response")
    if len({len(v) for v in vectors}) > 1:
        raise ProviderError("The embeddings answer has vectors of different lengths", code="bad_response")
    usage = normalize_usage(payload.get("usage") if isinstance(payload, dict) else None)
    model = payload.get("model") if isinstance(payload, dict) and isinstance(payload.get("model"), str) else ""
    return vectors, usage, model


async def embed(client: httpx.AsyncClient, config: EndpointConfig, request: EmbeddingsRequest) -> EmbeddingsResult:
    """Call ``/embeddings`` once. Raises ``ProviderError`` only (see
    :func:`chat.providers.http.request_json` and :func:`parse_response`)."""
    url, headers, body = build_request(config, request)
    response, payload, text = await request_json(client, config, "POST", url, headers, body=body,
                                                 what="embeddings answer")
    vectors, usage, model = parse_response(payload, len(request.inputs))
    secrets = secret_variants(config.secrets())
    rid = response.headers.get("x-request-id") or response.headers.get("request-id")
    return EmbeddingsResult(vectors=vectors, usage=usage, model=model, raw=scrub(text[:200_000], secrets),
                            request_id=rid)
