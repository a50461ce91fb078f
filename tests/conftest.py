"""Test-suite wiring: the require-all switch, the per-marker summary, and shared fixtures.

- ``PLAYGROUND_REQUIRE_ALL=1`` (set by ``.ci/run``): a ``browser``, ``real_upstream`` or
  ``scaleout`` test that skips fails the run instead, with the skip reason.
- At the end, one line per marker: how many tests ran (passed/failed) and skipped.
- Fixtures: ``sim`` (a standalone simulator process), ``make_server`` / ``server`` (a real
  daphne serving the playground on loopback with its own SQLite file), ``browser`` (Debian
  Chromium through Playwright, headless), ``write_counter`` (writing SQL statements on every
  connection).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
GATED_MARKERS = ("browser", "real_upstream", "scaleout")
REQUIRE_ALL = os.environ.get("PLAYGROUND_REQUIRE_ALL", "") not in ("", "0", "false")
CHROMIUM = os.environ.get("PLAYGROUND_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
]

_marker_counts: dict[str, Counter[str]] = {m: Counter() for m in (*GATED_MARKERS, "unmarked")}


# ---- require-all and the summary ---------------------------------------------------------


def pytest_collection_modifyitems(config, items) -> None:  # noqa: ANN001
    """Browser tests last: sync Playwright keeps an event loop running on the main thread for
    the rest of the session, which async tests after it cannot share."""
    items.sort(key=lambda item: bool(item.get_closest_marker("browser")))


def _gated(item: pytest.Item) -> list[str]:
    return [m for m in GATED_MARKERS if item.get_closest_marker(m)]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # noqa: ANN201
    outcome = yield
    report = outcome.get_result()
    markers = _gated(item) or ["unmarked"]
    if report.skipped and REQUIRE_ALL and _gated(item):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped under PLAYGROUND_REQUIRE_ALL (CI must run every {markers} test): {reason}"
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        for m in markers:
            _marker_counts[m][report.outcome] += 1


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:  # noqa: ANN001
    tr = terminalreporter
    tr.section("tests per marker")
    for m, c in _marker_counts.items():
        ran = c["passed"] + c["failed"]
        tr.write_line(f"{m:>14}: {ran} ran ({c['passed']} passed, {c['failed']} failed), {c['skipped']} skipped")
    if not REQUIRE_ALL and any(_marker_counts[m]["skipped"] for m in GATED_MARKERS):
        tr.write_line("Some browser/real_upstream/scaleout tests skipped; CI (PLAYGROUND_REQUIRE_ALL=1) would fail.")


# ---- helpers -------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, timeout: float = 30.0, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before {url} answered")
        try:
            httpx.get(url, timeout=2.0)
            return
        except httpx.HTTPError as exc:
            last = exc
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not answer in {timeout} s: {last}")


# ---- the standalone simulator --------------------------------------------------------------


class Sim:
    """A standalone simulator process: ``base_url`` ends in ``/v1``."""

    def __init__(self, port: int, proc: subprocess.Popen) -> None:
        self.port = port
        self.proc = proc
        self.root = f"http://127.0.0.1:{port}"
        self.base_url = f"{self.root}/v1"

    def requests(self) -> list[dict]:
        return httpx.get(f"{self.root}/_simulator/requests", timeout=5).json()

    def reset(self) -> None:
        httpx.post(f"{self.root}/_simulator/reset", timeout=5)


@pytest.fixture(scope="session")
def sim(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    port = free_port()
    log = open(tmp_path_factory.mktemp("sim") / "sim.log", "w")  # noqa: SIM115
    proc = subprocess.Popen(
        [PY, "manage.py", "simulator", "--host", "127.0.0.1", "--port", str(port)],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "DJANGO_SETTINGS_MODULE": "playground.settings"},
    )
    s = Sim(port, proc)
    try:
        wait_http(f"{s.base_url}/models", proc=proc)
        yield s
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()


@pytest.fixture
def fresh_sim(sim: Sim) -> Sim:
    sim.reset()
    return sim


# ---- a real daphne serving the playground --------------------------------------------------


_template_db: dict[str, Path] = {}
#: The in-process simulator key of every test server (``Server.sim_requests`` sends it).
SERVER_SIMULATOR_KEY = "sim-test-server-key-0123456789"


def _migrated_template(tmp_root: Path) -> Path:
    if "db" not in _template_db:
        d = tmp_root / "template"
        d.mkdir(parents=True, exist_ok=True)
        db = d / "db.sqlite3"
        env = {**os.environ, "DATABASE_URL": f"sqlite:///{db}", "PLAYGROUND_VAR_DIR": str(d)}
        subprocess.run([PY, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True)
        _template_db["db"] = db
    return _template_db["db"]


class Server:
    """A daphne process on loopback with its own SQLite file (``db``)."""

    def __init__(self, port: int, proc: subprocess.Popen, db: Path, log: Path) -> None:
        self.port = port
        self.proc = proc
        self.db = db
        self.log = log
        self.url = f"http://127.0.0.1:{port}"

    def query(self, sql: str, params: tuple = ()) -> list[tuple]:
        con = sqlite3.connect(self.db, timeout=10)
        try:
            return con.execute(sql, params).fetchall()
        finally:
            con.close()

    def sim_requests(self) -> list[dict]:
        """What the in-process simulator of this server received (its control routes need the
        simulator key or a session)."""
        return httpx.get(
            f"{self.url}/simulator/_simulator/requests", timeout=5,
            headers={"Authorization": f"Bearer {SERVER_SIMULATOR_KEY}"},
        ).json()

    def stop(self, sig: int | None = None) -> None:
        if self.proc.poll() is None:
            if sig is None:
                self.proc.terminate()
            else:
                self.proc.send_signal(sig)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


@pytest.fixture
def make_server(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    servers: list[Server] = []

    def start(*, env: dict[str, str] | None = None, db: Path | None = None, port: int | None = None) -> Server:
        if db is None:
            db = tmp_path / f"db{len(servers)}.sqlite3"
            shutil.copy(_migrated_template(tmp_path_factory.getbasetemp()), db)
        port = port or free_port()
        log = tmp_path / f"daphne{len(servers)}.log"
        full_env = {
            **os.environ,
            "DATABASE_URL": f"sqlite:///{db}",
            "PLAYGROUND_VAR_DIR": str(tmp_path),
            "DJANGO_SETTINGS_MODULE": "playground.settings",
            "PLAYGROUND_SIMULATOR_CONTROL": "true",
            "PLAYGROUND_SIMULATOR_KEY": SERVER_SIMULATOR_KEY,
            **(env or {}),
        }
        proc = subprocess.Popen(
            [PY, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "playground.asgi:application"],
            cwd=ROOT, env=full_env, stdout=open(log, "w"), stderr=subprocess.STDOUT,  # noqa: SIM115
        )
        server = Server(port, proc, db, log)
        servers.append(server)
        wait_http(f"{server.url}/simulator/v1/models", proc=proc)
        return server

    yield start
    for s in servers:
        s.stop()


@pytest.fixture
def server(make_server) -> Server:  # noqa: ANN001
    return make_server()


# ---- Chromium ------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def _playwright():  # noqa: ANN202
    if not Path(CHROMIUM).exists():
        pytest.skip(f"Debian Chromium not found at {CHROMIUM} (make test installs it: apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        yield p


@pytest.fixture(scope="session")
def chromium(_playwright):  # noqa: ANN001, ANN201
    browser = _playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
    yield browser
    browser.close()


ARTIFACTS = ROOT / "test-artifacts"


@pytest.fixture
def page(chromium, request: pytest.FixtureRequest):  # noqa: ANN001, ANN201
    context = chromium.new_context(viewport={"width": 1400, "height": 900})
    pg = context.new_page()
    pg.set_default_timeout(15_000)
    # The pages' Content-Security-Policy has no 'unsafe-eval': pass wait_for_function an arrow
    # function ("() => …"), as a bare expression is polled through eval and is refused.
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    yield pg
    ARTIFACTS.mkdir(exist_ok=True)
    try:
        pg.screenshot(path=str(ARTIFACTS / f"{request.node.name}.png"), full_page=True)
    except Exception:
        pass
    context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


def create_first_account(pg, server: Server, username: str = "admin", password: str = "correct-horse-9") -> None:  # noqa: ANN001
    pg.goto(server.url + "/")
    assert "/setup/" in pg.url, pg.url
    pg.fill("#id_username", username)
    pg.fill("#id_password1", password)
    pg.fill("#id_password2", password)
    pg.click("button[type=submit]")
    pg.wait_for_url("**/c/**")


def login(pg, server: Server, username: str, password: str) -> None:  # noqa: ANN001
    pg.goto(server.url + "/accounts/login/")
    pg.fill("#id_username", username)
    pg.fill("#id_password", password)
    pg.click("button[type=submit]")
    pg.wait_for_url("**/c/**")


# ---- counting writes -----------------------------------------------------------------------

WRITE_PREFIXES = ("INSERT", "UPDATE", "DELETE", "REPLACE")


class WriteCounter:
    """Counts writing SQL statements on every connection (writes run in executor threads)."""

    def __init__(self) -> None:
        self.statements: list[str] = []

    def __call__(self, execute, sql, params, many, context):  # noqa: ANN001, ANN204
        if sql.lstrip().upper().startswith(WRITE_PREFIXES):
            self.statements.append(sql)
        return execute(sql, params, many, context)


@pytest.fixture
def write_counter(monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201
    """Installs a :class:`WriteCounter` as ``execute_wrapper`` on every connection that runs SQL,
    in whatever thread (connections are per thread, and a turn writes from executor threads)."""
    from django.db.backends.utils import CursorWrapper

    counter = WriteCounter()
    touched: list = []
    original = CursorWrapper._execute_with_wrappers

    def with_counter(self, sql, params, many, executor):  # noqa: ANN001, ANN202
        if counter not in self.db.execute_wrappers:
            self.db.execute_wrappers.append(counter)
            touched.append(self.db)
        return original(self, sql, params, many, executor)

    monkeypatch.setattr(CursorWrapper, "_execute_with_wrappers", with_counter)
    yield counter
    for db in touched:
        if counter in db.execute_wrappers:
            db.execute_wrappers.remove(counter)


def dump(obj: object) -> str:
    return json.dumps(obj, indent=1, default=str)


@pytest.fixture
def alice(db):  # noqa: ANN001, ANN201
    """The owner in authorization tests (a module may define its own ``alice``)."""
    from chat import services
    from tests.accounts import PASSWORD
    return services.user_create(username="alice", password=PASSWORD)


@pytest.fixture
def bob(db):  # noqa: ANN001, ANN201
    """The second user: must get 404s and refusals for alice's objects."""
    from chat import services
    from tests.accounts import PASSWORD
    return services.user_create(username="bob", password=PASSWORD)
