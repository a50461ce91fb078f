"""``manage.py attachments_cleanup [--hours H]``: delete uploads never sent with a message.

Uploads older than ``--hours`` (default ``PLAYGROUND_ORPHAN_ATTACHMENT_HOURS``) whose message
was never sent are deleted. The server also does this on upload, at most every 10 minutes; run
the command from cron when uploads are rare.

May import: Django's management framework and ``chat.services``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from chat import services


class Command(BaseCommand):
    help = "Delete attachments that were uploaded but never sent with a message."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--hours", type=float, default=None,
            help="age in hours (default: PLAYGROUND_ORPHAN_ATTACHMENT_HOURS)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        hours = options["hours"] if options["hours"] is not None else settings.PLAYGROUND_ORPHAN_ATTACHMENT_HOURS
        count = services.attachments_delete_orphans(older_than=timedelta(hours=hours))
        self.stdout.write(f"Deleted {count} unsent attachment{'s' if count != 1 else ''} older than {hours:g} h.")
