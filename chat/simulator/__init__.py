"""Built-in deterministic upstream simulator: every API style of the seeds.

It speaks OpenAI chat completions (SambaNova's dialect, and Sansa's routing with ``sansa-auto``),
the Anthropic Messages API (``/messages``, ``/messages/count_tokens``), the OpenAI Responses API
(``/responses``) and ``GET /models``, with the same knobs, faults and recorder in each.

A pure ASGI application with no Django dependency, so it can be mounted in-process (the
playground routes ``/simulator/`` to :func:`simulator_asgi_app`, serving ``/simulator/v1``) and
run standalone (``manage.py simulator`` or ``python -m chat.simulator``, serving ``/v1``).

Modules: ``text`` (deterministic answer/reasoning tokens), ``knobs`` (per-request behaviour
from the model id's query string and ``X-Simulator-Options``; the model catalogue), ``errors``
(error bodies from the seeds), ``recorder`` (what was received and sent), ``request`` (one
neutral view of a request in any style), ``structured`` (JSON built from a JSON Schema), ``plan``
(what an answer says), ``wire`` (HTTP/SSE writing and the stream driver), ``completions``,
``messages``, ``responses`` (one module per API style), ``app`` (the ASGI app and its routes),
``server`` (standalone daphne runner).

May import: the standard library only (daphne only inside ``server``).
"""

from __future__ import annotations

from .app import SimulatorApp, create_app, simulator_asgi_app
from .knobs import KNOB_HELP, MODELS, KnobError, Knobs, parse_knobs
from .recorder import RecordedEvent, RecordedRequest, Recorder, key_fingerprint
from .structured import invalid_value_for_schema, value_for_schema
from .text import answer_text, reasoning_text

__all__ = [
    "KNOB_HELP",
    "MODELS",
    "KnobError",
    "Knobs",
    "RecordedEvent",
    "RecordedRequest",
    "Recorder",
    "SimulatorApp",
    "answer_text",
    "create_app",
    "invalid_value_for_schema",
    "key_fingerprint",
    "parse_knobs",
    "reasoning_text",
    "simulator_asgi_app",
    "value_for_schema",
]
