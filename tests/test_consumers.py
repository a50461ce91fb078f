"""The conversation websocket against a real simulator process: streaming, persistence,
write and frame counts, errors, and what a second user can never do."""

from __future__ import annotations

import asyncio
import re
import time
import uuid

import pytest
from channels.db import database_sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model

from chat import services
from chat.models import Message
from chat.routing import websocket_urlpatterns
from chat.turns import registry
from tests.helpers import FINAL_RE, chat_requests, deltas, is_delta, joined, sim_text

pytestmark = [pytest.mark.django_db(transaction=True)]

KEY = "sk-test-SECRET-0123456789abcdef"


def app_for(user):  # noqa: ANN001, ANN201
    inner = URLRouter(websocket_urlpatterns)

    async def app(scope, receive, send):  # noqa: ANN001, ANN202
        return await inner(dict(scope, user=user), receive, send)

    return app


@pytest.fixture
def alice(fresh_sim):  # noqa: ANN001, ANN201
    user = get_user_model().objects.create_user("alice", password="pw-alice-123")
    endpoint = services.endpoint_create(user=user, name="sim", base_url=fresh_sim.base_url, api_key=KEY)
    conversation = services.conversation_create(user=user, endpoint=endpoint)
    return user, endpoint, conversation


@pytest.fixture
def bob(fresh_sim):  # noqa: ANN001, ANN201
    user = get_user_model().objects.create_user("bob", password="pw-bob-123")
    endpoint = services.endpoint_create(user=user, name="sim", base_url=fresh_sim.base_url)
    conversation = services.conversation_create(user=user, endpoint=endpoint)
    return user, endpoint, conversation


async def connect(user, conversation_id: int) -> WebsocketCommunicator:  # noqa: ANN001
    comm = WebsocketCommunicator(app_for(user), f"/ws/c/{conversation_id}/")
    connected, _ = await comm.connect()
    assert connected
    return comm


def send_frame(endpoint_id: int, model: str, content: str = "Hello there", **extra: object) -> dict:
    return {"action": "send", "turn_id": str(uuid.uuid4()), "content": content,
            "endpoint_id": str(endpoint_id), "model": model, "system_prompt": "", **extra,
            "HEADERS": {"HX-Request": "true"}}


async def until_final(comm: WebsocketCommunicator, timeout: float = 30.0) -> tuple[list[str], str, str]:  # noqa: ASYNC109
    frames: list[str] = []
    deadline = time.monotonic() + timeout
    while True:
        frame = await comm.receive_from(timeout=max(0.1, deadline - time.monotonic()))
        frames.append(frame)
        m = FINAL_RE.search(frame)
        if m:
            return frames, m["mid"], m["status"]


async def test_send_streams_text_and_reasoning_exactly_and_persists(alice, fresh_sim) -> None:  # noqa: ANN001
    user, endpoint, conv = alice
    comm = await connect(user, conv.pk)
    await comm.send_json_to(send_frame(endpoint.pk, "sim-reasoning?ttft_ms=20&delay_ms=5&length=80&reasoning_length=20"))
    frames, mid, status = await until_final(comm)
    await registry.drain()
    assert status == "complete"
    rec = chat_requests(fresh_sim.requests())[-1]
    expected_text, expected_reasoning = sim_text(rec, "content"), sim_text(rec, "reasoning")
    assert expected_text and expected_reasoning
    assert joined(frames, "text") == expected_text
    assert joined(frames, "reasoning") == expected_reasoning
    # The skeleton arrives before any delta.
    first_delta = next(i for i, f in enumerate(frames) if is_delta(f))
    assert any(f'id="m-{mid}"' in f for f in frames[:first_delta])
    row = await database_sync_to_async(Message.objects.get)(pk=mid)
    assert row.content == expected_text and row.reasoning == expected_reasoning
    assert row.usage["completion_tokens"] == rec["knobs"]["length"] or row.usage["completion_tokens"] > 0
    assert row.metrics["ttft_ms"] is not None and row.finish_reason == "stop"
    assert row.settings_snapshot["model"].startswith("sim-reasoning")
    assert rec["auth_fingerprint"] is not None and rec["body"]["stream_options"] == {"include_usage": True}
    # The key never reaches a frame or the stored row.
    assert not any(KEY in f for f in frames)
    assert KEY not in str(row.inspect) and KEY not in str(row.error)
    await comm.disconnect()


async def test_five_second_turn_writes_and_frames_are_bounded(alice, fresh_sim, write_counter) -> None:  # noqa: ANN001
    user, endpoint, conv = alice
    comm = await connect(user, conv.pk)
    t0 = time.monotonic()
    await comm.send_json_to(send_frame(endpoint.pk, "sim-fast?ttft_ms=50&delay_ms=10&length=500&reasoning=0"))
    frames, mid, status = await until_final(comm)
    duration = time.monotonic() - t0
    await registry.drain()
    assert status == "complete"
    assert duration >= 4.5
    row = await database_sync_to_async(Message.objects.get)(pk=mid)
    partial_saves = row.inspect["partial_saves"]
    writes = [s for s in write_counter.statements if "chat_message" in s or "chat_conversation" in s]
    assert partial_saves >= 2, "a 5-second turn must save its partial text at least twice"
    assert partial_saves <= duration / 2 + 1
    assert len(writes) == 3 + partial_saves, writes
    assert len(writes) <= 3 + duration / 2 + 1
    rec = chat_requests(fresh_sim.requests())[-1]
    assert joined(frames, "text") == sim_text(rec) == row.content
    delta_frames = [f for f in frames if is_delta(f)]
    # Coalesced: no more than one frame per 33 ms (plus the first token's own frame).
    assert len(delta_frames) <= duration / 0.033 + 2
    assert len(delta_frames) < rec["tokens_written"] / 2, "one frame per token is not coalescing"
    first = deltas([delta_frames[0]])
    assert len(first) == 1 and first[0]["start"] == 0
    await comm.disconnect()


async def test_upstream_429_is_shown_with_retry_after_and_message_kept(alice, fresh_sim) -> None:  # noqa: ANN001
    user, endpoint, conv = alice
    comm = await connect(user, conv.pk)
    await comm.send_json_to(send_frame(endpoint.pk, "sim-fast?fault=429", content="Keep me"))
    frames, mid, status = await until_final(comm)
    assert status == "error"
    row = await database_sync_to_async(Message.objects.get)(pk=mid)
    assert row.error["status"] == 429 and row.error["retry_after_s"] == 7
    assert row.error["message"] and row.error["code"]
    final = "".join(frames[-2:])  # the last blocks and the final frame may come apart under load
    # The countdown is what is left of Retry-After since the error (at most 7 s).
    left = re.search(r'data-retry-after="([0-9.]+)"', final)
    assert "HTTP 429" in final and "Retry" in final and left and 5 < float(left.group(1)) <= 7
    assert "Traceback" not in final
    user_msg = await database_sync_to_async(Message.objects.get)(pk=row.parent_id)
    assert user_msg.content == "Keep me"
    await comm.disconnect()


async def test_error_body_echoing_the_key_is_scrubbed_everywhere(alice, fresh_sim) -> None:  # noqa: ANN001
    user, endpoint, conv = alice
    comm = await connect(user, conv.pk)
    await comm.send_json_to(send_frame(endpoint.pk, "sim-fast?fault=echo_key"))
    frames, mid, status = await until_final(comm)
    assert status == "error"
    rec = chat_requests(fresh_sim.requests())[-1]
    assert rec["status"] == 401  # the simulator really echoed it
    row = await database_sync_to_async(Message.objects.get)(pk=mid)
    assert KEY not in str(row.error) and KEY not in str(row.inspect)
    assert "[REDACTED]" in str(row.error)
    assert not any(KEY in f for f in frames)
    await comm.disconnect()


async def test_stop_keeps_a_prefix_and_closes_upstream(alice, fresh_sim) -> None:  # noqa: ANN001
    user, endpoint, conv = alice
    comm = await connect(user, conv.pk)
    await comm.send_json_to(send_frame(endpoint.pk, "sim-fast?ttft_ms=10&delay_ms=40&length=400&reasoning=0"))
    frames: list[str] = []
    while not any(is_delta(f) for f in frames):
        frames.append(await comm.receive_from(timeout=10))
    mid = re.search(r'<article id="m-([0-9a-f-]+)" class="msg msg-assistant', "".join(frames)).group(1)
    await asyncio.sleep(0.5)
    await comm.send_json_to({"action": "stop", "message_id": mid})
    more, fmid, status = await until_final(comm)
    await registry.drain()
    assert fmid == mid and status == "stopped"
    row = await database_sync_to_async(Message.objects.get)(pk=mid)
    await asyncio.sleep(0.3)
    rec = chat_requests(fresh_sim.requests())[-1]
    full = sim_text(rec)
    assert row.content and full.startswith(row.content)
    assert rec["disconnected"] is True
    await comm.disconnect()


async def test_invalid_parameters_are_refused_before_any_upstream_call(alice, fresh_sim) -> None:  # noqa: ANN001
    user, endpoint, conv = alice
    comm = await connect(user, conv.pk)
    for bad in ({"temperature": "3"}, {"top_p": "1.5"}, {"top_k": "0"}, {"max_tokens": "0"},
                {"stop": "a\nb\nc\nd\ne"}, {"seed": "x"}):
        await comm.send_json_to(send_frame(endpoint.pk, "sim-fast", **bad))
        frame = await comm.receive_from(timeout=5)
        assert "Not sent" in frame and list(bad)[0] in frame
    assert chat_requests(fresh_sim.requests()) == []
    assert await database_sync_to_async(Message.objects.count)() == 0
    await comm.disconnect()


async def test_a_repeated_turn_id_starts_one_turn(alice, fresh_sim) -> None:  # noqa: ANN001
    user, endpoint, conv = alice
    comm = await connect(user, conv.pk)
    frame = send_frame(endpoint.pk, "sim-fast?ttft_ms=5&delay_ms=1&length=5")
    await comm.send_json_to(frame)
    await until_final(comm)
    await comm.send_json_to(frame)
    notice = await comm.receive_from(timeout=5)
    assert "sent already" in notice
    await registry.drain()
    assert len(chat_requests(fresh_sim.requests())) == 1
    assert await database_sync_to_async(Message.objects.filter(role="user").count)() == 1
    await comm.disconnect()


async def test_second_user_cannot_open_another_users_conversation(alice, bob, fresh_sim) -> None:  # noqa: ANN001
    _, _, conv_a = alice
    user_b, _, _ = bob
    comm = WebsocketCommunicator(app_for(user_b), f"/ws/c/{conv_a.pk}/")
    connected, _ = await comm.connect()
    out = await comm.receive_output(timeout=5)
    assert out == {"type": "websocket.close", "code": 4404}
    assert chat_requests(fresh_sim.requests()) == []


async def test_anonymous_socket_is_closed(alice) -> None:  # noqa: ANN001
    from django.contrib.auth.models import AnonymousUser

    comm = WebsocketCommunicator(app_for(AnonymousUser()), f"/ws/c/{alice[2].pk}/")
    await comm.connect()
    assert await comm.receive_output(timeout=5) == {"type": "websocket.close", "code": 4401}


async def test_second_user_cannot_act_on_another_users_ids(alice, bob, fresh_sim) -> None:  # noqa: ANN001
    user_a, endpoint_a, conv_a = alice
    user_b, endpoint_b, conv_b = bob
    # Alice starts a slow turn.
    comm_a = await connect(user_a, conv_a.pk)
    await comm_a.send_json_to(send_frame(endpoint_a.pk, "sim-fast?ttft_ms=10&delay_ms=30&length=60&reasoning=0"))
    frames = [await comm_a.receive_from(timeout=10)]
    mid_a = re.search(r'id="m-([0-9a-f-]+)" class="msg msg-assistant', frames[0]).group(1)
    comm_b = await connect(user_b, conv_b.pk)
    # Bob sends with Alice's endpoint id: refused, nothing reaches the upstream.
    await comm_b.send_json_to(send_frame(endpoint_a.pk, "sim-fast"))
    assert "no such endpoint" in await comm_b.receive_from(timeout=5)
    # Bob tries to stop and to retry Alice's message.
    await comm_b.send_json_to({"action": "stop", "message_id": mid_a})
    assert "no such message" in await comm_b.receive_from(timeout=5)
    for action in ("retry", "regenerate", "continue", "select", "delete"):
        await comm_b.send_json_to({"action": action, "message_id": mid_a})
        assert "no such message" in (await comm_b.receive_from(timeout=5)).lower()
    await comm_b.send_json_to({"action": "edit", "message_id": mid_a, "content": "hijack", "resend": "true"})
    assert "no such message" in (await comm_b.receive_from(timeout=5)).lower()
    rest, fmid, status = await until_final(comm_a)
    assert fmid == mid_a and status == "complete"
    await registry.drain()
    assert len(chat_requests(fresh_sim.requests())) == 1  # Alice's turn only
    assert await database_sync_to_async(Message.objects.filter(conversation=conv_b).count)() == 0
    await comm_a.disconnect()
    await comm_b.disconnect()


async def test_retry_after_error_makes_a_new_answer(alice, fresh_sim) -> None:  # noqa: ANN001
    user, endpoint, conv = alice
    comm = await connect(user, conv.pk)
    await comm.send_json_to(send_frame(endpoint.pk, "sim-fast?fault=500", content="Try again"))
    _, mid, status = await until_final(comm)
    assert status == "error"
    # The conversation's model is what retry uses: switch it to a healthy one.
    await database_sync_to_async(type(conv).objects.filter(pk=conv.pk).update)(model="sim-fast?ttft_ms=5&delay_ms=1&length=8")
    await comm.send_json_to({"action": "retry", "message_id": mid})
    frames, new_mid, status = await until_final(comm)
    await registry.drain()
    assert status == "complete" and new_mid != mid
    assert f'hx-swap-oob="outerHTML:#m-{mid}"' in frames[0]
    last = chat_requests(fresh_sim.requests())[-1]
    assert [m["content"] for m in last["body"]["messages"]] == ["Try again"]
    await comm.disconnect()


async def test_foreign_origin_is_refused() -> None:
    from playground.asgi import application

    comm = WebsocketCommunicator(application, "/ws/c/1/", headers=[(b"origin", b"http://evil.example"), (b"host", b"127.0.0.1")])
    connected, _ = await comm.connect()
    assert not connected
    # The Host header carries the port the browser used (a port mismatch is refused: issue 8).
    ok = WebsocketCommunicator(application, "/ws/c/1/", headers=[(b"origin", b"http://127.0.0.1:8000"), (b"host", b"127.0.0.1:8000")])
    connected, _ = await ok.connect()
    assert connected  # accepted, then closed 4401 (anonymous)
    assert (await ok.receive_output(timeout=5))["code"] == 4401
