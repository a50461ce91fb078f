"""Writes, each in one transaction. Names are ``<entity>_<action>(*, …)``.

The turn runner calls the ``message_*`` functions through ``database_sync_to_async``; only ids
and plain values cross into async code.

May import: Django, chat.models, chat.selectors, chat.crypto.
"""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from chat.models import (
    SIMULATOR_BASE_URL,
    ApiStyle,
    Conversation,
    Endpoint,
    Lane,
    Message,
    MessageStatus,
)

PROCESS_ID = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"

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
) -> Endpoint:
    """Create an endpoint; secrets are encrypted before the row is written."""
    endpoint = Endpoint(
        owner=user,
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
) -> Endpoint:
    """Update an endpoint. An empty ``api_key`` keeps the stored key (write-only field);
    ``extra_headers=None`` keeps the stored headers, ``{}`` clears them."""
    endpoint.name = name
    if endpoint.base_url != base_url.rstrip("/"):
        endpoint.models_cache = []
    endpoint.base_url = base_url.rstrip("/")
    endpoint.api_style = api_style
    endpoint.stream_options = stream_options
    endpoint.default_model = default_model
    if api_key:
        endpoint.set_api_key(api_key)
    elif clear_api_key:
        endpoint.set_api_key("")
    if extra_headers is not None:
        endpoint.set_extra_headers(extra_headers)
    endpoint.save()
    return endpoint


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


def conversation_rename(*, conversation: Conversation, title: str) -> Conversation:
    """Rename; an empty title is refused (the sidebar hides untitled conversations)."""
    title = title.strip()[:200]
    if not title:
        raise ValueError("A title cannot be empty.")
    conversation.title = title
    conversation.save(update_fields=["title", "updated_at"])
    return conversation


def conversation_delete(*, conversation: Conversation) -> None:
    conversation.delete()


def title_from_message(text: str, limit: int = 60) -> str:
    """A conversation title from the first user message: first line, at most ``limit`` chars."""
    line = " ".join(text.strip().split())
    if len(line) <= limit:
        return line or "Untitled"
    cut = line[:limit].rsplit(" ", 1)[0]
    return (cut or line[:limit]) + "…"


# ---- turns -------------------------------------------------------------------------------


@dataclass(frozen=True)
class TurnStarted:
    """Ids created by :func:`turn_start`: the user message and one assistant message per lane."""

    user_message_id: uuid.UUID | None
    assistant_message_ids: tuple[uuid.UUID, ...]
    created: bool  # False when the turn id existed already (a duplicate send)


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
) -> TurnStarted:
    """Write the user message and the streaming assistant message in one transaction.

    Two writing statements: one INSERT for both messages (UUID keys made here), one UPDATE of
    the conversation's settings, title (first message) and ``updated_at``; no lane write. With
    the final :func:`message_complete` a turn costs 3 writes plus its partial saves. A repeated
    ``turn_id`` returns ``created=False`` and writes nothing.
    """
    lane = conversation.lanes.order_by("position").first()
    snapshot = {
        "endpoint_id": endpoint.pk,
        "endpoint_name": endpoint.name,
        "api_style": endpoint.api_style,
        "base_url": endpoint.base_url,
        "model": model,
        "system_prompt": system_prompt,
        "params": params,
    }
    now = timezone.now()
    user_msg = Message(
        id=uuid.uuid4(), conversation=conversation, lane=None, parent_id=parent_id, role="user",
        turn_id=turn_id, content=content, status=MessageStatus.COMPLETE, created_at=now,
    )
    assistant = Message(
        id=uuid.uuid4(), conversation=conversation, lane=lane, parent_id=user_msg.id, role="assistant",
        turn_id=turn_id, status=MessageStatus.STREAMING, settings_snapshot=snapshot,
        owner_process=PROCESS_ID, heartbeat_at=now, created_at=now + timedelta(microseconds=1),
    )
    fields: dict[str, Any] = {
        "endpoint": endpoint, "model": model, "system_prompt": system_prompt,
        "params": params, "updated_at": now,
    }
    if not conversation.title:
        fields["title"] = title_from_message(content)
    try:
        with transaction.atomic():
            Message.objects.bulk_create([user_msg, assistant])  # one INSERT, two rows
            Conversation.objects.filter(pk=conversation.pk).update(**fields)
    except IntegrityError:
        return TurnStarted(None, (), created=False)
    return TurnStarted(user_msg.pk, (assistant.pk,), created=True)


def turn_retry(*, failed: Message) -> Message:
    """A new streaming assistant message beside ``failed`` (same parent), made with the
    conversation's current settings snapshot. Two writing statements."""
    conversation = failed.conversation
    endpoint = conversation.endpoint
    snapshot = dict(failed.settings_snapshot)
    if endpoint is not None:
        snapshot.update(
            endpoint_id=endpoint.pk, endpoint_name=endpoint.name, api_style=endpoint.api_style,
            base_url=endpoint.base_url, model=conversation.model,
            system_prompt=conversation.system_prompt, params=conversation.params,
        )
    now = timezone.now()
    with transaction.atomic():
        message = Message.objects.create(
            conversation=conversation, lane=failed.lane, parent_id=failed.parent_id, role="assistant",
            turn_id=uuid.uuid4(), status=MessageStatus.STREAMING, settings_snapshot=snapshot,
            owner_process=PROCESS_ID, heartbeat_at=now,
        )
        Conversation.objects.filter(pk=conversation.pk).update(updated_at=now)
    return message


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
) -> bool:
    """Write a turn's final row once (one UPDATE), only if it is still ``streaming``."""
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
        heartbeat_at=timezone.now(),
    )
    return bool(updated)


def messages_mark_interrupted(*, stale_after_s: float = 30.0) -> int:
    """Mark turns whose heartbeat is stale as ``interrupted`` (partial text kept).

    Live turns of this process are skipped; another process's turn is touched only when its
    heartbeat is older than ``stale_after_s``. Returns the number of rows changed.
    """
    cutoff = timezone.now() - timedelta(seconds=stale_after_s)
    return (
        Message.objects.filter(status=MessageStatus.STREAMING)
        .filter(Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True))
        .exclude(owner_process=PROCESS_ID)
        .update(
            status=MessageStatus.INTERRUPTED,
            error={"message": "The server stopped while this answer was streaming.", "code": "interrupted"},
        )
    )
