"""Export a comparison as JSON (complete, versioned, re-importable) or Markdown, and import the
JSON back into the importer's own workspace.

JSON format ``playground.comparison/1`` (``"kind": "comparison"``)::

    {"format": "playground.comparison/1", "kind": "comparison", "title": str, "blind": bool,
     "created_at": iso, "exported_at": iso,
     "lanes": [{"position": int, "label": str, "endpoint_name": str, "api_style": str,
                "model": str, "system_prompt": str, "params": {...}}],            # 2–6
     "turns": [{"prompt": str, "created_at": iso, "edited": bool,
                "answers": [{"lane": position, "run": int, "shown": bool, "status": str,
                             "content", "reasoning", "finish_reason", "reasoning_signature": str,
                             "prefill_len": int, "edited": bool, "created_at": iso,
                             "usage", "usage_raw", "metrics", "error", "settings": {...},
                             "tool_calls", "replay_blocks", "logprobs": JSON}],
                "vote": null | {"choice", "winner_position", "prompt", "created_at",
                                "lanes": [{"lane": position now | null, "position": its
                                           place at the vote, "label", "answer_ref": index into
                                           this turn's answers | null, "settings", "answer",
                                           "status", "metrics", "usage", "rank"?}]}}]}

``answers`` hold every answer of the turn, lane by lane in the order they were made: the shown
one (the newest with ``run == 0``), older ones a Retry replaced (``shown: false``) and repeat
runs (``run > 0``). ``settings`` is the answer's settings snapshot without ``base_url``,
``endpoint_id`` and ``team_id``: an export never holds keys, secret headers, endpoint URLs or
database ids (references inside the file are positions and indexes).

Import validates the whole file first and writes nothing on any error (one transaction). Each
lane points to the importer's usable endpoint (own first, then a team's) with the lane's
``endpoint_name``; when there is none the lane gets **no endpoint** (the page asks to pick one
before the next send) — :func:`comparison_import` returns a note per lane saying which. Ids and
turn ids are made anew; timestamps are kept. Imported answers do not count as usage (like a
fork's copies), imported votes do not count in the leaderboard (``Vote.imported``), and ``inspect`` (the raw request/events) is not exported.

Round trip: ``comparison_export(comparison_import(comparison_export(x)))`` equals
``comparison_export(x)`` except ``exported_at`` (when every lane's endpoint name is usable by the
importer; a lane imported without an endpoint exports ``endpoint_name`` "" and ``api_style`` "").

Limits: the file at most :data:`MAX_FILE_BYTES`; 2–6 lanes; :data:`MAX_TURNS` turns and
:data:`MAX_ANSWERS` answers; each text field at most 2 000 000 characters.

May import: Django, chat.models, chat.selectors, chat.compare.selectors.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from chat.compare import selectors as cs
from chat.models import Conversation, Lane, Message, MessageStatus, Vote
from chat.rendering import demote_headings
from chat.selectors import endpoint_list_for_user

FORMAT = "playground.comparison/1"
KIND = "comparison"
MAX_FILE_BYTES = 16 * 1024 * 1024
MAX_TURNS = 1000
MAX_ANSWERS = 5000
MAX_TEXT = 2_000_000
#: Settings-snapshot keys an export never carries (an endpoint URL, database ids).
HIDDEN_SETTINGS = ("base_url", "endpoint_id", "team_id")
VOTE_CHOICES = ("lane", "rank", "tie", "both_bad")
_ANSWER_TEXT = ("content", "reasoning", "finish_reason", "reasoning_signature")
_ANSWER_JSON = {"usage": dict, "usage_raw": dict, "metrics": dict, "error": dict, "settings": dict,
                "tool_calls": list, "replay_blocks": list, "logprobs": list}
_LANE_METRICS = ("ttft_ms", "tokens_per_sec", "total_ms", "cost_usd")


class ImportRefused(ValueError):
    """The file cannot be imported; the message says why. Nothing was written."""


def _clean_settings(snapshot: dict[str, Any] | None) -> dict[str, Any]:
    return {k: v for k, v in (snapshot or {}).items() if k not in HIDDEN_SETTINGS}


# ---- export ------------------------------------------------------------------------------------


def comparison_export(*, conversation: Conversation) -> dict[str, Any]:
    """Everything of the comparison ``conversation`` as a JSON-able dict (format above). The
    caller checked ownership and that a blind comparison is not awaiting its vote."""
    lanes = cs.lanes_of(conversation=conversation)
    pos = {lane.pk: lane.position for lane in lanes}
    rows = cs.compare_rows(conversation=conversation)
    votes = cs.votes_by_turn(conversation=conversation)
    by_user: dict[Any, list[Message]] = {}
    for m in rows.all:
        if m.role == "assistant" and m.lane_id in pos:
            by_user.setdefault(m.parent_id, []).append(m)
    turns = []
    for u in rows.users:
        answers = sorted(by_user.get(u.pk, []), key=lambda m: pos[m.lane_id])  # stable: made order within a lane
        ref = {str(m.pk): i for i, m in enumerate(answers)}
        items = []
        for m in answers:
            item: dict[str, Any] = {
                "lane": pos[m.lane_id], "run": m.run, "shown": rows.shown.get((u.pk, m.lane_id)) is m,
                "status": m.status, "prefill_len": m.prefill_len, "edited": m.edited, "created_at": m.created_at.isoformat(),
            }
            for f in _ANSWER_TEXT:
                item[f] = getattr(m, f)
            for f in _ANSWER_JSON:
                item[f] = _clean_settings(m.settings_snapshot) if f == "settings" else getattr(m, f)
            items.append(item)
        vote = votes.get(u.turn_id)
        turns.append({
            "prompt": u.content, "created_at": u.created_at.isoformat(), "edited": u.edited, "answers": items,
            "vote": None if vote is None else {
                "choice": vote.choice, "winner_position": vote.winner_position, "prompt": vote.prompt,
                "created_at": vote.created_at.isoformat(),
                "lanes": [{
                    **{k: v for k, v in x.items() if k not in ("lane_id", "message_id", "settings")},
                    "lane": pos.get(x.get("lane_id")), "answer_ref": ref.get(str(x.get("message_id"))),
                    "settings": _clean_settings(x.get("settings")),
                } for x in vote.lanes or [] if isinstance(x, dict)],
            },
        })
    return {
        "format": FORMAT, "kind": KIND, "title": conversation.title, "blind": conversation.blind,
        "created_at": conversation.created_at.isoformat(),
        "lanes": [{
            "position": lane.position, "label": lane.label, "endpoint_name": lane.endpoint.name if lane.endpoint else "",
            "api_style": lane.endpoint.api_style if lane.endpoint else "", "model": lane.model,
            "system_prompt": lane.system_prompt, "params": dict(lane.params or {}),
        } for lane in lanes],
        "turns": turns, "exported_at": timezone.now().isoformat(),
    }


def _figures(metrics: dict[str, Any], usage: dict[str, Any]) -> str:
    parts = []
    if isinstance(metrics.get("ttft_ms"), (int, float)):
        parts.append(f"TTFT {metrics['ttft_ms']:.0f} ms")
    if isinstance(metrics.get("tokens_per_sec"), (int, float)):
        parts.append(f"{metrics['tokens_per_sec']:.1f} tok/s")
    if isinstance(metrics.get("total_ms"), (int, float)):
        parts.append(f"total {metrics['total_ms'] / 1000:.2f} s")
    if isinstance(usage.get("prompt_tokens"), int) or isinstance(usage.get("completion_tokens"), int):
        parts.append(f"{usage.get('prompt_tokens', '?')} → {usage.get('completion_tokens', '?')} tokens")
    if isinstance(metrics.get("cost_usd"), (int, float)):
        parts.append(f"${metrics['cost_usd']:.6f}")
    return " · ".join(parts)


def comparison_markdown(*, conversation: Conversation) -> str:
    """The comparison as Markdown: title, a table of the lanes (endpoint name, model,
    parameters), each lane's system prompt, then per turn the prompt and each lane's shown answer
    (reasoning folded, status when not complete, figures: TTFT, tokens per second, total time,
    tokens, cost), repeat runs' figures, and the vote."""
    data = comparison_export(conversation=conversation)
    names = {ln["position"]: ln["label"] or f"Lane {cs.LETTERS[i] if i < len(cs.LETTERS) else i + 1}"
             for i, ln in enumerate(data["lanes"])}
    lines = [f"# {data['title'] or 'Comparison'}", ""]
    if data["blind"]:
        lines += ["_Blind comparison: lanes were shown as letters until each vote._", ""]
    lines += ["| Lane | Endpoint | Model | Parameters |", "| --- | --- | --- | --- |"]
    for ln in data["lanes"]:
        params = ", ".join(f"{k}={v}" for k, v in sorted(ln["params"].items())) or "—"
        cells = [names[ln["position"]], ln["endpoint_name"] or "—", ln["model"] or "—", params]
        lines.append("| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in cells) + " |")
    lines.append("")
    for ln in data["lanes"]:
        if ln["system_prompt"]:
            lines += [f"**System prompt of {names[ln['position']]}**", "", ln["system_prompt"], ""]
    for t, turn in enumerate(data["turns"], 1):
        lines += [f"## Turn {t}", "", demote_headings(turn["prompt"], under=2), ""]
        for a in turn["answers"]:
            if not a["shown"]:
                continue
            model = a["settings"].get("model") or ""
            lines += [f"### {names.get(a['lane'], a['lane'])}" + (f" ({model})" if model else ""), ""]
            if a["reasoning"]:
                lines += ["<details><summary>Reasoning</summary>", "", demote_headings(a["reasoning"], under=3), "",
                          "</details>", ""]
            if a["status"] != MessageStatus.COMPLETE:
                lines += [f"_Status: {a['status']}_", ""]
            lines += [demote_headings(a["content"], under=3), ""]
            fig = _figures(a["metrics"] or {}, a["usage"] or {})
            if fig:
                lines += [f"_{fig}_", ""]
            repeats = [r for r in turn["answers"] if r["lane"] == a["lane"] and r["run"] > 0]
            for r in repeats:
                lines.append(f"- run {r['run'] + 1}: {r['status']}" + (f" · {_figures(r['metrics'] or {}, r['usage'] or {})}"
                                                                      if _figures(r["metrics"] or {}, r["usage"] or {}) else ""))
            if repeats:
                lines.append("")
        v = turn["vote"]
        if v:
            if v["choice"] in ("lane", "rank") and v["winner_position"] is not None:
                verdict = f"{names.get(v['winner_position'], v['winner_position'])} won"
            else:
                verdict = {"tie": "tie", "both_bad": "all bad"}.get(v["choice"], v["choice"])
            lines += [f"**Vote:** {verdict}", ""]
    return "\n".join(lines)


# ---- import ------------------------------------------------------------------------------------


def _str(v: Any, name: str, limit: int = MAX_TEXT) -> str:
    if not isinstance(v, str) or len(v) > limit:
        raise ImportRefused(f"{name} must be text of at most {limit:,} characters.")
    return v


def _int(v: Any, name: str, lo: int, hi: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise ImportRefused(f"{name} must be a whole number from {lo} to {hi}.")
    return v


def _time(v: Any, name: str) -> datetime:
    try:
        t = datetime.fromisoformat(v)
    except (TypeError, ValueError):
        raise ImportRefused(f"{name} must be an ISO time.") from None
    return t if t.tzinfo is not None else timezone.make_aware(t)


def _validate(data: Any) -> None:
    """Raise ImportRefused for anything a comparison export cannot hold."""
    if not isinstance(data, dict):
        raise ImportRefused("Not an export: the file must hold a JSON object.")
    if data.get("format") != FORMAT:
        raise ImportRefused(f"Unknown format {str(data.get('format'))[:60]!r}; this server reads {FORMAT}.")
    _str(data.get("title", ""), "title", 200)
    if not isinstance(data.get("blind", False), bool):
        raise ImportRefused("blind must be true or false.")
    _time(data.get("created_at", timezone.now().isoformat()), "created_at")
    lanes = data.get("lanes")
    if not isinstance(lanes, list) or not cs.MIN_LANES <= len(lanes) <= cs.MAX_LANES:
        raise ImportRefused(f"A comparison has {cs.MIN_LANES} to {cs.MAX_LANES} lanes.")
    positions = set()
    for i, ln in enumerate(lanes, 1):
        if not isinstance(ln, dict):
            raise ImportRefused(f"Lane {i}: must be an object.")
        positions.add(_int(ln.get("position"), f"Lane {i} position", 0, 99))
        _str(ln.get("label", ""), f"Lane {i} label", 60)
        _str(ln.get("endpoint_name", ""), f"Lane {i} endpoint_name", 100)
        _str(ln.get("api_style", ""), f"Lane {i} api_style", 32)
        _str(ln.get("model", ""), f"Lane {i} model", 200)
        _str(ln.get("system_prompt", ""), f"Lane {i} system_prompt", 100_000)
        if not isinstance(ln.get("params", {}), dict):
            raise ImportRefused(f"Lane {i}: params must be an object.")
    if len(positions) != len(lanes):
        raise ImportRefused("Two lanes have the same position.")
    turns = data.get("turns")
    if not isinstance(turns, list) or len(turns) > MAX_TURNS:
        raise ImportRefused(f"turns must be a list of at most {MAX_TURNS}.")
    total = 0
    for t, turn in enumerate(turns, 1):
        if not isinstance(turn, dict):
            raise ImportRefused(f"Turn {t}: must be an object.")
        _str(turn.get("prompt"), f"Turn {t} prompt")
        _time(turn.get("created_at"), f"Turn {t} created_at")
        answers = turn.get("answers", [])
        if not isinstance(answers, list):
            raise ImportRefused(f"Turn {t}: answers must be a list.")
        total += len(answers)
        if total > MAX_ANSWERS:
            raise ImportRefused(f"At most {MAX_ANSWERS} answers.")
        for j, a in enumerate(answers, 1):
            where = f"Turn {t} answer {j}"
            if not isinstance(a, dict):
                raise ImportRefused(f"{where}: must be an object.")
            if a.get("lane") not in positions:
                raise ImportRefused(f"{where}: lane is not one of the lanes' positions.")
            _int(a.get("run", 0), f"{where} run", 0, 10_000)
            if a.get("status", "complete") not in MessageStatus.values:
                raise ImportRefused(f"{where}: unknown status.")
            _int(a.get("prefill_len", 0), f"{where} prefill_len", 0, MAX_TEXT)
            _time(a.get("created_at"), f"{where} created_at")
            for f in _ANSWER_TEXT:
                _str(a.get(f, ""), f"{where} {f}")
            for f, typ in _ANSWER_JSON.items():
                if a.get(f) is not None and not isinstance(a[f], typ):
                    raise ImportRefused(f"{where}: {f} must be a JSON {'object' if typ is dict else 'list'}.")
        v = turn.get("vote")
        if v is None:
            continue
        if not isinstance(v, dict) or v.get("choice") not in VOTE_CHOICES:
            raise ImportRefused(f"Turn {t}: a vote's choice is one of {', '.join(VOTE_CHOICES)}.")
        if v.get("winner_position") is not None:
            _int(v["winner_position"], f"Turn {t} vote winner_position", 0, cs.MAX_LANES - 1)
        _str(v.get("prompt", ""), f"Turn {t} vote prompt")
        _time(v.get("created_at"), f"Turn {t} vote created_at")
        if not isinstance(v.get("lanes", []), list) or len(v.get("lanes", [])) > cs.MAX_LANES:
            raise ImportRefused(f"Turn {t}: the vote's lanes must be a list of at most {cs.MAX_LANES}.")
        for x in v.get("lanes", []):
            if not isinstance(x, dict):
                raise ImportRefused(f"Turn {t}: each lane of the vote must be an object.")
            if x.get("lane") is not None and x["lane"] not in positions:
                raise ImportRefused(f"Turn {t}: a vote refers to a lane that is not in the comparison.")
            ref = x.get("answer_ref")
            if ref is not None and (isinstance(ref, bool) or not isinstance(ref, int) or not 0 <= ref < len(answers)):
                raise ImportRefused(f"Turn {t}: a vote refers to an answer that is not in the turn.")
            if not isinstance(x.get("settings", {}), dict):
                raise ImportRefused(f"Turn {t}: a vote lane's settings must be an object.")


def comparison_load(raw: bytes) -> Any:
    """The parsed JSON of an upload, or ImportRefused (too large, not JSON)."""
    if len(raw) > MAX_FILE_BYTES:
        raise ImportRefused(f"A comparison export is at most {MAX_FILE_BYTES // (1024 * 1024)} MB.")
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise ImportRefused(f"Not valid JSON: {str(exc)[:200]}") from None


def comparison_import(*, user: AbstractBaseUser, data: Any) -> tuple[Conversation, list[str]]:
    """Import the parsed export ``data`` as a new comparison of ``user``. Returns it and one note
    per lane saying which endpoint it points to (or that it has none). Raises ImportRefused, with
    nothing written, on any problem (the caller checked the file size)."""
    _validate(data)
    usable = endpoint_list_for_user(user=user)
    notes: list[str] = []
    with transaction.atomic():
        conv = Conversation.objects.create(owner=user, kind="compare", title=data.get("title", ""),
                                           blind=bool(data.get("blind", False)))
        lanes: dict[int, Lane] = {}
        for i, ln in enumerate(sorted(data["lanes"], key=lambda x: x["position"])):
            name = ln.get("endpoint_name", "")
            endpoint = (usable.filter(name=name).order_by(F("team_id").asc(nulls_first=True), "id").first()
                        if name else None)
            letter = cs.LETTERS[i]
            label = ln.get("label") or f"Lane {letter}"
            if endpoint is not None:
                notes.append(f"{label}: your endpoint “{endpoint.name}”.")
            else:
                notes.append(f"{label}: no endpoint" + (f" (you have none named “{name}”)" if name else "")
                             + " — pick one before sending.")
            lanes[ln["position"]] = Lane.objects.create(
                conversation=conv, position=i, endpoint=endpoint, model=ln.get("model", ""),
                label=ln.get("label", ""), system_prompt=ln.get("system_prompt", ""), params=ln.get("params") or {},
            )
        rows: list[Message] = []
        votes: list[tuple[Vote, datetime]] = []
        parent = None
        last: dict[Any, datetime] = {}

        def at(raw: str, key: Any) -> datetime:
            # Kept times, but strictly increasing in file order among the user messages and among
            # one lane's answers to one prompt (there, the newest run-0 answer is the shown one).
            t = _time(raw, "created_at")
            if key in last and t <= last[key]:
                t = last[key] + timedelta(microseconds=1)
            last[key] = t
            return t

        for turn in data["turns"]:
            turn_id = uuid.uuid4()
            u = Message(id=uuid.uuid4(), conversation=conv, role="user", parent_id=parent, turn_id=turn_id,
                        content=turn["prompt"], edited=bool(turn.get("edited")), created_at=at(turn["created_at"], "user"))
            rows.append(u)
            parent = u.id
            answers: list[Message] = []
            first_of_lane: set[int] = set()
            for a in turn.get("answers") or []:
                lane = lanes[a["lane"]]
                status = a.get("status", "complete")
                if status == MessageStatus.STREAMING:
                    status = MessageStatus.INTERRUPTED
                run = a.get("run", 0)
                m = Message(
                    id=uuid.uuid4(), conversation=conv, lane=lane, parent_id=u.id, role="assistant",
                    turn_id=turn_id if run == 0 and lane.pk not in first_of_lane else uuid.uuid4(), run=run,
                    status=status, prefill_len=a.get("prefill_len", 0), edited=bool(a.get("edited")),
                    created_at=at(a["created_at"], (u.id, lane.pk)), settings_snapshot=_clean_settings(a.get("settings")),
                    **{f: a.get(f, "") for f in _ANSWER_TEXT},
                    **{f: (a.get(f) if a.get(f) is not None else typ()) for f, typ in _ANSWER_JSON.items() if f != "settings"},
                )
                if run == 0:
                    first_of_lane.add(lane.pk)
                answers.append(m)
            rows.extend(answers)
            v = turn.get("vote")
            if v:
                vote_lanes = []
                for x in v.get("lanes") or []:
                    ref = x.get("answer_ref")
                    item = {k: val for k, val in x.items() if k not in ("answer_ref", "lane", "lane_id", "message_id")}
                    item.update(lane_id=lanes[x["lane"]].pk if x.get("lane") is not None else None,
                                settings=_clean_settings(x.get("settings")),
                                message_id=str(answers[ref].id) if ref is not None else None)
                    vote_lanes.append(item)
                votes.append((Vote(owner=user, conversation=conv, turn_id=turn_id, choice=v["choice"],
                                   winner_position=v.get("winner_position"), prompt=v.get("prompt", ""), lanes=vote_lanes,
                                   imported=True),
                              _time(v["created_at"], "created_at")))
        Message.objects.bulk_create(rows)
        for vote, created in votes:
            vote.save()
            Vote.objects.filter(pk=vote.pk).update(created_at=created)
        Conversation.objects.filter(pk=conv.pk).update(
            current_leaf_id=parent, created_at=_time(data.get("created_at", timezone.now().isoformat()), "created_at"))
    conv.refresh_from_db()
    return conv, notes
