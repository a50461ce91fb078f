"""URL routes of the prompt library (namespace ``prompts``) and its read-only API."""

from __future__ import annotations

from django.urls import path

from chat.prompts import api, testset_views, views

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
    path("prompts/<int:prompt_id>/sets/new/", testset_views.testset_edit, name="testset_new"),
    path("prompts/<int:prompt_id>/sets/<int:set_id>/", testset_views.testset_edit, name="testset"),
    path("prompts/<int:prompt_id>/sets/<int:set_id>/run/", testset_views.testset_run, name="testset_run"),
    path("prompts/runs/<int:run_id>/", testset_views.run_page, name="run"),
    path("prompts/runs/<int:run_id>/grid/", testset_views.run_grid, name="run_grid"),
    path("prompts/runs/<int:run_id>/stop/", testset_views.run_stop, name="run_stop"),
    path("prompts/runs/<int:run_id>/compare/", testset_views.run_compare, name="run_compare"),
    path("prompts/runs/<int:run_id>/judge/", testset_views.run_judge, name="run_judge"),
    path("api/prompts/<str:name>", api.prompt_get, name="api"),
]
