"""ASGI entry of the benchmark's server: ``daphne bench.asgi:application``.

The playground's own application (``playground.asgi``) unchanged, plus, under ``/_bench/``
(loopback benchmark servers only, never production):

- a counter of writing SQL statements (INSERT, UPDATE, DELETE, REPLACE) on every database
  connection, in whatever thread (writes run in ``database_sync_to_async`` executor threads),
  installed the way ``tests/conftest.py``'s ``write_counter`` does it;
- ``GET /_bench/writes``: ``{"total": n, "by_table": {"chat_message": n, …}, "by_verb": {…}}``
  since the last ``POST /_bench/reset``;
- ``POST /_bench/profile/start`` and ``POST /_bench/profile/stop``: cProfile the event-loop
  thread (where the relay runs) and, on stop, write the top functions to ``BENCH_PROFILE_PATH``.

May import: Django (database backend internals), ``playground.asgi``, the standard library.
"""

from __future__ import annotations

import cProfile
import io
import json
import os
import pstats
import re
import threading
from collections import Counter
from typing import Any

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "playground.settings")

from playground.asgi import application as playground_application  # noqa: E402

WRITE_RE = re.compile(r'^\s*(INSERT\s+INTO|UPDATE|DELETE\s+FROM|REPLACE\s+INTO)\s+"?(\w+)"?', re.I)


class WriteCounter:
    """``connection.execute_wrapper`` counting writing statements by table and verb."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_table: Counter[str] = Counter()
        self.by_verb: Counter[str] = Counter()

    def __call__(self, execute, sql, params, many, context):  # noqa: ANN001, ANN204
        m = WRITE_RE.match(sql)
        if m:
            verb = m.group(1).split()[0].upper()
            with self.lock:
                self.by_table[m.group(2)] += 1
                self.by_verb[verb] += 1
        return execute(sql, params, many, context)

    def reset(self) -> None:
        with self.lock:
            self.by_table.clear()
            self.by_verb.clear()

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            return {
                "total": sum(self.by_verb.values()),
                "by_table": dict(self.by_table),
                "by_verb": dict(self.by_verb),
            }


counter = WriteCounter()


def _install_counter() -> None:
    """Add :data:`counter` to every connection the first time it runs SQL (any thread)."""
    from django.db.backends.utils import CursorWrapper

    original = CursorWrapper._execute_with_wrappers

    def with_counter(self, sql, params, many, executor):  # noqa: ANN001, ANN202
        if counter not in self.db.execute_wrappers:
            self.db.execute_wrappers.append(counter)
        return original(self, sql, params, many, executor)

    CursorWrapper._execute_with_wrappers = with_counter  # type: ignore[method-assign]


_install_counter()

_profiler: cProfile.Profile | None = None


def _profile_report(prof: cProfile.Profile) -> str:
    """Top 40 functions by own time, then top 40 by cumulative time (pstats text)."""
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out)
    stats.sort_stats("tottime").print_stats(40)
    stats.sort_stats("cumulative").print_stats(40)
    return out.getvalue()


def _control(method: str, path: str) -> tuple[int, dict[str, Any]]:
    """Handle one ``/_bench/`` request; returns (HTTP status, JSON body)."""
    global _profiler
    if path == "/_bench/writes" and method == "GET":
        return 200, counter.snapshot()
    if path == "/_bench/reset" and method == "POST":
        counter.reset()
        return 200, {"ok": True}
    if path == "/_bench/profile/start" and method == "POST":
        _profiler = cProfile.Profile()
        _profiler.enable()
        return 200, {"ok": True}
    if path == "/_bench/profile/stop" and method == "POST":
        if _profiler is None:
            return 409, {"error": "not profiling"}
        _profiler.disable()
        target = os.environ.get("BENCH_PROFILE_PATH", "bench-profile.txt")
        with open(target, "w", encoding="utf-8") as f:
            f.write(_profile_report(_profiler))
        _profiler = None
        return 200, {"ok": True, "path": target}
    return 404, {"error": "unknown"}


async def application(scope, receive, send):  # noqa: ANN001, ANN201
    """The playground, with the benchmark's control routes under ``/_bench/``."""
    if scope["type"] == "http" and scope["path"].startswith("/_bench/"):
        status, body = _control(scope["method"], scope["path"])
        data = json.dumps(body).encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(data)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": data})
        return
    await playground_application(scope, receive, send)
