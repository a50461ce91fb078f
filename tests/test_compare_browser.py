"""Browser tests of the compare page (issue 11): lanes side by side on the chat's runner, each
lane on the built-in simulator with its own knobs (TTFT, pace, a 429) picked by the model id."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from tests.conftest import create_first_account
from tests.helpers import chat_requests, sim_text

pytestmark = [pytest.mark.browser]

ROOT = Path(__file__).resolve().parent.parent
LANE = "section.lane"
FAST = "sim-fast?ttft_ms=80&delay_ms=8&length=40&reasoning=0"
SLOW = "sim-fast?ttft_ms=900&delay_ms=30&length=40&reasoning=0"


def lane(i: int) -> str:
    return f"{LANE}[data-lane-index='{i}']"


def new_comparison(pg, server) -> int:  # noqa: ANN001
    pg.goto(server.url + "/compare/")
    pg.click("#start-compare")
    pg.wait_for_url(re.compile(r".*/compare/\d+/$"))
    pg.wait_for_selector("#conn-state.ok")
    return int(pg.url.rstrip("/").split("/")[-1])


def set_lane(pg, i: int, model: str, **params: str) -> None:  # noqa: ANN001
    pg.fill(f"{lane(i)} input[name=model]", model)
    for k, v in params.items():
        pg.fill(f"{lane(i)} [name={k}]", v)


def send(pg, text: str) -> None:  # noqa: ANN001
    pg.fill("#cmp-content", text)
    pg.press("#cmp-content", "Enter")


def answer_of(pg, i: int) -> str:  # noqa: ANN001
    return pg.inner_text(f"{lane(i)} .msg-assistant >> nth=-1 >> .answer")


def records_for(server, model: str) -> list[dict]:  # noqa: ANN001
    return [r for r in chat_requests(server.sim_requests()) if r["body"].get("model") == model]


def test_three_lanes_fastest_marked_failing_lane_retries_alone(server, page) -> None:  # noqa: ANN001
    pg = page
    create_first_account(pg, server)
    cid = new_comparison(pg, server)
    assert pg.locator(LANE).count() == 2
    pg.click("#add-lane")
    pg.wait_for_function("() => document.querySelectorAll('section.lane').length === 3")
    failing = "sim-fast?fault=429&reasoning=0"
    set_lane(pg, 0, SLOW)
    set_lane(pg, 1, FAST)
    set_lane(pg, 2, failing)
    send(pg, "Compare this")
    pg.wait_for_selector(f"{lane(0)} .msg-assistant.status-complete", timeout=30_000)
    pg.wait_for_selector(f"{lane(1)} .msg-assistant.status-complete")
    pg.wait_for_selector(f"{lane(2)} .msg-assistant.status-error .error-box")
    assert "HTTP 429" in pg.inner_text(f"{lane(2)} .error-box")
    # Each lane shows the simulator's exact text for that lane's request.
    for i, model in ((0, SLOW), (1, FAST)):
        recs = records_for(server, model)
        assert len(recs) == 1
        expected = sim_text(recs[0])
        assert expected.strip()
        got = pg.evaluate("(sel) => window.pgStream(document.querySelector(sel)).raw",
                          f"{lane(i)} .msg-assistant .answer")
        assert got == expected
    # The metrics strip under each answer.
    assert pg.locator(f"{lane(1)} .metric[data-metric='TTFT']").count() == 1
    # The table marks the lane the simulator made fastest (TTFT and total).
    pg.wait_for_selector("#compare-summary table.turn-table tr[data-lane-index='1'] td[data-col='ttft_ms'].best")
    assert pg.locator("#compare-summary tr[data-lane-index='1'] td[data-col='total_ms'].best").count() == 1
    assert pg.locator("#compare-summary tr[data-lane-index='0'] td[data-col='ttft_ms'].best").count() == 0
    # The chart has one line per finished lane.
    pg.wait_for_selector("svg.speed-chart polyline.series")
    assert pg.locator("svg.speed-chart polyline.series").count() == 2
    # The stored token timings rise to the completion tokens.
    rows = server.query("select metrics, usage from chat_message where role='assistant' and status='complete'")
    for metrics, usage in rows:
        t = json.loads(metrics)["timings"]
        assert t and t[-1][1] == json.loads(usage)["completion_tokens"]
        assert all(a[0] <= b[0] and a[1] <= b[1] for a, b in zip(t, t[1:], strict=False))
    # Retry on the failing lane reruns that lane only.
    before = len(chat_requests(server.sim_requests()))
    set_lane(pg, 2, FAST + "&length=12")
    pg.wait_for_function("() => !document.querySelector(\"section.lane[data-lane-index='2'] button.retry\").disabled",
                         timeout=15_000)
    pg.click(f"{lane(2)} button.retry")
    pg.wait_for_selector(f"{lane(2)} .msg-assistant.status-complete")
    after = chat_requests(server.sim_requests())
    assert len(after) == before + 1 and after[-1]["body"]["model"] == FAST + "&length=12"
    assert pg.locator(f"{lane(2)} .msg-assistant").count() == 1  # in place of the failed one
    assert pg.locator(f"{lane(0)} .msg-assistant.status-complete").count() == 1
    # Reload: the same lanes, answers and table.
    pg.reload()
    pg.wait_for_selector("#conn-state.ok")
    assert pg.locator(".msg-assistant.status-complete").count() == 3
    assert pg.url.endswith(f"/compare/{cid}/")
    pg.wait_for_selector("svg.speed-chart polyline.series")
    height = pg.evaluate("() => document.documentElement.scrollHeight")
    pg.set_viewport_size({"width": 1400, "height": min(2400, height + 40)})
    pg.screenshot(path=str(ROOT / "docs" / "compare.png"))
    # Narrow screens: the lanes wrap into rows; a phone: one column.
    pg.set_viewport_size({"width": 880, "height": 900})
    boxes = [pg.locator(lane(i)).bounding_box() for i in range(3)]
    assert boxes[0]["y"] == boxes[1]["y"] and boxes[2]["y"] > boxes[0]["y"] + boxes[0]["height"] - 1
    pg.set_viewport_size({"width": 390, "height": 800})
    boxes = [pg.locator(lane(i)).bounding_box() for i in range(3)]
    assert boxes[0]["x"] == boxes[1]["x"] == boxes[2]["x"] and boxes[0]["y"] < boxes[1]["y"] < boxes[2]["y"]
    assert boxes[0]["width"] <= 390


def test_same_model_two_temperatures_no_cross_talk_and_reload_mid_stream(server, page) -> None:  # noqa: ANN001
    pg = page
    create_first_account(pg, server)
    new_comparison(pg, server)
    model = "sim-fast?ttft_ms=100&delay_ms=25&length=120&reasoning=0"
    # Same endpoint and model; the temperature and the seed (which picks the simulator's filler
    # text) differ, so a delta in the wrong lane would show.
    set_lane(pg, 0, model, temperature="0.2", seed="1")
    set_lane(pg, 1, model, temperature="1.3", seed="2")
    send(pg, "Same model twice")
    pg.wait_for_selector(f"{lane(0)} .msg-assistant.status-streaming.has-tokens")
    pg.wait_for_timeout(500)
    pg.reload()  # mid-stream: every lane continues
    pg.wait_for_selector("#conn-state.ok")
    pg.wait_for_selector(f"{lane(0)} .msg-assistant.status-complete", timeout=30_000)
    pg.wait_for_selector(f"{lane(1)} .msg-assistant.status-complete", timeout=30_000)
    recs = records_for(server, model)
    assert sorted(r["body"].get("temperature") for r in recs) == [0.2, 1.3]
    texts = {}
    for i, temp in ((0, 0.2), (1, 1.3)):
        rec = next(r for r in recs if r["body"].get("temperature") == temp)
        texts[i] = sim_text(rec)
        shown = pg.inner_text(f"{lane(i)} .msg-assistant .answer")
        assert rec["body"].get("seed") == i + 1
        # The last filler sentence of this lane's text is on this lane only.
        tail = texts[i].strip().splitlines()[-1].strip()
        assert tail and tail in shown
        stored = server.query("select m.content from chat_message m join chat_lane l on m.lane_id=l.id "
                              "where m.role='assistant' and l.position=?", (i,))
        assert stored[0][0] == texts[i]
    assert texts[0] != texts[1]
    for i in (0, 1):
        other_tail = texts[1 - i].strip().splitlines()[-1].strip()
        assert other_tail not in pg.inner_text(f"{lane(i)} .msg-assistant .answer")
    # A second turn: each lane's history holds only its own answer.
    send(pg, "And again")
    pg.wait_for_function("() => document.querySelectorAll('.msg-assistant.status-complete').length === 4",
                         timeout=30_000)
    recs = records_for(server, model)
    for temp in (0.2, 1.3):
        first = next(r for r in recs if r["body"].get("temperature") == temp and len(r["body"]["messages"]) == 1)
        second = next(r for r in recs if r["body"].get("temperature") == temp and len(r["body"]["messages"]) == 3)
        assert second["body"]["messages"][1] == {"role": "assistant", "content": sim_text(first)}


def _tokens_after(rec: dict, t: float) -> int:
    return sum(e["tokens"] for e in rec["events"] if e["kind"] == "content" and e["t"] > t)


def test_stop_one_lane_then_stop_all_then_clean_new_prompt(server, page) -> None:  # noqa: ANN001
    pg = page
    create_first_account(pg, server)
    new_comparison(pg, server)
    delay_ms = 40
    long = f"sim-fast?ttft_ms=50&delay_ms={delay_ms}&length=600&reasoning=0"
    set_lane(pg, 0, long, seed="1")
    set_lane(pg, 1, long, seed="2")
    send(pg, "Go long")
    pg.wait_for_selector(f"{lane(0)} .msg-assistant.status-streaming.has-tokens")
    pg.wait_for_selector(f"{lane(1)} .msg-assistant.status-streaming.has-tokens")
    pg.wait_for_timeout(1200)
    t_stop1 = time.monotonic()
    pg.click(f"{lane(0)} button.stop")
    pg.wait_for_selector(f"{lane(0)} .msg-assistant.status-stopped", timeout=3_000)
    # The other lane goes on.
    n1 = len(pg.evaluate("(sel) => window.pgStream(document.querySelector(sel)).raw", f"{lane(1)} .answer"))
    pg.wait_for_timeout(500)
    n2 = len(pg.evaluate("(sel) => window.pgStream(document.querySelector(sel)).raw", f"{lane(1)} .answer"))
    assert n2 > n1
    t_stop2 = time.monotonic()
    pg.click("#stop-all")
    pg.wait_for_selector(f"{lane(1)} .msg-assistant.status-stopped", timeout=3_000)
    pg.wait_for_timeout(300)
    recs = {r["body"]["seed"]: r for r in records_for(server, long)}
    one_second = 1000 // delay_ms
    assert _tokens_after(recs[1], t_stop1) < one_second
    assert _tokens_after(recs[2], t_stop2) < one_second
    assert recs[1]["finished"] is False or recs[1]["tokens_written"] < 600
    stopped = dict(server.query(
        "select l.position, m.content from chat_message m join chat_lane l on m.lane_id=l.id "
        "where m.role='assistant' and m.status='stopped'"))
    assert len(stopped) == 2
    shown_stopped = {i: pg.evaluate("(sel) => window.pgStream(document.querySelector(sel)).raw",
                                    f"{lane(i)} .answer") for i in (0, 1)}
    for i in (0, 1):  # what was written is what was shown, a prefix of what the simulator sent
        assert stopped[i] == shown_stopped[i]
        assert sim_text(recs[i + 1]).startswith(stopped[i]) and len(stopped[i]) > 40
    # A new prompt: its answers are exactly the new requests' text (no stopped turn's token).
    short = "sim-fast?ttft_ms=20&delay_ms=2&length=10&reasoning=0"
    set_lane(pg, 0, short)
    set_lane(pg, 1, short)
    send(pg, "Fresh start")
    pg.wait_for_function("() => document.querySelectorAll('.msg-assistant.status-complete').length === 2",
                         timeout=20_000)
    fresh_recs = records_for(server, short)
    assert len(fresh_recs) == 2
    for i in (0, 1):
        shown = pg.evaluate("(sel) => window.pgStream(document.querySelectorAll(sel)[1]).raw", f"{lane(i)} .answer")
        rec = next(r for r in fresh_recs if r["body"].get("seed") == i + 1)
        assert shown == sim_text(rec)
        assert stopped[i][30:] not in shown
        # The stopped answer stays in the lane's history, as sent the second time.
        assert rec["body"]["messages"][1]["content"] == stopped[i]
    # Stored rows did not change after the stop (no late frame was written).
    again = dict(server.query(
        "select l.position, m.content from chat_message m join chat_lane l on m.lane_id=l.id "
        "where m.role='assistant' and m.status='stopped'"))
    assert again == stopped


def test_repeat_runs_percentiles_match_stored_metrics_and_runs_are_browsable(server, page) -> None:  # noqa: ANN001
    import statistics

    from chat.compare.display import fmt

    pg = page
    create_first_account(pg, server)
    new_comparison(pg, server)
    set_lane(pg, 0, "sim-fast?ttft_ms=60&delay_ms=10&length=40&reasoning=0")
    set_lane(pg, 1, "sim-fast?ttft_ms=250&delay_ms=15&length=40&reasoning=0")
    pg.fill("#cmp-runs", "5")
    send(pg, "Five times")
    # More answers than a comparison runs at once (6): the rest wait, their queue positions shown.
    pg.wait_for_function("() => [...document.querySelectorAll('.run-state')].some(e => /queued \\(position \\d/.test(e.textContent))",
                         timeout=10_000)
    pg.wait_for_function("() => document.querySelectorAll('.msg-assistant.status-complete').length === 10",
                         timeout=60_000)
    pg.wait_for_selector("#compare-summary table.runs-table")
    pg.wait_for_function("() => document.querySelectorAll('#compare-summary td[data-col=runs]').length === 2"
                         " && [...document.querySelectorAll('#compare-summary td[data-col=runs]')].every(td => td.innerText.trim() === '5/5')")
    rows = server.query("select l.position, m.run, m.metrics from chat_message m join chat_lane l on m.lane_id=l.id "
                        "where m.role='assistant' order by l.position, m.run")
    assert [(p, r) for p, r, _ in rows] == [(p, r) for p in (0, 1) for r in range(5)]
    for pos in (0, 1):
        for key in ("ttft_ms", "total_ms", "tokens_per_sec"):
            vals = [json.loads(m)[key] for p, _, m in rows if p == pos]
            med = statistics.median(vals)
            p90 = statistics.quantiles(vals, n=10, method="inclusive")[8]
            row = f"#compare-summary .runs-table tr[data-lane-index='{pos}'][data-col='{key}']"
            assert pg.inner_text(f"{row} td[data-stat='median']") == fmt(key, med)
            assert pg.inner_text(f"{row} td[data-stat='p90']") == fmt(key, p90)
            assert pg.inner_text(f"{row} td[data-stat='range']") == f"{fmt(key, min(vals))} – {fmt(key, max(vals))}"
        # The turn table shows the medians.
        ttfts = [json.loads(m)["ttft_ms"] for p, _, m in rows if p == pos]
        cell = pg.inner_text(f"#compare-summary .turn-table tr[data-lane-index='{pos}'] td[data-col='ttft_ms']")
        assert cell.startswith(fmt("ttft_ms", statistics.median(ttfts)))
    # Every answer is browsable 1/N; only the first is shown at a time.
    pager = f"{lane(0)} .run-pager"
    assert pg.inner_text(f"{pager} .run-pos") == "1"
    assert pg.inner_text(f"{pager} .run-state") == "· 5/5 done"
    pg.click(f"{pager} .run-next")
    assert pg.inner_text(f"{pager} .run-pos") == "2"
    assert pg.locator(f"{lane(0)} .run-slot[data-run='2']").is_visible()
    assert not pg.locator(f"{lane(0)} .run-slot[data-run='1']").is_visible()
    # Runs are not history: a next turn sends only the first answer of each lane.
    pg.fill("#cmp-runs", "1")
    send(pg, "Next")
    pg.wait_for_function("() => document.querySelectorAll('.msg-assistant.status-complete').length === 12",
                         timeout=30_000)
    last = [r for r in chat_requests(server.sim_requests()) if r["body"]["messages"][-1]["content"] == "Next"]
    assert len(last) == 2 and all(len(r["body"]["messages"]) == 3 for r in last)


def test_blind_vote_then_reveal_stores_the_right_lanes_and_ranks_them(server, page) -> None:  # noqa: ANN001
    pg = page
    create_first_account(pg, server)
    cid = new_comparison(pg, server)
    m1 = "sim-fast?ttft_ms=51&delay_ms=3&length=20&reasoning=0"
    m2 = "sim-fast?ttft_ms=352&delay_ms=3&length=20&reasoning=0"
    set_lane(pg, 0, m1)
    set_lane(pg, 1, m2)
    pg.locator(f"{lane(1)} input[name=model]").dispatch_event("change")
    for _ in range(50):  # the lane forms autosave on change
        if {r[0] for r in server.query("select model from chat_lane where conversation_id=?", (cid,))} == {m1, m2}:
            break
        pg.wait_for_timeout(100)
    assert {r[0] for r in server.query("select model from chat_lane where conversation_id=?", (cid,))} == {m1, m2}
    pg.click("#blind-toggle")
    pg.wait_for_selector("#conn-state.ok")
    assert pg.inner_text("#blind-toggle") == "Blind: on"
    assert [pg.inner_text(f"{lane(i)} .lane-label") for i in (0, 1)] == ["A", "B"]
    assert pg.locator("form.lane-form").count() == 0
    send(pg, "Which is better?")
    pg.wait_for_function("() => document.querySelectorAll('.msg-assistant.status-complete').length === 2",
                         timeout=20_000)
    html = pg.content()
    assert "ttft_ms=51" not in html and "ttft_ms=352" not in html  # nothing tells the lanes apart
    pg.wait_for_selector("form.vote-box button.vote-lane[data-position='0']")
    pg.reload()
    pg.wait_for_selector("form.vote-box")
    assert "ttft_ms=51" not in pg.content() and "ttft_ms=352" not in pg.content()
    pg.click("form.vote-box button.vote-lane[data-position='0']")
    pg.wait_for_selector(".vote-done")
    assert "A" in pg.inner_text(".vote-done")
    # Revealed: lane A shows its model, and the vote stored that lane's settings.
    revealed_a = pg.inner_text(f"{lane(0)} .lane-model")
    assert revealed_a in (m1, m2)
    (choice, pos, lanes_json, prompt), = server.query("select choice, winner_position, lanes, prompt from chat_vote")
    lanes = json.loads(lanes_json)
    assert choice == "lane" and pos == 0 and prompt == "Which is better?"
    assert [x["position"] for x in lanes] == [0, 1]
    assert lanes[0]["settings"]["model"] == revealed_a
    assert {x["settings"]["model"] for x in lanes} == {m1, m2}
    assert all(x["answer"] and x["settings"]["endpoint_name"] == "Built-in simulator" for x in lanes)
    stored = dict(server.query("select l.position, m.content from chat_message m join chat_lane l on m.lane_id=l.id "
                               "where m.role='assistant'"))
    assert lanes[0]["answer"] == stored[0] and lanes[1]["answer"] == stored[1]
    # The leaderboard ranks the winner first: 1 win, 0 losses.
    pg.goto(server.url + "/compare/leaderboard/")
    first = pg.locator("table.board tbody tr").first
    assert revealed_a in first.get_attribute("data-model")
    assert first.locator("td[data-col=wins]").inner_text() == "1"
    assert first.locator("td[data-col=losses]").inner_text() == "0"
    assert first.locator("td[data-col=win_rate]").inner_text() == "100 %"
    pg.screenshot(path=str(ROOT / "docs" / "leaderboard.png"))
    assert cid


def test_share_a_comparison_and_open_it_logged_out(server, page, chromium) -> None:  # noqa: ANN001
    """Issue 13 "Sharing" for a comparison: Share on the compare page makes a link whose
    read-only page (opened in a fresh, logged-out browser context) shows every lane's answer
    and settings, and no endpoint URL or key."""
    pg = page
    create_first_account(pg, server)
    new_comparison(pg, server)
    set_lane(pg, 0, FAST)
    set_lane(pg, 1, FAST, temperature="0.7")
    send(pg, "Share this comparison")
    pg.wait_for_function(f"() => document.querySelectorAll('{LANE} .msg-assistant.status-complete').length === 2",
                         timeout=30_000)
    lane_texts = [answer_of(pg, 0), answer_of(pg, 1)]
    pg.click("#share-compare summary")
    pg.click("#share-compare button[type=submit]")
    pg.wait_for_url("**/shares/**")
    url = re.search(r"https?://[^\s\"<]+/s/[\w-]+/", pg.content())[0]
    other = chromium.new_context()
    try:
        viewer = other.new_page()
        viewer.goto(url)
        viewer.wait_for_selector("#shared-compare")
        shown = viewer.locator(".shared-answer .answer").all_inner_texts()
        assert [t.strip() for t in shown] == [t.strip() for t in lane_texts]
        body = viewer.content()
        assert "temperature=0.7" in body and "/simulator/v1" not in body and "127.0.0.1" not in body
    finally:
        other.close()


def test_a_lane_header_follows_its_form(server, page) -> None:  # noqa: ANN001
    """The lane's header shows the label and model being typed, before any save or reload."""
    pg = page
    create_first_account(pg, server)
    new_comparison(pg, server)
    pg.fill(f"{lane(0)} input[name=model]", "sim-fast?length=8")
    pg.eval_on_selector(f"{lane(0)} input[name=label]", "e => { const d = e.closest('details'); if (d) d.open = true; }")
    pg.fill(f"{lane(0)} input[name=label]", "Fast one")
    assert pg.inner_text(f"{lane(0)} .lane-head .lane-model") == "sim-fast?length=8"
    assert pg.inner_text(f"{lane(0)} .lane-head .lane-label") == "Fast one"
