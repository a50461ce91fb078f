"""The simulator as a pure ASGI 3 application (no Django): a deterministic OpenAI-chat upstream.

Routes, relative to ``mount_prefix`` (``/simulator/v1`` in-process, ``/v1`` standalone):

- ``GET  {prefix}/models`` – seed 002 ``ModelMetadataList`` (``context_length``,
  ``max_completion_tokens``, ``pricing``); ``GET {prefix}/models/{id}`` – ``ModelMetadata``.
- ``POST {prefix}/chat/completions`` – seed 000/002 ``createChatCompletion``: SSE
  ``ChatCompletionStreamResponse`` chunks ending with ``data: [DONE]`` when ``stream`` is true,
  else one ``ChatCompletionResponse``. Behaviour comes from knobs (``chat.simulator.knobs``).

Control routes, under the mount's parent (``/simulator/_simulator/…`` in-process,
``/_simulator/…`` standalone): ``GET requests`` (the recorder as JSON), ``POST reset``,
``GET knobs`` (knob help).

A stop is a client disconnect: a task waits for ASGI ``http.disconnect`` while the response is
generated, every pause wakes up on it, and nothing is written after it.

May import: the standard library and this package only (no Django).
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import time
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from .errors import (
    ErrorResponse,
    fault_response,
    method_not_allowed,
    missing_key_error,
    not_found,
    stream_error_chunk,
    validation_error,
)
from .knobs import KNOB_HELP, MODELS, KnobError, Knobs, parse_knobs, split_model
from .recorder import RecordedRequest, Recorder
from .text import answer_text, count_prompt_tokens, message_text, reasoning_text

__all__ = ["SimulatorApp", "create_app", "simulator_asgi_app"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

#: ``system_fingerprint`` of every chunk and response.
SYSTEM_FINGERPRINT = "simulator"
#: Roles SambaNova accepts (seed 000 ``invalid_role`` example).
VALID_ROLES = ("system", "assistant", "user", "function", "tool", "developer")
#: Largest request body read; more gets the 413 proxy page.
MAX_BODY_BYTES = 16 * 1024 * 1024
_THINK_OPEN = ("<th", "ink>")
_THINK_CLOSE = ("</th", "ink>")


@dataclass
class _Exchange:
    """One HTTP request being answered."""

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


@dataclass
class _Plan:
    """What one chat completion will say: token events, counts and finish reason."""

    events: list[tuple[str, str, int]]  # (kind: "reasoning"|"content", text, tokens)
    content: str
    reasoning: str
    reasoning_tokens: int
    completion_tokens: int
    prompt_tokens: int
    finish_reason: str


class SimulatorApp:
    """The ASGI application. ``recorder`` holds what it received and sent."""

    def __init__(self, mount_prefix: str = "/v1", *, control: bool = True, max_recorded: int = 500):
        self.prefix = "/" + mount_prefix.strip("/")
        parent = self.prefix.rsplit("/", 1)[0]
        self.control_prefix = f"{parent}/_simulator"
        self.control = control
        self.recorder = Recorder(max_recorded)
        self._counter = itertools.count(1)

    # ---- entry ---------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """ASGI 3 entry point: ``http`` and ``lifespan``; websockets are closed."""
        kind = scope["type"]
        if kind == "lifespan":
            await self._lifespan(receive, send)
            return
        if kind != "http":
            if kind == "websocket":
                await receive()
                await send({"type": "websocket.close", "code": 1000})
            return
        path: str = scope["path"]
        root = scope.get("root_path") or ""
        if root and not path.startswith(root) and (root + path).startswith(self.prefix):
            path = root + path
        if self.control and path.startswith(self.control_prefix + "/"):
            await self._control(scope, path[len(self.control_prefix) :], receive, send)
            return
        await self._api(scope, path, receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return

    def next_request_id(self) -> str:
        """The next ``x-request-id``: ``sim-000001``, ``sim-000002``, … (reset restarts)."""
        return f"sim-{next(self._counter):06d}"

    def reset(self) -> None:
        """Forget recorded requests and restart request ids at ``sim-000001``."""
        self.recorder.reset()
        self._counter = itertools.count(1)

    # ---- control routes ------------------------------------------------------------------

    async def _control(self, scope: Scope, sub: str, receive: Receive, send: Send) -> None:
        await _drain_body(receive)
        method = scope["method"]
        if sub == "/requests" and method == "GET":
            await _plain_json(send, 200, self.recorder.to_list())
        elif sub == "/reset" and method == "POST":
            self.reset()
            await _plain_json(send, 200, {"ok": True})
        elif sub == "/knobs" and method == "GET":
            await _plain_json(send, 200, KNOB_HELP)
        else:
            await _plain_json(send, 404, {"error": "Not found"})

    # ---- API routes ----------------------------------------------------------------------

    async def _api(self, scope: Scope, path: str, receive: Receive, send: Send) -> None:
        request_id = self.next_request_id()
        record, api_key = self.recorder.start(
            request_id=request_id,
            method=scope["method"],
            path=path,
            query_string=scope.get("query_string", b"").decode("latin-1"),
            raw_headers=list(scope.get("headers", [])),
        )
        ex = _Exchange(send=send, record=record, request_id=request_id, api_key=api_key)
        raw = await _read_body(receive)
        if raw is None:
            record.mark_disconnected()
            record.finish("disconnected")
            return
        watcher = asyncio.ensure_future(self._watch(receive, ex))
        try:
            await self._route(ex, scope, path, raw)
        finally:
            watcher.cancel()
            record.finish("disconnected" if ex.disconnected.is_set() else "complete")

    async def _watch(self, receive: Receive, ex: _Exchange) -> None:
        """Wait for ``http.disconnect`` and wake every pause of this exchange."""
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                if not ex.closing:
                    ex.record.mark_disconnected()
                ex.disconnected.set()
                return

    async def _route(self, ex: _Exchange, scope: Scope, path: str, raw: bytes) -> None:
        method = scope["method"]
        if len(raw) > MAX_BODY_BYTES:
            await self._error(ex, fault_response("413", **self._fault_args(ex, "", 7)))
            return
        if not (path == self.prefix or path.startswith(self.prefix + "/")):
            await self._error(ex, not_found(path))
            return
        sub = path[len(self.prefix) :].rstrip("/")
        if sub == "/chat/completions":
            if method != "POST":
                await self._error(ex, method_not_allowed())
                return
            await self._chat(ex, _header(scope, b"x-simulator-options"), raw)
        elif sub == "/models" or sub.startswith("/models/"):
            if method != "GET":
                await self._error(ex, method_not_allowed())
                return
            await self._models(ex, _header(scope, b"x-simulator-options"), sub[len("/models/") :])
        else:
            await self._error(ex, not_found(path))

    def _fault_args(self, ex: _Exchange, model: str, retry_after: int) -> dict[str, Any]:
        return {
            "request_id": ex.request_id,
            "model": model,
            "api_key": ex.api_key or "",
            "retry_after": retry_after,
        }

    async def _models(self, ex: _Exchange, options: str | None, model_id: str) -> None:
        """``GET /models`` (seed 002 ``ModelMetadataList``) and ``GET /models/{id}``."""
        try:
            knobs = parse_knobs("", options)
        except KnobError as exc:
            await self._error(
                ex,
                validation_error(
                    "invalid_option", request_id=ex.request_id, message=str(exc), param=exc.param
                ),
            )
            return
        ex.record.knobs = knobs.as_dict()
        if knobs.require_key and not ex.api_key:
            await self._error(ex, missing_key_error(ex.request_id))
            return
        if knobs.http_fault:
            args = self._fault_args(ex, model_id or "sim-fast", knobs.retry_after)
            await self._error(ex, fault_response(knobs.http_fault, **args))
            return
        if not model_id:
            body: dict[str, Any] = {
                "object": "list",
                "data": [spec.metadata() for spec in MODELS.values()],
            }
            await self._json(ex, 200, body)
            return
        spec = MODELS.get(split_model(model_id)[0])
        if spec is None:
            await self._error(ex, not_found(model_id))
            return
        await self._json(ex, 200, spec.metadata())

    # ---- chat completions ----------------------------------------------------------------

    async def _chat(self, ex: _Exchange, options: str | None, raw: bytes) -> None:
        """``POST /chat/completions`` (seed 000/002 ``createChatCompletion``)."""
        rid = ex.request_id
        try:
            body = self.recorder.set_body(ex.record, raw, ex.api_key)
        except ValueError:
            body = None
        if not isinstance(body, dict):
            await self._error(ex, validation_error("invalid_json", request_id=rid))
            return
        model = body.get("model")
        if not isinstance(model, str) or not model.strip():
            await self._error(ex, validation_error("missing_model", request_id=rid))
            return
        base = split_model(model)[0]
        ex.record.model = base
        try:
            knobs = parse_knobs(model, options)
        except KnobError as exc:
            await self._error(
                ex,
                validation_error(
                    "invalid_option", request_id=rid, message=str(exc), param=exc.param
                ),
            )
            return
        ex.record.knobs = knobs.as_dict()
        ex.split_utf8 = knobs.split_utf8
        stream = body.get("stream") is True
        ex.record.stream = stream
        if knobs.require_key and not ex.api_key:
            await self._error(ex, missing_key_error(rid))
            return
        if knobs.http_fault:
            args = self._fault_args(ex, base, knobs.retry_after)
            await self._error(ex, fault_response(knobs.http_fault, **args))
            return
        if base not in MODELS:
            await self._error(ex, validation_error("model_not_found", request_id=rid, model=base))
            return
        problem = _validate_messages(body.get("messages"), rid)
        if problem is not None:
            await self._error(ex, problem)
            return
        max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
        if max_tokens is not None and (
            not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1
        ):
            param = "max_completion_tokens" if "max_completion_tokens" in body else "max_tokens"
            await self._error(
                ex, validation_error("invalid_param", request_id=rid, param=param, value=max_tokens)
            )
            return
        plan = _plan(body, knobs, max_tokens)
        ctx = _Context(
            completion_id=_completion_id(body, options),
            created=time.time(),
            model=base,
            knobs=knobs,
            plan=plan,
        )
        if stream:
            await self._stream(ex, ctx)
        else:
            await self._complete(ex, ctx)

    async def _stream(self, ex: _Exchange, ctx: _Context) -> None:
        """Write the SSE stream of seed 002 ``ChatCompletionStreamResponse`` chunks."""
        knobs, plan = ctx.knobs, ctx.plan
        nl = "\r\n" if knobs.crlf else "\n"
        t0 = ex.record.started_at
        ttft = knobs.ttft_ms / 1000
        delay = knobs.delay_ms / 1000
        headers = [
            ("content-type", "text/event-stream; charset=utf-8"),
            ("cache-control", "no-cache"),
        ]
        await self._start(ex, 200, headers)
        if knobs.sse_ids and not await self._write(ex, f"retry: 3000{nl}{nl}", "retry"):
            return
        role = self._choice({"role": "assistant", "content": ""})
        if not await self._write(ex, ctx.sse(self._chunk(ctx, [role])), "role"):
            return
        fault = knobs.stream_fault
        fault_at = min(knobs.fault_after, len(plan.events)) if fault else -1
        keepalive = knobs.has("keepalive")
        for i, (kind, text, tokens) in enumerate(plan.events):
            if not await self._pause_until(ex, t0 + ttft + i * delay, keepalive, nl):
                return
            if i == fault_at:
                await self._stream_fault(ex, ctx, fault)
                return
            field_name = "content" if kind == "content" else knobs.reasoning_field
            chunk = self._chunk(ctx, [self._choice({field_name: text})])
            if not await self._write(ex, ctx.sse(chunk), kind, tokens):
                return
        if not plan.events and not await self._pause_until(ex, t0 + ttft, keepalive, nl):
            return
        if fault_at == len(plan.events):
            await self._stream_fault(ex, ctx, fault)
            return
        usage = self._usage(ctx)
        finish = self._choice({"content": ""}, plan.finish_reason)
        beside = usage if knobs.usage == "beside" else None
        if not await self._write(ex, ctx.sse(self._chunk(ctx, [finish], beside)), "finish"):
            return
        if knobs.usage == "last":
            if not await self._write(ex, ctx.sse(self._chunk(ctx, [], usage)), "usage"):
                return
        if knobs.done and not await self._write(ex, f"data: [DONE]{nl}{nl}", "done"):
            return
        await self._end(ex, "complete")

    async def _stream_fault(self, ex: _Exchange, ctx: _Context, fault: str | None) -> None:
        if fault == "stall":
            stalled = await self._pause(ex, ctx.knobs.stall_ms / 1000)
            ex.record.finish("stall")
            if stalled:
                await self._end(ex, "stall")
            return
        if fault == "error_chunk":
            chunk = stream_error_chunk(ex.request_id)
            if not await self._write(ex, ctx.sse(chunk), "error"):
                return
            await self._end(ex, "error_chunk")
            return
        await self._end(ex, "cut")

    async def _complete(self, ex: _Exchange, ctx: _Context) -> None:
        """Answer with one seed 002 ``ChatCompletionResponse`` after the simulated latency."""
        knobs, plan = ctx.knobs, ctx.plan
        if knobs.has("stall") and not await self._pause(ex, knobs.stall_ms / 1000):
            return
        latency = knobs.ttft_ms / 1000 + max(len(plan.events) - 1, 0) * knobs.delay_ms / 1000
        if not await self._pause_until(ex, ex.record.started_at + latency, False, "\n"):
            return
        if knobs.has("error_chunk"):
            body = stream_error_chunk(ex.request_id)
            await self._json(ex, 500, body, ascii_only=knobs.ascii, outcome="error_chunk")
            return
        message: dict[str, Any] = {"role": "assistant", "content": plan.content}
        if plan.reasoning and knobs.reasoning_field != "think":
            message[knobs.reasoning_field] = plan.reasoning
        choice = {
            "finish_reason": plan.finish_reason,
            "index": 0,
            "message": message,
            "logprobs": None,
        }
        response: dict[str, Any] = {
            "choices": [choice],
            "created": ctx.created,
            "id": ctx.completion_id,
            "model": ctx.model,
            "object": "chat.completion",
            "system_fingerprint": SYSTEM_FINGERPRINT,
        }
        if knobs.usage != "none":
            response["usage"] = self._usage(ctx)
        if knobs.has("cut"):
            data = _dumps(response, knobs.ascii).encode()
            await self._start(ex, 200, [("content-type", "application/json")])
            half = data[: len(data) // 2]
            if await self._write_bytes(
                ex, half, "body", half.decode("utf-8", "replace"), plan.completion_tokens // 2
            ):
                await self._end(ex, "cut")
            return
        await self._json(ex, 200, response, tokens=plan.completion_tokens, ascii_only=knobs.ascii)

    # ---- chunk and usage shapes ----------------------------------------------------------

    @staticmethod
    def _choice(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        """A seed 002 ``ChatCompletionChunkChoice``."""
        return {"delta": delta, "index": 0, "finish_reason": finish_reason, "logprobs": None}

    @staticmethod
    def _chunk(
        ctx: _Context, choices: list[dict[str, Any]], usage: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """A seed 002 ``ChatCompletionStreamResponse``."""
        chunk: dict[str, Any] = {
            "choices": choices,
            "created": ctx.created,
            "id": ctx.completion_id,
            "model": ctx.model,
            "object": "chat.completion.chunk",
            "system_fingerprint": SYSTEM_FINGERPRINT,
        }
        if usage is not None:
            chunk["usage"] = usage
        return chunk

    @staticmethod
    def _usage(ctx: _Context) -> dict[str, Any]:
        """Seed 002 ``Usage`` with SambaNova's timing fields (seconds).

        Timing figures are the scheduled ones (``ttft_ms``, ``delay_ms``), so they are
        deterministic; ``start_time``/``end_time`` are wall-clock Unix seconds.
        """
        plan, knobs = ctx.plan, ctx.knobs
        events = len(plan.events)
        ttft = knobs.ttft_ms / 1000
        after_first = max(events - 1, 0) * knobs.delay_ms / 1000
        total_latency = ttft + after_first
        completion = plan.completion_tokens
        first_tokens = plan.events[0][2] if plan.events else 0
        per_sec = completion / total_latency if total_latency > 0 else 0.0
        after_first_rate = (completion - first_tokens) / after_first if after_first > 0 else 0.0
        total = plan.prompt_tokens + completion
        start = ctx.created
        usage: dict[str, Any] = {
            "completion_tokens": completion,
            "completion_tokens_after_first_per_sec": round(after_first_rate, 6),
            "completion_tokens_after_first_per_sec_first_ten": round(after_first_rate, 6),
            "completion_tokens_after_first_per_sec_graph": round(after_first_rate, 6),
            "completion_tokens_per_sec": round(per_sec, 6),
        }
        if knobs.reasoning:
            usage["completion_tokens_details"] = {"reasoning_tokens": plan.reasoning_tokens}
        usage.update(
            {
                "end_time": start + total_latency,
                "is_last_response": True,
                "prompt_tokens": plan.prompt_tokens,
                "prompt_tokens_details": {"cached_tokens": 0},
                "start_time": start,
                "stop_reason": plan.finish_reason,
                "time_to_first_token": round(ttft, 6),
                "time_to_first_token_graph": round(ttft, 6),
                "total_latency": round(total_latency, 6),
                "total_tokens": total,
                "total_tokens_per_sec": round(total / total_latency, 6)
                if total_latency > 0
                else 0.0,
            }
        )
        return usage

    # ---- low-level writing ---------------------------------------------------------------

    async def _start(self, ex: _Exchange, status: int, headers: list[tuple[str, str]]) -> None:
        all_headers = [*headers, ("x-request-id", ex.request_id)]
        ex.record.status = status
        ex.record.add_event("headers", f"HTTP {status}")
        await _safe_send(
            ex,
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in all_headers],
            },
        )

    async def _write(self, ex: _Exchange, text: str, kind: str, tokens: int = 0) -> bool:
        """Write ``text`` as one SSE piece; False (nothing written) once disconnected."""
        return await self._write_bytes(ex, text.encode(), kind, text, tokens, split=ex.split_utf8)

    async def _write_bytes(
        self, ex: _Exchange, data: bytes, kind: str, text: str, tokens: int, *, split: bool = False
    ) -> bool:
        if ex.disconnected.is_set():
            return False
        ex.record.add_event(kind, ex.scrub(text), tokens)
        cut = _utf8_split_point(data) if split else None
        if cut is None:
            await _safe_send(ex, {"type": "http.response.body", "body": data, "more_body": True})
        else:
            await _safe_send(
                ex, {"type": "http.response.body", "body": data[:cut], "more_body": True}
            )
            await asyncio.sleep(0.005)  # let the first half leave as its own TCP segment
            await _safe_send(
                ex, {"type": "http.response.body", "body": data[cut:], "more_body": True}
            )
        return not ex.disconnected.is_set()

    async def _end(self, ex: _Exchange, outcome: str) -> None:
        if ex.disconnected.is_set():
            return
        ex.closing = True
        ex.record.add_event("end")
        ex.record.finish(outcome)
        await _safe_send(ex, {"type": "http.response.body", "body": b"", "more_body": False})

    async def _json(
        self,
        ex: _Exchange,
        status: int,
        body: Any,
        *,
        tokens: int = 0,
        ascii_only: bool = False,
        outcome: str = "complete",
    ) -> None:
        data = _dumps(body, ascii_only).encode()
        response = ErrorResponse(status, data, "application/json")
        await self._send_whole(ex, response, tokens=tokens, outcome=outcome)

    async def _error(self, ex: _Exchange, error: ErrorResponse) -> None:
        await self._send_whole(ex, error, tokens=0, outcome="error")

    async def _send_whole(
        self, ex: _Exchange, response: ErrorResponse, *, tokens: int, outcome: str
    ) -> None:
        if ex.disconnected.is_set():
            return
        headers = [
            ("content-type", response.content_type),
            ("content-length", str(len(response.body))),
            *response.headers,
        ]
        await self._start(ex, response.status, headers)
        ex.closing = True
        ex.record.add_event("body", ex.scrub(response.body.decode("utf-8", "replace")), tokens)
        ex.record.finish(outcome)
        await _safe_send(
            ex, {"type": "http.response.body", "body": response.body, "more_body": False}
        )

    async def _pause(self, ex: _Exchange, seconds: float) -> bool:
        """Sleep ``seconds``; returns False (at once) if the client disconnects."""
        if seconds <= 0:
            await asyncio.sleep(0)
            return not ex.disconnected.is_set()
        try:
            await asyncio.wait_for(ex.disconnected.wait(), seconds)
        except TimeoutError:
            return True
        return False

    async def _pause_until(self, ex: _Exchange, deadline: float, keepalive: bool, nl: str) -> bool:
        """Sleep until ``time.monotonic() == deadline``, writing a ``: keep-alive`` comment
        half-way when ``keepalive``; False if the client disconnects."""
        remaining = deadline - time.monotonic()
        if keepalive:
            if not await self._pause(ex, remaining / 2):
                return False
            if not await self._write(ex, f": keep-alive{nl}{nl}", "keepalive"):
                return False
            remaining = deadline - time.monotonic()
        return await self._pause(ex, remaining)


@dataclass
class _Context:
    completion_id: str
    created: float
    model: str
    knobs: Knobs
    plan: _Plan
    event_no: int = 0

    def sse(self, obj: dict[str, Any]) -> str:
        """One SSE event carrying ``obj`` as JSON (shape set by the ``crlf``, ``multiline``,
        ``sse_ids`` and ``ascii`` knobs)."""
        knobs = self.knobs
        nl = "\r\n" if knobs.crlf else "\n"
        if knobs.multiline:
            payload = json.dumps(obj, ensure_ascii=knobs.ascii, indent=1)
        else:
            payload = _dumps(obj, knobs.ascii)
        head = ""
        if knobs.sse_ids:
            self.event_no += 1
            head = f"id: {self.event_no}{nl}"
        return head + "".join(f"data: {line}{nl}" for line in payload.split("\n")) + nl


def _plan(body: dict[str, Any], knobs: Knobs, max_tokens: int | None) -> _Plan:
    messages = body["messages"]
    prompt = ""
    for message in reversed(messages):
        if message.get("role") == "user":
            prompt = message_text(message.get("content"))
            break
    seed = knobs.seed
    if seed is None:
        body_seed = body.get("seed")
        seed = body_seed if isinstance(body_seed, int) and not isinstance(body_seed, bool) else 0
    answer = answer_text(prompt, length_tokens=knobs.length, seed=seed)
    finish = "stop"
    if max_tokens is not None and max_tokens < len(answer):
        answer = answer[:max_tokens]
        finish = "length"
    reasoning: list[str] = []
    if knobs.reasoning:
        reasoning = reasoning_text(prompt, length_tokens=knobs.reasoning_length, seed=seed)
    n = knobs.tokens_per_event
    segments: list[tuple[str, list[str]]]
    content_tokens = list(answer)
    if knobs.reasoning_field == "think" and reasoning:
        # Event boundaries fall inside both tags, whatever tokens_per_event is.
        segments = [
            ("content", [_THINK_OPEN[0]]),
            ("content", [_THINK_OPEN[1], *reasoning, _THINK_CLOSE[0]]),
            ("content", [_THINK_CLOSE[1], "\n\n", *answer]),
        ]
        content_tokens = [*_THINK_OPEN, *reasoning, *_THINK_CLOSE, "\n\n", *answer]
    else:
        segments = [("reasoning", reasoning), ("content", answer)]
    events: list[tuple[str, str, int]] = []
    for kind, tokens in segments:
        for i in range(0, len(tokens), n):
            group = tokens[i : i + n]
            events.append((kind, "".join(group), len(group)))
    return _Plan(
        events=events,
        content="".join(content_tokens),
        reasoning="".join(reasoning) if knobs.reasoning_field != "think" else "",
        reasoning_tokens=len(reasoning),
        completion_tokens=sum(e[2] for e in events),
        prompt_tokens=count_prompt_tokens(messages),
        finish_reason=finish,
    )


def _validate_messages(messages: Any, request_id: str) -> ErrorResponse | None:
    """SambaNova's minimal checks, with seed 000's error examples."""
    if messages is None or not isinstance(messages, list):
        return validation_error("missing_messages", request_id=request_id)
    if not messages:
        return validation_error("empty_messages", request_id=request_id)
    for index, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if role not in VALID_ROLES:
            return validation_error("invalid_role", request_id=request_id, role=role, index=index)
        if role == "user" and message.get("content") is None:
            return validation_error("null_content", request_id=request_id, index=index)
    return None


def _completion_id(body: dict[str, Any], options: str | None) -> str:
    """A UUID-shaped id derived from the request, so equal requests give equal bytes."""
    canonical = json.dumps(body, sort_keys=True, ensure_ascii=True) + "\x00" + (options or "")
    return str(uuid.UUID(hex=hashlib.sha256(canonical.encode()).hexdigest()[:32]))


def _dumps(obj: Any, ascii_only: bool = False) -> str:
    return json.dumps(obj, ensure_ascii=ascii_only, separators=(",", ":"))


def _utf8_split_point(data: bytes) -> int | None:
    """Index just after the first byte of the first multibyte UTF-8 sequence, if any."""
    for index, byte in enumerate(data):
        if byte >= 0xC0:
            return index + 1
    return None


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return value.decode("latin-1")
    return None


async def _safe_send(ex: _Exchange, message: Message) -> None:
    try:
        await ex.send(message)
    except OSError:  # some servers raise once the client is gone
        ex.record.mark_disconnected()
        ex.disconnected.set()


async def _read_body(receive: Receive) -> bytes | None:
    """The whole request body, or None if the client disconnected first."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        if message["type"] == "http.request":
            chunk = message.get("body", b"")
            size += len(chunk)
            if size <= MAX_BODY_BYTES + 1:
                chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)


async def _drain_body(receive: Receive) -> None:
    await _read_body(receive)


async def _plain_json(send: Send, status: int, body: Any) -> None:
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


def create_app(
    mount_prefix: str = "/v1", *, control: bool = True, max_recorded: int = 500
) -> SimulatorApp:
    """A new simulator ASGI app serving the API under ``mount_prefix`` (``/v1`` standalone,
    ``/simulator/v1`` in-process) and, when ``control``, ``/_simulator/…`` under the prefix's
    parent. Each app has its own :class:`~chat.simulator.recorder.Recorder` (``app.recorder``)
    keeping the last ``max_recorded`` requests.
    """
    return SimulatorApp(mount_prefix, control=control, max_recorded=max_recorded)


_SINGLETON: SimulatorApp | None = None


def simulator_asgi_app(*, control: bool = True) -> SimulatorApp:
    """The process-wide app for the in-process mount: ``/simulator/v1/…`` (API) and
    ``/simulator/_simulator/…`` (recorder; only when ``control``, which the first call
    decides). Route every ``/simulator/`` path to it, e.g. in ``playground/asgi.py``::

        if scope["type"] == "http" and scope["path"].startswith("/simulator/"):
            return await simulator_asgi_app()(scope, receive, send)

    The recorder keeps the last 100 requests, prompts included, and its routes have no
    authentication: pass ``control=False`` where other users' prompts must stay private.
    """
    global _SINGLETON
    if _SINGLETON is None:
        _SINGLETON = create_app("/simulator/v1", control=control, max_recorded=100)
    return _SINGLETON
