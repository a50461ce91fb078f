"""Issue 10: axe-core on the pages tests/test_ui_browser.py does not visit, in light and dark,
at 1280 and 375 px: compare (start, a comparison with answers, the leaderboard),
prompts (list, detail, edit, diff, test set, run), modes (completion, embeddings, audio, a run,
its code and Inspect pages), teams (list, a team, usage), sharing (the list and a shared view).
No serious or critical violation on any of them, and at 375 px none scrolls sideways (all
pages' problems are reported together).
"""

from __future__ import annotations

import re

import pytest

from tests.conftest import create_first_account
from tests.test_phone_pages_browser import WIDE
from tests.test_ui_browser import DESKTOP, PHONE, axe

pytestmark = [pytest.mark.browser]

FAST = "sim-fast?ttft_ms=5&delay_ms=1&length=12&reasoning=0"
LANE = "#lanes .lane"


def seed(pg, server) -> dict[str, str]:  # noqa: ANN001
    """Make one of everything through the UI; returns page name → URL."""
    u = server.url
    urls: dict[str, str] = {}
    create_first_account(pg, server)
    pg.wait_for_selector("#conn-state.ok")
    pg.fill("#model", FAST)
    pg.fill("#content", "Share **this** please")
    pg.press("#content", "Enter")
    pg.wait_for_selector(".msg-assistant.status-complete", timeout=30_000)
    pg.click(".share summary")
    pg.click(".share-form button[type=submit]")
    urls["shared view"] = pg.inner_text("#new-share-url")
    urls["shares"] = u + "/shares/"
    # Compare: the start page, then a comparison with answers in two lanes.
    urls["compare start"] = u + "/compare/"
    pg.goto(urls["compare start"])
    pg.click("#start-compare")
    pg.wait_for_url(re.compile(r".*/compare/\d+/$"))
    pg.wait_for_selector("#conn-state.ok")
    for i in (0, 1):
        pg.fill(f"{LANE}[data-lane-index='{i}'] input[name=model]", FAST)
    pg.fill("#cmp-content", "Compare this")
    pg.press("#cmp-content", "Enter")
    for i in (0, 1):
        pg.wait_for_selector(f"{LANE}[data-lane-index='{i}'] .msg-assistant.status-complete", timeout=30_000)
    urls["comparison"] = pg.url
    urls["leaderboard"] = u + "/compare/leaderboard/"
    # Prompts: two versions, their diff, a test set and a run of it.
    pg.goto(u + "/prompts/new/")
    pg.fill("#id_name", "greeter")
    pg.fill("#id_system_prompt", "You greet {{name}} politely.")
    pg.fill("textarea[name=msg_content_0]", "Say hi to {{name}}.")
    pg.fill("input[name=model]", FAST)
    pg.click("#save-prompt")
    pg.wait_for_selector("#versions")
    urls["prompt"] = pg.url
    pg.click("#edit-prompt")
    urls["prompt edit"] = pg.url
    pg.fill("textarea[name=msg_content_0]", "Say hello to {{name}}.")
    pg.click("#save-prompt")
    pg.wait_for_selector("#versions")
    pg.click("#diff-form button[type=submit]")
    pg.wait_for_selector(".field-diff")
    urls["prompt diff"] = pg.url
    pg.goto(urls["prompt"])
    pg.click("#new-testset")
    pg.fill("#testset-form input[name=name]", "names")
    pg.fill("#rows", "name,check:contains\nAda,Simulated\nAlan,Atlantis\n")
    pg.click("#save-testset")
    pg.wait_for_selector("#run-form")
    urls["test set"] = pg.url
    pg.click("#run-testset")
    pg.wait_for_url("**/prompts/runs/**")
    pg.wait_for_selector("#run-grid[data-done=true]", timeout=60_000)
    urls["test run"] = pg.url
    urls["prompts"] = u + "/prompts/"
    # Modes: the three forms, a run, its code and its Inspect.
    urls["completion"] = u + "/modes/completion/"
    urls["embeddings"] = u + "/modes/embeddings/"
    urls["audio"] = u + "/modes/audio/"
    pg.goto(urls["completion"])
    pg.fill("#id_model", "sim-fast?ttft_ms=5&delay_ms=5")
    pg.fill("#id_prompt", "The quick brown fox")
    pg.fill("#id_max_tokens", "8")
    pg.click("button.run-btn")
    pg.wait_for_url("**/modes/r/**")
    pg.wait_for_selector("#run-status[data-status='complete']", state="attached", timeout=15_000)
    urls["mode run"] = pg.url
    urls["mode code"] = pg.url + "code/"
    urls["mode inspect"] = pg.url + "inspect/"
    # Teams.
    pg.goto(u + "/teams/")
    pg.fill("input[name=name]", "Research")
    pg.click("button:has-text('Create team')")
    pg.wait_for_selector("h1:has-text('Research')")
    urls["team"] = pg.url
    urls["teams"] = u + "/teams/"
    urls["usage"] = u + "/usage/"
    return urls


def test_axe_on_compare_prompts_modes_teams_sharing_pages(server, page) -> None:  # noqa: ANN001
    pg = page
    pg.set_viewport_size(DESKTOP)
    pg.on("dialog", lambda d: d.accept())
    urls = seed(pg, server)
    problems: list[str] = []  # every page's violations, reported together
    for scheme in ("light", "dark"):
        pg.emulate_media(color_scheme=scheme)
        for size in (DESKTOP, PHONE):
            pg.set_viewport_size(size)
            for name, url in urls.items():
                pg.goto(url)
                pg.wait_for_load_state("load")
                if name == "comparison":
                    pg.wait_for_selector("#conn-state.ok")
                if size == PHONE:
                    width = pg.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
                    if width[0] > width[1]:
                        problems.append(f"{name} ({url}) {scheme} scrolls sideways: {width} {pg.evaluate(WIDE)}")
                try:
                    axe(pg, f"{name} ({url}) {scheme} {size['width']}")
                except AssertionError as exc:
                    problems.append(str(exc).split("\nassert ")[0])
    assert not problems, "\n\n".join(problems)
