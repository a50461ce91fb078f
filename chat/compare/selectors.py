"""Reads of comparisons, always scoped to the user, and the turn plans of their lanes.

A comparison is a :class:`~chat.models.Conversation` with ``kind="compare"`` and 2–6 lanes.
Its messages: user messages (``lane=None``) chained by ``parent`` (each the parent of the
next), and per lane and user message one or more answers (``lane`` set, ``parent`` = the user
message). The answer shown, and sent back as history, is a lane's newest answer with
``run == 0`` for that user message (a Retry adds a newer one); answers with ``run > 0`` are
repeat runs, measured but never history.

History of a lane (what its next turn sends): every user message in order, each followed by
that lane's shown answer when it has text and is not streaming (:func:`chat.history.history`
rules). Lanes never see each other's answers.

Plans reuse :class:`chat.selectors.TurnPlan` so the chat's runner commits and runs them
unchanged: a send makes one plan per lane; the first plan's rows are the user message and its
answer, the others only their answer (the writer thread commits them in order).

May import: Django, chat.models, chat.selectors, chat.history, chat.providers.base.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet
from django.http import Http404
from django.utils import timezone

from chat.history import history, make_request
from chat.models import Conversation, Endpoint, Lane, Message, MessageStatus
from chat.providers.base import ChatMessage
from chat.selectors import (
    BUSY,
    PLAN_FIELDS,
    SENT_ALREADY,
    EndpointTarget,
    NextTurnSettings,
    TurnPlan,
    TurnRefused,
    _check_settings,
    _lane_busy,
    _prices,
    endpoint_for_turn,
    simulator_take,
    title_from_message,
)

MIN_LANES = 2
MAX_LANES = 6
MAX_RUNS = 20
LETTERS = "ABCDEF"
NO_ENDPOINT = "Not sent: a lane has no endpoint (deleted, or not yours). Pick one in that lane."


def compare_list_for_user(*, user: AbstractBaseUser, query: str = "") -> QuerySet[Conversation]:
    """The user's comparisons, newest first; ``query`` searches titles."""
    qs = Conversation.objects.filter(owner=user, kind="compare")
    if query:
        qs = qs.filter(title__icontains=query)
    return qs.order_by("-updated_at", "-id")


def compare_get_for_user(*, user: AbstractBaseUser, conversation_id: int | str) -> Conversation:
    """The comparison if ``user`` owns it. Raises Http404 otherwise (also for a plain chat)."""
    try:
        return Conversation.objects.get(pk=int(conversation_id), owner=user, kind="compare")
    except (Conversation.DoesNotExist, ValueError, TypeError) as exc:
        raise Http404("No such comparison") from exc


def lanes_of(*, conversation: Conversation) -> list[Lane]:
    """The comparison's lanes by position, with their endpoints."""
    return list(Lane.objects.filter(conversation=conversation).select_related("endpoint").order_by("position", "id"))


def lane_label(lane: Lane, index: int, *, blind: bool = False) -> str:
    """What a lane is called on the page: A, B, … in blind mode, else its label or "Lane A"."""
    letter = LETTERS[index] if index < len(LETTERS) else str(index + 1)
    if blind:
        return letter
    return lane.label or f"Lane {letter}"


@dataclass
class Rows:
    """A comparison's messages, arranged: ``users`` in order; ``shown[(user_id, lane_id)]`` the
    answer shown (newest ``run == 0``); ``runs[(user_id, lane_id)]`` every answer of that lane
    for that prompt with ``run > 0`` or the shown one, in run order (for statistics)."""

    users: list[Message]
    shown: dict[tuple[Any, int], Message] = field(default_factory=dict)
    runs: dict[tuple[Any, int], list[Message]] = field(default_factory=dict)
    all: list[Message] = field(default_factory=list)


def compare_rows(*, conversation: Conversation, narrow: bool = False) -> Rows:
    """One query: every message of the comparison, arranged (see :class:`Rows`)."""
    qs = Message.objects.filter(conversation=conversation)
    qs = qs.only(*PLAN_FIELDS, "run") if narrow else qs.defer("inspect", "usage_raw", "logprobs")
    messages = list(qs.order_by("created_at", "id"))
    rows = Rows(users=[m for m in messages if m.role == "user"], all=messages)
    for m in messages:
        if m.role != "assistant" or m.lane_id is None:
            continue
        k = (m.parent_id, m.lane_id)
        if m.run == 0:
            rows.shown[k] = m  # created order: the newest wins
    for m in messages:
        if m.role == "assistant" and m.lane_id is not None:
            k = (m.parent_id, m.lane_id)
            if m.run > 0 or rows.shown.get(k) is m:
                rows.runs.setdefault(k, []).append(m)
    return rows


def lane_history(rows: Rows, lane_id: int, upto: int | None = None) -> tuple[ChatMessage, ...]:
    """The history of lane ``lane_id``: user messages ``[:upto]`` each with the lane's shown
    answer (see the module docstring)."""
    thread: list[Message] = []
    for u in rows.users[:upto]:
        thread.append(u)
        a = rows.shown.get((u.pk, lane_id))
        if a is not None:
            thread.append(a)
    return history(thread)


def _lane_endpoint(user: AbstractBaseUser, s: NextTurnSettings) -> Endpoint:
    if not s.endpoint_id:
        raise TurnRefused(NO_ENDPOINT)
    # Membership (team endpoints) and budgets, read now: the chat's one rule for a new turn.
    return endpoint_for_turn(user=user, endpoint_id=s.endpoint_id)


def lane_settings(lane: Lane) -> NextTurnSettings:
    """A lane's stored settings."""
    return NextTurnSettings(lane.endpoint_id, lane.model, lane.system_prompt, dict(lane.params or {}))


def _plan_for_lane(
    *, kind: str, conversation: Conversation, user: AbstractBaseUser, lane: Lane, s: NextTurnSettings,
    rows_out: list[Message], messages: tuple[ChatMessage, ...], turn_id: uuid.UUID, fields: dict[str, Any],
    title: str, title_changed: bool, replaces_id: uuid.UUID | None = None, attempt: int = 1,
) -> TurnPlan:
    """One lane's turn. ``attempt``: 1 + the answers of this lane to the same prompt the user
    got (a new answer asks the simulator for another take: chat.selectors.simulator_take)."""
    endpoint = _lane_endpoint(user, s)
    prompt_price, completion_price = _prices(endpoint, s.model)
    request = make_request(api_style=endpoint.api_style, model=s.model, system=s.system_prompt,
                           stored=s.params, messages=messages)
    return TurnPlan(
        kind=kind, conversation_id=conversation.pk, user_id=user.pk, lane_id=lane.pk, turn_id=turn_id,
        rows=tuple(rows_out), conversation_fields=fields, attachment_ids=(),
        target=simulator_take(EndpointTarget.of(endpoint), model=s.model, params=s.params, attempt=attempt),
        request=request, prompt_price_per_mtok=prompt_price, completion_price_per_mtok=completion_price,
        title=title, title_changed=title_changed, replaces_id=replaces_id,
    )


def _answer(conversation: Conversation, lane: Lane, endpoint: Endpoint, s: NextTurnSettings, *,
            parent_id: uuid.UUID, turn_id: uuid.UUID, created_at: Any, run: int = 0) -> Message:
    m = Message.new_answer(
        conversation=conversation, lane_id=lane.pk, parent_id=parent_id, turn_id=turn_id,
        snapshot=endpoint.settings_snapshot(s.model, s.system_prompt, s.params), created_at=created_at,
    )
    m.run = run
    return m


def _load(user: AbstractBaseUser, conversation_id: int) -> tuple[Conversation, list[Lane], Rows]:
    try:
        conversation = compare_get_for_user(user=user, conversation_id=conversation_id)
    except Http404 as exc:
        raise TurnRefused("No such comparison.") from exc
    return conversation, lanes_of(conversation=conversation), compare_rows(conversation=conversation, narrow=True)


def compare_plan_send(
    *, user: AbstractBaseUser, conversation_id: int, turn_id: uuid.UUID, content: str,
    settings: dict[int, NextTurnSettings], runs: int = 1, live_ids: frozenset[uuid.UUID] = frozenset(),
) -> list[TurnPlan]:
    """One user message fanned out to every lane: a list of plans, one per lane and run (lane
    order, then run order). ``settings``: lane id → the lane's panel values (a lane missing
    here uses its stored settings). ``runs``: 1..:data:`MAX_RUNS` answers per lane; runs after
    the first are marked ``run = i`` (not history).

    Raises TurnRefused: repeated ``turn_id``, a lane still running, fewer than
    :data:`MIN_LANES` lanes, a lane setting for a lane not in this comparison, a lane without
    an endpoint or model, ``runs`` out of range."""
    conversation, lanes, rows = _load(user, conversation_id)
    if any(m.turn_id == turn_id for m in rows.all):
        raise TurnRefused(SENT_ALREADY, resync=True)
    if not (1 <= runs <= MAX_RUNS):
        raise TurnRefused(f"Repeat runs: 1 to {MAX_RUNS}.")
    if len(lanes) < MIN_LANES:
        raise TurnRefused(f"A comparison needs at least {MIN_LANES} lanes.")
    ids = {lane.pk for lane in lanes}
    if set(settings) - ids:
        raise TurnRefused("No such lane.")
    for lane in lanes:
        if _lane_busy(rows.all, lane.pk, live_ids):
            raise TurnRefused(BUSY)
    now = timezone.now()
    last_user = rows.users[-1] if rows.users else None
    user_row = Message.new_user(conversation=conversation, parent_id=last_user.pk if last_user else None,
                                turn_id=turn_id, content=content, created_at=now)
    title_changed = not conversation.title
    title = conversation.title or title_from_message(content)
    fields: dict[str, Any] = {"updated_at": now, "current_leaf_id": user_row.id}
    if title_changed:
        fields["title"] = title
    plans: list[TurnPlan] = []
    n = 0
    for i, lane in enumerate(lanes):
        s = settings.get(lane.pk) or lane_settings(lane)
        try:
            endpoint = _lane_endpoint(user, s)
            _check_settings(endpoint, s)
        except TurnRefused as exc:
            label = lane_label(lane, i, blind=conversation.blind)
            raise TurnRefused(f"{label}: {exc.message}") from exc
        messages = lane_history(rows, lane.pk) + (ChatMessage("user", content),)
        for run in range(runs):
            n += 1
            answer = _answer(conversation, lane, endpoint, s, parent_id=user_row.id, turn_id=turn_id if run == 0 else uuid.uuid4(),
                             created_at=now + timedelta(microseconds=n), run=run)
            out = [user_row, answer] if not plans else [answer]
            plans.append(_plan_for_lane(kind="send", conversation=conversation, user=user, lane=lane, s=s,
                                        rows_out=out, messages=messages, turn_id=answer.turn_id,
                                        fields=fields if not plans else {"updated_at": now},
                                        title=title, title_changed=title_changed and not plans))
    return plans


def compare_plan_retry(
    *, user: AbstractBaseUser, conversation_id: int, message_id: uuid.UUID,
    settings: dict[int, NextTurnSettings] | None = None, live_ids: frozenset[uuid.UUID] = frozenset(),
) -> TurnPlan:
    """A new answer of one lane for the same user message (Retry of a failed lane, or a new
    answer): only that lane runs. ``settings``: lane id → panel values (a lane missing: its
    stored settings). Raises
    TurnRefused (no such answer in this comparison, still streaming, lane busy, a repeat run)."""
    conversation, lanes, rows = _load(user, conversation_id)
    old = next((m for m in rows.all if m.pk == message_id and m.role == "assistant"), None)
    if old is None or old.lane_id is None:
        raise TurnRefused("No such answer.")
    if old.run:
        raise TurnRefused("A repeat run cannot be retried alone; send the prompt again.")
    if old.status == MessageStatus.STREAMING:
        raise TurnRefused("This answer is still streaming.")
    lane = next((x for x in lanes if x.pk == old.lane_id), None)
    if lane is None:
        raise TurnRefused("No such lane.")
    if _lane_busy(rows.all, lane.pk, live_ids):
        raise TurnRefused(BUSY)
    s = (settings or {}).get(lane.pk) or lane_settings(lane)
    endpoint = _lane_endpoint(user, s)
    _check_settings(endpoint, s)
    i = next(i for i, u in enumerate(rows.users) if u.pk == old.parent_id)
    u = rows.users[i]
    messages = lane_history(rows, lane.pk, upto=i) + (ChatMessage("user", u.content),)
    turn_id = uuid.uuid4()
    now = timezone.now()
    answer = _answer(conversation, lane, endpoint, s, parent_id=u.pk, turn_id=turn_id, created_at=now)
    # As in chat: a new answer asks for another take; a Retry of a failed answer asks again for
    # the one that did not arrive.
    received = sum(1 for m in rows.all if m.parent_id == u.pk and m.lane_id == lane.pk and m.role == "assistant"
                   and m.run == 0 and m.status in (MessageStatus.COMPLETE, MessageStatus.STOPPED))
    return _plan_for_lane(kind="regenerate", conversation=conversation, user=user, lane=lane, s=s,
                          rows_out=[answer], messages=messages, turn_id=turn_id, fields={"updated_at": now},
                          title=conversation.title, title_changed=False, replaces_id=old.pk, attempt=received + 1)


def votes_by_turn(*, conversation: Conversation) -> dict[Any, Any]:
    """The comparison's votes by user message turn id."""
    from chat.models import Vote

    return {v.turn_id: v for v in Vote.objects.filter(conversation=conversation)}


def settings_hidden(*, conversation: Conversation, rows: Rows, votes: dict[Any, Any] | None = None) -> bool:
    """Blind mode hides endpoints, models and settings until the user voted on the last turn
    (a new prompt hides them again)."""
    if not conversation.blind:
        return False
    if not rows.users:
        return True
    votes = votes_by_turn(conversation=conversation) if votes is None else votes
    return rows.users[-1].turn_id not in votes


def vote_list_for_user(*, user: AbstractBaseUser) -> QuerySet[Any]:
    """Every vote the user cast (a team's, once teams exist), oldest first; votes that came in
    with an imported comparison are not the user's verdicts here and are left out."""
    from chat.models import Vote

    return Vote.objects.filter(owner=user, imported=False).order_by("created_at", "id")


def message_in_compare(*, user: AbstractBaseUser, conversation_id: int, message_id: Any) -> Message | None:
    """An answer of the user's comparison, or None."""
    try:
        return Message.objects.defer("inspect", "usage_raw").get(
            pk=uuid.UUID(str(message_id)), conversation_id=conversation_id, conversation__owner=user,
            conversation__kind="compare",
        )
    except (Message.DoesNotExist, ValueError, TypeError):
        return None
