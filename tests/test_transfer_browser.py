"""Browser: a comparison exported as JSON and Markdown from the compare page and imported back
through the Share links page's Import form (the copy exports the same file), and the admin's
switch for public share links (a logged-out viewer is refused once it is off) — issue 13."""

from __future__ import annotations

import json
import re

import pytest

from tests.conftest import create_first_account

pytestmark = [pytest.mark.browser]

LANE = "section.lane"
A = "sim-fast?ttft_ms=20&delay_ms=2&length=14&reasoning=0"
B = "sim-reasoning?ttft_ms=30&delay_ms=2&length=10&reasoning_length=6"


def lane(i: int) -> str:
    return f"{LANE}[data-lane-index='{i}']"


def test_comparison_export_json_markdown_and_import_round_trip(server, page, tmp_path) -> None:  # noqa: ANN001
    pg = page
    create_first_account(pg, server)
    pg.goto(server.url + "/compare/")
    pg.click("#start-compare")
    pg.wait_for_url(re.compile(r".*/compare/\d+/$"))
    pg.wait_for_selector("#conn-state.ok")
    src = int(pg.url.rstrip("/").split("/")[-1])
    pg.fill(f"{lane(0)} input[name=model]", A)
    pg.fill(f"{lane(1)} input[name=model]", B)
    pg.fill(f"{lane(1)} [name=temperature]", "0.3")
    pg.wait_for_timeout(300)  # the lane forms save on change
    for text in ("First question", "Second question"):
        pg.fill("#cmp-content", text)
        pg.press("#cmp-content", "Enter")
        pg.wait_for_function("(t) => [...document.querySelectorAll('section.lane')].every(l => "
                             "[...l.querySelectorAll('.msg-assistant.status-complete')].length >= t)",
                             arg=1 if text.startswith("First") else 2, timeout=30_000)
    answers = [pg.inner_text(f"{lane(i)} .msg-assistant >> nth=-1 >> .answer") for i in range(2)]
    # Export JSON and Markdown from the page's buttons.
    pg.click("#export-compare summary")
    with pg.expect_download() as dl:
        pg.click("#export-compare-json")
    path = tmp_path / "comparison.json"
    dl.value.save_as(path)
    data = json.loads(path.read_text())
    assert data["kind"] == "comparison" and data["format"] == "playground.comparison/1"
    assert [t["prompt"] for t in data["turns"]] == ["First question", "Second question"]
    assert [ln["model"] for ln in data["lanes"]] == [A, B] and data["lanes"][1]["params"]["temperature"] == 0.3
    assert all(a["metrics"].get("ttft_ms") for t in data["turns"] for a in t["answers"])
    assert "sim://" not in path.read_text() and "base_url" not in path.read_text()
    with pg.expect_download() as dl:
        pg.click("#export-compare-md")
    md_path = tmp_path / "comparison.md"
    dl.value.save_as(md_path)
    md = md_path.read_text()
    assert "## Turn 2" in md and answers[0].strip()[:20] in md and "TTFT" in md
    # Import it where conversations are imported.
    pg.goto(server.url + "/shares/")
    pg.set_input_files("#import-conversation input[name=file]", str(path))
    pg.click("#import-conversation button[type=submit]")
    pg.wait_for_url(re.compile(r".*/compare/\d+/$"))
    new = int(pg.url.rstrip("/").split("/")[-1])
    assert new != src
    assert "Comparison imported" in pg.inner_text("body") and "your endpoint “Built-in simulator”" in pg.inner_text("body")
    assert [pg.inner_text(f"{lane(i)} .msg-assistant >> nth=-1 >> .answer") for i in range(2)] == answers
    assert pg.locator(f"{lane(0)} .cmp-user").count() == 2
    again = pg.request.get(f"{server.url}/compare/{new}/export.json").json()
    original = {k: v for k, v in data.items() if k != "exported_at"}
    assert {k: v for k, v in again.items() if k != "exported_at"} == original
    # A lane whose endpoint the importer does not have comes in with no endpoint, and says so.
    other = tmp_path / "other.json"
    other.write_text(json.dumps({**data, "lanes": [data["lanes"][0], {**data["lanes"][1], "endpoint_name": "Gone box"}]}))
    pg.goto(server.url + "/shares/")
    pg.set_input_files("#import-conversation input[name=file]", str(other))
    pg.click("#import-conversation button[type=submit]")
    pg.wait_for_url(re.compile(r".*/compare/\d+/$"))
    assert "Lane B: no endpoint (you have none named “Gone box”)" in pg.inner_text("body")
    assert pg.input_value(f"{lane(1)} select[name=endpoint_id]") == ""
    assert pg.inner_text(f"{lane(1)} select[name=endpoint_id] option:checked") == "— pick an endpoint —"
    # A bad file: refused with the reason, nothing imported.
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**data, "lanes": data["lanes"][:1]}))
    pg.goto(server.url + "/shares/")
    pg.set_input_files("#import-conversation input[name=file]", str(bad))
    pg.click("#import-conversation button[type=submit]")
    pg.wait_for_url("**/shares/")
    assert "Import refused" in pg.inner_text("body") and "2 to 6 lanes" in pg.inner_text("body")
    assert server.query("select count(*) from chat_conversation where kind='compare'") == [(3,)]


def test_admin_forbids_public_links_and_a_logged_out_viewer_is_refused(server, page, chromium) -> None:  # noqa: ANN001
    pg = page
    create_first_account(pg, server)
    pg.wait_for_selector("#conn-state.ok")
    pg.fill("#model", "sim-fast?ttft_ms=5&delay_ms=1&length=12")
    pg.fill("#content", "Public for now")
    pg.press("#content", "Enter")
    pg.wait_for_selector(".msg-assistant.status-complete", timeout=30_000)
    chat_url = pg.url
    pg.click(".share summary")
    assert pg.locator(".share-form select[name=visibility] option[value=link]").count() == 1
    pg.select_option(".share-form select[name=visibility]", "link")
    pg.click(".share-form button[type=submit]")
    url = pg.inner_text("#new-share-url")
    ctx = chromium.new_context()
    anon = ctx.new_page()
    try:
        assert anon.goto(url).status == 200
        assert "Public for now" in anon.inner_text("body")
        # The admin flips the switch on the Users page.
        pg.goto(server.url + "/users/")
        assert pg.input_value("#public-links-select") == "default"
        pg.select_option("#public-links-select", "off")
        pg.click("#save-public-links")
        pg.wait_for_url("**/users/")
        assert "Public share links are forbidden." in pg.inner_text("body")
        assert "forbidden" in pg.inner_text("#public-links-now")
        assert pg.input_value("#public-links-select") == "off"
        # The logged-out viewer now gets the clear page, not the snapshot.
        r = anon.goto(url)
        assert r.status == 404
        assert "Public links are switched off" in anon.inner_text("#share-gone")
        assert "Public for now" not in anon.inner_text("body")
        assert anon.locator("#share-gone a[href*='/accounts/login/?next=']").count() == 1
        # The share form no longer offers it; the signed-in admin can still open the link.
        pg.goto(chat_url)
        pg.click(".share summary")
        assert pg.locator(".share-form select[name=visibility] option[value=link]").count() == 0
        assert pg.locator(".share-form select[name=visibility] option[value=site]").count() == 1
        assert pg.goto(url).status == 200
        # Back to the server default (allowed): the link opens again for everyone.
        pg.goto(server.url + "/users/")
        pg.select_option("#public-links-select", "default")
        pg.click("#save-public-links")
        pg.wait_for_url("**/users/")
        assert anon.goto(url).status == 200
    finally:
        ctx.close()
