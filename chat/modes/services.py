"""Writes of mode runs. Runs are created by the forms' views, claimed once by a socket and
finished once by the runner (partial text saved on a heartbeat, never per token).

May import: Django, chat.models, chat.modes.models.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.utils import timezone

from chat.models import Endpoint
from chat.modes.models import ModeRun, RunStatus


def run_create(*, user: AbstractBaseUser, endpoint: Endpoint, kind: str, model: str, params: dict[str, Any],
               prompt: str = "", inputs: list[str] | None = None, audio: bytes = b"", audio_name: str = "",
               audio_type: str = "", continued_from: ModeRun | None = None) -> ModeRun:
    """A new pending run of ``user`` (the endpoint must already be checked as theirs)."""
    return ModeRun.objects.create(
        owner=user, endpoint=endpoint, endpoint_name=endpoint.name, kind=kind, model=model, params=params,
        prompt=prompt, inputs=inputs or [], audio=audio, audio_name=audio_name, audio_type=audio_type,
        continued_from=continued_from,
    )


def run_claim(*, run_id: uuid.UUID) -> bool:
    """Move a pending run to streaming; False when another socket claimed it first (or it ran)."""
    return ModeRun.objects.filter(pk=run_id, status=RunStatus.PENDING).update(
        status=RunStatus.STREAMING, updated_at=timezone.now()) == 1


def run_partial(*, run_id: uuid.UUID, output: str) -> None:
    """The heartbeat: the text so far of a streaming run (and its time, see ``run_is_stale``)."""
    ModeRun.objects.filter(pk=run_id, status=RunStatus.STREAMING).update(output=output, updated_at=timezone.now())


def run_finish(*, run_id: uuid.UUID, status: str, **fields: Any) -> None:
    """The final row: ``status`` and any of output, vectors, dims, result, logprobs, usage,
    metrics, error, inspect, finish_reason."""
    ModeRun.objects.filter(pk=run_id).update(status=status, updated_at=timezone.now(), **fields)
