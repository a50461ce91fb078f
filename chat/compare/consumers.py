"""The comparison websocket: ``/ws/compare/<conversation_id>/``.

The conversation consumer's patterns and frames (:class:`chat.consumers.ConversationConsumer`:
connect, writer queue, snapshots of running turns, sync, Stop, cluster handlers), with the
actions of a comparison. Close code 4404 for anything but the user's own comparison (accepted
first, then closed), before any upstream call.

Incoming frames (JSON, ``action``):

- ``send``: ``turn_id, content, runs (1–20), lanes: [{lane_id, endpoint_id, model,
  system_prompt, temperature, top_p, max_tokens, seed}, …]``: one user message fanned out to
  every lane (``runs`` answers per lane; the first is the lane's answer, the rest repeat runs).
- ``retry`` (alias ``regenerate``): ``message_id`` (+ ``lanes``): that lane only runs again.
- ``stop``: ``message_id``; ``stop_all``: every running answer of the comparison.
- ``sync``, ``resync``: a (re)connected page catches up.

Each lane's answer is its own turn on :data:`chat.turns.registry` (Admission, frames,
durability); deltas address the answer's own element, so lanes never mix.

May import: channels, Django, chat.db, chat.forms, chat.consumers, chat.selectors, chat.turns,
chat.frames, chat.compare.*.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from django.http import Http404

from chat import db, frames, selectors
from chat.compare import display
from chat.compare import selectors as cs
from chat.compare import services as csv
from chat.consumers import BUSY, ConversationConsumer, _config
from chat.forms import TurnSettingsForm
from chat.selectors import NextTurnSettings, TurnPlan, TurnRefused
from chat.turns import TurnSpec, registry

log = logging.getLogger(__name__)

LANE_FIELDS = ("lane_id", "endpoint_id", "model", "system_prompt", "temperature", "top_p", "max_tokens", "seed")


def parse_lanes(user: Any, data: dict[str, Any]) -> dict[int, NextTurnSettings]:
    """The ``lanes`` of a frame as lane id → settings, validated with the chat's settings form
    (fields the endpoint's API style does not take are not validated). At most 6 lanes; a lane
    without an endpoint or model is left out (its stored settings apply). Raises TurnRefused
    with the lane's field errors."""
    raw = data.get("lanes")
    if not isinstance(raw, list):
        return {}
    out: dict[int, NextTurnSettings] = {}
    for n, item in enumerate(raw[: cs.MAX_LANES]):
        if not isinstance(item, dict):
            continue
        item = {k: item.get(k) for k in LANE_FIELDS if item.get(k) is not None}
        try:
            lane_id = int(item.get("lane_id"))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise TurnRefused("No such lane.") from None
        if not TurnSettingsForm.present(item):
            continue
        style = None
        try:
            style = selectors.endpoint_usable_get_for_user(user=user, endpoint_id=item.get("endpoint_id")).api_style
        except Http404:
            pass
        form = TurnSettingsForm(item, api_style=style)
        if not form.is_valid():
            errors = "; ".join(f"{k}: {' '.join(str(e) for e in v)}" for k, v in form.errors.items())
            raise TurnRefused(f"Not sent: lane {cs.LETTERS[n] if n < 6 else n + 1}: {errors}")
        c = form.cleaned_data
        out[lane_id] = NextTurnSettings(c["endpoint_id"], c["model"], c.get("system_prompt") or "", form.params())
    return out


def _runs(data: dict[str, Any]) -> int:
    try:
        runs = int(data.get("runs") or 1)
    except (TypeError, ValueError):
        raise TurnRefused(f"Repeat runs: a number from 1 to {cs.MAX_RUNS}.") from None
    if not 1 <= runs <= cs.MAX_RUNS:
        raise TurnRefused(f"Repeat runs: a number from 1 to {cs.MAX_RUNS}.")
    return runs


def prepare_send(
    *, user: Any, conversation_id: int, data: dict[str, Any], live: frozenset[uuid.UUID]
) -> tuple[list[TurnPlan], str, dict[int, NextTurnSettings], bool]:
    """A ``send`` frame → the plans of every lane and run, the frame that shows them, the
    lanes' settings to store, and whether the comparison is blind. Raises TurnRefused (nothing
    written)."""
    try:
        turn_id = uuid.UUID(str(data.get("turn_id")))
    except ValueError:
        raise TurnRefused("Not sent: bad turn id.") from None
    content = data.get("content")
    if not isinstance(content, str) or not content.strip():
        raise TurnRefused("Type a message first.")
    if len(content) > 200_000:
        raise TurnRefused("Not sent: the message is over 200,000 characters.")
    settings = parse_lanes(user, data)
    plans = cs.compare_plan_send(user=user, conversation_id=conversation_id, turn_id=turn_id, content=content,
                                 settings=settings, runs=_runs(data), live_ids=live)
    record_versions(user, data, plans)
    conversation = cs.compare_get_for_user(user=user, conversation_id=conversation_id)
    lanes = cs.lanes_of(conversation=conversation)
    announce = display.turn_started(conversation, lanes, plans[0].user_message, [p.assistant for p in plans])
    if plans[0].title_changed:  # the first send names the comparison: list it (and head it) at once
        listed = [c for c in cs.compare_list_for_user(user=user).exclude(title="")[:99] if c.pk != conversation_id]
        conversation.title = plans[0].title
        announce += display.compare_list([conversation, *listed], current_id=conversation_id)
    return plans, announce, (settings if not conversation.blind else {}), conversation.blind


def record_versions(user: Any, data: dict[str, Any], plans: list[TurnPlan]) -> None:
    """Set ``prompt_version_id`` on the unsaved rows of ``plans`` as the chat does: each lane's
    answers get that lane's ``lanes[].prompt_version_id``, else the frame's ``prompt_version_id``;
    the user message gets the frame's. Nothing is recorded without the frame's version (as in the
    chat, only the send "Use in compare" makes claims the prompt). Versions the user may not see are
    ignored (checked by chat.prompts.selectors.version_visible_id)."""
    from chat.prompts.selectors import version_visible_id

    cache: dict[Any, int | None] = {}

    def visible(raw: Any) -> int | None:
        if raw in (None, ""):
            return None
        if raw not in cache:
            cache[raw] = version_visible_id(user=user, version_id=raw)
        return cache[raw]

    top = visible(data.get("prompt_version_id"))
    if top is None:
        return  # as in the chat: only the send that "Use in compare" makes records versions
    per_lane: dict[int, int | None] = {}
    for item in (data.get("lanes") if isinstance(data.get("lanes"), list) else [])[: cs.MAX_LANES]:
        if isinstance(item, dict):
            try:
                per_lane[int(item.get("lane_id"))] = visible(item.get("prompt_version_id"))  # type: ignore[arg-type]
            except (TypeError, ValueError):
                continue
    for plan in plans:
        for row in plan.rows:
            if row.role == "assistant":
                row.prompt_version_id = per_lane.get(plan.lane_id) or top
            else:
                row.prompt_version_id = top


def prepare_retry(
    *, user: Any, conversation_id: int, data: dict[str, Any], live: frozenset[uuid.UUID]
) -> tuple[TurnPlan, str, bool]:
    """A ``retry`` frame → the lane's new plan, the frame putting it where the old answer was,
    and whether the comparison is blind."""
    try:
        mid = uuid.UUID(str(data.get("message_id")))
    except ValueError:
        raise TurnRefused("No such answer.") from None
    try:
        conversation = cs.compare_get_for_user(user=user, conversation_id=conversation_id)
    except Http404:
        raise TurnRefused("No such comparison.") from None
    plan = cs.compare_plan_retry(user=user, conversation_id=conversation_id, message_id=mid,
                                 settings={} if conversation.blind else parse_lanes(user, data), live_ids=live)
    view = frames.MessageView.from_row(plan.assistant)
    if conversation.blind:
        view.snapshot = {}
    return plan, frames.replace(plan.replaces_id, view), conversation.blind


def _lanes_frame(user: Any, conversation_id: int) -> tuple[str, list[uuid.UUID]]:
    conversation = cs.compare_get_for_user(user=user, conversation_id=conversation_id)
    lanes = cs.lanes_of(conversation=conversation)
    rows = cs.compare_rows(conversation=conversation)
    endpoints = list(selectors.endpoint_list_for_user(user=user))
    html = display.render_lanes(conversation, lanes, rows, endpoints, registry.live_view, oob=True)
    return html, [m.pk for m in rows.all if m.role == "assistant" and m.status == "streaming"]


def _final_from_row(user: Any, conversation_id: int, mid: Any) -> str:
    m = cs.message_in_compare(user=user, conversation_id=conversation_id, message_id=mid)
    if m is None:
        return ""
    view = frames.MessageView.from_row(m)
    if selectors.blind_pending(m.conversation):
        view.snapshot = {}  # blind: no endpoint or model until the vote
    return frames.final_full(view)


class CompareConsumer(ConversationConsumer):
    """One browser tab watching and driving one comparison."""

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is not None and user.is_authenticated:
            try:
                await db.read(cs.compare_get_for_user, user=user,
                              conversation_id=self.scope["url_route"]["kwargs"]["conversation_id"])
            except Http404:
                self.subscriber = None
                await self.accept()
                await self.close(code=4404)
                return
        await super().connect()

    unknown_action = "Not available in a comparison."

    def handlers(self) -> dict[str, Any]:
        """The actions of a comparison (frames are parsed and cleaned by the chat consumer's
        ``receive``): send to every lane, a lane's retry or new answer, stop one or all, sync."""
        return {
            "send": self.handle_compare_send, "retry": self.handle_compare_retry,
            "regenerate": self.handle_compare_retry, "stop": self.handle_stop, "stop_all": self.handle_stop_all,
            "sync": self.handle_sync, "resync": self.handle_resync,
        }

    async def _resync(self) -> None:
        """The lanes again (with live views of running answers), then a snapshot and cursor for
        every running answer; an answer the page shows as running that ended gets its row."""
        frame, streaming = await db.read(_lanes_frame, self.user, self.conversation_id)
        if self.subscriber is None:
            return
        self.queue.put_nowait(frame)
        for turn in list(registry.turns.values()):
            if turn.spec.conversation_id == self.conversation_id:
                self.queue.put_nowait(turn.subscribe(self.subscriber))
        for mid in streaming:
            if mid in registry.turns:
                continue
            html = await db.read(_final_from_row, self.user, self.conversation_id, mid)
            if html and self.subscriber is not None:
                self.queue.put_nowait(html)

    async def handle_resync(self, data: dict[str, Any]) -> None:
        await self._resync()

    async def handle_stop_all(self, data: dict[str, Any]) -> None:
        """Stop every running answer of this comparison (this process's turns)."""
        stopped = 0
        for turn in list(registry.turns.values()):
            if turn.spec.conversation_id == self.conversation_id and turn.spec.user_id == self.user.pk:
                stopped += registry.stop(turn.message_id)
        if not stopped:
            self.notice("Nothing is running.", level="info")

    async def handle_compare_send(self, data: dict[str, Any]) -> None:
        if not registry.admission.can_queue(self.user.pk):
            self.notice(BUSY)
            return
        try:
            plans, announce, settings, blind = await db.read(
                prepare_send, user=self.user, conversation_id=self.conversation_id, data=data, live=registry.live_ids(),
            )
        except TurnRefused as refusal:
            self.refuse(refusal)
            return
        except Http404:
            self.notice("No such comparison.")
            return
        if any(registry.lane_running(self.conversation_id, p.lane_id) for p in plans):
            self.refuse(TurnRefused(selectors.BUSY))
            return
        if settings:
            db.write_nowait(csv.lanes_save, conversation_id=self.conversation_id, settings=settings)
        self.queue.put_nowait(display_clear_notice())
        # Every lane's first answer before any repeat run (admission is FIFO): each lane starts
        # at once, the runs queue behind. The first plan holds the user message: it goes first.
        for n, i in enumerate(sorted(range(len(plans)), key=lambda i: (plans[i].assistant.run, i))):
            self._start(plans[i], announce if n == 0 else "", blind=blind)

    async def handle_compare_retry(self, data: dict[str, Any]) -> None:
        if not registry.admission.can_queue(self.user.pk):
            self.notice(BUSY)
            return
        try:
            plan, announce, blind = await db.read(
                prepare_retry, user=self.user, conversation_id=self.conversation_id, data=data, live=registry.live_ids(),
            )
        except TurnRefused as refusal:
            self.refuse(refusal)
            return
        if registry.lane_running(self.conversation_id, plan.lane_id):
            self.refuse(TurnRefused(selectors.BUSY))
            return
        self._start(plan, announce, blind=blind)

    def _start(self, plan: TurnPlan, announce: str, *, blind: bool = False) -> None:
        """Start one lane's turn on the shared runner (its rows committed beside the request)."""
        a = plan.assistant
        spec = TurnSpec(
            message_id=a.id, conversation_id=plan.conversation_id, user_id=self.user.pk,
            config=_config(plan.target, self.scope), request=plan.request,
            prompt_price_per_mtok=plan.prompt_price_per_mtok, completion_price_per_mtok=plan.completion_price_per_mtok,
            conversation_title=plan.title, turn_id=a.turn_id, lane_id=plan.lane_id, plan=plan,
            group=f"compare:{plan.conversation_id}", group_limit=max_running(),
        )
        # Blind mode: the live answer shows no endpoint or model (the row keeps its snapshot).
        registry.start(spec, announce=announce, snapshot_meta={} if blind else dict(a.settings_snapshot))


def max_running() -> int:
    """How many answers of one comparison run at once (lanes and repeat runs); the others wait
    in the admission queue with their position shown. ``PLAYGROUND_COMPARE_MAX_RUNNING``,
    default 6."""
    from django.conf import settings

    return int(getattr(settings, "PLAYGROUND_COMPARE_MAX_RUNNING", 6))


def display_clear_notice() -> str:
    """An empty notice (clears the last refusal)."""
    return frames.notice("", level="info")
