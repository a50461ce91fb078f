"""Issue 10: Inspect's drawer fragment and "View code" of one turn, over HTTP.

The fragment (``/m/<id>/inspect/`` with ``HX-Request``) is the record without the page around
it: copy buttons, the events filter; the page keeps working for direct links. ``/m/<id>/code/``
turns the recorded request into snippets with the key as an environment variable. Another
user's message is a 404 on each.
"""

from __future__ import annotations

import uuid

import pytest

from chat import services
from chat.models import Endpoint, Message, MessageStatus
from tests.accounts import PASSWORD, client_for, fast_accounts  # noqa: F401

KEY = "sk-inspect-SECRETKEY-5555"


def answer(user, *, request: dict) -> Message:  # noqa: ANN001
    conv = services.conversation_create(user=user)
    endpoint = Endpoint.objects.filter(owner=user).first()
    started = services.turn_start(conversation=conv, turn_id=uuid.uuid4(), content="hi there", parent_id=None,
                                  endpoint=endpoint, model="sim-fast", system_prompt="", params={})
    (mid,) = started.assistant_message_ids
    assert services.message_complete(
        message_id=mid, status=MessageStatus.COMPLETE, content="Hello <b>back</b>", reasoning="", finish_reason="stop",
        usage={}, usage_raw={}, metrics={}, error={},
        inspect={"request": request, "events": [{"event": "", "data": '{"choices": [{"delta": {"content": "Hello"}}]}'},
                                               {"event": "", "data": '{"usage": {"total_tokens": 9}}'}]},
    )
    return Message.objects.get(pk=mid)


RECORDED = {
    "url": "http://127.0.0.1:8000/simulator/v1/chat/completions",
    "headers": {"Content-Type": "application/json", "Accept": "text/event-stream", "Authorization": "[REDACTED]"},
    "body": {"model": "sim-fast", "messages": [{"role": "user", "content": "hi there"}], "stream": True},
}


@pytest.mark.django_db
def test_fragment_is_the_record_without_the_page(alice) -> None:  # noqa: ANN001
    m = answer(alice, request=RECORDED)
    c = client_for(alice)
    resp = c.get(f"/m/{m.pk}/inspect/", HTTP_HX_REQUEST="true")
    assert resp.status_code == 200
    page = resp.content.decode()
    assert "<html" not in page.lower() and "<header" not in page
    assert 'class="events-filter"' in page and 'maxlength="200"' in page
    for label in ("Copy request JSON", "Copy response text", "Copy all events", "Copy event 1", "Copy event 2"):
        assert f'aria-label="{label}"' in page, label
    assert 'class="icon-button inspect-close"' in page and "<details" in page
    assert "Hello &lt;b&gt;back&lt;/b&gt;" in page  # the answer as text, escaped
    assert "HX-Request" in resp["Vary"]
    full = c.get(f"/m/{m.pk}/inspect/").content.decode()
    assert "<html" in full.lower() and 'class="events-filter"' in full and "inspect-close" not in full


@pytest.mark.django_db
def test_fragment_and_code_of_another_users_turn_are_404(alice, bob) -> None:  # noqa: ANN001
    m = answer(alice, request=RECORDED)
    c = client_for(bob)
    for url in (f"/m/{m.pk}/inspect/", f"/m/{m.pk}/code/"):
        for headers in ({}, {"HTTP_HX_REQUEST": "true"}):
            resp = c.get(url, **headers)
            assert resp.status_code == 404, (url, headers)
            assert "hi there" not in resp.content.decode()


@pytest.mark.django_db
def test_this_turns_code_is_the_recorded_request_with_the_key_as_a_variable(alice) -> None:  # noqa: ANN001
    m = answer(alice, request=RECORDED)
    c = client_for(alice)
    part = c.get(f"/m/{m.pk}/code/", HTTP_HX_REQUEST="true").content.decode()
    assert 'data-scope="this"' in part and "<html" not in part.lower()
    assert "The request this turn sent" in part
    assert "BUILT_IN_SIMULATOR_API_KEY" in part  # the key's environment variable
    assert "[REDACTED]" not in part and KEY not in part
    assert "http://127.0.0.1:8000/simulator/v1/chat/completions" in part and "hi there" in part
    page = c.get(f"/m/{m.pk}/code/").content.decode()
    assert "<html" in page.lower() and "BUILT_IN_SIMULATOR_API_KEY" in page


@pytest.mark.django_db
def test_a_turn_without_a_full_record_says_so(alice) -> None:  # noqa: ANN001
    m = answer(alice, request={"model": "sim-fast"})
    part = client_for(alice).get(f"/m/{m.pk}/code/", HTTP_HX_REQUEST="true").content.decode()
    assert "No request was recorded for this turn" in part


@pytest.mark.django_db
def test_next_turns_code_is_marked_as_next(alice) -> None:  # noqa: ANN001
    m = answer(alice, request=RECORDED)
    part = client_for(alice).get(f"/c/{m.conversation_id}/code/", HTTP_HX_REQUEST="true").content.decode()
    assert 'data-scope="next"' in part and "would send next" in part
