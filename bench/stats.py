"""Figures of the relay benchmark, computed from the client's raw per-turn records.

Pure functions over plain lists and dicts (no I/O), so the definitions below are the whole truth
about every number in ``bench.json``. Units: times in ms, sizes in bytes or KB (1 KB = 1024 B,
as ``/proc``'s ``kB``), rates per second.

Definitions (a "turn" is one streamed answer; "direct" is the same schedule sent straight to
the simulator with httpx, "relay" goes through the playground's websocket):

- TTFT (client side): first answer token received minus request sent. Direct: the first SSE
  event carrying ``delta.content``; relay: the first delta frame (``data-start``), measured
  from the ``send`` frame leaving the client.
- ``added_ttft_ms_pXX`` = pXX(relay TTFT) − pXX(direct TTFT) (difference of quantiles over all
  completed turns; the per-turn paired difference is in ``details`` too).
- Frame window W = ``PLAYGROUND_FRAME_INTERVAL_S``. The ideal relay of the direct stream is
  :func:`coalesce` (first token at once, then at most one frame per W, each frame carrying
  every token that arrived before it): its inter-frame gaps are the baseline gaps.
- ``added_gap_ms_p99`` = p99(relay inter-frame gaps) − p99(ideal-coalesced direct gaps); gaps
  are between consecutive delta frames of one turn (first delta to last delta).
- Stall: a relay inter-frame gap longer than ``2 × max(W, upstream event interval)`` (with the
  defaults 2 × 40 ms = 80 ms). ``stalls`` counts them over all turns.
- ``tokens_per_cpu_second``: answer tokens relayed (completed turns × tokens per turn) ÷ the
  daphne process's CPU seconds (utime + stime from ``/proc/<pid>/stat``) over the relay phase.
- ``idle_socket_kb``: (server VmRSS with N idle sockets open − VmRSS before) ÷ N.
- ``active_stream_kb``: (peak server VmRSS while turns stream − VmRSS with the idle sockets) ÷
  the peak number of turns in flight.
- ``frames_per_turn`` / ``bytes_per_turn``: websocket frames / payload bytes (UTF-8 text)
  received per turn: the turn-started frame, the deltas and the final frame (and any other
  frame that arrives while the turn runs). ``text_bytes_per_turn``: UTF-8 bytes of the answer.
- ``db_writes_per_turn``: INSERT/UPDATE/DELETE/REPLACE statements the server ran during the
  relay phase ÷ turns (counted by ``bench.asgi`` on every connection).

May import: the standard library only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0–100) with linear interpolation (numpy's default); NaN if empty."""
    if not values:
        return math.nan
    xs = sorted(values)
    if len(xs) == 1:
        return float(xs[0])
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return float(xs[lo] + (xs[hi] - xs[lo]) * (pos - lo))


def mean(values: Iterable[float]) -> float:
    """Arithmetic mean; NaN if empty."""
    xs = list(values)
    return sum(xs) / len(xs) if xs else math.nan


def coalesce(event_ms: Sequence[float], window_ms: float) -> list[float]:
    """Frame times (ms) an ideal coalescer with window ``window_ms`` makes of token times (ms).

    The relay's rule (``chat.turns.TurnRunner._pump``): a token after a quiet period goes out at
    once; otherwise the next frame leaves ``window_ms`` after the previous one and carries every
    token that arrived by then.
    """
    frames: list[float] = []
    last = -math.inf
    i, n = 0, len(event_ms)
    while i < n:
        at = max(event_ms[i], last + window_ms)
        frames.append(at)
        while i < n and event_ms[i] <= at:
            i += 1
        last = at
    return frames


def gaps(times_ms: Sequence[float]) -> list[float]:
    """Differences between consecutive times (ms)."""
    return [b - a for a, b in zip(times_ms, times_ms[1:], strict=False)]


def _r(x: float, nd: int = 1) -> float | int | None:
    """Round for JSON (``nd=0`` gives an int); NaN becomes None (JSON has no NaN)."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return None
    return round(x) if nd == 0 else round(x, nd)


def summarize(raw: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """All figures of one run (see the module docstring) from the client's ``raw`` result.

    ``params``: ``streams``, ``turns``, ``tokens``, ``rate`` (tokens/s), ``tokens_per_event``,
    ``window_ms`` (the frame window W). Returns ``{"figures": {...}, "details": {...}}``; the
    figures are the ``bench.json`` top-level keys (numbers, or None when not measurable).
    """
    window = float(params["window_ms"])
    event_interval = 1000.0 * params["tokens_per_event"] / params["rate"]
    stall_ms = 2 * max(window, event_interval)

    direct = [t for t in raw["direct"]["turns"] if t["status"] == "complete"]
    relay = [t for t in raw["relay"]["turns"] if t["status"] == "complete"]
    relay_all = raw["relay"]["turns"]

    d_ttft = [t["ttft_ms"] for t in direct if t["ttft_ms"] is not None]
    r_ttft = [t["ttft_ms"] for t in relay if t["ttft_ms"] is not None]
    r_announce = [t["announce_ms"] for t in relay if t.get("announce_ms") is not None]
    d_by_key = {(t["stream"], t["turn"]): t for t in direct}
    paired = [
        t["ttft_ms"] - d_by_key[(t["stream"], t["turn"])]["ttft_ms"]
        for t in relay
        if (t["stream"], t["turn"]) in d_by_key and t["ttft_ms"] is not None
    ]

    r_gaps = [g for t in relay for g in gaps(t["event_ms"])]
    ideal_gaps = [g for t in direct for g in gaps(coalesce(t["event_ms"], window))]
    d_token_gaps = [g for t in direct for g in gaps(t["event_ms"])]
    stalls = sum(1 for g in r_gaps if g > stall_ms)
    direct_stalls = sum(1 for g in d_token_gaps if g > 2 * event_interval)

    n_turns = len(relay_all) or 1
    frames = sum(t["frames"] for t in relay_all)
    nbytes = sum(t["bytes"] for t in relay_all)
    text_bytes = sum(t["text_bytes"] for t in relay_all)
    delta_frames = sum(len(t["event_ms"]) for t in relay_all)
    streaming_ms = sum(
        t["event_ms"][-1] - t["event_ms"][0] for t in relay if len(t["event_ms"]) > 1
    )
    intervals = sum(len(t["event_ms"]) - 1 for t in relay if len(t["event_ms"]) > 1)

    relay_phase = raw["relay"]
    cpu_s = relay_phase["server_cpu_s"]
    tokens_relayed = len(relay) * params["tokens"]
    writes = relay_phase.get("writes", {})
    peak_active = max(relay_phase.get("peak_in_flight", 0), 1)
    rss = relay_phase["rss_kb"]

    direct_text = {(t["stream"], t["turn"]): t["text_sha"] for t in direct}
    mismatches = sum(
        1
        for t in relay
        if (t["stream"], t["turn"]) in direct_text
        and direct_text[(t["stream"], t["turn"])] != t["text_sha"]
    )

    figures = {
        "streams": params["streams"],
        "added_ttft_ms_p50": _r(percentile(r_ttft, 50) - percentile(d_ttft, 50)),
        "added_ttft_ms_p99": _r(percentile(r_ttft, 99) - percentile(d_ttft, 99)),
        "added_gap_ms_p99": _r(percentile(r_gaps, 99) - percentile(ideal_gaps, 99)),
        "stalls": stalls,
        "tokens_per_cpu_second": _r(tokens_relayed / cpu_s, 0) if cpu_s > 0 else None,
        "idle_socket_kb": _r((rss["idle"] - rss["before_idle"]) / params["streams"]),
        "active_stream_kb": _r((rss["peak_active"] - rss["idle"]) / peak_active),
        "frames_per_turn": _r(frames / n_turns),
        "bytes_per_turn": _r(nbytes / n_turns, 0),
        "text_bytes_per_turn": _r(text_bytes / n_turns, 0),
        "db_writes_per_turn": _r(writes.get("total", math.nan) / n_turns, 2),
    }
    details = {
        "turns_planned": params["streams"] * params["turns"],
        "turns_completed": {"direct": len(direct), "relay": len(relay)},
        "stopped_early": {
            "direct": raw["direct"].get("stopped_early", False),
            "relay": relay_phase.get("stopped_early", False),
        },
        "direct_client": raw["direct"].get("client", "httpx"),
        "turns_failed": {
            "direct": len(raw["direct"]["turns"]) - len(direct),
            "relay": len(relay_all) - len(relay),
            "relay_statuses": sorted({t["status"] for t in relay_all if t["status"] != "complete"}),
        },
        "ttft_ms": {
            "direct": {f"p{q}": _r(percentile(d_ttft, q)) for q in (50, 90, 99)},
            "relay": {f"p{q}": _r(percentile(r_ttft, q)) for q in (50, 90, 99)},
            "relay_turn_started_frame": {
                f"p{q}": _r(percentile(r_announce, q)) for q in (50, 90, 99)
            },
            "added_paired": {f"p{q}": _r(percentile(paired, q)) for q in (50, 90, 99)},
        },
        "gap_ms": {
            "relay": {f"p{q}": _r(percentile(r_gaps, q)) for q in (1, 50, 99)}
            | {"max": _r(max(r_gaps, default=math.nan))},
            "ideal_coalesced_direct": {f"p{q}": _r(percentile(ideal_gaps, q)) for q in (1, 50, 99)},
            "direct_tokens": {f"p{q}": _r(percentile(d_token_gaps, q)) for q in (50, 99)}
            | {"max": _r(max(d_token_gaps, default=math.nan))},
            "stall_threshold_ms": stall_ms,
            "direct_stalls": direct_stalls,
            "relay_gaps_under_33ms": sum(1 for g in r_gaps if g < 33.0),
            "relay_gaps": len(r_gaps),
        },
        "frame_window_ms": window,
        "mean_frame_interval_ms": _r(streaming_ms / intervals) if intervals else None,
        "delta_frames_per_turn": _r(delta_frames / n_turns),
        "tokens_relayed": tokens_relayed,
        "text_mismatches_vs_direct": mismatches,
        "offset_errors": sum(t["offset_errors"] for t in relay_all),
        "server_cpu_s": {
            "relay": _r(cpu_s, 2),
            "direct_idle": _r(raw["direct"].get("server_cpu_s", math.nan), 2),
        },
        "server_thread_cpu_s": relay_phase.get("server_thread_cpu_s", {}),
        "simulator_cpu_s": {
            "direct": _r(raw["direct"]["sim_cpu_s"], 2),
            "relay": _r(relay_phase["sim_cpu_s"], 2),
        },
        "client_cpu_s": {
            "direct": _r(raw["direct"]["client_cpu_s"], 2),
            "relay": _r(relay_phase["client_cpu_s"], 2),
        },
        "client_loop_lag_ms_p99": {
            "direct": _r(raw["direct"]["loop_lag_ms_p99"]),
            "relay": _r(relay_phase["loop_lag_ms_p99"]),
        },
        "phase_s": {
            "direct": _r(raw["direct"]["duration_s"], 1),
            "relay": _r(relay_phase["duration_s"], 1),
        },
        "peak_in_flight": relay_phase.get("peak_in_flight"),
        "rss_kb": rss,
        "db_writes": writes,
        "stray_frames": relay_phase.get("stray_frames", 0),
    }
    return {"figures": figures, "details": details}


#: Targets of issue 4 (one daphne process, 100 streams at 50 tokens/s on the 2-core machine).
def targets(fig: dict[str, Any], details: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each target: its wording, the measured value and whether it is met (None: not measured)."""

    def le(v: Any, limit: float) -> bool | None:
        return None if v is None else v <= limit

    def ge(v: Any, limit: float) -> bool | None:
        return None if v is None else v >= limit

    bytes_limit = None
    if fig["text_bytes_per_turn"] is not None and fig["frames_per_turn"] is not None:
        bytes_limit = round(1.5 * fig["text_bytes_per_turn"] + 64 * fig["frames_per_turn"])
    interval = details.get("mean_frame_interval_ms")
    return {
        "added_ttft_ms_p50": {
            "target": "≤ 5 ms",
            "value": fig["added_ttft_ms_p50"],
            "met": le(fig["added_ttft_ms_p50"], 5),
        },
        "added_ttft_ms_p99": {
            "target": "≤ 25 ms",
            "value": fig["added_ttft_ms_p99"],
            "met": le(fig["added_ttft_ms_p99"], 25),
        },
        "stalls": {"target": "0", "value": fig["stalls"], "met": fig["stalls"] == 0},
        "tokens_per_cpu_second": {
            "target": "≥ 8,000",
            "value": fig["tokens_per_cpu_second"],
            "met": ge(fig["tokens_per_cpu_second"], 8000),
        },
        "idle_socket_kb": {
            "target": "≤ 30 KB",
            "value": fig["idle_socket_kb"],
            "met": le(fig["idle_socket_kb"], 30),
        },
        "mean_frame_interval_ms": {
            "target": "≥ 33 ms (≤ 1 frame per 33 ms per stream)",
            "value": interval,
            "met": ge(interval, 33),
        },
        "bytes_per_turn": {
            "target": f"≤ 1.5 × text + 64 B × frames = {bytes_limit} B"
            if bytes_limit is not None
            else "≤ 1.5 × text + 64 B × frames",
            "value": fig["bytes_per_turn"],
            "met": le(fig["bytes_per_turn"], bytes_limit) if bytes_limit is not None else None,
        },
    }
