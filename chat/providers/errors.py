"""Turn an upstream's error (HTTP error response or in-stream error event) into ``ProviderError``.

Shared by every adapter. Handles the error shapes of DESIGN.md ("Dialect facts"), seed 000/002
(SambaNova ``GeneralError``/``SimpleError``), seed 001 (Sansa ``{"error": {"code", "message"}}``)
and seed 004 (Anthropic-style ``{"type": "error", "error": {"type", "message"}}``):

* ``{"error": {"message", "type", "code", "param"}, "request_id"}``
* ``{"error": "text"}``
* ``{"type": "error", "error": {"type", "message"}}``
* vLLM/FastAPI-style ``{"message", "type", "code"}`` / ``{"detail": …}`` at the top level
* plain text, HTML from a proxy, an empty body.

Every string that leaves this module is scrubbed of the endpoint's secrets (also in their
JSON-escaped and URL-encoded forms, since upstreams echo keys inside JSON).

May import: the standard library only.
"""

from __future__ import annotations

import email.utils
import json
import re
import time
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from http import HTTPStatus
from typing import Any
from urllib.parse import quote

from .base import ChatRequest, ModelOutputError, ProviderError, scrub

EXCERPT_CHARS = 2000
MESSAGE_CHARS = 1000

# Status codes that http.HTTPStatus does not know but upstreams use.
_EXTRA_REASONS = {529: "Overloaded", 520: "Unknown Error", 522: "Connection Timed Out"}


def secret_variants(secrets: Iterable[str]) -> list[str]:
    """Each secret plus the forms an upstream may echo it in (JSON-escaped, ``\\/``-escaped,
    URL-encoded), for :func:`chat.providers.base.scrub`."""
    out: set[str] = set()
    for secret in secrets:
        if not secret:
            continue
        escaped = json.dumps(secret)[1:-1]
        out.update({secret, escaped, escaped.replace("/", "\\/"), quote(secret, safe="")})
    return sorted(out, key=len, reverse=True)


def reason_phrase(status: int) -> str:
    """``"Service Unavailable"`` for 503; ``""`` for an unknown status."""
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return _EXTRA_REASONS.get(status, "")


def header_lookup(headers: Mapping[str, str] | Any, *names: str) -> str | None:
    """First non-empty header among ``names`` (case-insensitive), from a dict or httpx.Headers."""
    lowered = {str(k).lower(): v for k, v in headers.items()} if headers else {}
    for name in names:
        value = lowered.get(name.lower())
        if value:
            return str(value).strip()
    return None


def request_id_from_headers(headers: Mapping[str, str] | Any) -> str | None:
    """The request id from ``x-request-id`` or ``request-id`` (Anthropic), if any."""
    return header_lookup(headers, "x-request-id", "request-id")


def parse_retry_after(
    headers: Mapping[str, str] | Any, *, now: float | None = None
) -> float | None:
    """Seconds to wait from ``retry-after-ms`` (ms) or ``Retry-After`` (seconds or an HTTP date,
    RFC 9110 §10.2.3). A date in the past gives 0. Unparseable → None."""
    ms = header_lookup(headers, "retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = header_lookup(headers, "retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    current = datetime.fromtimestamp(time.time() if now is None else now, tz=UTC)
    return max(0.0, (when - current).total_seconds())


def _str_or_none(value: Any) -> str | None:
    if value is None or value == "":
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return None


def _clip(text: str, limit: int = MESSAGE_CHARS) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _detail_message(detail: Any) -> str | None:
    """FastAPI ``detail``: a string, or a list of ``{"loc", "msg"}`` validation errors."""
    if isinstance(detail, str):
        return detail
    if isinstance(detail, list):
        parts = []
        for item in detail[:5]:
            if isinstance(item, dict) and isinstance(item.get("msg"), str):
                loc = item.get("loc")
                where = ".".join(str(p) for p in loc) if isinstance(loc, list) else ""
                parts.append(f"{where}: {item['msg']}" if where else item["msg"])
            elif isinstance(item, str):
                parts.append(item)
        return "; ".join(parts) or None
    return None


def fields_from_payload(payload: Any) -> dict[str, str | None] | None:
    """Pull ``message``, ``code``, ``param``, ``request_id`` out of a decoded JSON error body.

    ``code`` is the error's ``code`` when it is a non-numeric string, else its ``type``
    (``invalid_request_error``, ``rate_limit_error``…), else a numeric code as text.
    Returns None when ``payload`` does not look like an error.
    """
    if not isinstance(payload, dict):
        return None
    request_id = _str_or_none(payload.get("request_id"))
    error = payload.get("error")
    if isinstance(error, dict):
        message = _str_or_none(error.get("message")) or _str_or_none(error.get("msg"))
        code_value, type_value = error.get("code"), error.get("type")
        code = _str_or_none(code_value) if isinstance(code_value, str) else None
        code = code or _str_or_none(type_value) or _str_or_none(code_value)
        request_id = request_id or _str_or_none(error.get("request_id"))
        return {
            "message": message,
            "code": code,
            "param": _str_or_none(error.get("param")),
            "request_id": request_id,
        }
    if isinstance(error, str):
        return {"message": error, "code": None, "param": None, "request_id": request_id}
    if "message" in payload or "detail" in payload:
        message = _str_or_none(payload.get("message")) or _detail_message(payload.get("detail"))
        code_value, type_value = payload.get("code"), payload.get("type")
        code = _str_or_none(code_value) if isinstance(code_value, str) else None
        if type_value == "error":  # Anthropic envelope without an inner object
            type_value = None
        code = code or _str_or_none(type_value) or _str_or_none(code_value)
        return {
            "message": message,
            "code": code,
            "param": _str_or_none(payload.get("param")),
            "request_id": request_id,
        }
    return None


_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)
_H1 = re.compile(r"<h1[^>]*>(.*?)</h1>", re.IGNORECASE | re.DOTALL)
_TAGS = re.compile(r"<[^>]+>")


def _looks_like_html(text: str, content_type: str) -> bool:
    head = text.lstrip()[:200].lower()
    return (
        "html" in content_type
        or head.startswith("<!doctype html")
        or head.startswith("<html")
        or "<body" in head
        or "<head" in head
    )


def _html_summary(status: int, text: str) -> str:
    match = _TITLE.search(text) or _H1.search(text)
    title = " ".join(_TAGS.sub(" ", match.group(1)).split()) if match else ""
    base = f"HTTP {status} from a proxy (HTML body)"
    return f"{base}: {_clip(title, 120)}" if title else base


def parse_error(
    status: int,
    headers: Mapping[str, str] | Any,
    body: bytes,
    secrets: list[str],
) -> ProviderError:
    """Build the ``ProviderError`` for a non-2xx HTTP response.

    ``status``: the HTTP status; ``headers``: response headers (dict or ``httpx.Headers``);
    ``body``: the raw body (already capped by the caller); ``secrets``: values to scrub (the
    endpoint's key and header values, see ``EndpointConfig.secrets()``).

    Result: ``status`` as given; ``code``/``param``/``request_id`` from the JSON body when it
    has them (request id falls back to ``x-request-id``/``request-id``); ``message`` the
    upstream's message, or a summary for HTML ("HTTP 502 from a proxy (HTML body): …"), the
    first 1,000 characters of a text body, or "HTTP 503 Service Unavailable" for an empty body;
    a 3xx says the redirect was not followed; ``retry_after_s`` from ``Retry-After`` /
    ``retry-after-ms``; ``body_excerpt`` the first 2,000 characters. Never raises.
    """
    variants = secret_variants(secrets)
    text = body.decode("utf-8", errors="replace")
    content_type = (header_lookup(headers, "content-type") or "").lower()
    reason = reason_phrase(status)
    fallback = f"HTTP {status} {reason}".strip()

    message: str | None = None
    code: str | None = None
    param: str | None = None
    request_id: str | None = None

    stripped = text.strip()
    payload: Any = None
    if stripped[:1] in ("{", "["):
        try:
            payload = json.loads(stripped)
        except ValueError:
            payload = None
    fields = fields_from_payload(payload)
    if fields is not None:
        message = fields["message"]
        code, param, request_id = fields["code"], fields["param"], fields["request_id"]
        if not message:
            message = f"{fallback}: {code}" if code else fallback
    elif not stripped:
        message = fallback
    elif _looks_like_html(stripped, content_type):
        message = _html_summary(status, stripped)
    elif payload is not None:
        message = f"{fallback}: {_clip(stripped, 300)}"
    else:
        message = stripped

    if 300 <= status < 400:
        location = header_lookup(headers, "location")
        where = f" to {location}" if location else ""
        message = (
            f"HTTP {status}: the upstream redirected{where}; redirects are not followed "
            "(check the base URL)"
        )

    return ProviderError(
        scrub(_clip(message), variants),
        status=status,
        code=scrub(code, variants) if code else None,
        param=scrub(param, variants) if param else None,
        request_id=request_id or request_id_from_headers(headers),
        retry_after_s=parse_retry_after(headers),
        body_excerpt=scrub(text, variants)[:EXCERPT_CHARS],
    )


def error_from_event(
    payload: Any,
    data: str,
    secrets: list[str],
    *,
    request_id: str | None = None,
) -> ProviderError:
    """Build the ``ProviderError`` for an error *inside* a 2xx stream (``{"error": …}`` chunk,
    ``event: error``). ``status`` is None (the HTTP status was 2xx); ``code`` is the upstream's
    code/type or ``stream_error``; ``data`` is the event's raw data (for the excerpt)."""
    variants = secret_variants(secrets)
    fields = fields_from_payload(payload) or {}
    message = fields.get("message") or (
        _clip(data, 300) if data.strip() and payload is None else "The upstream reported an error"
    )
    code = fields.get("code") or "stream_error"
    param = fields.get("param")
    return ProviderError(
        scrub(_clip(message), variants),
        status=None,
        code=scrub(code, variants),
        param=scrub(param, variants) if param else None,
        request_id=fields.get("request_id") or request_id,
        body_excerpt=scrub(data, variants)[:EXCERPT_CHARS],
    )


#: At most this many characters of a model's unparsable raw output are kept.
RAW_OUTPUT_CHARS = 16000


def model_output_error(payload: Any, secrets: list[str]) -> ModelOutputError | None:
    """The ``ModelOutputError`` event for an error that carries the model's raw output, else None.

    Seed 002 has two shapes: ``ModelOutputError`` ``{"error": {"code", "message",
    "model_output", "param", "type"}}`` and ``GeneralError`` with
    ``error.error_model_output`` (e.g. ``adapter_mapping_failed`` on ``/responses``: the model
    wrote a tool call that is not valid JSON). Adapters yield this event just before raising the
    ``ProviderError`` for the same error, so the UI can show what the model wrote. ``message``
    (≤ 1,000 chars) and ``raw_output`` (≤ 16,000 chars) are scrubbed of ``secrets``.
    """
    if not isinstance(payload, dict):
        return None
    error = payload.get("error")
    if not isinstance(error, dict):
        return None
    raw = error.get("model_output") or error.get("error_model_output")
    if not isinstance(raw, str) or not raw:
        return None
    variants = secret_variants(secrets)
    message = _str_or_none(error.get("message")) or "The model's output could not be parsed"
    return ModelOutputError(
        scrub(_clip(message), variants), scrub(raw[:RAW_OUTPUT_CHARS], variants)
    )


def model_output_from_body(body: bytes, secrets: list[str]) -> ModelOutputError | None:
    """:func:`model_output_error` for a raw (non-2xx) response body; None if it is not JSON."""
    try:
        payload = json.loads(body.decode("utf-8", errors="replace"))
    except ValueError:
        return None
    return model_output_error(payload, secrets)


def unsupported_content_error(
    request: ChatRequest, supported: Iterable[str], api_style: str
) -> ProviderError | None:
    """The error for attachments an API style cannot carry (``code="unsupported_content"``),
    or None when every ``ChatMessage.parts`` type is in ``supported`` ("image", "audio").

    Adapters check this before sending, so an audio file is never silently dropped: the user
    sees which attachment to remove or which API style to pick instead.
    """
    allowed = set(supported)
    kinds = sorted({p.type for m in request.messages for p in m.parts if p.type not in allowed})
    if not kinds:
        return None
    names = " and ".join(f"{kind} attachments" for kind in kinds)
    return ProviderError(
        f"The {api_style} API style cannot carry {names}; remove them or use an endpoint "
        "whose API style accepts them",
        code="unsupported_content",
    )
