"""URL routes of the chat app (namespace ``chat``)."""

from __future__ import annotations

from django.urls import include, path

from chat import views
from chat.compare import prompt_views as compare_prompt_views
from chat.compare import views as compare_views
from chat.teams import views as team_views

app_name = "chat"

urlpatterns = [
    path("", views.home, name="home"),
    path("c/new/", views.conversation_new, name="conversation_new"),
    path("c/sidebar/", views.conversation_sidebar, name="sidebar"),
    path("c/<int:conversation_id>/", views.conversation, name="conversation"),
    path("c/<int:conversation_id>/rename/", views.conversation_rename, name="conversation_rename"),
    path("c/<int:conversation_id>/delete/", views.conversation_delete, name="conversation_delete"),
    path("c/<int:conversation_id>/fork/", views.conversation_fork, name="conversation_fork"),
    path("m/<uuid:message_id>/inspect/", views.message_inspect, name="message_inspect"),
    path("m/<uuid:message_id>/raw/", views.message_raw, name="message_raw"),
    path("m/<uuid:message_id>/edit/", views.message_edit_form, name="message_edit_form"),
    path("m/<uuid:message_id>/code/", views.message_code, name="message_code"),
    path("c/<int:conversation_id>/code/", views.conversation_code, name="conversation_code"),
    path("attachments/", views.attachment_upload, name="attachment_upload"),
    path("a/<uuid:attachment_id>/", views.attachment_get, name="attachment"),
    path("a/<uuid:attachment_id>/delete/", views.attachment_delete, name="attachment_delete"),
    path("endpoints/", views.endpoint_list, name="endpoints"),
    path("endpoints/new/", views.endpoint_edit, name="endpoint_new"),
    path("endpoints/<int:endpoint_id>/", views.endpoint_edit, name="endpoint_edit"),
    path("endpoints/<int:endpoint_id>/delete/", views.endpoint_delete, name="endpoint_delete"),
    path("endpoints/<int:endpoint_id>/test/", views.endpoint_test, name="endpoint_test"),
    path("endpoints/test/", views.endpoint_test_unsaved, name="endpoint_test_unsaved"),
    path("endpoints/<int:endpoint_id>/models/", views.endpoint_models, name="endpoint_models"),
    path("users/", views.users, name="users"),
    # Side-by-side comparison (chat.compare).
    path("compare/", compare_views.compare_index, name="compare_index"),
    path("compare/new/", compare_views.compare_new, name="compare_new"),
    path("compare/leaderboard/", compare_views.leaderboard, name="compare_leaderboard"),
    path("compare/list/", compare_views.compare_list, name="compare_list"),
    path("compare/from-prompt/<int:prompt_id>/", compare_prompt_views.compare_from_prompt, name="compare_from_prompt"),
    path("compare/<int:conversation_id>/lane/<int:lane_id>/version/", compare_prompt_views.lane_version,
         name="compare_lane_version"),
    path("compare/<int:conversation_id>/lane/<int:lane_id>/save-prompt/", compare_prompt_views.lane_save_prompt,
         name="compare_lane_save_prompt"),
    path("compare/<int:conversation_id>/lane/<int:lane_id>/continue/", compare_views.lane_continue,
         name="compare_lane_continue"),
    path("compare/<int:conversation_id>/blind/", compare_views.compare_blind, name="compare_blind"),
    path("compare/<int:conversation_id>/vote/", compare_views.compare_vote, name="compare_vote"),
    path("compare/<int:conversation_id>/", compare_views.compare_page, name="compare"),
    path("compare/<int:conversation_id>/summary/", compare_views.compare_summary, name="compare_summary"),
    path("compare/<int:conversation_id>/lanes/<str:action>/", compare_views.lane_action, name="compare_lane_action"),
    path("compare/<int:conversation_id>/lane/<int:lane_id>/", compare_views.lane_save, name="compare_lane_save"),
    path("compare/<int:conversation_id>/rename/", compare_views.compare_rename, name="compare_rename"),
    path("compare/<int:conversation_id>/delete/", compare_views.compare_delete, name="compare_delete"),
    path("compare/<int:conversation_id>/export.csv", compare_views.compare_export_csv, name="compare_export_csv"),
    path("compare/<int:conversation_id>/export.json", compare_views.compare_export_json, name="compare_export_json"),
    path("compare/<int:conversation_id>/export.md", compare_views.compare_export_md, name="compare_export_md"),
    path("modes/", include("chat.modes.urls")),  # issue 14
    # teams, usage, budgets, user administration (chat.teams)
    path("teams/", team_views.team_list, name="teams"),
    path("teams/<int:team_id>/", team_views.team_detail, name="team"),
    path("teams/<int:team_id>/members/", team_views.member_add, name="member_add"),
    path("teams/<int:team_id>/budget/", team_views.team_budget, name="team_budget"),
    path("teams/members/<int:membership_id>/remove/", team_views.member_remove, name="member_remove"),
    path("teams/members/<int:membership_id>/role/", team_views.member_role, name="member_role"),
    path("workspace/", team_views.workspace_switch, name="workspace"),
    path("usage/", team_views.usage, name="usage"),
    path("usage.csv", team_views.usage_csv, name="usage_csv"),
    path("users/<int:user_id>/active/", team_views.user_active, name="user_active"),
    path("users/<int:user_id>/password/", team_views.user_password, name="user_password"),
    path("users/<int:user_id>/budget/", team_views.user_budget, name="user_budget"),
]
