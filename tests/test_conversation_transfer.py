"""Conversation export (JSON: every branch, attachment, metric and settings snapshot; Markdown:
the current branch) and import (validated; a bad file imports nothing). A second user cannot
export someone else's conversation."""

from __future__ import annotations

import json
import uuid

from django.core.files.uploadedfile import SimpleUploadedFile

from chat import services
from chat.models import Attachment, Conversation, Message
from chat.sharing import transfer
from tests.accounts import PASSWORD, client_for, fast_accounts  # noqa: F401

PNG = b"\x89PNG\r\n\x1a\nfake-png-bytes"




def branched(user) -> Conversation:  # noqa: ANN001
    """A user message with an image, answered twice (two branches), then a follow-up."""
    conv = services.conversation_create(user=user)
    endpoint = conv.endpoint
    first = services.turn_start(conversation=conv, turn_id=uuid.uuid4(), content="What is this?", parent_id=None,
                                endpoint=endpoint, model="m1", system_prompt="Sys", params={"temperature": 0.5})
    Attachment.objects.create(owner=user, message_id=first.user_message_id, kind="image", media_type="image/png",
                              filename="dot.png", data=PNG, size=len(PNG))
    for i, aid in enumerate([first.assistant_message_ids[0]]):
        services.message_complete(message_id=aid, status="complete", content=f"A dot {i}", reasoning="hmm",
                                  finish_reason="stop", usage={"prompt_tokens": 3, "completion_tokens": 2},
                                  usage_raw={"x": 1}, metrics={"ttft_ms": 12}, error={}, inspect={})
    second = services.turn_start(conversation=conv, turn_id=uuid.uuid4(), content="What is this?", parent_id=None,
                                 endpoint=endpoint, model="m2", system_prompt="Sys", params={})
    services.message_complete(message_id=second.assistant_message_ids[0], status="complete", content="Another branch",
                              reasoning="", finish_reason="stop", usage={}, usage_raw={}, metrics={}, error={}, inspect={})
    conv.refresh_from_db()
    return conv


def shape(conv: Conversation) -> list[tuple]:
    msgs = list(conv.messages.order_by("created_at", "id"))
    index = {m.id: i for i, m in enumerate(msgs)}
    out = []
    for m in msgs:
        atts = [(a.kind, a.filename, bytes(a.data)) for a in m.attachments.all()]
        out.append((m.role, m.content, m.reasoning, m.status, index.get(m.parent_id), m.usage, m.usage_raw, m.metrics,
                    {k: v for k, v in m.settings_snapshot.items() if k not in ("endpoint_id", "base_url", "team_id")}, atts))
    return out


def test_json_round_trip_keeps_every_branch_attachment_and_metric(alice, bob) -> None:  # noqa: ANN001
    conv = branched(alice)
    r = client_for(alice).get(f"/c/{conv.pk}/export.json")
    assert r.status_code == 200 and r["Content-Disposition"].startswith("attachment")
    data = json.loads(r.content)
    assert data["format"] == "playground.conversation/1" and len(data["messages"]) == 4
    assert "sk-" not in r.content.decode() and "base_url" not in r.content.decode()
    r = client_for(bob).post("/conversations/import/", {"file": SimpleUploadedFile("c.json", r.content)})
    copy = Conversation.objects.get(owner=bob)
    assert r.status_code == 302 and r["Location"] == f"/c/{copy.pk}/"
    assert shape(copy) == shape(conv)
    assert (copy.title, copy.system_prompt, copy.model, copy.params) == (conv.title, conv.system_prompt, conv.model, conv.params)
    assert copy.current_leaf.content == conv.current_leaf.content
    assert all(a.owner_id == bob.pk for a in Attachment.objects.filter(message__conversation=copy))


def test_bad_files_import_nothing_and_exports_are_owner_only(alice, bob) -> None:  # noqa: ANN001
    conv = branched(alice)
    good = transfer.conversation_export(conversation=conv)
    b = client_for(bob)
    assert b.get(f"/c/{conv.pk}/export.json").status_code == 404
    assert b.get(f"/c/{conv.pk}/export.md").status_code == 404
    n_conv, n_msg, n_att = Conversation.objects.count(), Message.objects.count(), Attachment.objects.count()
    bad_parent = json.loads(json.dumps(good))
    bad_parent["messages"][1]["parent"] = "nope"
    bad_att = json.loads(json.dumps(good))
    bad_att["messages"][0]["attachments"][0]["data"] = "!!!not base64"
    for payload, why in ((b"{oops", "Not valid JSON"), (json.dumps({"format": "x"}).encode(), "Not a conversation export"),
                         (json.dumps(bad_parent).encode(), "parent must come before"),
                         (json.dumps(bad_att).encode(), "not base64")):
        r = b.post("/conversations/import/", {"file": SimpleUploadedFile("c.json", payload)}, follow=True)
        assert why in r.content.decode()
    assert (Conversation.objects.count(), Message.objects.count(), Attachment.objects.count()) == (n_conv, n_msg, n_att)


def test_markdown_is_the_current_branch(alice) -> None:  # noqa: ANN001
    conv = branched(alice)
    md = client_for(alice).get(f"/c/{conv.pk}/export.md").content.decode()
    assert md.startswith("# ") and "**System prompt**" in md and "## User" in md and "## Assistant (m2)" in md
    assert "Another branch" in md and "A dot 0" not in md
