"""Table-driven tests for ``chat.providers.errors.parse_error`` and in-stream error events.

Bodies are the error examples of seed 000/002 (SambaNova chat completions), the status/code
table and examples of seed 001 (Sansa), the Anthropic-style envelope of seed 004, and
hand-written proxy/plain/empty bodies. No Django, no DB.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import pytest

from chat.providers.base import ProviderError
from chat.providers.errors import (
    error_from_event,
    parse_error,
    parse_retry_after,
    reason_phrase,
    secret_variants,
)

JSON = {"content-type": "application/json"}
TEXT = {"content-type": "text/plain; charset=utf-8"}
HTML = {"content-type": "text/html"}


def j(obj: Any) -> bytes:
    return json.dumps(obj).encode()


NGINX_502 = b"""<html>
<head><title>502 Bad Gateway</title></head>
<body>
<center><h1>502 Bad Gateway</h1></center>
<hr><center>nginx/1.25.3</center>
</body>
</html>
"""

CLOUDFLARE_524 = b"""<!DOCTYPE html>
<!--[if lt IE 7]> <html class="no-js ie6 oldie" lang="en-US"> <![endif]-->
<html lang="en-US"><head><title>api.example.com | 524: A timeout occurred</title>
<meta charset="UTF-8" /></head><body><h1>A timeout occurred</h1></body></html>"""

# (id, status, headers, body, expected fields)
CASES: list[tuple[str, int, dict[str, str], bytes, dict[str, Any]]] = [
    # ---- seed 000 / 002: SambaNova /chat/completions error examples --------------------
    (
        "sn-400-text-plain",
        400,
        TEXT,
        b"Invalid request body: - missing property 'model'\"",
        {
            "code": None,
            "message": "Invalid request body: - missing property 'model'\"",
            "param": None,
        },
    ),
    (
        "sn-400-empty_messages",
        400,
        JSON,
        j(
            {
                "error": {
                    "message": "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.",
                    "type": "invalid_request_error",
                    "param": "messages",
                    "code": "empty_array",
                },
                "request_id": "d79vdot7os633dverihg",
            }
        ),
        {
            "code": "empty_array",
            "message": "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.",
            "param": "messages",
            "request_id": "d79vdot7os633dverihg",
        },
    ),
    (
        "sn-400-invalid_role",
        400,
        JSON,
        j(
            {
                "error": {
                    "message": "Invalid value: 'developerrr'. Supported values are: 'system', 'assistant', 'user', 'function', 'tool', and 'developer'.",
                    "type": "invalid_request_error",
                    "param": "messages[0].role",
                    "code": "invalid_value",
                },
                "request_id": "d79vdit7os6aemenqav0",
            }
        ),
        {
            "code": "invalid_value",
            "param": "messages[0].role",
            "request_id": "d79vdit7os6aemenqav0",
            "message": "Invalid value: 'developerrr'. Supported values are: 'system', 'assistant', 'user', 'function', 'tool', and 'developer'.",
        },
    ),
    (
        "sn-400-null_content",
        400,
        JSON,
        j(
            {
                "error": {
                    "message": "Invalid value for 'content': expected a string, got null.",
                    "type": "invalid_request_error",
                    "param": "messages.[5].content",
                    "code": None,
                },
                "request_id": "d79vcsd7os6aemenqa80",
            }
        ),
        {
            "code": "invalid_request_error",
            "param": "messages.[5].content",
            "request_id": "d79vcsd7os6aemenqa80",
            "message": "Invalid value for 'content': expected a string, got null.",
        },
    ),
    (
        "sn-400-missing_model",
        400,
        JSON,
        j(
            {
                "error": {
                    "message": "you must provide a model parameter",
                    "type": "invalid_request_error",
                    "param": None,
                    "code": None,
                },
                "request_id": "a4fa849e",
            }
        ),
        {
            "code": "invalid_request_error",
            "param": None,
            "request_id": "a4fa849e",
            "message": "you must provide a model parameter",
        },
    ),
    (
        "sn-400-invalid_json",
        400,
        JSON,
        j(
            {
                "error": {
                    "code": None,
                    "message": "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. A JSON payload is expected, but what was sent was not valid JSON.)",
                    "param": None,
                    "type": "invalid_request_error",
                },
                "request_id": "3f7db127",
            }
        ),
        {"code": "invalid_request_error", "request_id": "3f7db127"},
    ),
    (
        "sn-400-simple",
        400,
        JSON,
        j({"error": "Unhandled error"}),
        {"code": None, "message": "Unhandled error", "param": None, "request_id": None},
    ),
    (
        "sn-401-invalid_api_key",
        401,
        JSON,
        j(
            {
                "error": {
                    "message": "Incorrect API key provided: *****. You can find your API key at https://cloud.sambanova.ai/apis.",
                    "type": "invalid_request_error",
                    "param": None,
                    "code": "invalid_api_key",
                },
                "request_id": "d79vcq57os633dverhi0",
            }
        ),
        {
            "code": "invalid_api_key",
            "request_id": "d79vcq57os633dverhi0",
            "message": "Incorrect API key provided: *****. You can find your API key at https://cloud.sambanova.ai/apis.",
        },
    ),
    (
        "sn-401-missing_api_key",
        401,
        JSON,
        j(
            {
                "error": {
                    "message": "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
                    "type": "invalid_request_error",
                    "param": None,
                    "code": None,
                },
                "request_id": "d7a0dct7os633dvesi60",
            }
        ),
        {"code": "invalid_request_error", "request_id": "d7a0dct7os633dvesi60"},
    ),
    (
        "sn-404-model_not_found",
        404,
        JSON,
        j(
            {
                "error": {
                    "code": "model_not_found",
                    "message": "The model `abc` does not exist or you do not have access to it.",
                    "param": "model",
                    "type": "invalid_request_error",
                },
                "request_id": "887a8227",
            }
        ),
        {
            "code": "model_not_found",
            "param": "model",
            "request_id": "887a8227",
            "message": "The model `abc` does not exist or you do not have access to it.",
        },
    ),
    (
        "sn-404-simple",
        404,
        JSON,
        j({"error": "Not found"}),
        {"code": None, "message": "Not found"},
    ),
    (
        "sn-408-simple",
        408,
        JSON,
        j({"error": "Request timed out"}),
        {"code": None, "message": "Request timed out"},
    ),
    (
        "sn-410-simple",
        410,
        JSON,
        j({"error": "Model Meta-Llama-3.1-405B-Instruct has been removed"}),
        {"code": None, "message": "Model Meta-Llama-3.1-405B-Instruct has been removed"},
    ),
    (
        "sn-429-retry-after-seconds",
        429,
        {**JSON, "Retry-After": "7", "x-request-id": "hdr-429"},
        j(
            {
                "error": {
                    "message": "Rate limit exceeded",
                    "type": "rate_limit_error",
                    "param": None,
                    "code": "rate_limit_exceeded",
                },
                "request_id": None,
            }
        ),
        {
            "code": "rate_limit_exceeded",
            "message": "Rate limit exceeded",
            "retry_after_s": 7.0,
            "request_id": "hdr-429",
        },
    ),
    (
        "sn-500-text-plain",
        500,
        TEXT,
        b"Internal Server Error",
        {"code": None, "message": "Internal Server Error", "retry_after_s": None},
    ),
    (
        "sn-503-text-plain",
        503,
        TEXT,
        b"Service Temporarily Unavailable",
        {"code": None, "message": "Service Temporarily Unavailable"},
    ),
    # ---- seed 001: Sansa status / code table --------------------------------------------
    (
        "sansa-400-invalid_model",
        400,
        JSON,
        j({"error": {"code": "invalid_model", "message": "Unknown model 'gpt-9'."}}),
        {"code": "invalid_model", "message": "Unknown model 'gpt-9'.", "param": None},
    ),
    (
        "sansa-400-invalid_call_name",
        400,
        JSON,
        j(
            {
                "error": {
                    "code": "invalid_call_name",
                    "message": "call_name must be at most 64 characters.",
                }
            }
        ),
        {"code": "invalid_call_name"},
    ),
    (
        "sansa-400-invalid_request",
        400,
        JSON,
        j(
            {
                "error": {
                    "code": "invalid_request",
                    "message": "reasoning.effort must be one of xhigh, high, medium, low, minimal, none.",
                }
            }
        ),
        {"code": "invalid_request"},
    ),
    (
        "sansa-400-unsupported_parameter",
        400,
        JSON,
        j(
            {
                "error": {
                    "code": "unsupported_parameter",
                    "message": "Multiple completions (n > 1) are not supported. Sansa returns a single completion per request.",
                }
            }
        ),
        {
            "code": "unsupported_parameter",
            "message": "Multiple completions (n > 1) are not supported. Sansa returns a single completion per request.",
        },
    ),
    (
        "sansa-401-unauthorized",
        401,
        JSON,
        j({"error": {"code": "unauthorized", "message": "Invalid or missing API key."}}),
        {"code": "unauthorized", "message": "Invalid or missing API key."},
    ),
    (
        "sansa-402-insufficient_credits",
        402,
        JSON,
        j(
            {
                "error": {
                    "code": "insufficient_credits",
                    "message": "Insufficient credits. Please add credits to continue.",
                }
            }
        ),
        {
            "code": "insufficient_credits",
            "message": "Insufficient credits. Please add credits to continue.",
            "retry_after_s": None,
        },
    ),
    (
        "sansa-429-rate_limit_exceeded-http-date",
        429,
        {**JSON, "Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"},
        j({"error": {"code": "rate_limit_exceeded", "message": "Too many requests"}}),
        {"code": "rate_limit_exceeded", "retry_after_s": 0.0},
    ),
    (
        "sansa-500-internal_error",
        500,
        JSON,
        j({"error": {"code": "internal_error", "message": "Unexpected server error"}}),
        {"code": "internal_error", "message": "Unexpected server error"},
    ),
    # ---- seed 004: Anthropic-style envelope ----------------------------------------------
    (
        "anthropic-403-permission_error",
        403,
        {**JSON, "request-id": "req_011CSHoEeqs5C35K2UUqR7Fy"},
        j(
            {
                "type": "error",
                "error": {
                    "type": "permission_error",
                    "message": "Your API key does not have permission to use the specified resource.",
                },
            }
        ),
        {
            "code": "permission_error",
            "message": "Your API key does not have permission to use the specified resource.",
            "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy",
        },
    ),
    (
        "anthropic-413-request_too_large",
        413,
        JSON,
        j(
            {
                "type": "error",
                "error": {
                    "type": "request_too_large",
                    "message": "Request exceeds the maximum allowed number of bytes.",
                },
                "request_id": "body-rid",
            }
        ),
        {"code": "request_too_large", "request_id": "body-rid"},
    ),
    (
        "anthropic-529-overloaded",
        529,
        JSON,
        j({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        {"code": "overloaded_error", "message": "Overloaded"},
    ),
    # ---- other servers and proxies ------------------------------------------------------
    (
        "vllm-400-top-level",
        400,
        JSON,
        j(
            {
                "object": "error",
                "message": "max_tokens must be at least 1, got 0.",
                "type": "BadRequestError",
                "param": None,
                "code": 400,
            }
        ),
        {"code": "BadRequestError", "message": "max_tokens must be at least 1, got 0."},
    ),
    (
        "llamacpp-401-numeric-code",
        401,
        JSON,
        j({"error": {"code": 401, "message": "Invalid API Key", "type": "authentication_error"}}),
        {"code": "authentication_error", "message": "Invalid API Key"},
    ),
    (
        "openrouter-402-numeric-code-only",
        402,
        JSON,
        j({"error": {"code": 402, "message": "Insufficient credits"}}),
        {"code": "402", "message": "Insufficient credits"},
    ),
    (
        "fastapi-404-detail",
        404,
        JSON,
        j({"detail": "Not Found"}),
        {"code": None, "message": "Not Found"},
    ),
    (
        "fastapi-422-validation",
        422,
        JSON,
        j(
            {
                "detail": [
                    {
                        "loc": ["body", "messages"],
                        "msg": "field required",
                        "type": "value_error.missing",
                    }
                ]
            }
        ),
        {"message": "body.messages: field required"},
    ),
    (
        "json-without-error-shape",
        500,
        JSON,
        j({"status": "down"}),
        {"code": None, "message": 'HTTP 500 Internal Server Error: {"status": "down"}'},
    ),
    (
        "nginx-502-html",
        502,
        HTML,
        NGINX_502,
        {"code": None, "message": "HTTP 502 from a proxy (HTML body): 502 Bad Gateway"},
    ),
    (
        "cloudflare-524-html-without-content-type",
        524,
        {},
        CLOUDFLARE_524,
        {"message": "HTTP 524 from a proxy (HTML body): api.example.com | 524: A timeout occurred"},
    ),
    (
        "html-without-title",
        502,
        HTML,
        b"<html><body>oops</body></html>",
        {"message": "HTTP 502 from a proxy (HTML body)"},
    ),
    (
        "503-empty",
        503,
        {"Retry-After": "120"},
        b"",
        {"code": None, "message": "HTTP 503 Service Unavailable", "retry_after_s": 120.0},
    ),
    ("500-whitespace-only", 500, TEXT, b"  \n", {"message": "HTTP 500 Internal Server Error"}),
    ("529-empty", 529, {}, b"", {"message": "HTTP 529 Overloaded"}),
    ("599-empty-unknown-status", 599, {}, b"", {"message": "HTTP 599"}),
    (
        "429-retry-after-ms",
        429,
        {"retry-after-ms": "1500", "Retry-After": "2"},
        b"",
        {"retry_after_s": 1.5, "message": "HTTP 429 Too Many Requests"},
    ),
    (
        "302-redirect",
        302,
        {"Location": "https://login.example.com/sso"},
        b"",
        {
            "message": "HTTP 302: the upstream redirected to https://login.example.com/sso; "
            "redirects are not followed (check the base URL)"
        },
    ),
    (
        "error-object-without-message",
        500,
        JSON,
        j({"error": {"type": "server_error"}}),
        {"code": "server_error", "message": "HTTP 500 Internal Server Error: server_error"},
    ),
]


@pytest.mark.parametrize(
    ("status", "headers", "body", "expected"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_parse_error(status, headers, body, expected):
    error = parse_error(status, headers, body, ["sk-not-in-these-bodies"])
    assert isinstance(error, ProviderError)
    assert error.status == status
    for field, value in expected.items():
        assert getattr(error, field) == value, field
    if "request_id" not in expected:
        assert error.request_id is None
    assert error.body_excerpt == body.decode()[:2000]
    assert str(error) == error.message


def test_retry_after_http_date_in_the_future():
    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    header = format_datetime(now + timedelta(seconds=30), usegmt=True)
    assert parse_retry_after({"Retry-After": header}, now=now.timestamp()) == 30.0


@pytest.mark.parametrize("value", ["soon", "", "Mon, 99 Foo 2020"])
def test_retry_after_garbage(value):
    assert parse_retry_after({"Retry-After": value}) is None


def test_headers_are_case_insensitive_and_httpx_headers_work():
    import httpx

    headers = httpx.Headers({"X-Request-ID": "abc", "RETRY-AFTER": "3"})
    error = parse_error(500, headers, b"", [])
    assert (error.request_id, error.retry_after_s) == ("abc", 3.0)


def test_body_request_id_wins_over_header():
    body = j({"error": {"message": "x"}, "request_id": "from-body"})
    error = parse_error(400, {"x-request-id": "from-header"}, body, [])
    assert error.request_id == "from-body"


def test_excerpt_is_capped():
    error = parse_error(500, TEXT, b"x" * 5000, [])
    assert len(error.body_excerpt) == 2000
    assert len(error.message) <= 1000


def test_reason_phrase():
    assert reason_phrase(503) == "Service Unavailable"
    assert reason_phrase(529) == "Overloaded"
    assert reason_phrase(599) == ""


# ---- secrets ------------------------------------------------------------------------------

KEY = "sk-live-abc/def+ghi=="
HEADER_SECRET = "proxy-token-7788"


@pytest.mark.parametrize(
    "body",
    [
        j(
            {
                "error": {
                    "message": f"Incorrect API key provided: {KEY}",
                    "code": "invalid_api_key",
                    "param": KEY,
                }
            }
        ),
        f'{{"error": {{"message": "Incorrect API key provided: {KEY.replace("/", chr(92) + "/")}"}}}}'.encode(),
        f"Unauthorized: Authorization: Bearer {KEY}".encode(),
        f"<html><head><title>Denied {KEY}</title></head></html>".encode(),
        f"token={KEY.replace('/', '%2F').replace('+', '%2B').replace('=', '%3D')}&x={HEADER_SECRET}".encode(),
        j({"error": f"bad header {HEADER_SECRET} and key {KEY}"}),
    ],
    ids=["json", "json-slash-escaped", "text-bearer", "html-title", "url-encoded", "simple-error"],
)
def test_echoed_secrets_never_appear_in_the_error(body):
    error = parse_error(401, {}, body, [KEY, HEADER_SECRET])
    dumped = json.dumps(error.as_dict()) + str(error) + repr(error)
    for variant in secret_variants([KEY, HEADER_SECRET]):
        assert variant not in dumped
    assert "[REDACTED]" in error.body_excerpt


def test_secret_variants():
    variants = secret_variants(["a/b+c", ""])
    assert set(variants) == {"a/b+c", "a\\/b+c", "a%2Fb%2Bc"}
    assert secret_variants([]) == []


# ---- in-stream error events ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "code", "message"),
    [
        (
            {"error": {"message": "boom", "type": "server_error", "code": None}},
            "server_error",
            "boom",
        ),
        (
            {"error": {"message": "m", "code": "model_output_error", "type": "server_error"}},
            "model_output_error",
            "m",
        ),
        ({"error": "Unhandled error"}, "stream_error", "Unhandled error"),
        (
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
            "overloaded_error",
            "Overloaded",
        ),
        ({"unexpected": True}, "stream_error", "The upstream reported an error"),
        (None, "stream_error", "not json at all"),
    ],
)
def test_error_from_event(payload, code, message):
    data = json.dumps(payload) if payload is not None else "not json at all"
    error = error_from_event(payload, data, [], request_id="hdr")
    assert (error.status, error.code, error.message) == (None, code, message)
    assert error.request_id == "hdr"
    assert error.body_excerpt == data


def test_error_from_event_scrubs():
    payload = {"error": {"message": f"key {KEY}", "code": "x"}}
    error = error_from_event(payload, json.dumps(payload), [KEY])
    assert KEY not in error.message and KEY not in error.body_excerpt
