"""The conversation websocket: ``/ws/c/<conversation_id>/``.

Interface layer only: check the user may use the conversation, validate each frame with a
form, call one service, start or stop a turn in :mod:`chat.turns`. Frames go out through a
per-connection queue drained by a writer task (see :class:`chat.turns.Subscriber`).

Close codes: 4401 not logged in, 4404 no such conversation for this user (accepted first, then
closed: a refused handshake looks like 1006 to htmx's extension, which then reconnects forever).

Incoming frames (htmx ``ws-send`` JSON): ``{"action": "send", turn_id, content, endpoint_id,
model, system_prompt, temperature, …}``, ``{"action": "stop", message_id}``,
``{"action": "retry", message_id}``.

May import: channels, Django, chat.selectors, chat.services, chat.forms, chat.turns, chat.frames.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.http import Http404

from chat import frames, selectors, services
from chat.forms import ChatSendForm, TurnActionForm
from chat.models import Conversation, Message, MessageStatus
from chat.providers.base import ChatMessage, ChatRequest, EndpointConfig
from chat.providers.http import acheck_base_url
from chat.turns import Subscriber, TurnSpec, registry

log = logging.getLogger(__name__)


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
        self.subscriber = Subscriber(self.queue.put_nowait, self.user.pk)
        # Snapshot of every running turn of this conversation, registered in the same step.
        for frame in registry.watch(self.conversation_id, self.subscriber):
            self.queue.put_nowait(frame)

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

    def notice(self, text: str, level: str = "error") -> None:
        if self.subscriber is not None:
            self.queue.put_nowait(frames.notice(text, level=level))

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
        if action == "send":
            await self.handle_send(data)
        elif action == "stop":
            await self.handle_stop(data)
        elif action == "retry":
            await self.handle_retry(data)
        else:
            self.notice("Unknown action.")

    # -- actions -------------------------------------------------------------------------
    async def handle_send(self, data: dict[str, Any]) -> None:
        form = ChatSendForm(data)
        if not form.is_valid():
            errors = "; ".join(
                f"{'' if k == '__all__' else k + ': '}{' '.join(v)}" for k, v in form.errors.items()
            )
            self.notice(f"Not sent: {errors}")
            return
        if registry.running_count() >= settings.PLAYGROUND_MAX_TURNS:
            self.notice("The server is busy, try again in a moment. Your message was not sent and is still in the box.")
            return
        result = await database_sync_to_async(_prepare_send)(
            user=self.user, conversation_id=self.conversation_id, cleaned=form.cleaned_data,
            params=form.params(),
        )
        if isinstance(result, str):
            self.notice(result)
            return
        await self._launch(result, announce_kind="append")

    async def handle_stop(self, data: dict[str, Any]) -> None:
        form = TurnActionForm(data)
        if not form.is_valid():
            self.notice("Not stopped: bad message id.")
            return
        mid = form.cleaned_data["message_id"]
        ok = await database_sync_to_async(_owns_message)(
            user=self.user, conversation_id=self.conversation_id, message_id=mid
        )
        if not ok:
            self.notice("Not stopped: no such message.")
            return
        registry.stop(mid)

    async def handle_retry(self, data: dict[str, Any]) -> None:
        form = TurnActionForm(data)
        if not form.is_valid():
            self.notice("Not retried: bad message id.")
            return
        if registry.running_count() >= settings.PLAYGROUND_MAX_TURNS:
            self.notice("The server is busy, try again in a moment.")
            return
        result = await database_sync_to_async(_prepare_retry)(
            user=self.user, conversation_id=self.conversation_id, message_id=form.cleaned_data["message_id"]
        )
        if isinstance(result, str):
            self.notice(result)
            return
        await self._launch(result, announce_kind="replace")

    async def _launch(self, prepared: PreparedTurn, *, announce_kind: str) -> None:
        base_url = resolve_base_url(prepared.base_url, self.scope)
        config = EndpointConfig(
            base_url=base_url, api_key=prepared.api_key, extra_headers=prepared.extra_headers,
            api_style=prepared.api_style, stream_options=prepared.stream_options,
        )
        spec = TurnSpec(
            message_id=prepared.assistant.id, conversation_id=self.conversation_id,
            user_id=self.user.pk, config=config, request=prepared.request,
            prompt_price_per_mtok=prepared.prices[0], completion_price_per_mtok=prepared.prices[1],
        )
        assistant_view = frames.MessageView.from_row(prepared.assistant)
        if announce_kind == "append":
            announce = frames.turn_started(frames.MessageView.from_row(prepared.user_message), [assistant_view])
            announce += prepared.extra_frame
        else:
            announce = frames.replace(prepared.replaces, assistant_view)
        stream_fn = None
        if not prepared.base_url.startswith("sim://"):
            try:
                await acheck_base_url(base_url, allow_private=not settings.PLAYGROUND_REFUSE_PRIVATE_URLS)
            except ValueError as exc:
                stream_fn = _failing_stream(str(exc))
        registry.start(spec, announce=announce, stream_fn=stream_fn, snapshot_meta=assistant_view.snapshot)


def _failing_stream(message: str):  # noqa: ANN202
    from chat.providers.base import ProviderError

    async def stream(config: EndpointConfig, request: ChatRequest):  # noqa: ANN202
        raise ProviderError(message, code="base_url_refused")
        yield  # pragma: no cover

    return stream


class PreparedTurn:
    """What the sync preparation hands to async code (plain values and rows, no lazy access)."""

    def __init__(self, **kw: Any) -> None:
        self.__dict__.update(kw)

    user_message: Message
    assistant: Message
    replaces: Any
    base_url: str
    api_key: str
    extra_headers: dict[str, str]
    api_style: str
    stream_options: bool
    request: ChatRequest
    prices: tuple[float | None, float | None]
    extra_frame: str


def _history(thread: list[Message]) -> tuple[ChatMessage, ...]:
    """The messages sent upstream: the active branch's user messages and finished answers."""
    out = []
    for m in thread:
        if m.role == "user":
            out.append(ChatMessage("user", m.content))
        elif m.role == "assistant" and m.content and m.status in (
            MessageStatus.COMPLETE, MessageStatus.STOPPED, MessageStatus.INTERRUPTED
        ):
            out.append(ChatMessage("assistant", m.content))
    return tuple(out)


def _prices(endpoint: Any, model: str) -> tuple[float | None, float | None]:
    for info in endpoint.models_cache or []:
        if info.get("id") == model:
            return info.get("prompt_price_per_mtok"), info.get("completion_price_per_mtok")
    return None, None


def _owns_message(*, user: Any, conversation_id: int, message_id: Any) -> bool:
    return Message.objects.filter(pk=message_id, conversation_id=conversation_id, conversation__owner=user).exists()


def _prepare_send(*, user: Any, conversation_id: int, cleaned: dict[str, Any], params: dict[str, Any]) -> PreparedTurn | str:
    try:
        conversation = selectors.conversation_get_for_user(user=user, conversation_id=conversation_id)
        endpoint = selectors.endpoint_get_for_user(user=user, endpoint_id=cleaned["endpoint_id"])
    except Http404:
        return "Not sent: no such endpoint."
    thread = selectors.conversation_thread(conversation=conversation)
    leaf = thread[-1] if thread else None
    if leaf is not None and leaf.role == "assistant" and leaf.status == MessageStatus.STREAMING:
        return "Wait for the current answer to finish, or stop it, before sending."
    started = services.turn_start(
        conversation=conversation, turn_id=cleaned["turn_id"], content=cleaned["content"],
        parent_id=leaf.pk if leaf else None, endpoint=endpoint, model=cleaned["model"],
        system_prompt=cleaned.get("system_prompt") or "", params=params,
    )
    if not started.created:
        return "This message was sent already."
    user_message = Message(
        id=started.user_message_id, conversation=conversation, role="user", content=cleaned["content"],
        status=MessageStatus.COMPLETE, turn_id=cleaned["turn_id"],
    )
    assistant = Message.objects.get(pk=started.assistant_message_ids[0])
    user_message.created_at = assistant.created_at
    history = _history(thread) + (ChatMessage("user", cleaned["content"]),)
    sidebar = frames.sidebar(
        list(selectors.conversation_list_for_user(user=user)[:200]), current_id=conversation.pk
    )
    return PreparedTurn(
        user_message=user_message, assistant=assistant, replaces=None, extra_frame=sidebar,
        base_url=endpoint.base_url, api_key=endpoint.get_api_key(),
        extra_headers=endpoint.get_extra_headers(), api_style=endpoint.api_style,
        stream_options=endpoint.stream_options,
        request=ChatRequest(
            model=cleaned["model"], messages=history, system=cleaned.get("system_prompt") or "", params=params
        ),
        prices=_prices(endpoint, cleaned["model"]),
    )


def _prepare_retry(*, user: Any, conversation_id: int, message_id: Any) -> PreparedTurn | str:
    try:
        failed = Message.objects.select_related("conversation", "conversation__endpoint").get(
            pk=message_id, conversation_id=conversation_id, conversation__owner=user, role="assistant"
        )
    except Message.DoesNotExist:
        return "Not retried: no such message."
    if failed.status == MessageStatus.STREAMING:
        return "This answer is still streaming."
    conversation: Conversation = failed.conversation
    endpoint = conversation.endpoint
    if endpoint is None:
        return "Not retried: the endpoint of this conversation was deleted. Pick another one."
    thread = selectors.conversation_thread(conversation=conversation)
    ids = [m.pk for m in thread]
    if failed.parent_id not in ids:
        return "Not retried: that answer is not on the current branch."
    upto = thread[: ids.index(failed.parent_id) + 1]
    assistant = services.turn_retry(failed=failed)
    return PreparedTurn(
        user_message=None, assistant=assistant, replaces=failed.pk, extra_frame="",
        base_url=endpoint.base_url, api_key=endpoint.get_api_key(),
        extra_headers=endpoint.get_extra_headers(), api_style=endpoint.api_style,
        stream_options=endpoint.stream_options,
        request=ChatRequest(
            model=conversation.model, messages=_history(upto), system=conversation.system_prompt,
            params=conversation.params,
        ),
        prices=_prices(endpoint, conversation.model),
    )
