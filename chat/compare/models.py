"""Rows of comparisons that the chat does not have: blind votes.

A comparison itself is a :class:`chat.models.Conversation` with ``kind="compare"`` and 2–6
:class:`chat.models.Lane` rows (each with endpoint, model, system prompt and params).

May import: Django, chat.models.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models


class Vote(models.Model):
    """A user's verdict on one blind turn of a comparison.

    ``choice``: ``"lane"`` (``winner_position`` won), ``"rank"`` (more than 2 lanes: each lane's
    snapshot holds its ``rank``, 1 = best, equal ranks tie; ``winner_position`` is the first
    place), ``"tie"`` or ``"both_bad"``. ``lanes``: a snapshot of every lane at the vote:
    ``[{"lane_id", "position", "label", "message_id", "settings": {endpoint_id, endpoint_name,
    api_style, base_url, model, system_prompt, params}, "answer": str, "metrics": {...},
    "rank"?: int}]``; ``prompt``: the user message's text. ``imported``: came in with an
    imported comparison file (kept for the comparison and its round trip, never counted in the
    leaderboard: a re-import would count the same verdict again).
    """

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="compare_votes")
    conversation = models.ForeignKey("chat.Conversation", on_delete=models.CASCADE, related_name="votes")
    turn_id = models.UUIDField(default=uuid.uuid4)
    choice = models.CharField(max_length=16)
    winner_position = models.SmallIntegerField(null=True, blank=True)
    prompt = models.TextField(blank=True, default="")
    lanes = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    imported = models.BooleanField(default=False)

    class Meta:
        app_label = "chat"
        ordering = ["created_at", "id"]
        constraints = [models.UniqueConstraint(fields=["conversation", "turn_id"], name="vote_turn_unique")]

    def __str__(self) -> str:
        return f"vote {self.pk} on {self.conversation_id}"
