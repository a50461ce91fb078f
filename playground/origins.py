"""The websocket origin check, done the way Django's CSRF check does it.

A websocket handshake is accepted only when its ``Origin`` is the site's own origin (the scheme
of the connection, ``ws`` → ``http`` and ``wss`` → ``https`` or the scheme a trusted proxy
reports through ``SECURE_PROXY_SSL_HEADER``, and the ``Host`` header, which must be in
``ALLOWED_HOSTS``), or is listed in ``CSRF_TRUSTED_ORIGINS`` (exact, or ``https://*.example.com``
for subdomains). Scheme, host and port all count: ``https://host`` does not let
``http://host`` or ``https://host:8443`` in. Channels' ``AllowedHostsOriginValidator`` compares
the host only, which this replaces.

May import: Django, channels.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import is_same_domain, split_domain_port, validate_host

_DEFAULT_PORTS = {"http": "80", "https": "443"}


def _header(scope: dict[str, Any], name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            try:
                return value.decode("latin-1")
            except UnicodeDecodeError:  # pragma: no cover - latin-1 decodes every byte
                return None
    return None


def _normalize(origin: str) -> tuple[str, str, str] | None:
    """``scheme://host[:port]`` → (scheme, host, port) with the default port filled in."""
    try:
        parts = urlsplit(origin)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if scheme not in _DEFAULT_PORTS or not host or parts.path or parts.query or parts.username:
        return None
    return scheme, host, str(port) if port is not None else _DEFAULT_PORTS[scheme]


def site_scheme(scope: dict[str, Any]) -> str:
    """``https`` or ``http``: the scheme the browser used to reach this site."""
    proxy = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
    if proxy:
        name, secure_value = proxy
        # HTTP_X_FORWARDED_PROTO → x-forwarded-proto
        header = name.removeprefix("HTTP_").replace("_", "-").lower().encode()
        value = _header(scope, header)
        if value is not None:
            return "https" if value.split(",")[0].strip() == secure_value else "http"
    return "https" if scope.get("scheme") in ("wss", "https") else "http"


def origin_allowed(scope: dict[str, Any]) -> bool:
    """Whether the handshake's ``Origin`` may open a socket (see the module docstring)."""
    origin = _header(scope, b"origin")
    if not origin:
        return False
    got = _normalize(origin)
    if got is None:
        return False
    host_header = _header(scope, b"host") or ""
    domain, port = split_domain_port(host_header)
    if domain and validate_host(domain, settings.ALLOWED_HOSTS):
        scheme = site_scheme(scope)
        own = _normalize(f"{scheme}://{host_header}")
        if own is not None and got == own:
            return True
    for trusted in settings.CSRF_TRUSTED_ORIGINS:
        if "*" in trusted:
            scheme, _, pattern = trusted.partition("://")
            pattern = pattern.replace("*", "", 1)  # "*.example.com" → ".example.com"
            t_host, t_port = split_domain_port(pattern)
            if scheme.lower() != got[0] or not is_same_domain(got[1], t_host):
                continue
            if (t_port or _DEFAULT_PORTS[got[0]]) == got[2]:
                return True
        elif _normalize(trusted) == got:
            return True
    return False


class SameOriginValidator:
    """ASGI middleware for websockets: refuse the handshake (HTTP 403) unless
    :func:`origin_allowed`."""

    def __init__(self, application: Any) -> None:
        self.application = application

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        if scope["type"] != "websocket":
            raise ValueError("SameOriginValidator is for websocket connections only")
        if origin_allowed(scope):
            return await self.application(scope, receive, send)
        return await WebsocketDenier()(scope, receive, send)
