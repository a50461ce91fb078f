"""``manage.py seed_usage [--turns N] [--days D] [--measure R]``: fill the database with N
finished turns (default 100,000) for the usage page, and optionally time the page.

Makes a team "Bench team" with an owner ``bench-owner`` and members ``bench-member-1..4``
(password ``bench-password-1``), a team endpoint and a personal one each, and N assistant
answers spread over the last D days (default 90) with usage and metrics like real turns (the
usage columns set as :meth:`chat.models.Message.new_answer` sets them). Rows are written with
``bulk_create`` in batches of 5,000. ``--measure R``: then render ``/usage/`` R times as the
team owner in the team workspace (every member, 30 and 90 days) with Django's test client and
print the median and worst milliseconds (for a throwaway database: it writes rows).

May import: Django, chat.models, chat.services, chat.teams.
"""

from __future__ import annotations

import datetime as dt
import random
import statistics
import time
import uuid
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction
from django.utils import timezone

from chat import services
from chat.models import Conversation, Message, MessageStatus, Team
from chat.teams import services as team_services

PASSWORD = "bench-password-1"
MODELS = ("sim-fast", "sim-reasoning", "gpt-4o-mini")


class Command(BaseCommand):
    help = "Seed N finished turns for the usage page (and optionally time it)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--turns", type=int, default=100_000)
        parser.add_argument("--days", type=int, default=90)
        parser.add_argument("--measure", type=int, default=0, help="render /usage/ this many times and print timings")

    def handle(self, *args: Any, **options: Any) -> None:
        n, days = max(0, options["turns"]), max(1, options["days"])
        owner = self._seed(n, days) if n else get_user_model().objects.get(username="bench-owner")
        if options["measure"]:
            self._measure(owner, options["measure"])

    def _seed(self, n: int, days: int) -> Any:
        User = get_user_model()
        rng = random.Random(12)
        with transaction.atomic():
            owner = User.objects.create_user("bench-owner", password=PASSWORD)
            members = [owner] + [User.objects.create_user(f"bench-member-{i}", password=PASSWORD) for i in range(1, 5)]
            team = team_services.team_create(user=owner, name="Bench team")
            for m in members[1:]:
                team_services.member_add(team=team, who=m.username)
            shared = services.endpoint_create(user=owner, team=team, name="Team endpoint", base_url="sim://builtin/v1")
            own = {m.pk: services.endpoint_create(user=m, name="Own endpoint", base_url="sim://builtin/v1") for m in members}
            convs = {m.pk: [Conversation.objects.create(owner=m, title=f"bench {i}") for i in range(20)] for m in members}
        now = timezone.now()
        batch: list[Message] = []
        t0 = time.monotonic()
        for i in range(n):
            user = members[i % len(members)]
            endpoint = shared if rng.random() < 0.7 else own[user.pk]
            model = MODELS[rng.randrange(len(MODELS))]
            created = now - dt.timedelta(seconds=rng.uniform(0, days * 86400))
            prompt, completion = rng.randint(20, 3000), rng.randint(10, 1500)
            m = Message.new_answer(
                conversation=rng.choice(convs[user.pk]), lane_id=None, parent_id=None, turn_id=uuid.uuid4(),
                snapshot=endpoint.settings_snapshot(model, "", {}), created_at=created,
            )
            m.status, m.owner_process, m.owner_channel, m.heartbeat_at = MessageStatus.COMPLETE, "", "", None
            m.content = "seeded answer"
            m.usage = {"prompt_tokens": prompt, "completion_tokens": completion,
                       "reasoning_tokens": rng.randint(0, 200) if model == "sim-reasoning" else 0,
                       "cached_tokens": rng.choice((0, 0, 128, 512)), "total_tokens": prompt + completion}
            m.metrics = {"ttft_ms": round(rng.lognormvariate(5.5, 0.5), 1), "tokens_per_sec": round(rng.uniform(20, 120), 1),
                         "total_ms": rng.randint(300, 9000),
                         "cost_usd": round(prompt * 0.15e-6 + completion * 0.6e-6, 8)}
            for k, v in Message.usage_figures(m.usage, m.metrics).items():
                setattr(m, k, v)
            batch.append(m)
            if len(batch) >= 5000:
                Message.objects.bulk_create(batch)
                batch = []
        if batch:
            Message.objects.bulk_create(batch)
        self.stdout.write(f"seeded {n} turns over {days} days in {time.monotonic() - t0:.1f} s (team {team.pk})")
        return owner

    def _measure(self, owner: Any, rounds: int) -> None:
        from django.test import Client

        c = Client()
        c.force_login(owner)
        team = Team.objects.get(name="Bench team")
        c.post("/workspace/", {"workspace": team.pk}, HTTP_HOST="localhost")
        for label, url in (("team, every member, 30 days", "/usage/"), ("team, every member, 90 days", "/usage/?days=90"),
                           ("team, 365 days, cost", "/usage/?days=365&metric=cost")):
            times = []
            for _ in range(rounds):
                t = time.perf_counter()
                resp = c.get(url, HTTP_HOST="localhost")
                times.append((time.perf_counter() - t) * 1000)
                assert resp.status_code == 200, resp.status_code
            self.stdout.write(f"{label}: median {statistics.median(times):.0f} ms, worst {max(times):.0f} ms over {rounds}")
