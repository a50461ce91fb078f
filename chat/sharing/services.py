"""Share links: snapshot, create, resolve, revoke, copy into a workspace.

May import: Django, chat.models, chat.selectors, chat.services, chat.sharing.models.
"""

from __future__ import annotations

import hashlib
import secrets
import uuid
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from chat import selectors as chat_selectors
from chat.models import Conversation, Lane, Message, MessageStatus
from chat.selectors import endpoint_list_for_user
from chat.sharing.models import ShareLink, ShareVisibility

FORMAT = "playground.share/1"
MAX_SNAPSHOT_MESSAGES = 500
EXPIRY_CHOICES = {"": None, "1h": timedelta(hours=1), "1d": timedelta(days=1), "7d": timedelta(days=7), "30d": timedelta(days=30)}
# Settings a snapshot keeps (never base_url, endpoint_id, keys or headers).
_SETTINGS_KEYS = ("model", "api_style", "endpoint_name", "system_prompt", "params")
_METRIC_KEYS = ("ttft_ms", "ttfat_ms", "total_ms", "tokens_per_sec", "cost_usd")


def public_links_default() -> bool:
    """The server's default for public links: ``PLAYGROUND_PUBLIC_SHARE_LINKS`` (default on)."""
    return bool(getattr(settings, "PLAYGROUND_PUBLIC_SHARE_LINKS", True))


def public_links_allowed() -> bool:
    """Whether "anyone with the link" is allowed: the admin's site setting
    (:attr:`chat.models.SiteSettings.public_share_links`) when saved, else
    :func:`public_links_default`. When off, share forms do not offer it, creating one is
    refused and existing public links open only for signed-in users (one query)."""
    from chat.models import SiteSettings

    saved = SiteSettings.objects.filter(pk=1).values_list("public_share_links", flat=True).first()
    return public_links_default() if saved is None else bool(saved)


def public_links_set(*, allowed: bool | None) -> None:
    """Save the admin's choice: True (allow), False (forbid) or None (back to the server
    default, :func:`public_links_default`). The caller checked the user is staff."""
    from chat.models import SiteSettings

    SiteSettings.objects.update_or_create(pk=1, defaults={"public_share_links": allowed})


def share_visibility(*, user: AbstractBaseUser, raw: str) -> tuple[str, int | None]:
    """``(visibility, team_id)`` of a share form's choice: ``link``, ``site`` or ``team:<id>`` of
    a team ``user`` is a member of. Raises ValueError for anything else, and for ``link`` when
    the admin forbids public links."""
    if raw == ShareVisibility.LINK and not public_links_allowed():
        raise ValueError("Public links are switched off on this site; share with signed-in users.")
    if raw in (ShareVisibility.LINK, ShareVisibility.SITE):
        return raw, None
    kind, _, team_id = (raw or "").partition(":")
    if kind == ShareVisibility.TEAM and team_id.isdigit():
        from chat.teams.selectors import teams_for_user

        if teams_for_user(user=user).filter(pk=int(team_id)).exists():
            return ShareVisibility.TEAM, int(team_id)
    raise ValueError("Unknown visibility.")


def share_can_open(*, user: AbstractBaseUser, link: ShareLink) -> bool:
    """Whether ``user`` may open an active ``link`` by its visibility: anyone (``link``, when
    public links are allowed), signed-in users (``site``), members of its team now (``team``)."""
    if link.visibility == ShareVisibility.LINK and public_links_allowed():
        return True
    if not getattr(user, "is_authenticated", False):
        return False
    if link.visibility == ShareVisibility.TEAM:
        from chat.teams.selectors import teams_for_user

        return teams_for_user(user=user).filter(pk=link.team_id).exists()
    return True


def token_hash(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def _settings_of(snapshot: dict[str, Any]) -> dict[str, Any]:
    return {k: snapshot.get(k) for k in _SETTINGS_KEYS if k in snapshot}


def conversation_snapshot(*, conversation: Conversation, include_reasoning: bool) -> dict[str, Any]:
    """The frozen, secret-free snapshot of the conversation's current branch."""
    thread = chat_selectors.conversation_thread(conversation=conversation)[:MAX_SNAPSHOT_MESSAGES]
    messages = []
    for m in thread:
        item: dict[str, Any] = {"role": m.role, "content": m.content, "status": m.status}
        if m.role == "assistant":
            item.update(
                finish_reason=m.finish_reason, usage={k: v for k, v in (m.usage or {}).items() if isinstance(v, (int, float))},
                metrics={k: (m.metrics or {}).get(k) for k in _METRIC_KEYS}, settings=_settings_of(m.settings_snapshot or {}),
            )
            if include_reasoning and m.reasoning:
                item["reasoning"] = m.reasoning
        messages.append(item)
    return {
        "format": FORMAT, "kind": "conversation", "title": conversation.title, "system_prompt": conversation.system_prompt,
        "settings": {"model": conversation.model, "endpoint_name": conversation.endpoint.name if conversation.endpoint else "",
                     "api_style": conversation.endpoint.api_style if conversation.endpoint else "",
                     "params": dict(conversation.params)},
        "messages": messages, "created_at": timezone.now().isoformat(),
    }


def share_create(
    *, user: AbstractBaseUser, conversation: Conversation, visibility: str, include_reasoning: bool, expires: str = ""
) -> tuple[ShareLink, str]:
    """A link to a snapshot of ``conversation`` (which ``user`` owns: the caller checked).
    Returns the row and the raw token (shown once). Raises ValueError for a public link when
    the admin forbids them, or an unknown expiry."""
    visibility, team_id = share_visibility(user=user, raw=visibility)
    if expires not in EXPIRY_CHOICES:
        raise ValueError("Unknown expiry.")
    delta = EXPIRY_CHOICES[expires]
    raw = secrets.token_urlsafe(24)
    link = ShareLink.objects.create(
        owner=user, kind="conversation", title=(conversation.title or "Untitled")[:200], token_hash=token_hash(raw),
        snapshot=conversation_snapshot(conversation=conversation, include_reasoning=include_reasoning),
        visibility=visibility, team_id=team_id, include_reasoning=include_reasoning,
        expires_at=timezone.now() + delta if delta else None,
    )
    return link, raw


def run_snapshot(*, grid: dict[str, Any], run: Any) -> dict[str, Any]:
    """The frozen, secret-free snapshot of a test-set run's grid (``chat.prompts.testsets.run_grid``
    output): lanes by version, endpoint name and model; cells without conversation or message ids."""
    rows = []
    for r in grid["rows"]:
        cells = []
        for c in r["cells"]:
            cells.append(None if c is None else {
                "status": c["status"], "content": c["content"], "checks": c["checks"], "passed": c["passed"],
                "metrics": {k: c["metrics"].get(k) for k in _METRIC_KEYS},
            })
        rows.append({"index": r["index"], "vars": r["vars"], "cells": cells})
    summary = [{k: s.get(k) for k in ("version", "endpoint_name", "model", "total", "done", "passed", "pass_rate",
                                      "ttft_median", "ttft_p90", "tps_median", "tps_p90", "cost_total")}
               for s in grid["summary"]]
    return {"format": FORMAT, "kind": "run", "title": f"{run.test_set.prompt.name} · {run.test_set.name} · run {run.pk}",
            "rows": rows, "summary": summary, "created_at": timezone.now().isoformat()}


def share_create_run(*, user: AbstractBaseUser, run: Any, grid: dict[str, Any], visibility: str, expires: str = "") -> tuple[ShareLink, str]:
    """A link to a snapshot of a test-set run ``user`` owns (the caller checked). Returns the
    row and the raw token. Raises ValueError like :func:`share_create`."""
    visibility, team_id = share_visibility(user=user, raw=visibility)
    if expires not in EXPIRY_CHOICES:
        raise ValueError("Unknown expiry.")
    delta = EXPIRY_CHOICES[expires]
    raw = secrets.token_urlsafe(24)
    snap = run_snapshot(grid=grid, run=run)
    link = ShareLink.objects.create(
        owner=user, kind="run", title=snap["title"][:200], token_hash=token_hash(raw), snapshot=snap,
        visibility=visibility, team_id=team_id, expires_at=timezone.now() + delta if delta else None,
    )
    return link, raw


def compare_snapshot(*, conversation: Conversation, include_reasoning: bool) -> dict[str, Any]:
    """The frozen, secret-free snapshot of a comparison: its lanes (label, endpoint name, API
    style, model, system prompt, parameters: never keys, headers or URLs) and, per prompt, each
    lane's shown answer (run 0) with its usage and metrics. Shape: ``{"format", "kind":
    "compare", "title", "lanes": [{label, endpoint_name, api_style, model, system_prompt,
    params}], "turns": [{"prompt", "answers": [{content, reasoning?, status, finish_reason,
    usage, metrics} | None per lane]}], "created_at"}``."""
    from chat.compare import selectors as compare_selectors

    lanes = compare_selectors.lanes_of(conversation=conversation)
    rows = compare_selectors.compare_rows(conversation=conversation)
    turns = []
    for u in rows.users[:MAX_SNAPSHOT_MESSAGES]:
        answers: list[dict[str, Any] | None] = []
        for lane in lanes:
            a = rows.shown.get((u.pk, lane.pk))
            if a is None:
                answers.append(None)
                continue
            item: dict[str, Any] = {
                "content": a.content, "status": a.status, "finish_reason": a.finish_reason,
                "usage": {k: v for k, v in (a.usage or {}).items() if isinstance(v, (int, float))},
                "metrics": {k: (a.metrics or {}).get(k) for k in _METRIC_KEYS},
            }
            if include_reasoning and a.reasoning:
                item["reasoning"] = a.reasoning
            answers.append(item)
        turns.append({"prompt": u.content, "answers": answers})
    return {
        "format": FORMAT, "kind": "compare", "title": conversation.title or "Comparison",
        "lanes": [{
            "label": lane.label or f"Lane {i + 1}", "endpoint_name": lane.endpoint.name if lane.endpoint else "",
            "api_style": lane.endpoint.api_style if lane.endpoint else "", "model": lane.model,
            "system_prompt": lane.system_prompt, "params": dict(lane.params or {}),
        } for i, lane in enumerate(lanes)],
        "turns": turns, "created_at": timezone.now().isoformat(),
    }


def share_create_compare(
    *, user: AbstractBaseUser, conversation: Conversation, visibility: str, include_reasoning: bool, expires: str = ""
) -> tuple[ShareLink, str]:
    """A link to a snapshot of a comparison ``user`` owns (the caller checked ownership and
    that a blind comparison has been voted on). Returns the row and the raw token. Raises
    ValueError like :func:`share_create`."""
    visibility, team_id = share_visibility(user=user, raw=visibility)
    if expires not in EXPIRY_CHOICES:
        raise ValueError("Unknown expiry.")
    delta = EXPIRY_CHOICES[expires]
    raw = secrets.token_urlsafe(24)
    snap = compare_snapshot(conversation=conversation, include_reasoning=include_reasoning)
    link = ShareLink.objects.create(
        owner=user, kind="compare", title=snap["title"][:200], token_hash=token_hash(raw), snapshot=snap,
        visibility=visibility, team_id=team_id, include_reasoning=include_reasoning,
        expires_at=timezone.now() + delta if delta else None,
    )
    return link, raw


def share_resolve(*, raw: str) -> ShareLink | None:
    """The link of a raw token (any state), or None."""
    if not raw or len(raw) > 100:
        return None
    return ShareLink.objects.filter(token_hash=token_hash(raw)).first()


def share_revoke(*, user: AbstractBaseUser, link_id: int) -> bool:
    """Revoke one of ``user``'s links; False when it is not theirs or revoked already."""
    return bool(ShareLink.objects.filter(pk=link_id, owner=user, revoked_at__isnull=True).update(revoked_at=timezone.now()))


def share_copy(*, user: AbstractBaseUser, link: ShareLink) -> Conversation:
    """"Continue as a copy" (conversations only): a new conversation of ``user`` with the snapshot's messages (complete,
    unlinked to any upstream) and settings, on the user's first endpoint."""
    snap = link.snapshot
    endpoint = endpoint_list_for_user(user=user).order_by("id").first()
    s = snap.get("settings") or {}
    with transaction.atomic():
        conv = Conversation.objects.create(
            owner=user, title=f"{snap.get('title') or 'Shared'} (copy)"[:200], endpoint=endpoint,
            model=s.get("model") or "", system_prompt=snap.get("system_prompt") or "", params=s.get("params") or {},
        )
        lane = Lane.objects.create(conversation=conv, position=0, endpoint=endpoint, model=conv.model)
        rows: list[Message] = []
        parent = None
        base = timezone.now()
        for i, m in enumerate(snap.get("messages") or []):
            status = m.get("status") if m.get("status") in MessageStatus.values else MessageStatus.COMPLETE
            if status == MessageStatus.STREAMING:
                status = MessageStatus.INTERRUPTED
            row = Message(
                id=uuid.uuid4(), conversation=conv, lane=lane if m.get("role") == "assistant" else None, parent_id=parent,
                role=m.get("role", "user"), turn_id=uuid.uuid4(), content=m.get("content", ""),
                reasoning=m.get("reasoning", ""), status=status, finish_reason=m.get("finish_reason", ""),
                usage=m.get("usage") or {}, metrics=m.get("metrics") or {}, settings_snapshot=m.get("settings") or {},
                created_at=base + timedelta(microseconds=i),
            )
            rows.append(row)
            parent = row.id
        Message.objects.bulk_create(rows)
        if rows:
            Conversation.objects.filter(pk=conv.pk).update(current_leaf_id=rows[-1].id)
    return conv
