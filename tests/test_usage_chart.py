"""The usage chart's day axis (chat.teams.chart): the last day of the range (today) is always
labelled, under its own bar."""

from __future__ import annotations

import datetime as dt

from chat.teams.chart import stacked_by_model


def test_the_last_day_is_labelled_under_its_bar() -> None:
    until = dt.date(2026, 12, 1)
    for days in (7, 30, 90):
        since = until - dt.timedelta(days=days - 1)
        rows = [{"usage_day": until, "usage_model": "m", "prompt": 10, "completion": 5, "cost": 0}]
        chart = stacked_by_model(rows, since=since, until=until)
        assert chart.days[-1]["label"] == "Dec 01", (days, chart.days[-1])
        bar = chart.bars[-1]
        assert abs(chart.days[-1]["x"] - (bar["x"] + bar["w"] / 2)) < 0.2
        assert 2 <= len(chart.days) <= 11
