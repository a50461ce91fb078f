"""Writes of the prompt library, each in one transaction.

May import: Django, chat.models, chat.services, chat.selectors, chat.prompts.*.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from chat import selectors as chat_selectors
from chat import services as chat_services
from chat.models import Conversation, Endpoint
from chat.prompts import selectors, variables
from chat.prompts.models import (
    ApiToken,
    Prompt,
    PromptLabel,
    PromptLabelMove,
    PromptVersion,
    PromptVisibility,
)
from chat.selectors import endpoint_list_for_user

MAX_MESSAGES = 20  # message templates per version
EXPORT_FORMAT = "playground.prompt/1"


class PromptError(ValueError):
    """A write that was refused; the message is for the user."""


@dataclass(frozen=True)
class VersionContent:
    """What a version holds. ``messages``: ``[{"role", "content"}]``; ``config``: ``{"endpoint_id",
    "model", "params"}``."""

    system_prompt: str
    messages: tuple[dict[str, str], ...]
    config: dict[str, Any]

    @classmethod
    def of(cls, v: PromptVersion) -> VersionContent:
        return cls(v.system_prompt, tuple(dict(m) for m in v.messages), dict(v.config))


def _new_version(prompt: Prompt, user: AbstractBaseUser, content: VersionContent, message: str) -> PromptVersion:
    # Lock the prompt row so two saves at once cannot take the same number.
    Prompt.objects.select_for_update().filter(pk=prompt.pk).first()
    number = (prompt.versions.aggregate(n=Max("number"))["n"] or 0) + 1
    version = PromptVersion.objects.create(
        prompt=prompt, number=number, system_prompt=content.system_prompt,
        messages=[dict(m) for m in content.messages][:MAX_MESSAGES], config=content.config,
        author=user, message=message[:300],
    )
    Prompt.objects.filter(pk=prompt.pk).update(updated_at=timezone.now())
    return version


def prompt_create(
    *, user: AbstractBaseUser, name: str, description: str = "", tags: list[str] | None = None,
    visibility: str = PromptVisibility.PRIVATE, content: VersionContent, message: str = "",
    forked_from: PromptVersion | None = None, team_id: int | None = None,
) -> Prompt:
    """A new prompt with version 1. ``team_id``: with visibility "team", a team the user is a
    member of (checked by the form). Raises PromptError when the user has a prompt of that name."""
    try:
        with transaction.atomic():
            prompt = Prompt.objects.create(
                owner=user, name=name, description=description, tags=list(tags or []),
                visibility=visibility, forked_from=forked_from,
                team_id=team_id if visibility == PromptVisibility.TEAM else None,
            )
            _new_version(prompt, user, content, message)
    except IntegrityError as exc:
        raise PromptError(f"You have a prompt called “{name}” already.") from exc
    return prompt


def prompt_save(
    *, prompt: Prompt, user: AbstractBaseUser, name: str, description: str, tags: list[str], visibility: str,
    content: VersionContent, message: str = "", team_id: int | None = None,
) -> PromptVersion | None:
    """Update the prompt's name/description/tags/visibility and add a version when the content
    differs from the newest one. Returns the new version, or None when only metadata changed.
    Raises PromptError on a duplicate name."""
    try:
        with transaction.atomic():
            Prompt.objects.filter(pk=prompt.pk).update(
                name=name, description=description, tags=list(tags), visibility=visibility,
                team_id=team_id if visibility == PromptVisibility.TEAM else None, updated_at=timezone.now(),
            )
            latest = selectors.version_latest(prompt=prompt)
            if latest is not None and VersionContent.of(latest) == content:
                return None
            return _new_version(prompt, user, content, message)
    except IntegrityError as exc:
        raise PromptError(f"You have a prompt called “{name}” already.") from exc


def prompt_restore(*, prompt: Prompt, user: AbstractBaseUser, number: int) -> PromptVersion:
    """A new version equal to version ``number``. Raises Http404 for an unknown number."""
    old = selectors.version_get(prompt=prompt, number=number)
    with transaction.atomic():
        return _new_version(prompt, user, VersionContent.of(old), f"Restored v{old.number}")


def prompt_fork(*, user: AbstractBaseUser, version: PromptVersion, name: str) -> Prompt:
    """A copy of ``version`` as version 1 of a new prompt in ``user``'s library."""
    src = version.prompt
    return prompt_create(
        user=user, name=name, description=src.description, tags=list(src.tags), content=VersionContent.of(version),
        message=f"Forked from {src.name} v{version.number}", forked_from=version,
    )


def prompt_delete(*, prompt: Prompt) -> None:
    prompt.delete()


LABEL_RE = r"^[a-z0-9][a-z0-9_-]{0,49}$"


def label_move(*, prompt: Prompt, user: AbstractBaseUser, name: str, number: int) -> PromptLabel:
    """Point label ``name`` at version ``number`` (creating it), and record the move. Raises
    Http404 for an unknown version, PromptError for a bad label name."""
    import re

    if not re.match(LABEL_RE, name):
        raise PromptError("A label is lower-case letters, digits, _ or - (at most 50).")
    version = selectors.version_get(prompt=prompt, number=number)
    with transaction.atomic():
        label = PromptLabel.objects.select_for_update().select_related("version").filter(prompt=prompt, name=name).first()
        before = label.version.number if label else None
        if label is None:
            label = PromptLabel.objects.create(prompt=prompt, name=name, version=version)
        elif label.version_id != version.pk:
            label.version = version
            label.save(update_fields=["version", "updated_at"])
        if before != version.number:
            PromptLabelMove.objects.create(
                prompt=prompt, label=name, from_number=before, to_number=version.number, moved_by=user
            )
    return label


# ---- use in chat ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class PromptUse:
    """A conversation made from a prompt version: ``send`` is the filled last user message the
    chat page sends (empty when the templates end with no user message)."""

    conversation: Conversation
    send: str
    version_id: int


def _endpoint_for(user: AbstractBaseUser, config: Mapping[str, Any]) -> Endpoint | None:
    eid = config.get("endpoint_id")
    usable = endpoint_list_for_user(user=user)
    endpoint = usable.filter(pk=eid).first() if eid else None
    return endpoint or usable.order_by("id").first()


def conversation_from_version(
    *, user: AbstractBaseUser, version: PromptVersion, values: Mapping[str, str], endpoint: Endpoint | None = None,
    model: str = "", title: str = "", empty_is_a_value: bool = False,
) -> PromptUse:
    """A new conversation of ``user`` with the version's system prompt, settings and all message
    templates but the last user one filled with ``values`` (appended without a turn); the last
    user message comes back in ``send``. ``endpoint``/``model`` override the config's (the
    config's endpoint is used only when ``user`` owns it, else the user's first endpoint).
    Raises PromptError when a variable has no value (with ``empty_is_a_value``, as for a test
    set's cells, only when it has no entry at all: an empty cell is the empty string)."""
    names = selectors.version_variables(version)
    missing = ([n for n in names if n not in values] if empty_is_a_value
               else variables.check(names, values)[0])
    if missing:
        raise PromptError("Missing values for: " + ", ".join(missing))
    config = version.config or {}
    endpoint = endpoint or _endpoint_for(user, config)
    msgs = [dict(m) for m in version.messages]
    send = ""
    if msgs and msgs[-1].get("role") == "user":
        send = variables.fill(msgs.pop()["content"], values)
    with transaction.atomic():
        conversation = chat_services.conversation_create(user=user, endpoint=endpoint)
        model = model or config.get("model") or (endpoint.default_model if endpoint else "")
        Conversation.objects.filter(pk=conversation.pk).update(
            model=model, system_prompt=variables.fill(version.system_prompt, values),
            params=dict(config.get("params") or {}),
            title=title or (f"{version.prompt.name} v{version.number}" if msgs and not send else ""),
        )
        conversation.refresh_from_db()
        parent = None
        for m in msgs:
            row = chat_services.message_append(
                conversation=conversation, role=m.get("role", "user"),
                content=variables.fill(m.get("content", ""), values), parent_id=parent,
            )
            parent = row.id
    conversation.refresh_from_db()
    return PromptUse(conversation, send, version.pk)


def prompt_use(*, user: AbstractBaseUser, version: PromptVersion, values: Mapping[str, str]) -> PromptUse:
    """Open a new conversation of ``user`` from ``version`` filled with ``values``
    (:func:`conversation_from_version`) for the chat page to send its last user message (the
    turn records the version), and mark the prompt used now. Raises PromptError when a
    variable has no value."""
    use = conversation_from_version(user=user, version=version, values=values)
    Prompt.objects.filter(pk=version.prompt_id).update(last_used_at=timezone.now())
    return use


def prompt_from_conversation(
    *, user: AbstractBaseUser, conversation: Conversation, name: str, description: str = ""
) -> Prompt:
    """"Save as prompt": the conversation's system prompt, settings and the user/assistant
    messages of its current branch as version 1 of a new private prompt."""
    thread = chat_selectors.conversation_thread(conversation=conversation)
    messages = [
        {"role": m.role, "content": m.content} for m in thread if m.role in ("user", "assistant") and m.content
    ][:MAX_MESSAGES]
    content = VersionContent(
        conversation.system_prompt,
        tuple(messages),
        {"endpoint_id": conversation.endpoint_id, "model": conversation.model, "params": dict(conversation.params)},
    )
    return prompt_create(user=user, name=name, description=description, content=content,
                         message=f"Saved from conversation “{conversation.title or conversation.pk}”")


# ---- API tokens ----------------------------------------------------------------------------------


def token_create(*, user: AbstractBaseUser, name: str) -> tuple[ApiToken, str]:
    """A new token; returns the row and the raw token (shown once, never stored)."""
    raw = "pgp_" + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(owner=user, name=name[:100], token_hash=selectors.token_hash(raw), hint=raw[:10])
    return token, raw


def token_revoke(*, user: AbstractBaseUser, token_id: int) -> bool:
    """Revoke one of ``user``'s tokens; False when it is not theirs or revoked already."""
    return bool(ApiToken.objects.filter(pk=token_id, owner=user, revoked_at__isnull=True).update(revoked_at=timezone.now()))


# ---- export / import ------------------------------------------------------------------------------


def prompt_export(*, prompt: Prompt) -> dict[str, Any]:
    """The prompt, all its versions (oldest first) and labels as a JSON-able dict
    (``format: "playground.prompt/1"``). The endpoint is kept as its name only."""
    names = dict(endpoint_list_for_user(user=prompt.owner).values_list("id", "name"))
    versions = []
    for v in prompt.versions.order_by("number"):
        config = {k: val for k, val in (v.config or {}).items() if k != "endpoint_id"}
        config["endpoint_name"] = names.get((v.config or {}).get("endpoint_id"), "")
        versions.append({
            "number": v.number, "system_prompt": v.system_prompt, "messages": v.messages, "config": config,
            "message": v.message, "created_at": v.created_at.isoformat(),
        })
    return {
        "format": EXPORT_FORMAT, "name": prompt.name, "description": prompt.description, "tags": prompt.tags,
        "versions": versions,
        "labels": {lb.name: lb.version.number for lb in prompt.labels.select_related("version")},
    }


def prompt_import(*, user: AbstractBaseUser, data: Mapping[str, Any], name: str | None = None) -> Prompt:
    """Create a private prompt in ``user``'s library from :func:`prompt_export` output (already
    validated by ``chat.prompts.forms.validate_export``); versions keep their order, labels
    point at the matching versions; an endpoint is matched by name among the user's own."""
    by_name = dict(endpoint_list_for_user(user=user).values_list("name", "id"))
    with transaction.atomic():
        contents = []
        for v in data["versions"]:
            config = {k: val for k, val in v["config"].items() if k != "endpoint_name"}
            config["endpoint_id"] = by_name.get(v["config"].get("endpoint_name") or "")
            contents.append((VersionContent(v["system_prompt"], tuple(v["messages"]), config), v.get("message", "")))
        try:
            with transaction.atomic():
                prompt = Prompt.objects.create(
                    owner=user, name=name or data["name"], description=data.get("description", ""),
                    tags=list(data.get("tags") or []),
                )
        except IntegrityError as exc:
            raise PromptError(f"You have a prompt called “{name or data['name']}” already.") from exc
        numbers = {}
        for (content, message), v in zip(contents, data["versions"], strict=True):
            numbers[v["number"]] = _new_version(prompt, user, content, message).number
        for label, number in (data.get("labels") or {}).items():
            if number in numbers:
                label_move(prompt=prompt, user=user, name=label, number=numbers[number])
    return prompt
