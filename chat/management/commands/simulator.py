"""``manage.py simulator --host 127.0.0.1 --port 8100``: run the built-in upstream simulator.

Serves the same ASGI app as the in-process ``/simulator/v1`` mount, standalone under ``/v1``
with daphne (see ``chat.simulator.server``). The recorder is at ``/_simulator/requests``.

May import: Django's management framework and ``chat.simulator``.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser


class Command(BaseCommand):
    help = "Run the deterministic upstream simulator (OpenAI chat, SambaNova dialect) with daphne."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1", help="interface (default 127.0.0.1)")
        parser.add_argument("--port", type=int, default=8100, help="port (default 8100, 0: any)")
        parser.add_argument("--prefix", default="/v1", help="API mount point (default /v1)")

    def handle(self, *args: Any, **options: Any) -> None:
        from chat.simulator.server import serve

        serve(
            options["host"],
            options["port"],
            options["prefix"],
            verbosity=options["verbosity"],
            announce=lambda line: (self.stdout.write(line), self.stdout.flush()),
        )
