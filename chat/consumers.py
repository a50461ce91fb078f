"""The conversation websocket: ``/ws/c/<conversation_id>/``.

Interface layer only: check the user may use the conversation, validate each frame with a
form, call one service, start or stop a turn in :mod:`chat.turns`. Frames go out through a
per-connection queue drained by a writer task (see :class:`chat.turns.Subscriber`).

Close codes: 4401 not logged in, 4404 no such conversation for this user (accepted first, then
closed: a refused handshake looks like 1006 to htmx's extension, which then reconnects forever).

Incoming frames (htmx ``ws-send`` JSON, ``action`` says what):

- ``send``: ``turn_id, content, role (user|assistant|system), mode (send|append), endpoint_id,
  model, system_prompt, temperature, …``. A user message runs a turn; an assistant message with
  mode ``send`` is a prefill the answer continues; ``append`` (or role system) only inserts.
- ``stop``, ``regenerate`` (alias ``retry``), ``continue``, ``select`` (follow a sibling's
  branch), ``delete``: ``message_id``.
- ``edit``: ``message_id, content``; a user message becomes a new branch and runs (``resend``
  true), any other message is changed in place.

May import: channels, Django, chat.selectors, chat.services, chat.forms, chat.turns, chat.frames.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from dataclasses import dataclass
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.http import Http404
from django.utils import timezone

from chat import frames, selectors, services
from chat.cluster import RemoteTurns, cluster, conversation_group, user_group
from chat.forms import (
    OPTION_FIELDS,
    PARAM_FIELDS,
    ChatSendForm,
    EditForm,
    TurnActionForm,
    request_fields,
)
from chat.models import Attachment, Conversation, Message, MessageStatus
from chat.providers.base import (
    ChatMessage,
    ChatRequest,
    ContentPart,
    EndpointConfig,
    ProviderError,
    ToolCall,
)
from chat.providers.http import acheck_base_url
from chat.turns import Subscriber, TurnSpec, registry

log = logging.getLogger(__name__)

STALE_AFTER_S = max(10.0, 5 * settings.PLAYGROUND_PARTIAL_SAVE_S)
SENT_ALREADY = "This message was sent already."


def resolve_base_url(base_url: str, scope: dict[str, Any]) -> str:
    """``sim://builtin/v1`` → the in-process simulator of the server this socket reached."""
    if not base_url.startswith("sim://"):
        return base_url
    host, port = (scope.get("server") or ("127.0.0.1", 8000))[:2]
    if not host or host in ("0.0.0.0", "::"):
        host = "127.0.0.1"
    if ":" in str(host) and not str(host).startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{port}/simulator/v1"


@dataclass
class PreparedTurn:
    """What the sync preparation hands to async code (plain values and rows, no lazy access)."""

    assistant: Message
    announce: str  # the frame that puts the new message(s) on the page
    base_url: str
    api_key: str
    extra_headers: dict[str, str]
    api_style: str
    stream_options: bool
    request: ChatRequest
    prices: tuple[float | None, float | None]
    title: str


class ConversationConsumer(AsyncWebsocketConsumer):
    """One browser tab watching and driving one conversation."""

    conversation_id: int
    user: Any
    subscriber: Subscriber | None = None

    async def connect(self) -> None:
        self.subscriber = None
        self.user = self.scope.get("user")
        await self.accept()
        if not self.user or not self.user.is_authenticated:
            await self.close(code=4401)
            return
        try:
            conversation = await database_sync_to_async(selectors.conversation_get_for_user)(
                user=self.user, conversation_id=self.scope["url_route"]["kwargs"]["conversation_id"]
            )
        except Http404:
            await self.close(code=4404)
            return
        self.conversation_id = conversation.pk
        self.queue: asyncio.Queue[str | None] = asyncio.Queue()
        self.writer = asyncio.get_running_loop().create_task(self._write())
        self.subscriber = Subscriber(self.queue.put_nowait, self.user.pk, conversation.pk)
        self.remote = RemoteTurns(self.queue.put_nowait, self._ask_snapshot)
        self.owner_channels: dict[Any, str] = {}
        if cluster.enabled:
            # Join the conversation's group before asking for snapshots (nothing is missed).
            await cluster.start()
            await self.channel_layer.group_add(conversation_group(conversation.pk), self.channel_name)
            await self.channel_layer.group_add(user_group(self.user.pk), self.channel_name)
        # Snapshot of every running turn of this conversation, registered in the same step.
        for frame in registry.watch(self.conversation_id, self.subscriber):
            self.queue.put_nowait(frame)
        if cluster.enabled:
            for mid, owner_channel in await database_sync_to_async(_remote_streaming)(self.conversation_id):
                if mid not in registry.turns:
                    self.owner_channels[mid] = owner_channel
                    self.remote.want_snapshot(str(mid))
        # Turns left "streaming" by a dead process become "interrupted" (lazily, here).
        changed = await database_sync_to_async(services.messages_mark_interrupted)(
            stale_after_s=STALE_AFTER_S, live_ids=registry.live_ids(), conversation_id=self.conversation_id
        )
        if changed:
            await self._resync()
        # Answers left streaming by a process that died turn "interrupted" once their heartbeat
        # is stale: look again then, so a page opened right after a restart needs no reload.
        self.stale_watch = asyncio.get_running_loop().create_task(self._watch_stale())

    async def _watch_stale(self) -> None:
        while self.subscriber is not None:
            age = await database_sync_to_async(_oldest_orphan_heartbeat_age)(self.conversation_id, registry.live_ids())
            if age is None:
                return
            await asyncio.sleep(max(0.0, STALE_AFTER_S - age) + 0.5)
            changed = await database_sync_to_async(services.messages_mark_interrupted)(
                stale_after_s=STALE_AFTER_S, live_ids=registry.live_ids(), conversation_id=self.conversation_id
            )
            if changed and self.subscriber is not None:
                await self._resync()

    async def _resync(self) -> None:
        """Send the whole thread again, then a fresh snapshot (and cursor) for every running turn
        of this conversation, so the page is current and the offsets stay exact. For a page that
        may have missed frames; an answer shown as streaming that ended meanwhile gets its row."""
        frame, streaming = await database_sync_to_async(self._thread_frame_and_streaming)()
        if self.subscriber is None:
            return
        self.queue.put_nowait(frame)
        for turn in list(registry.turns.values()):
            if turn.spec.conversation_id == self.conversation_id:
                self.queue.put_nowait(turn.subscribe(self.subscriber))
        for mid in streaming:
            if mid in registry.turns:
                continue
            if cluster.enabled:
                self.remote.want_snapshot(str(mid))  # the owner answers with a snapshot or "gone"
                continue
            html = await database_sync_to_async(_final_from_row)(mid, self.conversation_id)
            if html and self.subscriber is not None:
                self.queue.put_nowait(html)

    async def _write(self) -> None:
        while True:
            frame = await self.queue.get()
            if frame is None:
                return
            try:
                await self.send(text_data=frame)
            except Exception:  # socket gone; the turn goes on without us
                return

    async def disconnect(self, code: int) -> None:
        if self.subscriber is not None:
            registry.unwatch(self.conversation_id, self.subscriber)
            self.queue.put_nowait(None)
            self.subscriber = None
            if getattr(self, "stale_watch", None) is not None:
                self.stale_watch.cancel()
            if cluster.enabled:
                await self.channel_layer.group_discard(conversation_group(self.conversation_id), self.channel_name)
                await self.channel_layer.group_discard(user_group(self.user.pk), self.channel_name)

    # -- turns of other processes (channel layer; see chat.cluster) ------------------------
    def _ask_snapshot(self, mid: Any) -> None:
        owner = self.owner_channels.get(mid)

        async def ask() -> None:
            channel = owner or await database_sync_to_async(_owner_channel)(mid)
            if channel:
                await cluster.send_to_owner(channel, {
                    "type": "turn.snapshot.request", "mid": str(mid), "reply": self.channel_name,
                })

        asyncio.get_running_loop().create_task(ask())

    async def turn_started(self, event: dict[str, Any]) -> None:
        if self.subscriber is not None:
            self.remote.started(event)

    async def turn_delta(self, event: dict[str, Any]) -> None:
        if self.subscriber is not None:
            self.remote.delta(event)

    async def turn_snapshot(self, event: dict[str, Any]) -> None:
        if self.subscriber is not None:
            self.remote.snapshot(event)

    async def turn_final(self, event: dict[str, Any]) -> None:
        if self.subscriber is not None:
            self.remote.final(event)

    async def turn_gone(self, event: dict[str, Any]) -> None:
        """The owner finished before answering our snapshot request: show the stored row."""
        if self.subscriber is None:
            return
        self.remote.turns.pop(event["mid"], None)
        html = await database_sync_to_async(_final_from_row)(event["mid"], self.conversation_id)
        if html:
            self.queue.put_nowait(html)

    async def user_notice(self, event: dict[str, Any]) -> None:
        if (
            self.subscriber is not None
            and event.get("origin") != services.PROCESS_ID
            and event.get("conversation_id") != self.conversation_id
        ):
            self.queue.put_nowait(event["html"])

    def notice(self, text: str, level: str = "error") -> None:
        if self.subscriber is not None:
            self.queue.put_nowait(frames.notice(text, level=level))

    def broadcast(self, frame: str) -> None:
        """Push a frame to every tab watching this conversation (this one included)."""
        for sub in list(registry.watchers.get(self.conversation_id, ())):
            sub.push(frame)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if self.subscriber is None:
            return
        try:
            data = json.loads(text_data or "")
            if not isinstance(data, dict):
                raise ValueError
        except ValueError:
            self.notice("Malformed frame.")
            return
        data.pop("HEADERS", None)
        action = data.get("action", "send")
        handler = {
            "send": self.handle_send,
            "stop": self.handle_stop,
            "retry": self.handle_regenerate,
            "regenerate": self.handle_regenerate,
            "continue": self.handle_continue,
            "select": self.handle_select,
            "delete": self.handle_delete,
            "edit": self.handle_edit,
            "sync": self.handle_sync,
            "tool_result": self.handle_tool_result,
            "count_tokens": self.handle_count_tokens,
        }.get(str(action))
        if handler is None:
            self.notice("Unknown action.")
            return
        await handler(data)

    # -- helpers ---------------------------------------------------------------------------
    def _busy(self) -> bool:
        if registry.running_count() >= settings.PLAYGROUND_MAX_TURNS:
            self.notice("The server is busy, try again in a moment. Nothing was sent and your text is still in the box.")
            return True
        return False

    def _message_id(self, data: dict[str, Any], verb: str) -> Any:
        form = TurnActionForm(data)
        if not form.is_valid():
            self.notice(f"Not {verb}: bad message id.")
            return None
        return form.cleaned_data["message_id"]

    def _thread_frame_and_streaming(self) -> tuple[str, list[Any]]:
        views = thread_views(Conversation.objects.get(pk=self.conversation_id))
        return frames.thread(views), [v.id for v in views if v.status == MessageStatus.STREAMING]

    def _thread_frame(self) -> str:
        conversation = Conversation.objects.get(pk=self.conversation_id)
        return frames.thread(thread_views(conversation))

    # -- actions ---------------------------------------------------------------------------
    def field_errors(self, errors: dict[str, list[str]]) -> str:
        """Spans putting each settings field's message next to it, or clearing the messages of
        the last refused send (nothing when none are shown): prepended to the next frame."""
        if errors:
            self.errors_shown = True
            return frames.field_errors(errors, (*PARAM_FIELDS, *OPTION_FIELDS))
        if getattr(self, "errors_shown", False):
            self.errors_shown = False
            return frames.field_errors({}, (*PARAM_FIELDS, *OPTION_FIELDS))
        return ""

    async def handle_send(self, data: dict[str, Any]) -> None:
        ids = data.get("attachment_ids") or []
        data["attachment_ids"] = ",".join(ids) if isinstance(ids, list) else str(ids)
        form = ChatSendForm(data)
        if not form.is_valid():
            errors = "; ".join(
                f"{'' if k == '__all__' else k + ': '}{' '.join(v)}" for k, v in form.errors.items()
            )
            self.queue.put_nowait(
                self.field_errors({k: list(v) for k, v in form.errors.items()}) + frames.notice(f"Not sent: {errors}", level="error")
            )
            return
        clear = self.field_errors({})
        if clear:
            self.queue.put_nowait(clear)
        cleaned = form.cleaned_data
        runs = cleaned["mode"] != "append" and cleaned["role"] in ("user", "assistant")
        if runs and self._busy():
            return
        result = await database_sync_to_async(_prepare_send)(
            user=self.user, conversation_id=self.conversation_id, cleaned=cleaned, params=form.params(), runs=runs,
        )
        if isinstance(result, dict):  # a field refused once the endpoint's limits are known
            self.queue.put_nowait(self.field_errors(result) + frames.notice(
                "Not sent: " + "; ".join(f"{k}: {' '.join(v)}" for k, v in result.items()), level="error"))
            return
        if isinstance(result, str):
            self.notice(result)
            if result == SENT_ALREADY:  # a repeated or queued send: the page may lack the turn
                await self._resync()
            return
        if isinstance(result, tuple):  # appended without a turn: (thread frame, sidebar frame)
            self.broadcast(result[0] + result[1])
            return
        await self._launch(result)

    async def handle_sync(self, data: dict[str, Any]) -> None:
        """A page (re)connected: ``streaming`` lists the answers it shows as running, ``turn_id``
        a send it has not seen come back. When one of those answers runs nowhere any more (it
        ended while the page had no socket) or that send did arrive, the page gets the thread
        again (:meth:`_resync`)."""
        shown = _uuids(data.get("streaming"))
        pending = _uuids(data.get("turn_id"))[:1]
        gone = [m for m in shown if m not in registry.turns and str(m) not in self.remote.turns]
        if gone or (pending and await database_sync_to_async(_turn_exists)(self.conversation_id, pending[0])):
            await self._resync()

    async def handle_stop(self, data: dict[str, Any]) -> None:
        mid = self._message_id(data, "stopped")
        if mid is None:
            return
        ok = await database_sync_to_async(_owns_message)(
            user=self.user, conversation_id=self.conversation_id, message_id=mid
        )
        if not ok:
            self.notice("Not stopped: no such message.")
            return
        if not registry.stop(mid) and cluster.enabled:
            # Running in another process: Stop goes to its owner's channel.
            channel = await database_sync_to_async(_owner_channel)(mid)
            await cluster.send_to_owner(channel, {"type": "turn.stop", "mid": str(mid)})

    async def handle_regenerate(self, data: dict[str, Any], *, keep_text: bool = False) -> None:
        mid = self._message_id(data, "regenerated")
        if mid is None or self._busy():
            return
        result = await database_sync_to_async(_prepare_regenerate)(
            user=self.user, conversation_id=self.conversation_id, message_id=mid, keep_text=keep_text
        )
        if isinstance(result, str):
            self.notice(result)
            return
        await self._launch(result)

    async def handle_continue(self, data: dict[str, Any]) -> None:
        await self.handle_regenerate(data, keep_text=True)

    async def handle_select(self, data: dict[str, Any]) -> None:
        mid = self._message_id(data, "shown")
        if mid is None:
            return
        frame = await database_sync_to_async(_select)(user=self.user, conversation_id=self.conversation_id, message_id=mid)
        if frame is None:
            self.notice("No such message.")
            return
        self.broadcast(frame)

    async def handle_delete(self, data: dict[str, Any]) -> None:
        mid = self._message_id(data, "deleted")
        if mid is None:
            return
        result = await database_sync_to_async(_delete)(user=self.user, conversation_id=self.conversation_id, message_id=mid)
        if result.startswith("<"):
            self.broadcast(result)
        else:
            self.notice(result)

    async def handle_edit(self, data: dict[str, Any]) -> None:
        form = EditForm(data)
        if not form.is_valid():
            self.notice("Not edited: " + "; ".join(f"{k}: {' '.join(v)}" for k, v in form.errors.items()))
            return
        result = await database_sync_to_async(_edit)(
            user=self.user, conversation_id=self.conversation_id, cleaned=form.cleaned_data
        )
        if isinstance(result, str):
            if result.startswith("<"):
                self.broadcast(result)
            else:
                self.notice(result)
            return
        if self._busy():
            return
        await self._launch(result)

    async def handle_tool_result(self, data: dict[str, Any]) -> None:
        mid = self._message_id(data, "sent")
        content = data.get("content")
        call_id = str(data.get("tool_call_id") or "")[:200]
        if mid is None:
            return
        if not isinstance(content, str) or not content.strip():
            self.notice("Type the tool's result first.")
            return
        if self._busy():
            return
        result = await database_sync_to_async(_prepare_tool_result)(
            user=self.user, conversation_id=self.conversation_id, message_id=mid, tool_call_id=call_id, content=content
        )
        if isinstance(result, str):
            self.notice(result)
            return
        await self._launch(result)

    async def handle_count_tokens(self, data: dict[str, Any]) -> None:
        """Anthropic ``/messages/count_tokens`` for the conversation plus the text in the box."""
        result = await database_sync_to_async(_prepare_count)(
            user=self.user, conversation_id=self.conversation_id, data=data
        )
        if isinstance(result, str):
            self.notice(result)
            return
        base_url, api_key, headers, api_style, request = result
        from chat.providers import get_adapter
        from chat.providers.http import get_client

        adapter = get_adapter(api_style)
        if not hasattr(adapter, "count_tokens"):
            self.notice("Counting tokens needs an anthropic_messages endpoint (POST /messages/count_tokens).")
            return
        config = EndpointConfig(base_url=resolve_base_url(base_url, self.scope), api_key=api_key,
                                extra_headers=headers, api_style=api_style)
        try:
            if not base_url.startswith("sim://"):
                await acheck_base_url(config.base_url, allow_private=not settings.PLAYGROUND_REFUSE_PRIVATE_URLS)
            n = await adapter.count_tokens(get_client(), config, request)
        except ProviderError as exc:
            self.notice(f"Count tokens failed: HTTP {exc.status or '—'} {exc.code or ''} {exc.message}")
            return
        except ValueError as exc:
            self.notice(str(exc))
            return
        self.notice(f"Input tokens (count_tokens): {n}", level="info")

    async def _launch(self, prepared: PreparedTurn) -> None:
        base_url = resolve_base_url(prepared.base_url, self.scope)
        config = EndpointConfig(
            base_url=base_url, api_key=prepared.api_key, extra_headers=prepared.extra_headers,
            api_style=prepared.api_style, stream_options=prepared.stream_options,
        )
        spec = TurnSpec(
            message_id=prepared.assistant.id, conversation_id=self.conversation_id,
            user_id=self.user.pk, config=config, request=prepared.request,
            prompt_price_per_mtok=prepared.prices[0], completion_price_per_mtok=prepared.prices[1],
            prefill=prepared.assistant.content, conversation_title=prepared.title,
            turn_id=prepared.assistant.turn_id,
        )
        stream_fn = None
        if not prepared.base_url.startswith("sim://"):
            try:
                await acheck_base_url(base_url, allow_private=not settings.PLAYGROUND_REFUSE_PRIVATE_URLS)
            except ValueError as exc:
                stream_fn = _failing_stream(str(exc))
        a = prepared.assistant
        nav = {
            "sibling_index": getattr(a, "sibling_index", 0), "sibling_count": getattr(a, "sibling_count", 1),
            "prev_sibling_id": getattr(a, "prev_sibling_id", None),
        }
        registry.start(
            spec, announce=prepared.announce, stream_fn=stream_fn,
            snapshot_meta={**a.settings_snapshot, "_nav": nav},
        )


def _failing_stream(message: str):  # noqa: ANN202
    async def stream(config: EndpointConfig, request: ChatRequest):  # noqa: ANN202
        raise ProviderError(message, code="base_url_refused")
        yield  # pragma: no cover

    return stream


# ---- sync preparation (runs in a worker thread) ---------------------------------------------


def thread_views(conversation: Conversation) -> list[frames.MessageView]:
    """The active branch as views; a running turn's live state wins over its row."""
    views = []
    thread = selectors.conversation_thread(conversation=conversation)
    attachments = _attachments_by_message(thread)
    for m in thread:
        m.prefetched_attachments = attachments.get(m.pk, [])
        live = registry.live_view(m.id) if m.status == MessageStatus.STREAMING else None
        view = frames.MessageView.from_row(
            m, sibling_index=m.sibling_index, sibling_count=m.sibling_count
        )
        if live is not None:
            view.content, view.reasoning, view.status = live.content, live.reasoning, live.status
        views.append(view)
    return views


def _attachments_by_message(thread: list[Message]) -> dict[Any, list[Attachment]]:
    ids = [m.pk for m in thread if m.role == "user"]
    out: dict[Any, list[Attachment]] = {}
    if ids:
        for a in Attachment.objects.filter(message_id__in=ids).order_by("created_at"):
            out.setdefault(a.message_id, []).append(a)
    return out


def _parts(attachments: list[Attachment]) -> tuple[ContentPart, ...]:
    import base64

    return tuple(
        ContentPart(type=a.kind, media_type=a.media_type, url=a.url, filename=a.filename,
                    data_b64="" if a.url else base64.b64encode(bytes(a.data)).decode())
        for a in attachments
    )


def history(thread: list[Message]) -> tuple[ChatMessage, ...]:
    """The messages sent upstream: exactly the active branch as shown — system, user (with its
    images and audio), assistant (with its tool calls and thinking signature), tool results;
    answers that failed with no text are left out."""
    attachments = _attachments_by_message(thread)
    out = []
    for m in thread:
        if m.role == "user":
            out.append(ChatMessage("user", m.content, parts=_parts(attachments.get(m.pk, []))))
        elif m.role == "system":
            out.append(ChatMessage("system", m.content))
        elif m.role == "tool":
            out.append(ChatMessage("tool", m.content, tool_call_id=m.tool_call_id))
        elif m.role == "assistant" and (m.content or m.tool_calls) and m.status != MessageStatus.STREAMING:
            out.append(ChatMessage(
                "assistant", m.content,
                tool_calls=tuple(ToolCall(c.get("id", ""), c.get("name", ""), c.get("arguments", "")) for c in m.tool_calls),
                reasoning=m.reasoning if m.reasoning_signature else "", reasoning_signature=m.reasoning_signature,
            ))
    return tuple(out)


def make_request(
    *, api_style: str, model: str, system: str, stored: dict[str, Any], messages: tuple[ChatMessage, ...]
) -> ChatRequest:
    """A ``ChatRequest`` from stored settings, keeping only what ``api_style`` accepts."""
    return ChatRequest(model=model, messages=messages, system=system, **request_fields(stored, api_style))


def _prices(endpoint: Any, model: str) -> tuple[float | None, float | None]:
    for info in endpoint.models_cache or []:
        if info.get("id") == model:
            return info.get("prompt_price_per_mtok"), info.get("completion_price_per_mtok")
    return None, None


def _remote_streaming(conversation_id: int) -> list[tuple[Any, str]]:
    return list(
        Message.objects.filter(conversation_id=conversation_id, status=MessageStatus.STREAMING)
        .exclude(owner_process=services.PROCESS_ID)
        .values_list("id", "owner_channel")
    )


def _uuids(value: Any, limit: int = 100) -> list[uuid.UUID]:
    """UUIDs from a list (or one string) sent by the page; anything else is ignored."""
    out = []
    for v in (value if isinstance(value, list) else [value])[:limit]:
        try:
            out.append(uuid.UUID(str(v)))
        except ValueError:
            continue
    return out


def _turn_exists(conversation_id: int, turn_id: uuid.UUID) -> bool:
    return Message.objects.filter(conversation_id=conversation_id, turn_id=turn_id).exists()


def _oldest_orphan_heartbeat_age(conversation_id: int, live_ids: set[Any]) -> float | None:
    """Seconds since the oldest heartbeat of this conversation's streaming rows that this process
    does not run (``inf`` without one); None when there are none."""
    beats = (
        Message.objects.filter(conversation_id=conversation_id, status=MessageStatus.STREAMING)
        .exclude(pk__in=list(live_ids))
        .values_list("heartbeat_at", flat=True)
    )
    ages = [float("inf") if b is None else (timezone.now() - b).total_seconds() for b in beats]
    return max(ages) if ages else None


def _owner_channel(mid: Any) -> str:
    return Message.objects.filter(pk=mid).values_list("owner_channel", flat=True).first() or ""


def _final_from_row(mid: Any, conversation_id: int) -> str:
    m = Message.objects.filter(pk=mid, conversation_id=conversation_id).first()
    return frames.final(frames.MessageView.from_row(m)) if m else ""


def _owns_message(*, user: Any, conversation_id: int, message_id: Any) -> bool:
    return Message.objects.filter(pk=message_id, conversation_id=conversation_id, conversation__owner=user).exists()


def _get_message(user: Any, conversation_id: int, message_id: Any) -> Message | None:
    try:
        return Message.objects.select_related("conversation", "conversation__endpoint").get(
            pk=message_id, conversation_id=conversation_id, conversation__owner=user
        )
    except Message.DoesNotExist:
        return None


def _sidebar(user: Any, conversation_id: int) -> str:
    return frames.sidebar(list(selectors.conversation_list_for_user(user=user)[:200]), current_id=conversation_id)


def _prepared(
    conversation: Conversation, endpoint: Any, assistant: Message, announce: str, request: ChatRequest
) -> PreparedTurn:
    return PreparedTurn(
        assistant=assistant, announce=announce, base_url=endpoint.base_url, api_key=endpoint.get_api_key(),
        extra_headers=endpoint.get_extra_headers(), api_style=endpoint.api_style,
        stream_options=endpoint.stream_options, request=request,
        prices=_prices(endpoint, request.model), title=conversation.title,
    )


def _prepare_send(
    *, user: Any, conversation_id: int, cleaned: dict[str, Any], params: dict[str, Any], runs: bool
) -> PreparedTurn | tuple[str, str] | str:
    try:
        conversation = selectors.conversation_get_for_user(user=user, conversation_id=conversation_id)
        endpoint = selectors.endpoint_get_for_user(user=user, endpoint_id=cleaned["endpoint_id"])
    except Http404:
        return "Not sent: no such endpoint."
    thread = selectors.conversation_thread(conversation=conversation)
    leaf = thread[-1] if thread else None
    if leaf is not None and leaf.status == MessageStatus.STREAMING:
        return "Wait for the current answer to finish, or stop it, before sending."
    role = cleaned["role"]
    cap = next((i.get("max_completion_tokens") for i in endpoint.models_cache or [] if i.get("id") == cleaned["model"]), None)
    if cap and params.get("max_tokens") and params["max_tokens"] > cap:
        return {"max_tokens": [f"{cleaned['model']} allows at most {cap} completion tokens."]}
    attachment_ids = [x for x in (cleaned.get("attachment_ids") or []) if x]
    attachments = list(Attachment.objects.filter(pk__in=attachment_ids, owner=user, message__isnull=True))
    if len(attachments) != len(attachment_ids):
        return "Not sent: an attachment is missing or was sent already; attach it again."
    if attachments and role != "user":
        return "Attachments go with a user message."
    if not runs:
        services.message_append(
            conversation=conversation, role=role, content=cleaned["content"], parent_id=leaf.pk if leaf else None
        )
        conversation.refresh_from_db()
        return frames.thread(thread_views(conversation)), _sidebar(user, conversation.pk)
    started = services.turn_start(
        conversation=conversation, turn_id=cleaned["turn_id"], content=cleaned["content"],
        parent_id=leaf.pk if leaf else None, endpoint=endpoint, model=cleaned["model"],
        system_prompt=cleaned.get("system_prompt") or "", params=params, role=role,
    )
    if not started.created:
        return SENT_ALREADY
    conversation.refresh_from_db()
    assistant = Message.objects.get(pk=started.assistant_message_ids[0])
    if role == "user":
        user_message = Message.objects.get(pk=started.user_message_id)
        if attachments:
            Attachment.objects.filter(pk__in=[a.pk for a in attachments]).update(message=user_message)
        user_message.prefetched_attachments = attachments
        announce = frames.turn_started(frames.MessageView.from_row(user_message), [frames.MessageView.from_row(assistant)])
        hist = history(thread) + (ChatMessage("user", cleaned["content"], parts=_parts(attachments)),)
    else:
        announce = frames.turn_started(None, [frames.MessageView.from_row(assistant)])
        hist = history(thread) + (ChatMessage("assistant", cleaned["content"]),)
    announce += _sidebar(user, conversation.pk)
    request = make_request(
        api_style=endpoint.api_style, model=cleaned["model"], system=cleaned.get("system_prompt") or "",
        stored=params, messages=hist,
    )
    return _prepared(conversation, endpoint, assistant, announce, request)


def _prepare_regenerate(*, user: Any, conversation_id: int, message_id: Any, keep_text: bool) -> PreparedTurn | str:
    old = _get_message(user, conversation_id, message_id)
    if old is None or old.role != "assistant":
        return "No such message."
    if old.status == MessageStatus.STREAMING:
        return "This answer is still streaming."
    conversation = old.conversation
    endpoint = conversation.endpoint
    if endpoint is None:
        return "The endpoint of this conversation was deleted. Pick another one and send again."
    thread = selectors.conversation_thread(conversation=conversation)
    ids = [m.pk for m in thread]
    if old.pk not in ids:
        return "That answer is not on the current branch."
    shown = thread[ids.index(old.pk)]
    upto = thread[: ids.index(old.pk)]
    prefill = old.content if keep_text else ""
    new = services.turn_regenerate(message=old, prefill=prefill)
    hist = history(upto) + ((ChatMessage("assistant", prefill),) if prefill else ())
    request = make_request(
        api_style=endpoint.api_style, model=conversation.model, system=conversation.system_prompt,
        stored=conversation.params, messages=hist,
    )
    new.sibling_index, new.sibling_count = shown.sibling_count, shown.sibling_count + 1
    new.prev_sibling_id, new.next_sibling_id = old.pk, None
    view = frames.MessageView.from_row(new)
    return _prepared(conversation, endpoint, new, frames.replace(old.pk, view), request)


def _select(*, user: Any, conversation_id: int, message_id: Any) -> str | None:
    m = _get_message(user, conversation_id, message_id)
    if m is None:
        return None
    services.conversation_select(conversation=m.conversation, message=m)
    m.conversation.refresh_from_db()
    return frames.thread(thread_views(m.conversation))


def _delete(*, user: Any, conversation_id: int, message_id: Any) -> str:
    m = _get_message(user, conversation_id, message_id)
    if m is None:
        return "Not deleted: no such message."
    try:
        services.message_delete(message=m)
    except ValueError as exc:
        return str(exc)
    conversation = Conversation.objects.get(pk=conversation_id)
    return frames.thread(thread_views(conversation))


def _edit(*, user: Any, conversation_id: int, cleaned: dict[str, Any]) -> PreparedTurn | str:
    m = _get_message(user, conversation_id, cleaned["message_id"])
    if m is None:
        return "Not edited: no such message."
    conversation = m.conversation
    if m.role == "user" and cleaned.get("resend"):
        endpoint = conversation.endpoint
        if endpoint is None:
            return "The endpoint of this conversation was deleted. Pick another one and send again."
        thread = selectors.conversation_thread(conversation=conversation)
        ids = [x.pk for x in thread]
        if m.pk not in ids:
            return "That message is not on the current branch."
        if any(x.status == MessageStatus.STREAMING for x in thread):
            return "Wait for the current answer to finish, or stop it, first."
        started = services.turn_start(
            conversation=conversation, turn_id=cleaned["turn_id"], content=cleaned["content"],
            parent_id=m.parent_id, endpoint=endpoint, model=conversation.model,
            system_prompt=conversation.system_prompt, params=conversation.params, replaces_user=m,
        )
        if not started.created:
            return "This edit was sent already."
        conversation.refresh_from_db()
        assistant = Message.objects.get(pk=started.assistant_message_ids[0])
        hist = history(thread[: ids.index(m.pk)]) + (ChatMessage("user", cleaned["content"]),)
        request = make_request(
            api_style=endpoint.api_style, model=conversation.model, system=conversation.system_prompt,
            stored=conversation.params, messages=hist,
        )
        return _prepared(conversation, endpoint, assistant, frames.thread(thread_views(conversation)), request)
    try:
        services.message_edit(message=m, content=cleaned["content"])
    except ValueError as exc:
        return str(exc)
    return frames.thread(thread_views(conversation))


def _prepare_tool_result(*, user: Any, conversation_id: int, message_id: Any, tool_call_id: str, content: str) -> PreparedTurn | str:
    m = _get_message(user, conversation_id, message_id)
    if m is None or m.role != "assistant" or not m.tool_calls:
        return "No such tool call."
    if tool_call_id and tool_call_id not in {c.get("id") for c in m.tool_calls}:
        return "No such tool call."
    conversation = m.conversation
    endpoint = conversation.endpoint
    if endpoint is None:
        return "The endpoint of this conversation was deleted. Pick another one and send again."
    thread = selectors.conversation_thread(conversation=conversation)
    ids = [x.pk for x in thread]
    if m.pk not in ids:
        return "That answer is not on the current branch."
    if any(x.status == MessageStatus.STREAMING for x in thread):
        return "Wait for the current answer to finish, or stop it, first."
    tool_msg, assistant = services.turn_tool_result(
        message=m, tool_call_id=tool_call_id or m.tool_calls[0].get("id", ""), content=content,
    )
    conversation.refresh_from_db()
    hist = history(thread[: ids.index(m.pk) + 1]) + (ChatMessage("tool", content, tool_call_id=tool_msg.tool_call_id),)
    request = make_request(
        api_style=endpoint.api_style, model=conversation.model, system=conversation.system_prompt,
        stored=conversation.params, messages=hist,
    )
    return _prepared(conversation, endpoint, assistant, frames.thread(thread_views(conversation)), request)


def _prepare_count(*, user: Any, conversation_id: int, data: dict[str, Any]) -> tuple[Any, ...] | str:
    conversation = selectors.conversation_get_for_user(user=user, conversation_id=conversation_id)
    try:
        endpoint = selectors.endpoint_get_for_user(user=user, endpoint_id=data.get("endpoint_id") or conversation.endpoint_id)
    except Http404:
        return "No such endpoint."
    thread = selectors.conversation_thread(conversation=conversation)
    messages = history(thread)
    if isinstance(data.get("content"), str) and data["content"].strip():
        messages += (ChatMessage("user", data["content"]),)
    if not messages:
        return "Nothing to count yet: type a message first."
    request = make_request(
        api_style=endpoint.api_style, model=data.get("model") or conversation.model,
        system=data.get("system_prompt") or "", stored={}, messages=messages,
    )
    return endpoint.base_url, endpoint.get_api_key(), endpoint.get_extra_headers(), endpoint.api_style, request
