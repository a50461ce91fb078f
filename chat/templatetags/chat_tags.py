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


@register.filter
def ceil(value: object) -> int:
    """Whole seconds rounded up (a Retry-After of 29.03 s waits 30 s), as the page's countdown."""
    import math

    try:
        return max(0, math.ceil(float(value)))  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return 0
