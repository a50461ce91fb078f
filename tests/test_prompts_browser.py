"""Browser: the prompt library end to end on the live daphne server and built-in simulator.

Create a prompt with two variables, save three versions, diff v1 and v3, restore v1, label v2
``production`` and fetch it through the API with a token; use v2 in chat (missing variable
reported first; the upstream receives the filled template; the turn records the version);
"Save as prompt" from that conversation; export and import back.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from tests.conftest import create_first_account

pytestmark = [pytest.mark.browser]

MODEL = "sim-fast?ttft_ms=5&delay_ms=1&length=10"
DOCS = Path(__file__).resolve().parent.parent / "docs"


def save_version(pg, *, message: str, temperature: str, note: str = "") -> None:  # noqa: ANN001
    pg.fill("textarea[name=msg_content_0]", message)
    pg.fill("input[name=temperature]", temperature)
    pg.fill("input[name=version_message]", note)
    pg.click("#save-prompt")
    pg.wait_for_selector("#versions")


def test_prompt_library_versions_diff_labels_api_use_in_chat(server, page, tmp_path) -> None:  # noqa: ANN001
    pg = page
    create_first_account(pg, server)
    pg.goto(server.url + "/prompts/")
    pg.click("#new-prompt")
    pg.fill("#id_name", "greeter")
    pg.fill("#id_tags", "demo, greetings")
    pg.fill("#id_system_prompt", "You greet {{name}} politely.")
    pg.fill("input[name=model]", MODEL)
    save_version(pg, message="Say hi to {{name}} in {{lang}}.", temperature="0.2")
    assert pg.inner_text("#shown-version") == "v1"
    assert [pg.locator("code.var").nth(i).inner_text() for i in range(2)] == ["name", "lang"]
    pid = int(pg.url.rstrip("/").split("/")[-1])
    pg.click("#edit-prompt")
    save_version(pg, message="Say hello to {{name}} in {{lang}}.", temperature="0.2", note="warmer")
    pg.click("#edit-prompt")
    save_version(pg, message="Say hello to {{name}} in {{lang}}.", temperature="0.9")
    assert pg.inner_text("#shown-version") == "v3"
    assert pg.locator("#versions tbody tr").count() == 3
    # Diff v1 → v3 (the form's defaults: oldest → newest).
    pg.click("#diff-form button[type=submit]")
    pg.wait_for_selector(".field-diff")
    adds = pg.locator(".d-add").all_inner_texts()
    dels = pg.locator(".d-del").all_inner_texts()
    assert "+Say hello to {{name}} in {{lang}}." in adds and "-Say hi to {{name}} in {{lang}}." in dels
    assert any('"temperature": 0.9' in a for a in adds) and any('"temperature": 0.2' in d for d in dels)
    assert pg.locator(".field-diff").first.inner_text().startswith("System prompt unchanged")
    assert pg.locator(".field-diff.changed h2").all_inner_texts() == ["Message 1", "Config"]
    DOCS.mkdir(exist_ok=True)
    pg.set_viewport_size({"width": 1200, "height": 900})
    pg.screenshot(path=str(DOCS / "prompts-diff.png"), full_page=True)
    # Restore v1 → v4 equal to v1.
    pg.goto(f"{server.url}/prompts/{pid}/")
    pg.click("#version-1 button.restore")
    pg.wait_for_selector("#versions tbody tr:nth-child(4)")
    assert pg.inner_text("#shown-version") == "v4"
    assert "Say hi to {{name}} in {{lang}}." in pg.inner_text(".tpl-msg")
    # Label v2 production; the move is listed.
    pg.fill("#label-form input[name=label]", "production")
    pg.select_option("#label-form select[name=number]", "2")
    pg.click("#label-form button[type=submit]")
    pg.wait_for_selector("#version-2 .chip.label:text-is('production')")
    assert "new → v2" in pg.inner_text("#label-moves")
    pg.screenshot(path=str(DOCS / "prompts.png"), full_page=True)
    # API with a token.
    pg.goto(server.url + "/prompts/tokens/")
    pg.fill("input[name=name]", "my app")
    pg.click("#create-token")
    token = pg.inner_text("#new-token")
    pg.reload()  # shown once, and a reload makes no second token
    assert pg.locator("#new-token").count() == 0
    assert server.query("select count(*) from chat_apitoken")[0][0] == 1
    r = httpx.get(f"{server.url}/api/prompts/greeter?label=production", headers={"Authorization": f"Bearer {token}"})
    body = r.json()
    assert r.status_code == 200 and body["version"] == 2 and body["variables"] == ["name", "lang"]
    assert body["messages"] == [{"role": "user", "content": "Say hello to {{name}} in {{lang}}."}]
    assert body["config"]["params"] == {"temperature": 0.2} and body["config"]["model"] == MODEL
    assert httpx.get(f"{server.url}/api/prompts/greeter?label=production").status_code == 401
    assert token not in str(server.query("select token_hash, hint from chat_apitoken"))
    # Use v2 in chat: a missing variable is reported before anything is sent.
    pg.goto(f"{server.url}/prompts/{pid}/v/2/")
    pg.click("#use-prompt")
    pg.fill("textarea[name=name]", "Ada")
    pg.click("#use-submit")
    pg.wait_for_selector("#missing-vars")
    assert "lang" in pg.inner_text("#missing-vars")
    assert not [r for r in server.sim_requests() if r["path"].endswith("/chat/completions")]
    pg.fill("textarea[name=lang]", "French")
    pg.click("#use-submit")
    pg.wait_for_url("**/c/**")
    pg.wait_for_selector(".msg-assistant.status-complete", timeout=30_000)
    assert pg.inner_text(".msg-user .user-text") == "Say hello to Ada in French."
    sent = [r for r in server.sim_requests() if r["path"].endswith("/chat/completions")]
    assert len(sent) == 1
    msgs = sent[0]["body"]["messages"]
    assert msgs[0] == {"role": "system", "content": "You greet Ada politely."}
    assert msgs[-1]["content"] == "Say hello to Ada in French." and sent[0]["body"]["temperature"] == 0.2
    v2_id = server.query("select v.id from chat_promptversion v where v.prompt_id=? and v.number=2", (pid,))[0][0]
    rows = server.query("select role, prompt_version_id from chat_message order by created_at")
    assert rows == [("user", v2_id), ("assistant", v2_id)]
    # A reload does not send again; a second message in the chat does not claim the prompt.
    pg.reload()
    pg.wait_for_selector(".msg-assistant.status-complete")
    pg.fill("#content", "Thanks")
    pg.press("#content", "Enter")
    pg.wait_for_selector(".msg-assistant.status-complete >> nth=1", timeout=30_000)
    rows = server.query("select role, prompt_version_id from chat_message order by created_at")
    assert len(rows) == 4 and rows[2:] == [("user", None), ("assistant", None)]
    # Save as prompt from the conversation.
    pg.click(".save-as-prompt summary")
    pg.fill(".save-as-prompt input[name=name]", "from chat")
    pg.click(".save-as-prompt button[type=submit]")
    pg.wait_for_selector("#versions")
    assert "You greet Ada politely." in pg.inner_text("#system-prompt")
    assert pg.locator(".tpl-msg").count() == 4
    # Export, then import under another name: same versions and labels.
    pg.goto(f"{server.url}/prompts/{pid}/")
    with pg.expect_download() as dl:
        pg.click("#export-prompt")
    path = tmp_path / "greeter.json"
    dl.value.save_as(path)
    data = json.loads(path.read_text())
    assert [v["number"] for v in data["versions"]] == [1, 2, 3, 4] and data["labels"] == {"production": 2}
    pg.goto(server.url + "/prompts/")
    pg.set_input_files("input[name=file]", str(path))
    pg.fill("input[name=name]", "greeter copy")
    pg.click("form[action$='/prompts/import/'] button[type=submit]")
    pg.wait_for_selector("#versions")
    assert pg.locator("#versions tbody tr").count() == 4
    assert pg.locator("#version-2 .chip.label").inner_text() == "production"
    # The library lists all three, most recently used first, and filters by tag.
    pg.goto(server.url + "/prompts/")
    assert pg.locator(".prompt-name").first.inner_text() == "greeter"
    pg.goto(server.url + "/prompts/?tag=demo")
    assert sorted(pg.locator(".prompt-name").all_inner_texts()) == ["greeter", "greeter copy"]


def test_share_link_logged_out_revoked_and_expired(server, page, chromium) -> None:  # noqa: ANN001
    pg = page
    create_first_account(pg, server)
    pg.wait_for_selector("#conn-state.ok")
    pg.fill("#model", "sim-reasoning?ttft_ms=5&delay_ms=1&length=12&reasoning_length=6")
    pg.fill("#content", "Share **this** please")
    pg.press("#content", "Enter")
    pg.wait_for_selector(".msg-assistant.status-complete", timeout=30_000)
    answer = pg.inner_text(".msg-assistant .answer")
    pg.click(".share summary")
    pg.select_option(".share-form select[name=expires]", "1d")
    pg.click(".share-form button[type=submit]")
    url = pg.inner_text("#new-share-url")
    # Logged out, in a fresh browser context.
    ctx = chromium.new_context()
    anon = ctx.new_page()
    try:
        r = anon.goto(url)
        assert r.status == 200 and r.headers["referrer-policy"] == "same-origin"
        assert anon.inner_text(".shared-user .user-text") == "Share **this** please"
        assert anon.inner_text(".shared-assistant .answer") == answer
        assert anon.locator(".shared-assistant .answer script").count() == 0
        assert anon.locator(".thinking").count() == 0  # reasoning was not included
        assert anon.locator("#continue-copy").count() == 0
        assert "TTFT" in anon.inner_text(".shared-metrics")
        page_html = anon.content()
        assert "sim://" not in page_html and "/simulator/v1" not in page_html
        # The owner signed in can continue as a copy.
        pg.goto(url)
        pg.click("#continue-copy")
        pg.wait_for_url("**/c/**")
        pg.wait_for_selector(".msg-assistant.status-complete")
        assert "(copy)" in pg.input_value("input[name=title]")
        # Expired: a clear 404 page.
        server.query("select 1")
        import sqlite3

        con = sqlite3.connect(server.db)
        con.execute("update chat_sharelink set expires_at = '2000-01-01 00:00:00'")
        con.commit()
        con.close()
        r = anon.goto(url)
        assert r.status == 404 and "This link has expired" in anon.inner_text("#share-gone")
        con = sqlite3.connect(server.db)
        con.execute("update chat_sharelink set expires_at = NULL")
        con.commit()
        con.close()
        assert anon.goto(url).status == 200
        # Revoked: 404 for everyone, logged in or not.
        pg.goto(server.url + "/shares/")
        pg.click("#share-links button[name=revoke]")
        pg.wait_for_selector("#share-links td.state:text-is('revoked')")
        r = anon.goto(url)
        assert r.status == 404 and "This link was revoked" in anon.inner_text("#share-gone")
        assert pg.goto(url).status == 404
    finally:
        ctx.close()


def test_test_set_run_in_two_lanes_pass_rates_match_stored_answers(server, page) -> None:  # noqa: ANN001
    from chat.prompts import checks

    pg = page
    create_first_account(pg, server)
    pg.goto(server.url + "/prompts/new/")
    pg.fill("#id_name", "capitals")
    pg.fill("#id_system_prompt", "Answer with the capital only.")
    pg.fill("textarea[name=msg_content_0]", "Capital of {{country}}?")
    pg.fill("input[name=model]", "sim-fast?ttft_ms=5&delay_ms=5&length=60")
    pg.click("#save-prompt")
    pg.wait_for_selector("#versions")
    pg.click("#new-testset")
    pg.fill("#testset-form input[name=name]", "five countries")
    pg.fill("#rows", "country,check:contains\nFrance,France\nJapan,Japan\nPeru,Peru\nKenya,Kenya\nChile,Atlantis\n")
    pg.fill("#checks", "contains: Simulated\nmax_ttft_ms: 2000")
    pg.click("#save-testset")
    pg.wait_for_selector("#run-form")
    assert pg.locator("#missing-vars").count() == 0
    pg.select_option("select[name=lane_version_1]", "1")
    pg.fill("input[name=lane_model_1]", "sim-fast?ttft_ms=3000&delay_ms=5&length=60")
    pg.click("#run-testset")
    pg.wait_for_url("**/prompts/runs/**")
    pg.wait_for_selector("#run-grid[data-done=true]", timeout=60_000)
    lanes = pg.locator(".lane-summary")
    shown = [(int(lanes.nth(i).get_attribute("data-passed")), int(lanes.nth(i).get_attribute("data-done"))) for i in range(2)]
    assert shown == [(4, 5), (0, 5)]
    assert pg.locator(".lane-summary .pass-rate").all_inner_texts()[0].startswith("80.0%")
    assert pg.locator(".run-grid td.cell.fail").count() == 6 and pg.locator(".run-grid td.cell.pass").count() == 4
    # Recompute from the stored answers: the same pass counts.
    stored = server.query(
        "select c.lane, c.row, m.content, m.metrics, m.status, m.prompt_version_id from chat_testruncell c "
        "join chat_message m on m.id = c.message_id order by c.lane, c.row")
    assert len(stored) == 10 and all(s[4] == "complete" and s[5] is not None for s in stored)
    rows_expect = ["France", "Japan", "Peru", "Kenya", "Atlantis"]
    recomputed = [0, 0]
    for lane, row, content, metrics, _, _ in stored:
        results = checks.run_checks([{"type": "contains", "arg": "Simulated"}, {"type": "max_ttft_ms", "arg": 2000.0},
                                     {"type": "contains", "arg": rows_expect[row]}], content, json.loads(metrics))
        recomputed[lane] += all(r["ok"] for r in results)
    assert recomputed == [4, 0]
    # The upstream received the filled template in every cell.
    sent = [r["body"]["messages"][-1]["content"] for r in server.sim_requests() if r["path"].endswith("/chat/completions")]
    assert sorted(sent) == sorted([f"Capital of {c}?" for c in ["France", "Japan", "Peru", "Kenya", "Chile"]] * 2)
    assert "TTFT" in pg.inner_text(".cell-metrics >> nth=0") and "tok/s" in pg.inner_text(".cell-metrics >> nth=0")
    pg.screenshot(path=str(DOCS / "prompts-testrun.png"), full_page=True)


def test_test_set_run_can_be_stopped(server, page) -> None:  # noqa: ANN001
    pg = page
    create_first_account(pg, server)
    pg.goto(server.url + "/prompts/new/")
    pg.fill("#id_name", "slow")
    pg.fill("textarea[name=msg_content_0]", "Tell me about {{topic}}")
    pg.fill("input[name=model]", "sim-fast?ttft_ms=5&delay_ms=200&length=400")
    pg.click("#save-prompt")
    pg.wait_for_selector("#versions")
    pg.click("#new-testset")
    pg.fill("#rows", "topic\ncats\ndogs\n")
    pg.click("#save-testset")
    pg.click("#run-testset")
    pg.wait_for_url("**/prompts/runs/**")
    pg.wait_for_selector("#run-grid[data-done=false]")
    pg.wait_for_function("() => document.querySelectorAll('.cell-status').length === 2")
    pg.click("#stop-run")
    pg.wait_for_selector("#run-grid[data-done=true]", timeout=20_000)
    assert pg.locator(".run-grid td.cell.fail").count() == 2
    assert pg.locator(".cell-checks li:has-text('status')").count() == 2
    rows = server.query("select m.status, length(m.content) from chat_testruncell c join chat_message m on m.id = c.message_id")
    assert [r[0] for r in rows] == ["stopped", "stopped"] and all(r[1] > 0 for r in rows)


def test_export_then_import_a_branched_conversation_with_an_image(server, page, tmp_path) -> None:  # noqa: ANN001
    import base64

    png = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAwS2OUAAAAABJRU5ErkJggg==")
    pg = page
    create_first_account(pg, server)
    pg.wait_for_selector("#conn-state.ok")
    pg.fill("#model", "sim-fast?ttft_ms=5&delay_ms=1&length=12")
    pg.set_input_files("#attach-file", files=[{"name": "dot.png", "mimeType": "image/png", "buffer": png}])
    pg.wait_for_selector("#attach-chips .chip:has-text('dot.png')")
    pg.fill("#content", "What is in the picture?")
    pg.press("#content", "Enter")
    pg.wait_for_selector(".msg-assistant.status-complete")
    pg.click(".msg-assistant button.regenerate")
    pg.wait_for_function("() => document.querySelector('.msg-assistant .siblings') && "
                         "document.querySelector('.msg-assistant .siblings').textContent.includes('2/2')")
    pg.wait_for_selector(".msg-assistant.status-complete")
    src_id = int(pg.url.rstrip("/").split("/")[-1])
    pg.click(".export summary")
    with pg.expect_download() as dl:
        pg.click("#export-json")
    path = tmp_path / "conv.json"
    dl.value.save_as(path)
    pg.goto(server.url + "/shares/")
    pg.set_input_files("#import-conversation input[name=file]", str(path))
    pg.click("#import-conversation button[type=submit]")
    pg.wait_for_url("**/c/**")
    pg.wait_for_selector(".msg-user img.thumb")
    new_id = int(pg.url.rstrip("/").split("/")[-1])
    assert new_id != src_id
    assert "2/2" in pg.inner_text(".msg-assistant .siblings")

    def shape(cid: int) -> list[tuple]:
        rows = server.query("select id, parent_id, role, content, status, usage, metrics, settings_snapshot from chat_message "
                            "where conversation_id=? order by created_at, id", (cid,))
        index = {r[0]: i for i, r in enumerate(rows)}
        atts = server.query("select m.created_at, a.data, a.filename from chat_attachment a join chat_message m on m.id = a.message_id "
                            "where m.conversation_id=?", (cid,))
        snap = [{k: v for k, v in json.loads(r[7]).items() if k not in ("endpoint_id", "base_url", "team_id")} for r in rows]
        return [(index.get(r[1]), r[2], r[3], r[4], r[5], r[6], s) for r, s in zip(rows, snap, strict=True)] + [
            sorted((bytes(a[1]), a[2]) for a in atts)]

    assert shape(new_id) == shape(src_id)
    assert len(shape(src_id)) == 4  # user, two answers, attachments


def test_judge_check_on_the_simulator(server, page) -> None:  # noqa: ANN001
    pg = page
    create_first_account(pg, server)
    pg.goto(server.url + "/prompts/new/")
    pg.fill("#id_name", "judged")
    pg.fill("textarea[name=msg_content_0]", "Name a fruit that is {{colour}}")
    pg.fill("input[name=model]", "sim-fast?ttft_ms=5&delay_ms=1&length=12")
    pg.click("#save-prompt")
    pg.wait_for_selector("#versions")
    pg.click("#new-testset")
    pg.fill("#rows", "colour\nred\n")
    pg.fill("#checks", "judge: Does the answer name a fruit?")
    pg.click("#save-testset")
    pg.wait_for_selector("#testset-error")
    assert "needs a judge endpoint" in pg.inner_text("#testset-error")
    pg.select_option("select[name=judge_endpoint_id]", label="Built-in simulator")
    pg.fill("input[name=judge_model]", "sim-fast?ttft_ms=5&delay_ms=1&length=8")
    pg.click("#save-testset")
    pg.wait_for_selector("#run-form")
    pg.click("#run-testset")
    pg.wait_for_url("**/prompts/runs/**")
    pg.wait_for_selector("#run-judge", timeout=30_000)
    assert pg.locator(".cell-checks li.pending").count() == 1
    n_before = len([r for r in server.sim_requests() if r["path"].endswith("/chat/completions")])
    pg.click("#run-judge")
    pg.wait_for_selector(".judge-io")
    sent = [r for r in server.sim_requests() if r["path"].endswith("/chat/completions")]
    assert len(sent) == n_before + 1
    judge_req = sent[-1]["body"]
    assert judge_req["model"] == "sim-fast?ttft_ms=5&delay_ms=1&length=8" and "Rubric: Does the answer name a fruit?" in judge_req["messages"][-1]["content"]
    # The simulator does not say "yes": the check fails, with the judge's answer shown.
    assert pg.locator(".run-grid td.cell.fail").count() == 1
    pg.click(".judge-io summary")
    assert "Simulated" in pg.inner_text(".judge-answer")
    assert pg.locator("#run-judge").count() == 0
