"""Pages of comparisons: the list, a new comparison, the compare page, lane edits, the turn
summary (table and chart), exports, votes and the leaderboard.

Every view fetches through :func:`chat.compare.selectors.compare_get_for_user` (404 for
anything not the user's own comparison); writes are POSTs.

May import: Django, django-htmx, chat.forms, chat.selectors, chat.frames, chat.turns (live
views), chat.compare.*.
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from django.conf import settings
from django.contrib import messages as flash
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST, require_safe

from chat import forms, selectors
from chat.compare import display
from chat.compare import selectors as cs
from chat.compare import services as csv_services
from chat.turns import registry


def _refuse(message: str) -> HttpResponse:
    """A 400 whose body is plain text (shown by compare.js with textContent; never parsed as
    HTML, even when it repeats a form error that quotes the user's input)."""
    return HttpResponse(message, status=400, content_type="text/plain; charset=utf-8")

def _lanes_response(request: HttpRequest, conversation: Any) -> HttpResponse:
    from chat.compare.prompt_views import lanes_response

    return lanes_response(request, conversation)


@require_safe
def compare_index(request: HttpRequest) -> HttpResponse:
    """``/compare/``: the newest comparison, or a page that makes one."""
    latest = cs.compare_list_for_user(user=request.user).first()
    if latest is not None:
        return redirect("chat:compare", conversation_id=latest.pk)
    return render(request, "compare/start.html", {"comparisons": []})


@require_POST
def compare_new(request: HttpRequest) -> HttpResponse:
    """Make a comparison with two lanes on the user's first endpoint (or, with
    ``from_conversation``, the chat's current settings as the first lane)."""
    lanes = None
    source = request.POST.get("from_conversation")
    if source:
        conv = selectors.conversation_get_for_user(user=request.user, conversation_id=source)
        s = selectors.NextTurnSettings.of_conversation(conv)
        lanes = [s, s]
    conversation = csv_services.compare_create(user=request.user, lanes=lanes, blind=request.POST.get("blind") == "on")
    return redirect("chat:compare", conversation_id=conversation.pk)


@require_safe
def compare_page(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """The compare page: lanes with their answers (live ones from the runner), the composer,
    the turn table and the chart."""
    conversation = cs.compare_get_for_user(user=request.user, conversation_id=conversation_id)
    lanes = cs.lanes_of(conversation=conversation)
    rows = cs.compare_rows(conversation=conversation)
    endpoints = list(selectors.endpoint_list_for_user(user=request.user))
    models = sorted({m.get("id") for e in endpoints for m in (e.models_cache or []) if m.get("id")})
    from chat.compare.prompt_views import decorate

    views = display.lane_views(conversation, lanes, rows, registry.live_view)
    return render(request, "compare/page.html", {
        "conversation": conversation, "lane_views": views, **decorate(request, conversation, views),
        "endpoints": endpoints, "models": models, "lane_count": len(lanes), "max_lanes": cs.MAX_LANES,
        "min_lanes": cs.MIN_LANES, "max_runs": cs.MAX_RUNS, "turn_id": forms.new_turn_id(),
        "comparisons": cs.compare_list_for_user(user=request.user).exclude(title="")[:100],
        "current_id": conversation.pk, "ws_max_bytes": settings.PLAYGROUND_WS_MAX_MESSAGE_BYTES,
        **display.summary_context(conversation, lanes, rows),
    })


@require_safe
def compare_summary(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """The turn table and the chart (``?turn=<user message id>``; default the last turn)."""
    conversation = cs.compare_get_for_user(user=request.user, conversation_id=conversation_id)
    lanes = cs.lanes_of(conversation=conversation)
    rows = cs.compare_rows(conversation=conversation)
    return render(request, "compare/summary.html",
                  display.summary_context(conversation, lanes, rows, request.GET.get("turn")))


@require_POST
def lane_action(request: HttpRequest, conversation_id: int, action: str) -> HttpResponse:
    """Add, duplicate, remove or move a lane (POST ``lane_id``; ``delta`` −1/+1 for move);
    returns the ``#lanes`` region."""
    conversation = cs.compare_get_for_user(user=request.user, conversation_id=conversation_id)
    lane_id = request.POST.get("lane_id")
    try:
        if action == "add":
            csv_services.lane_add(conversation=conversation)
        elif action == "duplicate":
            csv_services.lane_add(conversation=conversation, copy_of=lane_id)
        elif action == "remove":
            csv_services.lane_remove(conversation=conversation, lane_id=lane_id)
        elif action == "move":
            csv_services.lane_move(conversation=conversation, lane_id=lane_id,
                                   delta=-1 if request.POST.get("delta") == "-1" else 1)
        else:
            raise Http404("No such action")
    except csv_services.LaneRefused as exc:
        response = _lanes_response(request, conversation)
        response["HX-Trigger"] = json.dumps({"pg:notice": str(exc)})
        return response
    return _lanes_response(request, conversation)


@require_POST
def lane_continue(request: HttpRequest, conversation_id: int, lane_id: int) -> HttpResponse:
    """Continue a lane as a normal conversation (its settings and history copied)."""
    conversation = selectors.refuse_if_blind(cs.compare_get_for_user(user=request.user, conversation_id=conversation_id))
    try:
        chat = csv_services.lane_continue_as_chat(conversation=conversation, lane_id=lane_id)
    except csv_services.LaneRefused as exc:
        raise Http404("No such lane") from exc
    return redirect("chat:conversation", conversation_id=chat.pk)


@require_safe
def compare_list(request: HttpRequest) -> HttpResponse:
    """The sidebar's list of comparisons (``?q=`` searches titles; ``current`` is marked)."""
    q = request.GET.get("q", "").strip()[:200]
    current = request.GET.get("current", "")
    return render(request, "compare/page.html#compare-list", {
        "comparisons": cs.compare_list_for_user(user=request.user, query=q).exclude(title="")[:100],
        "current_id": int(current) if current.isdigit() else None,
    })


@require_POST
def lane_save(request: HttpRequest, conversation_id: int, lane_id: int) -> HttpResponse:
    """Store one lane's settings (its form autosaves on change). 204, or 400 with the errors."""
    conversation = cs.compare_get_for_user(user=request.user, conversation_id=conversation_id)
    data = request.POST
    style = None
    try:
        style = selectors.endpoint_usable_get_for_user(user=request.user, endpoint_id=data.get("endpoint_id")).api_style
    except Http404:
        return _refuse("No such endpoint.")
    form = forms.TurnSettingsForm(data, api_style=style)
    if not form.is_valid():
        return _refuse("; ".join(k + ": " + " ".join(v) for k, v in form.errors.items()))
    c = form.cleaned_data
    try:
        csv_services.lane_save(
            conversation=conversation, lane_id=lane_id,
            settings=selectors.NextTurnSettings(c["endpoint_id"], c["model"], c.get("system_prompt") or "", form.params()),
            label=(data.get("label") or "")[:60],
        )
    except csv_services.LaneRefused as exc:
        raise Http404("No such lane") from exc
    return HttpResponse(status=204)


@require_POST
def compare_rename(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """Rename the comparison (POST ``title``, ≤ 200 characters, not empty)."""
    conversation = cs.compare_get_for_user(user=request.user, conversation_id=conversation_id)
    form = forms.RenameForm(request.POST)
    if form.is_valid():
        from chat import services

        try:
            services.conversation_rename(conversation=conversation, title=form.cleaned_data["title"])
        except ValueError as exc:
            flash.error(request, str(exc))
    return redirect("chat:compare", conversation_id=conversation.pk)


@require_POST
def compare_delete(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """Delete the comparison (as a chat is deleted: an answer still running ends with nothing
    left to write)."""
    from chat import services

    conversation = cs.compare_get_for_user(user=request.user, conversation_id=conversation_id)
    services.conversation_delete(conversation=conversation)
    return redirect("chat:compare_index")


def _export_rows(conversation: Any) -> tuple[list[Any], Any]:
    lanes = cs.lanes_of(conversation=conversation)
    rows = cs.compare_rows(conversation=conversation)
    return lanes, rows


@require_safe
def compare_export_csv(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """Every answer of the comparison as CSV: turn, lane, run, settings and figures."""
    conversation = selectors.refuse_if_blind(cs.compare_get_for_user(user=request.user, conversation_id=conversation_id))
    lanes, rows = _export_rows(conversation)
    pos = {lane.pk: i for i, lane in enumerate(lanes)}
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["turn", "prompt", "lane", "label", "run", "endpoint", "model", "status", "finish_reason",
                "ttft_ms", "tokens_per_sec", "total_ms", "prompt_tokens", "completion_tokens",
                "reasoning_tokens", "cost_usd"])
    for t, u in enumerate(rows.users, 1):
        for lane in lanes:
            for m in rows.runs.get((u.pk, lane.pk), []):
                met, use, snap = m.metrics or {}, m.usage or {}, m.settings_snapshot or {}
                w.writerow([t, _cell(u.content), pos[lane.pk] + 1, _cell(cs.lane_label(lane, pos[lane.pk])), m.run,
                            _cell(snap.get("endpoint_name", "")), _cell(snap.get("model", "")), m.status,
                            m.finish_reason, met.get("ttft_ms"), met.get("tokens_per_sec"), met.get("total_ms"),
                            use.get("prompt_tokens"), use.get("completion_tokens"), use.get("reasoning_tokens"),
                            met.get("cost_usd")])
    response = HttpResponse(buf.getvalue(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="comparison-{conversation.pk}.csv"'
    return response


def _cell(text: str) -> str:
    """A CSV cell that a spreadsheet never runs as a formula."""
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


@require_safe
def compare_export_json(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """The whole comparison as re-importable JSON (``chat.compare.transfer``, format
    ``playground.comparison/1``): lanes with settings, every answer with its metrics, votes."""
    from chat.compare import transfer

    conversation = selectors.refuse_if_blind(cs.compare_get_for_user(user=request.user, conversation_id=conversation_id))
    response = JsonResponse(transfer.comparison_export(conversation=conversation), json_dumps_params={"indent": 2, "ensure_ascii": False})
    response["Content-Disposition"] = f'attachment; filename="comparison-{conversation.pk}.json"'
    return response


@require_safe
def compare_export_md(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """The comparison as Markdown: lanes, then per turn each lane's answer and figures."""
    from chat.compare import transfer

    conversation = selectors.refuse_if_blind(cs.compare_get_for_user(user=request.user, conversation_id=conversation_id))
    response = HttpResponse(transfer.comparison_markdown(conversation=conversation), content_type="text/markdown; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="comparison-{conversation.pk}.md"'
    return response


@require_POST
def compare_blind(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """Blind mode on (lanes shuffled, shown as A, B, … until the vote) or off (``blind``)."""
    conversation = cs.compare_get_for_user(user=request.user, conversation_id=conversation_id)
    blind = request.POST.get("blind") == "on"
    if blind and not conversation.blind and conversation.messages.exists():
        # Earlier answers would show which letter is which lane: blind starts afresh, same lanes.
        fresh = csv_services.compare_create(
            user=request.user, lanes=[cs.lane_settings(lane) for lane in cs.lanes_of(conversation=conversation)])
        csv_services.compare_set_blind(conversation=fresh, blind=True)
        flash.info(request, "Blind mode started a new comparison with the same lanes (the earlier answers "
                               "would have shown which lane is which).")
        return redirect("chat:compare", conversation_id=fresh.pk)
    csv_services.compare_set_blind(conversation=conversation, blind=blind)
    return redirect("chat:compare", conversation_id=conversation.pk)


@require_POST
def compare_vote(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """A blind vote on the last turn: ``choice`` = ``lane:<position>``, ``tie`` or ``both_bad``. Stored with the prompt, the answers and every lane's settings snapshot; the
    page then shows who was who. 400 when the turn is not finished or the choice is unknown."""
    conversation = cs.compare_get_for_user(user=request.user, conversation_id=conversation_id)
    if not conversation.blind:
        return _refuse("This comparison is not blind.")
    lanes = cs.lanes_of(conversation=conversation)
    rows = cs.compare_rows(conversation=conversation)
    if not rows.users:
        return _refuse("Nothing to vote on yet.")
    u = rows.users[-1]
    answers = [rows.shown.get((u.pk, lane.pk)) for lane in lanes]
    if any(a is None or a.status == "streaming" for a in answers):
        return _refuse("Wait until every lane has answered.")
    choice = request.POST.get("choice", "")
    position = None
    ranks: list[int] = []
    if choice.startswith("lane:"):
        choice, _, at = choice.partition(":")
        try:
            position = int(at)
        except ValueError:
            return _refuse("Pick a lane.")
        if not 0 <= position < len(lanes):
            return _refuse("Pick a lane.")
    elif choice == "rank":
        ranks = parse_ranking(request.POST, len(lanes))
        if ranks is None:
            return _refuse("Give every lane a place from 1 to " + str(len(lanes)) + ".")
        position = min(range(len(lanes)), key=lambda i: (ranks[i], i))
    elif choice not in ("tie", "both_bad"):
        return _refuse("Unknown choice.")
    snapshot = [{
        "lane_id": lane.pk, "position": i, "label": cs.lane_label(lane, i, blind=True),
        "message_id": str(a.pk), "settings": a.settings_snapshot, "answer": a.content, "status": a.status,
        "metrics": {k: (a.metrics or {}).get(k) for k in ("ttft_ms", "tokens_per_sec", "total_ms", "cost_usd")},
        "usage": a.usage, **({"rank": ranks[i]} if choice == "rank" else {}),
    } for i, (lane, a) in enumerate(zip(lanes, answers, strict=True)) if a is not None]
    csv_services.vote_create(user=request.user, conversation=conversation, user_message=u, choice=choice,
                             winner_position=position, lanes=snapshot)
    return redirect("chat:compare", conversation_id=conversation.pk)


def parse_ranking(data: Any, n: int) -> list[int] | None:
    """``rank_0`` … ``rank_<n-1>`` (1 = best, 1..n; equal places are ties) → the places by lane
    position, or None when one is missing or out of range. Only for more than 2 lanes."""
    if n <= 2:
        return None
    out = []
    for i in range(n):
        raw = str(data.get(f"rank_{i}", ""))
        if not raw.isdigit() or not 1 <= int(raw) <= n:
            return None
        out.append(int(raw))
    return out


def vote_games(keys: list[str], lanes: list[dict[str, Any]], choice: str, winner_position: int | None) -> list[tuple[str, str, float]]:
    """The pairwise outcomes ``(a, b, score of a)`` one vote implies: a lane win beats every other
    lane; a ranking (``rank`` in each lane's snapshot, 1 = best) is every pair ordered by place
    (equal places: a tie, 0.5); a tie or "all bad" is a tie between every pair. Pairs of the same
    model are left out."""
    if choice == "rank" and all(isinstance(x.get("rank"), int) for x in lanes):
        games = []
        for i in range(len(lanes)):
            for j in range(i + 1, len(lanes)):
                if keys[i] == keys[j]:
                    continue
                ri, rj = lanes[i]["rank"], lanes[j]["rank"]
                games.append((keys[i], keys[j], 1.0 if ri < rj else 0.0 if ri > rj else 0.5))
        return games
    if choice in ("lane", "rank") and winner_position is not None:
        win = next((k for k, x in zip(keys, lanes, strict=True) if x.get("position") == winner_position), None)
        if win is None:
            return []
        return [(win, k, 1.0) for k, x in zip(keys, lanes, strict=True) if x.get("position") != winner_position and k != win]
    return [(a, b, 0.5) for i, a in enumerate(keys) for b in keys[i + 1:] if a != b]


def model_key(settings_snapshot: dict[str, Any]) -> str:
    """What the leaderboard ranks: endpoint name · model id."""
    return f"{settings_snapshot.get('endpoint_name', '?')} · {settings_snapshot.get('model', '?')}"


def leaderboard_rows(votes: list[Any]) -> list[dict[str, Any]]:
    """Rows of the leaderboard from votes (pairwise outcomes by :func:`vote_games`: a lane win
    beats every other lane of that vote; a ranking counts every pair it orders; a tie or "both
    bad" is a tie between every pair). Per model: Bradley–Terry rating with its
    95 % interval, wins, losses, ties, win rate, votes, median TTFT and tokens per second."""
    from chat.compare.stats import bradley_terry, percentile

    games: list[tuple[str, str, float]] = []
    seen: dict[str, dict[str, list[float]]] = {}
    counts: dict[str, int] = {}
    for v in votes:
        lanes = v.lanes or []
        keys = [model_key(x.get("settings") or {}) for x in lanes]
        for key, x in zip(keys, lanes, strict=True):
            counts[key] = counts.get(key, 0) + 1
            m = x.get("metrics") or {}
            d = seen.setdefault(key, {"ttft": [], "tps": []})
            if m.get("ttft_ms") is not None:
                d["ttft"].append(m["ttft_ms"])
            if m.get("tokens_per_sec") is not None:
                d["tps"].append(m["tokens_per_sec"])
        games += vote_games(keys, lanes, v.choice, v.winner_position)
    out = []
    for r in bradley_terry(games):
        d = seen.get(r.key, {"ttft": [], "tps": []})
        out.append({"key": r.key, "rating": r, "votes": counts.get(r.key, 0),
                    "ttft": percentile(d["ttft"], 50), "tps": percentile(d["tps"], 50)})
    return out


@require_safe
def leaderboard(request: HttpRequest) -> HttpResponse:
    """The user's models (endpoint + model) ranked by their blind votes."""
    votes = list(cs.vote_list_for_user(user=request.user))
    return render(request, "compare/leaderboard.html", {"rows": leaderboard_rows(votes), "vote_count": len(votes)})
