"""Template tags of the chat page's interface (issue 10)."""

from __future__ import annotations

from django import template

from chat.scenarios import SCENARIOS, Scenario

register = template.Library()


@register.simple_tag
def sim_scenarios() -> tuple[Scenario, ...]:
    """The built-in simulator's scenarios for the model picker: ``(model, label)`` pairs."""
    return SCENARIOS
