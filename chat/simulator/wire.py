"""HTTP and SSE writing shared by every API style of the simulator.

- :class:`Exchange`: one HTTP request being answered: writes (recorded, scrubbed of the API
  key), pauses that wake on a client disconnect, whole JSON/error bodies.
- :class:`StreamContext`: SSE framing of one stream (``event:`` lines, ``id:`` lines, CRLF,
  multi-line ``data:``, ASCII escaping, ``sequence_number`` for the Responses API).
- :class:`Frame` and :func:`run_stream`: the stream driver every dialect uses. A dialect lists
  its frames (token frames carry reasoning/content/tool pieces; the others are structure); the
  driver schedules token frames at ``ttft_ms + i * delay_ms``, writes ``: keep-alive``
  comments, and applies the ``cut``/``stall``/``error_chunk``/``error_event`` faults after
  ``fault_after`` token frames (or just before the first ``tail`` frame when the fault comes
  after every token).

May import: the standard library and this package (no Django).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from .errors import ErrorResponse
from .knobs import Knobs
from .recorder import RecordedRequest

__all__ = [
    "Exchange",
    "Frame",
    "StreamContext",
    "dumps",
    "header",
    "plain_json",
    "read_body",
    "run_stream",
]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

SSE_HEADERS = [
    ("content-type", "text/event-stream; charset=utf-8"),
    ("cache-control", "no-cache"),
]


def dumps(obj: Any, ascii_only: bool = False) -> str:
    """Compact JSON (raw UTF-8 unless ``ascii_only``)."""
    return json.dumps(obj, ensure_ascii=ascii_only, separators=(",", ":"))


def _utf8_split_point(data: bytes) -> int | None:
    """Index just after the first byte of the first multibyte UTF-8 sequence, if any."""
    for index, byte in enumerate(data):
        if byte >= 0xC0:
            return index + 1
    return None


def header(scope: Scope, name: bytes) -> str | None:
    """The first value of request header ``name`` (lower-case bytes), or ``None``."""
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return value.decode("latin-1")
    return None


@dataclass
class Exchange:
    """One HTTP request being answered (see the module docstring)."""

    send: Send
    record: RecordedRequest
    request_id: str
    api_key: str | None
    disconnected: asyncio.Event = field(default_factory=asyncio.Event)
    closing: bool = False  # our last write is under way: a disconnect now is normal
    split_utf8: bool = False

    def scrub(self, text: str) -> str:
        """``text`` with the request's API key replaced (what the recorder may keep)."""
        return text.replace(self.api_key, "[key]") if self.api_key else text

    def fault_args(self, model: str, retry_after: int) -> dict[str, Any]:
        """Keyword arguments of :func:`chat.simulator.errors.fault_response` & co."""
        return {
            "request_id": self.request_id,
            "model": model,
            "api_key": self.api_key or "",
            "retry_after": retry_after,
        }

    async def safe_send(self, message: Message) -> None:
        """Send an ASGI message; a server that raises once the client is gone marks the
        exchange disconnected instead of failing."""
        try:
            await self.send(message)
        except OSError:  # some servers raise once the client is gone
            self.record.mark_disconnected()
            self.disconnected.set()

    async def start(self, status: int, headers: list[tuple[str, str]]) -> None:
        """Send the status line and headers (plus ``x-request-id``)."""
        all_headers = [*headers, ("x-request-id", self.request_id)]
        self.record.status = status
        self.record.add_event("headers", f"HTTP {status}")
        await self.safe_send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in all_headers],
            }
        )

    async def write(self, text: str, kind: str, tokens: int = 0) -> bool:
        """Write ``text`` as one SSE piece; False (nothing written) once disconnected."""
        return await self.write_bytes(text.encode(), kind, text, tokens, split=self.split_utf8)

    async def write_bytes(
        self, data: bytes, kind: str, text: str, tokens: int, *, split: bool = False
    ) -> bool:
        """Write ``data`` (recorded as ``text``), optionally split inside a UTF-8 sequence."""
        if self.disconnected.is_set():
            return False
        self.record.add_event(kind, self.scrub(text), tokens)
        cut = _utf8_split_point(data) if split else None
        if cut is None:
            await self.safe_send({"type": "http.response.body", "body": data, "more_body": True})
        else:
            await self.safe_send(
                {"type": "http.response.body", "body": data[:cut], "more_body": True}
            )
            await asyncio.sleep(0.005)  # let the first half leave as its own TCP segment
            await self.safe_send(
                {"type": "http.response.body", "body": data[cut:], "more_body": True}
            )
        return not self.disconnected.is_set()

    async def end(self, outcome: str) -> None:
        """Close the body and record ``outcome``."""
        if self.disconnected.is_set():
            return
        self.closing = True
        self.record.add_event("end")
        self.record.finish(outcome)
        await self.safe_send({"type": "http.response.body", "body": b"", "more_body": False})

    async def json(
        self,
        status: int,
        body: Any,
        *,
        tokens: int = 0,
        ascii_only: bool = False,
        outcome: str = "complete",
        headers: list[tuple[str, str]] | None = None,
    ) -> None:
        """Send ``body`` as one JSON response."""
        data = dumps(body, ascii_only).encode()
        response = ErrorResponse(status, data, "application/json", list(headers or []))
        await self.send_whole(response, tokens=tokens, outcome=outcome)

    async def error(self, error: ErrorResponse) -> None:
        """Send an error response (outcome ``error``)."""
        await self.send_whole(error, tokens=0, outcome="error")

    async def send_whole(self, response: ErrorResponse, *, tokens: int, outcome: str) -> None:
        if self.disconnected.is_set():
            return
        headers = [
            ("content-type", response.content_type),
            ("content-length", str(len(response.body))),
            *response.headers,
        ]
        await self.start(response.status, headers)
        self.closing = True
        self.record.add_event("body", self.scrub(response.body.decode("utf-8", "replace")), tokens)
        self.record.finish(outcome)
        await self.safe_send(
            {"type": "http.response.body", "body": response.body, "more_body": False}
        )

    async def send_half(self, body: Any, tokens: int, ascii_only: bool) -> None:
        """The non-streamed ``cut`` fault: status 200, then half the JSON body, then close."""
        data = dumps(body, ascii_only).encode()
        await self.start(200, [("content-type", "application/json")])
        half = data[: len(data) // 2]
        if await self.write_bytes(half, "body", half.decode("utf-8", "replace"), tokens):
            await self.end("cut")

    async def pause(self, seconds: float) -> bool:
        """Sleep ``seconds``; returns False (at once) if the client disconnects."""
        if seconds <= 0:
            await asyncio.sleep(0)
            return not self.disconnected.is_set()
        try:
            await asyncio.wait_for(self.disconnected.wait(), seconds)
        except TimeoutError:
            return True
        return False

    async def pause_until(self, deadline: float, keepalive: bool, nl: str) -> bool:
        """Sleep until ``time.monotonic() == deadline``, writing a ``: keep-alive`` comment
        half-way when ``keepalive``; False if the client disconnects."""
        remaining = deadline - time.monotonic()
        if keepalive:
            if not await self.pause(remaining / 2):
                return False
            if not await self.write(f": keep-alive{nl}{nl}", "keepalive"):
                return False
            remaining = deadline - time.monotonic()
        return await self.pause(remaining)

    async def wait_latency(self, knobs: Knobs, token_events: int) -> bool:
        """Non-streamed answers: wait ``stall_ms`` (fault ``stall``), then the time the stream
        would have taken (``ttft_ms + (events - 1) * delay_ms``). False on disconnect."""
        if knobs.has("stall") and not await self.pause(knobs.stall_ms / 1000):
            return False
        latency = knobs.ttft_ms / 1000 + max(token_events - 1, 0) * knobs.delay_ms / 1000
        return await self.pause_until(self.record.started_at + latency, False, "\n")


@dataclass
class StreamContext:
    """SSE framing of one stream, set by the ``crlf``, ``multiline``, ``sse_ids``, ``ascii``
    and ``event_lines`` knobs. ``sequence``: fill ``"sequence_number": None`` placeholders
    with 0, 1, 2, … in writing order (Responses API)."""

    knobs: Knobs
    sequence: bool = False
    event_no: int = 0
    next_sequence: int = 0

    @property
    def nl(self) -> str:
        return "\r\n" if self.knobs.crlf else "\n"

    def sse(self, obj: dict[str, Any], event: str | None = None) -> str:
        """One SSE event carrying ``obj`` as JSON, after an ``event:`` line when ``event`` is
        given and the ``event_lines`` knob is on."""
        knobs, nl = self.knobs, self.nl
        if self.sequence and "sequence_number" in obj and obj["sequence_number"] is None:
            obj["sequence_number"] = self.next_sequence
            self.next_sequence += 1
        if knobs.multiline:
            payload = json.dumps(obj, ensure_ascii=knobs.ascii, indent=1)
        else:
            payload = dumps(obj, knobs.ascii)
        head = ""
        if knobs.sse_ids:
            self.event_no += 1
            head = f"id: {self.event_no}{nl}"
        if event is not None and knobs.event_lines:
            head += f"event: {event}{nl}"
        return head + "".join(f"data: {line}{nl}" for line in payload.split("\n")) + nl


@dataclass
class Frame:
    """One write of a stream: a JSON object (framed at write time, so ids and sequence numbers
    follow the writing order) or ``raw`` text (``data: [DONE]``).

    ``kind``: the recorder's event kind; ``tokens``: simulated tokens carried; ``token``: a
    token frame (scheduled, counted for ``fault_after``); ``tail``: the finishing frames (the
    first one is where a fault "after every token" strikes).
    """

    kind: str
    obj: dict[str, Any] | None = None
    event: str | None = None
    raw: str | None = None
    tokens: int = 0
    token: bool = False
    tail: bool = False

    def text(self, ctx: StreamContext) -> str:
        if self.raw is not None:
            return self.raw
        assert self.obj is not None
        return ctx.sse(self.obj, self.event)


async def run_stream(
    ex: Exchange,
    ctx: StreamContext,
    frames: list[Frame],
    error_frames: Callable[[str], list[Frame]],
) -> None:
    """Write ``frames`` as an SSE response (see the module docstring).

    ``error_frames(fault)`` gives the frames of an ``error_chunk``/``error_event`` fault; the
    stream ends after them (outcome = the fault's name). ``cut`` ends it at once (outcome
    ``cut``), ``stall`` sends nothing for ``stall_ms`` then ends (outcome ``stall``).
    """
    knobs = ctx.knobs
    nl = ctx.nl
    t0 = ex.record.started_at
    ttft = knobs.ttft_ms / 1000
    delay = knobs.delay_ms / 1000
    keepalive = knobs.has("keepalive")
    await ex.start(200, SSE_HEADERS)
    if knobs.sse_ids and not await ex.write(f"retry: 3000{nl}{nl}", "retry"):
        return
    total = sum(1 for f in frames if f.token)
    fault = knobs.stream_fault
    fault_at = min(knobs.fault_after, total) if fault else -1
    index = 0
    reached_tail = False
    for frame in frames:
        if frame.token:
            if not await ex.pause_until(t0 + ttft + index * delay, keepalive, nl):
                return
            if index == fault_at:
                await _stream_fault(ex, ctx, fault, error_frames)
                return
            index += 1
        elif frame.tail and not reached_tail:
            reached_tail = True
            if total == 0 and not await ex.pause_until(t0 + ttft, keepalive, nl):
                return
            if fault_at == total:
                await _stream_fault(ex, ctx, fault, error_frames)
                return
        if not await ex.write(frame.text(ctx), frame.kind, frame.tokens):
            return
    await ex.end("complete")


async def _stream_fault(
    ex: Exchange,
    ctx: StreamContext,
    fault: str | None,
    error_frames: Callable[[str], list[Frame]],
) -> None:
    if fault == "stall":
        stalled = await ex.pause(ctx.knobs.stall_ms / 1000)
        ex.record.finish("stall")
        if stalled:
            await ex.end("stall")
        return
    if fault in ("error_chunk", "error_event"):
        for frame in error_frames(fault):
            if not await ex.write(frame.text(ctx), frame.kind, frame.tokens):
                return
        await ex.end(fault)
        return
    await ex.end("cut")


async def read_body(receive: Receive, limit: int) -> bytes | None:
    """The whole request body (kept up to ``limit + 1`` bytes), or None if the client
    disconnected first."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        if message["type"] == "http.request":
            chunk = message.get("body", b"")
            room = limit + 1 - size
            if room > 0:  # keep at most limit + 1 bytes, so an oversized body is seen as one
                chunks.append(chunk[:room])
                size += min(len(chunk), room)
            if not message.get("more_body", False):
                return b"".join(chunks)


async def plain_json(send: Send, status: int, body: Any) -> None:
    """An unrecorded JSON response (control routes)."""
    data = json.dumps(body, ensure_ascii=False).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(data)).encode()),
                (b"x-request-id", b"sim-control"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": data, "more_body": False})
