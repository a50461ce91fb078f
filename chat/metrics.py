"""Per-turn timing and usage arithmetic, as defined in DESIGN.md "Metrics, defined".

The runner calls :class:`TurnClock` hooks with an injectable clock (seconds, monotonic) so tests
assert exact values. Everything here is pure: no Django, no I/O.

- time to first token (TTFT) = first token event (reasoning or answer) − request sent, ms;
  time to first answer token (TTFAT) likewise for the first answer token.
- tokens per second = completion tokens from usage ÷ (last token − first token); only with ≥ 2
  token-bearing events spanning ≥ 250 ms, and only when the endpoint reported completion
  tokens (an event may hold several tokens: events per second are not tokens), else None ("—").
- total = last byte − request sent, ms.

May import: the standard library and chat.providers.base.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from chat.providers.base import Usage

Clock = Callable[[], float]

MIN_RATE_EVENTS = 2
MIN_RATE_SPAN_S = 0.25


@dataclass
class TurnClock:
    """Timestamps of one turn (seconds from ``clock``), fed by the runner."""

    clock: Clock = time.monotonic
    request_sent: float | None = None
    first_byte: float | None = None
    first_token: float | None = None
    first_answer_token: float | None = None
    last_token: float | None = None
    last_byte: float | None = None
    token_events: int = 0
    answer_events: int = 0
    reasoning_events: int = 0
    _marks: list[float] = field(default_factory=list)

    def now(self) -> float:
        return self.clock()

    def sent(self) -> float:
        self.request_sent = self.clock()
        return self.request_sent

    def byte(self) -> float:
        t = self.clock()
        if self.first_byte is None:
            self.first_byte = t
        self.last_byte = t
        return t

    def token(self, *, answer: bool) -> float:
        t = self.byte()
        if self.first_token is None:
            self.first_token = t
        if answer and self.first_answer_token is None:
            self.first_answer_token = t
        self.last_token = t
        self.token_events += 1
        if answer:
            self.answer_events += 1
        else:
            self.reasoning_events += 1
        return t


def _ms(a: float | None, b: float | None) -> float | None:
    if a is None or b is None:
        return None
    return round((b - a) * 1000.0, 1)


def compute_metrics(
    tc: TurnClock,
    usage: Usage | None,
    *,
    prompt_price_per_mtok: float | None = None,
    completion_price_per_mtok: float | None = None,
) -> dict[str, Any]:
    """The metrics dict stored on the message and shown under the answer.

    Keys (None = cannot be measured honestly, shown as "—"): ``ttft_ms``, ``ttfat_ms``,
    ``total_ms``, ``tokens_per_sec``, ``completion_tokens_source`` ("usage" | "unknown"),
    ``cost_usd`` (usage cost when sent, else tokens × price per million), ``cost_source``,
    ``upstream_ttft_ms``, ``upstream_tokens_per_sec``, ``upstream_total_ms``,
    ``routed_model``, ``routing_latency_ms``, ``token_events``.
    """
    completion = usage.completion_tokens if usage and usage.completion_tokens is not None else None
    # Without usage there is no honest token count: an event may carry several tokens, so
    # events per second are not tokens per second ("—"; issue 7 item 5).
    source = "usage" if completion is not None else "unknown"
    rate = None
    if (
        tc.first_token is not None
        and tc.last_token is not None
        and tc.token_events >= MIN_RATE_EVENTS
        and (tc.last_token - tc.first_token) >= MIN_RATE_SPAN_S
        and completion
    ):
        rate = round(completion / (tc.last_token - tc.first_token), 1)
    cost = None
    cost_source = None
    if usage and usage.cost_usd is not None:
        cost, cost_source = usage.cost_usd, "upstream"
    elif (
        usage
        and usage.prompt_tokens is not None
        and usage.completion_tokens is not None
        and prompt_price_per_mtok is not None
        and completion_price_per_mtok is not None
    ):
        cost = (
            usage.prompt_tokens * prompt_price_per_mtok
            + usage.completion_tokens * completion_price_per_mtok
        ) / 1_000_000
        cost_source = "price"
    return {
        "ttft_ms": _ms(tc.request_sent, tc.first_token),
        "ttfat_ms": _ms(tc.request_sent, tc.first_answer_token),
        "total_ms": _ms(tc.request_sent, tc.last_byte),
        "tokens_per_sec": rate,
        "completion_tokens_source": source,
        "cost_usd": round(cost, 8) if cost is not None else None,
        "cost_source": cost_source,
        "upstream_ttft_ms": usage.upstream_ttft_ms if usage else None,
        "upstream_tokens_per_sec": usage.upstream_tokens_per_sec if usage else None,
        "upstream_total_ms": usage.upstream_total_ms if usage else None,
        "routed_model": usage.routed_model if usage else None,
        "routing_latency_ms": usage.routing_latency_ms if usage else None,
        "token_events": tc.token_events,
    }


def usage_dict(usage: Usage | None) -> dict[str, Any]:
    """Normalized usage for storage: token counts only (None where not reported)."""
    if usage is None:
        return {}
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
        "reasoning_tokens": usage.reasoning_tokens,
        "cached_tokens": usage.cached_tokens,
    }


MAX_TIMING_POINTS = 200


def token_timings(points: list[list[float]], events: int, completion_tokens: int | None) -> list[list[float]]:
    """The stored token timings of a turn: ``[[ms since request sent, completion tokens], …]``,
    one point per flushed frame (thinned to at most :data:`MAX_TIMING_POINTS`).

    ``points`` hold token *events* seen so far (an event may carry several tokens); when the
    endpoint reported ``completion_tokens`` the counts are scaled so the last point equals it
    (tokens, rounded), else they stay event counts. Empty when no token arrived.
    """
    if not points or events <= 0:
        return []
    pts = points
    if len(pts) > MAX_TIMING_POINTS:
        step = len(pts) / (MAX_TIMING_POINTS - 1)
        pts = [pts[min(len(pts) - 1, int(i * step))] for i in range(MAX_TIMING_POINTS - 1)] + [pts[-1]]
    scale = (completion_tokens / events) if completion_tokens else 1.0
    return [[round(float(ms), 1), round(n * scale)] for ms, n in pts]
