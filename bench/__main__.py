"""``python -m bench`` (``make bench``): run the relay benchmark and write ``bench.json``.

Steps: a temp dir; the standalone simulator (``python -m chat.simulator``, its own process);
the database (:mod:`bench.setup_db`: migrate, users, endpoint at the simulator, conversations,
sessions); one daphne process serving ``bench.asgi:application`` on a free loopback port with
``DJANGO_DEBUG=false`` (production settings: generated secret and encryption keys); then the
load generator (:mod:`bench.client`) in a separate process. The figures
(:func:`bench.stats.summarize`) go to ``bench.json`` and a table is printed.

Options: ``--streams`` (concurrent streams, default 100), ``--turns`` (turns per stream,
default 10), ``--tokens`` (answer tokens per turn, default 128), ``--rate`` (tokens/s per
stream, default 50, i.e. the simulator's ``delay_ms=20``), ``--ttft-ms`` (the simulator's
time to first token, default 100), ``--tokens-per-event`` (default 1), ``--users`` (default:
one user per stream), ``--out`` (default ``bench.json``), ``--profile FILE`` (cProfile the
server's event loop during the relay phase; the CPU figures are then inflated; with
``--py-spy BIN`` the whole process is sampled by py-spy instead, see :mod:`bench.profile`),
``--direct-client raw|httpx`` (the baseline's reader, default raw asyncio), ``--max-phase-s``
(no turn starts later into a phase, default 120 s), ``--gap-s`` (pause between a stream's
turns, default 0.25 s), experiments ``--server-env KEY=VALUE`` and ``--db-options QUERY`` (the
SQLite ``DATABASE_URL``'s query string, e.g. ``conn_max_age=600``), ``--keep`` (keep the temp
dir with the logs, the database and the client's raw records).

May import: the standard library, ``bench.stats``; versions of installed packages by metadata.
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import json
import os
import platform
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from bench.stats import summarize, targets

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable


def free_port() -> int:
    """A free TCP port on 127.0.0.1 (bound and released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    """Poll ``url`` until it answers; raises RuntimeError if ``proc`` dies or time runs out."""
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process {proc.args} exited with {proc.returncode}")
        try:
            httpx.get(url, timeout=2.0)
            return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not answer within {timeout} s")


def stop(proc: subprocess.Popen) -> None:
    """Terminate a process we started (SIGTERM, then SIGKILL after 10 s)."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def git_commit() -> str:
    """``HEAD``'s short hash, with ``+dirty`` when the working tree has changes to tracked files."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=ROOT,
            capture_output=True,
            text=True,
        ).stdout.strip()
        return head + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def cpu_model() -> str:
    """The CPU's model name from ``/proc/cpuinfo`` (or ``platform.processor()``)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def version(dist: str) -> str:
    """The installed version of distribution ``dist`` (or "not installed")."""
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def loadavg() -> list[float]:
    """1, 5 and 15 minute load averages."""
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line (see the module docstring); ``argv`` None reads ``sys.argv``."""
    p = argparse.ArgumentParser(
        prog="python -m bench", description="Relay benchmark (issue 4); writes bench.json."
    )
    p.add_argument(
        "--streams", type=int, default=100, help="concurrent websocket streams (default 100)"
    )
    p.add_argument("--turns", type=int, default=10, help="turns per stream (default 10)")
    p.add_argument("--tokens", type=int, default=128, help="answer tokens per turn (default 128)")
    p.add_argument(
        "--rate", type=float, default=50.0, help="tokens per second per stream (default 50)"
    )
    p.add_argument(
        "--ttft-ms",
        type=int,
        default=100,
        help="the simulator's time to first token, ms (default 100)",
    )
    p.add_argument(
        "--tokens-per-event", type=int, default=1, help="tokens per SSE event (default 1)"
    )
    p.add_argument(
        "--users", type=int, default=0, help="users owning the streams (default: one per stream)"
    )
    p.add_argument(
        "--gap-s", type=float, default=0.25, help="pause between a stream's turns, s (default 0.25)"
    )
    p.add_argument(
        "--out", default="bench.json", help="result file (default bench.json; '-' for none)"
    )
    p.add_argument(
        "--profile", metavar="FILE", help="cProfile the server's event loop in the relay phase"
    )
    p.add_argument(
        "--py-spy",
        metavar="BIN",
        help="with --profile: sample the server with this py-spy binary instead",
    )
    p.add_argument(
        "--direct-client",
        choices=("raw", "httpx"),
        default="raw",
        help="baseline client: raw asyncio HTTP/1.1 (default, cheapest) or httpx",
    )
    p.add_argument(
        "--max-phase-s",
        type=float,
        default=120.0,
        help="start no turn later than this many seconds into a phase (default 120)",
    )
    p.add_argument(
        "--server-env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra environment for the server (experiments, e.g. PLAYGROUND_FRAME_INTERVAL_S=0.05)",
    )
    p.add_argument(
        "--db-options",
        default="",
        metavar="QUERY",
        help="query string for the SQLite DATABASE_URL (experiments, e.g. conn_max_age=600)",
    )
    p.add_argument("--keep", action="store_true", help="keep the temp dir (logs, database)")
    return p.parse_args(argv)


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Start the processes, run the client, return the full ``bench.json`` document."""
    started = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix="playground-bench-"))
    procs: list[subprocess.Popen] = []
    delay_ms = round(1000 * args.tokens_per_event / args.rate)
    window_s = float(os.environ.get("PLAYGROUND_FRAME_INTERVAL_S") or 0.04)
    model = (
        f"sim-fast?ttft_ms={args.ttft_ms}&delay_ms={delay_ms}&length={args.tokens}"
        f"&tokens_per_event={args.tokens_per_event}&reasoning=0"
    )
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "playground.settings",
        "DATABASE_URL": f"sqlite:///{tmp / 'db.sqlite3'}"
        + (f"?{args.db_options}" if args.db_options else ""),
        "PLAYGROUND_VAR_DIR": str(tmp),
        "DJANGO_DEBUG": "false",
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
        "PLAYGROUND_ENCRYPTION_KEYS": base64.urlsafe_b64encode(secrets.token_bytes(32)).decode(),
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
        "PLAYGROUND_FRAME_INTERVAL_S": str(window_s),
        "PLAYGROUND_SIMULATOR_CONTROL": "false",
        "BENCH_PROFILE_PATH": str(Path(args.profile).resolve()) if args.profile else "",
    }
    server_env = dict(kv.split("=", 1) for kv in args.server_env)
    window_s = float(server_env.get("PLAYGROUND_FRAME_INTERVAL_S", window_s))
    try:
        # The simulator, standalone (no Django), on a port it picks and announces.
        sim_log = open(tmp / "simulator.log", "w+")  # noqa: SIM115
        sim = subprocess.Popen(
            [PY, "-m", "chat.simulator", "--host", "127.0.0.1", "--port", "0", "--verbosity", "0"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=sim_log,
            text=True,
        )
        procs.append(sim)
        line = sim.stdout.readline() if sim.stdout else ""
        m = re.search(r"http://127\.0\.0\.1:(\d+)(/\S*)", line)
        if not m:
            raise RuntimeError(
                f"simulator did not announce its port: {line!r} (log: {tmp / 'simulator.log'})"
            )
        sim_url = f"http://127.0.0.1:{m[1]}{m[2]}"
        if sim.stdout:  # keep draining its stdout so a full pipe never blocks it
            threading.Thread(
                target=shutil.copyfileobj, args=(sim.stdout, sim_log), daemon=True
            ).start()
        wait_http(sim_url + "/models", sim)

        users = args.users or args.streams
        setup = subprocess.run(
            [
                PY,
                "-m",
                "bench.setup_db",
                "--sim",
                sim_url,
                "--streams",
                str(args.streams),
                "--users",
                str(users),
            ],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
        )
        if setup.returncode != 0:
            raise RuntimeError(f"database setup failed:\n{setup.stderr[-3000:]}")
        db = json.loads(setup.stdout.strip().splitlines()[-1])

        port = free_port()
        server_log = open(tmp / "daphne.log", "w")  # noqa: SIM115
        server = subprocess.Popen(
            [PY, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "bench.asgi:application"],
            cwd=ROOT,
            env={**env, **server_env},
            stdout=server_log,
            stderr=subprocess.STDOUT,
        )
        procs.append(server)
        wait_http(f"http://127.0.0.1:{port}/_bench/writes", server)

        plan = {
            "streams": args.streams,
            "turns": args.turns,
            "tokens": args.tokens,
            "rate": args.rate,
            "tokens_per_event": args.tokens_per_event,
            "ttft_ms": args.ttft_ms,
            "gap_s": args.gap_s,
            "model": model,
            "warmup_model": "sim-fast?ttft_ms=10&delay_ms=5&length=16&reasoning=0",
            "sim_url": sim_url,
            "sim_pid": sim.pid,
            "server_port": port,
            "server_pid": server.pid,
            "streams_spec": db["streams"],
            "warmup": db["warmup"],
            "settle_s": 2.0,
            "turn_timeout_s": 60.0,
            "direct_client": args.direct_client,
            "max_phase_s": args.max_phase_s,
            "profile": bool(args.profile),
            "py_spy": args.py_spy if args.profile else None,
            "py_spy_out": str(tmp / "py-spy.txt"),
        }
        (tmp / "plan.json").write_text(json.dumps(plan))
        load_before = loadavg()
        client = subprocess.run(
            [PY, "-m", "bench.client", str(tmp / "plan.json"), str(tmp / "raw.json")],
            cwd=ROOT,
            env=env,
        )
        if client.returncode != 0:
            raise RuntimeError(
                f"the load generator failed (exit {client.returncode}); logs in {tmp}"
            )
        raw = json.loads((tmp / "raw.json").read_text())
        if args.profile and args.py_spy:
            from bench.profile import report

            Path(args.profile).write_text(report(tmp / "py-spy.txt"))
        load_after = loadavg()
    finally:
        for p in reversed(procs):
            stop(p)
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    params = {
        "streams": args.streams,
        "turns": args.turns,
        "tokens": args.tokens,
        "rate": args.rate,
        "tokens_per_event": args.tokens_per_event,
        "window_ms": window_s * 1000,
    }
    summary = summarize(raw, params)
    fig = summary["figures"]
    return {
        **fig,
        "targets": targets(fig, summary["details"]),
        "details": summary["details"],
        "meta": {
            "commit": git_commit(),
            "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "cpu": cpu_model(),
            "cpu_count": os.cpu_count(),
            "loadavg_before": load_before,
            "loadavg_after": load_after,
            "python": platform.python_version(),
            "django": version("django"),
            "channels": version("channels"),
            "daphne": version("daphne"),
            "twisted": version("twisted"),
            "httpx": version("httpx"),
            "websockets": version("websockets"),
            "params": {
                **params,
                "users": args.users or args.streams,
                "ttft_ms": args.ttft_ms,
                "gap_s": args.gap_s,
                "model": model,
                "debug": False,
                "profiled": bool(args.profile),
                "server_env": args.server_env,
                "direct_client": args.direct_client,
                "db_options": args.db_options,
            },
            "runtime_s": round(time.monotonic() - started, 1),
        },
    }


def fmt(v: Any) -> str:
    """A figure for the printed table: thousands separators, one decimal below 1,000, "—" for None."""
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:,.1f}" if abs(v) < 1000 else f"{v:,.0f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def table(doc: dict[str, Any]) -> str:
    """The printed table: figure, value, target, met."""
    tg = doc["targets"]
    d = doc["details"]
    rows = [
        ("streams", doc["streams"], "", None),
        (
            "added TTFT p50 (ms)",
            doc["added_ttft_ms_p50"],
            tg["added_ttft_ms_p50"]["target"],
            tg["added_ttft_ms_p50"]["met"],
        ),
        (
            "added TTFT p99 (ms)",
            doc["added_ttft_ms_p99"],
            tg["added_ttft_ms_p99"]["target"],
            tg["added_ttft_ms_p99"]["met"],
        ),
        ("added inter-frame gap p99 (ms)", doc["added_gap_ms_p99"], "", None),
        (
            f"stalls (gaps > {d['gap_ms']['stall_threshold_ms']:.0f} ms)",
            doc["stalls"],
            tg["stalls"]["target"],
            tg["stalls"]["met"],
        ),
        (
            "relayed tokens per CPU-second",
            doc["tokens_per_cpu_second"],
            tg["tokens_per_cpu_second"]["target"],
            tg["tokens_per_cpu_second"]["met"],
        ),
        (
            "RSS per idle socket (KB)",
            doc["idle_socket_kb"],
            tg["idle_socket_kb"]["target"],
            tg["idle_socket_kb"]["met"],
        ),
        ("RSS per active stream (KB)", doc["active_stream_kb"], "", None),
        (
            "mean interval between delta frames (ms)",
            d["mean_frame_interval_ms"],
            tg["mean_frame_interval_ms"]["target"],
            tg["mean_frame_interval_ms"]["met"],
        ),
        ("frames per turn", doc["frames_per_turn"], "", None),
        (
            "bytes per turn",
            doc["bytes_per_turn"],
            tg["bytes_per_turn"]["target"],
            tg["bytes_per_turn"]["met"],
        ),
        ("answer text bytes per turn", doc["text_bytes_per_turn"], "", None),
        ("DB writes per turn", doc["db_writes_per_turn"], "≤ 3 + 1 per 2 s", None),
    ]
    w = max(len(r[0]) for r in rows)
    lines = [f"{'figure':<{w}}  {'value':>10}  {'target':<40} met"]
    for name, value, target, met in rows:
        mark = "" if met is None else ("yes" if met else "NO")
        lines.append(f"{name:<{w}}  {fmt(value):>10}  {target:<40} {mark}")
    meta = doc["meta"]
    lines.append("")
    lines.append(
        f"turns: relay {d['turns_completed']['relay']} completed, {d['turns_failed']['relay']} failed; "
        f"direct {d['turns_completed']['direct']} completed; text mismatches {d['text_mismatches_vs_direct']}, "
        f"offset errors {d['offset_errors']}"
    )
    lines.append(
        f"TTFT ms direct p50/p99 {fmt(d['ttft_ms']['direct']['p50'])}/{fmt(d['ttft_ms']['direct']['p99'])}, "
        f"relay {fmt(d['ttft_ms']['relay']['p50'])}/{fmt(d['ttft_ms']['relay']['p99'])}; "
        f"CPU s: server {fmt(d['server_cpu_s']['relay'])}, simulator {fmt(d['simulator_cpu_s']['relay'])}, "
        f"client {fmt(d['client_cpu_s']['relay'])} over {fmt(d['phase_s']['relay'])} s"
    )
    lines.append(
        f"commit {meta['commit']} · {meta['cpu']} ×{meta['cpu_count']} · load {meta['loadavg_before'][0]:.2f} → "
        f"{meta['loadavg_after'][0]:.2f} · Python {meta['python']}, Django {meta['django']}, channels "
        f"{meta['channels']}, daphne {meta['daphne']} · {meta['runtime_s']} s"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark, print the table, write ``--out`` (not for profiled runs)."""
    args = parse_args(argv)
    doc = run(args)
    print(table(doc))
    out = args.out
    if args.profile and out == "bench.json":
        out = "-"  # a profiled run's CPU figures are inflated: never the committed file
        print(f"profile written to {args.profile}; bench.json left alone (profiling inflates CPU)")
    if out != "-":
        Path(out).write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
        print(f"wrote {out}")


if __name__ == "__main__":
    main()
