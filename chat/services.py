"""Writes, each in one transaction. Names are ``<entity>_<action>(*, …)``.

The turn runner calls the ``message_*`` functions through ``database_sync_to_async``; only ids
and plain values cross into async code.

May import: Django, chat.models, chat.selectors, chat.crypto.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.http import Http404
from django.utils import timezone

from chat import process, selectors
from chat.models import (
    SIMULATOR_BASE_URL,
    ApiStyle,
    Attachment,
    Conversation,
    Endpoint,
    Lane,
    Message,
    MessageStatus,
)

# This process's identity (owner of the turns it streams): chat.process.
PROCESS_ID = process.PROCESS_ID

# Vendor presets: name -> (base URL, API style). The simulator is added per user.
PRESETS: dict[str, tuple[str, str]] = {
    "SambaNova Cloud": ("https://api.sambanova.ai/v1", ApiStyle.OPENAI_CHAT),
    "Sansa": ("https://api.sansaml.com/v1", ApiStyle.OPENAI_CHAT),
    "OpenAI": ("https://api.openai.com/v1", ApiStyle.OPENAI_CHAT),
    "llama.cpp": ("http://127.0.0.1:8080/v1", ApiStyle.OPENAI_CHAT),
    "vLLM": ("http://127.0.0.1:8000/v1", ApiStyle.OPENAI_CHAT),
    "Ollama": ("http://127.0.0.1:11434/v1", ApiStyle.OPENAI_CHAT),
}
ENV_ENDPOINTS = {"SAMBANOVA_API_KEY": "SambaNova Cloud", "SANSA_API_KEY": "Sansa"}


# ---- users -------------------------------------------------------------------------------


def user_create(*, username: str, password: str, is_admin: bool = False) -> AbstractBaseUser:
    """Create a user with the built-in simulator endpoint. Admins are staff and superusers."""
    User = get_user_model()
    with transaction.atomic():
        if is_admin:
            user = User.objects.create_superuser(username=username, password=password, email="")
        else:
            user = User.objects.create_user(username=username, password=password)
        endpoint_create_simulator(user=user)
    return user


def user_create_first(*, username: str, password: str) -> AbstractBaseUser:
    """Create the first account (admin) on an empty database.

    Adds endpoints for ``SAMBANOVA_API_KEY`` / ``SANSA_API_KEY`` when set in the environment.
    Raises PermissionError when any user exists already.
    """
    User = get_user_model()
    with transaction.atomic():
        if User.objects.exists():
            raise PermissionError("The first account exists already.")
        user = user_create(username=username, password=password, is_admin=True)
        for var, preset in ENV_ENDPOINTS.items():
            key = os.environ.get(var, "").strip()
            if key:
                base_url, style = PRESETS[preset]
                endpoint_create(user=user, name=preset, base_url=base_url, api_style=style, api_key=key)
    return user


# ---- endpoints ---------------------------------------------------------------------------


def endpoint_create_simulator(*, user: AbstractBaseUser) -> Endpoint:
    """The built-in simulator endpoint (symbolic base URL resolved at call time)."""
    return Endpoint.objects.create(
        owner=user,
        name="Built-in simulator",
        base_url=SIMULATOR_BASE_URL,
        api_style=ApiStyle.OPENAI_CHAT,
        default_model="sim-reasoning",
    )


def endpoint_create(
    *,
    user: AbstractBaseUser,
    name: str,
    base_url: str,
    api_style: str = ApiStyle.OPENAI_CHAT,
    api_key: str = "",
    extra_headers: dict[str, str] | None = None,
    stream_options: bool = True,
    default_model: str = "",
    team: Any = None,
) -> Endpoint:
    """Create an endpoint; secrets are encrypted before the row is written. With ``team`` (a
    :class:`chat.models.Team` the caller checked ``user`` owns) the endpoint is the team's."""
    endpoint = Endpoint(
        owner=None if team is not None else user,
        team=team,
        name=name,
        base_url=base_url.rstrip("/"),
        api_style=api_style,
        stream_options=stream_options,
        default_model=default_model,
    )
    endpoint.set_api_key(api_key)
    endpoint.set_extra_headers(extra_headers or {})
    endpoint.save()
    return endpoint


def base_url_origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) of a base URL, lower-cased, with the scheme's default port filled
    in (``https://API.x.com/v1`` → ``("https", "api.x.com", 443)``). ``sim://builtin/v1`` is
    its own origin. An unparsable URL gives ``("", url, None)``: it matches only itself."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return ("", url, None)
    scheme = parts.scheme.lower()
    if port is None:
        port = {"http": 80, "https": 443}.get(scheme)
    return (scheme, (parts.hostname or "").lower(), port)


def endpoint_update(
    *,
    endpoint: Endpoint,
    name: str,
    base_url: str,
    api_style: str,
    api_key: str = "",
    extra_headers: dict[str, str] | None = None,
    stream_options: bool = True,
    default_model: str = "",
    clear_api_key: bool = False,
) -> bool:
    """Update an endpoint. An empty ``api_key`` keeps the stored key (write-only field);
    ``extra_headers=None`` keeps the stored headers, ``{}`` clears them.

    A key is bound to the scheme, host and port it was entered for: when the new base URL has
    another origin (:func:`base_url_origin`), the stored key and extra headers are removed
    unless new ones come with the same update, so they can never be sent to another host.
    Returns whether stored secrets were removed for that reason.
    """
    new_url = base_url.rstrip("/")
    moved = base_url_origin(endpoint.base_url) != base_url_origin(new_url)
    endpoint.name = name
    if endpoint.base_url != new_url:
        endpoint.models_cache = []
    endpoint.base_url = new_url
    endpoint.api_style = api_style
    endpoint.stream_options = stream_options
    endpoint.default_model = default_model
    dropped = False
    if api_key:
        endpoint.set_api_key(api_key)
    elif clear_api_key or moved:
        dropped = moved and bool(endpoint.api_key_encrypted) and not clear_api_key
        endpoint.set_api_key("")
    if extra_headers is not None:
        endpoint.set_extra_headers(extra_headers)
    elif moved and endpoint.extra_headers_encrypted:
        dropped = True
        endpoint.set_extra_headers({})
    endpoint.save()
    return dropped


def endpoint_delete(*, endpoint: Endpoint) -> None:
    """Delete an endpoint; conversations keep their messages and snapshots."""
    endpoint.delete()


def endpoint_set_models(*, endpoint_id: int, models: list[dict[str, Any]]) -> None:
    """Cache the model list from ``GET /models`` on the endpoint."""
    Endpoint.objects.filter(pk=endpoint_id).update(models_cache=models)


# ---- conversations -----------------------------------------------------------------------


def conversation_create(*, user: AbstractBaseUser, endpoint: Endpoint | None = None) -> Conversation:
    """A new, untitled conversation with one lane, using ``endpoint`` (or the user's first)."""
    if endpoint is None:
        endpoint = Endpoint.objects.filter(owner=user).order_by("id").first()
    with transaction.atomic():
        conversation = Conversation.objects.create(
            owner=user, endpoint=endpoint, model=endpoint.default_model if endpoint else ""
        )
        Lane.objects.create(conversation=conversation, position=0, endpoint=endpoint, model=conversation.model)
    return conversation


def conversation_create_like_last(*, user: AbstractBaseUser) -> Conversation:
    """A new conversation that starts with the endpoint, model, system prompt and parameters of
    the user's most recently active chat (``updated_at``), not the endpoint defaults. Only a chat
    the user sees in the sidebar counts (not a comparison or a prompt test-set run's chat) and only
    on an endpoint the user may still use (their own or a team's); otherwise
    :func:`conversation_create`."""
    last = (
        Conversation.objects.filter(
            owner=user, kind="chat",
            endpoint__in=selectors.endpoint_list_for_user(user=user).values("pk"),
        )
        .exclude(pk__in=selectors.prompt_run_conversation_ids(user=user))
        .only("endpoint", "model", "system_prompt", "params")
        .order_by("-updated_at", "-id")
        .first()
    )
    if last is None:
        return conversation_create(user=user)
    with transaction.atomic():
        conversation = Conversation.objects.create(
            owner=user, endpoint_id=last.endpoint_id, model=last.model,
            system_prompt=last.system_prompt, params=dict(last.params or {}),
        )
        Lane.objects.create(conversation=conversation, position=0, endpoint_id=last.endpoint_id, model=last.model)
    return conversation


def conversation_rename(*, conversation: Conversation, title: str) -> Conversation:
    """Rename; an empty title is refused (the sidebar hides untitled conversations). The
    conversation keeps its place in the sidebar: ``updated_at`` (the sidebar's order) is not
    touched by a rename."""
    title = title.strip()[:200]
    if not title:
        raise ValueError("A title cannot be empty.")
    Conversation.objects.filter(pk=conversation.pk).update(title=title)
    conversation.title = title
    return conversation


def conversation_delete(*, conversation: Conversation) -> None:
    conversation.delete()


title_from_message = selectors.title_from_message


# ---- turns -------------------------------------------------------------------------------


@dataclass(frozen=True)
class TurnStarted:
    """Ids created by a turn: the user message (if any) and one assistant message per lane."""

    user_message_id: uuid.UUID | None
    assistant_message_ids: tuple[uuid.UUID, ...]
    created: bool  # False when the turn id existed already (a duplicate send)


def _snapshot(endpoint: Endpoint, model: str, system_prompt: str, params: dict[str, Any]) -> dict[str, Any]:
    return endpoint.settings_snapshot(model, system_prompt, params)


class TurnCommitRefused(Exception):
    """The plan's rows could not be written: a repeated turn id, or an attachment that is no
    longer the user's to send. Nothing was written."""


def turn_commit(*, plan: Any) -> None:
    """Write a :class:`chat.selectors.TurnPlan` in one transaction: one INSERT of its rows, one
    UPDATE of the conversation (settings, title, leaf, ``updated_at``) and, when the plan has
    attachments, one UPDATE linking them to the user message.

    Raises TurnCommitRefused (and writes nothing) on a repeated turn id or when an attachment
    was sent meanwhile.
    """
    try:
        with transaction.atomic():
            Message.objects.bulk_create(list(plan.rows))
            Conversation.objects.filter(pk=plan.conversation_id).update(**plan.conversation_fields)
            if plan.attachment_ids:
                user_message = plan.user_message
                linked = Attachment.objects.filter(
                    pk__in=plan.attachment_ids, owner_id=plan.user_id, message__isnull=True
                ).update(message=user_message)
                if linked != len(plan.attachment_ids):
                    raise TurnCommitRefused("An attachment is missing or was sent already; attach it again.")
    except IntegrityError as exc:
        raise TurnCommitRefused("This message was sent already.") from exc


def turn_start(
    *,
    conversation: Conversation,
    turn_id: uuid.UUID,
    content: str,
    parent_id: uuid.UUID | None,
    endpoint: Endpoint,
    model: str,
    system_prompt: str,
    params: dict[str, Any],
    role: str = "user",
) -> TurnStarted:
    """Write a turn's rows and the conversation's settings in one transaction, without a plan
    (fixtures, imports; the chat plans its turns in ``chat.selectors.turn_plan_*``).

    ``role="user"``: a user message with ``content`` and its streaming answer. ``role=
    "assistant"``: only a streaming answer whose text starts with ``content`` (a prefill).
    Two writing statements: one INSERT for the rows, one UPDATE of the conversation. A repeated
    ``turn_id`` returns ``created=False`` and writes nothing.
    """
    lane_id = conversation.lanes.order_by("position").values_list("id", flat=True).first()
    now = timezone.now()
    rows: list[Message] = []
    user_msg = None
    answer_parent = parent_id
    if role == "user":
        user_msg = Message.new_user(conversation=conversation, parent_id=parent_id, turn_id=turn_id,
                                    content=content, created_at=now)
        rows.append(user_msg)
        answer_parent = user_msg.id
    assistant = Message.new_answer(
        conversation=conversation, lane_id=lane_id, parent_id=answer_parent, turn_id=turn_id,
        snapshot=_snapshot(endpoint, model, system_prompt, params), prefill="" if role == "user" else content,
        created_at=now + timedelta(microseconds=1),
    )
    rows.append(assistant)
    fields: dict[str, Any] = {
        "endpoint": endpoint, "model": model, "system_prompt": system_prompt,
        "params": params, "updated_at": now, "current_leaf_id": assistant.id,
    }
    if not conversation.title and role == "user":
        fields["title"] = title_from_message(content)
    try:
        with transaction.atomic():
            Message.objects.bulk_create(rows)  # one INSERT
            Conversation.objects.filter(pk=conversation.pk).update(**fields)
    except IntegrityError:
        return TurnStarted(None, (), created=False)
    return TurnStarted(user_msg.id if user_msg else None, (assistant.id,), created=True)


def message_append(*, conversation: Conversation, role: str, content: str, parent_id: uuid.UUID | None) -> Message:
    """Insert a message of any role (user, assistant, system) after ``parent_id`` without running
    a turn; it becomes the current leaf."""
    if role not in ("user", "assistant", "system"):
        raise ValueError("role must be user, assistant or system")
    now = timezone.now()
    with transaction.atomic():
        m = Message.objects.create(
            conversation=conversation, role=role, content=content, parent_id=parent_id,
            status=MessageStatus.COMPLETE, created_at=now,  # written by the user, not "edited"
            lane=conversation.lanes.order_by("position").first() if role == "assistant" else None,
        )
        fields: dict[str, Any] = {"updated_at": now, "current_leaf_id": m.id}
        if not conversation.title and role == "user":
            fields["title"] = title_from_message(content)
        Conversation.objects.filter(pk=conversation.pk).update(**fields)
    return m


def message_append_to_conversation(*, user: AbstractBaseUser, conversation_id: int, role: str, content: str) -> Message:
    """:func:`message_append` after the current leaf of the user's conversation. Raises Http404."""
    conversation = selectors.conversation_get_for_user(user=user, conversation_id=conversation_id)
    thread = selectors.conversation_thread(conversation=conversation)
    return message_append(conversation=conversation, role=role, content=content,
                          parent_id=thread[-1].pk if thread else None)


def message_edit_for_user(*, user: AbstractBaseUser, conversation_id: int, message_id: uuid.UUID, content: str) -> Message:
    """:func:`message_edit` of a message of the user's conversation. Raises ValueError (no such
    message, or still streaming)."""
    m = selectors.message_in_conversation(user=user, conversation_id=conversation_id, message_id=message_id)
    if m is None:
        raise ValueError("Not edited: no such message.")
    return message_edit(message=m, content=content)


def conversation_select_for_user(*, user: AbstractBaseUser, conversation_id: int, message_id: uuid.UUID) -> None:
    """Follow ``message_id``'s branch in the user's conversation. Raises Http404."""
    m = selectors.message_in_conversation(user=user, conversation_id=conversation_id, message_id=message_id)
    if m is None:
        raise Http404("No such message")
    conversation_select(conversation=m.conversation, message=m)


def message_delete_for_user(*, user: AbstractBaseUser, conversation_id: int, message_id: uuid.UUID) -> None:
    """Delete a message (and its subtree) of the user's conversation. Raises Http404, or
    ValueError while it streams."""
    m = selectors.message_in_conversation(user=user, conversation_id=conversation_id, message_id=message_id)
    if m is None:
        raise Http404("No such message")
    message_delete(message=m)


def message_edit(*, message: Message, content: str) -> Message:
    """Change a finished message's text in place (assistant answers, system and user messages
    alike); the next request sends exactly the edited history. Refused while streaming."""
    if message.status == MessageStatus.STREAMING:
        raise ValueError("This answer is still streaming; stop it first.")
    fields = ["content", "edited", "updated_at"]
    if message.role == "assistant" and content != message.content:
        # A hand-edited answer no longer has the completion the endpoint counted: its completion
        # token figures and tokens per second go (prompt tokens, timings and cost stay true).
        message.usage = {k: v for k, v in (message.usage or {}).items() if k in _USAGE_KEPT_ON_EDIT}
        message.metrics = {k: v for k, v in (message.metrics or {}).items() if k not in _METRICS_DROPPED_ON_EDIT}
        fields += ["usage", "metrics"]
    message.content = content
    message.edited = True
    message.save(update_fields=fields)
    return message


_USAGE_KEPT_ON_EDIT = frozenset({"prompt_tokens", "cached_tokens"})
_METRICS_DROPPED_ON_EDIT = frozenset({"tokens_per_sec", "upstream_tokens_per_sec"})


def message_delete(*, message: Message) -> None:
    """Delete a message and everything under it; the view falls back to its parent's branch."""
    if message.status == MessageStatus.STREAMING:
        raise ValueError("This answer is still streaming; stop it first.")
    conversation = message.conversation
    with transaction.atomic():
        parent_id = message.parent_id
        message.delete()
        Conversation.objects.filter(pk=conversation.pk).update(
            current_leaf_id=parent_id, updated_at=timezone.now()
        )


def conversation_select(*, conversation: Conversation, message: Message) -> None:
    """Follow ``message``'s branch (the 1/2 navigation): its newest descendant becomes the leaf."""
    from chat.selectors import message_newest_descendant

    leaf = message_newest_descendant(message=message)
    Conversation.objects.filter(pk=conversation.pk).update(current_leaf_id=leaf.id)


def conversation_fork(*, conversation: Conversation, upto: Message | None = None) -> Conversation:
    """Copy the active branch (up to ``upto``, inclusive) into a new conversation of the same owner."""
    from chat.selectors import conversation_thread

    thread = conversation_thread(conversation=conversation)
    if upto is not None:
        ids = [m.pk for m in thread]
        thread = thread[: ids.index(upto.pk) + 1] if upto.pk in ids else thread
    with transaction.atomic():
        fork = Conversation.objects.create(
            owner=conversation.owner, title=f"{conversation.title or 'Untitled'} (fork)"[:200],
            endpoint=conversation.endpoint, model=conversation.model,
            system_prompt=conversation.system_prompt, params=conversation.params,
        )
        lane = Lane.objects.create(conversation=fork, position=0, endpoint=fork.endpoint, model=fork.model)
        copies: list[Message] = []
        parent = None
        base = timezone.now()
        for i, m in enumerate(thread):
            status = m.status if m.status != MessageStatus.STREAMING else MessageStatus.INTERRUPTED
            copy = Message(
                id=uuid.uuid4(), conversation=fork, lane=lane if m.role == "assistant" else None,
                parent_id=parent, role=m.role, turn_id=uuid.uuid4(), content=m.content,
                reasoning=m.reasoning, status=status, finish_reason=m.finish_reason, usage=m.usage,
                usage_raw=m.usage_raw, metrics=m.metrics, error=m.error,
                settings_snapshot=m.settings_snapshot, edited=m.edited, prefill_len=m.prefill_len,
                created_at=base + timedelta(microseconds=i),
            )
            copies.append(copy)
            parent = copy.id
        Message.objects.bulk_create(copies)
        if copies:
            Conversation.objects.filter(pk=fork.pk).update(current_leaf_id=copies[-1].id)
    return fork


def message_save_partial(*, message_id: uuid.UUID, content: str, reasoning: str) -> bool:
    """Save a running turn's text so far; doubles as its heartbeat.

    Conditional and forward-only: only while the row is ``streaming`` and only when the stored
    text is not longer than the new one, so a late partial save can never overwrite the final
    row. One UPDATE statement. Returns whether a row was updated.
    """
    from django.db.models.functions import Length

    updated = (
        Message.objects.annotate(_clen=Length("content"), _rlen=Length("reasoning"))
        .filter(pk=message_id, status=MessageStatus.STREAMING, _clen__lte=len(content), _rlen__lte=len(reasoning))
        .update(content=content, reasoning=reasoning, heartbeat_at=timezone.now())
    )
    return bool(updated)


def message_complete(
    *,
    message_id: uuid.UUID,
    status: str,
    content: str,
    reasoning: str,
    finish_reason: str,
    usage: dict[str, Any],
    usage_raw: dict[str, Any],
    metrics: dict[str, Any],
    error: dict[str, Any],
    inspect: dict[str, Any],
    tool_calls: list[dict[str, str]] | None = None,
    reasoning_signature: str = "",
    logprobs: list[dict[str, Any]] | None = None,
    replay_blocks: list[dict[str, Any]] | None = None,
) -> bool:
    """Write a turn's final row once (one UPDATE), only if it is still ``streaming``.
    ``replay_blocks``: dialect blocks sent back unchanged in later requests (Anthropic
    ``redacted_thinking``)."""
    updated = Message.objects.filter(pk=message_id, status=MessageStatus.STREAMING).update(
        status=status,
        content=content,
        reasoning=reasoning,
        finish_reason=finish_reason or "",
        usage=usage,
        usage_raw=usage_raw,
        metrics=metrics,
        error=error,
        inspect=inspect,
        tool_calls=tool_calls or [],
        reasoning_signature=reasoning_signature,
        logprobs=logprobs or [],
        replay_blocks=replay_blocks or [],
        heartbeat_at=timezone.now(),
        **Message.usage_figures(usage, metrics),  # the usage page's number columns, same UPDATE
    )
    return bool(updated)


def message_fail(*, message_id: uuid.UUID, error: dict[str, Any], content: str, reasoning: str) -> bool:
    """Last resort after a failed final write: store status ``error`` with ``error`` and the
    text (made encodable: anything UTF-8 cannot carry becomes U+FFFD), only while the row is
    ``streaming``. One UPDATE."""
    def clean(text: str) -> str:
        return text.encode("utf-8", "replace").decode("utf-8")

    return bool(
        Message.objects.filter(pk=message_id, status=MessageStatus.STREAMING).update(
            status=MessageStatus.ERROR, error=error, content=clean(content), reasoning=clean(reasoning),
            heartbeat_at=timezone.now(),
        )
    )


def messages_mark_interrupted(
    *,
    stale_after_s: float = 10.0,
    live_ids: frozenset[uuid.UUID] | set[uuid.UUID] = frozenset(),
    conversation_id: int | None = None,
) -> int:
    """Mark dead turns ``interrupted`` (partial text kept, can be retried). Returns rows changed.

    Dead means: owned by this process but not running in it (``live_ids``), or owned by another
    process whose heartbeat (partial save, every ``PLAYGROUND_PARTIAL_SAVE_S``) is older than
    ``stale_after_s``. A live turn of another process is never touched. One UPDATE.
    """
    cutoff = timezone.now() - timedelta(seconds=stale_after_s)
    qs = Message.objects.filter(status=MessageStatus.STREAMING)
    if conversation_id is not None:
        qs = qs.filter(conversation_id=conversation_id)
    # This process's rows: dead when not running here, after a short grace (a turn's rows are
    # written a moment before it is registered, so a tab connecting in between must not mark it).
    grace = timezone.now() - timedelta(seconds=min(stale_after_s, 5.0))
    mine_dead = Q(owner_process=process.PROCESS_ID) & ~Q(pk__in=list(live_ids)) & Q(heartbeat_at__lt=grace)
    theirs_stale = ~Q(owner_process=process.PROCESS_ID) & (Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True))
    dead = qs.filter(mine_dead | theirs_stale)
    if not dead.exists():  # the usual case: a read, not a write
        return 0
    return dead.update(
        status=MessageStatus.INTERRUPTED,
        error={"message": "The server stopped while this answer was streaming; the text so far is kept.",
               "code": "interrupted"},
    )


def message_heartbeat(*, message_id: uuid.UUID) -> bool:
    """Touch a streaming turn's heartbeat when no new text arrived (a long wait for the first
    token must not look like a dead turn). One UPDATE, only while ``streaming``."""
    return bool(
        Message.objects.filter(pk=message_id, status=MessageStatus.STREAMING).update(heartbeat_at=timezone.now())
    )


# ---- attachments -------------------------------------------------------------------------


class AttachmentRefused(ValueError):
    """An upload refused by a limit; ``str()`` is the message shown in its chip."""


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


def attachment_create(
    *, user: AbstractBaseUser, kind: str, media_type: str, filename: str, data: bytes = b"", url: str = ""
) -> Attachment:
    """Store an upload (``data``) or an image URL (``url``) not yet sent with a message.

    Limits (settings): uploads waiting to be sent count as the next message's attachments, so
    at most ``PLAYGROUND_MAX_ATTACHMENTS_PER_MESSAGE`` of them and
    ``PLAYGROUND_MAX_ATTACHMENT_BYTES_PER_MESSAGE`` bytes; all of a user's attachments together
    at most ``PLAYGROUND_ATTACHMENT_QUOTA_BYTES``. Raises :class:`AttachmentRefused` with the
    reason. The check and the insert run in one transaction with the user's row locked, so two
    uploads at once cannot both slip under a limit.
    """
    from django.conf import settings
    from django.db.models import Count, Sum

    size = len(data)
    with transaction.atomic():
        get_user_model().objects.select_for_update().filter(pk=user.pk).first()
        mine = Attachment.objects.filter(owner=user)
        pending = mine.filter(message__isnull=True).aggregate(n=Count("id"), b=Sum("size"))
        cap = settings.PLAYGROUND_MAX_ATTACHMENTS_PER_MESSAGE
        if pending["n"] + 1 > cap:
            raise AttachmentRefused(
                f"{filename}: {pending['n']} attachments are waiting to be sent and a message takes "
                f"at most {cap}; send them or remove some first."
            )
        cap_bytes = settings.PLAYGROUND_MAX_ATTACHMENT_BYTES_PER_MESSAGE
        waiting = pending["b"] or 0
        if waiting + size > cap_bytes:
            raise AttachmentRefused(
                f"{filename} ({_mb(size)}) does not fit: {_mb(waiting)} are waiting to be sent and a "
                f"message takes at most {_mb(cap_bytes)} of attachments."
            )
        quota = settings.PLAYGROUND_ATTACHMENT_QUOTA_BYTES
        used = mine.aggregate(b=Sum("size"))["b"] or 0
        if used + size > quota:
            raise AttachmentRefused(
                f"{filename} ({_mb(size)}) is over your attachment quota: {_mb(used)} of "
                f"{_mb(quota)} used. Delete conversations with attachments to free space."
            )
        return Attachment.objects.create(
            owner=user, kind=kind, media_type=media_type, filename=filename[:255], url=url[:2000],
            data=data, size=size,
        )


def attachment_delete_unsent(*, user: AbstractBaseUser, attachment_id: Any) -> bool:
    """Delete one of ``user``'s uploads not yet sent with a message (its chip was removed).
    Returns whether a row was deleted; sent attachments are never touched."""
    try:
        deleted, _ = Attachment.objects.filter(pk=attachment_id, owner=user, message__isnull=True).delete()
    except (ValueError, ValidationError):
        return False
    return bool(deleted)


def attachments_delete_orphans(*, older_than: timedelta) -> int:
    """Delete uploads never sent with a message and older than ``older_than`` (every user).
    Returns how many were deleted. Run by ``manage.py attachments_cleanup`` and on upload."""
    cutoff = timezone.now() - older_than
    deleted, _ = Attachment.objects.filter(message__isnull=True, created_at__lt=cutoff).delete()
    return deleted


ORPHAN_SWEEP_EVERY_S = 600.0
_last_orphan_sweep: float | None = None


def attachments_delete_orphans_now_and_then() -> int | None:
    """:func:`attachments_delete_orphans` with ``PLAYGROUND_ORPHAN_ATTACHMENT_HOURS``, at most
    once per :data:`ORPHAN_SWEEP_EVERY_S` seconds per process (uploads call it). Returns the
    count, or None when it was not its turn."""
    import time

    from django.conf import settings

    global _last_orphan_sweep
    now = time.monotonic()
    if _last_orphan_sweep is not None and now - _last_orphan_sweep < ORPHAN_SWEEP_EVERY_S:
        return None
    _last_orphan_sweep = now
    return attachments_delete_orphans(older_than=timedelta(hours=settings.PLAYGROUND_ORPHAN_ATTACHMENT_HOURS))
