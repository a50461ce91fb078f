"""The open block of a streaming answer is rendered in the browser with the vendored markdown-it
and DOMPurify under the server's rules (issue 10; DESIGN.md "Rendering"): while the block is
still open, a model-supplied image never loads, raw HTML stays text, a javascript: link is not a
link, links get rel="noopener noreferrer nofollow"; the closed block the server sends replaces
it with the same elements.
"""

from __future__ import annotations

import pytest

from tests.conftest import create_first_account

pytestmark = [pytest.mark.browser]

PROMPT = ("[docs](https://example.com/d) ![pic](https://example.com/p.png) <img src=x onerror=alert(1)> "
          "**bold** [x](javascript:alert(1))")
OPEN = ".msg-assistant.status-streaming .answer .md-open"


def shape(pg, selector: str) -> dict:  # noqa: ANN001
    return pg.eval_on_selector(selector, """el => ({
        imgs: el.querySelectorAll('img').length,
        handlers: [...el.querySelectorAll('*')].filter(n => [...n.attributes].some(a => a.name.startsWith('on'))).length,
        links: [...el.querySelectorAll('a')].map(a => [a.getAttribute('href'), a.getAttribute('rel')]),
        strong: [...el.querySelectorAll('strong')].map(s => s.textContent),
        text: el.textContent,
    })""")


def test_the_open_block_is_rendered_and_sanitized_while_it_streams(server, page) -> None:  # noqa: ANN001
    pg = page
    loaded: list[str] = []
    pg.on("request", lambda r: loaded.append(r.url) if "example.com" in r.url or r.url.endswith("/x") else None)
    create_first_account(pg, server)
    pg.wait_for_selector("#conn-state.ok")
    pg.fill("#model", "sim-fast?delay_ms=250&length=24&ttft_ms=50")
    pg.fill("#content", PROMPT)
    pg.press("#content", "Enter")
    # The echo paragraph is the open block once "**bold**" arrived and before the answer ends.
    pg.wait_for_function(f"""() => {{ const el = document.querySelector('{OPEN}');
        return el && el.querySelector('strong') && el.textContent.includes('<img'); }}""", timeout=30_000)
    live = shape(pg, OPEN)
    assert live["imgs"] == 0 and live["handlers"] == 0
    assert live["strong"] == ["bold"]
    assert "<img src=x onerror=alert(1)>" in live["text"]  # raw HTML shows as text
    assert ["https://example.com/d", "noopener noreferrer nofollow"] in live["links"]
    assert all(not (href or "").startswith("javascript:") for href, _ in live["links"])
    pg.wait_for_selector(".msg-assistant.status-complete", timeout=30_000)
    final = shape(pg, ".msg-assistant .answer")
    assert final["imgs"] == 0 and final["handlers"] == 0 and "bold" in final["strong"]
    assert ["https://example.com/d", "noopener noreferrer nofollow"] in final["links"]
    assert all(not (href or "").startswith("javascript:") for href, _ in final["links"])
    assert loaded == []  # no model-supplied image (or <img src=x>) was ever fetched
