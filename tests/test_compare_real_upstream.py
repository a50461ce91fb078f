"""Compare against a real llama.cpp ``llama-server``: two lanes on two API styles answer the
same prompt, and the turn table's token counts equal llama-server's own usage."""

from __future__ import annotations

import json

import pytest

from tests.conftest import create_first_account
from tests.test_compare_browser import lane, new_comparison, send
from tests.test_real_upstream import (  # noqa: F401  (module fixtures)
    QUESTION,
    STYLE_PATHS,
    SYSTEM,
    llama_paths_or_skip,
    smollm,
    upstream_counts,
)

pytestmark = [pytest.mark.real_upstream, pytest.mark.browser]

STYLES = ("openai_chat", "anthropic_messages")


def test_two_lanes_two_api_styles_table_counts_equal_llama_usage(server, page, smollm) -> None:  # noqa: ANN001, F811
    pg = page
    create_first_account(pg, server)
    for style in STYLES:
        pg.goto(server.url + "/endpoints/new/")
        pg.fill("#id_name", f"llama {style}")
        pg.fill("#id_base_url", smollm.base_url)
        pg.select_option("#id_api_style", style)
        pg.click("button:has-text('Save endpoint')")
        pg.wait_for_url("**/endpoints/")
    new_comparison(pg, server)
    for i, style in enumerate(STYLES):
        pg.select_option(f"{lane(i)} select[name=endpoint_id]", label=f"llama {style}")
        pg.fill(f"{lane(i)} input[name=model]", "smollm2")
        pg.fill(f"{lane(i)} input[name=temperature]", "0")
        pg.fill(f"{lane(i)} input[name=max_tokens]", "40")
        pg.click(f"{lane(i)} .lane-more summary")
        pg.fill(f"{lane(i)} textarea[name=system_prompt]", SYSTEM)
    before = {s: smollm.requested_paths().count(STYLE_PATHS[s]) for s in STYLES}
    send(pg, QUESTION)
    pg.wait_for_function("() => document.querySelectorAll('.msg-assistant.status-complete').length === 2",
                         timeout=180_000)
    for s in STYLES:  # each lane called its own API style, once
        assert smollm.requested_paths().count(STYLE_PATHS[s]) == before[s] + 1
    pg.wait_for_selector("#compare-summary tr[data-lane-index='1'] td[data-col='completion_tokens']")
    pg.wait_for_timeout(500)
    for i, style in enumerate(STYLES):
        assert "Paris" in pg.inner_text(f"{lane(i)} .answer")
        raw = json.loads(server.query(
            "select m.usage_raw from chat_message m join chat_lane l on m.lane_id=l.id "
            "join chat_conversation c on c.id=l.conversation_id where c.kind='compare' and l.position=?", (i,))[0][0])
        prompt, completion = upstream_counts(style, raw)
        row = f"#compare-summary tr[data-lane-index='{i}']"
        assert pg.inner_text(f"{row} td[data-col='prompt_tokens']") == str(prompt)
        assert pg.inner_text(f"{row} td[data-col='completion_tokens']").startswith(str(completion))
