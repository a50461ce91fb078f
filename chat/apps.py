"""The chat app's configuration: connects the signals that end a user's open websockets when
their session ends (chat.signals)."""

from __future__ import annotations

from django.apps import AppConfig


class ChatConfig(AppConfig):
    name = "chat"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from chat import signals  # noqa: F401 - connects the receivers
