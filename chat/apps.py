"""The chat app's configuration: connects the signals that end a user's open websockets when
their session ends (chat.signals), and sets the adapters' defaults from the settings."""

from __future__ import annotations

from django.apps import AppConfig


class ChatConfig(AppConfig):
    name = "chat"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.conf import settings

        from chat import signals  # noqa: F401 - connects the receivers
        from chat.providers import base

        # The adapters' module defaults from the settings: private addresses (loopback, LAN)
        # allowed unless refused, and the size limits of everything an upstream sends.
        base.ALLOW_PRIVATE = not settings.PLAYGROUND_REFUSE_PRIVATE_URLS
        base.DEFAULT_LIMITS = base.Limits(max_answer_chars=settings.PLAYGROUND_MAX_ANSWER_CHARS)
