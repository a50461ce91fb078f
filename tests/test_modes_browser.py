"""Browser tests of the modes (issue 14) over the live daphne server and its in-process
simulator: a raw completion streamed with logprobs and continued, a seed error shown like a
chat error, embeddings of 4 texts whose similarity matrix matches values computed here from the
downloaded vectors, and a second user who cannot open (or start) another user's run."""

from __future__ import annotations

import json
import math
import uuid
from pathlib import Path

import pytest

from tests.conftest import create_first_account, login

pytestmark = [pytest.mark.browser]

PASSWORD = "correct-horse-9"
DOCS = Path(__file__).resolve().parent.parent / "docs"


def completion_requests(server) -> list[dict]:  # noqa: ANN001
    return [r for r in server.sim_requests() if str(r.get("path", "")).endswith("/completions")
            and not str(r.get("path", "")).endswith("/chat/completions")]


def test_raw_completion_streams_with_logprobs_and_continue_appends(server, page) -> None:  # noqa: ANN001
    pg = page
    create_first_account(pg, server, password=PASSWORD)
    frames: list[str] = []
    pg.on("websocket", lambda ws: ws.on("framereceived", lambda payload: frames.append(str(payload))))
    pg.goto(server.url + "/modes/completion/")
    pg.fill("#id_model", "sim-fast?ttft_ms=50&delay_ms=40")
    pg.fill("#id_prompt", "The quick brown fox")
    pg.fill("#id_max_tokens", "12")
    pg.fill("#id_logprobs", "2")
    pg.click("button.run-btn")
    pg.wait_for_url("**/modes/r/**")
    run_url = pg.url
    # Tinted while it streams, then the final page: prompt, then the completion in its own
    # colour as tinted logprob tokens with their alternatives.
    pg.wait_for_selector("#raw-completion .lp", timeout=15_000)
    pg.wait_for_selector("#run-status[data-status='complete']", state="attached", timeout=15_000)
    assert pg.inner_text(".raw-prompt-text") == "The quick brown fox"
    completion = pg.inner_text("#raw-completion")
    assert completion.strip()
    assert pg.locator("#raw-completion .lp").count() >= 2
    assert "top:" in (pg.get_attribute("#raw-completion .lp >> nth=0", "title") or "")
    colour = pg.eval_on_selector("#raw-completion", "e => getComputedStyle(e).color")
    assert colour != pg.eval_on_selector(".raw-prompt-text", "e => getComputedStyle(e).color")
    # It streamed: several delta frames arrived before the final one, and their text is the answer.
    deltas = [json.loads(f) for f in frames if '"t": "delta"' in f]
    assert len(deltas) >= 2, frames
    assert "".join(d["text"] for d in deltas) == completion
    assert any(d["lp"] for d in deltas)
    # The metrics strip of chat: TTFT, tokens, finish reason.
    assert pg.inner_text("[data-metric='completion'] dd") == "12"
    assert pg.inner_text("[data-metric='finish'] dd") == "length"
    assert pg.inner_text("[data-metric='TTFT'] dd") not in ("", "—")
    sent = completion_requests(server)[-1]["body"]
    assert sent["prompt"] == "The quick brown fox" and sent["logprobs"] == 2 and sent["stream"] is True
    # Continue: a new run whose prompt is the prompt + the completion.
    pg.click("button.continue-btn")
    pg.wait_for_url(lambda url: url != run_url and "/modes/r/" in url)
    pg.wait_for_selector("#run-status[data-status='complete']", state="attached", timeout=15_000)
    assert pg.inner_text(".raw-prompt-text") == "The quick brown fox" + completion
    assert completion_requests(server)[-1]["body"]["prompt"] == "The quick brown fox" + completion
    # Both runs are in the history.
    assert pg.locator(".mode-history li").count() == 2
    # Inspect and View code of the run.
    pg.goto(run_url + "inspect/")
    assert "[REDACTED]" in pg.inner_text(".inspect-request")
    assert "text_completion" in pg.inner_text(".inspect-events")
    pg.goto(run_url + "code/")
    assert "/simulator/v1/completions" in pg.inner_text("#snippet-curl")


def test_seed_error_is_shown_like_a_chat_error(server, page) -> None:  # noqa: ANN001
    pg = page
    create_first_account(pg, server, password=PASSWORD)
    pg.goto(server.url + "/modes/completion/")
    pg.fill("#id_model", "abc")
    pg.fill("#id_prompt", "Hello")
    pg.click("button.run-btn")
    pg.wait_for_selector(".error-box[role=alert]", timeout=15_000)
    box = pg.inner_text(".error-box")
    assert "HTTP 404" in box and "model_not_found" in box
    assert "The model `abc` does not exist or you do not have access to it." in box


def test_embeddings_heatmap_matches_downloaded_vectors(server, page, chromium) -> None:  # noqa: ANN001
    pg = page
    create_first_account(pg, server, password=PASSWORD)
    pg.set_viewport_size({"width": 1280, "height": 1000})
    texts = ["The cat sat on the mat", "A cat is sitting on a mat", "Stock prices fell sharply today",
             "The market dropped at the opening"]
    pg.goto(server.url + "/modes/embeddings/")
    pg.fill("#id_model", "sim-embed")
    pg.fill("#id_texts", "\n".join(texts))
    pg.select_option("#id_encoding_format", "base64")
    pg.click("button.run-btn")
    pg.wait_for_url("**/modes/r/**")
    pg.wait_for_selector("table.heatmap", timeout=15_000)
    assert pg.inner_text(".emb-dims") == "64"
    assert pg.inner_text(".emb-usage") not in ("", "—")
    with pg.expect_download() as info:
        pg.click("a.dl-json")
    data = json.loads(Path(info.value.path()).read_text())
    vectors = data["embeddings"]
    assert data["inputs"] == texts and len(vectors) == 4 and all(len(v) == 64 for v in vectors)

    def cos(a, b) -> float:  # noqa: ANN001
        return sum(x * y for x, y in zip(a, b, strict=True)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))

    cells = pg.eval_on_selector_all(".hm-cell", "els => els.map(e => [+e.dataset.i, +e.dataset.j, e.dataset.value, e.title])")
    assert len(cells) == 16
    for i, j, value, title in cells:
        assert abs(float(value) - cos(vectors[i], vectors[j])) < 1e-4, (i, j, value)
        assert value in title
    # The two cat sentences are nearer each other than to the market ones.
    pg.select_option("#nearest-select", "0")
    first = pg.locator(".nearest-list[data-i='0'] li").first.inner_text()
    assert "A cat is sitting" in first
    pg.select_option("#nearest-select", "2")
    assert pg.locator(".nearest-list[data-i='0']").is_hidden()
    assert "market dropped" in pg.locator(".nearest-list[data-i='2'] li").first.inner_text()
    pg.hover(".hm-cell[data-i='0'][data-j='1']")
    assert "0." in pg.inner_text("#hm-hover")
    DOCS.mkdir(exist_ok=True)
    pg.screenshot(path=str(DOCS / "modes-embeddings.png"), full_page=True)
    # A limit checked before the call, shown next to the field.
    pg.goto(server.url + "/modes/embeddings/")
    pg.fill("#id_texts", "\n".join(f"text {i}" for i in range(70)))
    pg.click("button.run-btn")
    assert "70 texts: at most 64" in pg.inner_text(".field-texts .field-error")

    # A second user cannot see the run, download it or open its socket; nothing is called.
    pg.goto(server.url + "/users/")
    pg.fill("#id_username", "bea")
    pg.fill("#id_password1", "bea-password-77")
    pg.fill("#id_password2", "bea-password-77")
    pg.click("button:has-text('Add user')")
    pg.wait_for_selector("li:has-text('bea')")
    def posts() -> int:
        return sum(1 for r in server.sim_requests() if r.get("method") == "POST")

    before = posts()
    other = chromium.new_context()
    try:
        pg2 = other.new_page()
        login(pg2, server, "bea", "bea-password-77")
        run_id = server.query("select id from chat_moderun")[0][0]
        rid = str(uuid.UUID(run_id))
        assert pg2.goto(f"{server.url}/modes/r/{rid}/").status == 404
        assert pg2.goto(f"{server.url}/modes/r/{rid}/vectors.json").status == 404
        assert pg2.goto(f"{server.url}/modes/r/{rid}/inspect/").status == 404
        pg2.goto(server.url + "/modes/embeddings/")
        code = pg2.evaluate("""rid => new Promise(resolve => {
            const ws = new WebSocket(`ws://${location.host}/ws/modes/${rid}/`);
            ws.onclose = e => resolve(e.code);
        })""", rid)
        assert code == 4404
        assert "The cat sat" not in pg2.inner_text(".mode-history")
    finally:
        other.close()
    assert posts() == before


def test_transcription_of_an_uploaded_wav_streams_with_segments(server, page, tmp_path) -> None:  # noqa: ANN001
    from chat.simulator.audio import segments_for
    from tests.test_modes_providers import make_wav
    pg = page
    create_first_account(pg, server, password=PASSWORD)
    frames: list[str] = []
    pg.on("websocket", lambda ws: ws.on("framereceived", lambda payload: frames.append(str(payload))))
    wav = make_wav(7.0)
    path = tmp_path / "bells.wav"
    path.write_bytes(wav)
    pg.goto(server.url + "/modes/audio/")
    # Type checked in the page before any upload.
    bad = tmp_path / "notes.txt"
    bad.write_text("not audio")
    pg.set_input_files("#id_file", str(bad))
    assert "Not an audio file" in pg.inner_text(".file-error")
    pg.fill("#id_model", "sim-whisper?ttft_ms=100&delay_ms=150")
    pg.set_input_files("#id_file", str(path))
    assert pg.locator(".file-error").is_hidden()
    pg.select_option("#id_response_format", "json")
    assert pg.is_checked("#id_stream")
    pg.click("button.run-btn")
    pg.wait_for_url("**/modes/r/**")
    _, segments = segments_for(wav, "transcribe")
    expected = " ".join(s["text"] for s in segments)
    pg.wait_for_selector("#run-status[data-status='complete']", state="attached", timeout=15_000)
    assert pg.inner_text("#transcript") == expected
    deltas = [json.loads(f) for f in frames if '"t": "delta"' in f]
    assert len(deltas) >= 2 and "".join(d["text"] for d in deltas) == expected  # streamed over the socket
    assert pg.inner_text("[data-metric='TTFT'] dd") not in ("", "—")
    assert pg.inner_text("[data-metric='total'] dd") not in ("", "—")
    sent = [r for r in server.sim_requests() if str(r.get("path", "")).endswith("/audio/transcriptions")][-1]
    assert sent["body"]["stream"] == "true" and sent["body"]["response_format"] == "json"
    assert "bells.wav" in sent["body"]["file"]
    # verbose_json (not streamed: the seed's stream carries no segments): timed segments.
    pg.goto(server.url + "/modes/audio/")
    pg.fill("#id_model", "sim-whisper?ttft_ms=100&delay_ms=150")
    pg.set_input_files("#id_file", str(path))
    pg.select_option("#id_response_format", "verbose_json")
    pg.uncheck("#id_stream")
    pg.click("button.run-btn")
    pg.wait_for_selector(".segments li", timeout=15_000)
    assert pg.inner_text("#transcript") == expected
    assert pg.locator(".segments li").count() == len(segments) == 4
    assert "6.00–7.00 s" in pg.locator(".segments li").nth(3).inner_text()
    # The audio plays beside the segments; a segment seeks the player.
    assert pg.eval_on_selector("#run-audio", "a => new Promise(r => { if (a.readyState >= 1) r(a.duration); else a.addEventListener('loadedmetadata', () => r(a.duration)); })") == pytest.approx(7.0, abs=0.05)
    pg.click(".segments li:nth-child(3) .seg-play")
    for _ in range(50):
        if pg.eval_on_selector("#run-audio", "a => a.currentTime") >= 4:
            break
        pg.wait_for_timeout(100)
    assert pg.eval_on_selector("#run-audio", "a => a.currentTime") >= 4
    pg.screenshot(path=str(DOCS / "modes-audio.png"), full_page=True)


def test_stop_keeps_the_text_and_another_user_cannot_start_a_pending_run(server, page, chromium) -> None:  # noqa: ANN001
    pg = page
    create_first_account(pg, server, password=PASSWORD)
    # Stop: the run ends "stopped" with the text so far.
    pg.goto(server.url + "/modes/completion/")
    pg.fill("#id_model", "sim-fast?ttft_ms=50&delay_ms=150")
    pg.fill("#id_prompt", "Count slowly")
    pg.fill("#id_max_tokens", "200")
    pg.click("button.run-btn")
    pg.wait_for_url("**/modes/r/**")
    for _ in range(100):
        if len(pg.inner_text("#raw-completion")) > 10:
            break
        pg.wait_for_timeout(50)
    pg.click("button.stop-run")
    pg.wait_for_selector(".stopped-note", timeout=15_000)
    stored = server.query("select status, output from chat_moderun")[0]
    assert stored[0] == "stopped" and 10 < len(stored[1]) and pg.inner_text("#raw-completion") == stored[1]
    assert pg.inner_text("[data-metric='completion'] dd") in ("—", "")  # no usage for a stopped stream

    # A pending run of the admin (made without opening its page) cannot be started by another user.
    token = next(c["value"] for c in pg.context.cookies() if c["name"] == "csrftoken")
    endpoint_id = server.query("select id from chat_endpoint")[0][0]
    response = pg.request.post(server.url + "/modes/completion/", max_redirects=0, headers={"X-CSRFToken": token},
                               form={"endpoint": str(endpoint_id), "model": "sim-fast", "prompt": "secret prompt"})
    assert response.status == 302
    run_path = response.headers["location"]
    rid = run_path.rstrip("/").rsplit("/", 1)[1]
    pg.goto(server.url + "/users/")
    pg.fill("#id_username", "bea")
    pg.fill("#id_password1", "bea-password-77")
    pg.fill("#id_password2", "bea-password-77")
    pg.click("button:has-text('Add user')")
    pg.wait_for_selector("li:has-text('bea')")
    posts = sum(1 for r in server.sim_requests() if r.get("method") == "POST")
    other = chromium.new_context()
    try:
        pg2 = other.new_page()
        login(pg2, server, "bea", "bea-password-77")
        pg2.goto(server.url + "/modes/completion/")
        code = pg2.evaluate("""rid => new Promise(resolve => {
            const ws = new WebSocket(`ws://${location.host}/ws/modes/${rid}/`);
            ws.onclose = e => resolve(e.code);
        })""", rid)
        assert code == 4404
        assert pg2.goto(server.url + run_path).status == 404
        pg2.goto(server.url + "/modes/completion/")
        assert "secret prompt" not in pg2.content()
    finally:
        other.close()
    assert server.query("select status from chat_moderun where prompt = 'secret prompt'")[0][0] == "pending"
    assert sum(1 for r in server.sim_requests() if r.get("method") == "POST") == posts
    # Its owner starts it by opening it.
    pg.goto(server.url + run_path)
    pg.wait_for_selector("#run-status[data-status='complete']", state="attached", timeout=15_000)
    assert pg.inner_text(".raw-prompt-text") == "secret prompt"
