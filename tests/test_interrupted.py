"""Which streaming turns become ``interrupted``: only dead ones (issue 4, "Lifecycle").

:func:`chat.services.messages_mark_interrupted` runs lazily on every websocket connect. A turn
owned by another process whose heartbeat (the partial save) is fresh is live and is never
touched; one whose heartbeat is stale is dead. A turn of this process is dead when the
process's registry does not run it.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from chat import services
from chat.models import Message, MessageStatus

pytestmark = [pytest.mark.django_db(transaction=True)]

FOREIGN = "other-host:4242:deadbeef"


@pytest.fixture
def conv():  # noqa: ANN201
    user = get_user_model().objects.create_user("ivy", password="pw-ivy-12345")
    endpoint = services.endpoint_create(user=user, name="e", base_url="http://127.0.0.1:9/v1")
    return services.conversation_create(user=user, endpoint=endpoint), endpoint


def streaming_turn(
    conv,
    endpoint,
    *,
    owner: str,
    heartbeat_age_s: float | None,
    text: str = "partial 👩\u200d💻\r\n",
) -> uuid.UUID:  # noqa: ANN001
    started = services.turn_start(
        conversation=conv,
        turn_id=uuid.uuid4(),
        content="hi",
        parent_id=None,
        endpoint=endpoint,
        model="m",
        system_prompt="",
        params={},
    )
    mid = started.assistant_message_ids[0]
    beat = None if heartbeat_age_s is None else timezone.now() - timedelta(seconds=heartbeat_age_s)
    Message.objects.filter(pk=mid).update(owner_process=owner, heartbeat_at=beat, content=text)
    return mid


def row(mid: uuid.UUID) -> Message:
    return Message.objects.get(pk=mid)


def test_a_live_turn_of_another_process_is_never_touched(conv) -> None:  # noqa: ANN001
    c, e = conv
    live = streaming_turn(c, e, owner=FOREIGN, heartbeat_age_s=1.0)
    # Even with nothing live in this process and a conversation filter or none.
    assert services.messages_mark_interrupted(stale_after_s=10.0, live_ids=set()) == 0
    assert (
        services.messages_mark_interrupted(stale_after_s=10.0, live_ids=set(), conversation_id=c.pk)
        == 0
    )
    m = row(live)
    assert (
        m.status == MessageStatus.STREAMING
        and m.error == {}
        and m.content == "partial 👩\u200d💻\r\n"
    )
    # A fresh heartbeat keeps it alive over time: the partial save moves it forward.
    Message.objects.filter(pk=live).update(heartbeat_at=timezone.now() - timedelta(seconds=9.5))
    assert services.messages_mark_interrupted(stale_after_s=10.0) == 0
    assert services.message_save_partial(
        message_id=live, content="partial 👩\u200d💻\r\nmore", reasoning=""
    )
    assert services.messages_mark_interrupted(stale_after_s=10.0) == 0
    assert row(live).status == MessageStatus.STREAMING


def test_a_stale_turn_of_another_process_becomes_interrupted_with_its_text(conv) -> None:  # noqa: ANN001
    c, e = conv
    live = streaming_turn(c, e, owner=FOREIGN, heartbeat_age_s=2.0)
    stale = streaming_turn(c, e, owner=FOREIGN, heartbeat_age_s=30.0, text="kept\u2028text")
    never = streaming_turn(c, e, owner=FOREIGN, heartbeat_age_s=None, text="")
    assert services.messages_mark_interrupted(stale_after_s=10.0, conversation_id=c.pk) == 2
    assert row(live).status == MessageStatus.STREAMING
    s = row(stale)
    assert s.status == MessageStatus.INTERRUPTED and s.content == "kept\u2028text"
    assert s.error["code"] == "interrupted"
    assert row(never).status == MessageStatus.INTERRUPTED
    # A late partial save of the dead turn cannot resurrect it or change its text.
    assert not services.message_save_partial(
        message_id=stale, content="kept\u2028text and more", reasoning=""
    )
    assert row(stale).content == "kept\u2028text"


def test_this_process_turns_are_judged_by_its_registry(conv) -> None:  # noqa: ANN001
    c, e = conv
    running = streaming_turn(c, e, owner=services.PROCESS_ID, heartbeat_age_s=30.0)
    orphan = streaming_turn(c, e, owner=services.PROCESS_ID, heartbeat_age_s=30.0)
    assert services.messages_mark_interrupted(stale_after_s=10.0, live_ids={running}) == 1
    assert row(running).status == MessageStatus.STREAMING
    assert row(orphan).status == MessageStatus.INTERRUPTED


def test_other_conversations_are_left_alone_when_filtered(conv) -> None:  # noqa: ANN001
    c, e = conv
    other = services.conversation_create(user=c.owner, endpoint=e)
    stale_elsewhere = streaming_turn(other, e, owner=FOREIGN, heartbeat_age_s=60.0)
    assert services.messages_mark_interrupted(stale_after_s=10.0, conversation_id=c.pk) == 0
    assert row(stale_elsewhere).status == MessageStatus.STREAMING


def test_a_just_written_turn_of_this_process_gets_a_grace_before_it_is_registered(conv) -> None:  # noqa: ANN001
    # turn_start writes the rows a moment before registry.start registers the task; a tab
    # connecting in between must not mark that turn interrupted.
    c, endpoint = conv
    fresh = streaming_turn(c, endpoint, owner=services.PROCESS_ID, heartbeat_age_s=0.5)
    old = streaming_turn(c, endpoint, owner=services.PROCESS_ID, heartbeat_age_s=30)
    assert services.messages_mark_interrupted(stale_after_s=10, live_ids=set()) == 1
    assert Message.objects.get(pk=fresh).status == MessageStatus.STREAMING
    assert Message.objects.get(pk=old).status == MessageStatus.INTERRUPTED
