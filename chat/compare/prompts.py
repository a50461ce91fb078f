"""Links between comparisons and the prompt library (chat.prompts).

- :func:`compare_from_version`: "Use in compare" — a new comparison whose lanes get a prompt
  version's filled system prompt, endpoint, model and params, and whose history holds the
  version's messages but the last user one (that one the compare page sends, recording the
  version on the turn's rows as the chat does).
- :func:`lane_apply_version`: pick another version of the same prompt for one lane (its system
  prompt, model and params; the messages are shared by every lane and stay).
- :func:`lane_save_as_prompt`: "Save as prompt" from one lane (its system prompt, the user
  messages with the lane's shown answers, the lane's endpoint, model and params as config).

Callers pass a comparison fetched through :func:`chat.compare.selectors.compare_get_for_user`
and a version fetched through the prompt selectors (visibility checked there).

May import: Django, chat.models, chat.selectors, chat.compare.*, chat.prompts.*.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from chat.compare import selectors as cs
from chat.compare import services as compare_services
from chat.models import Conversation, Lane, Message, MessageStatus
from chat.prompts import selectors as prompt_selectors
from chat.prompts import services as prompt_services
from chat.prompts import variables
from chat.prompts.models import Prompt, PromptVersion
from chat.selectors import NextTurnSettings

DEFAULT_LANES = 2


@dataclass(frozen=True)
class CompareUse:
    """A comparison made from a prompt version: ``send`` is the filled last user message the
    compare page sends (empty when the templates end without one); ``version_id`` the version."""

    conversation: Conversation
    send: str
    version_id: int


def _lane_settings(user: AbstractBaseUser, version: PromptVersion, values: Mapping[str, str]) -> NextTurnSettings:
    config = version.config or {}
    endpoint = prompt_services._endpoint_for(user, config)
    model = config.get("model") or (endpoint.default_model if endpoint else "")
    return NextTurnSettings(endpoint.pk if endpoint else None, model,
                            variables.fill(version.system_prompt, values), dict(config.get("params") or {}))


def compare_from_version(
    *, user: AbstractBaseUser, version: PromptVersion, values: Mapping[str, str], lanes: int = DEFAULT_LANES,
    blind: bool = False,
) -> CompareUse:
    """A new comparison of ``user`` with ``lanes`` (2–6) lanes set from ``version`` filled with
    ``values`` (the config's endpoint only when ``user`` owns it, else the user's first). The
    version's messages but the last user one become the history: user messages shared, each
    assistant template copied into every lane as that lane's answer; every row records the
    version. Marks the prompt used. Raises PromptError when a variable has no value."""
    missing, _ = variables.check(prompt_selectors.version_variables(version), values)
    if missing:
        raise prompt_services.PromptError("Missing values for: " + ", ".join(missing))
    s = _lane_settings(user, version, values)
    n = max(cs.MIN_LANES, min(cs.MAX_LANES, int(lanes)))
    msgs = [dict(m) for m in version.messages]
    send = variables.fill(msgs.pop()["content"], values) if msgs and msgs[-1].get("role") == "user" else ""
    now = timezone.now()
    with transaction.atomic():
        conversation = compare_services.compare_create(user=user, lanes=[s] * n, blind=blind)
        title = f"{version.prompt.name} v{version.number}"[:200]
        lane_rows = cs.lanes_of(conversation=conversation)
        rows: list[Message] = []
        parent = None
        k = 0
        for m in msgs:
            k += 1
            text = variables.fill(m.get("content", ""), values)
            if m.get("role") == "assistant":
                if parent is None:
                    continue  # an answer needs a user message before it
                for lane in lane_rows:
                    k += 1
                    snap = lane.endpoint.settings_snapshot(lane.model, lane.system_prompt, lane.params) if lane.endpoint else {}
                    rows.append(Message(conversation=conversation, lane=lane, role="assistant", parent_id=parent,
                                        content=text, status=MessageStatus.COMPLETE, settings_snapshot=snap,
                                        prompt_version=version, created_at=now + timedelta(microseconds=k)))
                continue
            u = Message.new_user(conversation=conversation, parent_id=parent, turn_id=uuid.uuid4(), content=text,
                                 created_at=now + timedelta(microseconds=k))
            u.prompt_version = version
            rows.append(u)
            parent = u.id
        Message.objects.bulk_create(rows)
        fields: dict[str, Any] = {"title": title}
        if parent is not None:
            fields["current_leaf_id"] = parent
        Conversation.objects.filter(pk=conversation.pk).update(**fields)
        Prompt.objects.filter(pk=version.prompt_id).update(last_used_at=timezone.now())
    conversation.refresh_from_db()
    return CompareUse(conversation, send, version.pk)


def lane_apply_version(
    *, user: AbstractBaseUser, conversation: Conversation, lane_id: Any, version: PromptVersion,
    values: Mapping[str, str],
) -> None:
    """Set lane ``lane_id`` from ``version`` filled with ``values`` (system prompt, endpoint,
    model, params). Raises LaneRefused (lane not in the comparison), PromptError (a variable
    of that version has no value)."""
    missing, _ = variables.check(prompt_selectors.version_variables(version), values)
    if missing:
        raise prompt_services.PromptError("Missing values for: " + ", ".join(missing))
    compare_services.lane_save(conversation=conversation, lane_id=lane_id, settings=_lane_settings(user, version, values))


def lane_save_as_prompt(*, user: AbstractBaseUser, conversation: Conversation, lane_id: Any, name: str) -> Prompt:
    """"Save as prompt" from one lane: version 1 of a new private prompt with the lane's system
    prompt, every user message each followed by the lane's shown answer (when it has text), and
    ``{"endpoint_id", "model", "params"}`` of the lane. Raises LaneRefused (no such lane),
    PromptError (a prompt of that name exists)."""
    try:
        lane = Lane.objects.get(pk=int(lane_id), conversation=conversation)
    except (Lane.DoesNotExist, ValueError, TypeError) as exc:
        raise compare_services.LaneRefused("No such lane.") from exc
    rows = cs.compare_rows(conversation=conversation)
    messages: list[dict[str, str]] = []
    for u in rows.users:
        if u.content:
            messages.append({"role": "user", "content": u.content})
        a = rows.shown.get((u.pk, lane.pk))
        if a is not None and a.status != MessageStatus.STREAMING and a.content:
            messages.append({"role": "assistant", "content": a.content})
    content = prompt_services.VersionContent(
        lane.system_prompt, tuple(messages[: prompt_services.MAX_MESSAGES]),
        {"endpoint_id": lane.endpoint_id, "model": lane.model, "params": dict(lane.params or {})},
    )
    return prompt_services.prompt_create(
        user=user, name=name, content=content,
        message=f"Saved from comparison “{conversation.title or conversation.pk}”, lane {lane.position + 1}",
    )
