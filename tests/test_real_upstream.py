"""End to end against a real llama.cpp ``llama-server`` (SmolLM2-135M-Instruct and a tiny
reasoning GGUF), driven through the browser: the proof that the relay works on real traffic."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.conftest import create_first_account
from tests.llama import llama_paths, missing_reason, start_llama_server

pytestmark = [pytest.mark.real_upstream, pytest.mark.browser]

QUESTION = "What is the capital of France?"
# SmolLM2-135M answers "…Paris." at temperature 0 only with a system prompt (without one its
# template injects its own, and the tiny model rambles).
SYSTEM = "You are a helpful assistant."


@pytest.fixture(scope="module")
def llama_paths_or_skip():  # noqa: ANN201
    paths = llama_paths()
    if paths is None:
        pytest.skip(missing_reason())
    return paths


@pytest.fixture(scope="module")
def smollm(llama_paths_or_skip):  # noqa: ANN001, ANN201
    srv = start_llama_server(llama_paths_or_skip[1])
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def thinker(llama_paths_or_skip):  # noqa: ANN001, ANN201
    srv = start_llama_server(llama_paths_or_skip[2])
    yield srv
    srv.stop()


def direct_usage(base_url: str, model: str, content: str, system: str = "", **params: object) -> tuple[str, dict]:
    """The same request straight to llama-server: (answer text, usage)."""
    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": content}]
    body = {"model": model, "messages": messages, "stream": True,
            "stream_options": {"include_usage": True}, **params}
    text, usage = "", {}
    with httpx.stream("POST", f"{base_url}/chat/completions", json=body, timeout=120) as r:
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            for c in chunk.get("choices") or []:
                text += (c.get("delta") or {}).get("content") or ""
            if chunk.get("usage"):
                usage = chunk["usage"]
    return text, usage


def add_endpoint(pg, server, name: str, base_url: str) -> None:  # noqa: ANN001
    pg.goto(server.url + "/endpoints/new/")
    pg.select_option("#preset", "llama.cpp")
    pg.fill("#id_name", name)
    pg.fill("#id_base_url", base_url)
    pg.click("button:has-text('Save endpoint')")
    pg.wait_for_url("**/endpoints/")


def metric(pg, label: str) -> str:  # noqa: ANN001
    # The full table sits in the strip's closed <details> (issue 10): its text, not innerText.
    return (pg.locator(f".msg-assistant .metric[data-metric='{label}'] dd").last.text_content() or "").strip()


def test_paris_streams_from_llama_server_with_exact_token_counts(server, page, smollm) -> None:  # noqa: ANN001
    pg = page
    create_first_account(pg, server)
    add_endpoint(pg, server, "llama.cpp SmolLM2", smollm.base_url)
    row = pg.locator("tr", has_text="llama.cpp SmolLM2")
    row.locator("button:has-text('Test connection')").click()
    pg.wait_for_selector("table.models td:has-text('smollm2')")
    pg.goto(server.url + "/")
    pg.wait_for_selector("#conn-state.ok")
    pg.select_option("#endpoint", label="llama.cpp SmolLM2")
    pg.fill("#model", "smollm2")
    pg.fill("input[name=temperature]", "0")
    pg.fill("input[name=max_tokens]", "40")
    pg.fill("textarea[name=system_prompt]", SYSTEM)
    pg.fill("#content", QUESTION)
    pg.press("#content", "Enter")
    pg.wait_for_selector(".msg-assistant.status-streaming")
    pg.wait_for_selector(".msg-assistant.status-complete", timeout=120_000)
    answer = pg.inner_text(".msg-assistant .answer")
    assert "Paris" in answer
    sent = json.loads(server.query("select inspect from chat_message where role='assistant'")[0][0])["request"]["body"]
    assert sent["temperature"] == 0 and sent["max_tokens"] == 40  # 0 is a value, not "unset"
    direct_text, usage = direct_usage(smollm.base_url, "smollm2", QUESTION, SYSTEM, temperature=0, max_tokens=40)
    assert "Paris" in direct_text
    assert metric(pg, "prompt") == str(usage["prompt_tokens"])
    assert metric(pg, "completion") == str(usage["completion_tokens"])
    assert metric(pg, "TTFT") != "—"
    assert "/v1/chat/completions" in smollm.requested_paths()
    assert "/v1/models" in smollm.requested_paths()
    stored = server.query("select content, usage from chat_message where role='assistant'")[0]
    assert json.loads(stored[1])["completion_tokens"] == usage["completion_tokens"]


def test_reasoning_streams_from_llama_server_into_the_thinking_block(server, page, thinker) -> None:  # noqa: ANN001
    pg = page
    create_first_account(pg, server)
    add_endpoint(pg, server, "llama.cpp thinker", thinker.base_url)
    pg.goto(server.url + "/")
    pg.wait_for_selector("#conn-state.ok")
    pg.select_option("#endpoint", label="llama.cpp thinker")
    pg.fill("#model", "think-tiny")
    pg.fill("input[name=max_tokens]", "48")
    pg.fill("input[name=seed]", "1")
    pg.fill("#content", "Think about this.")
    pg.press("#content", "Enter")
    # Reasoning (delta.reasoning_content from llama-server) streams into the Thinking block (an
    # idle machine may finish the tiny model's 48 tokens before a poll sees "streaming": the
    # block is then already closed, with its text).
    pg.wait_for_selector(".msg-assistant.has-reasoning .thinking", state="attached", timeout=60_000)
    pg.wait_for_function("() => document.querySelector('.msg-assistant .reasoning-text').textContent.trim().length > 0")
    pg.wait_for_selector(".msg-assistant.status-complete, .msg-assistant.status-error", timeout=120_000)
    stored = server.query("select reasoning, content, status from chat_message where role='assistant'")[0]
    assert stored[2] == "complete" and stored[0].strip()
    assert pg.locator(".msg-assistant details.thinking").count() == 1
    assert "/v1/chat/completions" in thinker.requested_paths()


STYLE_PATHS = {"openai_chat": "/v1/chat/completions", "anthropic_messages": "/v1/messages",
               "openai_responses": "/v1/responses"}


def upstream_counts(style: str, raw: dict) -> tuple[int, int]:
    """(prompt, completion) tokens as the upstream's own usage object states them."""
    if style == "openai_chat":
        return raw["prompt_tokens"], raw["completion_tokens"]
    if style == "anthropic_messages":
        prompt = raw["input_tokens"] + (raw.get("cache_read_input_tokens") or 0) + (raw.get("cache_creation_input_tokens") or 0)
        return prompt, raw["output_tokens"]
    return raw["input_tokens"], raw["output_tokens"]


def test_the_same_chat_works_through_all_three_api_styles(server, page, smollm) -> None:  # noqa: ANN001
    pg = page
    create_first_account(pg, server)
    for style in STYLE_PATHS:
        pg.goto(server.url + "/endpoints/new/")
        pg.fill("#id_name", f"llama {style}")
        pg.fill("#id_base_url", smollm.base_url)
        pg.select_option("#id_api_style", style)
        pg.click("button:has-text('Save endpoint')")
        pg.wait_for_url("**/endpoints/")
    for style, path in STYLE_PATHS.items():
        before = smollm.requested_paths().count(path)
        pg.goto(server.url + "/")
        pg.click("button:has-text('New chat')")
        pg.wait_for_selector("#conn-state.ok")
        pg.select_option("#endpoint", label=f"llama {style}")
        pg.fill("#model", "smollm2")
        pg.fill("input[name=temperature]", "0")
        pg.fill("input[name=max_tokens]", "40")
        pg.fill("textarea[name=system_prompt]", SYSTEM)
        pg.fill("#content", QUESTION)
        pg.press("#content", "Enter")
        pg.wait_for_selector(".msg-assistant.status-complete, .msg-assistant.status-error", timeout=120_000)
        assert pg.locator(".msg-assistant.status-complete").count() == 1, pg.inner_text(".msg-assistant")
        assert "Paris" in pg.inner_text(".msg-assistant .answer"), style
        # No style may be routed through another: this turn called exactly its own path.
        assert smollm.requested_paths().count(path) == before + 1, (style, smollm.requested_paths())
        row = server.query(
            "select usage, usage_raw from chat_message where role='assistant' order by created_at desc limit 1"
        )[0]
        prompt, completion = upstream_counts(style, json.loads(row[1]))
        assert metric(pg, "prompt") == str(prompt), style
        assert metric(pg, "completion") == str(completion), style
    paths = smollm.requested_paths()
    assert all(p in paths for p in STYLE_PATHS.values())
