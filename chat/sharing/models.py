"""Rows of share links. May import: Django."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class ShareVisibility(models.TextChoices):
    LINK = "link", "Anyone with the link"
    SITE = "site", "Signed-in users of this site"
    TEAM = "team", "Members of a team"


class ShareLink(models.Model):
    """A snapshot shared by ``owner``. ``snapshot``: ``{"format": "playground.share/1", "kind":
    "conversation", "title", "system_prompt", "settings": {model, api_style, endpoint_name,
    params}, "messages": [{role, content, reasoning?, status, finish_reason, usage, metrics,
    settings}], "created_at"}``."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="share_links")
    kind = models.CharField(max_length=20, default="conversation")
    title = models.CharField(max_length=200, blank=True, default="")
    token_hash = models.CharField(max_length=64, unique=True)
    snapshot = models.JSONField(default=dict)
    visibility = models.CharField(max_length=10, choices=ShareVisibility.choices, default=ShareVisibility.LINK)
    # With visibility "team": only signed-in members of this team may open the link.
    team = models.ForeignKey("chat.Team", null=True, blank=True, on_delete=models.CASCADE, related_name="share_links")
    include_reasoning = models.BooleanField(default=False)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        app_label = "chat"
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return self.title or f"share {self.pk}"

    def __repr__(self) -> str:
        return f"<ShareLink {self.pk}: {self.kind} {self.visibility}>"

    @property
    def state(self) -> str:
        """``active`` | ``revoked`` | ``expired``."""
        if self.revoked_at:
            return "revoked"
        if self.expires_at and self.expires_at <= timezone.now():
            return "expired"
        return "active"
