"""``python -m bench`` (``make bench``): run the relay benchmark and write ``bench.json``.

Steps: a temp dir; the lean upstream (:mod:`bench.upstream`, its own process; with
``--upstream simulator`` also the full simulator ``python -m chat.simulator`` for the load
phases); the database (:mod:`bench.setup_db`: migrate, users, endpoints of ``--style`` at the
upstream, conversations, sessions); one daphne process serving ``bench.asgi:application`` on
a free loopback port with ``DJANGO_DEBUG=false`` (production settings) and
``PLAYGROUND_MAX_TURNS`` raised above the largest knee step (the knee measures the relay, not
admission control); then the load generator (:mod:`bench.client`) in a separate process, and
with ``--browser`` the browser phase (:mod:`bench.browser`). Where the OS allows
(``os.sched_setaffinity``, ≥ 2 CPUs) daphne runs on the first CPU and everything else (the
upstream, the client, Chromium) on the others; the pinning is recorded. The figures
(:func:`bench.stats.summarize`) and their targets go to ``bench.json`` and a table is printed.

Phases (``--phases``, default ``sequential,relay,knee,fanout``; ``--browser`` adds
``browser``): see :mod:`bench.client` and :mod:`bench.browser`. A run of fewer phases than
the default set plus the browser writes ``bench-partial.json`` unless ``--out`` says otherwise,
so the committed ``bench.json`` always holds a whole run.

May import: the standard library, ``bench.stats``, ``bench.upstream`` (model ids),
``bench.readme`` (the table); versions of installed packages by metadata.
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
from bench.upstream import Spec, model_name

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
DEFAULT_PHASES = ("sequential", "relay", "knee", "fanout", "compare")
ALL_PHASES = (*DEFAULT_PHASES, "browser")


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
            ["git", "rev-parse", "--short=12", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True, text=True
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


def allowed_cpus(pid: int) -> dict[str, str]:
    """``Cpus_allowed_list`` of every thread of ``pid`` (``/proc/<pid>/task/*/status``),
    grouped: ``{cpu list: "<n> threads"}``."""
    seen: dict[str, int] = {}
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                for line in Path(f"/proc/{pid}/task/{tid}/status").read_text().splitlines():
                    if line.startswith("Cpus_allowed_list:"):
                        cpus = line.split(":", 1)[1].strip()
                        seen[cpus] = seen.get(cpus, 0) + 1
            except OSError:
                continue
    except OSError:
        return {}
    return {k: f"{v} threads" for k, v in seen.items()}


class Pinning:
    """Daphne on one CPU, everything else on the others (``os.sched_setaffinity``; children
    inherit the mask of the thread that starts them). Off with fewer than 2 CPUs, without
    ``sched_setaffinity`` or with ``--no-pin``."""

    def __init__(self, enabled: bool) -> None:
        self.cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        self.enabled = enabled and len(self.cpus) >= 2
        self.server = {self.cpus[0]} if self.enabled else set(self.cpus)
        self.others = set(self.cpus[1:]) if self.enabled else set(self.cpus)
        self.note = "" if self.enabled else (
            "off (--no-pin)" if not enabled else f"off ({len(self.cpus)} CPU available)"
        )

    def rest(self) -> None:
        """Put this process (and what it starts from now on) on the non-server CPUs."""
        if self.enabled:
            os.sched_setaffinity(0, self.others)

    def start_server(self, *args: Any, **kwargs: Any) -> subprocess.Popen:
        """``subprocess.Popen`` with the server's CPU mask (this thread's mask is restored)."""
        if not self.enabled:
            return subprocess.Popen(*args, **kwargs)
        os.sched_setaffinity(0, self.server)
        try:
            return subprocess.Popen(*args, **kwargs)
        finally:
            os.sched_setaffinity(0, self.others)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line (see the module docstring); ``argv`` None reads ``sys.argv``."""
    p = argparse.ArgumentParser(
        prog="python -m bench", description="Relay benchmark (issues 4 and 9); writes bench.json."
    )
    g = p.add_argument_group("run")
    g.add_argument("--phases", default=",".join(DEFAULT_PHASES),
                   help=f"comma-separated phases among {', '.join(ALL_PHASES)} (default: {','.join(DEFAULT_PHASES)})")
    g.add_argument("--browser", action="store_true", help="add the browser phase (make bench does)")
    g.add_argument("--style", choices=("openai_chat", "anthropic_messages", "openai_responses"),
                   default="openai_chat", help="API style of the bench endpoints (default openai_chat)")
    g.add_argument("--upstream", choices=("lean", "simulator"), default="lean",
                   help="upstream of the load phases: the lean bench upstream (default) or the full simulator")
    g.add_argument("--out", default=None,
                   help="result file (default bench.json for a whole run, else bench-partial.json; '-' for none)")
    g.add_argument("--no-pin", action="store_true", help="do not pin processes to CPUs")
    g.add_argument("--keep", action="store_true", help="keep the temp dir (logs, database, raw records)")
    g = p.add_argument_group("relay phase (100 streams)")
    g.add_argument("--streams", type=int, default=100, help="concurrent websocket streams (default 100)")
    g.add_argument("--turns", type=int, default=10, help="turns per stream (default 10)")
    g.add_argument("--tokens", type=int, default=128, help="answer tokens per turn (default 128)")
    g.add_argument("--rate", type=float, default=50.0, help="tokens per second per stream (default 50)")
    g.add_argument("--ttft-ms", type=int, default=100, help="the upstream's time to first token, ms (default 100)")
    g.add_argument("--tokens-per-event", type=int, default=1, help="tokens per SSE event (default 1)")
    g.add_argument("--users", type=int, default=0, help="users owning the streams (default: one per stream)")
    g.add_argument("--gap-s", type=float, default=0.25, help="pause between a stream's turns, s (default 0.25)")
    g.add_argument("--max-phase-s", type=float, default=60.0,
                   help="start no turn later than this many seconds into a load sub-phase (default 60)")
    g.add_argument("--direct-client", choices=("raw", "httpx"), default="raw",
                   help="baseline client: raw asyncio HTTP/1.1 (default, cheapest) or httpx")
    g = p.add_argument_group("sequential phase")
    g.add_argument("--seq-pairs", type=int, default=50, help="measured pairs (default 50)")
    g.add_argument("--seq-tokens", type=int, default=16, help="answer tokens per turn (default 16)")
    g.add_argument("--seq-gap-s", type=float, default=0.2, help="pause after each turn, s (default 0.2)")
    g = p.add_argument_group("knee search")
    g.add_argument("--knee-steps", default="25,50,100,150,200", help="stream counts (default 25,50,100,150,200)")
    g.add_argument("--knee-turns", type=int, default=3, help="turns per stream per step (default 3)")
    g = p.add_argument_group("fan-out")
    g.add_argument("--fanout", default="6x10", help="lanes x repeats started at once by one user (default 6x10)")
    g.add_argument("--compare", default="6x10",
                   help="compare phase: lanes x repeat runs of one comparison, one send (default 6x10)")
    g = p.add_argument_group("browser phase")
    g.add_argument("--browser-tokens", type=int, default=10_000, help="answer tokens (default 10000)")
    g.add_argument("--browser-rate", type=float, default=200.0, help="tokens per second (default 200)")
    g.add_argument("--no-trace", action="store_true", help="no Chromium trace (longest task from longtask entries only)")
    g.add_argument("--js-profile", metavar="FILE", help="save Chromium's CPU profile of the browser turn (.cpuprofile)")
    g = p.add_argument_group("experiments")
    g.add_argument("--profile", metavar="FILE", help="cProfile the server's event loop in the relay phase")
    g.add_argument("--py-spy", metavar="BIN", help="with --profile: sample the server with this py-spy binary instead")
    g.add_argument("--server-env", action="append", default=[], metavar="KEY=VALUE",
                   help="extra environment for the server (e.g. PLAYGROUND_FRAME_INTERVAL_S=0.05)")
    g.add_argument("--db-options", default="", metavar="QUERY",
                   help="query string for the SQLite DATABASE_URL (e.g. conn_max_age=600)")
    args = p.parse_args(argv)
    phases = [x.strip() for x in args.phases.split(",") if x.strip()]
    if args.browser and "browser" not in phases:
        phases.append("browser")
    unknown = [x for x in phases if x not in ALL_PHASES]
    if unknown:
        p.error(f"unknown phase(s): {', '.join(unknown)}")
    args.phase_list = [x for x in ALL_PHASES if x in phases]
    args.knee_list = [int(x) for x in args.knee_steps.split(",") if x.strip()]
    m = re.fullmatch(r"(\d+)x(\d+)", args.fanout)
    if not m:
        p.error("--fanout wants LANESxREPEATS, e.g. 6x10")
    args.fanout_n = int(m[1]) * int(m[2])
    m = re.fullmatch(r"(\d+)x(\d+)", args.compare)
    if not m or not (2 <= int(m[1]) <= 6 and 1 <= int(m[2]) <= 20):
        p.error("--compare wants LANESxRUNS with 2-6 lanes and 1-20 runs, e.g. 6x10")
    args.compare_lanes, args.compare_runs = int(m[1]), int(m[2])
    if args.out is None:
        args.out = "bench.json" if set(args.phase_list) == set(ALL_PHASES) else "bench-partial.json"
    return args


def start_announcing(cmd: list[str], env: dict[str, str], log: Path, pattern: str) -> tuple[subprocess.Popen, str]:
    """Start a server that prints its base URL on its first stdout line; return (process, URL)."""
    log_f = open(log, "w+")  # noqa: SIM115
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=log_f, text=True)
    line = proc.stdout.readline() if proc.stdout else ""
    m = re.search(pattern, line)
    if not m:
        stop(proc)
        raise RuntimeError(f"{cmd} did not announce its URL: {line!r} (log: {log})")
    if proc.stdout:  # keep draining its stdout so a full pipe never blocks it
        threading.Thread(target=shutil.copyfileobj, args=(proc.stdout, log_f), daemon=True).start()
    return proc, m[1]


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Start the processes, run the phases, return the full ``bench.json`` document."""
    started = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix="playground-bench-"))
    procs: list[subprocess.Popen] = []
    pin = Pinning(not args.no_pin)
    pin.rest()
    interval_ms = 1000.0 * args.tokens_per_event / args.rate
    server_env = dict(kv.split("=", 1) for kv in args.server_env)
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "playground.settings",
        "DATABASE_URL": f"sqlite:///{tmp / 'db.sqlite3'}" + (f"?{args.db_options}" if args.db_options else ""),
        "PLAYGROUND_VAR_DIR": str(tmp),
        "DJANGO_DEBUG": "false",
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
        "PLAYGROUND_ENCRYPTION_KEYS": base64.urlsafe_b64encode(secrets.token_bytes(32)).decode(),
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
        "PLAYGROUND_SIMULATOR_CONTROL": "false",
        "PLAYGROUND_MAX_TURNS": str(max([1000, *args.knee_list, args.streams, args.fanout_n, args.compare_lanes * args.compare_runs]) * 2),
        "BENCH_PROFILE_PATH": str(Path(args.profile).resolve()) if args.profile else "",
    }
    phases = args.phase_list
    try:
        lean, lean_url = start_announcing(
            [PY, "-m", "bench.upstream", "--port", "0"], env, tmp / "upstream.log", r"(http://127\.0\.0\.1:\d+/\S*)"
        )
        procs.append(lean)
        wait_http(lean_url + "/models", lean)
        upstream_url, upstream_pids = lean_url, [lean.pid]
        stats_url = lean_url.rsplit("/", 1)[0] + "/_stats"

        def model(tokens: int, ttft_ms: float, ivl_ms: float, tpe: int) -> str:
            if args.upstream == "simulator":
                return (f"sim-fast?ttft_ms={ttft_ms:g}&delay_ms={round(ivl_ms)}&length={tokens}"
                        f"&tokens_per_event={tpe}&reasoning=0")
            return model_name(Spec("bench", ttft_ms, ivl_ms, tokens, tpe))

        if args.upstream == "simulator":
            sim, upstream_url = start_announcing(
                [PY, "-m", "chat.simulator", "--host", "127.0.0.1", "--port", "0", "--verbosity", "0"],
                env, tmp / "simulator.log", r"(http://127\.0\.0\.1:\d+/\S*)",
            )
            procs.append(sim)
            wait_http(upstream_url + "/models", sim)
            upstream_pids, stats_url = [sim.pid], ""

        browser_model = model_name(Spec("bench-md", 100, 1000.0 / args.browser_rate, args.browser_tokens, 1))
        groups: dict[str, int] = {}
        if "relay" in phases:
            groups["relay"] = args.streams
        if "knee" in phases:
            groups |= {f"knee{n}": n for n in args.knee_list}
        users = args.users or max([args.streams if "relay" in phases else 1, *(args.knee_list if "knee" in phases else [1])])
        setup_spec = {
            "style": args.style, "upstream": upstream_url, "browser_upstream": lean_url,
            "users": users, "groups": groups, "fanout": args.fanout_n if "fanout" in phases else 0,
            "browser_model": browser_model, "collectstatic": "browser" in phases,
            "compare_lanes": args.compare_lanes if "compare" in phases else 0,
        }
        (tmp / "setup.json").write_text(json.dumps(setup_spec))
        setup = subprocess.run([PY, "-m", "bench.setup_db", str(tmp / "setup.json")],
                               cwd=ROOT, env=env, capture_output=True, text=True)
        if setup.returncode != 0:
            raise RuntimeError(f"database setup failed:\n{setup.stderr[-3000:]}")
        db = json.loads(setup.stdout.strip().splitlines()[-1])

        window_s = float(server_env.get("PLAYGROUND_FRAME_INTERVAL_S") or db.get("frame_interval_s") or 0.05)
        port = free_port()
        server_log = open(tmp / "daphne.log", "w")  # noqa: SIM115
        server = pin.start_server(
            [PY, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "bench.asgi:application"],
            cwd=ROOT, env={**env, **server_env}, stdout=server_log, stderr=subprocess.STDOUT,
        )
        procs.append(server)
        wait_http(f"http://127.0.0.1:{port}/_bench/writes", server)

        relay_load = {
            "streams": args.streams, "turns": args.turns, "tokens": args.tokens, "rate": args.rate,
            "tokens_per_event": args.tokens_per_event, "ttft_ms": args.ttft_ms, "gap_s": args.gap_s,
            "max_phase_s": args.max_phase_s,
            "model": model(args.tokens, args.ttft_ms, interval_ms, args.tokens_per_event),
        }
        load_params = {k: relay_load[k] for k in ("streams", "turns", "tokens", "rate", "tokens_per_event")}
        load_params["window_ms"] = window_s * 1000
        knee_cfg = {**relay_load, "turns": args.knee_turns, "steps": args.knee_list,
                    "params": {**load_params, "turns": args.knee_turns}}
        plan = {
            "phases": [x for x in phases if x != "browser"],
            "style": args.style,
            "upstream_url": upstream_url,
            "upstream_pids": upstream_pids,
            "upstream_stats_url": stats_url,
            "server_port": port,
            "server_pid": server.pid,
            "server_cpus": sorted(pin.server) if pin.enabled else [],
            "warmup": db["warmup"],
            "warmup_model": model(16, 10, 5, 1),
            "settle_s": 2.0,
            "turn_timeout_s": 60.0,
            "direct_client": args.direct_client,
            "profile": bool(args.profile),
            "py_spy": args.py_spy if args.profile else None,
            "py_spy_out": str(tmp / "py-spy.txt"),
            "sequential": {
                "pairs": args.seq_pairs, "warm_pairs": 3, "gap_s": args.seq_gap_s,
                "model": model(args.seq_tokens, args.ttft_ms, interval_ms, args.tokens_per_event),
                "tokens": args.seq_tokens, "spec": db["sequential"],
            },
            "relay": {**relay_load, "specs": db["groups"].get("relay", [])},
            "knee": {**knee_cfg, "specs": {str(n): db["groups"].get(f"knee{n}", []) for n in args.knee_list}},
            "fanout": {"specs": db["fanout"], "model": relay_load["model"], "shape": args.fanout},
            "compare": {"spec": db.get("compare"), "model": relay_load["model"], "lanes": args.compare_lanes,
                        "runs": args.compare_runs, "shape": args.compare},
        }
        (tmp / "plan.json").write_text(json.dumps(plan))
        load_before = loadavg()
        raw: dict[str, Any] = {}
        if plan["phases"]:
            client = subprocess.run([PY, "-m", "bench.client", str(tmp / "plan.json"), str(tmp / "raw.json")],
                                    cwd=ROOT, env=env)
            if client.returncode != 0:
                raise RuntimeError(f"the load generator failed (exit {client.returncode}); logs in {tmp}")
            raw = json.loads((tmp / "raw.json").read_text())
        if "browser" in phases:
            print("phase browser …", file=sys.stderr, flush=True)
            bplan = {
                "server_port": port, "spec": db["browser"], "tokens": args.browser_tokens,
                "model": browser_model, "timeout_s": args.browser_tokens / args.browser_rate + 90,
                "trace": not args.no_trace, "text": "Benchmark browser turn: write a long document.",
                "cpu_profile": str(Path(args.js_profile).resolve()) if args.js_profile else "",
            }
            (tmp / "browser-plan.json").write_text(json.dumps(bplan))
            la = loadavg()
            t0 = time.monotonic()
            b = subprocess.run([PY, "-m", "bench.browser", str(tmp / "browser-plan.json"), str(tmp / "browser.json")],
                               cwd=ROOT, env=env)
            if b.returncode != 0:
                raise RuntimeError(f"the browser phase failed (exit {b.returncode}); logs in {tmp}")
            raw["browser"] = json.loads((tmp / "browser.json").read_text())
            raw.setdefault("phase_wall_s", {})["browser"] = round(time.monotonic() - t0, 1)
            raw.setdefault("loadavg", {})["browser"] = [la, loadavg()]
        if args.profile and args.py_spy:
            from bench.profile import report

            Path(args.profile).write_text(report(tmp / "py-spy.txt"))
        load_after = loadavg()
        pinning = {
            "enabled": pin.enabled,
            "note": pin.note,
            "cpus": pin.cpus,
            "server_cpus": sorted(pin.server),
            "others_cpus": sorted(pin.others),
            "allowed": {
                "daphne": allowed_cpus(server.pid),
                "upstream": {str(pid): allowed_cpus(pid) for pid in upstream_pids},
                "client_and_browser": allowed_cpus(os.getpid()),
            },
        }
        if args.keep:
            (tmp / "raw-all.json").write_text(json.dumps(raw))
    finally:
        for p in reversed(procs):
            stop(p)
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    params = {"relay": load_params, "knee": knee_cfg["params"]}
    summary = summarize(raw, params)
    fig = summary["figures"]
    return {
        **fig,
        "targets": targets(fig, params),
        "details": summary["details"],
        "meta": {
            "commit": git_commit(),
            "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "cpu": cpu_model(),
            "cpu_count": os.cpu_count(),
            "loadavg_before": load_before,
            "loadavg_after": load_after,
            "loadavg_by_phase": raw.get("loadavg", {}),
            "phase_wall_s": raw.get("phase_wall_s", {}),
            "pinning": pinning,
            "python": platform.python_version(),
            "django": version("django"),
            "channels": version("channels"),
            "daphne": version("daphne"),
            "twisted": version("twisted"),
            "httpx": version("httpx"),
            "websockets": version("websockets"),
            "playwright": version("playwright"),
            "phases": phases,
            "params": {
                **load_params,
                "style": args.style,
                "upstream": args.upstream,
                "users": users,
                "ttft_ms": args.ttft_ms,
                "gap_s": args.gap_s,
                "max_phase_s": args.max_phase_s,
                "model": relay_load["model"],
                "sequential": {"pairs": args.seq_pairs, "tokens": args.seq_tokens, "gap_s": args.seq_gap_s,
                               "model": plan["sequential"]["model"]},
                "knee": {"steps": args.knee_list, "turns": args.knee_turns},
                "fanout": args.fanout,
                "compare": args.compare,
                "browser": {"tokens": args.browser_tokens, "rate": args.browser_rate, "model": browser_model,
                            "trace": not args.no_trace},
                "debug": False,
                "profiled": bool(args.profile),
                "server_env": args.server_env,
                "max_turns": env["PLAYGROUND_MAX_TURNS"],
                "direct_client": args.direct_client,
                "db_options": args.db_options,
            },
            "runtime_s": round(time.monotonic() - started, 1),
        },
    }


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark, print the table, write ``--out`` (not for profiled runs)."""
    from bench.readme import text_table

    args = parse_args(argv)
    doc = run(args)
    print(text_table(doc))
    out = args.out
    if args.profile and out == "bench.json":
        out = "-"  # a profiled run's CPU figures are inflated: never the committed file
        print(f"profile written to {args.profile}; bench.json left alone (profiling inflates CPU)")
    if out != "-":
        Path(out).write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
        print(f"wrote {out}")


if __name__ == "__main__":
    main()
