"""The relay core: a turn always ends, text is always valid and free of secrets, nothing is
written for a refused action, every action takes the settings panel, admission queues turns,
and user-controlled CPU work never freezes the event loop (issues 7 and 8).

Runner tests drive ``TurnRegistry`` with scripted event streams; consumer tests drive the
websocket against a real simulator process (``fresh_sim``).
"""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from channels.db import database_sync_to_async
from django.contrib.auth import get_user_model
from django.test import Client

from chat import services
from chat.models import Conversation, Message
from chat.providers.base import (
    ChatMessage,
    ChatRequest,
    EndpointConfig,
    Finish,
    LogprobsDelta,
    TextDelta,
    TokenLogprob,
    ToolCallDelta,
)
from chat.textsafety import SecretFilter, schema_errors, valid_text
from chat.turns import Admission, Subscriber, TurnRegistry, TurnSpec, registry
from tests.helpers import FINAL_RE, chat_requests, joined
from tests.test_consumers import KEY, connect, send_frame, until_final

pytestmark = [pytest.mark.django_db(transaction=True)]


# ---- helpers ---------------------------------------------------------------------------------


@pytest.fixture
def row():  # noqa: ANN201
    user = get_user_model().objects.create_user("u1", password="pw-123456")
    endpoint = services.endpoint_create(user=user, name="e", base_url="http://127.0.0.1:9/v1")
    conv = services.conversation_create(user=user, endpoint=endpoint)
    started = services.turn_start(
        conversation=conv, turn_id=uuid.uuid4(), content="hi", parent_id=None, endpoint=endpoint,
        model="m", system_prompt="", params={},
    )
    return conv, started.assistant_message_ids[0]


def spec(conv, mid, **kw) -> TurnSpec:  # noqa: ANN001
    config = kw.pop("config", EndpointConfig(base_url="http://127.0.0.1:9/v1"))
    return TurnSpec(
        message_id=mid, conversation_id=conv.pk, user_id=conv.owner_id, config=config,
        request=kw.pop("request", ChatRequest(model="m", messages=(ChatMessage("user", "hi"),))), **kw,
    )


def events(*evs, fail: Exception | None = None):  # noqa: ANN002, ANN201
    def stream_fn(config, request):  # noqa: ANN001, ANN202
        async def gen():  # noqa: ANN202
            for ev in evs:
                await asyncio.sleep(0)
                yield ev
            if fail is not None:
                raise fail

        return gen()

    return stream_fn


async def run(conv, mid, stream_fn, subs=(), **kw) -> Message:  # noqa: ANN001
    reg = TurnRegistry()
    for s in subs:
        reg.watch(conv.pk, s)
    reg.start(spec(conv, mid, **kw), stream_fn=stream_fn)
    await reg.drain()
    assert reg.turns == {} and reg.admission.running == 0, "the turn ended and freed its slot"
    return await database_sync_to_async(Message.objects.get)(pk=mid)


# ---- 7.1: valid text, and a turn that always ends ---------------------------------------------


def test_valid_text_joins_pairs_and_replaces_lone_halves() -> None:
    assert valid_text("Smile \ud83d\ude00 done") == "Smile 😀 done"
    assert valid_text("lone \ud83d end") == "lone \ufffd end"
    assert valid_text("low \ude00 first") == "low \ufffd first"
    assert valid_text("plain ascii") == "plain ascii"


async def test_a_surrogate_pair_split_across_events_is_one_character(row) -> None:  # noqa: ANN001
    """Issue 7 item 1: "Smile \\ud83d" then "\\ude00 done" is "Smile 😀 done", complete."""
    conv, mid = row
    got = await run(conv, mid, events(TextDelta("Smile \ud83d"), TextDelta("\ude00 done"), Finish("stop")))
    assert got.content == "Smile 😀 done" and got.status == "complete"


async def test_a_lone_half_at_the_end_becomes_one_replacement_character(row) -> None:  # noqa: ANN001
    conv, mid = row
    got = await run(conv, mid, events(TextDelta("cut \ud83d"), Finish("stop")))
    assert got.content == "cut \ufffd" and got.status == "complete"


async def test_a_failed_final_write_ends_in_error_with_a_final_frame(row, monkeypatch) -> None:  # noqa: ANN001
    """Whatever the final write raises, the row gets a terminal status with a message, the
    page gets a final frame, the turn is forgotten and its slot freed."""
    conv, mid = row

    def broken(**kwargs):  # noqa: ANN003, ANN202
        raise UnicodeEncodeError("utf-8", "x", 0, 1, "surrogates not allowed")

    monkeypatch.setattr(services, "message_complete", broken)
    pushed: list[str] = []
    got = await run(conv, mid, events(TextDelta("partial answer"), Finish("stop")),
                    subs=[Subscriber(pushed.append, conv.owner_id)])
    assert got.status == "error" and got.error["code"] == "save_failed"
    assert "could not be saved" in got.error["message"] and got.content == "partial answer"
    finals = [FINAL_RE.search(f) for f in pushed if FINAL_RE.search(f)]
    assert finals and finals[-1]["status"] == "error"


async def test_a_final_write_that_meets_a_locked_database_is_tried_again(row, monkeypatch) -> None:  # noqa: ANN001
    """SQLite's "database table is locked" comes at once on a loaded machine (no busy wait):
    the final write (one guarded UPDATE) is tried again and the turn completes; a lock that
    does not go away still ends in a stored error."""
    from django.db import OperationalError

    from chat import turns

    conv, mid = row
    real, calls = services.message_complete, []

    def locked_twice(**kwargs):  # noqa: ANN003, ANN202
        calls.append(1)
        if len(calls) <= 2:
            raise OperationalError("database table is locked")
        return real(**kwargs)

    monkeypatch.setattr(turns, "LOCKED_RETRY_S", (0.01, 0.01, 0.01))
    monkeypatch.setattr(services, "message_complete", locked_twice)
    got = await run(conv, mid, events(TextDelta("kept answer"), Finish("stop")))
    assert got.status == "complete" and got.content == "kept answer" and len(calls) == 3


@pytest.mark.parametrize("case", ["nested_json_prefill", "deep_tool_arguments", "huge_logprob"])
async def test_finishing_never_fails_on_hostile_output(row, case) -> None:  # noqa: ANN001
    """Issue 8 item 8: a prefill of 5,000 ``[`` with ``json_object``, deeply nested tool
    arguments, an absurd log probability: the turn ends with a stored status, a final frame,
    and the conversation page still renders."""
    conv, mid = row
    request = ChatRequest(model="m", messages=(ChatMessage("user", "hi"),))
    evs: list = [Finish("stop")]
    if case == "nested_json_prefill":
        request = ChatRequest(model="m", messages=(ChatMessage("user", "hi"),), response_format={"type": "json_object"})
        evs = [TextDelta("[" * 5000), Finish("stop")]
    elif case == "deep_tool_arguments":
        evs = [ToolCallDelta(0, "call_1", "f", '{"a":' * 3000 + "1" + "}" * 3000), Finish("tool_calls")]
    else:
        evs = [TextDelta("x"), LogprobsDelta((TokenLogprob("x", 1e308, (("y", float("inf")),)),)), Finish("stop")]
    pushed: list[str] = []
    got = await run(conv, mid, events(*evs), subs=[Subscriber(pushed.append, conv.owner_id)], request=request)
    assert got.status == "complete"
    assert any(FINAL_RE.search(f) for f in pushed)
    if case == "nested_json_prefill":
        assert got.metrics["schema_check"]["valid"] is False
        assert "nested too deeply" in got.metrics["schema_check"]["errors"][0]
    @database_sync_to_async
    def page_status() -> int:
        client = Client()
        client.force_login(type(conv).objects.get(pk=conv.pk).owner)
        return client.get(f"/c/{conv.pk}/").status_code

    assert await page_status() == 200


# ---- 8.6: secrets never reach the answer -------------------------------------------------------


def test_secret_filter_catches_a_key_split_across_deltas() -> None:
    f = SecretFilter(["sk-SECRET-123456"])
    out = "".join(f.feed(p) for p in ["your key is sk-SE", "CRET-12", "3456 ok", " and sk-"]) + f.flush()
    assert out == "your key is [REDACTED] ok and sk-"
    assert SecretFilter([]).feed("sk-SECRET") == "sk-SECRET"


async def test_an_upstream_echoing_the_key_in_its_answer_is_scrubbed_everywhere(row) -> None:  # noqa: ANN001
    conv, mid = row
    config = EndpointConfig(base_url="http://127.0.0.1:9/v1", api_key=KEY, extra_headers={"X-Team": "team-secret-77"})
    pushed: list[str] = []
    pieces = ["The key ", KEY[:7], KEY[7:15], KEY[15:], " and team-sec", "ret-77!"]
    got = await run(conv, mid, events(*(TextDelta(p) for p in pieces), Finish("stop")),
                    subs=[Subscriber(pushed.append, conv.owner_id)], config=config)
    assert got.content == "The key [REDACTED] and [REDACTED]!"
    assert joined(pushed) == got.content
    assert not any(KEY in f or "team-secret-77" in f for f in pushed)


# ---- 8.7: schema checks cannot freeze the server -----------------------------------------------


def test_a_catastrophic_pattern_is_checked_in_linear_time() -> None:
    schema = {"type": "object", "properties": {"s": {"type": "string", "pattern": "^(a+)+$"}}}
    t0 = time.perf_counter()
    errors = schema_errors(schema, {"s": "a" * 25 + "!"})
    assert time.perf_counter() - t0 < 1.0  # Python's re needs ~7 s for this (a loose bound)
    assert errors and "does not match" in errors[0]
    assert schema_errors(schema, {"s": "aaa"}) == []
    # patternProperties / additionalProperties go through RE2 too.
    pp = {"type": "object", "patternProperties": {"^(a+)+$": {"type": "integer"}}, "additionalProperties": False}
    assert schema_errors(pp, {"aaa": 1}) == []
    assert any("Additional properties" in e for e in schema_errors(pp, {"a" * 25 + "!": 1}))
    # A pattern RE2 cannot run is reported, never run on a backtracking engine.
    assert "not supported" in schema_errors({"type": "string", "pattern": "(a)\\1"}, "aa")[0]


async def test_other_streams_keep_their_pace_during_a_hostile_schema_check(row) -> None:  # noqa: ANN001
    """While one turn's answer is checked against ``^(a+)+$`` the event loop keeps serving: a
    10 ms ticker never waits more than a second (a backtracking check blocked it for ~7 s)."""
    conv, mid = row
    schema = {"type": "object", "properties": {"s": {"type": "string", "pattern": "^(a+)+$"}}}
    request = ChatRequest(model="m", messages=(ChatMessage("user", "hi"),),
                          response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": schema}})
    gaps: list[float] = []
    stop = asyncio.Event()

    async def ticker() -> None:
        last = time.perf_counter()
        while not stop.is_set():
            await asyncio.sleep(0.01)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    task = asyncio.ensure_future(ticker())
    got = await run(conv, mid, events(TextDelta('{"s": "' + "a" * 30 + '!"}'), Finish("stop")), request=request)
    stop.set()
    await task
    assert got.metrics["schema_check"]["valid"] is False
    assert max(gaps) < 1.0


# ---- 8.11: admission ---------------------------------------------------------------------------


async def test_admission_queues_per_user_and_lets_other_users_pass() -> None:
    adm = Admission(max_running=3, max_per_user=1, max_queue=10)

    class T:  # the part of LiveTurn admission uses
        def __init__(self, user_id: int) -> None:
            self.spec = type("S", (), {"user_id": user_id})()
            self.queue_position = 0

    positions: list[tuple[int, int]] = []
    a1, a2, b1 = T(1), T(1), T(2)
    await adm.acquire(a1, lambda t: positions.append((id(t), t.queue_position)))
    waiter = asyncio.ensure_future(adm.acquire(a2, lambda t: positions.append((id(t), t.queue_position))))
    await asyncio.sleep(0)
    assert not waiter.done() and a2.queue_position == 1
    await asyncio.wait_for(adm.acquire(b1, lambda t: None), 1)  # another user is not blocked
    adm.release(1)
    await asyncio.wait_for(waiter, 1)
    assert adm.by_user == {1: 1, 2: 1} and adm.running == 2
    assert (id(a2), 1) in positions
    full = Admission(max_running=1, max_per_user=1, max_queue=0)
    await full.acquire(T(3), lambda t: None)
    assert not full.can_queue(4)


# ---- consumers: refusals write nothing, settings come from the panel --------------------------


@pytest.fixture
def alice(fresh_sim):  # noqa: ANN001, ANN201
    user = get_user_model().objects.create_user("alice", password="pw-alice-123")
    endpoint = services.endpoint_create(user=user, name="sim", base_url=fresh_sim.base_url, api_key=KEY)
    conversation = services.conversation_create(user=user, endpoint=endpoint)
    return user, endpoint, conversation


def counts() -> tuple[int, int]:
    return Message.objects.count(), Conversation.objects.filter(title="").count()


SLOW = "sim-fast?ttft_ms=10&delay_ms=30&length=200&reasoning=0"
FAST = "sim-fast?ttft_ms=5&delay_ms=1&length=8&reasoning=0"


async def test_every_action_is_refused_while_the_lane_streams_and_writes_nothing(alice, fresh_sim) -> None:  # noqa: ANN001
    """Issue 7 item 12 and issue 8 item 15: one running turn per conversation (lane) for every
    action; a refused action writes no row and calls no upstream."""
    user, endpoint, conv = alice
    comm = await connect(user, conv.pk)
    await comm.send_json_to(send_frame(endpoint.pk, FAST, content="first"))
    _, done_mid, _ = await until_final(comm)
    await registry.drain()
    await comm.send_json_to(send_frame(endpoint.pk, SLOW, content="second"))
    while True:
        if "<x-d " in await comm.receive_from(timeout=10):
            break
    first_user = await database_sync_to_async(lambda: Message.objects.filter(role="user").order_by("created_at").first().pk)()
    before = await database_sync_to_async(counts)()
    n_requests = len(chat_requests(fresh_sim.requests()))
    panel = {"endpoint_id": str(endpoint.pk), "model": FAST, "system_prompt": ""}
    for frame in (
        send_frame(endpoint.pk, FAST, content="third"),
        {"action": "regenerate", "message_id": done_mid, **panel},
        {"action": "continue", "message_id": done_mid, **panel},
        {"action": "edit", "message_id": str(first_user), "content": "edited", "resend": "true",
         "turn_id": str(uuid.uuid4()), **panel},
    ):
        await comm.send_json_to(frame)
        notice = await comm.receive_from(timeout=5)
        while 'id="notice"' not in notice:
            notice = await comm.receive_from(timeout=5)
        assert "Wait for the current answer" in notice, notice
    assert await database_sync_to_async(counts)() == before
    assert len(chat_requests(fresh_sim.requests())) == n_requests
    await until_final(comm)
    await registry.drain()
    await comm.disconnect()


async def test_regenerate_retry_and_continue_use_the_settings_panel(alice, fresh_sim) -> None:  # noqa: ANN001
    """Issue 7 item 7: the panel's values (not those of the last Send) go upstream for every
    action that starts a turn."""
    user, endpoint, conv = alice
    comm = await connect(user, conv.pk)
    await comm.send_json_to(send_frame(endpoint.pk, FAST, content="Tell me", temperature="0.1"))
    _, mid, _ = await until_final(comm)
    await registry.drain()
    for action, temperature, system in (("regenerate", "0.7", "Be brief"), ("continue", "1.3", "Go on")):
        await comm.send_json_to({"action": action, "message_id": mid, "endpoint_id": str(endpoint.pk),
                                 "model": FAST, "system_prompt": system, "temperature": temperature, "max_tokens": "9"})
        _, mid, status = await until_final(comm)
        await registry.drain()
        body = chat_requests(fresh_sim.requests())[-1]["body"]
        assert status == "complete"
        assert body["temperature"] == float(temperature) and body["max_tokens"] == 9
        assert body["messages"][0] == {"role": "system", "content": system}
    stored = await database_sync_to_async(lambda: Conversation.objects.get(pk=conv.pk).params)()
    assert stored["temperature"] == 1.3  # the conversation remembers the last panel
    await comm.disconnect()


async def test_a_slow_count_tokens_never_delays_stop(alice, fresh_sim, monkeypatch) -> None:  # noqa: ANN001
    """Issue 8 item 13: Stop is handled while a count_tokens call is still waiting upstream."""
    from chat.providers import anthropic_messages

    user, endpoint, conv = alice
    await database_sync_to_async(type(endpoint).objects.filter(pk=endpoint.pk).update)(api_style="anthropic_messages")
    gate = asyncio.Event()

    async def slow_count(client, config, request):  # noqa: ANN001, ANN202
        await gate.wait()
        return 42

    monkeypatch.setattr(anthropic_messages, "count_tokens", slow_count)
    comm = await connect(user, conv.pk)
    await comm.send_json_to(send_frame(endpoint.pk, SLOW, content="long one"))
    frames = []
    while not any("<x-d " in f for f in frames):
        frames.append(await comm.receive_from(timeout=10))
    mid = await database_sync_to_async(lambda: str(Message.objects.get(role="assistant", status="streaming").pk))()
    await comm.send_json_to({"action": "count_tokens", "content": "draft", "endpoint_id": str(endpoint.pk), "model": SLOW})
    await comm.send_json_to({"action": "stop", "message_id": mid})
    _, fmid, status = await until_final(comm)
    assert fmid == mid and status == "stopped"
    gate.set()
    notice = ""
    while "Input tokens" not in notice:
        notice = await comm.receive_from(timeout=5)
    assert "42" in notice
    await registry.drain()
    await comm.disconnect()


async def test_count_tokens_counts_the_draft_in_the_composer(alice, fresh_sim) -> None:  # noqa: ANN001
    """Issue 7 item 13: the draft goes into the counted request."""
    user, endpoint, conv = alice
    await database_sync_to_async(type(endpoint).objects.filter(pk=endpoint.pk).update)(api_style="anthropic_messages")
    comm = await connect(user, conv.pk)
    await comm.send_json_to({"action": "count_tokens", "content": "A draft nobody sent yet",
                             "endpoint_id": str(endpoint.pk), "model": "sim-fast"})
    frame = await comm.receive_from(timeout=10)
    assert "Input tokens (count_tokens):" in frame
    rec = [r for r in fresh_sim.requests() if r["path"].endswith("/count_tokens")][-1]
    assert rec["body"]["messages"][-1]["content"] in ("A draft nobody sent yet",
                                                       [{"type": "text", "text": "A draft nobody sent yet"}])
    await comm.disconnect()


async def test_fork_takes_the_message_uuid(alice, fresh_sim) -> None:  # noqa: ANN001
    """Issue 7 item 6: Fork posts a real message id (a UUID) and opens the copy; another
    user's id gives 404 and copies nothing."""
    user, endpoint, conv = alice
    comm = await connect(user, conv.pk)
    await comm.send_json_to(send_frame(endpoint.pk, FAST, content="fork me"))
    _, mid, _ = await until_final(comm)
    await registry.drain()
    await comm.disconnect()
    client = Client()
    await database_sync_to_async(client.force_login)(user)
    response = await database_sync_to_async(client.post)(f"/c/{conv.pk}/fork/", {"upto": mid}, HTTP_HX_REQUEST="true")
    assert response.status_code == 204 and "/c/" in response["HX-Redirect"]
    fork_id = int(response["HX-Redirect"].rstrip("/").rsplit("/", 1)[1])
    copied = await database_sync_to_async(lambda: list(Message.objects.filter(conversation_id=fork_id).values_list("role", "content")))()
    assert copied[0] == ("user", "fork me") and copied[1][0] == "assistant" and len(copied) == 2
    other = await database_sync_to_async(get_user_model().objects.create_user)("mallory", password="pw-mal-123")
    services_conv = await database_sync_to_async(services.conversation_create)(user=other)
    mclient = Client()
    await database_sync_to_async(mclient.force_login)(other)
    bad = await database_sync_to_async(mclient.post)(f"/c/{services_conv.pk}/fork/", {"upto": mid})
    assert bad.status_code == 404


# ---- 7.4, 7.5, 7.14, 7.19: honest figures and no dead ends --------------------------------------


def test_tokens_per_second_needs_usage_not_events() -> None:
    """Issue 7 item 5: 40 events over 2 s without usage are not "20 tok/s" (an event may hold
    several tokens): the figure is "—"; with usage it is tokens ÷ time."""
    from chat.metrics import TurnClock, compute_metrics
    from chat.providers.base import Usage

    t = [100.0]
    tc = TurnClock(clock=lambda: t[0])
    tc.sent()
    for i in range(40):
        t[0] = 100.5 + i * 0.05
        tc.token(answer=True)
    no_usage = compute_metrics(tc, None)
    assert no_usage["tokens_per_sec"] is None and no_usage["completion_tokens_source"] == "unknown"
    assert no_usage["token_events"] == 40
    with_usage = compute_metrics(tc, Usage(completion_tokens=117))
    assert with_usage["tokens_per_sec"] == round(117 / 1.95, 1)


def test_retry_after_is_whole_seconds_in_the_hint_and_the_button() -> None:
    """Issue 7 item 14: "wait 30 s" (rounded up, as the countdown), never "wait 29.0266 s"."""
    from chat import frames

    error = {"status": 429, "code": "rate_limit_exceeded", "message": "slow down", "retry_after_s": 29.0266}
    assert frames.error_hint(error) == "Rate limited: wait 30 s, then retry."
    view = frames.MessageView(id=uuid.uuid4(), role="assistant", status="error", error=error, conversation_id=1)
    html = frames.final_full(view)
    assert "in 30 s" in html and "29.0266" not in html.split("data-retry-after")[1][20:]


def test_the_retry_after_countdown_counts_what_is_left_after_a_reload() -> None:
    """A page drawn later (reload, another tab, the compare page) counts down what is left of
    Retry-After since the error, not the whole wait again; once passed, Retry is enabled."""
    import time

    from chat import frames
    from chat.providers.base import ProviderError

    stored = ProviderError("slow down", status=429, code="rate_limit_exceeded", retry_after_s=10).as_dict()
    assert abs(stored["retry_at"] - (time.time() + 10)) < 2
    later = dict(stored, retry_at=time.time() + 4.2)  # drawn about 6 s after the error
    html = frames.final_full(frames.MessageView(id=uuid.uuid4(), role="assistant", status="error", error=later,
                                                conversation_id=1))
    assert "in 5 s" in html and "in 10 s" not in html
    passed = dict(stored, retry_at=time.time() - 600)  # an old rate limit
    html = frames.final_full(frames.MessageView(id=uuid.uuid4(), role="assistant", status="error", error=passed,
                                                conversation_id=1))
    button = html.split('class="retry"')[1].split("</button>")[0]
    assert "disabled" not in button and "data-retry-after" not in button and "countdown" not in button


@pytest.mark.parametrize("finish,reasoning,expected", [
    ("stop", "", "The model returned no text (finish reason: stop)."),
    ("length", "I need to think about every case in turn...",
     "The model used the whole token budget on reasoning before it wrote an answer: raise max tokens, or Continue."),
    ("length", "", "The answer hit max tokens before any text: raise max tokens, or Continue."),
    ("content_filter", "", "The model returned no text (finish reason: content_filter)."),
])
def test_an_empty_answer_says_why_and_offers_what_it_names(finish, reasoning, expected) -> None:  # noqa: ANN001
    """Issue 7 items 4 and 19: no blank bubble; a hint that names Continue has Continue."""
    from chat import frames

    view = frames.MessageView(id=uuid.uuid4(), role="assistant", status="complete", finish_reason=finish,
                              reasoning=reasoning, conversation_id=1)
    html = frames.final_full(view)
    assert expected in html.replace("&#x27;", "'")
    assert ('class="continue"' in html) == ("Continue" in expected)


def test_every_hint_that_names_continue_comes_with_continue() -> None:
    """Issue 7 item 4, the kind: a cut stream's hint says "Continue from it": the button is there."""
    from chat import frames

    for code in ("stream_cut", "stream_error"):
        view = frames.MessageView(id=uuid.uuid4(), role="assistant", status="error", content="half an ans",
                                  error={"code": code, "message": "cut"}, conversation_id=1)
        html = frames.final_full(view)
        assert "Continue" in frames.error_hint(view.error) and 'class="continue"' in html


# ---- the adapters' new events, as the runner applies them (issue 7 items 2, 3, 16) -------------


async def test_a_closing_think_tag_moves_the_answer_so_far_to_reasoning(row) -> None:  # noqa: ANN001
    """Issue 7 item 2: deltas "Plan: add 2+2", "</think>", "4" give reasoning "Plan: add 2+2"
    and content "4"; watchers get the whole message again (the answer shrank)."""
    from chat.providers.base import AnswerWasReasoning

    conv, mid = row
    pushed: list[str] = []
    got = await run(conv, mid, events(TextDelta("Plan: add 2+2"), AnswerWasReasoning(), TextDelta("4"), Finish("stop")),
                    subs=[Subscriber(pushed.append, conv.owner_id)])
    assert got.reasoning == "Plan: add 2+2" and got.content == "4"
    assert any('id="m-' in f and 'hx-swap-oob="true"' in f for f in pushed), "a snapshot followed the move"


async def test_a_prefill_stays_the_answer_when_the_rest_was_reasoning(row) -> None:  # noqa: ANN001
    """Variant: Continue/prefill text is the user's answer, never moved to reasoning."""
    from chat.providers.base import AnswerWasReasoning

    conv, mid = row
    got = await run(conv, mid, events(TextDelta("let me see"), AnswerWasReasoning(), TextDelta(" 42"), Finish("stop")),
                    prefill="The answer is")
    assert got.content == "The answer is 42" and got.reasoning == "let me see"


async def test_the_final_text_wins_and_an_unreadable_event_is_never_silent(row) -> None:  # noqa: ANN001
    """Issue 7 item 16: a chunk cut in half is a warning on the answer, and where the
    protocol repeats the whole text at the end, that text wins when it differs."""
    from chat.providers.base import FinalText, StreamWarning

    conv, mid = row
    pushed: list[str] = []
    got = await run(conv, mid, events(
        TextDelta("Hello "), StreamWarning("An event could not be read and was skipped.", '{"choices":[{"del', "unparsable_event"),
        TextDelta("!"), FinalText("Hello world!"), Finish("stop"),
    ), subs=[Subscriber(pushed.append, conv.owner_id)])
    assert got.content == "Hello world!"
    codes = [w["code"] for w in got.metrics["warnings"]]
    assert codes == ["unparsable_event", "final_text_differs"]
    final = [f for f in pushed if FINAL_RE.search(f)][-1]
    assert "Part of the answer may be missing" in final


async def test_server_side_tools_are_shown_as_done_never_asked_of_the_user(row) -> None:  # noqa: ANN001
    """Issue 7 item 3b: a server tool is "the server ran web_search", with no result form,
    and never sent back as a client tool call."""
    from chat.history import history
    from chat.providers.base import ServerToolUse

    conv, mid = row
    pushed: list[str] = []
    got = await run(conv, mid, events(
        ServerToolUse("server_tool_use", "web_search", "srvtoolu_1", '{"query": "weather"}'),
        ServerToolUse("web_search_tool_result", "web_search", "srvtoolu_1", "", "3 results: Weather — https://w.example"),
        TextDelta("Sunny."), Finish("stop"),
    ), subs=[Subscriber(pushed.append, conv.owner_id)])
    assert [c["server"] for c in got.tool_calls] == [True, True]
    final = [f for f in pushed if FINAL_RE.search(f)][-1]
    assert "The server ran" in final and "tool-result-form" not in final
    sent = await database_sync_to_async(lambda: history([Message.objects.get(pk=mid)]))()
    assert sent[0].tool_calls == ()


async def test_redacted_thinking_is_kept_byte_identical_for_the_next_request(row) -> None:  # noqa: ANN001
    """Issue 7 item 3c: kept, shown as "Thinking (redacted)", sent back unchanged."""
    from chat.history import history
    from chat.providers.base import ReasoningDelta, ReasoningSignature, RedactedThinking

    conv, mid = row
    blob = "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"
    pushed: list[str] = []
    got = await run(conv, mid, events(ReasoningDelta("thinking"), ReasoningSignature("sig"), RedactedThinking(blob),
                                      ToolCallDelta(0, "toolu_1", "lookup", '{"q": 1}'), Finish("tool_calls")),
                    subs=[Subscriber(pushed.append, conv.owner_id)])
    assert got.replay_blocks == [{"type": "redacted_thinking", "data": blob}]
    assert "Thinking (redacted)" in [f for f in pushed if FINAL_RE.search(f)][-1]
    sent = await database_sync_to_async(lambda: history([Message.objects.get(pk=mid)]))()
    assert sent[0].redacted_thinking == (blob,) and sent[0].reasoning_signature == "sig"


async def test_tool_arguments_cut_off_are_flagged_and_offer_no_result_form(row) -> None:  # noqa: ANN001
    """Issue 7 item 3d: arguments cut by max_tokens are flagged on the card."""
    conv, mid = row
    pushed: list[str] = []
    got = await run(conv, mid, events(ToolCallDelta(0, "call_1", "lookup", '{"city": "Par'), Finish("length")),
                    subs=[Subscriber(pushed.append, conv.owner_id)])
    assert got.tool_calls[0]["incomplete"] is True
    final = [f for f in pushed if FINAL_RE.search(f)][-1]
    assert "Arguments incomplete" in final and "tool-result-form" not in final
