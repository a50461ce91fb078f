"""Root URLs: admin, accounts, the chat app. The simulator is mounted in ``asgi.py``."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.core.exceptions import PermissionDenied
from django.urls import include, path

from chat import views as chat_views

_admin_login = admin.site.login


@login_not_required
def _admin_login_or_403(request, extra_context=None):  # noqa: ANN001, ANN202
    """A signed-in non-admin opening an admin page gets the 403 page, not a login form."""
    if request.user.is_authenticated and not request.user.is_staff:
        raise PermissionDenied
    return _admin_login(request, extra_context)


admin.site.login = _admin_login_or_403

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
