"""Reads, always scoped to a user, and turn plans.

Every permission-checked fetch is ``<entity>_get_for_user``: another user's ids (and malformed
ids) give Http404, never an existence leak.

Turn plans (``turn_plan_*``): everything a turn needs, decided before anything is written or
sent. Every action that starts a turn — send, prefill, regenerate, retry, continue, edit and
resend, tool result — goes through one function here that reads what it needs (the
conversation and its endpoint, the branch's messages without their heavy JSON, the branch's
attachments: a handful of narrow queries), checks everything that can refuse the action, and
returns a frozen :class:`TurnPlan`: the rows to write, the conversation's new settings, the
upstream request and the endpoint to send it to. Nothing is written here, so a refused action
writes nothing (:class:`TurnRefused` says why). :func:`chat.services.turn_commit` writes a plan
in one transaction, beside the upstream request.

The settings of the next turn come from one place for every action: the settings panel's values
sent with the action (:class:`NextTurnSettings`), falling back to what the conversation stored
at its last turn only when an action carries none. Concurrency rule: one running turn per
conversation lane (a plain chat has one lane), the same for every action; a stale
``streaming`` row of a dead process does not count.

May import: Django, chat.models, chat.history, chat.turnsettings, chat.providers.base.
"""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qsl

from django.conf import settings as django_settings
from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Q, QuerySet
from django.http import Http404
from django.utils import timezone

from chat.history import attachments_by_message, history, make_request, parts
from chat.models import Attachment, Conversation, Endpoint, Lane, Message, MessageStatus
from chat.providers.base import ChatMessage, ChatRequest
from chat.teams import selectors as teams


def endpoint_list_for_user(*, user: AbstractBaseUser) -> QuerySet[Endpoint]:
    """Endpoints the user may use (own + their teams'; :func:`chat.teams.selectors.endpoints_usable`), by name."""
    return teams.endpoints_usable(user=user).order_by("name", "id")


def endpoint_get_for_user(*, user: AbstractBaseUser, endpoint_id: int | str) -> Endpoint:
    """The endpoint if ``user`` may edit it (own, or of a team they own). Raises Http404
    otherwise (no existence leak). Use :func:`endpoint_usable_get_for_user` to chat with one."""
    try:
        return teams.endpoints_manageable(user=user).get(pk=int(endpoint_id))
    except (Endpoint.DoesNotExist, ValueError, TypeError) as exc:
        raise Http404("No such endpoint") from exc


def endpoint_usable_get_for_user(*, user: AbstractBaseUser, endpoint_id: int | str | None) -> Endpoint:
    """The endpoint if ``user`` may use it (own, or of a team they are in). Raises Http404."""
    try:
        return teams.endpoints_usable(user=user).get(pk=int(endpoint_id))  # type: ignore[arg-type]
    except (Endpoint.DoesNotExist, ValueError, TypeError) as exc:
        raise Http404("No such endpoint") from exc


def conversation_list_for_user(*, user: AbstractBaseUser, query: str = "") -> QuerySet[Conversation]:
    """The user's conversations that have messages, newest first; ``query`` searches titles and text.
    Conversations a prompt test-set run made (one per row × lane) are left out: they open from
    the run's grid (:func:`prompt_run_conversation_ids`)."""
    qs = Conversation.objects.filter(owner=user, kind="chat").exclude(title="").exclude(
        pk__in=prompt_run_conversation_ids(user=user))
    if query:
        qs = qs.filter(Q(title__icontains=query) | Q(messages__content__icontains=query)).distinct()
    return qs.order_by("-updated_at", "-id")


def prompt_run_conversation_ids(*, user: AbstractBaseUser) -> QuerySet[Any]:
    """Subquery: ids of ``user``'s conversations that belong to a prompt test-set run's cells."""
    from chat.models import TestRunCell

    return TestRunCell.objects.filter(run__owner=user, conversation__isnull=False).values("conversation_id")


#: Sidebar search bounds: characters of the query, conversations listed, characters of an excerpt
#: around the match (before, after).
SEARCH_MAX_QUERY = 100
SEARCH_MAX_ROWS = 50
SEARCH_CONTEXT = (30, 60)


@dataclass(frozen=True)
class SearchHit:
    """Why a conversation matched a sidebar search: ``text`` (the matched characters as
    written) between ``before`` and ``after``; ``in_title`` when the title matched (the three
    parts are then the whole title), else an excerpt of the first matching message, with
    ``clipped_start``/``clipped_end`` when the message goes on past the excerpt. Plain text:
    the template escapes it and puts ``text`` in a ``<mark>``."""

    before: str
    text: str
    after: str
    in_title: bool
    clipped_start: bool = False
    clipped_end: bool = False


def _hit_in(text: str, query: str) -> tuple[int, int] | None:
    """Start and end of ``query`` in ``text``, ignoring case (plain substring, no pattern);
    None when not found (or when lower-casing moved the characters)."""
    at = text.lower().find(query.lower())
    if at < 0 or text[at:at + len(query)].lower() != query.lower():
        return None
    return at, at + len(query)


def conversation_search_for_user(*, user: AbstractBaseUser, query: str) -> list[Conversation]:
    """The sidebar search: the user's conversations whose title or message text contains
    ``query`` (case-insensitive substring, never a pattern; cut to :data:`SEARCH_MAX_QUERY`
    characters), newest first, at most :data:`SEARCH_MAX_ROWS`. Each has ``hit``, a
    :class:`SearchHit` saying why it matched (the title first, else the first matching
    message's text around the match, read from the database as a short window: two queries
    whatever the messages' size)."""
    from django.db.models import F, Value
    from django.db.models.functions import Greatest, Lower, StrIndex, Substr

    query = query.strip()[:SEARCH_MAX_QUERY]
    if not query:
        return []
    rows = list(conversation_list_for_user(user=user, query=query).only("id", "title", "updated_at")[:SEARCH_MAX_ROWS])
    need: dict[int, Conversation] = {}
    for c in rows:
        span = _hit_in(c.title, query)
        if span:
            c.hit = SearchHit(c.title[:span[0]], c.title[span[0]:span[1]], c.title[span[1]:], True)
        else:
            c.hit = None
            need[c.pk] = c
    if need:
        before, after = SEARCH_CONTEXT
        excerpts = (
            Message.objects.filter(conversation_id__in=list(need), content__icontains=query)
            .annotate(at=StrIndex(Lower("content"), Lower(Value(query))))
            .annotate(start=Greatest(F("at") - before, 1))
            .annotate(excerpt=Substr("content", F("start"), before + len(query) + after + 1))
            .order_by("conversation_id", "created_at", "id")
            .values_list("conversation_id", "start", "excerpt")[: SEARCH_MAX_ROWS * 4]
        )
        for conv_id, start, excerpt in excerpts:
            c = need.get(conv_id)
            if c is None or c.hit is not None:
                continue
            span = _hit_in(excerpt or "", query)
            if span is None:
                c.hit = SearchHit((excerpt or "")[: before + after], "", "", False, False, True)
                continue
            end_of_window = min(len(excerpt), span[1] + after)
            c.hit = SearchHit(
                excerpt[max(0, span[0] - before):span[0]].lstrip(), excerpt[span[0]:span[1]],
                excerpt[span[1]:end_of_window].rstrip(), False,
                clipped_start=start > 1 or span[0] > before, clipped_end=end_of_window < len(excerpt),
            )
    return rows


def conversation_empty_for_user(*, user: AbstractBaseUser) -> Conversation | None:
    """The user's newest conversation with no title and no messages (a new chat), or None."""
    return (
        Conversation.objects.filter(owner=user, kind="chat", title="", messages__isnull=True)
        .order_by("-id")
        .first()
    )


def conversation_get_for_user(*, user: AbstractBaseUser, conversation_id: int | str) -> Conversation:
    """The conversation if ``user`` owns it. Raises Http404 otherwise."""
    try:
        return Conversation.objects.select_related("endpoint").get(pk=int(conversation_id), owner=user)
    except (Conversation.DoesNotExist, ValueError, TypeError) as exc:
        raise Http404("No such conversation") from exc


def blind_pending(conversation: Conversation) -> bool:
    """True while ``conversation`` is a blind comparison whose last turn is not voted on (or
    has no turn yet): no page, partial, Inspect, code, export or share may show a lane's
    endpoint, model or settings then. Views that take a conversation or message id refuse
    (404) while it holds; the compare pages hide them (chat.compare.selectors.settings_hidden)."""
    if conversation.kind != "compare" or not conversation.blind:
        return False
    from chat.models import Vote

    last = (Message.objects.filter(conversation=conversation, role="user", lane__isnull=True)
            .order_by("-created_at", "-id").values_list("turn_id", flat=True).first())
    return last is None or not Vote.objects.filter(conversation=conversation, turn_id=last).exists()


def refuse_if_blind(conversation: Conversation) -> Conversation:
    """``conversation``, or Http404 while :func:`blind_pending` holds."""
    if blind_pending(conversation):
        raise Http404("Hidden until you vote")
    return conversation


def message_get_for_user(*, user: AbstractBaseUser, message_id: uuid.UUID | str) -> Message:
    """The message if its conversation belongs to ``user``. ``message_id`` is a UUID (the
    model's key type) or its string form. Raises Http404 otherwise (also for a malformed id)."""
    try:
        return Message.objects.select_related("conversation").get(
            pk=uuid.UUID(str(message_id)), conversation__owner=user
        )
    except (Message.DoesNotExist, ValueError, TypeError, AttributeError) as exc:
        raise Http404("No such message") from exc


#: Heavy JSON fields a thread never needs (Inspect loads its own message).
THREAD_DEFER = ("inspect", "usage_raw")


#: What a turn plan reads of each message (history, branch, running turns): no JSON of
#: figures, usage or settings to decode.
PLAN_FIELDS = (
    "id", "conversation_id", "lane_id", "parent_id", "role", "turn_id", "content", "reasoning", "status",
    "tool_calls", "tool_call_id", "reasoning_signature", "replay_blocks", "heartbeat_at", "created_at",
)


def _children_map(
    conversation: Conversation, *, narrow: bool = False
) -> tuple[dict[Any, list[Message]], dict[Any, Message]]:
    qs = Message.objects.filter(conversation=conversation)
    qs = qs.only(*PLAN_FIELDS) if narrow else qs.defer(*THREAD_DEFER)
    messages = list(qs.order_by("created_at", "id"))
    children: dict[Any, list[Message]] = {}
    for m in messages:
        children.setdefault(m.parent_id, []).append(m)
    return children, {m.pk: m for m in messages}


def _newest_descendant(children: dict[Any, list[Message]], m: Message) -> Message:
    while children.get(m.pk):
        m = children[m.pk][-1]
    return m


def conversation_thread(*, conversation: Conversation) -> list[Message]:
    """The active branch, root to leaf (see :func:`conversation_thread_and_messages`)."""
    return conversation_thread_and_messages(conversation=conversation)[0]


def conversation_thread_and_messages(
    *, conversation: Conversation, narrow: bool = False
) -> tuple[list[Message], list[Message]]:
    """The active branch, root to leaf, and every message of the conversation (one query,
    without the heavy ``inspect``/``usage_raw`` JSON): ``(branch, messages)``.

    The path to ``conversation.current_leaf`` (when set and present), continued through the
    newest child at each step; without a leaf, the newest root and newest children. Each
    message gets ``sibling_index`` (0-based), ``sibling_count``, ``prev_sibling_id`` and
    ``next_sibling_id`` attributes for the 1/2 navigation. ``narrow``: only
    :data:`PLAN_FIELDS` (turn plans; other fields are then loaded one query each on access).
    """
    children, by_id = _children_map(conversation, narrow=narrow)
    messages = list(by_id.values())
    if not by_id:
        return [], messages
    leaf = by_id.get(conversation.current_leaf_id) if conversation.current_leaf_id else None
    if leaf is None:
        leaf = _newest_descendant(children, children[None][-1]) if children.get(None) else None
        if leaf is None:
            return [], messages
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
    return path, messages


def conversation_thread_for_display(*, conversation: Conversation) -> list[Message]:
    """:func:`conversation_thread` with each user message's attachments (without their bytes)
    as ``prefetched_attachments`` (one more query)."""
    thread = conversation_thread(conversation=conversation)
    atts = attachments_by_message(thread)
    for m in thread:
        m.prefetched_attachments = atts.get(m.pk, [])
    return thread


def message_in_conversation(*, user: AbstractBaseUser, conversation_id: int, message_id: Any) -> Message | None:
    """A message of the user's conversation ``conversation_id`` (without its Inspect JSON), or
    None."""
    try:
        return (
            Message.objects.defer(*THREAD_DEFER)
            .filter(pk=uuid.UUID(str(message_id)), conversation_id=conversation_id, conversation__owner=user)
            .first()
        )
    except (ValueError, TypeError, AttributeError):
        return None


def message_owner_channel(
    *, message_id: Any, user: AbstractBaseUser | None = None, conversation_id: int | None = None
) -> str | None:
    """The channel-layer channel of the process streaming ``message_id`` ("" when none is
    stored), or None when the message does not exist (for ``user`` in ``conversation_id``)."""
    qs = Message.objects.filter(pk=message_id)
    if user is not None:
        qs = qs.filter(conversation__owner=user)
    if conversation_id is not None:
        qs = qs.filter(conversation_id=conversation_id)
    return qs.values_list("owner_channel", flat=True).first()


def streaming_elsewhere(*, conversation_id: int) -> list[tuple[Any, str]]:
    """``(message id, owner channel)`` of the conversation's answers streaming in other processes."""
    from chat import process

    return list(
        Message.objects.filter(conversation_id=conversation_id, status=MessageStatus.STREAMING)
        .exclude(owner_process=process.PROCESS_ID)
        .values_list("id", "owner_channel")
    )


def oldest_orphan_heartbeat_age(*, conversation_id: int, live_ids: frozenset[Any] | set[Any]) -> float | None:
    """Seconds since the oldest heartbeat of this conversation's streaming rows that this
    process does not run (``inf`` without one); None when there are none."""
    beats = (
        Message.objects.filter(conversation_id=conversation_id, status=MessageStatus.STREAMING)
        .exclude(pk__in=list(live_ids))
        .values_list("heartbeat_at", flat=True)
    )
    ages = [float("inf") if b is None else (timezone.now() - b).total_seconds() for b in beats]
    return max(ages) if ages else None


def turn_exists(*, conversation_id: int, turn_id: uuid.UUID) -> bool:
    """Whether a send with ``turn_id`` was written in this conversation."""
    return Message.objects.filter(conversation_id=conversation_id, turn_id=turn_id).exists()


def lane_first_id(*, conversation: Conversation) -> int | None:
    """The id of the conversation's first lane (a plain chat has exactly one)."""
    return Lane.objects.filter(conversation=conversation).order_by("position").values_list("id", flat=True).first()


def message_newest_descendant(*, message: Message) -> Message:
    """The newest leaf under ``message`` (itself when it has no children)."""
    children, _ = _children_map(message.conversation)
    return _newest_descendant(children, message)


def title_from_message(text: str, limit: int = 60) -> str:
    """A conversation title from the first user message: first line, at most ``limit`` chars."""
    line = " ".join(text.strip().split())
    if len(line) <= limit:
        return line or "Untitled"
    cut = line[:limit].rsplit(" ", 1)[0]
    return (cut or line[:limit]) + "…"


# ---- turn plans ----------------------------------------------------------------------------

SENT_ALREADY = "This message was sent already."
BUSY = "Wait for the current answer to finish, or stop it, first."
NO_ENDPOINT = (
    "Not sent: no such endpoint (it was deleted, is not yours, or its team no longer shares it with you). "
    "Pick one in the settings."
)


class TurnRefused(Exception):
    """An action that must not start a turn. ``message`` is for the user; ``field_errors``
    (``{field: [messages]}``) puts messages next to settings fields; ``resync`` asks the page
    to load the thread again (a repeated send whose turn exists already)."""

    def __init__(self, message: str, *, field_errors: dict[str, list[str]] | None = None, resync: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.field_errors = field_errors or {}
        self.resync = resync


@dataclass(frozen=True)
class NextTurnSettings:
    """The settings panel's values for the next turn: endpoint id, model id, system prompt and
    the parameters/options dict (``chat.forms.ParamsForm.params()``)."""

    endpoint_id: int | None
    model: str
    system_prompt: str
    params: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of_conversation(cls, conversation: Conversation) -> NextTurnSettings:
        return cls(conversation.endpoint_id, conversation.model, conversation.system_prompt, dict(conversation.params))


@dataclass(frozen=True)
class EndpointTarget:
    """Where a turn goes: the endpoint's resolved settings and decrypted secrets (memory only;
    ``repr`` hides them). ``base_url`` may be the symbolic ``sim://builtin/v1``, resolved by the
    interface layer that knows the server's address."""

    endpoint_id: int
    name: str
    base_url: str
    api_key: str = field(repr=False, default="")
    extra_headers: dict[str, str] = field(repr=False, default_factory=dict)
    api_style: str = "openai_chat"
    stream_options: bool = True

    @property
    def is_simulator(self) -> bool:
        return self.base_url.startswith("sim://")

    @classmethod
    def of(cls, endpoint: Endpoint) -> EndpointTarget:
        return cls(
            endpoint_id=endpoint.pk, name=endpoint.name, base_url=endpoint.base_url,
            api_key=endpoint.get_api_key(), extra_headers=endpoint.get_extra_headers(),
            api_style=endpoint.api_style, stream_options=endpoint.stream_options,
        )


SIMULATOR_OPTIONS = "X-Simulator-Options"


def simulator_take(target: EndpointTarget, *, model: str, params: dict[str, Any], attempt: int) -> EndpointTarget:
    """``target`` for attempt ``attempt`` (1 + the answers to the same message the user got:
    2 and up on a Regenerate) at the built-in simulator: from the second attempt on, the
    simulator is asked for another answer with its ``take`` knob (``X-Simulator-Options:
    take=<attempt>``, added to any options the endpoint sends), so a regenerate differs from
    the answers before it and stays the same for the same message and attempt. Unchanged for
    another endpoint, a first attempt, or when the user fixed the answer: a ``seed`` parameter,
    or a ``seed``/``take`` knob in the model id or in the endpoint's options header."""
    if not target.is_simulator or attempt < 2 or params.get("seed") is not None:
        return target
    headers = dict(target.extra_headers)
    name = next((k for k in headers if k.lower() == SIMULATOR_OPTIONS.lower()), SIMULATOR_OPTIONS)
    given = headers.get(name, "").strip().removeprefix("?")
    knobs = {k.strip() for k, _ in parse_qsl(model.partition("?")[2] + "&" + given, keep_blank_values=True)}
    if knobs & {"seed", "take"}:
        return target
    headers[name] = f"{given}&take={attempt}" if given else f"take={attempt}"
    return dataclasses.replace(target, extra_headers=headers)


@dataclass(frozen=True, repr=False)
class TurnPlan:
    """A turn ready to start. ``rows``: unsaved messages to INSERT in this order (the user or
    tool message, then the streaming answer); ``conversation_fields``: one UPDATE of the
    conversation (settings, title, ``current_leaf``, ``updated_at``); ``attachment_ids``: linked
    to the user message in the same transaction. ``kind``: send | prefill | regenerate |
    continue | edit | tool_result. ``replaces_id``: the answer a regenerate is shown in place of.
    ``thread``: the branch above the new rows (for pages that re-render it). Prices in USD per
    million tokens."""

    kind: str
    conversation_id: int
    user_id: int
    lane_id: int | None
    turn_id: uuid.UUID
    rows: tuple[Message, ...]
    conversation_fields: dict[str, Any]
    attachment_ids: tuple[uuid.UUID, ...]
    target: EndpointTarget
    request: ChatRequest
    prompt_price_per_mtok: float | None
    completion_price_per_mtok: float | None
    title: str
    title_changed: bool
    replaces_id: uuid.UUID | None = None
    thread: tuple[Message, ...] = ()
    attachments: tuple[Attachment, ...] = ()

    @property
    def assistant(self) -> Message:
        return self.rows[-1]

    @property
    def user_message(self) -> Message | None:
        return self.rows[0] if len(self.rows) > 1 and self.rows[0].role == "user" else None

    @property
    def prefill(self) -> str:
        return self.assistant.content

    def __repr__(self) -> str:  # never the secrets of the target
        return f"TurnPlan(kind={self.kind!r}, conversation={self.conversation_id}, assistant={self.assistant.id})"


# ---- helpers -------------------------------------------------------------------------------


def stale_after_s() -> float:
    """Seconds after which a ``streaming`` row whose heartbeat stopped counts as dead."""
    return max(10.0, 5 * django_settings.PLAYGROUND_PARTIAL_SAVE_S)


def _prices(endpoint: Endpoint, model: str) -> tuple[float | None, float | None]:
    for info in endpoint.models_cache or []:
        if info.get("id") == model:
            return info.get("prompt_price_per_mtok"), info.get("completion_price_per_mtok")
    return None, None


def _model_cap(endpoint: Endpoint, model: str) -> int | None:
    return next(
        (i.get("max_completion_tokens") for i in endpoint.models_cache or [] if i.get("id") == model), None
    )


def endpoint_for_turn(*, user: AbstractBaseUser, endpoint_id: int | str | None, budget: bool = True) -> Endpoint:
    """The endpoint a new turn of ``user`` may go to, read now (never a cached row: a member
    removed a moment ago is refused), before anything is written or sent upstream.

    Raises TurnRefused: no such endpoint, or not the user's to use (deleted, or a team
    endpoint of a team they are not, or no longer, in: :data:`NO_ENDPOINT`); a monthly budget
    reached (the message names it; not checked with ``budget=False``, for previews that send
    nothing). Every turn plan (chat, compare) calls this.
    """
    if not endpoint_id:
        raise TurnRefused(NO_ENDPOINT)
    try:
        endpoint = endpoint_usable_get_for_user(user=user, endpoint_id=endpoint_id)
    except Http404 as exc:
        raise TurnRefused(NO_ENDPOINT) from exc
    reached = teams.budget_reached(user=user, endpoint=endpoint) if budget else None
    if reached is not None:
        raise TurnRefused(f"Not sent: {reached.label} is used up for this month. Ask a team owner or your admin.")
    return endpoint


def _endpoint(user: AbstractBaseUser, conversation: Conversation, s: NextTurnSettings, *, budget: bool = True) -> Endpoint:
    return endpoint_for_turn(user=user, endpoint_id=s.endpoint_id or conversation.endpoint_id, budget=budget)


def _check_settings(endpoint: Endpoint, s: NextTurnSettings) -> None:
    if not s.model.strip():
        raise TurnRefused("Not sent: pick or type a model id.", field_errors={"model": ["Pick or type a model id."]})
    cap = _model_cap(endpoint, s.model)
    max_tokens = s.params.get("max_tokens")
    if cap and max_tokens and max_tokens > cap:
        raise TurnRefused(
            f"Not sent: max_tokens: {s.model} allows at most {cap} completion tokens.",
            field_errors={"max_tokens": [f"{s.model} allows at most {cap} completion tokens."]},
        )


def _lane_busy(messages: list[Message], lane_id: int | None, live_ids: frozenset[uuid.UUID]) -> bool:
    """A turn of this lane is running: a ``streaming`` answer that runs in this process, or
    whose owner's heartbeat is fresh."""
    cutoff = timezone.now() - timedelta(seconds=stale_after_s())
    for m in messages:
        if m.role != "assistant" or m.status != MessageStatus.STREAMING:
            continue
        if lane_id is not None and m.lane_id not in (None, lane_id):
            continue
        if m.id in live_ids or (m.heartbeat_at is not None and m.heartbeat_at >= cutoff):
            return True
    return False


@dataclass
class _Loaded:
    conversation: Conversation
    messages: list[Message]
    thread: list[Message]
    lane_id: int | None


def _load(user: AbstractBaseUser, conversation_id: int, *, narrow: bool = True) -> _Loaded:
    try:
        conversation = conversation_get_for_user(user=user, conversation_id=conversation_id)
    except Http404 as exc:
        raise TurnRefused("No such conversation.") from exc
    thread, messages = conversation_thread_and_messages(conversation=conversation, narrow=narrow)
    lane_id = next((m.lane_id for m in messages if m.lane_id), None) or lane_first_id(
        conversation=conversation
    )
    return _Loaded(conversation, messages, thread, lane_id)


def _conversation_fields(s: NextTurnSettings, endpoint: Endpoint, leaf_id: uuid.UUID, now: Any) -> dict[str, Any]:
    return {
        "endpoint_id": endpoint.pk, "model": s.model, "system_prompt": s.system_prompt,
        "params": s.params, "updated_at": now, "current_leaf_id": leaf_id,
    }


def _plan(
    *, kind: str, loaded: _Loaded, user: AbstractBaseUser, endpoint: Endpoint, s: NextTurnSettings,
    rows: list[Message], messages: tuple[ChatMessage, ...], turn_id: uuid.UUID, title: str | None = None,
    attachments: list[Attachment] | None = None, replaces_id: uuid.UUID | None = None,
    thread: list[Message] | None = None, attempt: int = 1,
) -> TurnPlan:
    """``attempt``: which answer to the same message this is (see :func:`simulator_take`)."""
    conv = loaded.conversation
    now = timezone.now()
    fields = _conversation_fields(s, endpoint, rows[-1].id, now)
    title_changed = bool(title) and not conv.title
    if title_changed:
        fields["title"] = title
    prompt_price, completion_price = _prices(endpoint, s.model)
    request = make_request(
        api_style=endpoint.api_style, model=s.model, system=s.system_prompt, stored=s.params, messages=messages
    )
    return TurnPlan(
        kind=kind, conversation_id=conv.pk, user_id=user.pk, lane_id=loaded.lane_id, turn_id=turn_id,
        rows=tuple(rows), conversation_fields=fields,
        attachment_ids=tuple(a.pk for a in attachments or ()),
        target=simulator_take(EndpointTarget.of(endpoint), model=s.model, params=s.params, attempt=attempt),
        request=request, prompt_price_per_mtok=prompt_price, completion_price_per_mtok=completion_price,
        title=fields.get("title", conv.title), title_changed=title_changed, replaces_id=replaces_id,
        thread=tuple(thread if thread is not None else loaded.thread), attachments=tuple(attachments or ()),
    )


def _answer_row(
    loaded: _Loaded, endpoint: Endpoint, s: NextTurnSettings, *, parent_id: uuid.UUID | None,
    turn_id: uuid.UUID, prefill: str = "", created_at: Any = None,
) -> Message:
    return Message.new_answer(
        conversation=loaded.conversation, lane_id=loaded.lane_id, parent_id=parent_id, turn_id=turn_id,
        snapshot=endpoint.settings_snapshot(s.model, s.system_prompt, s.params), prefill=prefill,
        created_at=created_at,
    )


def _guard(loaded: _Loaded, live_ids: frozenset[uuid.UUID]) -> None:
    if _lane_busy(loaded.messages, loaded.lane_id, live_ids):
        raise TurnRefused(BUSY)


# ---- the actions ----------------------------------------------------------------------------


def turn_plan_send(
    *, user: AbstractBaseUser, conversation_id: int, turn_id: uuid.UUID, content: str, role: str,
    settings: NextTurnSettings, attachment_ids: list[str] | tuple[str, ...] = (),
    live_ids: frozenset[uuid.UUID] = frozenset(), prompt_version_id: int | None = None,
) -> TurnPlan:
    """A user message and its answer (``role="user"``), or an answer whose text starts with
    ``content`` (``role="assistant"``: a prefill), after the current leaf. ``prompt_version_id``
    (checked visible by the caller) is recorded on the rows of the turn. Raises TurnRefused:
    repeated ``turn_id``, a running turn in the lane, no endpoint, model limits, attachments
    that are not the user's or were sent already, attachments on a non-user message."""
    loaded = _load(user, conversation_id)
    if any(m.turn_id == turn_id for m in loaded.messages):
        raise TurnRefused(SENT_ALREADY, resync=True)
    _guard(loaded, live_ids)
    endpoint = _endpoint(user, loaded.conversation, settings)
    _check_settings(endpoint, settings)
    ids = [uuid.UUID(str(x)) for x in attachment_ids if x]
    attachments: list[Attachment] = []
    if ids:
        if role != "user":
            raise TurnRefused("Attachments go with a user message.")
        attachments = list(Attachment.objects.filter(pk__in=ids, owner=user, message__isnull=True).defer("data"))
        if len(attachments) != len(set(ids)):
            raise TurnRefused("Not sent: an attachment is missing or was sent already; attach it again.")
    leaf = loaded.thread[-1] if loaded.thread else None
    now = timezone.now()
    upstream = history(loaded.thread)
    rows: list[Message] = []
    if role == "user":
        user_row = Message.new_user(
            conversation=loaded.conversation, parent_id=leaf.pk if leaf else None, turn_id=turn_id,
            content=content, created_at=now,
        )
        rows.append(user_row)
        rows.append(_answer_row(loaded, endpoint, settings, parent_id=user_row.id, turn_id=turn_id,
                                created_at=now + timedelta(microseconds=1)))
        upstream += (ChatMessage("user", content, parts=parts(attachments)),)
        title = title_from_message(content)
        kind = "send"
    else:
        rows.append(_answer_row(loaded, endpoint, settings, parent_id=leaf.pk if leaf else None,
                                turn_id=turn_id, prefill=content, created_at=now))
        upstream += (ChatMessage("assistant", content),)
        title = None
        kind = "prefill"
    for row in rows:
        row.prompt_version_id = prompt_version_id
    return _plan(kind=kind, loaded=loaded, user=user, endpoint=endpoint, s=settings, rows=rows,
                 messages=upstream, turn_id=turn_id, title=title, attachments=attachments)


def _on_branch(loaded: _Loaded, message_id: uuid.UUID, what: str) -> tuple[Message, int]:
    ids = [m.pk for m in loaded.thread]
    if message_id not in ids:
        if any(m.pk == message_id for m in loaded.messages):
            raise TurnRefused(f"That {what} is not on the current branch.")
        raise TurnRefused("No such message.")
    i = ids.index(message_id)
    return loaded.thread[i], i


def turn_plan_regenerate(
    *, user: AbstractBaseUser, conversation_id: int, message_id: uuid.UUID, settings: NextTurnSettings | None,
    keep_text: bool = False, live_ids: frozenset[uuid.UUID] = frozenset(),
) -> TurnPlan:
    """A new answer beside ``message_id`` (Regenerate, Retry), or one that starts with its text
    (``keep_text``: Continue), made with the panel's settings. Raises TurnRefused."""
    loaded = _load(user, conversation_id)
    old, i = _on_branch(loaded, message_id, "answer")
    if old.role != "assistant":
        raise TurnRefused("No such answer.")
    if old.status == MessageStatus.STREAMING:
        raise TurnRefused("This answer is still streaming.")
    _guard(loaded, live_ids)
    s = settings or NextTurnSettings.of_conversation(loaded.conversation)
    endpoint = _endpoint(user, loaded.conversation, s)
    _check_settings(endpoint, s)
    prefill = old.content if keep_text else ""
    turn_id = uuid.uuid4()
    upto = loaded.thread[:i]
    new = _answer_row(loaded, endpoint, s, parent_id=old.parent_id, turn_id=turn_id, prefill=prefill,
                      created_at=timezone.now())
    new.sibling_index, new.sibling_count = old.sibling_count, old.sibling_count + 1
    new.prev_sibling_id, new.next_sibling_id = old.pk, None
    upstream = history(upto) + ((ChatMessage("assistant", prefill),) if prefill else ())
    # The attempt counts the answers to this message the user got (complete or stopped): a
    # Regenerate asks for another one; a Retry of a failed or interrupted answer asks again for
    # the one that did not arrive.
    received = sum(1 for m in loaded.messages if m.parent_id == old.parent_id and m.role == "assistant"
                   and m.status in (MessageStatus.COMPLETE, MessageStatus.STOPPED))
    return _plan(kind="continue" if keep_text else "regenerate", loaded=loaded, user=user, endpoint=endpoint,
                 s=s, rows=[new], messages=upstream, turn_id=turn_id, replaces_id=old.pk, thread=upto,
                 attempt=1 if keep_text else received + 1)


def turn_plan_edit_resend(
    *, user: AbstractBaseUser, conversation_id: int, message_id: uuid.UUID, content: str, turn_id: uuid.UUID,
    settings: NextTurnSettings | None, live_ids: frozenset[uuid.UUID] = frozenset(),
) -> TurnPlan:
    """An edited user message as a new branch (a sibling of ``message_id``) and its answer.
    Raises TurnRefused (also when the edit was sent already, or a turn of the lane runs)."""
    loaded = _load(user, conversation_id, narrow=False)
    m, i = _on_branch(loaded, message_id, "message")
    if m.role != "user":
        raise TurnRefused("Only a user message can be sent again as a new branch.")
    if any(x.turn_id == turn_id for x in loaded.messages):
        raise TurnRefused("This edit was sent already.", resync=True)
    _guard(loaded, live_ids)
    s = settings or NextTurnSettings.of_conversation(loaded.conversation)
    endpoint = _endpoint(user, loaded.conversation, s)
    _check_settings(endpoint, s)
    now = timezone.now()
    user_row = Message.new_user(conversation=loaded.conversation, parent_id=m.parent_id, turn_id=turn_id,
                                 content=content, created_at=now)
    answer = _answer_row(loaded, endpoint, s, parent_id=user_row.id, turn_id=turn_id,
                         created_at=now + timedelta(microseconds=1))
    upto = loaded.thread[:i]
    atts = attachments_by_message([m]).get(m.pk, [])
    upstream = history(upto) + (ChatMessage("user", content, parts=parts(atts)),)
    user_row.sibling_index, user_row.sibling_count = m.sibling_count, m.sibling_count + 1
    user_row.prev_sibling_id, user_row.next_sibling_id = m.pk, None
    return _plan(kind="edit", loaded=loaded, user=user, endpoint=endpoint, s=s, rows=[user_row, answer],
                 messages=upstream, turn_id=turn_id, thread=upto)


def turn_plan_tool_result(
    *, user: AbstractBaseUser, conversation_id: int, message_id: uuid.UUID, tool_call_id: str, content: str,
    settings: NextTurnSettings | None, live_ids: frozenset[uuid.UUID] = frozenset(),
) -> TurnPlan:
    """The user's result for a client tool call of ``message_id`` (role ``tool``) and the answer
    that continues the turn. Raises TurnRefused (unknown call, a server-side tool, not on the
    branch, a running turn, a result already sent for that call)."""
    loaded = _load(user, conversation_id, narrow=False)
    m, i = _on_branch(loaded, message_id, "answer")
    calls = [c for c in (m.tool_calls or []) if not c.get("server")]
    if m.role != "assistant" or not calls:
        raise TurnRefused("No such tool call.")
    call_id = tool_call_id or calls[0].get("id", "")
    if call_id not in {c.get("id") for c in calls}:
        raise TurnRefused("No such tool call.")
    if any(x.role == "tool" and x.parent_id == m.pk and x.tool_call_id == call_id for x in loaded.messages):
        raise TurnRefused("The result of this tool call was sent already.")
    _guard(loaded, live_ids)
    s = settings or NextTurnSettings.of_conversation(loaded.conversation)
    endpoint = _endpoint(user, loaded.conversation, s)
    _check_settings(endpoint, s)
    now = timezone.now()
    turn_id = uuid.uuid4()
    tool_row = Message.new_tool(conversation=loaded.conversation, parent_id=m.pk, turn_id=turn_id,
                                 tool_call_id=call_id, content=content, created_at=now)
    answer = _answer_row(loaded, endpoint, s, parent_id=tool_row.id, turn_id=turn_id,
                         created_at=now + timedelta(microseconds=1))
    upto = loaded.thread[: i + 1]
    upstream = history(upto) + (ChatMessage("tool", content, tool_call_id=call_id),)
    return _plan(kind="tool_result", loaded=loaded, user=user, endpoint=endpoint, s=s, rows=[tool_row, answer],
                 messages=upstream, turn_id=turn_id, thread=upto)


def conversation_settings(*, user: AbstractBaseUser, conversation_id: int) -> NextTurnSettings:
    """The settings the conversation stored at its last turn. Raises TurnRefused."""
    try:
        conversation = conversation_get_for_user(user=user, conversation_id=conversation_id)
    except Http404 as exc:
        raise TurnRefused("No such conversation.") from exc
    return NextTurnSettings.of_conversation(conversation)


def turn_preview_request(
    *, user: AbstractBaseUser, conversation_id: int, settings: NextTurnSettings, draft: str = "", role: str = "user",
) -> tuple[EndpointTarget, ChatRequest]:
    """The request the next turn would send (View code, Count tokens): the current branch, the
    draft in the composer as the next message when there is one, and the panel's settings.
    Raises TurnRefused when there is no endpoint."""
    loaded = _load(user, conversation_id)
    endpoint = _endpoint(user, loaded.conversation, settings, budget=False)
    messages = history(loaded.thread)
    if draft.strip():
        messages += (ChatMessage(role if role in ("user", "assistant") else "user", draft),)
    request = make_request(api_style=endpoint.api_style, model=settings.model or loaded.conversation.model,
                           system=settings.system_prompt, stored=settings.params, messages=messages)
    return EndpointTarget.of(endpoint), request
