"""Simulator knobs: parsed from the model id's query string and the ``X-Simulator-Options`` header.

A request picks its behaviour with a query string after the model id, for example
``sim-reasoning?ttft_ms=200&delay_ms=20&tokens_per_event=3&length=64&usage=last&fault=429``.
The request header ``X-Simulator-Options`` carries the same syntax (without the model and the
``?``) and overrides the model's values key by key. See :data:`KNOB_HELP` for every knob. The
same knobs drive every API style (``/chat/completions``, ``/messages``, ``/responses``); a few
only matter to one of them (``reasoning_kind`` and ``event_lines`` to the event-typed streams,
``sansa``/``routed_model``/``routing_ms`` to chat completions).

Also the catalogue of simulated models (``GET /models``, seed 002 ``ModelMetadata``) and the
per-model defaults.

May import: the standard library only (no Django).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

__all__ = [
    "ENDING_FAULTS",
    "HTTP_FAULTS",
    "KNOB_HELP",
    "MODELS",
    "SANSA_AUTO",
    "STREAM_FAULTS",
    "KnobError",
    "Knobs",
    "ModelSpec",
    "parse_knobs",
    "split_model",
]

#: Faults answered with an HTTP error status instead of a stream (``echo_key`` is a 401).
HTTP_FAULTS = frozenset(
    {
        "400",
        "401",
        "402",
        "403",
        "404",
        "408",
        "410",
        "413",
        "429",
        "500",
        "501",
        "502",
        "503",
        "529",
        "echo_key",
        "tool_parse_error",
    }
)
#: Faults that change a stream (``keepalive`` adds comment lines and combines with the others).
STREAM_FAULTS = frozenset({"cut", "stall", "error_chunk", "error_event", "keepalive"})
#: The stream faults that end a stream early (at most one applies: the first given).
ENDING_FAULTS = ("cut", "stall", "error_chunk", "error_event")

REASONING_FIELDS = ("reasoning", "reasoning_content", "think")
USAGE_SHAPES = ("last", "beside", "none")
REASONING_KINDS = ("text", "summary")
#: The model id that asks Sansa (seed 001) to route.
SANSA_AUTO = "sansa-auto"

#: One line of help per knob: ``name: syntax, default - meaning``.
KNOB_HELP: dict[str, str] = {
    "ttft_ms": "int 0..600000, default 150 (sim-slow 1500) - delay before the first token event",
    "delay_ms": "int 0..60000, default 20 (sim-slow 120) - delay between token events",
    "tokens_per_event": "int 1..1000, default 1 - tokens per SSE chunk",
    "length": "int 0..100000, default 64 - answer tokens (max_tokens caps it: finish 'length')",
    "reasoning": "0|1, default 1 for models whose id contains 'reasoning' - emit reasoning first",
    "reasoning_length": "int 0..100000, default 24 - reasoning tokens",
    "reasoning_field": "reasoning|reasoning_content|think, default reasoning - where reasoning "
    "goes: delta.reasoning (SambaNova), delta.reasoning_content (vLLM, llama.cpp), or inline "
    "<think>…</think> in content with the tags split across events",
    "usage": "last|beside|none, default last - usage in a final chunk with choices: [], on the "
    "chunk carrying finish_reason, or not at all",
    "fault": "comma list (or repeated) of: 400,401,402,403,404,408,410,413,429,500,501,502,503,"
    "529 (that HTTP error in the API style's own error shape, bodies from the seeds; 429 has "
    "Retry-After; /messages uses Anthropic's envelope with seed 004's error types), echo_key "
    "(401 whose message echoes the bearer key), tool_parse_error (seed 002's "
    "adapter_mapping_failed 400: the model's raw tool call did not parse), cut (end the body "
    "after fault_after token events: no finish, no [DONE]), stall (after fault_after token "
    "events send nothing for stall_ms, then end like cut; ends at once on disconnect), "
    'error_chunk (a data: {"error": ...} chunk after fault_after token events, then end, no '
    "[DONE]; /messages: an 'event: error' overloaded_error; /responses: a response.failed "
    "event), error_event (like error_chunk, but /responses sends an 'error' event instead), "
    "keepalive (': keep-alive' comment lines during the TTFT and between token events; "
    "combines with the others). Without stream: cut sends half the JSON body, stall delays "
    "the answer by stall_ms, error_chunk/error_event are a 500 (/messages: 529) with that error",
    "fault_after": "int 0..100000, default 3 - token events sent before cut/stall/error_chunk",
    "stall_ms": "int 0..3600000, default 600000 - how long a stall hangs (ends on disconnect)",
    "retry_after": "int 0..86400, default 7 - Retry-After seconds of fault=429",
    "seed": "int, default: the request's 'seed' or 0 - varies the filler text",
    "take": "int 1..1000000, default 1 - which attempt at the same message this is: 2 and up "
    "give another answer (heading '... (take N)', other filler), the same for the same message, "
    "seed and take; the playground sends it on a Regenerate (1 + the answers got) unless a seed is set",
    "require_key": "0|1, default 0 - 401 (seed 'missing_api_key') when no key is sent",
    "done": "0|1, default 1 - end the stream with data: [DONE]",
    "crlf": "0|1, default 0 - terminate SSE lines with CRLF",
    "multiline": "0|1, default 0 - spread each chunk's JSON over several data: lines",
    "sse_ids": "0|1, default 0 - add a retry: line and id: lines to the stream",
    "split_utf8": "0|1, default 0 - split each chunk's bytes inside a multibyte UTF-8 sequence "
    "across two writes",
    "ascii": "0|1, default 0 - escape non-ASCII in JSON (\\uXXXX) instead of raw UTF-8 (raw "
    "U+2028 inside a data: line breaks parsers that split lines like str.splitlines)",
    "tool": "0|1, default 0 - when the request has tools and tool_choice is not none, call the "
    "first tool (or the one tool_choice names) with arguments built from its parameter schema; "
    "tool_choice required/named (Anthropic any/tool) calls one without this knob. A request "
    "whose last message is a tool result is answered with text quoting it, never a call",
    "invalid_json": "0|1, default 0 - structured output (json_schema) answers with JSON that "
    "violates the requested schema (json_object: with truncated, unparseable JSON)",
    "reasoning_kind": "text|summary, default text - /responses streams reasoning as "
    "response.reasoning_text.delta or response.reasoning_summary_text.delta",
    "event_lines": "0|1, default 1 - /responses and /messages streams carry 'event:' lines "
    "(0: only data: lines; the type stays in the JSON)",
    "sansa": "0|1, default 1 for model sansa-auto - answer chat completions like Sansa (seed "
    "001): usage.cost in USD and a top-level 'sansa' object; with this knob in "
    "X-Simulator-Options a request without a model is routed too",
    "routed_model": "a simulated model id, default sim-reasoning when reasoning is on, else "
    "sim-fast - the model sansa-auto routes to (response 'model' and sansa.routed_model)",
    "routing_ms": "int 0..600000, default 189 - sansa.routing_latency_ms (reported only: the "
    "ttft_ms wait includes it)",
    "refuse_thinking": "0|1, default 0 - /messages answers thinking {type: enabled|adaptive} "
    "with seed 004's 400 invalid_request_error (SambaNova v1) instead of thinking",
}


class KnobError(ValueError):
    """A knob has an unknown name or an invalid value. ``param`` names the knob."""

    def __init__(self, message: str, param: str) -> None:
        super().__init__(message)
        self.param = param


@dataclass(frozen=True)
class ModelSpec:
    """One simulated model: seed 002 ``ModelMetadata`` fields plus knob defaults."""

    id: str
    context_length: int
    max_completion_tokens: int
    prompt_price: float  # USD per prompt token
    completion_price: float  # USD per completion token
    defaults: dict[str, Any] = field(default_factory=dict)
    # What the model reads; reported as ``input_modalities`` (ModelMetadata allows extra keys).
    input_modalities: tuple[str, ...] | None = None

    def metadata(self) -> dict[str, Any]:
        """This model as a seed 002 ``ModelMetadata`` object."""
        meta: dict[str, Any] = {
            "id": self.id,
            "object": "model",
            "owned_by": "simulator",
            "context_length": self.context_length,
            "max_completion_tokens": self.max_completion_tokens,
            "pricing": {"prompt": self.prompt_price, "completion": self.completion_price},
        }
        if self.input_modalities is not None:
            meta["input_modalities"] = list(self.input_modalities)
        return meta


#: The simulated models, in ``GET /models`` order.
MODELS: dict[str, ModelSpec] = {
    spec.id: spec
    for spec in (
        ModelSpec("sim-fast", 8192, 4096, 0.0000001, 0.0000002),
        ModelSpec("sim-reasoning", 32768, 8192, 0.0000005, 0.000002, {"reasoning": True}),
        ModelSpec("sim-slow", 4096, 2048, 0.0, 0.0, {"ttft_ms": 1500, "delay_ms": 120}),
        ModelSpec("sim-text-only", 4096, 2048, 0.0, 0.0, {}, input_modalities=("text",)),
    )
}


@dataclass(frozen=True)
class Knobs:
    """The behaviour of one simulated request. Times in ms, lengths in tokens."""

    ttft_ms: int = 150
    delay_ms: int = 20
    tokens_per_event: int = 1
    length: int = 64
    reasoning: bool = False
    reasoning_length: int = 24
    reasoning_field: str = "reasoning"
    usage: str = "last"
    fault: tuple[str, ...] = ()
    fault_after: int = 3
    stall_ms: int = 600_000
    retry_after: int = 7
    seed: int | None = None
    take: int = 1
    require_key: bool = False
    done: bool = True
    crlf: bool = False
    multiline: bool = False
    sse_ids: bool = False
    split_utf8: bool = False
    ascii: bool = False
    tool: bool = False
    invalid_json: bool = False
    reasoning_kind: str = "text"
    event_lines: bool = True
    sansa: bool = False
    routed_model: str | None = None
    routing_ms: int = 189
    refuse_thinking: bool = False
    #: The knobs the request set itself (model query or header), not defaults: a request
    #: field (Anthropic ``thinking``, Sansa ``reasoning``) wins over a default, not over these.
    explicit: frozenset[str] = frozenset()

    def has(self, fault: str) -> bool:
        """True when ``fault`` (e.g. ``"cut"``, ``"429"``) is among this request's faults."""
        return fault in self.fault

    @property
    def http_fault(self) -> str | None:
        """The first HTTP-status fault requested, if any (``"429"``, ``"echo_key"``, …)."""
        return next((f for f in self.fault if f in HTTP_FAULTS), None)

    @property
    def stream_fault(self) -> str | None:
        """The first of ``cut``/``stall``/``error_chunk``/``error_event`` requested, if any."""
        return next((f for f in self.fault if f in ENDING_FAULTS), None)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready copy (for the recorder)."""
        data = dataclasses.asdict(self)
        data["fault"] = list(self.fault)
        data["explicit"] = sorted(self.explicit)
        return data


_INT_RANGES: dict[str, tuple[int, int]] = {
    "ttft_ms": (0, 600_000),
    "delay_ms": (0, 60_000),
    "tokens_per_event": (1, 1000),
    "length": (0, 100_000),
    "reasoning_length": (0, 100_000),
    "fault_after": (0, 100_000),
    "stall_ms": (0, 3_600_000),
    "retry_after": (0, 86_400),
    "seed": (-(2**63), 2**63 - 1),
    "take": (1, 1_000_000),
    "routing_ms": (0, 600_000),
}
_BOOLS = frozenset(
    {
        "reasoning",
        "require_key",
        "done",
        "crlf",
        "multiline",
        "sse_ids",
        "split_utf8",
        "ascii",
        "tool",
        "invalid_json",
        "event_lines",
        "sansa",
        "refuse_thinking",
    }
)
_TRUE = frozenset({"1", "true", "on", "yes"})
_FALSE = frozenset({"0", "false", "off", "no"})


def split_model(model: str) -> tuple[str, str]:
    """Split ``"sim-fast?ttft_ms=0"`` into ``("sim-fast", "ttft_ms=0")``."""
    base, _, query = model.partition("?")
    return base, query


def _parse_pairs(query: str, source: str) -> dict[str, str]:
    values: dict[str, str] = {}
    faults: list[str] = []
    for key, value in parse_qsl(query, keep_blank_values=True):
        key = key.strip()
        if key not in KNOB_HELP:
            raise KnobError(
                f"Unknown simulator option '{key}' in {source}. "
                f"Known options: {', '.join(KNOB_HELP)}.",
                param=key,
            )
        if key == "fault":
            faults.extend(f.strip() for f in value.split(",") if f.strip())
        else:
            values[key] = value.strip()
    if faults:
        values["fault"] = ",".join(faults)
    return values


def _convert(key: str, raw: str) -> Any:
    if key in _INT_RANGES:
        low, high = _INT_RANGES[key]
        try:
            number = int(raw)
        except ValueError:
            number = None
        if number is None or not low <= number <= high:
            raise KnobError(
                f"Invalid simulator option '{key}': expected an integer {low}..{high}, "
                f"got '{raw}'.",
                param=key,
            )
        return number
    if key in _BOOLS:
        lowered = raw.lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        raise KnobError(f"Invalid simulator option '{key}': expected 0 or 1, got '{raw}'.", key)
    if key == "reasoning_field":
        if raw not in REASONING_FIELDS:
            raise KnobError(
                f"Invalid simulator option 'reasoning_field': expected one of "
                f"{', '.join(REASONING_FIELDS)}, got '{raw}'.",
                param=key,
            )
        return raw
    if key == "reasoning_kind":
        if raw not in REASONING_KINDS:
            raise KnobError(
                f"Invalid simulator option 'reasoning_kind': expected one of "
                f"{', '.join(REASONING_KINDS)}, got '{raw}'.",
                param=key,
            )
        return raw
    if key == "routed_model":
        if raw not in MODELS:
            raise KnobError(
                f"Invalid simulator option 'routed_model': expected one of "
                f"{', '.join(MODELS)}, got '{raw}'.",
                param=key,
            )
        return raw
    if key == "usage":
        if raw not in USAGE_SHAPES:
            raise KnobError(
                f"Invalid simulator option 'usage': expected one of {', '.join(USAGE_SHAPES)}, "
                f"got '{raw}'.",
                param=key,
            )
        return raw
    if key == "fault":
        faults = tuple(dict.fromkeys(f for f in raw.split(",") if f))
        for fault in faults:
            if fault not in HTTP_FAULTS | STREAM_FAULTS:
                raise KnobError(
                    f"Invalid simulator option 'fault': unknown fault '{fault}'. Known faults: "
                    f"{', '.join(sorted(HTTP_FAULTS | STREAM_FAULTS))}.",
                    param=key,
                )
        return faults
    raise KnobError(f"Unknown simulator option '{key}'.", param=key)  # pragma: no cover


def parse_knobs(model: str, header: str | None = None) -> Knobs:
    """Parse the knobs of one request.

    ``model`` is the request's model id, optionally followed by ``?query``; ``header`` is the
    ``X-Simulator-Options`` header value (same query syntax, a leading ``?`` is allowed). Header
    values override the model's key by key (``fault`` too: the header's list replaces the
    model's). Model defaults come from :data:`MODELS` (``sim-reasoning`` turns reasoning on,
    ``sim-slow`` is slow); any model id containing "reasoning" also defaults to reasoning on;
    ``sansa-auto`` defaults to ``sansa=1``. ``Knobs.explicit`` names the knobs given.

    Raises :class:`KnobError` for an unknown knob or an invalid value.
    """
    base, query = split_model(model)
    values: dict[str, Any] = {}
    spec = MODELS.get(base)
    if spec is not None:
        values.update(spec.defaults)
    if "reasoning" in base:
        values["reasoning"] = True
    if base == SANSA_AUTO:
        values["sansa"] = True
    merged = _parse_pairs(query, "the model id")
    if header:
        merged.update(_parse_pairs(header.strip().removeprefix("?"), "X-Simulator-Options"))
    for key, raw in merged.items():
        values[key] = _convert(key, raw)
    values["explicit"] = frozenset(merged)
    return Knobs(**values)
