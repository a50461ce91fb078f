"""Issue 10 in the browser: Inspect opens in a drawer beside the answer (copy buttons, the raw
events collapsible and filterable; Esc closes and focus returns to the link), View code offers
"this turn" and "next turn", and the endpoint form tests a connection before saving.
"""

from __future__ import annotations

import pytest

from tests.conftest import create_first_account
from tests.test_ui_browser import DESKTOP, PHONE, axe, no_sideways_scroll, shot

pytestmark = [pytest.mark.browser]

ASSISTANT = ".msg-assistant"
FAST = "sim-fast?ttft_ms=5&delay_ms=1&length=12&reasoning=0"


def focused(pg, selector: str) -> bool:  # noqa: ANN001
    return pg.evaluate("(s) => !!document.activeElement && document.activeElement.matches(s)", selector)


@pytest.fixture
def clip_page(chromium, server):  # noqa: ANN001, ANN201
    """A page whose clipboard the test can read (the copy buttons write to it)."""
    context = chromium.new_context(viewport=DESKTOP)
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server.url)
    pg = context.new_page()
    pg.set_default_timeout(15_000)
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    yield pg
    context.close()
    assert not errors, errors


def clipboard(pg) -> str:  # noqa: ANN001
    return pg.evaluate("() => navigator.clipboard.readText()")


def test_inspect_drawer_copy_filter_escape_and_this_turns_code(server, clip_page) -> None:  # noqa: ANN001
    pg = clip_page
    create_first_account(pg, server)
    pg.wait_for_selector("#conn-state.ok")
    pg.fill("#model", FAST)
    pg.fill("#content", "Inspect me please")
    pg.press("#content", "Enter")
    pg.wait_for_selector(f"{ASSISTANT}.status-complete")
    chat_url = pg.url
    link = f"{ASSISTANT} a.inspect-link"
    # A plain click opens the drawer on the same page (no navigation, no new tab).
    pages_before = len(pg.context.pages)
    pg.click(link)
    pg.wait_for_selector("#inspect-drawer[open] .inspect-body")
    assert pg.url == chat_url and len(pg.context.pages) == pages_before
    assert pg.is_visible(f"{ASSISTANT}.inspecting")  # the answer it belongs to stays in view, marked
    assert focused(pg, "#inspect-drawer .inspect-close")
    drawer = pg.locator("#inspect-drawer")
    assert "Inspect me please" in drawer.locator("#ins-request").inner_text()
    shot(pg, "inspect-drawer")
    box = drawer.bounding_box()
    assert box["x"] > 400 and box["x"] + box["width"] <= DESKTOP["width"] + 1  # a drawer at the right side
    # Copy: the request JSON, the response text, one event.
    pg.click("#inspect-drawer button[aria-label='Copy request JSON']")
    pg.wait_for_function("() => navigator.clipboard.readText().then(t => t.includes('Inspect me please'))")
    assert '"body"' in clipboard(pg)
    answer = pg.evaluate("() => window.pgStream(document.querySelector('.msg-assistant .answer')).raw")
    pg.click("#inspect-drawer button[aria-label='Copy response text']")
    pg.wait_for_function("(a) => navigator.clipboard.readText().then(t => t === a)", arg=answer)
    events = drawer.locator("ol.events li.ev")
    n = events.count()
    assert n >= 3
    pg.click("#inspect-drawer button[aria-label='Copy event 1']")
    pg.wait_for_function("() => navigator.clipboard.readText().then(t => t.startsWith('data: '))")
    # The events are collapsible and filterable (plain substring, case-insensitive).
    assert drawer.locator("details.inspect-events").get_attribute("open") is not None
    pg.fill("#inspect-drawer .events-filter", "USAGE")
    pg.wait_for_function("(n) => document.querySelector('#inspect-drawer .events-count').textContent !== n + ' of ' + n", arg=n)
    shown = [t for t in events.all_inner_texts() if t]
    visible = drawer.locator("ol.events li.ev:not([hidden])")
    assert 0 < visible.count() < n, (visible.count(), n, shown)
    assert all("usage" in t.lower() for t in visible.all_inner_texts())
    pg.fill("#inspect-drawer .events-filter", "no-such-text-anywhere")
    pg.wait_for_selector("#inspect-drawer .events-none", state="visible")
    assert pg.inner_text("#inspect-drawer .events-count").startswith("0 of ")
    pg.fill("#inspect-drawer .events-filter", "")
    pg.wait_for_function("(n) => document.querySelector('#inspect-drawer .events-count').textContent === n + ' of ' + n", arg=n)
    pg.click("#inspect-drawer details.inspect-events > summary")
    assert not pg.is_visible("#inspect-drawer ol.events")
    axe(pg, "inspect drawer")
    # Esc closes it and focus returns to the Inspect link; the running-answer Esc is not triggered.
    pg.keyboard.press("Escape")
    pg.wait_for_selector("#inspect-drawer", state="hidden")
    assert focused(pg, link)
    assert pg.locator(f"{ASSISTANT}.inspecting").count() == 0
    # The keyboard opens it too; the close button closes it.
    pg.keyboard.press("Enter")
    pg.wait_for_selector("#inspect-drawer[open] .inspect-close")
    pg.click("#inspect-drawer .inspect-close")
    pg.wait_for_selector("#inspect-drawer", state="hidden")
    assert focused(pg, link)
    # The standalone page still works for direct links.
    direct = server.url + pg.get_attribute(link, "href")
    # View code of this turn: the dialog opens on the recorded request; "Next turn" switches.
    pg.click(f"{ASSISTANT} a.turn-code-link")
    pg.wait_for_selector("#code-dialog[open] .code-view[data-scope=this]")
    assert pg.get_attribute("#code-scope-this", "aria-pressed") == "true"
    curl = pg.inner_text("#snippet-curl")
    assert "Inspect me please" in curl and "BUILT_IN_SIMULATOR_API_KEY" in curl and "[REDACTED]" not in curl
    pg.fill("#content", "a draft for the next turn")  # behind the modal: set by script
    pg.evaluate("() => { document.getElementById('content').value = 'a draft for the next turn'; }")
    pg.click("#code-scope-next")
    pg.wait_for_selector("#code-dialog .code-view[data-scope=next]")
    assert pg.get_attribute("#code-scope-next", "aria-pressed") == "true"
    assert "a draft for the next turn" in pg.inner_text("#snippet-curl")
    pg.click("#code-scope-this")
    pg.wait_for_selector("#code-dialog .code-view[data-scope=this]")
    assert "a draft for the next turn" not in pg.inner_text("#snippet-curl")
    shot(pg, "code-this-turn")
    axe(pg, "code dialog, this turn")
    pg.keyboard.press("Escape")
    pg.wait_for_selector("#code-dialog", state="hidden")
    # From the settings panel: next turn first; "This turn" is the last answer.
    pg.click("#view-code")
    pg.wait_for_selector("#code-dialog[open] .code-view[data-scope=next]")
    pg.click("#code-scope-this")
    pg.wait_for_selector("#code-dialog .code-view[data-scope=this]")
    assert "Inspect me please" in pg.inner_text("#snippet-curl")
    pg.keyboard.press("Escape")
    pg.goto(direct)
    assert pg.locator("main.inspect .events-filter").count() == 1
    pg.fill(".events-filter", "usage")
    pg.wait_for_function("() => !document.querySelector('.events-count').textContent.startsWith(document.querySelectorAll('li.ev').length + ' ')")


def test_inspect_drawer_on_a_phone_fits_and_closes(server, chromium) -> None:  # noqa: ANN001
    context = chromium.new_context(viewport=PHONE, is_mobile=True, has_touch=True)
    pg = context.new_page()
    pg.set_default_timeout(15_000)
    try:
        create_first_account(pg, server)
        pg.wait_for_selector("#conn-state.ok")
        pg.evaluate("(m) => { document.getElementById('model').value = m; }", FAST)
        pg.fill("#content", "Phone inspect")
        pg.tap("#send")
        pg.wait_for_selector(f"{ASSISTANT}.status-complete")
        pg.tap(f"{ASSISTANT} a.inspect-link")
        pg.wait_for_selector("#inspect-drawer[open] .inspect-body")
        no_sideways_scroll(pg, "inspect drawer on a phone")
        box = pg.locator("#inspect-drawer").bounding_box()
        assert box["width"] <= PHONE["width"] + 1
        pg.tap("#inspect-drawer .inspect-close")
        pg.wait_for_selector("#inspect-drawer", state="hidden")
    finally:
        context.close()


def test_endpoint_form_tests_the_connection_before_saving(server, page) -> None:  # noqa: ANN001
    pg = page
    create_first_account(pg, server)
    rows = server.query("select count(*) from chat_endpoint")[0][0]
    pg.goto(server.url + "/endpoints/new/")
    pg.fill("#id_name", "Not saved yet")
    pg.fill("#id_base_url", f"{server.url}/simulator/v1")
    pg.fill("#id_api_key", "sim-test-server-key-0123456789")
    pg.click("#test-unsaved")
    pg.wait_for_selector("#test-unsaved-result .models-result")
    result = pg.inner_text("#test-unsaved-result")
    assert "Connected" in result and "nothing was saved" in result, result
    assert "sim-test-server-key" not in pg.content()
    assert pg.url.endswith("/endpoints/new/")  # in place: the form and its typed values stay
    assert pg.input_value("#id_name") == "Not saved yet"
    assert server.query("select count(*) from chat_endpoint")[0][0] == rows
    axe(pg, "endpoint form with a test result")
    # A refused URL shows why, still without saving.
    pg.fill("#id_base_url", "file:///etc/passwd")
    pg.click("#test-unsaved")
    pg.wait_for_selector("#test-unsaved-result .error-box")
    assert server.query("select count(*) from chat_endpoint")[0][0] == rows
