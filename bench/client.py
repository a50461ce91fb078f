"""The benchmark's load generator: ``python -m bench.client PLAN.json RESULT.json``.

Runs in its own process (never inside the server or the upstream; pinned beside the upstream,
away from the server's core, by ``bench.__main__``) and runs the phases the plan lists, in this
order:

1. **sequential** (1 stream): warm-up pairs, then ``pairs`` pairs of turns on one
   conversation: a direct turn, then the relayed turn with the same user text (so both get
   the same answer), ``gap_s`` apart.
2. **relay** (the 100-stream phase): a load run (below) with one relayed warm-up turn between
   its two sub-phases; during the relay sub-phase the server's VmRSS is sampled every 100 ms
   and its DB write counter (``bench.asgi``) read around it. Its idle-socket memory is
   measured first of all, on the fresh server right after the first warm-up turn: server
   VmRSS, then its N websockets opened and left idle for ``settle_s``, VmRSS again, closed.
3. **knee**: a load run per stream count (fresh conversations each), stopping after the first
   overloaded step (:func:`bench.stats.overloaded`).
4. **fanout**: one user's ``lanes × repeats`` conversations, each with an open socket; all
   ``send`` frames leave at once (after the same burst sent directly, for reference).
5. **compare**: one comparison's single ``send`` with lanes × repeat runs over
   ``/ws/compare/<id>/`` (see :func:`compare_phase`).

A load run is a **direct** sub-phase (N streams straight to the upstream, read by
:class:`RawDirect`, a minimal asyncio HTTP/1.1 reader; ``direct_client: "httpx"`` uses httpx)
then a **relay** sub-phase (the same schedule as ``send`` frames through N websockets).
Schedule: stream ``i``'s turn ``j`` starts at ``i × period / N + j × period`` seconds after the
sub-phase starts, or ``gap_s`` after its previous turn ended if that is later; ``period`` =
TTFT + (events − 1) × event interval + ``gap_s``; no turn starts after ``max_phase_s``.

Every (sub-)phase records a ``meter``: wall seconds and the CPU seconds of the server, the
upstream and this process (``/proc/<pid>/stat``, ``getrusage``), plus the token events the
lean upstream wrote (its ``/_stats``). Every time is ``time.perf_counter()`` in this process;
records keep ms relative to the request (or ``send`` frame) leaving this process. The raw
records go to ``RESULT.json`` for :mod:`bench.stats`.

May import: the standard library, httpx, websockets, ``bench.frames``, ``bench.stats``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import resource
import signal
import sys
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx
from websockets.asyncio.client import ClientConnection, connect

from bench import stats
from bench.frames import classify, is_refusal

CLK_TCK = os.sysconf("SC_CLK_TCK")

# ---- /proc -----------------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    """utime + stime of process ``pid`` (all its threads), in seconds, from ``/proc/<pid>/stat``."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # fields 14 and 15 of proc(5)


def thread_cpu_seconds(pid: int) -> dict[str, float]:
    """CPU seconds (utime + stime) per thread of ``pid``, keyed ``"<tid> <name>"``
    (``/proc/<pid>/task/<tid>/stat``; the name is the thread's ``comm``)."""
    out: dict[str, float] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                raw = f.read()
        except OSError:  # the thread ended meanwhile
            continue
        name = raw[raw.index("(") + 1 : raw.rindex(")")]
        fields = raw.rsplit(")", 1)[1].split()
        out[f"{tid} {name}"] = (int(fields[11]) + int(fields[12])) / CLK_TCK
    return out


def runqueue_wait_seconds(pid: int) -> float:
    """Seconds the threads of ``pid`` spent runnable but waiting for a CPU (the second field of
    ``/proc/<pid>/task/<tid>/schedstat``, ns): how much other processes on its CPU held it back.
    0.0 where the kernel has no schedstat."""
    total = 0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0.0
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[1])
        except (OSError, IndexError, ValueError):
            continue
    return total / 1e9


def core_seconds(cpus: list[int]) -> tuple[float, float]:
    """(busy, steal) seconds of the given CPUs since boot, from ``/proc/stat``: busy = user +
    nice + system + irq + softirq + steal (guest time is inside user); steal = time the
    hypervisor gave the CPU to someone else."""
    busy = steal = 0
    with open("/proc/stat") as f:
        for line in f:
            name, *vals = line.split()
            if not name.startswith("cpu") or name == "cpu" or int(name[3:]) not in cpus:
                continue
            v = [int(x) for x in vals[:8]]
            busy += v[0] + v[1] + v[2] + v[5] + v[6] + v[7]
            steal += v[7]
    return busy / CLK_TCK, steal / CLK_TCK


def rss_kb(pid: int) -> int:
    """VmRSS of process ``pid`` in kB (1024 bytes), from ``/proc/<pid>/status``."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


def loadavg() -> list[float]:
    """1, 5 and 15 minute load averages (``/proc/loadavg``)."""
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def own_cpu_seconds() -> float:
    """This process's user + system CPU time (all threads), seconds."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class LagMonitor:
    """Measures this process's event-loop lag (how late a 10 ms sleep wakes up), in ms."""

    def __init__(self) -> None:
        self.samples: list[float] = []
        self.task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while True:
            t = time.perf_counter()
            await asyncio.sleep(0.01)
            self.samples.append((time.perf_counter() - t - 0.01) * 1000)

    def start(self) -> None:
        """Start sampling (clears earlier samples)."""
        self.samples = []
        self.task = asyncio.get_running_loop().create_task(self._run())

    def stop(self) -> float:
        """Stop and return the p99 lag in ms."""
        if self.task:
            self.task.cancel()
        return stats.percentile(self.samples, 99)


class Meter:
    """CPU of the server, the upstream(s) and this process, and the upstream's token events,
    over one (sub-)phase: :meth:`start`, then :meth:`stop` returns the ``meter`` dict."""

    def __init__(self, plan: dict[str, Any]) -> None:
        self.plan = plan
        self.t0 = 0.0
        self.base: dict[str, float] = {}

    async def _events(self) -> int | None:
        url = self.plan.get("upstream_stats_url")
        if not url:
            return None
        async with httpx.AsyncClient(timeout=10) as c:
            return int((await c.get(url)).json()["events"])

    def _upstream_cpu(self) -> float:
        return sum(cpu_seconds(p) for p in self.plan["upstream_pids"])

    def _waits(self) -> dict[str, float]:
        out = {
            "server_wait": runqueue_wait_seconds(self.plan["server_pid"]),
            "upstream_wait": sum(runqueue_wait_seconds(p) for p in self.plan["upstream_pids"]),
            "client_wait": runqueue_wait_seconds(os.getpid()),
        }
        if self.plan.get("server_cpus"):  # only when daphne is pinned: its CPU is known
            out["server_core_busy"], out["server_core_steal"] = core_seconds(self.plan["server_cpus"])
        return out

    async def start(self) -> None:
        """Take the starting readings."""
        self.base = {
            "events": float(await self._events() or 0),
            "server": cpu_seconds(self.plan["server_pid"]),
            "upstream": self._upstream_cpu(),
            "client": own_cpu_seconds(),
            **self._waits(),
        }
        self.t0 = time.perf_counter()

    async def stop(self) -> dict[str, Any]:
        """``{"wall_s", "server_cpu_s", "upstream_cpu_s", "client_cpu_s",
        "server_wait_s", "upstream_wait_s", "client_wait_s", "upstream_events"}``
        (``*_wait_s``: run-queue waits, see :func:`runqueue_wait_seconds`), and when daphne is
        pinned ``server_core_busy_s`` / ``server_core_steal_s`` of its CPU(s) (see
        :func:`core_seconds`; busy minus ``server_cpu_s`` is what other processes took)."""
        wall = time.perf_counter() - self.t0
        waits = self._waits()
        out = {
            "wall_s": round(wall, 3),
            "server_cpu_s": round(cpu_seconds(self.plan["server_pid"]) - self.base["server"], 3),
            "upstream_cpu_s": round(self._upstream_cpu() - self.base["upstream"], 3),
            "client_cpu_s": round(own_cpu_seconds() - self.base["client"], 3),
            **{f"{k}_s": round(v - self.base[k], 3) for k, v in waits.items()},
        }
        events = await self._events()
        out["upstream_events"] = None if events is None else events - int(self.base["events"])
        return out


# ---- records --------------------------------------------------------------------------------


@dataclass
class Turn:
    """One turn as the client saw it. Times are perf_counter seconds until :meth:`as_dict`."""

    stream: int
    turn: int
    sent: float = 0.0
    first: float | None = None
    announced: float | None = None  # relay: the turn-started frame
    events: list[float] = field(default_factory=list)  # token events (direct) / delta frames (relay)
    text: list[str] = field(default_factory=list)
    text_len: int = 0  # code points received so far (relay offsets are code points)
    frames: int = 0
    bytes: int = 0
    delta_frames: int = 0
    delta_bytes: int = 0
    delta_text_bytes: int = 0
    status: str = "pending"
    end: float | None = None
    offset_errors: int = 0
    done: asyncio.Event = field(default_factory=asyncio.Event)

    def as_dict(self, origin: float | None = None) -> dict[str, Any]:
        """JSON-ready record: times in ms since ``sent``, sizes in bytes, text as a SHA-256
        prefix; with ``origin`` (perf_counter s) also ``sent_at_ms`` = sent − origin."""
        text = "".join(self.text)
        ms = lambda t: round((t - self.sent) * 1000, 3)  # noqa: E731
        out = {
            "stream": self.stream,
            "turn": self.turn,
            "status": self.status,
            "ttft_ms": ms(self.first) if self.first is not None else None,
            "announce_ms": ms(self.announced) if self.announced is not None else None,
            "event_ms": [ms(t) for t in self.events],
            "duration_ms": ms(self.end) if self.end is not None else None,
            "frames": self.frames,
            "bytes": self.bytes,
            "delta_frames": self.delta_frames,
            "delta_bytes": self.delta_bytes,
            "delta_text_bytes": self.delta_text_bytes,
            "text_bytes": len(text.encode()),
            "text_sha": hashlib.sha256(text.encode()).hexdigest()[:16],
            "offset_errors": self.offset_errors,
        }
        if origin is not None:
            out["sent_at_ms"] = round((self.sent - origin) * 1000, 3)
        return out


def user_message(phase: str, stream: int, turn: int) -> str:
    """The user's text of a turn (the lean upstream's answer depends on it, so the direct and
    the relayed turn of the same key get the same answer, and different turns differ)."""
    return f"Benchmark {phase} stream {stream} turn {turn}: tell me something."


class Schedule:
    """When each turn of a load sub-phase may start (see the module docstring), perf_counter s."""

    def __init__(self, load: dict[str, Any], streams: int) -> None:
        self.n = streams
        self.gap = load["gap_s"]
        events = -(-load["tokens"] // load["tokens_per_event"])
        self.period = (
            load["ttft_ms"] / 1000 + (events - 1) * load["tokens_per_event"] / load["rate"] + self.gap
        )
        self.max_phase = load["max_phase_s"]
        self.t0 = 0.0
        self.in_flight = 0
        self.peak = 0
        self.stopped_early = False

    def begin(self) -> None:
        """Start the phase 0.2 s from now (t0) and reset the in-flight counters."""
        self.t0 = time.perf_counter() + 0.2
        self.in_flight = self.peak = 0
        self.stopped_early = False

    async def wait(self, stream: int, turn: int, previous_end: float | None) -> bool:
        """Sleep until the turn may start; False (at once) when it would start after the
        phase deadline (``max_phase_s``): an overloaded run ends instead of running for ever."""
        at = self.t0 + stream * self.period / self.n + turn * self.period
        if previous_end is not None:
            at = max(at, previous_end + self.gap)
        if at - self.t0 > self.max_phase:
            self.stopped_early = True
            return False
        delay = at - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        return True

    def started(self) -> None:
        """A turn started (counts turns in flight and their peak)."""
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)

    def ended(self) -> None:
        """A turn ended."""
        self.in_flight -= 1


# ---- direct -----------------------------------------------------------------------------------

#: Request path (after the base URL) of each API style.
PATHS = {
    "openai_chat": "/chat/completions",
    "anthropic_messages": "/messages",
    "openai_responses": "/responses",
}


class SSEText:
    """Incremental SSE parser keeping only the answer's text pieces of one API style (bytes in,
    str out): ``choices[].delta.content`` (``openai_chat``), ``content_block_delta`` /
    ``text_delta`` (``anthropic_messages``), ``response.output_text.delta``
    (``openai_responses``). Events end at a blank line; other events are skipped."""

    def __init__(self, style: str = "openai_chat") -> None:
        self.style = style
        self.buf = b""

    def _pieces(self, obj: dict[str, Any]) -> list[str]:
        if self.style == "openai_chat":
            return [
                c["delta"]["content"]
                for c in obj.get("choices") or ()
                if (c.get("delta") or {}).get("content")
            ]
        if self.style == "anthropic_messages":
            d = obj.get("delta") or {}
            if obj.get("type") == "content_block_delta" and d.get("type") == "text_delta":
                return [d["text"]] if d.get("text") else []
            return []
        if obj.get("type") == "response.output_text.delta" and obj.get("delta"):
            return [obj["delta"]]
        return []

    def feed(self, data: bytes) -> list[str]:
        """The text pieces completed by ``data``, in order."""
        self.buf += data
        pieces: list[str] = []
        while b"\n\n" in self.buf:
            event, self.buf = self.buf.split(b"\n\n", 1)
            for line in event.split(b"\n"):
                if not line.startswith(b"data: ") or line == b"data: [DONE]":
                    continue
                if self.style != "openai_chat" and b"_delta" not in line and b".delta" not in line:
                    continue
                pieces += self._pieces(json.loads(line[6:]))
        return pieces


def request_body(style: str, model: str, history: list[dict[str, str]], text: str) -> dict[str, Any]:
    """A streaming request of ``style`` (what the relay's adapter sends, minus extras)."""
    messages = [*history, {"role": "user", "content": text}]
    if style == "anthropic_messages":
        return {"model": model, "max_tokens": 32768, "messages": messages, "stream": True}
    if style == "openai_responses":
        return {"model": model, "input": messages, "stream": True}
    return {
        "model": model,
        "messages": messages,
        "stream": True,
        "stream_options": {"include_usage": True},
    }


def _record(t: Turn, pieces: list[str], now: float) -> None:
    """File text pieces received at ``now`` (perf_counter s) under turn ``t``."""
    for piece in pieces:
        if t.first is None:
            t.first = now
        t.events.append(now)
        t.text.append(piece)


class HttpxDirect:
    """Direct turns with one shared ``httpx.AsyncClient`` (``direct_client: "httpx"``)."""

    def __init__(self, plan: dict[str, Any], streams: int) -> None:
        n = streams + 10
        self.client = httpx.AsyncClient(
            limits=httpx.Limits(max_connections=n, max_keepalive_connections=n),
            timeout=httpx.Timeout(30.0),
        )
        self.style = plan["style"]
        self.url = plan["upstream_url"] + PATHS[self.style]

    async def turn(self, stream: int, model: str, t: Turn, history: list[dict[str, str]], text: str) -> None:
        """Stream one answer; fill ``t`` (times, text, status)."""
        parser = SSEText(self.style)
        body = request_body(self.style, model, history, text)
        t.sent = time.perf_counter()
        async with self.client.stream(
            "POST", self.url, json=body, headers={"Accept": "text/event-stream"}
        ) as resp:
            if resp.status_code != 200:
                t.status = f"http {resp.status_code}"
                return
            async for chunk in resp.aiter_raw():
                _record(t, parser.feed(chunk), time.perf_counter())
        t.end = time.perf_counter()
        t.status = "complete" if t.events else "empty"

    def drop(self, stream: int) -> None:
        """Nothing to drop (the pool handles broken connections)."""

    async def close(self) -> None:
        """Close the client's connections."""
        await self.client.aclose()


class _RawHTTP(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection reading a chunked SSE response in ``data_received``.

    The cheapest way to read thousands of SSE events per second in Python (no coroutine per
    chunk), so the baseline measures the upstream, not the client.
    """

    def __init__(self, style: str) -> None:
        self.style = style
        self.transport: asyncio.Transport | None = None
        self.closed = asyncio.get_running_loop().create_future()
        self._reset(None)

    def _reset(self, t: Turn | None) -> None:
        self.turn = t
        self.done: asyncio.Future[None] | None = (
            asyncio.get_running_loop().create_future() if t else None
        )
        self.buf = b""
        self.head = True
        self.chunk_left = -1  # -1: expecting a chunk-size line
        self.sse = SSEText(self.style)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)
        if self.done is not None and not self.done.done():
            self.done.set_exception(ConnectionError("connection closed mid-response"))

    def request(self, t: Turn, host: str, path: str, body: bytes) -> asyncio.Future[None]:
        """Send a POST with JSON ``body``; the future resolves when the response ends."""
        self._reset(t)
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Accept: text/event-stream\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode()
        t.sent = time.perf_counter()
        assert self.transport is not None
        self.transport.write(head + body)
        assert self.done is not None
        return self.done

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter()
        t = self.turn
        if t is None or self.done is None or self.done.done():
            return
        self.buf += data
        if self.head:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head, self.buf = self.buf[:end].decode("latin-1"), self.buf[end + 4 :]
            self.head = False
            status = head.split(" ", 2)[1]
            if status != "200" or "transfer-encoding: chunked" not in head.lower():
                t.status = f"http {status}"
                self.done.set_result(None)
                return
        while True:
            if self.chunk_left < 0:
                eol = self.buf.find(b"\r\n")
                if eol < 0:
                    return
                size = int(self.buf[:eol].split(b";")[0], 16)
                self.buf = self.buf[eol + 2 :]
                if size == 0:  # last chunk (no trailers)
                    t.end = now
                    t.status = "complete" if t.events else "empty"
                    self.done.set_result(None)
                    return
                self.chunk_left = size
            if len(self.buf) < self.chunk_left + 2:
                return
            payload, self.buf = self.buf[: self.chunk_left], self.buf[self.chunk_left + 2 :]
            self.chunk_left = -1
            _record(t, self.sse.feed(payload), now)


class RawDirect:
    """Direct turns over one keep-alive asyncio connection per stream (the default)."""

    def __init__(self, plan: dict[str, Any], streams: int = 0) -> None:
        parts = plan["upstream_url"].split("/", 3)  # http: '' host:port path
        self.host = parts[2]
        self.style = plan["style"]
        self.path = "/" + parts[3] + PATHS[self.style]
        self.conns: dict[int, _RawHTTP] = {}

    async def connect(self, stream: int) -> _RawHTTP:
        """The stream's connection (opened when missing or closed)."""
        conn = self.conns.get(stream)
        if conn is None or conn.closed.done():
            host, port = self.host.rsplit(":", 1)
            _, conn = await asyncio.get_running_loop().create_connection(
                lambda: _RawHTTP(self.style), host, int(port)
            )
            self.conns[stream] = conn
        return conn

    async def turn(self, stream: int, model: str, t: Turn, history: list[dict[str, str]], text: str) -> None:
        """Stream one answer; fill ``t`` (times, text, status)."""
        body = json.dumps(request_body(self.style, model, history, text)).encode()
        conn = await self.connect(stream)
        await conn.request(t, self.host, self.path, body)

    def drop(self, stream: int) -> None:
        """Close and forget a stream's connection (after a failed turn)."""
        conn = self.conns.pop(stream, None)
        if conn is not None and conn.transport is not None:
            conn.transport.close()

    async def close(self) -> None:
        """Close every stream's connection."""
        for conn in self.conns.values():
            if conn.transport is not None:
                conn.transport.close()


def direct_client(plan: dict[str, Any], streams: int) -> RawDirect | HttpxDirect:
    """The direct client the plan asks for."""
    return HttpxDirect(plan, streams) if plan["direct_client"] == "httpx" else RawDirect(plan, streams)


async def direct_turn(
    client: RawDirect | HttpxDirect, plan: dict[str, Any], stream: int, model: str,
    t: Turn, history: list[dict[str, str]], text: str,
) -> None:
    """One direct turn with the turn timeout; a failure is recorded in ``t``, not raised."""
    try:
        await asyncio.wait_for(client.turn(stream, model, t, history, text), plan["turn_timeout_s"])
    except Exception as exc:
        t.status = f"error: {type(exc).__name__}"
        client.drop(stream)
    t.end = t.end or time.perf_counter()


# ---- relay ------------------------------------------------------------------------------------


class Socket:
    """One websocket client on one conversation; a reader task files frames under the turn."""

    def __init__(self, ws: ClientConnection, stream: int, spec: dict[str, Any]) -> None:
        self.ws = ws
        self.stream = stream
        self.spec = spec
        self.current: Turn | None = None
        self.stray_frames = 0
        self.stray_bytes = 0
        self.reader = asyncio.get_running_loop().create_task(self._read())

    async def _read(self) -> None:
        try:
            async for msg in self.ws:
                now = time.perf_counter()
                if isinstance(msg, bytes):
                    msg = msg.decode()
                self._frame(msg, now)
        except Exception:  # closed: the turns waiting on it time out and are recorded
            pass

    def _frame(self, msg: str, now: float) -> None:
        t = self.current
        nbytes = len(msg.encode())
        if t is None:
            self.stray_frames += 1
            self.stray_bytes += nbytes
            return
        t.frames += 1
        t.bytes += nbytes
        f = classify(msg)
        if f.deltas:
            t.delta_frames += 1
            t.delta_bytes += nbytes
            got_text = False
            for d in f.deltas:
                if d["kind"] != "text":
                    continue
                if d["start"] != t.text_len:
                    t.offset_errors += 1
                t.text.append(d["text"])
                t.delta_text_bytes += len(d["text"].encode())
                t.text_len = d["end"]
                got_text = True
            if got_text:
                if t.first is None:
                    t.first = now
                t.events.append(now)
        if f.started and t.announced is None:
            t.announced = now
        if f.status:
            t.status, t.end = f.status, now
            self.current = None
            t.done.set()
            return
        if f.notice and is_refusal(f.notice):
            t.status, t.end = f"notice: {f.notice[:80]}", now
            self.current = None
            t.done.set()

    async def send(self, model: str, t: Turn, text: str) -> None:
        """Send one ``send`` frame (``t.sent`` is when it leaves)."""
        frame = {
            "action": "send",
            "turn_id": str(uuid.uuid4()),
            "content": text,
            "endpoint_id": str(self.spec["endpoint_id"]),
            "model": model,
            "system_prompt": "",
        }
        data = json.dumps(frame)
        self.current = t
        t.sent = time.perf_counter()
        await self.ws.send(data)

    async def wait(self, t: Turn, limit_s: float) -> None:
        """Wait for the turn's final frame (or a refusal, or the timeout)."""
        try:
            await asyncio.wait_for(t.done.wait(), limit_s)
        except TimeoutError:
            t.status = "timeout"
            t.end = time.perf_counter()
            self.current = None

    async def turn(self, plan: dict[str, Any], model: str, t: Turn, text: str) -> None:
        """Send one turn and wait for its end."""
        await self.send(model, t, text)
        await self.wait(t, plan["turn_timeout_s"])


async def open_socket(plan: dict[str, Any], stream: int, spec: dict[str, Any]) -> Socket:
    """Open the websocket of one conversation, logged in with its session cookie."""
    url = f"ws://127.0.0.1:{plan['server_port']}/ws/c/{spec['conversation_id']}/"
    ws = await connect(
        url,
        additional_headers={
            "Cookie": f"sessionid={spec['session']}",
            "Origin": f"http://127.0.0.1:{plan['server_port']}",
        },
        compression=None,  # daphne (autobahn) negotiates no permessage-deflate anyway
        max_size=None,
        ping_interval=None,
        open_timeout=60,
    )
    return Socket(ws, stream, spec)


async def open_sockets(plan: dict[str, Any], specs: list[dict[str, Any]]) -> list[Socket]:
    """One socket per conversation spec, at most 20 handshakes at a time."""
    sem = asyncio.Semaphore(20)

    async def opened(i: int, spec: dict[str, Any]) -> Socket:
        async with sem:
            return await open_socket(plan, i, spec)

    return list(await asyncio.gather(*(opened(i, s) for i, s in enumerate(specs))))


async def close_sockets(sockets: list[Socket]) -> None:
    """Close every socket (errors ignored)."""
    for s in sockets:
        try:
            await s.ws.close()
        except Exception:
            pass


async def control(plan: dict[str, Any], method: str, path: str) -> dict[str, Any]:
    """Call one of the server's ``/_bench/`` routes (see :mod:`bench.asgi`)."""
    async with httpx.AsyncClient(timeout=30) as c:
        r = await c.request(method, f"http://127.0.0.1:{plan['server_port']}{path}")
        r.raise_for_status()
        return r.json()


async def warmup(plan: dict[str, Any]) -> str:
    """One short relayed turn on the spare conversation (imports, template caches, the server's
    HTTP client), so no phase pays one-time costs. Returns its status."""
    sock = await open_socket(plan, -1, plan["warmup"])
    t = Turn(-1, 0)
    await sock.turn(plan, plan["warmup_model"], t, user_message("warmup", -1, 0))
    await sock.ws.close()
    await asyncio.sleep(0.5)
    return t.status


# ---- phase: sequential --------------------------------------------------------------------------


async def sequential_phase(plan: dict[str, Any]) -> dict[str, Any]:
    """Interleaved pairs (direct, relayed) on one conversation; see the module docstring."""
    cfg = plan["sequential"]
    client = RawDirect(plan)
    sock = await open_socket(plan, 0, cfg["spec"])
    history: list[dict[str, str]] = []
    pairs: list[dict[str, Any]] = []
    meter = Meter(plan)
    for k in range(cfg["warm_pairs"] + cfg["pairs"]):
        if k == cfg["warm_pairs"]:
            await meter.start()
        text = user_message("sequential", 0, k)
        d = Turn(0, k)
        await direct_turn(client, plan, 0, cfg["model"], d, history, text)
        await asyncio.sleep(cfg["gap_s"])
        r = Turn(0, k)
        await sock.turn(plan, cfg["model"], r, text)
        await asyncio.sleep(cfg["gap_s"])
        history += [
            {"role": "user", "content": text},
            {"role": "assistant", "content": "".join(d.text)},
        ]
        if k >= cfg["warm_pairs"]:
            pairs.append({"direct": d.as_dict(), "relay": r.as_dict()})
    result = {"pairs": pairs, "meter": await meter.stop()}
    await sock.ws.close()
    await client.close()
    return result


# ---- load runs ------------------------------------------------------------------------------------


async def direct_load(plan: dict[str, Any], load: dict[str, Any], streams: int, phase: str) -> dict[str, Any]:
    """The direct sub-phase of a load run: ``streams`` streams × ``turns`` on the schedule."""
    sched = Schedule(load, streams)
    turns: list[Turn] = []
    client = direct_client(plan, streams)

    async def stream(i: int) -> None:
        history: list[dict[str, str]] = []
        end = None
        for j in range(load["turns"]):
            if not await sched.wait(i, j, end):
                return
            t = Turn(i, j)
            turns.append(t)
            sched.started()
            text = user_message(phase, i, j)
            await direct_turn(client, plan, i, load["model"], t, history, text)
            sched.ended()
            end = t.end
            history += [
                {"role": "user", "content": text},
                {"role": "assistant", "content": "".join(t.text)},
            ]

    if isinstance(client, RawDirect):  # connections up front, as the relay's pool has them
        await asyncio.gather(*(client.connect(i) for i in range(streams)))
    lag, meter = LagMonitor(), Meter(plan)
    await meter.start()
    lag.start()
    sched.begin()
    await asyncio.gather(*(stream(i) for i in range(streams)))
    lag_p99 = lag.stop()
    result = {
        "turns": [t.as_dict() for t in turns],
        "duration_s": time.perf_counter() - sched.t0,
        "meter": await meter.stop(),
        "loop_lag_ms_p99": lag_p99,
        "peak_in_flight": sched.peak,
        "client": plan["direct_client"],
        "stopped_early": sched.stopped_early,
    }
    await client.close()
    return result


async def relay_load(
    plan: dict[str, Any], load: dict[str, Any], sockets: list[Socket], phase: str,
    *, sample_rss: bool = False,
) -> dict[str, Any]:
    """The relay sub-phase of a load run on open ``sockets`` (one stream each)."""
    pid = plan["server_pid"]
    sched = Schedule(load, len(sockets))
    turns: list[Turn] = []
    samples: list[tuple[float, int, int]] = []  # (s since start, VmRSS kB, turns in flight)

    async def sampler() -> None:
        while True:
            samples.append((time.perf_counter() - sched.t0, rss_kb(pid), sched.in_flight))
            await asyncio.sleep(0.1)

    async def stream(sock: Socket, i: int) -> None:
        end = None
        for j in range(load["turns"]):
            if not await sched.wait(i, j, end):
                return
            t = Turn(i, j)
            turns.append(t)
            sched.started()
            await sock.turn(plan, load["model"], t, user_message(phase, i, j))
            sched.ended()
            end = t.end

    spy = None
    if sample_rss:
        await control(plan, "POST", "/_bench/reset")
        if plan.get("py_spy"):  # sampling profiler of the whole server process (all threads)
            spy = await asyncio.create_subprocess_exec(
                plan["py_spy"], "record", "-p", str(pid), "-f", "raw", "-r", "100", "-t",
                "-o", plan["py_spy_out"],
                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
            )
            await asyncio.sleep(1.0)  # let py-spy attach
        elif plan.get("profile"):
            await control(plan, "POST", "/_bench/profile/start")
    lag, meter = LagMonitor(), Meter(plan)
    threads0 = thread_cpu_seconds(pid)
    await meter.start()
    lag.start()
    sched.begin()
    sample_task = asyncio.get_running_loop().create_task(sampler()) if sample_rss else None
    await asyncio.gather(*(stream(s, i) for i, s in enumerate(sockets)))
    lag_p99 = lag.stop()
    duration = time.perf_counter() - sched.t0
    m = await meter.stop()
    threads = {k: round(v - threads0.get(k, 0.0), 2) for k, v in thread_cpu_seconds(pid).items()}
    result: dict[str, Any] = {
        "turns": [t.as_dict() for t in turns],
        "duration_s": duration,
        "meter": m,
        "server_thread_cpu_s": {k: v for k, v in threads.items() if v > 0},
        "loop_lag_ms_p99": lag_p99,
        "peak_in_flight": sched.peak,
        "stopped_early": sched.stopped_early,
        "stray_frames": sum(s.stray_frames for s in sockets),
        "stray_bytes": sum(s.stray_bytes for s in sockets),
    }
    if sample_task is not None:
        sample_task.cancel()
        if spy is not None:
            spy.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
            await asyncio.wait_for(spy.wait(), 60)
        elif plan.get("profile"):
            await control(plan, "POST", "/_bench/profile/stop")
        result["writes"] = await control(plan, "GET", "/_bench/writes")
        busy = [rss for _, rss, n in samples if n >= max(1, sched.peak * 0.9)]
        result["rss_samples"] = [(round(s, 2), r, n) for s, r, n in samples[::5]]
        result["rss_peak_active"] = max(busy) if busy else max((r for _, r, _ in samples), default=0)
    return result


async def idle_sockets(plan: dict[str, Any]) -> dict[str, int]:
    """Server VmRSS before and with the relay phase's N sockets open and idle for
    ``settle_s`` (then closed). Run on the fresh server right after the warm-up turn, so no
    earlier phase's freed heap absorbs the sockets."""
    pid = plan["server_pid"]
    before = rss_kb(pid)
    sockets = await open_sockets(plan, plan["relay"]["specs"])
    await asyncio.sleep(plan["settle_s"])
    idle = rss_kb(pid)
    await close_sockets(sockets)
    return {"before_idle": before, "idle": idle, "sockets": len(sockets)}


async def relay_phase(plan: dict[str, Any]) -> dict[str, Any]:
    """The 100-stream phase: direct, warm-up, sockets, relay (see the module docstring)."""
    load = plan["relay"]
    direct = await direct_load(plan, load, load["streams"], "relay")
    warm = await warmup(plan)
    pid = plan["server_pid"]
    sockets = await open_sockets(plan, load["specs"])
    await asyncio.sleep(plan["settle_s"])
    rss_open = rss_kb(pid)
    relay = await relay_load(plan, load, sockets, "relay", sample_rss=True)
    relay["warmup_status"] = warm
    relay["rss_kb"] = {
        **plan.get("_idle_rss", {}),
        "idle_at_relay": rss_open,
        "peak_active": relay.pop("rss_peak_active") or rss_open,
        "after": rss_kb(pid),
    }
    await close_sockets(sockets)
    return {"direct": direct, "relay": relay}


async def knee_phase(plan: dict[str, Any]) -> dict[str, Any]:
    """Load runs at each stream count, stopping after the first overloaded one."""
    cfg = plan["knee"]
    steps: list[dict[str, Any]] = []
    stopped_after = None
    for n in cfg["steps"]:
        specs = cfg["specs"][str(n)]
        direct = await direct_load(plan, cfg, n, f"knee{n}")
        sockets = await open_sockets(plan, specs)
        await asyncio.sleep(1.0)
        relay = await relay_load(plan, cfg, sockets, f"knee{n}")
        await close_sockets(sockets)
        step = {"streams": n, "direct": direct, "relay": relay}
        steps.append(step)
        summary = stats.load_summary(step, {**cfg["params"], "streams": n})
        why = stats.overloaded(summary)
        print(
            f"knee {n:>3} streams: added TTFT p50/p99 {summary['figures']['added_ttft_ms_p50']}/"
            f"{summary['figures']['added_ttft_ms_p99']} ms, stalls {summary['figures']['stalls']}, "
            f"server {summary['details']['cpu_share']['relay']['server_share']} core"
            + (f"; overloaded: {', '.join(why)}" if why else ""),
            file=sys.stderr, flush=True,
        )
        if why:
            stopped_after = n
            break
        await asyncio.sleep(1.0)
    return {"steps": steps, "stopped_after": stopped_after}


# ---- phase: fan-out -------------------------------------------------------------------------------


async def fanout_phase(plan: dict[str, Any]) -> dict[str, Any]:
    """One user's burst: every conversation's ``send`` at once (direct burst first)."""
    cfg = plan["fanout"]
    n = len(cfg["specs"])
    # The same burst straight to the upstream, for reference.
    client = RawDirect(plan)
    await asyncio.gather(*(client.connect(i) for i in range(n)))
    dturns = [Turn(i, 0) for i in range(n)]
    meter = Meter(plan)
    await meter.start()
    origin = time.perf_counter()
    await asyncio.gather(*(
        direct_turn(client, plan, i, cfg["model"], t, [], user_message("fanout", i, 0))
        for i, t in enumerate(dturns)
    ))
    direct = {"turns": [t.as_dict(origin) for t in dturns], "meter": await meter.stop()}
    await client.close()
    await asyncio.sleep(1.0)

    sockets = await open_sockets(plan, cfg["specs"])
    await asyncio.sleep(plan["settle_s"])
    rturns = [Turn(i, 0) for i in range(n)]
    meter = Meter(plan)
    await meter.start()
    origin = time.perf_counter()
    for s, t in zip(sockets, rturns, strict=True):  # back to back: the burst
        await s.send(cfg["model"], t, user_message("fanout", t.stream, 0))
    await asyncio.gather(*(s.wait(t, plan["turn_timeout_s"]) for s, t in zip(sockets, rturns, strict=True)))
    relay = {"turns": [t.as_dict(origin) for t in rturns], "meter": await meter.stop()}
    await close_sockets(sockets)
    return {"direct": direct, "relay": relay}


# ---- phase: compare -------------------------------------------------------------------------------

_LANE_RE = re.compile(r'<div hx-swap-oob="beforeend:#lt-(\d+)">')
_ANSWER_RE = re.compile(r'<article id="m-([0-9a-f-]+)" class="msg msg-assistant')
_FINAL_RE = re.compile(r'data-mid="([0-9a-f-]+)" data-status="(complete|error|stopped|interrupted)" data-final="1"')


async def compare_phase(plan: dict[str, Any]) -> dict[str, Any]:
    """One comparison of ``lanes`` lanes: one ``send`` with ``runs`` repeat runs per lane over
    ``/ws/compare/<id>/``. Records, in ms since the send left, when each answer's skeleton
    arrived and its first answer delta, by lane and run (the turn-started frame lists each
    lane's answers in run order), until every answer's final frame or the turn timeout."""
    cfg = plan["compare"]
    spec = cfg["spec"]
    url = f"ws://127.0.0.1:{plan['server_port']}/ws/compare/{spec['conversation_id']}/"
    ws = await connect(url, additional_headers={
        "Cookie": f"sessionid={spec['session']}", "Origin": f"http://127.0.0.1:{plan['server_port']}"},
        compression=None, max_size=None, ping_interval=None, open_timeout=60)
    await asyncio.sleep(plan["settle_s"])
    total = cfg["lanes"] * cfg["runs"]
    answers: dict[str, dict[str, Any]] = {}  # key (10 hex) -> {lane, run, first_ms, status}
    finals: dict[str, str] = {}
    done = asyncio.Event()
    sent = 0.0
    notices: list[str] = []

    def ms(t: float) -> float:
        return round((t - sent) * 1000.0, 2)

    async def read() -> None:
        async for msg in ws:
            now = time.perf_counter()
            msg = msg.decode() if isinstance(msg, bytes) else msg
            if "beforeend:#lt-" in msg:
                parts = _LANE_RE.split(msg)
                for lane_id, body in zip(parts[1::2], parts[2::2], strict=True):
                    for run, mid in enumerate(_ANSWER_RE.findall(body)):
                        answers[mid.replace("-", "")[:10]] = {"lane": int(lane_id), "run": run, "announce_ms": ms(now),
                                                              "first_ms": None, "status": ""}
            f = classify(msg)
            for d in f.deltas:
                a = answers.get(d["k"])
                if a is not None and d["kind"] == "text" and a["first_ms"] is None:
                    a["first_ms"] = ms(now)
            for mid, status in _FINAL_RE.findall(msg):
                finals[mid] = status
                a = answers.get(mid.replace("-", "")[:10])
                if a is not None:
                    a["status"], a["end_ms"] = status, ms(now)
            if f.notice and is_refusal(f.notice):
                notices.append(f.notice[:200])
                done.set()
            if len(finals) >= total:
                done.set()

    meter = Meter(plan)
    await meter.start()
    reader = asyncio.get_running_loop().create_task(read())
    frame = {"action": "send", "turn_id": str(uuid.uuid4()), "runs": cfg["runs"],
             "content": user_message("compare", 0, 0),
             "lanes": [{"lane_id": lid, "endpoint_id": spec["endpoint_id"], "model": cfg["model"], "system_prompt": ""}
                       for lid in spec["lane_ids"]]}
    sent = time.perf_counter()
    await ws.send(json.dumps(frame))
    try:
        await asyncio.wait_for(done.wait(), plan["turn_timeout_s"] * max(1, cfg["runs"]))
    except TimeoutError:
        pass
    result = {"answers": list(answers.values()), "expected": total, "notices": notices,
              "wall_ms": ms(time.perf_counter()), "meter": await meter.stop()}
    reader.cancel()
    try:
        await ws.close()
    except Exception:
        pass
    return result


PHASES = {
    "compare": compare_phase,
    "sequential": sequential_phase,
    "relay": relay_phase,
    "knee": knee_phase,
    "fanout": fanout_phase,
}


async def run(plan: dict[str, Any]) -> dict[str, Any]:
    """The plan's phases in order (one warm-up turn first); the raw result for
    :func:`bench.stats.summarize`."""
    out: dict[str, Any] = {"warmup_status": await warmup(plan), "phase_wall_s": {}, "loadavg": {}}
    if "relay" in plan["phases"]:
        await asyncio.sleep(1.0)
        plan["_idle_rss"] = out["idle_rss_kb"] = await idle_sockets(plan)
    for name in plan["phases"]:
        if name not in PHASES:
            continue
        t0, la = time.perf_counter(), loadavg()
        print(f"phase {name} …", file=sys.stderr, flush=True)
        out[name] = await PHASES[name](plan)
        out["phase_wall_s"][name] = round(time.perf_counter() - t0, 1)
        out["loadavg"][name] = [la, loadavg()]
        await asyncio.sleep(1.0)
    return out


def main(argv: list[str] | None = None) -> None:
    """``python -m bench.client PLAN.json RESULT.json``."""
    argv = sys.argv[1:] if argv is None else argv
    with open(argv[0]) as f:
        plan = json.load(f)
    result = asyncio.run(run(plan))
    with open(argv[1], "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
