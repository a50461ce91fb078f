"""Links between compare, the prompt library and blind mode, without a browser: "Use in
compare" builds the lanes from a version, "Save as prompt" from a lane, a blind comparison
leaks no endpoint/model/settings through any URL before the vote, rankings as pairwise
outcomes in the Bradley–Terry fit, and the chat sidebar lists comparisons."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from chat import services
from chat.compare import prompts as cp
from chat.compare import selectors as cs
from chat.compare import services as csv
from chat.compare.stats import bradley_terry
from chat.compare.views import leaderboard_rows, vote_games
from chat.models import Lane, Message, Vote
from chat.prompts import services as ps
from chat.prompts.models import Prompt
from chat.selectors import NextTurnSettings

SECRET_MODEL = "hidden-model-7b-q4"
SECRET_ENDPOINT = "secret-endpoint-zeta"


@pytest.fixture
def alice(db):  # noqa: ANN001, ANN201
    user = get_user_model().objects.create_user("alice", password="pw-alice-123")
    endpoint = services.endpoint_create(user=user, name=SECRET_ENDPOINT, base_url="http://127.0.0.1:9/v1", api_key="sk-x")
    return user, endpoint


def client_for(user) -> Client:  # noqa: ANN001
    c = Client()
    c.force_login(user)
    return c


def make_version(user, endpoint, **kw):  # noqa: ANN001, ANN003, ANN201
    content = ps.VersionContent(
        kw.get("system", "You help {{name}}."),
        tuple(kw.get("messages", [{"role": "user", "content": "Earlier {{name}}"}, {"role": "assistant", "content": "Noted."},
                                  {"role": "user", "content": "Say hi to {{name}}."}])),
        {"endpoint_id": endpoint.pk, "model": "m-one", "params": {"temperature": 0.3}},
    )
    prompt = ps.prompt_create(user=user, name=kw.get("name", "greeter"), content=content)
    return prompt, prompt.versions.get(number=1)


# ---- 1. Use in compare -------------------------------------------------------------------------


def test_compare_from_version_fills_lanes_history_and_records_the_version(alice) -> None:  # noqa: ANN001
    user, endpoint = alice
    prompt, v1 = make_version(user, endpoint)
    with pytest.raises(ps.PromptError):
        cp.compare_from_version(user=user, version=v1, values={})
    use = cp.compare_from_version(user=user, version=v1, values={"name": "Ada"})
    assert use.send == "Say hi to Ada." and use.version_id == v1.pk
    conv = use.conversation
    assert conv.kind == "compare" and conv.title == "greeter v1"
    lanes = cs.lanes_of(conversation=conv)
    assert len(lanes) == 2
    assert all((ln.endpoint_id, ln.model, ln.system_prompt, ln.params) == (endpoint.pk, "m-one", "You help Ada.", {"temperature": 0.3})
               for ln in lanes)
    rows = cs.compare_rows(conversation=conv)
    assert [u.content for u in rows.users] == ["Earlier Ada"]
    assert {rows.shown[(rows.users[0].pk, ln.pk)].content for ln in lanes} == {"Noted."}
    assert set(Message.objects.filter(conversation=conv).values_list("prompt_version_id", flat=True)) == {v1.pk}
    # The next send's plans carry the prompt's history to each lane, and the version frame field
    # records the version on every row (as the chat's "Use prompt" send does).
    from chat.compare.consumers import record_versions

    plans = cs.compare_plan_send(user=user, conversation_id=conv.pk, turn_id=uuid.uuid4(), content=use.send, settings={})
    assert [m.content for m in plans[1].request.messages] == ["Earlier Ada", "Noted.", "Say hi to Ada."]
    assert plans[1].request.system == "You help Ada."
    record_versions(user, {"prompt_version_id": str(v1.pk), "lanes": []}, plans)
    assert {r.prompt_version_id for p in plans for r in p.rows} == {v1.pk}
    plans = cs.compare_plan_send(user=user, conversation_id=conv.pk, turn_id=uuid.uuid4(), content="again", settings={})
    record_versions(user, {"lanes": [{"lane_id": lanes[0].pk, "prompt_version_id": v1.pk}]}, plans)
    assert {r.prompt_version_id for p in plans for r in p.rows} == {None}  # only the Use send claims it
    # Another user's private version is not recorded.
    bob = get_user_model().objects.create_user("bob", password="pw-bob-123")
    plans = cs.compare_plan_send(user=user, conversation_id=conv.pk, turn_id=uuid.uuid4(), content="x", settings={})
    bp, bv = make_version(bob, services.endpoint_create(user=bob, name="b", base_url="http://127.0.0.1:9/v1", api_key="k"))
    record_versions(user, {"prompt_version_id": bv.pk}, plans)
    assert {r.prompt_version_id for p in plans for r in p.rows} == {None}


def test_use_in_compare_views_and_lane_version_pick(alice) -> None:  # noqa: ANN001
    user, endpoint = alice
    prompt, v1 = make_version(user, endpoint)
    ps.prompt_save(prompt=prompt, user=user, name="greeter", description="", tags=[], visibility="private",
                   content=ps.VersionContent("Be terse with {{name}}.", tuple(v1.messages),
                                             {"endpoint_id": endpoint.pk, "model": "m-two", "params": {}}))
    c = client_for(user)
    page = c.get(reverse("prompts:version", args=[prompt.pk, 1]))
    assert reverse("chat:compare_from_prompt", args=[prompt.pk]) in page.content.decode()
    url = reverse("chat:compare_from_prompt", args=[prompt.pk]) + "?v=1"
    r = c.post(url, {"v": "1", "name": ""})
    assert r.status_code == 200 and b"missing-vars" in r.content
    r = c.post(url, {"v": "1", "name": "Ada"})
    cid = int(r.url.rstrip("/").split("/")[-1])
    html = c.get(r.url).content.decode()
    assert 'id="cmp-prompt-use"' in html and 'data-send="Say hi to Ada."' in html
    assert 'id="cmp-prompt-use"' not in c.get(r.url).content.decode()  # sent once
    lanes = cs.lanes_of(conversation=cs.compare_get_for_user(user=user, conversation_id=cid))
    r = c.post(reverse("chat:compare_lane_version", args=[cid, lanes[1].pk]), {"number": "2"})
    assert r.status_code == 200 and "lane-version-select" in r.content.decode()
    lane = Lane.objects.get(pk=lanes[1].pk)
    assert (lane.model, lane.system_prompt) == ("m-two", "Be terse with Ada.")
    assert Lane.objects.get(pk=lanes[0].pk).model == "m-one"
    # Another user: 404 everywhere, nothing changes.
    bob = get_user_model().objects.create_user("bob", password="pw-bob-123")
    cb = client_for(bob)
    assert cb.get(url).status_code == 404
    assert cb.post(reverse("chat:compare_lane_version", args=[cid, lanes[0].pk]), {"number": "2"}).status_code == 404
    assert cb.post(reverse("chat:compare_lane_save_prompt", args=[cid, lanes[0].pk]), {"name": "stolen"}).status_code == 404
    assert Lane.objects.get(pk=lanes[0].pk).model == "m-one" and not Prompt.objects.filter(owner=bob).exists()


# ---- 2. Save as prompt from a lane -------------------------------------------------------------


def _answer(conv, lane, u, text, model=SECRET_MODEL):  # noqa: ANN001, ANN201
    return Message.objects.create(
        conversation=conv, lane=lane, role="assistant", parent_id=u.pk, content=text, status="complete",
        turn_id=u.turn_id, settings_snapshot={"model": model, "endpoint_name": SECRET_ENDPOINT, "system_prompt": "Sys",
                                              "params": {"temperature": 0.7}},
        inspect={"request": {"model": model, "temperature": 0.7}}, created_at=timezone.now(),
    )


def _comparison(user, endpoint, *, blind=False, lanes=2):  # noqa: ANN001, ANN201
    s = NextTurnSettings(endpoint.pk, SECRET_MODEL, "Sys secret", {"temperature": 0.7})
    conv = csv.compare_create(user=user, lanes=[s] * lanes, blind=blind)
    conv.title = "A comparison"
    conv.save(update_fields=["title"])
    u = Message.objects.create(conversation=conv, role="user", content="Question?", status="complete",
                               turn_id=uuid.uuid4(), created_at=timezone.now())
    answers = [_answer(conv, ln, u, f"answer {i}") for i, ln in enumerate(cs.lanes_of(conversation=conv))]
    return conv, u, answers


def test_save_lane_as_prompt(alice) -> None:  # noqa: ANN001
    user, endpoint = alice
    conv, u, answers = _comparison(user, endpoint)
    lanes = cs.lanes_of(conversation=conv)
    c = client_for(user)
    r = c.post(reverse("chat:compare_lane_save_prompt", args=[conv.pk, lanes[1].pk]), {"name": "from lane"})
    prompt = Prompt.objects.get(owner=user, name="from lane")
    assert r.url == reverse("prompts:detail", args=[prompt.pk])
    v = prompt.versions.get()
    assert v.system_prompt == "Sys secret"
    assert v.messages == [{"role": "user", "content": "Question?"}, {"role": "assistant", "content": "answer 1"}]
    assert v.config == {"endpoint_id": endpoint.pk, "model": SECRET_MODEL, "params": {"temperature": 0.7}}
    other = csv.compare_create(user=user)
    assert c.post(reverse("chat:compare_lane_save_prompt", args=[other.pk, lanes[1].pk]), {"name": "x"}).status_code == 404


# ---- 3. Blind mode does not leak ---------------------------------------------------------------


def _sweep(c: Client, conv, u, answers) -> dict[str, str]:  # noqa: ANN001
    """Every page, partial, export and action URL of a comparison and its lane messages."""
    lanes = cs.lanes_of(conversation=conv)
    out: dict[str, str] = {}
    gets = [
        reverse("chat:compare", args=[conv.pk]), reverse("chat:compare_summary", args=[conv.pk]),
        reverse("chat:compare_summary", args=[conv.pk]) + f"?turn={u.pk}",
        reverse("chat:compare_list") + f"?current={conv.pk}", reverse("chat:compare_export_csv", args=[conv.pk]),
        reverse("chat:compare_export_json", args=[conv.pk]), reverse("chat:compare_export_md", args=[conv.pk]),
        reverse("chat:conversation", args=[conv.pk]),
        reverse("chat:conversation_code", args=[conv.pk]), reverse("sharing:export_json", args=[conv.pk]),
        reverse("sharing:export_md", args=[conv.pk]), reverse("chat:compare_leaderboard"), reverse("chat:home"),
    ]
    for m in answers:
        gets += [reverse("chat:message_inspect", args=[m.pk]), reverse("chat:message_raw", args=[m.pk]),
                 reverse("chat:message_edit_form", args=[m.pk])]
    for url in gets:
        r = c.get(url, follow=True)
        out["GET " + url] = r.content.decode(errors="replace") + str(dict(r.headers))
    posts = [
        (reverse("chat:conversation_fork", args=[conv.pk]), {"upto": str(answers[0].pk)}),
        (reverse("sharing:new", args=[conv.pk]), {"visibility": "link"}),
        (reverse("prompts:save_as_prompt", args=[conv.pk]), {"name": "leak"}),
        (reverse("chat:compare_lane_continue", args=[conv.pk, lanes[0].pk]), {}),
        (reverse("chat:compare_lane_save_prompt", args=[conv.pk, lanes[0].pk]), {"name": "leak2"}),
    ]
    for url, data in posts:
        r = c.post(url, data, follow=True)
        out["POST " + url] = r.content.decode(errors="replace") + str(dict(r.headers))
    return out


def test_blind_comparison_leaks_no_model_or_endpoint_before_the_vote(alice) -> None:  # noqa: ANN001
    user, endpoint = alice
    conv, u, answers = _comparison(user, endpoint, blind=True)
    c = client_for(user)
    pages = _sweep(c, conv, u, answers)
    leaks = {url: needle for url, body in pages.items() for needle in (SECRET_MODEL, SECRET_ENDPOINT, "Sys secret")
             if needle in body}
    assert leaks == {}
    # Nothing was made from the hidden lanes (fork, prompt, chat copy, share).
    assert not Prompt.objects.filter(owner=user).exists()
    assert list(cs.compare_list_for_user(user=user)) == [conv]
    from chat.models import Conversation

    assert Conversation.objects.filter(owner=user).count() == 1
    # After the vote the same URLs may show who was who (the sweep can fail).
    r = c.post(reverse("chat:compare_vote", args=[conv.pk]), {"choice": "lane:0"})
    assert r.status_code == 302
    assert SECRET_MODEL in c.get(reverse("chat:message_inspect", args=[answers[0].pk])).content.decode()
    assert SECRET_MODEL in c.get(reverse("chat:compare_export_json", args=[conv.pk])).content.decode()


def test_blind_answers_show_no_price_reasoning_or_router_figure_before_the_vote(alice) -> None:  # noqa: ANN001
    """Figures that tell models apart (cost per model, reasoning or cached tokens, the router's
    pick, the vendor's own timings) are left out of a blind comparison's metrics and table until
    the vote; the speed figures stay. Sharing it is refused with the reason (not a bare 404)."""
    user, endpoint = alice
    conv, u, answers = _comparison(user, endpoint, blind=True)
    for i, m in enumerate(answers):
        m.metrics = {"ttft_ms": 120.0 + i, "tokens_per_sec": 40.5, "total_ms": 900.0, "cost_usd": 0.123456 + i,
                     "routed_model": "router-pick-xyz", "upstream_ttft_ms": 55.0}
        m.usage = {"prompt_tokens": 11, "completion_tokens": 22, "reasoning_tokens": 777, "cached_tokens": 5}
        m.save(update_fields=["metrics", "usage"])
    c = client_for(user)
    page = c.get(reverse("chat:compare", args=[conv.pk])).content.decode()
    summary = c.get(reverse("chat:compare_summary", args=[conv.pk])).content.decode()
    for body in (page, summary):
        for needle in ("0.123456", "1.123456", "router-pick-xyz", "777", "upstream TTFT"):
            assert needle not in body, needle
    assert "TTFT 120 ms" in page and "40.5" in page  # speed figures stay
    r = c.post(reverse("sharing:new_compare", args=[conv.pk]), {"visibility": "site"})
    assert r.status_code == 409 and "hides its models until you vote" in r.content.decode()
    assert "Share after you vote" in page
    c.post(reverse("chat:compare_vote", args=[conv.pk]), {"choice": "lane:0"})
    page = c.get(reverse("chat:compare", args=[conv.pk])).content.decode()
    assert "0.123456" in page and "router-pick-xyz" in page and "Share after you vote" not in page


# ---- 4. Rankings --------------------------------------------------------------------------------


def test_ranking_counts_as_the_pairwise_outcomes_it_implies() -> None:
    keys = ["a", "b", "c", "d"]
    lanes = [{"position": i, "rank": r} for i, r in enumerate([2, 1, 3, 2])]
    games = vote_games(keys, lanes, "rank", 1)
    assert sorted(games) == sorted([("a", "b", 0.0), ("a", "c", 1.0), ("a", "d", 0.5), ("b", "c", 1.0),
                                    ("b", "d", 1.0), ("c", "d", 0.0)])
    # The leaderboard's fit over a ranking equals the fit over the same pairs given directly.
    snap = [{"position": i, "rank": r, "settings": {"endpoint_name": "e", "model": k}, "metrics": {}}
            for i, (k, r) in enumerate(zip(keys, [2, 1, 3, 2], strict=True))]
    rows = leaderboard_rows([SimpleNamespace(lanes=snap, choice="rank", winner_position=1)])
    direct = bradley_terry([(f"e · {a}", f"e · {b}", s) for a, b, s in games])
    assert [(r["key"], round(r["rating"].score, 6)) for r in rows] == [(r.key, round(r.score, 6)) for r in direct]
    assert [r["key"] for r in rows][0] == "e · b" and [r["key"] for r in rows][-1] == "e · c"
    # A win vote still beats every other lane only (no order among the losers).
    assert sorted(vote_games(keys, [{"position": i} for i in range(4)], "lane", 2)) == [
        ("c", "a", 1.0), ("c", "b", 1.0), ("c", "d", 1.0)]


def test_rank_vote_is_stored_with_the_vote(alice) -> None:  # noqa: ANN001
    user, endpoint = alice
    conv, u, answers = _comparison(user, endpoint, blind=True, lanes=3)
    c = client_for(user)
    page = c.get(reverse("chat:compare", args=[conv.pk])).content.decode()
    assert 'id="vote-rank"' in page and 'name="rank_2"' in page
    url = reverse("chat:compare_vote", args=[conv.pk])
    assert c.post(url, {"choice": "rank", "rank_0": "1", "rank_1": "9", "rank_2": "2"}).status_code == 400
    assert not Vote.objects.exists()
    assert c.post(url, {"choice": "rank", "rank_0": "3", "rank_1": "1", "rank_2": "2"}).status_code == 302
    vote = Vote.objects.get()
    assert vote.choice == "rank" and vote.winner_position == 1
    assert [x["rank"] for x in vote.lanes] == [3, 1, 2]
    assert "a ranking" in c.get(reverse("chat:compare", args=[conv.pk])).content.decode()


# ---- 5. The chat sidebar lists comparisons ------------------------------------------------------


def test_chat_sidebar_lists_comparisons(alice) -> None:  # noqa: ANN001
    user, endpoint = alice
    conv, _u, _a = _comparison(user, endpoint)
    chat = services.conversation_create(user=user, endpoint=endpoint)
    html = client_for(user).get(reverse("chat:conversation", args=[chat.pk])).content.decode()
    assert 'id="sidebar-comparisons"' in html and reverse("chat:compare", args=[conv.pk]) in html
    bob = get_user_model().objects.create_user("bob", password="pw-bob-123")
    bchat = services.conversation_create(user=bob)
    assert reverse("chat:compare", args=[conv.pk]) not in client_for(bob).get(
        reverse("chat:conversation", args=[bchat.pk])).content.decode()
