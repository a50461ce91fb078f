"""The relay benchmark (``make bench``, ``python -m bench``).

It measures what the playground's websocket relay adds on top of an upstream: one daphne
process serving the playground, the standalone simulator as the upstream, and N concurrent
websocket clients in a separate process, against the same schedule sent straight to the
simulator with httpx (the baseline), in the same run. Results go to ``bench.json``; the README's
"Relay benchmark" table is generated from it (``python -m bench.readme``).

Modules:

- ``__main__``: the command line and the orchestration (processes, temp dir, report, table).
- ``setup_db``: run in a subprocess with the benchmark's ``DATABASE_URL``: migrate, create
  users, endpoints, conversations and login sessions (prints them as JSON).
- ``asgi``: the server's ASGI entry (``bench.asgi:application``): the playground plus a counter
  of writing SQL statements and a cProfile switch under ``/_bench/``.
- ``client``: the load generator (separate process): the direct httpx baseline, idle sockets,
  then the relayed turns; records raw per-turn timings and ``/proc`` samples of the server.
- ``stats``: percentiles, the ideal-coalescer model of the baseline and the figures.
- ``readme``: rewrites the README table between ``<!-- bench:start -->`` and
  ``<!-- bench:end -->`` from ``bench.json``.

May import: the standard library, httpx, websockets; Django only in ``setup_db`` and ``asgi``
(which run inside their own processes); ``tests.helpers`` for parsing delta frames.
"""
