"""What one simulated answer will say, independent of the API style it is sent in.

:func:`build_plan` turns a neutral :class:`~chat.simulator.request.Turn` and the request's
:class:`~chat.simulator.knobs.Knobs` into a :class:`Plan`: the token events in order
(``reasoning``, ``content`` and ``tool`` argument pieces, grouped ``tokens_per_event`` at a
time), the joined texts, the tool call if the model makes one, token counts and a neutral
finish reason (``stop``, ``length``, ``tool_calls``, ``stop_sequence``) that each dialect maps to
its own words. :func:`token_logprobs` gives deterministic log probabilities for content pieces
(seed 002 ``LogProbsContent``).

The answer, in order of precedence:

1. a tool call (:meth:`Turn.chosen_tool`) with arguments generated from the tool's schema;
2. structured output: JSON generated from the requested schema (or a small object for
   ``json_object``); ``invalid_json=1`` makes it violate the schema;
3. the answer to a tool result: "The tool returned: …";
4. the default markdown answer (``chat.simulator.text.answer_text``; the ``take`` knob gives
   another one to the same message, for Regenerate), preceded by
   "I see N image(s). I hear N audio clip(s)." when attachments arrived.

Reasoning (when on) always comes first. ``max_tokens`` caps what follows the reasoning
(finish ``length``); a stop sequence cuts the text answer before it (finish ``stop_sequence``).

May import: the standard library and this package (no Django).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .knobs import Knobs
from .request import Turn
from .structured import (
    dumps_answer,
    invalid_value_for_schema,
    json_object_answer,
    json_pieces,
    value_for_schema,
)
from .text import answer_text, echo_words, media_note, reasoning_text, tool_result_answer

__all__ = [
    "Event",
    "Plan",
    "Timing",
    "ToolCall",
    "build_plan",
    "request_digest",
    "scheduled_timing",
    "token_logprobs",
]

_THINK_OPEN = ("<th", "ink>")
_THINK_CLOSE = ("</th", "ink>")


class Event(NamedTuple):
    """One token event: ``kind`` (``reasoning``/``content``/``tool``), the text it carries,
    how many tokens that is, and the token pieces themselves."""

    kind: str
    text: str
    tokens: int
    pieces: tuple[str, ...]


@dataclass
class ToolCall:
    """The tool call of a plan. ``key`` is a deterministic hex string the dialects prefix
    (``call_…``, ``toolu_…``, ``fc_…``); ``arguments`` is the JSON text streamed in pieces."""

    key: str
    name: str
    arguments: str
    input: Any


@dataclass
class Plan:
    """What one answer will say (see the module docstring). Token counts are simulated tokens;
    ``completion_tokens`` includes reasoning tokens, also ``hidden_reasoning_tokens`` that are
    counted but not sent (Sansa ``reasoning.exclude``)."""

    events: list[Event]
    content: str
    reasoning: str
    reasoning_tokens: int
    completion_tokens: int
    prompt_tokens: int
    finish_reason: str
    tool_call: ToolCall | None = None
    stop_sequence: str | None = None
    content_pieces: list[str] = field(default_factory=list)
    hidden_reasoning_tokens: int = 0

    @property
    def token_events(self) -> int:
        """Number of token events (what ``ttft_ms``/``delay_ms`` schedule)."""
        return len(self.events)


def request_digest(body: Any, options: str | None) -> str:
    """64 hex digits derived from the request body and options: equal requests, equal ids."""
    canonical = json.dumps(body, sort_keys=True, ensure_ascii=True) + "\x00" + (options or "")
    return hashlib.sha256(canonical.encode()).hexdigest()


def _structured_pieces(turn: Turn, knobs: Knobs) -> list[str]:
    fmt = turn.output_format
    assert fmt is not None
    if fmt.kind == "json_object":
        words, _ = echo_words(turn.prompt)
        text = dumps_answer(json_object_answer(" ".join(words)))
        if knobs.invalid_json:
            text = text[: len(text) // 2]  # no schema to violate: unparseable JSON instead
        return json_pieces(text)
    schema = fmt.schema or {}
    value = value_for_schema(schema)
    if knobs.invalid_json:
        broken = invalid_value_for_schema(schema)
        text = dumps_answer(broken) if broken is not None else dumps_answer(value)[:-1]
    else:
        text = dumps_answer(value)
    return json_pieces(text)


def _apply_stop(tokens: list[str], stops: list[str]) -> tuple[list[str], str | None]:
    """Cut ``tokens`` before the earliest stop sequence; returns the tokens and the stop."""
    text = "".join(tokens)
    best: tuple[int, str] | None = None
    for stop in stops:
        at = text.find(stop)
        if at >= 0 and (best is None or at < best[0]):
            best = (at, stop)
    if best is None:
        return tokens, None
    out: list[str] = []
    used = 0
    for token in tokens:
        if used + len(token) <= best[0]:
            out.append(token)
            used += len(token)
        else:
            if best[0] > used:
                out.append(token[: best[0] - used])
            break
    return out, best[1]


def build_plan(
    turn: Turn,
    knobs: Knobs,
    *,
    reasoning: bool,
    max_tokens: int | None,
    digest: str,
    hide_reasoning: bool = False,
) -> Plan:
    """Plan the answer to ``turn`` (see the module docstring).

    ``reasoning``: whether the model reasons (each dialect decides from knobs and request);
    ``max_tokens``: the request's cap on the tokens after the reasoning (``None``: no cap);
    ``digest``: :func:`request_digest` of the request (tool call ids);
    ``hide_reasoning``: count the reasoning tokens but send none (Sansa ``reasoning.exclude``).
    """
    seed = knobs.seed if knobs.seed is not None else turn.seed
    reasoning_tokens: list[str] = []
    if reasoning:
        reasoning_tokens = reasoning_text(
            turn.prompt, length_tokens=knobs.reasoning_length, seed=seed, take=knobs.take
        )
    tool = turn.chosen_tool(knobs.tool)
    tool_call = None
    answer: list[str]
    tool_pieces: list[str] = []
    if tool is not None:
        value = value_for_schema(tool.parameters or {"type": "object"}, label=tool.name)
        if not isinstance(value, dict):
            value = {"value": value}
        arguments = json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
        tool_call = ToolCall(key=digest[:24], name=tool.name, arguments=arguments, input=value)
        tool_pieces = json_pieces(arguments)
        answer = []
    elif turn.output_format is not None:
        answer = _structured_pieces(turn, knobs)
    elif turn.tool_result is not None:
        answer = tool_result_answer(turn.tool_result)
    else:
        answer = media_note(turn.images, turn.audios) + answer_text(
            turn.prompt, length_tokens=knobs.length, seed=seed, take=knobs.take
        )
    finish = "tool_calls" if tool_call is not None else "stop"
    stop_sequence = None
    if tool_call is None and turn.stop:
        answer, stop_sequence = _apply_stop(answer, turn.stop)
        if stop_sequence is not None:
            finish = "stop_sequence"
    if max_tokens is not None:
        if tool_call is not None and max_tokens < len(tool_pieces):
            tool_pieces = tool_pieces[:max_tokens]
            finish = "length"
        elif tool_call is None and max_tokens < len(answer):
            answer = answer[:max_tokens]
            finish = "length"
            stop_sequence = None
    if tool_call is not None:
        tool_call.arguments = "".join(tool_pieces)
    n = knobs.tokens_per_event
    content_tokens = list(answer)
    segments: list[tuple[str, list[str]]]
    hidden = 0
    if hide_reasoning:
        hidden = len(reasoning_tokens)
        segments = [("content", answer)]
    elif knobs.reasoning_field == "think" and reasoning_tokens:
        # Event boundaries fall inside both tags, whatever tokens_per_event is.
        segments = [
            ("content", [_THINK_OPEN[0]]),
            ("content", [_THINK_OPEN[1], *reasoning_tokens, _THINK_CLOSE[0]]),
            ("content", [_THINK_CLOSE[1], "\n\n", *answer]),
        ]
        content_tokens = [*_THINK_OPEN, *reasoning_tokens, *_THINK_CLOSE, "\n\n", *answer]
    else:
        segments = [("reasoning", reasoning_tokens), ("content", answer)]
    segments.append(("tool", tool_pieces))
    events: list[Event] = []
    for kind, tokens in segments:
        for i in range(0, len(tokens), n):
            group = tuple(tokens[i : i + n])
            events.append(Event(kind, "".join(group), len(group), group))
    shown_reasoning = "".join(reasoning_tokens)
    if hide_reasoning or knobs.reasoning_field == "think":
        shown_reasoning = ""
    return Plan(
        events=events,
        content="".join(content_tokens),
        reasoning=shown_reasoning,
        reasoning_tokens=len(reasoning_tokens),
        completion_tokens=sum(e.tokens for e in events) + hidden,
        prompt_tokens=turn.prompt_tokens,
        finish_reason=finish,
        tool_call=tool_call,
        stop_sequence=stop_sequence,
        content_pieces=content_tokens,
        hidden_reasoning_tokens=hidden,
    )


_ALTERNATIVES = (" the", " a", ",", ".", " and", " of", " to", "\n", " is", " in")


def token_logprobs(pieces: tuple[str, ...] | list[str], top: int) -> list[dict[str, Any]]:
    """Seed 002 ``LogProbsContent`` entries for ``pieces`` (its examples' array shape):
    ``{token, logprob, bytes, top_logprobs: [{token, logprob, bytes}, …]}`` with ``top``
    alternatives (the chosen token first). Log probabilities are negative, deterministic per
    token text, and the chosen token is always the most likely."""
    out = []
    for piece in pieces:
        digest = hashlib.sha256(piece.encode()).digest()
        logprob = -round((digest[0] * 256 + digest[1]) / 65536 * 2.5 + 0.0001, 6)
        alternatives = [{"token": piece, "logprob": logprob, "bytes": list(piece.encode())}]
        start = digest[2] % len(_ALTERNATIVES)
        k = 0
        while len(alternatives) < top and k < len(_ALTERNATIVES):
            alt = _ALTERNATIVES[(start + k) % len(_ALTERNATIVES)]
            k += 1
            if alt == piece:
                continue
            alt_logprob = round(logprob - 1.25 * len(alternatives) - digest[3] / 256, 6)
            alternatives.append({"token": alt, "logprob": alt_logprob, "bytes": list(alt.encode())})
        out.append(
            {
                "token": piece,
                "logprob": logprob,
                "bytes": list(piece.encode()),
                "top_logprobs": alternatives[:top],
            }
        )
    return out


@dataclass(frozen=True)
class Timing:
    """The scheduled timing of a plan, in seconds (deterministic: from ``ttft_ms`` and
    ``delay_ms``, not measured). Rates are tokens per second (0.0 when undefined)."""

    time_to_first_token: float
    total_latency: float
    after_first: float
    tokens_per_sec: float
    tokens_after_first_per_sec: float
    total_tokens_per_sec: float


def scheduled_timing(plan: Plan, knobs: Knobs) -> Timing:
    """:class:`Timing` of ``plan`` under ``knobs`` (first event at ``ttft_ms``, then one every
    ``delay_ms``)."""
    events = len(plan.events)
    ttft = knobs.ttft_ms / 1000
    after_first = max(events - 1, 0) * knobs.delay_ms / 1000
    total_latency = ttft + after_first
    completion = plan.completion_tokens
    first_tokens = plan.events[0].tokens if plan.events else 0
    total = plan.prompt_tokens + completion
    return Timing(
        time_to_first_token=ttft,
        total_latency=total_latency,
        after_first=after_first,
        tokens_per_sec=completion / total_latency if total_latency > 0 else 0.0,
        tokens_after_first_per_sec=(completion - first_tokens) / after_first
        if after_first > 0
        else 0.0,
        total_tokens_per_sec=total / total_latency if total_latency > 0 else 0.0,
    )
