"""Summaries of a py-spy ``--format raw`` profile (collapsed stacks) of the benchmark's server.

``python -m bench --py-spy /path/to/py-spy --profile FILE`` samples the daphne process during
the relay phase (``py-spy record --format raw``, 100 Hz, idle threads excluded); this module
turns the collapsed stacks into a short text report: the share of samples per thread, per
function on top of the stack ("self") and per function anywhere on the stack ("inclusive"),
plus a few named buckets of the relay (upstream read, frame building, websocket writes, DB,
templates). py-spy is not a project dependency: install it in a throwaway venv
(``python3 -m venv /tmp/pyspy && /tmp/pyspy/bin/pip install py-spy``).

May import: the standard library only.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

#: Buckets: a sample belongs to the first bucket whose pattern matches any frame of its stack.
BUCKETS: tuple[tuple[str, str], ...] = (
    ("database (executor thread)", r"django/db/|sqlite3|database_sync_to_async"),
    (
        "templates / markdown (final frame, announce)",
        r"django/template/|template_partials|rendering\.py|markdown_it|pygments|nh3",
    ),
    ("upstream read (httpx, httpcore, h11, SSE parse)", r"httpx|httpcore|h11/|anyio|providers/"),
    (
        "websocket write (channels, autobahn, twisted)",
        r"autobahn|channels/generic|consumers\.py:.*_write|twisted/internet/(tcp|abstract)",
    ),
    ("turn runner (coalescing, frames)", r"chat/turns\.py|chat/frames\.py"),
    ("event loop and reactor", r"asyncio/|twisted/"),
)


def _frames(stack: str) -> list[str]:
    return stack.split(";")


def report(path: str | Path, top: int = 30) -> str:
    """A text report of the collapsed-stack file ``path`` (``stack count`` per line)."""
    stacks: Counter[str] = Counter()
    for line in Path(path).read_text(errors="replace").splitlines():
        stack, _, n = line.rpartition(" ")
        if stack and n.isdigit():
            stacks[stack] += int(n)
    total = sum(stacks.values()) or 1
    self_time: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    threads: Counter[str] = Counter()
    buckets: Counter[str] = Counter()
    for stack, n in stacks.items():
        frames = _frames(stack)
        threads[frames[0] if frames[0].startswith(("thread", "process")) else "?"] += n
        self_time[frames[-1]] += n
        for f in set(frames):
            inclusive[f] += n
        for name, pattern in BUCKETS:
            if any(re.search(pattern, f) for f in frames):
                buckets[name] += n
                break
        else:
            buckets["other"] += n
    out = [f"{total} samples (100 per CPU-second when sampled at 100 Hz)", "", "by bucket:"]
    out += [f"  {100 * n / total:5.1f}%  {name}" for name, n in buckets.most_common()]
    out += ["", "by thread:"] + [
        f"  {100 * n / total:5.1f}%  {name}" for name, n in threads.most_common(8)
    ]
    out += ["", f"top {top} self:"] + [
        f"  {100 * n / total:5.1f}%  {f}" for f, n in self_time.most_common(top)
    ]
    out += ["", f"top {top} inclusive:"] + [
        f"  {100 * n / total:5.1f}%  {f}" for f, n in inclusive.most_common(top)
    ]
    ours = [(f, n) for f, n in inclusive.most_common() if re.search(r"\((chat|bench)/", f)]
    out += ["", f"top {top} inclusive, project code:"]
    out += [f"  {100 * n / total:5.1f}%  {f}" for f, n in ours[:top]]
    return "\n".join(out) + "\n"
