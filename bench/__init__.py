"""The relay benchmark (``make bench``, ``python -m bench``).

It measures what the playground's websocket relay adds on top of an upstream: one daphne
process serving the playground (pinned to one CPU), the lean bench upstream and N websocket
clients in separate processes (on the other CPU), against the same requests sent straight to
the upstream, in the same run; and what one Chromium page spends on a long streamed answer.
Results go to ``bench.json``; the README's "Relay benchmark" table is generated from it
(``python -m bench.readme``).

Modules:

- ``__main__``: the command line and the orchestration (processes, pinning, temp dir, report).
- ``upstream``: the lean bench upstream (asyncio, pre-encoded answers on an absolute schedule,
  the three API styles, ``GET /models``).
- ``setup_db``: run in a subprocess with the benchmark's ``DATABASE_URL``: migrate, users,
  endpoints, conversations, login sessions.
- ``asgi``: the server's ASGI entry (``bench.asgi:application``): the playground plus a counter
  of writing SQL statements and a cProfile switch under ``/_bench/``.
- ``client``: the load generator (separate process): sequential pairs, the 100-stream phase,
  the knee search, the fan-out burst; raw per-turn timings and ``/proc`` CPU readings.
- ``frames``: how the client reads the relay's websocket frames (the one place to adapt when
  the frame format changes).
- ``browser``: the browser phase (Playwright, Debian Chromium).
- ``stats``: percentiles, pairs, the ideal-coalescer model, the knee, every figure and target.
- ``readme``: the table (README between ``<!-- bench:start -->`` and ``<!-- bench:end -->``,
  and the printed one) from ``bench.json``.
- ``profile``: summaries of a py-spy profile of the server.

May import: the standard library, httpx, websockets, playwright (``browser``); Django only in
``setup_db`` and ``asgi`` (which run inside their own processes); ``tests.helpers`` (through
``frames``) for parsing delta frames.
"""
