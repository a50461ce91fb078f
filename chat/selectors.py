"""Reads, always scoped to a user. Every permission-checked fetch is ``<entity>_get_for_user``.

May import: Django, chat.models.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Q, QuerySet
from django.http import Http404

from chat.models import Conversation, Endpoint, Message


def endpoint_list_for_user(*, user: AbstractBaseUser) -> QuerySet[Endpoint]:
    """Endpoints the user owns, by name."""
    return Endpoint.objects.filter(owner=user).order_by("name", "id")


def endpoint_get_for_user(*, user: AbstractBaseUser, endpoint_id: int | str) -> Endpoint:
    """The endpoint if ``user`` owns it. Raises Http404 otherwise (no existence leak)."""
    try:
        return Endpoint.objects.get(pk=int(endpoint_id), owner=user)
    except (Endpoint.DoesNotExist, ValueError, TypeError) as exc:
        raise Http404("No such endpoint") from exc


def conversation_list_for_user(*, user: AbstractBaseUser, query: str = "") -> QuerySet[Conversation]:
    """The user's conversations that have messages, newest first; ``query`` searches titles and text."""
    qs = Conversation.objects.filter(owner=user).exclude(title="")
    if query:
        qs = qs.filter(Q(title__icontains=query) | Q(messages__content__icontains=query)).distinct()
    return qs.order_by("-updated_at", "-id")


def conversation_get_for_user(*, user: AbstractBaseUser, conversation_id: int | str) -> Conversation:
    """The conversation if ``user`` owns it. Raises Http404 otherwise."""
    try:
        return Conversation.objects.select_related("endpoint").get(pk=int(conversation_id), owner=user)
    except (Conversation.DoesNotExist, ValueError, TypeError) as exc:
        raise Http404("No such conversation") from exc


def message_get_for_user(*, user: AbstractBaseUser, message_id: int | str) -> Message:
    """The message if its conversation belongs to ``user``. Raises Http404 otherwise."""
    try:
        return Message.objects.select_related("conversation").get(
            pk=int(message_id), conversation__owner=user
        )
    except (Message.DoesNotExist, ValueError, TypeError) as exc:
        raise Http404("No such message") from exc


@dataclass(frozen=True)
class ThreadItem:
    """One message on the active branch plus how many siblings it has (for 1/2 navigation)."""

    message: Message
    sibling_index: int
    sibling_count: int


def conversation_thread(*, conversation: Conversation) -> list[Message]:
    """The active branch, root to leaf: at each step the newest child is followed.

    Returns messages in order; assistant messages of every status are included (the view shows
    errors and stopped answers in place).
    """
    messages = list(Message.objects.filter(conversation=conversation).order_by("created_at", "id"))
    children: dict[int | None, list[Message]] = {}
    for m in messages:
        children.setdefault(m.parent_id, []).append(m)
    thread: list[Message] = []
    current: int | None = None
    while current in children or (current is None and None in children):
        kids = children.get(current)
        if not kids:
            break
        chosen = kids[-1]
        thread.append(chosen)
        current = chosen.pk
    return thread
