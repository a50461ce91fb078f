"""Issue 10's server-side bits of the chat page: a rename keeps the conversation's place in
the sidebar, an empty search says "No matches", and the page carries the drawers' buttons,
the shortcut sheet and the live region."""

from __future__ import annotations

import pytest
from django.test import Client

from chat import middleware, services
from chat.models import Conversation

PASSWORD = "correct-horse-battery-9"


@pytest.fixture(autouse=True)
def _setup(settings) -> None:  # noqa: ANN001
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    middleware.reset_cache()
    yield
    middleware.reset_cache()


@pytest.fixture
def alice(db):  # noqa: ANN001, ANN201
    return services.user_create(username="alice", password=PASSWORD)


@pytest.fixture
def client(alice) -> Client:  # noqa: ANN001
    c = Client()
    c.force_login(alice)
    return c


def titled(user, title: str) -> Conversation:  # noqa: ANN001
    conv = services.conversation_create(user=user)
    services.conversation_rename(conversation=conv, title=title)
    return conv


@pytest.mark.django_db
def test_renaming_does_not_move_a_conversation_to_the_top(client: Client, alice) -> None:  # noqa: ANN001
    older = titled(alice, "Older chat")
    newer = titled(alice, "Newer chat")
    Conversation.objects.filter(pk=newer.pk).update(updated_at=older.updated_at.replace(year=older.updated_at.year + 1))
    before = Conversation.objects.get(pk=older.pk).updated_at
    r = client.post(f"/c/{older.pk}/rename/", {"title": "Renamed older chat"})
    assert r.status_code == 302
    older.refresh_from_db()
    assert older.title == "Renamed older chat" and older.updated_at == before
    page = client.get("/c/sidebar/").content.decode()
    assert page.index(f"/c/{newer.pk}/") < page.index(f"/c/{older.pk}/")


@pytest.mark.django_db
def test_an_empty_search_says_no_matches(client: Client, alice) -> None:  # noqa: ANN001
    titled(alice, "Sourdough bread")
    page = client.get("/c/sidebar/", {"q": "kubernetes"}).content.decode()
    assert "No matches." in page and "No conversations yet" not in page
    assert "Sourdough" in client.get("/c/sidebar/").content.decode()


@pytest.mark.django_db
def test_the_chat_page_has_the_drawer_buttons_the_sheet_and_a_polite_live_region(client: Client, alice) -> None:  # noqa: ANN001
    conv = services.conversation_create(user=alice)
    page = client.get(f"/c/{conv.pk}/").content.decode()
    assert 'aria-controls="sidebar"' in page and 'aria-controls="settings"' in page
    assert 'id="shortcuts-dialog"' in page and 'class="skip-link"' in page
    assert 'id="live-region"' in page and 'aria-live="polite"' in page
    assert 'id="composer-stop"' in page
    # Icons are inline SVG hidden from screen readers; the buttons carry the names.
    assert 'aria-label="Conversations"' in page and 'aria-label="Settings"' in page and 'aria-label="New chat"' in page
    assert "📎" not in page and "🔗" not in page


@pytest.mark.django_db
def test_a_non_admin_gets_the_403_page_on_admin_pages_not_a_login_form(client: Client) -> None:
    for url in ("/users/", "/admin/", "/admin/auth/user/"):
        resp = client.get(url, follow=True)
        assert resp.status_code == 403, url
        body = resp.content.decode()
        assert 'id="error-403"' in body and 'name="password"' not in body, url


@pytest.mark.django_db
def test_signed_out_admin_pages_still_ask_to_log_in(db) -> None:  # noqa: ANN001
    services.user_create(username="someone", password=PASSWORD)
    resp = Client().get("/users/")
    assert resp.status_code == 302 and "/accounts/login/" in resp.url


@pytest.mark.django_db
def test_the_new_endpoint_form_says_api_key_and_offers_nothing_to_keep_or_remove(client: Client, alice) -> None:  # noqa: ANN001
    page = client.get("/endpoints/new/").content.decode()
    assert ">API key<" in page and "Api key" not in page
    assert "keep the current" not in page and "Remove the stored" not in page
    resp = client.post("/endpoints/new/", {"name": "Mine", "base_url": "sim://builtin/v1", "api_style": "openai_chat", "api_key": "sk-1"})
    assert resp.status_code == 302
    from chat.models import Endpoint

    ep = Endpoint.objects.get(owner=alice, name="Mine")
    edit = client.get(f"/endpoints/{ep.pk}/").content.decode()
    assert "keep the current key" in edit and "Remove the stored key" in edit


@pytest.mark.django_db
def test_a_new_chat_starts_with_the_last_chats_endpoint_model_and_settings(client: Client, alice) -> None:  # noqa: ANN001
    from chat.models import Endpoint

    first = client.post("/c/new/").url
    conv = Conversation.objects.get(pk=int(first.strip("/").split("/")[-1]))
    ep = Endpoint.objects.filter(owner=alice).first()
    assert conv.endpoint_id == ep.pk  # the first chat: the user's first endpoint and its default
    other = services.user_create(username="mallory", password=PASSWORD)
    theirs = services.conversation_create(user=other)
    Conversation.objects.filter(pk=theirs.pk).update(model="mallory-model", system_prompt="Mallory's", params={"seed": 7})
    Conversation.objects.filter(pk=conv.pk).update(model="sim-slow", system_prompt="Be terse.", params={"temperature": 0.3, "max_tokens": 64})
    new = Conversation.objects.get(pk=int(client.post("/c/new/").url.strip("/").split("/")[-1]))
    assert new.pk != conv.pk
    assert (new.endpoint_id, new.model, new.system_prompt, new.params) == (ep.pk, "sim-slow", "Be terse.", {"temperature": 0.3, "max_tokens": 64})
    assert new.lanes.get().model == "sim-slow"
    page = client.get(f"/c/{new.pk}/").content.decode()
    assert 'value="sim-slow"' in page and "Be terse." in page


@pytest.mark.django_db
def test_the_simulator_scenarios_are_in_the_model_picker_and_parse(client: Client, alice) -> None:  # noqa: ANN001
    from chat.scenarios import SCENARIOS
    from chat.simulator.knobs import parse_knobs

    for sc in SCENARIOS:
        parse_knobs(sc.model)  # raises KnobError on a bad knob
        assert sc.label.startswith("Scenario: ") and len(sc.label) < 80
    conv = services.conversation_create(user=alice)
    assert conv.endpoint.is_simulator
    page = client.get(f"/c/{conv.pk}/").content.decode()
    assert 'value="sim-fast?fault=429&amp;retry_after=10" data-scenario="1">Scenario: rate limited' in page
    assert page.count('data-scenario="1"') == len(SCENARIOS)
    models = client.get(f"/endpoints/{conv.endpoint_id}/models/").content.decode()
    assert models.count('data-scenario="1"') == len(SCENARIOS)


@pytest.mark.django_db
def test_an_added_message_is_not_edited_and_a_hand_edited_answer_drops_its_token_figures(alice) -> None:  # noqa: ANN001
    from chat import frames
    from chat.models import Message

    conv = services.conversation_create(user=alice)
    q = services.message_append(conversation=conv, role="user", content="Question", parent_id=None)
    a = services.message_append(conversation=conv, role="assistant", content="Answer", parent_id=q.pk)
    assert not q.edited and not a.edited
    Message.objects.filter(pk=a.pk).update(
        usage={"prompt_tokens": 9, "completion_tokens": 40, "total_tokens": 49, "reasoning_tokens": 5},
        metrics={"ttft_ms": 120, "tokens_per_sec": 55.5, "total_ms": 900, "cost_usd": 0.001},
    )
    a.refresh_from_db()
    services.message_edit(message=a, content="Answer, by hand")
    a.refresh_from_db()
    assert a.edited and a.usage == {"prompt_tokens": 9}
    assert a.metrics == {"ttft_ms": 120, "total_ms": 900, "cost_usd": 0.001}
    shown = {label: value for label, value, _ in frames.metric_items(a.metrics, a.usage, a.finish_reason)}
    assert shown["completion"] == "—" and shown["tok/s"] == "—" and shown["prompt"] == "9"
    # Saving the same text changes no figure; a user message keeps whatever it had.
    services.message_edit(message=q, content="Question, by hand")
    q.refresh_from_db()
    assert q.edited
