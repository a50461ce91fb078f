"""Issue 10, markdown rendered while it streams, in Chromium over the live daphne server.

A scripted upstream (an OpenAI-style chat completions stream, standard library only) sends a
≈2,000-token markdown answer with every block type in small chunks and holds still at chosen
points (inside an open fence, inside a half link, inside a half image), so the page can be
checked at those checkpoints:

- a table is a ``<table>`` before the answer ends; an open fence is a ``<pre>``;
- completed blocks are never re-created (a MutationObserver on the answer element);
- a half link shows its text and never an ``<a>`` with a truncated href; a half image shows
  nothing; the complete image is a placeholder link and the image host gets no request;
- the streamed blocks equal the blocks of the final page (after a reload), one by one;
- an Arabic paragraph's direction resolves to rtl; a long URL and a long hash do not widen
  the page (at 1280 and 375 px).
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.conftest import create_first_account, free_port
from tests.test_ui_browser import shot

pytestmark = [pytest.mark.browser]

PAUSE = "⏸"  # the upstream holds still here (not sent)
HOLD_S = 1.6
LONG_URL = "https://example.org/" + "a1b2c3d4e5" * 30
LONG_HASH = "f" * 300


def document(img_url: str) -> str:
    """The answer: every block type, with pauses at the checkpoints."""
    para = ("The relay streams tokens and the page renders blocks as they close, so a long answer "
            "costs the same per frame at its end as at its start. ")
    parts = [
        "# A long answer\n\n",
        para * 3 + "\n\n",
        "## Lists\n\n",
        "".join(f"- item {i} with *emphasis* and `code {i}`\n" for i in range(12)) + "\n",
        "".join(f"{i}. step {i} of the plan\n" for i in range(1, 9)) + "\n",
        "> A quote that spans\n> two lines.\n\n",
        "| model | TTFT | tok/s |\n|:--|--:|:-:|\n" + "".join(f"| m{i} | {100 + i} ms | {40 + i} |\n" for i in range(10)) + "\n",
        para * 2 + "\n\n",
        "```python\ndef stream(tokens):\n    for t in tokens:\n" + PAUSE + "        yield t\n```\n\n",
        "See [the docs](https://exa" + PAUSE + "mple.org/docs) for more.\n\n",
        "A picture: ![a cat](" + img_url[: len(img_url) // 2] + PAUSE + img_url[len(img_url) // 2 :] + ")\n\n",
        "مرحبا بالعالم، هذه فقرة باللغة العربية تكتب من اليمين إلى اليسار.\n\n",
        "A long URL: " + LONG_URL + "\n\n",
        "A long hash: " + LONG_HASH + "\n\n",
        "---\n\n",
        (para * 4 + "\n\n") * 6,
        "### The end\n\nDone.",
    ]
    return "".join(parts)


class Upstream:
    """An OpenAI-style upstream on loopback: ``/v1/models``, ``/v1/chat/completions`` (streams
    :func:`document` in 12-character chunks, 12 ms apart, holding ``HOLD_S`` at each pause)
    and an image host path ``/img/…`` that counts its requests."""

    def __init__(self) -> None:
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.img_url = f"http://127.0.0.1:{self.port}/img/cat-picture-from-the-model.png"
        self.image_requests = 0
        self.text = document(self.img_url)
        up = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # noqa: ANN002
                pass

            def _json(self, obj: object) -> None:
                body = json.dumps(obj).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:  # noqa: N802
                if self.path.startswith("/img/"):
                    up.image_requests += 1
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self._json({"object": "list", "data": [{"id": "md-doc", "object": "model", "created": 0, "owned_by": "test"}]})

            def do_POST(self) -> None:  # noqa: N802
                n = int(self.headers.get("Content-Length", "0"))
                self.rfile.read(n)
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()

                def data(obj: object) -> None:
                    self.wfile.write(b"data: " + json.dumps(obj).encode() + b"\n\n")
                    self.wfile.flush()

                base = {"id": "chatcmpl-md", "object": "chat.completion.chunk", "created": 0, "model": "md-doc"}
                data({**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]})
                for k, piece in enumerate(up.text.split(PAUSE)):
                    if k:
                        time.sleep(HOLD_S)
                    for i in range(0, len(piece), 12):
                        data({**base, "choices": [{"index": 0, "delta": {"content": piece[i : i + 12]}, "finish_reason": None}]})
                        time.sleep(0.012)
                data({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
                data({**base, "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 2000, "total_tokens": 2009}})
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

        self.httpd = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def upstream():  # noqa: ANN201
    u = Upstream()
    yield u
    u.close()


OBSERVE = """() => {
  const t = document.querySelector('.msg-assistant .answer');
  window.__mo = {added: 0, removed: 0};
  new MutationObserver(rs => rs.forEach(r => {
    r.addedNodes.forEach(n => { if (n.nodeType === 1 && n.classList.contains('mdb')) window.__mo.added++; });
    r.removedNodes.forEach(n => { if (n.nodeType === 1) window.__mo.removed++; });
  })).observe(t, {childList: true});
  window.__badHref = [];
  new MutationObserver(() => t.querySelectorAll('a[href]').forEach(a => {
    const h = a.getAttribute('href');
    if (h.startsWith('https://exa') && h !== 'https://example.org/docs') window.__badHref.push(h);
    if (h.includes('/img/') && !h.endsWith('.png')) window.__badHref.push(h);
  })).observe(t, {childList: true, subtree: true, characterData: true});
  return t.id;
}"""

BLOCKS = "() => Array.from(document.querySelectorAll('.msg-assistant .answer > .mdb')).map(b => b.outerHTML)"
STREAMING = ".msg-assistant.status-streaming"


def test_a_long_markdown_answer_streams_rendered_and_ends_equal_to_the_final_page(server, page, upstream) -> None:  # noqa: ANN001
    pg = page
    pg.set_viewport_size({"width": 1280, "height": 860})
    create_first_account(pg, server)
    pg.goto(server.url + "/endpoints/new/")
    pg.fill("#id_name", "Scripted markdown")
    pg.fill("#id_base_url", upstream.base_url)
    pg.fill("#id_default_model", "md-doc")
    pg.click("button:has-text('Save endpoint')")
    pg.wait_for_url("**/endpoints/")
    pg.goto(server.url + "/")
    pg.wait_for_selector("#conn-state.ok")
    pg.select_option("#endpoint", label="Scripted markdown")
    assert pg.input_value("#model") == "md-doc"
    pg.fill("#content", "Write the long answer")
    pg.press("#content", "Enter")
    pg.wait_for_selector(f"{STREAMING}.has-tokens")
    pg.evaluate(OBSERVE)
    # Checkpoint 1: the table has closed (the text is inside the code fence now) and is a
    # <table> while the answer still streams; the open fence shows as a <pre>.
    pg.wait_for_selector(f"{STREAMING} .answer .md-open pre code", timeout=20_000)
    assert pg.locator(f"{STREAMING} .answer table").count() == 1
    assert pg.locator(f"{STREAMING} .answer table tbody tr").count() == 10
    assert "def stream(tokens):" in pg.inner_text(f"{STREAMING} .answer .md-open pre")
    assert "```" not in pg.inner_text(f"{STREAMING} .answer")
    # Checkpoint 2: half a link shows its text, no "[text](" and no <a> yet.
    pg.wait_for_function(
        "() => { const o = document.querySelector('.msg-assistant.status-streaming .answer .md-open');"
        " return o && o.textContent.includes('the docs'); }", timeout=20_000)
    open_html = pg.inner_html(f"{STREAMING} .answer .md-open")
    assert "<a" not in open_html and "[the docs](" not in open_html and "https://exa" not in open_html
    # Checkpoint 3: half an image shows nothing (no raw "![", no <img>, no link yet).
    pg.wait_for_function(
        "() => { const o = document.querySelector('.msg-assistant.status-streaming .answer .md-open');"
        " return o && o.textContent.includes('A picture:'); }", timeout=20_000)
    pg.wait_for_timeout(300)
    open_html = pg.inner_html(f"{STREAMING} .answer .md-open")
    assert "![" not in open_html and "<img" not in open_html and "/img/" not in open_html
    # The end: every block rendered, nothing re-created on the way, no truncated href.
    pg.wait_for_selector(".msg-assistant.status-complete", timeout=30_000)
    mo = pg.evaluate("() => window.__mo")
    assert mo["removed"] == 0, mo
    assert mo["added"] >= 20, mo
    assert pg.evaluate("() => window.__badHref") == []
    assert pg.locator(".msg-assistant .answer img").count() == 0
    link = pg.locator(".msg-assistant .answer a:has-text('[image: a cat]')")
    assert link.count() == 1 and link.get_attribute("href") == upstream.img_url
    assert pg.locator(".msg-assistant .answer a[href='https://example.org/docs']").inner_text() == "the docs"
    assert upstream.image_requests == 0
    assert pg.inner_html(".msg-assistant .answer .md-open") == ""
    streamed = pg.evaluate(BLOCKS)
    # Right to left, wrapping, no sideways scroll.
    rtl = pg.evaluate(
        "() => { const p = Array.from(document.querySelectorAll('.msg-assistant .answer .mdb'))"
        ".find(b => b.textContent.includes('مرحبا')); return p && getComputedStyle(p.firstElementChild).direction; }")
    assert rtl == "rtl"
    for width in (1280, 375):
        pg.set_viewport_size({"width": width, "height": 800})
        sw, iw = pg.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
        assert sw <= iw, (width, sw, iw)
        wide = pg.evaluate(
            "() => { const a = document.querySelector('.msg-assistant'); const r = a.getBoundingClientRect();"
            " return Array.from(a.querySelectorAll('.mdb > p')).filter(p => p.getBoundingClientRect().right > r.right + 1).length; }")
        assert wide == 0, width
        pre = pg.evaluate("() => { const p = document.querySelector('.msg-assistant .answer pre'); return [p.scrollWidth, p.clientWidth, getComputedStyle(p).overflowX]; }")
        assert pre[2] == "auto", pre
    # The README's pictures: the answer at 1280 and 390 px wide.
    pg.evaluate("() => { const t = document.getElementById('thread'); const tb = t.querySelector('.answer table'); t.scrollTop = tb.offsetTop - 420; }")
    pg.set_viewport_size({"width": 390, "height": 844})
    pg.evaluate("() => { const t = document.getElementById('thread'); t.scrollTop = t.querySelector('.answer pre').closest('.mdb').offsetTop - 160; }")
    shot(pg, "ui-phone")
    pg.set_viewport_size({"width": 1280, "height": 860})
    pg.evaluate("() => { const t = document.getElementById('thread'); t.scrollTop = t.querySelector('.answer table').closest('.mdb').offsetTop - 300; }")
    shot(pg, "ui-desktop")
    # The final page (a reload renders from the stored answer) has the same blocks.
    pg.reload()
    pg.wait_for_selector(".msg-assistant.status-complete")
    final = pg.evaluate(BLOCKS)
    assert len(final) == len(streamed)
    for i, (a, b) in enumerate(zip(streamed, final, strict=True)):
        assert a == b, (i, a[:300], b[:300])
    assert upstream.image_requests == 0
