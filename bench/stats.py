"""Figures of the relay benchmark, computed from the client's raw per-turn records.

Pure functions over plain lists and dicts (no I/O), so the definitions below are the whole truth
about every number in ``bench.json``. Units: times in ms, sizes in bytes or KB (1 KB = 1024 B,
as ``/proc``'s ``kB``), CPU in seconds, rates per second.

Words: a "turn" is one streamed answer; "direct" is the same request sent straight to the
upstream by the benchmark's own minimal HTTP client, "relay" goes through the playground's
websocket; a "load run" is a direct sub-phase then a relay sub-phase on the same schedule.

- TTFT (client side): first answer token received minus request sent. Direct: the first SSE
  event carrying answer text; relay: the first delta frame, measured from the ``send`` frame
  leaving the client.
- Load runs (the 100-stream relay phase and every knee step): ``added_ttft_ms_pXX`` =
  pXX(relay TTFT) − pXX(direct TTFT), over all completed turns (difference of quantiles).
- Sequential phase (1 stream): 50 pairs (a direct turn, then a relayed turn with the same
  user text); ``added_ttft_ms_p50_1`` / ``_p99_1`` = p50 / p99 of the per-pair differences
  (relay TTFT − direct TTFT of the same pair), so drifts of the machine cancel.
- Frame window W = ``PLAYGROUND_FRAME_INTERVAL_S``. The ideal relay of the direct stream is
  :func:`coalesce` (first token at once, then at most one frame per W, each frame carrying
  every token that arrived before it): its inter-frame gaps are the baseline gaps.
- ``added_gap_ms_p99`` = p99(relay inter-frame gaps) − p99(ideal-coalesced direct gaps); gaps
  are between consecutive delta frames of one turn (first delta to last delta).
- Stall: a relay inter-frame gap longer than ``2 × max(W, upstream event interval)`` (with the
  defaults 2 × 40 ms = 80 ms). ``stalls`` counts them over all turns.
- ``tokens_per_cpu_second``: answer tokens relayed (completed turns × tokens per turn) ÷ the
  daphne process's CPU seconds (utime + stime from ``/proc/<pid>/stat``) over the relay phase.
- ``idle_socket_kb``: (server VmRSS with N idle sockets open − VmRSS before) ÷ N, measured on
  the fresh server after one warm-up turn, before any phase.
- ``active_stream_kb``: (peak server VmRSS while turns stream − VmRSS with the relay phase's
  sockets open before its turns) ÷ the peak number of turns in flight.
- ``frames_per_turn`` / ``bytes_per_turn``: websocket frames / payload bytes (UTF-8 text)
  received per turn: the turn-started frame, the deltas and the final frame (and any other
  frame that arrives while the turn runs). ``text_bytes_per_turn``: UTF-8 bytes of the answer.
- ``delta_envelope_bytes``: mean over delta frames of (frame bytes − UTF-8 bytes of the text
  the frame carries), i.e. what a delta costs beyond its text (escaping included).
- ``mean_frame_interval_ms``: streaming time (first to last delta of a turn) ÷ intervals
  between delta frames, over completed relayed turns.
- ``db_writes_per_turn``: INSERT/UPDATE/DELETE/REPLACE statements the server ran during the
  relay phase ÷ turns (counted by ``bench.asgi`` on every connection).
- Knee search: load runs at 25, 50, 100, 150, 200 streams (stopping after the first
  *overloaded* step: daphne used ≥ 90 % of a core, or the added TTFT p50 exceeds 1 s, or a
  turn failed, or the relay sub-phase took more than 1.2 × the direct one, i.e. the schedule
  slipped; how busy the server's CPU was with other processes, and the server's run-queue
  wait, are recorded beside each step as context, not as stop reasons, since other processes
  fill whatever CPU the server leaves idle).
  ``knee_streams`` = the largest count whose step has added TTFT p99 ≤ 25 ms, no stalls and
  every turn completed; 0 when no step qualifies.
- Fan-out: one user starts ``lanes × repeats`` turns at once (one per conversation);
  ``fanout_last_started_ms`` = last turn-started frame − first ``send``;
  ``fanout_last_first_token_ms`` = last first delta − first ``send``.
- Upstream-bound: a (sub-)phase where the upstream process or the client process used more
  than 80 % of a core (CPU seconds ÷ wall seconds); then the run measures them, not the relay.
  ``upstream_us_per_event``: the upstream's CPU ÷ the token events it wrote, over the measured
  phases (lean upstream only).
- ``text_mismatches``: relayed answers whose text differs from the direct answer of the same
  user text (all phases that have both).
- Browser: see ``bench.browser``: ``browser_longest_task_ms``,
  ``browser_script_ms_per_1k_tokens``, ``browser_recreated_nodes``.

May import: the standard library only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

#: A process using more than this share of one core makes its phase "upstream-bound".
BOUND_SHARE = 0.8
#: A knee step is overloaded when daphne used at least this share of one core …
OVERLOAD_CPU_SHARE = 0.9
#: … or its added TTFT p50 exceeds this (ms): turns queue for seconds …
OVERLOAD_ADDED_P50_MS = 1000.0
#: … or its relay sub-phase took longer than this × the direct one (the schedule slipped).
OVERLOAD_SLIP = 1.2
#: Knee criterion: added TTFT p99 at most this (ms), and no stalls.
KNEE_P99_MS = 25.0


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


def _r(x: float | None, nd: int = 1) -> float | int | None:
    """Round for JSON (``nd=0`` gives an int); NaN and None become None (JSON has no NaN)."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return None
    return round(x) if nd == 0 else round(x, nd)


def _sub(a: float | None, b: float | None) -> float:
    return math.nan if a is None or b is None else a - b


# ---- CPU shares -------------------------------------------------------------------------------


def share(cpu_s: float | None, wall_s: float | None) -> float | None:
    """CPU seconds ÷ wall seconds (1.0 = one core busy); None when not measurable."""
    if cpu_s is None or not wall_s or wall_s <= 0:
        return None
    return cpu_s / wall_s


def bound(meter: dict[str, Any]) -> dict[str, Any]:
    """Shares of one (sub-)phase's ``meter`` of one core: CPU of the server, the upstream and
    the client; their run-queue waits (``*_wait_s``: runnable threads not running, behind
    each other or behind other processes); with pinning, how busy the server's CPU was and how
    much of it other processes took; and whether the phase is upstream-bound (the upstream or
    the client above :data:`BOUND_SHARE` of a core of CPU time)."""
    wall = meter.get("wall_s")
    out = {
        "server_share": share(meter.get("server_cpu_s"), wall),
        "upstream_share": share(meter.get("upstream_cpu_s"), wall),
        "client_share": share(meter.get("client_cpu_s"), wall),
        "server_wait_share": share(meter.get("server_wait_s"), wall),
        "upstream_wait_share": share(meter.get("upstream_wait_s"), wall),
        "client_wait_share": share(meter.get("client_wait_s"), wall),
        "server_core_busy_share": share(meter.get("server_core_busy_s"), wall),
        "others_on_server_core_share": share(
            None if meter.get("server_core_busy_s") is None
            else max(0.0, meter["server_core_busy_s"] - (meter.get("server_cpu_s") or 0.0)),
            wall,
        ),
    }
    out["upstream_bound"] = any(
        (out[k] or 0.0) > BOUND_SHARE for k in ("upstream_share", "client_share")
    )
    return {k: (_r(v, 3) if isinstance(v, float) else v) for k, v in out.items()}


# ---- sequential pairs ---------------------------------------------------------------------------


def paired(pairs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Added TTFT from interleaved pairs ``[{"direct": turn, "relay": turn}, …]`` (turn records
    with ``status`` and ``ttft_ms``): the per-pair differences relay − direct of the pairs
    where both turns completed, their p50/p90/p99, and the raw TTFT quantiles."""
    diffs, d_all, r_all = [], [], []
    for p in pairs:
        d, r = p.get("direct") or {}, p.get("relay") or {}
        ok = d.get("status") == "complete" and r.get("status") == "complete"
        if ok and d.get("ttft_ms") is not None and r.get("ttft_ms") is not None:
            diffs.append(r["ttft_ms"] - d["ttft_ms"])
            d_all.append(d["ttft_ms"])
            r_all.append(r["ttft_ms"])
    return {
        "pairs": len(pairs),
        "pairs_used": len(diffs),
        "added_ms": {f"p{q}": _r(percentile(diffs, q), 2) for q in (50, 90, 99)},
        "direct_ttft_ms": {f"p{q}": _r(percentile(d_all, q), 2) for q in (50, 99)},
        "relay_ttft_ms": {f"p{q}": _r(percentile(r_all, q), 2) for q in (50, 99)},
        "differences_ms": [_r(x, 2) for x in diffs],
    }


# ---- load runs ----------------------------------------------------------------------------------


def _complete(turns: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [t for t in turns if t["status"] == "complete"]


def mismatches(direct: Sequence[dict[str, Any]], relay: Sequence[dict[str, Any]]) -> int:
    """Completed relayed turns whose text hash differs from the completed direct turn with the
    same (stream, turn) key."""
    d = {(t["stream"], t["turn"]): t["text_sha"] for t in _complete(direct)}
    return sum(
        1
        for t in _complete(relay)
        if (t["stream"], t["turn"]) in d and d[(t["stream"], t["turn"])] != t["text_sha"]
    )


def load_summary(raw: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """Figures of one load run: ``raw`` = ``{"direct": phase, "relay": phase}`` as the client
    records them (``turns``, ``duration_s``, ``meter``, and for the 100-stream phase
    ``rss_kb``, ``writes``, ``peak_in_flight``). ``params``: ``streams``, ``turns``,
    ``tokens``, ``rate`` (tokens/s), ``tokens_per_event``, ``window_ms``.

    Returns ``{"figures": {...}, "details": {...}}`` (None where not measurable)."""
    window = float(params["window_ms"])
    event_interval = 1000.0 * params["tokens_per_event"] / params["rate"]
    stall_ms = 2 * max(window, event_interval)
    rd, rr = raw["direct"], raw["relay"]
    direct, relay, relay_all = _complete(rd["turns"]), _complete(rr["turns"]), rr["turns"]

    d_ttft = [t["ttft_ms"] for t in direct if t["ttft_ms"] is not None]
    r_ttft = [t["ttft_ms"] for t in relay if t["ttft_ms"] is not None]
    r_announce = [t["announce_ms"] for t in relay if t.get("announce_ms") is not None]
    d_by_key = {(t["stream"], t["turn"]): t for t in direct}
    paired_diffs = [
        t["ttft_ms"] - d_by_key[(t["stream"], t["turn"])]["ttft_ms"]
        for t in relay
        if (t["stream"], t["turn"]) in d_by_key
        and t["ttft_ms"] is not None
        and d_by_key[(t["stream"], t["turn"])]["ttft_ms"] is not None
    ]
    r_gaps = [g for t in relay for g in gaps(t["event_ms"])]
    ideal_gaps = [g for t in direct for g in gaps(coalesce(t["event_ms"], window))]
    d_token_gaps = [g for t in direct for g in gaps(t["event_ms"])]
    stalls = sum(1 for g in r_gaps if g > stall_ms)

    n_turns = len(relay_all) or 1
    frames = sum(t["frames"] for t in relay_all)
    nbytes = sum(t["bytes"] for t in relay_all)
    text_bytes = sum(t["text_bytes"] for t in relay_all)
    delta_frames = sum(t.get("delta_frames", len(t["event_ms"])) for t in relay_all)
    envelope = sum(t.get("delta_bytes", 0) - t.get("delta_text_bytes", 0) for t in relay_all)
    streaming_ms = sum(t["event_ms"][-1] - t["event_ms"][0] for t in relay if len(t["event_ms"]) > 1)
    intervals = sum(len(t["event_ms"]) - 1 for t in relay if len(t["event_ms"]) > 1)

    meter = rr.get("meter", {})
    cpu_s = meter.get("server_cpu_s")
    tokens_relayed = len(relay) * params["tokens"]
    writes = rr.get("writes") or {}
    rss = rr.get("rss_kb")
    peak_active = max(rr.get("peak_in_flight", 0), 1)
    slip = _r(rr["duration_s"] / rd["duration_s"], 3) if rd.get("duration_s") else None

    figures = {
        "streams": params["streams"],
        "added_ttft_ms_p50": _r(percentile(r_ttft, 50) - percentile(d_ttft, 50)),
        "added_ttft_ms_p99": _r(percentile(r_ttft, 99) - percentile(d_ttft, 99)),
        "added_gap_ms_p99": _r(percentile(r_gaps, 99) - percentile(ideal_gaps, 99)),
        "stalls": stalls,
        "tokens_per_cpu_second": _r(tokens_relayed / cpu_s, 0) if cpu_s else None,
        "idle_socket_kb": _r((rss["idle"] - rss["before_idle"]) / params["streams"])
        if rss and "idle" in rss else None,
        "active_stream_kb": _r((rss["peak_active"] - rss.get("idle_at_relay", rss["idle"])) / peak_active)
        if rss else None,
        "frames_per_turn": _r(frames / n_turns),
        "bytes_per_turn": _r(nbytes / n_turns, 0),
        "text_bytes_per_turn": _r(text_bytes / n_turns, 0),
        "delta_envelope_bytes": _r(envelope / delta_frames) if delta_frames else None,
        "mean_frame_interval_ms": _r(streaming_ms / intervals) if intervals else None,
        "db_writes_per_turn": _r(writes["total"] / n_turns, 2) if "total" in writes else None,
    }
    details = {
        "turns_planned": params["streams"] * params["turns"],
        "turns_not_started": {
            "direct": params["streams"] * params["turns"] - len(rd["turns"]),
            "relay": params["streams"] * params["turns"] - len(relay_all),
        },
        "turns_completed": {"direct": len(direct), "relay": len(relay)},
        "turns_failed": {
            "direct": len(rd["turns"]) - len(direct),
            "relay": len(relay_all) - len(relay),
            "relay_statuses": sorted({t["status"] for t in relay_all if t["status"] != "complete"}),
        },
        "stopped_early": {"direct": rd.get("stopped_early", False), "relay": rr.get("stopped_early", False)},
        "ttft_ms": {
            "direct": {f"p{q}": _r(percentile(d_ttft, q)) for q in (50, 90, 99)},
            "relay": {f"p{q}": _r(percentile(r_ttft, q)) for q in (50, 90, 99)},
            "relay_turn_started_frame": {f"p{q}": _r(percentile(r_announce, q)) for q in (50, 90, 99)},
            "added_paired": {f"p{q}": _r(percentile(paired_diffs, q)) for q in (50, 90, 99)},
        },
        "gap_ms": {
            "relay": {f"p{q}": _r(percentile(r_gaps, q)) for q in (1, 50, 99)}
            | {"max": _r(max(r_gaps, default=math.nan))},
            "ideal_coalesced_direct": {f"p{q}": _r(percentile(ideal_gaps, q)) for q in (1, 50, 99)},
            "direct_tokens": {f"p{q}": _r(percentile(d_token_gaps, q)) for q in (50, 99)}
            | {"max": _r(max(d_token_gaps, default=math.nan))},
            "stall_threshold_ms": stall_ms,
            "direct_stalls": sum(1 for g in d_token_gaps if g > 2 * event_interval),
            "relay_gaps_under_33ms": sum(1 for g in r_gaps if g < 33.0),
            "relay_gaps": len(r_gaps),
        },
        "frame_window_ms": window,
        "delta_frames_per_turn": _r(delta_frames / n_turns),
        "tokens_relayed": tokens_relayed,
        "text_mismatches_vs_direct": mismatches(rd["turns"], rr["turns"]),
        "offset_errors": sum(t.get("offset_errors", 0) for t in relay_all),
        "meter": {"direct": rd.get("meter", {}), "relay": meter},
        "cpu_share": {"direct": bound(rd.get("meter", {})), "relay": bound(meter)},
        "server_thread_cpu_s": rr.get("server_thread_cpu_s", {}),
        "client_loop_lag_ms_p99": {
            "direct": _r(rd.get("loop_lag_ms_p99")),
            "relay": _r(rr.get("loop_lag_ms_p99")),
        },
        "phase_s": {"direct": _r(rd["duration_s"], 1), "relay": _r(rr["duration_s"], 1)},
        "slip": slip,
        "peak_in_flight": rr.get("peak_in_flight"),
        "rss_kb": rss,
        "db_writes": writes,
        "stray_frames": rr.get("stray_frames", 0),
    }
    return {"figures": figures, "details": details}


# ---- knee -------------------------------------------------------------------------------------


def overloaded(step: dict[str, Any]) -> list[str]:
    """Why a knee step (``{"figures", "details"}`` of :func:`load_summary`) is overloaded:
    an empty list when it is not (see the module docstring)."""
    d = step["details"]
    reasons = []
    server = d["cpu_share"]["relay"].get("server_share")
    if server is not None and server >= OVERLOAD_CPU_SHARE:
        reasons.append(f"server at {server:.0%} of a core")
    p50 = step["figures"].get("added_ttft_ms_p50")
    if p50 is not None and p50 > OVERLOAD_ADDED_P50_MS:
        reasons.append(f"added TTFT p50 {p50:,.0f} ms (turns queue)")
    failed = d["turns_failed"]["relay"] + d["turns_failed"]["direct"]
    if failed:
        reasons.append(f"{failed} turns failed")
    if d["stopped_early"]["relay"]:
        reasons.append("phase cap reached")
    if d.get("slip") is not None and d["slip"] > OVERLOAD_SLIP:
        reasons.append(f"schedule slipped ({d['slip']:.2f} × the direct phase)")
    return reasons


def knee_ok(step: dict[str, Any]) -> bool:
    """Whether a knee step meets the knee criterion: added TTFT p99 ≤ 25 ms, no stalls, every
    relayed turn completed."""
    f, d = step["figures"], step["details"]
    p99 = f["added_ttft_ms_p99"]
    return (
        p99 is not None
        and p99 <= KNEE_P99_MS
        and f["stalls"] == 0
        and d["turns_failed"]["relay"] == 0
        and d["turns_completed"]["relay"] > 0
    )


def knee(steps: Sequence[dict[str, Any]]) -> int:
    """``knee_streams``: the largest ``figures.streams`` among ``steps`` that meets
    :func:`knee_ok`; 0 when none does."""
    return max((s["figures"]["streams"] for s in steps if knee_ok(s)), default=0)


# ---- fan-out ----------------------------------------------------------------------------------


def fanout_summary(raw: dict[str, Any]) -> dict[str, Any]:
    """Figures of the fan-out burst. ``raw``: ``{"relay": {"turns": [...]}, "direct":
    {"turns": [...]}}`` whose turn records carry ``sent_at_ms`` (ms since the burst's first
    send), ``announce_ms`` and ``ttft_ms`` (ms since that turn's own send)."""

    def last(turns: Sequence[dict[str, Any]], key: str) -> float | None:
        xs = [t["sent_at_ms"] + t[key] for t in turns if t.get(key) is not None]
        return max(xs) if xs and len(xs) == len(turns) else None

    relay, direct = raw["relay"]["turns"], raw["direct"]["turns"]
    return {
        "figures": {
            "fanout_last_started_ms": _r(last(relay, "announce_ms")),
            "fanout_last_first_token_ms": _r(last(relay, "ttft_ms")),
        },
        "details": {
            "turns": len(relay),
            "completed": len(_complete(relay)),
            "statuses": sorted({t["status"] for t in relay}),
            "direct_last_first_token_ms": _r(last(direct, "ttft_ms")),
            "last_send_ms": _r(max((t["sent_at_ms"] for t in relay), default=math.nan)),
            "started_ms": {
                f"p{q}": _r(percentile([t["sent_at_ms"] + t["announce_ms"] for t in relay if t.get("announce_ms") is not None], q))
                for q in (50, 99)
            },
            "text_mismatches_vs_direct": mismatches(direct, relay),
            "meter": {"direct": raw["direct"].get("meter", {}), "relay": raw["relay"].get("meter", {})},
            "cpu_share": {"direct": bound(raw["direct"].get("meter", {})), "relay": bound(raw["relay"].get("meter", {}))},
        },
    }


# ---- compare ----------------------------------------------------------------------------------


def compare_summary(raw: dict[str, Any]) -> dict[str, Any]:
    """Figures of the compare phase. ``raw``: ``{"answers": [{"lane", "run", "announce_ms",
    "first_ms", "status"}, …], "expected", "notices", "wall_ms"}`` (ms since the ``send``).

    ``compare_last_lane_first_token_ms``: send → the first token of the last lane to get one
    (max over lanes of that lane's earliest first token), the time until every lane shows text;
    ``compare_last_first_token_ms``: send → the last first token of every answer (repeat runs
    queue behind the comparison's concurrency bound). None when an answer never got a token."""
    answers = raw.get("answers") or []
    by_lane: dict[int, list[float]] = {}
    for a in answers:
        if a.get("first_ms") is not None:
            by_lane.setdefault(a["lane"], []).append(a["first_ms"])
    lanes = {a["lane"] for a in answers}
    firsts = [a["first_ms"] for a in answers if a.get("first_ms") is not None]
    complete = [a for a in answers if a.get("status") == "complete"]
    return {
        "figures": {
            "compare_last_lane_first_token_ms": _r(max(min(v) for v in by_lane.values()))
            if by_lane and len(by_lane) == len(lanes) else None,
            "compare_last_first_token_ms": _r(max(firsts)) if answers and len(firsts) == raw.get("expected") else None,
        },
        "details": {
            "answers": len(answers), "expected": raw.get("expected"), "completed": len(complete),
            "statuses": sorted({a.get("status") or "none" for a in answers}), "notices": raw.get("notices") or [],
            "first_token_ms_by_run": {
                str(r): _r(max((a["first_ms"] for a in answers if a["run"] == r and a.get("first_ms") is not None),
                               default=math.nan))
                for r in sorted({a["run"] for a in answers})
            },
            "wall_ms": raw.get("wall_ms"),
            "meter": raw.get("meter", {}),
        },
    }


# ---- the whole run ---------------------------------------------------------------------------


FIGURES = (
    "added_ttft_ms_p50_1", "added_ttft_ms_p99_1", "streams", "added_ttft_ms_p50",
    "added_ttft_ms_p99", "added_gap_ms_p99", "stalls", "tokens_per_cpu_second", "knee_streams",
    "idle_socket_kb", "active_stream_kb", "mean_frame_interval_ms", "frames_per_turn",
    "bytes_per_turn", "text_bytes_per_turn", "delta_envelope_bytes", "db_writes_per_turn",
    "fanout_last_started_ms", "fanout_last_first_token_ms", "compare_last_lane_first_token_ms",
    "compare_last_first_token_ms", "text_mismatches",
    "upstream_us_per_event", "upstream_bound", "browser_longest_task_ms",
    "browser_script_ms_per_1k_tokens", "browser_recreated_nodes",
)


def summarize(raw: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """Every figure of one run from the client's ``raw`` result (keys ``sequential``,
    ``relay``, ``knee``, ``fanout``, ``browser``, each optional) and the run's ``params``
    (``relay``: the 100-stream load parameters; ``knee``: the knee load parameters without
    ``streams``). Returns ``{"figures": {name: value | None}, "details": {phase: …}}`` with
    every name of :data:`FIGURES` present (None: the phase did not run)."""
    figures: dict[str, Any] = dict.fromkeys(FIGURES)
    details: dict[str, Any] = {}
    meters: list[tuple[str, dict[str, Any]]] = []
    mismatch_total: int | None = None

    def add_mismatches(n: int) -> None:
        nonlocal mismatch_total
        mismatch_total = (mismatch_total or 0) + n

    if raw.get("sequential"):
        s = raw["sequential"]
        p = paired(s["pairs"])
        figures["added_ttft_ms_p50_1"] = _r(p["added_ms"]["p50"], 2)
        figures["added_ttft_ms_p99_1"] = _r(p["added_ms"]["p99"], 2)
        dt = [x["direct"] for x in s["pairs"]]
        rt = [x["relay"] for x in s["pairs"]]
        p["text_mismatches_vs_direct"] = mismatches(dt, rt)
        p["turns_failed"] = sum(1 for t in dt + rt if t["status"] != "complete")
        p["meter"] = s.get("meter", {})
        p["cpu_share"] = bound(s.get("meter", {}))
        add_mismatches(p["text_mismatches_vs_direct"])
        meters.append(("sequential", s.get("meter", {})))
        details["sequential"] = p

    if raw.get("relay"):
        r = load_summary(raw["relay"], params["relay"])
        figures.update({k: v for k, v in r["figures"].items() if k in figures})
        details["relay"] = r["details"]
        add_mismatches(r["details"]["text_mismatches_vs_direct"])
        meters += [("relay/direct", raw["relay"]["direct"].get("meter", {})),
                   ("relay/relay", raw["relay"]["relay"].get("meter", {}))]

    if raw.get("knee"):
        steps = []
        for st in raw["knee"]["steps"]:
            kp = {**params["knee"], "streams": st["streams"]}
            summary = load_summary(st, kp)
            why = overloaded(summary)
            steps.append((summary, why))
            add_mismatches(summary["details"]["text_mismatches_vs_direct"])
            meters += [(f"knee {st['streams']}/direct", st["direct"].get("meter", {})),
                       (f"knee {st['streams']}/relay", st["relay"].get("meter", {}))]
        figures["knee_streams"] = knee([s for s, _ in steps])
        details["knee"] = {
            "criterion": f"added TTFT p99 ≤ {KNEE_P99_MS:g} ms, no stalls, every turn completed",
            "steps": [
                {
                    "streams": s["figures"]["streams"],
                    "added_ttft_ms_p50": s["figures"]["added_ttft_ms_p50"],
                    "added_ttft_ms_p99": s["figures"]["added_ttft_ms_p99"],
                    "stalls": s["figures"]["stalls"],
                    "tokens_per_cpu_second": s["figures"]["tokens_per_cpu_second"],
                    "server_cpu_share": s["details"]["cpu_share"]["relay"]["server_share"],
                    "turns_completed": s["details"]["turns_completed"],
                    "turns_failed": s["details"]["turns_failed"],
                    "ttft_ms": s["details"]["ttft_ms"],
                    "slip": s["details"]["slip"],
                    "meets_criterion": knee_ok(s),
                    "overloaded": why,
                    "cpu_share": s["details"]["cpu_share"],
                }
                for s, why in steps
            ],
            "stopped_after": raw["knee"].get("stopped_after"),
        }

    if raw.get("fanout"):
        f = fanout_summary(raw["fanout"])
        figures.update(f["figures"])
        details["fanout"] = f["details"]
        add_mismatches(f["details"]["text_mismatches_vs_direct"])
        meters += [("fanout/direct", raw["fanout"]["direct"].get("meter", {})),
                   ("fanout/relay", raw["fanout"]["relay"].get("meter", {}))]

    if raw.get("compare"):
        c = compare_summary(raw["compare"])
        figures.update(c["figures"])
        details["compare"] = c["details"]
        meters.append(("compare", raw["compare"].get("meter", {})))

    if raw.get("browser"):
        b = browser_summary(raw["browser"])
        figures.update(b["figures"])
        details["browser"] = b["details"]

    figures["text_mismatches"] = mismatch_total
    shares = {name: bound(m) for name, m in meters if m}
    if shares:
        figures["upstream_bound"] = any(s["upstream_bound"] for s in shares.values())
    cpu = sum(m.get("upstream_cpu_s") or 0.0 for _, m in meters if m.get("upstream_events"))
    events = sum(m.get("upstream_events") or 0 for _, m in meters)
    figures["upstream_us_per_event"] = _r(1e6 * cpu / events, 1) if events else None
    details["phases"] = {
        "cpu_share": shares,
        "upstream_us_per_event": {
            name: _r(1e6 * m["upstream_cpu_s"] / m["upstream_events"], 1)
            for name, m in meters
            if m.get("upstream_events")
        },
        "upstream_bound_phases": sorted(n for n, s in shares.items() if s["upstream_bound"]),
        "upstream_cpu_s": _r(cpu, 2),
        "upstream_events": events,
    }
    return {"figures": figures, "details": details}


# ---- browser ------------------------------------------------------------------------------------


def browser_summary(raw: dict[str, Any]) -> dict[str, Any]:
    """Figures of the browser phase from ``bench.browser``'s record: ``tokens``,
    ``script_s`` (CDP ``ScriptDuration`` delta over the answer, of which ``observer_ms`` was
    the benchmark's own MutationObserver: subtracted), ``longtasks_ms`` (durations
    of PerformanceObserver ``longtask`` entries during the answer), ``longest_task_ms`` (from a
    trace of the renderer's main thread, None when tracing was off), ``recreated_nodes``
    (nodes removed from completed blocks while streaming)."""
    tokens = raw.get("tokens") or 0
    long_tasks = raw.get("longtasks_ms") or []
    traced = raw.get("longest_task_ms")
    longest = traced if traced is not None else (max(long_tasks) if long_tasks else None)
    script_s = raw.get("script_s")
    script_ms = None if script_s is None else 1000.0 * script_s - (raw.get("observer_ms") or 0.0)
    return {
        "figures": {
            "browser_longest_task_ms": _r(longest, 1),
            "browser_script_ms_per_1k_tokens": _r(1000.0 * script_ms / tokens, 2)
            if script_ms is not None and tokens
            else None,
            "browser_recreated_nodes": raw.get("recreated_nodes"),
        },
        "details": {k: v for k, v in raw.items() if k not in ("longtasks_ms",)}
        | {"longtasks_over_50ms": len([x for x in long_tasks if x > 50]),
           "longtasks_ms_max": _r(max(long_tasks, default=math.nan), 1),
           "longtasks_while_streaming_ms_max": _r(max(raw.get("longtasks_while_streaming_ms") or [], default=math.nan), 1),
           "script_ms": _r(script_ms, 1)},
    }


# ---- targets ------------------------------------------------------------------------------------


def db_writes_limit(params: dict[str, Any]) -> float:
    """``3 + 1 per 2 s of streaming``: 3 + ⌊planned streaming seconds ÷ 2⌋, where planned
    streaming = (events − 1) × event interval of the 100-stream phase's answers."""
    events = -(-params["tokens"] // params["tokens_per_event"])
    streaming_s = (events - 1) * params["tokens_per_event"] / params["rate"]
    return 3 + math.floor(streaming_s / 2)


def targets(fig: dict[str, Any], params: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every figure of :data:`FIGURES` with its target (issue 9's table; issue 4's for
    ``idle_socket_kb`` and ``mean_frame_interval_ms``), value and ``met``: True, False, or None
    (not measured, or no target)."""

    def le(v: Any, limit: float) -> bool | None:
        return None if v is None else v <= limit

    def ge(v: Any, limit: float) -> bool | None:
        return None if v is None else v >= limit

    bytes_limit = None
    if fig.get("text_bytes_per_turn") is not None and fig.get("frames_per_turn") is not None:
        bytes_limit = round(1.5 * fig["text_bytes_per_turn"] + 64 * fig["frames_per_turn"])
    writes_limit = db_writes_limit(params["relay"]) if params.get("relay") else None
    rules: dict[str, tuple[str, bool | None]] = {
        "added_ttft_ms_p50_1": ("≤ 2 ms", le(fig["added_ttft_ms_p50_1"], 2)),
        "added_ttft_ms_p99_1": ("≤ 5 ms", le(fig["added_ttft_ms_p99_1"], 5)),
        "streams": ("100", None if fig["streams"] is None else fig["streams"] >= 100),
        "added_ttft_ms_p50": ("≤ 5 ms", le(fig["added_ttft_ms_p50"], 5)),
        "added_ttft_ms_p99": ("≤ 25 ms", le(fig["added_ttft_ms_p99"], 25)),
        "added_gap_ms_p99": ("no target", None),
        "stalls": ("0", le(fig["stalls"], 0)),
        "tokens_per_cpu_second": ("≥ 8,000", ge(fig["tokens_per_cpu_second"], 8000)),
        "knee_streams": ("≥ 150", ge(fig["knee_streams"], 150)),
        "idle_socket_kb": ("≤ 30 KB", le(fig["idle_socket_kb"], 30)),
        "active_stream_kb": ("no target", None),
        "mean_frame_interval_ms": ("≥ 33 ms", ge(fig["mean_frame_interval_ms"], 33)),
        "frames_per_turn": ("no target", None),
        "bytes_per_turn": (
            f"≤ 1.5 × text + 64 B × frames = {bytes_limit:,} B" if bytes_limit is not None
            else "≤ 1.5 × text + 64 B × frames",
            le(fig["bytes_per_turn"], bytes_limit) if bytes_limit is not None else None,
        ),
        "text_bytes_per_turn": ("no target", None),
        "delta_envelope_bytes": ("≤ 64 B", le(fig["delta_envelope_bytes"], 64)),
        "db_writes_per_turn": (
            f"≤ 3 + 1 per 2 s of streaming = {writes_limit}" if writes_limit is not None
            else "≤ 3 + 1 per 2 s of streaming",
            le(fig["db_writes_per_turn"], writes_limit) if writes_limit is not None else None,
        ),
        "fanout_last_started_ms": ("no target", None),
        "fanout_last_first_token_ms": ("no target", None),
        "compare_last_lane_first_token_ms": ("no target", None),
        "compare_last_first_token_ms": ("no target", None),
        "text_mismatches": ("0", le(fig["text_mismatches"], 0)),
        "upstream_us_per_event": ("no target", None),
        "upstream_bound": (
            "no (upstream and client each ≤ 80 % of a core)",
            None if fig["upstream_bound"] is None else not fig["upstream_bound"],
        ),
        "browser_longest_task_ms": ("≤ 50 ms", le(fig["browser_longest_task_ms"], 50)),
        "browser_script_ms_per_1k_tokens": ("≤ 15 ms", le(fig["browser_script_ms_per_1k_tokens"], 15)),
        "browser_recreated_nodes": ("0", le(fig["browser_recreated_nodes"], 0)),
    }
    return {
        name: {"target": rules[name][0], "value": fig.get(name), "met": rules[name][1]}
        for name in FIGURES
    }
