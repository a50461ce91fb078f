"""Comparisons without a browser: ownership (a second user gets 404 / a refused socket, no
upstream call, no change), lane plans and history, lane edits, exports, percentiles, token
timings and the Bradley–Terry rating."""

from __future__ import annotations

import math
import time
import uuid

import pytest
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.test import Client

from chat import services
from chat.compare import selectors as cs
from chat.compare import services as csv
from chat.compare.stats import bradley_terry, percentile, spread
from chat.metrics import token_timings
from chat.models import Lane, Message
from chat.routing import websocket_urlpatterns
from chat.selectors import NextTurnSettings, TurnRefused
from tests.helpers import FINAL_RE, chat_requests

KEY = "sk-test-SECRET-0123456789abcdef"
FAST = "sim-fast?ttft_ms=10&delay_ms=2&length=12&reasoning=0"


def app_for(user):  # noqa: ANN001, ANN201
    inner = URLRouter(websocket_urlpatterns)

    async def app(scope, receive, send):  # noqa: ANN001, ANN202
        return await inner(dict(scope, user=user), receive, send)

    return app


@pytest.fixture
def alice(fresh_sim):  # noqa: ANN001, ANN201
    user = get_user_model().objects.create_user("alice", password="pw-alice-123")
    endpoint = services.endpoint_create(user=user, name="sim", base_url=fresh_sim.base_url, api_key=KEY)
    s = NextTurnSettings(endpoint.pk, FAST, "", {})
    comparison = csv.compare_create(user=user, lanes=[s, NextTurnSettings(endpoint.pk, FAST, "Be brief.", {"temperature": 0.5})])
    return user, endpoint, comparison


@pytest.fixture
def bob(db):  # noqa: ANN001, ANN201
    return get_user_model().objects.create_user("bob", password="pw-bob-123")


# ---- pure ------------------------------------------------------------------------------------


def test_percentile_matches_linear_interpolation() -> None:
    assert percentile([], 50) is None
    assert percentile([5], 90) == 5
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([10, 20, 30, 40, 50], 90) == pytest.approx(46.0)
    s = spread([3, None, 1, 2])
    assert s == {"n": 3, "median": 2.0, "p90": pytest.approx(2.8), "min": 1.0, "max": 3.0}


def test_token_timings_scale_to_usage_and_thin() -> None:
    assert token_timings([], 0, 10) == []
    assert token_timings([[100.0, 1], [150.0, 2], [200.0, 4]], 4, 8) == [[100.0, 2], [150.0, 4], [200.0, 8]]
    assert token_timings([[100.0, 1], [200.0, 4]], 4, None) == [[100.0, 1], [200.0, 4]]
    many = [[float(i), i] for i in range(1, 1001)]
    thin = token_timings(many, 1000, 1000)
    assert len(thin) == 200 and thin[0] == [1.0, 1] and thin[-1] == [1000.0, 1000]


def test_bradley_terry_two_models_hand_computed() -> None:
    # a beats b 3 times, b beats a once; prior: half a win and half a loss against a virtual
    # player of strength 1. Fixed point: p_a = 3.5 / (4/(p_a+p_b) + 1/(p_a+1)), likewise b.
    r = {x.key: x for x in bradley_terry([("a", "b", 1), ("a", "b", 1), ("a", "b", 1), ("b", "a", 1)])}
    pa = math.pow(10, (r["a"].score - 1000) / 400)
    pb = math.pow(10, (r["b"].score - 1000) / 400)
    assert pa * pb == pytest.approx(1.0)  # centred on the geometric mean
    # Solve the two equations by plain iteration here (no shared code) and compare the ratio.
    a, b = 1.0, 1.0
    for _ in range(2000):
        a, b = 3.5 / (4 / (a + b) + 1 / (a + 1)), 1.5 / (4 / (a + b) + 1 / (b + 1))
    assert pa / pb == pytest.approx(a / b, rel=1e-3)  # scores are rounded to 0.1 point
    assert (r["a"].wins, r["a"].losses, r["a"].ties) == (3, 1, 0)
    assert r["a"].win_rate == 0.75 and r["b"].win_rate == 0.25
    assert r["a"].low < r["a"].score < r["a"].high


def test_bradley_terry_ties_are_half_wins_and_symmetric() -> None:
    r = {x.key: x for x in bradley_terry([("a", "b", 0.5), ("a", "b", 0.5)])}
    assert r["a"].score == pytest.approx(1000.0) and r["b"].score == pytest.approx(1000.0)
    assert r["a"].ties == 2 and r["a"].win_rate == 0.5
    # Equal strengths: information = 2 games·1/4 + prior 1·1/4 = 0.75 → ±1.96·(400/ln 10)/√0.75
    half = 1.96 * 400 / math.log(10) / math.sqrt(0.75)
    assert r["a"].high - r["a"].score == pytest.approx(half, abs=0.11)


def test_bradley_terry_never_lost_is_finite_and_first() -> None:
    games = [("a", "b", 1)] * 5 + [("a", "c", 1)] * 3 + [("b", "c", 1), ("c", "b", 1)]
    ranked = bradley_terry(games)
    assert [x.key for x in ranked][0] == "a"
    a = ranked[0]
    assert a.losses == 0 and math.isfinite(a.score) and a.high is not None and a.score > 1100
    b, c = sorted(ranked[1:], key=lambda x: x.key)
    assert b.score == pytest.approx(c.score, abs=30)  # b lost 5 to a, c lost 3: close


# ---- plans and lanes -------------------------------------------------------------------------


@pytest.mark.django_db
def test_send_plans_one_answer_per_lane_with_its_own_settings(alice) -> None:  # noqa: ANN001
    user, endpoint, comparison = alice
    lanes = cs.lanes_of(conversation=comparison)
    plans = cs.compare_plan_send(user=user, conversation_id=comparison.pk, turn_id=uuid.uuid4(), content="Hi",
                                 settings={})
    assert [p.lane_id for p in plans] == [lane.pk for lane in lanes]
    assert plans[0].rows[0].role == "user" and len(plans[1].rows) == 1
    assert plans[1].request.system == "Be brief." and plans[1].request.params.get("temperature") == 0.5
    assert plans[0].request.system == "" and "temperature" not in plans[0].request.params
    # runs: N answers per lane, the extra ones marked
    runs = cs.compare_plan_send(user=user, conversation_id=comparison.pk, turn_id=uuid.uuid4(), content="Hi",
                                settings={}, runs=3)
    assert [p.assistant.run for p in runs] == [0, 1, 2, 0, 1, 2]
    with pytest.raises(TurnRefused):
        cs.compare_plan_send(user=user, conversation_id=comparison.pk, turn_id=uuid.uuid4(), content="Hi",
                             settings={}, runs=21)
    with pytest.raises(TurnRefused):  # a lane of another comparison
        other = csv.compare_create(user=user)
        cs.compare_plan_send(user=user, conversation_id=comparison.pk, turn_id=uuid.uuid4(), content="Hi",
                             settings={cs.lanes_of(conversation=other)[0].pk: NextTurnSettings(endpoint.pk, "m", "", {})})


@pytest.mark.django_db
def test_lane_history_holds_only_its_own_answers_and_not_runs(alice) -> None:  # noqa: ANN001
    user, endpoint, comparison = alice
    la, lb = cs.lanes_of(conversation=comparison)
    plans = cs.compare_plan_send(user=user, conversation_id=comparison.pk, turn_id=uuid.uuid4(), content="Q1",
                                 settings={}, runs=2)
    for p in plans:
        services.turn_commit(plan=p)
    for m in Message.objects.filter(role="assistant"):
        m.status, m.content = "complete", f"answer lane {m.lane_id} run {m.run}"
        m.save()
    plans = cs.compare_plan_send(user=user, conversation_id=comparison.pk, turn_id=uuid.uuid4(), content="Q2",
                                 settings={})
    by_lane = {p.lane_id: p.request.messages for p in plans}
    assert [(m.role, m.content) for m in by_lane[la.pk]] == [
        ("user", "Q1"), ("assistant", f"answer lane {la.pk} run 0"), ("user", "Q2")]
    assert [(m.role, m.content) for m in by_lane[lb.pk]] == [
        ("user", "Q1"), ("assistant", f"answer lane {lb.pk} run 0"), ("user", "Q2")]


@pytest.mark.django_db
def test_lane_add_duplicate_move_remove_keep_two_to_six(alice) -> None:  # noqa: ANN001
    user, endpoint, comparison = alice
    la, lb = cs.lanes_of(conversation=comparison)
    dup = csv.lane_add(conversation=comparison, copy_of=lb.pk)
    assert dup.system_prompt == "Be brief." and dup.params == {"temperature": 0.5}
    assert [x.pk for x in cs.lanes_of(conversation=comparison)] == [la.pk, lb.pk, dup.pk]
    csv.lane_move(conversation=comparison, lane_id=dup.pk, delta=-1)
    assert [x.pk for x in cs.lanes_of(conversation=comparison)] == [la.pk, dup.pk, lb.pk]
    for _ in range(3):
        csv.lane_add(conversation=comparison)
    with pytest.raises(csv.LaneRefused):
        csv.lane_add(conversation=comparison)
    for lane in cs.lanes_of(conversation=comparison)[2:]:
        csv.lane_remove(conversation=comparison, lane_id=lane.pk)
    with pytest.raises(csv.LaneRefused):
        csv.lane_remove(conversation=comparison, lane_id=la.pk)
    assert [x.position for x in cs.lanes_of(conversation=comparison)] == [0, 1]


# ---- a second user ---------------------------------------------------------------------------


@pytest.mark.django_db
def test_second_user_gets_404_everywhere_and_changes_nothing(alice, bob) -> None:  # noqa: ANN001
    user, endpoint, comparison = alice
    lane = cs.lanes_of(conversation=comparison)[0]
    c = Client()
    c.force_login(bob)
    base = f"/compare/{comparison.pk}/"
    for url in (base, base + "summary/", base + "export.csv", base + "export.json"):
        assert c.get(url).status_code == 404, url
    for url, data in ((base + "lanes/add/", {}), (base + "lanes/remove/", {"lane_id": lane.pk}),
                      (base + f"lane/{lane.pk}/", {"endpoint_id": endpoint.pk, "model": "x"}),
                      (base + "rename/", {"title": "mine"}), (base + "delete/", {})):
        assert c.post(url, data).status_code == 404, url
    assert Lane.objects.filter(conversation=comparison).count() == 2
    assert Lane.objects.get(pk=lane.pk).model == FAST
    # The owner sees the page; a plain chat is not a comparison.
    c.force_login(user)
    assert c.get(base).status_code == 200
    chat = services.conversation_create(user=user, endpoint=endpoint)
    assert c.get(f"/compare/{chat.pk}/").status_code == 404
    assert c.get(f"/c/{comparison.pk}/").status_code == 302


@pytest.mark.django_db(transaction=True)
async def test_second_user_socket_refused_no_upstream_call(alice, bob, fresh_sim) -> None:  # noqa: ANN001
    user, endpoint, comparison = alice
    comm = WebsocketCommunicator(app_for(bob), f"/ws/compare/{comparison.pk}/")
    connected, _ = await comm.connect()
    assert connected  # accepted, then closed with 4404
    out = await comm.receive_output(timeout=5)
    assert out["type"] == "websocket.close" and out["code"] == 4404
    await comm.disconnect()
    assert chat_requests(fresh_sim.requests()) == []


@pytest.mark.django_db(transaction=True)
async def test_owner_socket_fans_out_and_lanes_finish(alice, fresh_sim) -> None:  # noqa: ANN001
    user, endpoint, comparison = alice
    comm = WebsocketCommunicator(app_for(user), f"/ws/compare/{comparison.pk}/")
    connected, _ = await comm.connect()
    assert connected
    await comm.send_json_to({"action": "send", "turn_id": str(uuid.uuid4()), "content": "Hello lanes", "runs": 1})
    finals = set()
    deadline = time.monotonic() + 30
    while len(finals) < 2:
        frame = await comm.receive_from(timeout=max(0.1, deadline - time.monotonic()))
        for m in FINAL_RE.finditer(frame):
            finals.add((m["mid"], m["status"]))
    assert {s for _, s in finals} == {"complete"}
    await comm.disconnect()
    reqs = chat_requests(fresh_sim.requests())
    assert len(reqs) == 2
    systems = sorted(str(r["body"]["messages"][0]) for r in reqs)
    assert any("Be brief." in s for s in systems)


@pytest.mark.django_db
def test_continue_lane_as_chat_exports_and_open_chat_in_compare(alice) -> None:  # noqa: ANN001
    import csv as csvmod
    import io
    import json

    user, endpoint, comparison = alice
    la, lb = cs.lanes_of(conversation=comparison)
    for q in ("Q1", "Q2"):
        for p in cs.compare_plan_send(user=user, conversation_id=comparison.pk, turn_id=uuid.uuid4(), content=q,
                                      settings={}):
            services.turn_commit(plan=p)
        for m in Message.objects.filter(role="assistant", status="streaming"):
            m.status, m.content, m.metrics = "complete", f"{q} by lane {m.lane_id}", {"ttft_ms": 12.0}
            m.save()
    c = Client()
    c.force_login(user)
    r = c.post(f"/compare/{comparison.pk}/lane/{lb.pk}/continue/")
    assert r.status_code == 302
    chat_id = int(r["Location"].rstrip("/").split("/")[-1])
    from chat.models import Conversation
    from chat.selectors import conversation_thread

    chat = Conversation.objects.get(pk=chat_id)
    assert chat.kind == "chat" and chat.system_prompt == "Be brief." and chat.params == {"temperature": 0.5}
    assert [(m.role, m.content) for m in conversation_thread(conversation=chat)] == [
        ("user", "Q1"), ("assistant", f"Q1 by lane {lb.pk}"), ("user", "Q2"), ("assistant", f"Q2 by lane {lb.pk}")]
    # exports
    body = c.get(f"/compare/{comparison.pk}/export.csv").content.decode()
    table = list(csvmod.reader(io.StringIO(body)))
    assert table[0][:5] == ["turn", "prompt", "lane", "label", "run"]
    assert len(table) == 1 + 4 and {r[1] for r in table[1:]} == {"Q1", "Q2"}
    data = json.loads(c.get(f"/compare/{comparison.pk}/export.json").content)
    assert len(data["lanes"]) == 2 and data["lanes"][1]["system_prompt"] == "Be brief."
    assert [len(t["answers"]) for t in data["turns"]] == [2, 2]
    assert "base_url" not in json.dumps(data)
    # A chat opened in compare: its settings are the first lane.
    r = c.post("/compare/new/", {"from_conversation": chat.pk})
    new = cs.compare_get_for_user(user=user, conversation_id=int(r["Location"].rstrip("/").split("/")[-1]))
    first = cs.lanes_of(conversation=new)[0]
    assert (first.model, first.system_prompt, first.params) == (chat.model, "Be brief.", {"temperature": 0.5})
    # The chat sidebar lists chats only; the compare list searches comparisons.
    assert comparison.pk not in [x.pk for x in services.selectors.conversation_list_for_user(user=user)]
    Conversation.objects.filter(pk=comparison.pk).update(title="Speed test")
    assert "Speed test" in c.get("/compare/list/?q=speed").content.decode()
    assert "Speed test" not in c.get("/compare/list/?q=nothing").content.decode()


@pytest.mark.django_db
def test_a_lane_cannot_use_another_users_endpoint(alice, bob, fresh_sim) -> None:  # noqa: ANN001
    user, endpoint, comparison = alice
    theirs = services.endpoint_create(user=bob, name="bob's", base_url=fresh_sim.base_url)
    la = cs.lanes_of(conversation=comparison)[0]
    with pytest.raises(TurnRefused):
        cs.compare_plan_send(user=user, conversation_id=comparison.pk, turn_id=uuid.uuid4(), content="Hi",
                             settings={la.pk: NextTurnSettings(theirs.pk, FAST, "", {})})
    with pytest.raises(TurnRefused):  # bob cannot plan on alice's comparison
        cs.compare_plan_send(user=bob, conversation_id=comparison.pk, turn_id=uuid.uuid4(), content="Hi", settings={})
    c = Client()
    c.force_login(user)
    r = c.post(f"/compare/{comparison.pk}/lane/{la.pk}/", {"endpoint_id": theirs.pk, "model": "x"})
    assert r.status_code == 400
    assert Lane.objects.get(pk=la.pk).endpoint_id == endpoint.pk
    assert chat_requests(fresh_sim.requests()) == []


def test_bench_compare_summary_figures() -> None:
    from bench.stats import compare_summary

    raw = {"expected": 4, "answers": [
        {"lane": 1, "run": 0, "first_ms": 120.0, "status": "complete"},
        {"lane": 1, "run": 1, "first_ms": 900.0, "status": "complete"},
        {"lane": 2, "run": 0, "first_ms": 300.0, "status": "complete"},
        {"lane": 2, "run": 1, "first_ms": 1500.0, "status": "complete"},
    ]}
    f = compare_summary(raw)["figures"]
    assert f == {"compare_last_lane_first_token_ms": 300.0, "compare_last_first_token_ms": 1500.0}
    raw["answers"][3]["first_ms"] = None
    assert compare_summary(raw)["figures"]["compare_last_first_token_ms"] is None


@pytest.mark.django_db
def test_a_lane_without_model_is_named_in_the_refusal_and_summary_browses_turns(alice) -> None:  # noqa: ANN001
    user, endpoint, comparison = alice
    la, lb = cs.lanes_of(conversation=comparison)
    with pytest.raises(TurnRefused, match="Lane B"):
        cs.compare_plan_send(user=user, conversation_id=comparison.pk, turn_id=uuid.uuid4(), content="Hi",
                             settings={lb.pk: NextTurnSettings(endpoint.pk, " ", "", {})})
    ids = []
    for q in ("Q1", "Q2"):
        plans = cs.compare_plan_send(user=user, conversation_id=comparison.pk, turn_id=uuid.uuid4(), content=q,
                                     settings={})
        for p in plans:
            services.turn_commit(plan=p)
        ids.append(plans[0].user_message.pk)
        Message.objects.filter(status="streaming").update(status="complete", content="x")
    c = Client()
    c.force_login(user)
    page = c.get(f"/compare/{comparison.pk}/summary/").content.decode()
    assert "Turn 2 of 2" in page and f"?turn={ids[0]}" in page
    page = c.get(f"/compare/{comparison.pk}/summary/?turn={ids[0]}").content.decode()
    assert "Turn 1 of 2" in page and f"?turn={ids[1]}" in page


@pytest.mark.django_db(transaction=True)
async def test_the_chat_socket_refuses_a_comparison(alice, fresh_sim) -> None:  # noqa: ANN001
    user, endpoint, comparison = alice
    comm = WebsocketCommunicator(app_for(user), f"/ws/c/{comparison.pk}/")
    connected, _ = await comm.connect()
    assert connected
    out = await comm.receive_output(timeout=5)
    assert out["type"] == "websocket.close" and out["code"] == 4404
    await comm.disconnect()


@pytest.mark.django_db
def test_owner_renames_and_deletes_a_comparison(alice) -> None:  # noqa: ANN001
    user, endpoint, comparison = alice
    c = Client()
    c.force_login(user)
    assert c.post(f"/compare/{comparison.pk}/rename/", {"title": "Speed of three"}).status_code == 302
    assert "Speed of three" in c.get(f"/compare/{comparison.pk}/").content.decode()
    assert c.post(f"/compare/{comparison.pk}/delete/").status_code == 302
    assert c.get(f"/compare/{comparison.pk}/").status_code == 404
    assert Lane.objects.filter(conversation_id=comparison.pk).count() == 0
    r = c.get("/compare/")  # no comparison left: the start page
    assert r.status_code == 200 and b"start-compare" in r.content


@pytest.mark.django_db
def test_share_a_comparison_as_a_secret_free_snapshot(alice, bob) -> None:  # noqa: ANN001
    """Issue 13 "Sharing": a comparison shared as a read-only link: lanes and answers with
    metrics, no key, header or URL; logged out it opens (public link); a second user cannot
    share it; revoked, it is a 404 for everyone; a blind comparison cannot be shared before the
    vote (it would reveal the models)."""
    import re

    from chat.models import Conversation
    from chat.sharing.models import ShareLink

    user, endpoint, comparison = alice
    la, lb = cs.lanes_of(conversation=comparison)
    for p in cs.compare_plan_send(user=user, conversation_id=comparison.pk, turn_id=uuid.uuid4(),
                                  content="Which is **faster**?", settings={}):
        services.turn_commit(plan=p)
    for m in Message.objects.filter(role="assistant", status="streaming"):
        m.status, m.content = "complete", f"Lane {m.lane_id} says <script>alert(1)</script> **yes**"
        m.metrics = {"ttft_ms": 12.0, "tokens_per_sec": 40.0}
        m.save()
    c = Client()
    c.force_login(user)
    assert client_for_bob(bob).post(f"/shares/new-compare/{comparison.pk}/", {"visibility": "link"}).status_code == 404
    r = c.post(f"/shares/new-compare/{comparison.pk}/", {"visibility": "link"})
    url = re.search(r"/s/[\w-]+/", r.content.decode())[0]
    link = ShareLink.objects.get()
    assert link.kind == "compare" and KEY not in str(link.snapshot) and fresh_base(endpoint) not in str(link.snapshot)
    page = Client().get(url)  # logged out
    body = page.content.decode()
    assert page.status_code == 200 and "Which is <strong>faster</strong>?" in body
    assert f"Lane {la.pk} says" in body and f"Lane {lb.pk} says" in body and "<strong>yes</strong>" in body
    assert "<script>alert(1)</script>" not in body and "Be brief." in body and "12.0 ms" in body
    assert KEY not in body and fresh_base(endpoint) not in body
    ShareLink.objects.filter(pk=link.pk).update(revoked_at=timezone_now())  # revoked (as /shares/ does)
    assert Client().get(url).status_code == 404 and c.get(url).status_code == 404
    # Blind and not voted: refused with the reason (409), nothing created.
    Conversation.objects.filter(pk=comparison.pk).update(blind=True)
    assert c.post(f"/shares/new-compare/{comparison.pk}/", {"visibility": "link"}).status_code == 409
    assert ShareLink.objects.count() == 1


def client_for_bob(bob):  # noqa: ANN001, ANN201
    c = Client()
    c.force_login(bob)
    return c


def fresh_base(endpoint) -> str:  # noqa: ANN001
    return endpoint.base_url.split("//", 1)[1]


def timezone_now():  # noqa: ANN201
    from django.utils import timezone

    return timezone.now()


@pytest.mark.django_db
def test_blind_mode_after_a_turn_starts_a_new_comparison_with_the_same_lanes(alice) -> None:  # noqa: ANN001
    """Switching blind on after answers exist would show which letter is which lane: it opens a
    new blind comparison with the same lanes instead; on an empty comparison it switches."""
    user, endpoint, comparison = alice
    c = Client()
    c.force_login(user)
    for p in cs.compare_plan_send(user=user, conversation_id=comparison.pk, turn_id=uuid.uuid4(), content="Q",
                                  settings={}):
        services.turn_commit(plan=p)
    r = c.post(f"/compare/{comparison.pk}/blind/", {"blind": "on"})
    new_id = int(r["Location"].rstrip("/").split("/")[-1])
    assert new_id != comparison.pk
    comparison.refresh_from_db()
    fresh = cs.compare_get_for_user(user=user, conversation_id=new_id)
    assert not comparison.blind and fresh.blind and not fresh.messages.exists()
    old = sorted((la.model, la.system_prompt) for la in cs.lanes_of(conversation=comparison))
    assert sorted((la.model, la.system_prompt) for la in cs.lanes_of(conversation=fresh)) == old
    # An empty comparison switches in place.
    r = c.post(f"/compare/{new_id}/blind/", {"blind": "off"})
    r = c.post(f"/compare/{new_id}/blind/", {"blind": "on"})
    assert r["Location"].rstrip("/").endswith(str(new_id))
