"""Durable turns in a real browser (issue 4, "Lifecycle").

A turn belongs to the server, not to the tab: reloads at fixed points and on a seeded random
schedule, a second tab and a second browser of the same user, Stop (button and Esc),
regenerate with 1/2 navigation, edit and branch, ``kill -9`` mid-turn, admission control, the
"finished elsewhere" notice and a send repeated or queued while the socket was down.

Every page records, from an init script, each state of a streaming answer it showed (DOM id,
``data-end`` and the raw text the page holds from offset 0, ``pgStream``) and every delta the
offset guard found out of place (a gap). At the end each recorded state must be an exact prefix
of the simulator's text of the same length as its ``data-end`` (nothing missing, nothing
twice), no gap may have happened, the raw text (``/m/<id>/raw/``) == stored content == the
simulator's text, emoji, CRLF and U+2028 included, and the rendered answer equals the server's
rendering of the stored text, block by block.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import time
import uuid
from typing import Any

import pytest

from chat.rendering import render_blocks
from tests.conftest import create_first_account, login
from tests.helpers import chat_requests, sim_text

pytestmark = [pytest.mark.browser]

PASSWORD = "correct-horse-9"
ASSISTANT = ".msg-assistant"
FAST = "sim-fast?ttft_ms=20&delay_ms=2&length=80&reasoning=0"
# 25 tokens per second: 1 s of its pace is 25 tokens.
SLOW_PACE_TOKENS_PER_S = 25
SLOW = f"sim-fast?ttft_ms=20&delay_ms={1000 // SLOW_PACE_TOKENS_PER_S}&length=600&reasoning=0"

RECORDER = r"""
(() => {
  const rec = window.__rec = {drops: [], seen: [], frames: 0};
  const last = {};
  const look = () => {
    document.querySelectorAll(".msg-assistant.status-streaming .answer").forEach((a) => {
      const st = window.pgStream && window.pgStream(a);
      if (!st || st.base !== 0) return;
      const id = a.closest(".msg-assistant").id;
      if (last[id] === st.end) return;
      last[id] = st.end;
      rec.seen.push([id, st.end, st.raw]);
    });
    if (window.__pgGaps && window.__pgGaps.length) { rec.drops.push(...window.__pgGaps); window.__pgGaps = []; }
  };
  document.addEventListener("pg:text", () => { rec.frames += 1; look(); }, true);
  document.addEventListener("htmx:wsAfterMessage", look, true);
  document.addEventListener("DOMContentLoaded", () => setTimeout(look, 0));
})();
"""


# ---- helpers -----------------------------------------------------------------------------


class Watch:
    """What the pages showed of streaming answers (collected before every reload and close)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, int, str]] = []  # (page label, dom id, data-end, text)
        self.drops: list[Any] = []

    def collect(self, pg, label: str = "") -> None:  # noqa: ANN001
        rec = pg.evaluate("window.__rec || null")
        if rec is None:
            return
        self.seen += [(label, mid, end, text) for mid, end, text in rec["seen"]]
        self.drops += [(label, *d) for d in rec["drops"]]
        pg.evaluate("window.__rec.seen = []; window.__rec.drops = []")

    def states_of(self, mid: str) -> list[tuple[str, int, str]]:
        return [(label, end, text) for label, m, end, text in self.seen if m == f"m-{mid}"]

    def check(self, mid: str, expected: str) -> list[tuple[str, int, str]]:
        """Every state shown of ``mid`` is an exact prefix of ``expected`` whose length (code
        points) equals the element's ``data-end``; the guard never dropped a delta."""
        assert not self.drops, (
            f"the offset guard dropped deltas (a gap or a repeat): {self.drops[:5]}"
        )
        states = self.states_of(mid)
        for label, end, text in states:
            assert len(text) == end, f"{label}: data-end {end} but {len(text)} characters shown"
            assert expected.startswith(text), (
                f"{label}: shown text is not a prefix of the simulator's text at {first_diff(text, expected)}: "
                f"{text[max(0, first_diff(text, expected) - 20) : first_diff(text, expected) + 20]!r}"
            )
        return states


def first_diff(a: str, b: str) -> int:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return min(len(a), len(b))


def new_page(context, watch_errors: list[str]):  # noqa: ANN001, ANN201
    pg = context.new_page()
    pg.set_default_timeout(20_000)
    pg.on("pageerror", lambda e: watch_errors.append(str(e)))
    return pg


def start(page, server) -> int:  # noqa: ANN001
    """First account, recorder installed, a connected conversation page; its id."""
    page.context.add_init_script(RECORDER)
    create_first_account(page, server, password=PASSWORD)
    page.wait_for_selector("#conn-state.ok")
    return conversation_id(page)


def conversation_id(pg) -> int:  # noqa: ANN001
    return int(re.search(r"/c/(\d+)/", pg.url)[1])


def send(pg, text: str, model: str | None = None) -> None:  # noqa: ANN001
    if model is not None:
        pg.fill("#model", model)
    pg.fill("#content", text)
    pg.press("#content", "Enter")


def last_assistant_id(pg) -> str:  # noqa: ANN001
    return pg.locator(ASSISTANT).last.get_attribute("id").removeprefix("m-")


def wait_new_assistant(pg, before: set[str]) -> str:  # noqa: ANN001
    """The DOM id (a UUID) of an assistant message that was not on the page before."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        ids = set(pg.eval_on_selector_all(ASSISTANT, "els => els.map(e => e.id.slice(2))"))
        new = ids - before
        if new:
            return new.pop()
        pg.wait_for_timeout(20)
    raise AssertionError("no new answer appeared")


def assistant_ids(pg) -> set[str]:  # noqa: ANN001
    return set(pg.eval_on_selector_all(ASSISTANT, "els => els.map(e => e.id.slice(2))"))


def raw_text(pg, mid: str) -> str:  # noqa: ANN001
    """The exact text of a message as Copy gets it (``/m/<id>/raw/``)."""
    return pg.evaluate(f"fetch('/m/{mid}/raw/', {{credentials: 'same-origin'}}).then(r => r.text())")


def shown(pg, mid: str) -> list:  # noqa: ANN001
    """[data-end, raw text from offset 0] of a streaming answer as the page holds it."""
    return pg.evaluate(
        f"(() => {{ const a = document.querySelector('#m-{mid} .answer'); const st = pgStream(a);"
        f" return [st.end, st.base === 0 ? st.raw : null]; }})()"
    )


def rendered_blocks(pg, mid: str) -> list[str]:  # noqa: ANN001
    """The outerHTML of each rendered block of an answer, as the page shows it."""
    return pg.eval_on_selector_all(f"#m-{mid} .answer > .mdb", "els => els.map(e => e.outerHTML)")


def status_of(pg, mid: str) -> str:  # noqa: ANN001
    return pg.get_attribute(f"#m-{mid}", "data-status")


def wait_status(pg, mid: str, status: str, timeout: float = 30_000) -> None:  # noqa: ANN001
    pg.wait_for_selector(f"#m-{mid}.status-{status}", timeout=timeout)


def stored(server, mid: str, *, missing_ok: bool = False) -> tuple[str, str]:  # noqa: ANN001
    """(content, status) of a message row. A turn's rows are written beside its upstream
    request, a moment after the page shows it: ``missing_ok`` gives ("", "missing") then."""
    rows = server.query(
        "select content, status from chat_message where id = ?", (uuid.UUID(mid).hex,)
    )
    if not rows and missing_ok:
        return ("", "missing")
    assert rows, f"no row for {mid}"
    return rows[0]


def wait_stored(server, mid: str, pred, timeout: float = 30.0, pg=None) -> tuple[str, str]:  # noqa: ANN001
    """Poll the row until ``pred(row)``; with ``pg``, wait through Playwright so its event
    handlers (websocket routes) keep running meanwhile (sync Playwright dispatches only then)."""
    deadline = time.monotonic() + timeout
    while True:
        row = stored(server, mid, missing_ok=True)
        if row[1] != "missing" and pred(row):
            return row
        if time.monotonic() > deadline:
            raise AssertionError(f"row {mid} never matched: {row[1]}, {len(row[0])} chars")
        if pg is not None:
            pg.wait_for_timeout(20)
        else:
            time.sleep(0.02)


def request_for(server, user_text: str, *, nth: int = -1, finished: bool = True) -> dict:  # noqa: ANN001
    """The simulator's record of the (nth) request whose last message is ``user_text``."""
    deadline = time.monotonic() + 15
    while True:
        recs = [r for r in chat_requests(server.sim_requests()) if last_user(r) == user_text]
        if recs and (not finished or recs[nth]["ended_at"] is not None):
            return recs[nth]
        if time.monotonic() > deadline:
            raise AssertionError(f"no finished simulator request for {user_text!r}")
        time.sleep(0.05)


def last_user(record: dict) -> str | None:
    msgs = [m for m in record["body"].get("messages", []) if m["role"] == "user"]
    return msgs[-1]["content"] if msgs else None


def messages_sent(record: dict) -> list[tuple[str, str]]:
    return [(m["role"], m["content"]) for m in record["body"]["messages"]]


def page_state(pg) -> list[str]:  # noqa: ANN001
    return pg.evaluate(
        "Array.from(document.querySelectorAll('.msg')).map(e => e.id + ' ' + e.className + ' data-end='"
        " + (e.querySelector('.answer') && e.querySelector('.answer').getAttribute('data-end')))"
        " .concat([document.getElementById('conn-state').className])"
    )


def rows_state(server) -> list[tuple]:  # noqa: ANN001
    return server.query(
        "select id, role, status, length(content) from chat_message order by created_at"
    )


def assert_hard_cases(text: str) -> None:
    assert "\r\n" in text and "\u2028" in text and "👩\u200d💻" in text and "你好" in text, text[
        :200
    ]


def assert_exact(server, pages, mid: str, user_text: str, watch: Watch | None = None) -> str:  # noqa: ANN001
    """Complete everywhere, and page == stored == simulator, exactly; returns the text."""
    expected = sim_text(request_for(server, user_text))
    assert_hard_cases(expected)
    content, status = wait_stored(
        server, mid, lambda r: r[1] != "streaming", pg=pages[0] if pages else None
    )
    assert status == "complete"
    assert content == expected, f"stored text differs at {first_diff(content, expected)}"
    for pg in pages:
        try:
            wait_status(pg, mid, "complete")
        except Exception as exc:
            exc.add_note(f"page shows: {page_state(pg)}; rows: {rows_state(server)}")
            raise
        got = raw_text(pg, mid)
        assert got == expected, f"{pg.url}: page text differs at {first_diff(got, expected)}"
        # The answer on the page is the server's rendering of the stored text, block by block
        # (streamed blocks are never re-rendered at the end; a reload renders the same blocks).
        want = pg.evaluate(
            "html => { const t = document.createElement('template'); t.innerHTML = html;"
            " return [...t.content.children].map(e => e.outerHTML); }",
            "".join(render_blocks(expected)),
        )
        assert rendered_blocks(pg, mid) == want, f"{pg.url}: rendered blocks differ from the server's"
    if watch is not None:
        for pg in pages:
            watch.collect(pg, pg.url)
        watch.check(mid, expected)
    return expected


def reload(pg, watch: Watch, label: str) -> None:  # noqa: ANN001
    watch.collect(pg, label)
    pg.reload(wait_until="commit")


# ---- 1. reload mid-turn ------------------------------------------------------------------


def test_reload_before_the_first_token(server, page) -> None:  # noqa: ANN001
    watch = Watch()
    start(page, server)
    send(
        page,
        "Reload before the first token",
        "sim-fast?ttft_ms=3500&delay_ms=10&length=120&reasoning=0",
    )
    mid = wait_new_assistant(page, set())
    page.wait_for_timeout(400)
    assert status_of(page, mid) == "streaming" and shown(page, mid) == [0, ""]
    reload(page, watch, "before first token")
    # After the reload: the running turn (still waiting), then its tokens live.
    page.wait_for_selector(f"#m-{mid}.status-streaming .waiting")
    page.wait_for_selector("#conn-state.ok")
    assert shown(page, mid) == [0, ""], (
        "the reload happened after the first token; make ttft_ms larger"
    )
    page.wait_for_function(
        f"() => Number(document.querySelector('#m-{mid} .answer')?.getAttribute('data-end')) > 0",
        timeout=10_000,
    )
    assert_exact(server, [page], mid, "Reload before the first token", watch)
    assert len({end for _, end, _ in watch.states_of(mid)}) > 3, (
        "tokens arrived live after the reload"
    )


def test_reload_mid_stream_after_a_partial_save(server, page) -> None:  # noqa: ANN001
    watch = Watch()
    start(page, server)
    text = "Reload mid-stream"
    send(page, text, "sim-fast?ttft_ms=50&delay_ms=15&length=480&reasoning=0")  # about 7 s
    mid = wait_new_assistant(page, set())
    # The first partial save (about 2 s in) puts text in the row: reload right then.
    partial, _ = wait_stored(server, mid, lambda r: len(r[0]) > 0, timeout=10)
    reload(page, watch, "right after a partial save")
    page.wait_for_selector(f"#m-{mid}.status-streaming")
    end, now = shown(page, mid)
    assert end >= len(partial) > 0 and now.startswith(partial), (
        "the reloaded page starts from the live text"
    )
    page.wait_for_selector("#conn-state.ok")
    page.wait_for_function(
        f"() => Number(document.querySelector('#m-{mid} .answer').getAttribute('data-end')) > {end}"
    )
    # A second reload between partial saves (the turn may have ended under load: still exact).
    page.wait_for_timeout(1000)
    reload(page, watch, "between partial saves")
    page.wait_for_selector(f"#m-{mid}")
    expected = assert_exact(server, [page], mid, text, watch)
    states = watch.check(mid, expected)
    assert any(0 < end < len(expected) for _, end, _ in states)


def test_reload_after_the_final_write_before_the_final_frame(server, page) -> None:  # noqa: ANN001
    """The final frame is held back on its way to the page (a websocket route) until the row is
    final; then the tab reloads. Also: reload the moment the row turns final (unheld)."""
    watch = Watch()
    held: dict[str, Any] = {"mid": None, "frames": []}

    def route(ws) -> None:  # noqa: ANN001
        upstream = ws.connect_to_server()

        def from_server(msg: str | bytes) -> None:
            if (
                held["mid"]
                and isinstance(msg, str)
                and f'data-mid="{held["mid"]}" data-status="complete" data-final="1"' in msg
            ):
                held["frames"].append(msg)
                return
            ws.send(msg)

        upstream.on_message(from_server)
        ws.on_message(lambda msg: upstream.send(msg))

    page.route_web_socket(re.compile(r"/ws/c/\d+/$"), route)
    start(page, server)
    text = "Hold the final frame"
    send(page, text, "sim-fast?ttft_ms=20&delay_ms=5&length=200&reasoning=0")
    mid = wait_new_assistant(page, set())
    held["mid"] = mid
    wait_stored(server, mid, lambda r: r[1] == "complete", pg=page)
    deadline = time.monotonic() + 15
    while not held["frames"] and time.monotonic() < deadline:
        page.wait_for_timeout(50)  # the route forwards the backlog of deltas meanwhile
    assert held["frames"], "the final frame was sent to the page (and held)"
    page.wait_for_timeout(200)
    assert status_of(page, mid) == "streaming", "the page has not seen the final frame"
    expected = sim_text(request_for(server, text))
    assert shown(page, mid)[1] == expected, "every delta came before the final frame"
    held["mid"] = None
    reload(page, watch, "after final write, before final frame")
    assert_exact(server, [page], mid, text, watch)

    # Reload the moment the row turns final (the final frame may or may not have gone out).
    page.wait_for_selector("#conn-state.ok")
    before = assistant_ids(page)
    text2 = "Reload as it completes"
    send(page, text2, "sim-fast?ttft_ms=20&delay_ms=5&length=200&reasoning=0")
    mid2 = wait_new_assistant(page, before)
    wait_stored(server, mid2, lambda r: r[1] != "streaming", timeout=20, pg=page)
    reload(page, watch, "as it completes")
    assert_exact(server, [page], mid2, text2, watch)


HOLD_SOCKET = r"""
(() => {
  // While sessionStorage.holdWs is set, the page's websocket goes to a path the server refuses,
  // so the extension keeps retrying (close 1006) until the test lets it through.
  const Real = window.WebSocket;
  window.WebSocket = class extends Real {
    constructor(url, protocols) {
      super(sessionStorage.getItem("holdWs") ? url.replace("/ws/c/", "/ws/held/") : url, protocols);
    }
  };
})();
"""


def test_page_rendered_mid_turn_whose_socket_opens_after_the_end(server, page) -> None:  # noqa: ANN001
    """The reloaded page is rendered from the running turn's memory, but its socket connects only
    after the turn ended (the final frame went to the old socket): it must still end complete."""
    watch = Watch()
    page.context.add_init_script(HOLD_SOCKET)
    start(page, server)
    text = "Socket opens after the end"
    send(page, text, "sim-fast?ttft_ms=20&delay_ms=10&length=200&reasoning=0")
    mid = wait_new_assistant(page, set())
    page.wait_for_selector(f"#m-{mid}.has-tokens")
    page.evaluate("sessionStorage.setItem('holdWs', '1')")
    reload(page, watch, "rendered mid-turn, socket after the end")
    page.wait_for_selector(f"#m-{mid}.status-streaming.has-tokens")
    assert stored(server, mid)[1] == "streaming", "the page was rendered while the turn ran"
    wait_stored(server, mid, lambda r: r[1] == "complete")
    page.wait_for_timeout(300)  # the final frame has gone to the old socket
    assert status_of(page, mid) == "streaming"
    page.evaluate("sessionStorage.removeItem('holdWs')")
    page.wait_for_selector("#conn-state.ok")
    assert_exact(server, [page], mid, text, watch)


def test_reload_on_a_seeded_random_schedule(server, page) -> None:  # noqa: ANN001
    seed = int(os.environ.get("PLAYGROUND_TEST_SEED") or random.SystemRandom().randrange(1 << 30))
    print(f"random reload schedule: PLAYGROUND_TEST_SEED={seed}")
    rng = random.Random(seed)
    watch = Watch()
    try:
        start(page, server)
        for turn in range(2):
            text = f"Random reloads {turn}"
            before = assistant_ids(page)
            delay = rng.choice((5, 10, 15))
            send(
                page,
                text,
                f"sim-fast?ttft_ms={rng.choice((20, 400, 1200))}&delay_ms={delay}&length=240&reasoning=0",
            )
            mid = wait_new_assistant(page, before)
            schedule = sorted(
                rng.uniform(0.0, 240 * delay / 1000 + 0.5) for _ in range(rng.randint(2, 5))
            )
            t0 = time.monotonic()
            for i, at in enumerate(schedule):
                page.wait_for_timeout(max(0.0, at - (time.monotonic() - t0)) * 1000)
                reload(page, watch, f"turn {turn} reload {i} at {at:.2f} s")
                if rng.random() < 0.5:
                    page.wait_for_selector("#conn-state.ok")
            page.wait_for_selector(f"#m-{mid}")
            assert_exact(server, [page], mid, text, watch)
            page.wait_for_selector("#conn-state.ok")
    except BaseException as exc:
        exc.add_note(f"random reload schedule seed: PLAYGROUND_TEST_SEED={seed}")
        raise


# ---- 2. a second tab and a second browser ------------------------------------------------


def test_second_tab_and_second_browser_join_mid_turn(server, page, chromium) -> None:  # noqa: ANN001
    watch = Watch()
    errors: list[str] = []
    conv = start(page, server)
    other = chromium.new_context()
    other.add_init_script(RECORDER)
    try:
        browser2 = new_page(other, errors)
        login(browser2, server, "admin", PASSWORD)  # before the turn: logging in takes a moment
        text = "Watch from elsewhere"
        send(page, text, "sim-fast?ttft_ms=50&delay_ms=15&length=300&reasoning=0")
        mid = wait_new_assistant(page, set())
        page.wait_for_selector(f"#m-{mid}.has-tokens")
        tab2 = new_page(page.context, errors)
        tab2.goto(f"{server.url}/c/{conv}/")
        browser2.goto(f"{server.url}/c/{conv}/")
        for pg in (tab2, browser2):
            pg.wait_for_selector(f"#m-{mid}.status-streaming")
            end, now = shown(pg, mid)
            assert end > 0 and now, "a page opened mid-turn shows the text so far"
        for pg in (tab2, browser2):
            pg.wait_for_selector("#conn-state.ok")
        joined_at = {pg: shown(pg, mid)[0] for pg in (tab2, browser2)}
        for pg in (tab2, browser2):
            pg.wait_for_function(
                f"() => Number(document.querySelector('#m-{mid} .answer')?.getAttribute('data-end')) > {joined_at[pg]}"
                f" || document.querySelector('#m-{mid}.status-complete')"
            )
        expected = assert_exact(server, [page, tab2, browser2], mid, text, watch)
        for pg in (tab2, browser2):
            assert joined_at[pg] < len(expected), "joined mid-turn"
            assert status_of(pg, mid) == "complete"
        assert not errors, errors
    finally:
        other.close()


# ---- 3. Stop -----------------------------------------------------------------------------


def assert_stopped(server, pg, mid: str, user_text: str) -> str:  # noqa: ANN001
    wait_status(pg, mid, "stopped", timeout=10_000)
    rec = request_for(server, user_text)
    assert rec["disconnected"] is True and rec["outcome"] == "disconnected"
    assert rec["tokens_after_disconnect"] < SLOW_PACE_TOKENS_PER_S, rec["tokens_after_disconnect"]
    assert rec["tokens_written"] < 300, "stopped well before the end (600 tokens)"
    content, status = stored(server, mid)
    written = sim_text(rec)  # what the simulator wrote before it saw the connection close
    assert status == "stopped" and content
    assert written.startswith(content), (
        f"stored partial is not a prefix of the simulator's text at {first_diff(content, written)}"
    )
    assert raw_text(pg, mid) == content
    return content


def test_stop_with_the_button_and_with_esc(server, page) -> None:  # noqa: ANN001
    watch = Watch()
    start(page, server)
    send(page, "Stop me with the button", SLOW)
    a1 = wait_new_assistant(page, set())
    page.wait_for_selector(f"#m-{a1}.has-tokens")
    page.wait_for_timeout(600)
    page.click(f"#m-{a1} button.stop")
    stopped1 = assert_stopped(server, page, a1, "Stop me with the button")

    page.wait_for_selector("#conn-state.ok")
    before = assistant_ids(page)
    send(page, "Stop me with Esc", SLOW)
    a2 = wait_new_assistant(page, before)
    page.wait_for_selector(f"#m-{a2}.has-tokens")
    page.wait_for_timeout(600)
    page.keyboard.press("Escape")
    stopped2 = assert_stopped(server, page, a2, "Stop me with Esc")

    # The next answer has exactly its own text: no late token of a stopped turn.
    before = assistant_ids(page)
    send(page, "And now a full answer", FAST)
    a3 = wait_new_assistant(page, before)
    assert_exact(server, [page], a3, "And now a full answer", watch)
    page.wait_for_timeout(500)
    assert stored(server, a1) == (stopped1, "stopped") and stored(server, a2) == (
        stopped2,
        "stopped",
    )
    assert raw_text(page, a1) == stopped1 and raw_text(page, a2) == stopped2
    watch.collect(page)
    for mid, content in ((a1, stopped1), (a2, stopped2)):
        for label, end, t in watch.states_of(mid):
            assert content.startswith(t) and len(t) == end, label
    assert not watch.drops


# ---- 4. regenerate and 1/2 navigation ----------------------------------------------------


def test_regenerate_and_browse_versions(server, page) -> None:  # noqa: ANN001
    watch = Watch()
    start(page, server)
    text = "Regenerate this"
    # The first answer is stopped early, so the two versions differ.
    send(page, text, "sim-fast?ttft_ms=20&delay_ms=10&length=200&reasoning=0")
    a1 = wait_new_assistant(page, set())
    page.wait_for_selector(f"#m-{a1}.has-tokens")
    page.wait_for_timeout(300)
    page.click(f"#m-{a1} button.stop")
    wait_status(page, a1, "stopped")
    old_text, _ = stored(server, a1)
    assert old_text and raw_text(page, a1) == old_text
    assert page.locator(f"#m-{a1} .siblings").count() == 0

    page.click(f"#m-{a1} button.regenerate")
    a2 = wait_new_assistant(page, {a1})
    assert page.locator(f"#m-{a1}").count() == 0, "the new version is shown in place of the old one"
    assert page.inner_text(f"#m-{a2} .sib-pos") == "2/2"
    new_text = assert_exact(server, [page], a2, text, watch)
    # A Regenerate on the simulator asks for another take of the answer (issue 10).
    assert new_text != old_text and not new_text.startswith(old_text) and "(take 2)" in new_text
    assert page.inner_text(f"#m-{a2} .sib-pos") == "2/2"
    assert page.locator(ASSISTANT).count() == 1

    page.click(f"#m-{a2} .sib-prev")
    page.wait_for_selector(f"#m-{a1}")
    assert page.inner_text(f"#m-{a1} .sib-pos") == "1/2"
    assert raw_text(page, a1) == old_text and status_of(page, a1) == "stopped"
    assert page.locator(ASSISTANT).count() == 1
    page.click(f"#m-{a1} .sib-next")
    page.wait_for_selector(f"#m-{a2}")
    assert page.inner_text(f"#m-{a2} .sib-pos") == "2/2"
    assert raw_text(page, a2) == new_text
    # The view follows the chosen version after a reload too.
    page.reload()
    page.wait_for_selector(f"#m-{a2} .sib-pos")
    assert raw_text(page, a2) == new_text

    first, regen = [r for r in chat_requests(server.sim_requests()) if last_user(r) == text]
    assert messages_sent(regen) == messages_sent(first) == [("user", text)]
    assert {k: v for k, v in regen["body"].items() if k != "messages"} == {
        k: v for k, v in first["body"].items() if k != "messages"
    }


# ---- 5. edit and branch ------------------------------------------------------------------


def test_edit_and_send_makes_a_branch_and_sends_exactly_that_branch(server, page) -> None:  # noqa: ANN001
    watch = Watch()
    start(page, server)
    send(page, "First question", FAST)
    a1 = wait_new_assistant(page, set())
    first_answer = assert_exact(server, [page], a1, "First question", watch)
    send(page, "Second question", FAST)
    a2 = wait_new_assistant(page, {a1})
    old_answer = assert_exact(server, [page], a2, "Second question", watch)

    user2 = page.locator(".msg-user").nth(1)
    old_user_id = user2.get_attribute("id")
    user2.locator(".edit-open").click()
    user2.locator(".edit-form textarea").fill("Second question, edited")
    user2.locator(".edit-form button[value=resend]").click()
    a3 = wait_new_assistant(page, {a1, a2})
    new_answer = assert_exact(server, [page], a3, "Second question, edited", watch)
    assert new_answer != old_answer
    users = page.locator(".msg-user")
    assert users.count() == 2
    assert users.nth(1).get_attribute("id") != old_user_id
    assert users.nth(1).locator(".user-text").inner_text() == "Second question, edited"
    assert users.nth(1).locator(".sib-pos").inner_text() == "2/2"
    assert page.locator(ASSISTANT).count() == 2 and page.locator(f"#m-{a2}").count() == 0
    # Upstream got exactly the edited branch.
    rec = request_for(server, "Second question, edited")
    assert messages_sent(rec) == [
        ("user", "First question"),
        ("assistant", first_answer),
        ("user", "Second question, edited"),
    ]

    # Back to the old branch: its question and its old answer.
    users.nth(1).locator(".sib-prev").click()
    page.wait_for_selector(f"#{old_user_id}")
    page.wait_for_selector(f"#m-{a2}")
    assert page.locator(f"#{old_user_id} .sib-pos").inner_text() == "1/2"
    assert page.inner_text(f"#{old_user_id} .user-text") == "Second question"
    assert raw_text(page, a2) == old_answer and raw_text(page, a1) == first_answer
    assert page.locator(f"#m-{a3}").count() == 0
    page.reload()
    page.wait_for_selector(f"#m-{a2}")
    assert page.locator(f"#m-{a3}").count() == 0
    # A message sent now continues the old branch, and upstream gets exactly that branch.
    page.wait_for_selector("#conn-state.ok")
    send(page, "Third question", FAST)
    a4 = wait_new_assistant(page, {a1, a2})
    assert_exact(server, [page], a4, "Third question", watch)
    assert messages_sent(request_for(server, "Third question")) == [
        ("user", "First question"),
        ("assistant", first_answer),
        ("user", "Second question"),
        ("assistant", old_answer),
        ("user", "Third question"),
    ]


# ---- 6. restart mid-turn -----------------------------------------------------------------


def test_kill_9_mid_turn_then_interrupted_with_partial_text_and_retry(make_server, page) -> None:  # noqa: ANN001
    server = make_server()
    conv = start(page, server)
    text = "Kill the server"
    send(page, text, "sim-fast?ttft_ms=20&delay_ms=20&length=250&reasoning=0")  # about 5 s
    mid = wait_new_assistant(page, set())
    page.wait_for_timeout(2600)
    partial, status = wait_stored(server, mid, lambda r: len(r[0]) > 0, timeout=5)
    assert status == "streaming" and partial
    server.stop(signal.SIGKILL)
    partial, status = stored(server, mid)
    assert status == "streaming"
    page.wait_for_selector("#conn-state.warn")

    restarted = make_server(db=server.db)
    page.goto(f"{restarted.url}/c/{conv}/")
    # The dead turn becomes "interrupted" once its heartbeat is stale, without a reload.
    wait_status(page, mid, "interrupted", timeout=25_000)
    assert stored(restarted, mid) == (partial, "interrupted")
    assert raw_text(page, mid) == partial
    assert "Interrupted" in page.inner_text(f"#m-{mid} .error-box")
    page.reload()
    wait_status(page, mid, "interrupted")
    assert raw_text(page, mid) == partial
    page.wait_for_selector("#conn-state.ok")

    page.click(f"#m-{mid} button.retry")
    new = wait_new_assistant(page, {mid})
    full = assert_exact(restarted, [page], new, text)
    # Same history, same deterministic text: what was kept is exactly the start of it.
    assert full.startswith(partial) and len(partial) < len(full)
    assert messages_sent(request_for(restarted, text)) == [("user", text)]


def test_sigterm_mid_turn_saves_the_turn_as_interrupted_with_its_text(make_server, page) -> None:  # noqa: ANN001
    """A graceful shutdown (SIGTERM to daphne) ends running turns ``interrupted`` with the text
    received so far written at once and metrics kept, not left ``streaming`` for a restart to find."""
    server = make_server()
    start(page, server)
    text = "Stop the server politely"
    send(page, text, "sim-fast?ttft_ms=20&delay_ms=20&length=400&reasoning=0")  # about 8 s
    mid = wait_new_assistant(page, set())
    page.wait_for_function(f"() => Number(document.querySelector('#m-{mid} .answer').getAttribute('data-end')) > 20")
    shown_before = shown(page, mid)[1]
    server.stop(signal.SIGTERM)
    content, status = stored(server, mid)
    assert status == "interrupted", "the final write ran before the process exited"
    assert content.startswith(shown_before) and len(content) >= len(shown_before) > 0
    metrics = server.query("select metrics from chat_message where id = ?", (uuid.UUID(mid).hex,))[0][0]
    assert json.loads(metrics)["ttft_ms"] is not None


# ---- 7. admission control ----------------------------------------------------------------


def test_a_full_server_queues_with_its_position_then_runs(make_server, page) -> None:  # noqa: ANN001
    """Admission control: with one slot, a second turn waits in the queue, says its position,
    reaches no upstream until the first ends, then runs exactly."""
    server = make_server(env={"PLAYGROUND_MAX_TURNS": "1"})
    errors: list[str] = []
    start(page, server)
    send(page, "The one running turn", SLOW)
    a1 = wait_new_assistant(page, set())
    page.wait_for_selector(f"#m-{a1}.has-tokens")

    tab2 = new_page(page.context, errors)
    tab2.goto(server.url + "/")
    tab2.wait_for_selector("#conn-state.ok")
    assert conversation_id(tab2) != conversation_id(page)
    send(tab2, "Please run me too\r\nline two", FAST)
    a2 = wait_new_assistant(tab2, set())
    tab2.wait_for_selector(f"#m-{a2} .queue-pos:has-text('position 1')")
    tab2.wait_for_timeout(500)
    assert status_of(tab2, a2) == "streaming" and shown(tab2, a2)[0] == 0
    assert len(chat_requests(server.sim_requests())) == 1, "a queued turn reaches no upstream"
    page.click(f"#m-{a1} button.stop")
    wait_status(page, a1, "stopped")
    assert_exact(server, [tab2], a2, "Please run me too\nline two")
    assert len(chat_requests(server.sim_requests())) == 2
    assert not errors


def test_busy_server_says_try_again_and_keeps_the_text(make_server, page) -> None:  # noqa: ANN001
    """With no room to wait either, a send is refused: nothing written, the text kept."""
    server = make_server(env={"PLAYGROUND_MAX_TURNS": "1", "PLAYGROUND_MAX_QUEUED_TURNS": "0"})
    errors: list[str] = []
    start(page, server)
    send(page, "The one running turn", SLOW)
    a1 = wait_new_assistant(page, set())
    page.wait_for_selector(f"#m-{a1}.has-tokens")

    tab2 = new_page(page.context, errors)
    tab2.goto(server.url + "/")
    tab2.wait_for_selector("#conn-state.ok")
    conv2 = conversation_id(tab2)
    assert conv2 != conversation_id(page)
    tab2.fill("#model", FAST)
    tab2.fill("#content", "Please run me too\r\nline two")
    tab2.press("#content", "Enter")
    tab2.wait_for_selector("#notice:has-text('busy')")
    assert "try again" in tab2.inner_text("#notice")
    tab2.wait_for_timeout(500)
    assert tab2.input_value("#content") == "Please run me too\nline two"
    assert tab2.locator(".msg").count() == 0
    assert len(chat_requests(server.sim_requests())) == 1
    assert server.query(
        "select count(*) from chat_message where conversation_id = ?", (conv2,)
    ) == [(0,)]
    # Nothing was lost: once the running turn ends, the same text runs.
    page.click(f"#m-{a1} button.stop")
    wait_status(page, a1, "stopped")
    tab2.wait_for_timeout(1600)  # the Send button re-enables
    tab2.press("#content", "Enter")
    a2 = wait_new_assistant(tab2, set())
    assert_exact(server, [tab2], a2, "Please run me too\nline two")
    assert len(chat_requests(server.sim_requests())) == 2
    assert not errors


# ---- 8. told when a turn in another tab finishes -----------------------------------------


def test_other_tab_is_told_when_a_turn_finishes(server, page) -> None:  # noqa: ANN001
    errors: list[str] = []
    conv1 = start(page, server)
    tab_b = new_page(page.context, errors)
    tab_b.goto(f"{server.url}/c/{conv1}/")
    tab_b.click("button:has-text('New chat')")
    tab_b.wait_for_url(re.compile(r"/c/\d+/$"))
    tab_b.wait_for_selector("#conn-state.ok")
    assert conversation_id(tab_b) != conv1
    send(page, "Tell the other tab", "sim-fast?ttft_ms=20&delay_ms=10&length=150&reasoning=0")
    a1 = wait_new_assistant(page, set())
    tab_b.wait_for_selector(f"#notice a[href='/c/{conv1}/']", timeout=20_000)
    assert "finished" in tab_b.inner_text("#notice")
    assert "Tell the other tab" in tab_b.inner_text("#notice a")
    wait_status(page, a1, "complete")
    assert "An answer in" not in page.inner_text("#notice"), "the tab that watched it is not told"
    tab_b.click("#notice a")
    tab_b.wait_for_url(f"**/c/{conv1}/")
    assert raw_text(tab_b, a1) == stored(server, a1)[0]
    assert not errors


# ---- 9. a send repeated or queued while the socket was down starts one turn --------------


def test_double_enter_starts_one_turn(server, page) -> None:  # noqa: ANN001
    start(page, server)
    page.fill("#model", FAST)
    page.fill("#content", "Only once please")
    page.press("#content", "Enter")
    page.press("#content", "Enter")
    page.evaluate("document.getElementById('composer').requestSubmit()")
    a1 = wait_new_assistant(page, set())
    assert_exact(server, [page], a1, "Only once please")
    page.wait_for_timeout(500)
    assert page.locator(".msg-user").count() == 1 and page.locator(ASSISTANT).count() == 1
    assert len(chat_requests(server.sim_requests())) == 1
    assert server.query("select count(*) from chat_message") == [(2,)]


def test_the_same_composer_frame_sent_again_starts_no_second_turn(server, page) -> None:  # noqa: ANN001
    sent: list[str] = []
    routes: list[Any] = []

    def route(ws) -> None:  # noqa: ANN001
        upstream = ws.connect_to_server()
        routes.append(upstream)

        def from_page(msg: str | bytes) -> None:
            if isinstance(msg, str) and '"action":"send"' in msg.replace(" ", ""):
                sent.append(msg)
            upstream.send(msg)

        ws.on_message(from_page)

    page.route_web_socket(re.compile(r"/ws/c/\d+/$"), route)
    start(page, server)
    send(page, "Frame sent twice", FAST)
    a1 = wait_new_assistant(page, set())
    assert len(sent) == 1 and json.loads(sent[0])["turn_id"]
    routes[-1].send(sent[0])  # the same JSON again, mid-turn
    assert_exact(server, [page], a1, "Frame sent twice")
    routes[-1].send(sent[0])  # and after the turn ended
    page.wait_for_selector("#notice:has-text('sent already')")
    page.wait_for_timeout(500)
    assert len(chat_requests(server.sim_requests())) == 1
    assert server.query("select count(*) from chat_message") == [(2,)]
    assert page.locator(".msg-user").count() == 1 and page.locator(ASSISTANT).count() == 1


def test_send_queued_while_the_socket_was_down_starts_one_turn(server, page) -> None:  # noqa: ANN001
    """The first send reaches the server but the socket drops before the page hears back; the
    same send is made again while the socket is down (htmx queues it and sends it on reopen).
    One turn, and the page shows the question and its answer."""
    state: dict[str, Any] = {"drop_after_send": True, "sockets": 0}

    def route(ws) -> None:  # noqa: ANN001
        upstream = ws.connect_to_server()
        state["sockets"] += 1

        def from_page(msg: str | bytes) -> None:
            upstream.send(msg)
            if (
                state["drop_after_send"]
                and isinstance(msg, str)
                and '"action":"send"' in msg.replace(" ", "")
            ):
                state["drop_after_send"] = False
                ws.close(code=1012, reason="service restart")  # htmx reconnects on 1012

        ws.on_message(from_page)

    page.route_web_socket(re.compile(r"/ws/c/\d+/$"), route)
    start(page, server)
    # The moment the socket closes, send again (as a user pressing Enter would): it is queued.
    page.evaluate("""document.addEventListener("htmx:wsClose", (e) => {
        document.getElementById("composer").requestSubmit();
        window.__queued = e.detail.socketWrapper.queue.length;
    }, {once: true})""")
    page.fill("#model", "sim-fast?ttft_ms=400&delay_ms=5&length=120&reasoning=0")
    page.fill("#content", "Queued while down")
    page.press("#content", "Enter")
    page.wait_for_function("() => window.__queued !== undefined")
    assert page.evaluate("window.__queued") == 1, "the second send waited in the extension's queue"
    page.wait_for_selector("#conn-state.ok")
    a1 = wait_new_assistant(page, set())
    assert_exact(server, [page], a1, "Queued while down")
    page.wait_for_timeout(500)
    assert state["sockets"] == 2
    assert len(chat_requests(server.sim_requests())) == 1
    assert server.query("select count(*) from chat_message") == [(2,)]
    assert page.locator(ASSISTANT).count() == 1
    assert page.locator(".msg-user").count() == 1, "the page shows the question it sent"
    assert page.inner_text(".msg-user .user-text") == "Queued while down"
    assert page.input_value("#content") == "", (
        "the composer is cleared once the server shows the message"
    )
