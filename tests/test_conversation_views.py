"""The chat page and its HTTP actions: render, rename, delete, sidebar search, home, Inspect.

Every view is scoped to the requesting user: another user's conversation or message ids give
404 and change nothing. Messages are written with ``chat.services.turn_start`` and
``message_complete`` (the same services the turn runner uses).
"""

from __future__ import annotations

import uuid

import pytest
from django.test import Client

from chat import middleware, services
from chat.models import Conversation, Endpoint, Message, MessageStatus

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
def bob(db):  # noqa: ANN001, ANN201
    return services.user_create(username="bob", password=PASSWORD)


@pytest.fixture
def alice_client(alice) -> Client:  # noqa: ANN001
    c = Client()
    c.force_login(alice)
    return c


@pytest.fixture
def bob_client(bob) -> Client:  # noqa: ANN001
    c = Client()
    c.force_login(bob)
    return c


def chat(
    user, text: str, answer: str = "", *, conversation: Conversation | None = None, **complete
) -> tuple[Conversation, Message, Message]:  # noqa: ANN001
    """One finished turn: the user's ``text`` and a complete assistant ``answer``."""
    if conversation is None:
        conversation = services.conversation_create(user=user)
    endpoint = Endpoint.objects.filter(owner=user).first()
    started = services.turn_start(
        conversation=conversation,
        turn_id=uuid.uuid4(),
        content=text,
        parent_id=None,
        endpoint=endpoint,
        model="sim-fast",
        system_prompt="",
        params={"temperature": 0.5},
    )
    assert started.created
    (assistant_id,) = started.assistant_message_ids
    fields = {
        "status": MessageStatus.COMPLETE,
        "content": answer,
        "reasoning": "",
        "finish_reason": "stop",
        "usage": {"prompt_tokens": 5, "completion_tokens": 7},
        "usage_raw": {},
        "metrics": {"ttft_ms": 120.0},
        "error": {},
        "inspect": {
            "request": {"model": "sim-fast", "messages": [{"role": "user", "content": text}]},
            "events": [{"event": "", "data": '{"choices": []}'}],
        },
    }
    fields.update(complete)
    assert services.message_complete(message_id=assistant_id, **fields)
    conversation.refresh_from_db()
    return (
        conversation,
        Message.objects.get(pk=started.user_message_id),
        Message.objects.get(pk=assistant_id),
    )


# ---- the chat page ------------------------------------------------------------------------


@pytest.mark.django_db
def test_chat_page_renders_for_owner(alice_client: Client, alice) -> None:  # noqa: ANN001
    conv, user_msg, answer = chat(
        alice, "What is the capital of France?", "The capital is **Paris**."
    )
    resp = alice_client.get(f"/c/{conv.pk}/")
    assert resp.status_code == 200
    page = resp.content.decode()
    assert "What is the capital of France?" in page
    assert "The capital is <strong>Paris</strong>." in page
    assert f'id="m-{user_msg.pk}"' in page and f'id="m-{answer.pk}"' in page
    assert f'ws-connect="/ws/c/{conv.pk}/"' in page
    assert f"/m/{answer.pk}/inspect/" in page
    assert conv.title == "What is the capital of France?"
    assert 'value="What is the capital of France?"' in page  # rename box


@pytest.mark.django_db
def test_chat_page_sanitizes_model_output_and_escapes_user_text(
    alice_client: Client, alice
) -> None:  # noqa: ANN001
    conv, _, _ = chat(
        alice,
        "<img src=x onerror=alert(1)>",
        "<script>alert('x')</script> [a](javascript:alert(2))",
    )
    page = alice_client.get(f"/c/{conv.pk}/").content.decode()
    assert "<script>alert('x')</script>" not in page
    assert "<img src=x onerror" not in page
    assert 'href="javascript:' not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page


@pytest.mark.django_db
def test_chat_page_shows_error_without_traceback(alice_client: Client, alice) -> None:  # noqa: ANN001
    conv, _, _ = chat(
        alice,
        "hi",
        "",
        status=MessageStatus.ERROR,
        finish_reason="",
        error={
            "message": "Rate limit exceeded.",
            "status": 429,
            "code": "rate_limit_exceeded",
            "request_id": "req-123",
            "retry_after_s": 7,
        },
    )
    page = alice_client.get(f"/c/{conv.pk}/").content.decode()
    assert "HTTP 429" in page and "rate_limit_exceeded" in page and "req-123" in page
    assert "Retry" in page
    assert "Traceback" not in page


@pytest.mark.django_db
def test_chat_page_is_404_for_another_user(bob_client: Client, alice) -> None:  # noqa: ANN001
    conv, _, _ = chat(alice, "alice's secret plans", "the answer")
    resp = bob_client.get(f"/c/{conv.pk}/")
    assert resp.status_code == 404
    assert "secret plans" not in resp.content.decode()


@pytest.mark.django_db
def test_nonexistent_conversation_is_404(alice_client: Client) -> None:
    assert alice_client.get("/c/987654/").status_code == 404


# ---- rename ----------------------------------------------------------------------------


@pytest.mark.django_db
def test_rename(alice_client: Client, alice) -> None:  # noqa: ANN001
    conv, _, _ = chat(alice, "first message", "answer")
    resp = alice_client.post(f"/c/{conv.pk}/rename/", {"title": "  Trip planning  "})
    assert resp.status_code == 302
    assert resp.url == f"/c/{conv.pk}/"
    conv.refresh_from_db()
    assert conv.title == "Trip planning"
    assert "Trip planning" in alice_client.get(f"/c/{conv.pk}/").content.decode()


@pytest.mark.django_db
def test_rename_with_htmx_returns_sidebar(alice_client: Client, alice) -> None:  # noqa: ANN001
    conv, _, _ = chat(alice, "first message", "answer")
    resp = alice_client.post(
        f"/c/{conv.pk}/rename/", {"title": "Renamed by htmx"}, HTTP_HX_REQUEST="true"
    )
    assert resp.status_code == 200
    page = resp.content.decode()
    assert '<ul id="conversation-list"' in page
    assert "Renamed by htmx" in page
    assert "<html" not in page.lower()


@pytest.mark.django_db
def test_rename_to_blank_is_refused(alice_client: Client, alice) -> None:  # noqa: ANN001
    conv, _, _ = chat(alice, "keep this title", "answer")
    alice_client.post(f"/c/{conv.pk}/rename/", {"title": "   "})
    conv.refresh_from_db()
    assert conv.title == "keep this title"


@pytest.mark.django_db
def test_rename_is_post_only(alice_client: Client, alice) -> None:  # noqa: ANN001
    conv, _, _ = chat(alice, "hello", "answer")
    assert alice_client.get(f"/c/{conv.pk}/rename/?title=x").status_code == 405


@pytest.mark.django_db
def test_rename_another_users_conversation_is_404(bob_client: Client, alice) -> None:  # noqa: ANN001
    conv, _, _ = chat(alice, "alice's title", "answer")
    resp = bob_client.post(f"/c/{conv.pk}/rename/", {"title": "hacked"})
    assert resp.status_code == 404
    resp = bob_client.post(f"/c/{conv.pk}/rename/", {"title": "hacked"}, HTTP_HX_REQUEST="true")
    assert resp.status_code == 404
    conv.refresh_from_db()
    assert conv.title == "alice's title"


# ---- delete ----------------------------------------------------------------------------


@pytest.mark.django_db
def test_delete(alice_client: Client, alice) -> None:  # noqa: ANN001
    conv, user_msg, answer = chat(alice, "to be deleted", "bye")
    assert alice_client.get(f"/c/{conv.pk}/delete/").status_code == 405
    resp = alice_client.post(f"/c/{conv.pk}/delete/")
    assert resp.status_code == 302
    assert resp.url == "/"
    assert not Conversation.objects.filter(pk=conv.pk).exists()
    assert not Message.objects.filter(pk__in=[user_msg.pk, answer.pk]).exists()
    assert alice_client.get(f"/c/{conv.pk}/").status_code == 404


@pytest.mark.django_db
def test_delete_another_users_conversation_is_404(bob_client: Client, alice) -> None:  # noqa: ANN001
    conv, _, answer = chat(alice, "precious", "answer")
    assert bob_client.post(f"/c/{conv.pk}/delete/").status_code == 404
    assert Conversation.objects.filter(pk=conv.pk).exists()
    assert Message.objects.filter(pk=answer.pk).exists()


# ---- Inspect -----------------------------------------------------------------------------


@pytest.mark.django_db
def test_inspect_own_message(alice_client: Client, alice) -> None:  # noqa: ANN001
    _, _, answer = chat(alice, "inspect me", "ok")
    resp = alice_client.get(f"/m/{answer.pk}/inspect/")
    assert resp.status_code == 200
    page = resp.content.decode()
    assert str(answer.pk) in page
    assert "sim-fast" in page  # the request JSON
    assert "inspect me" in page
    assert "{&quot;choices&quot;: []}" in page  # the raw event, escaped


@pytest.mark.django_db
def test_inspect_another_users_message_is_404(bob_client: Client, alice) -> None:  # noqa: ANN001
    _, user_msg, answer = chat(alice, "private prompt text", "private answer")
    for m in (user_msg, answer):
        resp = bob_client.get(f"/m/{m.pk}/inspect/")
        assert resp.status_code == 404
        assert "private prompt text" not in resp.content.decode()
    answer.refresh_from_db()
    assert answer.content == "private answer"


@pytest.mark.django_db
def test_inspect_unknown_or_malformed_id(alice_client: Client) -> None:
    assert alice_client.get(f"/m/{uuid.uuid4()}/inspect/").status_code == 404
    assert alice_client.get("/m/12345/inspect/").status_code == 404
    assert alice_client.post(f"/m/{uuid.uuid4()}/inspect/").status_code in (404, 405)


# ---- sidebar and search ------------------------------------------------------------------


def sidebar(client: Client, q: str = "", current: str = "") -> str:
    resp = client.get("/c/sidebar/", {"q": q, "current": current})
    assert resp.status_code == 200
    return resp.content.decode()


@pytest.mark.django_db
def test_sidebar_lists_own_conversations_newest_first(alice_client: Client, alice, bob) -> None:  # noqa: ANN001
    older, _, _ = chat(alice, "Older topic", "a")
    newer, _, _ = chat(alice, "Newer topic", "b")
    chat(bob, "Bob topic", "c")
    services.conversation_create(user=alice)  # untitled, no messages: not listed
    page = sidebar(alice_client)
    assert page.index("Newer topic") < page.index("Older topic")
    assert "Bob topic" not in page
    assert page.count("<li") == 2


@pytest.mark.django_db
def test_sidebar_search_by_title(alice_client: Client, alice) -> None:  # noqa: ANN001
    wanted, _, _ = chat(alice, "Kubernetes networking question", "answer one")
    chat(alice, "Sourdough bread recipe", "answer two")
    page = sidebar(alice_client, "kubernetes")
    assert f"/c/{wanted.pk}/" in page
    assert "Sourdough" not in page


@pytest.mark.django_db
def test_sidebar_search_by_message_text(alice_client: Client, alice) -> None:  # noqa: ANN001
    conv, _, _ = chat(alice, "Short title", "The answer mentions flibbertigibbet deep inside.")
    services.conversation_rename(conversation=conv, title="Unrelated name")
    chat(alice, "Something else", "nothing here")
    page = sidebar(alice_client, "FLIBBERTIGIBBET")
    assert f"/c/{conv.pk}/" in page
    assert "Unrelated name" in page
    assert "Something else" not in page
    # A conversation matching in several messages is listed once.
    chat(alice, "flibbertigibbet again", "flibbertigibbet", conversation=conv)
    assert sidebar(alice_client, "flibbertigibbet").count(f'href="/c/{conv.pk}/"') == 1


@pytest.mark.django_db
def test_sidebar_search_never_lists_another_users_conversations(
    alice_client: Client, alice, bob
) -> None:  # noqa: ANN001
    bob_conv, _, _ = chat(bob, "Bob's zanzibar notes", "zanzibar details")
    alice_conv, _, _ = chat(alice, "Alice's zanzibar trip", "ok")
    page = sidebar(alice_client, "zanzibar")
    assert f"/c/{alice_conv.pk}/" in page
    assert f"/c/{bob_conv.pk}/" not in page
    assert "Bob" not in page
    # Searching only Bob's message text finds nothing for Alice.
    assert "No matches." in sidebar(alice_client, "zanzibar details")
    # Passing Bob's id as "current" leaks nothing either.
    assert "Bob" not in sidebar(alice_client, "", str(bob_conv.pk))


@pytest.mark.django_db
def test_sidebar_current_parameter_is_tolerant(alice_client: Client, alice) -> None:  # noqa: ANN001
    conv, _, _ = chat(alice, "Current one", "a")
    assert 'class="current"' in sidebar(alice_client, "", str(conv.pk))
    assert 'class="current"' not in sidebar(alice_client, "", "not-a-number")


@pytest.mark.django_db
def test_chat_page_sidebar_is_scoped(alice_client: Client, alice, bob) -> None:  # noqa: ANN001
    chat(bob, "Bob private sidebar entry", "x")
    conv, _, _ = chat(alice, "Alice entry", "y")
    page = alice_client.get(f"/c/{conv.pk}/").content.decode()
    assert "Alice entry" in page
    assert "Bob private sidebar entry" not in page


# ---- home and new conversation -----------------------------------------------------------


@pytest.mark.django_db
def test_home_offers_a_new_chat_without_writing(alice_client: Client, alice) -> None:  # noqa: ANN001
    """GET / changes nothing (issue 8 item 19): with no empty conversation it shows a form that
    POSTs to /c/new/ (app.js submits it at once), and that POST creates the conversation."""
    resp = alice_client.get("/")
    assert resp.status_code == 200
    assert b'action="/c/new/"' in resp.content and b"data-autosubmit" in resp.content
    assert not Conversation.objects.filter(owner=alice).exists()
    created = alice_client.post("/c/new/")
    conv = Conversation.objects.get(owner=alice)
    assert created.url == f"/c/{conv.pk}/"
    assert conv.endpoint is not None and conv.endpoint.owner == alice
    assert conv.lanes.count() == 1
    assert alice_client.get(created.url).status_code == 200


@pytest.mark.django_db
def test_home_reuses_the_empty_conversation(alice_client: Client, alice) -> None:  # noqa: ANN001
    first = alice_client.post("/c/new/").url
    assert alice_client.get("/").url == first
    assert alice_client.get("/").url == first
    assert Conversation.objects.filter(owner=alice).count() == 1


@pytest.mark.django_db
def test_home_does_not_reuse_a_conversation_with_messages(alice_client: Client, alice) -> None:  # noqa: ANN001
    conv, _, _ = chat(alice, "already used", "x")
    resp = alice_client.get("/")
    assert resp.status_code == 200 and b'action="/c/new/"' in resp.content
    assert Conversation.objects.filter(owner=alice).count() == 1
    assert alice_client.post("/c/new/").url != f"/c/{conv.pk}/"


@pytest.mark.django_db
def test_home_never_redirects_to_another_users_conversation(
    alice_client: Client, alice, bob
) -> None:  # noqa: ANN001
    bob_empty = services.conversation_create(user=bob)
    resp = alice_client.get("/")
    assert resp.status_code == 200 and f"/c/{bob_empty.pk}/" not in resp.content.decode()


@pytest.mark.django_db
def test_new_conversation(alice_client: Client, alice) -> None:  # noqa: ANN001
    assert alice_client.get("/c/new/").status_code == 405
    resp = alice_client.post("/c/new/")
    assert resp.status_code == 302
    conv = Conversation.objects.get(owner=alice)
    assert resp.url == f"/c/{conv.pk}/"


@pytest.mark.django_db
def test_fork_button_works_with_csrf_enforced_and_answers_htmx_with_a_redirect() -> None:
    from django.contrib.auth import get_user_model
    from django.test import Client

    from chat import services as svc

    user = get_user_model().objects.create_user("forker", password="pw-forker-1")
    endpoint = svc.endpoint_create(user=user, name="e", base_url="http://127.0.0.1:9/v1")
    conv = svc.conversation_create(user=user, endpoint=endpoint)
    svc.message_append(conversation=conv, role="user", content="fork me", parent_id=None)
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    page = client.get(f"/c/{conv.pk}/")
    token = page.cookies["csrftoken"].value
    r = client.post(f"/c/{conv.pk}/fork/", HTTP_HX_REQUEST="true", HTTP_X_CSRFTOKEN=token)
    assert r.status_code == 204 and r["HX-Redirect"].startswith("/c/")
    assert r["HX-Redirect"] != f"/c/{conv.pk}/"
