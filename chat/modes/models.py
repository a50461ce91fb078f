"""The row of one mode run (raw completion, embeddings, transcription, translation).

May import: Django, chat.models.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models


class ModeKind(models.TextChoices):
    COMPLETION = "completion", "Raw completion"
    EMBEDDINGS = "embeddings", "Embeddings"
    TRANSCRIPTION = "transcription", "Transcription"
    TRANSLATION = "translation", "Translation"


class RunStatus(models.TextChoices):
    PENDING = "pending"  # created by the form, not started yet
    STREAMING = "streaming"  # claimed by one socket, running
    COMPLETE = "complete"
    ERROR = "error"
    STOPPED = "stopped"


class ModeRun(models.Model):
    """One call of a mode, owned by ``owner``; everything needed to show it again.

    ``prompt``: the raw prompt (completion), the audio prompt (audio) or the texts joined by
    newlines (embeddings, see ``inputs``). ``output``: the completion or transcript text.
    ``params``: what the user set (max_tokens, temperature, top_p, stop (list), logprobs,
    encoding_format, language, response_format, stream …). ``vectors``: embeddings as
    little-endian float32, ``len(inputs) * dims`` values. ``result``: the decoded structured
    answer (segments, …). ``usage`` / ``metrics`` / ``error`` / ``inspect`` as on a chat
    message. ``audio``: the uploaded or recorded file (bounded by the form).
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="mode_runs")
    endpoint = models.ForeignKey("chat.Endpoint", null=True, blank=True, on_delete=models.SET_NULL,
                                 related_name="mode_runs")
    endpoint_name = models.CharField(max_length=100, blank=True, default="")
    kind = models.CharField(max_length=16, choices=ModeKind.choices)
    model = models.CharField(max_length=200)
    params = models.JSONField(default=dict, blank=True)
    prompt = models.TextField(blank=True, default="")
    inputs = models.JSONField(default=list, blank=True)
    output = models.TextField(blank=True, default="")
    vectors = models.BinaryField(blank=True, default=b"")
    dims = models.PositiveIntegerField(default=0)
    result = models.JSONField(default=dict, blank=True)
    logprobs = models.JSONField(default=list, blank=True)
    usage = models.JSONField(default=dict, blank=True)
    metrics = models.JSONField(default=dict, blank=True)
    error = models.JSONField(default=dict, blank=True)
    inspect = models.JSONField(default=dict, blank=True)
    finish_reason = models.CharField(max_length=40, blank=True, default="")
    status = models.CharField(max_length=16, choices=RunStatus.choices, default=RunStatus.PENDING)
    audio = models.BinaryField(blank=True, default=b"")
    audio_name = models.CharField(max_length=200, blank=True, default="")
    audio_type = models.CharField(max_length=100, blank=True, default="")
    continued_from = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["owner", "kind", "-created_at"], name="moderun_owner_kind")]

    def __str__(self) -> str:
        return f"{self.kind} {self.model}"

    def __repr__(self) -> str:
        return f"<ModeRun {self.pk} {self.kind} {self.status}>"

    @property
    def title(self) -> str:
        """A short label for the history list."""
        text = (self.prompt or self.audio_name or " ".join(self.inputs or [])).strip().replace("\n", " ")
        return (text[:57] + "…") if len(text) > 58 else (text or self.model)
