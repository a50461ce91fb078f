"""Scale-out on an existing engine: two daphne processes on PostgreSQL and Redis.

A turn started through process A is watched live and stopped from process B, with the same
exactness as in one process. Needs PostgreSQL on 127.0.0.1:5432 (trust auth, database
``test``) and Redis on 127.0.0.1:6379; without them these tests skip (and fail in CI).
"""

from __future__ import annotations

import os
import socket
import subprocess
import uuid

import pytest

from tests.conftest import PY, ROOT, create_first_account, login

pytestmark = [pytest.mark.scaleout, pytest.mark.browser]

PG = os.environ.get("PLAYGROUND_TEST_PG", "postgres://postgres@127.0.0.1:5432")
REDIS = os.environ.get("PLAYGROUND_TEST_REDIS", "redis://127.0.0.1:6379/7")


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture(scope="module")
def pg_redis():  # noqa: ANN201
    if not _port_open(5432) or not _port_open(6379):
        pytest.skip("PostgreSQL (127.0.0.1:5432) and Redis (127.0.0.1:6379) are needed for scaleout tests")
    import psycopg
    import redis as _redis  # channels-redis brings redis-py

    name = f"playground_so_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(f"{PG}/test", autocommit=True) as con:
        con.execute(f'CREATE DATABASE "{name}"')
    url = f"{PG}/{name}"
    env = {**os.environ, "DATABASE_URL": url, "REDIS_URL": REDIS, "DJANGO_SETTINGS_MODULE": "playground.settings"}
    subprocess.run([PY, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True)
    _redis.Redis.from_url(REDIS).flushdb()
    yield {"DATABASE_URL": url, "REDIS_URL": REDIS, "name": name}
    with psycopg.connect(f"{PG}/test", autocommit=True) as con:
        con.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def pg_connections(name: str) -> int:
    import psycopg

    with psycopg.connect(f"{PG}/test", autocommit=True) as con:
        return con.execute("select count(*) from pg_stat_activity where datname = %s", (name,)).fetchone()[0]


def raw_text(pg) -> str:  # noqa: ANN001
    """The exact text of the answer as Copy gets it (``/m/<id>/raw/``)."""
    mid = pg.get_attribute(".msg-assistant", "id").removeprefix("m-")
    return pg.evaluate(f"fetch('/m/{mid}/raw/', {{credentials: 'same-origin'}}).then(r => r.text())")


def streamed_text(pg) -> str | None:  # noqa: ANN001
    """The raw text the page received live (snapshot + deltas), or None when it lacks the start."""
    return pg.evaluate("(() => { const s = pgStream(document.querySelector('.msg-assistant .answer'));"
                       " return s.base === 0 ? s.raw : null; })()")


def test_turn_started_in_a_is_watched_live_and_stopped_from_b(make_server, chromium, pg_redis) -> None:  # noqa: ANN001
    env = {"DATABASE_URL": pg_redis["DATABASE_URL"], "REDIS_URL": pg_redis["REDIS_URL"]}
    a = make_server(env=env)
    b = make_server(env=env)
    ctx_a, ctx_b = chromium.new_context(), chromium.new_context()
    pa, pb = ctx_a.new_page(), ctx_b.new_page()
    for p in (pa, pb):
        p.set_default_timeout(20_000)
    create_first_account(pa, a)
    pa.wait_for_selector("#conn-state.ok")
    conv_url = pa.url.replace(a.url, "")
    login(pb, b, "admin", "correct-horse-9")  # before the turn: logging in is slow under load

    # 1. A full turn on A, watched live from B, with the exact text on both pages.
    pa.fill("#model", "sim-reasoning?ttft_ms=200&delay_ms=25&length=400&reasoning_length=20")
    pa.fill("#content", "Watch me from B")
    pa.press("#content", "Enter")
    pa.wait_for_selector(".msg-assistant.status-streaming.has-tokens")
    pb.goto(b.url + conv_url)  # joins mid-turn: a snapshot from A's process, then live deltas
    pb.wait_for_selector(".msg-assistant.status-streaming")
    pb.wait_for_selector("#conn-state.ok")
    mid_len = pb.evaluate("document.querySelector('.msg-assistant .answer').getAttribute('data-end')")
    pa.wait_for_selector(".msg-assistant.status-complete", timeout=30_000)
    pb.wait_for_selector(".msg-assistant.status-complete", timeout=30_000)
    import psycopg

    with psycopg.connect(pg_redis["DATABASE_URL"]) as con:
        content = con.execute("select content from chat_message where role='assistant'").fetchone()[0]
    sim = [r for r in a.sim_requests() if r["path"].endswith("/chat/completions")][-1]
    from tests.helpers import sim_text

    assert content == sim_text(sim)
    assert raw_text(pa) == content
    assert raw_text(pb) == content
    assert streamed_text(pa) == content, "A streamed every character once"
    # B ends with the whole message from A's process: the server's blocks of the stored text.
    from chat.rendering import render_blocks

    want = pb.evaluate("html => { const t = document.createElement('template'); t.innerHTML = html;"
                       " return [...t.content.children].map(e => e.outerHTML); }", "".join(render_blocks(content)))
    assert pb.eval_on_selector_all(".msg-assistant .answer > .mdb", "els => els.map(e => e.outerHTML)") == want
    assert int(mid_len) < len(content), "B joined mid-turn"

    # 2. Stop from B a turn that runs in A.
    pa.fill("#model", "sim-fast?ttft_ms=20&delay_ms=40&length=600&reasoning=0")
    pa.fill("#content", "Stop me from B")
    pa.press("#content", "Enter")
    pb.wait_for_selector(".msg-assistant.status-streaming.has-tokens", timeout=20_000)
    pb.wait_for_timeout(500)
    pb.click(".msg-assistant.status-streaming button.stop")
    pa.wait_for_selector(".msg-assistant.status-stopped", timeout=10_000)
    pb.wait_for_selector(".msg-assistant.status-stopped", timeout=10_000)
    rec = [r for r in a.sim_requests() if r["path"].endswith("/chat/completions")][-1]
    assert rec["disconnected"] is True
    # Under what one second of the simulator's pace (25 tokens/s) would write after the stop.
    assert rec["tokens_after_disconnect"] < 25
    with psycopg.connect(pg_redis["DATABASE_URL"]) as con:
        stopped = con.execute(
            "select content, status from chat_message where role='assistant' order by created_at desc limit 1"
        ).fetchone()
    assert stopped[1] == "stopped" and sim_text(rec).startswith(stopped[0]) and stopped[0]
    used = pg_connections(pg_redis["name"])
    print(f"\nPostgreSQL connections in use by 2 daphne processes: {used}")
    assert used <= 2 * 8 + 2
    ctx_a.close()
    ctx_b.close()
