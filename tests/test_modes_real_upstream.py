"""Modes against a real llama.cpp llama-server (issue 14): ``/v1/completions`` with SmolLM2
(streamed, logprobs, through the adapter and through the browser) and ``/v1/embeddings`` with
the tiny embedding GGUF of ``scripts/make_embed_gguf.py`` (float and base64).

Skips only when the llama-server binary is missing; a missing embedding GGUF is made here (the
same script the Makefile ``llama`` target runs)."""

from __future__ import annotations

import json
import math
import sys

import httpx
import pytest

from chat.providers import openai_completions, openai_embeddings
from chat.providers.base import EndpointConfig, Finish, LogprobsDelta, TextDelta, Usage
from tests.conftest import create_first_account
from tests.llama import REPO_DIR, llama_dir, start_llama_server

pytestmark = [pytest.mark.real_upstream]

PROMPT = "The capital of France is"


@pytest.fixture(scope="module")
def llama_bin():  # noqa: ANN201
    binary = llama_dir() / "llama-server"
    if not binary.is_file():
        pytest.skip(f"llama-server is not built under {llama_dir()}; run `make llama`")
    return binary


@pytest.fixture(scope="module")
def smollm(llama_bin):  # noqa: ANN001, ANN201
    srv = start_llama_server(llama_dir() / "smollm2.gguf", server_bin=llama_bin)
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def embedder(llama_bin):  # noqa: ANN001, ANN201
    gguf_path = llama_dir() / "embed-tiny.gguf"
    if not gguf_path.is_file():
        sys.path.insert(0, str(REPO_DIR / "scripts"))
        from make_embed_gguf import build
        build(llama_dir() / "smollm2.gguf", gguf_path)
    srv = start_llama_server(gguf_path, server_bin=llama_bin, extra_args=("--embeddings", "--pooling", "mean"),
                             reasoning_format=None)
    yield srv
    srv.stop()


def config(srv) -> EndpointConfig:  # noqa: ANN001
    return EndpointConfig(base_url=srv.base_url, allow_private=True)


async def test_completions_stream_with_logprobs_from_llama_server(smollm) -> None:  # noqa: ANN001
    request = openai_completions.CompletionRequest(model="smollm2", prompt=PROMPT,
                                                   params={"max_tokens": 8, "temperature": 0}, logprobs=2)
    events = []
    async with httpx.AsyncClient() as client:
        async for ev in openai_completions.stream(client, config(smollm), request):
            events.append(ev)
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert "Paris" in text
    assert sum(isinstance(e, TextDelta) for e in events) >= 2  # streamed, not one body
    tokens = [t for e in events if isinstance(e, LogprobsDelta) for t in e.tokens]
    assert tokens and "".join(t.token for t in tokens) == text
    assert all(t.logprob <= 0 for t in tokens) and all(len(t.top) >= 1 for t in tokens)
    usage = [e for e in events if isinstance(e, Usage)][-1]
    assert usage.completion_tokens == 8 and usage.prompt_tokens and usage.prompt_tokens >= 5
    assert [e.reason for e in events if isinstance(e, Finish)] == ["length"]
    assert "/v1/completions" in smollm.requested_paths()


@pytest.mark.parametrize("encoding", ["float", "base64"])
async def test_embeddings_from_llama_server(embedder, encoding) -> None:  # noqa: ANN001
    texts = ("hello world", "hello there world", "completely different")
    async with httpx.AsyncClient() as client:
        result = await openai_embeddings.embed(client, config(embedder), openai_embeddings.EmbeddingsRequest(
            model="embed-tiny", inputs=texts, encoding_format=encoding))
    assert len(result.vectors) == 3 and {len(v) for v in result.vectors} == {64}
    assert all(abs(math.sqrt(sum(x * x for x in v)) - 1) < 1e-3 for v in result.vectors)  # L2-normalised
    assert result.vectors[0] != result.vectors[2]
    assert result.usage.prompt_tokens and result.usage.prompt_tokens >= 3
    assert "/v1/embeddings" in embedder.requested_paths()


@pytest.mark.browser
def test_raw_completion_and_embeddings_pages_on_llama_server(server, page, smollm, embedder) -> None:  # noqa: ANN001
    pg = page
    create_first_account(pg, server)
    for name, url in (("llama SmolLM2", smollm.base_url), ("llama embed", embedder.base_url)):
        pg.goto(server.url + "/endpoints/new/")
        pg.select_option("#preset", "llama.cpp")
        pg.fill("#id_name", name)
        pg.fill("#id_base_url", url)
        pg.click("button:has-text('Save endpoint')")
        pg.wait_for_url("**/endpoints/")
    pg.goto(server.url + "/modes/completion/")
    pg.select_option("#id_endpoint", label="llama SmolLM2")
    pg.fill("#id_model", "smollm2")
    pg.fill("#id_prompt", PROMPT)
    pg.fill("#id_max_tokens", "8")
    pg.fill("#id_temperature", "0")
    pg.fill("#id_logprobs", "1")
    pg.click("button.run-btn")
    pg.wait_for_selector("#run-status[data-status='complete']", state="attached", timeout=120_000)
    assert pg.locator("#raw-completion .lp").count() >= 2
    assert "Paris" in pg.inner_text("#raw-completion")
    assert pg.inner_text("[data-metric='completion'] dd") == "8"
    assert pg.inner_text("[data-metric='TTFT'] dd") != "—"
    pg.goto(server.url + "/modes/embeddings/")
    pg.select_option("#id_endpoint", label="llama embed")
    pg.fill("#id_model", "embed-tiny")
    pg.fill("#id_texts", "hello world\nhello there world\ncompletely different")
    pg.click("button.run-btn")
    pg.wait_for_selector("table.heatmap", timeout=120_000)
    assert pg.inner_text(".emb-dims") == "64"
    cells = pg.eval_on_selector_all(".hm-cell", "els => els.map(e => e.dataset.value)")
    assert len(cells) == 9 and cells[0] == "1.0000"
    stored = json.loads(server.query("select usage from chat_moderun where kind='embeddings'")[0][0])
    assert stored["prompt_tokens"] >= 3
