"""Regenerate the README's relay benchmark table from ``bench.json``: ``python -m bench.readme``.

Rewrites what lies between ``<!-- bench:start -->`` and ``<!-- bench:end -->`` in README.md
(both markers must exist; nothing else is touched) with a markdown table of the figures, their
targets and whether each is met, followed by the commit, CPU, load, versions and parameters of
the run. ``--check`` exits 1 when the README is not up to date with ``bench.json``.

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


def _fmt(v: Any, unit: str = "") -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        s = f"{v:,.0f}" if abs(v) >= 1000 else f"{v:,.1f}"
    elif isinstance(v, int):
        s = f"{v:,}"
    else:
        s = str(v)
    return f"{s} {unit}".rstrip()


def _met(t: dict[str, Any] | None) -> str:
    if not t or t.get("met") is None:
        return ""
    return "✅ met" if t["met"] else "❌ missed"


def render(doc: dict[str, Any]) -> str:
    """The markdown between the markers (no markers) for the ``bench.json`` document ``doc``."""
    tg, d, meta = doc["targets"], doc["details"], doc["meta"]
    p = meta["params"]
    ttft = d["ttft_ms"]
    rows = [
        ("Concurrent streams (1 daphne process)", _fmt(doc["streams"]), "100", ""),
        (
            "Added time to first token, p50",
            _fmt(doc["added_ttft_ms_p50"], "ms"),
            tg["added_ttft_ms_p50"]["target"],
            _met(tg["added_ttft_ms_p50"]),
        ),
        (
            "Added time to first token, p99",
            _fmt(doc["added_ttft_ms_p99"], "ms"),
            tg["added_ttft_ms_p99"]["target"],
            _met(tg["added_ttft_ms_p99"]),
        ),
        ("Added inter-frame gap, p99", _fmt(doc["added_gap_ms_p99"], "ms"), "", ""),
        (
            f"Stalls (gaps > {d['gap_ms']['stall_threshold_ms']:.0f} ms)",
            _fmt(doc["stalls"]),
            tg["stalls"]["target"],
            _met(tg["stalls"]),
        ),
        (
            "Relayed tokens per server CPU-second",
            _fmt(doc["tokens_per_cpu_second"]),
            tg["tokens_per_cpu_second"]["target"],
            _met(tg["tokens_per_cpu_second"]),
        ),
        (
            "RSS per idle socket",
            _fmt(doc["idle_socket_kb"], "KB"),
            tg["idle_socket_kb"]["target"],
            _met(tg["idle_socket_kb"]),
        ),
        ("RSS per active stream", _fmt(doc["active_stream_kb"], "KB"), "", ""),
        (
            "Mean interval between delta frames",
            _fmt(d["mean_frame_interval_ms"], "ms"),
            tg["mean_frame_interval_ms"]["target"],
            _met(tg["mean_frame_interval_ms"]),
        ),
        ("Frames per turn", _fmt(doc["frames_per_turn"]), "", ""),
        (
            "Bytes per turn",
            _fmt(doc["bytes_per_turn"], "B"),
            tg["bytes_per_turn"]["target"],
            _met(tg["bytes_per_turn"]),
        ),
        ("Answer text bytes per turn", _fmt(doc["text_bytes_per_turn"], "B"), "", ""),
        ("DB writes per turn", _fmt(doc["db_writes_per_turn"]), "≤ 3 + 1 per 2 s of streaming", ""),
    ]
    lines = ["| Figure | Measured | Target | |", "|---|---:|---|---|"]
    lines += [f"| {a} | {b} | {c} | {e} |" for a, b, c, e in rows]
    load = f"{meta['loadavg_before'][0]:.2f} → {meta['loadavg_after'][0]:.2f}"
    lines += [
        "",
        f"Run of commit `{meta['commit']}` on {meta['date']}: {meta['cpu']} × {meta['cpu_count']} cores, "
        f"load average (1 min) {load}; Python {meta['python']}, Django {meta['django']}, channels "
        f"{meta['channels']}, daphne {meta['daphne']}, Twisted {meta['twisted']}. {p['streams']} streams × "
        f"{p['turns']} turns of {p['tokens']} tokens at {_fmt(p['rate'])} tokens/s (upstream TTFT {p['ttft_ms']} ms), "
        f"{p['users']} users, frame window {_fmt(p['window_ms'])} ms; {meta['runtime_s']} s in all.",
        f"Time to first token direct p50/p99 {_fmt(ttft['direct']['p50'])}/{_fmt(ttft['direct']['p99'])} ms, "
        f"relayed {_fmt(ttft['relay']['p50'])}/{_fmt(ttft['relay']['p99'])} ms; server CPU "
        f"{_fmt(d['server_cpu_s']['relay'])} s over a {_fmt(d['phase_s']['relay'])} s relay phase "
        f"(simulator {_fmt(d['simulator_cpu_s']['relay'])} s, clients {_fmt(d['client_cpu_s']['relay'])} s); "
        f"{d['turns_completed']['relay']} relayed turns completed, {d['turns_failed']['relay']} failed, "
        f"{d['text_mismatches_vs_direct']} differing from the direct text.",
    ]
    return "\n".join(lines)


def rewrite(readme: str, doc: dict[str, Any]) -> str:
    """``readme`` with the text between the markers replaced. Raises ValueError without markers."""
    i, j = readme.find(START), readme.find(END)
    if i < 0 or j < i:
        raise ValueError(f"README has no {START} … {END} markers")
    return readme[: i + len(START)] + "\n" + render(doc) + "\n" + readme[j:]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.readme", description=__doc__.splitlines()[0])
    p.add_argument("--bench", default=str(ROOT / "bench.json"))
    p.add_argument("--readme", default=str(ROOT / "README.md"))
    p.add_argument("--check", action="store_true", help="exit 1 if the README is out of date")
    args = p.parse_args(argv)
    doc = json.loads(Path(args.bench).read_text())
    if doc["meta"]["params"].get("profiled"):
        print(
            "refusing a profiled run's bench.json (its CPU figures are inflated)", file=sys.stderr
        )
        return 1
    path = Path(args.readme)
    old = path.read_text()
    new = rewrite(old, doc)
    if args.check:
        if new != old:
            print(
                "README.md's relay benchmark table is out of date: run python -m bench.readme",
                file=sys.stderr,
            )
            return 1
        return 0
    path.write_text(new)
    print(f"updated {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
