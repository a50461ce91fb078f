"""Reads of the prompt library, scoped to what the user may see.

Who sees a prompt is decided in ONE place, :func:`prompt_visible_q`. Editing (new versions,
labels, delete) is for the owner only (:func:`prompt_get_owned`); anyone who sees a prompt may
use it, read its history and diffs, fork it and fetch it through the API.

May import: Django, chat.models, chat.prompts.models, chat.prompts.variables.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import F, Q, QuerySet
from django.http import Http404

from chat.prompts import variables
from chat.prompts.models import ApiToken, Prompt, PromptLabel, PromptVersion, PromptVisibility
from chat.teams.models import Membership

MAX_SEARCH = 200  # characters of a search query


def prompt_visible_q(user: AbstractBaseUser) -> Q:
    """The ownership selector: prompts ``user`` may see (own, shared with the whole site, or
    shared with a team ``user`` is a member of now: a removed member loses them at once). Every
    read of the library and the API goes through this function."""
    if not getattr(user, "is_authenticated", False):
        return Q(pk__in=[])
    # Teams as a subquery, not a join through memberships: a join gives one row per member of
    # the team, so the owner of a team-shared prompt got it twice (and get() failed).
    teams = Membership.objects.filter(user_id=user.pk).values("team_id")
    return (Q(owner=user) | Q(visibility=PromptVisibility.SITE)
            | Q(visibility=PromptVisibility.TEAM, team_id__in=teams))


def prompt_list_for_user(
    *, user: AbstractBaseUser, query: str = "", tag: str = "", sort: str = "used"
) -> QuerySet[Prompt]:
    """Visible prompts. ``query``: text in name, description or any version's system prompt or
    messages; ``tag``: exact tag; ``sort``: ``used`` (last used first, never-used last), ``name``
    or ``updated``."""
    qs = Prompt.objects.filter(prompt_visible_q(user)).select_related("owner", "team")
    query = (query or "").strip()[:MAX_SEARCH]
    if query:
        qs = qs.filter(
            Q(name__icontains=query) | Q(description__icontains=query)
            | Q(versions__system_prompt__icontains=query) | Q(versions__messages__icontains=query)
        ).distinct()
    tag = (tag or "").strip()[:50]
    if tag:
        qs = qs.filter(tags__contains=[tag]) if _json_contains_supported() else qs.filter(tags__icontains=f'"{tag}"')
    if sort == "name":
        return qs.order_by("name", "id")
    if sort == "updated":
        return qs.order_by("-updated_at", "-id")
    return qs.order_by(F("last_used_at").desc(nulls_last=True), "-updated_at", "-id")


def _json_contains_supported() -> bool:
    from django.db import connection

    return connection.features.supports_json_field_contains


def prompt_get_for_user(*, user: AbstractBaseUser, prompt_id: int | str) -> Prompt:
    """A prompt ``user`` may see. Raises Http404 otherwise (no existence leak)."""
    try:
        return Prompt.objects.select_related("owner").get(prompt_visible_q(user), pk=int(prompt_id))
    except (Prompt.DoesNotExist, ValueError, TypeError) as exc:
        raise Http404("No such prompt") from exc


def prompt_get_owned(*, user: AbstractBaseUser, prompt_id: int | str) -> Prompt:
    """A prompt ``user`` owns (may edit). Raises Http404 otherwise, also for prompts the user
    can only see: editing someone else's prompt looks like a missing page."""
    try:
        return Prompt.objects.get(pk=int(prompt_id), owner=user)
    except (Prompt.DoesNotExist, ValueError, TypeError) as exc:
        raise Http404("No such prompt") from exc


def version_latest(*, prompt: Prompt) -> PromptVersion:
    """The newest version (every prompt has at least one)."""
    return prompt.versions.order_by("-number").first()  # type: ignore[return-value]


def version_get(*, prompt: Prompt, number: int | str) -> PromptVersion:
    """Version ``number`` of ``prompt``. Raises Http404."""
    try:
        return prompt.versions.get(number=int(number))
    except (PromptVersion.DoesNotExist, ValueError, TypeError) as exc:
        raise Http404("No such version") from exc


def version_visible_id(*, user: AbstractBaseUser, version_id: Any) -> int | None:
    """``version_id`` as an int when ``user`` may see that version's prompt, else None (the chat
    records it on the turn's rows only then)."""
    try:
        vid = int(version_id)
    except (TypeError, ValueError):
        return None
    ok = PromptVersion.objects.filter(pk=vid, prompt__in=Prompt.objects.filter(prompt_visible_q(user))).exists()
    return vid if ok else None


def version_get_by_id_for_user(*, user: AbstractBaseUser, version_id: Any) -> PromptVersion:
    """A version whose prompt ``user`` may see. Raises Http404."""
    vid = version_visible_id(user=user, version_id=version_id)
    if vid is None:
        raise Http404("No such version")
    return PromptVersion.objects.select_related("prompt").get(pk=vid)


def version_variables(version: PromptVersion) -> list[str]:
    """Variable names of a version's system prompt and message templates, in order."""
    return variables.variables_in([version.system_prompt, *(m.get("content", "") for m in version.messages)])


def labels_of(*, prompt: Prompt) -> dict[int, list[str]]:
    """``{version number: [label names]}``."""
    out: dict[int, list[str]] = {}
    for label in PromptLabel.objects.filter(prompt=prompt).select_related("version"):
        out.setdefault(label.version.number, []).append(label.name)
    return out


def tags_for_user(*, user: AbstractBaseUser) -> list[str]:
    """All tags of visible prompts, sorted (for the tag filter)."""
    tags: set[str] = set()
    for t in Prompt.objects.filter(prompt_visible_q(user)).values_list("tags", flat=True)[:1000]:
        tags.update(x for x in (t or []) if isinstance(x, str))
    return sorted(tags)


# ---- diff -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DiffLine:
    kind: str  # add | del | ctx | hunk
    text: str


@dataclass(frozen=True)
class FieldDiff:
    field: str
    lines: tuple[DiffLine, ...]

    @property
    def changed(self) -> bool:
        return any(line.kind in ("add", "del") for line in self.lines)


def _fields(v: PromptVersion) -> dict[str, str]:
    out = {"System prompt": v.system_prompt}
    for i, m in enumerate(v.messages, 1):
        out[f"Message {i}"] = f"[{m.get('role', 'user')}]\n{m.get('content', '')}"
    out["Config"] = json.dumps(v.config, indent=2, sort_keys=True)
    return out


def version_diff(a: PromptVersion, b: PromptVersion) -> list[FieldDiff]:
    """A text diff (difflib unified, 3 lines of context) of each field from ``a`` to ``b``:
    system prompt, each message template, config (as sorted JSON). Unchanged fields have no
    add/del lines."""
    fa, fb = _fields(a), _fields(b)
    names = list(dict.fromkeys([*fa, *fb]))
    names.sort(key=lambda n: (n == "Config", n != "System prompt"))
    out = []
    for name in names:
        lines = []
        for raw in difflib.unified_diff(
            fa.get(name, "").splitlines(), fb.get(name, "").splitlines(), lineterm="", n=3
        ):
            if raw.startswith(("---", "+++")):
                continue
            kind = {"@": "hunk", "+": "add", "-": "del"}.get(raw[:1], "ctx")
            lines.append(DiffLine(kind, raw))
        out.append(FieldDiff(name, tuple(lines)))
    return out


# ---- API ---------------------------------------------------------------------------------------


def token_hash(raw: str) -> str:
    """SHA-256 hex of a raw API token (what is stored)."""
    return hashlib.sha256(raw.encode()).hexdigest()


def token_user(*, raw: str) -> AbstractBaseUser | None:
    """The active user of an unrevoked token, or None."""
    if not raw or len(raw) > 200:
        return None
    token = ApiToken.objects.select_related("owner").filter(token_hash=token_hash(raw), revoked_at__isnull=True).first()
    if token is None or not token.owner.is_active:
        return None
    return token.owner


def token_list_for_user(*, user: AbstractBaseUser) -> QuerySet[ApiToken]:
    return ApiToken.objects.filter(owner=user)


def prompt_for_api(*, user: AbstractBaseUser, name: str, label: str = "", number: Any = None) -> PromptVersion:
    """The version of the visible prompt called ``name`` (the user's own first, else the oldest
    shared one) at ``label`` or version ``number`` (default: newest). Raises Http404."""
    own = Prompt.objects.filter(owner=user, name=name).first()
    prompt = own or Prompt.objects.filter(prompt_visible_q(user), name=name).order_by("id").first()
    if prompt is None:
        raise Http404("No such prompt")
    if label:
        found = PromptLabel.objects.filter(prompt=prompt, name=label).select_related("version").first()
        if found is None:
            raise Http404("No such label")
        return found.version
    if number not in (None, ""):
        return version_get(prompt=prompt, number=number)
    return version_latest(prompt=prompt)


def prompts_for_new_chat(*, user: AbstractBaseUser, limit: int = 8) -> list[Prompt]:
    """The prompts the chat page's "New chat from a prompt" menu offers: the ``limit`` visible
    prompts used most recently (then the newest), each with ``needs_values`` (its newest
    version has ``{{variables}}``: the menu opens the form that asks for them; else one click
    opens the chat). Two queries."""
    prompts = list(prompt_list_for_user(user=user, sort="used")[:limit])
    newest: dict[int, PromptVersion] = {}
    for v in PromptVersion.objects.filter(prompt_id__in=[p.pk for p in prompts]).order_by("prompt_id", "-number"):
        newest.setdefault(v.prompt_id, v)
    for p in prompts:
        v = newest.get(p.pk)
        p.needs_values = bool(v is not None and version_variables(v))
    return prompts
