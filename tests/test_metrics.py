"""Metrics arithmetic with a fake clock: exact values, as DESIGN.md "Metrics, defined" says."""

from __future__ import annotations

import pytest

from chat.frames import metric_items
from chat.metrics import TurnClock, compute_metrics
from chat.providers.base import Usage


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def run(timeline: list[tuple[float, str]]) -> TurnClock:
    clock = FakeClock()
    tc = TurnClock(clock=clock)
    tc.sent()
    for t, kind in timeline:
        clock.t = t
        if kind == "byte":
            tc.byte()
        else:
            tc.token(answer=kind == "text")
    return tc


def test_ttft_ttfat_rate_and_total_exact() -> None:
    tc = run([(0.1, "byte"), (0.5, "reasoning"), (1.0, "text"), (1.5, "text"), (2.0, "text"), (2.25, "byte")])
    m = compute_metrics(tc, Usage(prompt_tokens=12, completion_tokens=30))
    assert m["ttft_ms"] == 500.0
    assert m["ttfat_ms"] == 1000.0
    assert m["total_ms"] == 2250.0
    assert m["tokens_per_sec"] == 20.0  # 30 tokens / (2.0 - 0.5) s
    assert m["completion_tokens_source"] == "usage"


def test_burst_after_long_silence_has_no_rate() -> None:
    # Nothing for 5 s, then everything within 20 ms: a rate over 20 ms would be a lie.
    tc = run([(5.0, "text"), (5.01, "text"), (5.02, "text")])
    m = compute_metrics(tc, Usage(completion_tokens=60))
    assert m["ttft_ms"] == 5000.0
    assert m["tokens_per_sec"] is None
    assert m["total_ms"] == 5020.0


def test_usage_never_comes_no_tokens_per_second() -> None:
    """Events are not tokens (issue 7 item 5): without usage the figure is "—"."""
    tc = run([(0.2, "text"), (0.7, "text"), (1.2, "text")])
    m = compute_metrics(tc, None)
    assert m["completion_tokens_source"] == "unknown"
    assert m["tokens_per_sec"] is None and m["token_events"] == 3
    assert m["cost_usd"] is None
    items = dict((label, value) for label, value, _ in metric_items(m, {}, "stop"))
    assert items["prompt"] == "—" and items["completion"] == "—" and items["cost"] == "—"
    assert items["TTFT"] == "200 ms"


def test_single_token_has_no_rate() -> None:
    m = compute_metrics(run([(0.3, "text")]), Usage(completion_tokens=1))
    assert m["tokens_per_sec"] is None
    assert m["ttft_ms"] == 300.0


def test_no_token_at_all() -> None:
    m = compute_metrics(run([(0.3, "byte")]), None)
    assert m["ttft_ms"] is None and m["ttfat_ms"] is None and m["tokens_per_sec"] is None
    assert m["total_ms"] == 300.0


def test_reasoning_only_has_ttft_but_no_ttfat() -> None:
    m = compute_metrics(run([(0.4, "reasoning"), (0.9, "reasoning")]), Usage(completion_tokens=10))
    assert m["ttft_ms"] == 400.0 and m["ttfat_ms"] is None
    assert m["tokens_per_sec"] == 20.0


def test_cost_from_prices_and_upstream_cost_wins() -> None:
    tc = run([(0.1, "text"), (0.6, "text")])
    u = Usage(prompt_tokens=1000, completion_tokens=500)
    m = compute_metrics(tc, u, prompt_price_per_mtok=0.6, completion_price_per_mtok=1.2)
    assert m["cost_usd"] == pytest.approx((1000 * 0.6 + 500 * 1.2) / 1e6)
    assert m["cost_source"] == "price"
    m2 = compute_metrics(tc, Usage(prompt_tokens=1000, completion_tokens=500, cost_usd=0.0042),
                         prompt_price_per_mtok=0.6, completion_price_per_mtok=1.2)
    assert m2["cost_usd"] == 0.0042 and m2["cost_source"] == "upstream"


def test_upstream_figures_shown_beside_ours() -> None:
    tc = run([(0.2, "text"), (1.2, "text")])
    u = Usage(completion_tokens=50, upstream_ttft_ms=150.0, upstream_tokens_per_sec=46.6, upstream_total_ms=1890.0,
              routed_model="gpt-x", routing_latency_ms=12.0)
    items = {label: value for label, value, _ in metric_items(compute_metrics(tc, u), {"completion_tokens": 50}, "stop")}
    assert items["upstream TTFT"] == "150 ms"
    assert items["upstream tok/s"] == "46.6"
    assert items["upstream total"] == "1890 ms"
    assert items["routed to"] == "gpt-x"
    assert items["tok/s"] == "50.0"
