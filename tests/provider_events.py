"""The runner's reading of an adapter's events, for adapter tests: what answer and reasoning a
turn ends with once ``AnswerWasReasoning`` and ``FinalText`` are applied as
``chat.providers.base`` documents them. No Django."""

from __future__ import annotations

from typing import Any

from chat.providers.base import AnswerWasReasoning, FinalText, ReasoningDelta, TextDelta


def applied(events: list[Any]) -> tuple[str, str]:
    """``(reasoning, answer)`` of one stream's events."""
    reasoning: list[str] = []
    answer: list[str] = []
    for event in events:
        if isinstance(event, TextDelta):
            answer.append(event.text)
        elif isinstance(event, ReasoningDelta):
            reasoning.append(event.text)
        elif isinstance(event, AnswerWasReasoning):
            reasoning.extend(answer)
            answer.clear()
        elif isinstance(event, FinalText):
            answer[:] = [event.text]
    return "".join(reasoning), "".join(answer)
