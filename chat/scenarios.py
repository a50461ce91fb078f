"""The built-in simulator's scenarios, as the model picker lists them (issue 10).

Each is a model id with knobs (``chat/simulator/knobs.py``: the id's query string) and a one-line
description. They appear in the model field's list for the built-in simulator endpoint only, so a
new user can try errors, a slow first token, pace, reasoning and tools without reading the knob
reference. ``tests/test_ui_views.py`` parses every id with the simulator's own knob parser.

May import: the standard library only (no Django, not the simulator).
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["SCENARIOS", "Scenario"]


class Scenario(NamedTuple):
    """``model``: a simulator model id with knobs; ``label``: what it shows, in one line."""

    model: str
    label: str


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("sim-fast", "Scenario: a quick markdown answer"),
    Scenario("sim-reasoning", "Scenario: thinks first (reasoning), then answers"),
    Scenario("sim-reasoning?reasoning_field=think", "Scenario: reasoning inline in <think> tags"),
    Scenario("sim-fast?ttft_ms=5000", "Scenario: slow first token (5 s of waiting)"),
    Scenario("sim-fast?delay_ms=150&length=200", "Scenario: slow pace (about 7 tokens per second)"),
    Scenario("sim-fast?delay_ms=2&length=3000", "Scenario: a long answer at a fast pace"),
    Scenario("sim-fast?tool=1", "Scenario: calls the first tool (add tools in Settings)"),
    Scenario("sim-fast?fault=429&retry_after=10", "Scenario: rate limited (HTTP 429, Retry-After 10 s)"),
    Scenario("sim-fast?fault=500", "Scenario: server error (HTTP 500)"),
    Scenario("sim-fast?fault=401", "Scenario: bad API key (HTTP 401)"),
    Scenario("sim-fast?fault=cut&fault_after=20", "Scenario: the connection drops mid-answer"),
    Scenario("sim-fast?fault=error_chunk&fault_after=10", "Scenario: an error event in the middle of the stream"),
    Scenario("sim-fast?fault=stall&fault_after=10&stall_ms=30000", "Scenario: the stream stalls for 30 s"),
    Scenario("sim-text-only", "Scenario: a model that reads text only (no images)"),
)
