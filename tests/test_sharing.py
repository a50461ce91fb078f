"""Share links (issue 13): frozen, secret-free snapshots; expiry and revocation give a clear
404 to everyone; signed-in-only links; "continue as a copy"; a second user can neither share
nor revoke someone else's; model output is sanitized on the shared page."""

from __future__ import annotations

import uuid
from datetime import timedelta

from django.test import Client
from django.utils import timezone

from chat import services
from chat.models import Conversation, Endpoint, Message
from chat.sharing.models import ShareLink
from tests.accounts import PASSWORD, client_for, fast_accounts  # noqa: F401


def conversation(user) -> Conversation:  # noqa: ANN001
    endpoint = services.endpoint_create(
        user=user, name="Private box", base_url="https://llm.internal.example/v1", api_style="openai_chat",
        api_key="sk-secret-123456", extra_headers={"X-Org": "hidden-org"}, stream_options=True, default_model="m1",
    )
    conv = services.conversation_create(user=user, endpoint=endpoint)
    started = services.turn_start(
        conversation=conv, turn_id=uuid.uuid4(), content="Hello <b>there</b>", parent_id=None,
        endpoint=endpoint, model="m1", system_prompt="Be kind.", params={"temperature": 0.3},
    )
    services.message_complete(
        message_id=started.assistant_message_ids[0], content="Answer with <script>alert(1)</script> and [x](http://e.x)",
        reasoning="secret thoughts", usage={"prompt_tokens": 5, "completion_tokens": 7}, usage_raw={},
        metrics={"ttft_ms": 120, "total_ms": 400, "tokens_per_sec": 33.3}, finish_reason="stop",
        status="complete", error={}, inspect={},
    )
    conv.refresh_from_db()
    return conv


def create_link(c: Client, conv: Conversation, **data) -> str:
    r = c.post(f"/shares/new/{conv.pk}/", {"visibility": "link", "expires": "", **data})
    assert r.status_code == 200
    return r.context["new_url"].split("/s/")[1].rstrip("/")


def test_snapshot_is_frozen_secret_free_and_sanitized(alice, bob) -> None:  # noqa: ANN001
    conv = conversation(alice)
    token = create_link(client_for(alice), conv)
    link = ShareLink.objects.get()
    assert link.token_hash != token and token not in str(link.snapshot)
    dumped = str(link.snapshot)
    for secret in ("llm.internal.example", "sk-secret", "hidden-org", "X-Org", "endpoint_id", "base_url"):
        assert secret not in dumped
    assert "secret thoughts" not in dumped  # reasoning not included unless asked
    anon = Client()
    r = anon.get(f"/s/{token}/")
    html = r.content.decode()
    assert r.status_code == 200 and r["Referrer-Policy"] == "same-origin"
    assert "Hello &lt;b&gt;there&lt;/b&gt;" in html
    assert "<script>alert(1)" not in html and "&lt;script&gt;" in html
    assert 'rel="noopener noreferrer nofollow"' in html
    assert "llm.internal.example" not in html and "Continue as a copy" not in html
    # The snapshot's messages are not the page's flash messages (base.html lists `messages`):
    # no Python dict of a message, and no flash list at all.
    assert "{&#x27;role&#x27;" not in html and "{'role'" not in html and 'class="flash"' not in html
    # Frozen: later messages do not appear.
    Message.objects.filter(conversation=conv, role="user").update(content="changed later")
    assert "changed later" not in anon.get(f"/s/{token}/").content.decode()


def test_revoked_and_expired_links_are_404_for_everyone(alice, bob) -> None:  # noqa: ANN001
    conv = conversation(alice)
    a = client_for(alice)
    token = create_link(a, conv)
    link = ShareLink.objects.get()
    # Bob cannot revoke it.
    assert client_for(bob).post("/shares/", {"revoke": link.pk}).status_code == 404
    assert Client().get(f"/s/{token}/").status_code == 200
    a.post("/shares/", {"revoke": link.pk})
    for c in (Client(), a, client_for(bob)):
        r = c.get(f"/s/{token}/")
        assert r.status_code == 404 and "This link was revoked" in r.content.decode()
        assert c.post(f"/s/{token}/copy/").status_code in (302, 404)
    token2 = create_link(a, conv, expires="1h")
    ShareLink.objects.filter(revoked_at__isnull=True).update(expires_at=timezone.now() - timedelta(seconds=1))
    r = Client().get(f"/s/{token2}/")
    assert r.status_code == 404 and "This link has expired" in r.content.decode()
    assert Client().get("/s/not-a-token/").status_code == 404


def test_second_user_cannot_share_someone_elses_conversation(alice, bob) -> None:  # noqa: ANN001
    conv = conversation(alice)
    r = client_for(bob).post(f"/shares/new/{conv.pk}/", {"visibility": "link"})
    assert r.status_code == 404 and not ShareLink.objects.exists()


def test_signed_in_only_link_and_continue_as_copy(alice, bob, settings) -> None:  # noqa: ANN001
    conv = conversation(alice)
    token = create_link(client_for(alice), conv, visibility="site", include_reasoning="on")
    r = Client().get(f"/s/{token}/")
    assert r.status_code == 302 and "/accounts/login/" in r["Location"]
    b = client_for(bob)
    page = b.get(f"/s/{token}/").content.decode()
    assert "secret thoughts" in page and "Continue as a copy" in page
    r = b.post(f"/s/{token}/copy/")
    copy = Conversation.objects.get(owner=bob, title__endswith="(copy)")
    assert r.status_code == 302 and r["Location"] == f"/c/{copy.pk}/"
    assert copy.endpoint == Endpoint.objects.filter(owner=bob).first() and copy.system_prompt == "Be kind."
    roles = list(Message.objects.filter(conversation=copy).order_by("created_at").values_list("role", "content"))
    assert roles[0] == ("user", "Hello <b>there</b>") and len(roles) == 2
    # The admin forbids public links: creating one is refused, existing ones need sign-in.
    settings.PLAYGROUND_PUBLIC_SHARE_LINKS = False
    r = client_for(alice).post(f"/shares/new/{conv.pk}/", {"visibility": "link"})
    assert "switched off" in r.content.decode() and ShareLink.objects.count() == 1
