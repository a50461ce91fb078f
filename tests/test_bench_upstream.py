"""The lean bench upstream (``bench/upstream.py``): model ids, answers, the bytes it writes in
each API style (validated against seed 002's stream event schemas), and the server itself
(in-process on a free port, zero-delay schedules: no daphne, no timing asserts)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from bench.client import RawDirect, SSEText, Turn
from bench.upstream import (
    MD_WORDS,
    STYLES,
    Spec,
    answer_tokens,
    encode,
    group_events,
    model_name,
    models_body,
    parse_model,
    request_tag,
    serve,
)
from tests.test_simulator import needs_seed, validate

# ---- model ids and answers ------------------------------------------------------------------


def test_model_id_round_trips() -> None:
    spec = Spec("bench-md", ttft_ms=100, interval_ms=5, tokens=10_000, tokens_per_event=2)
    assert model_name(spec) == "bench-md?ttft_ms=100&interval_ms=5&tokens=10000&tokens_per_event=2"
    assert parse_model(model_name(spec)) == spec
    assert parse_model("bench") == Spec()


@pytest.mark.parametrize(
    "model",
    ["sim-fast", "bench?speed=3", "bench?tokens=0", "bench?tokens=100001", "bench?ttft_ms=-1", "bench?tokens=x"],
)
def test_bad_model_ids_are_refused(model: str) -> None:
    with pytest.raises(ValueError):
        parse_model(model)


def test_schedule_is_absolute() -> None:
    spec = Spec(ttft_ms=100, interval_ms=20, tokens=128, tokens_per_event=3)
    assert spec.events == 43
    assert spec.due_s(0) == pytest.approx(0.1)
    assert spec.due_s(42) == pytest.approx(0.94)


@pytest.mark.parametrize("base", ["bench", "bench-md"])
@pytest.mark.parametrize("n", [1, 2, 16, 128, 10_000])
def test_answers_have_exactly_the_asked_tokens(base: str, n: int) -> None:
    toks = answer_tokens(Spec(base, tokens=n), "0123abcd")
    assert len(toks) == n
    assert toks[0] == "ref-0123abcd: "


def test_markdown_answer_has_every_block_kind_and_closes_them() -> None:
    text = "".join(answer_tokens(Spec("bench-md", tokens=10_000), "0123abcd"))
    assert text.count("```") % 2 == 0 and text.count("```python\n") >= 4
    assert "|---|---|---:|\n" in text
    assert "\n- " in text
    assert "\n\n" in text
    assert text.endswith("vexend.")
    words = {w.strip(".:|-_()") for w in text.replace("_", " ").split()}
    answer_words = {w for w in words if w.isalpha() and len(w) > 6}
    assert answer_words and all("vex" in w for w in answer_words - {"python"})
    assert all("vex" in w for w in MD_WORDS)


def test_words_answer_exercises_escaping_and_code_points() -> None:
    text = "".join(answer_tokens(Spec(tokens=128), "0123abcd"))
    for piece in ("<", "&", "café", "日本語", "🙂", "\n\n"):
        assert piece in text


def test_tokens_group_into_events() -> None:
    assert group_events(["a", "b", "c", "d", "e"], 2) == ["ab", "cd", "e"]
    assert group_events(["a", "b"], 1) == ["a", "b"]


def test_tag_is_the_last_user_message_in_every_style() -> None:
    text = "Benchmark relay stream 3 turn 1: tell me something."
    history = [{"role": "user", "content": "first"}, {"role": "assistant", "content": "x"}]
    tags = {
        request_tag("openai_chat", {"messages": [*history, {"role": "user", "content": text}]}),
        request_tag("anthropic_messages", {"messages": [*history, {"role": "user", "content": [{"type": "text", "text": text}]}]}),
        request_tag("openai_responses", {"input": [*history, {"role": "user", "content": [{"type": "input_text", "text": text}]}]}),
        request_tag("openai_responses", {"input": text}),
    }
    assert len(tags) == 1
    other = request_tag("openai_chat", {"messages": [{"role": "user", "content": text + " "}]})
    assert other not in tags and len(other) == 8


# ---- bytes on the wire ------------------------------------------------------------------------


def dechunk(body: bytes) -> bytes:
    """The payload of a chunked body (asserts the framing and the last chunk)."""
    out, rest = b"", body
    while True:
        size_line, rest = rest.split(b"\r\n", 1)
        size = int(size_line, 16)
        if size == 0:
            assert rest == b"\r\n"
            return out
        out += rest[:size]
        assert rest[size : size + 2] == b"\r\n"
        rest = rest[size + 2 :]


def sse(payload: bytes) -> list[tuple[str | None, str]]:
    """(event name, data) per SSE event (LF line ends, blank-line separated)."""
    events = []
    for block in payload.decode().split("\n\n"):
        if not block:
            continue
        name, data = None, []
        for line in block.split("\n"):
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data.append(line[6:])
        events.append((name, "\n".join(data)))
    return events


MESSAGES_SCHEMAS = {
    "message_start": "MessageStartEvent",
    "content_block_start": "MessageContentBlockStartEvent",
    "ping": "MessagePingEvent",
    "content_block_delta": "MessageContentBlockDeltaEvent",
    "content_block_stop": "MessageContentBlockStopEvent",
    "message_delta": "MessageDeltaEvent",
    "message_stop": "MessageStopEvent",
}
RESPONSES_SCHEMAS = {
    "response.created": "ResponseCreatedEvent",
    "response.in_progress": "ResponseInProgressEvent",
    "response.output_item.added": "ResponseOutputItemAddedEvent",
    "response.content_part.added": "ResponseContentPartAddedEvent",
    "response.output_text.delta": "ResponseOutputTextDeltaEvent",
    "response.output_text.done": "ResponseOutputTextDoneEvent",
    "response.content_part.done": "ResponseContentPartDoneEvent",
    "response.output_item.done": "ResponseOutputItemDoneEvent",
    "response.completed": "ResponseCompletedEvent",
}


def stream_text(style: str, events: list[tuple[str | None, str]]) -> str:
    """The answer text an SSE stream of ``style`` carries (independent of bench.client)."""
    out = []
    for _, data in events:
        if data == "[DONE]":
            continue
        obj = json.loads(data)
        if style == "openai_chat":
            out += [c["delta"].get("content", "") for c in obj["choices"]]
        elif obj.get("type") == "content_block_delta":
            out.append(obj["delta"]["text"])
        elif obj.get("type") == "response.output_text.delta":
            out.append(obj["delta"])
    return "".join(out)


@needs_seed
@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("per_event", [1, 3])
def test_stream_validates_against_seed_002(style: str, per_event: int) -> None:
    spec = Spec("bench-md", ttft_ms=0, interval_ms=0, tokens=40, tokens_per_event=per_event)
    model = model_name(spec)
    enc = encode(style, model, "0123abcd", prompt_tokens=12)
    events = sse(dechunk(enc.body()))
    assert len(enc.deltas) == spec.events == -(-40 // per_event)
    expected = "".join(answer_tokens(spec, "0123abcd"))
    assert stream_text(style, events) == expected
    if style == "openai_chat":
        assert events[-1] == (None, "[DONE]")
        chunks = [json.loads(d) for _, d in events[:-1]]
        for c in chunks:
            validate(c, "ChatCompletionStreamResponse")
        assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
        assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
        assert chunks[-1]["choices"] == []
        assert chunks[-1]["usage"] == {"prompt_tokens": 12, "completion_tokens": 40, "total_tokens": 52}
        assert len(chunks) == spec.events + 3
    elif style == "anthropic_messages":
        names = [n for n, _ in events]
        assert names[:3] == ["message_start", "content_block_start", "ping"]
        assert names[-3:] == ["content_block_stop", "message_delta", "message_stop"]
        assert names.count("content_block_delta") == spec.events
        for name, data in events:
            obj = json.loads(data)
            assert obj["type"] == name
            validate(obj, MESSAGES_SCHEMAS[name])
        final = json.loads(events[-2][1])
        assert final["usage"]["output_tokens"] == 40
        assert final["delta"]["stop_reason"] == "end_turn"
    else:
        objs = [json.loads(d) for _, d in events]
        assert [o["sequence_number"] for o in objs] == list(range(len(objs)))
        for name, obj in zip([n for n, _ in events], objs, strict=True):
            assert obj["type"] == name
            validate(obj, RESPONSES_SCHEMAS[name])
        done = objs[-1]["response"]
        assert done["status"] == "completed"
        assert done["output"][0]["content"][0]["text"] == expected
        assert done["usage"]["output_tokens"] == 40 and done["usage"]["input_tokens"] == 12


def test_first_delta_bytes_in_each_style() -> None:
    model = "bench?ttft_ms=0&interval_ms=0&tokens=2&tokens_per_event=1"
    chat = encode("openai_chat", model, "0123abcd").deltas[0]
    body = (
        '{"id":"chatcmpl-bench","object":"chat.completion.chunk","created":%d,"model":"%s",'
        '"system_fingerprint":"bench","choices":[{"index":0,"delta":{"content":"ref-0123abcd: "},'
        '"finish_reason":null,"logprobs":null}]}'
    )
    created = json.loads(dechunk(chat + b"0\r\n\r\n")[6:])["created"]
    payload = b"data: " + (body % (created, model)).encode() + b"\n\n"
    assert chat == b"%x\r\n%s\r\n" % (len(payload), payload)
    msg = encode("anthropic_messages", model, "0123abcd").deltas[0]
    payload = (
        b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
        b'"delta":{"type":"text_delta","text":"ref-0123abcd: "}}\n\n'
    )
    assert msg == b"%x\r\n%s\r\n" % (len(payload), payload)
    resp = encode("openai_responses", model, "0123abcd").deltas[1]
    payload = (
        b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta",'
        b'"sequence_number":5,"item_id":"msg_bench_item","output_index":0,"content_index":0,'
        b'"delta":"The ","annotations":[],"logprobs":[]}\n\n'
    )
    assert resp == b"%x\r\n%s\r\n" % (len(payload), payload)


def test_only_the_first_event_differs_between_requests() -> None:
    model = "bench?ttft_ms=0&interval_ms=0&tokens=20&tokens_per_event=1"
    a = encode("openai_chat", model, "aaaaaaaa")
    b = encode("openai_chat", model, "bbbbbbbb")
    assert a.deltas[0] != b.deltas[0]
    assert a.deltas[1:] == b.deltas[1:]
    assert a.deltas[1] is b.deltas[1]  # encoded once, reused


@needs_seed
def test_models_list_is_seed_shaped() -> None:
    body = models_body()
    validate(body, "ModelMetadataList")
    assert [m["id"] for m in body["data"]] == ["bench", "bench-md"]


@pytest.mark.parametrize("style", STYLES)
def test_client_parser_reads_what_the_upstream_writes(style: str) -> None:
    spec = Spec(tokens=50, tokens_per_event=4)
    body = dechunk(encode(style, model_name(spec), "0123abcd").body())
    parser = SSEText(style)
    pieces = []
    for i in range(0, len(body), 7):  # arbitrary splits
        pieces += parser.feed(body[i : i + 7])
    assert "".join(pieces) == "".join(answer_tokens(spec, "0123abcd"))
    assert len(pieces) == spec.events


# ---- the server -------------------------------------------------------------------------------


async def _get(port: int, path: str) -> tuple[int, Any]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    head = await reader.readuntil(b"\r\n\r\n")
    length = int(head.decode().lower().split("content-length: ")[1].split("\r\n")[0])
    body = await reader.readexactly(length)
    writer.close()
    return int(head.split(b" ")[1]), json.loads(body)


@pytest.mark.parametrize("style", STYLES)
async def test_server_streams_each_style_on_a_keep_alive_connection(style: str) -> None:
    server = await serve("127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        plan = {"upstream_url": f"http://127.0.0.1:{port}/v1", "style": style}
        client = RawDirect(plan)
        spec = Spec(ttft_ms=0, interval_ms=0, tokens=30, tokens_per_event=2)
        texts = []
        for j in range(2):  # the same connection twice
            t = Turn(0, j)
            await asyncio.wait_for(client.turn(0, model_name(spec), t, [], f"question {j}"), 10)
            assert t.status == "complete"
            texts.append("".join(t.text))
            assert len(t.events) == spec.events
        assert len(client.conns) == 1
        tag = request_tag(style, {"messages": [{"role": "user", "content": "question 1"}], "input": "question 1"})
        assert texts[1] == "".join(answer_tokens(spec, tag))
        assert texts[0] != texts[1]
        status, stats = await _get(port, "/_stats")
        assert status == 200
        assert stats["events"] == 2 * spec.events and stats["requests"] == 2 and stats["active"] == 0
        assert (await _get(port, "/v1/models"))[1]["data"][0]["id"] == "bench"
        await client.close()
    finally:
        server.close()


async def test_server_refuses_bad_requests() -> None:
    server = await serve("127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        status, body = await _get(port, "/v1/nothing")
        assert status == 404
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        raw = json.dumps({"model": "sim-fast", "messages": []}).encode()
        writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: %d\r\n\r\n%s" % (len(raw), raw))
        head = await reader.readuntil(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 400 ")
        length = int(head.decode().lower().split("content-length: ")[1].split("\r\n")[0])
        assert b"unknown model 'sim-fast'" in await reader.readexactly(length)
        writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 999999999\r\n\r\n")
        head = await reader.readuntil(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 413 ")
        writer.close()
    finally:
        server.close()
