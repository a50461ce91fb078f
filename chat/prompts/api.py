"""Read-only JSON API: ``GET /api/prompts/<name>?label=…`` or ``?version=N``.

Authenticated by ``Authorization: Bearer <token>`` (a per-user API token; only its SHA-256 is
stored). 401 without a valid token; 404 for a prompt, label or version the token's user may not
see (the same answer as for one that does not exist).

May import: Django, chat.prompts.selectors.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_not_required
from django.http import Http404, HttpRequest, JsonResponse
from django.views.decorators.http import require_GET

from chat.prompts import selectors


@login_not_required
@require_GET
def prompt_get(request: HttpRequest, name: str) -> JsonResponse:
    """``{"name", "version", "labels", "system_prompt", "messages", "variables", "config":
    {"model", "params"}, "created_at"}``; ``messages`` are ``[{role, content}]`` with
    ``{{variable}}`` placeholders left in for the application to fill."""
    auth = request.headers.get("Authorization", "")
    raw = auth[7:].strip() if auth[:7].lower() == "bearer " else ""
    user = selectors.token_user(raw=raw)
    if user is None:
        response = JsonResponse({"error": "A valid API token is required (Authorization: Bearer …)."}, status=401)
        response["WWW-Authenticate"] = "Bearer"
        return response
    try:
        version = selectors.prompt_for_api(
            user=user, name=name[:100], label=request.GET.get("label", "")[:50], number=request.GET.get("version")
        )
    except Http404:
        return JsonResponse({"error": "Not found."}, status=404)
    config = version.config or {}
    return JsonResponse({
        "name": version.prompt.name, "version": version.number,
        "labels": sorted(version.labels.values_list("name", flat=True)),
        "system_prompt": version.system_prompt, "messages": version.messages,
        "variables": selectors.version_variables(version),
        "config": {"model": config.get("model", ""), "params": config.get("params") or {}},
        "created_at": version.created_at.isoformat(),
    })
