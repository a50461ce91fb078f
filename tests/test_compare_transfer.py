"""Comparison export (versioned JSON, Markdown) and import (validated; a bad file imports
nothing; lanes on the importer's endpoint of the same name or on none), the admin's switch for
public share links, and test-set run conversations kept out of the chat sidebar (issue 13)."""

from __future__ import annotations

import json
import uuid

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from chat import selectors, services
from chat.compare import selectors as cs
from chat.compare import services as compare_services
from chat.compare import transfer
from chat.models import Conversation, Endpoint, Lane, Message, SiteSettings, Vote
from chat.selectors import NextTurnSettings
from chat.sharing import services as sharing_services
from chat.sharing.models import ShareLink
from tests.accounts import PASSWORD, client_for, fast_accounts  # noqa: F401

SECRETS = ("llm.internal.example", "sk-secret", "hidden-org", "X-Org", "sim://", "base_url", "endpoint_id",
           "team_id", "lane_id", "message_id")


def private_box(user) -> Endpoint:  # noqa: ANN001
    return services.endpoint_create(
        user=user, name="Private box", base_url="https://llm.internal.example/v1", api_style="openai_chat",
        api_key="sk-secret-123456", extra_headers={"X-Org": "hidden-org"}, stream_options=True, default_model="m1",
    )


def finish(m: Message, text: str, *, ttft: float = 50.0, status: str = "complete") -> None:
    services.message_complete(
        message_id=m.pk, status=status, content=text, reasoning=f"thinking about {text}", finish_reason="stop",
        usage={"prompt_tokens": 11, "completion_tokens": 7, "reasoning_tokens": 3}, usage_raw={"raw": {"n": 1}},
        metrics={"ttft_ms": ttft, "tokens_per_sec": 41.5, "total_ms": 900.0, "cost_usd": 0.00012},
        error={} if status == "complete" else {"message": "upstream said no"}, inspect={"request": "not exported"},
    )


def streaming() -> list[Message]:
    return list(Message.objects.filter(role="assistant", status="streaming").order_by("created_at", "id"))


def rich_comparison(user) -> Conversation:  # noqa: ANN001
    """Three lanes (two endpoints, settings each), two turns with 2 runs per lane, a retried
    answer, an error, and a vote on each turn (the vote snapshot as the view stores it)."""
    sim = Endpoint.objects.get(owner=user, name="Built-in simulator")
    box = private_box(user)
    comparison = compare_services.compare_create(user=user, lanes=[
        NextTurnSettings(sim.pk, "sim-fast", "", {}),
        NextTurnSettings(box.pk, "m1", "Be brief.", {"temperature": 0.5, "max_tokens": 64}),
        NextTurnSettings(sim.pk, "sim-reasoning", "Think first.", {"seed": 7}),
    ])
    lanes = cs.lanes_of(conversation=comparison)
    Lane.objects.filter(pk=lanes[1].pk).update(label="Boxed")
    for t, prompt in enumerate(("What is 2+2? <b>bold</b>", "And 3+3?")):
        for p in cs.compare_plan_send(user=user, conversation_id=comparison.pk, turn_id=uuid.uuid4(), content=prompt,
                                      settings={}, runs=2):
            services.turn_commit(plan=p)
        for i, m in enumerate(streaming()):
            finish(m, f"turn {t} answer {i}", ttft=10.0 + i, status="error" if (t, i) == (1, 5) else "complete")
        if t == 0:  # a Retry of lane B's answer: the newer one is shown, the old one kept
            shown = cs.compare_rows(conversation=comparison).shown
            u = cs.compare_rows(conversation=comparison).users[0]
            plan = cs.compare_plan_retry(user=user, conversation_id=comparison.pk, message_id=shown[(u.pk, lanes[1].pk)].pk)
            services.turn_commit(plan=plan)
            finish(streaming()[0], "retried answer")
        rows = cs.compare_rows(conversation=comparison)
        u = rows.users[-1]
        answers = [rows.shown.get((u.pk, lane.pk)) for lane in lanes]
        snapshot = [{
            "lane_id": lane.pk, "position": i, "label": cs.lane_label(lane, i, blind=True), "message_id": str(a.pk),
            "settings": a.settings_snapshot, "answer": a.content, "status": a.status,
            "metrics": {k: (a.metrics or {}).get(k) for k in ("ttft_ms", "tokens_per_sec", "total_ms", "cost_usd")},
            "usage": a.usage, **({"rank": [2, 1, 3][i]} if t == 1 else {}),
        } for i, (lane, a) in enumerate(zip(lanes, answers, strict=True))]
        compare_services.vote_create(user=user, conversation=comparison, user_message=u,
                                     choice="rank" if t == 1 else "lane", winner_position=1, lanes=snapshot)
    comparison.refresh_from_db()
    return comparison


def without_exported_at(data: dict) -> dict:
    return {k: v for k, v in data.items() if k != "exported_at"}


def upload(c: Client, payload: bytes, follow: bool = False):  # noqa: ANN201
    return c.post("/conversations/import/", {"file": SimpleUploadedFile("x.json", payload)}, follow=follow)


# ---- 1. export / import of comparisons --------------------------------------------------------


def test_export_is_complete_versioned_and_secret_free(alice) -> None:  # noqa: ANN001
    comparison = rich_comparison(alice)
    r = client_for(alice).get(f"/compare/{comparison.pk}/export.json")
    assert r.status_code == 200 and r["Content-Disposition"] == f'attachment; filename="comparison-{comparison.pk}.json"'
    body = r.content.decode()
    for secret in SECRETS:
        assert secret not in body, secret
    data = json.loads(body)
    assert (data["format"], data["kind"], data["blind"]) == ("playground.comparison/1", "comparison", False)
    assert [(ln["position"], ln["label"], ln["endpoint_name"], ln["model"], ln["system_prompt"], ln["params"])
            for ln in data["lanes"]] == [
        (0, "", "Built-in simulator", "sim-fast", "", {}),
        (1, "Boxed", "Private box", "m1", "Be brief.", {"temperature": 0.5, "max_tokens": 64}),
        (2, "", "Built-in simulator", "sim-reasoning", "Think first.", {"seed": 7})]
    first, second = data["turns"]
    assert first["prompt"] == "What is 2+2? <b>bold</b>"
    # 3 lanes × 2 runs, plus the retried answer of lane B (kept, not shown).
    assert len(first["answers"]) == 7 and len(second["answers"]) == 6
    b = [a for a in first["answers"] if a["lane"] == 1]
    assert [(a["run"], a["shown"], a["content"]) for a in b] == [
        (0, False, "turn 0 answer 2"), (1, False, "turn 0 answer 3"), (0, True, "retried answer")]
    a0 = first["answers"][0]
    assert a0["reasoning"] == "thinking about turn 0 answer 0" and a0["status"] == "complete"
    assert a0["usage"] == {"prompt_tokens": 11, "completion_tokens": 7, "reasoning_tokens": 3}
    assert a0["usage_raw"] == {"raw": {"n": 1}} and a0["metrics"]["ttft_ms"] == 10.0
    assert a0["settings"]["model"] == "sim-fast" and a0["settings"]["endpoint_name"] == "Built-in simulator"
    assert [a["status"] for a in second["answers"]].count("error") == 1
    assert first["vote"]["choice"] == "lane" and first["vote"]["winner_position"] == 1
    v = second["vote"]
    assert v["choice"] == "rank" and [x["rank"] for x in v["lanes"]] == [2, 1, 3]
    # The vote's lanes refer to the answers shown at the vote, by index.
    assert [second["answers"][x["answer_ref"]]["content"] for x in v["lanes"]] == [x["answer"] for x in v["lanes"]]
    assert first["answers"][first["vote"]["lanes"][1]["answer_ref"]]["content"] == "retried answer"
    assert "not exported" not in body  # the raw request/events (inspect) stay on the server


def test_round_trip_equals_the_original_export(alice) -> None:  # noqa: ANN001
    comparison = rich_comparison(alice)
    original = transfer.comparison_export(conversation=comparison)
    r = upload(client_for(alice), json.dumps(original).encode())
    copy = Conversation.objects.filter(owner=alice, kind="compare").exclude(pk=comparison.pk).get()
    assert r.status_code == 302 and r["Location"] == f"/compare/{copy.pk}/"
    again = transfer.comparison_export(conversation=copy)
    assert without_exported_at(again) == without_exported_at(original)
    # The rows behind it: same counts, new ids, votes tied to the new turns and lanes.
    assert Message.objects.filter(conversation=copy).count() == Message.objects.filter(conversation=comparison).count()
    assert not set(Message.objects.filter(conversation=copy).values_list("id", flat=True)) & set(
        Message.objects.filter(conversation=comparison).values_list("id", flat=True))
    lanes = {ln.pk for ln in cs.lanes_of(conversation=copy)}
    users = {m.turn_id for m in Message.objects.filter(conversation=copy, role="user")}
    for vote in Vote.objects.filter(conversation=copy):
        assert vote.turn_id in users and {x["lane_id"] for x in vote.lanes} <= lanes
        assert all(Message.objects.filter(pk=x["message_id"], conversation=copy).exists() for x in vote.lanes)
    # Each lane's history (what its next turn sends) is the same as the original's.
    orig_rows, copy_rows = cs.compare_rows(conversation=comparison), cs.compare_rows(conversation=copy)
    for lo, lc in zip(cs.lanes_of(conversation=comparison), cs.lanes_of(conversation=copy), strict=True):
        assert cs.lane_history(orig_rows, lo.pk) == cs.lane_history(copy_rows, lc.pk)
        assert (lc.endpoint_id, lc.model, lc.params) == (lo.endpoint_id, lo.model, lo.params)
    # Imported answers keep their figures but are not usage (no double counting).
    assert not Message.objects.filter(conversation=copy, usage_day__isnull=False).exists()
    # Nor are imported votes verdicts for the leaderboard: importing again adds none.
    cast = Vote.objects.filter(conversation=comparison).count()
    assert cast and cs.vote_list_for_user(user=alice).count() == cast
    upload(client_for(alice), json.dumps(original).encode())
    assert cs.vote_list_for_user(user=alice).count() == cast
    board = client_for(alice).get("/compare/leaderboard/").content.decode()
    assert f"{cast} blind vote" in board, board[:2000]
    # The copy opens, and its Markdown export matches the original's.
    c = client_for(alice)
    assert c.get(f"/compare/{copy.pk}/").status_code == 200
    assert c.get(f"/compare/{copy.pk}/export.md").content == c.get(f"/compare/{comparison.pk}/export.md").content


def test_import_maps_lanes_to_the_importers_endpoints_by_name_or_none(alice, bob) -> None:  # noqa: ANN001
    comparison = rich_comparison(alice)
    payload = json.dumps(transfer.comparison_export(conversation=comparison)).encode()
    b = client_for(bob)
    r = upload(b, payload, follow=True)
    page = r.content.decode()
    copy = Conversation.objects.get(owner=bob, kind="compare")
    lanes = cs.lanes_of(conversation=copy)
    bob_sim = Endpoint.objects.get(owner=bob, name="Built-in simulator")
    # Bob has a simulator of the same name, but no "Private box": that lane gets no endpoint.
    assert [ln.endpoint_id for ln in lanes] == [bob_sim.pk, None, bob_sim.pk]
    assert [ln.model for ln in lanes] == ["sim-fast", "m1", "sim-reasoning"]
    assert "Comparison imported" in page and "Boxed: no endpoint (you have none named “Private box”)" in page
    assert "Lane A: your endpoint “Built-in simulator”" in page
    assert "— pick an endpoint —" in page  # the lane's select says so instead of showing another endpoint
    # A send is refused before anything is written or called (the lane has no endpoint).
    with pytest.raises(selectors.TurnRefused, match="no endpoint"):
        cs.compare_plan_send(user=bob, conversation_id=copy.pk, turn_id=uuid.uuid4(), content="hi", settings={})
    # Once Bob has an endpoint of that name, a new import uses it (his own, never Alice's).
    bob_box = services.endpoint_create(user=bob, name="Private box", base_url="https://bob.example/v1",
                                       api_style="openai_chat", api_key="", extra_headers={}, stream_options=True)
    r = upload(b, payload)
    newest = Conversation.objects.filter(owner=bob, kind="compare").order_by("-id").first()
    assert cs.lanes_of(conversation=newest)[1].endpoint_id == bob_box.pk
    assert not Lane.objects.filter(conversation__owner=bob, endpoint__owner=alice).exists()


def test_markdown_export(alice) -> None:  # noqa: ANN001
    comparison = rich_comparison(alice)
    r = client_for(alice).get(f"/compare/{comparison.pk}/export.md")
    md = r.content.decode()
    assert r["Content-Type"].startswith("text/markdown") and r["Content-Disposition"].endswith('.md"')
    assert md.startswith("# What is 2+2?")
    assert "| Boxed | Private box | m1 | max_tokens=64, temperature=0.5 |" in md
    assert "**System prompt of Boxed**" in md and "Be brief." in md
    assert "## Turn 1" in md and "## Turn 2" in md and "### Boxed (m1)" in md
    assert "retried answer" in md and "turn 0 answer 2" not in md  # the shown answer only
    assert "TTFT 10 ms · 41.5 tok/s · total 0.90 s · 11 → 7 tokens · $0.000120" in md
    assert "- run 2: complete" in md and "_Status: error_" not in md.split("## Turn 2")[0]
    assert "**Vote:** Boxed won" in md and "<details><summary>Reasoning</summary>" in md
    for secret in ("llm.internal.example", "sk-secret", "sim://"):
        assert secret not in md
    # An answer's own heading nests below its lane's heading (the outline stays valid).
    shown = Message.objects.filter(conversation=comparison, role="assistant", content="retried answer").get()
    Message.objects.filter(pk=shown.pk).update(content="## Simulated answer\n\nbody")
    md = client_for(alice).get(f"/compare/{comparison.pk}/export.md").content.decode()
    assert "\n##### Simulated answer\n" in md and "\n## Simulated answer" not in md


def test_exports_are_owner_only_and_hidden_while_blind_awaits_a_vote(alice, bob) -> None:  # noqa: ANN001
    comparison = rich_comparison(alice)
    b = client_for(bob)
    for url in (f"/compare/{comparison.pk}/export.json", f"/compare/{comparison.pk}/export.md"):
        assert b.get(url).status_code == 404
    blind = compare_services.compare_create(user=alice, blind=True)
    a = client_for(alice)
    assert a.get(f"/compare/{blind.pk}/export.json").status_code == 404
    assert a.get(f"/compare/{blind.pk}/export.md").status_code == 404
    # After a vote the blind state travels with the file.
    page = a.get(f"/compare/{comparison.pk}/").content.decode()
    assert "Export JSON" in page and "Export Markdown" in page
    Conversation.objects.filter(pk=comparison.pk).update(blind=True)
    data = json.loads(a.get(f"/compare/{comparison.pk}/export.json").content)
    assert data["blind"] is True
    upload(a, json.dumps(data).encode())
    assert Conversation.objects.filter(owner=alice, kind="compare", blind=True).exclude(pk__in=[comparison.pk, blind.pk]).count() == 1


def _mutate(good: dict, fn) -> bytes:  # noqa: ANN001
    d = json.loads(json.dumps(good))
    fn(d)
    return json.dumps(d).encode()


def test_bad_files_are_refused_with_a_reason_and_import_nothing(alice, bob, monkeypatch) -> None:  # noqa: ANN001
    comparison = rich_comparison(alice)
    good = transfer.comparison_export(conversation=comparison)
    share = sharing_services.compare_snapshot(conversation=comparison, include_reasoning=False)
    cases = [
        (b"{oops", "Not valid JSON"),
        (b"[1, 2]", "must hold a JSON object"),
        (json.dumps({"kind": "spreadsheet"}).encode(), "Not a conversation export or comparison export"),
        (json.dumps(share).encode(), "share-link snapshot"),
        (_mutate(good, lambda d: d.update(format="playground.comparison/9")), "this server reads playground.comparison/1"),
        (_mutate(good, lambda d: d.update(lanes=d["lanes"][:1])), "2 to 6 lanes"),
        (_mutate(good, lambda d: d["lanes"][1].update(position=0)), "same position"),
        (_mutate(good, lambda d: d["lanes"][0].update(params="hot")), "params must be an object"),
        (_mutate(good, lambda d: d["turns"][0]["answers"][0].update(lane=9)), "lane is not one of"),
        (_mutate(good, lambda d: d["turns"][0]["answers"][0].update(status="exploded")), "unknown status"),
        (_mutate(good, lambda d: d["turns"][0]["answers"][0].update(metrics=[1])), "metrics must be a JSON object"),
        (_mutate(good, lambda d: d["turns"][1]["answers"][0].update(created_at="yesterday")), "must be an ISO time"),
        (_mutate(good, lambda d: d["turns"][1].update(prompt=None)), "Turn 2 prompt must be text"),
        (_mutate(good, lambda d: d["turns"][1]["vote"].update(choice="maybe")), "choice is one of lane, rank, tie, both_bad"),
        (_mutate(good, lambda d: d["turns"][1]["vote"]["lanes"][0].update(answer_ref=99)), "answer that is not in the turn"),
    ]
    a = client_for(alice)
    counts = (Conversation.objects.count(), Lane.objects.count(), Message.objects.count(), Vote.objects.count())
    for payload, why in cases:
        r = upload(a, payload, follow=True)
        assert why in r.content.decode(), why
        assert r.redirect_chain[-1][0] == "/shares/"
    # Size limits: the file, the number of turns.
    monkeypatch.setattr(transfer, "MAX_FILE_BYTES", 1000)
    assert "at most 0 MB" in upload(a, json.dumps(good).encode(), follow=True).content.decode()
    monkeypatch.setattr(transfer, "MAX_FILE_BYTES", 16 * 1024 * 1024)
    monkeypatch.setattr(transfer, "MAX_TURNS", 1)
    assert "at most 1" in upload(a, json.dumps(good).encode(), follow=True).content.decode()
    # A late failure (the last answer's vote) still leaves nothing behind.
    assert (Conversation.objects.count(), Lane.objects.count(), Message.objects.count(), Vote.objects.count()) == counts
    # Not signed in: no import at all.
    assert Client().post("/conversations/import/", {"file": SimpleUploadedFile("x.json", json.dumps(good).encode())}).status_code == 302
    assert Conversation.objects.count() == counts[0]


def test_conversation_files_still_import_and_say_their_kind(alice) -> None:  # noqa: ANN001
    conv = services.conversation_create(user=alice)
    started = services.turn_start(conversation=conv, turn_id=uuid.uuid4(), content="Hi", parent_id=None,
                                  endpoint=conv.endpoint, model="sim-fast", system_prompt="", params={})
    services.message_complete(message_id=started.assistant_message_ids[0], status="complete", content="Hello",
                              reasoning="", finish_reason="stop", usage={}, usage_raw={}, metrics={}, error={}, inspect={})
    a = client_for(alice)
    data = json.loads(a.get(f"/c/{conv.pk}/export.json").content)
    assert data["kind"] == "conversation" and "sim://" not in json.dumps(data)
    r = upload(a, json.dumps(data).encode())
    new = Conversation.objects.filter(owner=alice, kind="chat").order_by("-id").first()
    assert r["Location"] == f"/c/{new.pk}/" and new.pk != conv.pk
    del data["kind"]  # a file from before "kind" existed
    assert upload(a, json.dumps(data).encode()).status_code == 302
    assert Conversation.objects.filter(owner=alice, kind="chat").count() == 3


# ---- 2. the admin's switch for public share links ---------------------------------------------


@pytest.fixture
def admin(db):  # noqa: ANN001, ANN201
    return services.user_create(username="root", password=PASSWORD, is_admin=True)


def shared_link(user) -> tuple[Conversation, str]:  # noqa: ANN001
    conv = services.conversation_create(user=user)
    started = services.turn_start(conversation=conv, turn_id=uuid.uuid4(), content="Shared hello", parent_id=None,
                                  endpoint=conv.endpoint, model="sim-fast", system_prompt="", params={})
    services.message_complete(message_id=started.assistant_message_ids[0], status="complete", content="Shared answer",
                              reasoning="", finish_reason="stop", usage={}, usage_raw={}, metrics={}, error={}, inspect={})
    r = client_for(user).post(f"/shares/new/{conv.pk}/", {"visibility": "link"})
    return conv, r.context["new_url"].split("/s/")[1].rstrip("/")


def test_only_staff_can_change_the_public_links_setting(alice, admin) -> None:  # noqa: ANN001
    a = client_for(alice)
    assert a.get("/users/").status_code == 403
    assert a.post("/users/", {"form": "public_share_links", "public_share_links": "off"}).status_code == 403
    assert sharing_services.public_links_allowed() and not SiteSettings.objects.filter(public_share_links__isnull=False).exists()
    assert Client().post("/users/", {"form": "public_share_links", "public_share_links": "off"}).status_code == 302
    assert sharing_services.public_links_allowed()
    root = client_for(admin)
    page = root.get("/users/").content.decode()
    assert 'value="default" selected' in page and "Server default" in page
    r = root.post("/users/", {"form": "public_share_links", "public_share_links": "nonsense"}, follow=True)
    assert "Pick allowed, forbidden" in r.content.decode() and sharing_services.public_links_allowed()


def test_forbidding_public_links_hides_refuses_and_closes_them(alice, bob, admin, settings) -> None:  # noqa: ANN001
    conv, token = shared_link(alice)
    comparison = compare_services.compare_create(user=alice)
    assert Client().get(f"/s/{token}/").status_code == 200
    a = client_for(alice)
    assert 'value="link"' in a.get(f"/c/{conv.pk}/").content.decode()
    root = client_for(admin)
    r = root.post("/users/", {"form": "public_share_links", "public_share_links": "off"}, follow=True)
    assert "Public share links are forbidden." in r.content.decode()
    assert not sharing_services.public_links_allowed() and settings.PLAYGROUND_PUBLIC_SHARE_LINKS is True
    # Share forms (chat, compare) no longer offer it; creating one anyway is refused.
    assert 'value="link"' not in a.get(f"/c/{conv.pk}/").content.decode()
    assert 'value="link"' not in a.get(f"/compare/{comparison.pk}/").content.decode()
    n = ShareLink.objects.count()
    assert "switched off" in a.post(f"/shares/new/{conv.pk}/", {"visibility": "link"}).content.decode()
    assert "switched off" in a.post(f"/shares/new-compare/{comparison.pk}/", {"visibility": "link"}).content.decode()
    assert ShareLink.objects.count() == n
    assert a.post(f"/shares/new/{conv.pk}/", {"visibility": "site"}).status_code == 200  # other kinds still work
    # The existing public link: a clear 404 page for a logged-out viewer; signed-in users may open it.
    r = Client().get(f"/s/{token}/")
    html = r.content.decode()
    assert r.status_code == 404 and "Public links are switched off" in html and "Shared answer" not in html
    assert "/accounts/login/?next=" in html
    assert client_for(bob).get(f"/s/{token}/").status_code == 200
    assert "public links are off" in a.get("/shares/").content.decode()
    # Back to the server default (on): public again. A server default of off applies when unset.
    root.post("/users/", {"form": "public_share_links", "public_share_links": "default"})
    assert Client().get(f"/s/{token}/").status_code == 200
    settings.PLAYGROUND_PUBLIC_SHARE_LINKS = False
    assert Client().get(f"/s/{token}/").status_code == 404
    assert "forbidden" in root.get("/users/").content.decode()
    root.post("/users/", {"form": "public_share_links", "public_share_links": "on"})  # the admin overrides it
    assert Client().get(f"/s/{token}/").status_code == 200


# ---- 3. test-set run conversations stay out of the chat sidebar -------------------------------


def test_test_set_run_conversations_are_not_listed_or_searched(alice, bob) -> None:  # noqa: ANN001
    from chat.prompts import services as psvc
    from chat.prompts import testsets

    own = services.conversation_create(user=alice)
    Conversation.objects.filter(pk=own.pk).update(title="Capital chat")
    p = psvc.prompt_create(user=alice, name="capital", content=psvc.VersionContent(
        "Answer briefly.", ({"role": "user", "content": "Capital of {{country}}?"},), {"model": "sim-fast", "params": {}}))
    ts = testsets.testset_save(prompt=p, name="caps", rows=testsets.parse_rows("country\nFrance\nJapan\n"), checks=[])
    run, plans = testsets.run_create(user=alice, test_set=ts, lanes=[testsets.Lane(p.versions.get(), alice.endpoints.get(), "sim-fast")])
    for pl in plans:
        services.turn_commit(plan=pl)
    run_convs = [c.conversation_id for c in run.cells.all()]
    assert len(run_convs) == 2 and all(Conversation.objects.get(pk=pk).title.startswith("Test run") for pk in run_convs)
    listed = [c.pk for c in selectors.conversation_list_for_user(user=alice)]
    assert listed == [own.pk]
    assert [c.pk for c in selectors.conversation_list_for_user(user=alice, query="Capital")] == [own.pk]
    assert not [c.pk for c in selectors.conversation_list_for_user(user=alice, query="Test run")]
    a = client_for(alice)
    for url in ("/", f"/c/{own.pk}/", "/c/sidebar/?q=Capital", "/c/sidebar/?q=run"):
        html = a.get(url, follow=True).content.decode()
        assert "Test run" not in html, url
    # Still reachable from the run grid, and still the owner's only.
    grid = a.get(f"/prompts/runs/{run.pk}/").content.decode()
    for pk in run_convs:
        assert f'href="/c/{pk}/"' in grid
        assert a.get(f"/c/{pk}/").status_code == 200
        assert client_for(bob).get(f"/c/{pk}/").status_code == 404
