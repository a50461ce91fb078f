"""Browser checks of things a new user hit on the chat and compare pages: a simulator scenario
id ("sim-fast?fault=429") is neither flagged as unlisted nor leaves the context meter without a
context length; the chat title field keeps a readable width; a comparison's title shows in its
head and list as soon as the first send names it; lanes with equal speed stay distinguishable
in the speed chart."""

from __future__ import annotations

import re

import pytest

from tests.conftest import create_first_account
from tests.test_compare_browser import FAST, lane, new_comparison, send, set_lane

pytestmark = [pytest.mark.browser]


def test_scenario_model_id_is_listed_and_has_a_context_length(server, page) -> None:  # noqa: ANN001
    pg = page
    pg.set_viewport_size({"width": 1280, "height": 800})
    create_first_account(pg, server)
    pg.wait_for_selector("#content")
    pg.fill("#model", "sim-fast?fault=429")
    pg.wait_for_function("() => document.querySelector('#ctx-meter .ctx-text').textContent.includes('/')")
    text = pg.inner_text("#ctx-meter .ctx-text")
    assert "unknown" not in text and re.search(r"/ \d+ tokens", text), text
    assert pg.is_hidden("#model-hint") and pg.get_attribute("#model", "aria-invalid") is None
    # A model the simulator does not list is still flagged, with or without options.
    pg.fill("#model", "no-such-model?fault=429")
    pg.wait_for_selector("#model-hint:not([hidden])")
    assert "not in this endpoint's model list" in pg.inner_text("#model-hint")
    # The chat title has room to be read at desktop width once the first answer names the chat.
    pg.fill("#model", "sim-fast?fault=429")
    pg.fill("#content", "A title long enough to need a wide field for reading it")
    pg.press("#content", "Enter")
    pg.wait_for_selector("#conv-title:visible")
    assert pg.evaluate("() => document.getElementById('conv-title').getBoundingClientRect().width") >= 240


def test_comparison_title_appears_live_and_equal_lanes_stay_distinct(server, page) -> None:  # noqa: ANN001
    pg = page
    pg.set_viewport_size({"width": 1280, "height": 900})
    create_first_account(pg, server)
    new_comparison(pg, server)
    assert pg.is_visible("#compare-title-empty") and pg.is_hidden("#compare-rename")
    set_lane(pg, 0, FAST)
    set_lane(pg, 1, FAST)
    send(pg, "Rivers in two sentences")
    pg.wait_for_selector("#compare-rename:visible")
    assert pg.input_value("#compare-title") == "Rivers in two sentences"
    assert pg.is_hidden("#compare-title-empty")
    assert pg.inner_text("#compare-list li.current") == "Rivers in two sentences"
    assert pg.title().startswith("Rivers in two sentences")
    for i in (0, 1):
        pg.wait_for_selector(f"{lane(i)} .msg-assistant.status-complete")
    pg.wait_for_selector(".speed-chart polyline.lane-c1")
    dashes = pg.evaluate("""() => Array.from(document.querySelectorAll('.speed-chart polyline.series'))
        .map(l => getComputedStyle(l).strokeDasharray)""")
    assert len(dashes) == 2 and dashes[0] != dashes[1], dashes
    radii = pg.evaluate("() => Array.from(document.querySelectorAll('.speed-chart circle.end')).map(c => +c.getAttribute('r'))")
    assert len(radii) == 2 and radii[0] > radii[1], radii
    # The title survives a reload (it was stored, not only shown).
    pg.reload()
    assert pg.input_value("#compare-title") == "Rivers in two sentences"


def test_a_double_click_on_regenerate_regenerates_once_without_a_false_error(server, page) -> None:  # noqa: ANN001
    pg = page
    create_first_account(pg, server)
    pg.wait_for_selector("#conn-state.ok")
    pg.fill("#model", "sim-fast?ttft_ms=300&delay_ms=5&length=20&reasoning=0")
    pg.fill("#content", "Once please")
    pg.press("#content", "Enter")
    pg.wait_for_selector(".msg-assistant.status-complete")
    before = len([r for r in server.sim_requests() if r["path"].endswith("/chat/completions")])
    pg.dblclick(".msg-assistant button.regenerate")
    pg.wait_for_selector(".msg-assistant.status-complete .siblings")
    pg.wait_for_function("() => document.querySelector('.msg-assistant .siblings').textContent.includes('2/2')")
    pg.wait_for_timeout(500)
    assert "not on the current branch" not in pg.inner_text("#notice")
    after = len([r for r in server.sim_requests() if r["path"].endswith("/chat/completions")])
    assert after - before == 1


def test_share_list_with_a_long_title_does_not_scroll_sideways(server, page) -> None:  # noqa: ANN001
    pg = page
    pg.set_viewport_size({"width": 1280, "height": 800})
    create_first_account(pg, server)
    pg.wait_for_selector("#conn-state.ok")
    pg.fill("#model", "sim-fast?ttft_ms=5&delay_ms=1&length=8&reasoning=0")
    pg.fill("#content", "Short")
    pg.press("#content", "Enter")
    pg.wait_for_selector(".msg-assistant.status-complete")
    pg.wait_for_selector("#conv-title:visible")
    pg.fill("#conv-title", "W" * 200)
    pg.click("#chat-head form.rename button[type=submit]")
    pg.wait_for_load_state("load")
    pg.click(".share summary")
    pg.click(".share-form button[type=submit]")
    pg.wait_for_selector("#new-share-url")
    for width in (1280, 375):
        pg.set_viewport_size({"width": width, "height": 800})
        pg.goto(server.url + "/shares/")
        size = pg.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
        assert size[0] <= size[1], (width, size)
        assert pg.is_visible("#share-links button.danger")


def test_on_a_phone_the_comparisons_panel_unfolds_and_its_links_work(server, page) -> None:  # noqa: ANN001
    pg = page
    create_first_account(pg, server)
    new_comparison(pg, server)
    pg.set_viewport_size({"width": 375, "height": 812})
    pg.reload()
    pg.wait_for_selector(".compare-side-toggle")
    assert pg.is_hidden("#compare-list") and pg.is_hidden(".compare-side a:has-text('Leaderboard')")
    assert pg.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth")
    pg.click(".compare-side-toggle")
    assert pg.is_visible("input[aria-label='Search comparisons']") and pg.is_visible("button:has-text('New comparison')")
    pg.click("a:has-text('Leaderboard')")
    pg.wait_for_url("**/compare/leaderboard/")
    # A desktop shows the panel open, without the toggle.
    pg.set_viewport_size({"width": 1280, "height": 800})
    pg.go_back()
    pg.reload()
    assert pg.is_visible("a:has-text('Leaderboard')") and pg.is_hidden(".compare-side-toggle")
