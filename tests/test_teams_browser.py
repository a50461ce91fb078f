"""Browser: two users in one team over a real daphne server. The owner (the first account)
adds the member and a team endpoint with a key; the member chats with it and the key is in no
page, response or websocket frame; the owner removes the member while the member's turn
streams (it stops; the next send is refused); a reached budget refuses the owner's next turn
with its name; the usage page shows the sums of the stored figures."""

from __future__ import annotations

import pytest

from tests.conftest import create_first_account, login

pytestmark = [pytest.mark.browser]

KEY = "sk-browser-TEAM-SECRET-7a6b5c4d3e2f"
HEADER = "hdr-browser-SECRET-8080"
ASSISTANT = ".msg-assistant"
PW = "member-Pass-word-77"


def watch_everything(pg, seen: list[str]) -> None:  # noqa: ANN001
    """Keep every websocket frame and every text response the page gets."""
    def on_ws(ws) -> None:  # noqa: ANN001
        ws.on("framereceived", lambda payload: seen.append(payload if isinstance(payload, str) else payload.decode(errors="replace")))
        ws.on("framesent", lambda payload: seen.append(payload if isinstance(payload, str) else ""))

    def on_response(resp) -> None:  # noqa: ANN001
        try:
            if "text" in (resp.headers.get("content-type") or "") or "json" in (resp.headers.get("content-type") or ""):
                seen.append(resp.text())
        except Exception:  # noqa: S110 - a response body gone with a navigation
            pass

    pg.on("websocket", on_ws)
    pg.on("response", on_response)


def assert_clean(texts: list[str]) -> None:
    assert texts, "nothing was captured"
    for t in texts:
        assert KEY not in t and HEADER not in t and KEY[-6:] not in t and "…" + KEY[-4:] not in t


def test_team_endpoint_shared_without_its_key_removal_and_budget(server, page, chromium, fresh_sim) -> None:  # noqa: ANN001
    owner = page
    owner.on("dialog", lambda d: d.accept())
    create_first_account(owner, server)
    # The admin adds the member's account.
    owner.goto(server.url + "/users/")
    owner.fill("#id_username", "mia")
    owner.fill("#id_password1", PW)
    owner.fill("#id_password2", PW)
    owner.click("button:has-text('Add user')")
    owner.wait_for_selector("#users td:has-text('mia')")
    # A team; creating it switches the workspace to it.
    owner.goto(server.url + "/teams/")
    owner.fill("input[name=name]", "Research")
    owner.click("button:has-text('Create team')")
    owner.wait_for_selector("h1:has-text('Research')")
    owner.fill("#member-add input[name=who]", "mia")
    owner.click("#member-add button")
    owner.wait_for_selector("#members td:has-text('mia')")
    assert owner.locator("#workspace-select option:checked").inner_text().startswith("Research")
    # A team endpoint with a key and a secret header.
    owner.goto(server.url + "/endpoints/new/")
    owner.wait_for_selector("#new-for-team")
    owner.fill("#id_name", "Team sim")
    owner.fill("#id_base_url", fresh_sim.base_url)
    owner.fill("#id_api_key", KEY)
    owner.fill("#id_extra_headers", f"X-Team-Secret: {HEADER}")
    owner.click("button:has-text('Save endpoint')")
    owner.wait_for_url("**/endpoints/")
    team_id, endpoint_id = server.query("SELECT team_id, id FROM chat_endpoint WHERE name='Team sim'")[0]
    assert team_id is not None

    # The member chats with it.
    ctx = chromium.new_context(viewport={"width": 1400, "height": 900})
    member = ctx.new_page()
    member.set_default_timeout(15_000)
    errors: list[str] = []
    member.on("pageerror", lambda e: errors.append(str(e)))
    seen: list[str] = []
    watch_everything(member, seen)
    login(member, server, "mia", PW)
    member.wait_for_selector("#conn-state.ok")
    member.select_option("#endpoint", label="Team sim")
    member.fill("#model", "sim-fast")
    member.fill("#content", "Hello team")
    member.press("#content", "Enter")
    member.wait_for_selector(f"{ASSISTANT}.status-complete", timeout=30_000)
    assert "Hello team" in member.inner_text(f"{ASSISTANT} .answer")
    reqs = [r for r in fresh_sim.requests() if r["path"].endswith("/chat/completions")]
    assert len(reqs) == 1 and reqs[0]["auth_present"]  # the key went upstream
    # Inspect and View code of the member's turn, the endpoints page, the team page.
    mid = member.locator(f"{ASSISTANT}").first.get_attribute("id")[2:]
    conv_url = member.url
    for url in (f"/m/{mid}/inspect/", conv_url.replace(server.url, "") + "code/", "/endpoints/", f"/teams/{team_id}/", "/usage/"):
        member.goto(server.url + url)
        seen.append(member.content())
    assert member.request.get(f"{server.url}/endpoints/{endpoint_id}/").status == 404
    seen.append(member.request.get(f"{server.url}/endpoints/{endpoint_id}/models/").text())
    assert_clean(seen)

    # The owner removes the member while the member's answer streams.
    member.goto(conv_url)
    member.wait_for_selector("#conn-state.ok")
    member.fill("#model", "sim-fast?ttft_ms=10&delay_ms=50&length=800&reasoning=0")
    member.fill("#content", "A long one")
    member.press("#content", "Enter")
    member.wait_for_selector(f"{ASSISTANT}.status-streaming .answer :text('Simulated')", timeout=15_000)
    owner.goto(f"{server.url}/teams/{team_id}/")
    owner.locator("#members tr", has_text="mia").locator("button:has-text('Remove')").click()
    owner.wait_for_selector(".flash li:has-text('no longer in')")
    member.wait_for_selector(f"{ASSISTANT}.status-stopped", timeout=10_000)
    n = len([r for r in fresh_sim.requests() if r["path"].endswith("/chat/completions")])
    member.fill("#content", "Still there?")
    member.press("#content", "Enter")
    member.wait_for_selector("#notice:has-text('Not sent')")
    assert "no such endpoint" in member.inner_text("#notice")
    assert len([r for r in fresh_sim.requests() if r["path"].endswith("/chat/completions")]) == n
    member.reload()
    assert "Team sim" not in member.inner_text("#endpoint")
    assert_clean(seen + [member.content()])
    ctx.close()
    assert not errors, errors

    # The owner chats once, sets a 1-token team budget: the next turn is refused by name.
    owner.goto(server.url + "/")
    owner.wait_for_selector("#conn-state.ok")
    owner.select_option("#endpoint", label="Team sim")
    owner.fill("#model", "sim-fast")
    owner.fill("#content", "Owner turn")
    owner.press("#content", "Enter")
    owner.wait_for_selector(f"{ASSISTANT}.status-complete", timeout=30_000)
    owner.goto(f"{server.url}/teams/{team_id}/")
    owner.fill("#team-budget input[name=amount]", "1")
    owner.select_option("#team-budget select[name=unit]", "tokens")
    owner.click("#team-budget button")
    owner.wait_for_selector(".flash li:has-text('Team budget saved')")
    owner.goto(server.url + "/")
    owner.wait_for_selector("#conn-state.ok")
    owner.select_option("#endpoint", label="Team sim")
    owner.fill("#model", "sim-fast")
    owner.fill("#content", "Over budget?")
    owner.press("#content", "Enter")
    owner.wait_for_selector("#notice:has-text('budget')")
    assert "Research" in owner.inner_text("#notice") and "1 tokens" in owner.inner_text("#notice")

    # The usage page (team workspace, owner: every member) equals the stored figures.
    owner.goto(server.url + "/usage/")
    turns, prompt, completion, cost = server.query(
        "SELECT COUNT(*), SUM(usage_prompt), SUM(usage_completion), SUM(usage_cost_usd) FROM chat_message "
        "WHERE usage_team_id = ?", (team_id,))[0]
    assert turns == 3
    shown = {k: owner.locator(f"#usage-totals dd[data-figure={k}]").get_attribute("data-value")
             for k in ("turns", "prompt", "completion", "cost")}
    assert shown["turns"] == "3" and shown["prompt"] == str(prompt) and shown["completion"] == str(completion)
    assert abs(float(shown["cost"]) - (cost or 0)) < 1e-9
    assert owner.inner_text("#usage-totals dd[data-figure=prompt]") == f"{prompt:,}"
    assert owner.locator("#usage-members td:has-text('mia')").count() == 1
    assert owner.locator("#usage-svg rect").count() >= 1
