"""URL routes of share links (namespace ``sharing``)."""

from __future__ import annotations

from django.urls import path

from chat.sharing import views

app_name = "sharing"

urlpatterns = [
    path("shares/", views.share_list, name="list"),
    path("shares/new/<int:conversation_id>/", views.share_new, name="new"),
    path("shares/new-run/<int:run_id>/", views.share_new_run, name="new_run"),
    path("shares/new-compare/<int:conversation_id>/", views.share_new_compare, name="new_compare"),
    path("c/<int:conversation_id>/export.json", views.conversation_export_json, name="export_json"),
    path("c/<int:conversation_id>/export.md", views.conversation_export_md, name="export_md"),
    path("conversations/import/", views.conversation_import, name="import"),
    path("s/<str:token>/", views.share_view, name="view"),
    path("s/<str:token>/copy/", views.share_copy, name="copy"),
]
