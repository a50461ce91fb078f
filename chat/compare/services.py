"""Writes of comparisons: create, lanes (add, remove, duplicate, move, settings), votes.

Callers pass objects fetched through :mod:`chat.compare.selectors` (ownership checked there);
lane ids given with a comparison are checked to belong to it here. Turns are written by
:func:`chat.services.turn_commit` from the plans of :mod:`chat.compare.selectors`.

May import: Django, chat.models, chat.compare.selectors, chat.selectors.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import F

from chat.compare.selectors import MAX_LANES, MIN_LANES
from chat.models import Conversation, Lane, Message, MessageStatus, Vote
from chat.selectors import NextTurnSettings, endpoint_list_for_user


class LaneRefused(ValueError):
    """A lane change that would break the 2–6 lanes rule, or a lane not in the comparison."""


def compare_create(*, user: AbstractBaseUser, lanes: list[NextTurnSettings] | None = None, blind: bool = False) -> Conversation:
    """A new comparison with the given lanes (default: two lanes on the user's first endpoint
    and its default model). ``lanes`` beyond :data:`MAX_LANES` are dropped."""
    if not lanes:
        endpoint = endpoint_list_for_user(user=user).order_by("id").first()
        model = endpoint.default_model if endpoint else ""
        s = NextTurnSettings(endpoint.pk if endpoint else None, model, "", {})
        lanes = [s, s]
    with transaction.atomic():
        conversation = Conversation.objects.create(owner=user, kind="compare", blind=blind)
        Lane.objects.bulk_create([
            Lane(conversation=conversation, position=i, endpoint_id=s.endpoint_id, model=s.model,
                 system_prompt=s.system_prompt, params=s.params)
            for i, s in enumerate(lanes[:MAX_LANES])
        ])
    return conversation


def _renumber(conversation: Conversation, ordered: list[Lane]) -> None:
    # Two steps so the unique (conversation, position) never collides mid-update.
    Lane.objects.filter(conversation=conversation).update(position=F("position") + 100)
    for i, lane in enumerate(ordered):
        Lane.objects.filter(pk=lane.pk).update(position=i)


def _lane(conversation: Conversation, lane_id: Any) -> Lane:
    try:
        return Lane.objects.get(pk=int(lane_id), conversation=conversation)
    except (Lane.DoesNotExist, ValueError, TypeError) as exc:
        raise LaneRefused("No such lane.") from exc


def lane_add(*, conversation: Conversation, copy_of: Any = None) -> Lane:
    """Append a lane (a copy of lane ``copy_of`` when given: Duplicate; else of the last lane).
    Raises LaneRefused beyond :data:`MAX_LANES`."""
    with transaction.atomic():
        lanes = list(Lane.objects.select_for_update().filter(conversation=conversation).order_by("position"))
        if len(lanes) >= MAX_LANES:
            raise LaneRefused(f"A comparison has at most {MAX_LANES} lanes.")
        src = _lane(conversation, copy_of) if copy_of is not None else (lanes[-1] if lanes else None)
        lane = Lane.objects.create(
            conversation=conversation, position=(lanes[-1].position + 1) if lanes else 0,
            endpoint_id=src.endpoint_id if src else None, model=src.model if src else "",
            system_prompt=src.system_prompt if src else "", params=dict(src.params) if src else {},
            label=(src.label + " copy")[:60] if src and src.label and copy_of is not None else "",
        )
        if copy_of is not None:  # the copy goes right after its original
            ordered = [x for x in lanes if x.pk != lane.pk]
            at = next(i for i, x in enumerate(ordered) if x.pk == src.pk) + 1
            ordered.insert(at, lane)
            _renumber(conversation, ordered)
    return lane


def lane_remove(*, conversation: Conversation, lane_id: Any) -> None:
    """Remove a lane and its answers. Raises LaneRefused below :data:`MIN_LANES` lanes or
    while one of its answers is streaming."""
    with transaction.atomic():
        lanes = list(Lane.objects.select_for_update().filter(conversation=conversation).order_by("position"))
        lane = _lane(conversation, lane_id)
        if len(lanes) <= MIN_LANES:
            raise LaneRefused(f"A comparison needs at least {MIN_LANES} lanes.")
        if Message.objects.filter(lane=lane, status=MessageStatus.STREAMING).exists():
            raise LaneRefused("Stop this lane first.")
        lane.delete()
        _renumber(conversation, [x for x in lanes if x.pk != lane.pk])


def lane_move(*, conversation: Conversation, lane_id: Any, delta: int) -> None:
    """Move a lane ``delta`` places (−1 left, +1 right), clamped to the ends."""
    with transaction.atomic():
        lanes = list(Lane.objects.select_for_update().filter(conversation=conversation).order_by("position"))
        lane = _lane(conversation, lane_id)
        i = next(i for i, x in enumerate(lanes) if x.pk == lane.pk)
        j = max(0, min(len(lanes) - 1, i + delta))
        if i == j:
            return
        lanes.insert(j, lanes.pop(i))
        _renumber(conversation, lanes)


def lane_save(*, conversation: Conversation, lane_id: Any, settings: NextTurnSettings, label: str | None = None) -> None:
    """Store a lane's settings (endpoint id checked by the caller's form/selector)."""
    lane = _lane(conversation, lane_id)
    fields: dict[str, Any] = {"endpoint_id": settings.endpoint_id, "model": settings.model,
                              "system_prompt": settings.system_prompt, "params": settings.params}
    if label is not None:
        fields["label"] = label.strip()[:60]
    Lane.objects.filter(pk=lane.pk).update(**fields)


def lanes_save(*, conversation_id: int, settings: dict[int, NextTurnSettings]) -> None:
    """Store the settings a send carried for each lane (ids already checked by the plan)."""
    for lane_id, s in settings.items():
        Lane.objects.filter(pk=lane_id, conversation_id=conversation_id).update(
            endpoint_id=s.endpoint_id, model=s.model, system_prompt=s.system_prompt, params=s.params,
        )


def lane_continue_as_chat(*, conversation: Conversation, lane_id: Any) -> Conversation:
    """A new plain chat with the lane's settings and its history copied (every user message
    and the lane's shown answer to it; answers still streaming or without text are left out),
    one INSERT for the messages. Raises LaneRefused for a lane not in the comparison."""
    from datetime import timedelta

    from django.utils import timezone

    from chat.compare.selectors import compare_rows

    lane = _lane(conversation, lane_id)
    rows = compare_rows(conversation=conversation)
    now = timezone.now()
    with transaction.atomic():
        chat = Conversation.objects.create(
            owner=conversation.owner, kind="chat", title=(conversation.title or "Comparison")[:180] + " (lane)",
            endpoint_id=lane.endpoint_id, model=lane.model, system_prompt=lane.system_prompt, params=lane.params,
        )
        chat_lane = Lane.objects.create(conversation=chat, position=0, endpoint_id=lane.endpoint_id, model=lane.model)
        copies: list[Message] = []
        parent = None
        n = 0
        for u in rows.users:
            n += 1
            cu = Message(conversation=chat, role="user", content=u.content, parent_id=parent, created_at=now + timedelta(microseconds=n))
            copies.append(cu)
            parent = cu.id
            a = rows.shown.get((u.pk, lane.pk))
            if a is None or a.status == MessageStatus.STREAMING or not (a.content or a.reasoning):
                continue
            n += 1
            ca = Message(
                conversation=chat, lane=chat_lane, role="assistant", parent_id=parent, content=a.content,
                reasoning=a.reasoning, status=a.status, finish_reason=a.finish_reason, usage=a.usage,
                metrics=a.metrics, error=a.error, settings_snapshot=a.settings_snapshot,
                created_at=now + timedelta(microseconds=n),
            )
            copies.append(ca)
            parent = ca.id
        Message.objects.bulk_create(copies)
        if copies:
            Conversation.objects.filter(pk=chat.pk).update(current_leaf_id=copies[-1].id)
    return chat


def compare_set_blind(*, conversation: Conversation, blind: bool) -> None:
    """Switch blind mode. Switching it on shuffles the lanes' order (a random permutation from
    ``secrets``), so the user cannot tell which lane A, B, … is until they vote."""
    import secrets

    with transaction.atomic():
        if blind and not conversation.blind:
            lanes = list(Lane.objects.select_for_update().filter(conversation=conversation).order_by("position"))
            shuffled = lanes[:]
            for i in range(len(shuffled) - 1, 0, -1):  # Fisher–Yates with a CSPRNG
                j = secrets.randbelow(i + 1)
                shuffled[i], shuffled[j] = shuffled[j], shuffled[i]
            _renumber(conversation, shuffled)
        Conversation.objects.filter(pk=conversation.pk).update(blind=blind)
    conversation.blind = blind


def vote_create(
    *, user: AbstractBaseUser, conversation: Conversation, user_message: Message, choice: str,
    winner_position: int | None, lanes: list[dict[str, Any]],
) -> Vote:
    """Store a blind vote on one turn (one per turn: a second vote replaces the first).
    ``choice``: lane | rank | tie | both_bad (``rank``: each lane's snapshot holds its ``rank``,
    1 = best, equal ranks tie; ``winner_position`` the first-ranked lane); ``lanes``: the
    snapshot described on :class:`Vote`."""
    if choice not in ("lane", "rank", "tie", "both_bad"):
        raise ValueError("Unknown choice.")
    vote, _ = Vote.objects.update_or_create(
        conversation=conversation, turn_id=user_message.turn_id,
        defaults={"owner": user, "choice": choice, "winner_position": winner_position if choice in ("lane", "rank") else None,
                  "prompt": user_message.content, "lanes": lanes},
    )
    return vote
