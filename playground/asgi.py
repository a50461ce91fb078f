"""ASGI entry point: HTTP (Django), websockets (channels), and the in-process simulator.

Order of the websocket stack: :class:`playground.origins.SameOriginValidator` (an Origin other
than the site's own scheme, host and port, or a CSRF-trusted origin, is refused) → session and
auth middleware → URL router. The Django ASGI app is built before importing anything that
touches models.

Requests under ``/simulator/`` go to the built-in simulator (a plain ASGI app) when
``PLAYGROUND_SIMULATOR`` is on, through :class:`SimulatorGate`: ``GET /simulator/v1/models``
(the catalogue) is public; everything else needs the per-install simulator key
(``settings.PLAYGROUND_SIMULATOR_KEY``, which the playground sends to its own ``sim://``
endpoints) or a logged-in session, else 401. The simulator keeps request bodies and has its
control routes only with ``PLAYGROUND_SIMULATOR_CONTROL`` (tests and benchmarks).
"""

from __future__ import annotations

import hmac
import json
import os
from typing import Any

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "playground.settings")

from django.core.asgi import get_asgi_application  # noqa: E402

django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.conf import settings  # noqa: E402

from chat.routing import websocket_urlpatterns  # noqa: E402
from playground.origins import SameOriginValidator  # noqa: E402

SIMULATOR_PREFIX = "/simulator/"
_PUBLIC_SIMULATOR_PATHS = ("/simulator/v1/models",)


def _header(scope: dict[str, Any], name: bytes) -> str:
    for key, value in scope.get("headers", []):
        if key == name:
            return value.decode("latin-1")
    return ""


def simulator_key_presented(scope: dict[str, Any]) -> bool:
    """Whether the request carries the per-install simulator key (``Authorization: Bearer``
    or ``x-api-key``, the two ways the adapters send a key), compared in constant time."""
    expected = settings.PLAYGROUND_SIMULATOR_KEY.encode()
    auth = _header(scope, b"authorization")
    scheme, _, rest = auth.partition(" ")
    candidates = [rest.strip() if scheme.lower() == "bearer" else auth.strip(), _header(scope, b"x-api-key").strip()]
    return any(c and hmac.compare_digest(c.encode(), expected) for c in candidates)


def simulator_path_is_public(scope: dict[str, Any]) -> bool:
    """``GET``/``HEAD /simulator/v1/models`` and ``/simulator/v1/models/{id}``: the catalogue."""
    path = scope["path"].rstrip("/")
    return scope.get("method") in ("GET", "HEAD") and any(
        path == p or path.startswith(p + "/") for p in _PUBLIC_SIMULATOR_PATHS
    )


class SimulatorGate:
    """ASGI app in front of the in-process simulator (see the module docstring)."""

    def __init__(self, simulator: Any) -> None:
        self.simulator = simulator
        self._with_session = AuthMiddlewareStack(self._after_session)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if simulator_path_is_public(scope) or simulator_key_presented(scope):
            await self.simulator(scope, receive, send)
            return
        await self._with_session(scope, receive, send)

    async def _after_session(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        user = scope.get("user")
        if user is not None and user.is_authenticated and user.is_active:
            await self.simulator(scope, receive, send)
            return
        body = json.dumps({"error": {
            "message": "The built-in simulator answers logged-in users of this playground only: log in, "
                       "or use it through a sim:// endpoint.",
            "type": "authentication_error", "code": "simulator_login_required",
        }}).encode()
        await send({"type": "http.response.start", "status": 401, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
            (b"www-authenticate", b'Bearer realm="simulator"'),
        ]})
        await send({"type": "http.response.body", "body": body})


def _http_app():  # noqa: ANN202
    if not settings.PLAYGROUND_SIMULATOR:
        return django_asgi_app
    from chat.simulator import simulator_asgi_app

    control = settings.PLAYGROUND_SIMULATOR_CONTROL
    simulator = SimulatorGate(simulator_asgi_app(
        control=control,
        max_body_bytes=settings.PLAYGROUND_SIMULATOR_MAX_BODY_BYTES,
        max_answer_chars=settings.PLAYGROUND_SIMULATOR_MAX_ANSWER_CHARS,
    ))

    async def app(scope, receive, send):  # noqa: ANN001, ANN202
        if scope["path"].startswith(SIMULATOR_PREFIX):
            await simulator(scope, receive, send)
        else:
            await django_asgi_app(scope, receive, send)

    return app


def graceful_shutdown() -> bool:
    """Under daphne (Twisted's asyncio reactor, installed before the app is imported): before
    the reactor stops (SIGTERM, SIGINT), every running turn ends ``interrupted`` with its text
    and metrics saved (``registry.cancel_all``), instead of being killed mid-write. Returns
    whether the hook was installed (not under pytest or a plain ASGI server)."""
    import sys

    if "twisted.internet.reactor" not in sys.modules:
        return False
    from twisted.internet import reactor
    from twisted.internet.defer import Deferred

    loop = getattr(reactor, "_asyncioEventloop", None)
    if loop is None:
        return False

    def before_shutdown() -> Deferred:
        import asyncio

        from chat.turns import registry

        return Deferred.fromFuture(asyncio.ensure_future(registry.cancel_all(shutdown=True), loop=loop))

    reactor.addSystemEventTrigger("before", "shutdown", before_shutdown)
    return True


graceful_shutdown()

application = ProtocolTypeRouter(
    {
        "http": _http_app(),
        "websocket": SameOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
