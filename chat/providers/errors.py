"""Turn an upstream's error (HTTP error response or in-stream error event) into ``ProviderError``.

Shared by every adapter. Handles the error shapes of DESIGN.md ("Dialect facts"), seed 000/002
(SambaNova ``GeneralError``/``SimpleError``), seed 001 (Sansa ``{"error": {"code", "message"}}``)
and seed 004 (Anthropic-style ``{"type": "error", "error": {"type", "message"}}``):

* ``{"error": {"message", "type", "code", "param"}, "request_id"}``
* ``{"error": "text"}``
* ``{"type": "error", "error": {"type", "message"}}``
* vLLM/FastAPI-style ``{"message", "type", "code"}`` / ``{"detail": …}`` at the top level
* plain text, HTML from a proxy, an empty body;
* any of these as an event stream (``data: {"error": …}`` then ``data: [DONE]``).

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
from urllib.parse import quote, urlsplit

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


def _code_and_type(code_value: Any, type_value: Any) -> tuple[str | None, str | None]:
    """``(code, type)`` as the dialects define them.

    OpenAI / SambaNova / Sansa put a machine code in ``code`` (``context_length_exceeded``)
    and a class in ``type`` (``invalid_request_error``); Anthropic has only ``type``
    (``overloaded_error``); Sansa and some proxies send a numeric ``code`` (402, or a string
    such as ``"429"``). ``code`` is the ``code`` when it is a non-numeric string, else the
    ``type``, else the numeric code as text, so a numeric code never hides the type. ``type`` is
    the ``type`` (not the envelope's ``"error"``) or None.
    """
    type_str = _str_or_none(type_value) if isinstance(type_value, str) else None
    if type_str == "error":  # Anthropic envelope, not a type
        type_str = None
    code_str = code_value.strip() if isinstance(code_value, str) else ""
    if code_str and not code_str.lstrip("+-").isdigit():
        return code_str, type_str
    return type_str or _str_or_none(code_str or code_value), type_str


def fields_from_payload(payload: Any) -> dict[str, str | None] | None:
    """Pull ``message``, ``code``, ``type``, ``param``, ``request_id`` out of a decoded JSON
    error body (see :func:`_code_and_type` for ``code`` and ``type``). Returns None when
    ``payload`` does not look like an error."""
    if not isinstance(payload, dict):
        return None
    request_id = _str_or_none(payload.get("request_id"))
    error = payload.get("error")
    if isinstance(error, dict):
        message = _str_or_none(error.get("message")) or _str_or_none(error.get("msg"))
        code, type_ = _code_and_type(error.get("code"), error.get("type"))
        request_id = request_id or _str_or_none(error.get("request_id"))
        return {
            "message": message,
            "code": code,
            "type": type_,
            "param": _str_or_none(error.get("param")),
            "request_id": request_id,
        }
    if isinstance(error, str):
        return {
            "message": error, "code": None, "type": None, "param": None, "request_id": request_id
        }
    if "message" in payload or "detail" in payload:
        message = _str_or_none(payload.get("message")) or _detail_message(payload.get("detail"))
        code, type_ = _code_and_type(payload.get("code"), payload.get("type"))
        return {
            "message": message,
            "code": code,
            "type": type_,
            "param": _str_or_none(payload.get("param")),
            "request_id": request_id,
        }
    return None


_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def _sse_error_payload(text: str) -> tuple[Any, bool]:
    """``(payload, is_sse)`` for a body sent as an event stream (``data: {"error": …}`` then
    ``data: [DONE]``, or Anthropic's ``event: error``): the first event whose data is JSON that
    looks like an error, else the first JSON data, else None. ``is_sse`` is False when the
    body has no ``data:`` line at all."""
    events: list[str] = []
    data: list[str] = []
    seen = False
    for line in [*_LINE_BREAK.split(text), ""]:
        if not line:
            if data:
                events.append("\n".join(data))
                data = []
            continue
        name, _, value = line.partition(":")
        if name == "data":
            seen = True
            data.append(value[1:] if value.startswith(" ") else value)
    first: Any = None
    for item in events:
        if item.strip() == "[DONE]":
            continue
        try:
            payload = json.loads(item)
        except (ValueError, RecursionError):
            continue
        if fields_from_payload(payload) is not None:
            return payload, True
        if first is None:
            first = payload
    return first, seen


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

    Result: ``status`` as given; ``code``/``type``/``param``/``request_id`` from the body when
    it has them, JSON or an event stream (``data: {"error": …}``, see
    :func:`_sse_error_payload`; request id falls back to ``x-request-id``/``request-id``);
    ``message`` the
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
    type_: str | None = None
    param: str | None = None
    request_id: str | None = None

    stripped = text.strip()
    payload: Any = None
    is_sse = False
    if stripped[:1] in ("{", "["):
        try:
            payload = json.loads(stripped)
        except (ValueError, RecursionError):
            payload = None
    if payload is None and ("data:" in stripped[:4096] or "event:" in stripped[:4096]):
        payload, is_sse = _sse_error_payload(stripped)
    fields = fields_from_payload(payload)
    if fields is not None:
        message = fields["message"]
        code, type_ = fields["code"], fields["type"]
        param, request_id = fields["param"], fields["request_id"]
        if not message:
            message = f"{fallback}: {code}" if code else fallback
    elif is_sse:
        message = f"{fallback}: the upstream answered with an event stream that holds no error"
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
        type=scrub(type_, variants) if type_ else None,
        param=scrub(param, variants) if param else None,
        request_id=request_id or request_id_from_headers(headers),
        retry_after_s=parse_retry_after(headers),
        body_excerpt=scrub(text, variants)[:EXCERPT_CHARS],
    )


def route_error(error: ProviderError, body: bytes, url: str, api_style: str) -> ProviderError:
    """For a 404 or 405 on the chat path whose body says nothing about a model: the route
    itself is missing, so the base URL or the API style is wrong, not the model. Returns a
    ``ProviderError(code="path_not_found")`` saying so (status, request id, excerpt kept; the
    upstream's code moves to ``type``, its message is quoted); any other error is returned
    unchanged. A body that mentions a model (``model_not_found``, "model: x") keeps its error.
    """
    if error.status not in (404, 405):
        return error
    text = body.decode("utf-8", errors="replace").lower()
    if "model" in text or "model" in (error.code or "").lower():
        return error
    try:
        parts = urlsplit(url)
        host, path = parts.netloc.rpartition("@")[2] or "the upstream", parts.path or "/"
    except ValueError:
        host, path = "the upstream", url
    said = error.message.strip()
    message = (
        f"HTTP {error.status}: {host} has no POST {path}. The base URL or the API style is "
        f"probably wrong: check that the base URL ends where the API starts (often …/v1) and "
        f"that the server speaks {api_style}"
    )
    if said and not said.startswith(f"HTTP {error.status}"):
        message += f" (the server said: {_clip(said, 200)})"
    return ProviderError(
        message,
        status=error.status,
        code="path_not_found",
        type=error.code or error.type,
        param=error.param,
        request_id=error.request_id,
        retry_after_s=error.retry_after_s,
        body_excerpt=error.body_excerpt,
    )


MODELS_NOT_LISTED_MESSAGE = "The server is reachable but does not list models; type the model id"


def models_not_listed(error: ProviderError) -> ProviderError:
    """For ``GET /models`` answered 404, 405 or 501: the server answered, it just has no model
    list. ``ProviderError(code="models_not_listed")`` with
    :data:`MODELS_NOT_LISTED_MESSAGE`, distinguishable from a connection failure; other errors
    are returned unchanged."""
    if error.status not in (404, 405, 501):
        return error
    return ProviderError(
        MODELS_NOT_LISTED_MESSAGE,
        status=error.status,
        code="models_not_listed",
        type=error.code or error.type,
        request_id=error.request_id,
        body_excerpt=error.body_excerpt,
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
    type_ = fields.get("type")
    param = fields.get("param")
    return ProviderError(
        scrub(_clip(message), variants),
        status=None,
        code=scrub(code, variants),
        type=scrub(type_, variants) if type_ else None,
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
    except (ValueError, RecursionError):
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
