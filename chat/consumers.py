"""The conversation websocket: ``/ws/c/<conversation_id>/``.

Interface layer only: check the user may use the conversation, parse each frame with a form,
call one selector or service, start or stop a turn in :mod:`chat.turns`, send frames. Frames go
out through a per-connection queue drained by a writer task (see :class:`chat.turns.Subscriber`).

Close codes: 4401 not logged in, 4404 no such conversation for this user (accepted first, then
closed: a refused handshake looks like 1006 to htmx's extension, which then reconnects forever).

Incoming frames (htmx ``ws-send`` JSON, ``action`` says what). Every action that starts a turn
carries the settings panel (``endpoint_id, model, system_prompt, temperature, …``): the one
source of the next turn's settings.

- ``send``: ``turn_id, content, role (user|assistant|system), mode (send|append)``. A user
  message runs a turn; an assistant message with mode ``send`` is a prefill the answer
  continues; ``append`` (or role system) only inserts.
- ``stop``, ``regenerate`` (alias ``retry``), ``continue``, ``select`` (follow a sibling's
  branch), ``delete``: ``message_id``.
- ``edit``: ``message_id, content``; a user message becomes a new branch and runs (``resend``
  true), any other message is changed in place.
- ``tool_result``: ``message_id, tool_call_id, content``. ``count_tokens``: the draft and the
  panel. ``sync``: what a (re)connected page shows as running.

The send path never waits behind other turns' database work: a turn is planned in a reader
thread (``chat.db.read``: form, plan, frames), started at once, and its rows are written by the
writer thread beside the upstream request (``chat.turns``). Nothing is written for an action
that is refused, whatever the reason.

May import: channels, Django, chat.db, chat.forms, chat.selectors, chat.services, chat.turns,
chat.cluster, chat.frames, chat.textsafety, chat.providers (count_tokens only).
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
from django.http import Http404

from chat import db, frames, selectors, services, signals
from chat.cluster import RemoteTurns, cluster, conversation_group, user_group
from chat.forms import (
    OPTION_FIELDS,
    PARAM_FIELDS,
    ChatSendForm,
    EditForm,
    TurnActionForm,
    TurnSettingsForm,
)
from chat.prompts.selectors import version_visible_id
from chat.providers.base import EndpointConfig, ProviderError
from chat.selectors import NextTurnSettings, TurnPlan, TurnRefused
from chat.textsafety import valid_data
from chat.turns import Subscriber, TurnSpec, registry

log = logging.getLogger(__name__)

SETTINGS_FIELDS = (*PARAM_FIELDS, *OPTION_FIELDS, "model")
BUSY = ("The server is busy (too many answers running or waiting): try again in a moment. "
        "Nothing was sent and your text is still in the box.")


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


@dataclass(frozen=True)
class Prepared:
    """A planned turn and the frame that puts it on the page (made in a reader thread)."""

    plan: TurnPlan
    announce: str


# ---- sync preparation (reader threads): parse, plan, render ---------------------------------


def _settings(user: Any, data: dict[str, Any]) -> NextTurnSettings | None:
    """The panel's values as :class:`NextTurnSettings` (None when the frame carries no panel).
    Fields the endpoint's API style does not take are not validated. Raises TurnRefused with
    the field errors."""
    if not TurnSettingsForm.present(data):
        return None
    style = None
    try:
        style = selectors.endpoint_usable_get_for_user(user=user, endpoint_id=data.get("endpoint_id")).api_style
    except Http404:
        pass
    form = TurnSettingsForm(data, api_style=style)
    if not form.is_valid():
        raise _form_refusal(form)
    c = form.cleaned_data
    return NextTurnSettings(c["endpoint_id"], c["model"], c.get("system_prompt") or "", form.params())


def _form_refusal(form: Any, verb: str = "Not sent") -> TurnRefused:
    errors = {k: [str(e) for e in v] for k, v in form.errors.items()}
    text = "; ".join(f"{'' if k == '__all__' else k + ': '}{' '.join(v)}" for k, v in errors.items())
    return TurnRefused(f"{verb}: {text}", field_errors=errors)


def _announce(plan: TurnPlan, user: Any) -> str:
    """The frame that shows a planned turn: the new messages, or the thread when the action
    changes what is shown above them; plus the sidebar when the title appeared."""
    views = [frames.MessageView.from_row(r) for r in plan.rows]
    if plan.kind in ("send", "prefill"):
        asked = views[0] if plan.user_message is not None else None
        if asked is not None:
            asked.attachments = [
                {"id": str(a.id), "kind": a.kind, "filename": a.filename, "url": a.url} for a in plan.attachments
            ]
        frame = frames.turn_started(asked, [views[-1]])
    elif plan.kind in ("regenerate", "continue"):
        frame = frames.replace(plan.replaces_id, views[-1])
    else:  # edit, tool_result: the branch changes above the answer
        frame = frames.thread(frames.thread_views([*plan.thread, *plan.rows]))
    if plan.title_changed:  # the row is written beside the upstream request: list it already
        listed = [c for c in selectors.conversation_list_for_user(user=user)[:199] if c.pk != plan.conversation_id]
        this = plan.assistant.conversation
        this.title = plan.title
        frame += frames.sidebar([this, *listed], current_id=plan.conversation_id)
    return frame


def prepare_send(*, user: Any, conversation_id: int, data: dict[str, Any], live: frozenset[uuid.UUID]) -> Prepared | str:
    """A ``send`` frame → a planned turn, or the thread frame of an appended message (``str``).
    Raises TurnRefused."""
    ids = data.get("attachment_ids") or []
    data = {**data, "attachment_ids": ",".join(map(str, ids)) if isinstance(ids, list) else str(ids)}
    style = None
    try:
        style = selectors.endpoint_usable_get_for_user(user=user, endpoint_id=data.get("endpoint_id")).api_style
    except Http404:
        pass
    form = ChatSendForm(data, api_style=style)
    if not form.is_valid():
        raise _form_refusal(form)
    c = form.cleaned_data
    s = NextTurnSettings(c["endpoint_id"], c["model"], c.get("system_prompt") or "", form.params())
    if c["mode"] == "append" or c["role"] == "system":
        if c["attachment_ids"]:
            raise TurnRefused("Attachments go with a user message that is sent.")
        services.message_append_to_conversation(
            user=user, conversation_id=conversation_id, role=c["role"], content=c["content"]
        )
        return _thread_frame(user, conversation_id) + _sidebar(user, conversation_id)
    plan = selectors.turn_plan_send(
        user=user, conversation_id=conversation_id, turn_id=c["turn_id"], content=c["content"], role=c["role"],
        settings=s, attachment_ids=c["attachment_ids"], live_ids=live,
        prompt_version_id=version_visible_id(user=user, version_id=data.get("prompt_version_id"))
        if data.get("prompt_version_id") else None,
    )
    return Prepared(plan, _announce(plan, user))


def prepare_regenerate(
    *, user: Any, conversation_id: int, data: dict[str, Any], keep_text: bool, live: frozenset[uuid.UUID]
) -> Prepared:
    form = TurnActionForm(data)
    if not form.is_valid():
        raise TurnRefused("No such message.")
    plan = selectors.turn_plan_regenerate(
        user=user, conversation_id=conversation_id, message_id=form.cleaned_data["message_id"],
        settings=_settings(user, data), keep_text=keep_text, live_ids=live,
    )
    return Prepared(plan, _announce(plan, user))


def prepare_edit(*, user: Any, conversation_id: int, data: dict[str, Any], live: frozenset[uuid.UUID]) -> Prepared | str:
    """An ``edit`` frame: a user message sent again as a new branch (a plan), or a message
    changed in place (the thread frame). Raises TurnRefused."""
    form = EditForm(data)
    if not form.is_valid():
        raise _form_refusal(form, "Not edited")
    c = form.cleaned_data
    if c.get("resend"):
        plan = selectors.turn_plan_edit_resend(
            user=user, conversation_id=conversation_id, message_id=c["message_id"], content=c["content"],
            turn_id=c["turn_id"], settings=_settings(user, data), live_ids=live,
        )
        return Prepared(plan, _announce(plan, user))
    try:
        services.message_edit_for_user(
            user=user, conversation_id=conversation_id, message_id=c["message_id"], content=c["content"]
        )
    except ValueError as exc:
        raise TurnRefused(str(exc)) from exc
    return _thread_frame(user, conversation_id)


def prepare_tool_result(*, user: Any, conversation_id: int, data: dict[str, Any], live: frozenset[uuid.UUID]) -> Prepared:
    form = TurnActionForm(data)
    content = data.get("content")
    if not form.is_valid():
        raise TurnRefused("No such tool call.")
    if not isinstance(content, str) or not content.strip():
        raise TurnRefused("Type the tool's result first.")
    plan = selectors.turn_plan_tool_result(
        user=user, conversation_id=conversation_id, message_id=form.cleaned_data["message_id"],
        tool_call_id=str(data.get("tool_call_id") or "")[:200], content=content[:200_000],
        settings=_settings(user, data), live_ids=live,
    )
    return Prepared(plan, _announce(plan, user))


def _thread_frame(user: Any, conversation_id: int) -> str:
    conversation = selectors.conversation_get_for_user(user=user, conversation_id=conversation_id)
    return frames.thread(frames.thread_views(selectors.conversation_thread_for_display(conversation=conversation), registry.live_view))


def _sidebar(user: Any, conversation_id: int) -> str:
    return frames.sidebar(list(selectors.conversation_list_for_user(user=user)[:200]), current_id=conversation_id)


def _thread_and_streaming(user: Any, conversation_id: int) -> tuple[str, list[Any]]:
    conversation = selectors.conversation_get_for_user(user=user, conversation_id=conversation_id)
    views = frames.thread_views(selectors.conversation_thread_for_display(conversation=conversation), registry.live_view)
    return frames.thread(views), [v.id for v in views if v.status == "streaming"]


def _select(user: Any, conversation_id: int, message_id: uuid.UUID) -> str:
    services.conversation_select_for_user(user=user, conversation_id=conversation_id, message_id=message_id)
    return _thread_frame(user, conversation_id)


def _delete(user: Any, conversation_id: int, message_id: uuid.UUID) -> str:
    services.message_delete_for_user(user=user, conversation_id=conversation_id, message_id=message_id)
    return _thread_frame(user, conversation_id)


def _final_from_row(user: Any, conversation_id: int, mid: Any) -> str:
    m = selectors.message_in_conversation(user=user, conversation_id=conversation_id, message_id=mid)
    return frames.final(frames.MessageView.from_row(m)) if m else ""


# ---- the consumer ---------------------------------------------------------------------------


class ConversationConsumer(AsyncWebsocketConsumer):
    """One browser tab watching and driving one conversation."""

    conversation_id: int
    user: Any
    subscriber: Subscriber | None = None

    async def connect(self) -> None:
        self.subscriber = None
        self.user = self.scope.get("user")
        self.errors_shown = False
        await self.accept()
        if not self.user or not self.user.is_authenticated:
            await self.close(code=4401)
            return
        try:
            conversation = await db.read(
                selectors.conversation_get_for_user,
                user=self.user, conversation_id=self.scope["url_route"]["kwargs"]["conversation_id"],
            )
        except Http404:
            await self.close(code=4404)
            return
        if conversation.kind != "chat" and type(self) is ConversationConsumer:  # a comparison: /ws/compare/
            await self.close(code=4404)
            return
        self.conversation_id = conversation.pk
        self.queue: asyncio.Queue[str | None] = asyncio.Queue()
        self.writer = asyncio.get_running_loop().create_task(self._write())
        self.subscriber = Subscriber(self.queue.put_nowait, self.user.pk, conversation.pk)
        self.remote = RemoteTurns(self.queue.put_nowait, self._ask_snapshot)
        self.owner_channels: dict[Any, str] = {}
        self.tasks: set[asyncio.Task[Any]] = set()
        # End this socket when its session ends (logout, password change, deactivation).
        self.session_key = getattr(self.scope.get("session"), "session_key", None) or ""
        await self.channel_layer.group_add(signals.user_group(self.user.pk), self.channel_name)
        if self.session_key:
            await self.channel_layer.group_add(signals.session_group(self.session_key), self.channel_name)
        if cluster.enabled:
            # Join the conversation's group before asking for snapshots (nothing is missed).
            await cluster.start()
            await self.channel_layer.group_add(conversation_group(conversation.pk), self.channel_name)
            await self.channel_layer.group_add(user_group(self.user.pk), self.channel_name)
        # Snapshot of every running turn of this conversation, registered in the same step.
        for frame in registry.watch(self.conversation_id, self.subscriber):
            self.queue.put_nowait(frame)
        if cluster.enabled:
            for mid, owner_channel in await db.read(
                selectors.streaming_elsewhere, conversation_id=self.conversation_id
            ):
                if mid not in registry.turns:
                    self.owner_channels[mid] = owner_channel
                    self.remote.want_snapshot(str(mid))
        # Turns left "streaming" by a dead process become "interrupted" (lazily, here).
        changed = await db.write(
            services.messages_mark_interrupted,
            stale_after_s=selectors.stale_after_s(), live_ids=registry.live_ids(), conversation_id=self.conversation_id,
        )
        if changed:
            await self._resync()
        # Answers left streaming by a process that died turn "interrupted" once their heartbeat
        # is stale: look again then, so a page opened right after a restart needs no reload.
        self.stale_watch = asyncio.get_running_loop().create_task(self._watch_stale())

    async def _watch_stale(self) -> None:
        while self.subscriber is not None:
            age = await db.read(selectors.oldest_orphan_heartbeat_age, conversation_id=self.conversation_id,
                                live_ids=registry.live_ids())
            if age is None:
                return
            await asyncio.sleep(max(0.0, selectors.stale_after_s() - age) + 0.5)
            changed = await db.write(
                services.messages_mark_interrupted, stale_after_s=selectors.stale_after_s(),
                live_ids=registry.live_ids(), conversation_id=self.conversation_id,
            )
            if changed and self.subscriber is not None:
                await self._resync()

    async def _resync(self) -> None:
        """Send the whole thread again, then a fresh snapshot (and cursor) for every running turn
        of this conversation, so the page is current and the offsets stay exact. For a page that
        may have missed frames; an answer shown as streaming that ended meanwhile gets its row."""
        frame, streaming = await db.read(_thread_and_streaming, self.user, self.conversation_id)
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
            html = await db.read(_final_from_row, self.user, self.conversation_id, mid)
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
            for task in list(getattr(self, "tasks", ())):
                task.cancel()
            await self.channel_layer.group_discard(signals.user_group(self.user.pk), self.channel_name)
            if self.session_key:
                await self.channel_layer.group_discard(signals.session_group(self.session_key), self.channel_name)
            if cluster.enabled:
                await self.channel_layer.group_discard(conversation_group(self.conversation_id), self.channel_name)
                await self.channel_layer.group_discard(user_group(self.user.pk), self.channel_name)

    # -- turns of other processes (channel layer; see chat.cluster) ------------------------
    def _ask_snapshot(self, mid: Any) -> None:
        owner = self.owner_channels.get(mid)

        async def ask() -> None:
            channel = owner or await db.read(selectors.message_owner_channel, message_id=mid)
            if channel:
                await cluster.send_to_owner(channel, {
                    "type": "turn.snapshot.request", "mid": str(mid), "reply": self.channel_name,
                })

        self._spawn(ask())

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
        html = await db.read(_final_from_row, self.user, self.conversation_id, event["mid"])
        if html:
            self.queue.put_nowait(html)

    async def user_notice(self, event: dict[str, Any]) -> None:
        if (
            self.subscriber is not None
            and event.get("origin") != services.PROCESS_ID
            and event.get("conversation_id") != self.conversation_id
        ):
            self.queue.put_nowait(event["html"])

    # -- the session ended (chat.signals) ---------------------------------------------------
    async def auth_revoke(self, event: dict[str, Any]) -> None:
        """Logged out, deactivated or deleted: this socket may do nothing more."""
        if self.subscriber is not None:
            await self.disconnect(4401)
        await self.close(code=4401)

    async def auth_check(self, event: dict[str, Any]) -> None:
        """The user's password changed: every socket of the user closes with 1012 ("reconnect");
        the page reconnects at once, and the handshake lets in only a browser whose session is
        still valid (the one that changed the password); the others get 4401."""
        if self.subscriber is not None:
            await self.disconnect(1012)
        await self.close(code=1012)

    async def team_revoke(self, event: dict[str, Any]) -> None:
        """A team removed this user (``chat.teams.services.member_remove``): their running turns
        on its endpoints stop now; the next send on one is refused by the turn plan."""
        if registry.stop_user_endpoints(self.user.pk, frozenset(map(str, event.get("endpoint_ids") or ()))):
            self.notice("Stopped: you were removed from the team that shares this endpoint.")

    # -- frames out ------------------------------------------------------------------------
    def notice(self, text: str, level: str = "error") -> None:
        if self.subscriber is not None:
            self.queue.put_nowait(frames.notice(text, level=level))

    def broadcast(self, frame: str) -> None:
        """Push a frame to every tab watching this conversation (this one included)."""
        for sub in list(registry.watchers.get(self.conversation_id, ())):
            sub.push(frame)

    def field_errors(self, errors: dict[str, list[str]]) -> str:
        """Spans putting each settings field's message next to it, or clearing the messages of
        the last refused action (nothing when none are shown)."""
        if errors:
            self.errors_shown = True
            return frames.field_errors(errors, SETTINGS_FIELDS)
        if self.errors_shown:
            self.errors_shown = False
            return frames.field_errors({}, SETTINGS_FIELDS)
        return ""

    def refuse(self, refusal: TurnRefused) -> None:
        frame = self.field_errors(refusal.field_errors) + frames.notice(refusal.message, level="error")
        self.queue.put_nowait(frame)
        if refusal.resync:  # a repeated or queued send: the page may lack the turn
            self._spawn(self._resync())

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    # -- frames in -------------------------------------------------------------------------
    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if self.subscriber is None:
            return
        try:
            data = json.loads(text_data or "")
            if not isinstance(data, dict):
                raise ValueError
        except (ValueError, RecursionError):
            self.notice("Malformed frame.")
            return
        data.pop("HEADERS", None)
        data = valid_data(data)  # lone surrogates from JSON escapes never reach a row
        handler = self.handlers().get(str(data.get("action", "send")))
        if handler is None:
            self.notice(self.unknown_action)
            return
        await handler(data)

    #: The notice for an action this page does not take.
    unknown_action = "Unknown action."

    def handlers(self) -> dict[str, Any]:
        """Action name (the frame's ``action``, default ``send``) → async handler(data)."""
        return {
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
        }

    def _admissible(self) -> bool:
        if not registry.admission.can_queue(self.user.pk):
            self.notice(BUSY)
            return False
        return True

    async def _prepare(self, fn: Any, data: dict[str, Any], **kwargs: Any) -> Prepared | str | None:
        """Run a sync preparation in a reader thread; a refusal becomes frames, nothing written."""
        try:
            result = await db.read(
                fn, user=self.user, conversation_id=self.conversation_id, data=data, live=registry.live_ids(), **kwargs
            )
        except TurnRefused as refusal:
            self.refuse(refusal)
            return None
        clear = self.field_errors({})
        if clear:
            self.queue.put_nowait(clear)
        return result

    async def handle_send(self, data: dict[str, Any]) -> None:
        runs = data.get("mode") != "append" and data.get("role", "user") in ("user", "assistant", "", None)
        if runs and not self._admissible():
            return
        result = await self._prepare(prepare_send, data)
        if isinstance(result, str):
            self.broadcast(result)
        elif result is not None:
            await self._launch(result)

    async def handle_regenerate(self, data: dict[str, Any], *, keep_text: bool = False) -> None:
        if not self._admissible():
            return
        result = await self._prepare(prepare_regenerate, data, keep_text=keep_text)
        if isinstance(result, Prepared):
            await self._launch(result)

    async def handle_continue(self, data: dict[str, Any]) -> None:
        await self.handle_regenerate(data, keep_text=True)

    async def handle_edit(self, data: dict[str, Any]) -> None:
        if data.get("resend") and not self._admissible():
            return
        result = await self._prepare(prepare_edit, data)
        if isinstance(result, str):
            self.broadcast(result)
        elif result is not None:
            await self._launch(result)

    async def handle_tool_result(self, data: dict[str, Any]) -> None:
        if not self._admissible():
            return
        result = await self._prepare(prepare_tool_result, data)
        if isinstance(result, Prepared):
            await self._launch(result)

    async def handle_sync(self, data: dict[str, Any]) -> None:
        """A page (re)connected: ``streaming`` lists the answers it shows as running, ``turn_id``
        a send it has not seen come back. When one of those answers runs nowhere any more (it
        ended while the page had no socket) or that send did arrive, the page gets the thread
        again (:meth:`_resync`)."""
        for mid in _uuids(data.get("gap"))[:20]:  # the page missed a delta: a fresh snapshot
            turn = registry.turns.get(mid)
            if turn is not None and turn.spec.conversation_id == self.conversation_id and self.subscriber:
                self.queue.put_nowait(turn.subscribe(self.subscriber))
            elif str(mid) in self.remote.turns:
                self.remote.want_snapshot(str(mid))
        shown = _uuids(data.get("streaming"))
        pending = _uuids(data.get("turn_id"))[:1]
        gone = [m for m in shown if m not in registry.turns and str(m) not in self.remote.turns]
        if gone or (pending and await db.read(selectors.turn_exists, conversation_id=self.conversation_id,
                                               turn_id=pending[0])):
            await self._resync()

    def _message_id(self, data: dict[str, Any], verb: str) -> uuid.UUID | None:
        form = TurnActionForm(data)
        if not form.is_valid():
            self.notice(f"Not {verb}: bad message id.")
            return None
        return form.cleaned_data["message_id"]

    async def handle_stop(self, data: dict[str, Any]) -> None:
        mid = self._message_id(data, "stopped")
        if mid is None:
            return
        turn = registry.turns.get(mid)
        if turn is not None and turn.spec.conversation_id == self.conversation_id and turn.spec.user_id == self.user.pk:
            registry.stop(mid)
            return
        channel = await db.read(selectors.message_owner_channel, message_id=mid, user=self.user,
                                conversation_id=self.conversation_id)
        if channel is None:
            self.notice("Not stopped: no such message.")
        elif cluster.enabled and channel:
            # Running in another process: Stop goes to its owner's channel.
            await cluster.send_to_owner(channel, {"type": "turn.stop", "mid": str(mid)})

    async def handle_select(self, data: dict[str, Any]) -> None:
        mid = self._message_id(data, "shown")
        if mid is None:
            return
        try:
            frame = await database_sync_to_async(_select)(self.user, self.conversation_id, mid)
        except (Http404, ValueError):
            self.notice("No such message.")
            return
        self.broadcast(frame)

    async def handle_delete(self, data: dict[str, Any]) -> None:
        mid = self._message_id(data, "deleted")
        if mid is None:
            return
        try:
            frame = await database_sync_to_async(_delete)(self.user, self.conversation_id, mid)
        except Http404:
            self.notice("Not deleted: no such message.")
            return
        except ValueError as exc:
            self.notice(str(exc))
            return
        self.broadcast(frame)

    async def handle_count_tokens(self, data: dict[str, Any]) -> None:
        """Anthropic ``/messages/count_tokens`` for the conversation, the draft in the composer
        and the panel's settings. Runs in its own task: nothing upstream is awaited on the
        socket's receive path (a slow count never delays Stop)."""
        self._spawn(self._count_tokens(data))

    async def _count_tokens(self, data: dict[str, Any]) -> None:
        from chat.providers import get_adapter
        from chat.providers.http import get_client

        try:
            s = await db.read(_settings, self.user, data)
            endpoint_target, request = await db.read(
                selectors.turn_preview_request, user=self.user, conversation_id=self.conversation_id,
                settings=s or await db.read(selectors.conversation_settings, user=self.user,
                                            conversation_id=self.conversation_id),
                draft=str(data.get("content") or ""), role=str(data.get("role") or "user"),
            )
        except TurnRefused as refusal:
            self.refuse(refusal)
            return
        if not request.messages:
            self.notice("Nothing to count yet: type a message first.")
            return
        adapter = get_adapter(endpoint_target.api_style)
        if not hasattr(adapter, "count_tokens"):
            self.notice("Counting tokens needs an anthropic_messages endpoint (POST /messages/count_tokens).")
            return
        config = _config(endpoint_target, self.scope)
        try:
            n = await adapter.count_tokens(get_client(), config, request)
        except ProviderError as exc:
            self.notice(f"Count tokens failed: HTTP {exc.status or '—'} {exc.code or ''} {exc.message}")
            return
        except ValueError as exc:
            self.notice(str(exc))
            return
        self.notice(f"Input tokens (count_tokens): {n}", level="info")

    async def _launch(self, prepared: Prepared) -> None:
        """Start a planned turn now: its rows are written beside the upstream request."""
        plan = prepared.plan
        if registry.lane_running(plan.conversation_id, plan.lane_id) or registry.turn_id_running(plan.turn_id):
            # Another tab of this process started one between the plan and now.
            self.refuse(TurnRefused(selectors.BUSY))
            return
        # The URL is checked when the connection is made (the pinned transport resolves once,
        # checks every address and connects to the one it checked): no lookup here.
        config = _config(plan.target, self.scope)
        stream_fn = None
        a = plan.assistant
        spec = TurnSpec(
            message_id=a.id, conversation_id=plan.conversation_id, user_id=self.user.pk, config=config,
            request=plan.request, prompt_price_per_mtok=plan.prompt_price_per_mtok,
            completion_price_per_mtok=plan.completion_price_per_mtok, prefill=plan.prefill,
            conversation_title=plan.title, turn_id=a.turn_id, lane_id=plan.lane_id, plan=plan,
        )
        nav = {
            "sibling_index": getattr(a, "sibling_index", 0), "sibling_count": getattr(a, "sibling_count", 1),
            "prev_sibling_id": getattr(a, "prev_sibling_id", None),
        }
        registry.start(spec, announce=prepared.announce, stream_fn=stream_fn,  # None: the adapter
                       snapshot_meta={**a.settings_snapshot, "_nav": nav})


def _config(target: Any, scope: dict[str, Any]) -> EndpointConfig:
    """The adapter's config for a target; the built-in simulator (loopback) is allowed even
    when private addresses are refused."""
    return EndpointConfig(
        base_url=resolve_base_url(target.base_url, scope), api_key=target.api_key,
        extra_headers=target.extra_headers, api_style=target.api_style, stream_options=target.stream_options,
        allow_private=True if target.is_simulator else None,
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
