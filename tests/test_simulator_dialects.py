"""Tests of the simulator's other API styles and features (``chat.simulator``), without Django.

Covers ``POST /messages`` and ``/messages/count_tokens`` (Anthropic Messages, seeds 002/004),
``POST /responses`` (OpenAI Responses, seed 002), and, in every style, tools, structured
output, images and audio; on chat completions also log probabilities and Sansa (seed 001).
Streamed events and bodies are validated against seed 002's component schemas with the
nullable-aware helper of ``test_simulator``; structured answers against the schema the request
asked for. Uses the in-test ASGI harness of ``test_simulator`` (``call``).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from typing import Any

import httpx
import jsonschema
import pytest

from chat.simulator import (
    MODELS,
    KnobError,
    answer_text,
    create_app,
    invalid_value_for_schema,
    parse_knobs,
    reasoning_text,
    value_for_schema,
)
from chat.simulator.messages import thinking_signature
from chat.simulator.text import count_prompt_tokens
from tests.test_simulator import (
    SEED_002,
    call,
    chunks,
    content_of,
    data_events,
    needs_seed,
    parse_sse,
    server_url,  # noqa: F401  (module-scoped fixture: the standalone server)
    validate,
)

FAST = "sim-fast?ttft_ms=0&delay_ms=0"
REASONING = "sim-reasoning?ttft_ms=0&delay_ms=0"
CHAT = "/v1/chat/completions"
MESSAGES = "/v1/messages"
COUNT = "/v1/messages/count_tokens"
RESPONSES = "/v1/responses"
FORMATS = jsonschema.Draft202012Validator.FORMAT_CHECKER

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\nsimulated image bytes").decode()
WAV = base64.b64encode(b"RIFF\x00\x00\x00\x00WAVEsimulated audio").decode()

WEATHER_SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "description": "City name"},
        "days": {"type": "integer", "minimum": 1, "maximum": 7},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "hourly": {"type": "boolean"},
    },
    "required": ["city", "days", "unit"],
    "additionalProperties": False,
}
CLOCK_SCHEMA = {
    "type": "object",
    "properties": {"zone": {"type": "string", "format": "date-time"}},
    "required": ["zone"],
}
PERSON_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 3},
        "age": {"type": "integer", "minimum": 18, "maximum": 150},
        "email": {"type": "string", "format": "email"},
        "born": {"type": "string", "format": "date"},
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2, "uniqueItems": True},
        "role": {"enum": ["admin", "user"]},
        "score": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
        "active": {"type": "boolean"},
        "address": {"$ref": "#/$defs/address"},
        "nickname": {"type": ["string", "null"]},
        "pets": {"anyOf": [{"type": "null"}, {"type": "array", "items": {"$ref": "#/$defs/pet"}}]},
    },
    "required": [
        "name",
        "age",
        "email",
        "born",
        "tags",
        "role",
        "score",
        "active",
        "address",
        "nickname",
        "pets",
    ],
    "additionalProperties": False,
    "$defs": {
        "address": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "zip": {"type": "string", "maxLength": 5},
                "floor": {"type": "integer", "multipleOf": 5, "minimum": 7},
            },
            "required": ["city", "zip", "floor"],
            "additionalProperties": False,
        },
        "pet": {
            "type": "object",
            "properties": {"kind": {"const": "cat"}, "lives": {"type": "integer"}},
            "required": ["kind", "lives"],
        },
    },
}
CAPITALS_SCHEMA = {  # seed 001's response_format example
    "type": "object",
    "properties": {"capitals": {"type": "array", "items": {"type": "string"}}},
    "required": ["capitals"],
    "additionalProperties": False,
}


@pytest.fixture
def app() -> Any:
    return create_app("/v1")


def valid_for(instance: Any, schema: dict[str, Any]) -> bool:
    return jsonschema.Draft202012Validator(schema, format_checker=FORMATS).is_valid(instance)


def typed_events(body: bytes) -> list[tuple[str | None, dict[str, Any]]]:
    """(``event:`` name or None, parsed ``data:`` JSON) for each SSE event of ``body``."""
    out: list[tuple[str | None, dict[str, Any]]] = []
    event: str | None = None
    data: list[str] = []
    for line in re.split(r"\r\n|\r|\n", body.decode("utf-8")):
        if line == "":
            if data:
                out.append((event, json.loads("\n".join(data))))
            event, data = None, []
        elif line.startswith(":"):
            continue
        else:
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "event":
                event = value
            elif name == "data":
                data.append(value)
    return out


def normalise(body: bytes) -> bytes:
    """Blank the wall-clock fields so equal requests compare equal."""
    return re.sub(
        rb'"(created|created_at|completed_at|start_time|end_time)":[0-9.e+]+', rb'"\1":0', body
    )


def anthropic_request(model: str, content: Any = "Hello there", **extra: Any) -> dict[str, Any]:
    return {
        "model": model,
        "max_tokens": 1024,
        "system": "Be brief.",
        "messages": [{"role": "user", "content": content}],
        "stream": True,
        **extra,
    }


def responses_request(model: str, content: Any = "Hello there", **extra: Any) -> dict[str, Any]:
    return {
        "model": model,
        "instructions": "Be brief.",
        "input": [{"type": "message", "role": "user", "content": content}],
        "stream": True,
        **extra,
    }


def chat_request(model: str, content: Any = "Hello there", **extra: Any) -> dict[str, Any]:
    return {
        "model": model,
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": content},
        ],
        "stream": True,
        **extra,
    }


def chat_tools() -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Weather",
                "parameters": WEATHER_SCHEMA,
            },
        },
        {"type": "function", "function": {"name": "get_time", "parameters": CLOCK_SCHEMA}},
    ]


def anthropic_tools() -> list[dict[str, Any]]:
    return [
        {"name": "get_weather", "description": "Weather", "input_schema": WEATHER_SCHEMA},
        {"name": "get_time", "input_schema": CLOCK_SCHEMA},
    ]


def responses_tools() -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "name": "get_weather",
            "description": "Weather",
            "parameters": WEATHER_SCHEMA,
        },
        {"type": "function", "name": "get_time", "parameters": CLOCK_SCHEMA},
    ]


def anthropic_text(events: list[tuple[str | None, dict[str, Any]]], kind: str = "text") -> str:
    field = {"text": "text", "thinking": "thinking", "input_json": "partial_json"}[kind]
    return "".join(
        d["delta"].get(field, "")
        for _, d in events
        if d["type"] == "content_block_delta" and d["delta"]["type"] == f"{kind}_delta"
    )


def responses_text(events: list[tuple[str | None, dict[str, Any]]], kind: str) -> str:
    return "".join(d["delta"] for _, d in events if d["type"] == kind)


# ---- knobs ------------------------------------------------------------------------------


def test_new_knobs_parse_and_reject() -> None:
    knobs = parse_knobs(
        "sim-fast?tool=1&invalid_json=1&reasoning_kind=summary&event_lines=0&routing_ms=5"
        "&routed_model=sim-slow&refuse_thinking=1&fault=403,529,tool_parse_error,error_event"
    )
    assert knobs.tool and knobs.invalid_json and knobs.refuse_thinking
    assert (knobs.reasoning_kind, knobs.event_lines, knobs.routing_ms) == ("summary", False, 5)
    assert knobs.routed_model == "sim-slow"
    assert knobs.http_fault == "403" and knobs.stream_fault == "error_event"
    assert "tool" in knobs.explicit and "length" not in knobs.explicit
    assert parse_knobs("sansa-auto").sansa is True
    assert parse_knobs("sim-fast").sansa is False
    assert parse_knobs("sim-fast", "sansa=1").sansa is True
    assert parse_knobs("sim-fast").as_dict()["explicit"] == []
    for bad, param in [
        ("reasoning_kind=both", "reasoning_kind"),
        ("routed_model=gpt-9", "routed_model"),
        ("event_lines=maybe", "event_lines"),
        ("routing_ms=-1", "routing_ms"),
        ("fault=418", "fault"),
    ]:
        with pytest.raises(KnobError) as info:
            parse_knobs(f"sim-fast?{bad}")
        assert info.value.param == param


# ---- structured values ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "schema",
    [
        PERSON_SCHEMA,
        CAPITALS_SCHEMA,
        WEATHER_SCHEMA,
        {"type": "string", "minLength": 40},
        {"type": "integer", "exclusiveMinimum": 100, "multipleOf": 7},
        {"type": "number", "minimum": 0.1, "maximum": 0.2},
        {"type": "array", "items": {"type": "integer"}, "minItems": 3, "maxItems": 3},
        {"type": "array", "prefixItems": [{"type": "string"}, {"type": "boolean"}]},
        {
            "allOf": [{"$ref": "#/definitions/a"}, {"required": ["b"], "properties": {"b": {}}}],
            "definitions": {
                "a": {"type": "object", "properties": {"a": {"type": "null"}}, "required": ["a"]}
            },
        },
        {  # recursive
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "kids": {"type": "array", "items": {"$ref": "#"}},
            },
            "required": ["name", "kids"],
        },
        {"oneOf": [{"type": "null"}, {"type": "string", "format": "uuid"}]},
        {"type": "string", "format": "uri"},
    ],
)
def test_value_for_schema_validates_and_invalid_value_does_not(schema: dict[str, Any]) -> None:
    value = value_for_schema(schema)
    assert valid_for(value, schema), value
    assert value == value_for_schema(schema)  # deterministic
    broken = invalid_value_for_schema(schema)
    if broken is not None:
        assert not valid_for(broken, schema), broken


# ---- /messages: streaming shape ---------------------------------------------------------------


@needs_seed
async def test_messages_stream_events_validate_against_seed(app: Any) -> None:
    model = REASONING + "&length=12&reasoning_length=5&tokens_per_event=2"
    request = anthropic_request(model, "Why is the sky blue?")
    validate(request, "MessageCreateRequest")
    result = await call(app, "POST", MESSAGES, request, headers={"anthropic-version": "2023-06-01"})
    assert result.status == 200
    assert result.headers["content-type"].startswith("text/event-stream")
    events = typed_events(result.body)
    for name, data in events:
        assert name == data["type"]  # event: line matches the payload's type
        validate(data, "MessageStreamEvent")
    types = [d["type"] for _, d in events]
    assert types[:3] == ["message_start", "content_block_start", "ping"]
    assert types[-2:] == ["message_delta", "message_stop"]
    start = events[0][1]
    validate(start, "MessageStartEvent")
    assert start["message"]["usage"]["input_tokens"] == count_prompt_tokens(
        [{"content": "Be brief."}, {"content": "Why is the sky blue?"}]
    )
    assert start["message"]["model"] == "sim-reasoning"
    blocks = [d["content_block"]["type"] for _, d in events if d["type"] == "content_block_start"]
    assert blocks == ["thinking", "text"]
    thinking = anthropic_text(events, "thinking")
    assert thinking == "".join(reasoning_text("Why is the sky blue?", length_tokens=5))
    assert anthropic_text(events) == "".join(answer_text("Why is the sky blue?", length_tokens=12))
    signatures = [
        d["delta"]["signature"]
        for _, d in events
        if d["type"] == "content_block_delta" and d["delta"]["type"] == "signature_delta"
    ]
    assert signatures == [thinking_signature(thinking)]
    # deltas carry their block's index; each block is closed before the next opens
    order = [(d["type"], d.get("index")) for _, d in events if "index" in d]
    assert order[0] == ("content_block_start", 0) and order[-1] == ("content_block_stop", 1)
    assert ("content_block_stop", 0) in order
    assert order.index(("content_block_stop", 0)) < order.index(("content_block_start", 1))
    delta = events[-2][1]
    validate(delta, "MessageDeltaEvent")
    assert delta["delta"] == {"stop_reason": "end_turn", "stop_sequence": None}
    assert delta["usage"]["output_tokens"] == 5 + 12
    record = app.recorder.last()
    assert record.dialect == "anthropic_messages" and record.path == MESSAGES
    assert record.tokens_written == 17
    assert [e.tokens for e in record.events if e.kind == "reasoning"] == [2, 2, 1]
    assert record.event_kinds()[:5] == ["headers", "start", "block", "ping", "reasoning"]
    assert record.event_kinds()[-3:] == ["finish", "done", "end"]
    assert record.outcome == "complete"


@needs_seed
async def test_messages_non_streaming_is_a_seed_message(app: Any) -> None:
    request = anthropic_request(REASONING + "&length=6&reasoning_length=3", stream=False)
    result = await call(app, "POST", MESSAGES, request)
    assert result.status == 200 and result.headers["content-type"] == "application/json"
    body = result.json()
    validate(body, "Message")
    assert SEED_002 is not None
    validate(
        body,
        SEED_002["paths"]["/messages"]["post"]["responses"]["200"]["content"]["application/json"][
            "schema"
        ],
    )
    thinking, text = body["content"]
    assert thinking["type"] == "thinking"
    assert thinking["thinking"] == "".join(reasoning_text("Hello there", length_tokens=3))
    assert thinking["signature"] == thinking_signature(thinking["thinking"])
    assert text == {"type": "text", "text": "".join(answer_text("Hello there", length_tokens=6))}
    assert body["stop_reason"] == "end_turn" and body["usage"]["output_tokens"] == 9
    assert body["id"].startswith("msg_")
    assert app.recorder.last().tokens_written == 9


async def test_messages_thinking_switch(app: Any) -> None:
    def blocks(result: Any) -> list[str]:
        return [
            d["content_block"]["type"]
            for _, d in typed_events(result.body)
            if d["type"] == "content_block_start"
        ]

    enabled = {"type": "enabled", "budget_tokens": 2048}
    on = await call(app, "POST", MESSAGES, anthropic_request(FAST + "&length=2", thinking=enabled))
    assert blocks(on) == ["thinking", "text"]
    off = await call(
        app,
        "POST",
        MESSAGES,
        anthropic_request(REASONING + "&length=2", thinking={"type": "disabled"}),
    )
    assert blocks(off) == ["text"]
    default = await call(app, "POST", MESSAGES, anthropic_request(REASONING + "&length=2"))
    assert blocks(default) == ["thinking", "text"]
    knob = await call(
        app, "POST", MESSAGES, anthropic_request(FAST + "&length=2&reasoning=0", thinking=enabled)
    )
    assert blocks(knob) == ["text"]  # an explicit knob wins over the request
    refused = await call(
        app, "POST", MESSAGES, anthropic_request(FAST + "&refuse_thinking=1", thinking=enabled)
    )
    assert refused.status == 400
    assert refused.json()["error"]["type"] == "invalid_request_error"
    assert "unsupported_parameter" in refused.json()["error"]["message"]


async def test_messages_event_lines_knob_and_framing(app: Any) -> None:
    result = await call(app, "POST", MESSAGES, anthropic_request(FAST + "&length=3&event_lines=0"))
    assert b"event:" not in result.body
    assert [d["type"] for _, d in typed_events(result.body)][-1] == "message_stop"
    framed = await call(
        app, "POST", MESSAGES, anthropic_request(FAST + "&length=3&crlf=1&sse_ids=1&multiline=1")
    )
    text = framed.body.decode()
    assert text.startswith("retry: 3000\r\n\r\nid: 1\r\nevent: message_start\r\ndata: {\r\n")
    assert anthropic_text(typed_events(framed.body)) == "".join(
        answer_text("Hello there", length_tokens=3)
    )


async def test_messages_max_tokens_required_capped_and_stop_sequences(app: Any) -> None:
    missing = anthropic_request(FAST)
    del missing["max_tokens"]
    result = await call(app, "POST", MESSAGES, missing)
    assert result.status == 400
    assert result.json()["type"] == "error"
    assert result.json()["error"] == {
        "type": "invalid_request_error",
        "message": "max_tokens: Field required",
    }
    assert result.json()["request_id"] == result.headers["x-request-id"]
    zero = await call(app, "POST", MESSAGES, anthropic_request(FAST, max_tokens=0))
    assert zero.status == 400
    capped = await call(app, "POST", MESSAGES, anthropic_request(FAST + "&length=20", max_tokens=4))
    events = typed_events(capped.body)
    assert anthropic_text(events) == "".join(answer_text("Hello there", length_tokens=4))
    assert events[-2][1]["delta"]["stop_reason"] == "max_tokens"
    stopped = await call(
        app,
        "POST",
        MESSAGES,
        anthropic_request(FAST + "&length=20", stop_sequences=["answer"], stream=False),
    )
    body = stopped.json()
    assert body["stop_reason"] == "stop_sequence" and body["stop_sequence"] == "answer"
    assert body["content"][0]["text"] == "## Simulated "


@needs_seed
@pytest.mark.parametrize(
    "body,message",
    [
        (
            {"max_tokens": 5, "messages": [{"role": "user", "content": "x"}]},
            "model: Field required",
        ),
        ({"model": "sim-fast", "max_tokens": 5}, "messages: Field required"),
        ({"model": "sim-fast", "max_tokens": 5, "messages": []}, "at least 1 item"),
        (
            {
                "model": "sim-fast",
                "max_tokens": 5,
                "messages": [{"role": "system", "content": "x"}],
            },
            "messages.0.role",
        ),
    ],
)
async def test_messages_validation_errors(app: Any, body: dict[str, Any], message: str) -> None:
    result = await call(app, "POST", MESSAGES, body)
    assert result.status == 400
    validate(result.json(), "MessageErrorResponse")
    assert message in result.json()["error"]["message"]
    bad_json = await call(app, "POST", MESSAGES, raw=b"{nope")
    assert bad_json.status == 400 and bad_json.json()["error"]["type"] == "invalid_request_error"
    unknown = await call(app, "POST", MESSAGES, anthropic_request("claude-9"))
    assert unknown.status == 404 and unknown.json()["error"]["type"] == "not_found_error"


@needs_seed
@pytest.mark.parametrize(
    "fault,status,error_type",
    [
        ("400", 400, "invalid_request_error"),
        ("401", 401, "authentication_error"),
        ("403", 403, "permission_error"),
        ("404", 404, "not_found_error"),
        ("413", 413, "request_too_large"),
        ("429", 429, "rate_limit_error"),
        ("500", 500, "api_error"),
        ("501", 501, "not_implemented_error"),
        ("503", 503, "overloaded_error"),
        ("529", 529, "overloaded_error"),
    ],
)
async def test_messages_http_faults_use_anthropic_envelope(
    app: Any, fault: str, status: int, error_type: str
) -> None:
    assert SEED_002 is not None
    seed_responses = SEED_002["paths"]["/messages"]["post"]["responses"]
    for path in (MESSAGES, COUNT):
        for stream in (True, False):
            result = await call(
                app, "POST", path, anthropic_request(f"sim-fast?fault={fault}", stream=stream)
            )
            assert result.status == status
            assert result.headers["content-type"] == "application/json"
            body = result.json()
            validate(body, "MessageErrorResponse")
            if str(status) in seed_responses:
                validate(body, seed_responses[str(status)]["content"]["application/json"]["schema"])
            assert body["error"]["type"] == error_type
            assert body["request_id"] == result.headers["x-request-id"]
            if fault == "429":
                assert result.headers["retry-after"] == "7"


async def test_messages_other_faults_and_auth(app: Any) -> None:
    credits = await call(app, "POST", MESSAGES, anthropic_request("sim-fast?fault=402"))
    assert credits.status == 402 and credits.json()["error"]["code"] == "insufficient_credits"
    gateway = await call(app, "POST", MESSAGES, anthropic_request("sim-fast?fault=502"))
    assert gateway.status == 502 and gateway.body == b""
    key = "sk-ant-SECRET-1"
    echo = await call(
        app,
        "POST",
        MESSAGES,
        anthropic_request("sim-fast?fault=echo_key"),
        headers={"x-api-key": key},
    )
    assert echo.status == 401 and key in echo.json()["error"]["message"]
    assert key not in json.dumps(app.recorder.to_list())
    no_key = await call(app, "POST", MESSAGES, anthropic_request(FAST + "&require_key=1"))
    assert no_key.status == 401 and no_key.json()["error"]["type"] == "authentication_error"
    for headers in ({"x-api-key": "k-1"}, {"Authorization": "Bearer k-1"}):
        ok = await call(
            app,
            "POST",
            MESSAGES,
            anthropic_request(FAST + "&require_key=1&length=1"),
            headers=headers,
        )
        assert ok.status == 200
        record = app.recorder.last()
        assert record.auth_present and record.headers.get("x-api-key", "[redacted]") == "[redacted]"


@needs_seed
async def test_messages_stream_faults(app: Any) -> None:
    model = FAST + "&length=10&fault=error_chunk&fault_after=3"
    result = await call(app, "POST", MESSAGES, anthropic_request(model))
    events = typed_events(result.body)
    name, error = events[-1]
    assert name == "error"
    validate(error, "MessageStreamErrorEvent")
    validate(error, "MessageStreamEvent")
    assert error["error"]["type"] == "overloaded_error"
    assert anthropic_text(events) == "".join(answer_text("Hello there", length_tokens=3))
    assert "message_stop" not in [d["type"] for _, d in events]
    assert app.recorder.last().outcome == "error_chunk"
    cut = await call(
        app, "POST", MESSAGES, anthropic_request(FAST + "&length=10&fault=cut&fault_after=99")
    )
    cut_types = [d["type"] for _, d in typed_events(cut.body)]
    assert cut_types[-1] == "content_block_stop" and "message_delta" not in cut_types
    assert app.recorder.last().outcome == "cut"
    keep = await call(app, "POST", MESSAGES, anthropic_request(FAST + "&length=3&fault=keepalive"))
    assert sum(1 for e in parse_sse(keep.body) if e.comment == "keep-alive") == 3
    overloaded = await call(
        app, "POST", MESSAGES, anthropic_request(FAST + "&fault=error_chunk", stream=False)
    )
    assert overloaded.status == 529 and overloaded.json()["error"]["type"] == "overloaded_error"
    half = await call(app, "POST", MESSAGES, anthropic_request(FAST + "&fault=cut", stream=False))
    with pytest.raises(ValueError):
        json.loads(half.body)


@needs_seed
async def test_count_tokens_matches_message_start(app: Any) -> None:
    content = [{"type": "text", "text": "Count these five words"}]
    request = anthropic_request(FAST + "&length=1", content, tools=anthropic_tools())
    counted = await call(
        app,
        "POST",
        COUNT,
        {k: request[k] for k in ("model", "system", "messages", "tools")},
    )
    assert counted.status == 200
    validate(counted.json(), "MessageCountTokensResponse")
    assert app.recorder.last().dialect == "count_tokens"
    started = await call(app, "POST", MESSAGES, request)
    input_tokens = typed_events(started.body)[0][1]["message"]["usage"]["input_tokens"]
    assert counted.json() == {"input_tokens": input_tokens}
    assert input_tokens > count_prompt_tokens([{"content": "Be brief."}, {"content": "x " * 4}])
    no_messages = await call(app, "POST", COUNT, {"model": "sim-fast"})
    assert no_messages.status == 400 and no_messages.json()["type"] == "error"
    wrong = await call(app, "GET", COUNT)
    assert wrong.status == 405


# ---- /messages: tools, tool results, images ---------------------------------------------------


@needs_seed
async def test_messages_tool_use_streamed_and_valid(app: Any) -> None:
    request = anthropic_request(FAST + "&tool=1&tokens_per_event=2", tools=anthropic_tools())
    validate(request, "MessageCreateRequest")
    result = await call(app, "POST", MESSAGES, request)
    events = typed_events(result.body)
    for _, data in events:
        validate(data, "MessageStreamEvent")
    starts = [d["content_block"] for _, d in events if d["type"] == "content_block_start"]
    assert [b["type"] for b in starts] == ["tool_use"]
    assert starts[0]["name"] == "get_weather" and starts[0]["id"].startswith("toolu_")
    pieces = [
        d["delta"]["partial_json"]
        for _, d in events
        if d["type"] == "content_block_delta" and d["delta"]["type"] == "input_json_delta"
    ]
    assert len(pieces) > 3
    arguments = json.loads("".join(pieces))
    assert valid_for(arguments, WEATHER_SCHEMA)
    assert events[-2][1]["delta"]["stop_reason"] == "tool_use"
    assert app.recorder.last().event_kinds().count("tool") == len(pieces)
    nonstream = await call(app, "POST", MESSAGES, {**request, "stream": False})
    body = nonstream.json()
    validate(body, "Message")
    assert body["content"][-1]["type"] == "tool_use" and body["content"][-1]["input"] == arguments
    assert body["stop_reason"] == "tool_use"
    named = await call(
        app,
        "POST",
        MESSAGES,
        anthropic_request(
            FAST, tools=anthropic_tools(), tool_choice={"type": "tool", "name": "get_time"}
        ),
    )
    named_args = json.loads(anthropic_text(typed_events(named.body), "input_json"))
    assert valid_for(named_args, CLOCK_SCHEMA)
    anyone = await call(
        app,
        "POST",
        MESSAGES,
        anthropic_request(FAST, tools=anthropic_tools(), tool_choice={"type": "any"}),
    )
    assert anthropic_text(typed_events(anyone.body), "input_json")
    none = await call(
        app,
        "POST",
        MESSAGES,
        anthropic_request(
            FAST + "&tool=1&length=2", tools=anthropic_tools(), tool_choice={"type": "none"}
        ),
    )
    assert anthropic_text(typed_events(none.body), "input_json") == ""
    plain = await call(
        app, "POST", MESSAGES, anthropic_request(FAST + "&length=2", tools=anthropic_tools())
    )
    assert anthropic_text(typed_events(plain.body), "input_json") == ""  # auto: text by default
    missing = await call(
        app,
        "POST",
        MESSAGES,
        anthropic_request(
            FAST, tools=anthropic_tools(), tool_choice={"type": "tool", "name": "nope"}
        ),
    )
    assert missing.status == 400


async def test_messages_tool_result_is_quoted(app: Any) -> None:
    request = {
        "model": FAST + "&tool=1",
        "max_tokens": 100,
        "stream": True,
        "tools": anthropic_tools(),
        "messages": [
            {"role": "user", "content": "Weather in Paris?"},
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "get_weather",
                        "input": {"city": "Paris"},
                    }
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_1",
                        "content": '{"temp_c": 21, "sky": "clear"}',
                    }
                ],
            },
        ],
    }
    result = await call(app, "POST", MESSAGES, request)
    text = anthropic_text(typed_events(result.body))
    assert text == 'The tool returned: {"temp_c": 21, "sky": "clear"}'
    assert typed_events(result.body)[-2][1]["delta"]["stop_reason"] == "end_turn"
    blocks = dict(request)
    blocks["messages"] = [
        *request["messages"][:2],
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": [{"type": "text", "text": "sunny"}],
                }
            ],
        },
    ]
    again = await call(app, "POST", MESSAGES, {**blocks, "stream": False})
    assert again.json()["content"][0]["text"] == "The tool returned: sunny"


async def test_messages_image_blocks_arrive(app: Any) -> None:
    content = [
        {"type": "text", "text": "What is this?"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}},
    ]
    result = await call(app, "POST", MESSAGES, anthropic_request(FAST, content, stream=False))
    text = result.json()["content"][0]["text"]
    assert text.startswith("I see 2 images.\n\n## Simulated answer")
    assert "You said: “What is this?”" in text
    media = app.recorder.last().media
    assert media[0] == {
        "kind": "image",
        "part": "image",
        "source": "data",
        "media_type": "image/png",
        "valid_base64": True,
        "bytes": len(base64.b64decode(PNG)),
        "sha256": hashlib.sha256(base64.b64decode(PNG)).hexdigest()[:16],
    }
    assert media[1] == {
        "kind": "image",
        "part": "image",
        "source": "url",
        "url": "https://example.com/cat.jpg",
    }


# ---- /responses ---------------------------------------------------------------------------------

RESPONSES_SEED_TYPES = {
    "response.created": "ResponseCreatedEvent",
    "response.in_progress": "ResponseInProgressEvent",
    "response.output_item.added": "ResponseOutputItemAddedEvent",
    "response.output_item.done": "ResponseOutputItemDoneEvent",
    "response.content_part.added": "ResponseContentPartAddedEvent",
    "response.content_part.done": "ResponseContentPartDoneEvent",
    "response.reasoning_text.delta": "ResponseReasoningTextDeltaEvent",
    "response.reasoning_text.done": "ResponseReasoningTextDoneEvent",
    "response.output_text.delta": "ResponseOutputTextDeltaEvent",
    "response.output_text.done": "ResponseOutputTextDoneEvent",
    "response.function_call_arguments.delta": "ResponseFunctionCallArgumentsDeltaEvent",
    "response.function_call_arguments.done": "ResponseFunctionCallArgumentsDoneEvent",
    "response.completed": "ResponseCompletedEvent",
}


def check_responses_stream(events: list[tuple[str | None, dict[str, Any]]]) -> None:
    """Every event: seed-valid when the seed has its type, numbered 0, 1, 2, …"""
    for index, (name, data) in enumerate(events):
        assert data["sequence_number"] == index
        assert name is None or name == data["type"]
        if data["type"] in RESPONSES_SEED_TYPES:
            validate(data, "ResponseStreamEvent")
            validate(data, RESPONSES_SEED_TYPES[data["type"]])
        elif "response" in data:  # response.incomplete / response.failed
            validate(data["response"], "ResponseResponse")


@needs_seed
async def test_responses_stream_validates_against_seed(app: Any) -> None:
    model = REASONING + "&length=10&reasoning_length=4&tokens_per_event=3"
    request = responses_request(model, [{"type": "input_text", "text": "Tell me a story"}])
    validate(request, "ResponseRequest")
    result = await call(app, "POST", RESPONSES, request)
    assert result.status == 200
    events = typed_events(result.body)
    check_responses_stream(events)
    types = [d["type"] for _, d in events]
    assert types[:3] == ["response.created", "response.in_progress", "response.output_item.added"]
    assert types[-1] == "response.completed"
    assert events[0][1]["response"]["status"] == "in_progress"
    assert responses_text(events, "response.reasoning_text.delta") == "".join(
        reasoning_text("Tell me a story", length_tokens=4)
    )
    answer = "".join(answer_text("Tell me a story", length_tokens=10))
    assert responses_text(events, "response.output_text.delta") == answer
    done = next(d for _, d in events if d["type"] == "response.output_text.done")
    assert done["text"] == answer
    final = events[-1][1]["response"]
    validate(final, "ResponseResponse")
    assert final["status"] == "completed"
    assert [item["type"] for item in final["output"]] == ["reasoning", "message"]
    assert final["output"][1]["content"][0]["text"] == answer
    usage = final["usage"]
    validate(usage, "ResponseUsage")
    prompt = count_prompt_tokens([{"content": "Be brief."}, {"content": "Tell me a story"}])
    assert (usage["input_tokens"], usage["output_tokens"]) == (prompt, 14)
    assert usage["total_tokens"] == prompt + 14
    assert usage["output_tokens_details"] == {"reasoning_tokens": 4}
    assert usage["input_tokens_details"] == {"cached_tokens": 0}
    record = app.recorder.last()
    assert record.dialect == "openai_responses" and record.tokens_written == 14
    assert [e.tokens for e in record.events if e.kind == "content"] == [3, 3, 3, 1]


@needs_seed
async def test_responses_non_streaming_and_string_input(app: Any) -> None:
    request = {"model": REASONING + "&length=5&reasoning_length=2", "input": "Hi"}
    result = await call(app, "POST", RESPONSES, request)
    body = result.json()
    validate(body, "ResponseResponse")
    assert SEED_002 is not None
    validate(
        body,
        SEED_002["paths"]["/responses"]["post"]["responses"]["200"]["content"]["application/json"][
            "schema"
        ],
    )
    assert body["status"] == "completed" and body["id"].startswith("resp_")
    assert body["output"][0]["content"] == [
        {"type": "reasoning_text", "text": "".join(reasoning_text("Hi", length_tokens=2))}
    ]
    assert body["output"][1]["content"][0]["text"] == "".join(answer_text("Hi", length_tokens=5))
    assert body["usage"]["output_tokens"] == 7
    assert app.recorder.last().stream is False


async def test_responses_reasoning_summary_and_event_lines(app: Any) -> None:
    model = REASONING + "&length=2&reasoning_length=3&reasoning_kind=summary&event_lines=0"
    result = await call(app, "POST", RESPONSES, responses_request(model, "Why?"))
    assert b"event:" not in result.body
    events = typed_events(result.body)
    assert all(name is None for name, _ in events)
    check_responses_stream(events)
    types = [d["type"] for _, d in events]
    assert "response.reasoning_text.delta" not in types
    for kind in (
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_text.done",
        "response.reasoning_summary_part.done",
    ):
        assert types.count(kind) == 1
    deltas = [d for _, d in events if d["type"] == "response.reasoning_summary_text.delta"]
    assert all(d["summary_index"] == 0 and d["output_index"] == 0 for d in deltas)
    summary = "".join(d["delta"] for d in deltas)
    assert summary == "".join(reasoning_text("Why?", length_tokens=3))
    final = events[-1][1]["response"]
    assert final["output"][0]["summary"] == [{"type": "summary_text", "text": summary}]
    assert final["usage"]["output_tokens_details"] == {"reasoning_tokens": 3}


async def test_responses_max_output_tokens_is_incomplete(app: Any) -> None:
    result = await call(
        app, "POST", RESPONSES, responses_request(FAST + "&length=20", max_output_tokens=3)
    )
    events = typed_events(result.body)
    check_responses_stream(events)
    assert events[-1][1]["type"] == "response.incomplete"
    final = events[-1][1]["response"]
    assert final["status"] == "incomplete"
    assert final["incomplete_details"] == {"reason": "max_output_tokens"}
    assert responses_text(events, "response.output_text.delta") == "".join(
        answer_text("Hello there", length_tokens=3)
    )
    bad = await call(app, "POST", RESPONSES, responses_request(FAST, max_output_tokens=0))
    assert bad.status == 400 and bad.json()["error"]["param"] == "max_output_tokens"


def _without_request_id(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k != "request_id"}


def responses_seed(status: int, content_type: str = "application/json") -> dict[str, Any]:
    assert SEED_002 is not None
    return SEED_002["paths"]["/responses"]["post"]["responses"][str(status)]["content"][
        content_type
    ]


@needs_seed
@pytest.mark.parametrize(
    "body,raw,status,example",
    [
        (None, b"{not json", 400, "invalid_json"),
        ({"model": "sim-fast"}, None, 400, "missing_input"),
        ({"model": "sim-fast", "input": []}, None, 400, "empty_input"),
        (
            {
                "model": "sim-fast",
                "input": [
                    {"type": "message", "role": "user", "content": "x"},
                    {"type": "message", "role": "foo", "content": "y"},
                ],
            },
            None,
            400,
            "invalid_role",
        ),
        ({"model": "abc", "input": "x"}, None, 404, "model_not_found"),
    ],
)
async def test_responses_validation_errors_are_seed_examples(
    app: Any, body: Any, raw: bytes | None, status: int, example: str
) -> None:
    result = await call(app, "POST", RESPONSES, body, raw=raw)
    assert result.status == status
    seed = responses_seed(status)
    validate(result.json(), seed["schema"])
    expected = seed["examples"][example]["value"]
    assert _without_request_id(result.json()) == _without_request_id(expected)
    assert result.json()["request_id"] == result.headers["x-request-id"]


@needs_seed
@pytest.mark.parametrize(
    "fault,status", [("401", 401), ("404", 404), ("408", 408), ("410", 410), ("429", 429)]
)
async def test_responses_http_faults(app: Any, fault: str, status: int) -> None:
    result = await call(app, "POST", RESPONSES, responses_request(f"sim-fast?fault={fault}"))
    assert result.status == status
    validate(result.json(), responses_seed(status)["schema"])
    text_errors = await call(app, "POST", RESPONSES, responses_request("sim-fast?fault=503"))
    validate(text_errors.body.decode(), responses_seed(503, "text/plain")["schema"])


@needs_seed
async def test_tool_parse_error_is_the_seed_example(app: Any) -> None:
    expected = responses_seed(400)["examples"]["adapter_mapping_failed"]["value"]
    for path, request in (
        (RESPONSES, responses_request("sim-fast?fault=tool_parse_error")),
        (CHAT, chat_request("sim-fast?fault=tool_parse_error")),
    ):
        result = await call(app, "POST", path, request)
        assert result.status == 400
        validate(result.json(), "GeneralError")
        assert _without_request_id(result.json()) == _without_request_id(expected)


@needs_seed
async def test_responses_stream_faults(app: Any) -> None:
    failed = await call(
        app,
        "POST",
        RESPONSES,
        responses_request(FAST + "&length=10&fault=error_chunk&fault_after=2"),
    )
    events = typed_events(failed.body)
    check_responses_stream(events)
    last = events[-1][1]
    assert last["type"] == "response.failed"
    assert last["response"]["status"] == "failed"
    assert last["response"]["error"]["code"] == "server_error"
    assert responses_text(events, "response.output_text.delta") == "".join(
        answer_text("Hello there", length_tokens=2)
    )
    assert app.recorder.last().outcome == "error_chunk"
    errored = await call(
        app,
        "POST",
        RESPONSES,
        responses_request(FAST + "&length=10&fault=error_event&fault_after=0"),
    )
    name, error = typed_events(errored.body)[-1]
    assert name == "error" == error["type"]
    assert set(error) == {"type", "sequence_number", "code", "message", "param"}
    assert app.recorder.last().outcome == "error_event"
    stall = await call(
        app,
        "POST",
        RESPONSES,
        responses_request(FAST + "&length=5&fault=stall&fault_after=1&stall_ms=100"),
    )
    assert "response.completed" not in [d["type"] for _, d in typed_events(stall.body)]
    assert app.recorder.last().outcome == "stall"
    nonstream = await call(
        app, "POST", RESPONSES, responses_request(FAST + "&fault=error_chunk", stream=False)
    )
    assert nonstream.status == 500
    validate(nonstream.json(), "GeneralError")


@needs_seed
async def test_responses_function_call_and_output(app: Any) -> None:
    request = responses_request(FAST + "&tool=1", tools=responses_tools())
    validate(request, "ResponseRequest")
    result = await call(app, "POST", RESPONSES, request)
    events = typed_events(result.body)
    check_responses_stream(events)
    added = [d["item"] for _, d in events if d["type"] == "response.output_item.added"]
    assert [item["type"] for item in added] == ["function_call"]
    arguments = responses_text(events, "response.function_call_arguments.delta")
    assert valid_for(json.loads(arguments), WEATHER_SCHEMA)
    done = next(d for _, d in events if d["type"] == "response.function_call_arguments.done")
    assert done["arguments"] == arguments and done["name"] == "get_weather"
    final = events[-1][1]["response"]
    call_item = final["output"][0]
    assert call_item["type"] == "function_call" and call_item["arguments"] == arguments
    assert call_item["call_id"].startswith("call_") and call_item["id"].startswith("fc_")
    named = await call(
        app,
        "POST",
        RESPONSES,
        responses_request(
            FAST, tools=responses_tools(), tool_choice={"type": "function", "name": "get_time"}
        ),
    )
    args = json.loads(
        responses_text(typed_events(named.body), "response.function_call_arguments.delta")
    )
    assert valid_for(args, CLOCK_SCHEMA)
    follow_up = {
        "model": FAST + "&tool=1",
        "stream": False,
        "tools": responses_tools(),
        "input": [
            {"type": "message", "role": "user", "content": "Weather?"},
            {
                "type": "function_call",
                "call_id": call_item["call_id"],
                "name": "get_weather",
                "arguments": arguments,
            },
            {
                "type": "function_call_output",
                "call_id": call_item["call_id"],
                "output": "22 °C, dry",
            },
        ],
    }
    validate(follow_up, "ResponseRequest")
    answer = await call(app, "POST", RESPONSES, follow_up)
    assert answer.json()["output"][0]["content"][0]["text"] == "The tool returned: 22 °C, dry"


@needs_seed
async def test_responses_structured_output(app: Any) -> None:
    fmt = {"type": "json_schema", "name": "person", "schema": PERSON_SCHEMA, "strict": True}
    request = responses_request(FAST + "&tokens_per_event=4", text={"format": fmt})
    validate(request, "ResponseRequest")
    result = await call(app, "POST", RESPONSES, request)
    events = typed_events(result.body)
    check_responses_stream(events)
    deltas = [d["delta"] for _, d in events if d["type"] == "response.output_text.delta"]
    assert len(deltas) > 5  # streamed in pieces
    answer = json.loads("".join(deltas))
    assert valid_for(answer, PERSON_SCHEMA)
    assert events[-1][1]["response"]["text"] == {"format": fmt}
    invalid = await call(
        app, "POST", RESPONSES, responses_request(FAST + "&invalid_json=1", text={"format": fmt})
    )
    broken = json.loads(responses_text(typed_events(invalid.body), "response.output_text.delta"))
    assert not valid_for(broken, PERSON_SCHEMA)
    obj = await call(
        app,
        "POST",
        RESPONSES,
        responses_request(FAST, "a b c", text={"format": {"type": "json_object"}}, stream=False),
    )
    assert json.loads(obj.json()["output"][0]["content"][0]["text"]) == {
        "answer": "Simulated JSON answer",
        "you_said": "a b c",
    }


async def test_responses_image_and_audio_arrive(app: Any) -> None:
    content = [
        {"type": "input_text", "text": "Describe"},
        {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}"},
        {"type": "input_audio", "input_audio": {"data": WAV, "format": "wav"}},
    ]
    result = await call(app, "POST", RESPONSES, responses_request(FAST, content, stream=False))
    text = result.json()["output"][0]["content"][0]["text"]
    assert text.startswith("I see 1 image. I hear 1 audio clip.\n\n")
    media = app.recorder.last().media
    assert [(m["kind"], m["part"], m["media_type"]) for m in media] == [
        ("image", "input_image", "image/png"),
        ("audio", "input_audio", "audio/wav"),
    ]
    assert media[1]["bytes"] == len(base64.b64decode(WAV))


# ---- chat completions: tools, structured output, logprobs, media -------------------------------


@needs_seed
async def test_chat_tool_calls_streamed(app: Any) -> None:
    request = chat_request(FAST + "&tool=1", tools=chat_tools())
    validate(request, "ChatCompletionRequest")
    result = await call(app, "POST", CHAT, request)
    body_chunks = chunks(result.body)
    for chunk in body_chunks:
        validate(chunk, "ChatCompletionStreamResponse")
    calls = [
        c["choices"][0]["delta"]["tool_calls"][0]
        for c in body_chunks
        if c["choices"] and c["choices"][0]["delta"].get("tool_calls")
    ]
    assert len(calls) > 3
    first = calls[0]
    assert first["id"].startswith("call_") and first["type"] == "function"
    assert first["function"]["name"] == "get_weather"
    assert all(c["index"] == 0 for c in calls) and all("id" not in c for c in calls[1:])
    arguments = "".join(c["function"]["arguments"] for c in calls)
    assert valid_for(json.loads(arguments), WEATHER_SCHEMA)
    finish = body_chunks[-2]["choices"][0]
    assert finish["finish_reason"] == "tool_calls"
    assert body_chunks[-1]["usage"]["stop_reason"] == "tool_calls"
    assert content_of(body_chunks) == ""
    nonstream = await call(app, "POST", CHAT, {**request, "stream": False})
    body = nonstream.json()
    validate(body, "ChatCompletionResponse")
    message = body["choices"][0]["message"]
    assert message["content"] is None
    (tool_call,) = message["tool_calls"]
    assert tool_call["id"].startswith("call_") and tool_call["type"] == "function"
    assert tool_call["function"] == {"name": "get_weather", "arguments": arguments}
    assert body["choices"][0]["finish_reason"] == "tool_calls"


async def test_chat_tool_choice_variants(app: Any) -> None:
    def tool_args(result: Any) -> str:
        return "".join(
            c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"]
            for c in chunks(result.body)
            if c["choices"] and c["choices"][0]["delta"].get("tool_calls")
        )

    required = await call(
        app, "POST", CHAT, chat_request(FAST, tools=chat_tools(), tool_choice="required")
    )
    assert valid_for(json.loads(tool_args(required)), WEATHER_SCHEMA)
    named = await call(
        app,
        "POST",
        CHAT,
        chat_request(
            FAST,
            tools=chat_tools(),
            tool_choice={"type": "function", "function": {"name": "get_time"}},
        ),
    )
    assert valid_for(json.loads(tool_args(named)), CLOCK_SCHEMA)
    none = await call(
        app,
        "POST",
        CHAT,
        chat_request(FAST + "&tool=1&length=3", tools=chat_tools(), tool_choice="none"),
    )
    assert tool_args(none) == "" and content_of(chunks(none.body))
    auto = await call(app, "POST", CHAT, chat_request(FAST + "&length=3", tools=chat_tools()))
    assert tool_args(auto) == ""
    unknown = await call(
        app,
        "POST",
        CHAT,
        chat_request(
            FAST, tools=chat_tools(), tool_choice={"type": "function", "function": {"name": "nope"}}
        ),
    )
    assert unknown.status == 400 and unknown.json()["error"]["param"] == "tool_choice"
    capped = await call(
        app, "POST", CHAT, chat_request(FAST + "&tool=1", tools=chat_tools(), max_tokens=2)
    )
    assert chunks(capped.body)[-2]["choices"][0]["finish_reason"] == "length"
    assert len(tool_args(capped)) < 10


async def test_chat_tool_result_is_quoted(app: Any) -> None:
    request = {
        "model": FAST + "&tool=1",
        "stream": True,
        "tools": chat_tools(),
        "messages": [
            {"role": "user", "content": "Weather?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "It is 18 degrees and raining."},
        ],
    }
    result = await call(app, "POST", CHAT, request)
    assert content_of(chunks(result.body)) == "The tool returned: It is 18 degrees and raining."
    assert chunks(result.body)[-2]["choices"][0]["finish_reason"] == "stop"


@needs_seed
async def test_chat_structured_output_valid_and_invalid(app: Any) -> None:
    fmt = {
        "type": "json_schema",
        "json_schema": {"name": "person", "strict": True, "schema": PERSON_SCHEMA},
    }
    request = chat_request(FAST, response_format=fmt)
    validate(request, "ChatCompletionRequest")
    result = await call(app, "POST", CHAT, request)
    pieces = [c["choices"][0]["delta"].get("content") for c in chunks(result.body)[1:-2]]
    assert len(pieces) > 10
    answer = json.loads("".join(pieces))
    assert valid_for(answer, PERSON_SCHEMA)
    nonstream = await call(app, "POST", CHAT, {**request, "stream": False})
    assert json.loads(nonstream.json()["choices"][0]["message"]["content"]) == answer
    invalid = await call(
        app, "POST", CHAT, chat_request(FAST + "&invalid_json=1", response_format=fmt)
    )
    broken = json.loads(content_of(chunks(invalid.body)))
    assert not valid_for(broken, PERSON_SCHEMA)
    seed_example = {
        "type": "json_schema",
        "json_schema": {"name": "capitals", "strict": True, "schema": CAPITALS_SCHEMA},
    }
    capitals = await call(
        app,
        "POST",
        CHAT,
        chat_request(FAST, "List 3 European capitals.", response_format=seed_example),
    )
    assert valid_for(json.loads(content_of(chunks(capitals.body))), CAPITALS_SCHEMA)
    obj = await call(
        app, "POST", CHAT, chat_request(FAST, "a b", response_format={"type": "json_object"})
    )
    assert json.loads(content_of(chunks(obj.body))) == {
        "answer": "Simulated JSON answer",
        "you_said": "a b",
    }
    bad_obj = await call(
        app,
        "POST",
        CHAT,
        chat_request(FAST + "&invalid_json=1", response_format={"type": "json_object"}),
    )
    with pytest.raises(ValueError):
        json.loads(content_of(chunks(bad_obj.body)))


#: Seed 002's LogProbs as its examples (and OpenAI) use it: ``content`` and each entry's
#: ``top_logprobs`` are arrays. Its schema types ``content`` as one ``LogProbsContent`` (no
#: ``type``, so an array passes it vacuously) and ``top_logprobs`` as one ``TopLogProbs`` object,
#: which its own examples break; entries here are checked field by field, alternatives against
#: ``TopLogProbs``.
LOGPROBS_AS_IN_EXAMPLES = {
    "type": "object",
    "required": ["content"],
    "properties": {
        "content": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["token", "logprob", "top_logprobs"],
                "properties": {
                    "token": {"type": "string"},
                    "logprob": {"type": "number"},
                    "bytes": {
                        "anyOf": [{"type": "array", "items": {"type": "integer"}}, {"type": "null"}]
                    },
                    "top_logprobs": {
                        "type": "array",
                        "items": {"$ref": "#/components/schemas/TopLogProbs"},
                    },
                },
            },
        }
    },
}


@needs_seed
async def test_chat_logprobs(app: Any) -> None:
    assert SEED_002 is not None
    for example in SEED_002["components"]["schemas"]["LogProbs"]["examples"]:
        validate(example, LOGPROBS_AS_IN_EXAMPLES)
    request = chat_request(FAST + "&length=8&tokens_per_event=3", logprobs=True, top_logprobs=3)
    result = await call(app, "POST", CHAT, request)
    body_chunks = chunks(result.body)
    tokens = answer_text("Hello there", length_tokens=8)
    seen: list[dict[str, Any]] = []
    for chunk in body_chunks:
        validate(chunk, "ChatCompletionStreamResponse")
        if not chunk["choices"]:
            continue
        choice = chunk["choices"][0]
        if choice["delta"].get("content"):
            validate(choice["logprobs"], LOGPROBS_AS_IN_EXAMPLES)
            validate(choice["logprobs"], "LogProbs")
            entries = choice["logprobs"]["content"]
            assert "".join(e["token"] for e in entries) == choice["delta"]["content"]
            seen.extend(entries)
        else:
            assert choice["logprobs"] is None
    assert [e["token"] for e in seen] == tokens
    for entry in seen:
        assert entry["bytes"] == list(entry["token"].encode())
        assert entry["logprob"] < 0
        assert len(entry["top_logprobs"]) == 3
        assert entry["top_logprobs"][0]["token"] == entry["token"]
        assert all(alt["logprob"] <= entry["logprob"] for alt in entry["top_logprobs"])
    again = await call(app, "POST", CHAT, request)
    assert normalise(again.body) == normalise(result.body)
    nonstream = await call(app, "POST", CHAT, {**request, "stream": False})
    body = nonstream.json()
    validate(body, "ChatCompletionResponse")
    assert body["choices"][0]["logprobs"]["content"] == seen
    plain = await call(app, "POST", CHAT, chat_request(FAST + "&length=2", logprobs=True))
    entries = chunks(plain.body)[1]["choices"][0]["logprobs"]["content"]
    assert entries[0]["top_logprobs"] == []
    bad = await call(app, "POST", CHAT, chat_request(FAST, logprobs=True, top_logprobs=21))
    assert bad.status == 400 and bad.json()["error"]["param"] == "top_logprobs"


@needs_seed
async def test_chat_images_and_audio_arrive(app: Any) -> None:
    content = [
        {"type": "text", "text": "What do you see and hear?"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
        {"type": "image_url", "image_url": {"url": "https://example.com/photo.jpg"}},
        {"type": "input_audio", "input_audio": {"data": WAV, "format": "wav"}},
    ]
    request = chat_request(FAST, content)
    result = await call(app, "POST", CHAT, request)
    text = content_of(chunks(result.body))
    assert text.startswith("I see 2 images. I hear 1 audio clip.\n\n## Simulated answer")
    assert "You said: “What do you see and hear?”" in text
    record = app.recorder.last()
    assert [(m["kind"], m["source"]) for m in record.media] == [
        ("image", "data"),
        ("image", "url"),
        ("audio", "data"),
    ]
    assert record.media[0]["sha256"] == hashlib.sha256(base64.b64decode(PNG)).hexdigest()[:16]
    assert record.media[1]["url"] == "https://example.com/photo.jpg"
    assert record.media[2]["media_type"] == "audio/wav"
    # the prompt count is unchanged by attachments (only text parts count)
    usage = chunks(result.body)[-1]["usage"]
    assert usage["prompt_tokens"] == count_prompt_tokens(request["messages"])


async def test_chat_stop_sequence(app: Any) -> None:
    result = await call(app, "POST", CHAT, chat_request(FAST, stop=["said"]))
    assert content_of(chunks(result.body)) == "## Simulated answer\n\nYou "
    assert chunks(result.body)[-2]["choices"][0]["finish_reason"] == "stop"


# ---- Sansa ------------------------------------------------------------------------------------


SANSA = "sansa-auto?ttft_ms=0&delay_ms=0&length=5&reasoning_length=3"


@needs_seed
async def test_sansa_auto_stream_has_routing_and_cost(app: Any) -> None:
    result = await call(app, "POST", CHAT, chat_request(SANSA))
    body_chunks = chunks(result.body)
    for chunk in body_chunks:
        validate(chunk, "ChatCompletionStreamResponse")
        assert chunk["model"] == "sim-reasoning"  # the routed model, as seed 001 says
    last = body_chunks[-1]
    assert last["choices"] == []
    assert last["sansa"] == {
        "routed": True,
        "routed_model": "sim-reasoning",
        "routing_latency_ms": 189,
    }
    assert sum("sansa" in c for c in body_chunks) == 1
    usage = last["usage"]
    validate(usage, "Usage")
    spec = MODELS["sim-reasoning"]
    prompt = count_prompt_tokens(chat_request(SANSA)["messages"])
    assert usage["prompt_tokens"] == prompt and usage["completion_tokens"] == 8
    assert usage["total_tokens"] == prompt + 8
    assert usage["cost"] == pytest.approx(prompt * spec.prompt_price + 8 * spec.completion_price)
    assert usage["completion_tokens_details"] == {"reasoning_tokens": 3}
    assert "time_to_first_token" not in usage  # Sansa's usage, not SambaNova's
    assert content_of(body_chunks, "reasoning") == "".join(
        reasoning_text("Hello there", length_tokens=3)
    )
    assert app.recorder.last().model == "sansa-auto"


async def test_sansa_usage_shapes_reasoning_and_routing(app: Any) -> None:
    none = chunks((await call(app, "POST", CHAT, chat_request(SANSA + "&usage=none"))).body)
    assert none[-1]["choices"][0]["finish_reason"] == "stop" and "sansa" in none[-1]
    beside = chunks((await call(app, "POST", CHAT, chat_request(SANSA + "&usage=beside"))).body)
    assert "sansa" in beside[-1] and "usage" in beside[-1]
    off = chunks((await call(app, "POST", CHAT, chat_request(SANSA, reasoning_effort="none"))).body)
    assert content_of(off, "reasoning") == "" and off[-1]["model"] == "sim-fast"
    assert off[-1]["sansa"]["routed_model"] == "sim-fast"
    disabled = chunks(
        (await call(app, "POST", CHAT, chat_request(SANSA, reasoning={"enabled": False}))).body
    )
    assert content_of(disabled, "reasoning") == ""
    hidden = chunks(
        (
            await call(
                app,
                "POST",
                CHAT,
                chat_request(SANSA, reasoning={"effort": "high", "exclude": True}),
            )
        ).body
    )
    assert content_of(hidden, "reasoning") == ""
    assert hidden[-1]["usage"]["completion_tokens"] == 8
    assert hidden[-1]["usage"]["completion_tokens_details"] == {"reasoning_tokens": 3}
    routed = chunks(
        (
            await call(
                app, "POST", CHAT, chat_request(SANSA + "&routed_model=sim-slow&routing_ms=42")
            )
        ).body
    )
    assert routed[-1]["sansa"] == {
        "routed": True,
        "routed_model": "sim-slow",
        "routing_latency_ms": 42,
    }
    assert routed[-1]["usage"]["cost"] == 0.0
    direct = chunks(
        (
            await call(
                app,
                "POST",
                CHAT,
                chat_request(FAST + "&length=2"),
                headers={"X-Simulator-Options": "sansa=1"},
            )
        ).body
    )
    assert direct[-1]["sansa"] == {
        "routed": False,
        "routed_model": "sim-fast",
        "routing_latency_ms": 0,
    }
    assert direct[-1]["model"] == "sim-fast"


@needs_seed
async def test_sansa_without_model_and_non_streaming(app: Any) -> None:
    request = {"messages": [{"role": "user", "content": "What is the capital of France?"}]}
    missing = await call(app, "POST", CHAT, request)
    assert missing.status == 400  # SambaNova needs a model (seed 000's missing_model)
    routed = await call(
        app,
        "POST",
        CHAT,
        request,
        headers={"X-Simulator-Options": "sansa=1&ttft_ms=0&delay_ms=0&length=4"},
    )
    assert routed.status == 200
    body = routed.json()
    validate(body, "ChatCompletionResponse")
    assert body["object"] == "chat.completion"
    assert body["sansa"]["routed"] is True and body["model"] == body["sansa"]["routed_model"]
    assert set(body["usage"]) >= {"prompt_tokens", "completion_tokens", "total_tokens", "cost"}
    assert body["choices"][0]["message"]["reasoning"]  # sansa-auto defaults to effort high
    null_model = await call(
        app,
        "POST",
        CHAT,
        {**request, "model": None},
        headers={"X-Simulator-Options": "sansa=1&ttft_ms=0"},
    )
    assert null_model.status == 200


@pytest.mark.parametrize(
    "extra,code",
    [
        ({"n": 2}, "unsupported_parameter"),
        ({"logprobs": True}, "unsupported_parameter"),
        ({"top_logprobs": 2}, "unsupported_parameter"),
        ({"reasoning_effort": "extreme"}, "invalid_request"),
        ({"model": "gpt-9"}, "invalid_model"),
    ],
)
async def test_sansa_validation_errors(app: Any, extra: dict[str, Any], code: str) -> None:
    request = chat_request(SANSA, **{k: v for k, v in extra.items() if k != "model"})
    headers = {}
    if "model" in extra:
        request["model"] = extra["model"]
        headers = {"X-Simulator-Options": "sansa=1"}
    result = await call(app, "POST", CHAT, request, headers=headers)
    assert result.status == 400
    assert set(result.json()) == {"error"} and set(result.json()["error"]) == {"code", "message"}
    assert result.json()["error"]["code"] == code


async def test_sansa_faults_use_seed_001_codes(app: Any) -> None:
    credits = await call(app, "POST", CHAT, chat_request("sansa-auto?fault=402"))
    assert credits.status == 402
    assert credits.json() == {
        "error": {
            "code": "insufficient_credits",
            "message": "Insufficient credits. Please add credits to continue.",
        }
    }
    for fault, status, code in [
        ("400", 400, "unsupported_parameter"),
        ("401", 401, "unauthorized"),
        ("429", 429, "rate_limit_exceeded"),
        ("500", 500, "internal_error"),
    ]:
        result = await call(app, "POST", CHAT, chat_request(f"sansa-auto?fault={fault}"))
        assert result.status == status and result.json()["error"]["code"] == code
    assert result.headers.get("retry-after") is None
    limited = await call(app, "POST", CHAT, chat_request("sansa-auto?fault=429&retry_after=3"))
    assert limited.headers["retry-after"] == "3"
    no_key = await call(app, "POST", CHAT, chat_request("sansa-auto?require_key=1"))
    assert no_key.status == 401 and no_key.json()["error"]["code"] == "unauthorized"
    gone = await call(app, "POST", CHAT, chat_request("sansa-auto?fault=410"))
    assert gone.status == 410  # no Sansa row: the generic body


# ---- every dialect: determinism, disconnects, the recorder, the wire ------------------------------


@pytest.mark.parametrize(
    "path,request_body",
    [
        (
            MESSAGES,
            anthropic_request(REASONING + "&tool=1&tokens_per_event=2", tools=anthropic_tools()),
        ),
        (RESPONSES, responses_request(REASONING + "&tokens_per_event=2", "Same? 你好")),
        (
            CHAT,
            chat_request(
                FAST,
                response_format={
                    "type": "json_schema",
                    "json_schema": {"name": "p", "schema": PERSON_SCHEMA},
                },
            ),
        ),
    ],
)
async def test_same_request_same_bytes_in_every_dialect(
    path: str, request_body: dict[str, Any]
) -> None:
    one = await call(create_app("/v1"), "POST", path, request_body)
    two = await call(create_app("/v1"), "POST", path, request_body)
    assert one.body and normalise(one.body) == normalise(two.body)
    nonstream = {**request_body, "stream": False}
    a = await call(create_app("/v1"), "POST", path, nonstream)
    b = await call(create_app("/v1"), "POST", path, nonstream)
    assert normalise(a.body) == normalise(b.body)


@pytest.mark.parametrize(
    "path,request_body",
    [
        (MESSAGES, anthropic_request("sim-fast?ttft_ms=0&delay_ms=1000&length=100")),
        (RESPONSES, responses_request("sim-fast?ttft_ms=0&delay_ms=1000&length=100")),
    ],
)
async def test_disconnect_stops_every_dialect(
    app: Any, path: str, request_body: dict[str, Any]
) -> None:
    result = await call(app, "POST", path, request_body, disconnect_after_s=0.3)
    assert result.disconnected_at is not None
    assert result.returned - result.disconnected_at < 0.5
    record = app.recorder.last()
    assert record.outcome == "disconnected" and record.tokens_after_disconnect == 0
    assert record.tokens_written == 1


async def test_ttft_and_delay_apply_to_every_dialect(app: Any) -> None:
    for path, request_body in (
        (MESSAGES, anthropic_request("sim-fast?ttft_ms=120&delay_ms=40&length=3")),
        (RESPONSES, responses_request("sim-fast?ttft_ms=120&delay_ms=40&length=3")),
    ):
        await call(app, "POST", path, request_body)
        record = app.recorder.last()
        content = [e.offset_ms for e in record.events if e.kind == "content"]
        assert len(content) == 3
        for i, offset in enumerate(content):
            assert 120 + i * 40 <= offset < 120 + i * 40 + 100, content
        start = next(e for e in record.events if e.kind == "start")
        assert start.offset_ms < 60  # the opening events go at once


async def test_recorder_lists_every_dialect(app: Any) -> None:
    await call(app, "POST", CHAT, chat_request(FAST + "&length=1"))
    await call(app, "POST", MESSAGES, anthropic_request(FAST + "&length=1"))
    await call(
        app, "POST", COUNT, {"model": "sim-fast", "messages": [{"role": "user", "content": "x"}]}
    )
    await call(app, "POST", RESPONSES, responses_request(FAST + "&length=1"))
    listed = await call(app, "GET", "/_simulator/requests")
    items = listed.json()
    assert [(i["path"], i["dialect"]) for i in items] == [
        (CHAT, "openai_chat"),
        (MESSAGES, "anthropic_messages"),
        (COUNT, "count_tokens"),
        (RESPONSES, "openai_responses"),
    ]
    for item in items:
        assert item["finished"] and item["outcome"] == "complete" and item["status"] == 200
        assert item["knobs"]["length"] == 1 or item["path"] == COUNT
        assert "media" in item
    assert [i["tokens_written"] for i in items] == [1, 1, 0, 1]


async def test_real_server_speaks_messages_and_responses(server_url: str) -> None:  # noqa: F811
    async with httpx.AsyncClient(timeout=10) as client:
        async with client.stream(
            "POST",
            f"{server_url}/messages",
            json=anthropic_request(FAST + "&length=4&split_utf8=1", "Wire 你好"),
            headers={"x-api-key": "sk-wire", "anthropic-version": "2023-06-01"},
        ) as response:
            assert response.status_code == 200
            raw = b"".join([chunk async for chunk in response.aiter_bytes()])
        events = typed_events(raw)
        assert anthropic_text(events) == "".join(answer_text("Wire 你好", length_tokens=4))
        assert events[-1][0] == "message_stop"
        counted = await client.post(
            f"{server_url}/messages/count_tokens",
            json={
                "model": "sim-fast",
                "system": "Be brief.",
                "messages": [{"role": "user", "content": "Wire 你好"}],
            },
        )
        assert counted.json() == {"input_tokens": events[0][1]["message"]["usage"]["input_tokens"]}
        response = await client.post(
            f"{server_url}/responses",
            json={**responses_request(FAST + "&length=3"), "stream": False},
        )
        assert response.json()["status"] == "completed"
        assert response.headers["x-request-id"].startswith("sim-")


def test_data_events_helper_still_reads_new_streams() -> None:
    """``data_events`` of ``test_simulator`` ignores ``event:`` lines: the payloads still parse."""
    body = b'event: ping\ndata: {"type":"ping"}\n\n'
    assert [e.json() for e in data_events(body)] == [{"type": "ping"}]


@needs_seed
def test_schema_helper_is_strict_for_messages_and_responses() -> None:
    """The validator rejects broken events of the new styles, accepts the seed's examples, and
    pins the seed's own inconsistencies (the simulator follows the schema where they differ)."""
    broken = [
        (
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta"}},
            "MessageStreamEvent",
        ),
        (
            {
                "type": "message_delta",
                "delta": {"stop_reason": "done"},
                "usage": {"output_tokens": 1},
            },
            "MessageStreamEvent",
        ),
        (
            {"type": "error", "error": {"type": "teapot_error", "message": "x"}},
            "MessageErrorResponse",
        ),
        (
            {
                "type": "response.output_text.delta",
                "sequence_number": 1,
                "item_id": "x",
                "output_index": 0,
                "content_index": 0,
                "delta": "a",
                "logprobs": [],
            },
            "ResponseStreamEvent",
        ),
        (
            {"type": "response.completed", "sequence_number": 1, "response": {"id": "x"}},
            "ResponseStreamEvent",
        ),
    ]
    for instance, name in broken:
        with pytest.raises(jsonschema.ValidationError):
            validate(instance, name)
    assert SEED_002 is not None
    schemas = SEED_002["components"]["schemas"]
    mismatched: list[str] = []
    for name, schema in schemas.items():
        if not name.startswith(("Message", "Response")):
            continue
        for example in schema.get("examples") or (
            [schema["example"]] if "example" in schema else []
        ):
            try:
                validate(example, name)
            except jsonschema.ValidationError:
                mismatched.append(name)
    # response.created/in_progress examples carry "usage": null (ResponseResponse.usage is not
    # nullable: the simulator leaves usage out); response.completed examples lack required
    # ResponseResponse fields (truncation, tool_choice, tools…: the simulator sends them all).
    assert sorted(set(mismatched)) == [
        "ResponseCompletedEvent",
        "ResponseCreatedEvent",
        "ResponseInProgressEvent",
    ]
