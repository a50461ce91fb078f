"""Database work off the event loop, in two lanes that never queue behind each other.

``read`` runs a sync function in a small pool of reader threads (turn plans, snapshots of the
thread); ``write`` runs it in the one writer thread (turn rows, partial saves, final rows), in
the order submitted. Neither uses the thread-sensitive thread that channels'
``database_sync_to_async`` and Django's sync views share, so a send never waits behind page
renders, and a turn's partial save never waits behind another user's send.

Each job is wrapped in ``close_old_connections()`` like a request: with the SQLite default the
connection of each thread persists (``CONN_MAX_AGE=None``), with PostgreSQL it goes back to
psycopg's pool after the job.

May import: Django (db, settings), the standard library.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from django.conf import settings
from django.db import close_old_connections

T = TypeVar("T")

_readers: ThreadPoolExecutor | None = None
_writer: ThreadPoolExecutor | None = None


def _pools() -> tuple[ThreadPoolExecutor, ThreadPoolExecutor]:
    global _readers, _writer
    if _readers is None or _writer is None:
        _readers = ThreadPoolExecutor(
            max_workers=getattr(settings, "PLAYGROUND_DB_READERS", 4), thread_name_prefix="db-read"
        )
        _writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="db-write")
    return _readers, _writer


def _job(fn: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any]) -> T:
    close_old_connections()
    try:
        return fn(*args, **kwargs)
    finally:
        close_old_connections()


async def read(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """Run ``fn(*args, **kwargs)`` in a reader thread; returns its result or raises its error."""
    readers, _ = _pools()
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(readers, functools.partial(_job, fn, args, kwargs))


def write_nowait(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> asyncio.Future[T]:
    """Queue ``fn(*args, **kwargs)`` on the writer thread (FIFO) and return its future at once.

    Writes of one turn keep their order (its INSERT before its partial saves before its final
    row) because there is one writer thread and jobs run in submission order.
    """
    _, writer = _pools()
    loop = asyncio.get_running_loop()
    return loop.run_in_executor(writer, functools.partial(_job, fn, args, kwargs))


async def write(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """:func:`write_nowait` and wait for the result."""
    return await write_nowait(fn, *args, **kwargs)
