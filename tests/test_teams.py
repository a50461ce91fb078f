"""Teams over HTTP: the one ownership rule (use = own + member teams, edit = own + owned
teams), every new view checked with an owner, a plain member, a removed member and a stranger,
the key never in any page, budgets, usage sums, user administration and the closed sign-up."""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from chat import selectors, services
from chat.models import Budget, Conversation, Endpoint, Membership, Message, Team
from chat.teams import selectors as teams
from chat.teams import services as team_services

pytestmark = [pytest.mark.django_db]
User = get_user_model()
KEY = "sk-team-SECRET-9f8e7d6c5b4a3210"
HEADER_VALUE = "hdr-SECRET-value-31337"
PW = "pw-Correct-horse-42"


@pytest.fixture(autouse=True)
def _setup(settings):  # noqa: ANN001, ANN202
    from chat import middleware

    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.PLAYGROUND_REFUSE_PRIVATE_URLS = False
    middleware.reset_cache()
    yield
    middleware.reset_cache()


@pytest.fixture
def world():  # noqa: ANN201
    """owner + member in team T with a shared endpoint; a stranger; a removed ex-member."""
    owner = User.objects.create_user("olga", password=PW, email="olga@example.com")
    member = User.objects.create_user("mia", password=PW, email="mia@example.com")
    stranger = User.objects.create_user("sam", password=PW)
    ex = User.objects.create_user("ed", password=PW)
    team = team_services.team_create(user=owner, name="Research")
    team_services.member_add(team=team, who="mia@example.com")
    m_ex = team_services.member_add(team=team, who="ed")
    team_services.member_remove(membership=m_ex)
    ep = services.endpoint_create(
        user=owner, team=team, name="Shared sim", base_url="https://203.0.113.5/v1", api_key=KEY,
        extra_headers={"X-Secret": HEADER_VALUE},
    )
    return {"owner": owner, "member": member, "stranger": stranger, "ex": ex, "team": team, "endpoint": ep}


def client_for(user) -> Client:  # noqa: ANN001
    c = Client()
    c.force_login(user)
    return c


def no_secret(resp, *, hint_ok: bool = False) -> str:  # noqa: ANN001
    """The body, after checking it has neither the key nor a secret header value (nor the
    key's hint, unless ``hint_ok``: owners see the last four characters to tell keys apart)."""
    body = resp.content.decode(errors="replace")
    assert KEY not in body and HEADER_VALUE not in body
    if not hint_ok:
        assert "…" + KEY[-4:] not in body and KEY[-6:] not in body
    return body


# ---- the ownership rule ------------------------------------------------------------------


def test_usable_and_manageable_querysets(world) -> None:  # noqa: ANN001
    ep = world["endpoint"]
    own = services.endpoint_create(user=world["member"], name="mine", base_url="https://a.example.com/v1")
    assert set(teams.endpoints_usable(user=world["member"])) == {ep, own}
    assert set(teams.endpoints_manageable(user=world["member"])) == {own}
    assert set(teams.endpoints_usable(user=world["owner"])) == {ep}
    assert set(teams.endpoints_manageable(user=world["owner"])) == {ep}
    for u in ("stranger", "ex"):
        assert ep not in teams.endpoints_usable(user=world[u])


def test_endpoint_has_exactly_one_owner_or_team(world) -> None:  # noqa: ANN001
    from django.db import IntegrityError, transaction

    with pytest.raises(IntegrityError), transaction.atomic():
        Endpoint.objects.create(name="both", base_url="https://x.example.com", owner=world["owner"], team=world["team"])
    with pytest.raises(IntegrityError), transaction.atomic():
        Endpoint.objects.create(name="none", base_url="https://x.example.com")


@pytest.mark.parametrize("who", ["member", "stranger", "ex"])
def test_only_owners_see_and_edit_team_endpoint_settings(world, who) -> None:  # noqa: ANN001
    ep = world["endpoint"]
    c = client_for(world[who])
    for url in (f"/endpoints/{ep.pk}/",):
        assert c.get(url).status_code == 404
        assert c.post(url, {"name": "hacked", "base_url": "https://evil.example.com/v1", "api_style": "openai_chat"}).status_code == 404
    assert c.post(f"/endpoints/{ep.pk}/delete/").status_code == 404
    assert c.post(f"/endpoints/{ep.pk}/test/").status_code == 404
    ep.refresh_from_db()
    assert ep.name == "Shared sim" and ep.base_url == "https://203.0.113.5/v1"
    body = no_secret(c.get("/endpoints/"))
    if who == "member":
        assert "Shared sim" in body and "203.0.113.5" not in body and f"/endpoints/{ep.pk}/" not in body
    else:
        assert "Shared sim" not in body


def test_owner_edits_team_endpoint_and_never_sees_the_key(world) -> None:  # noqa: ANN001
    ep = world["endpoint"]
    c = client_for(world["owner"])
    body = no_secret(c.get(f"/endpoints/{ep.pk}/"), hint_ok=True)
    assert "203.0.113.5" in body
    resp = c.post(f"/endpoints/{ep.pk}/", {"name": "Shared 2", "base_url": "https://203.0.113.5/v1",
                                          "api_style": "openai_chat", "stream_options": "on"})
    assert resp.status_code == 302
    ep.refresh_from_db()
    assert ep.name == "Shared 2" and ep.get_api_key() == KEY and ep.team_id == world["team"].pk


def test_member_pages_never_carry_the_key(world) -> None:  # noqa: ANN001
    ep = world["endpoint"]
    c = client_for(world["member"])
    conv = services.conversation_create(user=world["member"], endpoint=ep)
    for url in ("/", f"/c/{conv.pk}/", "/endpoints/", f"/endpoints/{ep.pk}/models/", f"/c/{conv.pk}/code/",
                f"/c/{conv.pk}/code/?endpoint_id={ep.pk}&model=m&content=hi", "/teams/",
                f"/teams/{world['team'].pk}/", "/usage/", "/usage.csv"):
        resp = c.get(url, follow=True)
        assert resp.status_code == 200, url
        no_secret(resp)
    body = no_secret(c.get(f"/c/{conv.pk}/"))
    assert "Shared sim" in body  # the member can pick it in the chat


def test_endpoint_made_in_team_workspace_is_the_teams(world) -> None:  # noqa: ANN001
    c = client_for(world["owner"])
    assert c.post("/workspace/", {"workspace": world["team"].pk}).status_code == 302
    c.post("/endpoints/new/", {"name": "T2", "base_url": "https://203.0.113.6/v1", "api_style": "openai_chat",
                               "api_key": "sk-t2-abcdef123456"})
    e = Endpoint.objects.get(name="T2")
    assert e.team_id == world["team"].pk and e.owner_id is None
    # A member's team workspace does not make team endpoints (only owners may).
    m = client_for(world["member"])
    m.post("/workspace/", {"workspace": world["team"].pk})
    m.post("/endpoints/new/", {"name": "M2", "base_url": "https://203.0.113.7/v1", "api_style": "openai_chat"})
    e = Endpoint.objects.get(name="M2")
    assert e.owner_id == world["member"].pk and e.team_id is None


@pytest.mark.parametrize("who", ["stranger", "ex"])
def test_workspace_switch_to_a_foreign_team_is_404(world, who) -> None:  # noqa: ANN001
    c = client_for(world[who])
    assert c.post("/workspace/", {"workspace": world["team"].pk}).status_code == 404
    assert teams.WORKSPACE_KEY not in c.session


# ---- team pages: owner / member / ex-member / stranger -------------------------------------


@pytest.mark.parametrize("who", ["stranger", "ex"])
def test_non_members_get_404_on_every_team_view(world, who) -> None:  # noqa: ANN001
    t = world["team"]
    mid = Membership.objects.get(team=t, user=world["member"]).pk
    c = client_for(world[who])
    assert c.get(f"/teams/{t.pk}/").status_code == 404
    assert c.post(f"/teams/{t.pk}/members/", {"who": world[who].username}).status_code == 404
    assert c.post(f"/teams/{t.pk}/budget/", {"amount": "1", "unit": "usd"}).status_code == 404
    assert c.post(f"/teams/members/{mid}/remove/").status_code == 404
    assert c.post(f"/teams/members/{mid}/role/", {"role": "owner"}).status_code == 404
    assert "Research" not in c.get("/teams/").content.decode()
    assert Membership.objects.filter(team=t).count() == 2 and not Budget.objects.exists()
    assert not Membership.objects.filter(team=t, user=world[who]).exists()


def test_plain_member_gets_404_on_owner_actions(world) -> None:  # noqa: ANN001
    t = world["team"]
    owner_m = Membership.objects.get(team=t, user=world["owner"])
    c = client_for(world["member"])
    body = c.get(f"/teams/{t.pk}/").content.decode()
    assert "Add member" not in body and "Save budget" not in body
    assert c.post(f"/teams/{t.pk}/members/", {"who": "sam"}).status_code == 404
    assert c.post(f"/teams/{t.pk}/budget/", {"amount": "1", "unit": "usd"}).status_code == 404
    assert c.post(f"/teams/members/{owner_m.pk}/remove/").status_code == 404
    assert c.post(f"/teams/members/{owner_m.pk}/role/", {"role": "member"}).status_code == 404
    own = Membership.objects.get(team=t, user=world["member"])
    assert c.post(f"/teams/members/{own.pk}/role/", {"role": "owner"}).status_code == 404
    own.refresh_from_db()
    assert own.role == "member" and not Budget.objects.exists()
    assert not Membership.objects.filter(user__username="sam").exists()
    # A member may leave.
    assert c.post(f"/teams/members/{own.pk}/remove/").status_code == 302
    assert not Membership.objects.filter(pk=own.pk).exists()


def test_owner_adds_promotes_removes_and_a_team_keeps_an_owner(world) -> None:  # noqa: ANN001
    t = world["team"]
    c = client_for(world["owner"])
    c.post(f"/teams/{t.pk}/members/", {"who": "SAM", "role": "member"})
    sam = Membership.objects.get(team=t, user=world["stranger"])
    c.post(f"/teams/{t.pk}/members/", {"who": "nobody-here"})
    assert Membership.objects.filter(team=t).count() == 3
    owner_m = Membership.objects.get(team=t, user=world["owner"])
    c.post(f"/teams/members/{owner_m.pk}/role/", {"role": "member"})  # the last owner
    owner_m.refresh_from_db()
    assert owner_m.role == "owner"
    c.post(f"/teams/members/{owner_m.pk}/remove/")
    assert Membership.objects.filter(pk=owner_m.pk).exists()
    c.post(f"/teams/members/{sam.pk}/role/", {"role": "owner"})
    sam.refresh_from_db()
    assert sam.role == "owner"
    c.post(f"/teams/members/{sam.pk}/remove/")
    assert not Membership.objects.filter(pk=sam.pk).exists()


def test_create_team_makes_the_creator_its_owner() -> None:
    u = User.objects.create_user("x1", password=PW)
    c = client_for(u)
    c.post("/teams/", {"name": "  Alpha  "})
    t = Team.objects.get(name="Alpha")
    assert Membership.objects.get(team=t).role == "owner" and Membership.objects.get(team=t).user == u
    c.post("/teams/", {"name": ""})
    assert Team.objects.count() == 1


# ---- turn plans: membership and budgets ---------------------------------------------------


def _plan(user, conv, ep):  # noqa: ANN001, ANN202
    return selectors.turn_plan_send(
        user=user, conversation_id=conv.pk, turn_id=uuid.uuid4(), content="hi", role="user",
        settings=selectors.NextTurnSettings(ep.pk, "m1", "", {}),
    )


def test_turn_plan_uses_team_endpoint_for_members_only(world) -> None:  # noqa: ANN001
    ep = world["endpoint"]
    conv = services.conversation_create(user=world["member"], endpoint=ep)
    plan = _plan(world["member"], conv, ep)
    assert plan.target.endpoint_id == ep.pk and plan.assistant.usage_team_id == world["team"].pk
    assert plan.assistant.usage_user_id == world["member"].pk and plan.assistant.usage_endpoint_id == ep.pk
    assert KEY not in repr(plan) and KEY not in repr(plan.target)
    # Removed: the conversation still names the endpoint, but the plan refuses it.
    team_services.member_remove(membership=Membership.objects.get(team=world["team"], user=world["member"]))
    with pytest.raises(selectors.TurnRefused) as exc:
        _plan(world["member"], conv, ep)
    assert exc.value.message == selectors.NO_ENDPOINT
    for who in ("stranger", "ex"):
        own = services.conversation_create(user=world[who])
        with pytest.raises(selectors.TurnRefused):
            _plan(world[who], own, ep)
    assert Message.objects.count() == 0


def _answer(user, ep, *, prompt=100, completion=50, cost=0.5, day=None, model="m1"):  # noqa: ANN001, ANN202
    conv = Conversation.objects.create(owner=user)
    now = timezone.now() if day is None else dt.datetime.combine(day, dt.time(12), tzinfo=dt.UTC)
    m = Message.new_answer(conversation=conv, lane_id=None, parent_id=None, turn_id=uuid.uuid4(),
                           snapshot=ep.settings_snapshot(model, "", {}), created_at=now)
    m.status = "complete"
    m.usage = {"prompt_tokens": prompt, "completion_tokens": completion, "reasoning_tokens": 5, "cached_tokens": 7}
    m.metrics = {"cost_usd": cost, "ttft_ms": 100.0, "tokens_per_sec": 20.0}
    return _finish(m)


def _finish(m):  # noqa: ANN001, ANN202
    """Save as the runner's final write does (the number columns from usage and metrics)."""
    for k, v in Message.usage_figures(m.usage, m.metrics).items():
        setattr(m, k, v)
    m.save()
    return m


def test_team_budget_refuses_the_next_turn_with_its_name(world) -> None:  # noqa: ANN001
    ep = world["endpoint"]
    team_services.budget_set(team=world["team"], unit="usd", amount="1")
    conv = services.conversation_create(user=world["member"], endpoint=ep)
    _plan(world["member"], conv, ep)  # under budget
    _answer(world["owner"], ep, cost=0.6)
    _answer(world["member"], ep, cost=0.5)
    with pytest.raises(selectors.TurnRefused) as exc:
        _plan(world["member"], conv, ep)
    assert "Research" in exc.value.message and "$1.00" in exc.value.message and "budget" in exc.value.message
    # Personal endpoints are not counted against the team budget.
    own = services.endpoint_create(user=world["member"], name="own", base_url="https://o.example.com/v1")
    conv2 = services.conversation_create(user=world["member"], endpoint=own)
    _plan(world["member"], conv2, own)


def test_user_token_budget_counts_prompt_and_completion(world) -> None:  # noqa: ANN001
    own = services.endpoint_create(user=world["stranger"], name="own", base_url="https://o.example.com/v1")
    team_services.budget_set(user=world["stranger"], unit="tokens", amount="300")
    conv = services.conversation_create(user=world["stranger"], endpoint=own)
    _answer(world["stranger"], own, prompt=100, completion=100)
    _plan(world["stranger"], conv, own)
    _answer(world["stranger"], own, prompt=100, completion=0)
    with pytest.raises(selectors.TurnRefused) as exc:
        _plan(world["stranger"], conv, own)
    assert "your monthly budget (300 tokens)" in exc.value.message
    # Last month's use does not count.
    Message.objects.update(usage_day=teams.month_start() - dt.timedelta(days=1))
    _plan(world["stranger"], conv, own)


@pytest.mark.parametrize("bad", ["-1", "abc", "1e99", "NaN"])
def test_budget_amount_is_validated(world, bad) -> None:  # noqa: ANN001
    c = client_for(world["owner"])
    c.post(f"/teams/{world['team'].pk}/budget/", {"amount": bad, "unit": "usd"})
    assert not Budget.objects.exists()
    c.post(f"/teams/{world['team'].pk}/budget/", {"amount": "12.5", "unit": "tokens"})
    assert Budget.objects.get().amount == Decimal("12.5")
    c.post(f"/teams/{world['team'].pk}/budget/", {"amount": "", "unit": "usd"})
    assert not Budget.objects.exists()


# ---- usage -------------------------------------------------------------------------------


def test_usage_sums_equal_the_stored_figures_and_scope_is_respected(world) -> None:  # noqa: ANN001
    ep = world["endpoint"]
    own = services.endpoint_create(user=world["member"], name="own", base_url="https://o.example.com/v1")
    a = _answer(world["member"], ep, prompt=10, completion=20, cost=0.25)
    _answer(world["member"], ep, prompt=30, completion=40, cost=0.5, model="m2")
    _answer(world["member"], own, prompt=1, completion=2, cost=0.01)
    _answer(world["owner"], ep, prompt=1000, completion=1000, cost=9.0)
    # A forked copy of an answer is not a turn: no usage columns.
    services.conversation_fork(conversation=a.conversation)
    member = client_for(world["member"])
    body = member.get("/usage/").content.decode()
    assert 'data-figure="turns" data-value="3"' in body and 'data-figure="prompt" data-value="41"' in body
    member.post("/workspace/", {"workspace": world["team"].pk})
    body = member.get("/usage/").content.decode()
    assert 'data-figure="turns" data-value="2"' in body and 'data-figure="completion" data-value="60"' in body and "olga" not in body
    assert 'data-figure="cost" data-value="0.75"' in body and '$0.7500' in body
    owner = client_for(world["owner"])
    owner.post("/workspace/", {"workspace": world["team"].pk})
    body = owner.get("/usage/").content.decode()
    assert 'data-figure="turns" data-value="3"' in body and 'data-figure="prompt" data-value="1040"' in body
    assert "mia" in body and "olga" in body and "<rect" in body
    team_page = owner.get(f"/teams/{world['team'].pk}/").content.decode()
    assert "100 tokens · $0.7500" in team_page and "2000 tokens · $9.0000" in team_page  # each member's month
    assert "100 tokens" not in member.get(f"/teams/{world['team'].pk}/").content.decode()  # owners only
    body = owner.get(f"/usage/?member={world['member'].pk}").content.decode()
    assert 'data-figure="turns" data-value="2"' in body
    csv_text = owner.get("/usage.csv").content.decode()
    assert csv_text.splitlines()[0].startswith("day,user,endpoint,model") and len(csv_text.splitlines()) == 4
    # A stranger asking for the member filter sees only their own (nothing).
    s = client_for(world["stranger"])
    body = s.get(f"/usage/?member={world['member'].pk}").content.decode()
    assert 'data-figure="turns" data-value="0"' in body


def test_usage_medians_and_days(world) -> None:  # noqa: ANN001
    ep = world["endpoint"]
    for ttft in (100, 300, 200, 1000):
        m = _answer(world["member"], ep)
        m.metrics = {**m.metrics, "ttft_ms": ttft}
        _finish(m)
    scope = teams.UsageScope(since=timezone.now().date() - dt.timedelta(days=3), until=timezone.now().date(),
                             user_id=world["member"].pk)
    u = teams.usage_for(scope=scope)
    assert u.groups[0]["median_ttft_ms"] == 250 and u.groups[0]["median_tokens_per_sec"] == 20
    assert u.totals["turns"] == 4 and u.by_day[0]["turns"] == 4 and u.monthly[0]["turns"] == 4


def test_usage_csv_cells_cannot_be_formulas(world) -> None:  # noqa: ANN001
    _answer(world["member"], world["endpoint"], model="=HYPERLINK(1)")
    body = client_for(world["member"]).get("/usage.csv").content.decode()
    assert "'=HYPERLINK(1)" in body


# ---- user administration ------------------------------------------------------------------


@pytest.fixture
def admin_user():  # noqa: ANN201
    return User.objects.create_superuser("root", password=PW, email="")


@pytest.mark.parametrize("who", ["owner", "member"])
def test_non_staff_cannot_administer_users(world, who) -> None:  # noqa: ANN001
    c = client_for(world[who])
    target = world["stranger"]
    for url, data in ((f"/users/{target.pk}/active/", {"active": "0"}),
                      (f"/users/{target.pk}/password/", {"new_password1": "Xy-new-pass-991", "new_password2": "Xy-new-pass-991"}),
                      (f"/users/{target.pk}/budget/", {"amount": "5", "unit": "usd"})):
        assert c.post(url, data).status_code == 302 and "login" in c.post(url, data).url
    target.refresh_from_db()
    assert target.is_active and target.check_password(PW) and not Budget.objects.exists()


def test_staff_deactivates_resets_and_budgets(world, admin_user) -> None:  # noqa: ANN001
    c = client_for(admin_user)
    t = world["stranger"]
    body = c.get("/users/").content.decode()
    assert "sam" in body and "admin" in body
    c.post(f"/users/{t.pk}/active/", {"active": "0"})
    t.refresh_from_db()
    assert not t.is_active
    c.post(f"/users/{t.pk}/active/", {"active": "1"})
    t.refresh_from_db()
    assert t.is_active
    c.post(f"/users/{admin_user.pk}/active/", {"active": "0"})
    admin_user.refresh_from_db()
    assert admin_user.is_active
    resp = c.post(f"/users/{admin_user.pk}/password/", {"new_password1": "Xy-new-pass-991", "new_password2": "Xy-new-pass-991"})
    admin_user.refresh_from_db()
    assert resp.status_code == 302 and "password_change" in resp.url.replace("-", "_") or "/password" in resp.url
    assert admin_user.check_password(PW)  # one's own password goes through the ordinary change
    c.post(f"/users/{t.pk}/password/", {"new_password1": "Xy-new-pass-991", "new_password2": "Xy-new-pass-991"})
    t.refresh_from_db()
    assert t.check_password("Xy-new-pass-991")
    c.post(f"/users/{t.pk}/budget/", {"amount": "5", "unit": "usd"})
    assert Budget.objects.get(user=t).amount == 5
    assert c.post("/users/999999/active/", {"active": "0"}).status_code == 404


def test_signup_closed_page_and_open(admin_user) -> None:  # noqa: ANN001
    resp = Client().get("/signup/")
    assert resp.status_code == 403 and "Sign-up is closed, ask your admin" in resp.content.decode()
    client_for(admin_user).post("/users/", {"form": "signup", "open_signup": "on"})
    assert Client().get("/signup/").status_code == 200


def test_seed_usage_command_seeds_turns_the_page_counts() -> None:
    from io import StringIO

    from django.core.management import call_command

    out = StringIO()
    call_command("seed_usage", turns=300, days=10, measure=1, stdout=out)
    assert "seeded 300 turns" in out.getvalue() and "median" in out.getvalue()
    assert Message.objects.filter(usage_day__isnull=False).count() == 300
    owner = User.objects.get(username="bench-owner")
    team = Team.objects.get(name="Bench team")
    u = teams.usage_for(scope=teams.UsageScope(since=timezone.now().date() - dt.timedelta(days=11),
                                               until=timezone.now().date() + dt.timedelta(days=1), team_id=team.pk),
                        by_member=True)
    stored = Message.objects.filter(usage_team=team)
    assert u.totals["turns"] == stored.count() and len(u.members) == 5
    assert u.totals["prompt"] == sum(stored.values_list("usage_prompt", flat=True))
    assert owner.pk in {r["usage_user_id"] for r in u.members}
