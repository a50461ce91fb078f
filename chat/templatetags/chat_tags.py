"""Template filters of the chat app."""

from __future__ import annotations

from django import template
from django.utils.html import conditional_escape
from django.utils.safestring import SafeString, mark_safe

register = template.Library()


@register.filter
def crsafe(value: str) -> SafeString:
    """Escape text and write CR as ``&#13;`` so the browser keeps it (a raw CR becomes LF)."""
    return mark_safe(str(conditional_escape(value or "")).replace("\r", "&#13;"))
