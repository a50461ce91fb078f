"""URL routes of the prompt library (namespace ``prompts``) and its read-only API."""

from __future__ import annotations

from django.urls import path

from chat.prompts import api, views

app_name = "prompts"

urlpatterns = [
    path("prompts/", views.prompt_list, name="list"),
    path("prompts/new/", views.prompt_new, name="new"),
    path("prompts/import/", views.prompt_import, name="import"),
    path("prompts/tokens/", views.tokens, name="tokens"),
    path("prompts/<int:prompt_id>/", views.prompt_detail, name="detail"),
    path("prompts/<int:prompt_id>/v/<int:number>/", views.prompt_detail, name="version"),
    path("prompts/<int:prompt_id>/edit/", views.prompt_edit, name="edit"),
    path("prompts/<int:prompt_id>/diff/", views.prompt_diff, name="diff"),
    path("prompts/<int:prompt_id>/restore/", views.prompt_restore, name="restore"),
    path("prompts/<int:prompt_id>/label/", views.prompt_label, name="label"),
    path("prompts/<int:prompt_id>/fork/", views.prompt_fork, name="fork"),
    path("prompts/<int:prompt_id>/delete/", views.prompt_delete, name="delete"),
    path("prompts/<int:prompt_id>/use/", views.prompt_use, name="use"),
    path("prompts/<int:prompt_id>/export/", views.prompt_export, name="export"),
    path("prompts/from-conversation/<int:conversation_id>/", views.save_as_prompt, name="save_as_prompt"),
    path("api/prompts/<str:name>", api.prompt_get, name="api"),
]
