"""Websocket routes."""

from __future__ import annotations

from django.urls import path

from chat.compare.consumers import CompareConsumer
from chat.consumers import ConversationConsumer
from chat.modes.consumer import ModeRunConsumer

websocket_urlpatterns = [
    path("ws/c/<int:conversation_id>/", ConversationConsumer.as_asgi()),
    path("ws/compare/<int:conversation_id>/", CompareConsumer.as_asgi()),
    path("ws/modes/<uuid:run_id>/", ModeRunConsumer.as_asgi()),
]
