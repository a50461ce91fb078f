"""The top bar's workspace switcher (personal or a team the user is in)."""

from __future__ import annotations

from typing import Any

from django import template

from chat.teams import selectors as teams

register = template.Library()


@register.inclusion_tag("teams/switcher.html", takes_context=True)
def workspace_switcher(context: dict[str, Any]) -> dict[str, Any]:
    """Context of the switcher: the user's teams and the current one (one query)."""
    request = context.get("request")
    user = getattr(request, "user", None)
    if request is None or user is None or not user.is_authenticated:
        return {"show": False}
    mine = list(teams.teams_for_user(user=user))
    current = request.session.get(teams.WORKSPACE_KEY)
    current_team = next((t for t in mine if t.pk == current), None)
    return {"show": True, "teams": mine, "current": current_team, "path": request.get_full_path(),
            "csrf_token": context.get("csrf_token")}
