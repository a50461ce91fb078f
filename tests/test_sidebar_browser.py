"""Issue 10's sidebar in the browser: a menu per conversation row (keyboard: Enter opens it, the
arrow keys move, Esc closes it and gives focus back), rename in place that does not move the
chat, delete with Undo that keeps the page, search rows that show why they matched, "New chat
from a prompt" beside New chat, the same in the phone drawer; and Regenerate on the built-in
simulator gives another answer each time while the first answer stays what it was."""

from __future__ import annotations

import pytest

from tests.conftest import create_first_account
from tests.test_ui_browser import (
    ASSISTANT,
    DESKTOP,
    FAST,
    PHONE,
    active,
    axe,
    focused_in,
    ready,
    send,
)

pytestmark = [pytest.mark.browser]


def conv_id(pg) -> int:  # noqa: ANN001
    return int(pg.url.rstrip("/").split("/")[-1])


def new_titled_chat(pg, text: str, *, first: bool = False) -> int:  # noqa: ANN001
    """Open a new chat (unless this is the first page), send ``text``, wait for its answer."""
    if not first:
        before = pg.url
        pg.click("#new-chat")
        pg.wait_for_url(lambda u: u != before)
    ready(pg)
    pg.fill("#model", FAST)
    send(pg, text)
    pg.wait_for_selector(f"{ASSISTANT}.status-complete")
    cid = conv_id(pg)
    pg.wait_for_selector(f'#conversation-list li[data-conv="{cid}"]')
    return cid


def order(pg) -> list[int]:  # noqa: ANN001
    return [int(x) for x in pg.eval_on_selector_all("#conversation-list li[data-conv]", "els => els.map(e => e.dataset.conv)")]


def row(cid: int) -> str:
    return f'#conversation-list li[data-conv="{cid}"]'


def test_row_menu_by_keyboard_rename_keeps_order_and_delete_with_undo(server, page) -> None:  # noqa: ANN001
    pg = page
    pg.set_viewport_size(DESKTOP)
    create_first_account(pg, server)
    alpha = new_titled_chat(pg, "Alpha question", first=True)
    beta = new_titled_chat(pg, "Beta question")
    assert order(pg) == [beta, alpha]

    # Keyboard: the menu button has a name; Enter opens the menu on its first item.
    button = f"{row(alpha)} summary.row-menu-button"
    assert pg.get_attribute(button, "aria-label") == "Actions for Alpha question"
    pg.focus(button)
    pg.keyboard.press("Enter")
    pg.wait_for_selector(f"{row(alpha)} details.row-menu[open]")
    pg.wait_for_function("() => document.activeElement && document.activeElement.matches('button.row-rename')")
    assert pg.get_attribute(button, "aria-expanded") == "true"
    axe(pg, "row menu open")
    pg.keyboard.press("ArrowDown")
    assert focused_in(pg, f"{row(alpha)} .row-delete button"), active(pg)
    pg.keyboard.press("ArrowDown")
    assert focused_in(pg, f"{row(alpha)} button.row-rename"), active(pg)
    # Esc closes the menu (not anything else) and focus goes back to its button.
    pg.keyboard.press("Escape")
    pg.wait_for_selector(f"{row(alpha)} details.row-menu:not([open])", state="attached")
    assert focused_in(pg, button), active(pg)
    # Rename in place: Enter on Rename, type, Enter. The chat keeps its place in the list.
    pg.keyboard.press("Enter")
    pg.wait_for_function("() => document.activeElement && document.activeElement.matches('button.row-rename')")
    pg.keyboard.press("Enter")
    pg.wait_for_function("() => document.activeElement && document.activeElement.matches('.row-rename-form input[name=title]')")
    pg.keyboard.press("Control+A")
    pg.keyboard.type("Alpha, renamed")
    pg.keyboard.press("Enter")
    pg.wait_for_selector(f"{row(alpha)} .conv-title:text-is('Alpha, renamed')")
    assert order(pg) == [beta, alpha]
    assert server.query("select title from chat_conversation where id = ?", (alpha,))[0][0] == "Alpha, renamed"
    pg.wait_for_function(f"() => document.activeElement && document.activeElement.matches('{row(alpha)} summary')")
    assert pg.is_visible(f'{row(beta)}.current')  # the page's conversation is still the current row
    # Esc cancels a rename.
    pg.click(button)
    pg.click(f"{row(alpha)} button.row-rename")
    pg.fill(f"{row(alpha)} .row-rename-form input[name=title]", "Not this")
    pg.keyboard.press("Escape")
    pg.wait_for_selector(f"{row(alpha)} .row-rename-form", state="hidden")
    assert pg.inner_text(f"{row(alpha)} .conv-title") == "Alpha, renamed"
    assert server.query("select title from chat_conversation where id = ?", (alpha,))[0][0] == "Alpha, renamed"
    # Renaming the page's own conversation from its row updates the header too.
    pg.click(f"{row(beta)} summary.row-menu-button")
    pg.click(f"{row(beta)} button.row-rename")
    pg.fill(f"{row(beta)} .row-rename-form input[name=title]", "Beta, renamed")
    pg.keyboard.press("Enter")
    pg.wait_for_selector(f"{row(beta)} .conv-title:text-is('Beta, renamed')")
    pg.wait_for_function("() => document.getElementById('conv-title').value === 'Beta, renamed'")
    assert order(pg) == [beta, alpha]

    # Delete another row: it goes at once with an Undo toast (no confirm()), and the page stays.
    dialogs: list[str] = []
    pg.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    here = pg.url
    pg.click(button)
    pg.click(f"{row(alpha)} .row-delete button")
    pg.wait_for_selector(".toast button.undo")
    assert focused_in(pg, ".toast button.undo"), active(pg)
    assert pg.is_hidden(row(alpha))
    pg.keyboard.press("Enter")  # Undo
    pg.wait_for_selector(".toast", state="detached")
    pg.wait_for_selector(row(alpha), state="visible")
    assert focused_in(pg, button), active(pg)
    pg.wait_for_timeout(6500)
    assert server.query("select count(*) from chat_conversation where id = ?", (alpha,))[0][0] == 1
    # Without Undo it is deleted after a few seconds, in the background.
    pg.click(button)
    pg.click(f"{row(alpha)} .row-delete button")
    pg.wait_for_selector(row(alpha), state="detached", timeout=12_000)
    pg.wait_for_selector(".toast", state="detached")
    assert server.query("select count(*) from chat_conversation where id = ?", (alpha,))[0][0] == 0
    assert pg.url == here and order(pg) == [beta] and not dialogs


def test_search_shows_why_a_chat_matched(server, page) -> None:  # noqa: ANN001
    pg = page
    pg.set_viewport_size(DESKTOP)
    create_first_account(pg, server)
    words = new_titled_chat(pg, "Where do the flibbertigibbet <b>birds</b> live?", first=True)
    other = new_titled_chat(pg, "Something else entirely")
    # Renamed, so only the message text matches.
    pg.click(f"{row(words)} summary.row-menu-button")
    pg.click(f"{row(words)} button.row-rename")
    pg.fill(f"{row(words)} .row-rename-form input[name=title]", "Bird notes")
    pg.keyboard.press("Enter")
    pg.wait_for_selector(f"{row(words)} .conv-title:text-is('Bird notes')")
    pg.fill("#conv-search", "FLIBBER")
    pg.wait_for_selector(f"{row(words)} .conv-snippet mark")
    assert pg.inner_text(f"{row(words)} .conv-snippet mark") == "flibber"
    assert "<b>birds</b>" in pg.inner_text(f"{row(words)} .conv-snippet")  # shown as text, not markup
    assert pg.locator(f"{row(words)} .conv-snippet b").count() == 0
    assert pg.locator(row(other)).count() == 0
    # A title match marks the title.
    pg.fill("#conv-search", "else")
    pg.wait_for_selector(f"{row(other)} .conv-title mark")
    assert pg.inner_text(f"{row(other)} .conv-title mark") == "else"
    assert pg.locator(f"{row(other)} .conv-snippet").count() == 0
    # Nothing: "No matches."
    pg.fill("#conv-search", "zyzzyva")
    pg.wait_for_selector("#conversation-list li.muted:text-is('No matches.')")
    axe(pg, "search")
    # A rename while searching keeps the search.
    pg.fill("#conv-search", "flibber")
    pg.wait_for_selector(f"{row(words)} .conv-snippet mark")
    pg.click(f"{row(words)} summary.row-menu-button")
    pg.click(f"{row(words)} button.row-rename")
    pg.fill(f"{row(words)} .row-rename-form input[name=title]", "Bird notes 2")
    pg.keyboard.press("Enter")
    pg.wait_for_selector(f"{row(words)} .conv-title:text-is('Bird notes 2')")
    assert pg.locator(row(other)).count() == 0 and pg.locator(f"{row(words)} .conv-snippet mark").count() == 1


def test_new_chat_from_a_prompt(server, page) -> None:  # noqa: ANN001
    pg = page
    pg.set_viewport_size(DESKTOP)
    create_first_account(pg, server)
    ready(pg)
    # No prompt yet: the menu says so and links to the library.
    pg.click("#new-from-prompt-button")
    pg.wait_for_selector("#new-from-prompt[open] a.prompt-library")
    assert "No prompts yet." in pg.inner_text("#new-from-prompt")
    pg.keyboard.press("Escape")
    assert focused_in(pg, "#new-from-prompt-button"), active(pg)
    # A prompt without variables: one click opens a new chat with it, which sends its message.
    pg.goto(server.url + "/prompts/new/")
    pg.fill("#id_name", "Tea haiku")
    pg.fill("#id_system_prompt", "Answer in a haiku.")
    pg.fill("textarea[name=msg_content_0]", "A haiku about green tea")
    pg.fill("input[name=model]", FAST)
    pg.click("#save-prompt")
    pg.wait_for_selector("#versions")
    # One with a variable asks for it first.
    pg.goto(server.url + "/prompts/new/")
    pg.fill("#id_name", "Capital")
    pg.fill("textarea[name=msg_content_0]", "Capital of {{country}}?")
    pg.fill("input[name=model]", FAST)
    pg.click("#save-prompt")
    pg.wait_for_selector("#versions")
    pg.goto(server.url + "/")
    ready(pg)
    start = conv_id(pg)
    pg.focus("#new-from-prompt-button")
    pg.keyboard.press("Enter")
    pg.wait_for_function("() => document.activeElement && document.activeElement.matches('#new-from-prompt [role=menuitem]')")
    assert pg.locator("#new-from-prompt .prompt-item").all_inner_texts() == ["Capital…", "Tea haiku"] or \
        sorted(pg.locator("#new-from-prompt .prompt-item").all_inner_texts()) == ["Capital…", "Tea haiku"]
    pg.click("#new-from-prompt button.prompt-item:text-is('Tea haiku')")
    pg.wait_for_url(lambda u: u.rstrip("/").split("/")[-1].isdigit() and conv_id(pg) != start)
    pg.wait_for_selector(f"{ASSISTANT}.status-complete")
    assert "A haiku about green tea" in pg.inner_text(".msg-user")
    assert pg.input_value("#settings textarea[name=system_prompt]") == "Answer in a haiku."
    # The prompt with a variable opens its form from the menu.
    pg.click("#new-from-prompt-button")
    pg.click("#new-from-prompt a.prompt-item:text-is('Capital…')")
    pg.wait_for_selector("#use-form")
    pg.fill("#use-form textarea[name=country]", "France")
    pg.click("#use-submit")
    pg.wait_for_selector(f"{ASSISTANT}.status-complete")
    assert "Capital of France?" in pg.inner_text(".msg-user")


def test_row_menu_in_the_phone_drawer(server, chromium) -> None:  # noqa: ANN001
    context = chromium.new_context(viewport=PHONE, is_mobile=True, has_touch=True)
    pg = context.new_page()
    pg.set_default_timeout(15_000)
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    try:
        create_first_account(pg, server)
        ready(pg)
        pg.click("#settings-toggle")
        pg.wait_for_selector("#settings.open #model", state="visible")
        pg.fill("#model", FAST)
        pg.keyboard.press("Escape")
        send(pg, "Phone question")
        pg.wait_for_selector(f"{ASSISTANT}.status-complete")
        cid = conv_id(pg)
        pg.click("#sidebar-toggle")
        pg.wait_for_selector("#sidebar.open #new-chat", state="visible")
        button = f"{row(cid)} summary.row-menu-button"
        assert pg.is_visible(button)  # no hover on a phone: the button is always shown
        pg.tap(button)
        pg.wait_for_selector(f"{row(cid)} button.row-rename", state="visible")
        # Esc closes the menu first, the drawer stays open.
        pg.keyboard.press("Escape")
        pg.wait_for_selector(f"{row(cid)} button.row-rename", state="hidden")
        assert pg.is_visible("#sidebar.open #new-chat")
        pg.tap(button)
        pg.tap(f"{row(cid)} button.row-rename")
        pg.fill(f"{row(cid)} .row-rename-form input[name=title]", "Renamed on a phone")
        pg.keyboard.press("Enter")
        pg.wait_for_selector(f"{row(cid)} .conv-title:text-is('Renamed on a phone')")
        sw, iw = pg.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
        assert sw <= iw
        pg.wait_for_function("() => document.getElementById('conv-title').value === 'Renamed on a phone'")
    finally:
        context.close()
    assert not errors, errors


def test_regenerate_on_the_simulator_gives_another_answer_each_time(server, page) -> None:  # noqa: ANN001
    from chat.simulator.text import answer_text

    pg = page
    pg.set_viewport_size(DESKTOP)
    create_first_account(pg, server)
    ready(pg)
    pg.fill("#model", "sim-fast?ttft_ms=5&delay_ms=1&reasoning=0")
    send(pg, "Tell me about tea")
    pg.wait_for_selector(f"{ASSISTANT}.status-complete")
    for n in (2, 3):
        pg.click(f"{ASSISTANT} button.regenerate")
        pg.wait_for_function(f"() => document.querySelector('.msg-assistant .siblings') && "
                             f"document.querySelector('.msg-assistant .siblings').textContent.includes('{n}/{n}')")
        pg.wait_for_selector(f"{ASSISTANT}.status-complete")
        pg.wait_for_selector(f"{ASSISTANT} .answer h2:has-text('(take {n})')")
    answers = [r[0] for r in server.query(
        "select content from chat_message where role = 'assistant' order by created_at")]
    assert len(answers) == 3 and len(set(answers)) == 3
    assert answers[0] == "".join(answer_text("Tell me about tea", length_tokens=64))  # the first is unchanged
    assert "(take 2)" in answers[1] and "(take 3)" in answers[2]
    # With a seed set the answer is fixed: a regenerate repeats the last one given that seed.
    pg.fill("#settings input[name=seed]", "0")
    pg.click(f"{ASSISTANT} button.regenerate")
    pg.wait_for_function("() => document.querySelector('.msg-assistant .siblings').textContent.includes('4/4')")
    pg.wait_for_selector(f"{ASSISTANT}.status-complete")
    last = server.query("select content from chat_message where role = 'assistant' order by created_at desc limit 1")[0][0]
    assert last == answers[0]
    # Inspect shows the simulator option the regenerate sent (not redacted: knobs, no secret).
    import uuid

    ids = [uuid.UUID(str(r[0])) for r in server.query(
        "select id from chat_message where role = 'assistant' order by created_at")]
    pg.goto(f"{server.url}/m/{ids[2]}/inspect/")
    assert "take=3" in pg.content()
    pg.goto(f"{server.url}/m/{ids[0]}/inspect/")
    assert "X-Simulator-Options" not in pg.content()
