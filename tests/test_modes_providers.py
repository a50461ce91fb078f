"""Adapters of the non-chat modes (``chat.providers.openai_completions``,
``chat.providers.openai_embeddings``) against the simulator (``chat.simulator.legacy``) through
an in-process ASGI transport, and against recorded bodies of every response shape of seed 002
(float and base64 embeddings, streamed and whole completions, error examples)."""

from __future__ import annotations

import base64
import json
import math
import struct

import httpx
import pytest

from chat.providers import openai_completions, openai_embeddings
from chat.providers.base import (
    EndpointConfig,
    Finish,
    LogprobsDelta,
    ProviderError,
    TextDelta,
    Usage,
)
from chat.simulator import create_app
from chat.simulator.legacy import EMBED_DIM, embed_text
from tests.test_simulator import validate

CONFIG = EndpointConfig(base_url="http://sim.test/v1", api_key="sk-test-1234", allow_private=True)


def sim_client() -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app("/v1")))


def fixed_client(body: bytes, status: int = 200, content_type: str = "application/json") -> httpx.AsyncClient:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, headers={"content-type": content_type}, content=body)
    return httpx.AsyncClient(transport=httpx.MockTransport(handler))


async def run_completion(client, request):
    events, error = [], None
    try:
        async for ev in openai_completions.stream(client, CONFIG, request):
            events.append(ev)
    except ProviderError as exc:
        error = exc
    return events, error


def text(events) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


async def test_completion_streams_text_logprobs_usage_from_simulator():
    req = openai_completions.CompletionRequest(model="sim-fast?ttft_ms=0&delay_ms=0", prompt="Once upon a time",
                                               params={"max_tokens": 12}, logprobs=2)
    async with sim_client() as client:
        events, error = await run_completion(client, req)
    assert error is None
    answer = text(events)
    assert answer.strip()
    lps = [t for e in events if isinstance(e, LogprobsDelta) for t in e.tokens]
    assert "".join(t.token for t in lps) == answer
    assert all(len(t.top) == 2 and t.top[0][0] == t.token for t in lps)
    finishes = [e.reason for e in events if isinstance(e, Finish)]
    assert finishes == ["length"]
    usage = [e for e in events if isinstance(e, Usage)][-1]
    assert usage.completion_tokens == 12 and usage.prompt_tokens and usage.upstream_ttft_ms is not None


async def test_completion_is_deterministic_and_request_has_prompt_not_messages():
    req = openai_completions.CompletionRequest(model="sim-fast?ttft_ms=0&delay_ms=0", prompt="abc",
                                               params={"temperature": 0.5, "stop": ["\n\n"], "top_p": None})
    url, headers, body = openai_completions.build_request(CONFIG, req)
    assert url == "http://sim.test/v1/completions"
    assert body == {"model": req.model, "prompt": "abc", "temperature": 0.5, "stop": ["\n\n"], "stream": True,
                    "stream_options": {"include_usage": True}}
    assert headers["Authorization"] == "Bearer sk-test-1234"
    async with sim_client() as client:
        a, _ = await run_completion(client, req)
        b, _ = await run_completion(client, req)
    assert text(a) == text(b) != ""


def test_simulator_completion_chunks_match_seed_schema():
    import asyncio

    from tests.test_simulator import call, chunks
    app = create_app("/v1")
    result = asyncio.run(call(app, "POST", "/v1/completions",
                              {"model": "sim-fast?ttft_ms=0&delay_ms=0", "prompt": "Hi", "stream": True, "max_tokens": 5}))
    items = chunks(result.body)
    for item in items:
        validate({**item, "object": "chat.completion.chunk"}, "CompletionStreamResponse")
    assert items[-1]["choices"] == [] and items[-1]["usage"]["completion_tokens"] == 5
    whole = asyncio.run(call(app, "POST", "/v1/completions",
                             {"model": "sim-fast?ttft_ms=0&delay_ms=0", "prompt": "Hi", "max_tokens": 5}))
    body = json.loads(whole.body)
    validate({**body, "object": "chat.completion"}, "CompletionResponse")
    assert body["choices"][0]["text"] == "".join(c["choices"][0]["text"] for c in items if c["choices"])


async def test_completion_seed_stream_example_with_delta_content():
    """Seed 002's own CompletionStreamResponse example streams ``delta.content``."""
    chunks = [
        {"choices": [{"delta": {"role": "assistant", "content": ""}, "index": 0, "finish_reason": None}]},
        {"choices": [{"delta": {"role": "assistant", "content": "in"}, "index": 0, "finish_reason": None}]},
        {"choices": [{"delta": {"content": ""}, "index": 0, "finish_reason": "length"}]},
        {"choices": [], "usage": {"completion_tokens": 100, "prompt_tokens": 43, "total_tokens": 143,
                                  "time_to_first_token": 0.0844}},
    ]
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    async with fixed_client(body.encode(), content_type="text/event-stream") as client:
        events, error = await run_completion(client, openai_completions.CompletionRequest(model="m", prompt="p"))
    assert error is None and text(events) == "in"
    assert [e.reason for e in events if isinstance(e, Finish)] == ["length"]
    usage = [e for e in events if isinstance(e, Usage)][-1]
    assert usage.completion_tokens == 100 and round(usage.upstream_ttft_ms, 1) == 84.4


async def test_completion_legacy_and_chat_shaped_logprobs():
    legacy = openai_completions.legacy_logprobs(
        {"tokens": ["a", "b"], "token_logprobs": [-0.1, -2.0], "top_logprobs": [{"a": -0.1, "x": -3.0}, None]})
    assert [(t.token, t.logprob, t.top) for t in legacy.tokens] == [("a", -0.1, (("a", -0.1), ("x", -3.0))), ("b", -2.0, ())]
    chat = openai_completions.legacy_logprobs({"content": [{"token": "z", "logprob": -0.5, "top_logprobs": []}]})
    assert chat.tokens[0].token == "z"
    assert openai_completions.legacy_logprobs(None) is None


@pytest.mark.parametrize(("status", "payload", "code"), [
    (400, {"error": {"message": "you must provide a model parameter", "type": "invalid_request_error",
                     "param": None, "code": None}, "request_id": "a4fa849e"}, "invalid_request_error"),
    (401, {"error": {"message": "Incorrect API key provided: *****.", "type": "invalid_request_error",
                     "param": None, "code": "invalid_api_key"}}, "invalid_api_key"),
    (404, {"error": {"code": "model_not_found", "message": "The model `abc` does not exist or you do not have access to it.",
                     "param": "model", "type": "invalid_request_error"}}, "model_not_found"),
])
async def test_seed_error_examples_become_provider_errors(status, payload, code):
    async with fixed_client(json.dumps(payload).encode(), status=status) as client:
        events, error = await run_completion(client, openai_completions.CompletionRequest(model="m", prompt="p"))
        with pytest.raises(ProviderError) as info:
            await openai_embeddings.embed(client, CONFIG, openai_embeddings.EmbeddingsRequest(model="m", inputs=("a",)))
    assert error is not None and error.status == status and error.code == code
    assert info.value.status == status and info.value.code == code
    assert error.message == payload["error"]["message"]


@pytest.mark.parametrize("encoding", ["", "float", "base64"])
async def test_embeddings_from_simulator_float_and_base64(encoding):
    req = openai_embeddings.EmbeddingsRequest(model="sim-embed", inputs=("the cat sat", "a cat sat", "stock prices"),
                                              encoding_format=encoding)
    async with sim_client() as client:
        result = await openai_embeddings.embed(client, CONFIG, req)
    assert len(result.vectors) == 3 and all(len(v) == EMBED_DIM for v in result.vectors)
    assert result.vectors[0] == embed_text("the cat sat")
    assert all(abs(math.sqrt(sum(x * x for x in v)) - 1) < 1e-5 for v in result.vectors)
    cos = lambda a, b: sum(x * y for x, y in zip(a, b, strict=False))  # noqa: E731
    assert cos(result.vectors[0], result.vectors[1]) > cos(result.vectors[0], result.vectors[2])
    assert result.usage.prompt_tokens == 3 + 3 + 2 and result.model == "sim-embed"


async def test_embeddings_seed_example_and_base64_decoding():
    seed = {"data": [{"index": 1, "object": "embedding", "embedding": [0.010919672437012196, 0.0016351072117686272]},
                     {"index": 0, "object": "embedding", "embedding": [0.024864232167601585, -0.01452154759317636]}],
            "model": "E5-Mistral-7B-Instruct", "object": "list", "usage": {"prompt_tokens": 716, "total_tokens": 716}}
    validate(seed, "EmbeddingsResponse")
    async with fixed_client(json.dumps(seed).encode()) as client:
        result = await openai_embeddings.embed(client, CONFIG, openai_embeddings.EmbeddingsRequest(model="E5", inputs=("a", "b")))
    assert result.vectors[0] == [0.024864232167601585, -0.01452154759317636]  # sorted by index
    assert result.usage.prompt_tokens == 716
    packed = base64.b64encode(struct.pack("<3f", 0.5, -1.0, 2.0)).decode()
    assert openai_embeddings.decode_vector(packed) == [0.5, -1.0, 2.0]
    for bad in ("!!!", base64.b64encode(b"abc").decode(), [1, "x"], None):
        with pytest.raises(ProviderError):
            openai_embeddings.decode_vector(bad)


async def test_embeddings_count_mismatch_is_bad_response():
    body = {"data": [{"index": 0, "embedding": [1.0]}], "usage": {}}
    async with fixed_client(json.dumps(body).encode()) as client:
        with pytest.raises(ProviderError) as info:
            await openai_embeddings.embed(client, CONFIG, openai_embeddings.EmbeddingsRequest(model="m", inputs=("a", "b")))
    assert info.value.code == "bad_response"


async def test_simulator_embeddings_limits_and_errors():
    async with sim_client() as client:
        with pytest.raises(ProviderError) as missing:
            await openai_embeddings.embed(client, CONFIG, openai_embeddings.EmbeddingsRequest(model="", inputs=("a",)))
        with pytest.raises(ProviderError) as unknown:
            await openai_embeddings.embed(client, CONFIG, openai_embeddings.EmbeddingsRequest(model="abc", inputs=("a",)))
        with pytest.raises(ProviderError) as big:
            await openai_embeddings.embed(client, CONFIG, openai_embeddings.EmbeddingsRequest(
                model="sim-embed", inputs=("word " * 600,)))
    assert missing.value.status == 400 and "model parameter" in missing.value.message
    assert unknown.value.status == 404 and unknown.value.code == "model_not_found"
    assert big.value.status == 400 and big.value.code == "context_length_exceeded"


# ---- audio ------------------------------------------------------------------------------------


def make_wav(seconds: float = 5.0, rate: int = 8000) -> bytes:
    """A mono 16-bit WAV of a 440 Hz tone, made with the stdlib ``wave`` module."""
    import io
    import wave
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        frames = int(seconds * rate)
        w.writeframes(b"".join(struct.pack("<h", int(8000 * math.sin(2 * math.pi * 440 * i / rate))) for i in range(frames)))
    return buf.getvalue()


async def run_audio(client, request):
    from chat.providers import openai_audio
    events, error = [], None
    try:
        async for ev in openai_audio.stream(client, CONFIG, request):
            events.append(ev)
    except ProviderError as exc:
        error = exc
    return events, error


@pytest.mark.parametrize("fmt", ["json", "text", "verbose_json"])
@pytest.mark.parametrize("task", ["transcription", "translation"])
async def test_audio_every_response_format_from_simulator(fmt, task):
    from chat.providers.openai_audio import AudioRequest, Segments
    from chat.simulator.audio import segments_for
    wav = make_wav(5.0)
    async with sim_client() as client:
        events, error = await run_audio(client, AudioRequest(task=task, model="sim-whisper?ttft_ms=0&delay_ms=0",
                                                             audio=wav, response_format=fmt, language="en"))
    assert error is None
    duration, segments = segments_for(wav, "transcribe" if task == "transcription" else "translate")
    assert duration == 5.0 and len(segments) == 3 and segments[-1]["end"] == 5.0
    assert text(events) == " ".join(s["text"] for s in segments)
    segs = [e for e in events if isinstance(e, Segments)]
    if fmt == "verbose_json":
        assert [s["text"] for s in segs[0].items] == [s["text"] for s in segments] and segs[0].duration == 5.0
        assert segs[0].items[1]["start"] == 2.0
    else:
        assert not segs
    assert [e.reason for e in events if isinstance(e, Finish)] == ["stop"]


async def test_audio_streamed_transcription_events():
    from chat.providers.openai_audio import AudioRequest
    from chat.simulator.audio import segments_for
    wav = make_wav(3.0)
    async with sim_client() as client:
        events, error = await run_audio(client, AudioRequest(task="transcription", model="sim-whisper?ttft_ms=0&delay_ms=0",
                                                             audio=wav, stream=True))
    assert error is None
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    _, segments = segments_for(wav, "transcribe")
    assert len(deltas) == 2 and "".join(deltas) == " ".join(s["text"] for s in segments)
    usage = [e for e in events if isinstance(e, Usage)][-1]
    assert usage.completion_tokens and usage.prompt_tokens == 30


async def test_audio_seed_stream_example_and_errors():
    from chat.providers.openai_audio import AudioRequest, encode_multipart
    seed_chunks = [
        {"choices": [{"delta": {"content": "es un sonido"}, "index": 0, "finish_reason": None, "logprobs": None}],
         "created": 1737642515.3407679, "custom_id": 0, "id": "x", "model": "Whisper-Large-v3",
         "object": "chat.completion.chunk", "system_fingerprint": "fastcoe"},
        {"choices": [], "created": 1737642515.3407679, "id": "x", "model": "Whisper-Large-v3",
         "object": "chat.completion.chunk", "system_fingerprint": "fastcoe",
         "usage": {"completion_tokens": 100, "prompt_tokens": 43, "total_tokens": 143}},
    ]
    for c in seed_chunks:
        validate(c, "TranscriptionStreamResponse")
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in seed_chunks) + "data: [DONE]\n\n"
    req = AudioRequest(task="transcription", model="Whisper-Large-v3", audio=b"RIFF", stream=True)
    async with fixed_client(body.encode(), content_type="text/event-stream") as client:
        events, error = await run_audio(client, req)
    assert error is None and text(events) == "es un sonido"
    assert [e for e in events if isinstance(e, Usage)][-1].completion_tokens == 100
    validate({"text": "Es un efecto de sonido"}, "TranscriptionResponse")
    missing = {"error": {"message": "you must provide a model parameter", "type": "invalid_request_error",
                         "param": None, "code": None}, "request_id": "a4fa849e"}
    async with fixed_client(json.dumps(missing).encode(), status=400) as client:
        _, error = await run_audio(client, req)
    assert error.status == 400 and error.message == "you must provide a model parameter"
    async with fixed_client(b"Invalid request body: - missing property 'model'", status=400, content_type="text/plain") as client:
        _, error = await run_audio(client, req)
    assert error.status == 400 and "missing property 'model'" in error.message
    data, ctype = encode_multipart(AudioRequest(task="translation", model="m", audio=b"\x00\x01", language="es",
                                                temperature=0.2), boundary="b0")
    assert ctype == "multipart/form-data; boundary=b0"
    assert b'name="language"\r\n\r\nes\r\n' in data  # the input's language (seed 002's TranslationRequest example)
    assert b'name="temperature"\r\n\r\n0.2\r\n' in data and data.endswith(b"\x00\x01\r\n--b0--\r\n")
    async with sim_client() as client:
        _, error = await run_audio(client, AudioRequest(task="transcription", model="", audio=b"x"))
        _, bad_format = await run_audio(client, AudioRequest(task="transcription", model="sim-whisper", audio=b"x",
                                                             response_format="srt"))
    assert error.status == 400 and error.message == "you must provide a model parameter"
    assert bad_format.status == 400 and bad_format.code
