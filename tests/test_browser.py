"""Browser tests: headless Debian Chromium driving the real pages over a real daphne server."""

from __future__ import annotations

import re

import pytest

from tests.conftest import create_first_account

pytestmark = [pytest.mark.browser]

ASSISTANT = ".msg-assistant"


def send(pg, text: str) -> None:  # noqa: ANN001
    pg.fill("#content", text)
    pg.press("#content", "Enter")


def set_model(pg, model: str) -> None:  # noqa: ANN001
    pg.fill("#model", model)


def test_first_account_chat_with_reasoning_metrics_and_reload(server, page) -> None:  # noqa: ANN001
    pg = page
    create_first_account(pg, server)
    pg.wait_for_selector("#conn-state.ok")
    # The built-in simulator is the default endpoint of a fresh install.
    assert pg.locator("#endpoint option:checked").inner_text() == "Built-in simulator"
    set_model(pg, "sim-reasoning?ttft_ms=1500&delay_ms=25&length=60&reasoning_length=30")
    # Shift+Enter adds a line, Enter sends.
    pg.fill("#content", "First line")
    pg.press("#content", "Shift+Enter")
    pg.type("#content", "second line")
    assert pg.input_value("#content") == "First line\nsecond line"
    pg.press("#content", "Enter")
    # While nothing arrives: a waiting state with seconds elapsed.
    pg.wait_for_selector(f"{ASSISTANT}.status-streaming .waiting", state="visible")
    # Reasoning streams into the Thinking block before the answer.
    pg.wait_for_selector(f"{ASSISTANT}.status-streaming.has-reasoning .thinking[open]")
    reasoning_live = pg.inner_text(f"{ASSISTANT} .reasoning-text")
    assert reasoning_live.strip()
    pg.wait_for_selector(f"{ASSISTANT}.status-complete", timeout=30_000)
    assert pg.input_value("#content") == ""  # cleared once the server showed the message
    user_text = pg.inner_text(".msg-user .user-text")
    assert user_text == "First line\nsecond line"
    answer = pg.inner_text(f"{ASSISTANT} .answer")
    assert "Simulated answer" in answer
    assert pg.locator(f"{ASSISTANT} details.thinking").count() == 1
    # The strip is one line; the full table opens on click (issue 10).
    line = pg.inner_text(f"{ASSISTANT} .metrics-line")
    assert "TTFT" in line and "tok/s" in line and "tokens" in line
    assert pg.is_hidden(".metric dt")
    pg.click(f"{ASSISTANT} .metrics-line")
    metrics = {pg.locator(".metric dt").nth(i).inner_text(): pg.locator(".metric dd").nth(i).inner_text()
               for i in range(pg.locator(".metric").count())}
    assert re.fullmatch(r"\d+ ms", metrics["TTFT"]) and int(metrics["TTFT"].split()[0]) >= 1500
    assert metrics["completion"] != "—" and metrics["prompt"] != "—" and metrics["reasoning"] != "—"
    assert metrics["finish"] == "stop"
    assert metrics["upstream TTFT"] == "1500 ms"
    assert "tok/s" in metrics and metrics["tok/s"] != "—"
    # The title appears in the sidebar.
    pg.wait_for_selector("#conversation-list li a:has-text('First line second line')")
    # Sanitized: the simulator's <script> text shows as text, never as an element.
    assert pg.locator(f"{ASSISTANT} .answer script").count() == 0
    assert "<script>" in answer
    # Reload: the whole conversation as it was, with its metrics.
    pg.reload()
    pg.wait_for_selector(f"{ASSISTANT}.status-complete")
    assert pg.inner_text(f"{ASSISTANT} .answer") == answer
    pg.click(f"{ASSISTANT} .metrics-line")
    metrics_after = {pg.locator(".metric dt").nth(i).inner_text(): pg.locator(".metric dd").nth(i).inner_text()
                     for i in range(pg.locator(".metric").count())}
    assert metrics_after == metrics
    assert pg.inner_text(".msg-user .user-text") == user_text
    stored = server.query("select content, reasoning, status from chat_message where role='assistant'")
    assert stored[0][2] == "complete" and stored[0][1].strip()


def test_add_endpoint_test_connection_and_chat(server, page, fresh_sim) -> None:  # noqa: ANN001
    pg = page
    create_first_account(pg, server)
    pg.goto(server.url + "/endpoints/new/")
    pg.select_option("#preset", "llama.cpp")
    assert pg.input_value("#id_base_url") == "http://127.0.0.1:8080/v1"
    pg.fill("#id_name", "Standalone sim")
    pg.fill("#id_base_url", fresh_sim.base_url)
    pg.fill("#id_api_key", "sk-browser-SECRET-abcd1234")
    pg.click("button:has-text('Save endpoint')")
    pg.wait_for_url("**/endpoints/")
    html = pg.content()
    assert "sk-browser-SECRET" not in html and "…1234" in html
    row = pg.locator("tr", has_text="Standalone sim")
    row.locator("button:has-text('Test connection')").click()
    pg.wait_for_selector("table.models td:has-text('sim-reasoning')")
    assert "32768" in pg.inner_text("table.models")
    # Chat through it.
    pg.goto(server.url + "/")
    pg.wait_for_selector("#conn-state.ok")
    pg.select_option("#endpoint", label="Standalone sim")
    set_model(pg, "sim-fast")  # an exact model id, so its cached prices apply
    send(pg, "Hello sim")
    pg.wait_for_selector(f"{ASSISTANT}.status-complete")
    assert "Hello sim" in pg.inner_text(f"{ASSISTANT} .answer")
    reqs = [r for r in fresh_sim.requests() if r["path"].endswith("/chat/completions")]
    assert len(reqs) == 1 and reqs[0]["auth_present"]
    # Cost is computed from the cached prices.
    cost = pg.locator(".metric[data-metric='cost'] dd").text_content()
    assert cost.startswith("$")


def test_upstream_429_is_shown_clearly_and_the_message_stays(server, page) -> None:  # noqa: ANN001
    pg = page
    create_first_account(pg, server)
    pg.wait_for_selector("#conn-state.ok")
    set_model(pg, "sim-fast?fault=429")
    send(pg, "Please answer")
    pg.wait_for_selector(f"{ASSISTANT}.status-error .error-box")
    box = pg.inner_text(f"{ASSISTANT} .error-box")
    assert "HTTP 429" in box
    assert "rate" in box.lower()
    assert "request id" in box
    assert "Traceback" not in pg.content()
    retry = pg.locator(f"{ASSISTANT} button.retry")
    assert retry.is_disabled()  # counting down Retry-After
    assert re.search(r"in \d+ s", retry.inner_text())
    assert pg.inner_text(".msg-user .user-text") == "Please answer"
    # After the countdown, Retry runs the turn again (now healthy).
    set_model(pg, "sim-fast?ttft_ms=5&delay_ms=1&length=10")
    pg.fill("#content", "")
    pg.wait_for_function("() => !document.querySelector('.msg-assistant button.retry').disabled", timeout=12_000)
    pg.evaluate("document.querySelector('#model').dispatchEvent(new Event('change'))")
    # Retry uses the settings panel (issue 7 item 7): now the healthy model, so it succeeds.
    retry.click()
    pg.wait_for_selector(f"{ASSISTANT}.status-complete")
    assert pg.locator(ASSISTANT).count() == 1  # the retry replaced the failed answer in place
    assert "2/2" in pg.inner_text(f"{ASSISTANT} .siblings")
    sent = [r for r in server.sim_requests() if r["path"].endswith("/chat/completions")]
    assert sent[-1]["body"]["model"] == "sim-fast?ttft_ms=5&delay_ms=1&length=10"


def test_stop_keeps_the_partial_answer(server, page) -> None:  # noqa: ANN001
    pg = page
    create_first_account(pg, server)
    pg.wait_for_selector("#conn-state.ok")
    set_model(pg, "sim-fast?ttft_ms=10&delay_ms=40&length=500&reasoning=0")
    send(pg, "Go long")
    pg.wait_for_selector(f"{ASSISTANT}.status-streaming.has-tokens")
    pg.wait_for_timeout(600)
    pg.click(f"{ASSISTANT} button.stop")
    pg.wait_for_selector(f"{ASSISTANT}.status-stopped")
    shown = pg.inner_text(f"{ASSISTANT} .answer")
    assert shown.strip()
    stored = server.query("select content, status from chat_message where role='assistant'")[0]
    assert stored[1] == "stopped" and len(stored[0]) > 0
    assert "Stopped" in pg.inner_text(f"{ASSISTANT}")
