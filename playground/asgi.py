"""ASGI entry point: HTTP (Django), websockets (channels), and the in-process simulator.

Order of the websocket stack: AllowedHostsOriginValidator (foreign Origin refused) → session and
auth middleware → URL router. The Django ASGI app is built before importing anything that
touches models. Requests under ``/simulator/`` go to the built-in simulator (a plain ASGI app)
when ``PLAYGROUND_SIMULATOR`` is on.
"""

from __future__ import annotations

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "playground.settings")

from django.core.asgi import get_asgi_application  # noqa: E402

django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.conf import settings  # noqa: E402

from chat.routing import websocket_urlpatterns  # noqa: E402


def _http_app():  # noqa: ANN202
    if not settings.PLAYGROUND_SIMULATOR:
        return django_asgi_app
    from chat.simulator import simulator_asgi_app

    simulator = simulator_asgi_app(control=settings.PLAYGROUND_SIMULATOR_CONTROL)

    async def app(scope, receive, send):  # noqa: ANN001, ANN202
        if scope["path"].startswith("/simulator/"):
            await simulator(scope, receive, send)
        else:
            await django_asgi_app(scope, receive, send)

    return app


application = ProtocolTypeRouter(
    {
        "http": _http_app(),
        "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
