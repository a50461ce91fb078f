"""The benchmark's pure parts: statistics (pairs, load runs, knee, overload, upstream-bound,
fan-out, browser), targets, the README table, the trace reader and the frame classifier.
No server is started."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bench import stats
from bench.browser import CHROMIUM_ARGS, main_tasks_ms
from bench.readme import ROWS, render, rewrite, text_table

# ---- helpers ------------------------------------------------------------------------------------


def turn(stream: int, n: int, ttft: float | None, *, status: str = "complete", events: list[float] | None = None,
         sha: str = "same", **extra: Any) -> dict[str, Any]:
    ev = events if events is not None else ([ttft, ttft + 40.0, ttft + 80.0] if ttft is not None else [])
    return {
        "stream": stream, "turn": n, "status": status, "ttft_ms": ttft, "announce_ms": 5.0,
        "event_ms": ev, "frames": len(ev) + 2, "bytes": 1000, "delta_frames": len(ev),
        "delta_bytes": 100 * len(ev), "delta_text_bytes": 30 * len(ev), "text_bytes": 90,
        "text_sha": sha, "offset_errors": 0, **extra,
    }


def meter(wall: float, server: float, upstream: float = 0.1, client: float = 0.1, events: int | None = 1000) -> dict[str, Any]:
    return {"wall_s": wall, "server_cpu_s": server, "upstream_cpu_s": upstream, "client_cpu_s": client,
            "upstream_events": events}


def load_raw(direct_ttfts: list[float], relay_ttfts: list[float], *, server: float = 1.0,
             relay_wall: float = 10.0, relay_status: str = "complete", relay_events: list[list[float]] | None = None) -> dict[str, Any]:
    d = [turn(i, 0, x) for i, x in enumerate(direct_ttfts)]
    r = [turn(i, 0, x, status=relay_status, events=(relay_events[i] if relay_events else None))
         for i, x in enumerate(relay_ttfts)]
    return {
        "direct": {"turns": d, "duration_s": 10.0, "meter": meter(10.0, 0.0)},
        "relay": {"turns": r, "duration_s": relay_wall, "meter": meter(relay_wall, server)},
    }


PARAMS = {"streams": 4, "turns": 1, "tokens": 3, "rate": 50.0, "tokens_per_event": 1, "window_ms": 40.0}


# ---- sequential pairs ----------------------------------------------------------------------------


def test_paired_added_ttft_is_the_quantile_of_per_pair_differences() -> None:
    pairs = [
        {"direct": turn(0, k, 100.0 + k), "relay": turn(0, k, 100.0 + k + diff)}
        for k, diff in enumerate([3.0, 1.0, 2.0, 10.0, 2.0])
    ]
    p = stats.paired(pairs)
    assert p["pairs_used"] == 5
    assert p["added_ms"]["p50"] == 2.0
    assert p["added_ms"]["p99"] == pytest.approx(9.72)  # between 3 and 10, linear
    assert p["differences_ms"] == [3.0, 1.0, 2.0, 10.0, 2.0]


def test_paired_drift_cancels_and_failed_pairs_are_left_out() -> None:
    # the machine slows down over the run: both TTFTs grow, the difference stays 4 ms
    pairs = [{"direct": turn(0, k, 100.0 + 50 * k), "relay": turn(0, k, 104.0 + 50 * k)} for k in range(10)]
    pairs.append({"direct": turn(0, 10, 100.0), "relay": turn(0, 10, None, status="timeout")})
    p = stats.paired(pairs)
    assert p["pairs"] == 11 and p["pairs_used"] == 10
    assert p["added_ms"] == {"p50": 4.0, "p90": 4.0, "p99": 4.0}


# ---- load runs ------------------------------------------------------------------------------------


def test_load_summary_figures() -> None:
    raw = load_raw([100.0, 101.0, 102.0, 103.0], [110.0, 111.0, 112.0, 150.0],
                   relay_events=[[110.0, 150.0, 190.0], [111.0, 151.0, 191.0], [112.0, 152.0, 192.0], [150.0, 250.0, 290.0]])
    s = stats.load_summary(raw, PARAMS)
    f = s["figures"]
    assert f["added_ttft_ms_p50"] == 10.0  # 111.5 − 101.5
    assert f["added_ttft_ms_p99"] == pytest.approx(150 - 0.03 * 38 - 102.97, abs=0.05)
    assert f["stalls"] == 1  # the 100 ms gap > 2 × 40 ms
    assert f["tokens_per_cpu_second"] == 12  # 4 turns × 3 tokens ÷ 1 CPU-s
    assert f["delta_envelope_bytes"] == 70.0
    assert f["frames_per_turn"] == 5.0
    assert f["mean_frame_interval_ms"] == pytest.approx((80 + 80 + 80 + 140) / 8, abs=0.05)
    assert s["details"]["text_mismatches_vs_direct"] == 0
    assert s["details"]["slip"] == 1.0


def test_mismatches_count_only_same_keys() -> None:
    direct = [turn(0, 0, 1.0, sha="a"), turn(1, 0, 1.0, sha="b")]
    relay = [turn(0, 0, 1.0, sha="a"), turn(1, 0, 1.0, sha="x"), turn(2, 0, 1.0, sha="zzz")]
    assert stats.mismatches(direct, relay) == 1


# ---- upstream-bound --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("upstream", "client", "bound"),
    [(7.9, 1.0, False), (8.1, 1.0, True), (1.0, 8.1, True), (8.0, 8.0, False)],
)
def test_upstream_bound_above_80_percent_of_a_core(upstream: float, client: float, bound: bool) -> None:
    b = stats.bound(meter(10.0, 9.5, upstream, client) | {"server_wait_s": 0.4, "server_core_busy_s": 9.8})
    assert b["upstream_bound"] is bound
    assert b["server_share"] == 0.95
    assert b["server_wait_share"] == 0.04
    assert b["server_core_busy_share"] == 0.98
    assert b["others_on_server_core_share"] == 0.03


def test_bound_without_measurements() -> None:
    assert stats.bound({})["upstream_bound"] is False
    assert stats.share(1.0, 0) is None


# ---- knee ---------------------------------------------------------------------------------------


def step(n: int, p99_added: float | None, *, stalls: int = 0, failed: int = 0, cpu: float = 0.5, slip: float = 1.0) -> dict[str, Any]:
    return {
        "figures": {"streams": n, "added_ttft_ms_p99": p99_added, "added_ttft_ms_p50": None if p99_added is None else p99_added / 2, "stalls": stalls},
        "details": {
            "turns_failed": {"relay": failed, "direct": 0},
            "turns_completed": {"relay": 10 - failed, "direct": 10},
            "cpu_share": {"relay": {"server_share": cpu}},
            "stopped_early": {"relay": False, "direct": False},
            "slip": slip,
        },
    }


def test_knee_is_the_largest_count_meeting_the_criterion() -> None:
    steps = [step(25, 3.0), step(50, 20.0), step(100, 25.0), step(150, 25.1), step(200, 90.0)]
    assert stats.knee(steps) == 100
    assert stats.knee([step(25, 3.0), step(50, 30.0), step(100, 10.0)]) == 100  # noise at 50


@pytest.mark.parametrize("bad", [step(50, 5.0, stalls=1), step(50, 5.0, failed=1), step(50, None)])
def test_knee_excludes_stalls_failures_and_missing_figures(bad: dict[str, Any]) -> None:
    assert stats.knee([step(25, 5.0), bad]) == 25


def test_knee_is_zero_when_no_step_qualifies() -> None:
    assert stats.knee([step(25, 132.0)]) == 0
    assert stats.knee([]) == 0


def test_overloaded_reasons() -> None:
    assert stats.overloaded(step(25, 3.0)) == []
    assert stats.overloaded(step(25, 3.0, cpu=0.95)) == ["server at 95% of a core"]
    assert stats.overloaded(step(25, 3.0, failed=2)) == ["2 turns failed"]
    assert stats.overloaded(step(25, 3.0, slip=1.3)) == ["schedule slipped (1.30 × the direct phase)"]
    assert stats.overloaded(step(25, 3.0, cpu=0.89, slip=1.2)) == []
    queued = step(25, 2400.0, cpu=0.6)  # p50 1,200 ms
    assert stats.overloaded(queued) == ["added TTFT p50 1,200 ms (turns queue)"]
    # other processes filling the server's CPU are context, not a stop reason
    shared = step(25, 300.0, cpu=0.5)
    shared["details"]["cpu_share"]["relay"] |= {"server_core_busy_share": 0.95, "others_on_server_core_share": 0.45}
    assert stats.overloaded(shared) == []


def test_summarize_knee_and_phases() -> None:
    ok = load_raw([100.0] * 4, [105.0] * 4, server=2.0)
    slow = load_raw([100.0] * 4, [400.0] * 4, server=9.5)
    raw = {"knee": {"steps": [{"streams": 25, **ok}, {"streams": 50, **slow}], "stopped_after": 50}}
    s = stats.summarize(raw, {"knee": {**PARAMS, "turns": 1}})
    assert s["figures"]["knee_streams"] == 25
    steps = s["details"]["knee"]["steps"]
    assert [x["meets_criterion"] for x in steps] == [True, False]
    assert steps[1]["overloaded"] == ["server at 95% of a core"]
    assert s["figures"]["text_mismatches"] == 0
    assert s["figures"]["upstream_bound"] is False
    # 4 sub-phases × 0.1 s of upstream CPU for 4 × 1000 events
    assert s["figures"]["upstream_us_per_event"] == 100.0
    assert s["figures"]["added_ttft_ms_p50_1"] is None  # the sequential phase did not run
    assert set(s["figures"]) == set(stats.FIGURES)


def test_summarize_flags_an_upstream_bound_phase() -> None:
    raw = {"sequential": {"pairs": [{"direct": turn(0, 0, 100.0), "relay": turn(0, 0, 103.0, sha="other")}],
                          "meter": meter(10.0, 1.0, upstream=1.0, client=9.0)}}
    s = stats.summarize(raw, {})
    assert s["figures"]["upstream_bound"] is True
    assert s["details"]["phases"]["upstream_bound_phases"] == ["sequential"]
    assert s["figures"]["text_mismatches"] == 1
    assert s["figures"]["added_ttft_ms_p50_1"] == 3.0


# ---- fan-out and browser ----------------------------------------------------------------------------


def test_fanout_times_run_from_the_first_send() -> None:
    relay = [turn(i, 0, 200.0 + i, announce_ms=50.0 + i, sent_at_ms=float(i)) for i in range(3)]
    direct = [turn(i, 0, 100.0, sent_at_ms=0.0) for i in range(3)]
    f = stats.fanout_summary({"relay": {"turns": relay}, "direct": {"turns": direct}})
    assert f["figures"] == {"fanout_last_started_ms": 54.0, "fanout_last_first_token_ms": 204.0}
    assert f["details"]["direct_last_first_token_ms"] == 100.0
    refused = [*relay[:2], turn(2, 0, None, status="notice: busy", announce_ms=None, sent_at_ms=2.0)]
    f = stats.fanout_summary({"relay": {"turns": refused}, "direct": {"turns": direct}})
    assert f["figures"]["fanout_last_first_token_ms"] is None
    assert f["details"]["statuses"] == ["complete", "notice: busy"]


def test_browser_figures() -> None:
    raw = {"tokens": 10_000, "script_s": 0.2, "observer_ms": 20.0, "longest_task_ms": 31.5,
           "longtasks_ms": [], "recreated_nodes": 0}
    b = stats.browser_summary(raw)["figures"]
    assert b == {"browser_longest_task_ms": 31.5, "browser_script_ms_per_1k_tokens": 18.0, "browser_recreated_nodes": 0}
    untraced = {**raw, "longest_task_ms": None, "longtasks_ms": [51.0, 77.5]}
    assert stats.browser_summary(untraced)["figures"]["browser_longest_task_ms"] == 77.5


def test_longest_main_task_from_a_trace() -> None:
    trace = {"traceEvents": [
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 7, "args": {"name": "CrRendererMain"}},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 8, "args": {"name": "Compositor"}},
        {"ph": "X", "name": "RunTask", "pid": 1, "tid": 7, "dur": 12_500},
        {"ph": "X", "name": "RunTask", "pid": 1, "tid": 7, "dur": 48_000, "tdur": 20_000},
        {"ph": "X", "name": "RunTask", "pid": 1, "tid": 8, "dur": 90_000},
        {"ph": "X", "name": "FunctionCall", "pid": 1, "tid": 7, "dur": 95_000},
    ]}
    assert main_tasks_ms(json.dumps(trace).encode()) == [(48.0, 20.0), (12.5, None)]


def test_chromium_flags_are_the_tests_flags() -> None:
    from tests.conftest import CHROMIUM_ARGS as TEST_ARGS

    assert CHROMIUM_ARGS == TEST_ARGS


# ---- targets and the table -----------------------------------------------------------------------


def test_db_writes_limit() -> None:
    assert stats.db_writes_limit({"tokens": 128, "tokens_per_event": 1, "rate": 50.0}) == 4  # 2.54 s
    assert stats.db_writes_limit({"tokens": 16, "tokens_per_event": 1, "rate": 50.0}) == 3
    assert stats.db_writes_limit({"tokens": 512, "tokens_per_event": 4, "rate": 50.0}) == 8  # 10.16 s


def test_every_figure_has_a_target_entry_and_a_row() -> None:
    fig = dict.fromkeys(stats.FIGURES)
    fig |= {"knee_streams": 150, "added_ttft_ms_p99_1": 5.01, "upstream_bound": False,
            "text_bytes_per_turn": 700, "frames_per_turn": 10.0, "bytes_per_turn": 1690, "text_mismatches": 0}
    t = stats.targets(fig, {"relay": {"tokens": 128, "tokens_per_event": 1, "rate": 50.0}})
    assert set(t) == set(stats.FIGURES) == {k for k, _, _ in ROWS}
    assert t["knee_streams"]["met"] is True
    assert t["added_ttft_ms_p99_1"]["met"] is False
    assert t["upstream_bound"]["met"] is True
    assert t["bytes_per_turn"]["met"] is True and "1,690 B" in t["bytes_per_turn"]["target"]
    assert t["added_ttft_ms_p50"]["met"] is None  # not measured
    assert t["fanout_last_started_ms"]["target"] == "no target"
    assert t["db_writes_per_turn"]["target"].endswith("= 4")


def test_readme_table_lists_every_figure() -> None:
    fig = dict.fromkeys(stats.FIGURES) | {"knee_streams": 25, "browser_recreated_nodes": 0}
    doc = {
        **fig,
        "targets": stats.targets(fig, {}),
        "details": {},
        "meta": {
            "commit": "abc", "date": "2026-01-01", "cpu": "cpu", "cpu_count": 2, "loadavg_before": [1.0, 0, 0],
            "loadavg_after": [2.0, 0, 0], "python": "3.11", "django": "5.2", "channels": "4", "daphne": "4",
            "twisted": "26", "runtime_s": 1.0, "pinning": {"enabled": True, "server_cpus": [0], "others_cpus": [1]},
            "params": {"streams": 100, "turns": 10, "tokens": 128, "rate": 50.0, "ttft_ms": 100, "users": 100,
                       "window_ms": 40.0},
        },
    }
    md = render(doc)
    assert sum(1 for line in md.splitlines() if line.startswith("| ")) == len(ROWS) + 1  # + header
    assert "| Knee: most streams with added TTFT p99 ≤ 25 ms and no stalls | 25 | ≥ 150 | ❌ missed |" in md
    assert "| Browser: DOM nodes re-created above the streaming point | 0 | 0 | ✅ met |" in md
    assert "| Added time to first token at 1 stream, p50 (paired) | — | ≤ 2 ms | not measured |" in md
    assert "daphne pinned to CPU [0]" in md
    out = rewrite("a\n<!-- bench:start -->\nold\n<!-- bench:end -->\nb\n", doc)
    assert out.startswith("a\n<!-- bench:start -->\n| Figure") and out.endswith("<!-- bench:end -->\nb\n")
    assert "Knee: most streams" in text_table(doc)


def test_memory_figures_use_the_fresh_idle_measurement() -> None:
    raw = load_raw([100.0] * 4, [105.0] * 4)
    raw["relay"]["rss_kb"] = {"before_idle": 90_000, "idle": 90_400, "idle_at_relay": 95_000, "peak_active": 95_800}
    raw["relay"]["peak_in_flight"] = 4
    f = stats.load_summary(raw, PARAMS)["figures"]
    assert f["idle_socket_kb"] == 100.0  # 400 kB ÷ 4 sockets
    assert f["active_stream_kb"] == 200.0  # 800 kB ÷ 4 turns in flight
