"""Reads, always scoped to a user. Every permission-checked fetch is ``<entity>_get_for_user``.

May import: Django, chat.models.
"""

from __future__ import annotations

from typing import Any

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


def conversation_empty_for_user(*, user: AbstractBaseUser) -> Conversation | None:
    """The user's newest conversation with no title and no messages (a new chat), or None."""
    return (
        Conversation.objects.filter(owner=user, title="", messages__isnull=True)
        .order_by("-id")
        .first()
    )


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


def _children_map(conversation: Conversation) -> tuple[dict[Any, list[Message]], dict[Any, Message]]:
    messages = list(Message.objects.filter(conversation=conversation).order_by("created_at", "id"))
    children: dict[Any, list[Message]] = {}
    for m in messages:
        children.setdefault(m.parent_id, []).append(m)
    return children, {m.pk: m for m in messages}


def _newest_descendant(children: dict[Any, list[Message]], m: Message) -> Message:
    while children.get(m.pk):
        m = children[m.pk][-1]
    return m


def conversation_thread(*, conversation: Conversation) -> list[Message]:
    """The active branch, root to leaf.

    The path to ``conversation.current_leaf`` (when set and present), continued through the
    newest child at each step; without a leaf, the newest root and newest children. Each
    message gets ``sibling_index`` (0-based), ``sibling_count``, ``prev_sibling_id`` and
    ``next_sibling_id`` attributes for the 1/2 navigation.
    """
    children, by_id = _children_map(conversation)
    if not by_id:
        return []
    leaf = by_id.get(conversation.current_leaf_id) if conversation.current_leaf_id else None
    if leaf is None:
        leaf = _newest_descendant(children, children[None][-1]) if children.get(None) else None
        if leaf is None:
            return []
    else:
        leaf = _newest_descendant(children, leaf)
    path: list[Message] = []
    node: Message | None = leaf
    while node is not None:
        path.append(node)
        node = by_id.get(node.parent_id) if node.parent_id else None
    path.reverse()
    for m in path:
        siblings = children.get(m.parent_id, [])
        i = next(k for k, x in enumerate(siblings) if x.pk == m.pk)
        m.sibling_index = i
        m.sibling_count = len(siblings)
        m.prev_sibling_id = siblings[i - 1].pk if i > 0 else None
        m.next_sibling_id = siblings[i + 1].pk if i + 1 < len(siblings) else None
    return path


def message_newest_descendant(*, message: Message) -> Message:
    """The newest leaf under ``message`` (itself when it has no children)."""
    children, _ = _children_map(message.conversation)
    return _newest_descendant(children, message)
