"""Prepare the benchmark's own database: ``python -m bench.setup_db SPEC.json``.

Run in a subprocess whose environment carries the benchmark's ``DATABASE_URL`` (a SQLite file
in a temp dir) and settings. ``SPEC.json``::

    {"style": "openai_chat", "upstream": "http://127.0.0.1:P/v1",
     "browser_upstream": "http://127.0.0.1:Q/v1",            # the lean upstream (markdown)
     "users": U, "groups": {"relay": N, "knee25": 25, …},    # conversations per group, one
     "fanout": F, "browser_model": "bench-md?…",             # user per stream (user i % U)
     "compare_lanes": L}                                     # 0: no compare phase

It migrates (and with ``"collectstatic": true`` collects the static files into ``STATIC_ROOT``,
as a production install does: the pages need the hashed manifest), then creates ``U`` users (unusable passwords: no password hashing), each with one
endpoint of the given API style at the upstream; for each group, conversations whose stream
``i`` belongs to user ``i % U``; one conversation for the sequential phase and one warm-up
conversation (user 0); a separate user with ``F`` conversations for the fan-out burst; a user
whose endpoint points at ``browser_upstream`` with ``browser_model`` as its default model, and
one conversation, for the browser phase. Each user gets a logged-in session made with Django's
``SessionStore`` (what a login would store). Prints one JSON line::

    {"groups": {name: [{"conversation_id", "endpoint_id", "session"}, …]},
     "sequential": {…}, "warmup": {…}, "fanout": [{…}, …], "browser": {…},
     "compare": {"conversation_id", "endpoint_id", "session", "lane_ids"} (with compare_lanes),
     "frame_interval_s": the server's PLAYGROUND_FRAME_INTERVAL_S (None if it has none)}

May import: Django, chat.services, chat.selectors, chat.compare.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any


def main(argv: list[str] | None = None) -> None:
    """Migrate and create the rows; print the JSON line described in the module docstring."""
    argv = sys.argv[1:] if argv is None else argv
    with open(argv[0]) as f:
        spec = json.load(f)

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "playground.settings")
    import django

    django.setup()
    from django.contrib.auth import (
        BACKEND_SESSION_KEY,
        HASH_SESSION_KEY,
        SESSION_KEY,
        get_user_model,
    )
    from django.contrib.sessions.backends.db import SessionStore
    from django.core.management import call_command

    from chat import services

    call_command("migrate", interactive=False, verbosity=0)
    if spec.get("collectstatic"):  # production settings serve the hashed manifest (whitenoise)
        call_command("collectstatic", interactive=False, verbosity=0)
    User = get_user_model()

    def user(name: str, base_url: str, model: str = "") -> tuple[Any, Any, str]:
        u = User.objects.create_user(username=name, password=None)  # unusable: no hashing
        endpoint = services.endpoint_create(
            user=u, name="Bench upstream", base_url=base_url, api_style=spec["style"],
            default_model=model,
        )
        session = SessionStore()
        session[SESSION_KEY] = str(u.pk)
        session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
        session[HASH_SESSION_KEY] = u.get_session_auth_hash()
        session.create()
        return u, endpoint, session.session_key

    def conversation(owner: tuple[Any, Any, str]) -> dict[str, Any]:
        u, endpoint, key = owner
        conv = services.conversation_create(user=u, endpoint=endpoint)
        return {"conversation_id": conv.pk, "endpoint_id": endpoint.pk, "session": key}

    users = [user(f"bench{i}", spec["upstream"]) for i in range(max(1, spec["users"]))]
    out: dict[str, Any] = {
        "groups": {
            name: [conversation(users[i % len(users)]) for i in range(n)]
            for name, n in spec["groups"].items()
        },
        "sequential": conversation(users[0]),
        "warmup": conversation(users[0]),
    }
    fan = user("bench-fanout", spec["upstream"])
    out["fanout"] = [conversation(fan) for _ in range(spec["fanout"])]
    if spec.get("compare_lanes"):  # one comparison of that many lanes (models come with the send)
        from chat.compare import services as compare_services
        from chat.compare.selectors import lanes_of
        from chat.selectors import NextTurnSettings

        cu, cendpoint, ckey = user("bench-compare", spec["upstream"])
        lane = NextTurnSettings(cendpoint.pk, "bench", "", {})
        comparison = compare_services.compare_create(user=cu, lanes=[lane] * spec["compare_lanes"])
        out["compare"] = {"conversation_id": comparison.pk, "endpoint_id": cendpoint.pk, "session": ckey,
                          "lane_ids": [x.pk for x in lanes_of(conversation=comparison)]}
    browser = user("bench-browser", spec["browser_upstream"], spec["browser_model"])
    out["browser"] = conversation(browser)
    from django.conf import settings

    out["frame_interval_s"] = getattr(settings, "PLAYGROUND_FRAME_INTERVAL_S", None)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
