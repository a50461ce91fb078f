"""Turns watched and stopped across daphne processes (the scaled set-up: Redis channel layer).

With the in-memory channel layer (one process) everything here is off and costs nothing.
With channels-redis each process owns one channel (:attr:`Cluster.channel_name`, stored on the
message rows it streams as ``owner_channel``) and listens on it for snapshot requests and
Stop. A running turn publishes to its conversation's group ``conv.<id>`` only what its local
subscribers get anyway, coalesced: ``turn.started`` (the skeleton HTML), ``turn.delta`` (text
and reasoning since the last publish, with absolute offsets), ``turn.final`` (the final HTML).
Never one channel-layer message per token.

A consumer in another process (:class:`RemoteTurns`) joins the group first, asks the owner
for a snapshot, buffers group frames until it arrives, drops or trims what it already has, and
asks again when it sees a gap (channels-redis drops messages for full channels silently).

The registry of running turns is handed in with :meth:`Cluster.bind` (by ``chat.turns``), so this
module never imports the runner: stop and snapshot requests go to whatever was bound.

May import: channels, chat.frames, chat.process, the standard library.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from channels.layers import InMemoryChannelLayer, get_channel_layer

from chat import frames, process

log = logging.getLogger(__name__)


def conversation_group(conversation_id: int) -> str:
    return f"conv.{conversation_id}"


def user_group(user_id: int) -> str:
    return f"user.{user_id}"


class Cluster:
    """This process's presence in the channel layer (one per process)."""

    def __init__(self) -> None:
        self.channel_name: str = ""
        self._listener: asyncio.Task[None] | None = None
        self._outbox: asyncio.Queue[tuple[str, dict[str, Any]]] | None = None
        self._sender: asyncio.Task[None] | None = None
        self._lock: asyncio.Lock | None = None
        self.sent = 0
        self._registry: Any = None

    def bind(self, registry: Any) -> None:
        """The registry answering Stop and snapshot requests: ``stop(mid)``,
        ``snapshot_reply(mid) -> dict``."""
        self._registry = registry

    @property
    def layer(self) -> Any:
        return get_channel_layer()

    @property
    def enabled(self) -> bool:
        layer = self.layer
        return layer is not None and not isinstance(layer, InMemoryChannelLayer)

    async def start(self) -> None:
        """Create the process channel and its listener (idempotent, per event loop)."""
        if not self.enabled or (self._listener is not None and not self._listener.done()):
            return
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._listener is not None and not self._listener.done():
                return
            # The default prefix on purpose: channels-redis reads one process-local list per
            # prefix under one lock, so a second prefix would starve the consumers' channels.
            self.channel_name = await self.layer.new_channel()
            process.identity.channel_name = self.channel_name
            self._outbox = asyncio.Queue()
            loop = asyncio.get_running_loop()
            self._listener = loop.create_task(self._listen(), name="cluster-listener")
            self._sender = loop.create_task(self._send_loop(), name="cluster-sender")

    def publish(self, group: str, message: dict[str, Any]) -> None:
        """Queue a group message (sync, ordered; sent by one task so frames keep their order)."""
        if self._outbox is None or not self.enabled:
            return
        self._outbox.put_nowait((group, {**message, "origin": process.PROCESS_ID}))

    async def _send_loop(self) -> None:
        assert self._outbox is not None
        while True:
            group, message = await self._outbox.get()
            try:
                await self.layer.group_send(group, message)
                self.sent += 1
            except Exception:  # a lost frame is recovered by the receiver's gap check
                log.warning("group_send to %s failed", group, exc_info=True)

    async def _listen(self) -> None:
        while True:
            try:
                msg = await self.layer.receive(self.channel_name)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                # redis-py raises TimeoutError when a blocking pop outlives its socket timeout
                # on an idle channel: a normal wake-up, not a failure.
                if type(exc).__name__ != "TimeoutError":
                    log.warning("cluster receive failed", exc_info=True)
                    await asyncio.sleep(0.5)
                continue
            kind = msg.get("type")
            try:
                mid = uuid.UUID(str(msg.get("mid")))
            except ValueError:
                continue
            if self._registry is None:
                continue
            if kind == "turn.stop":
                self._registry.stop(mid)
            elif kind == "turn.snapshot.request":
                reply = self._registry.snapshot_reply(mid)
                try:
                    await self.layer.send(msg["reply"], reply)
                except Exception:
                    log.warning("snapshot reply failed", exc_info=True)

    async def send_to_owner(self, owner_channel: str, message: dict[str, Any]) -> None:
        if self.enabled and owner_channel:
            await self.layer.send(owner_channel, message)


cluster = Cluster()


def _cursors(text: int = 0, reasoning: int = 0, text_b: int = 0, reasoning_b: int = 0) -> dict[str, int]:
    return {"text": text, "reasoning": reasoning, "text_b": text_b, "reasoning_b": reasoning_b}


@dataclass
class _Remote:
    cursors: dict[str, int] = field(default_factory=_cursors)
    ready: bool = False
    buffer: list[dict[str, Any]] = field(default_factory=list)


class RemoteTurns:
    """A consumer's view of turns running in other processes: cursors, buffering, gap repair.

    ``push`` enqueues a frame for the browser; ``ask`` requests a snapshot from a turn's owner.
    """

    def __init__(self, push: Callable[[str], None], ask: Callable[[uuid.UUID], Any]) -> None:
        self.push = push
        self.ask = ask
        self.turns: dict[str, _Remote] = {}

    def _mine(self, event: dict[str, Any]) -> bool:
        return event.get("origin") == process.PROCESS_ID

    def want_snapshot(self, mid: str) -> None:
        state = self.turns.setdefault(mid, _Remote())
        state.ready = False
        self.ask(uuid.UUID(mid))

    def started(self, event: dict[str, Any]) -> None:
        if self._mine(event):
            return
        self.turns[event["mid"]] = _Remote(cursors=_cursors(event.get("prefill_len", 0)), ready=True)
        self.push(event["announce"])

    def delta(self, event: dict[str, Any]) -> None:
        if self._mine(event):
            return
        mid = event["mid"]
        state = self.turns.get(mid)
        if state is None:
            self.want_snapshot(mid)
            state = self.turns[mid]
        if not state.ready:
            state.buffer.append(event)
            return
        self._apply(mid, state, event)

    def _apply(self, mid: str, state: _Remote, event: dict[str, Any]) -> None:
        parts = []
        k = frames.key(mid)
        for kind in ("reasoning", "text"):
            text = event.get(kind) or ""
            start = event.get(f"{kind}_start", 0)
            cursor = state.cursors[kind]
            if start > cursor or event.get(f"{kind}_blocks_start", 0) > state.cursors[kind + "_b"]:
                # a lost frame: ask the owner again, buffer meanwhile
                state.buffer.append(event)
                self.want_snapshot(mid)
                return
            if text and start + len(text) > cursor:
                piece = text[cursor - start:]
                parts.append(frames.delta(k, kind, cursor, piece))
                state.cursors[kind] = cursor + len(piece)
            done = event.get(f"{kind}_blocks") or []
            have = state.cursors[kind + "_b"] - event.get(f"{kind}_blocks_start", 0)
            if len(done) > have:
                parts.append(frames.blocks(k, kind, done[have:], event.get(f"{kind}_upto", 0)))
                state.cursors[kind + "_b"] += len(done) - have
        if parts:
            self.push("".join(parts))

    def snapshot(self, event: dict[str, Any]) -> None:
        mid = event["mid"]
        state = self.turns.setdefault(mid, _Remote())
        state.cursors = _cursors(len(event["text"]), len(event["reasoning"]),
                                 event.get("text_blocks", 0), event.get("reasoning_blocks", 0))
        state.ready = True
        self.push(event["html"])
        buffered, state.buffer = state.buffer, []
        for ev in buffered:
            self._apply(mid, state, ev)

    def final(self, event: dict[str, Any]) -> None:
        if self._mine(event):
            return
        self.turns.pop(event["mid"], None)
        self.push(event["html"])
