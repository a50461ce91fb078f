"""A prompt's test set run on a real llama.cpp ``llama-server`` (SmolLM2-135M) with a
JSON-schema check: the grammar-constrained answers pass, and the page's pass rate equals the
checks recomputed from the stored answers."""

from __future__ import annotations

import json

import pytest

from tests.conftest import create_first_account
from tests.llama import llama_paths, missing_reason, start_llama_server
from tests.test_real_upstream import add_endpoint

pytestmark = [pytest.mark.real_upstream, pytest.mark.browser]

SCHEMA = {"type": "object", "properties": {"capital": {"type": "string", "maxLength": 30}},
          "required": ["capital"], "additionalProperties": False}


@pytest.fixture(scope="module")
def smollm():  # noqa: ANN201
    paths = llama_paths()
    if paths is None:
        pytest.skip(missing_reason())
    srv = start_llama_server(paths[1])
    yield srv
    srv.stop()


def test_test_set_on_llama_server_with_json_schema_check(server, page, smollm) -> None:  # noqa: ANN001
    from chat.prompts import checks

    pg = page
    create_first_account(pg, server)
    add_endpoint(pg, server, "llama", smollm.base_url)
    pg.goto(server.url + "/prompts/new/")
    pg.fill("#id_name", "capital-json")
    pg.fill("#id_system_prompt", "You are a helpful assistant. Answer in JSON.")
    pg.fill("textarea[name=msg_content_0]", "What is the capital of {{country}}?")
    pg.select_option("#id_endpoint_id", label="llama")
    pg.fill("input[name=model]", "smollm2")
    pg.fill("input[name=temperature]", "0")
    pg.fill("input[name=max_tokens]", "120")
    pg.select_option("select[name=response_format]", "json_schema")
    pg.fill("input[name=schema_name]", "capital")
    pg.fill("textarea[name=json_schema]", json.dumps(SCHEMA))
    pg.click("#save-prompt")
    pg.wait_for_selector("#versions")
    pg.click("#new-testset")
    pg.fill("#rows", "country\nFrance\nItaly\n")
    pg.fill("#checks", "json\nschema: " + json.dumps(SCHEMA))
    pg.click("#save-testset")
    pg.wait_for_selector("#run-form")
    pg.select_option("select[name=lane_endpoint_0]", label="llama")
    pg.click("#run-testset")
    pg.wait_for_url("**/prompts/runs/**")
    pg.wait_for_selector("#run-grid[data-done=true]", timeout=180_000)
    stored = server.query(
        "select m.content, m.metrics, m.status from chat_testruncell c join chat_message m on m.id = c.message_id")
    assert len(stored) == 2 and all(s[2] == "complete" for s in stored), stored
    recomputed = sum(all(r["ok"] for r in checks.run_checks(
        [{"type": "json", "arg": ""}, {"type": "schema", "arg": SCHEMA}], content, json.loads(metrics)))
        for content, metrics, _ in stored)
    assert recomputed == 2, stored
    lane = pg.locator(".lane-summary").first
    assert (lane.get_attribute("data-passed"), lane.get_attribute("data-done")) == ("2", "2")
    assert "/v1/chat/completions" in smollm.requested_paths()
