"""Tests of the built-in upstream simulator (``chat.simulator``), without Django or a database.

Most tests drive the ASGI app directly with a small in-test ASGI harness (:func:`call`), which
sees every write with its time and can disconnect mid-response (httpx's ``ASGITransport``
buffers the whole response, so it cannot test streaming or disconnects). One module-scoped
fixture runs the standalone server (``python -m chat.simulator``, daphne) for the over-the-wire
tests. Bodies and chunks are validated against seed 002's OpenAPI component schemas.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import httpx_sse
import jsonschema
import pytest

from chat.simulator import (
    MODELS,
    KnobError,
    Knobs,
    answer_text,
    create_app,
    key_fingerprint,
    parse_knobs,
    reasoning_text,
    simulator_asgi_app,
)
from chat.simulator.text import ECHO_MAX_WORDS, count_prompt_tokens

REPO = Path(__file__).resolve().parents[1]
# A copy of ../shared/seeds lives in tests/fixtures/seeds so a bare clone runs every test.
SEEDS_DIR = Path(os.environ.get("PLAYGROUND_SEEDS_DIR", REPO / "tests" / "fixtures" / "seeds"))

# ---- seed 002 schemas -------------------------------------------------------------------


def _load_seed_002() -> dict[str, Any] | None:
    matches = sorted(SEEDS_DIR.glob("002_*.txt"))
    if not matches:
        return None
    return json.loads(matches[0].read_text())


SEED_002 = _load_seed_002()
needs_seed = pytest.mark.skipif(SEED_002 is None, reason=f"seed 002 not found in {SEEDS_DIR}")


def _nullable_to_json_schema(node: Any) -> Any:
    """Seed 002 says ``openapi: 3.1`` but marks nulls with OpenAPI 3.0's ``nullable: true``,
    which JSON Schema 2020-12 ignores (so ``finish_reason: null``, ``logprobs: null``,
    ``code: null`` would fail although the seed's own examples use them). Turn each
    ``nullable: true`` into an explicit null alternative (also for the ``allOf: [$ref]`` +
    ``nullable`` pattern of the ``/messages`` schemas, e.g. ``Message.stop_reason``)."""
    if isinstance(node, list):
        return [_nullable_to_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _nullable_to_json_schema(value) for key, value in node.items()}
    if out.pop("nullable", False) is True:
        if "enum" in out and None not in out["enum"]:
            out["enum"] = [*out["enum"], None]
        if isinstance(out.get("type"), str):
            out["type"] = [out["type"], "null"]
        elif "$ref" in out or "anyOf" in out or "oneOf" in out:
            key = "oneOf" if "oneOf" in out else "anyOf"
            alternatives = out.pop(key, None) or [{"$ref": out.pop("$ref")}]
            out[key] = [*alternatives, {"type": "null"}]
        elif "allOf" in out:
            out["anyOf"] = [{"allOf": out.pop("allOf")}, {"type": "null"}]
    return out


_COMPONENTS = _nullable_to_json_schema(SEED_002["components"]) if SEED_002 else {}


def validate(instance: Any, schema: dict[str, Any] | str) -> None:
    """Validate against ``#/components/schemas/<name>`` (str) or a schema using such refs."""
    if isinstance(schema, str):
        schema = {"$ref": f"#/components/schemas/{schema}"}
    root = {**_nullable_to_json_schema(schema), "components": _COMPONENTS}
    jsonschema.Draft202012Validator(root).validate(instance)


def seed_chat_response(status: int, content_type: str = "application/json") -> dict[str, Any]:
    """Seed 002's ``/chat/completions`` response description for ``status``."""
    assert SEED_002 is not None
    return SEED_002["paths"]["/chat/completions"]["post"]["responses"][str(status)]["content"][
        content_type
    ]


def seed_example(status: int, name: str) -> dict[str, Any]:
    return seed_chat_response(status)["examples"][name]["value"]


# ---- ASGI harness -------------------------------------------------------------------------


@dataclass
class Result:
    """What the harness saw: status, headers, body, and every body write with its time."""

    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    writes: list[tuple[float, bytes]] = field(default_factory=list)
    started: float = 0.0
    returned: float = 0.0
    disconnected_at: float | None = None
    more_body_closed: bool = False

    @property
    def body(self) -> bytes:
        return b"".join(data for _, data in self.writes)

    def json(self) -> Any:
        return json.loads(self.body)


async def call(
    app: Any,
    method: str,
    path: str,
    body: Any = None,
    *,
    raw: bytes | None = None,
    headers: dict[str, str] | None = None,
    disconnect_after_writes: int | None = None,
    disconnect_after_s: float | None = None,
    limit_s: float = 10.0,
) -> Result:
    """Run one request through the ASGI ``app`` and collect the response."""
    result = Result(started=time.monotonic())
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else b"")
    gone = asyncio.Event()
    sent_body = False

    async def receive() -> dict[str, Any]:
        nonlocal sent_body
        if not sent_body:
            sent_body = True
            return {"type": "http.request", "body": data, "more_body": False}
        await gone.wait()
        return {"type": "http.disconnect"}

    def disconnect() -> None:
        if not gone.is_set():
            result.disconnected_at = time.monotonic()
            gone.set()

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            result.status = message["status"]
            for key, value in message.get("headers", []):
                result.headers[key.decode().lower()] = value.decode()
        elif message["type"] == "http.response.body":
            if message.get("body"):
                result.writes.append((time.monotonic(), message["body"]))
            if not message.get("more_body", False):
                result.more_body_closed = True
            writes = len(result.writes)
            if disconnect_after_writes is not None and writes >= disconnect_after_writes:
                disconnect()

    all_headers = {"content-type": "application/json", **(headers or {})}
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(k.lower().encode(), v.encode()) for k, v in all_headers.items()],
        "client": ("127.0.0.1", 12345),
        "server": ("testserver", 80),
    }
    timer = None
    if disconnect_after_s is not None:
        timer = asyncio.get_running_loop().call_later(disconnect_after_s, disconnect)
    try:
        await asyncio.wait_for(app(scope, receive, send), limit_s)
    finally:
        if timer:
            timer.cancel()
    result.returned = time.monotonic()
    return result


@dataclass
class SSE:
    """One parsed SSE event (or comment)."""

    data: str | None
    comment: str | None = None
    id: str | None = None
    retry: str | None = None

    def json(self) -> Any:
        assert self.data is not None
        return json.loads(self.data)


def parse_sse(body: bytes) -> list[SSE]:
    """Parse an SSE body per the WHATWG rules (CR, LF and CRLF end lines; only those)."""
    text = body.decode("utf-8")
    lines = re.split(r"\r\n|\r|\n", text)
    events: list[SSE] = []
    data: list[str] = []
    event_id = retry = None
    for line in lines:
        if line == "":
            if data or event_id is not None or retry is not None:
                events.append(SSE("\n".join(data) if data else None, id=event_id, retry=retry))
            data, event_id, retry = [], None, None
        elif line.startswith(":"):
            events.append(SSE(None, comment=line[1:].strip()))
        else:
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "data":
                data.append(value)
            elif name == "id":
                event_id = value
            elif name == "retry":
                retry = value
    return events


def data_events(body: bytes) -> list[SSE]:
    return [e for e in parse_sse(body) if e.data is not None]


def chunks(body: bytes) -> list[dict[str, Any]]:
    """The JSON chunks of a stream (without ``[DONE]``)."""
    return [e.json() for e in data_events(body) if e.data != "[DONE]"]


def content_of(chunk_list: list[dict[str, Any]], name: str = "content") -> str:
    return "".join(c["choices"][0]["delta"].get(name) or "" for c in chunk_list if c.get("choices"))


def chat(model: str, content: str = "Hello there", stream: bool = True, **extra: Any) -> dict:
    return {
        "model": model,
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": content},
        ],
        "stream": stream,
        **extra,
    }


FAST = "sim-fast?ttft_ms=0&delay_ms=0"
API = "/v1/chat/completions"


@pytest.fixture
def app() -> Any:
    return create_app("/v1")


# ---- text -------------------------------------------------------------------------------


def test_answer_text_is_deterministic_and_exact_length() -> None:
    first = answer_text("What is 2+2?", length_tokens=200, seed=1)
    assert first == answer_text("What is 2+2?", length_tokens=200, seed=1)
    assert len(first) == 200
    assert all(isinstance(t, str) and t for t in first)
    assert answer_text("x", length_tokens=0) == []
    assert answer_text("x", length_tokens=5) == answer_text("x", length_tokens=64)[:5]
    # the seed varies only the filler after the fixed part
    other = answer_text("What is 2+2?", length_tokens=200, seed=2)
    assert other[:50] == first[:50]
    assert other != first
    with pytest.raises(ValueError):
        answer_text("x", length_tokens=-1)


def test_default_answer_has_every_hard_case_even_with_a_long_prompt() -> None:
    prompt = "one two three four five six seven eight nine ten eleven"
    tokens = answer_text(prompt, length_tokens=Knobs().length)
    text = "".join(tokens)
    assert text.startswith("## Simulated answer\n\nYou said: “one two three")
    assert "eight…”" in text and "nine" not in text.split("”")[0]
    for needle in [
        "👩\u200d💻",
        "👍🏽",
        "你好，世界",
        "café",
        "Ångström",
        "\r\n",
        "\u2028",
        "- ",
        "```python\n",
        "a < b && c &amp; d",
        "<script>alert(1)</script>",
    ]:
        assert needle in text, needle
    # the hard splits really are split across tokens
    assert "👩" in tokens and "\u200d💻 " in tokens
    assert "\r" in tokens
    assert not any("<script>" in t for t in tokens)
    assert len(prompt.split()) > ECHO_MAX_WORDS


def test_reasoning_text() -> None:
    tokens = reasoning_text("Why is the sky blue?", length_tokens=50, seed=3)
    assert len(tokens) == 50
    assert tokens == reasoning_text("Why is the sky blue?", length_tokens=50, seed=3)
    text = "".join(tokens)
    assert text.startswith("Let me think about “Why is the sky blue?”. ")
    assert "<think>" not in text and "</think>" not in text
    assert "<" in text and "&" in text


def test_count_prompt_tokens() -> None:
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "a b c"}]},
        {"role": "assistant", "content": None},
    ]
    assert count_prompt_tokens(messages) == (4 + 2) + (4 + 3) + 4


# ---- knobs ------------------------------------------------------------------------------


def test_knob_defaults_and_model_defaults() -> None:
    knobs = parse_knobs("sim-fast")
    assert (knobs.ttft_ms, knobs.delay_ms, knobs.tokens_per_event) == (150, 20, 1)
    assert (knobs.length, knobs.usage, knobs.reasoning, knobs.fault) == (64, "last", False, ())
    assert parse_knobs("sim-reasoning").reasoning is True
    assert parse_knobs("my-reasoning-model").reasoning is True
    assert parse_knobs("sim-reasoning?reasoning=0").reasoning is False
    slow = parse_knobs("sim-slow")
    assert (slow.ttft_ms, slow.delay_ms) == (1500, 120)


def test_knobs_from_model_query_and_header_override() -> None:
    knobs = parse_knobs(
        "sim-reasoning?ttft_ms=200&delay_ms=20&tokens_per_event=3&length=64&usage=last&fault=429"
    )
    assert (knobs.ttft_ms, knobs.tokens_per_event, knobs.http_fault) == (200, 3, "429")
    over = parse_knobs("sim-fast?ttft_ms=200&length=9", "?ttft_ms=5&fault=cut,keepalive")
    assert (over.ttft_ms, over.length) == (5, 9)
    assert over.fault == ("cut", "keepalive")
    assert over.stream_fault == "cut" and over.has("keepalive")
    assert parse_knobs("sim-fast?fault=stall&fault=keepalive").fault == ("stall", "keepalive")


@pytest.mark.parametrize(
    "model,param",
    [
        ("sim-fast?ttft_ms=abc", "ttft_ms"),
        ("sim-fast?tokens_per_event=0", "tokens_per_event"),
        ("sim-fast?usage=sometimes", "usage"),
        ("sim-fast?reasoning_field=thoughts", "reasoning_field"),
        ("sim-fast?fault=418", "fault"),
        ("sim-fast?crlf=maybe", "crlf"),
        ("sim-fast?colour=blue", "colour"),
    ],
)
def test_invalid_knobs(model: str, param: str) -> None:
    with pytest.raises(KnobError) as info:
        parse_knobs(model)
    assert info.value.param == param


# ---- /models ------------------------------------------------------------------------------


@needs_seed
async def test_models_list_matches_seed_schema(app: Any) -> None:
    result = await call(app, "GET", "/v1/models")
    assert result.status == 200
    body = result.json()
    validate(body, "ModelMetadataList")
    assert [m["id"] for m in body["data"]] == ["sim-fast", "sim-reasoning", "sim-slow", "sim-text-only"]
    assert [m["id"] for m in body["data"]] == list(MODELS)
    for model in body["data"]:
        validate(model, "ModelMetadata")
        assert isinstance(model["context_length"], int)
        assert isinstance(model["max_completion_tokens"], int)
        assert set(model["pricing"]) == {"prompt", "completion"}
    one = await call(app, "GET", "/v1/models/sim-reasoning")
    validate(one.json(), "ModelMetadata")
    assert one.json()["id"] == "sim-reasoning"
    missing = await call(app, "GET", "/v1/models/nope")
    assert missing.status == 404
    validate(missing.json(), "SimpleError")
    assert result.headers["x-request-id"].startswith("sim-")


async def test_models_honour_header_faults(app: Any) -> None:
    result = await call(app, "GET", "/v1/models", headers={"X-Simulator-Options": "fault=401"})
    assert result.status == 401
    no_key = await call(app, "GET", "/v1/models", headers={"x-simulator-options": "require_key=1"})
    assert no_key.status == 401
    with_key = await call(
        app,
        "GET",
        "/v1/models",
        headers={"x-simulator-options": "require_key=1", "authorization": "Bearer k-123"},
    )
    assert with_key.status == 200


# ---- streaming --------------------------------------------------------------------------


@needs_seed
async def test_stream_shape_and_schema(app: Any) -> None:
    result = await call(app, "POST", API, chat(FAST + "&length=30"))
    assert result.status == 200
    assert result.headers["content-type"].startswith("text/event-stream")
    assert result.headers["x-request-id"] == "sim-000001"
    events = data_events(result.body)
    assert events[-1].data == "[DONE]"
    body_chunks = chunks(result.body)
    for chunk in body_chunks:
        validate(chunk, "ChatCompletionStreamResponse")
        assert chunk["object"] == "chat.completion.chunk"
        assert chunk["model"] == "sim-fast"
        assert chunk["system_fingerprint"] == "simulator"
    first, finish, usage_chunk = body_chunks[0], body_chunks[-2], body_chunks[-1]
    assert first["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert finish["choices"][0]["finish_reason"] == "stop"
    assert "usage" not in finish
    assert usage_chunk["choices"] == []
    usage = usage_chunk["usage"]
    validate(usage, "Usage")
    for middle in body_chunks[1:-2]:
        assert middle["choices"][0]["finish_reason"] is None
        assert middle["choices"][0]["logprobs"] is None
    assert len({c["id"] for c in body_chunks}) == 1
    assert content_of(body_chunks) == "".join(answer_text("Hello there", length_tokens=30))
    prompt_tokens = count_prompt_tokens(chat(FAST)["messages"])
    assert usage["prompt_tokens"] == prompt_tokens
    assert usage["completion_tokens"] == 30
    assert usage["total_tokens"] == prompt_tokens + 30
    assert usage["is_last_response"] is True
    assert usage["prompt_tokens_details"] == {"cached_tokens": 0}
    assert usage["stop_reason"] == "stop"
    assert usage["end_time"] >= usage["start_time"]
    for name in [
        "time_to_first_token",
        "completion_tokens_per_sec",
        "completion_tokens_after_first_per_sec",
        "total_latency",
    ]:
        assert isinstance(usage[name], int | float)
    assert "completion_tokens_details" not in usage  # only on reasoning


def _normalise(body: bytes) -> bytes:
    return re.sub(rb'"(created|start_time|end_time)":[0-9.e+]+', rb'"\1":0', body)


async def test_same_request_same_bytes(app: Any) -> None:
    request = chat("sim-reasoning?ttft_ms=0&delay_ms=0&tokens_per_event=2", "Same? 你好")
    one = await call(app, "POST", API, request)
    two = await call(create_app("/v1"), "POST", API, request)
    assert one.body != b""
    assert _normalise(one.body) == _normalise(two.body)
    assert one.headers["x-request-id"] == two.headers["x-request-id"] == "sim-000001"
    again = await call(app, "POST", API, request)
    assert again.headers["x-request-id"] == "sim-000002"
    assert _normalise(again.body) == _normalise(one.body)
    nonstream = {**request, "stream": False}
    a = await call(app, "POST", API, nonstream)
    b = await call(app, "POST", API, nonstream)
    assert _normalise(a.body) == _normalise(b.body)


async def test_tokens_per_event(app: Any) -> None:
    result = await call(app, "POST", API, chat(FAST + "&length=10&tokens_per_event=3"))
    token_chunks = [
        c
        for c in chunks(result.body)[1:]
        if c["choices"] and c["choices"][0]["delta"].get("content")
    ]
    tokens = answer_text("Hello there", length_tokens=10)
    expected = ["".join(tokens[i : i + 3]) for i in range(0, 10, 3)]
    assert [c["choices"][0]["delta"]["content"] for c in token_chunks] == expected
    record = app.recorder.last()
    assert [e.tokens for e in record.events if e.kind == "content"] == [3, 3, 3, 1]
    assert record.tokens_written == 10


async def test_length_and_max_tokens(app: Any) -> None:
    result = await call(app, "POST", API, chat(FAST + "&length=20", max_tokens=7))
    body_chunks = chunks(result.body)
    assert content_of(body_chunks) == "".join(answer_text("Hello there", length_tokens=7))
    assert body_chunks[-2]["choices"][0]["finish_reason"] == "length"
    assert body_chunks[-1]["usage"]["completion_tokens"] == 7
    assert body_chunks[-1]["usage"]["stop_reason"] == "length"
    # max_completion_tokens wins over max_tokens; a cap above the length changes nothing
    capped = await call(
        app, "POST", API, chat(FAST + "&length=20", max_tokens=3, max_completion_tokens=50)
    )
    assert chunks(capped.body)[-2]["choices"][0]["finish_reason"] == "stop"
    bad = await call(app, "POST", API, chat(FAST, max_tokens=0))
    assert bad.status == 400
    assert bad.json()["error"]["param"] == "max_tokens"


@needs_seed
@pytest.mark.parametrize("field_name", ["reasoning", "reasoning_content"])
async def test_reasoning_fields(app: Any, field_name: str) -> None:
    model = f"sim-reasoning?ttft_ms=0&delay_ms=0&length=12&reasoning_length=9&reasoning_field={field_name}"
    result = await call(app, "POST", API, chat(model, "Why?"))
    body_chunks = chunks(result.body)
    for chunk in body_chunks:
        validate(chunk, "ChatCompletionStreamResponse")
    assert content_of(body_chunks, field_name) == "".join(reasoning_text("Why?", length_tokens=9))
    assert content_of(body_chunks) == "".join(answer_text("Why?", length_tokens=12))
    kinds = [k for c in body_chunks[1:-2] for k in c["choices"][0]["delta"]]
    assert kinds == [field_name] * 9 + ["content"] * 12  # all reasoning first
    usage = body_chunks[-1]["usage"]
    assert usage["completion_tokens"] == 21
    assert usage["completion_tokens_details"] == {"reasoning_tokens": 9}
    other = "reasoning_content" if field_name == "reasoning" else "reasoning"
    assert content_of(body_chunks, other) == ""


async def test_reasoning_inline_think_tags_split_across_events(app: Any) -> None:
    model = "sim-reasoning?ttft_ms=0&delay_ms=0&length=6&reasoning_length=5&reasoning_field=think&tokens_per_event=50"
    result = await call(app, "POST", API, chat(model, "Why?"))
    body_chunks = chunks(result.body)
    pieces = [c["choices"][0]["delta"]["content"] for c in body_chunks[1:-2]]
    text = "".join(pieces)
    reasoning = "".join(reasoning_text("Why?", length_tokens=5))
    answer = "".join(answer_text("Why?", length_tokens=6))
    assert text == f"<think>{reasoning}</think>\n\n{answer}"
    assert not any("<think>" in p or "</think>" in p for p in pieces)
    assert all("reasoning" not in c["choices"][0]["delta"] for c in body_chunks[1:-2])
    usage = body_chunks[-1]["usage"]
    assert usage["completion_tokens_details"] == {"reasoning_tokens": 5}
    assert usage["completion_tokens"] == 5 + 6 + 5  # tags and the blank line count too


async def test_reasoning_switch_on_any_model(app: Any) -> None:
    on = await call(app, "POST", API, chat(FAST + "&reasoning=1&reasoning_length=4&length=2"))
    assert content_of(chunks(on.body), "reasoning") != ""
    off = await call(app, "POST", API, chat("sim-reasoning?ttft_ms=0&delay_ms=0&reasoning=0"))
    assert content_of(chunks(off.body), "reasoning") == ""


@needs_seed
async def test_usage_beside_and_none(app: Any) -> None:
    beside = chunks((await call(app, "POST", API, chat(FAST + "&length=4&usage=beside"))).body)
    assert beside[-1]["choices"][0]["finish_reason"] == "stop"
    validate(beside[-1]["usage"], "Usage")
    validate(beside[-1], "ChatCompletionStreamResponse")
    assert all(c["choices"] for c in beside)
    assert sum("usage" in c for c in beside) == 1
    none = chunks((await call(app, "POST", API, chat(FAST + "&length=4&usage=none"))).body)
    assert not any("usage" in c for c in none)
    assert none[-1]["choices"][0]["finish_reason"] == "stop"


async def test_ttft_and_delay_timing(app: Any) -> None:
    model = "sim-fast?ttft_ms=120&delay_ms=40&length=4"
    result = await call(app, "POST", API, chat(model))
    record = app.recorder.last()
    offsets = {e.kind: [] for e in record.events}
    for event in record.events:
        offsets[event.kind].append(event.offset_ms)
    assert offsets["role"][0] < 60  # the role chunk goes at once, not after the TTFT
    content = offsets["content"]
    # scheduled at 120 + i * 40 ms: never early, and not much late
    for i, offset in enumerate(content):
        assert 120 + i * 40 <= offset < 120 + i * 40 + 100, content
    usage = chunks(result.body)[-1]["usage"]
    assert usage["time_to_first_token"] == pytest.approx(0.12)
    assert usage["total_latency"] == pytest.approx(0.12 + 3 * 0.04)
    assert usage["completion_tokens_after_first_per_sec"] == pytest.approx(3 / 0.12)
    assert usage["completion_tokens_per_sec"] == pytest.approx(4 / 0.24)


async def test_header_options_override_model(app: Any) -> None:
    result = await call(
        app,
        "POST",
        API,
        chat("sim-fast?ttft_ms=5000&length=50"),
        headers={"X-Simulator-Options": "ttft_ms=0&delay_ms=0&length=3"},
    )
    assert result.returned - result.started < 2
    assert chunks(result.body)[-1]["usage"]["completion_tokens"] == 3
    assert app.recorder.last().knobs["ttft_ms"] == 0


# ---- errors -----------------------------------------------------------------------------


def _without_request_id(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k != "request_id"}


@needs_seed
@pytest.mark.parametrize(
    "body,raw,status,example",
    [
        (None, b"{not json", 400, "invalid_json"),
        ({"messages": [{"role": "user", "content": "x"}]}, None, 400, "missing_model"),
        ({"model": "sim-fast", "messages": []}, None, 400, "empty_messages"),
        (
            {"model": "sim-fast", "messages": [{"role": "developerrr", "content": "x"}]},
            None,
            400,
            "invalid_role",
        ),
        (
            {"model": "abc", "messages": [{"role": "user", "content": "x"}]},
            None,
            404,
            "model_not_found",
        ),
    ],
)
async def test_validation_errors_are_seed_examples(
    app: Any, body: Any, raw: bytes | None, status: int, example: str
) -> None:
    result = await call(app, "POST", API, body, raw=raw)
    assert result.status == status
    assert result.headers["content-type"] == "application/json"
    got = result.json()
    validate(got, seed_chat_response(status)["schema"])
    assert _without_request_id(got) == _without_request_id(seed_example(status, example))
    assert got["request_id"] == result.headers["x-request-id"]
    record = app.recorder.last()
    assert record.status == status and record.outcome == "error"


@needs_seed
async def test_null_user_content_and_missing_key(app: Any) -> None:
    messages = [{"role": "system", "content": "s"}] * 5 + [{"role": "user", "content": None}]
    result = await call(app, "POST", API, {"model": "sim-fast", "messages": messages})
    assert _without_request_id(result.json()) == _without_request_id(
        seed_example(400, "null_content")
    )
    no_key = await call(app, "POST", API, chat(FAST + "&require_key=1"))
    assert no_key.status == 401
    assert _without_request_id(no_key.json()) == _without_request_id(
        seed_example(401, "missing_api_key")
    )
    keyed = await call(
        app,
        "POST",
        API,
        chat(FAST + "&require_key=1&length=1"),
        headers={"Authorization": "Bearer k"},
    )
    assert keyed.status == 200


async def test_invalid_knob_is_a_400(app: Any) -> None:
    result = await call(app, "POST", API, chat("sim-fast?ttft_ms=-5"))
    assert result.status == 400
    error = result.json()["error"]
    assert error["param"] == "ttft_ms" and error["code"] == "invalid_value"
    assert "ttft_ms" in error["message"]


@needs_seed
@pytest.mark.parametrize(
    "fault,status,content_type,schema",
    [
        ("400", 400, "application/json", "seed"),
        ("401", 401, "application/json", "seed"),
        ("402", 402, "application/json", "GeneralError"),
        ("404", 404, "application/json", "seed"),
        ("408", 408, "application/json", "seed"),
        ("410", 410, "application/json", "seed"),
        ("413", 413, "text/html", None),
        ("429", 429, "application/json", "seed"),
        ("500", 500, "text/plain", "seed"),
        ("502", 502, "text/plain", None),
        ("503", 503, "text/plain", "seed"),
    ],
)
async def test_http_faults(
    app: Any, fault: str, status: int, content_type: str, schema: str | None
) -> None:
    for stream in (True, False):
        result = await call(app, "POST", API, chat(f"sim-fast?fault={fault}", stream=stream))
        assert result.status == status
        assert result.headers["content-type"] == content_type
        assert result.headers["x-request-id"].startswith("sim-")
        if content_type == "application/json":
            body = result.json()
            validate(body, seed_chat_response(status)["schema"] if schema == "seed" else schema)
        elif content_type == "text/plain" and schema == "seed":
            validate(result.body.decode(), seed_chat_response(status, "text/plain")["schema"])
    if fault == "401":
        assert _without_request_id(body) == _without_request_id(
            seed_example(401, "invalid_api_key")
        )
    if fault == "404":
        assert body["error"]["code"] == "model_not_found"
        assert "`sim-fast`" in body["error"]["message"]
    if fault == "402":
        assert body == {
            "error": {
                "code": "insufficient_credits",
                "message": "Insufficient credits. Please add credits to continue.",
            }
        }
    if fault == "429":
        assert result.headers["retry-after"] == "7"
        assert body["request_id"] == result.headers["x-request-id"]
    if fault == "503":
        assert result.body == b"Service Temporarily Unavailable"
    if fault == "502":
        assert result.body == b""
    if fault == "413":
        assert b"<html>" in result.body


async def test_retry_after_knob(app: Any) -> None:
    result = await call(app, "POST", API, chat("sim-fast?fault=429&retry_after=30"))
    assert result.headers["retry-after"] == "30"


async def test_echo_key_fault_and_recorder_never_stores_the_key(app: Any) -> None:
    key = "sk-sim-SECRET-0123456789"
    result = await call(
        app,
        "POST",
        API,
        chat("sim-fast?fault=echo_key", content=f"my key is {key}"),
        headers={"Authorization": f"Bearer {key}", "X-Extra": f"also {key}"},
    )
    assert result.status == 401
    assert key in result.json()["error"]["message"]
    assert result.json()["error"]["code"] == "invalid_api_key"
    record = app.recorder.last()
    assert record.auth_present is True
    assert record.auth_fingerprint == key_fingerprint(key)
    assert record.key_in_body and record.key_in_other_headers
    assert record.headers["authorization"] == "[redacted]"
    dumped = json.dumps(app.recorder.to_list(), ensure_ascii=False)
    assert key not in dumped  # not even the echo in the recorded response body
    assert "Incorrect API key provided: [key]." in record.events[-1].data
    assert record.body["messages"][-1]["content"] == "my key is [key]"


# ---- stream faults ------------------------------------------------------------------------


async def test_cut(app: Any) -> None:
    result = await call(app, "POST", API, chat(FAST + "&length=10&fault=cut&fault_after=4"))
    body_chunks = chunks(result.body)
    assert len(body_chunks) == 1 + 4  # role + 4 token chunks
    assert all(c["choices"][0]["finish_reason"] is None for c in body_chunks)
    assert b"[DONE]" not in result.body
    assert result.more_body_closed
    record = app.recorder.last()
    assert record.outcome == "cut" and record.tokens_written == 4


async def test_cut_after_everything_and_before_anything(app: Any) -> None:
    late = await call(app, "POST", API, chat(FAST + "&length=3&fault=cut&fault_after=99"))
    assert content_of(chunks(late.body)) == "".join(answer_text("Hello there", length_tokens=3))
    assert not any(c["choices"] and c["choices"][0]["finish_reason"] for c in chunks(late.body))
    early = await call(app, "POST", API, chat(FAST + "&fault=cut&fault_after=0"))
    assert len(chunks(early.body)) == 1


async def test_stall_times_out_without_done(app: Any) -> None:
    result = await call(
        app, "POST", API, chat(FAST + "&length=10&fault=stall&fault_after=2&stall_ms=300")
    )
    assert 0.3 <= result.returned - result.started < 2
    assert len(chunks(result.body)) == 3
    assert b"[DONE]" not in result.body
    assert app.recorder.last().outcome == "stall"


async def test_stall_ends_on_client_disconnect(app: Any) -> None:
    result = await call(
        app,
        "POST",
        API,
        chat(FAST + "&length=10&fault=stall&fault_after=2"),
        disconnect_after_s=0.3,
        limit_s=5,
    )
    assert result.disconnected_at is not None
    assert result.returned - result.disconnected_at < 0.5
    record = app.recorder.last()
    assert record.outcome == "stall"
    assert record.disconnected and record.disconnected_at is not None
    assert record.tokens_written == 2 and record.tokens_after_disconnect == 0


@needs_seed
async def test_error_chunk(app: Any) -> None:
    result = await call(app, "POST", API, chat(FAST + "&length=10&fault=error_chunk&fault_after=3"))
    events = data_events(result.body)
    error = events[-1].json()
    validate(error, "GeneralError")
    assert error["error"]["type"] == "server_error"
    assert error["request_id"] == result.headers["x-request-id"]
    assert len(events) == 1 + 3 + 1 and b"[DONE]" not in result.body
    assert app.recorder.last().outcome == "error_chunk"
    nonstream = await call(app, "POST", API, chat(FAST + "&fault=error_chunk", stream=False))
    assert nonstream.status == 500
    validate(nonstream.json(), "GeneralError")


async def test_keepalive_comments_between_events(app: Any) -> None:
    result = await call(app, "POST", API, chat(FAST + "&length=5&fault=keepalive"))
    parsed = parse_sse(result.body)
    comments = [e for e in parsed if e.comment is not None]
    assert len(comments) == 5  # one in the TTFT wait, one between each pair of tokens
    assert {c.comment for c in comments} == {"keep-alive"}
    assert b": keep-alive\n\n" in result.body
    assert content_of(chunks(result.body)) == "".join(answer_text("Hello there", length_tokens=5))
    kinds = [e.kind for e in app.recorder.last().events]
    assert kinds[kinds.index("content") - 1] == "keepalive"


# ---- SSE framing knobs -----------------------------------------------------------------------


async def test_crlf_multiline_ids_and_no_done(app: Any) -> None:
    model = FAST + "&length=3&crlf=1&multiline=1&sse_ids=1&done=0"
    result = await call(app, "POST", API, chat(model))
    text = result.body.decode()
    assert "\r\n\r\n" in text and "\n\n" not in text.replace("\r\n\r\n", "")
    assert text.startswith("retry: 3000\r\n\r\nid: 1\r\ndata: {\r\n")
    parsed = data_events(result.body)
    assert [e.id for e in parsed] == [str(i) for i in range(1, len(parsed) + 1)]
    assert all(e.data.count("\n") > 3 for e in parsed)  # several data: lines each
    assert content_of(chunks(result.body)) == "".join(answer_text("Hello there", length_tokens=3))
    assert "[DONE]" not in text


async def test_split_utf8_and_ascii(app: Any) -> None:
    result = await call(app, "POST", API, chat(FAST + "&length=12&split_utf8=1"))
    broken = 0
    for _, data in result.writes:
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            broken += 1
    assert broken >= 2
    assert content_of(chunks(result.body)) == "".join(answer_text("Hello there", length_tokens=12))
    ascii_only = await call(app, "POST", API, chat(FAST + "&ascii=1"))
    assert all(b < 0x80 for b in ascii_only.body)
    assert "\u2028" in content_of(chunks(ascii_only.body))
    raw = await call(app, "POST", API, chat(FAST))
    assert "\u2028".encode() in raw.body  # raw UTF-8 by default, inside a data: line


# ---- non-streaming ------------------------------------------------------------------------


@needs_seed
async def test_non_streaming_response(app: Any) -> None:
    model = "sim-reasoning?ttft_ms=50&delay_ms=5&length=10&reasoning_length=4"
    result = await call(app, "POST", API, chat(model, "Hi", stream=False))
    assert result.status == 200 and result.headers["content-type"] == "application/json"
    body = result.json()
    validate(body, "ChatCompletionResponse")
    validate(body, seed_chat_response(200)["schema"])
    message = body["choices"][0]["message"]
    assert message["content"] == "".join(answer_text("Hi", length_tokens=10))
    assert message["reasoning"] == "".join(reasoning_text("Hi", length_tokens=4))
    assert body["choices"][0]["finish_reason"] == "stop"
    assert body["usage"]["completion_tokens"] == 14
    assert body["usage"]["completion_tokens_details"] == {"reasoning_tokens": 4}
    assert result.returned - result.started >= 0.05 + 13 * 0.005
    assert app.recorder.last().tokens_written == 14
    none = await call(app, "POST", API, chat(FAST + "&usage=none", stream=False))
    assert "usage" not in none.json()
    think = await call(
        app,
        "POST",
        API,
        chat("sim-reasoning?ttft_ms=0&delay_ms=0&reasoning_field=think", stream=False),
    )
    assert think.json()["choices"][0]["message"]["content"].startswith("<think>Let me think")
    capped = await call(app, "POST", API, chat(FAST, stream=False, max_tokens=2))
    assert capped.json()["choices"][0]["finish_reason"] == "length"


async def test_non_streaming_cut_sends_half_a_body(app: Any) -> None:
    result = await call(app, "POST", API, chat(FAST + "&fault=cut", stream=False))
    assert result.status == 200
    with pytest.raises(ValueError):
        json.loads(result.body)


# ---- disconnects and the recorder ------------------------------------------------------------


async def test_disconnect_mid_stream_is_recorded_and_stops_generation(app: Any) -> None:
    model = "sim-fast?ttft_ms=0&delay_ms=1000&length=100"
    result = await call(app, "POST", API, chat(model), disconnect_after_writes=2)
    assert result.disconnected_at is not None
    assert result.returned - result.disconnected_at < 0.5  # not waiting for the next token
    assert not result.more_body_closed
    record = app.recorder.last()
    assert record.disconnected and record.outcome == "disconnected"
    assert record.disconnected_at is not None and record.disconnected_at >= record.started_at
    assert record.tokens_written == 1  # 2 writes: the role chunk and 1 token
    assert record.tokens_after_disconnect == 0
    assert not any(e.after_disconnect for e in record.events)


async def test_recorder_fields(app: Any) -> None:
    await call(
        app,
        "POST",
        API,
        chat(FAST + "&length=2"),
        headers={"Authorization": "Bearer sk-abc", "X-Simulator-Options": "length=1"},
    )
    record = app.recorder.requests[-1]
    assert record is app.recorder.last()
    assert (record.method, record.path, record.status, record.stream) == ("POST", API, 200, True)
    assert record.model == "sim-fast"
    assert record.knobs["length"] == 1
    assert record.auth_present and record.auth_fingerprint == key_fingerprint("sk-abc")
    assert "sk-abc" not in json.dumps(record.to_dict())
    assert record.headers["x-simulator-options"] == "length=1"
    assert record.body["messages"][1]["content"] == "Hello there"
    assert record.event_kinds() == ["headers", "role", "content", "finish", "usage", "done", "end"]
    assert record.finished and record.outcome == "complete" and not record.disconnected
    assert all(e.t >= record.started_at for e in record.events)
    await call(app, "GET", "/v1/models")
    no_auth = app.recorder.last()
    assert no_auth.auth_present is False and no_auth.auth_fingerprint is None
    waited = await app.recorder.wait_for(lambda r: r.path == API)
    assert waited is record


async def test_control_endpoints_standalone_and_in_process() -> None:
    app = create_app("/v1")
    await call(app, "POST", API, chat(FAST + "&length=1"), headers={"Authorization": "Bearer sk-z"})
    listed = await call(app, "GET", "/_simulator/requests")
    assert listed.status == 200
    items = listed.json()
    assert len(items) == 1 and items[0]["path"] == API and items[0]["auth_present"] is True
    assert "sk-z" not in listed.body.decode()
    assert len(app.recorder.requests) == 1  # control calls are not recorded
    reset = await call(app, "POST", "/_simulator/reset")
    assert reset.json() == {"ok": True} and app.recorder.requests == []
    knobs = await call(app, "GET", "/_simulator/knobs")
    assert "ttft_ms" in knobs.json()

    assert simulator_asgi_app() is simulator_asgi_app()  # one per process
    inproc = create_app("/simulator/v1", control=True)  # the in-process mount's layout
    models = await call(inproc, "GET", "/simulator/v1/models")
    assert models.status == 200
    listed = await call(inproc, "GET", "/simulator/_simulator/requests")
    assert any(item["path"] == "/simulator/v1/models" for item in listed.json())
    elsewhere = await call(inproc, "GET", "/simulator/v2/models")
    assert elsewhere.status == 404 and elsewhere.json() == {"error": "Not found"}

    hidden = create_app("/v1", control=False)
    assert (await call(hidden, "GET", "/_simulator/requests")).status == 404


async def test_unknown_route_and_method(app: Any) -> None:
    missing = await call(app, "POST", "/v1/rerank", {"model": "x"})  # /v1/embeddings is served since issue 14
    assert missing.status == 404 and missing.json() == {"error": "Not found"}
    wrong = await call(app, "GET", API)
    assert wrong.status == 405
    assert wrong.headers["x-request-id"].startswith("sim-")


async def test_lifespan() -> None:
    app = create_app()
    messages = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return messages.pop(0)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app({"type": "lifespan"}, receive, send)
    assert [m["type"] for m in sent] == ["lifespan.startup.complete", "lifespan.shutdown.complete"]


def test_management_command_arguments() -> None:
    from chat.management.commands.simulator import Command

    parser = Command().create_parser("manage.py", "simulator")
    options = parser.parse_args(["--host", "127.0.0.1", "--port", "8100"])
    assert (options.host, options.port, options.prefix) == ("127.0.0.1", 8100, "/v1")


# ---- over the wire (daphne) -----------------------------------------------------------------


@pytest.fixture(scope="module")
def server_url() -> Any:
    """Run ``python -m chat.simulator --port 0`` (daphne) and yield its base URL (``…/v1``)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "chat.simulator", "--host", "127.0.0.1", "--port", "0"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    found: list[str] = []
    ready = threading.Event()

    def reader() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            match = re.search(r"listening on (http://\S+)", line)
            if match and not found:
                found.append(match.group(1))
                ready.set()
        ready.set()

    threading.Thread(target=reader, daemon=True).start()
    try:
        if not ready.wait(30) or not found:
            pytest.fail("the standalone simulator did not start")
        yield found[0]
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def test_real_server_streams_incrementally(server_url: str) -> None:
    model = "sim-reasoning?ttft_ms=100&delay_ms=25&length=12&reasoning_length=4&split_utf8=1"
    body = chat(model, "Hello wire")
    arrivals: list[float] = []
    events = []
    async with httpx.AsyncClient(timeout=10) as client:
        started = time.monotonic()
        async with httpx_sse.aconnect_sse(
            client,
            "POST",
            f"{server_url}/chat/completions",
            json=body,
            headers={"Authorization": "Bearer sk-wire-key"},
        ) as source:
            assert source.response.headers["x-request-id"].startswith("sim-")
            async for sse in source.aiter_sse():
                arrivals.append(time.monotonic() - started)
                events.append(sse.data)
    assert events[-1] == "[DONE]"
    parsed = [json.loads(e) for e in events[:-1]]
    assert content_of(parsed) == "".join(answer_text("Hello wire", length_tokens=12))
    assert content_of(parsed, "reasoning") == "".join(reasoning_text("Hello wire", length_tokens=4))
    # tokens arrive spread over time (not buffered): never before their schedule (TTFT 100 ms,
    # then one every 25 ms: the 16th at 475 ms), and the first well before the last
    first_token, last_token = arrivals[1], arrivals[-4]
    assert first_token >= 0.1
    assert last_token >= 0.1 + 15 * 0.025
    assert last_token - first_token >= 0.2


async def test_real_server_records_disconnect(server_url: str) -> None:
    control = server_url.rsplit("/", 1)[0] + "/_simulator"
    async with httpx.AsyncClient(timeout=10) as client:
        await client.post(f"{control}/reset")
        body = chat("sim-fast?ttft_ms=0&delay_ms=20&length=500", "stop me")
        received = 0
        async with client.stream("POST", f"{server_url}/chat/completions", json=body) as response:
            async for chunk in response.aiter_bytes():
                received += chunk.count(b"data: ")
                if received >= 5:
                    break
        closed_at = time.monotonic()
        record = None
        while time.monotonic() - closed_at < 3:
            items = (await client.get(f"{control}/requests")).json()
            record = next((r for r in items if r["path"].endswith("/chat/completions")), None)
            if record and record["finished"]:
                break
            await asyncio.sleep(0.05)
    assert record is not None and record["finished"]
    assert record["disconnected"] is True and record["outcome"] == "disconnected"
    assert record["tokens_after_disconnect"] == 0
    assert record["tokens_written"] < 100
    assert record["disconnected_at"] >= record["started_at"]
    assert record["body"] == body


async def test_real_server_models_and_errors(server_url: str) -> None:
    async with httpx.AsyncClient(timeout=10) as client:
        models = await client.get(f"{server_url}/models")
        assert models.status_code == 200 and models.json()["object"] == "list"
        limited = await client.post(
            f"{server_url}/chat/completions",
            json=chat("sim-fast"),
            headers={"X-Simulator-Options": "fault=429"},
        )
        assert limited.status_code == 429 and limited.headers["retry-after"] == "7"
        assert limited.json()["request_id"] == limited.headers["x-request-id"]


@needs_seed
def test_schema_helper_accepts_seed_examples_and_rejects_bad_chunks() -> None:
    """The validator is strict enough to mean something, and lenient only about nulls."""
    assert SEED_002 is not None
    schemas = SEED_002["components"]["schemas"]
    for name in ["ChatCompletionStreamResponse", "ChatCompletionResponse", "Usage"]:
        for example in schemas[name]["examples"]:
            validate(example, name)
    for example in seed_chat_response(400)["examples"].values():
        validate(example["value"], seed_chat_response(400)["schema"])
    good = schemas["ChatCompletionStreamResponse"]["examples"][0]
    with pytest.raises(jsonschema.ValidationError):
        validate({**good, "object": "chat.completion"}, "ChatCompletionStreamResponse")
    bad_choice = {**good["choices"][0], "finish_reason": "done"}
    with pytest.raises(jsonschema.ValidationError):
        validate({**good, "choices": [bad_choice]}, "ChatCompletionStreamResponse")
    with pytest.raises(jsonschema.ValidationError):
        validate({"data": [{"id": "x", "context_length": "8k"}]}, "ModelMetadataList")
    # without the nullable rewrite the seed's own first example would not validate
    raw_root = {
        "$ref": "#/components/schemas/ChatCompletionStreamResponse",
        "components": SEED_002["components"],
    }
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(raw_root).validate(good)


async def test_recorder_caps_events_per_request(app: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from chat.simulator import recorder

    monkeypatch.setattr(recorder, "MAX_EVENTS", 5)
    await call(app, "POST", API, chat(FAST + "&length=20"))
    record = app.recorder.last()
    assert len(record.events) == 5 and record.events_dropped > 0
    assert record.tokens_written == 20  # still counted
