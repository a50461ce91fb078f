"""The sidebar's server side (issue 10): search rows say why they matched (the title, or an
excerpt of the matching message with the match in <mark>, everything escaped, bounded), each row
has a menu (rename in place that keeps the list's order, search and current row; delete with
undo), and "New chat from a prompt" sits beside New chat."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from chat import selectors, services
from chat.models import Conversation
from tests.accounts import PASSWORD, client_for, fast_accounts  # noqa: F401


@pytest.fixture
def client(alice) -> Client:  # noqa: ANN001
    return client_for(alice)


def chat(user, title: str, *texts: str) -> Conversation:  # noqa: ANN001
    conv = services.conversation_create(user=user)
    parent = None
    for i, text in enumerate(texts):
        parent = services.message_append(conversation=conv, role="user" if i % 2 == 0 else "assistant",
                                         content=text, parent_id=parent.pk if parent else None)
    services.conversation_rename(conversation=conv, title=title)
    return conv


def row(page: str, conv: Conversation) -> str:
    m = re.search(rf'<li [^>]*data-conv="{conv.pk}">.*?</li>', page, re.S)
    assert m, page
    return m.group(0)


@pytest.mark.django_db
def test_a_title_match_marks_the_title_and_a_text_match_shows_an_escaped_excerpt(client: Client, alice) -> None:  # noqa: ANN001
    by_title = chat(alice, "Kubernetes <b>networking</b>", "hello")
    long_before = "word " * 40
    by_text = chat(alice, "Trip", "Where to go?", long_before + "Try <script>Zanzibar</script> & more " + "tail " * 40)
    page = client.get("/c/sidebar/", {"q": "kubernetes"}).content.decode()
    r = row(page, by_title)
    assert "<mark>Kubernetes</mark> &lt;b&gt;networking&lt;/b&gt;" in r and "conv-snippet" not in r
    page = client.get("/c/sidebar/", {"q": "zanzibar"}).content.decode()
    r = row(page, by_text)
    snippet = re.search(r'<span class="conv-snippet muted">(.*?)</span>', r, re.S).group(1)
    assert snippet.startswith("…") and snippet.endswith("…")
    assert "Try &lt;script&gt;<mark>Zanzibar</mark>&lt;/script&gt; &amp; more" in snippet
    assert "<script>" not in page and len(snippet) < 250
    assert '<span class="conv-title">Trip</span>' in r


@pytest.mark.django_db
def test_search_is_a_bounded_plain_substring(client: Client, alice) -> None:  # noqa: ANN001
    for i in range(selectors.SEARCH_MAX_ROWS + 5):
        chat(alice, f"Chat {i} about zebras", "x")
    page = client.get("/c/sidebar/", {"q": "zebras"}).content.decode()
    assert page.count("<li ") == selectors.SEARCH_MAX_ROWS
    chat(alice, "Regex test", "plain a.c text")
    assert "No matches." in client.get("/c/sidebar/", {"q": "a+c"}).content.decode()
    assert "Regex test" in client.get("/c/sidebar/", {"q": "a.c"}).content.decode()
    assert "No matches." in client.get("/c/sidebar/", {"q": "x" * 5000}).content.decode()


@pytest.mark.django_db
def test_every_row_has_a_named_menu_with_rename_and_an_undoable_delete(client: Client, alice) -> None:  # noqa: ANN001
    one, two = chat(alice, "First chat", "a"), chat(alice, "Second chat", "b")
    page = client.get(f"/c/{one.pk}/").content.decode()
    r1, r2 = row(page, one), row(page, two)
    for r, conv in ((r1, one), (r2, two)):
        assert '<summary class="row-menu-button" aria-label="Actions for ' in r and 'aria-haspopup="menu"' in r
        assert '<svg class="icon" aria-hidden="true"' in r
        assert 'class="row-rename" role="menuitem">Rename<' in r
        assert f'action="/c/{conv.pk}/delete/" data-undo="Conversation deleted."' in r
        assert "confirm" not in r and f'hx-post="/c/{conv.pk}/rename/"' in r
    # Deleting the page's own conversation leaves the page; another row is deleted in place.
    assert "data-undo-stay" not in r1 and "data-undo-stay" in r2
    assert 'aria-current="page"' in r1


@pytest.mark.django_db
def test_renaming_from_a_row_keeps_order_search_and_current_row(client: Client, alice) -> None:  # noqa: ANN001
    older, newer = chat(alice, "Older zebra chat", "a"), chat(alice, "Newer zebra chat", "b")
    Conversation.objects.filter(pk=newer.pk).update(updated_at=older.updated_at.replace(year=older.updated_at.year + 1))
    chat(alice, "Unrelated", "c")
    resp = client.post(f"/c/{older.pk}/rename/", {"title": "Renamed zebra chat", "current": str(newer.pk), "q": "zebra"},
                       HTTP_HX_REQUEST="true")
    page = resp.content.decode()
    assert resp.status_code == 200 and "Renamed zebra chat" in page.replace("<mark>", "").replace("</mark>", "")
    assert page.index(f'data-conv="{newer.pk}"') < page.index(f'data-conv="{older.pk}"')
    assert "Unrelated" not in page  # the search stays
    assert f'class="current" data-conv="{newer.pk}"' in page and f'class="current" data-conv="{older.pk}"' not in page
    # Another user's conversation cannot be renamed from a row.
    bob = services.user_create(username="bob", password=PASSWORD)
    theirs = chat(bob, "Bob's", "x")
    assert client.post(f"/c/{theirs.pk}/rename/", {"title": "mine"}, HTTP_HX_REQUEST="true").status_code == 404
    assert client.post(f"/c/{theirs.pk}/delete/").status_code == 404


@pytest.mark.django_db
def test_new_chat_from_a_prompt_menu_lists_the_users_prompts(client: Client, alice) -> None:  # noqa: ANN001
    from chat.prompts import services as prompt_services
    from chat.prompts.services import VersionContent

    conv = services.conversation_create(user=alice)
    page = client.get(f"/c/{conv.pk}/").content.decode()
    assert 'aria-label="New chat from a prompt"' in page and "No prompts yet." in page and 'href="/prompts/"' in page
    plain = prompt_services.prompt_create(user=alice, name="Haiku <writer>", description="", content=VersionContent(
        "Write haiku.", ({"role": "user", "content": "A haiku about tea"},), {}))
    filled = prompt_services.prompt_create(user=alice, name="Translator", description="", content=VersionContent(
        "Translate to {{language}}.", ({"role": "user", "content": "{{text}}"},), {}))
    bob = services.user_create(username="bob", password=PASSWORD)
    prompt_services.prompt_create(user=bob, name="Bob's secret prompt", description="", content=VersionContent("x", (), {}))
    page = client.get(f"/c/{conv.pk}/").content.decode()
    assert f'<form method="post" action="/prompts/{plain.pk}/use/"' in page and "Haiku &lt;writer&gt;</button>" in page
    assert f'<a href="/prompts/{filled.pk}/use/" role="menuitem" class="prompt-item">Translator…</a>' in page
    assert "Bob&#x27;s secret" not in page and "Bob's secret" not in page
    # One click on a prompt without variables opens a new chat with it.
    resp = client.post(f"/prompts/{plain.pk}/use/")
    assert resp.status_code == 302
    new = Conversation.objects.get(pk=int(resp.url.strip("/").split("/")[-1]))
    assert new.pk != conv.pk and new.system_prompt == "Write haiku."


def test_a_match_late_in_a_long_title_is_shown_not_cut_off(client: Client, alice) -> None:  # noqa: ANN001
    """The sidebar cuts long titles with an ellipsis: a title match keeps the words before the
    match short (…and the last 24 characters) so the marked match is on screen."""
    conv = chat(alice, "Tell me about the history of navigation before the speed of light was measured", "hi")
    r = row(client.get("/c/sidebar/", {"q": "speed"}).content.decode(), conv)
    title = re.search(r'<span class="conv-title title-hit">(.*?)</span>', r, re.S).group(1)
    assert title.startswith("…") and "<mark>speed</mark>" in title
    assert title.index("<mark>") <= 26
