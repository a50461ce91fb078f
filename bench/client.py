"""The benchmark's load generator: ``python -m bench.client PLAN.json RESULT.json``.

Runs in its own process (never inside the server or the simulator) and does, in order:

1. **direct**: N concurrent streams straight to the simulator, each running ``turns`` turns on
   the schedule below (the baseline), read by :class:`RawDirect` (a minimal asyncio HTTP/1.1
   reader, the default) or :class:`HttpxDirect` (``direct_client: "httpx"``);
2. **warm-up**: one relayed turn on a spare conversation (imports, template caches, the
   server's HTTP client), so the memory figures below do not include one-time costs;
3. **idle**: server VmRSS, then N websockets opened (one per conversation) and left idle for
   ``settle_s``, then VmRSS again;
4. **relay**: the same schedule through those N websockets (``send`` frames), with the server's
   CPU time (``/proc/<pid>/stat``), VmRSS samples every 100 ms and its DB write counter
   (``bench.asgi``) around it.

Schedule (both phases): stream ``i``'s turn ``j`` starts at ``i × period / N + j × period``
seconds after the phase starts, or ``gap_s`` after its previous turn ended if that is later;
``period`` = TTFT + (events − 1) × event interval + ``gap_s``. So about N turns stream at once
and turn starts are spread evenly, as with N people chatting.

Every time is ``time.perf_counter()`` in this process; records keep ms relative to the
request (or ``send`` frame) leaving this process. The raw records go to ``RESULT.json`` for
:mod:`bench.stats`.

May import: the standard library, httpx, websockets, ``tests.helpers`` (delta frame parsing).
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

from tests.helpers import deltas

FINAL_RE = re.compile(
    r'id="m-(?P<mid>[0-9a-f-]+)" class="msg msg-assistant status-(?P<status>complete|error|stopped|interrupted)'
)
NOTICE_RE = re.compile(r'<div id="notice"[^>]*>(?P<text>.*?)</div>', re.S)
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


def rss_kb(pid: int) -> int:
    """VmRSS of process ``pid`` in kB (1024 bytes), from ``/proc/<pid>/status``."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


def own_cpu_seconds() -> float:
    """This process's user + system CPU time, seconds."""
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
        xs = sorted(self.samples)
        return xs[int(0.99 * (len(xs) - 1))] if xs else float("nan")


# ---- records --------------------------------------------------------------------------------


@dataclass
class Turn:
    """One turn as the client saw it. Times are perf_counter seconds until :meth:`as_dict`."""

    stream: int
    turn: int
    sent: float = 0.0
    first: float | None = None
    announced: float | None = None  # relay: the turn-started frame (rows written, turn task made)
    events: list[float] = field(
        default_factory=list
    )  # token events (direct) / delta frames (relay)
    text: list[str] = field(default_factory=list)
    text_len: int = 0  # code points received so far (relay offsets are code points)
    frames: int = 0
    bytes: int = 0
    status: str = "pending"
    end: float | None = None
    offset_errors: int = 0
    done: asyncio.Event = field(default_factory=asyncio.Event)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready record: times in ms since ``sent``, sizes in bytes, text as a SHA-256 prefix."""
        text = "".join(self.text)
        ms = lambda t: round((t - self.sent) * 1000, 3)  # noqa: E731
        return {
            "stream": self.stream,
            "turn": self.turn,
            "status": self.status,
            "ttft_ms": ms(self.first) if self.first is not None else None,
            "announce_ms": ms(self.announced) if self.announced is not None else None,
            "event_ms": [ms(t) for t in self.events],
            "duration_ms": ms(self.end) if self.end is not None else None,
            "frames": self.frames,
            "bytes": self.bytes,
            "text_bytes": len(text.encode()),
            "text_sha": hashlib.sha256(text.encode()).hexdigest()[:16],
            "offset_errors": self.offset_errors,
        }


def user_message(stream: int, turn: int) -> str:
    """The user's text of a turn (the simulator echoes part of it, so both paths match)."""
    return f"Benchmark stream {stream} turn {turn}: tell me something."


class Schedule:
    """When each turn may start (see the module docstring), in perf_counter seconds."""

    def __init__(self, plan: dict[str, Any]) -> None:
        self.n = plan["streams"]
        self.gap = plan["gap_s"]
        events = -(-plan["tokens"] // plan["tokens_per_event"])
        self.period = (
            plan["ttft_ms"] / 1000
            + (events - 1) * plan["tokens_per_event"] / plan["rate"]
            + self.gap
        )
        self.max_phase = plan["max_phase_s"]
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


# ---- phase 1: direct ------------------------------------------------------------------------


class SSEContent:
    """Incremental SSE parser keeping only ``choices[].delta.content`` pieces (bytes in, str out).

    Events end at a blank line (``\\n\\n``; the simulator sends LF line ends by default);
    ``data: [DONE]`` and comment lines are skipped.
    """

    def __init__(self) -> None:
        self.buf = b""

    def feed(self, data: bytes) -> list[str]:
        """The content pieces completed by ``data``, in order."""
        self.buf += data
        pieces: list[str] = []
        while b"\n\n" in self.buf:
            event, self.buf = self.buf.split(b"\n\n", 1)
            for line in event.split(b"\n"):
                if not line.startswith(b"data: ") or line == b"data: [DONE]":
                    continue
                for choice in json.loads(line[6:]).get("choices") or ():
                    piece = (choice.get("delta") or {}).get("content")
                    if piece:
                        pieces.append(piece)
        return pieces


def request_body(plan: dict[str, Any], t: Turn, history: list[dict[str, str]]) -> dict[str, Any]:
    """The chat completion request of turn ``t`` (what the relay's adapter sends, minus headers)."""
    return {
        "model": plan["model"],
        "messages": [*history, {"role": "user", "content": user_message(t.stream, t.turn)}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }


def _record(t: Turn, pieces: list[str], now: float) -> None:
    """File content pieces received at ``now`` (perf_counter s) under turn ``t``."""
    for piece in pieces:
        if t.first is None:
            t.first = now
        t.events.append(now)
        t.text.append(piece)


class HttpxDirect:
    """Direct turns with one shared ``httpx.AsyncClient`` (``--direct-client httpx``)."""

    def __init__(self, plan: dict[str, Any]) -> None:
        n = plan["streams"] + 10
        self.client = httpx.AsyncClient(
            limits=httpx.Limits(max_connections=n, max_keepalive_connections=n),
            timeout=httpx.Timeout(30.0),
        )
        self.url = plan["sim_url"] + "/chat/completions"

    async def turn(
        self, stream: int, plan: dict[str, Any], t: Turn, history: list[dict[str, str]]
    ) -> None:
        """Stream one chat completion; fill ``t`` (times, text, status)."""
        parser = SSEContent()
        body = request_body(plan, t, history)
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

    async def close(self) -> None:
        """Close the client's connections."""
        await self.client.aclose()


class _RawHTTP(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection reading a chunked SSE response in ``data_received``.

    The cheapest way to read thousands of SSE events per second in Python (no coroutine per
    chunk), so the baseline measures the simulator, not the client.
    """

    def __init__(self) -> None:
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
        self.sse = SSEContent()

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
                if size == 0:  # last chunk (no trailers from daphne)
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
    """Direct turns over one keep-alive asyncio connection per stream (``--direct-client raw``)."""

    def __init__(self, plan: dict[str, Any]) -> None:
        parts = plan["sim_url"].split("/", 3)  # http: '' host:port path
        self.host = parts[2]
        self.path = "/" + parts[3] + "/chat/completions"
        self.conns: dict[int, _RawHTTP] = {}

    async def _conn(self, stream: int) -> _RawHTTP:
        conn = self.conns.get(stream)
        if conn is None or conn.closed.done():
            host, port = self.host.rsplit(":", 1)
            _, conn = await asyncio.get_running_loop().create_connection(_RawHTTP, host, int(port))
            self.conns[stream] = conn
        return conn

    async def turn(
        self, stream: int, plan: dict[str, Any], t: Turn, history: list[dict[str, str]]
    ) -> None:
        """Stream one chat completion; fill ``t`` (times, text, status)."""
        body = json.dumps(request_body(plan, t, history)).encode()
        conn = await self._conn(stream)
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


async def direct_phase(plan: dict[str, Any]) -> dict[str, Any]:
    """Phase 1: the baseline, straight to the simulator."""
    sched = Schedule(plan)
    turns: list[Turn] = []
    client: RawDirect | HttpxDirect = (
        HttpxDirect(plan) if plan["direct_client"] == "httpx" else RawDirect(plan)
    )

    async def stream(i: int) -> None:
        history: list[dict[str, str]] = []
        end = None
        for j in range(plan["turns"]):
            if not await sched.wait(i, j, end):
                return
            t = Turn(i, j)
            turns.append(t)
            sched.started()
            try:
                await asyncio.wait_for(client.turn(i, plan, t, history), plan["turn_timeout_s"])
            except Exception as exc:  # a failed turn is recorded, not fatal
                t.status = f"error: {type(exc).__name__}"
                if isinstance(client, RawDirect):
                    client.drop(i)
            sched.ended()
            end = t.end = t.end or time.perf_counter()
            history += [
                {"role": "user", "content": user_message(i, j)},
                {"role": "assistant", "content": "".join(t.text)},
            ]

    lag = LagMonitor()
    await client.turn(0, {**plan, "model": plan["warmup_model"]}, Turn(-1, 0), [])  # warm-up
    cpu0, sim0, me0, t0 = (
        cpu_seconds(plan["server_pid"]),
        cpu_seconds(plan["sim_pid"]),
        own_cpu_seconds(),
        time.perf_counter(),
    )
    lag.start()
    sched.begin()
    await asyncio.gather(*(stream(i) for i in range(plan["streams"])))
    lag_p99 = lag.stop()
    duration = time.perf_counter() - t0
    result = {
        "turns": [t.as_dict() for t in turns],
        "duration_s": duration,
        "server_cpu_s": cpu_seconds(plan["server_pid"]) - cpu0,
        "sim_cpu_s": cpu_seconds(plan["sim_pid"]) - sim0,
        "client_cpu_s": own_cpu_seconds() - me0,
        "loop_lag_ms_p99": lag_p99,
        "peak_in_flight": sched.peak,
        "client": plan["direct_client"],
        "stopped_early": sched.stopped_early,
    }
    await client.close()
    return result


# ---- phases 2-4: the relay ------------------------------------------------------------------


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
        if 'data-start="' in msg:
            for d in deltas([msg]):
                if d["kind"] != "text":
                    continue
                if d["start"] != t.text_len:
                    t.offset_errors += 1
                t.text.append(d["text"])
                t.text_len = d["end"]
            if t.first is None:
                t.first = now
            t.events.append(now)
            return
        if t.announced is None and 'hx-swap-oob="beforeend:#thread"' in msg:
            t.announced = now
            return
        m = FINAL_RE.search(msg)
        if m and 'hx-swap-oob="true"' in msg:
            t.status, t.end = m["status"], now
            self.current = None
            t.done.set()
            return
        n = NOTICE_RE.search(msg)
        # A refusal ("busy", "wait for the answer") ends the turn; another tab's news does not.
        if n and "An answer in" not in n["text"]:
            t.status, t.end = f"notice: {n['text'][:80]}", now
            self.current = None
            t.done.set()

    async def turn(self, plan: dict[str, Any], t: Turn) -> None:
        """Send one ``send`` frame and wait for the final frame (or a refusal, or the timeout)."""
        frame = {
            "action": "send",
            "turn_id": str(uuid.uuid4()),
            "content": user_message(t.stream, t.turn),
            "endpoint_id": str(self.spec["endpoint_id"]),
            "model": plan["model"],
            "system_prompt": "",
        }
        self.current = t
        t.sent = time.perf_counter()
        await self.ws.send(json.dumps(frame))
        try:
            await asyncio.wait_for(t.done.wait(), plan["turn_timeout_s"])
        except TimeoutError:
            t.status = "timeout"
            t.end = time.perf_counter()
            self.current = None


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


async def control(plan: dict[str, Any], method: str, path: str) -> dict[str, Any]:
    """Call one of the server's ``/_bench/`` routes (see :mod:`bench.asgi`)."""
    async with httpx.AsyncClient(timeout=30) as c:
        r = await c.request(method, f"http://127.0.0.1:{plan['server_port']}{path}")
        r.raise_for_status()
        return r.json()


async def relay_phases(plan: dict[str, Any]) -> dict[str, Any]:
    """Phases 2–4: warm-up, idle sockets, relayed turns."""
    pid = plan["server_pid"]
    # 2. Warm-up: one short turn on a spare conversation.
    warm = await open_socket(plan, -1, plan["warmup"])
    wt = Turn(-1, 0)
    await warm.turn({**plan, "model": plan["warmup_model"]}, wt)
    await warm.ws.close()
    await asyncio.sleep(1.0)

    # 3. Idle sockets.
    rss_before = rss_kb(pid)
    sem = asyncio.Semaphore(20)

    async def opened(i: int, spec: dict[str, Any]) -> Socket:
        async with sem:
            return await open_socket(plan, i, spec)

    sockets = await asyncio.gather(*(opened(i, s) for i, s in enumerate(plan["streams_spec"])))
    await asyncio.sleep(plan["settle_s"])
    rss_idle = rss_kb(pid)

    # 4. Relayed turns.
    sched = Schedule(plan)
    turns: list[Turn] = []
    samples: list[tuple[float, int, int]] = []  # (s since start, VmRSS kB, turns in flight)

    async def sampler() -> None:
        while True:
            samples.append((time.perf_counter() - t0, rss_kb(pid), sched.in_flight))
            await asyncio.sleep(0.1)

    async def stream(sock: Socket, i: int) -> None:
        end = None
        for j in range(plan["turns"]):
            if not await sched.wait(i, j, end):
                return
            t = Turn(i, j)
            turns.append(t)
            sched.started()
            await sock.turn(plan, t)
            sched.ended()
            end = t.end

    await control(plan, "POST", "/_bench/reset")
    spy = None
    if plan.get("py_spy"):  # sampling profiler of the whole server process (all threads)
        spy = await asyncio.create_subprocess_exec(
            plan["py_spy"],
            "record",
            "-p",
            str(pid),
            "-f",
            "raw",
            "-r",
            "100",
            "-t",
            "-o",
            plan["py_spy_out"],
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        await asyncio.sleep(1.0)  # let py-spy attach
    elif plan.get("profile"):
        await control(plan, "POST", "/_bench/profile/start")
    lag = LagMonitor()
    threads0 = thread_cpu_seconds(pid)
    cpu0, sim0, me0, t0 = (
        cpu_seconds(pid),
        cpu_seconds(plan["sim_pid"]),
        own_cpu_seconds(),
        time.perf_counter(),
    )
    sample_task = asyncio.get_running_loop().create_task(sampler())
    lag.start()
    sched.begin()
    await asyncio.gather(*(stream(s, i) for i, s in enumerate(sockets)))
    lag_p99 = lag.stop()
    duration = time.perf_counter() - t0
    cpu = cpu_seconds(pid) - cpu0
    threads = {k: round(v - threads0.get(k, 0.0), 2) for k, v in thread_cpu_seconds(pid).items()}
    sim_cpu = cpu_seconds(plan["sim_pid"]) - sim0
    me = own_cpu_seconds() - me0
    sample_task.cancel()
    if spy is not None:
        spy.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
        await asyncio.wait_for(spy.wait(), 60)
    elif plan.get("profile"):
        await control(plan, "POST", "/_bench/profile/stop")
    writes = await control(plan, "GET", "/_bench/writes")
    for s in sockets:
        await s.ws.close()
    busy = [rss for _, rss, inflight in samples if inflight >= max(1, sched.peak * 0.9)]
    return {
        "turns": [t.as_dict() for t in turns],
        "warmup_status": wt.status,
        "duration_s": duration,
        "server_cpu_s": cpu,
        "server_thread_cpu_s": {k: v for k, v in threads.items() if v > 0},
        "sim_cpu_s": sim_cpu,
        "client_cpu_s": me,
        "loop_lag_ms_p99": lag_p99,
        "peak_in_flight": sched.peak,
        "stopped_early": sched.stopped_early,
        "rss_kb": {
            "before_idle": rss_before,
            "idle": rss_idle,
            "peak_active": max(busy) if busy else max((r for _, r, _ in samples), default=rss_idle),
            "after": rss_kb(pid),
        },
        "rss_samples": [(round(s, 2), r, n) for s, r, n in samples[::5]],
        "writes": writes,
        "stray_frames": sum(s.stray_frames for s in sockets),
        "stray_bytes": sum(s.stray_bytes for s in sockets),
    }


async def run(plan: dict[str, Any]) -> dict[str, Any]:
    """All phases in order; the raw result for :func:`bench.stats.summarize`."""
    direct = await direct_phase(plan)
    relay = await relay_phases(plan)
    return {"direct": direct, "relay": relay}


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
