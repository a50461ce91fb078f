"""Run the simulator standalone with daphne (no Django needed).

Used by ``manage.py simulator`` and ``python -m chat.simulator``. Importing daphne installs
Twisted's asyncio reactor, so it is imported only when :func:`serve` runs.

May import: the standard library, daphne/Twisted and this package (no Django).
"""

from __future__ import annotations

from collections.abc import Callable

from .app import create_app

__all__ = ["serve"]


def serve(
    host: str = "127.0.0.1",
    port: int = 8100,
    prefix: str = "/v1",
    *,
    verbosity: int = 1,
    announce: Callable[[str], None] | None = None,
) -> None:
    """Serve a new simulator app at ``http://host:port{prefix}`` until interrupted (blocks).

    ``port=0`` picks a free port. Once listening, ``announce`` (default: print, flushed) gets
    ``"Simulator listening on http://HOST:PORT/v1"`` with the real port, and the recorder is at
    ``http://HOST:PORT/_simulator/requests``.
    """
    from daphne.server import Server  # installs the asyncio reactor: import late
    from twisted.internet import reactor

    app = create_app(prefix)
    interface = host.replace(":", r"\:")
    server = Server(
        application=app,
        endpoints=[f"tcp:port={port}:interface={interface}"],
        signal_handlers=True,
        verbosity=verbosity,
        application_close_timeout=5,
    )

    def _announce() -> None:
        say = announce or (lambda line: print(line, flush=True))
        for bound_host, bound_port in server.listening_addresses or [(host, port)]:
            shown = f"[{bound_host}]" if ":" in bound_host else bound_host
            say(f"Simulator listening on http://{shown}:{bound_port}{app.prefix}")

    reactor.callWhenRunning(_announce)  # type: ignore[attr-defined]
    server.run()
