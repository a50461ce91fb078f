"""URL routes of the modes (namespace ``chat:modes``)."""

from __future__ import annotations

from django.urls import path

from chat.modes import views

app_name = "modes"

urlpatterns = [
    path("completion/", views.completion, name="completion"),
    path("embeddings/", views.embeddings, name="embeddings"),
    path("audio/", views.audio, name="audio"),
    path("r/<uuid:run_id>/audio", views.run_audio_file, name="audio_file"),
    path("r/<uuid:run_id>/", views.run_page, name="run"),
    path("r/<uuid:run_id>/continue/", views.run_continue, name="continue"),
    path("r/<uuid:run_id>/vectors.<str:fmt>", views.run_download, name="download"),
    path("r/<uuid:run_id>/inspect/", views.run_inspect, name="inspect"),
    path("r/<uuid:run_id>/code/", views.run_code, name="code"),
]
