"""What the compare page shows: lanes with their answers, the turn table and the speed chart.

Shared by the views and the websocket consumer (frames and page render the same partials in
``templates/compare/``). The chart is geometry only (numbers); the SVG is built by the template.

May import: Django templates, chat.frames, chat.compare.selectors, chat.compare.stats.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.template.loader import render_to_string
from django.utils.html import format_html
from django.utils.safestring import SafeString

from chat import frames
from chat.compare import selectors as cs
from chat.compare.stats import spread
from chat.models import Conversation, Lane, Message

CHART_W, CHART_H, PAD_L, PAD_B, PAD_T, PAD_R = 640, 260, 52, 34, 12, 34


@dataclass
class LaneView:
    """One lane as the page shows it: its row, position, label (A, B, … when ``blind``) and
    its answers per user message."""

    lane: Lane
    index: int
    label: str
    blind: bool
    # (user message, [views of the lane's answers to it: the shown one, then repeat runs])
    items: list[tuple[Message, list[frames.MessageView]]] = field(default_factory=list)

    @property
    def color(self) -> str:
        return f"lane-c{self.index}"


def _view(m: Message | None, live: Any) -> frames.MessageView | None:
    if m is None:
        return None
    if m.status == "streaming" and live is not None:
        now = live(m.id)
        if now is not None:
            return now
    return frames.MessageView.from_row(m)


def lane_views(conversation: Conversation, lanes: list[Lane], rows: cs.Rows, live: Any = None,
               hidden: bool | None = None) -> list[LaneView]:
    """Every lane with its (user message, [answer views]) pairs, in order. ``hidden`` (blind
    mode before the vote; computed when None): lanes are A, B, … and no answer shows its
    endpoint or model."""
    if hidden is None:
        hidden = cs.settings_hidden(conversation=conversation, rows=rows)
    out = []
    for i, lane in enumerate(lanes):
        lv = LaneView(lane, i, cs.lane_label(lane, i, blind=hidden), hidden)
        for u in rows.users:
            answers = sorted(rows.runs.get((u.pk, lane.pk), []), key=lambda m: m.run)
            views = [v for v in (_view(m, live) for m in answers) if v is not None]
            if hidden:
                for v in views:
                    v.snapshot, v.blind = {}, True
            lv.items.append((u, views))
        out.append(lv)
    return out


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) else None


COLUMNS = (
    # key, title, better ("min" | "max" | ""), unit
    ("ttft_ms", "TTFT", "min", "ms"),
    ("tokens_per_sec", "tok/s", "max", ""),
    ("total_ms", "total", "min", "ms"),
    ("prompt_tokens", "prompt", "", ""),
    ("completion_tokens", "completion", "", ""),
    ("reasoning_tokens", "reasoning", "", ""),
    ("cost_usd", "cost", "min", "usd"),
)


def _figures(m: Message) -> dict[str, float | None]:
    metrics, usage = m.metrics or {}, m.usage or {}
    return {
        "ttft_ms": _num(metrics.get("ttft_ms")), "tokens_per_sec": _num(metrics.get("tokens_per_sec")),
        "total_ms": _num(metrics.get("total_ms")), "prompt_tokens": _num(usage.get("prompt_tokens")),
        "completion_tokens": _num(usage.get("completion_tokens")),
        "reasoning_tokens": _num(usage.get("reasoning_tokens")), "cost_usd": _num(metrics.get("cost_usd")),
    }


def fmt(key: str, v: float | None) -> str:
    """A table cell: ms as "812 ms" / "12.40 s", USD with 6 decimals, counts as integers."""
    if v is None:
        return "—"
    if key.endswith("_ms"):
        return f"{v / 1000:.2f} s" if v >= 10_000 else f"{v:.0f} ms"
    if key == "cost_usd":
        return f"${v:.6f}"
    if key == "tokens_per_sec":
        return f"{v:.1f}"
    return f"{v:.0f}"


def turn_table(conversation: Conversation, lanes: list[Lane], rows: cs.Rows, user_msg: Message | None,
               hidden: bool = False) -> dict[str, Any]:
    """The table of one turn: one row per lane with the shown answer's figures (or, with
    repeat runs, the median of each column over the finished runs, plus p90 and min–max of
    TTFT, tok/s and total, and the cost sum), the best cell of each ranked column marked."""
    if user_msg is None:
        return {"rows": [], "columns": COLUMNS, "runs": 0}
    out_rows = []
    max_runs = 0
    for i, lane in enumerate(lanes):
        shown = rows.shown.get((user_msg.pk, lane.pk))
        runs = [m for m in rows.runs.get((user_msg.pk, lane.pk), []) if m.status == "complete"]
        all_runs = rows.runs.get((user_msg.pk, lane.pk), [])
        max_runs = max(max_runs, len(all_runs))
        figs = [_figures(m) for m in runs]
        if len(all_runs) > 1:
            values = {k: spread([f[k] for f in figs])["median"] for k, *_ in COLUMNS}
            costs = [f["cost_usd"] for f in figs if f["cost_usd"] is not None]
            values["cost_usd"] = sum(costs) if costs else None
            stats = {k: spread([f[k] for f in figs]) for k in ("ttft_ms", "tokens_per_sec", "total_ms")}
        else:
            values = _figures(shown) if shown is not None else {k: None for k, *_ in COLUMNS}
            stats = {}
        if hidden:  # before the vote: no price or reasoning figure tells the models apart
            values = {**values, "reasoning_tokens": None, "cost_usd": None}
            stats = {k: v for k, v in stats.items() if k in ("ttft_ms", "tokens_per_sec", "total_ms")}
        out_rows.append({
            "lane": lane, "index": i, "label": cs.lane_label(lane, i, blind=hidden),
            "model": "" if hidden else (shown.settings_snapshot or {}).get("model", lane.model) if shown else lane.model,
            "status": shown.status if shown is not None else "",
            "finish": (shown.finish_reason if shown is not None else "") or "—",
            "values": values, "stats": stats, "runs": len(all_runs), "done": len(runs),
            "cells": [], "message": shown,
        })
    for key, _title, better, _unit in COLUMNS:
        vals = [r["values"][key] for r in out_rows if r["values"][key] is not None]
        best = (min(vals) if better == "min" else max(vals)) if better and len(vals) > 1 else None
        for r in out_rows:
            v = r["values"][key]
            r["cells"].append({"key": key, "text": fmt(key, v), "best": best is not None and v == best})
    for r in out_rows:
        r["stat_cells"] = [
            {"key": k, "median": fmt(k, s["median"]), "p90": fmt(k, s["p90"]), "min": fmt(k, s["min"]),
             "max": fmt(k, s["max"]), "n": s["n"]}
            for k, s in r["stats"].items()
        ]
    return {"rows": out_rows, "columns": COLUMNS, "runs": max_runs}


def _nice(v: float) -> float:
    """A round axis maximum ≥ ``v``."""
    if v <= 0:
        return 1.0
    import math

    e = 10 ** math.floor(math.log10(v))
    for m in (1, 2, 2.5, 5, 10):
        if m * e >= v:
            return m * e
    return 10 * e


def chart(conversation: Conversation, lanes: list[Lane], rows: cs.Rows, user_msg: Message | None,
          hidden: bool = False) -> dict[str, Any]:
    """Geometry of the cumulative completion tokens vs ms since send chart: one polyline per
    lane from its shown answer's ``metrics.timings`` (a step from 0 at TTFT), axes with 5 ticks.
    ``{"w", "h", "lines": [{"label", "cls", "points": [(x, y)…], "end": (x, y), "marker_r"}],
    "xticks", "yticks", "empty"}``. Lines of equal lanes coincide, so each lane also has its own
    dash pattern (compare.css) and an end marker whose radius shrinks with the lane index (an
    earlier lane's marker shows as a ring around a later one's)."""
    series = []
    for i, lane in enumerate(lanes):
        m = rows.shown.get((user_msg.pk, lane.pk)) if user_msg is not None else None
        pts = [(float(a), float(b)) for a, b in ((m.metrics or {}).get("timings") or [])] if m is not None else []
        series.append((i, lane, pts))
    max_x = _nice(max((p[0] for _, _, pts in series for p in pts), default=0.0))
    max_y = _nice(max((p[1] for _, _, pts in series for p in pts), default=0.0))
    iw, ih = CHART_W - PAD_L - PAD_R, CHART_H - PAD_T - PAD_B

    def xy(ms: float, n: float) -> tuple[float, float]:
        return round(PAD_L + iw * ms / max_x, 1), round(PAD_T + ih - ih * n / max_y, 1)

    lines = []
    for i, lane, pts in series:
        if not pts:
            continue
        path = [xy(pts[0][0], 0.0)] + [xy(a, b) for a, b in pts]
        lines.append({"label": cs.lane_label(lane, i, blind=hidden), "cls": f"lane-c{i}",
                      "points": path, "end": path[-1], "marker_r": 5.5 - 0.6 * (i % 6)})
    xticks = [{"x": xy(max_x * t / 4, 0)[0], "label": fmt("x_ms", max_x * t / 4)} for t in range(5)]
    yticks = [{"y": xy(0, max_y * t / 4)[1], "label": f"{max_y * t / 4:g}"} for t in range(5)]
    return {"w": CHART_W, "h": CHART_H, "lines": lines, "xticks": xticks, "yticks": yticks, "empty": not lines,
            "x0": PAD_L, "y0": PAD_T + ih, "x1": PAD_L + iw, "y1": PAD_T}


def _neighbour(users: list[Message], u: Message | None, step: int) -> Message | None:
    if u is None:
        return None
    i = users.index(u) + step
    return users[i] if 0 <= i < len(users) else None


def summary_context(conversation: Conversation, lanes: list[Lane], rows: cs.Rows, turn: Any = None) -> dict[str, Any]:
    """Context of ``compare/summary.html``: the chosen turn (a user message id; default the
    last) with its table and chart."""
    user_msg = rows.users[-1] if rows.users else None
    if turn:
        user_msg = next((u for u in rows.users if str(u.pk) == str(turn)), user_msg)
    votes = cs.votes_by_turn(conversation=conversation) if conversation.blind else {}
    hidden = cs.settings_hidden(conversation=conversation, rows=rows, votes=votes)
    vote = votes.get(user_msg.turn_id) if user_msg is not None else None
    finished = user_msg is not None and all(
        (a := rows.shown.get((user_msg.pk, lane.pk))) is not None and a.status != "streaming" for lane in lanes)
    return {
        "conversation": conversation, "turn": user_msg, "hidden": hidden, "vote": vote,
        "can_vote": conversation.blind and user_msg is not None and vote is None and finished
        and user_msg is rows.users[-1],
        "vote_choices": [(i, cs.lane_label(lane, i, blind=True)) for i, lane in enumerate(lanes)],
        "vote_winner": (cs.lane_label(lanes[vote.winner_position], vote.winner_position, blind=True)
                        if vote is not None and vote.winner_position is not None
                        and vote.winner_position < len(lanes) else ""),
        "vote_ranking": [x.get("label", "?") for x in sorted(
            (x for x in (vote.lanes or []) if x.get("rank")), key=lambda x: x["rank"])] if vote is not None else [],
        "table": turn_table(conversation, lanes, rows, user_msg, hidden),
        "chart": chart(conversation, lanes, rows, user_msg, hidden),
        "turn_number": (rows.users.index(user_msg) + 1) if user_msg is not None else 0, "turn_count": len(rows.users),
        "prev_turn": _neighbour(rows.users, user_msg, -1), "next_turn": _neighbour(rows.users, user_msg, 1),
    }


def render_lanes(conversation: Conversation, lanes: list[Lane], rows: cs.Rows, endpoints: list[Any], live: Any, *,
                 oob: bool = False, decorate: Any = None, request: Any = None) -> str:
    """The ``#lanes`` region (every lane: its settings and its answers). ``decorate``: called
    with the lane views before rendering (the prompt versions of each lane, chat.compare.prompt_views);
    ``request``: renders the forms' CSRF tokens."""
    hidden = cs.settings_hidden(conversation=conversation, rows=rows)
    views = lane_views(conversation, lanes, rows, live, hidden)
    if decorate is not None:
        decorate(views)
    return render_to_string("compare/page.html#lanes", {
        "conversation": conversation, "lane_views": views,
        "endpoints": endpoints, "lanes_oob": oob, "lane_count": len(lanes), "max_lanes": cs.MAX_LANES,
        "min_lanes": cs.MIN_LANES,
    }, request=request)


def compare_list(comparisons: list[Conversation], *, current_id: int) -> str:
    """The sidebar's list of comparisons as an out-of-band swap (after the first send titled
    this one); compare.js then shows the title in the page head."""
    return render_to_string("compare/page.html#compare-list",
                            {"comparisons": comparisons, "current_id": current_id, "oob": True})


def turn_started(conversation: Conversation, lanes: list[Lane], user_msg: Message | None, answers: list[Message]) -> str:
    """Append, in each lane's column, the user message and that lane's answer skeletons (in
    blind mode without their endpoint and model)."""
    parts = []
    for lane in lanes:
        mine = sorted((a for a in answers if a.lane_id == lane.pk), key=lambda a: a.run)
        if not mine:
            continue
        views = [frames.MessageView.from_row(a) for a in mine]
        if conversation.blind:
            for v in views:
                v.snapshot = {}
        inner = render_to_string("compare/page.html#item", {"u": user_msg, "runs": views})
        parts.append(format_html('<div hx-swap-oob="beforeend:#lt-{}">{}</div>', lane.pk, SafeString(inner)))
    return "".join(parts)
