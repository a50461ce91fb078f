"""Teams over the websocket, against the simulator process: a member chats with a team
endpoint and never sees its key in any frame (also when the upstream echoes it); removing the
member stops their running turn and refuses their next send before any upstream call; a
stranger and a removed member cannot use the endpoint's id; a budget refuses with its name."""

from __future__ import annotations

import asyncio
import re
import uuid

import pytest
from channels.db import database_sync_to_async
from django.contrib.auth import get_user_model

from chat import services
from chat.models import Membership, Message
from chat.teams import services as team_services
from chat.turns import registry
from tests.helpers import chat_requests, is_delta
from tests.test_consumers import connect, send_frame, until_final

pytestmark = [pytest.mark.django_db(transaction=True)]

KEY = "sk-team-WS-SECRET-0123456789abcd"
HEADER = "hdr-WS-SECRET-value-4242"


@pytest.fixture
def team_world(fresh_sim):  # noqa: ANN001, ANN201
    User = get_user_model()
    owner = User.objects.create_user("olga", password="pw-olga-123")
    member = User.objects.create_user("mia", password="pw-mia-123")
    stranger = User.objects.create_user("sam", password="pw-sam-123")
    team = team_services.team_create(user=owner, name="Research")
    team_services.member_add(team=team, who="mia")
    ep = services.endpoint_create(user=owner, team=team, name="Team sim", base_url=fresh_sim.base_url,
                                  api_key=KEY, extra_headers={"X-Team-Secret": HEADER})
    conv = services.conversation_create(user=member, endpoint=ep)
    return {"owner": owner, "member": member, "stranger": stranger, "team": team, "endpoint": ep, "conv": conv}


def clean(frames: list[str]) -> None:
    for f in frames:
        assert KEY not in f and HEADER not in f and KEY[-6:] not in f


async def test_member_chats_with_team_endpoint_without_seeing_the_key(team_world, fresh_sim) -> None:  # noqa: ANN001
    w = team_world
    comm = await connect(w["member"], w["conv"].pk)
    await comm.send_json_to(send_frame(w["endpoint"].pk, "sim-fast?length=40"))
    frames, mid, status = await until_final(comm)
    assert status == "complete"
    clean(frames)
    rec = chat_requests(fresh_sim.requests())[-1]
    assert rec["status"] == 200
    # The upstream got the key; the member's rows and frames never carry it.
    row = await database_sync_to_async(Message.objects.get)(pk=mid)
    assert row.usage_user_id == w["member"].pk and row.usage_team_id == w["team"].pk
    assert KEY not in str(row.inspect) and HEADER not in str(row.inspect) and KEY not in str(row.settings_snapshot)
    # An upstream error echoing the key is scrubbed too.
    await comm.send_json_to(send_frame(w["endpoint"].pk, "sim-fast?fault=echo_key"))
    frames, mid, status = await until_final(comm)
    assert status == "error"
    assert chat_requests(fresh_sim.requests())[-1]["status"] == 401
    clean(frames)
    row = await database_sync_to_async(Message.objects.get)(pk=mid)
    assert KEY not in str(row.error) and KEY not in str(row.inspect)
    await comm.disconnect()


async def test_removal_stops_the_running_turn_and_refuses_the_next_send(team_world, fresh_sim) -> None:  # noqa: ANN001
    w = team_world
    comm = await connect(w["member"], w["conv"].pk)
    await comm.send_json_to(send_frame(w["endpoint"].pk, "sim-fast?ttft_ms=10&delay_ms=40&length=600&reasoning=0"))
    frames: list[str] = []
    while not any(is_delta(f) for f in frames):
        frames.append(await comm.receive_from(timeout=10))
    mid = re.search(r'<article id="m-([0-9a-f-]+)" class="msg msg-assistant', "".join(frames)).group(1)
    m = await database_sync_to_async(Membership.objects.get)(team=w["team"], user=w["member"])
    await database_sync_to_async(team_services.member_remove)(membership=m)
    more, fmid, status = await until_final(comm, timeout=10)
    await registry.drain()
    assert fmid == mid and status == "stopped"
    assert any("removed from the team" in f for f in more)
    clean(frames + more)
    n = len(chat_requests(fresh_sim.requests()))
    await comm.send_json_to(send_frame(w["endpoint"].pk, "sim-fast"))
    frame = await comm.receive_from(timeout=5)
    assert "Not sent" in frame and "no such endpoint" in frame
    await asyncio.sleep(0.3)
    assert len(chat_requests(fresh_sim.requests())) == n  # no upstream call
    assert await database_sync_to_async(Message.objects.filter(conversation=w["conv"]).count)() == 2
    await comm.disconnect()


async def test_stranger_cannot_use_a_team_endpoint_id(team_world, fresh_sim) -> None:  # noqa: ANN001
    w = team_world
    conv = await database_sync_to_async(services.conversation_create)(user=w["stranger"])
    comm = await connect(w["stranger"], conv.pk)
    await comm.send_json_to(send_frame(w["endpoint"].pk, "sim-fast"))
    frame = await comm.receive_from(timeout=5)
    assert "Not sent" in frame
    clean([frame])
    # Nor open the member's conversation.
    from channels.testing import WebsocketCommunicator

    from tests.test_consumers import app_for

    other = WebsocketCommunicator(app_for(w["stranger"]), f"/ws/c/{w['conv'].pk}/")
    connected, _ = await other.connect()
    assert connected
    out = await other.receive_output(timeout=5)
    assert out["type"] == "websocket.close" and out["code"] == 4404
    assert chat_requests(fresh_sim.requests()) == []
    assert await database_sync_to_async(Message.objects.count)() == 0
    await comm.disconnect()


async def test_budget_reached_refuses_with_its_name_before_any_upstream_call(team_world, fresh_sim) -> None:  # noqa: ANN001
    w = team_world
    await database_sync_to_async(team_services.budget_set)(team=w["team"], unit="tokens", amount="1")
    comm = await connect(w["member"], w["conv"].pk)
    await comm.send_json_to(send_frame(w["endpoint"].pk, "sim-fast?length=20"))
    frames, mid, status = await until_final(comm)
    assert status == "complete"  # under budget before it: a running turn is never cut
    n = len(chat_requests(fresh_sim.requests()))
    await comm.send_json_to({**send_frame(w["endpoint"].pk, "sim-fast"), "turn_id": str(uuid.uuid4())})
    frame = await comm.receive_from(timeout=5)
    assert "Not sent" in frame and "Research" in frame and "budget" in frame
    await asyncio.sleep(0.2)
    assert len(chat_requests(fresh_sim.requests())) == n
    await comm.disconnect()
