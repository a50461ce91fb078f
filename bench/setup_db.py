"""Prepare the benchmark's own database: ``python -m bench.setup_db --sim URL --streams N --users U``.

Run in a subprocess whose environment carries the benchmark's ``DATABASE_URL`` (a SQLite file
in a temp dir) and settings. It migrates, then creates ``U`` users (unusable passwords: no
password hashing), one endpoint per user pointing at the standalone simulator (``URL`` ends in
``/v1``), ``N`` conversations (stream ``i`` belongs to user ``i % U``) plus one warm-up
conversation, and a logged-in session per user made with Django's ``SessionStore`` (what a
login would store). Prints one JSON line::

    {"streams": [{"conversation_id", "endpoint_id", "session"}, …], "warmup": {…}}

May import: Django, chat.services, chat.models.
"""

from __future__ import annotations

import argparse
import json
import os


def main(argv: list[str] | None = None) -> None:
    """Migrate and create the rows; print the JSON line described in the module docstring."""
    parser = argparse.ArgumentParser(prog="python -m bench.setup_db")
    parser.add_argument(
        "--sim", required=True, help="simulator base URL, e.g. http://127.0.0.1:8100/v1"
    )
    parser.add_argument("--streams", type=int, required=True)
    parser.add_argument("--users", type=int, required=True)
    args = parser.parse_args(argv)

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
    User = get_user_model()
    users = []
    for u in range(max(1, args.users)):
        user = User.objects.create_user(username=f"bench{u}", password=None)  # unusable: no hashing
        endpoint = services.endpoint_create(user=user, name="Bench simulator", base_url=args.sim)
        session = SessionStore()
        session[SESSION_KEY] = str(user.pk)
        session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
        session[HASH_SESSION_KEY] = user.get_session_auth_hash()
        session.create()
        users.append((user, endpoint, session.session_key))

    def conversation(i: int) -> dict[str, object]:
        user, endpoint, key = users[i % len(users)]
        conv = services.conversation_create(user=user, endpoint=endpoint)
        return {"conversation_id": conv.pk, "endpoint_id": endpoint.pk, "session": key}

    out = {"streams": [conversation(i) for i in range(args.streams)], "warmup": conversation(0)}
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
