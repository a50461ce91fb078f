"""The turn runner on scripted event streams: exact metrics with a fake clock, subscribers
joining mid-turn, persistence rules."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from channels.db import database_sync_to_async
from django.contrib.auth import get_user_model

from chat import services
from chat.models import Message
from chat.providers.base import (
    ChatMessage,
    ChatRequest,
    EndpointConfig,
    Finish,
    ProviderError,
    ReasoningDelta,
    ResponseStarted,
    TextDelta,
    Usage,
)
from chat.turns import Subscriber, TurnRegistry, TurnSpec
from tests.helpers import deltas, joined, snapshot_state

pytestmark = [pytest.mark.django_db(transaction=True)]


class FakeClock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def turn_row():  # noqa: ANN201
    user = get_user_model().objects.create_user("u1", password="pw-123456")
    endpoint = services.endpoint_create(user=user, name="e", base_url="http://127.0.0.1:9/v1")
    conv = services.conversation_create(user=user, endpoint=endpoint)
    started = services.turn_start(
        conversation=conv, turn_id=uuid.uuid4(), content="hi", parent_id=None, endpoint=endpoint,
        model="m", system_prompt="", params={},
    )
    return conv, started.assistant_message_ids[0]


def spec_for(conv, mid) -> TurnSpec:  # noqa: ANN001
    return TurnSpec(
        message_id=mid, conversation_id=conv.pk, user_id=conv.owner_id,
        config=EndpointConfig(base_url="http://127.0.0.1:9/v1"),
        request=ChatRequest(model="m", messages=(ChatMessage("user", "hi"),)),
        prompt_price_per_mtok=1.0, completion_price_per_mtok=2.0,
    )


def scripted(clock: FakeClock, script: list[tuple[float, object]], *, fail: Exception | None = None):  # noqa: ANN201
    def stream_fn(config, request):  # noqa: ANN001, ANN202
        async def gen():  # noqa: ANN202
            start = clock.t
            for dt, ev in script:
                clock.t = start + dt
                await asyncio.sleep(0)
                yield ev
            if fail is not None:
                raise fail

        return gen()

    return stream_fn


async def run_turn(conv, mid, stream_fn, clock, subs=()) -> Message:  # noqa: ANN001
    reg = TurnRegistry()
    for s in subs:
        reg.watch(conv.pk, s)
    reg.start(spec_for(conv, mid), stream_fn=stream_fn, clock=clock)
    await reg.drain()
    return await database_sync_to_async(Message.objects.get)(pk=mid)


async def test_runner_metrics_exact_with_fake_clock(turn_row) -> None:  # noqa: ANN001
    conv, mid = turn_row
    clock = FakeClock()
    script = [
        (0.120, ResponseStarted(200, "req-1")),
        (0.400, ReasoningDelta("thinking ")),
        (0.900, TextDelta("Hello")),
        (1.400, TextDelta(", world")),
        (1.900, TextDelta("!")),
        (1.950, Finish("stop")),
        (2.000, Usage(prompt_tokens=10, completion_tokens=30, reasoning_tokens=3, upstream_ttft_ms=350.0)),
    ]
    row = await run_turn(conv, mid, scripted(clock, script), clock)
    assert row.status == "complete" and row.content == "Hello, world!" and row.reasoning == "thinking "
    m = row.metrics
    assert m["ttft_ms"] == 400.0
    assert m["ttfat_ms"] == 900.0
    assert m["total_ms"] == 2000.0
    assert m["tokens_per_sec"] == 20.0  # 30 / (1.9 - 0.4)
    assert m["upstream_ttft_ms"] == 350.0
    assert m["cost_usd"] == pytest.approx((10 * 1.0 + 30 * 2.0) / 1e6)
    assert m["request_id"] == "req-1"
    assert row.usage == {"prompt_tokens": 10, "completion_tokens": 30, "total_tokens": None,
                         "reasoning_tokens": 3, "cached_tokens": None}
    assert row.finish_reason == "stop"


async def test_burst_after_silence_and_no_usage(turn_row) -> None:  # noqa: ANN001
    conv, mid = turn_row
    clock = FakeClock()
    script = [(4.0, TextDelta("a")), (4.01, TextDelta("b")), (4.02, TextDelta("c")), (4.03, Finish("stop"))]
    row = await run_turn(conv, mid, scripted(clock, script), clock)
    assert row.metrics["ttft_ms"] == 4000.0
    assert row.metrics["tokens_per_sec"] is None  # 3 events over 20 ms: not honest
    assert row.metrics["completion_tokens_source"] == "unknown"
    assert row.usage == {}
    assert row.metrics["cost_usd"] is None


async def test_provider_error_mid_stream_keeps_partial_answer(turn_row) -> None:  # noqa: ANN001
    conv, mid = turn_row
    clock = FakeClock()
    err = ProviderError("Upstream overloaded", status=None, code="stream_error", request_id="r-9")
    row = await run_turn(conv, mid, scripted(clock, [(0.1, TextDelta("partial "))], fail=err), clock)
    assert row.status == "error" and row.content == "partial "
    assert row.error["code"] == "stream_error" and row.error["request_id"] == "r-9"


async def test_unexpected_exception_is_stored_without_traceback(turn_row) -> None:  # noqa: ANN001
    conv, mid = turn_row
    clock = FakeClock()
    row = await run_turn(conv, mid, scripted(clock, [(0.1, TextDelta("x"))], fail=KeyError("boom")), clock)
    assert row.status == "error" and row.error["code"] == "internal_error"
    assert "Traceback" not in str(row.error) and "boom" not in str(row.error)


async def test_subscriber_joining_mid_turn_sees_every_character_once(turn_row) -> None:  # noqa: ANN001
    conv, mid = turn_row
    clock = FakeClock()
    gate = asyncio.Event()
    pieces = [f"tok{i} " for i in range(40)]

    def stream_fn(config, request):  # noqa: ANN001, ANN202
        async def gen():  # noqa: ANN202
            for i, p in enumerate(pieces):
                if i == 20:
                    await gate.wait()
                await asyncio.sleep(0.001)
                yield TextDelta(p)
            yield Finish("stop")

        return gen()

    reg = TurnRegistry()
    early: list[str] = []
    reg.watch(conv.pk, Subscriber(early.append, conv.owner_id))
    reg.start(spec_for(conv, mid), stream_fn=stream_fn, clock=clock)
    for _ in range(200):
        await asyncio.sleep(0.01)
        if reg.turns[mid].text.count("tok") >= 20:
            break
    late: list[str] = []
    snapshot = reg.watch(conv.pk, Subscriber(late.append, conv.owner_id))
    gate.set()
    await reg.drain()
    assert joined(early) == "".join(pieces)
    # The late subscriber: snapshot text + its deltas == the whole text, nothing doubled.
    assert len(snapshot) == 1
    snap = snapshot_state(snapshot[0])
    start = snap["end"]
    assert 0 < start < len("".join(pieces))
    assert snap["upto"] == 0 and snap["open"] == "".join(pieces)[:start]  # one open paragraph
    late_deltas = [d for d in deltas(late) if d["kind"] == "text"]
    assert late_deltas[0]["start"] == start
    assert snap["open"] + "".join(d["text"] for d in late_deltas) == "".join(pieces)


async def test_late_partial_save_never_overwrites_the_final_row(turn_row) -> None:  # noqa: ANN001
    conv, mid = turn_row
    done = await database_sync_to_async(services.message_complete)(
        message_id=mid, status="complete", content="final text", reasoning="", finish_reason="stop",
        usage={}, usage_raw={}, metrics={}, error={}, inspect={},
    )
    assert done
    late = await database_sync_to_async(services.message_save_partial)(
        message_id=mid, content="final text and more", reasoning=""
    )
    assert late is False
    row = await database_sync_to_async(Message.objects.get)(pk=mid)
    assert row.content == "final text" and row.status == "complete"
    # Forward only: a shorter partial never replaces a longer one.
    other = await database_sync_to_async(Message.objects.filter(pk=mid).update)(status="streaming", content="abcdef")
    assert other == 1
    assert await database_sync_to_async(services.message_save_partial)(message_id=mid, content="abc", reasoning="") is False


async def test_stop_twice_still_writes_the_final_row_and_unregisters(turn_row) -> None:  # noqa: ANN001
    conv, mid = turn_row
    clock = FakeClock()

    def stream_fn(config, request):  # noqa: ANN001, ANN202
        async def gen():  # noqa: ANN202
            for i in range(1000):
                await asyncio.sleep(0.005)
                yield TextDelta(f"t{i} ")

        return gen()

    reg = TurnRegistry()
    reg.start(spec_for(conv, mid), stream_fn=stream_fn, clock=clock)
    await asyncio.sleep(0.1)
    assert reg.stop(mid) is True
    await asyncio.sleep(0)
    assert reg.stop(mid) is True  # a double click on Stop
    await reg.drain()
    assert reg.turns == {}
    row = await database_sync_to_async(Message.objects.get)(pk=mid)
    assert row.status == "stopped" and row.content.startswith("t0 ")
