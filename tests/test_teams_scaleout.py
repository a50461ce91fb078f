"""Scale-out: a member removed through daphne process B loses a turn streaming in process A at
once (the channel layer carries the revocation), and their next send on A is refused. Needs
PostgreSQL and Redis like tests/test_scaleout.py (skips without them)."""

from __future__ import annotations

import pytest

from tests.conftest import create_first_account, login
from tests.test_scaleout import pg_redis as _module_pg_redis


@pytest.fixture
def pg_redis():  # noqa: ANN201
    """A fresh PostgreSQL database (and Redis db) for each test: each starts with no account."""
    yield from _module_pg_redis.__wrapped__()

pytestmark = [pytest.mark.scaleout, pytest.mark.browser]

PW = "member-Pass-word-77"
ASSISTANT = ".msg-assistant"


def _setup(make_server, chromium, pg_redis):  # noqa: ANN001, ANN202
    """Processes A and B on one PostgreSQL + Redis; the owner (on B) makes a team with mia and
    a team endpoint; mia (on A) starts a long answer on it. Returns (owner page, member page,
    contexts, team page URL)."""
    env = {"DATABASE_URL": pg_redis["DATABASE_URL"], "REDIS_URL": pg_redis["REDIS_URL"]}
    a = make_server(env=env)
    b = make_server(env=env)
    ctx_o, ctx_m = chromium.new_context(), chromium.new_context()
    owner, member = ctx_o.new_page(), ctx_m.new_page()
    for p in (owner, member):
        p.set_default_timeout(20_000)
    owner.on("dialog", lambda d: d.accept())
    create_first_account(owner, b)
    owner.goto(b.url + "/users/")
    owner.fill("#id_username", "mia")
    owner.fill("#id_password1", PW)
    owner.fill("#id_password2", PW)
    owner.click("button:has-text('Add user')")
    owner.goto(b.url + "/teams/")
    owner.fill("input[name=name]", "Research")
    owner.click("button:has-text('Create team')")
    owner.fill("#member-add input[name=who]", "mia")
    owner.click("#member-add button")
    owner.wait_for_selector("#members td:has-text('mia')")
    team_url = owner.url
    owner.goto(b.url + "/endpoints/new/")
    owner.fill("#id_name", "Team sim")
    owner.fill("#id_base_url", "sim://builtin/v1")
    owner.click("button:has-text('Save endpoint')")
    owner.wait_for_url("**/endpoints/")

    login(member, a, "mia", PW)
    member.wait_for_selector("#conn-state.ok")
    member.select_option("#endpoint", label="Team sim")
    member.fill("#model", "sim-fast?ttft_ms=10&delay_ms=60&length=900&reasoning=0")
    member.fill("#content", "A long one")
    member.press("#content", "Enter")
    member.wait_for_selector(f"{ASSISTANT}.status-streaming .answer :text('Simulated')", timeout=20_000)
    return owner, member, (ctx_o, ctx_m), team_url


def test_removal_through_b_stops_the_turn_in_a_and_refuses_the_next_send(make_server, chromium, pg_redis) -> None:  # noqa: ANN001
    owner, member, (ctx_o, ctx_m), team_url = _setup(make_server, chromium, pg_redis)
    owner.goto(team_url)
    owner.locator("#members tr", has_text="mia").locator("button:has-text('Remove')").click()
    owner.wait_for_selector(".flash li:has-text('no longer in')")
    member.wait_for_selector(f"{ASSISTANT}.status-stopped", timeout=15_000)
    member.fill("#content", "Still there?")
    member.press("#content", "Enter")
    member.wait_for_selector("#notice:has-text('Not sent')")
    ctx_o.close()
    ctx_m.close()


def test_removal_stops_a_turn_whose_page_was_closed(make_server, chromium, pg_redis) -> None:  # noqa: ANN001
    """No socket of the member is left in A: B tells the process that streams the answer."""
    import time

    import psycopg

    owner, member, (ctx_o, ctx_m), team_url = _setup(make_server, chromium, pg_redis)
    ctx_m.close()  # the answer keeps streaming in A without any page
    owner.goto(team_url)
    owner.locator("#members tr", has_text="mia").locator("button:has-text('Remove')").click()
    owner.wait_for_selector(".flash li:has-text('no longer in')")
    deadline = time.monotonic() + 15
    status = None
    while time.monotonic() < deadline:
        with psycopg.connect(pg_redis["DATABASE_URL"]) as con:
            status = con.execute("SELECT status FROM chat_message WHERE role = 'assistant'").fetchone()[0]
        if status != "streaming":
            break
        time.sleep(0.3)
    assert status == "stopped"
    ctx_o.close()
