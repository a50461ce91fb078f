"""Reads of mode runs, always scoped to their owner (another user's id is a 404).

May import: Django, chat.models, chat.modes.models.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet
from django.http import Http404

from chat.models import Endpoint
from chat.modes.models import ModeRun

#: Runs listed in a mode's history.
HISTORY_LIMIT = 50


def run_list_for_user(*, user: AbstractBaseUser, kind: str | tuple[str, ...]) -> QuerySet[ModeRun]:
    """The user's newest runs of ``kind`` (one kind or several), at most :data:`HISTORY_LIMIT`;
    heavy columns (vectors, audio, inspect) deferred."""
    kinds = (kind,) if isinstance(kind, str) else kind
    return (ModeRun.objects.filter(owner=user, kind__in=kinds)
            .defer("vectors", "audio", "inspect", "logprobs", "result")
            .order_by("-created_at")[:HISTORY_LIMIT])


def run_get_for_user(*, user: AbstractBaseUser, run_id: uuid.UUID | str, kind: str | None = None) -> ModeRun:
    """The run if ``user`` owns it (and it is of ``kind`` when given). Raises Http404 otherwise
    (no existence leak)."""
    try:
        filters: dict[str, Any] = {"pk": uuid.UUID(str(run_id)), "owner": user}
        if kind:
            filters["kind"] = kind
        return ModeRun.objects.select_related("endpoint").get(**filters)
    except (ModeRun.DoesNotExist, ValueError, TypeError) as exc:
        raise Http404("No such run") from exc


def model_context_length(endpoint: Endpoint, model: str) -> int | None:
    """``context_length`` (tokens) of ``model`` in the endpoint's cached ``/models`` list."""
    for info in endpoint.models_cache or []:
        if info.get("id") == model and isinstance(info.get("context_length"), int):
            return info["context_length"]
    return None


def run_is_stale(run: ModeRun) -> bool:
    """A ``streaming`` run whose heartbeat stopped (its server went away mid-run): shown as
    interrupted with what was saved, instead of waiting forever."""
    from django.utils import timezone

    from chat.selectors import stale_after_s
    return run.status == "streaming" and (timezone.now() - run.updated_at).total_seconds() > max(30.0, stale_after_s())
