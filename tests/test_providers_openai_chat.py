"""Tests for the ``openai_chat`` adapter against recorded SSE fixtures and real local sockets.

Fixtures: ``tests/fixtures/openai_chat/<name>.sse`` (raw bytes) with ``<name>.source.txt``
saying where each came from. Every fixture is replayed whole and in 1-, 3- and 17-byte network
reads (so CRLF pairs and multibyte UTF-8 characters are split across reads). No Django, no DB.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from chat.providers import ADAPTERS, get_adapter, http, openai_chat
from chat.providers.base import (
    AnswerWasReasoning,
    ChatMessage,
    ChatRequest,
    ContentPart,
    EndpointConfig,
    Finish,
    LogprobsDelta,
    ModelInfo,
    ModelOutputError,
    ProviderError,
    RawEvent,
    ReasoningDelta,
    ResponseStarted,
    StreamWarning,
    TextDelta,
    TokenLogprob,
    ToolCallDelta,
    Usage,
)
from chat.providers.openai_chat import ThinkSplitter, build_request, normalize_usage
from tests.provider_events import applied

FIXTURES = Path(__file__).parent / "fixtures" / "openai_chat"
KEY = "sk-secret-KEY-0123456789abcdef"
ORG_TOKEN = "org-token-abcdef/98765"
CONFIG = EndpointConfig(
    base_url="https://upstream.test/v1/",
    api_key=KEY,
    extra_headers={"X-Org-Token": ORG_TOKEN},
)
REQUEST = ChatRequest(
    model="gpt-oss-120b",
    messages=(ChatMessage("user", "Hi"),),
    system="Be brief.",
    params={"temperature": 0.2},
)
SSE_HEADERS = {"content-type": "text/event-stream", "x-request-id": "req-123"}


# ---- helpers ------------------------------------------------------------------------------


class ChunkedStream(httpx.AsyncByteStream):
    """A response body delivered in reads of ``size`` bytes, then optionally waiting on
    ``gate`` and/or raising ``then`` (to simulate a stall or a dropped connection)."""

    def __init__(
        self,
        data: bytes,
        size: int | None = None,
        *,
        then: Exception | None = None,
        gate: asyncio.Event | None = None,
    ) -> None:
        self.data = data
        self.size = size
        self.then = then
        self.gate = gate
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


def fixture_bytes(name: str) -> bytes:
    return (FIXTURES / f"{name}.sse").read_bytes()


def mock_client(body: httpx.AsyncByteStream | bytes, *, status: int = 200, headers=None):
    """A client whose every request gets ``body``; ``client.requests`` records the requests."""
    requests: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        stream = body if isinstance(body, httpx.AsyncByteStream) else ChunkedStream(body)
        return httpx.Response(status, headers=headers or SSE_HEADERS, stream=stream)

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler), follow_redirects=False)
    client.requests = requests  # type: ignore[attr-defined]
    return client


async def collect(client, config=CONFIG, request=REQUEST):
    """All events of one stream, and the ProviderError it ended with (or None)."""
    events: list[Any] = []
    error = None
    try:
        async for event in openai_chat.stream(client, config, request):
            events.append(event)
    except ProviderError as exc:
        error = exc
    return events, error


async def replay(name: str, size: int | None = None):
    async with mock_client(ChunkedStream(fixture_bytes(name), size)) as client:
        return await collect(client)


def text_of(events) -> str:
    """The answer as the runner ends up with it (AnswerWasReasoning / FinalText applied)."""
    return applied(events)[1]


def reasoning_of(events) -> str:
    return applied(events)[0]


def finishes(events) -> list[str | None]:
    return [e.reason for e in events if isinstance(e, Finish)]


def last_usage(events) -> Usage | None:
    usages = [e for e in events if isinstance(e, Usage)]
    return usages[-1] if usages else None


def semantic(events) -> list[Any]:
    return [e for e in events if not isinstance(e, (RawEvent, ResponseStarted))]


# ---- fixtures, table-driven ---------------------------------------------------------------

SAMBANOVA_USAGE = json.loads(fixture_bytes("sambanova_reasoning").split(b"\n\n")[-3][6:])["usage"]

EXPECTED: dict[str, dict[str, Any]] = {
    "sambanova_reasoning": {
        "text": "A man, a plan, a canal: Panama!",
        "reasoning": "The user wants a palindrome. Classic one: Panama.",
        "finish": ["stop"],
        "usage": {
            "prompt_tokens": 90,
            "completion_tokens": 260,
            "total_tokens": 350,
            "reasoning_tokens": 55,
            "cached_tokens": 0,
            "upstream_ttft_ms": pytest.approx(214.02883529663086),
            "upstream_tokens_per_sec": pytest.approx(314.53312043711406),
            "upstream_total_ms": pytest.approx(826.6220092773438),
            "cost_usd": None,
            "raw": SAMBANOVA_USAGE,
        },
    },
    "sambanova_length": {
        "text": "in",
        "finish": ["length"],
        "usage": {
            "prompt_tokens": 43,
            "completion_tokens": 100,
            "total_tokens": 143,
            "reasoning_tokens": None,
            "cached_tokens": 0,
            "upstream_ttft_ms": pytest.approx(84.4266414642334),
            "upstream_total_ms": pytest.approx(458.9838186899821),
        },
    },
    "sansa_cost": {
        "text": "The capital of France is Paris.",
        "finish": ["stop"],
        "usage": {
            "prompt_tokens": 28,
            "completion_tokens": 8,
            "total_tokens": 36,
            "cost_usd": pytest.approx(0.00012),
            "routed_model": "openai/gpt-5.4-mini",
            "routing_latency_ms": 189.0,
            "upstream_ttft_ms": None,
            "raw": {
                "prompt_tokens": 28,
                "completion_tokens": 8,
                "total_tokens": 36,
                "cost": 0.00012,
            },
        },
    },
    "usage_beside_choice": {
        "text": "2 + 2 = 4",
        "reasoning": "Add 2 and 2.",
        "finish": ["stop"],
        "usage": {"prompt_tokens": 74, "cached_tokens": 64, "reasoning_tokens": 5},
    },
    "no_usage": {"text": "Hello there.", "finish": ["stop"], "usage": None},
    "no_done_with_finish": {"text": "Complete answer.", "finish": ["stop"], "usage": None},
    # the half event before EOF is reported (incomplete_event), then the cut is raised
    "cut": {"text": "The answer is probably", "finish": [], "error": "stream_cut", "warnings": 1},
    "error_mid_stream": {"text": "Calling the tool", "finish": [], "error": "model_output_error"},
    "crlf": {"text": "Line one. Line two.", "finish": ["stop"]},
    "keepalive_comments": {
        "text": "Done.",
        "reasoning": "Think.",
        "finish": ["stop"],
        "usage": {"total_tokens": 14, "cost_usd": pytest.approx(9.5e-06)},
    },
    "empty_choices": {
        "text": "Hi!",
        "finish": ["stop"],
        "usage": {"prompt_tokens": 9, "completion_tokens": 2, "reasoning_tokens": 0},
    },
    "think_split": {
        "text": "Yes: a < b and <think> stays text.",
        "reasoning": "Let me compare a < b.",
        "finish": ["stop"],
    },
    "multiline_data": {"text": "line one\nline two", "finish": ["stop"]},
    "multibyte": {
        "text": "Grüße, 日本語 and 🙂🚀 — done",
        "reasoning": "Ünïcödé thoughts 思考",
        "finish": ["stop"],
    },
    "reasoning_content": {
        "text": "\n\nHello!",
        "reasoning": "Okay, the user says hi.",
        "finish": ["stop"],
        "usage": {"prompt_tokens": 12, "completion_tokens": 28, "total_tokens": 40},
    },
    "tool_calls": {"text": "", "finish": ["tool_calls"], "usage": None},
    "event_error": {"text": "Partial", "finish": [], "error": "overloaded_error"},
    # issue 7 faults (see each fixture's source.txt)
    "surrogate_split": {
        "text": "Smile 😀 done",
        "finish": ["stop"],
        "usage": {"prompt_tokens": 9, "completion_tokens": 5},
    },
    "orphan_think_close": {"text": "4", "reasoning": "Plan: add 2+2", "finish": ["stop"]},
    "parallel_same_index": {"text": "", "finish": ["tool_calls"], "usage": None},
    "cut_json_chunk": {"text": "Hello there", "finish": ["stop"], "warnings": 1},
    # served as a 200 here: the same body as an in-stream error chunk
    "http_429_sse_body": {"text": "", "finish": [], "error": "rate_limit_exceeded"},
}


def test_every_fixture_has_a_source_and_an_expectation():
    names = {p.stem for p in FIXTURES.glob("*.sse")}
    assert names == set(EXPECTED)
    for name in names:
        source = (FIXTURES / f"{name}.source.txt").read_text().strip()
        assert source, name


@pytest.mark.parametrize("size", [None, 1, 3, 17])
@pytest.mark.parametrize("name", sorted(EXPECTED))
async def test_fixture(name: str, size: int | None):
    events, error = await replay(name, size)
    expected = EXPECTED[name]

    assert events[0] == ResponseStarted(200, "req-123")
    assert text_of(events) == expected["text"]
    assert reasoning_of(events) == expected.get("reasoning", "")
    assert finishes(events) == expected["finish"]
    if expected.get("error"):
        assert error is not None and error.code == expected["error"]
        assert error.status is None
    else:
        assert error is None, error
    if "usage" in expected:
        usage = last_usage(events)
        if expected["usage"] is None:
            assert usage is None
        else:
            assert usage is not None
            for field, value in expected["usage"].items():
                assert getattr(usage, field) == value, field
    warnings = [e for e in events if isinstance(e, StreamWarning)]
    assert len(warnings) == expected.get("warnings", 0)
    # every semantic event is preceded by the RawEvent of the SSE event it came from
    for i, event in enumerate(events[1:], start=1):
        if not isinstance(event, RawEvent):
            assert any(isinstance(e, RawEvent) for e in events[1:i])


@pytest.mark.parametrize("name", sorted(EXPECTED))
async def test_fixture_events_do_not_depend_on_read_sizes(name: str):
    whole, error_whole = await replay(name)
    for size in (1, 2, 5):
        split, error_split = await replay(name, size)
        assert split == whole
        assert (error_split and error_split.code) == (error_whole and error_whole.code)


async def test_sambanova_reasoning_event_order():
    events, _ = await replay("sambanova_reasoning", 1)
    kinds = [type(e).__name__ for e in semantic(events)]
    assert kinds == [
        "ReasoningDelta",
        "ReasoningDelta",
        "TextDelta",
        "TextDelta",
        "Finish",
        "Usage",
    ]
    raws = [e for e in events if isinstance(e, RawEvent)]
    assert len(raws) == 8 and raws[-1] == RawEvent("", "[DONE]")
    assert all(r.event == "" for r in raws)


async def test_usage_beside_choice_comes_with_the_last_delta():
    events, _ = await replay("usage_beside_choice")
    tail = semantic(events)[-3:]
    assert tail[0] == TextDelta("4")
    assert tail[1] == Finish("stop")
    assert isinstance(tail[2], Usage) and tail[2].completion_tokens == 12


async def test_reasoning_in_both_fields_is_emitted_once():
    events, _ = await replay("reasoning_content")
    assert [e.text for e in events if isinstance(e, ReasoningDelta)] == [
        "Okay, the user",
        " says hi.",
    ]


async def test_keepalive_comments_are_not_events():
    events, error = await replay("keepalive_comments", 1)
    assert error is None
    raws = [e for e in events if isinstance(e, RawEvent)]
    # 4 JSON chunks + [DONE]; comments, retry-only and id-only dispatches produce nothing
    assert len(raws) == 5
    assert all(r.data for r in raws)


async def test_tool_call_deltas():
    events, _ = await replay("tool_calls", 3)
    calls = [e for e in events if isinstance(e, ToolCallDelta)]
    assert calls == [
        ToolCallDelta(index=0, id="call_abc", name="get_weather", arguments=""),
        ToolCallDelta(index=0, id=None, name=None, arguments='{"city":'),
        ToolCallDelta(index=0, id=None, name=None, arguments='"Paris"}'),
    ]


async def test_error_chunk_mid_stream_details():
    events, error = await replay("error_mid_stream", 1)
    assert text_of(events) == "Calling the tool"
    assert error.message == "Model output could not be parsed as a tool call"
    assert error.request_id == "d7a1b2c3os6aemenqx00"
    assert "model_output_error" in error.body_excerpt


async def test_event_error_details():
    _, error = await replay("event_error")
    assert (error.code, error.message, error.status) == ("overloaded_error", "Overloaded", None)


async def test_cut_stream_message():
    _, error = await replay("cut", 1)
    assert error.message == "The upstream closed the stream before it finished"


async def test_multibyte_split_inside_characters():
    data = fixture_bytes("multibyte")
    # a read boundary inside every multibyte character: split right after each lead byte
    cuts = [i + 1 for i, b in enumerate(data) if b >= 0xC0]
    pieces, last = [], 0
    for cut in cuts:
        pieces.append(data[last:cut])
        last = cut
    pieces.append(data[last:])

    class Pieces(ChunkedStream):
        async def __aiter__(self):
            for piece in pieces:
                yield piece

    async with mock_client(Pieces(b"")) as client:
        events, error = await collect(client)
    assert error is None
    assert text_of(events) == "Grüße, 日本語 and 🙂🚀 — done"
    assert "\ufffd" not in "".join(e.data for e in events if isinstance(e, RawEvent))


async def test_wrong_charset_header_is_ignored_sse_is_utf8():
    headers = {"content-type": "text/event-stream; charset=iso-8859-1"}
    async with mock_client(ChunkedStream(fixture_bytes("multibyte"), 1), headers=headers) as client:
        events, _ = await collect(client)
    assert text_of(events) == "Grüße, 日本語 and 🙂🚀 — done"


async def test_text_plain_event_stream_is_still_parsed():
    headers = {"content-type": "text/plain"}
    async with mock_client(fixture_bytes("no_usage"), headers=headers) as client:
        events, error = await collect(client)
    assert error is None and text_of(events) == "Hello there."


async def test_empty_2xx_body_is_a_cut_stream():
    async with mock_client(b"") as client:
        events, error = await collect(client)
    assert events == [ResponseStarted(200, "req-123")]
    assert error.code == "stream_cut"


async def test_done_without_finish_is_a_normal_end():
    body = b'data: {"choices":[{"index":0,"delta":{"content":"ok"}}]}\n\ndata: [DONE]\n\n'
    async with mock_client(body) as client:
        events, error = await collect(client)
    assert error is None and text_of(events) == "ok" and finishes(events) == []


async def test_nothing_after_done_is_read_as_events():
    body = (
        b'data: {"choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]}\n\n'
        b"data: [DONE]\n\n"
        b'data: {"choices":[{"index":0,"delta":{"content":"late"}}]}\n\n'
    )
    async with mock_client(body) as client:
        events, error = await collect(client)
    assert error is None and text_of(events) == "ok"


async def test_non_json_data_is_only_a_raw_event():
    body = b"data: keep-alive\n\n" + fixture_bytes("no_usage")
    async with mock_client(body) as client:
        events, error = await collect(client)
    assert error is None and text_of(events) == "Hello there."
    assert RawEvent("", "keep-alive") in events


async def test_only_first_choice_is_relayed():
    body = (
        b'data: {"choices":[{"index":1,"delta":{"content":"B"}},'
        b'{"index":0,"delta":{"content":"A"}}]}\n\n'
        b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
    )
    async with mock_client(body) as client:
        events, _ = await collect(client)
    assert text_of(events) == "A"


async def test_content_parts_with_thinking():
    """Mistral (Magistral) streams content as a list of ``thinking`` and ``text`` parts."""
    thinking = {"type": "thinking", "thinking": [{"type": "text", "text": "Hmm."}]}
    body = (
        f"data: {json.dumps({'choices': [{'index': 0, 'delta': {'content': [thinking]}}]})}\n\n"
        'data: {"choices":[{"index":0,"delta":{"content":[{"type":"text","text":"Hi"}]},'
        '"finish_reason":"stop"}]}\n\n'
    ).encode()
    async with mock_client(body) as client:
        events, error = await collect(client)
    assert error is None
    assert semantic(events) == [ReasoningDelta("Hmm."), TextDelta("Hi"), Finish("stop")]


async def test_sansa_metadata_before_usage_is_merged():
    body = (
        b'data: {"choices":[{"index":0,"delta":{"content":"x"}}],'
        b'"sansa":{"routed_model":"anthropic/claude-sonnet-4.6","routing_latency_ms":12}}\n\n'
        b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
        b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1,"cost":0.5}}\n\n'
        b"data: [DONE]\n\n"
    )
    async with mock_client(body) as client:
        events, _ = await collect(client)
    usages = [e for e in events if isinstance(e, Usage)]
    assert len(usages) == 1
    assert usages[0].routed_model == "anthropic/claude-sonnet-4.6"
    assert usages[0].routing_latency_ms == 12.0 and usages[0].cost_usd == 0.5


async def test_sansa_metadata_without_usage_is_still_reported():
    body = (
        b'data: {"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"stop"}],'
        b'"sansa":{"routed_model":"openai/gpt-5.4-mini","routing_latency_ms":189}}\n\n'
        b"data: [DONE]\n\n"
    )
    async with mock_client(body) as client:
        events, _ = await collect(client)
    usage = last_usage(events)
    assert usage.routed_model == "openai/gpt-5.4-mini" and usage.raw == {}


async def test_repeated_usage_is_emitted_only_when_it_changes():
    chunk = b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1}}\n\n'
    body = (
        b'data: {"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"stop"}]}\n\n'
        + chunk
        + chunk
        + b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}\n\n'
    )
    async with mock_client(body) as client:
        events, _ = await collect(client)
    assert [e.completion_tokens for e in events if isinstance(e, Usage)] == [1, 2]


async def test_non_streaming_json_answer_is_relayed():
    """Seed 001's Sansa "Basic Request" response, as a server that ignores ``stream: true``."""
    body = json.dumps(
        {
            "id": "chatcmpl-abc123",
            "object": "chat.completion",
            "created": 1708300000,
            "model": "openai/gpt-5.4-mini",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "The capital of France is Paris."},
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": 28,
                "completion_tokens": 8,
                "total_tokens": 36,
                "cost": 0.00012,
            },
            "sansa": {
                "routed": True,
                "routed_model": "openai/gpt-5.4-mini",
                "routing_latency_ms": 189,
            },
        }
    ).encode()
    async with mock_client(body, headers={"content-type": "application/json"}) as client:
        events, error = await collect(client)
    assert error is None
    assert text_of(events) == "The capital of France is Paris."
    assert finishes(events) == ["stop"]
    assert last_usage(events).routed_model == "openai/gpt-5.4-mini"
    assert last_usage(events).cost_usd == 0.00012


# ---- secrets ------------------------------------------------------------------------------


async def test_http_error_echoing_the_key_is_scrubbed():
    body = json.dumps(
        {
            "error": {
                "message": f"Incorrect API key provided: {KEY} (org {ORG_TOKEN})",
                "type": "invalid_request_error",
                "code": "invalid_api_key",
                "param": None,
            },
            "request_id": "d79vcq57os633dverhi0",
        }
    ).encode()
    async with mock_client(body, status=401, headers={"content-type": "application/json"}) as c:
        events, error = await collect(c)
    assert events == []
    assert error.status == 401 and error.code == "invalid_api_key"
    dumped = json.dumps(error.as_dict()) + repr(error) + str(error)
    assert KEY not in dumped and ORG_TOKEN not in dumped
    assert ORG_TOKEN.replace("/", "\\/") not in dumped
    assert "[REDACTED]" in error.message


async def test_in_stream_error_and_raw_events_are_scrubbed():
    body = (
        f'data: {{"choices":[{{"index":0,"delta":{{"content":"echo {KEY}"}}}}]}}\n\n'
        f'data: {{"error":{{"message":"bad key {KEY}","code":"auth"}}}}\n\n'
    ).encode()
    async with mock_client(body) as client:
        events, error = await collect(client)
    raws = [e.data for e in events if isinstance(e, RawEvent)]
    assert raws and all(KEY not in r for r in raws)
    assert KEY not in json.dumps(error.as_dict())
    assert error.code == "auth"


# ---- transport failures -------------------------------------------------------------------


def raising_client(exc: Exception) -> httpx.AsyncClient:
    def handler(request: httpx.Request) -> httpx.Response:
        raise exc

    return httpx.AsyncClient(transport=httpx.MockTransport(handler))


async def test_connection_refused_on_a_closed_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    config = EndpointConfig(base_url=f"http://127.0.0.1:{port}/v1", api_key=KEY)
    async with httpx.AsyncClient() as client:
        events, error = await collect(client, config)
    assert events == []
    assert error.code == "connection_error" and error.status is None
    assert error.message.startswith(f"Could not connect to 127.0.0.1:{port}: ")
    assert KEY not in error.message


@pytest.mark.parametrize(
    ("exc", "code", "fragment"),
    [
        (httpx.ConnectTimeout("timed out"), "timeout", "Timed out connecting to upstream.test"),
        (httpx.ReadTimeout("timed out"), "timeout", "sent no response"),
        (httpx.WriteTimeout("timed out"), "timeout", "sending the request"),
        (httpx.PoolTimeout("timed out"), "timeout", "free connection"),
        (
            httpx.ConnectError("[Errno -2] Name or service not known"),
            "connection_error",
            "Could not connect",
        ),
        (
            httpx.RemoteProtocolError("Server disconnected without sending a response."),
            "connection_error",
            "closed the connection without a response",
        ),
        (
            httpx.LocalProtocolError(f"Illegal header value b'Bearer {KEY}'"),
            "invalid_config",
            "[REDACTED]",
        ),
    ],
)
async def test_transport_errors_before_the_response(exc, code, fragment):
    async with raising_client(exc) as client:
        events, error = await collect(client)
    assert events == []
    assert error.code == code and error.status is None
    assert fragment in error.message
    assert KEY not in error.message


async def test_timeout_messages_name_the_configured_timeouts():
    exc = httpx.ConnectTimeout("timed out")
    exc.request = httpx.Request("POST", "https://x.test", extensions={"timeout": {"connect": 5.0}})
    async with raising_client(exc) as client:
        _, error = await collect(client)
    assert error.message == "Timed out connecting to upstream.test after 5 s"


BEFORE_FINISH = b'data: {"choices":[{"index":0,"delta":{"content":"<think>So"}}]}\n\n'
AFTER_FINISH = (
    BEFORE_FINISH + b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
)


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (
            httpx.RemoteProtocolError(
                "peer closed connection without sending complete message body"
            ),
            "stream_cut",
        ),
        (httpx.ReadError("connection reset"), "stream_cut"),
        (httpx.ReadTimeout("timed out"), "timeout"),
    ],
)
async def test_transport_errors_mid_stream(exc, code):
    async with mock_client(ChunkedStream(BEFORE_FINISH, then=exc)) as client:
        events, error = await collect(client)
    assert error.code == code and error.status is None
    # the text held back by the <think> splitter is released before the error
    assert reasoning_of(events) == "So"
    if code == "stream_cut":
        assert error.message.startswith("The upstream closed the stream before it finished")
    else:
        assert "mid-stream" in error.message


@pytest.mark.parametrize(
    "exc",
    [
        httpx.RemoteProtocolError("incomplete chunked read"),
        httpx.ReadError("reset"),
        httpx.ReadTimeout("t"),
    ],
)
async def test_transport_error_after_finish_ends_normally(exc):
    async with mock_client(ChunkedStream(AFTER_FINISH, then=exc)) as client:
        events, error = await collect(client)
    assert error is None
    assert finishes(events) == ["stop"] and reasoning_of(events) == "So"


# ---- early stop and cancellation ----------------------------------------------------------

FIRST = b'data: {"choices":[{"index":0,"delta":{"content":"Hello"}}]}\n\n'


async def test_aclosing_closes_the_upstream_response():
    body = ChunkedStream(FIRST, gate=asyncio.Event())
    async with mock_client(body) as client:
        async with contextlib.aclosing(openai_chat.stream(client, CONFIG, REQUEST)) as events:
            async for event in events:
                if isinstance(event, TextDelta):
                    break
        assert body.closed


async def test_cancelling_the_task_closes_the_upstream_response():
    body = ChunkedStream(FIRST, gate=asyncio.Event())
    got_text = asyncio.Event()

    async def consume(client):
        async for event in openai_chat.stream(client, CONFIG, REQUEST):
            if isinstance(event, TextDelta):
                got_text.set()

    async with mock_client(body) as client:
        task = asyncio.create_task(consume(client))
        await asyncio.wait_for(got_text.wait(), 2)
        assert not body.closed
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert body.closed


# ---- real sockets: httpx's own transport against a tiny local HTTP/1.1 server -------------


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
    b"Transfer-Encoding: chunked\r\nx-request-id: tcp-1\r\n\r\n"
)


@contextlib.asynccontextmanager
async def tcp_server(handler):
    """Serve ``handler(reader, writer)`` on 127.0.0.1; yield an EndpointConfig pointing at it.
    On exit, wait for the connection handlers (the client is closed first) and close sockets."""
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


@pytest.fixture(params=["httpx default client", "project client"])
def real_client(request):
    """Clients for the real-socket tests: httpx's own (anyio backend) and the project's
    (``make_client``: pinned transport on asyncio streams), so both read paths are covered."""
    if request.param == "project client":
        return http.make_client
    return httpx.AsyncClient


async def test_real_socket_cut_chunked_body_is_stream_cut(real_client):
    async def handler(reader, writer):
        await _read_request(reader)
        writer.write(SSE_HEAD + _chunk(FIRST))
        writer.write(b'40\r\ndata: {"choi')  # a chunk announced as 64 bytes, then the peer goes
        await writer.drain()
        writer.close()

    async with tcp_server(handler) as config, real_client() as client:
        events, error = await collect(client, config)
    assert events[0] == ResponseStarted(200, "tcp-1")
    assert text_of(events) == "Hello"
    assert error.code == "stream_cut"


async def test_real_socket_multibyte_split_across_tcp_writes(real_client):
    data = fixture_bytes("multibyte")

    async def handler(reader, writer):
        await _read_request(reader)
        writer.write(SSE_HEAD)
        for i in range(0, len(data), 7):
            writer.write(_chunk(data[i : i + 7]))
            await writer.drain()
            await asyncio.sleep(0)
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        writer.close()

    async with tcp_server(handler) as config, real_client() as client:
        events, error = await collect(client, config)
    assert error is None
    assert text_of(events) == "Grüße, 日本語 and 🙂🚀 — done"


async def test_real_socket_cancel_closes_the_connection_promptly(real_client):
    peer_closed = asyncio.Event()

    async def handler(reader, writer):
        await _read_request(reader)
        writer.write(SSE_HEAD + _chunk(FIRST))
        await writer.drain()
        await reader.read()  # returns b"" when the client closes the connection
        peer_closed.set()
        writer.close()

    got_text = asyncio.Event()

    async def consume(client, config):
        async for event in openai_chat.stream(client, config, REQUEST):
            if isinstance(event, TextDelta):
                got_text.set()

    async with tcp_server(handler) as config, real_client() as client:
        task = asyncio.create_task(consume(client, config))
        await asyncio.wait_for(got_text.wait(), 2)
        started = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.wait_for(peer_closed.wait(), 2)
        assert time.monotonic() - started < 1.0


async def test_real_socket_read_timeout_mid_stream(real_client):
    async def handler(reader, writer):
        await _read_request(reader)
        writer.write(SSE_HEAD + _chunk(FIRST))
        await writer.drain()
        await reader.read()
        writer.close()

    timeout = httpx.Timeout(connect=1, read=0.2, write=1, pool=1)
    async with tcp_server(handler) as config, real_client(timeout=timeout) as client:
        events, error = await collect(client, config)
    assert text_of(events) == "Hello"
    assert error.code == "timeout"
    host = config.base_url.removeprefix("http://").removesuffix("/v1")
    assert error.message == f"{host} stopped sending data mid-stream (no data after 0.2 s)"


async def test_real_socket_connection_is_reused_after_done(real_client):
    connections = 0
    body = fixture_bytes("sambanova_reasoning")

    async def handler(reader, writer):
        nonlocal connections
        connections += 1
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                await _read_request(reader)
                writer.write(SSE_HEAD + _chunk(body[:100]) + _chunk(body[100:]) + b"0\r\n\r\n")
                await writer.drain()
        writer.close()

    async with tcp_server(handler) as config, real_client() as client:
        for _ in range(3):
            events, error = await collect(client, config)
            assert error is None and finishes(events) == ["stop"]
    assert connections == 1


# ---- the request --------------------------------------------------------------------------


def test_build_request_shape():
    request = ChatRequest(
        model="Meta-Llama-3.3-70B-Instruct",
        messages=(
            ChatMessage("user", "Hi"),
            ChatMessage("assistant", "Hello"),
            ChatMessage("user", "?"),
        ),
        system="You are terse.",
        params={"temperature": 0.7, "top_k": 40, "stop": ["END"], "seed": 0, "top_p": None},
    )
    url, headers, body = build_request(CONFIG, request)
    assert url == "https://upstream.test/v1/chat/completions"
    assert headers["Authorization"] == f"Bearer {KEY}"
    assert headers["X-Org-Token"] == ORG_TOKEN
    assert headers["Accept"] == "text/event-stream"
    assert headers["Content-Type"] == "application/json"
    assert body == {
        "model": "Meta-Llama-3.3-70B-Instruct",
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello"},
            {"role": "user", "content": "?"},
        ],
        "temperature": 0.7,
        "top_k": 40,
        "stop": ["END"],
        "seed": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }


def test_build_request_minimal_without_key_system_or_stream_options():
    config = EndpointConfig(base_url="http://127.0.0.1:8080/v1", stream_options=False)
    request = ChatRequest(model="m", messages=(ChatMessage("user", "Hi"),), system="  \n")
    url, headers, body = build_request(config, request)
    assert url == "http://127.0.0.1:8080/v1/chat/completions"
    assert "Authorization" not in headers
    assert body == {"model": "m", "messages": [{"role": "user", "content": "Hi"}], "stream": True}


def test_build_request_openai_drops_top_k_and_renames_max_tokens():
    config = EndpointConfig(base_url="https://api.openai.com/v1", api_key=KEY)
    request = ChatRequest(
        model="gpt-5", messages=(), params={"top_k": 5, "max_tokens": 100, "stop": "x"}
    )
    _, _, body = build_request(config, request)
    assert "top_k" not in body and "max_tokens" not in body
    assert body["max_completion_tokens"] == 100
    assert body["stop"] == ["x"]


def test_build_request_keeps_max_tokens_elsewhere_and_drops_empty_stop():
    request = ChatRequest(model="m", messages=(), params={"max_tokens": 64, "stop": []})
    _, _, body = build_request(CONFIG, request)
    assert body["max_tokens"] == 64 and "stop" not in body


def test_extra_headers_override_case_insensitively():
    config = EndpointConfig(
        base_url="https://gw.test/v1", api_key=KEY, extra_headers={"authorization": "Token abc"}
    )
    _, headers, _ = build_request(config, REQUEST)
    assert [k for k in headers if k.lower() == "authorization"] == ["authorization"]
    assert headers["authorization"] == "Token abc"


async def test_request_on_the_wire():
    async with mock_client(fixture_bytes("no_usage")) as client:
        await collect(client)
    (sent,) = client.requests
    assert sent.method == "POST"
    assert str(sent.url) == "https://upstream.test/v1/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert sent.headers["x-org-token"] == ORG_TOKEN
    assert json.loads(sent.content)["messages"][0] == {"role": "system", "content": "Be brief."}


async def test_redirect_is_not_followed():
    async with mock_client(
        b"", status=307, headers={"location": "https://evil.test/steal"}
    ) as client:
        _, error = await collect(client)
    assert error.status == 307
    assert "redirects are not followed" in error.message
    assert len(client.requests) == 1


# ---- think splitter -----------------------------------------------------------------------

THINK_CASES = [
    # (content, expected reasoning, expected answer)
    ("<think>plan</think>answer", "plan", "answer"),
    ("  \n<think>\nplan\n</think>\n\nanswer", "plan\n", "answer"),
    ("<think>\n\n</think>\n\nHi", "", "Hi"),
    ("a < b", "", "a < b"),
    ("<", "", "<"),
    ("<thi", "", "<thi"),
    ("<b>bold</b>", "", "<b>bold</b>"),
    ("<thinking>x</thinking>", "x", ""),
    ("\n<thinking>\nplan</thinking>\nanswer", "plan", "answer"),
    ("Hi <think>not reasoning</think>", "", "Hi <think>not reasoning</think>"),
    # a closing tag without an opening one (templates that open <think> in the prompt)
    ("Plan: add 2+2</think>4", "Plan: add 2+2", "4"),
    ("Plan</thinking>\n\nAnswer", "Plan", "Answer"),
    ("x</think>y</think>z", "x", "y</think>z"),
    ("a </b> </thinker> b", "", "a </b> </thinker> b"),
    ("2 </thi", "", "2 </thi"),
    ("<think>unclosed, cut by max_tokens", "unclosed, cut by max_tokens", ""),
    ("<think>a</thin", "a</thin", ""),
    ("<think>x < y and </thinking> </think>done", "x < y and </thinking> ", "done"),
    ("<think>one</think>two <think>three</think>", "one", "two <think>three</think>"),
    ("\n\n", "", "\n\n"),
    ("", "", ""),
]


def _split(pieces: list[str]) -> tuple[str, str]:
    """Feed ``pieces`` and apply the events as the runner does (``AnswerWasReasoning`` moves
    the answer so far to the reasoning)."""
    splitter = ThinkSplitter()
    out = []
    for piece in pieces:
        out.extend(splitter.feed(piece))
    out.extend(splitter.flush())
    reasoning, answer = "", ""
    for event in out:
        if isinstance(event, AnswerWasReasoning):
            assert answer, "AnswerWasReasoning only after answer text"
            reasoning, answer = reasoning + answer, ""
        elif isinstance(event, ReasoningDelta):
            assert event.text  # never empty deltas
            reasoning += event.text
        else:
            assert isinstance(event, TextDelta) and event.text
            answer += event.text
    assert sum(isinstance(e, AnswerWasReasoning) for e in out) <= 1
    return reasoning, answer


@pytest.mark.parametrize(("content", "reasoning", "answer"), THINK_CASES)
def test_think_splitter_whole(content, reasoning, answer):
    assert _split([content]) == (reasoning, answer)


@pytest.mark.parametrize(("content", "reasoning", "answer"), THINK_CASES)
def test_think_splitter_char_by_char(content, reasoning, answer):
    assert _split(list(content)) == (reasoning, answer)


@pytest.mark.parametrize(("content", "reasoning", "answer"), THINK_CASES)
def test_think_splitter_every_two_way_split(content, reasoning, answer):
    for cut in range(len(content) + 1):
        assert _split([content[:cut], content[cut:]]) == (reasoning, answer), cut


def test_think_splitter_releases_reasoning_promptly():
    splitter = ThinkSplitter()
    assert splitter.feed("<think>Let me") == [ReasoningDelta("Let me")]
    assert splitter.feed(" see </") == [ReasoningDelta(" see ")]  # "</" held back
    assert splitter.feed("b> ok") == [ReasoningDelta("</b> ok")]
    assert splitter.feed("</think>Yes") == [TextDelta("Yes")]
    assert splitter.feed(" <think>") == [TextDelta(" <think>")]


def test_plain_answer_is_not_delayed():
    splitter = ThinkSplitter()
    assert splitter.feed("Hello") == [TextDelta("Hello")]
    assert splitter.feed("<think>") == [TextDelta("<think>")]


# ---- usage normalization ------------------------------------------------------------------


def test_normalize_usage_sambanova_units():
    usage = normalize_usage(SAMBANOVA_USAGE)
    assert usage.upstream_ttft_ms == pytest.approx(214.02883529663086)
    assert usage.upstream_total_ms == pytest.approx(826.6220092773438)
    assert usage.upstream_tokens_per_sec == pytest.approx(314.53312043711406)
    assert usage.raw == SAMBANOVA_USAGE and usage.raw is not SAMBANOVA_USAGE


def test_normalize_usage_tolerates_junk():
    usage = normalize_usage(
        {
            "prompt_tokens": "12",
            "completion_tokens": True,
            "prompt_tokens_details": None,
            "cost": None,
        }
    )
    assert usage == Usage(raw=usage.raw)
    assert normalize_usage(None) == Usage()


# ---- models -------------------------------------------------------------------------------


async def test_list_models_sambanova_metadata():
    payload = {
        "object": "list",
        "data": [
            {
                "id": "Meta-Llama-3.3-70B-Instruct",
                "object": "model",
                "owned_by": "Meta",
                "context_length": 131072,
                "max_completion_tokens": 3072,
                "pricing": {"prompt": 0.0000006, "completion": 0.0000012},
                "sn_metadata": {},
            },
            {"id": "DeepSeek-R1", "pricing": {"prompt": "0.000005", "completion": "0.000007"}},
            {"id": "whisper", "pricing": {"prompt": -1}},
            {"object": "model"},
        ],
    }
    async with mock_client(
        json.dumps(payload).encode(), headers={"content-type": "application/json"}
    ) as c:
        models = await openai_chat.list_models(c, CONFIG)
    (sent,) = c.requests
    assert sent.method == "GET" and str(sent.url) == "https://upstream.test/v1/models"
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert models == [
        ModelInfo(
            id="Meta-Llama-3.3-70B-Instruct",
            owned_by="Meta",
            context_length=131072,
            max_completion_tokens=3072,
            prompt_price_per_mtok=0.6,
            completion_price_per_mtok=1.2,
        ),
        ModelInfo(id="DeepSeek-R1", prompt_price_per_mtok=5.0, completion_price_per_mtok=7.0),
        ModelInfo(id="whisper"),
    ]


async def test_list_models_http_error_is_a_provider_error():
    body = json.dumps({"error": {"message": f"bad key {KEY}", "code": "invalid_api_key"}}).encode()
    async with mock_client(body, status=401, headers={"content-type": "application/json"}) as c:
        with pytest.raises(ProviderError) as info:
            await openai_chat.list_models(c, CONFIG)
    assert info.value.status == 401 and info.value.code == "invalid_api_key"
    assert KEY not in info.value.message


async def test_list_models_non_json():
    async with mock_client(b"<html>hi</html>", headers={"content-type": "text/html"}) as c:
        with pytest.raises(ProviderError) as info:
            await openai_chat.list_models(c, CONFIG)
    assert info.value.code == "bad_response"


async def test_list_models_connection_error():
    async with raising_client(httpx.ConnectError("refused")) as client:
        with pytest.raises(ProviderError) as info:
            await openai_chat.list_models(client, CONFIG)
    assert info.value.code == "connection_error"


# ---- registry -----------------------------------------------------------------------------


def test_get_adapter():
    assert get_adapter("openai_chat") is openai_chat
    assert ADAPTERS["openai_chat"] is openai_chat
    with pytest.raises(ValueError, match="Unknown API style 'nope'"):
        get_adapter("nope")


def test_providers_do_not_import_django():
    import ast

    package = Path(openai_chat.__file__).parent
    for path in package.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            for name in names:
                assert name.split(".")[0] not in {"django", "channels"}, (path, name)


@pytest.mark.parametrize(
    ("config", "fragment"),
    [
        (EndpointConfig(base_url="https://x.test/v1", api_key="sk-é-secret-key"), "cannot carry"),
        (
            EndpointConfig(base_url="https://x.test/v1", extra_headers={"X-Key": "tök-secret"}),
            "cannot carry",
        ),
        (EndpointConfig(base_url="http://[::1/v1", api_key=KEY), "Invalid base URL"),
    ],
)
async def test_bad_configuration_is_a_provider_error_without_the_key(config, fragment):
    async with mock_client(fixture_bytes("no_usage")) as client:
        events, error = await collect(client, config)
        with pytest.raises(ProviderError) as info:
            await openai_chat.list_models(client, config)
    assert events == [] and client.requests == []
    for exc in (error, info.value):
        assert exc.code == "invalid_config" and fragment in exc.message
        assert exc.__context__ is None and exc.__cause__ is None
        for secret in config.secrets():
            assert secret not in exc.message


# ---- issue 3: tools, structured output, logprobs, reasoning, parts, extra -----------------

WEATHER_TOOL = {
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
        ("auto", "auto"),
        ("none", "none"),
        ("required", "required"),
        ("get_weather", {"type": "function", "function": {"name": "get_weather"}}),
        (None, None),
    ],
)
def test_build_request_tools_and_tool_choice(choice, expected):
    request = ChatRequest(model="m", messages=(), tools=(WEATHER_TOOL,), tool_choice=choice)
    _, _, body = build_request(CONFIG, request)
    assert body["tools"] == [WEATHER_TOOL]
    assert body.get("tool_choice") == expected


def test_build_request_tool_choice_needs_tools():
    _, _, body = build_request(CONFIG, ChatRequest(model="m", messages=(), tool_choice="required"))
    assert "tools" not in body and "tool_choice" not in body


@pytest.mark.parametrize(
    ("response_format", "sent"),
    [
        (
            {
                "type": "json_schema",
                "json_schema": {
                    "name": "capitals",
                    "strict": True,
                    "schema": {
                        "type": "object",
                        "properties": {"capitals": {"type": "array", "items": {"type": "string"}}},
                        "required": ["capitals"],
                        "additionalProperties": False,
                    },
                },
            },
            True,
        ),
        ({"type": "json_object"}, True),
        ({"type": "text"}, False),  # seed 002: not supported by chat completions, leave it out
        (None, False),
    ],
)
def test_build_request_response_format(response_format, sent):
    request = ChatRequest(model="m", messages=(), response_format=response_format)
    _, _, body = build_request(CONFIG, request)
    assert body.get("response_format") == (response_format if sent else None)


def test_build_request_logprobs_and_penalties():
    request = ChatRequest(
        model="m",
        messages=(),
        logprobs=True,
        top_logprobs=5,
        params={"frequency_penalty": 0.5, "presence_penalty": -1.0},
    )
    _, _, body = build_request(CONFIG, request)
    assert (body["logprobs"], body["top_logprobs"]) == (True, 5)
    assert (body["frequency_penalty"], body["presence_penalty"]) == (0.5, -1.0)
    _, _, plain = build_request(CONFIG, ChatRequest(model="m", messages=(), logprobs=True))
    assert plain["logprobs"] is True and "top_logprobs" not in plain


@pytest.mark.parametrize(
    ("reasoning", "expected"),
    [
        ({}, {}),
        ({"effort": "high"}, {"reasoning_effort": "high"}),
        ({"effort": "xhigh"}, {"reasoning_effort": "xhigh"}),
        (
            {"effort": "medium", "max_tokens": None, "exclude": True},
            {"reasoning": {"effort": "medium", "exclude": True}},
        ),
        ({"max_tokens": 1000}, {"reasoning": {"max_tokens": 1000}}),
        ({"enabled": False}, {"reasoning": {"enabled": False}}),
        ({"enable_thinking": True}, {"chat_template_kwargs": {"enable_thinking": True}}),
        (
            {"enable_thinking": False, "effort": "low"},
            {"chat_template_kwargs": {"enable_thinking": False}, "reasoning_effort": "low"},
        ),
        ({"budget_tokens": 2048}, {}),
    ],
)
def test_build_request_reasoning_forms(reasoning, expected):
    request = ChatRequest(model="sansa-auto", messages=(), reasoning=reasoning)
    _, _, body = build_request(CONFIG, request)
    got = {
        k: body[k] for k in ("reasoning", "reasoning_effort", "chat_template_kwargs") if k in body
    }
    assert got == expected


def test_build_request_extra_passthrough_sansa_session_id():
    request = ChatRequest(
        model="sansa-auto",
        messages=(ChatMessage("user", "Hi"),),
        extra={
            "session_id": "conv-42",
            "metadata": {"call_name": "x"},
            "messages": [],
            "stream": 0,
        },
    )
    _, _, body = build_request(CONFIG, request)
    assert body["session_id"] == "conv-42" and body["metadata"] == {"call_name": "x"}
    assert body["messages"] == [{"role": "user", "content": "Hi"}] and body["stream"] is True


def test_build_request_user_parts_images_and_audio():
    request = ChatRequest(
        model="m",
        messages=(
            ChatMessage(
                "user",
                "Describe these.",
                parts=(
                    ContentPart("image", "image/jpeg", "/9j/4AAQ"),
                    ContentPart("image", url="https://example.com/photo.jpg"),
                    ContentPart("audio", "audio/mpeg", "SUQz"),
                    ContentPart("audio", "", "T2dn", filename="note.ogg"),
                    ContentPart("audio", "audio/x-m4a", "AAAA"),
                ),
            ),
        ),
    )
    _, _, body = build_request(CONFIG, request)
    assert body["messages"][-1] == {
        "role": "user",
        "content": [
            {"type": "text", "text": "Describe these."},
            {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/4AAQ"}},
            {"type": "image_url", "image_url": {"url": "https://example.com/photo.jpg"}},
            {"type": "input_audio", "input_audio": {"data": "SUQz", "format": "mp3"}},
            {"type": "input_audio", "input_audio": {"data": "T2dn", "format": "ogg"}},
            {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "m4a"}},
        ],
    }


def test_build_request_sambanova_audio_content_form():
    config = EndpointConfig(base_url="https://api.sambanova.ai/v1", api_key=KEY)
    request = ChatRequest(
        model="m",
        messages=(ChatMessage("user", "", parts=(ContentPart("audio", "audio/wav", "UklG"),)),),
    )
    _, _, body = build_request(config, request)
    assert body["messages"] == [
        {
            "role": "user",
            "content": [{"type": "audio_content", "audio_content": {"content": "UklG"}}],
        }
    ]


def test_build_request_tool_history():
    from chat.providers.base import ToolCall

    request = ChatRequest(
        model="m",
        messages=(
            ChatMessage("user", "Weather?"),
            ChatMessage(
                "assistant",
                "",
                reasoning="not sent back",
                tool_calls=(ToolCall("call_abc", "get_weather", '{"city":"Paris"}'),),
            ),
            ChatMessage("tool", '{"temp": 18}', tool_call_id="call_abc", name="get_weather"),
            ChatMessage("assistant", "18 degrees."),
        ),
    )
    _, _, body = build_request(CONFIG, request)
    assert body["messages"][1:] == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_abc",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_abc", "content": '{"temp": 18}'},
        {"role": "assistant", "content": "18 degrees."},
    ]


async def test_unsupported_attachment_is_refused_before_sending():
    request = ChatRequest(
        model="m",
        messages=(ChatMessage("user", "x", parts=(ContentPart("video", "video/mp4", "AAAA"),)),),
    )
    async with mock_client(fixture_bytes("no_usage")) as client:
        events, error = await collect(client, request=request)
    assert events == [] and client.requests == []
    assert error.code == "unsupported_content" and "video" in error.message


# ---- logprobs in the stream (seed 002 LogProbs example) -----------------------------------

SEED_LOGPROBS = {
    "content": [
        {
            "token": " Hello",
            "logprob": -0.00012340000000000002,
            "bytes": [32, 72, 101, 108, 108, 111],
            "top_logprobs": [
                {"token": " Hello", "logprob": -0.00012340000000000002, "bytes": [32, 72]},
                {"token": " Hi", "logprob": -8.243, "bytes": [32, 72, 105]},
            ],
        },
        {"token": "!", "logprob": -0.0023456, "bytes": [33], "top_logprobs": []},
        {"token": "?", "logprob": "bad"},
    ]
}


async def test_logprobs_delta_follows_its_text():
    chunk = {"choices": [{"index": 0, "delta": {"content": " Hello!"}, "logprobs": SEED_LOGPROBS}]}
    body = (
        f"data: {json.dumps(chunk)}\n\n"
        'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop","logprobs":null}]}\n\n'
        "data: [DONE]\n\n"
    ).encode()
    async with mock_client(body) as client:
        events, error = await collect(client)
    assert error is None
    assert semantic(events) == [
        TextDelta(" Hello!"),
        LogprobsDelta(
            (
                TokenLogprob(
                    " Hello",
                    -0.00012340000000000002,
                    ((" Hello", -0.00012340000000000002), (" Hi", -8.243)),
                ),
                TokenLogprob("!", -0.0023456),
            )
        ),
        Finish("stop"),
    ]


# ---- seed 002 ModelOutputError ------------------------------------------------------------


async def test_model_output_error_chunk_yields_the_raw_output_before_the_error():
    events, error = await replay("error_mid_stream", 3)
    assert [e for e in events if isinstance(e, ModelOutputError)] == [
        ModelOutputError("Model output could not be parsed as a tool call", "<tool>{bad json")
    ]
    assert isinstance(semantic(events)[-1], ModelOutputError)
    assert error.code == "model_output_error"


async def test_model_output_error_event_is_scrubbed():
    payload = {"error": {"message": f"bad {KEY}", "model_output": f"echo {KEY}", "type": "x"}}
    async with mock_client(f"data: {json.dumps(payload)}\n\n".encode()) as client:
        events, _ = await collect(client)
    (output,) = [e for e in events if isinstance(e, ModelOutputError)]
    assert KEY not in output.message and KEY not in output.raw_output


async def test_http_error_with_error_model_output():
    """Seed 002 GeneralError ``error_model_output`` (``adapter_mapping_failed``) on a 400."""
    body = json.dumps(
        {
            "error": {
                "code": "adapter_mapping_failed",
                "error_model_output": '{"name": "get_weather", "arguments": {city: "Bogotá"}}',
                "message": "Failed to parse tool call from GPT OSS output",
                "param": None,
                "type": "server_error",
            },
            "request_id": "494e734dc82b4b37bd914238c79c3e6c",
        }
    ).encode()
    async with mock_client(body, status=400, headers={"content-type": "application/json"}) as c:
        events, error = await collect(c)
    assert events == [
        ModelOutputError(
            "Failed to parse tool call from GPT OSS output",
            '{"name": "get_weather", "arguments": {city: "Bogotá"}}',
        )
    ]
    assert (error.status, error.code) == (400, "adapter_mapping_failed")
    assert error.request_id == "494e734dc82b4b37bd914238c79c3e6c"


def test_every_adapter_is_registered():
    assert set(ADAPTERS) == {"openai_chat", "anthropic_messages", "openai_responses"}
    for name, module in ADAPTERS.items():
        assert module.API_STYLE == name
        assert module.CONTENT_TYPES <= {"image", "audio"}
        for attr in ("build_request", "stream", "list_models"):
            assert callable(getattr(module, attr)), (name, attr)
