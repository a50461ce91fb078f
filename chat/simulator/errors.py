"""Error responses of the simulator, copied from the seeds.

Bodies follow seed 000/002's ``/chat/completions`` and ``/responses`` error examples word for
word (SambaNova ``GeneralError`` ``{"error": {"message", "type", "param", "code"}, "request_id"}``
and ``SimpleError`` ``{"error": "text"}``), seed 001 for Sansa (``{"error": {"code",
"message"}}``: 402 ``insufficient_credits``, 400 ``unsupported_parameter``, 401 ``unauthorized``,
429 ``rate_limit_exceeded``, 500 ``internal_error``), and seed 004/002 for ``/messages``
(Anthropic's envelope ``{"type": "error", "error": {"type", "message"}, "request_id"}``,
``MessageErrorResponse``, with the seed's error types per status). Where no seed gives an
example, the shape follows the seed's schema for that status and the wording is the simulator's
own (marked "no seed example"). The ``request_id`` is the response's ``x-request-id``, not the
seed's literal id.

May import: the standard library only (no Django).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "MESSAGES_ERROR_TYPES",
    "NGINX_413",
    "ErrorResponse",
    "anthropic_error",
    "fault_response",
    "general_error",
    "messages_fault_response",
    "messages_stream_error",
    "method_not_allowed",
    "missing_key_error",
    "not_found",
    "responses_error_event",
    "sansa_error",
    "sansa_fault_response",
    "stream_error_chunk",
    "tool_parse_error",
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
    ``model``); for ``/responses`` (seed 002): ``missing_input``, ``empty_input``,
    ``invalid_input_role`` (fmt: ``role``, ``index``); simulator-only (no seed example):
    ``missing_messages``, ``invalid_param`` (fmt: ``param``, ``value``), ``invalid_option``
    (fmt: ``message``, ``param``).
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
    if kind == "missing_input":  # seed 002 /responses example
        return general_error(
            400,
            message="Missing required field: 'input'.",
            type_=_INVALID_REQUEST,
            code="missing_required_field",
            param="input",
            request_id=rid,
        )
    if kind == "empty_input":  # seed 002 /responses example
        return general_error(
            400,
            message="Invalid value for 'input': expected a non-empty array or string.",
            type_=_INVALID_REQUEST,
            code="invalid_value",
            param="input",
            request_id=rid,
        )
    if kind == "invalid_input_role":  # seed 002 /responses example
        return general_error(
            400,
            message=(
                f"Invalid value: '{fmt['role']}'. Supported values are: 'user', 'assistant', "
                "'system', 'developer'."
            ),
            type_=_INVALID_REQUEST,
            code="invalid_value",
            param=f"input[{fmt['index']}].role",
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
    - 403, 501, 529: ``GeneralError`` (no seed example for chat completions or responses).
    - tool_parse_error: seed 002's ``adapter_mapping_failed`` 400 (``/responses`` example).
    """
    rid = request_id
    if fault == "tool_parse_error":
        return tool_parse_error(rid)
    if fault == "403":  # no seed example
        return general_error(
            403,
            message=f"You do not have access to the model `{model}`.",
            type_="permission_error",
            code="permission_denied",
            param=None,
            request_id=rid,
        )
    if fault == "501":  # no seed example
        return general_error(
            501,
            message="This feature is not implemented.",
            type_="server_error",
            code="not_implemented",
            param=None,
            request_id=rid,
        )
    if fault == "529":  # no seed example
        return general_error(
            529,
            message="The server is overloaded. Please try again later.",
            type_="server_error",
            code="overloaded",
            param=None,
            request_id=rid,
        )
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


#: The raw model output of ``tool_parse_error`` (seed 002 ``adapter_mapping_failed`` example).
_BAD_TOOL_OUTPUT = '{\n "name": "get_weather",\n "arguments": {\n city: "Bogotá"\n }\n}'


def tool_parse_error(request_id: str) -> ErrorResponse:
    """Seed 002's ``adapter_mapping_failed`` 400 (``/responses`` example, ``GeneralError`` with
    ``error_model_output``): the model's tool call could not be parsed. Fault
    ``tool_parse_error`` on ``/chat/completions`` and ``/responses``."""
    body = {
        "error": {
            "code": "adapter_mapping_failed",
            "error_model_output": _BAD_TOOL_OUTPUT,
            "message": (
                "Failed to parse tool call from GPT OSS output: Expecting property name "
                "enclosed in double quotes: line 4 column 5 (char 48)"
            ),
            "param": None,
            "type": "server_error",
        },
        "request_id": request_id,
    }
    return ErrorResponse(400, _dump(body))


# ---- Anthropic messages (seed 004 / seed 002 MessageErrorResponse) ------------------------

#: Error type per status on ``/messages`` (seed 004's response table; 529 is Anthropic's own
#: overloaded status, which seed 004 lists as 503).
MESSAGES_ERROR_TYPES: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    501: "not_implemented_error",
    503: "overloaded_error",
    529: "overloaded_error",
}


def anthropic_error(
    status: int,
    message: str,
    *,
    request_id: str | None,
    type_: str | None = None,
    headers: list[tuple[str, str]] | None = None,
) -> ErrorResponse:
    """A seed 002 ``MessageErrorResponse``: ``{"type": "error", "error": {"type", "message"},
    "request_id"}``; ``type_`` defaults to the seed's type for ``status``."""
    body: dict[str, Any] = {
        "type": "error",
        "error": {
            "type": type_ or MESSAGES_ERROR_TYPES.get(status, "api_error"),
            "message": message,
        },
    }
    if request_id is not None:
        body["request_id"] = request_id
    return ErrorResponse(status, _dump(body), headers=list(headers or []))


def messages_fault_response(
    fault: str, *, request_id: str, model: str, api_key: str, retry_after: int
) -> ErrorResponse:
    """The response of an HTTP ``fault`` knob on ``/messages`` and ``/messages/count_tokens``.

    Statuses seed 004 lists (400, 401, 403, 404, 413, 429, 500, 501, 503) and 529 get
    Anthropic's envelope with the seed's error type (wording: Anthropic's public messages, no
    seed example); ``echo_key`` is a 401 echoing the key; 429 has ``Retry-After``. Statuses
    the seed does not list for ``/messages`` answer as a proxy or gateway would, like
    ``/chat/completions``: 402 (Sansa credits body), 408/410 (``SimpleError``), 502 (empty).
    ``tool_parse_error`` is a 500 ``api_error`` quoting the unparseable output.
    """
    rid = request_id
    messages = {
        "400": (400, "messages: at least one message is required"),
        "401": (401, "invalid x-api-key"),
        "403": (403, "Your API key does not have permission to use the specified resource."),
        "404": (404, f"model: {model}"),
        "413": (413, "Request exceeds the maximum allowed number of bytes."),
        "429": (429, "Number of request tokens has exceeded your per-minute rate limit."),
        "500": (500, "Internal server error"),
        "501": (501, "Streaming is not implemented yet."),
        "503": (503, "Overloaded"),
        "529": (529, "Overloaded"),
        "echo_key": (401, f"invalid x-api-key: {api_key}"),
    }
    if fault in messages:
        status, text = messages[fault]
        headers = [("retry-after", str(retry_after))] if fault == "429" else []
        return anthropic_error(status, text, request_id=rid, headers=headers)
    if fault == "tool_parse_error":
        return anthropic_error(
            500, f"Failed to parse tool call from model output: {_BAD_TOOL_OUTPUT}", request_id=rid
        )
    return fault_response(
        fault, request_id=rid, model=model, api_key=api_key, retry_after=retry_after
    )


def messages_stream_error() -> dict[str, Any]:
    """The ``event: error`` payload of ``fault=error_chunk`` on ``/messages`` (seed 002
    ``MessageStreamErrorEvent``; Anthropic's usual mid-stream error)."""
    return {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}


def responses_error_event() -> dict[str, Any]:
    """The ``error`` event of ``fault=error_event`` on ``/responses`` (OpenAI's
    ``ResponseErrorEvent``; seed 002 has no error event). ``sequence_number`` is filled in when
    written."""
    return {
        "type": "error",
        "sequence_number": None,
        "code": "server_error",
        "message": "The model stopped unexpectedly (simulated mid-stream error).",
        "param": None,
    }


# ---- Sansa (seed 001) -------------------------------------------------------------------


def sansa_error(
    status: int, code: str, message: str, headers: list[tuple[str, str]] | None = None
) -> ErrorResponse:
    """Seed 001's error format ``{"error": {"code", "message"}}``."""
    return ErrorResponse(
        status, _dump({"error": {"code": code, "message": message}}), headers=list(headers or [])
    )


def sansa_fault_response(fault: str, *, retry_after: int) -> ErrorResponse | None:
    """An HTTP ``fault`` in Sansa's words (seed 001's error table) or ``None`` for faults
    Sansa's table has no row for (the caller falls back to :func:`fault_response`).

    400 is the seed's ``unsupported_parameter`` example; 402 its ``insufficient_credits``
    example; 401, 429 and 500 use the table's codes (wording: no seed example).
    """
    if fault == "400":
        return sansa_error(
            400,
            "unsupported_parameter",
            "Multiple completions (n > 1) are not supported. Sansa returns a single completion "
            "per request.",
        )
    if fault == "401":
        return sansa_error(401, "unauthorized", "Invalid or missing API key.")
    if fault == "402":
        return sansa_error(
            402, "insufficient_credits", "Insufficient credits. Please add credits to continue."
        )
    if fault == "429":
        return sansa_error(
            429,
            "rate_limit_exceeded",
            "Too many requests.",
            headers=[("retry-after", str(retry_after))],
        )
    if fault == "500":
        return sansa_error(500, "internal_error", "Unexpected server error.")
    return None
