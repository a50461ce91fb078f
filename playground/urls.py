"""Root URLs: admin, accounts, the chat app. The simulator is mounted in ``asgi.py``."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from chat import views as chat_views

urlpatterns = [
    path("admin/", admin.site.urls),
    path("setup/", chat_views.setup, name="setup"),
    path("signup/", chat_views.signup, name="signup"),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("accounts/password/", auth_views.PasswordChangeView.as_view(success_url="/accounts/password/done/"), name="password_change"),
    path("accounts/password/done/", auth_views.PasswordChangeDoneView.as_view(), name="password_change_done"),
    path("", include("chat.prompts.urls")),
    path("", include("chat.sharing.urls")),
    path("", include("chat.urls")),
]
