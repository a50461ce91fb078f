"""In-memory record of what the simulator received and sent, for tests and benchmarks.

Each request becomes a :class:`RecordedRequest`, the same way for every API style (the path,
and ``dialect``, tell which): path, method, headers (API keys removed), the JSON body, the
knobs, the attachments found in it (``media``: images and audio, decoded size and hash), every
piece of the response it wrote with a ``time.monotonic()`` stamp,
the number of tokens written, and whether (and when) the client disconnected, with the tokens
written after that. API keys are never stored: only ``auth_present`` and ``auth_fingerprint``
(:func:`key_fingerprint`, a sha256 hex prefix), and a key found anywhere else (another header,
the body) is replaced by ``[key]`` and flagged.

May import: the standard library only (no Django).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["RecordedEvent", "RecordedRequest", "Recorder", "key_fingerprint"]

#: Headers whose values are credentials: never stored.
SECRET_HEADERS = frozenset({"authorization", "x-api-key", "cookie", "proxy-authorization"})
_KEY_PLACEHOLDER = "[key]"
#: Events kept per request; later ones are counted in ``events_dropped`` (tokens still counted).
MAX_EVENTS = 20_000


def key_fingerprint(key: str) -> str:
    """First 16 hex digits of sha256(key): how the recorder names a key without storing it."""
    return hashlib.sha256(key.encode()).hexdigest()[:16]


@dataclass
class RecordedEvent:
    """One write of the response.

    ``kind``: ``headers``, ``role`` (chat completions' first chunk), ``start``
    (``message_start``; ``response.created``/``in_progress``), ``ping``, ``block`` (a content
    block, output item or content part opening or closing, and the ``*.done`` events),
    ``reasoning``, ``content``, ``tool`` (tool-call argument pieces), ``signature``
    (Anthropic ``signature_delta``), ``finish`` (the chunk with ``finish_reason``;
    ``message_delta``; ``response.completed``/``incomplete``), ``usage``, ``done`` (``[DONE]``;
    ``message_stop``), ``keepalive``, ``retry``, ``error``, ``body`` (a whole non-streamed body)
    or ``end``. Token-bearing kinds are ``reasoning``, ``content`` and ``tool`` in every
    dialect. ``t`` is ``time.monotonic()`` seconds; ``offset_ms`` is since the request arrived.
    ``data`` is the text written (for ``headers``: the status line). ``tokens`` is the number
    of simulated tokens the write carried.
    """

    kind: str
    t: float
    offset_ms: float
    data: str = ""
    tokens: int = 0
    after_disconnect: bool = False

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready copy."""
        return {
            "kind": self.kind,
            "t": self.t,
            "offset_ms": self.offset_ms,
            "data": self.data,
            "tokens": self.tokens,
            "after_disconnect": self.after_disconnect,
        }


@dataclass
class RecordedRequest:
    """Everything the simulator knows about one request (see the module docstring).

    ``outcome``: ``complete``, ``error`` (an HTTP error status), ``cut``, ``stall``,
    ``error_chunk``, ``disconnected`` (the client went away first), or ``None`` while running.
    """

    request_id: str
    method: str
    path: str
    query_string: str
    headers: dict[str, str]
    auth_present: bool
    auth_fingerprint: str | None
    started_at: float
    body: Any = None
    raw_body: str | None = None  # only when the body is not JSON (first 2000 chars)
    key_in_body: bool = False
    key_in_other_headers: bool = False
    model: str | None = None
    dialect: str | None = None  # openai_chat, anthropic_messages, openai_responses, count_tokens
    knobs: dict[str, Any] | None = None
    media: list[dict[str, Any]] = field(default_factory=list)
    stream: bool | None = None
    status: int | None = None
    events: list[RecordedEvent] = field(default_factory=list)
    events_dropped: int = 0
    tokens_written: int = 0
    disconnected: bool = False
    disconnected_at: float | None = None
    tokens_after_disconnect: int = 0
    ended_at: float | None = None
    outcome: str | None = None
    #: False: the request is only counted (status, tokens), its body and writes are not kept.
    keep: bool = True

    @property
    def finished(self) -> bool:
        """True once the simulator stopped handling the request."""
        return self.ended_at is not None

    def event_kinds(self) -> list[str]:
        """The kinds of the recorded events, in order."""
        return [e.kind for e in self.events]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready copy (the ``GET /_simulator/requests`` item)."""
        return {
            "request_id": self.request_id,
            "method": self.method,
            "path": self.path,
            "query_string": self.query_string,
            "headers": self.headers,
            "auth_present": self.auth_present,
            "auth_fingerprint": self.auth_fingerprint,
            "body": self.body,
            "raw_body": self.raw_body,
            "key_in_body": self.key_in_body,
            "key_in_other_headers": self.key_in_other_headers,
            "model": self.model,
            "dialect": self.dialect,
            "knobs": self.knobs,
            "media": self.media,
            "stream": self.stream,
            "status": self.status,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "finished": self.finished,
            "outcome": self.outcome,
            "events": [e.to_dict() for e in self.events],
            "events_dropped": self.events_dropped,
            "tokens_written": self.tokens_written,
            "disconnected": self.disconnected,
            "disconnected_at": self.disconnected_at,
            "tokens_after_disconnect": self.tokens_after_disconnect,
        }

    # ---- used by the app ------------------------------------------------------------------

    def add_event(self, kind: str, data: str = "", tokens: int = 0) -> RecordedEvent:
        """Record one write now; counts ``tokens`` (and those after a disconnect).

        Past :data:`MAX_EVENTS` events the event is counted in ``events_dropped``, not kept.
        """
        now = time.monotonic()
        event = RecordedEvent(
            kind=kind,
            t=now,
            offset_ms=round((now - self.started_at) * 1000, 3),
            data=data,
            tokens=tokens,
            after_disconnect=self.disconnected,
        )
        if not self.keep:
            self.events_dropped += 1
        elif len(self.events) < MAX_EVENTS:
            self.events.append(event)
        else:
            self.events_dropped += 1
        self.tokens_written += tokens
        if self.disconnected:
            self.tokens_after_disconnect += tokens
        return event

    def mark_disconnected(self) -> None:
        """The client went away (ASGI ``http.disconnect``); keeps the first time."""
        if not self.disconnected:
            self.disconnected = True
            self.disconnected_at = time.monotonic()

    def finish(self, outcome: str) -> None:
        """The simulator is done with this request."""
        if self.ended_at is None:
            self.ended_at = time.monotonic()
            self.outcome = outcome


def _split_key(headers: dict[str, str]) -> str | None:
    value = headers.get("authorization", "")
    if value:
        scheme, _, rest = value.partition(" ")
        return rest.strip() if scheme.lower() == "bearer" else value.strip()
    return headers.get("x-api-key", "").strip() or None


class Recorder:
    """The requests one simulator app has seen, newest last, at most ``max_requests``.

    ``keep=False`` (the in-process simulator without its control switch): nothing is kept, no
    request, body or written text; each request is still counted while it runs.
    """

    def __init__(self, max_requests: int = 500, *, keep: bool = True) -> None:
        self.keep = keep
        self._requests: deque[RecordedRequest] = deque(maxlen=max_requests if keep else 0)

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot list of the recorded requests, oldest first."""
        return list(self._requests)

    def last(self) -> RecordedRequest:
        """The newest request. Raises ``IndexError`` when none was recorded."""
        return self._requests[-1]

    def reset(self) -> None:
        """Forget every recorded request."""
        self._requests.clear()

    def to_list(self) -> list[dict[str, Any]]:
        """JSON-ready list (the ``GET /_simulator/requests`` body)."""
        return [r.to_dict() for r in list(self._requests)]

    async def wait_for(
        self,
        predicate: Callable[[RecordedRequest], bool] = lambda r: r.finished,
        *,
        seconds: float = 5.0,
    ) -> RecordedRequest:
        """Wait until a recorded request satisfies ``predicate`` (default: it finished).

        Returns the newest such request. Raises ``TimeoutError`` after ``seconds``.
        """
        deadline = time.monotonic() + seconds
        while True:
            for request in reversed(list(self._requests)):
                if predicate(request):
                    return request
            if time.monotonic() >= deadline:
                raise TimeoutError("no recorded request matched")
            await asyncio.sleep(0.01)

    def start(
        self,
        *,
        request_id: str,
        method: str,
        path: str,
        query_string: str,
        raw_headers: list[tuple[bytes, bytes]],
    ) -> tuple[RecordedRequest, str | None]:
        """Record a new request; returns it and the API key it carried (never stored)."""
        headers: dict[str, str] = {}
        for name, value in raw_headers:
            key = name.decode("latin-1").lower()
            text = value.decode("latin-1")
            headers[key] = f"{headers[key]}, {text}" if key in headers else text
        api_key = _split_key(headers)
        stored: dict[str, str] = {}
        key_elsewhere = False
        for name, value in headers.items():
            if name in SECRET_HEADERS:
                stored[name] = "[redacted]"
                continue
            if api_key and api_key in value:
                key_elsewhere = True
                value = value.replace(api_key, _KEY_PLACEHOLDER)
            stored[name] = value
        request = RecordedRequest(
            request_id=request_id,
            method=method,
            path=path,
            query_string=query_string,
            headers=stored,
            auth_present=bool(api_key),
            auth_fingerprint=key_fingerprint(api_key) if api_key else None,
            started_at=time.monotonic(),
            key_in_other_headers=key_elsewhere,
            keep=self.keep,
        )
        if self.keep:
            self._requests.append(request)
        return request, api_key

    @staticmethod
    def set_body(request: RecordedRequest, raw: bytes, api_key: str | None) -> Any:
        """Parse and store the body (key scrubbed); returns the parsed JSON or raises
        ``ValueError`` when it is not JSON (then ``raw_body`` holds its start)."""
        text = raw.decode("utf-8", errors="replace")
        if api_key and api_key in text:
            request.key_in_body = True
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            scrubbed = text.replace(api_key, _KEY_PLACEHOLDER) if api_key else text
            if request.keep:
                request.raw_body = scrubbed[:2000]
            raise
        if not request.keep:
            return parsed
        if request.key_in_body and api_key:
            dumped = json.dumps(parsed, ensure_ascii=False)
            escaped = json.dumps(api_key, ensure_ascii=False)[1:-1]
            request.body = json.loads(dumped.replace(escaped, _KEY_PLACEHOLDER))
        else:
            request.body = parsed
        return parsed
