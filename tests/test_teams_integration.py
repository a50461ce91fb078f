"""Teams across the features built beside them (issue 12 × issues 11, 13, 14): a member uses a
team endpoint in compare lanes, modes and prompt test sets; the one rule for a new turn
(``selectors.endpoint_for_turn``: membership and budgets, read now) refuses a removed member's
lane turn and a lane turn past a budget, before anything is written or sent."""

from __future__ import annotations

import dataclasses
import uuid
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model

from chat import services
from chat.compare import selectors as compare_selectors
from chat.compare import services as compare_services
from chat.models import Membership, Message
from chat.modes.forms import EmbeddingsForm
from chat.prompts.forms import PromptForm
from chat.selectors import TurnRefused
from chat.teams import services as team_services
from tests.test_teams import _answer

pytestmark = pytest.mark.django_db
User = get_user_model()


@pytest.fixture
def world():  # noqa: ANN201
    owner = User.objects.create_user("olga", password="x", email="olga@example.com")
    member = User.objects.create_user("mia", password="x", email="mia@example.com")
    team = team_services.team_create(user=owner, name="Research")
    team_services.member_add(team=team, who="mia")
    ep = services.endpoint_create(user=owner, team=team, name="Shared sim", base_url="https://203.0.113.5/v1",
                                  api_key="sk-team-SECRET-1234")
    return {"owner": owner, "member": member, "team": team, "endpoint": ep}


def member_comparison(world):  # noqa: ANN001, ANN201
    member, ep = world["member"], world["endpoint"]
    comparison = compare_services.compare_create(user=member)
    for lane in compare_selectors.lanes_of(conversation=comparison):
        s = dataclasses.replace(compare_selectors.lane_settings(lane), endpoint_id=ep.pk, model="sim-fast")
        compare_services.lane_save(conversation=comparison, lane_id=lane.pk, settings=s)
    return comparison


def send(world, comparison):  # noqa: ANN001, ANN201
    return compare_selectors.compare_plan_send(
        user=world["member"], conversation_id=comparison.pk, turn_id=uuid.uuid4(), content="Hi", settings={},
    )


def test_a_member_compares_on_a_team_endpoint_and_is_refused_once_removed(world) -> None:  # noqa: ANN001
    comparison = member_comparison(world)
    plans = send(world, comparison)
    assert len(plans) == 2 and all(p.target.endpoint_id == world["endpoint"].pk for p in plans)
    team_services.member_remove(membership=Membership.objects.get(user=world["member"]))
    before = Message.objects.count()
    with pytest.raises(TurnRefused):
        send(world, comparison)
    assert Message.objects.count() == before  # nothing written for a refused send


def test_a_team_budget_refuses_a_lane_turn_naming_the_budget(world) -> None:  # noqa: ANN001
    comparison = member_comparison(world)
    team_services.budget_set(team=world["team"], unit="usd", amount=Decimal("1"))
    send(world, comparison)  # under budget
    _answer(world["owner"], world["endpoint"], cost=1.25)  # the team's month is now over $1
    with pytest.raises(TurnRefused) as refused:
        send(world, comparison)
    assert "budget" in refused.value.message and "Research" in refused.value.message


def test_modes_and_prompt_forms_offer_the_team_endpoint_to_a_member_only(world) -> None:  # noqa: ANN001
    stranger = User.objects.create_user("sam", password="x")
    ep = world["endpoint"]
    assert ep in EmbeddingsForm(user=world["member"]).fields["endpoint"].queryset
    assert ep not in EmbeddingsForm(user=stranger).fields["endpoint"].queryset
    member_choices = dict(PromptForm(user=world["member"]).fields["endpoint_id"].choices)
    stranger_choices = dict(PromptForm(user=stranger).fields["endpoint_id"].choices)
    assert ep.pk in member_choices and ep.pk not in stranger_choices


def test_a_team_share_link_opens_for_members_only(world) -> None:  # noqa: ANN001
    """Issue 13 × 12: a share link for "members of <team>": a member opens it, a non-member
    signed in gets the link's 404 page, a logged-out visitor is sent to log in, and a member
    removed from the team loses it at once; a team the author is not in is refused."""
    import re

    from django.test import Client

    from chat.sharing.models import ShareLink

    owner, member, team = world["owner"], world["member"], world["team"]
    stranger = User.objects.create_user("sam", password="x")
    conv = services.conversation_create(user=owner)
    c = Client()
    c.force_login(owner)
    other_team = team_services.team_create(user=stranger, name="Other")
    assert "Unknown visibility" in c.post(f"/shares/new/{conv.pk}/", {"visibility": f"team:{other_team.pk}"}).content.decode()
    page = c.get(f"/c/{conv.pk}/").content.decode()
    assert f'<option value="team:{team.pk}">members of Research</option>' in page
    r = c.post(f"/shares/new/{conv.pk}/", {"visibility": f"team:{team.pk}"})
    url = re.search(r"/s/[\w-]+/", r.content.decode())[0]
    assert ShareLink.objects.get().team_id == team.pk
    m, s = Client(), Client()
    m.force_login(member)
    s.force_login(stranger)
    assert m.get(url).status_code == 200
    assert s.get(url).status_code == 404
    assert Client().get(url).status_code == 302  # to the login page
    team_services.member_remove(membership=Membership.objects.get(user=member))
    assert m.get(url).status_code == 404
