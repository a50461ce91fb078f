"""Issue 10 in the browser: the phone layout (drawers, no sideways scroll), keyboard use (the
shortcuts, focus after every swap, the skip link), screen readers (one polite announcement per
answer) and axe-core on every page at desktop and phone widths, light and dark.

Screenshots: with ``PLAYGROUND_SCREENSHOTS=1`` the tests write the README's pictures into docs/
(ui-phone-settings.png and ui-dark.png here; ui-desktop.png and ui-phone.png in
tests/test_markdown_stream_browser.py); otherwise they go to test-artifacts/.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import ARTIFACTS, ROOT, create_first_account

pytestmark = [pytest.mark.browser]

ASSISTANT = ".msg-assistant"
AXE = ROOT / "tests" / "vendor" / "axe.min.js"
PHONE = {"width": 375, "height": 812}
DESKTOP = {"width": 1280, "height": 820}
FAST = "sim-fast?ttft_ms=5&delay_ms=1&length=12&reasoning=0"
SLOW = "sim-fast?ttft_ms=10&delay_ms=60&length=400&reasoning=0"


def shot(pg, name: str) -> Path:  # noqa: ANN001
    """A screenshot into docs/ (PLAYGROUND_SCREENSHOTS=1) or test-artifacts/."""
    where = ROOT / "docs" if os.environ.get("PLAYGROUND_SCREENSHOTS") else ARTIFACTS
    where.mkdir(exist_ok=True)
    path = where / f"{name}.png"
    pg.wait_for_timeout(300)  # drawers finish sliding after a resize
    pg.screenshot(path=str(path))
    return path


def no_sideways_scroll(pg, where: str) -> None:  # noqa: ANN001
    """The page is no wider than the window (nothing scrolls sideways)."""
    sw, iw = pg.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
    assert sw <= iw, f"{where}: scrollWidth {sw} > innerWidth {iw}"


def axe(pg, where: str) -> None:  # noqa: ANN001
    """Runs axe-core on the current page: no serious or critical violation.

    axe is evaluated over the DevTools protocol (not a <script> tag), so the page's
    Content-Security-Policy stays as it is."""
    if not pg.evaluate("() => !!window.axe"):
        pg.evaluate(AXE.read_text() + "\n;0")
    result = pg.evaluate(
        """() => axe.run(document, {resultTypes: ['violations'],
             runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice']}})
           .then(r => r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
             nodes: v.nodes.slice(0, 5).map(n => n.target.join(' ') + ' :: ' + n.failureSummary)})))"""
    )
    bad = [v for v in result if v["impact"] in ("serious", "critical")]
    assert not bad, f"{where}: " + "\n".join(f"{v['id']} ({v['impact']}): {v['help']}\n  " + "\n  ".join(v["nodes"]) for v in bad)


def ready(pg) -> None:  # noqa: ANN001
    pg.wait_for_selector("#conn-state.ok")


def send(pg, text: str) -> None:  # noqa: ANN001
    pg.fill("#content", text)
    pg.press("#content", "Enter")


def active(pg) -> str:  # noqa: ANN001
    """The focused element as ``tag#id.class1`` (for assertions and messages)."""
    return pg.evaluate(
        """() => { const a = document.activeElement; if (!a) return '';
             return a.tagName.toLowerCase() + (a.id ? '#' + a.id : '') + (a.classList[0] ? '.' + a.classList[0] : ''); }"""
    )


def focused_in(pg, selector: str) -> bool:  # noqa: ANN001
    return pg.evaluate("(s) => !!document.activeElement && document.activeElement.matches(s)", selector)


def test_phone_layout_drawers_send_and_stop(server, chromium) -> None:  # noqa: ANN001
    context = chromium.new_context(viewport=PHONE, is_mobile=True, has_touch=True)
    pg = context.new_page()
    pg.set_default_timeout(15_000)
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.on("dialog", lambda d: d.accept())
    try:
        create_first_account(pg, server)
        ready(pg)
        no_sideways_scroll(pg, "chat page")
        # One column: the list and the settings are off screen until their buttons open them.
        assert not pg.is_visible("#sidebar #conv-search") and not pg.is_visible("#settings #model")
        assert pg.is_visible("#content") and pg.is_visible("#send")
        assert pg.get_attribute("#settings-toggle", "aria-expanded") == "false"
        pg.click("#settings-toggle")
        pg.wait_for_selector("#settings.open #model", state="visible")
        assert pg.get_attribute("#settings-toggle", "aria-expanded") == "true"
        pg.wait_for_function("() => document.activeElement && document.activeElement.closest('#settings') !== null")
        assert pg.get_by_label("Model", exact=True).get_attribute("id") == "model"  # the field has its name
        pg.fill("#model", SLOW)
        no_sideways_scroll(pg, "settings drawer open")
        shot(pg, "ui-phone-settings")
        # Esc closes the drawer and gives focus back to its button.
        pg.keyboard.press("Escape")
        pg.wait_for_selector("#settings #model", state="hidden")
        assert focused_in(pg, "#settings-toggle"), active(pg)
        assert pg.get_attribute("#settings-toggle", "aria-expanded") == "false"
        # The conversation list: a drawer too; the backdrop closes it.
        pg.click("#sidebar-toggle")
        pg.wait_for_selector("#sidebar.open #new-chat", state="visible")
        pg.click("#drawer-backdrop", position={"x": 360, "y": 400})
        pg.wait_for_selector("#sidebar #new-chat", state="hidden")
        # Send, then Send is Stop while the answer streams; Stop ends it.
        pg.tap("#content")
        pg.fill("#content", "Tell me a long story")
        pg.tap("#send")
        pg.wait_for_selector(".msg-user:not(.msg-pending)")
        pg.wait_for_selector(f"{ASSISTANT}.status-streaming.has-tokens")
        assert pg.is_visible("#composer-stop") and not pg.is_visible("#send")
        no_sideways_scroll(pg, "streaming")
        pg.tap("#composer-stop")
        pg.wait_for_selector(f"{ASSISTANT}.status-stopped")
        pg.wait_for_selector("#send", state="visible")
        assert not pg.is_visible("#composer-stop")
        assert server.query("select status from chat_message where role='assistant'")[0][0] == "stopped"
        no_sideways_scroll(pg, "after stop")
        # The site menu: a button, not a row of links wider than the phone.
        assert not pg.is_visible("#site-nav a[href$='/endpoints/']")
        pg.click("#nav-toggle")
        pg.wait_for_selector("#site-nav a[href$='/endpoints/']", state="visible")
        pg.keyboard.press("Escape")
        pg.wait_for_selector("#site-nav a[href$='/endpoints/']", state="hidden")
        # Every other page fits a phone too.
        for path in ("/endpoints/", "/endpoints/new/", "/users/", "/accounts/password/", "/signup/", "/no-such-page/"):
            pg.goto(server.url + path)
            no_sideways_scroll(pg, path)
    finally:
        context.close()
    assert not errors, errors


def test_keyboard_only_send_regenerate_edit_delete_with_focus(server, page) -> None:  # noqa: ANN001
    pg = page
    pg.set_viewport_size(DESKTOP)
    pg.on("dialog", lambda d: d.accept())
    create_first_account(pg, server)
    ready(pg)
    chat = pg.url
    # The first Tab on a page reaches the skip link, which skips the top bar.
    pg.goto(server.url + "/endpoints/")
    pg.keyboard.press("Tab")
    assert focused_in(pg, ".skip-link"), active(pg)
    pg.keyboard.press("Enter")
    assert focused_in(pg, "#content-start"), active(pg)
    pg.keyboard.press("Tab")
    assert pg.evaluate("() => !document.activeElement.closest('header')"), active(pg)
    # The chat page: the composer has focus on load.
    pg.goto(chat)
    ready(pg)
    assert focused_in(pg, "#content"), active(pg)
    # Ctrl+K: search conversations; Shift+Esc: back to the composer.
    pg.keyboard.press("Control+k")
    assert focused_in(pg, "#conv-search"), active(pg)
    pg.keyboard.press("Shift+Escape")
    assert focused_in(pg, "#content"), active(pg)
    # ? outside a text field opens the sheet; Esc closes it.
    pg.keyboard.press("Shift+Tab")
    pg.keyboard.press("Shift+?")
    pg.wait_for_selector("#shortcuts-dialog[open]")
    assert "Regenerate the last answer" in pg.inner_text("#shortcuts-dialog")
    pg.keyboard.press("Escape")
    pg.wait_for_selector("#shortcuts-dialog", state="hidden")
    # Send with Enter: the model field is in the settings; focus stays in the composer.
    pg.fill("#model", FAST)
    pg.focus("#content")
    pg.keyboard.type("Hello keyboard")
    pg.keyboard.press("Enter")
    pg.wait_for_selector(f"{ASSISTANT}.status-complete")
    assert focused_in(pg, "#content"), active(pg)
    # The header shows the new title and its actions as soon as the conversation has one.
    pg.wait_for_selector("#chat-head #conv-title", state="visible")
    assert pg.input_value("#conv-title") == "Hello keyboard" and pg.is_visible("#chat-head .conv-delete button")
    assert pg.is_hidden("#chat-title-empty")
    # Screen readers hear the answer once, when it is complete.
    pg.wait_for_function("() => document.getElementById('live-region').textContent.startsWith('Answer complete')")
    assert pg.get_attribute("#live-region", "aria-live") == "polite"
    # Regenerate from the keyboard: focus the button, Enter; focus follows the new answer's
    # Stop, then its Regenerate (never <body>).
    pg.fill("#model", "sim-fast?ttft_ms=300&delay_ms=20&length=30&reasoning=0")
    pg.focus(f"{ASSISTANT} button.regenerate")
    pg.keyboard.press("Enter")
    pg.wait_for_selector(f"{ASSISTANT}.status-streaming")
    pg.wait_for_function("() => document.activeElement && document.activeElement !== document.body")
    assert focused_in(pg, f"{ASSISTANT} button.stop, #composer-stop, {ASSISTANT} button.regenerate"), active(pg)
    pg.wait_for_selector(f"{ASSISTANT}.status-complete")
    pg.wait_for_function("() => document.activeElement && document.activeElement.matches('.msg-assistant button.regenerate')")
    assert "2/2" in pg.inner_text(f"{ASSISTANT} .siblings")
    # Alt+Shift+R regenerates the last answer from anywhere.
    pg.fill("#model", FAST)
    pg.focus("#content")
    pg.keyboard.press("Alt+Shift+R")
    pg.wait_for_function("() => (document.querySelector('.msg-assistant .siblings') || {}).textContent.includes('3/3')")
    pg.wait_for_selector(f"{ASSISTANT}.status-complete")
    assert focused_in(pg, "#content"), active(pg)
    # Edit: Enter on Edit opens the editor with focus in it; Esc cancels back to Edit.
    user_edit = ".msg-user button.edit-open"
    pg.focus(user_edit)
    pg.keyboard.press("Enter")
    pg.wait_for_selector(".msg-user .edit-form textarea")
    assert focused_in(pg, ".msg-user .edit-form textarea"), active(pg)
    pg.keyboard.press("Escape")
    pg.wait_for_selector(".msg-user .edit-form", state="detached")
    assert focused_in(pg, user_edit), active(pg)
    # Edit again, change the text, Tab to "Save only", Enter: focus comes back to Edit.
    pg.keyboard.press("Enter")
    pg.wait_for_selector(".msg-user .edit-form textarea")
    pg.keyboard.press("Control+a")
    pg.keyboard.type("Hello edited")
    pg.keyboard.press("Tab")
    pg.keyboard.press("Tab")
    assert focused_in(pg, ".edit-form button[value=save]"), active(pg)
    pg.keyboard.press("Enter")
    pg.wait_for_function("() => document.querySelector('.msg-user .user-text').textContent === 'Hello edited'")
    pg.wait_for_function("() => document.activeElement && document.activeElement.matches('.msg-user button.edit-open')")
    # Delete (the confirmation is accepted): focus goes to the composer, not <body>.
    pg.focus(".msg-user button.delete")
    pg.keyboard.press("Enter")
    pg.wait_for_selector(".msg-user", state="detached")
    pg.wait_for_function("() => document.activeElement && document.activeElement.id === 'content'")
    # Alt+Shift+N: a new conversation.
    before = pg.url
    pg.keyboard.press("Alt+Shift+N")
    pg.wait_for_url(lambda u: u != before and "/c/" in u)


def test_axe_on_every_page_desktop_phone_light_dark(server, page) -> None:  # noqa: ANN001
    pg = page
    pg.on("dialog", lambda d: d.accept())
    pg.goto(server.url + "/")
    for size in (DESKTOP, PHONE):
        pg.set_viewport_size(size)
        axe(pg, f"setup {size['width']}")
    pg.set_viewport_size(DESKTOP)
    create_first_account(pg, server)
    ready(pg)
    pg.fill("#model", FAST)
    send(pg, "Hello **axe**")
    pg.wait_for_selector(f"{ASSISTANT}.status-complete")
    pg.fill("#model", "sim-fast?fault=429")
    send(pg, "And an error")
    pg.wait_for_selector(f"{ASSISTANT}.status-error")
    # On an error the metrics leave out what was not measured ("—").
    shown = pg.evaluate("() => Array.from(document.querySelectorAll('.msg-assistant.status-error .metric dd, "
                        ".msg-assistant.status-error .metrics-line .ml')).map(d => d.textContent.trim())")
    assert "—" not in shown and not any(v.endswith("—") for v in shown), shown
    chat = pg.url
    inspect = server.url + pg.get_attribute(f"{ASSISTANT} a.inspect-link", "href")
    pages = [chat, server.url + "/endpoints/", server.url + "/endpoints/new/", server.url + "/users/",
             server.url + "/accounts/password/", server.url + "/signup/", inspect, server.url + "/no-such-page/"]
    for scheme in ("light", "dark"):
        pg.emulate_media(color_scheme=scheme)
        for size in (DESKTOP, PHONE):
            pg.set_viewport_size(size)
            for url in pages:
                pg.goto(url)
                pg.wait_for_load_state("load")
                axe(pg, f"{url} {scheme} {size['width']}")
                if url == chat and size == DESKTOP:
                    pg.click("#shortcuts-open")
                    pg.wait_for_selector("#shortcuts-dialog[open]")
                    axe(pg, f"shortcut sheet {scheme}")
                    pg.keyboard.press("Escape")
                    pg.click("#view-code")
                    pg.wait_for_selector("#code-dialog[open] pre")
                    axe(pg, f"code dialog {scheme}")
                    pg.keyboard.press("Escape")
                if url == chat and size == PHONE:
                    pg.click("#settings-toggle")
                    pg.wait_for_selector("#settings.open #model", state="visible")
                    pg.wait_for_timeout(250)
                    axe(pg, f"settings drawer {scheme}")
                    pg.keyboard.press("Escape")
    pg.emulate_media(color_scheme="light")
    # The login page, logged out.
    pg.set_viewport_size(DESKTOP)
    pg.goto(chat)
    pg.click("#site-nav button:has-text('Log out')")
    pg.goto(server.url + "/accounts/login/")
    for size in (DESKTOP, PHONE):
        pg.set_viewport_size(size)
        axe(pg, f"login {size['width']}")


def test_theme_toggle_overrides_the_system_and_sticks(server, page) -> None:  # noqa: ANN001
    pg = page
    pg.emulate_media(color_scheme="light")
    create_first_account(pg, server)
    ready(pg)
    bg = "() => getComputedStyle(document.body).backgroundColor"
    light = pg.evaluate(bg)
    assert pg.get_attribute("#theme-toggle", "aria-pressed") == "false"
    pg.click("#theme-toggle")
    assert pg.get_attribute("#theme-toggle", "aria-pressed") == "true"
    dark = pg.evaluate(bg)
    assert dark != light
    pg.reload()
    ready(pg)
    assert pg.evaluate(bg) == dark and pg.get_attribute("html", "data-theme") == "dark"
    pg.fill("#model", FAST)
    send(pg, "A dark **answer** with `code`")
    pg.wait_for_selector(f"{ASSISTANT}.status-complete")
    # The metrics strip is one line; Enter on it (keyboard) opens the table and what each term means.
    pg.focus(f"{ASSISTANT} .metrics-line")
    pg.keyboard.press("Enter")
    pg.wait_for_selector(f"{ASSISTANT} .metric-terms dd:has-text('Time to first token')", state="visible")
    pg.set_viewport_size(DESKTOP)
    shot(pg, "ui-dark")
    pg.click("#theme-toggle")
    assert pg.evaluate(bg) == light


def test_scrolling_up_while_streaming_shows_a_new_output_pill_instead_of_yanking(server, page) -> None:  # noqa: ANN001
    pg = page
    pg.set_viewport_size({"width": 1280, "height": 520})
    create_first_account(pg, server)
    ready(pg)
    pg.fill("#model", "sim-fast?ttft_ms=10&delay_ms=25&length=1500&reasoning=0")
    send(pg, "A very long answer please")
    # The optimistic echo or the server's copy shows the message at once, and the view follows.
    pg.wait_for_selector(".msg-user")
    pg.wait_for_function("() => { const t = document.getElementById('thread'); return t.scrollHeight > t.clientHeight + 200; }", timeout=30_000)
    at_bottom = "() => { const t = document.getElementById('thread'); return t.scrollHeight - t.scrollTop - t.clientHeight < 130; }"
    assert pg.evaluate(at_bottom)
    assert pg.is_hidden("#new-output") or pg.locator("#new-output").count() == 0
    pg.evaluate("() => { document.getElementById('thread').scrollTop = 0; }")
    pg.wait_for_selector("#new-output", state="visible")
    pg.wait_for_timeout(500)
    assert pg.evaluate("() => document.getElementById('thread').scrollTop") < 5  # not yanked down
    pg.click("#new-output")
    assert pg.evaluate(at_bottom)
    pg.wait_for_selector("#new-output", state="hidden")
    assert focused_in(pg, "#content"), active(pg)
    pg.keyboard.press("Escape")  # Esc stops the answer
    pg.wait_for_selector(f"{ASSISTANT}.status-stopped")
    pg.wait_for_function("() => document.getElementById('live-region').textContent === 'Answer stopped.'")


def test_long_paste_folds_and_an_overflowing_send_asks_first(server, page) -> None:  # noqa: ANN001
    pg = page
    pg.set_viewport_size(DESKTOP)
    create_first_account(pg, server)
    ready(pg)
    # The model picker lists the simulator's scenarios with one-line descriptions.
    pg.wait_for_selector("#model-list option[data-scenario]", state="attached")
    assert pg.locator("#model-list option[value='sim-fast?fault=429&retry_after=10']").inner_text().startswith("Scenario: rate limited")
    # A send that would overflow the context window asks first; "Cancel" sends nothing.
    pg.wait_for_selector("#model-list option[value='sim-slow'][data-context='4096']", state="attached")
    pg.fill("#model", "sim-slow")
    pg.fill("[name=max_tokens]", "5000")
    pg.dispatch_event("[name=max_tokens]", "change")
    pg.fill("#content", "Hello")
    assert "4096" in pg.inner_text("#ctx-mini") and "over" in pg.get_attribute("#ctx-mini", "class")
    asked: list[str] = []
    pg.once("dialog", lambda d: (asked.append(d.message), d.dismiss()))
    pg.press("#content", "Enter")
    pg.wait_for_timeout(500)
    assert asked and "overflow" in asked[0]
    assert pg.locator(".msg-user").count() == 0 and pg.input_value("#content") == "Hello"
    # A long pasted message is folded with "Show all".
    pg.fill("[name=max_tokens]", "")
    pg.dispatch_event("[name=max_tokens]", "change")
    pg.fill("#model", FAST)
    send(pg, "\n".join(f"line {i} of a long paste" for i in range(80)))
    pg.wait_for_selector(f"{ASSISTANT}.status-complete")
    body = pg.locator(".msg-user:not(.msg-pending) .user-text")
    assert "folded" in body.get_attribute("class")
    assert body.evaluate("e => e.clientHeight") < 400
    button = pg.locator(".msg-user:not(.msg-pending) button.show-all")
    assert button.inner_text() == "Show all (80 lines)" and button.get_attribute("aria-expanded") == "false"
    button.focus()
    pg.keyboard.press("Enter")
    assert button.get_attribute("aria-expanded") == "true"
    assert body.evaluate("e => e.clientHeight") > 1000


def test_deleting_a_conversation_can_be_undone(server, page) -> None:  # noqa: ANN001
    pg = page
    pg.set_viewport_size(DESKTOP)
    create_first_account(pg, server)
    ready(pg)
    pg.fill("#model", FAST)
    send(pg, "Keep me around")
    pg.wait_for_selector("#chat-head .conv-delete button", state="visible")
    count = "select count(*) from chat_conversation where title = 'Keep me around'"
    pg.click("#chat-head .conv-delete button")  # no confirm() dialog: a toast with Undo
    pg.wait_for_selector(".toast button.undo")
    assert focused_in(pg, ".toast button.undo"), active(pg)
    axe(pg, "undo toast")
    # Nothing can be sent into the chat while it waits to be deleted.
    assert pg.is_disabled("#content") and pg.is_disabled("#send")
    sent = len(server.sim_requests())
    pg.evaluate("() => { const c = document.getElementById('content'); c.disabled = false; c.value = 'sneaked in';"
                " document.getElementById('send').disabled = false; document.getElementById('send').form.requestSubmit(); }")
    pg.wait_for_timeout(500)
    assert len(server.sim_requests()) == sent and server.query("select count(*) from chat_message where content = 'sneaked in'")[0][0] == 0
    pg.focus(".toast button.undo")
    pg.keyboard.press("Enter")
    pg.wait_for_selector(".toast", state="detached")
    assert pg.is_enabled("#content") and pg.is_enabled("#send")
    assert "deleted" not in pg.get_attribute("#content", "placeholder")
    pg.wait_for_timeout(6500)
    assert server.query(count)[0][0] == 1 and "/c/" in pg.url
    # Without Undo it goes after a few seconds.
    before = pg.url
    pg.click("#chat-head .conv-delete button")
    pg.wait_for_url(lambda u: u != before, timeout=12_000)
    assert server.query(count)[0][0] == 0
