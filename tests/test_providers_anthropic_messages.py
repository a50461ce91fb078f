"""Tests for the ``anthropic_messages`` adapter against recorded SSE fixtures.

Fixtures: ``tests/fixtures/anthropic_messages/<name>.sse`` with ``<name>.source.txt`` saying where
each came from (seed 002/004 schemas, Anthropic's documented stream shapes, llama.cpp's server
source). Every fixture is replayed whole and in 1-, 3- and 17-byte network reads. Real llama.cpp
recordings (``tests/fixtures/llamacpp/messages_*.sse``) are replayed too when present. No Django.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from chat.providers import ADAPTERS, anthropic_messages, get_adapter
from chat.providers.anthropic_messages import build_count_tokens_request, build_request
from chat.providers.base import (
    ChatMessage,
    ChatRequest,
    ContentPart,
    EndpointConfig,
    Finish,
    ModelInfo,
    ModelOutputError,
    ProviderError,
    RawEvent,
    ReasoningDelta,
    ReasoningSignature,
    ResponseStarted,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    Usage,
)
from tests.provider_events import applied

FIXTURES = Path(__file__).parent / "fixtures" / "anthropic_messages"
LLAMACPP = Path(__file__).parent / "fixtures" / "llamacpp"
KEY = "sk-ant-secret-KEY-0123456789abcdef"
CONFIG = EndpointConfig(
    base_url="https://api.sambanova.ai/v1/", api_key=KEY, api_style="anthropic_messages"
)
REQUEST = ChatRequest(
    model="DeepSeek-V3.1",
    messages=(ChatMessage("user", "Hello, Claude!"),),
    system="Be brief.",
)
SSE_HEADERS = {"content-type": "text/event-stream", "request-id": "req_011CSHoEeqs5C35K2UUqR7Fy"}


# ---- helpers ------------------------------------------------------------------------------


class ChunkedStream(httpx.AsyncByteStream):
    """A response body delivered in reads of ``size`` bytes, then optionally raising ``then``
    or waiting on ``gate``."""

    def __init__(self, data: bytes, size: int | None = None, *, then=None, gate=None) -> None:
        self.data, self.size, self.then, self.gate = data, size, then, gate
        self.closed = False

    async def __aiter__(self):
        size = self.size or max(len(self.data), 1)
        for start in range(0, len(self.data), size):
            yield self.data[start : start + size]
        if self.gate is not None:
            await self.gate.wait()
        if self.then is not None:
            raise self.then

    async def aclose(self) -> None:
        self.closed = True


def mock_client(body, *, status: int = 200, headers=None) -> httpx.AsyncClient:
    requests: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        stream = body if isinstance(body, httpx.AsyncByteStream) else ChunkedStream(body)
        return httpx.Response(status, headers=headers or SSE_HEADERS, stream=stream)

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler), follow_redirects=False)
    client.requests = requests  # type: ignore[attr-defined]
    return client


def fixture_bytes(name: str) -> bytes:
    return (FIXTURES / f"{name}.sse").read_bytes()


async def collect(client, config=CONFIG, request=REQUEST):
    events: list[Any] = []
    error = None
    try:
        async for event in anthropic_messages.stream(client, config, request):
            events.append(event)
    except ProviderError as exc:
        error = exc
    return events, error


async def replay_bytes(data: bytes, size: int | None = None):
    async with mock_client(ChunkedStream(data, size)) as client:
        return await collect(client)


async def replay(name: str, size: int | None = None):
    return await replay_bytes(fixture_bytes(name), size)


def text_of(events) -> str:
    """The answer as the runner ends up with it (AnswerWasReasoning / FinalText applied)."""
    return applied(events)[1]


def reasoning_of(events) -> str:
    return applied(events)[0]


def finishes(events) -> list[Finish]:
    return [e for e in events if isinstance(e, Finish)]


def last_usage(events) -> Usage | None:
    usages = [e for e in events if isinstance(e, Usage)]
    return usages[-1] if usages else None


def tool_calls(events) -> dict[int, dict[str, str]]:
    """Tool calls assembled as the turn runner does (by ``index``)."""
    calls: dict[int, dict[str, str]] = {}
    for e in events:
        if isinstance(e, ToolCallDelta):
            call = calls.setdefault(e.index, {"id": "", "name": "", "arguments": ""})
            call["id"] = e.id or call["id"]
            call["name"] = e.name or call["name"]
            call["arguments"] += e.arguments
    return calls


def semantic(events) -> list[Any]:
    return [e for e in events if not isinstance(e, (RawEvent, ResponseStarted))]


# ---- fixtures, table-driven ---------------------------------------------------------------

EXPECTED: dict[str, dict[str, Any]] = {
    "text_basic": {
        "text": "Hello, Claude here!",
        "finish": [Finish("stop", "end_turn")],
        "usage": {"prompt_tokens": 12, "completion_tokens": 6, "total_tokens": 18},
    },
    "thinking_signature": {
        "text": "27 * 453 = 12,231",
        "reasoning": "Let me work out 27 * 453. 27 * 453 = 12231.",
        "signatures": ["EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"],
        "finish": [Finish("stop", "end_turn")],
        "usage": {"prompt_tokens": 41, "completion_tokens": 58, "cached_tokens": 0},
    },
    "tool_use": {
        "text": "I'll check both cities.",
        "finish": [Finish("tool_calls", "tool_use")],
        "tools": {
            0: {"id": "toolu_01Paris", "name": "get_weather", "arguments": '{"city": "Paris"}'},
            1: {"id": "toolu_02Bogota", "name": "get_weather", "arguments": '{"city": "Bogotá"}'},
        },
        "usage": {"prompt_tokens": 472, "completion_tokens": 89},
    },
    "error_overloaded": {"text": "Partial", "finish": [], "error": "overloaded_error"},
    "max_tokens_cache": {
        "text": "The history of the Roman",
        "finish": [Finish("length", "max_tokens")],
        "usage": {
            "prompt_tokens": 2120,
            "completion_tokens": 5,
            "total_tokens": 2125,
            "cached_tokens": 2000,
        },
    },
    "no_event_lines": {
        "text": "Only data lines.",
        "finish": [Finish("stop", "stop_sequence")],
        "usage": {"prompt_tokens": 9, "completion_tokens": 4},
    },
    "cut": {"text": "The answer is probably", "finish": [], "error": "stream_cut"},
    "no_message_stop": {"text": "Complete answer.", "finish": [Finish("stop", "end_turn")]},
    "llamacpp_style": {
        "text": "",
        "reasoning": "User asks for weather.",
        "signatures": [],
        "finish": [Finish("tool_calls", "tool_use")],
        "tools": {
            0: {
                "id": "Xk2fP0aQ9rT1uV3wY5zB7cD9eF1gH3iJ",
                "name": "get_weather",
                "arguments": '{"city":"Paris"}',
            }
        },
        "usage": {"prompt_tokens": 31, "completion_tokens": 17, "cached_tokens": 8},
    },
    "multibyte": {
        "text": "Grüße, 日本語 and 🙂🚀 — done",
        "reasoning": "Ünïcödé thoughts 思考",
        "signatures": ["sig-ü-1"],
        "finish": [Finish("stop", "end_turn")],
    },
    # issue 7 faults (see each fixture's source.txt)
    "surrogate_split": {
        "text": "Smile 😀 done",
        "finish": [Finish("stop", "end_turn")],
        "usage": {"prompt_tokens": 9, "completion_tokens": 4},
    },
    "orphan_think_close": {
        "text": "4",
        "reasoning": "Plan: add 2+2",
        "finish": [Finish("stop", "end_turn")],
        "usage": {"prompt_tokens": 9, "completion_tokens": 6},
    },
    "server_tools": {
        "text": "I'll search for that.It is sunny, 22 °C.",
        "finish": [Finish("stop", "end_turn")],
        "tools": {},  # the server ran the search: no client tool call
        "usage": {"prompt_tokens": 10682, "completion_tokens": 510, "total_tokens": 11192},
    },
    "redacted_thinking": {
        "text": "",
        "reasoning": "Need the weather tool.",
        "signatures": ["EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"],
        "finish": [Finish("tool_calls", "tool_use")],
        "tools": {0: {"id": "toolu_01", "name": "get_weather", "arguments": '{"city": "Paris"}'}},
        "usage": {"prompt_tokens": 40, "completion_tokens": 87},
    },
}


def test_every_fixture_has_a_source_and_an_expectation():
    names = {p.stem for p in FIXTURES.glob("*.sse")}
    assert names == set(EXPECTED)
    for name in names:
        assert (FIXTURES / f"{name}.source.txt").read_text().strip(), name


@pytest.mark.parametrize("size", [None, 1, 3, 17])
@pytest.mark.parametrize("name", sorted(EXPECTED))
async def test_fixture(name: str, size: int | None):
    events, error = await replay(name, size)
    expected = EXPECTED[name]
    assert events[0] == ResponseStarted(200, "req_011CSHoEeqs5C35K2UUqR7Fy")
    assert text_of(events) == expected["text"]
    assert reasoning_of(events) == expected.get("reasoning", "")
    assert finishes(events) == expected["finish"]
    if "signatures" in expected:
        signatures = [e.signature for e in events if isinstance(e, ReasoningSignature)]
        assert signatures == expected["signatures"]
    assert tool_calls(events) == expected.get("tools", {})
    if expected.get("error"):
        assert error is not None and error.code == expected["error"]
        assert error.status is None
    else:
        assert error is None, error
    if "usage" in expected:
        usage = last_usage(events)
        for field, value in expected["usage"].items():
            assert getattr(usage, field) == value, field
    assert all(e.text for e in events if isinstance(e, (TextDelta, ReasoningDelta)))


@pytest.mark.parametrize("name", sorted(EXPECTED))
async def test_fixture_events_do_not_depend_on_read_sizes(name: str):
    whole, error_whole = await replay(name)
    for size in (1, 2, 5):
        split, error_split = await replay(name, size)
        assert split == whole
        assert (error_split and error_split.code) == (error_whole and error_whole.code)


async def test_event_order_and_raw_events():
    events, _ = await replay("text_basic", 3)
    assert semantic(events) == [
        # message_start's usage is provisional: its output_tokens (1) is a placeholder
        Usage(prompt_tokens=12, completion_tokens=None, total_tokens=None, raw=ANY_RAW),
        TextDelta("Hello"),
        TextDelta(", Claude"),
        TextDelta(" here!"),
        Finish("stop", "end_turn"),
        Usage(prompt_tokens=12, completion_tokens=6, total_tokens=18, raw=ANY_RAW),
    ]
    raws = [e for e in events if isinstance(e, RawEvent)]
    assert [r.event for r in raws] == [
        "message_start",
        "content_block_start",
        "ping",
        "content_block_delta",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]


class _AnyDict(dict):
    def __eq__(self, other):
        return isinstance(other, dict)

    __hash__ = None  # type: ignore[assignment]


ANY_RAW = _AnyDict()


async def test_usage_merges_start_and_delta():
    events, _ = await replay("thinking_signature")
    usage = last_usage(events)
    assert usage.raw == {
        "input_tokens": 41,
        "output_tokens": 58,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }
    assert usage.total_tokens == 99


async def test_thinking_then_signature_then_text():
    events, _ = await replay("thinking_signature", 1)
    kinds = [type(e).__name__ for e in semantic(events)]
    assert kinds == [
        "Usage",
        "ReasoningDelta",
        "ReasoningDelta",
        "ReasoningSignature",
        "TextDelta",
        "TextDelta",
        "Finish",
        "Usage",
    ]


async def test_tool_ordinals_follow_tool_blocks_not_block_indices():
    events, _ = await replay("tool_use")
    deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    assert deltas[0] == ToolCallDelta(index=0, id="toolu_01Paris", name="get_weather")
    assert {d.index for d in deltas} == {0, 1}
    assert all(d.arguments for d in deltas[1:] if d.id is None)  # empty partial_json dropped


async def test_error_event_details():
    events, error = await replay("error_overloaded", 1)
    assert (error.code, error.message, error.status) == ("overloaded_error", "Overloaded", None)
    assert error.request_id == "req_011CSHoEeqs5C35K2UUqR7Fy"
    assert "overloaded_error" in error.body_excerpt
    assert text_of(events) == "Partial"


async def test_llamacpp_error_event_without_envelope():
    """llama.cpp writes ``event: error`` with its bare error object as data."""
    body = fixture_bytes("text_basic").split(b"event: content_block_delta")[0] + (
        b'event: error\ndata: {"code":500,"message":"context shift is disabled",'
        b'"type":"server_error"}\n\n'
    )
    events, error = await replay_bytes(body)
    assert (error.code, error.message) == ("server_error", "context shift is disabled")


async def test_error_type_in_data_without_event_line():
    body = b'data: {"type":"error","error":{"type":"api_error","message":"Internal"}}\n\n'
    _, error = await replay_bytes(body)
    assert (error.code, error.message) == ("api_error", "Internal")


async def test_cut_stream_message():
    _, error = await replay("cut", 1)
    assert error.message == "The upstream closed the stream before it finished"


async def test_nothing_after_message_stop_is_read():
    body = fixture_bytes("text_basic") + (
        b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
        b'"delta":{"type":"text_delta","text":"late"}}\n\n'
    )
    events, error = await replay_bytes(body)
    assert error is None and text_of(events) == "Hello, Claude here!"


@pytest.mark.parametrize(
    "exc",
    [httpx.RemoteProtocolError("incomplete"), httpx.ReadError("reset"), httpx.ReadTimeout("t")],
)
async def test_transport_error_after_stop_reason_ends_normally(exc):
    async with mock_client(ChunkedStream(fixture_bytes("no_message_stop"), then=exc)) as client:
        events, error = await collect(client)
    assert error is None and finishes(events) == [Finish("stop", "end_turn")]


async def test_transport_error_before_stop_reason_is_a_cut():
    exc = httpx.RemoteProtocolError("peer closed connection")
    async with mock_client(ChunkedStream(fixture_bytes("cut"), then=exc)) as client:
        events, error = await collect(client)
    assert error.code == "stream_cut" and text_of(events) == "The answer is probably"


async def test_non_streaming_message_body_is_relayed():
    """A server that ignored ``stream: true`` answers with a whole seed 002 ``Message``."""
    body = json.dumps(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "DeepSeek-V3.1",
            "content": [
                {"type": "thinking", "thinking": "Hmm.", "signature": "sig"},
                {"type": "text", "text": "Hi!"},
                {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": 1}},
            ],
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 7, "output_tokens": 9},
        }
    ).encode()
    async with mock_client(body, headers={"content-type": "application/json"}) as client:
        events, error = await collect(client)
    assert error is None
    assert semantic(events) == [
        ReasoningDelta("Hmm."),
        ReasoningSignature("sig"),
        TextDelta("Hi!"),
        ToolCallDelta(index=0, id="toolu_1", name="f", arguments='{"a": 1}'),
        Usage(prompt_tokens=7, completion_tokens=9, total_tokens=16, raw=ANY_RAW),
        Finish("tool_calls", "tool_use"),
    ]


# ---- HTTP errors: every Anthropic error type (seed 004 / 002 MessageErrorResponse) ----------

ANTHROPIC_ERRORS = [
    (400, "invalid_request_error", "thinking: type 'enabled' is not supported"),
    (401, "authentication_error", "invalid x-api-key"),
    (
        403,
        "permission_error",
        "Your API key does not have permission to use the specified resource.",
    ),
    (404, "not_found_error", "The requested resource could not be found."),
    (413, "request_too_large", "Request exceeds the maximum allowed number of bytes."),
    (429, "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"),
    (500, "api_error", "An unexpected error has occurred internal to Anthropic's systems."),
    (501, "not_implemented_error", "Streaming is not implemented yet"),
    (503, "overloaded_error", "Backend is temporarily over capacity"),
    (529, "overloaded_error", "Overloaded"),
]


@pytest.mark.parametrize(("status", "kind", "message"), ANTHROPIC_ERRORS)
async def test_http_error_every_anthropic_type(status, kind, message):
    body = json.dumps(
        {
            "type": "error",
            "error": {"type": kind, "message": message},
            "request_id": f"req_{status}",
        }
    ).encode()
    headers = {"content-type": "application/json", "request-id": "req_from_header"}
    if status == 429:
        headers["retry-after"] = "17"
    async with mock_client(body, status=status, headers=headers) as client:
        events, error = await collect(client)
    assert events == []
    if status == 404:  # says nothing about a model: the route is missing (base URL / style)
        assert (error.status, error.code, error.type) == (404, "path_not_found", kind)
        assert error.message.endswith(f"(the server said: {message})")
        assert "anthropic_messages" in error.message and "POST /v1/messages" in error.message
    else:
        assert (error.status, error.code, error.message) == (status, kind, message)
        assert error.type == kind  # Anthropic: the type is the code
    assert error.request_id == f"req_{status}"
    assert error.retry_after_s == (17.0 if status == 429 else None)


async def test_http_error_request_id_from_header_when_body_has_none():
    body = b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}'
    headers = {"content-type": "application/json", "request-id": "req_hdr_529"}
    async with mock_client(body, status=529, headers=headers) as client:
        _, error = await collect(client)
    assert (error.status, error.code, error.request_id) == (529, "overloaded_error", "req_hdr_529")


async def test_http_error_echoing_the_key_is_scrubbed():
    body = json.dumps(
        {"type": "error", "error": {"type": "authentication_error", "message": f"bad {KEY}"}}
    ).encode()
    async with mock_client(body, status=401, headers={"content-type": "application/json"}) as c:
        _, error = await collect(c)
    assert KEY not in json.dumps(error.as_dict()) and "[REDACTED]" in error.message


async def test_http_error_with_model_output_yields_model_output_error_first():
    body = json.dumps(
        {
            "error": {
                "code": "adapter_mapping_failed",
                "error_model_output": '{"name": "f", "arguments": {city: "x"}}',
                "message": "Failed to parse tool call",
                "type": "server_error",
            },
            "request_id": "494e",
        }
    ).encode()
    async with mock_client(body, status=500, headers={"content-type": "application/json"}) as c:
        events, error = await collect(c)
    assert events == [
        ModelOutputError("Failed to parse tool call", '{"name": "f", "arguments": {city: "x"}}')
    ]
    assert error.code == "adapter_mapping_failed" and error.status == 500


async def test_audio_attachment_is_refused_before_sending():
    request = ChatRequest(
        model="m",
        messages=(
            ChatMessage("user", "Listen", parts=(ContentPart("audio", "audio/wav", "UklG"),)),
        ),
    )
    async with mock_client(fixture_bytes("text_basic")) as client:
        events, error = await collect(client, request=request)
    assert events == [] and client.requests == []
    assert error.code == "unsupported_content" and "audio" in error.message


# ---- the request --------------------------------------------------------------------------


def test_build_request_headers_send_both_auth_forms():
    url, headers, _ = build_request(CONFIG, REQUEST)
    assert url == "https://api.sambanova.ai/v1/messages"
    assert headers["x-api-key"] == KEY
    assert headers["Authorization"] == f"Bearer {KEY}"
    assert headers["anthropic-version"] == "2023-06-01"
    assert headers["Accept"] == "text/event-stream"
    assert headers["Content-Type"] == "application/json"


def test_build_request_anthropic_host_gets_only_x_api_key():
    config = EndpointConfig(base_url="https://api.anthropic.com/v1", api_key=KEY)
    _, headers, _ = build_request(config, REQUEST)
    assert headers["x-api-key"] == KEY and "Authorization" not in headers


def test_build_request_without_key_and_extra_headers_win():
    config = EndpointConfig(
        base_url="http://127.0.0.1:8080/v1", extra_headers={"Anthropic-Version": "2024-01-01"}
    )
    _, headers, _ = build_request(config, REQUEST)
    assert "x-api-key" not in headers and "Authorization" not in headers
    assert [k for k in headers if k.lower() == "anthropic-version"] == ["Anthropic-Version"]
    assert headers["Anthropic-Version"] == "2024-01-01"


def test_build_request_body_minimal_defaults_max_tokens():
    _, _, body = build_request(CONFIG, REQUEST)
    assert body == {
        "model": "DeepSeek-V3.1",
        "max_tokens": 1024,
        "system": "Be brief.",
        "messages": [{"role": "user", "content": "Hello, Claude!"}],
        "stream": True,
    }


def test_build_request_params():
    request = ChatRequest(
        model="m",
        messages=(ChatMessage("user", "Hi"),),
        params={
            "temperature": 0.5,
            "top_p": 0.9,
            "top_k": 40,
            "max_tokens": 300,
            "stop": "END",
            "seed": 3,
            "frequency_penalty": 1.0,
            "presence_penalty": None,
        },
        logprobs=True,
        response_format={"type": "json_object"},
    )
    _, _, body = build_request(CONFIG, request)
    assert body["max_tokens"] == 300
    assert (body["temperature"], body["top_p"], body["top_k"]) == (0.5, 0.9, 40)
    assert body["stop_sequences"] == ["END"]
    for dropped in ("seed", "frequency_penalty", "presence_penalty", "logprobs", "response_format"):
        assert dropped not in body
    assert "system" not in body


@pytest.mark.parametrize(
    ("reasoning", "params", "thinking", "max_tokens"),
    [
        ({"budget_tokens": 2048}, {}, {"type": "enabled", "budget_tokens": 2048}, 3072),
        (
            {"budget_tokens": 2048},
            {"max_tokens": 4000},
            {"type": "enabled", "budget_tokens": 2048},
            4000,
        ),
        ({"budget_tokens": 0}, {}, {"type": "disabled"}, 1024),
        ({"budget_tokens": None}, {}, None, 1024),
        ({"effort": "high"}, {}, None, 1024),
    ],
)
def test_build_request_thinking(reasoning, params, thinking, max_tokens):
    request = ChatRequest(
        model="m", messages=(ChatMessage("user", "Hi"),), reasoning=reasoning, params=params
    )
    _, _, body = build_request(CONFIG, request)
    assert body.get("thinking") == thinking
    assert body["max_tokens"] == max_tokens


def test_build_request_enable_thinking_only_when_set():
    request = ChatRequest(model="m", messages=(), reasoning={"enable_thinking": False})
    assert build_request(CONFIG, request)[2]["chat_template_kwargs"] == {"enable_thinking": False}
    assert "chat_template_kwargs" not in build_request(CONFIG, REQUEST)[2]


WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ("auto", {"type": "auto"}),
        ("none", {"type": "none"}),
        ("required", {"type": "any"}),
        ("get_weather", {"type": "tool", "name": "get_weather"}),
        (None, None),
    ],
)
def test_build_request_tools_and_tool_choice(choice, expected):
    request = ChatRequest(
        model="m",
        messages=(ChatMessage("user", "Hi"),),
        tools=(WEATHER, {"type": "function", "function": {"name": "noop"}}, {"bad": 1}),
        tool_choice=choice,
    )
    _, _, body = build_request(CONFIG, request)
    assert body["tools"] == [
        {
            "name": "get_weather",
            "description": "Weather for a city",
            "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
        {"name": "noop", "input_schema": {"type": "object", "properties": {}}},
    ]
    assert body.get("tool_choice") == expected


def test_build_request_tool_choice_without_tools_is_dropped():
    request = ChatRequest(model="m", messages=(), tool_choice="required")
    _, _, body = build_request(CONFIG, request)
    assert "tools" not in body and "tool_choice" not in body


def test_build_request_images_base64_and_url():
    request = ChatRequest(
        model="m",
        messages=(
            ChatMessage(
                "user",
                "What is this?",
                parts=(
                    ContentPart("image", "image/jpeg", "/9j/4AAQ"),
                    ContentPart("image", url="https://example.com/cat.png"),
                ),
            ),
        ),
    )
    _, _, body = build_request(CONFIG, request)
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/jpeg", "data": "/9j/4AAQ"},
                },
                {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.png"}},
                {"type": "text", "text": "What is this?"},
            ],
        }
    ]


def test_build_request_history_with_thinking_tools_and_results():
    request = ChatRequest(
        model="m",
        system="Sys.",
        messages=(
            ChatMessage("system", "Also this."),
            ChatMessage("user", "Weather in Paris and Bogotá?"),
            ChatMessage(
                "assistant",
                "Checking.",
                reasoning="Two cities, two calls.",
                reasoning_signature="sig-abc",
                tool_calls=(
                    ToolCall("toolu_1", "get_weather", '{"city": "Paris"}'),
                    ToolCall("toolu_2", "get_weather", ""),
                    ToolCall("toolu_3", "get_weather", "not json"),
                ),
            ),
            ChatMessage("tool", "18 C", tool_call_id="toolu_1"),
            ChatMessage("tool", "", tool_call_id="toolu_2"),
            ChatMessage("user", "Thanks"),
            ChatMessage("assistant", "Answer", reasoning="unsigned thoughts"),
            ChatMessage("assistant", ""),
            ChatMessage("user", "More"),
        ),
    )
    _, _, body = build_request(CONFIG, request)
    assert body["system"] == "Sys.\n\nAlso this."
    assert body["messages"] == [
        {"role": "user", "content": "Weather in Paris and Bogotá?"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Two cities, two calls.", "signature": "sig-abc"},
                {"type": "text", "text": "Checking."},
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "get_weather",
                    "input": {"city": "Paris"},
                },
                {"type": "tool_use", "id": "toolu_2", "name": "get_weather", "input": {}},
                {
                    "type": "tool_use",
                    "id": "toolu_3",
                    "name": "get_weather",
                    "input": {"_incomplete_arguments": "not json"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "18 C"},
                {"type": "tool_result", "tool_use_id": "toolu_2"},
                {"type": "text", "text": "Thanks"},
            ],
        },
        {"role": "assistant", "content": "Answer"},
        {"role": "user", "content": "More"},
    ]


def test_build_request_extra_cannot_replace_owned_keys():
    request = ChatRequest(
        model="m",
        messages=(ChatMessage("user", "Hi"),),
        extra={"metadata": {"user_id": "u1"}, "model": "other", "stream": False},
    )
    _, _, body = build_request(CONFIG, request)
    assert body["metadata"] == {"user_id": "u1"}
    assert body["model"] == "m" and body["stream"] is True


async def test_request_on_the_wire():
    async with mock_client(fixture_bytes("text_basic")) as client:
        await collect(client)
    (sent,) = client.requests
    assert sent.method == "POST" and str(sent.url) == "https://api.sambanova.ai/v1/messages"
    assert sent.headers["x-api-key"] == KEY
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert json.loads(sent.content)["max_tokens"] == 1024


# ---- count_tokens -------------------------------------------------------------------------


def test_build_count_tokens_request_has_no_generation_fields():
    request = ChatRequest(
        model="m",
        system="S",
        messages=(ChatMessage("user", "Hi"),),
        params={"max_tokens": 5, "temperature": 1.0, "stop": ["x"]},
        tools=(WEATHER,),
        tool_choice="auto",
        reasoning={"budget_tokens": 2048},
    )
    url, headers, body = build_count_tokens_request(CONFIG, request)
    assert url == "https://api.sambanova.ai/v1/messages/count_tokens"
    assert headers["Accept"] == "application/json" and headers["x-api-key"] == KEY
    assert set(body) == {"model", "system", "messages", "thinking", "tools", "tool_choice"}


async def test_count_tokens():
    async with mock_client(
        b'{"input_tokens": 2095}', headers={"content-type": "application/json"}
    ) as client:
        tokens = await anthropic_messages.count_tokens(client, CONFIG, REQUEST)
    assert tokens == 2095
    (sent,) = client.requests
    assert str(sent.url).endswith("/messages/count_tokens")
    assert json.loads(sent.content) == {
        "model": "DeepSeek-V3.1",
        "system": "Be brief.",
        "messages": [{"role": "user", "content": "Hello, Claude!"}],
    }


@pytest.mark.parametrize(
    ("status", "body", "code"),
    [
        (
            404,
            b'{"type":"error","error":{"type":"not_found_error","message":"Not found"}}',
            "not_found_error",
        ),
        (200, b'{"tokens": 3}', "bad_response"),
        (200, b"<html>no</html>", "bad_response"),
        (200, b'{"input_tokens": true}', "bad_response"),
    ],
)
async def test_count_tokens_errors(status, body, code):
    async with mock_client(body, status=status, headers={"content-type": "application/json"}) as c:
        with pytest.raises(ProviderError) as info:
            await anthropic_messages.count_tokens(c, CONFIG, REQUEST)
    assert info.value.code == code


async def test_count_tokens_connection_error():
    def handler(request):
        raise httpx.ConnectError("refused")

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        with pytest.raises(ProviderError) as info:
            await anthropic_messages.count_tokens(client, CONFIG, REQUEST)
    assert info.value.code == "connection_error"


# ---- models and registry ------------------------------------------------------------------


async def test_list_models_uses_anthropic_headers():
    payload = {
        "data": [{"type": "model", "id": "claude-sonnet-4-5", "display_name": "Claude Sonnet 4.5"}],
        "has_more": False,
    }
    config = EndpointConfig(base_url="https://api.anthropic.com/v1", api_key=KEY)
    async with mock_client(
        json.dumps(payload).encode(), headers={"content-type": "application/json"}
    ) as client:
        models = await anthropic_messages.list_models(client, config)
    (sent,) = client.requests
    assert str(sent.url) == "https://api.anthropic.com/v1/models"
    assert sent.headers["x-api-key"] == KEY and "authorization" not in sent.headers
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert models == [ModelInfo(id="claude-sonnet-4-5")]


def test_registered():
    assert get_adapter("anthropic_messages") is anthropic_messages
    assert ADAPTERS["anthropic_messages"] is anthropic_messages


# ---- early stop ---------------------------------------------------------------------------


async def test_aclosing_closes_the_upstream_response():
    first = fixture_bytes("text_basic").split(b"event: content_block_stop")[0]
    body = ChunkedStream(first, gate=asyncio.Event())
    async with mock_client(body) as client:
        async with contextlib.aclosing(
            anthropic_messages.stream(client, CONFIG, REQUEST)
        ) as events:
            async for event in events:
                if isinstance(event, TextDelta):
                    break
        assert body.closed


# ---- real llama.cpp recordings (when the llama.cpp helper has recorded them) --------------

LLAMACPP_FILES = sorted(LLAMACPP.glob("messages_*.sse")) if LLAMACPP.is_dir() else []


@pytest.mark.skipif(not LLAMACPP_FILES, reason="no tests/fixtures/llamacpp/messages_*.sse yet")
@pytest.mark.parametrize("path", LLAMACPP_FILES, ids=lambda p: p.name)
def test_llamacpp_recording_says_where_it_came_from(path: Path):
    assert (path.parent / f"{path.stem}.source.txt").read_text().strip()


@pytest.mark.skipif(not LLAMACPP_FILES, reason="no tests/fixtures/llamacpp/messages_*.sse yet")
@pytest.mark.parametrize(
    "data", [p.read_bytes() for p in LLAMACPP_FILES], ids=[p.name for p in LLAMACPP_FILES]
)
async def test_llamacpp_recording(data: bytes):
    whole, error = await replay_bytes(data)
    assert error is None, error
    assert len(finishes(whole)) == 1
    assert text_of(whole) or reasoning_of(whole) or tool_calls(whole)
    usage = last_usage(whole)
    assert usage is not None and usage.prompt_tokens and usage.completion_tokens
    split, _ = await replay_bytes(data, 3)
    assert split == whole


def _raw_deltas(data: bytes, kind: str, field: str) -> str:
    """Independent of the adapter: join ``delta[field]`` of every ``kind`` delta in the body."""
    out = []
    for line in data.decode().splitlines():
        if line.startswith("data: "):
            payload = json.loads(line[6:])
            delta = payload.get("delta") or {}
            if payload.get("type") == "content_block_delta" and delta.get("type") == kind:
                out.append(delta[field])
    return "".join(out)


LLAMACPP_EXPECTED = {
    # name: (text, finish, prompt tokens, completion tokens)
    "messages_smollm2": ("The capital of France is Paris.", Finish("stop", "end_turn"), 27, 8),
    "messages_think": (None, Finish("length", "max_tokens"), 24, 16),
}


@pytest.mark.parametrize("name", sorted(LLAMACPP_EXPECTED))
async def test_llamacpp_recording_exact(name: str):
    path = LLAMACPP / f"{name}.sse"
    if not path.exists():
        pytest.skip(f"{path} not recorded yet")
    data = path.read_bytes()  # noqa: ASYNC240 - a small local fixture
    events, error = await replay_bytes(data, 7)
    text, finish, prompt, completion = LLAMACPP_EXPECTED[name]
    assert error is None
    assert text_of(events) == _raw_deltas(data, "text_delta", "text")
    assert reasoning_of(events) == _raw_deltas(data, "thinking_delta", "thinking")
    if text is not None:
        assert text_of(events) == text
    else:
        assert reasoning_of(events)  # the think-tiny model's template opens <think>
    assert finishes(events) == [finish]
    usage = last_usage(events)
    assert (usage.prompt_tokens, usage.completion_tokens) == (prompt, completion)
    assert [e for e in events if isinstance(e, ReasoningSignature)] == []  # llama.cpp signs ""


# ---- byte-level stress and real sockets (the shared SSE loop, http.stream_sse) -------------


async def test_multibyte_split_inside_characters():
    data = fixture_bytes("multibyte")
    cuts = [i + 1 for i, b in enumerate(data) if b >= 0xC0]  # right after every lead byte
    pieces = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]

    class Pieces(ChunkedStream):
        async def __aiter__(self):
            for piece in pieces:
                yield piece

    async with mock_client(Pieces(b"")) as client:
        events, error = await collect(client)
    assert error is None
    assert text_of(events) == "Grüße, 日本語 and 🙂🚀 — done"
    assert reasoning_of(events) == "Ünïcödé thoughts 思考"
    assert "\ufffd" not in "".join(e.data for e in events if isinstance(e, RawEvent))


async def _read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    return await reader.readexactly(length)


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
    b"Transfer-Encoding: chunked\r\nrequest-id: req_tcp\r\n\r\n"
)


@contextlib.asynccontextmanager
async def tcp_server(handler):
    tasks: set[asyncio.Task] = set()

    async def wrapped(reader, writer):
        tasks.add(asyncio.current_task())
        try:
            await handler(reader, writer)
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    server = await asyncio.start_server(wrapped, "127.0.0.1", 0)
    try:
        port = server.sockets[0].getsockname()[1]
        yield EndpointConfig(base_url=f"http://127.0.0.1:{port}/v1", api_key=KEY)
    finally:
        server.close()
        await server.wait_closed()
        if tasks:
            await asyncio.wait(tasks, timeout=2)


async def test_real_socket_cut_chunked_body_is_stream_cut():
    first = fixture_bytes("cut")

    async def handler(reader, writer):
        await _read_request(reader)
        writer.write(SSE_HEAD + _chunk(first))
        writer.write(b'40\r\nevent: content_block_delta\ndata: {"ty')  # announced 64 bytes
        await writer.drain()
        writer.close()

    async with tcp_server(handler) as config, httpx.AsyncClient() as client:
        events, error = await collect(client, config)
    assert events[0] == ResponseStarted(200, "req_tcp")
    assert text_of(events) == "The answer is probably"
    assert error.code == "stream_cut"


async def test_real_socket_connection_is_reused_after_message_stop():
    connections = 0
    body = fixture_bytes("thinking_signature")

    async def handler(reader, writer):
        nonlocal connections
        connections += 1
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                request = json.loads(await _read_request(reader))
                assert request["stream"] is True
                writer.write(SSE_HEAD + _chunk(body[:100]) + _chunk(body[100:]) + b"0\r\n\r\n")
                await writer.drain()
        writer.close()

    async with tcp_server(handler) as config, httpx.AsyncClient() as client:
        for _ in range(3):
            events, error = await collect(client, config)
            assert error is None and finishes(events) == [Finish("stop", "end_turn")]
    assert connections == 1
