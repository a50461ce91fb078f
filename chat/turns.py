"""The turn runner: one server-side task per assistant message, outside any consumer.

A turn reads the upstream through an adapter (``chat.providers``), keeps the answer and the
reasoning in memory (pieces appended per token, joined once per frame), publishes coalesced
frames to subscribers (the first token at once, then at most one frame per
``PLAYGROUND_FRAME_INTERVAL_S``, timed on the runner's clock from the token path, no task per
turn for it), saves partial text about every ``PLAYGROUND_PARTIAL_SAVE_S`` through the writer
thread without ever awaiting it on the token path (the heartbeat), and writes the final row
once. Closing a tab does not stop a turn; Stop, an error, a limit or the end do.

The finishing path is exception-safe: whatever fails (a final write, a render, a schema check),
the turn ends with a stored terminal status, its admission slot freed and a final frame sent.

A per-process :data:`registry` holds strong references to running turns; subscribing takes a
snapshot and registers a cursor in one synchronous step, so nothing is missed or doubled.
:class:`Admission` bounds running turns per process and per user; turns beyond a limit wait in
a FIFO queue and say their position.

May import: Django (settings), chat.db, chat.services, chat.frames, chat.metrics, chat.cluster,
chat.textsafety, chat.providers.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import logging
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from chat import db, frames, services
from chat.cluster import cluster, conversation_group, user_group
from chat.metrics import Clock, TurnClock, compute_metrics, token_timings, usage_dict
from chat.providers import get_adapter
from chat.providers.base import (
    AnswerWasReasoning,
    Base64Media,
    ChatRequest,
    EndpointConfig,
    FinalText,
    Finish,
    LogprobsDelta,
    ModelOutputError,
    ProviderError,
    RawEvent,
    ReasoningDelta,
    ReasoningSignature,
    RedactedThinking,
    ResponseStarted,
    ServerToolUse,
    StreamWarning,
    TextDelta,
    ToolCallDelta,
    Usage,
    scrub,
    tool_arguments_complete,
)
from chat.providers.errors import secret_variants
from chat.providers.http import get_client
from chat.rendering import StreamedBlocks
from chat.textsafety import SecretFilter, finite, safe_json_loads, valid_text

log = logging.getLogger(__name__)

MAX_RAW_EVENTS = 2000
MAX_LOGPROB_TOKENS = 8192
MAX_RAW_BYTES = 512 * 1024

StreamFn = Callable[[EndpointConfig, ChatRequest], AsyncIterator[Any]]


@dataclass(frozen=True)
class TurnSpec:
    """Everything a turn needs, resolved before it starts (secrets only in memory).

    Prices in USD per million tokens, from the endpoint's cached ``/models`` metadata. ``plan``:
    a :class:`chat.planning.TurnPlan` whose rows the runner commits (through the writer thread)
    while the upstream request is already on its way; None when the rows exist already.
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
    lane_id: int | None = None
    plan: Any = None
    # An optional extra bound shared by a group of turns (a comparison's lanes and repeat runs):
    # at most ``group_limit`` of the group run at once; 0 = none.
    group: str = ""
    group_limit: int = 0

    def __repr__(self) -> str:  # the config holds secrets
        return f"TurnSpec(message_id={self.message_id!s}, conversation_id={self.conversation_id})"


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


class _Text:
    """A growing string: pieces appended per token, joined once when read."""

    __slots__ = ("_joined", "_pending", "length")

    def __init__(self, initial: str = "") -> None:
        self._joined = initial
        self._pending: list[str] = []
        self.length = len(initial)

    def append(self, piece: str) -> None:
        self._pending.append(piece)
        self.length += len(piece)

    @property
    def value(self) -> str:
        if self._pending:
            self._joined += "".join(self._pending)
            self._pending.clear()
        return self._joined

    def set(self, value: str) -> None:
        self._joined = value
        self._pending.clear()
        self.length = len(value)


@dataclass
class LiveTurn:
    """The in-memory state of one running assistant message."""

    spec: TurnSpec
    started_at: float = field(default_factory=time.time)
    status: str = "streaming"
    finish_reason: str = ""
    usage: Usage | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    error: dict[str, Any] = field(default_factory=dict)
    tool_calls: dict[int, dict[str, Any]] = field(default_factory=dict)
    server_tools: list[dict[str, Any]] = field(default_factory=list)  # what the upstream ran itself
    replay_blocks: list[dict[str, Any]] = field(default_factory=list)  # e.g. redacted thinking, kept as is
    warnings: list[dict[str, str]] = field(default_factory=list)
    reasoning_signature: str = ""
    logprobs: list[dict[str, Any]] = field(default_factory=list)
    subscribers: set[Subscriber] = field(default_factory=set)
    task: asyncio.Task[None] | None = None
    stop_requested: bool = False
    shutdown: bool = False
    refused: str = ""
    queue_position: int = 0
    frames_sent: int = 0
    chars_sent: int = 0
    partial_saves: int = 0
    snapshot_meta: dict[str, Any] = field(default_factory=dict)
    _text: _Text = field(default_factory=_Text)
    _reasoning: _Text = field(default_factory=_Text)
    blocks: dict[str, StreamedBlocks] = field(
        default_factory=lambda: {"text": StreamedBlocks(), "reasoning": StreamedBlocks()}
    )
    k: str = ""
    _done: bool = False

    @property
    def message_id(self) -> uuid.UUID:
        return self.spec.message_id

    @property
    def text(self) -> str:
        return self._text.value

    @text.setter
    def text(self, value: str) -> None:
        self._text.set(value)

    @property
    def reasoning(self) -> str:
        return self._reasoning.value

    @reasoning.setter
    def reasoning(self, value: str) -> None:
        self._reasoning.set(value)

    def view(self) -> frames.MessageView:
        """The message as it stands now (for snapshot frames and mid-turn page loads)."""
        nav = self.snapshot_meta.get("_nav", {})
        return frames.MessageView(
            tool_calls=self.all_tool_calls(), logprobs=self.logprobs, replay_blocks=self.replay_blocks,
            sibling_index=nav.get("sibling_index", 0), sibling_count=nav.get("sibling_count", 1),
            prev_sibling_id=nav.get("prev_sibling_id"), next_sibling_id=None,
            id=self.message_id, role="assistant", content=self.text, reasoning=self.reasoning,
            status=self.status, finish_reason=self.finish_reason,
            usage=usage_dict(self.usage), metrics=self.metrics, error=self.error,
            snapshot=self.snapshot_meta, started_at=self.started_at,
            conversation_id=self.spec.conversation_id, prefill_len=len(self.spec.prefill),
            turn_id=self.spec.turn_id, queue_position=self.queue_position,
            live_blocks={kind: (list(b.html), b.upto) for kind, b in self.blocks.items()},
            # A compare lane started without its settings snapshot is blind (chat.compare.consumers).
            blind=self.spec.lane_id is not None and "model" not in self.snapshot_meta,
        )

    def all_tool_calls(self) -> list[dict[str, Any]]:
        """Client tool calls by index, then what the server ran (``"server": True``)."""
        return [self.tool_calls[i] for i in sorted(self.tool_calls)] + self.server_tools

    def subscribe(self, sub: Subscriber) -> str:
        """Register ``sub`` at the current offsets and return its snapshot frame.

        Synchronous on purpose: no await between taking the snapshot and registering, so a
        subscriber sees every character exactly once.
        """
        mid = self.message_id
        sub.cursors[(mid, "text")] = self._text.length
        sub.cursors[(mid, "reasoning")] = self._reasoning.length
        for kind, done in self.blocks.items():
            sub.cursors[(mid, kind + "_b")] = len(done.html)
            sub.cursors[(mid, kind + "_u")] = done.upto
        self.subscribers.add(sub)
        return frames.snapshot(self.view())


class Admission:
    """Bounds on running turns: at most ``max_running`` per process and ``max_per_user`` per
    user. A turn over a bound waits in one FIFO queue (its position shown) until a slot frees;
    a waiting turn whose user is at their bound lets the next user's turn pass. ``max_queue``
    bounds the queue: :meth:`can_queue` is False beyond it (the action is refused). A turn whose
    spec names a ``group`` with a ``group_limit`` also waits while that many of its group run."""

    def __init__(self, *, max_running: int, max_per_user: int, max_queue: int) -> None:
        self.max_running = max_running
        self.max_per_user = max_per_user
        self.max_queue = max_queue
        self.running = 0
        self.by_user: dict[int, int] = {}
        self.by_group: dict[str, int] = {}
        self.waiting: deque[tuple[LiveTurn, asyncio.Future[None]]] = deque()

    def _fits(self, user_id: int, group: str = "", group_limit: int = 0) -> bool:
        return (
            self.running < self.max_running and self.by_user.get(user_id, 0) < self.max_per_user
            and (not group_limit or self.by_group.get(group, 0) < group_limit)
        )

    @staticmethod
    def _key(turn: LiveTurn) -> tuple[int, str, int]:
        spec = turn.spec
        return spec.user_id, getattr(spec, "group", ""), getattr(spec, "group_limit", 0)

    def can_queue(self, user_id: int) -> bool:
        """Whether a new turn of ``user_id`` may start or wait (False: refuse it)."""
        return self._fits(user_id) or len(self.waiting) < self.max_queue

    def _take(self, user_id: int, group: str = "") -> None:
        self.running += 1
        self.by_user[user_id] = self.by_user.get(user_id, 0) + 1
        if group:
            self.by_group[group] = self.by_group.get(group, 0) + 1

    async def acquire(self, turn: LiveTurn, on_wait: Callable[[LiveTurn], None]) -> None:
        """Take a slot for ``turn`` (at once, or after waiting). ``on_wait(turn)`` is called
        when the turn's queue position changes. Cancellation while waiting leaves the queue."""
        user_id, group, _ = self._key(turn)
        if self._fits(*self._key(turn)) and not any(
            self._fits(*self._key(t)) for t, f in self.waiting if not f.done()
        ):  # nobody waiting could use the slot (they are at their own bound): take it
            self._take(user_id, group)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.waiting.append((turn, fut))
        self._positions(on_wait)
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.release(user_id, on_wait, group=group)  # granted just as it was cancelled
            else:
                self.waiting = deque(w for w in self.waiting if w[1] is not fut)
                self._positions(on_wait)
            raise
        turn.queue_position = 0

    def release(self, user_id: int, on_wait: Callable[[LiveTurn], None] | None = None, *, group: str = "") -> None:
        """Free a slot of ``user_id`` (and of ``group``) and start the first waiting turns that
        now fit."""
        self.running = max(0, self.running - 1)
        if group:
            g = self.by_group.get(group, 0) - 1
            if g > 0:
                self.by_group[group] = g
            else:
                self.by_group.pop(group, None)
        left = self.by_user.get(user_id, 0) - 1
        if left > 0:
            self.by_user[user_id] = left
        else:
            self.by_user.pop(user_id, None)
        granted = False
        for entry in list(self.waiting):
            turn, fut = entry
            if fut.done():
                self.waiting.remove(entry)
                continue
            if self._fits(*self._key(turn)):
                self.waiting.remove(entry)
                self._take(*self._key(turn)[:2])
                fut.set_result(None)
                granted = True
            if self.running >= self.max_running:
                break
        if granted and on_wait is not None:
            self._positions(on_wait)

    def _positions(self, on_wait: Callable[[LiveTurn], None]) -> None:
        for i, (turn, _) in enumerate(self.waiting, 1):
            if turn.queue_position != i:
                turn.queue_position = i
                on_wait(turn)


class TurnRegistry:
    """Strong references to this process's running turns, by message and by conversation."""

    def __init__(self) -> None:
        self.turns: dict[uuid.UUID, LiveTurn] = {}
        self.watchers: dict[int, set[Subscriber]] = {}
        self.by_user: dict[int, set[Subscriber]] = {}
        self.admission = Admission(
            max_running=settings.PLAYGROUND_MAX_TURNS,
            max_per_user=settings.PLAYGROUND_MAX_TURNS_PER_USER,
            max_queue=settings.PLAYGROUND_MAX_QUEUED_TURNS,
        )

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

    def live_ids(self) -> frozenset[uuid.UUID]:
        return frozenset(self.turns)

    def lane_running(self, conversation_id: int, lane_id: int | None) -> bool:
        """Whether a turn of this conversation lane runs in this process (one per lane)."""
        return any(
            t.spec.conversation_id == conversation_id and (lane_id is None or t.spec.lane_id in (None, lane_id))
            for t in self.turns.values()
        )

    def turn_id_running(self, turn_id: uuid.UUID) -> bool:
        return any(t.spec.turn_id == turn_id for t in self.turns.values())

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
        turn = LiveTurn(spec=spec, snapshot_meta=snapshot_meta or {}, k=frames.key(spec.message_id))
        turn._text.set(spec.prefill)
        for sub in self.watchers.get(spec.conversation_id, ()):
            if announce:
                sub.push(announce)
            # The skeleton shows the prefill as open text: its closed blocks come in the first flush.
            sub.cursors[(spec.message_id, "text")] = turn._text.length
            sub.cursors[(spec.message_id, "reasoning")] = 0
            for kind in ("text", "reasoning"):
                sub.cursors[(spec.message_id, kind + "_b")] = 0
                sub.cursors[(spec.message_id, kind + "_u")] = 0
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
            # interrupt the final write.
            return True
        turn.stop_requested = True
        turn.task.cancel()
        return True

    def stop_user_endpoints(self, user_id: int, endpoint_ids: set[str] | frozenset[str]) -> int:
        """Stop ``user_id``'s running turns on ``endpoint_ids`` (ids as strings: a team removed
        the user). Returns how many were asked to stop."""
        n = 0
        for t in list(self.turns.values()):
            target = getattr(t.spec.plan, "target", None)
            if t.spec.user_id == user_id and target is not None and str(target.endpoint_id) in endpoint_ids:
                n += bool(self.stop(t.message_id))
        return n

    def snapshot_reply(self, message_id: uuid.UUID) -> dict[str, Any]:
        """What another process gets when it asks for a turn's snapshot (chat.cluster)."""
        turn = self.turns.get(message_id)
        if turn is None:
            return {"type": "turn.gone", "mid": str(message_id)}
        return {
            "type": "turn.snapshot", "mid": str(message_id), "text": turn.text,
            "reasoning": turn.reasoning, "html": frames.snapshot(turn.view()),
            "text_blocks": len(turn.blocks["text"].html), "reasoning_blocks": len(turn.blocks["reasoning"].html),
        }

    async def drain(self, timeout: float = 30.0) -> None:  # noqa: ASYNC109 - a bound, not a cancel scope
        """Wait for every running turn to end (tests, graceful shutdown)."""
        tasks = [t.task for t in list(self.turns.values()) if t.task]
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)

    async def cancel_all(self, *, shutdown: bool = True) -> None:
        """Stop every running turn and wait for them to save. With ``shutdown`` (the server is
        going down) they end ``interrupted`` with their text kept, ready to retry."""
        for turn in list(self.turns.values()):
            if shutdown:
                turn.shutdown = True
            if turn.task is not None and not turn.task.done() and not turn._done:
                turn.task.cancel()
        await self.drain()

    def _forget(self, turn: LiveTurn) -> None:
        self.turns.pop(turn.message_id, None)


registry = TurnRegistry()
cluster.bind(registry)


def _default_stream(config: EndpointConfig, request: ChatRequest) -> AsyncIterator[Any]:
    adapter = get_adapter(config.api_style)
    return adapter.stream(get_client(), config, request)


def structured_output_check(response_format: dict[str, Any] | None, text: str) -> dict[str, Any] | None:
    """Check an answer against the requested structured output (``json_object`` /
    ``json_schema``): ``{"kind", "valid": bool, "errors": [str, …]}``, or None when none was
    requested. Uses jsonschema with the schema's own draft, and a linear-time regex engine for
    ``pattern``/``patternProperties`` (chat.textsafety), so a user's pattern cannot freeze the
    server. CPU-bound: call it off the event loop."""
    if not response_format or response_format.get("type") not in ("json_object", "json_schema"):
        return None
    from chat.textsafety import schema_errors

    kind = response_format["type"]
    ok, value, problem = safe_json_loads(text)
    if not ok:
        return {"kind": kind, "valid": False, "errors": [f"Not valid JSON: {problem}"]}
    if kind == "json_object":
        good = isinstance(value, dict)
        return {"kind": kind, "valid": good, "errors": [] if good else ["The answer is JSON but not an object."]}
    schema = (response_format.get("json_schema") or {}).get("schema") or {}
    errors = schema_errors(schema, value)
    return {"kind": kind, "valid": not errors, "errors": errors}


def _setting(name: str, default: float) -> float:
    return float(getattr(settings, name, default))


class TurnRunner:
    """Runs one :class:`LiveTurn`: admission, stream, publish, persist."""

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
        self.clock = clock
        self.tc = TurnClock(clock=clock)
        self.registry = registry
        self.frame_interval_s = (
            settings.PLAYGROUND_FRAME_INTERVAL_S if frame_interval_s is None else frame_interval_s
        )
        self.partial_save_s = settings.PLAYGROUND_PARTIAL_SAVE_S if partial_save_s is None else partial_save_s
        self.max_answer_chars = int(_setting("PLAYGROUND_MAX_ANSWER_CHARS", 2_000_000))
        self.max_turn_s = _setting("PLAYGROUND_MAX_TURN_S", 1800.0)
        self.idle_timeout_s = _setting("PLAYGROUND_IDLE_TIMEOUT_S", 600.0)
        self.raw_events: list[dict[str, str]] = []
        self._published = (turn._text.length, turn._reasoning.length, 0, 0)
        self._raw_bytes = 0
        self._last_flush = -1e18
        self._flush_handle: asyncio.TimerHandle | None = None
        self._save_handle: asyncio.TimerHandle | None = None
        self._save_future: asyncio.Future[Any] | None = None
        self._saved = (turn._text.length, turn._reasoning.length)
        self._commit: asyncio.Future[Any] | None = None
        self._admitted = False
        secrets = secret_variants(_secret_values(turn.spec))
        self._secrets = secrets
        self._text_filter = SecretFilter(secrets)
        self._reasoning_filter = SecretFilter(secrets)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._carry: dict[str, str] = {}
        # Token timings: [ms since request sent, token events] per flushed frame, in memory only
        # (stored once with the final row, chat.metrics.token_timings).
        self.timings: list[list[float]] = []
        self._handlers: dict[type, Callable[[Any], None]] = {
            TextDelta: self._on_text, ReasoningDelta: self._on_reasoning, RawEvent: self._on_raw,
            Usage: self._on_usage, Finish: self._on_finish, ToolCallDelta: self._on_tool_call,
            ResponseStarted: self._on_started, ReasoningSignature: self._on_signature,
            LogprobsDelta: self._on_logprobs, ModelOutputError: self._on_model_output_error,
            AnswerWasReasoning: self._on_answer_was_reasoning, FinalText: self._on_final_text,
            StreamWarning: self._on_warning, ServerToolUse: self._on_server_tool,
            RedactedThinking: self._on_redacted_thinking,
        }

    # -- publishing -------------------------------------------------------------------
    def _dirty(self) -> None:
        """New text: flush at once after a quiet interval, else once the interval is over."""
        if self._flush_handle is not None or self.turn._done:
            return
        wait = self._last_flush + self.frame_interval_s - self.clock()
        if wait <= 0:
            self._flush()
        else:
            assert self._loop is not None
            self._flush_handle = self._loop.call_later(wait, self._timed_flush)

    def _timed_flush(self) -> None:
        self._flush_handle = None
        self._flush()

    def _flush(self, tail: str = "") -> None:
        """Send each subscriber what it lacks: raw text since its cursor (deltas), then the
        blocks that closed since (rendered once, here), then ``tail`` (the final frame)."""
        turn = self.turn
        self._last_flush = self.clock()
        self._timing_point()
        text, reasoning = turn.text, turn.reasoning
        blocks = turn.blocks
        if turn._done:
            blocks["text"].finish(text)
            blocks["reasoning"].finish(reasoning)
        else:
            blocks["text"].advance(text)
            blocks["reasoning"].advance(reasoning)
        if cluster.enabled:
            self._publish(text, reasoning)
        built: dict[tuple[str, int], str] = {}
        mid, k = turn.message_id, turn.k
        for sub in list(turn.subscribers):
            parts = []
            for kind, value in (("reasoning", reasoning), ("text", text)):
                ckey = (mid, kind)
                start = sub.cursors.get(ckey, 0)
                if start < len(value):
                    frame = built.get((kind, start))
                    if frame is None:
                        frame = built[(kind, start)] = frames.delta(k, kind, start, value[start:], short=not tail)
                    parts.append(frame)
                    sub.cursors[ckey] = len(value)
                done = blocks[kind]
                bkey, ukey = (mid, kind + "_b"), (mid, kind + "_u")
                sent = sub.cursors.get(bkey, 0)
                if sent < len(done.html) or sub.cursors.get(ukey, 0) < done.upto:
                    bkind = kind + "_b"
                    frame = built.get((bkind, sent))
                    if frame is None:
                        frame = built[(bkind, sent)] = frames.blocks(k, kind, done.html[sent:], done.upto, short=not tail)
                    parts.append(frame)
                    sub.cursors[bkey] = len(done.html)
                    sub.cursors[ukey] = done.upto
            if tail:
                parts.append(tail)
            if parts:
                self._send(sub, parts[0] if len(parts) == 1 else "".join(parts))

    def _timing_point(self) -> None:
        """One token-timing point per flushed frame (when tokens arrived since the last one)."""
        tc = self.tc
        if tc.request_sent is None or tc.last_token is None or tc.token_events == 0:
            return
        if self.timings and self.timings[-1][1] == tc.token_events:
            return
        if len(self.timings) < 4 * 200:  # bounded; thinned when stored
            self.timings.append([round((tc.last_token - tc.request_sent) * 1000.0, 1), tc.token_events])

    def _publish(self, text: str, reasoning: str) -> None:
        """Other processes get the same coalesced delta, once per flush, absolute offsets, with
        the blocks that closed since the last publish."""
        turn = self.turn
        ps, pr, pbt, pbr = self._published
        bt, br = turn.blocks["text"], turn.blocks["reasoning"]
        if ps < len(text) or pr < len(reasoning) or pbt < len(bt.html) or pbr < len(br.html):
            cluster.publish(conversation_group(turn.spec.conversation_id), {
                "type": "turn.delta", "mid": str(turn.message_id),
                "text_start": ps, "text": text[ps:],
                "reasoning_start": pr, "reasoning": reasoning[pr:],
                "text_blocks_start": pbt, "text_blocks": bt.html[pbt:], "text_upto": bt.upto,
                "reasoning_blocks_start": pbr, "reasoning_blocks": br.html[pbr:], "reasoning_upto": br.upto,
            })
            self._published = (len(text), len(reasoning), len(bt.html), len(br.html))

    def _send(self, sub: Subscriber, frame: str) -> None:
        try:
            sub.push(frame)
            self.turn.frames_sent += 1
            self.turn.chars_sent += len(frame)
        except Exception:  # a closed socket must not end the turn
            self.turn.subscribers.discard(sub)

    def _broadcast(self, frame: str) -> None:
        for sub in list(self.turn.subscribers):
            self._send(sub, frame)

    def _queued(self, turn: LiveTurn) -> None:
        if turn is self.turn:
            self._broadcast(frames.queue_position(turn.message_id, turn.queue_position))
        else:  # another waiting turn's position changed: its own runner's subscribers
            for sub in list(turn.subscribers):
                sub.push(frames.queue_position(turn.message_id, turn.queue_position))

    # -- persistence ------------------------------------------------------------------
    def _schedule_save(self) -> None:
        assert self._loop is not None
        self._save_handle = self._loop.call_later(self.partial_save_s, self._save_tick)

    def _save_tick(self) -> None:
        """Every ``partial_save_s``: queue a save of the text so far (or only the heartbeat when
        nothing new arrived) on the writer thread; never awaited by the token path, and at most
        one in flight per turn."""
        turn = self.turn
        if turn._done:
            return
        if self._save_future is None or self._save_future.done():
            now = (turn._text.length, turn._reasoning.length)
            turn.partial_saves += 1
            if now != self._saved:
                self._saved = now
                self._save_future = db.write_nowait(
                    services.message_save_partial, message_id=turn.message_id, content=turn.text,
                    reasoning=turn.reasoning,
                )
            else:
                self._save_future = db.write_nowait(services.message_heartbeat, message_id=turn.message_id)
            self._save_future.add_done_callback(_log_failure)
        self._schedule_save()

    def _record_raw(self, ev: RawEvent) -> None:
        if len(self.raw_events) >= MAX_RAW_EVENTS or self._raw_bytes >= MAX_RAW_BYTES:
            return
        self._raw_bytes += len(ev.data)
        self.raw_events.append({"event": ev.event, "data": ev.data})

    # -- events -----------------------------------------------------------------------
    def _valid(self, kind: str, text: str) -> str:
        """Valid Unicode across events: a high surrogate at the end of a piece waits for the
        low half that may start the next one (a lone one becomes U+FFFD at the end)."""
        carry = self._carry.get(kind)
        if carry:
            text = carry + text
        if "\ud800" <= text[-1] <= "\udbff":
            self._carry[kind] = text[-1]
            text = text[:-1]
        elif carry:
            self._carry[kind] = ""
        return valid_text(text)

    def _on_text(self, ev: TextDelta) -> None:
        if not ev.text:
            return
        self.tc.token(answer=True)
        piece = self._text_filter.feed(self._valid("text", ev.text))
        if piece:
            self.turn._text.append(piece)
            self._dirty()

    def _on_reasoning(self, ev: ReasoningDelta) -> None:
        if not ev.text:
            return
        self.tc.token(answer=False)
        piece = self._reasoning_filter.feed(self._valid("reasoning", ev.text))
        if piece:
            self.turn._reasoning.append(piece)
            self._dirty()

    def _on_raw(self, ev: RawEvent) -> None:
        self.tc.byte()
        self._record_raw(ev)

    def _on_usage(self, ev: Usage) -> None:
        self.tc.byte()
        self.turn.usage = ev

    def _on_finish(self, ev: Finish) -> None:
        self.tc.byte()
        self.turn.finish_reason = ev.reason or ""

    def _on_tool_call(self, ev: ToolCallDelta) -> None:
        self.tc.token(answer=True)
        call = self.turn.tool_calls.setdefault(ev.index, {"id": "", "name": "", "arguments": ""})
        call["id"] = ev.id or call["id"]
        call["name"] = valid_text(ev.name or "") or call["name"]
        call["arguments"] += scrub(valid_text(ev.arguments), self._secrets)

    def _on_started(self, ev: ResponseStarted) -> None:
        self.tc.byte()
        self.turn.metrics["request_id"] = ev.request_id

    def _on_signature(self, ev: ReasoningSignature) -> None:
        self.turn.reasoning_signature += ev.signature

    def _on_logprobs(self, ev: LogprobsDelta) -> None:
        turn = self.turn
        if len(turn.logprobs) < MAX_LOGPROB_TOKENS:
            turn.logprobs.extend(
                {"token": valid_text(t.token), "logprob": t.logprob, "top": [[valid_text(a), b] for a, b in t.top]}
                for t in ev.tokens
            )

    def _on_model_output_error(self, ev: ModelOutputError) -> None:
        self.turn.metrics["model_output_error"] = {
            "message": valid_text(ev.message), "raw_output": scrub(valid_text(ev.raw_output), self._secrets),
        }

    def _restream(self) -> None:
        """The streamed text changed shape (text moved to reasoning, or replaced by the
        upstream's final copy): blocks are computed again and every watcher gets the whole
        message (no delta can express a text that shrank)."""
        turn = self.turn
        for kind, done in turn.blocks.items():
            done.reset()
            done.advance(turn.text if kind == "text" else turn.reasoning)
        for sub in list(turn.subscribers):
            self._send(sub, turn.subscribe(sub))
        if cluster.enabled:
            reply = self.registry.snapshot_reply(turn.message_id)
            cluster.publish(conversation_group(turn.spec.conversation_id), reply)
            self._published = (turn._text.length, turn._reasoning.length,
                               len(turn.blocks["text"].html), len(turn.blocks["reasoning"].html))

    def _on_answer_was_reasoning(self, ev: AnswerWasReasoning) -> None:
        """A closing think tag with no opening one: what this stream added to the answer was
        reasoning (the prefill or Continue's old text stays the answer)."""
        turn = self.turn
        keep = len(turn.spec.prefill)
        text = turn.text + self._text_filter.flush()
        moved = text[keep:]
        turn.text = text[:keep]
        turn.reasoning = turn.reasoning + moved
        self.tc.first_answer_token = None
        self.tc.reasoning_events += self.tc.answer_events
        self.tc.answer_events = 0
        self._restream()

    def _on_final_text(self, ev: FinalText) -> None:
        """The upstream's final copy of the answer differs from what streamed: it wins."""
        turn = self.turn
        self._text_filter.flush()
        final = self._text_filter.feed(valid_text(ev.text)) + self._text_filter.flush()
        turn.text = turn.spec.prefill + final
        self._note_warning("final_text_differs", "The streamed text differed from the endpoint's final text; "
                           "the final text is shown.")
        self._restream()

    def _note_warning(self, code: str, message: str, excerpt: str = "") -> None:
        if len(self.turn.warnings) < 20:
            self.turn.warnings.append({"code": code, "message": valid_text(message),
                                       "raw_excerpt": scrub(valid_text(excerpt), self._secrets)[:300]})

    def _on_warning(self, ev: StreamWarning) -> None:
        self._note_warning(getattr(ev, "code", "") or "stream_warning", ev.message, ev.raw_excerpt)

    def _on_server_tool(self, ev: ServerToolUse) -> None:
        self.tc.byte()
        if len(self.turn.server_tools) < 100:
            self.turn.server_tools.append({
                "server": True, "type": ev.block_type, "name": valid_text(ev.name), "id": ev.id,
                "input": scrub(valid_text(ev.input_json), self._secrets)[:20_000],
                "result": scrub(valid_text(ev.result_summary), self._secrets)[:2_000],
            })

    def _on_redacted_thinking(self, ev: RedactedThinking) -> None:
        self.tc.byte()
        self.turn.replay_blocks.append({"type": "redacted_thinking", "data": ev.data})

    def _over_limit(self) -> bool:
        return self.turn._text.length + self.turn._reasoning.length > self.max_answer_chars

    # -- commit -----------------------------------------------------------------------
    def _on_commit(self, fut: asyncio.Future[Any]) -> None:
        """The turn's rows could not be written (a repeated send, an attachment gone): the turn
        ends at once, writes nothing more, and the page is told."""
        if fut.cancelled():
            return
        exc = fut.exception()
        if exc is None:
            return
        turn = self.turn
        if isinstance(exc, services.TurnCommitRefused):
            turn.refused = str(exc)
        else:
            log.error("writing the rows of turn %s failed: %s", turn.message_id, type(exc).__name__)
            turn.refused = "The message could not be saved; nothing was sent. Try again."
        if turn.task is not None and not turn._done:
            turn.task.cancel()

    # -- the turn ---------------------------------------------------------------------
    async def run(self) -> None:
        turn = self.turn
        spec = turn.spec
        self._loop = asyncio.get_running_loop()
        status = "complete"
        try:
            if spec.plan is not None:
                self._commit = db.write_nowait(services.turn_commit, plan=spec.plan)
                self._commit.add_done_callback(self._on_commit)
            self._schedule_save()  # the heartbeat runs while the turn waits for a slot, too
            await self.registry.admission.acquire(turn, self._queued)
            self._admitted = True
            # Make the stream (and the loop's HTTP client) before the clock starts: TTFT is
            # measured from the request, not from building a client.
            events = self.stream_fn(spec.config, spec.request)
            self.tc.sent()
            handlers = self._handlers
            loop = self._loop
            async with asyncio.timeout(self.max_turn_s):
                async with asyncio.timeout_at(loop.time() + self.idle_timeout_s) as idle:
                    rearmed = loop.time()
                    async for ev in events:
                        handler = handlers.get(type(ev))
                        if handler is not None:
                            handler(ev)
                        now = loop.time()
                        if now - rearmed > 1.0:
                            idle.reschedule(now + self.idle_timeout_s)
                            rearmed = now
                        if self._over_limit():
                            raise ProviderError(
                                f"The answer reached the limit of {self.max_answer_chars:,} characters "
                                "(PLAYGROUND_MAX_ANSWER_CHARS); the text so far is kept.",
                                code="limit_exceeded",
                            )
        except asyncio.CancelledError:
            if turn.refused:
                status = "refused"
            elif turn.shutdown or not turn.stop_requested:
                status = "interrupted"
                turn.error = {"message": "The server shut down while this answer was streaming; the text so far is kept.",
                              "code": "interrupted"}
            else:
                status = "stopped"
        except TimeoutError:
            status = "error"
            turn.error = self._timeout_error()
        except ProviderError as exc:
            status = "error"
            turn.error = exc.as_dict()
        except Exception as exc:  # never a traceback to the user, always a stored status
            log.error("turn %s failed: %s", spec.message_id, type(exc).__name__, exc_info=True)
            status = "error"
            turn.error = {
                "message": scrub(f"Internal error: {type(exc).__name__}", spec.config.secrets()),
                "code": "internal_error",
            }
        finish = asyncio.ensure_future(self._finish(status))
        try:
            await asyncio.shield(finish)
        except asyncio.CancelledError:
            await finish  # a cancel during finishing (shutdown) must not cut the final write

    def _timeout_error(self) -> dict[str, Any]:
        elapsed = self.tc.now() - (self.tc.request_sent or self.tc.now())
        if elapsed >= self.max_turn_s - 1:
            return {"message": f"The answer took longer than {self.max_turn_s:g} s (PLAYGROUND_MAX_TURN_S); "
                               "the text so far is kept.", "code": "turn_timeout"}
        return {"message": f"The endpoint sent nothing for {self.idle_timeout_s:g} s (PLAYGROUND_IDLE_TIMEOUT_S); "
                           "the text so far is kept.", "code": "idle_timeout"}

    async def _finish(self, status: str) -> None:
        """End the turn whatever happens: a terminal row, a final frame, the slot freed."""
        turn = self.turn
        spec = turn.spec
        turn._done = True  # from here on Stop is a no-op (see TurnRegistry.stop)
        for handle in (self._flush_handle, self._save_handle):
            if handle is not None:
                handle.cancel()
        try:
            if status == "refused":
                self._end_refused()
                return
            status = await self._finish_row(status)
            await self._send_final(status)
        except Exception:
            log.error("finishing turn %s failed", turn.message_id, exc_info=True)
        finally:
            self.registry._forget(turn)
            if self._admitted:
                self.registry.admission.release(spec.user_id, self._queued, group=spec.group)
            try:
                notice = frames.turn_finished_elsewhere(spec.conversation_id, spec.conversation_title, status)
                self.registry.tell_user_elsewhere(spec.user_id, spec.conversation_id, notice)
                cluster.publish(user_group(spec.user_id), {
                    "type": "user.notice", "conversation_id": spec.conversation_id, "html": notice,
                })
            except Exception:
                log.error("notifying the end of turn %s failed", turn.message_id, exc_info=True)

    def _end_refused(self) -> None:
        turn = self.turn
        frame = frames.turn_refused(turn.message_id, turn.refused)
        self._broadcast(frame)
        cluster.publish(conversation_group(turn.spec.conversation_id), {
            "type": "turn.final", "mid": str(turn.message_id), "html": frame,
        })

    async def _finish_row(self, status: str) -> str:
        """Deliver the last text, compute metrics and checks, write the final row. Returns the
        status stored (``error`` when the write itself failed)."""
        turn = self.turn
        spec = turn.spec
        for kind, filt, text in (("text", self._text_filter, turn._text),
                                 ("reasoning", self._reasoning_filter, turn._reasoning)):
            rest = filt.feed(valid_text(self._carry.pop(kind, ""))) + filt.flush()
            if rest:
                text.append(rest)
        turn.text = valid_text(turn.text)
        turn.reasoning = valid_text(turn.reasoning)
        try:
            turn._done = False  # the last text goes out before the final write and frame
            self._flush()
        except Exception:
            log.error("last flush of turn %s failed", turn.message_id, exc_info=True)
        finally:
            turn._done = True
        try:
            turn.metrics = {
                **turn.metrics,
                **compute_metrics(
                    self.tc, turn.usage,
                    prompt_price_per_mtok=spec.prompt_price_per_mtok,
                    completion_price_per_mtok=spec.completion_price_per_mtok,
                ),
            }
            if status == "complete" and spec.request.response_format and not turn.tool_calls:
                check = await asyncio.to_thread(structured_output_check, spec.request.response_format, turn.text)
                if check is not None:
                    turn.metrics["schema_check"] = check
            if turn.tool_calls:  # cut off by max_tokens? flagged, never offered a result form
                calls = list(turn.tool_calls.values())
                flags = await asyncio.to_thread(lambda: [tool_arguments_complete(c["arguments"]) for c in calls])
                for call, complete in zip(calls, flags, strict=True):
                    if not complete:
                        call["incomplete"] = True
            if turn.warnings:
                turn.metrics["warnings"] = turn.warnings
            self._timing_point()
            timings = token_timings(self.timings, self.tc.token_events,
                                    turn.usage.completion_tokens if turn.usage else None)
            if timings:
                turn.metrics["timings"] = timings
        except Exception as exc:
            log.error("metrics of turn %s failed: %s", turn.message_id, type(exc).__name__)
        inspect = self._inspect()
        tool_calls = turn.all_tool_calls()
        # turn.status stays "streaming" until the final frame goes out (_send_final): a page
        # that loads or resyncs meanwhile still follows the turn and gets its last blocks.
        try:
            await _retry_locked(
                services.message_complete,
                message_id=turn.message_id, status=status, content=turn.text,
                reasoning=turn.reasoning, finish_reason=turn.finish_reason,
                usage=finite(usage_dict(turn.usage)), usage_raw=finite(turn.usage.raw if turn.usage else {}),
                metrics=finite(turn.metrics), error=finite(turn.error), inspect=finite(inspect),
                tool_calls=finite(tool_calls), reasoning_signature=turn.reasoning_signature,
                logprobs=finite(turn.logprobs), replay_blocks=turn.replay_blocks,
            )
        except Exception as exc:
            log.error("final write of turn %s failed: %s", turn.message_id, type(exc).__name__)
            status = "error"
            turn.error = {
                "message": f"The answer could not be saved ({type(exc).__name__}); the text shown is what arrived.",
                "code": "save_failed",
            }
            try:
                await db.write(services.message_fail, message_id=turn.message_id, error=turn.error,
                               content=turn.text, reasoning=turn.reasoning)
            except Exception as exc2:
                log.error("saving the failure of turn %s failed: %s", turn.message_id, type(exc2).__name__)
        return status

    async def _send_final(self, status: str) -> None:
        """The last blocks and the final frame (head and foot; rendered off the loop), in one
        message per subscriber; the whole message for other processes."""
        turn = self.turn
        try:
            text, reasoning = turn.text, turn.reasoning
            done = await asyncio.to_thread(
                lambda: {"text": turn.blocks["text"].finished(text), "reasoning": turn.blocks["reasoning"].finished(reasoning)}
            )
            turn.blocks = done
            turn.status = status
            view = turn.view()
            to_cluster = cluster.enabled
            frame, full = await asyncio.to_thread(
                lambda: (frames.final(view), frames.final_full(view) if to_cluster else "")
            )
        except Exception:
            log.error("rendering the final frame of turn %s failed", turn.message_id, exc_info=True)
            turn.status = status
            view = turn.view()
            view.live_blocks = None
            frame = full = frames.final_fallback(view)
            turn.blocks = {"text": StreamedBlocks(), "reasoning": StreamedBlocks()}
        self._flush(tail=frame)
        if full:
            cluster.publish(conversation_group(turn.spec.conversation_id), {
                "type": "turn.final", "mid": str(turn.message_id), "html": full,
            })

    def _inspect(self) -> dict[str, Any]:
        turn = self.turn
        try:
            request = self._request_for_inspect()
        except Exception:
            request = {}
        return {
            "request": request,
            "events": self.raw_events,
            "events_truncated": len(self.raw_events) >= MAX_RAW_EVENTS or self._raw_bytes >= MAX_RAW_BYTES,
            "frames_sent": turn.frames_sent,
            "partial_saves": turn.partial_saves,
        }

    def _request_for_inspect(self) -> dict[str, Any]:
        spec = self.turn.spec
        adapter = get_adapter(spec.config.api_style)
        url, headers, body = adapter.build_request(spec.config, spec.request)
        secret_names = {"authorization", "x-api-key", *(h.lower() for h in spec.config.extra_headers)}
        if _builtin_simulator(spec):
            secret_names.discard(SIMULATOR_OPTIONS)
        safe_headers = {k: ("[REDACTED]" if k.lower() in secret_names else v) for k, v in headers.items()}
        text = json.dumps({"url": url, "headers": safe_headers, "body": _truncate_media(body)})
        return json.loads(scrub(text, self._secrets))


SIMULATOR_OPTIONS = "x-simulator-options"

#: Back-off (seconds) between attempts of a final write that met a locked SQLite database.
LOCKED_RETRY_S = (0.05, 0.1, 0.2, 0.4, 0.8)


async def _retry_locked(fn: Any, /, **kwargs: Any) -> Any:
    """``db.write(fn, **kwargs)``, tried again while SQLite says the database (or, with a
    shared-cache database, a table) is locked: that error comes at once, not after the busy
    timeout, when many writers and readers share one file on a loaded machine. Only for writes
    that are one guarded UPDATE (safe to repeat: ``services.message_complete``). Other errors,
    and a lock that outlasts :data:`LOCKED_RETRY_S`, are raised."""
    from django.db import OperationalError

    for wait in (*LOCKED_RETRY_S, None):
        try:
            return await db.write(fn, **kwargs)
        except OperationalError as exc:
            if wait is None or "locked" not in str(exc).lower():
                raise
            await asyncio.sleep(wait)
    return None


def _builtin_simulator(spec: TurnSpec) -> bool:
    """Whether the turn goes to the built-in simulator (its options header is not a secret)."""
    return bool(getattr(getattr(getattr(spec, "plan", None), "target", None), "is_simulator", False))


def _secret_values(spec: TurnSpec) -> list[str]:
    """The values scrubbed from everything a turn stores or shows: the key and the header
    values, except the built-in simulator's ``X-Simulator-Options`` (its knobs, such as the
    ``take`` of a Regenerate: shown in Inspect, and never hunted for in the answer)."""
    config = spec.config
    if _builtin_simulator(spec):
        config = dataclasses.replace(config, extra_headers={
            k: v for k, v in config.extra_headers.items() if k.lower() != SIMULATOR_OPTIONS})
    return config.secrets()


def _truncate_media(body: Any, limit: int = 256) -> Any:
    """The request body for Inspect with long strings (base64 media) cut to ``limit`` chars."""
    if isinstance(body, dict):
        return {k: _truncate_media(v, limit) for k, v in body.items()}
    if isinstance(body, list):
        return [_truncate_media(v, limit) for v in body]
    if isinstance(body, Base64Media):
        return (body.prefix + base64.b64encode(body.data[:limit]).decode("ascii"))[:limit] + (
            f"… ({body.encoded_length():,} characters)")
    if isinstance(body, str) and len(body) > 4096 and (body.startswith("data:") or " " not in body[:200]):
        return body[:limit] + f"… ({len(body):,} characters)"
    return body


def _log_failure(fut: asyncio.Future[Any]) -> None:
    if not fut.cancelled() and fut.exception() is not None:
        log.warning("partial save failed: %s", type(fut.exception()).__name__)
