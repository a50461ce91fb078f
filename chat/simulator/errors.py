"""Error responses of the simulator, copied from the seeds.

Bodies follow seed 000/002's ``/chat/completions`` error examples word for word (SambaNova
``GeneralError`` ``{"error": {"message", "type", "param", "code"}, "request_id"}`` and
``SimpleError`` ``{"error": "text"}``), seed 001 for 402 (Sansa ``insufficient_credits``, which
has no ``type``/``param``/``request_id``). Where no seed gives an example, the shape follows the
seed's schema for that status and the wording is the simulator's own (marked "no seed example").
The ``request_id`` is the response's ``x-request-id``, not the seed's literal id.

May import: the standard library only (no Django).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "NGINX_413",
    "ErrorResponse",
    "fault_response",
    "general_error",
    "method_not_allowed",
    "missing_key_error",
    "not_found",
    "stream_error_chunk",
    "validation_error",
]

_JSON = "application/json"


@dataclass(frozen=True)
class ErrorResponse:
    """A complete HTTP error: status, body bytes, content type and extra headers."""

    status: int
    body: bytes
    content_type: str = _JSON
    headers: list[tuple[str, str]] = field(default_factory=list)


def general_error(
    status: int,
    *,
    message: str,
    type_: str | None,
    code: str | None,
    param: str | None,
    request_id: str | None,
    headers: list[tuple[str, str]] | None = None,
) -> ErrorResponse:
    """A seed 002 ``GeneralError`` body. ``request_id=None`` leaves the field out."""
    error: dict[str, Any] = {"message": message}
    if type_ is not None:
        error["type"] = type_
    error["param"] = param
    error["code"] = code
    body: dict[str, Any] = {"error": error}
    if request_id is not None:
        body["request_id"] = request_id
    return ErrorResponse(status, _dump(body), headers=list(headers or []))


def _simple(status: int, text: str) -> ErrorResponse:
    """A seed 002 ``SimpleError`` body ``{"error": "text"}``."""
    return ErrorResponse(status, _dump({"error": text}))


def _dump(body: dict[str, Any]) -> bytes:
    return json.dumps(body, ensure_ascii=False).encode()


_INVALID_REQUEST = "invalid_request_error"


def validation_error(kind: str, *, request_id: str, **fmt: Any) -> ErrorResponse:
    """The 400/404 answer to an invalid request, from seed 000's examples.

    ``kind``: ``invalid_json``, ``missing_model``, ``empty_messages``, ``invalid_role`` (fmt:
    ``role``, ``index``), ``null_content`` (fmt: ``index``), ``model_not_found`` (fmt:
    ``model``); simulator-only (no seed example): ``missing_messages``, ``invalid_param`` (fmt:
    ``param``, ``value``), ``invalid_option`` (fmt: ``message``, ``param``).
    """
    rid = request_id
    if kind == "invalid_json":
        return general_error(
            400,
            message=(
                "We could not parse the JSON body of your request. (HINT: This likely means "
                "you aren't using your HTTP library correctly. A JSON payload is expected, but "
                "what was sent was not valid JSON.)"
            ),
            type_=_INVALID_REQUEST,
            code=None,
            param=None,
            request_id=rid,
        )
    if kind == "missing_model":
        return general_error(
            400,
            message="you must provide a model parameter",
            type_=_INVALID_REQUEST,
            code=None,
            param=None,
            request_id=rid,
        )
    if kind == "empty_messages":
        return general_error(
            400,
            message=(
                "Invalid 'messages': empty array. Expected an array with minimum length 1, but "
                "got an empty array instead."
            ),
            type_=_INVALID_REQUEST,
            code="empty_array",
            param="messages",
            request_id=rid,
        )
    if kind == "invalid_role":
        return general_error(
            400,
            message=(
                f"Invalid value: '{fmt['role']}'. Supported values are: 'system', 'assistant', "
                "'user', 'function', 'tool', and 'developer'."
            ),
            type_=_INVALID_REQUEST,
            code="invalid_value",
            param=f"messages[{fmt['index']}].role",
            request_id=rid,
        )
    if kind == "null_content":
        return general_error(
            400,
            message="Invalid value for 'content': expected a string, got null.",
            type_=_INVALID_REQUEST,
            code=None,
            param=f"messages.[{fmt['index']}].content",
            request_id=rid,
        )
    if kind == "model_not_found":
        return general_error(
            404,
            message=f"The model `{fmt['model']}` does not exist or you do not have access to it.",
            type_=_INVALID_REQUEST,
            code="model_not_found",
            param="model",
            request_id=rid,
        )
    if kind == "missing_messages":  # no seed example
        return general_error(
            400,
            message="Missing required parameter: 'messages'.",
            type_=_INVALID_REQUEST,
            code="missing_required_parameter",
            param="messages",
            request_id=rid,
        )
    if kind == "invalid_param":  # no seed example
        return general_error(
            400,
            message=f"Invalid value for '{fmt['param']}': {fmt['value']!r}.",
            type_=_INVALID_REQUEST,
            code="invalid_value",
            param=fmt["param"],
            request_id=rid,
        )
    if kind == "invalid_option":  # no seed example: a bad simulator knob
        return general_error(
            400,
            message=fmt["message"],
            type_=_INVALID_REQUEST,
            code="invalid_value",
            param=fmt["param"],
            request_id=rid,
        )
    raise ValueError(f"unknown validation error kind {kind!r}")


#: The HTML page a proxy (nginx) sends for 413; no seed example for /chat/completions.
NGINX_413 = (
    b"<html>\r\n<head><title>413 Request Entity Too Large</title></head>\r\n<body>\r\n"
    b"<center><h1>413 Request Entity Too Large</h1></center>\r\n<hr><center>nginx</center>\r\n"
    b"</body>\r\n</html>\r\n"
)


def fault_response(
    fault: str, *, request_id: str, model: str, api_key: str, retry_after: int
) -> ErrorResponse:
    """The response of an HTTP ``fault`` knob (``"400"`` … ``"503"``, ``"echo_key"``).

    - 400: seed 000 ``null_content`` example (``GeneralError``).
    - 401: seed 000 ``invalid_api_key`` example (``GeneralError``).
    - echo_key: 401 like ``invalid_api_key`` but the message echoes ``api_key`` in clear, as a
      careless proxy would (proves the app scrubs keys from error bodies).
    - 402: seed 001 Sansa ``insufficient_credits`` body.
    - 404: seed 000 ``model_not_found`` example with ``model`` substituted.
    - 408, 410: seed 002 ``SimpleError`` (no seed example text).
    - 413: nginx's HTML page, ``text/html`` (no seed example; what a proxy in front sends).
    - 429: ``GeneralError`` (schema from seed 002, no example) with ``Retry-After``.
    - 500: ``text/plain`` (seed 002 schema) "Internal Server Error".
    - 502: empty body (a gateway failing; no seed example).
    - 503: ``text/plain`` "Service Temporarily Unavailable" (seed 000/002 example).
    """
    rid = request_id
    if fault == "400":
        return validation_error("null_content", request_id=rid, index=5)
    if fault == "401":
        return general_error(
            401,
            message=(
                "Incorrect API key provided: *****. You can find your API key at "
                "https://cloud.sambanova.ai/apis."
            ),
            type_=_INVALID_REQUEST,
            code="invalid_api_key",
            param=None,
            request_id=rid,
        )
    if fault == "echo_key":
        return general_error(
            401,
            message=(
                f"Incorrect API key provided: {api_key}. You can find your API key at "
                "https://cloud.sambanova.ai/apis."
            ),
            type_=_INVALID_REQUEST,
            code="invalid_api_key",
            param=None,
            request_id=rid,
        )
    if fault == "402":
        return ErrorResponse(
            402,
            _dump(
                {
                    "error": {
                        "code": "insufficient_credits",
                        "message": "Insufficient credits. Please add credits to continue.",
                    }
                }
            ),
        )
    if fault == "404":
        return validation_error("model_not_found", request_id=rid, model=model)
    if fault == "408":
        return _simple(408, "Request timeout")
    if fault == "410":
        return _simple(410, f"The model `{model}` is no longer available.")
    if fault == "413":
        return ErrorResponse(413, NGINX_413, content_type="text/html")
    if fault == "429":
        return general_error(
            429,
            message=f"Rate limit exceeded. Please retry after {retry_after} seconds.",
            type_="rate_limit_error",
            code="rate_limit_exceeded",
            param=None,
            request_id=rid,
            headers=[("retry-after", str(retry_after))],
        )
    if fault == "500":
        return ErrorResponse(500, b"Internal Server Error", content_type="text/plain")
    if fault == "502":
        return ErrorResponse(502, b"", content_type="text/plain")
    if fault == "503":
        return ErrorResponse(503, b"Service Temporarily Unavailable", content_type="text/plain")
    raise ValueError(f"unknown HTTP fault {fault!r}")


def missing_key_error(request_id: str) -> ErrorResponse:
    """Seed 000's ``missing_api_key`` 401 example (knob ``require_key=1``, no key sent)."""
    return general_error(
        401,
        message=(
            "You didn't provide an API key. You need to provide your API key in an Authorization "
            "header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."
        ),
        type_=_INVALID_REQUEST,
        code=None,
        param=None,
        request_id=request_id,
    )


def stream_error_chunk(request_id: str) -> dict[str, Any]:
    """The ``{"error": {...}}`` object sent inside a stream by ``fault=error_chunk``.

    ``GeneralError`` shape (seed 002); the wording is the simulator's own (no seed example).
    """
    return {
        "error": {
            "message": "The model stopped unexpectedly (simulated mid-stream error).",
            "type": "server_error",
            "param": None,
            "code": "internal_error",
        },
        "request_id": request_id,
    }


def not_found(path: str) -> ErrorResponse:
    """Seed 000's ``simple`` 404 example ``{"error": "Not found"}`` (wrong endpoint)."""
    del path
    return _simple(404, "Not found")


def method_not_allowed() -> ErrorResponse:
    """405 ``SimpleError`` (no seed example)."""
    return ErrorResponse(405, _dump({"error": "Method not allowed"}), headers=[])
