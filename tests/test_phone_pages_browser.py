"""No page scrolls sideways on a phone (issue 10 "Layout and flow"), including the pages built
beside the chat: compare, leaderboard, prompts, new prompt, shares, modes, teams and usage."""

from __future__ import annotations

import re

import pytest

from tests.conftest import create_first_account

pytestmark = [pytest.mark.browser]

WIDE = """() => [...document.querySelectorAll('body *')]
  .filter(e => e.getBoundingClientRect().right > window.innerWidth + 1 && !e.closest('pre, .table-scroll, .codeblock, [hidden]'))
  .slice(0, 5).map(e => e.tagName + '.' + e.className + '#' + e.id + ' ' + Math.round(e.getBoundingClientRect().right))"""


def test_no_page_scrolls_sideways_at_375_px(server, page) -> None:  # noqa: ANN001
    pg = page
    create_first_account(pg, server)
    pg.goto(server.url + "/compare/")
    pg.click("#start-compare")
    pg.wait_for_url(re.compile(r".*/compare/\d+/$"))
    compare_url = pg.url
    pg.set_viewport_size({"width": 375, "height": 812})
    for path in (compare_url, "/compare/", "/compare/leaderboard/", "/prompts/", "/prompts/new/", "/shares/",
                 "/modes/", "/teams/", "/usage/"):
        pg.goto(path if path.startswith("http") else server.url + path)
        pg.wait_for_load_state("load")
        width = pg.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
        assert width[0] <= width[1], (path, width, pg.evaluate(WIDE))
