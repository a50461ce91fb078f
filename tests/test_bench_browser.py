"""The browser phase's MutationObserver (``bench.browser.OBSERVER_JS``) on hand-made pages in
Chromium (no server): appending blocks or re-rendering only the open block re-creates nothing;
re-rendering completed blocks, or the whole answer, counts every node of the completed blocks;
the final swap counts apart. Counts are exact (no timing)."""

from __future__ import annotations

from typing import Any

import pytest

from bench.browser import OBSERVER_JS

pytestmark = pytest.mark.browser

PAGE = """<div id="thread"><div class="msg" id="m1"><div class="meta">Assistant · 3 tokens</div>
<div id="ans"></div><div class="metrics">TTFT 100 ms</div></div></div><form id="composer"></form>"""


def frame(page: Any, js: str) -> None:
    """Run ``js`` as one task (one frame), then let the observer's callback run."""
    page.evaluate(f"() => {{ const root = document.getElementById('ans'); {js} }}")
    page.evaluate("() => new Promise(r => setTimeout(r, 0))")


def start(page: Any) -> None:
    page.set_content(PAGE)
    page.evaluate(OBSERVER_JS)
    page.evaluate("window.__bench.arm()")


def report(page: Any) -> dict[str, Any]:
    return page.evaluate("window.__bench.report()")


def test_appending_blocks_and_re_rendering_the_open_one_re_creates_nothing(page: Any) -> None:
    start(page)
    frame(page, "root.insertAdjacentHTML('beforeend', '<p>ref-1: kalvex</p>')")
    frame(page, "root.lastElementChild.replaceWith(Object.assign(document.createElement('p'), {textContent: 'ref-1: kalvex morvex'}))")
    frame(page, "root.insertAdjacentHTML('beforeend', '<pre><code>tessvex()</code></pre>')")
    frame(page, "root.lastElementChild.innerHTML = '<code>tessvex()\\ndravex()</code>'")
    frame(page, "root.insertAdjacentHTML('beforeend', '<ul><li>ulvex</li></ul>')")
    frame(page, "root.lastElementChild.append(Object.assign(document.createElement('li'), {textContent: 'corvex'}))")
    frame(page, "document.querySelector('#m1 .metrics').textContent = 'TTFT 100 ms · 7 tokens'")
    r = report(page)
    assert r["recreated"] == 0 and r["finalRemoved"] == 0
    assert r["root"] == "div#ans"
    assert r["additions"] >= 5


def test_re_rendering_the_whole_answer_counts_every_completed_block(page: Any) -> None:
    start(page)
    blocks = ["<p>ref-1: kalvex</p>", "<pre><code>morvex()</code></pre>", "<p>tessvex <b>dravex</b></p>", "<p>ulvex</p>"]
    for k in range(1, 5):
        frame(page, f"root.innerHTML = {''.join(blocks[:k])!r}")
    r = report(page)
    # frame 2 re-renders only the open block; frame 3 re-creates the completed <p> + text
    # (2 nodes); frame 4 that <p> again and <pre><code> + text (2 + 3)
    assert r["recreated"] == 2 + 5
    assert r["recreatedEvents"] == 2


def test_a_change_inside_a_completed_block_counts(page: Any) -> None:
    start(page)
    frame(page, "root.insertAdjacentHTML('beforeend', '<p>ref-1: <span>kalvex</span> morvex</p>')")
    frame(page, "root.insertAdjacentHTML('beforeend', '<p>tessvex</p>')")
    frame(page, "root.firstElementChild.querySelector('span').remove()")
    assert report(page)["recreated"] == 2  # the span and its text


def test_replacing_the_answer_element_while_streaming_counts_its_completed_blocks(page: Any) -> None:
    start(page)
    frame(page, "root.insertAdjacentHTML('beforeend', '<p>ref-1: kalvex</p><p>morvex</p><p>tess</p>')")
    frame(page, "root.outerHTML = '<div id=\"ans\"><p>ref-1: kalvex</p><p>morvex</p><p>tessvex</p></div>'")
    r = report(page)
    assert r["recreated"] == 4  # two completed <p> with their text; the open one is not counted
    assert r["rootResets"] == 1


def test_the_final_swap_counts_apart(page: Any) -> None:
    start(page)
    frame(page, "root.insertAdjacentHTML('beforeend', 'ref-1: kalvex ')")
    frame(page, "root.insertAdjacentHTML('beforeend', 'morvex ')")
    frame(page, "document.getElementById('m1').outerHTML = '<div class=\"msg\" id=\"m1\"><div id=\"ans\"><p>ref-1: kalvex morvex vexend.</p></div></div>'")
    r = report(page)
    assert r["recreated"] == 0
    assert r["finalRemoved"] == 2  # the two streamed text nodes
    assert r["complete"] is True
