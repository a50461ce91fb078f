"""A new chat starts with the settings of the last chat the user sees (issue 10 "Smaller
things"): not those of a newer comparison or of a prompt test-set run's hidden chat, and never
on an endpoint the user may no longer use."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from chat import services
from chat.models import Conversation
from chat.prompts.models import TestRun, TestRunCell, TestSet
from chat.prompts.services import VersionContent, prompt_create
from tests.accounts import client_for, fast_accounts  # noqa: F401


def test_new_chat_copies_the_last_visible_chat_not_a_run_or_comparison(alice, bob) -> None:  # noqa: ANN001
    mine = services.endpoint_create(user=alice, name="Mine", base_url="https://llm.example.com/v1", api_key="sk-a")
    other = services.endpoint_create(user=alice, name="Other", base_url="https://other.example.com/v1", api_key="sk-b")
    now = timezone.now()
    chat = Conversation.objects.create(owner=alice, title="Visible", endpoint=mine, model="m-visible",
                                       system_prompt="Be brief.", params={"temperature": 0.2})
    Conversation.objects.filter(pk=chat.pk).update(updated_at=now - timedelta(minutes=5))
    run_chat = Conversation.objects.create(owner=alice, title="Run row", endpoint=other, model="m-run",
                                           system_prompt="Tutor {{unclosed", params={"temperature": 0.3})
    prompt = prompt_create(user=alice, name="p", content=VersionContent("", ({"role": "user", "content": "x"},), {}))
    test_set = TestSet.objects.create(prompt=prompt, name="s", rows=[{}], checks=[])
    run = TestRun.objects.create(test_set=test_set, owner=alice, lanes=[])
    TestRunCell.objects.create(run=run, row=0, lane=0, conversation=run_chat)
    Conversation.objects.create(owner=alice, kind="compare", title="A comparison", endpoint=other, model="m-cmp")
    # Bob's newer chat on his own endpoint is not Alice's business.
    bobs = services.endpoint_create(user=bob, name="Bob's", base_url="https://bob.example.com/v1", api_key="sk-c")
    Conversation.objects.create(owner=bob, title="Bob", endpoint=bobs, model="m-bob")

    response = client_for(alice).post("/c/new/")
    assert response.status_code == 302
    new = Conversation.objects.filter(owner=alice).order_by("-id").first()
    assert (new.endpoint_id, new.model, new.system_prompt, new.params) == (
        mine.pk, "m-visible", "Be brief.", {"temperature": 0.2})
