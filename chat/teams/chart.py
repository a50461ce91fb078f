"""Geometry of the usage chart: bars per day stacked by model, as numbers a template draws
into an ``<svg>`` (no markup is built here).

May import: the standard library.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

#: Fill colours by model order (a colour-blind-safe palette).
PALETTE = ("#4f46e5", "#0ea5e9", "#f59e0b", "#10b981", "#ef4444", "#8b5cf6", "#ec4899", "#64748b")

WIDTH, HEIGHT, LEFT, BOTTOM, TOP = 760, 240, 56, 28, 12


@dataclass
class Chart:
    """``bars``: ``{x, y, w, h, fill, title}`` rectangles; ``legend``: ``{model, fill}``;
    ``ticks``: ``{y, label}`` of the value axis; ``days``: ``{x, label}`` of some days (every
    ``ndays // 8``-th, counted back from the last, which is always labelled);
    ``empty`` when nothing was used in the range. Sizes in SVG user units."""

    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    base: int = HEIGHT - BOTTOM
    bars: list[dict[str, Any]] = field(default_factory=list)
    legend: list[dict[str, Any]] = field(default_factory=list)
    ticks: list[dict[str, Any]] = field(default_factory=list)
    days: list[dict[str, Any]] = field(default_factory=list)
    unit: str = "tokens"
    empty: bool = True


def _nice(top: float) -> float:
    if top <= 0:
        return 1.0
    exp = 10 ** (len(str(int(top))) - 1) if top >= 1 else 1
    for m in (1, 2, 2.5, 5, 10):
        if top <= m * exp:
            return m * exp
    return 10 * exp


def _fmt(v: float, metric: str) -> str:
    if metric == "cost":
        return f"${v:,.2f}" if v >= 0.01 or v == 0 else f"${v:.4f}"
    if v >= 1_000_000:
        return f"{v / 1_000_000:g}M"
    if v >= 1_000:
        return f"{v / 1_000:g}k"
    return f"{v:g}"


def stacked_by_model(daily: list[dict[str, Any]], *, since: dt.date, until: dt.date, metric: str = "tokens") -> Chart:
    """Bars per day from ``since`` to ``until`` stacked by model. ``daily``: rows of
    :func:`chat.teams.selectors.usage_for` (``usage_day``, ``usage_model``, ``prompt``,
    ``completion``, ``cost``). ``metric``: "tokens" (prompt + completion) or "cost" (USD)."""
    c = Chart(unit="USD" if metric == "cost" else "tokens")
    ndays = (until - since).days + 1
    models = sorted({r["usage_model"] for r in daily})
    fills = {m: PALETTE[i % len(PALETTE)] for i, m in enumerate(models)}
    c.legend = [{"model": m or "(no model)", "fill": fills[m]} for m in models]
    value = (lambda r: float(r["cost"] or 0)) if metric == "cost" else (lambda r: float((r["prompt"] or 0) + (r["completion"] or 0)))
    per_day: dict[dt.date, list[tuple[str, float]]] = {}
    for r in daily:
        per_day.setdefault(r["usage_day"], []).append((r["usage_model"], value(r)))
    top = _nice(max((sum(v for _, v in parts) for parts in per_day.values()), default=0.0))
    plot_w, plot_h = WIDTH - LEFT - 8, HEIGHT - BOTTOM - TOP
    slot = plot_w / ndays
    bar_w = max(1.0, slot * 0.8)
    for i in range(5):
        v = top * i / 4
        c.ticks.append({"y": round(c.base - plot_h * i / 4, 1), "label": _fmt(v, metric)})
    step = max(1, ndays // 8)
    for i in range(ndays):
        day = since + dt.timedelta(days=i)
        x = LEFT + i * slot + (slot - bar_w) / 2
        if (ndays - 1 - i) % step == 0:  # counted back from the last day, so today is labelled
            c.days.append({"x": round(x + bar_w / 2, 1), "label": day.strftime("%b %d")})
        y = float(c.base)
        for model, v in sorted(per_day.get(day, []), key=lambda p: models.index(p[0])):
            if v <= 0:
                continue
            h = plot_h * v / top
            y -= h
            c.bars.append({"x": round(x, 1), "y": round(y, 1), "w": round(bar_w, 1), "h": round(h, 1),
                           "fill": fills[model], "title": f"{day.isoformat()} · {model or '(no model)'} · {_fmt(v, metric)} {c.unit if metric != 'cost' else ''}".strip()})
            c.empty = False
    return c
