"""Issue 8 item 17: open websockets lose their authorization the moment their session does.

Each case opens a conversation page (its socket connected), ends the session somewhere else,
and expects the page's socket to be closed by the server with 4401 (the page says "not
allowed") and a send from that page to reach no upstream and write nothing.
"""

from __future__ import annotations

import pytest

from tests.conftest import create_first_account, login
from tests.helpers import chat_requests

pytestmark = [pytest.mark.browser]

PASSWORD = "correct-horse-9"


def closed_4401(pg) -> None:  # noqa: ANN001
    pg.wait_for_selector("#conn-state.bad", timeout=10_000)
    assert "4401" in pg.inner_text("#conn-state")


def nothing_sent_from(pg, server) -> None:  # noqa: ANN001
    before = server.query("select count(*) from chat_message")[0][0]
    pg.fill("#content", "Sent after the session ended")
    pg.press("#content", "Enter")
    pg.wait_for_timeout(800)
    assert server.query("select count(*) from chat_message")[0][0] == before
    assert chat_requests(server.sim_requests()) == []


def test_logout_in_another_tab_closes_the_sockets_of_that_session(server, page) -> None:  # noqa: ANN001
    create_first_account(page, server, password=PASSWORD)
    page.wait_for_selector("#conn-state.ok")
    tab2 = page.context.new_page()
    tab2.goto(server.url + "/accounts/password/")
    tab2.click("form[action='/accounts/logout/'] button")
    tab2.wait_for_url("**/accounts/login/**")
    closed_4401(page)
    nothing_sent_from(page, server)
    tab2.close()


def test_a_password_change_closes_the_other_sessions_sockets_only(server, page, chromium) -> None:  # noqa: ANN001
    create_first_account(page, server, password=PASSWORD)
    page.wait_for_selector("#conn-state.ok")
    other = chromium.new_context()
    try:
        pg2 = other.new_page()
        login(pg2, server, "admin", PASSWORD)
        pg2.wait_for_selector("#conn-state.ok")
        # The first browser changes the password: its own session stays, the other one ends.
        mine = page.context.new_page()
        mine.goto(server.url + "/accounts/password/")
        mine.fill("#id_old_password", PASSWORD)
        mine.fill("#id_new_password1", "a-new-horse-42")
        mine.fill("#id_new_password2", "a-new-horse-42")
        mine.click("form:not([action='/accounts/logout/']) button[type=submit]")
        mine.wait_for_url("**/password/done/**")
        closed_4401(pg2)
        # The browser that changed it reconnects with its (renewed) session and works on.
        page.wait_for_selector("#conn-state.ok", timeout=10_000)
        nothing_sent_from(pg2, server)
        mine.close()
    finally:
        other.close()


def test_deactivating_a_user_closes_all_their_sockets(server, page, chromium) -> None:  # noqa: ANN001
    create_first_account(page, server, password=PASSWORD)
    # A second user, created by the admin, chats in another browser.
    page.goto(server.url + "/users/")
    page.fill("#id_username", "bea")
    page.fill("#id_password1", "bea-password-77")
    page.fill("#id_password2", "bea-password-77")
    page.click("button:has-text('Add user')")
    page.wait_for_selector("li:has-text('bea')")
    other = chromium.new_context()
    try:
        pg2 = other.new_page()
        login(pg2, server, "bea", "bea-password-77")
        pg2.wait_for_selector("#conn-state.ok")
        # The admin deactivates her in Django's admin (any ORM save sends the signal).
        bea_id = server.query("select id from auth_user where username = 'bea'")[0][0]
        page.goto(f"{server.url}/admin/auth/user/{bea_id}/change/")
        page.uncheck("#id_is_active")
        page.click("input[name=_save]")
        page.wait_for_url("**/admin/auth/user/")
        closed_4401(pg2)
        nothing_sent_from(pg2, server)
    finally:
        other.close()
