"""Template tags of the prompt library on the chat page (chat.prompts)."""

from __future__ import annotations

from typing import Any

from django import template

register = template.Library()

SESSION_USE_KEY = "prompt_use"  # chat.prompts.views.SESSION_USE_KEY


@register.inclusion_tag("prompts/chat_tools.html", takes_context=True)
def prompt_chat_tools(context: Any, conversation: Any) -> dict[str, Any]:
    """"Save as prompt" for ``conversation``, and — once, right after "Use prompt" opened it —
    the hidden ``prompt_version_id`` field and the text the page sends (``prompts-use.js``).
    The pending send lives in the session (set by ``chat.prompts.views.prompt_use``) and is
    taken out here, so a reload does not send it again."""
    request = context.get("request")
    use = None
    if request is not None and hasattr(request, "session"):
        pending = request.session.get(SESSION_USE_KEY) or {}
        use = pending.pop(str(conversation.pk), None)
        if use is not None:
            request.session[SESSION_USE_KEY] = pending
    return {"conversation": conversation, "use": use, "csrf_token": context.get("csrf_token"),
            "user": getattr(request, "user", None)}


@register.simple_tag
def share_team_options(user: Any) -> str:
    """``<option value="team:<id>">members of <team></option>`` for each team ``user`` is in
    (share forms: a link only that team's members may open)."""
    from django.utils.html import format_html_join

    from chat.teams.selectors import teams_for_user

    if not getattr(user, "is_authenticated", False):
        return ""
    return format_html_join("", '<option value="team:{}">members of {}</option>',
                            ((t.pk, t.name) for t in teams_for_user(user=user)))


@register.simple_tag
def public_share_links_allowed() -> bool:
    """Whether share forms may offer "anyone with the link" (the admin's site setting, else
    ``PLAYGROUND_PUBLIC_SHARE_LINKS``): ``{% public_share_links_allowed as public_ok %}``."""
    from chat.sharing.services import public_links_allowed

    return public_links_allowed()


@register.inclusion_tag("prompts/new_chat_menu.html", takes_context=True)
def new_chat_from_prompt(context: Any) -> dict[str, Any]:
    """The "New chat from a prompt" menu beside New chat: the user's recently used prompts (one
    click opens a chat from a prompt without variables; one with variables opens the form that
    asks for them first: ``chat.prompts.views.prompt_use``) and a link to the library."""
    from chat.prompts.selectors import prompts_for_new_chat

    request = context.get("request")
    user = getattr(request, "user", None)
    prompts = prompts_for_new_chat(user=user) if getattr(user, "is_authenticated", False) else []
    return {"prompts": prompts, "csrf_token": context.get("csrf_token")}
