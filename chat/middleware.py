"""Middleware: the first-run redirect and the Content-Security-Policy header.

First run: on an empty database every page leads to "create the first account". Login itself
is enforced everywhere by Django's ``LoginRequiredMiddleware``; the few public views are marked
``login_not_required``. The policy itself is ``settings.CONTENT_SECURITY_POLICY``.

May import: Django, django-csp.
"""

from __future__ import annotations

from collections.abc import Callable

from csp.middleware import CSPMiddleware, PolicyParts
from django.contrib.auth import get_user_model
from django.core.exceptions import DisallowedHost
from django.http import HttpRequest, HttpResponse, HttpResponseBase
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


class ContentSecurityPolicyMiddleware(CSPMiddleware):
    """django-csp's middleware (policy in ``settings.CONTENT_SECURITY_POLICY``) plus the
    websocket origins of this request's host in ``connect-src``.

    ``'self'`` covers ``ws:``/``wss:`` of the same host only in CSP Level 3 browsers; naming
    ``ws://host`` and ``wss://host`` (the validated Host header, port included) keeps the chat
    socket working in older ones. A response that sets its own policy keeps it.
    """

    def get_policy_parts(
        self, request: HttpRequest, response: HttpResponseBase, report_only: bool = False
    ) -> PolicyParts:
        parts = super().get_policy_parts(request, response, report_only)
        if not report_only:
            try:
                host = request.get_host()
            except DisallowedHost:
                host = ""
            if host:
                extra = {"connect-src": [f"ws://{host}", f"wss://{host}"]}
                parts.update = {**(parts.update or {}), **extra}
        return parts
