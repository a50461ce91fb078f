"""Smoke tests against a real llama.cpp llama-server (no Django involved).

They prove the upstream built by scripts/build-llama-server.sh speaks the three API styles
with real usage, and that the random-weight think model yields reasoning traffic.
Skipped (with the reason) when the binary or models are not built.
"""

from __future__ import annotations

import json

import httpx
import pytest

try:  # `tests` may or may not be an importable package depending on rootdir/conftest layout
    from tests.llama import llama_paths, missing_reason, start_llama_server
except ImportError:  # pragma: no cover
    from llama import llama_paths, missing_reason, start_llama_server

pytestmark = [pytest.mark.real_upstream]

TIMEOUT = httpx.Timeout(120.0, connect=10.0)

# SmolLM2-135M (Q4_1) at temperature 0 answers "The capital of France is Paris." only with a
# system prompt; without one its template injects "You are a helpful AI assistant named
# SmolLM..." and greedy decoding rambles in French ("L'Étoile, la Marseillaise, ...").
SYSTEM = "You are a helpful assistant."
PARIS = "What is the capital of France?"


@pytest.fixture(scope="module")
def paths():
    p = llama_paths()
    if p is None:
        pytest.skip(missing_reason())
    return p


@pytest.fixture(scope="module")
def smollm(paths):
    srv = start_llama_server(paths[1], alias="smollm2")
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def think(paths):
    srv = start_llama_server(paths[2], alias="think-tiny")
    yield srv
    srv.stop()


def sse_events(resp: httpx.Response) -> list[tuple[str | None, str]]:
    """(event, data) pairs of a text/event-stream response, in order."""
    events: list[tuple[str | None, str]] = []
    event, data = None, []
    for line in resp.iter_lines():
        if line == "":
            if data:
                events.append((event, "\n".join(data)))
            event, data = None, []
        elif line.startswith(":"):
            continue
        elif line.startswith("event:"):
            event = line[len("event:") :].strip()
        elif line.startswith("data:"):
            data.append(line[len("data:") :].lstrip())
    if data:
        events.append((event, "\n".join(data)))
    return events


def stream(url: str, body: dict, headers: dict | None = None) -> list[tuple[str | None, str]]:
    with httpx.Client(timeout=TIMEOUT) as client:
        with client.stream("POST", url, json=body, headers=headers or {}) as resp:
            assert resp.status_code == 200, resp.read()
            assert resp.headers["content-type"].startswith("text/event-stream")
            return sse_events(resp)


def json_payloads(events):
    return [json.loads(d) for _, d in events if d != "[DONE]"]


# --------------------------------------------------------------------------- OpenAI chat


def test_smollm2_chat_stream_paris_with_usage(smollm):
    events = stream(
        f"{smollm.base_url}/chat/completions",
        {
            "model": "smollm2",
            "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": PARIS}],
            "temperature": 0,
            "max_tokens": 40,
            "stream": True,
            "stream_options": {"include_usage": True},
        },
    )
    assert events[-1][1] == "[DONE]"
    chunks = json_payloads(events)
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    text = "".join(
        (ch.get("delta") or {}).get("content") or "" for c in chunks for ch in c.get("choices", [])
    )
    assert "Paris" in text, text
    finishes = [
        ch.get("finish_reason")
        for c in chunks
        for ch in c.get("choices", [])
        if ch.get("finish_reason")
    ]
    assert finishes and finishes[-1] in ("stop", "length")
    usage = [c["usage"] for c in chunks if c.get("usage")]
    assert usage, "no usage chunk despite stream_options.include_usage"
    u = usage[-1]
    assert u["prompt_tokens"] > 0 and u["completion_tokens"] > 0
    assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"]
    assert "/v1/chat/completions" in smollm.requested_paths()


def test_think_model_streams_reasoning_content(think):
    events = stream(
        f"{think.base_url}/chat/completions",
        {
            "model": "think-tiny",
            "messages": [{"role": "user", "content": "Think about the sky."}],
            "temperature": 0,
            "max_tokens": 24,
            "stream": True,
            "stream_options": {"include_usage": True},
        },
    )
    chunks = json_payloads(events)
    reasoning = [
        ch["delta"]["reasoning_content"]
        for c in chunks
        for ch in c.get("choices", [])
        if (ch.get("delta") or {}).get("reasoning_content")
    ]
    assert len(reasoning) >= 2, chunks
    content = "".join(
        (ch.get("delta") or {}).get("content") or "" for c in chunks for ch in c.get("choices", [])
    )
    assert "<think>" not in content and "<think>" not in "".join(reasoning)
    assert [c["usage"] for c in chunks if c.get("usage")][-1]["completion_tokens"] > 0


def test_think_model_budget_gives_reasoning_then_content(think):
    """With a thinking budget llama-server forces </think>; the rest becomes content."""
    events = stream(
        f"{think.base_url}/chat/completions",
        {
            "model": "think-tiny",
            "messages": [{"role": "user", "content": "Think briefly, then answer."}],
            "temperature": 0,
            "max_tokens": 24,
            "thinking_budget_tokens": 6,
            "stream": True,
        },
    )
    chunks = json_payloads(events)
    order = []
    for c in chunks:
        for ch in c.get("choices", []):
            d = ch.get("delta") or {}
            if d.get("reasoning_content"):
                order.append("reasoning")
            if d.get("content"):
                order.append("content")
    assert "reasoning" in order and "content" in order, chunks
    assert order.index("reasoning") < order.index("content")


# --------------------------------------------------------------------------- Anthropic messages


def test_smollm2_messages_stream(smollm):
    events = stream(
        f"{smollm.base_url}/messages",
        {
            "model": "smollm2",
            "max_tokens": 40,
            "temperature": 0,
            "stream": True,
            "system": SYSTEM,
            "messages": [{"role": "user", "content": PARIS}],
        },
        headers={"anthropic-version": "2023-06-01"},
    )
    names = [e for e, _ in events]
    assert names[0] == "message_start" and names[-1] == "message_stop"
    payloads = json_payloads(events)
    assert all(p["type"] == e for (e, _), p in zip(events, payloads, strict=True))
    text = "".join(
        p["delta"]["text"]
        for p in payloads
        if p["type"] == "content_block_delta" and p["delta"]["type"] == "text_delta"
    )
    assert "Paris" in text, text
    start = payloads[0]["message"]
    assert start["role"] == "assistant" and start["usage"]["input_tokens"] > 0
    delta = [p for p in payloads if p["type"] == "message_delta"][-1]
    assert delta["delta"]["stop_reason"] in ("end_turn", "max_tokens")
    assert delta["usage"]["output_tokens"] > 0
    assert "/v1/messages" in smollm.requested_paths()


def test_think_messages_stream_has_thinking_block(think):
    events = stream(
        f"{think.base_url}/messages",
        {
            "model": "think-tiny",
            "max_tokens": 24,
            "temperature": 0,
            "stream": True,
            "thinking": {"type": "enabled", "budget_tokens": 6},
            "messages": [{"role": "user", "content": "Think about the sky."}],
        },
        headers={"anthropic-version": "2023-06-01"},
    )
    payloads = json_payloads(events)
    starts = [p["content_block"]["type"] for p in payloads if p["type"] == "content_block_start"]
    assert starts and starts[0] == "thinking", starts
    deltas = {p["delta"]["type"] for p in payloads if p["type"] == "content_block_delta"}
    assert "thinking_delta" in deltas, deltas


# --------------------------------------------------------------------------- OpenAI Responses


def test_smollm2_responses_stream(smollm):
    events = stream(
        f"{smollm.base_url}/responses",
        {
            "model": "smollm2",
            "instructions": SYSTEM,
            "input": PARIS,
            "max_output_tokens": 40,
            "temperature": 0,
            "stream": True,
        },
    )
    payloads = json_payloads(events)
    types = [p["type"] for p in payloads]
    assert types[0] == "response.created" and types[-1] == "response.completed", types
    text = "".join(p["delta"] for p in payloads if p["type"] == "response.output_text.delta")
    assert "Paris" in text, text
    usage = payloads[-1]["response"]["usage"]
    assert usage["input_tokens"] > 0 and usage["output_tokens"] > 0
    assert "/v1/responses" in smollm.requested_paths()


def test_think_responses_stream_has_reasoning(think):
    events = stream(
        f"{think.base_url}/responses",
        {
            "model": "think-tiny",
            "input": "Think about the sky.",
            "max_output_tokens": 24,
            "temperature": 0,
            "stream": True,
        },
    )
    payloads = json_payloads(events)
    types = {p["type"] for p in payloads}
    assert any(t.startswith("response.reasoning") for t in types), types
