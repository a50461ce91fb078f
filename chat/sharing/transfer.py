"""Export a conversation as JSON (complete, versioned, re-importable) or Markdown (the current
branch), and import the JSON back into the importer's own workspace.

JSON format ``playground.conversation/1`` (``"kind": "conversation"``): the conversation's
settings, its lanes, every message of every branch (parent links, turn fields, usage, metrics,
settings snapshot without ``base_url``/``endpoint_id``/``team_id``, tool calls, logprobs …) and each message's attachments with their bytes in base64. Import validates
everything first and writes nothing on any error; ids are new (message and turn ids are made
again, parent links mapped), the endpoint is the importer's own endpoint of the same name or
their first one.

Limits: 5 000 messages; the attachment limits of the chat (``PLAYGROUND_MAX_ATTACHMENT_BYTES``
each); the file at most 64 MB.

May import: Django, chat.models, chat.selectors.
"""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from datetime import datetime
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from chat import selectors as chat_selectors
from chat.models import Attachment, Conversation, Lane, Message, MessageStatus
from chat.rendering import demote_headings
from chat.selectors import endpoint_list_for_user

FORMAT = "playground.conversation/1"
MAX_FILE_BYTES = 64 * 1024 * 1024
MAX_MESSAGES = 5000
ROLES = ("user", "assistant", "system", "tool")
_JSON_FIELDS = ("usage", "usage_raw", "metrics", "error", "settings_snapshot", "tool_calls", "replay_blocks", "logprobs")
_HIDDEN_SETTINGS = ("base_url", "endpoint_id", "team_id")  # settings-snapshot keys an export leaves out
_TEXT_FIELDS = ("content", "reasoning", "finish_reason", "tool_call_id", "reasoning_signature")


class ImportRefused(ValueError):
    """The file cannot be imported; the message says why. Nothing was written."""


def conversation_export(*, conversation: Conversation) -> dict[str, Any]:
    """Everything of ``conversation`` (all branches) as a JSON-able dict."""
    lanes = {ln.pk: ln.position for ln in conversation.lanes.all()}
    messages = list(conversation.messages.order_by("created_at", "id"))
    atts: dict[Any, list[dict[str, Any]]] = {}
    for a in Attachment.objects.filter(message__conversation=conversation).order_by("created_at"):
        atts.setdefault(a.message_id, []).append({
            "kind": a.kind, "media_type": a.media_type, "filename": a.filename, "url": a.url, "size": a.size,
            "data": base64.b64encode(bytes(a.data)).decode() if a.data else "",
        })
    out = []
    for m in messages:
        item: dict[str, Any] = {
            "id": str(m.id), "parent": str(m.parent_id) if m.parent_id else None, "role": m.role,
            "lane": lanes.get(m.lane_id), "turn_id": str(m.turn_id), "status": m.status, "edited": m.edited,
            "prefill_len": m.prefill_len, "created_at": m.created_at.isoformat(), "attachments": atts.get(m.id, []),
        }
        for f in _TEXT_FIELDS:
            item[f] = getattr(m, f)
        for f in _JSON_FIELDS:
            item[f] = getattr(m, f)
        # Never an endpoint URL or database ids in a file meant to leave the server.
        item["settings_snapshot"] = {k: v for k, v in (m.settings_snapshot or {}).items() if k not in _HIDDEN_SETTINGS}
        out.append(item)
    return {
        "format": FORMAT, "kind": "conversation", "title": conversation.title, "model": conversation.model,
        "system_prompt": conversation.system_prompt, "params": conversation.params,
        "endpoint_name": conversation.endpoint.name if conversation.endpoint else "",
        "lanes": [{"position": ln.position, "model": ln.model} for ln in conversation.lanes.all()],
        "current_leaf": str(conversation.current_leaf_id) if conversation.current_leaf_id else None,
        "messages": out, "exported_at": timezone.now().isoformat(),
    }


def conversation_markdown(*, conversation: Conversation) -> str:
    """The current branch as Markdown: title, system prompt, then each message under its role
    (with the answer's model)."""
    lines = [f"# {conversation.title or 'Conversation'}", ""]
    if conversation.system_prompt:
        lines += ["**System prompt**", "", conversation.system_prompt, ""]
    for m in chat_selectors.conversation_thread(conversation=conversation):
        model = (m.settings_snapshot or {}).get("model") if m.role == "assistant" else ""
        lines += [f"## {m.role.capitalize()}" + (f" ({model})" if model else ""), ""]
        if m.reasoning:
            lines += ["<details><summary>Reasoning</summary>", "", demote_headings(m.reasoning, under=2), "", "</details>", ""]
        lines += [demote_headings(m.content, under=2), ""]
    return "\n".join(lines)


def _str(v: Any, name: str, limit: int = 2_000_000) -> str:
    if not isinstance(v, str) or len(v) > limit:
        raise ImportRefused(f"{name} must be text of at most {limit:,} characters.")
    return v


def _validate(data: Any) -> list[dict[str, Any]]:
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ImportRefused(f"Not a conversation export (format {FORMAT}).")
    for key in ("title", "model", "system_prompt", "endpoint_name"):
        _str(data.get(key, ""), key, 200_000)
    if not isinstance(data.get("params", {}), dict):
        raise ImportRefused("params must be an object.")
    msgs = data.get("messages")
    if not isinstance(msgs, list) or len(msgs) > MAX_MESSAGES:
        raise ImportRefused(f"messages must be a list of at most {MAX_MESSAGES}.")
    seen: set[str] = set()
    cap = settings.PLAYGROUND_MAX_ATTACHMENT_BYTES
    for i, m in enumerate(msgs, 1):
        if not isinstance(m, dict) or not isinstance(m.get("id"), str) or m["id"] in seen:
            raise ImportRefused(f"Message {i}: needs a distinct id.")
        if m.get("parent") is not None and m["parent"] not in seen:
            raise ImportRefused(f"Message {i}: its parent must come before it.")
        if m.get("role") not in ROLES:
            raise ImportRefused(f"Message {i}: unknown role.")
        if m.get("status", "complete") not in MessageStatus.values:
            raise ImportRefused(f"Message {i}: unknown status.")
        for f in _TEXT_FIELDS:
            _str(m.get(f, ""), f"Message {i} {f}")
        for f in _JSON_FIELDS:
            v = m.get(f)
            if v is not None and not isinstance(v, (dict, list)):
                raise ImportRefused(f"Message {i}: {f} must be JSON.")
        if m.get("lane") is not None and not isinstance(m["lane"], int):
            raise ImportRefused(f"Message {i}: lane must be a position.")
        atts = m.get("attachments") or []
        if not isinstance(atts, list) or len(atts) > settings.PLAYGROUND_MAX_ATTACHMENTS_PER_MESSAGE:
            raise ImportRefused(f"Message {i}: too many attachments.")
        for a in atts:
            if not isinstance(a, dict) or a.get("kind") not in ("image", "audio"):
                raise ImportRefused(f"Message {i}: an attachment must be an image or audio.")
            _str(a.get("media_type", ""), "media_type", 100)
            _str(a.get("filename", ""), "filename", 255)
            _str(a.get("url", ""), "url", 2000)
            try:
                raw = base64.b64decode(_str(a.get("data", ""), "attachment data", cap * 2), validate=True)
            except (binascii.Error, ValueError):
                raise ImportRefused(f"Message {i}: attachment data is not base64.") from None
            if len(raw) > cap:
                raise ImportRefused(f"Message {i}: an attachment is larger than the limit.")
            a["_bytes"] = raw
        try:
            datetime.fromisoformat(m.get("created_at", ""))
        except (TypeError, ValueError):
            raise ImportRefused(f"Message {i}: created_at must be an ISO time.") from None
        seen.add(m["id"])
    if data.get("current_leaf") is not None and data["current_leaf"] not in seen:
        raise ImportRefused("current_leaf is not one of the messages.")
    return msgs


def load_json(raw: bytes) -> Any:
    """The parsed upload. Raises ImportRefused (larger than 64 MB, not JSON)."""
    if len(raw) > MAX_FILE_BYTES:
        raise ImportRefused("The file is larger than 64 MB.")
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise ImportRefused(f"Not valid JSON: {str(exc)[:200]}") from None


def export_kind(data: Any) -> str:
    """``"conversation"`` or ``"comparison"``: which export a parsed file is, by its ``kind``
    (files from before ``kind`` existed: by ``format``). Raises ImportRefused for anything else
    (a share-link snapshot, another program's JSON, an unknown kind)."""
    if not isinstance(data, dict):
        raise ImportRefused("Not an export: the file must hold a JSON object.")
    kind, fmt = data.get("kind"), str(data.get("format") or "")
    if kind == "comparison" or (kind is None and fmt.startswith("playground.comparison/")):
        return "comparison"
    if kind in ("conversation", None) and fmt.startswith("playground.conversation/"):
        return "conversation"
    if fmt.startswith("playground.share/"):
        raise ImportRefused("This is a share-link snapshot, not an export; export the conversation or comparison instead.")
    raise ImportRefused(f"Not a conversation export or comparison export (kind {str(kind)[:40]!r}, format {fmt[:60]!r}).")


def conversation_import(*, user: AbstractBaseUser, raw: bytes, data: Any = None) -> Conversation:
    """Import an export file (``raw``, or already parsed: ``data``) as a new conversation of
    ``user``. Raises ImportRefused (nothing written) on any problem."""
    if data is None:
        data = load_json(raw)
    msgs = _validate(data)
    usable = endpoint_list_for_user(user=user)
    endpoint = (usable.filter(name=data.get("endpoint_name") or "").first()
                or usable.order_by("id").first())
    with transaction.atomic():
        conv = Conversation.objects.create(
            owner=user, title=data.get("title", "")[:200], endpoint=endpoint, model=data.get("model", "")[:200],
            system_prompt=data.get("system_prompt", ""), params=data.get("params") or {},
        )
        positions = sorted({ln.get("position", 0) for ln in data.get("lanes") or [] if isinstance(ln, dict) and isinstance(ln.get("position", 0), int)} | {0})
        models = {ln.get("position"): str(ln.get("model", ""))[:200] for ln in data.get("lanes") or [] if isinstance(ln, dict)}
        lanes = {p: Lane.objects.create(conversation=conv, position=p, endpoint=endpoint, model=models.get(p, conv.model)) for p in positions[:16]}
        ids = {m["id"]: uuid.uuid4() for m in msgs}
        turns: dict[str, uuid.UUID] = {}
        rows, attachments = [], []
        for m in msgs:
            status = m.get("status", "complete")
            if status == MessageStatus.STREAMING:
                status = MessageStatus.INTERRUPTED
            lane = lanes.get(m["lane"]) if m.get("lane") is not None else (lanes[0] if m["role"] == "assistant" else None)
            row = Message(
                id=ids[m["id"]], conversation=conv, lane=lane, parent_id=ids[m["parent"]] if m.get("parent") else None,
                role=m["role"], turn_id=turns.setdefault(str(m.get("turn_id")), uuid.uuid4()), status=status,
                edited=bool(m.get("edited")), prefill_len=int(m.get("prefill_len") or 0),
                created_at=datetime.fromisoformat(m["created_at"]),
                **{f: m.get(f, "") for f in _TEXT_FIELDS},
                **{f: m.get(f) if m.get(f) is not None else ([] if f in ("tool_calls", "replay_blocks", "logprobs") else {}) for f in _JSON_FIELDS},
            )
            if row.created_at.tzinfo is None:
                row.created_at = timezone.make_aware(row.created_at)
            rows.append(row)
            for a in m.get("attachments") or []:
                attachments.append(Attachment(
                    owner=user, message_id=row.id, kind=a["kind"], media_type=a.get("media_type", ""),
                    filename=a.get("filename", ""), url=a.get("url", ""), data=a["_bytes"], size=len(a["_bytes"]),
                ))
        Message.objects.bulk_create(rows)
        Attachment.objects.bulk_create(attachments)
        leaf = ids.get(data.get("current_leaf") or "") or (rows[-1].id if rows else None)
        Conversation.objects.filter(pk=conv.pk).update(current_leaf_id=leaf)
    conv.refresh_from_db()
    return conv
