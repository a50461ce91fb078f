"""The lean bench upstream: ``python -m bench.upstream [--host H] [--port P]``.

A minimal asyncio HTTP/1.1 server (no Django, no httpx, no ASGI) that streams pre-encoded
answers on an absolute schedule, so that the upstream of ``make bench`` does not eat a core:
the full simulator (``chat.simulator``) needs 180–390 µs of CPU per SSE event; this one writes
bytes it encoded once per model. It speaks the three API styles the playground speaks, in the
shapes of seed 002 (``/work/shared/seeds``, same chunk layout as ``chat.simulator``):

- ``POST /v1/chat/completions`` (``openai_chat``): ``ChatCompletionStreamResponse`` chunks: a
  role chunk, one chunk per event with ``delta.content``, a finish chunk (``finish_reason:
  "stop"``), a usage chunk with ``choices: []``, then ``data: [DONE]``;
- ``POST /v1/messages`` (``anthropic_messages``): ``message_start``, ``content_block_start``,
  ``ping``, one ``content_block_delta`` (``text_delta``) per event, ``content_block_stop``,
  ``message_delta`` (``stop_reason: "end_turn"``, usage), ``message_stop``;
- ``POST /v1/responses`` (``openai_responses``): ``response.created``, ``response.in_progress``,
  ``response.output_item.added``, ``response.content_part.added``, one
  ``response.output_text.delta`` per event, ``response.output_text.done``,
  ``response.content_part.done``, ``response.output_item.done``, ``response.completed`` (with
  ``ResponseUsage``), numbered by ``sequence_number``;
- ``GET /v1/models``: seed 002 ``ModelMetadataList`` (``bench``, ``bench-md``);
- ``GET /_stats``: ``{"events", "requests", "active", "cpu_s"}`` (token events written since
  start, stream requests, streams in flight, this process's CPU seconds).

The model id carries the schedule (it passes through the relay unchanged):
``bench?ttft_ms=100&interval_ms=20&tokens=128&tokens_per_event=1`` (see :class:`Spec`).
``bench`` answers words (with non-ASCII, ``<`` and ``&`` to exercise escaping and code-point
offsets); ``bench-md`` answers a markdown document (paragraphs, code blocks, a list, a table).
The first token is ``ref-<tag>:`` where ``tag`` is a hash of the request's last user message,
so every turn's text differs and a relayed text can be compared with the direct one.

Schedule: the response head and the opening events leave at once; token event *i* (0-based)
is due at ``t0 + ttft_ms + i × interval_ms`` after the request was read (``t0``); a late timer
writes every event already due in one write, so lateness never accumulates; the closing events
and the last chunk follow the last token event. Responses use chunked transfer encoding on a
keep-alive connection.

May import: the standard library only.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import math
import resource
import sys
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

__all__ = [
    "MODELS",
    "ROUTES",
    "STYLES",
    "Encoded",
    "Spec",
    "answer_tokens",
    "encode",
    "group_events",
    "model_name",
    "parse_model",
    "request_tag",
    "serve",
]

STYLES = ("openai_chat", "anthropic_messages", "openai_responses")
#: Request path (after the ``/v1`` base) → API style.
ROUTES = {
    "/chat/completions": "openai_chat",
    "/messages": "anthropic_messages",
    "/responses": "openai_responses",
}
#: The models ``GET /models`` lists: words, or a markdown document.
MODELS = ("bench", "bench-md")
BASE = "/v1"
MAX_BODY = 8 * 1024 * 1024  # bytes; a larger request is refused with 413
MAX_HEAD = 64 * 1024
MAX_TOKENS = 100_000


# ---- the answer ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Spec:
    """What one model id asks for.

    ``base``: ``bench`` (words) or ``bench-md`` (markdown); ``ttft_ms``: time to first token
    (ms after the request was read); ``interval_ms``: between token events; ``tokens``: answer
    tokens (``usage`` reports exactly this many completion tokens); ``tokens_per_event``: tokens
    joined into one event (the last event may carry fewer).
    """

    base: str = "bench"
    ttft_ms: float = 100.0
    interval_ms: float = 20.0
    tokens: int = 128
    tokens_per_event: int = 1

    @property
    def events(self) -> int:
        """Token events per answer: ``ceil(tokens / tokens_per_event)``."""
        return -(-self.tokens // self.tokens_per_event)

    def due_s(self, i: int) -> float:
        """Seconds after the request when token event ``i`` is due."""
        return (self.ttft_ms + i * self.interval_ms) / 1000.0


def parse_model(model: str) -> Spec:
    """The :class:`Spec` of a model id like ``bench?ttft_ms=100&interval_ms=20&tokens=128``.

    Keys: ``ttft_ms``, ``interval_ms`` (≥ 0, floats), ``tokens`` (1–100,000),
    ``tokens_per_event`` (≥ 1). Raises ValueError for an unknown base model, an unknown key or
    a value out of range.
    """
    base, _, query = model.partition("?")
    if base not in MODELS:
        raise ValueError(f"unknown model {base!r} (known: {', '.join(MODELS)})")
    values: dict[str, Any] = {"base": base}
    for key, raw in parse_qsl(query, keep_blank_values=True):
        if key in ("ttft_ms", "interval_ms"):
            v = float(raw)
            if not (0 <= v <= 600_000) or math.isnan(v):
                raise ValueError(f"{key} out of range: {raw}")
            values[key] = v
        elif key in ("tokens", "tokens_per_event"):
            n = int(raw)
            if not 1 <= n <= MAX_TOKENS:
                raise ValueError(f"{key} out of range: {raw}")
            values[key] = n
        else:
            raise ValueError(f"unknown option {key!r}")
    return Spec(**values)


def model_name(spec: Spec) -> str:
    """The model id that :func:`parse_model` turns back into ``spec``."""
    return (
        f"{spec.base}?ttft_ms={spec.ttft_ms:g}&interval_ms={spec.interval_ms:g}"
        f"&tokens={spec.tokens}&tokens_per_event={spec.tokens_per_event}"
    )


#: Words of the ``bench`` answer: ASCII, accented, CJK, an emoji outside the BMP (code points ≠
#: UTF-16 units), and the HTML specials ``<`` and ``&``.
WORDS = (
    "The ", "relay ", "streams ", "tokens ", "to ", "every ", "open ", "socket, ", "café ",
    "naïve ", "日本語 ", "x<y ", "A&B ", "🙂 ", "and ", "writes ", "them ", "once. ",
)
#: Made-up words of the ``bench-md`` document; all contain "vex", which no page text does, so a
#: page script can tell answer text from the rest of the page (see ``bench.browser``).
MD_WORDS = (
    "kalvex", "morvex", "tessvex", "dravex", "ulvex", "pelvexa", "corvex", "vexlin", "sunvex",
    "ravexo",
)


def _words(n: int) -> list[str]:
    """``n`` tokens of the ``bench`` answer: :data:`WORDS` in turn, a blank line every 40."""
    out = []
    for i in range(n):
        w = WORDS[i % len(WORDS)]
        out.append(w.rstrip() + "\n\n" if i % 40 == 39 else w)
    return out


def _md_sections() -> list[list[str]]:
    """Sections of the markdown document, as tokens: paragraph, code block, list, table."""
    w = MD_WORDS

    def para(k: int, n: int) -> list[str]:
        toks = [w[(k + i * 3) % len(w)] + " " for i in range(n)]
        toks[-1] = toks[-1].rstrip() + ".\n\n"
        return toks

    def code(k: int) -> list[str]:
        toks = ["```python\n"]
        for line in range(8):
            a, b = w[(k + line) % len(w)], w[(k + line + 4) % len(w)]
            toks += [f"def {a}_{line}", "(x):", "\n", "    return ", f"{b}", "(x)", " + ", f"{line}", "\n"]
        toks += ["```\n\n"]
        return toks

    def bullet(k: int) -> list[str]:
        toks = []
        for item in range(6):
            toks += ["- ", w[(k + item) % len(w)] + " ", w[(k + item + 5) % len(w)] + " ", f"{item}", "\n"]
        toks[-1] = "\n\n"
        return toks

    def table(k: int) -> list[str]:
        toks = ["| ", "name ", "| ", "kind ", "| ", "count ", "|\n", "|---|---|---:|\n"]
        for row in range(5):
            toks += ["| ", w[(k + row) % len(w)] + " ", "| ", w[(k + row + 3) % len(w)] + " ", "| ", f"{row * 7}", " |\n"]
        toks[-1] = " |\n\n"
        return toks

    out = []
    for k in range(4):
        out += [para(k, 60), code(k), para(k + 1, 40), bullet(k), table(k)]
    return out


def _markdown(n: int) -> list[str]:
    """``n`` tokens of the ``bench-md`` document: its sections in turn, then a last paragraph
    that makes the count exact (so a code block or a table is never cut open)."""
    sections = _md_sections()
    out: list[str] = []
    k = 0
    while True:
        section = sections[k % len(sections)]
        if len(out) + len(section) + 10 > n:
            break
        out += section
        k += 1
    rest = n - len(out)
    tail = [MD_WORDS[i % len(MD_WORDS)] + " " for i in range(rest)]
    if tail:
        tail[-1] = "vexend."
    return out + tail


def answer_tokens(spec: Spec, tag: str) -> list[str]:
    """The answer's tokens: ``ref-<tag>: `` then ``spec.tokens - 1`` tokens of the document;
    exactly ``spec.tokens`` strings."""
    body = (_markdown if spec.base == "bench-md" else _words)(max(spec.tokens - 1, 0))
    return [f"ref-{tag}: ", *body][: spec.tokens]


def group_events(tokens: list[str], per_event: int) -> list[str]:
    """Token strings joined ``per_event`` at a time (the pieces the events carry)."""
    return ["".join(tokens[i : i + per_event]) for i in range(0, len(tokens), per_event)]


def _user_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(part.get("text", "")) for part in content if isinstance(part, dict)
        )
    return ""


def request_tag(style: str, body: dict[str, Any]) -> str:
    """8 hex digits: SHA-256 of the request's last user message text (``messages`` for
    ``openai_chat``/``anthropic_messages``, ``input`` for ``openai_responses``; a string or a
    list of text parts). Both the relay and the direct client send the same user text, so their
    answers match; different turns get different answers."""
    items = body.get("input") if style == "openai_responses" else body.get("messages")
    text = ""
    if isinstance(items, str):
        text = items
    elif isinstance(items, list):
        for item in reversed(items):
            if isinstance(item, dict) and item.get("role") == "user":
                text = _user_text(item.get("content"))
                break
    return hashlib.sha256(text.encode()).hexdigest()[:8]


# ---- encoding --------------------------------------------------------------------------------


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()


def _chunk(payload: bytes) -> bytes:
    """One HTTP/1.1 chunk (``<hex size>\\r\\n<payload>\\r\\n``)."""
    return b"%x\r\n%s\r\n" % (len(payload), payload)


def _data(obj: Any) -> bytes:
    return b"data: " + _dumps(obj) + b"\n\n"


def _event(name: str, obj: Any) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + _dumps(obj) + b"\n\n"


@dataclass(frozen=True)
class Encoded:
    """One answer as bytes on the wire (each item already an HTTP chunk).

    ``opening``: written with the response head; ``deltas[i]``: token event ``i``;
    ``closing``: after the last token event, ending with the last chunk ``0\\r\\n\\r\\n``.
    """

    opening: bytes
    deltas: list[bytes]
    closing: bytes

    def body(self) -> bytes:
        """The whole chunked body."""
        return self.opening + b"".join(self.deltas) + self.closing


CHAT_ID = "chatcmpl-bench"
MSG_ID = "msg_bench"
RESP_ID = "resp_bench"
ITEM_ID = "msg_bench_item"


class _Style:
    """Event bodies of one style (the pieces in between are the same for every request)."""

    def __init__(self, model: str, created: int) -> None:
        self.model = model
        self.created = created


class _Chat(_Style):
    def _c(self, choices: list[Any], **extra: Any) -> dict[str, Any]:
        return {
            "id": CHAT_ID, "object": "chat.completion.chunk", "created": self.created,
            "model": self.model, "system_fingerprint": "bench", "choices": choices, **extra,
        }

    def opening(self, prompt: int) -> list[bytes]:
        d = {"role": "assistant", "content": ""}
        return [_data(self._c([{"index": 0, "delta": d, "finish_reason": None, "logprobs": None}]))]

    def delta(self, i: int, piece: str) -> bytes:
        ch = {"index": 0, "delta": {"content": piece}, "finish_reason": None, "logprobs": None}
        return _data(self._c([ch]))

    def closing(self, text: str, prompt: int, completion: int) -> list[bytes]:
        fin = {"index": 0, "delta": {}, "finish_reason": "stop", "logprobs": None}
        usage = {
            "prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }
        return [_data(self._c([fin])), _data(self._c([], usage=usage)), b"data: [DONE]\n\n"]


class _Messages(_Style):
    def opening(self, prompt: int) -> list[bytes]:
        message = {
            "id": MSG_ID, "type": "message", "role": "assistant", "content": [],
            "model": self.model, "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": prompt, "output_tokens": 0},
        }
        return [
            _event("message_start", {"type": "message_start", "message": message}),
            _event("content_block_start", {
                "type": "content_block_start", "index": 0,
                "content_block": {"type": "text", "text": ""},
            }),
            _event("ping", {"type": "ping"}),
        ]

    def delta(self, i: int, piece: str) -> bytes:
        return _event("content_block_delta", {
            "type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": piece},
        })

    def closing(self, text: str, prompt: int, completion: int) -> list[bytes]:
        return [
            _event("content_block_stop", {"type": "content_block_stop", "index": 0}),
            _event("message_delta", {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": completion, "input_tokens": prompt},
            }),
            _event("message_stop", {"type": "message_stop"}),
        ]


class _Responses(_Style):
    OPENING = 4  # events before the first delta (sequence numbers 0–3)

    def _response(self, status: str, output: list[Any], usage: dict[str, Any] | None) -> dict[str, Any]:
        r = {
            "id": RESP_ID, "object": "response", "created_at": self.created, "status": status,
            "completed_at": self.created if status == "completed" else None, "model": self.model,
            "output": output, "error": None, "incomplete_details": None, "instructions": None,
            "max_output_tokens": None, "metadata": {}, "parallel_tool_calls": True,
            "previous_response_id": None, "reasoning": {"effort": None, "summary": None},
            "store": False, "background": False, "service_tier": "default", "temperature": 1.0,
            "top_p": 1.0, "frequency_penalty": 0.0, "presence_penalty": 0.0,
            "text": {"format": {"type": "text"}}, "tool_choice": "auto", "tools": [],
            "truncation": "disabled", "user": None,
        }
        if usage is not None:
            r["usage"] = usage
        return r

    @staticmethod
    def _part(text: str) -> dict[str, Any]:
        return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}

    def _item(self, status: str, content: list[Any]) -> dict[str, Any]:
        return {"id": ITEM_ID, "type": "message", "role": "assistant", "status": status, "content": content}

    def opening(self, prompt: int) -> list[bytes]:
        r = self._response("in_progress", [], None)
        return [
            _event("response.created", {"type": "response.created", "sequence_number": 0, "response": r}),
            _event("response.in_progress", {"type": "response.in_progress", "sequence_number": 1, "response": r}),
            _event("response.output_item.added", {
                "type": "response.output_item.added", "sequence_number": 2, "output_index": 0,
                "item": self._item("in_progress", []),
            }),
            _event("response.content_part.added", {
                "type": "response.content_part.added", "sequence_number": 3, "item_id": ITEM_ID,
                "output_index": 0, "content_index": 0, "part": self._part(""),
            }),
        ]

    def delta(self, i: int, piece: str) -> bytes:
        return _event("response.output_text.delta", {
            "type": "response.output_text.delta", "sequence_number": self.OPENING + i,
            "item_id": ITEM_ID, "output_index": 0, "content_index": 0, "delta": piece,
            "annotations": [], "logprobs": [],
        })

    def closing(self, text: str, prompt: int, completion: int, events: int = 0) -> list[bytes]:
        seq = self.OPENING + events
        item = self._item("completed", [self._part(text)])
        usage = {
            "input_tokens": prompt, "output_tokens": completion, "total_tokens": prompt + completion,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        }
        return [
            _event("response.output_text.done", {
                "type": "response.output_text.done", "sequence_number": seq, "item_id": ITEM_ID,
                "output_index": 0, "content_index": 0, "text": text, "annotations": [], "logprobs": [],
            }),
            _event("response.content_part.done", {
                "type": "response.content_part.done", "sequence_number": seq + 1, "item_id": ITEM_ID,
                "output_index": 0, "content_index": 0, "part": self._part(text),
            }),
            _event("response.output_item.done", {
                "type": "response.output_item.done", "sequence_number": seq + 2, "output_index": 0,
                "item": item,
            }),
            _event("response.completed", {
                "type": "response.completed", "sequence_number": seq + 3,
                "response": self._response("completed", [item], usage),
            }),
        ]


_STYLE_CLASSES = {"openai_chat": _Chat, "anthropic_messages": _Messages, "openai_responses": _Responses}
#: (style, model id) → the token events after the first, already chunk-framed (they do not
#: depend on the request; the first carries the request's tag and is encoded per request).
_cache: dict[tuple[str, str], tuple[list[str], list[bytes]]] = {}
_CREATED = int(time.time())


def encode(style: str, model: str, tag: str, prompt_tokens: int = 0) -> Encoded:
    """The answer to one request of ``style`` for ``model`` (a :func:`parse_model` id) whose
    last user message hashes to ``tag``: the token events after the first are encoded once per
    (style, model) and reused. Raises ValueError for an unknown style or model."""
    if style not in _STYLE_CLASSES:
        raise ValueError(f"unknown style {style!r}")
    spec = parse_model(model)
    st = _STYLE_CLASSES[style](model, _CREATED)
    key = (style, model)
    if key not in _cache:
        pieces = group_events(answer_tokens(spec, "00000000"), spec.tokens_per_event)
        _cache[key] = (pieces, [_chunk(st.delta(i, p)) for i, p in enumerate(pieces) if i > 0])
        if len(_cache) > 256:  # bounded: drop the oldest entry
            _cache.pop(next(iter(_cache)))
    pieces, rest = _cache[key]
    first = group_events(answer_tokens(spec, tag)[: spec.tokens_per_event], spec.tokens_per_event)[0]
    text = first + "".join(pieces[1:])
    if style == "openai_responses":
        closing = st.closing(text, prompt_tokens, spec.tokens, len(pieces))  # type: ignore[call-arg]
    else:
        closing = st.closing(text, prompt_tokens, spec.tokens)
    return Encoded(
        opening=b"".join(_chunk(e) for e in st.opening(prompt_tokens)),
        deltas=[_chunk(st.delta(0, first)), *rest],
        closing=b"".join(_chunk(e) for e in closing) + b"0\r\n\r\n",
    )


# ---- the server --------------------------------------------------------------------------------


class Stats:
    """Counters of one server: token events written, stream requests, streams in flight."""

    def __init__(self) -> None:
        self.events = 0
        self.requests = 0
        self.active = 0

    def as_dict(self) -> dict[str, Any]:
        r = resource.getrusage(resource.RUSAGE_SELF)
        return {
            "events": self.events, "requests": self.requests, "active": self.active,
            "cpu_s": r.ru_utime + r.ru_stime,
        }


SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
    b"cache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n"
)


def _json_response(status: int, obj: Any) -> bytes:
    body = _dumps(obj)
    reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 413: "Payload Too Large"}.get(status, "Error")
    return (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    ).encode() + body


def models_body() -> dict[str, Any]:
    """``GET /models``: seed 002 ``ModelMetadataList``."""
    return {
        "object": "list",
        "data": [
            {
                "id": m, "object": "model", "owned_by": "bench", "context_length": 262144,
                "max_completion_tokens": MAX_TOKENS, "pricing": {"prompt": 0.0, "completion": 0.0},
            }
            for m in MODELS
        ],
    }


class _Conn(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection: requests one after the other (no pipelining while
    a stream runs: bytes that arrive meanwhile wait in the buffer)."""

    def __init__(self, stats: Stats) -> None:
        self.stats = stats
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.buf = b""
        self.streaming = False
        self.timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.streaming:
            self.streaming = False
            self.stats.active -= 1

    def data_received(self, data: bytes) -> None:
        self.buf += data
        self._next()

    def _next(self) -> None:
        while not self.streaming and self.transport is not None and not self.transport.is_closing():
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                if len(self.buf) > MAX_HEAD:
                    self._fail(400, "request head too large")
                return
            lines = self.buf[:end].decode("latin-1").split("\r\n")
            try:
                method, target, _ = lines[0].split(" ", 2)
            except ValueError:
                self._fail(400, "bad request line")
                return
            length = 0
            for line in lines[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value.strip() or 0)
            if length > MAX_BODY:
                self._fail(413, "request body too large")
                return
            if len(self.buf) < end + 4 + length:
                return
            body = self.buf[end + 4 : end + 4 + length]
            self.buf = self.buf[end + 4 + length :]
            self._handle(method, target.split("?", 1)[0], body)

    def _fail(self, status: int, message: str) -> None:
        assert self.transport is not None
        self.transport.write(_json_response(status, {"error": {"message": message, "type": "invalid_request_error"}}))
        self.transport.close()

    def _handle(self, method: str, path: str, raw: bytes) -> None:
        assert self.transport is not None
        if method == "GET" and path == BASE + "/models":
            self.transport.write(_json_response(200, models_body()))
            return
        if method == "GET" and path == "/_stats":
            self.transport.write(_json_response(200, self.stats.as_dict()))
            return
        style = ROUTES.get(path[len(BASE) :]) if path.startswith(BASE) else None
        if method != "POST" or style is None:
            self.transport.write(_json_response(404, {"error": {"message": f"no route {method} {path}"}}))
            return
        t0 = self.loop.time()
        try:
            body = json.loads(raw)
            model = str(body.get("model") or "")
            spec = parse_model(model)
            enc = encode(style, model, request_tag(style, body), prompt_tokens=len(raw) // 4)
        except (ValueError, AttributeError) as exc:
            self.transport.write(_json_response(400, {"error": {"message": str(exc), "type": "invalid_request_error"}}))
            return
        self.stats.requests += 1
        self.stats.active += 1
        self.streaming = True
        self.transport.write(SSE_HEAD + enc.opening)
        self._run(enc, spec, t0, 0)

    def _run(self, enc: Encoded, spec: Spec, t0: float, i: int) -> None:
        """Write every token event due by now (from ``i``), then sleep until the next one."""
        self.timer = None
        if not self.streaming or self.transport is None or self.transport.is_closing():
            return
        now = self.loop.time()
        n = len(enc.deltas)
        j = i
        while j < n and t0 + spec.due_s(j) <= now + 0.0002:
            j += 1
        out = b"".join(enc.deltas[i:j])
        self.stats.events += j - i
        if j == n:
            self.transport.write(out + enc.closing)
            self.streaming = False
            self.stats.active -= 1
            if self.buf:
                self._next()
            return
        if out:
            self.transport.write(out)
        self.timer = self.loop.call_at(t0 + spec.due_s(j), self._run, enc, spec, t0, j)


async def serve(host: str, port: int) -> asyncio.Server:
    """Start listening; the caller runs the loop."""
    stats = Stats()
    return await asyncio.get_running_loop().create_server(lambda: _Conn(stats), host, port, backlog=1024)


def main(argv: list[str] | None = None) -> None:
    """``python -m bench.upstream``: serve until killed; prints the base URL on one line."""
    p = argparse.ArgumentParser(prog="python -m bench.upstream", description=__doc__.splitlines()[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="0: pick a free port (printed)")
    args = p.parse_args(argv)

    async def run() -> None:
        server = await serve(args.host, args.port)
        port = server.sockets[0].getsockname()[1]
        print(f"Bench upstream listening on http://{args.host}:{port}{BASE}", flush=True)
        await server.serve_forever()

    try:
        asyncio.run(run())
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
