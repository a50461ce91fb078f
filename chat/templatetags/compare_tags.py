"""Template tags of comparisons on other pages (chat.compare): the chat sidebar's "Comparisons"."""

from __future__ import annotations

from typing import Any

from django import template

from chat.compare.selectors import compare_list_for_user

register = template.Library()

SIDEBAR_LIMIT = 50


@register.inclusion_tag("compare/sidebar.html", takes_context=True)
def compare_sidebar(context: Any) -> dict[str, Any]:
    """The user's comparisons with a title (newest first, at most :data:`SIDEBAR_LIMIT`), each
    a link to its compare page, and a link to start one."""
    request = context.get("request")
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {"comparisons": []}
    return {"comparisons": list(compare_list_for_user(user=user).exclude(title="")[:SIDEBAR_LIMIT])}
