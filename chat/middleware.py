"""First-run redirect: on an empty database every page leads to "create the first account".

Login itself is enforced everywhere by Django's ``LoginRequiredMiddleware``; the few public
views are marked ``login_not_required``.

May import: Django.
"""

from __future__ import annotations

from collections.abc import Callable

from django.contrib.auth import get_user_model
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect

_has_users = False


def users_exist() -> bool:
    """Whether any account exists (cached once true: accounts are never all deleted at run time)."""
    global _has_users
    if not _has_users:
        _has_users = get_user_model().objects.exists()
    return _has_users


def reset_cache() -> None:
    global _has_users
    _has_users = False


class FirstRunMiddleware:
    """Redirect to ``/setup/`` while no account exists (static files and the setup page pass)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        path = request.path
        if not path.startswith(("/setup/", "/static/")) and not users_exist():
            return redirect("setup")
        return self.get_response(request)
