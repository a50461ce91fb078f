"""Browser: compare × prompt library × blind mode on the live daphne server and the simulator.

A prompt with two versions is used in compare (variables asked first; both lanes get the filled
system prompt and send the last user message; every row records the version); lane B picks v2
(its next request carries v2's system prompt and temperature); "Save as prompt" from lane B;
a blind comparison from the same prompt shows no model anywhere (page, Inspect, exports) until
the vote; the chat sidebar links the comparisons.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import create_first_account
from tests.helpers import chat_requests

pytestmark = [pytest.mark.browser]

DOCS = Path(__file__).resolve().parent.parent / "docs"
MODEL = "sim-fast?ttft_ms=7&delay_ms=1&length=11&reasoning=0"
NEEDLE = "ttft_ms=7"


def lane(i: int) -> str:
    return f"section.lane[data-lane-index='{i}']"


def save_version(pg, *, system: str, temperature: str) -> None:  # noqa: ANN001
    pg.fill("#id_system_prompt", system)
    pg.fill("input[name=temperature]", temperature)
    pg.click("#save-prompt")
    pg.wait_for_selector("#versions")


def test_use_prompt_in_compare_pick_version_save_lane_and_blind_hides_models(server, page) -> None:  # noqa: ANN001
    pg = page
    create_first_account(pg, server)
    pg.goto(server.url + "/prompts/new/")
    pg.fill("#id_name", "greeter")
    pg.fill("input[name=model]", MODEL)
    pg.fill("textarea[name=msg_content_0]", "Say hi to {{name}}.")
    save_version(pg, system="You greet {{name}}.", temperature="0.2")
    pid = int(pg.url.rstrip("/").split("/")[-1])
    pg.click("#edit-prompt")
    save_version(pg, system="Be terse with {{name}}.", temperature="0.9")
    assert pg.inner_text("#shown-version") == "v2"
    v1_id, v2_id = (r[0] for r in server.query(
        "select id from chat_promptversion where prompt_id=? order by number", (pid,)))

    # 1. Use v1 in compare: a missing variable sends nothing.
    pg.goto(f"{server.url}/prompts/{pid}/v/1/")
    pg.click("#use-in-compare")
    pg.click("#compare-use-submit")
    pg.wait_for_selector("#missing-vars")
    assert not chat_requests(server.sim_requests())
    pg.fill("textarea[name=name]", "Ada")
    pg.click("#compare-use-submit")
    pg.wait_for_url(re.compile(r".*/compare/\d+/$"))
    cid = int(pg.url.rstrip("/").split("/")[-1])
    pg.wait_for_selector(f"{lane(0)} .msg-assistant.status-complete", timeout=30_000)
    pg.wait_for_selector(f"{lane(1)} .msg-assistant.status-complete", timeout=30_000)
    sent = chat_requests(server.sim_requests())
    assert len(sent) == 2
    for r in sent:
        msgs = r["body"]["messages"]
        assert msgs[0] == {"role": "system", "content": "You greet Ada."}
        assert msgs[-1]["content"] == "Say hi to Ada." and r["body"]["temperature"] == 0.2
    assert pg.inner_text(f"{lane(0)} .cmp-user .user-text") == "Say hi to Ada."
    rows = server.query("select role, prompt_version_id from chat_message where conversation_id=?", (cid,))
    assert sorted(rows) == [("assistant", v1_id), ("assistant", v1_id), ("user", v1_id)]
    # A reload sends nothing again.
    pg.reload()
    pg.wait_for_selector("#conn-state.ok")
    pg.wait_for_timeout(400)
    assert len(chat_requests(server.sim_requests())) == 2

    # Lane B picks v2: its settings follow, lane A keeps v1.
    pg.select_option(f"{lane(1)} .lane-version-select", "2")
    pg.wait_for_function(
        "(sel) => document.querySelector(sel + ' textarea[name=system_prompt]').value === 'Be terse with Ada.'",
        arg=lane(1))
    assert pg.input_value(f"{lane(1)} input[name=temperature]") == "0.9"
    assert pg.input_value(f"{lane(0)} textarea[name=system_prompt]") == "You greet Ada."
    pg.fill("#cmp-content", "And again")
    pg.press("#cmp-content", "Enter")
    pg.wait_for_selector(f"{lane(1)} .msg-assistant.status-complete >> nth=1", timeout=30_000)
    pg.wait_for_selector(f"{lane(0)} .msg-assistant.status-complete >> nth=1", timeout=30_000)
    last = chat_requests(server.sim_requests())[-2:]
    systems = sorted((r["body"]["messages"][0]["content"], r["body"]["temperature"]) for r in last)
    assert systems == [("Be terse with Ada.", 0.9), ("You greet Ada.", 0.2)]
    DOCS.mkdir(exist_ok=True)
    pg.set_viewport_size({"width": 1300, "height": 1000})
    pg.screenshot(path=str(DOCS / "compare-prompt.png"), full_page=True)

    # 2. Save lane B as a prompt.
    pg.click(f"{lane(1)} .lane-save-prompt summary")
    pg.fill(f"{lane(1)} .lane-save-prompt input[name=name]", "terse lane")
    pg.click(f"{lane(1)} .lane-save-prompt button[type=submit]")
    pg.wait_for_selector("#versions")
    assert pg.inner_text("#system-prompt") == "Be terse with Ada."
    assert pg.locator(".tpl-msg").count() == 4
    assert "0.9" in pg.inner_text("pre.tpl.code")
    new_pid = int(pg.url.rstrip("/").split("/")[-1])
    (config,), = server.query("select config from chat_promptversion where prompt_id=?", (new_pid,))
    assert MODEL in config

    # 3. Blind: from the same prompt; no page, Inspect or export shows the model before the vote.
    pg.goto(f"{server.url}/compare/from-prompt/{pid}/?v=2")
    pg.fill("textarea[name=name]", "Bo")
    pg.check("input[name=blind]")
    pg.click("#compare-use-submit")
    pg.wait_for_url(re.compile(r".*/compare/\d+/$"))
    bid = int(pg.url.rstrip("/").split("/")[-1])
    pg.wait_for_selector(f"{lane(0)} .msg-assistant.status-complete", timeout=30_000)
    pg.wait_for_selector(f"{lane(1)} .msg-assistant.status-complete", timeout=30_000)
    pg.wait_for_selector("form.vote-box")
    assert NEEDLE not in pg.content()
    assert pg.locator(".lane .inspect-link").count() == 0
    assert pg.locator(".lane-save-prompt, .lane-version").count() == 0
    mids = [r[0] for r in server.query(
        "select id from chat_message where conversation_id=? and role='assistant'", (bid,))]
    assert len(mids) == 2
    urls = [f"/compare/{bid}/", f"/compare/{bid}/summary/", f"/compare/{bid}/export.csv", f"/compare/{bid}/export.json",
            f"/compare/{bid}/export.md", f"/c/{bid}/code/", f"/c/{bid}/export.json", f"/c/{bid}/export.md"]
    for mid in mids:
        u = str(mid)
        if len(u) == 32:
            u = f"{u[:8]}-{u[8:12]}-{u[12:16]}-{u[16:20]}-{u[20:]}"
        urls += [f"/m/{u}/code/", f"/m/{u}/inspect/", f"/m/{u}/raw/", f"/m/{u}/edit/"]
    for url in urls:
        body = pg.request.get(server.url + url).text()
        assert NEEDLE not in body, url
    assert pg.request.get(server.url + urls[-3]).status == 404  # Inspect is refused, not just hidden
    # Vote: the models are revealed.
    pg.click("form.vote-box button.vote-lane[data-position='0']")
    pg.wait_for_selector(".vote-done")
    assert NEEDLE in pg.request.get(server.url + urls[-3]).text()
    pg.wait_for_selector(f"{lane(0)} .inspect-link")

    # 5. The chat page's sidebar links both comparisons.
    pg.goto(server.url + "/")
    pg.wait_for_selector("#sidebar-comparisons")
    hrefs = pg.eval_on_selector_all("#sidebar-comparisons a", "els => els.map(e => e.getAttribute('href'))")
    assert f"/compare/{cid}/" in hrefs and f"/compare/{bid}/" in hrefs
    pg.click(f"#sidebar-comparisons a[href='/compare/{cid}/']")
    pg.wait_for_url(f"**/compare/{cid}/")
    assert pg.locator("#compare-list a").count() >= 2


def test_blind_three_lanes_ranked_and_the_leaderboard_counts_every_pair(server, page) -> None:  # noqa: ANN001
    import json

    pg = page
    create_first_account(pg, server)
    pg.goto(server.url + "/compare/")
    pg.click("#start-compare")
    pg.wait_for_url(re.compile(r".*/compare/\d+/$"))
    cid = int(pg.url.rstrip("/").split("/")[-1])
    pg.wait_for_selector("#conn-state.ok")
    pg.click("#add-lane")
    pg.wait_for_function("() => document.querySelectorAll('section.lane').length === 3")
    models = [f"sim-fast?ttft_ms={n}&delay_ms=1&length=8&reasoning=0" for n in (21, 22, 23)]
    for i, m in enumerate(models):
        pg.fill(f"{lane(i)} input[name=model]", m)
        pg.locator(f"{lane(i)} input[name=model]").dispatch_event("change")
    for _ in range(50):
        if {r[0] for r in server.query("select model from chat_lane where conversation_id=?", (cid,))} == set(models):
            break
        pg.wait_for_timeout(100)
    pg.click("#blind-toggle")
    pg.wait_for_selector("#conn-state.ok")
    pg.fill("#cmp-content", "Rank us")
    pg.press("#cmp-content", "Enter")
    pg.wait_for_function("() => document.querySelectorAll('.msg-assistant.status-complete').length === 3", timeout=30_000)
    pg.wait_for_selector("#vote-rank")
    assert not any(f"ttft_ms={n}" in pg.content() for n in (21, 22, 23))
    for i, place in enumerate(("3", "1", "2")):
        pg.select_option(f"#vote-rank select[name=rank_{i}]", place)
    pg.click("#vote-rank .vote-rank-submit")
    pg.wait_for_selector(".vote-done")
    assert "a ranking B > C > A" in " ".join(pg.inner_text(".vote-done").split())
    (choice, pos, lanes_json), = server.query("select choice, winner_position, lanes from chat_vote")
    lanes = json.loads(lanes_json)
    assert choice == "rank" and pos == 1 and [x["rank"] for x in lanes] == [3, 1, 2]
    order = [x["settings"]["model"] for x in sorted(lanes, key=lambda x: x["rank"])]
    pg.goto(server.url + "/compare/leaderboard/")
    board = [pg.locator("table.board tbody tr").nth(i).get_attribute("data-model") for i in range(3)]
    assert [next(m for m in models if m in b) for b in board] == order
