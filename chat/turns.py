"""The turn runner: one server-side task per assistant message, outside any consumer.

A turn reads the upstream through an adapter (``chat.providers``), keeps the answer and the
reasoning as growing strings in memory, publishes coalesced frames to subscribers (the first
token at once, then at most one frame per ``PLAYGROUND_FRAME_INTERVAL_S``), saves partial text
about every ``PLAYGROUND_PARTIAL_SAVE_S`` without awaiting it on the token path (the heartbeat),
and writes the final row once. Closing a tab does not stop a turn; Stop, an error or the end do.

A per-process :data:`registry` holds strong references to running turns; subscribing takes a
snapshot and registers a cursor in one synchronous step, so nothing is missed or doubled.

May import: Django (settings, db via database_sync_to_async), chat.services, chat.frames,
chat.metrics, chat.providers.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings

from chat import frames, services
from chat.cluster import cluster, conversation_group, user_group
from chat.metrics import Clock, TurnClock, compute_metrics, usage_dict
from chat.providers import get_adapter
from chat.providers.base import (
    ChatRequest,
    EndpointConfig,
    Finish,
    LogprobsDelta,
    ModelOutputError,
    ProviderError,
    RawEvent,
    ReasoningDelta,
    ReasoningSignature,
    ResponseStarted,
    TextDelta,
    ToolCallDelta,
    Usage,
    scrub,
)
from chat.providers.http import get_client

log = logging.getLogger(__name__)

MAX_RAW_EVENTS = 2000
MAX_LOGPROB_TOKENS = 8192
MAX_RAW_BYTES = 512 * 1024

StreamFn = Callable[[EndpointConfig, ChatRequest], AsyncIterator[Any]]


@dataclass(frozen=True)
class TurnSpec:
    """Everything a turn needs, resolved before it starts (secrets only in memory).

    Prices in USD per million tokens, from the endpoint's cached ``/models`` metadata.
    """

    message_id: uuid.UUID
    conversation_id: int
    user_id: int
    config: EndpointConfig
    request: ChatRequest
    prompt_price_per_mtok: float | None = None
    completion_price_per_mtok: float | None = None
    prefill: str = ""  # text the answer starts with (a prefill, or Continue's old answer)
    turn_id: uuid.UUID | None = None
    conversation_title: str = ""


class Subscriber:
    """A consumer watching a conversation.

    ``push`` enqueues one frame (HTML text) synchronously; the consumer's own writer task sends
    it. Because pushing never awaits, frames of one turn reach every subscriber in order (the
    skeleton before any delta) and a slow socket never slows the upstream read.
    """

    def __init__(self, push: Callable[[str], None], user_id: int, conversation_id: int | None = None) -> None:
        self.push = push
        self.user_id = user_id
        self.conversation_id = conversation_id
        self.cursors: dict[tuple[uuid.UUID, str], int] = {}

    def __repr__(self) -> str:  # pragma: no cover
        return f"Subscriber(user={self.user_id})"


@dataclass
class LiveTurn:
    """The in-memory state of one running assistant message."""

    spec: TurnSpec
    started_at: float = field(default_factory=time.time)
    text: str = ""
    reasoning: str = ""
    status: str = "streaming"
    finish_reason: str = ""
    usage: Usage | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    error: dict[str, Any] = field(default_factory=dict)
    tool_calls: dict[int, dict[str, str]] = field(default_factory=dict)
    reasoning_signature: str = ""
    logprobs: list[dict[str, Any]] = field(default_factory=list)
    subscribers: set[Subscriber] = field(default_factory=set)
    task: asyncio.Task[None] | None = None
    stop_requested: bool = False
    frames_sent: int = 0
    bytes_sent: int = 0
    partial_saves: int = 0
    snapshot_meta: dict[str, Any] = field(default_factory=dict)
    _dirty: asyncio.Event = field(default_factory=asyncio.Event)
    _done: bool = False

    @property
    def message_id(self) -> uuid.UUID:
        return self.spec.message_id

    def view(self) -> frames.MessageView:
        """The message as it stands now (for snapshot frames and mid-turn page loads)."""
        nav = self.snapshot_meta.get("_nav", {})
        return frames.MessageView(
            tool_calls=[self.tool_calls[i] for i in sorted(self.tool_calls)], logprobs=self.logprobs,
            sibling_index=nav.get("sibling_index", 0), sibling_count=nav.get("sibling_count", 1),
            prev_sibling_id=nav.get("prev_sibling_id"), next_sibling_id=None,
            id=self.message_id, role="assistant", content=self.text, reasoning=self.reasoning,
            status=self.status, finish_reason=self.finish_reason,
            usage=usage_dict(self.usage), metrics=self.metrics, error=self.error,
            snapshot=self.snapshot_meta, started_at=self.started_at,
            conversation_id=self.spec.conversation_id, prefill_len=len(self.spec.prefill),
            turn_id=self.spec.turn_id,
        )

    def subscribe(self, sub: Subscriber) -> str:
        """Register ``sub`` at the current offsets and return its snapshot frame.

        Synchronous on purpose: no await between taking the snapshot and registering, so a
        subscriber sees every character exactly once.
        """
        sub.cursors[(self.message_id, "text")] = len(self.text)
        sub.cursors[(self.message_id, "reasoning")] = len(self.reasoning)
        self.subscribers.add(sub)
        return frames.snapshot(self.view())


class TurnRegistry:
    """Strong references to this process's running turns, by message and by conversation."""

    def __init__(self) -> None:
        self.turns: dict[uuid.UUID, LiveTurn] = {}
        self.watchers: dict[int, set[Subscriber]] = {}
        self.by_user: dict[int, set[Subscriber]] = {}

    # -- subscribers ------------------------------------------------------------------
    def watch(self, conversation_id: int, sub: Subscriber) -> list[str]:
        """Subscribe to a conversation: future turns and snapshots of running ones (sync)."""
        self.watchers.setdefault(conversation_id, set()).add(sub)
        self.by_user.setdefault(sub.user_id, set()).add(sub)
        return [
            t.subscribe(sub) for t in self.turns.values() if t.spec.conversation_id == conversation_id
        ]

    def unwatch(self, conversation_id: int, sub: Subscriber) -> None:
        self.watchers.get(conversation_id, set()).discard(sub)
        if not self.watchers.get(conversation_id):
            self.watchers.pop(conversation_id, None)
        self.by_user.get(sub.user_id, set()).discard(sub)
        if not self.by_user.get(sub.user_id):
            self.by_user.pop(sub.user_id, None)
        for t in self.turns.values():
            t.subscribers.discard(sub)

    def live_view(self, message_id: uuid.UUID) -> frames.MessageView | None:
        t = self.turns.get(message_id)
        return t.view() if t else None

    def running_count(self) -> int:
        return len(self.turns)

    def live_ids(self) -> set[uuid.UUID]:
        return set(self.turns)

    def tell_user_elsewhere(self, user_id: int, conversation_id: int, frame: str) -> None:
        """Push ``frame`` to the user's sockets that watch other conversations (other tabs)."""
        for sub in list(self.by_user.get(user_id, ())):
            if sub.conversation_id != conversation_id:
                sub.push(frame)

    # -- lifecycle --------------------------------------------------------------------
    def start(
        self,
        spec: TurnSpec,
        *,
        announce: str = "",
        stream_fn: StreamFn | None = None,
        clock: Clock = time.monotonic,
        snapshot_meta: dict[str, Any] | None = None,
    ) -> LiveTurn:
        """Start a turn task (not tied to any consumer).

        Every watcher of the conversation first gets ``announce`` (the frame that puts the
        message skeleton on the page), then is subscribed at offset 0, in one synchronous step.
        """
        turn = LiveTurn(spec=spec, snapshot_meta=snapshot_meta or {}, text=spec.prefill)
        for sub in self.watchers.get(spec.conversation_id, ()):
            if announce:
                sub.push(announce)
            sub.cursors[(spec.message_id, "text")] = len(turn.text)
            sub.cursors[(spec.message_id, "reasoning")] = 0
            turn.subscribers.add(sub)
        self.turns[spec.message_id] = turn
        if announce:
            cluster.publish(conversation_group(spec.conversation_id), {
                "type": "turn.started", "mid": str(spec.message_id), "announce": announce,
                "prefill_len": len(spec.prefill),
            })
        runner = TurnRunner(turn, stream_fn=stream_fn, clock=clock, registry=self)
        turn.task = asyncio.get_running_loop().create_task(runner.run(), name=f"turn-{spec.message_id}")
        return turn

    def stop(self, message_id: uuid.UUID) -> bool:
        """Ask a running turn to stop: the upstream connection is closed at once."""
        turn = self.turns.get(message_id)
        if turn is None or turn.task is None or turn.task.done():
            return False
        if turn.stop_requested or turn._done:
            # Already stopping, or already writing its final row: a second cancel would
            # interrupt the final write and leave the turn registered forever.
            return True
        turn.stop_requested = True
        turn.task.cancel()
        return True

    async def drain(self, timeout: float = 30.0) -> None:  # noqa: ASYNC109 - a bound, not a cancel scope
        """Wait for every running turn to end (tests, graceful shutdown)."""
        tasks = [t.task for t in list(self.turns.values()) if t.task]
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)

    async def cancel_all(self) -> None:
        """Stop every running turn and wait for them to save."""
        for mid in list(self.turns):
            self.stop(mid)
        await self.drain()

    def _forget(self, turn: LiveTurn) -> None:
        self.turns.pop(turn.message_id, None)


registry = TurnRegistry()


def _default_stream(config: EndpointConfig, request: ChatRequest) -> AsyncIterator[Any]:
    adapter = get_adapter(config.api_style)
    return adapter.stream(get_client(), config, request)


def structured_output_check(response_format: dict[str, Any] | None, text: str) -> dict[str, Any] | None:
    """Check an answer against the requested structured output (``json_object`` /
    ``json_schema``): ``{"kind", "valid": bool, "errors": [str, …]}``, or None when none was
    requested. Uses jsonschema with the schema's own draft."""
    if not response_format or response_format.get("type") not in ("json_object", "json_schema"):
        return None
    kind = response_format["type"]
    try:
        value = json.loads(text)
    except ValueError as exc:
        return {"kind": kind, "valid": False, "errors": [f"Not valid JSON: {exc}"]}
    if kind == "json_object":
        ok = isinstance(value, dict)
        return {"kind": kind, "valid": ok, "errors": [] if ok else ["The answer is JSON but not an object."]}
    import jsonschema

    schema = (response_format.get("json_schema") or {}).get("schema") or {}
    validator = jsonschema.validators.validator_for(schema)(schema)
    errors = [
        f"{'/'.join(str(p) for p in e.absolute_path) or '(root)'}: {e.message}"
        for e in sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
    ][:20]
    return {"kind": kind, "valid": not errors, "errors": errors}


class TurnRunner:
    """Runs one :class:`LiveTurn`: stream, publish, persist."""

    def __init__(
        self,
        turn: LiveTurn,
        *,
        stream_fn: StreamFn | None = None,
        clock: Clock = time.monotonic,
        registry: TurnRegistry,
        frame_interval_s: float | None = None,
        partial_save_s: float | None = None,
    ) -> None:
        self.turn = turn
        self.stream_fn = stream_fn or _default_stream
        self.tc = TurnClock(clock=clock)
        self.registry = registry
        self.frame_interval_s = (
            settings.PLAYGROUND_FRAME_INTERVAL_S if frame_interval_s is None else frame_interval_s
        )
        self.partial_save_s = settings.PLAYGROUND_PARTIAL_SAVE_S if partial_save_s is None else partial_save_s
        self.raw_events: list[dict[str, str]] = []
        self._published = (len(turn.text), len(turn.reasoning))
        self._raw_bytes = 0
        self._save_task: asyncio.Task[None] | None = None

    # -- publishing -------------------------------------------------------------------
    async def _pump(self) -> None:
        """Send coalesced delta frames: at once after a quiet period, else one per interval."""
        turn = self.turn
        last = -1e9
        while True:
            await turn._dirty.wait()
            wait = last + self.frame_interval_s - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            turn._dirty.clear()
            last = time.monotonic()
            self._flush()
            if turn._done:
                return

    def _flush(self) -> None:
        turn = self.turn
        if cluster.enabled:
            # Other processes get the same coalesced delta, once per flush, absolute offsets.
            ps, pr = self._published
            if ps < len(turn.text) or pr < len(turn.reasoning):
                cluster.publish(conversation_group(turn.spec.conversation_id), {
                    "type": "turn.delta", "mid": str(turn.message_id),
                    "text_start": ps, "text": turn.text[ps:],
                    "reasoning_start": pr, "reasoning": turn.reasoning[pr:],
                })
                self._published = (len(turn.text), len(turn.reasoning))
        for sub in list(turn.subscribers):
            parts = []
            for kind, value in (("reasoning", turn.reasoning), ("text", turn.text)):
                key = (turn.message_id, kind)
                start = sub.cursors.get(key, 0)
                if start < len(value):
                    parts.append(frames.delta(turn.message_id, kind, start, value[start:]))
                    sub.cursors[key] = len(value)
            if parts:
                self._send(sub, "".join(parts))

    def _send(self, sub: Subscriber, frame: str) -> None:
        try:
            sub.push(frame)
            self.turn.frames_sent += 1
            self.turn.bytes_sent += len(frame.encode())
        except Exception:  # a closed socket must not end the turn
            self.turn.subscribers.discard(sub)

    # -- persistence ------------------------------------------------------------------
    async def _saver(self) -> None:
        """Every ``partial_save_s``: save the text so far (or only the heartbeat when nothing
        new arrived). Runs beside the token path, never awaited by it; one write at a time."""
        turn = self.turn
        saved = (len(turn.text), len(turn.reasoning))
        while True:
            await asyncio.sleep(self.partial_save_s)
            if turn._done:
                return
            now = (len(turn.text), len(turn.reasoning))
            turn.partial_saves += 1
            if now != saved:
                saved = now
                await database_sync_to_async(services.message_save_partial)(
                    message_id=turn.message_id, content=turn.text, reasoning=turn.reasoning
                )
            else:
                await database_sync_to_async(services.message_heartbeat)(message_id=turn.message_id)

    def _record_raw(self, ev: RawEvent) -> None:
        if len(self.raw_events) >= MAX_RAW_EVENTS or self._raw_bytes >= MAX_RAW_BYTES:
            return
        self._raw_bytes += len(ev.data)
        self.raw_events.append({"event": ev.event, "data": ev.data})

    # -- the turn ---------------------------------------------------------------------
    async def run(self) -> None:
        turn = self.turn
        spec = turn.spec
        pump = asyncio.get_running_loop().create_task(self._pump())
        self._save_task = asyncio.get_running_loop().create_task(self._saver())
        status = "complete"
        try:
            # Make the stream (and the loop's HTTP client) before the clock starts: TTFT is
            # measured from the request, not from building a client.
            events = self.stream_fn(spec.config, spec.request)
            self.tc.sent()
            async for ev in events:
                if isinstance(ev, TextDelta):
                    if ev.text:
                        self.tc.token(answer=True)
                        turn.text += ev.text
                        turn._dirty.set()
                elif isinstance(ev, ReasoningDelta):
                    if ev.text:
                        self.tc.token(answer=False)
                        turn.reasoning += ev.text
                        turn._dirty.set()
                elif isinstance(ev, RawEvent):
                    self.tc.byte()
                    self._record_raw(ev)
                elif isinstance(ev, Usage):
                    self.tc.byte()
                    turn.usage = ev
                elif isinstance(ev, Finish):
                    self.tc.byte()
                    turn.finish_reason = ev.reason or ""
                elif isinstance(ev, ToolCallDelta):
                    self.tc.token(answer=True)
                    call = turn.tool_calls.setdefault(ev.index, {"id": "", "name": "", "arguments": ""})
                    call["id"] = ev.id or call["id"]
                    call["name"] = ev.name or call["name"]
                    call["arguments"] += ev.arguments
                elif isinstance(ev, ResponseStarted):
                    self.tc.byte()
                    turn.metrics["request_id"] = ev.request_id
                elif isinstance(ev, ReasoningSignature):
                    turn.reasoning_signature += ev.signature
                elif isinstance(ev, LogprobsDelta):
                    if len(turn.logprobs) < MAX_LOGPROB_TOKENS:
                        turn.logprobs.extend(
                            {"token": t.token, "logprob": t.logprob, "top": [list(x) for x in t.top]}
                            for t in ev.tokens
                        )
                elif isinstance(ev, ModelOutputError):
                    turn.metrics["model_output_error"] = {"message": ev.message, "raw_output": ev.raw_output}
        except asyncio.CancelledError:
            if not turn.stop_requested:
                status = "interrupted"
                turn.error = {"message": "The server shut down while this answer was streaming.", "code": "interrupted"}
            else:
                status = "stopped"
        except ProviderError as exc:
            status = "error"
            turn.error = exc.as_dict()
        except Exception as exc:  # never a traceback to the user, always a stored status
            log.exception("turn %s failed", spec.message_id)
            status = "error"
            turn.error = {
                "message": scrub(f"Internal error: {type(exc).__name__}", spec.config.secrets()),
                "code": "internal_error",
            }
        await self._finish(status, pump)

    async def _finish(self, status: str, pump: asyncio.Task[None]) -> None:
        turn = self.turn
        turn._done = True  # from here on Stop is a no-op (see TurnRegistry.stop)
        spec = turn.spec
        turn.metrics = {
            **turn.metrics,
            **compute_metrics(
                self.tc, turn.usage,
                prompt_price_per_mtok=spec.prompt_price_per_mtok,
                completion_price_per_mtok=spec.completion_price_per_mtok,
            ),
        }
        tool_calls = [turn.tool_calls[i] for i in sorted(turn.tool_calls)]
        check = structured_output_check(spec.request.response_format, turn.text) if status == "complete" else None
        if check is not None:
            turn.metrics["schema_check"] = check
        # Deliver the remaining text before the final frame.
        turn._done = True
        turn._dirty.set()
        try:
            await asyncio.shield(pump)
        except Exception:  # pragma: no cover
            pump.cancel()
        if self._save_task is not None:
            # A save in flight may land before or after the final write: the final write is
            # unconditional on text, and partial saves are conditional on ``streaming``.
            self._save_task.cancel()
            try:
                await self._save_task
            except (asyncio.CancelledError, Exception):
                pass
        inspect = {
            "request": self._request_for_inspect(),
            "events": self.raw_events,
            "events_truncated": len(self.raw_events) >= MAX_RAW_EVENTS or self._raw_bytes >= MAX_RAW_BYTES,
            "frames_sent": turn.frames_sent,
            "partial_saves": turn.partial_saves,
        }
        turn.status = status
        try:
            await asyncio.shield(
                database_sync_to_async(services.message_complete)(
                    message_id=turn.message_id, status=status, content=turn.text,
                    reasoning=turn.reasoning, finish_reason=turn.finish_reason,
                    usage=usage_dict(turn.usage), usage_raw=turn.usage.raw if turn.usage else {},
                    metrics=turn.metrics, error=turn.error, inspect=inspect,
                    tool_calls=tool_calls, reasoning_signature=turn.reasoning_signature,
                    logprobs=turn.logprobs,
                )
            )
        except Exception:
            log.exception("final write of turn %s failed", turn.message_id)
        frame = frames.final(turn.view())
        for sub in list(turn.subscribers):
            self._send(sub, frame)
        self.registry._forget(turn)
        notice = frames.turn_finished_elsewhere(spec.conversation_id, spec.conversation_title, status)
        self.registry.tell_user_elsewhere(spec.user_id, spec.conversation_id, notice)
        cluster.publish(conversation_group(spec.conversation_id), {
            "type": "turn.final", "mid": str(turn.message_id), "html": frame,
        })
        cluster.publish(user_group(spec.user_id), {
            "type": "user.notice", "conversation_id": spec.conversation_id, "html": notice,
        })

    def _request_for_inspect(self) -> dict[str, Any]:
        spec = self.turn.spec
        adapter = get_adapter(spec.config.api_style)
        url, headers, body = adapter.build_request(spec.config, spec.request)
        secret_names = {"authorization", "x-api-key", *(h.lower() for h in spec.config.extra_headers)}
        safe_headers = {k: ("[REDACTED]" if k.lower() in secret_names else v) for k, v in headers.items()}
        text = json.dumps({"url": url, "headers": safe_headers, "body": body})
        return json.loads(scrub(text, spec.config.secrets()))
