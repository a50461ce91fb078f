"""Regenerate the README's relay benchmark table from ``bench.json``: ``python -m bench.readme``.

Rewrites what lies between ``<!-- bench:start -->`` and ``<!-- bench:end -->`` in README.md
(both markers must exist; nothing else is touched) with a markdown table of every figure, its
target and whether it is met, then the knee steps, the run's set-up (commit, CPU, load,
pinning, versions, parameters) and the checks behind the figures. ``--check`` exits 1 when the
README is not up to date with ``bench.json``. :func:`text_table` is the same table as plain
text (what ``python -m bench`` prints).

May import: the standard library only.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
START, END = "<!-- bench:start -->", "<!-- bench:end -->"

#: (figure key, label, unit) in table order; every key of ``bench.stats.FIGURES``.
ROWS: tuple[tuple[str, str, str], ...] = (
    ("added_ttft_ms_p50_1", "Added time to first token at 1 stream, p50 (paired)", "ms"),
    ("added_ttft_ms_p99_1", "Added time to first token at 1 stream, p99 (paired)", "ms"),
    ("streams", "Concurrent streams (1 daphne process)", ""),
    ("added_ttft_ms_p50", "Added time to first token at 100 streams, p50", "ms"),
    ("added_ttft_ms_p99", "Added time to first token at 100 streams, p99", "ms"),
    ("added_gap_ms_p99", "Added inter-frame gap at 100 streams, p99", "ms"),
    ("stalls", "Stalls at 100 streams", ""),
    ("tokens_per_cpu_second", "Relayed tokens per server CPU-second at 100 streams", ""),
    ("knee_streams", "Knee: most streams with added TTFT p99 ≤ 25 ms and no stalls", ""),
    ("idle_socket_kb", "RSS per idle socket", "KB"),
    ("active_stream_kb", "RSS per active stream", "KB"),
    ("mean_frame_interval_ms", "Mean interval between delta frames", "ms"),
    ("frames_per_turn", "Frames per turn", ""),
    ("bytes_per_turn", "Bytes per turn", "B"),
    ("text_bytes_per_turn", "Answer text bytes per turn", "B"),
    ("delta_envelope_bytes", "Delta frame envelope (bytes beyond its text)", "B"),
    ("db_writes_per_turn", "DB writes per turn", ""),
    ("fanout_last_started_ms", "Fan-out: first send → last turn-started frame", "ms"),
    ("fanout_last_first_token_ms", "Fan-out: first send → last first token", "ms"),
    ("compare_last_lane_first_token_ms", "Compare (lanes × runs, one send): send → last lane's first token", "ms"),
    ("compare_last_first_token_ms", "Compare: send → last repeat run's first token", "ms"),
    ("text_mismatches", "Relayed texts differing from the direct text", ""),
    ("upstream_us_per_event", "Lean upstream CPU per token event", "µs"),
    ("upstream_bound", "Upstream-bound (upstream or client > 80 % of a core in a phase)", ""),
    ("browser_longest_task_ms", "Browser: longest main-thread task", "ms"),
    ("browser_script_ms_per_1k_tokens", "Browser: script time per 1,000 tokens", "ms"),
    ("browser_recreated_nodes", "Browser: DOM nodes re-created above the streaming point", ""),
)


def fmt(v: Any, unit: str = "") -> str:
    """A figure: thousands separators, one decimal below 1,000 (two below 10 for ms), "—" for
    None, yes/no for booleans."""
    if v is None:
        return "—"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        s = f"{v:,.0f}" if abs(v) >= 1000 else (f"{v:,.2f}" if abs(v) < 10 else f"{v:,.1f}")
    elif isinstance(v, int):
        s = f"{v:,}"
    else:
        s = str(v)
    return f"{s} {unit}".rstrip()


def met(t: dict[str, Any] | None, value: Any) -> str:
    """"✅ met", "❌ missed", "" (no target) or "not measured"."""
    if not t or t.get("target") == "no target":
        return ""
    if t.get("met") is None:
        return "not measured" if value is None else ""
    return "✅ met" if t["met"] else "❌ missed"


def rows(doc: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """(label, value, target, met) of every figure of ``doc``."""
    tg = doc.get("targets", {})
    out = []
    for key, label, unit in ROWS:
        t = tg.get(key, {})
        target = t.get("target", "")
        out.append((label, fmt(doc.get(key), unit), "" if target == "no target" else target, met(t, doc.get(key))))
    return out


def knee_lines(doc: dict[str, Any]) -> list[str]:
    """One line per knee step."""
    knee = doc.get("details", {}).get("knee")
    if not knee:
        return []
    parts = []
    for s in knee["steps"]:
        why = f"; overloaded: {', '.join(s['overloaded'])}" if s["overloaded"] else ""
        parts.append(
            f"{s['streams']} streams: added TTFT p50/p99 {fmt(s['added_ttft_ms_p50'])}/"
            f"{fmt(s['added_ttft_ms_p99'])} ms, {fmt(s['stalls'])} stalls, "
            f"{fmt(s['tokens_per_cpu_second'])} tokens per CPU-second, server "
            f"{fmt(s['server_cpu_share'])} core"
            + (f" (other processes on its CPU {fmt(s['cpu_share']['relay'].get('others_on_server_core_share'))})"
               if s.get("cpu_share", {}).get("relay", {}).get("others_on_server_core_share") is not None else "")
            + why
        )
    return parts


def setup_lines(doc: dict[str, Any]) -> list[str]:
    """The run's set-up and its checks, as sentences."""
    d, meta = doc.get("details", {}), doc["meta"]
    p = meta["params"]
    pin = meta.get("pinning", {})
    load = f"{meta['loadavg_before'][0]:.2f} → {meta['loadavg_after'][0]:.2f}"
    pinned = (
        f"daphne pinned to CPU {pin['server_cpus']}, upstream, client and Chromium to {pin['others_cpus']}"
        if pin.get("enabled") else f"no pinning ({pin.get('note', 'unknown')})"
    )
    lines = [
        f"Run of commit `{meta['commit']}` on {meta['date']}: {meta['cpu']} × {meta['cpu_count']} cores, "
        f"{pinned}; load average (1 min) {load} (shared machine); Python {meta['python']}, Django "
        f"{meta['django']}, channels {meta['channels']}, daphne {meta['daphne']}, Twisted {meta['twisted']}; "
        f"{meta['runtime_s']} s in all ({', '.join(f'{k} {v} s' for k, v in meta.get('phase_wall_s', {}).items())}).",
        f"API style `{p.get('style', 'openai_chat')}`, {p.get('upstream', 'lean')} upstream; relay phase: "
        f"{p['streams']} streams × {p['turns']} turns of {p['tokens']} tokens at {fmt(p['rate'])} tokens/s "
        f"(upstream TTFT {p['ttft_ms']} ms), {p['users']} users, frame window {fmt(p['window_ms'])} ms.",
    ]
    r = d.get("relay")
    if r:
        m = r["meter"]
        others = r["cpu_share"]["relay"].get("others_on_server_core_share")
        wait = m["relay"].get("server_wait_s")
        lines.append(
            f"Relay phase: TTFT direct p50/p99 {fmt(r['ttft_ms']['direct']['p50'])}/{fmt(r['ttft_ms']['direct']['p99'])} ms, "
            f"relayed {fmt(r['ttft_ms']['relay']['p50'])}/{fmt(r['ttft_ms']['relay']['p99'])} ms (turn-started frame p50 "
            f"{fmt(r['ttft_ms']['relay_turn_started_frame']['p50'])} ms); server CPU {fmt(m['relay'].get('server_cpu_s'))} s "
            f"over a {fmt(r['phase_s']['relay'])} s relay sub-phase"
            + (f" (other processes ran on its CPU {others:.0%} of the time; its threads waited {fmt(wait)} s "
               f"ready to run)" if others is not None and wait is not None else "")
            + f" (upstream {fmt(m['relay'].get('upstream_cpu_s'))} s, "
            f"client {fmt(m['relay'].get('client_cpu_s'))} s); {r['turns_completed']['relay']} of "
            f"{r['turns_planned']} relayed turns completed, {r['turns_failed']['relay']} failed"
            + (f", {r['turns_not_started']['relay']} not started (phase cap)" if r.get("turns_not_started", {}).get("relay") else "")
            + "."
        )
    s = d.get("sequential")
    if s:
        others = s.get("cpu_share", {}).get("others_on_server_core_share")
        sm = s.get("meter", {})
        lines.append(
            f"Sequential phase: {s['pairs_used']} pairs of {s['pairs']} used; TTFT direct p50/p99 "
            f"{fmt(s['direct_ttft_ms']['p50'])}/{fmt(s['direct_ttft_ms']['p99'])} ms, relayed "
            f"{fmt(s['relay_ttft_ms']['p50'])}/{fmt(s['relay_ttft_ms']['p99'])} ms"
            + (f"; the server ran {fmt(sm.get('server_cpu_s'))} s and its threads waited {fmt(sm.get('server_wait_s'))} s "
               f"ready to run, other processes ran on its CPU {others:.0%} of the time" if others is not None else "")
            + "."
        )
    kl = knee_lines(doc)
    if kl:
        lines.append("Knee steps: " + "; ".join(kl) + ".")
    f = d.get("fanout")
    if f:
        lines.append(
            f"Fan-out {p.get('fanout', '')}: {f['completed']} of {f['turns']} turns completed; the same burst "
            f"sent directly has its last first token at {fmt(f['direct_last_first_token_ms'])} ms."
        )
    b = d.get("browser")
    if b:
        lines.append(
            f"Browser: {fmt(b.get('tokens'))} tokens in {fmt(b.get('answer_s'))} s, {fmt(b.get('delta_frames'))} delta "
            f"frames; script {fmt(b.get('script_s'))} s (observer {fmt(b.get('observer_ms'))} ms), layout "
            f"{fmt(b.get('layout_s'))} s, style {fmt(b.get('recalc_style_s'))} s; "
            f"{b.get('longtasks_over_50ms')} long tasks (> 50 ms), of which {len(b.get('longtasks_while_streaming_ms') or [])} "
            f"while the answer streamed (longest {fmt(b.get('longtasks_while_streaming_ms_max'))} ms); final swap removed "
            f"{fmt(b.get('final_swap_removed_nodes'))} nodes; answer root `{b.get('answer_root')}`."
        )
    ph = d.get("phases", {})
    if ph:
        bound = ph.get("upstream_bound_phases") or []
        lines.append(
            "Upstream-bound phases: " + (", ".join(bound) if bound else "none")
            + f"; lean upstream CPU {fmt(ph.get('upstream_cpu_s'))} s for {fmt(ph.get('upstream_events'))} token events."
        )
    return lines


def render(doc: dict[str, Any]) -> str:
    """The markdown between the markers (no markers) for the ``bench.json`` document ``doc``."""
    lines = ["| Figure | Measured | Target | |", "|---|---:|---|---|"]
    lines += [f"| {a} | {b} | {c} | {e} |" for a, b, c, e in rows(doc)]
    lines.append("")
    lines += [x + "  " if i < len(setup_lines(doc)) - 1 else x for i, x in enumerate(setup_lines(doc))]
    return "\n".join(lines)


def text_table(doc: dict[str, Any]) -> str:
    """The table as plain text, then the set-up lines (what ``python -m bench`` prints)."""
    rs = rows(doc)
    w = max(len(r[0]) for r in rs)
    v = max(len(r[1]) for r in rs)
    t = max(len(r[2]) for r in rs)
    out = [f"{'figure':<{w}}  {'value':>{v}}  {'target':<{t}}  met"]
    out += [f"{a:<{w}}  {b:>{v}}  {c:<{t}}  {e}" for a, b, c, e in rs]
    out.append("")
    out += setup_lines(doc)
    return "\n".join(out)


def rewrite(readme: str, doc: dict[str, Any]) -> str:
    """``readme`` with the text between the markers replaced. Raises ValueError without markers."""
    i, j = readme.find(START), readme.find(END)
    if i < 0 or j < i:
        raise ValueError(f"README has no {START} … {END} markers")
    return readme[: i + len(START)] + "\n" + render(doc) + "\n" + readme[j:]


def main(argv: list[str] | None = None) -> int:
    """Rewrite (or ``--check``) the README's table from ``--bench``."""
    p = argparse.ArgumentParser(prog="python -m bench.readme", description=__doc__.splitlines()[0])
    p.add_argument("--bench", default=str(ROOT / "bench.json"))
    p.add_argument("--readme", default=str(ROOT / "README.md"))
    p.add_argument("--check", action="store_true", help="exit 1 if the README is out of date")
    args = p.parse_args(argv)
    doc = json.loads(Path(args.bench).read_text())
    if doc["meta"]["params"].get("profiled"):
        print("refusing a profiled run's bench.json (its CPU figures are inflated)", file=sys.stderr)
        return 1
    path = Path(args.readme)
    old = path.read_text()
    new = rewrite(old, doc)
    if args.check:
        if new != old:
            print("README.md's relay benchmark table is out of date: run python -m bench.readme", file=sys.stderr)
            return 1
        return 0
    path.write_text(new)
    print(f"updated {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
