"""A Regenerate or Retry on the built-in simulator gives another answer (issue 10).

The simulator's ``take`` knob (``X-Simulator-Options: take=N``) picks another answer to the same
message, the same for the same message, seed and take; the turn plan of a regenerate sends it
once the user got an answer to that message (take = answers got + 1), unless the user fixed the
answer with a seed. First answers, and the Retry of an answer that failed, are unchanged."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from chat import selectors, services
from chat.models import Conversation, Endpoint, Message
from chat.selectors import EndpointTarget, simulator_take
from chat.simulator import create_app
from chat.simulator.knobs import KnobError, parse_knobs
from chat.simulator.text import answer_text, reasoning_text
from tests.test_simulator import API, call, chat, chunks, content_of

PROMPT = "What is the capital of France?"


# ---- the simulator ---------------------------------------------------------------------------


def test_take_one_is_the_first_answer_and_later_takes_differ_from_it_and_each_other() -> None:
    first = answer_text(PROMPT, length_tokens=64)
    assert answer_text(PROMPT, length_tokens=64, take=1) == first
    takes = {t: "".join(answer_text(PROMPT, length_tokens=64, take=t)) for t in (2, 3, 4)}
    texts = ["".join(first), *takes.values()]
    assert len(set(texts)) == len(texts)
    for t, text in takes.items():
        assert text.startswith("## ") and f"(take {t})\n\nYou said: “What is the capital of France?”" in text
        assert "<script>alert(1)</script>" in text and "```python\n" in text  # the hard cases stay
        assert text == "".join(answer_text(PROMPT, length_tokens=64, take=t))  # deterministic
    assert "".join(answer_text("Another question", length_tokens=64, take=2)) != takes[2]
    assert reasoning_text(PROMPT, length_tokens=60, take=1) == reasoning_text(PROMPT, length_tokens=60)
    assert reasoning_text(PROMPT, length_tokens=60, take=2) != reasoning_text(PROMPT, length_tokens=60)
    with pytest.raises(ValueError):
        answer_text(PROMPT, length_tokens=5, take=0)


def test_the_take_knob_parses_and_is_bounded() -> None:
    assert parse_knobs("sim-fast").take == 1
    assert parse_knobs("sim-fast?take=3").take == 3
    assert parse_knobs("sim-fast?take=3", "take=5").take == 5
    for bad in ("take=0", "take=x", "take=1000001"):
        with pytest.raises(KnobError):
            parse_knobs("sim-fast", bad)


async def test_the_options_header_take_changes_the_streamed_answer() -> None:
    app = create_app("/v1")
    body = chat("sim-fast?ttft_ms=0&delay_ms=0", content=PROMPT)
    plain = content_of(chunks((await call(app, "POST", API, body)).body))
    again = content_of(chunks((await call(app, "POST", API, body)).body))
    take2 = content_of(chunks((await call(app, "POST", API, body, headers={"X-Simulator-Options": "take=2"})).body))
    take3 = content_of(chunks((await call(app, "POST", API, body, headers={"X-Simulator-Options": "take=3"})).body))
    assert plain == again == "".join(answer_text(PROMPT, length_tokens=64))
    assert len({plain, take2, take3}) == 3 and "(take 2)" in take2 and "(take 3)" in take3


# ---- the turn plan ---------------------------------------------------------------------------


def sim_target(**extra: Any) -> EndpointTarget:
    return EndpointTarget(endpoint_id=1, name="sim", base_url="sim://builtin/v1", **extra)


def test_simulator_take_only_for_a_later_attempt_at_the_built_in_simulator_without_a_seed() -> None:
    t = sim_target()
    assert simulator_take(t, model="sim-fast", params={}, attempt=1) is t
    assert simulator_take(t, model="sim-fast", params={}, attempt=2).extra_headers == {"X-Simulator-Options": "take=2"}
    assert simulator_take(t, model="sim-fast", params={}, attempt=7).extra_headers == {"X-Simulator-Options": "take=7"}
    assert t.extra_headers == {}  # the target itself is not changed
    # The user fixed the answer: a seed parameter, or a seed/take knob in the model or the header.
    assert simulator_take(t, model="sim-fast", params={"seed": 0}, attempt=2) is t
    assert simulator_take(t, model="sim-fast?seed=4", params={}, attempt=2) is t
    assert simulator_take(t, model="sim-fast?take=1", params={}, attempt=2) is t
    seeded = sim_target(extra_headers={"x-simulator-options": "seed=9"})
    assert simulator_take(seeded, model="sim-fast", params={}, attempt=2) is seeded
    # Other options the endpoint sends are kept (same header name, one header).
    slow = sim_target(extra_headers={"x-simulator-options": "?ttft_ms=900", "X-Other": "1"})
    assert simulator_take(slow, model="sim-fast", params={}, attempt=3).extra_headers == {
        "x-simulator-options": "ttft_ms=900&take=3", "X-Other": "1"}
    # Another endpoint never gets the header.
    real = EndpointTarget(endpoint_id=2, name="real", base_url="https://api.example.com/v1")
    assert simulator_take(real, model="gpt", params={}, attempt=2) is real


@pytest.mark.django_db
def test_regenerate_plans_ask_for_the_next_take_and_first_answers_and_retries_do_not() -> None:
    user = services.user_create(username="carol", password="pw-carol-12345")
    conv = services.conversation_create(user=user)
    assert Endpoint.objects.get(pk=conv.endpoint_id).is_simulator
    q = services.message_append(conversation=conv, role="user", content=PROMPT, parent_id=None)
    a1 = services.message_append(conversation=conv, role="assistant", content="first", parent_id=q.pk)

    def regenerate(message_id: Any, **kw: Any) -> selectors.TurnPlan:
        plan = selectors.turn_plan_regenerate(user=user, conversation_id=conv.pk, message_id=message_id,
                                              settings=kw.pop("settings", None), **kw)
        return plan

    plan2 = regenerate(a1.pk)
    assert plan2.kind == "regenerate" and plan2.target.extra_headers == {"X-Simulator-Options": "take=2"}
    services.turn_commit(plan=plan2)
    Message.objects.filter(pk=plan2.assistant.pk).update(status="complete", content="second")
    plan3 = regenerate(plan2.assistant.pk)
    assert plan3.target.extra_headers == {"X-Simulator-Options": "take=3"}
    # Continue keeps the answer going: no other take.
    assert regenerate(plan2.assistant.pk, keep_text=True).target.extra_headers == {}
    # A seed in the settings makes every attempt the same answer.
    conv.refresh_from_db()
    seeded = selectors.NextTurnSettings(conv.endpoint_id, conv.model, "", {"seed": 3})
    assert regenerate(plan2.assistant.pk, settings=seeded).target.extra_headers == {}
    # A Retry of an answer that failed asks again for the answer that did not arrive: the
    # attempt counts the answers the user got (complete or stopped), not the failed ones.
    q2 = services.message_append(conversation=conv, role="user", content="Second", parent_id=plan2.assistant.pk)
    failed = services.message_append(conversation=conv, role="assistant", content="", parent_id=q2.pk)
    Message.objects.filter(pk=failed.pk).update(status="error")
    retry = regenerate(failed.pk)
    assert retry.target.extra_headers == {}
    services.turn_commit(plan=retry)
    Message.objects.filter(pk=retry.assistant.pk).update(status="stopped", content="partial")
    assert regenerate(retry.assistant.pk).target.extra_headers == {"X-Simulator-Options": "take=2"}
    # A new message's first answer: no header.
    Conversation.objects.filter(pk=conv.pk).update(current_leaf_id=plan2.assistant.pk)
    send = selectors.turn_plan_send(user=user, conversation_id=conv.pk, turn_id=uuid.uuid4(),
                                    content="Next question", role="user",
                                    settings=selectors.NextTurnSettings.of_conversation(conv))
    assert send.target.extra_headers == {}


@pytest.mark.django_db
def test_a_compare_lane_new_answer_asks_for_the_next_take_and_a_failed_retry_does_not() -> None:
    """The same rule in a comparison: a lane's new answer to a prompt it answered asks the
    built-in simulator for another take; a Retry of its failed answer asks again."""
    from chat.compare import selectors as cs
    from chat.compare import services as csv

    user = services.user_create(username="dora", password="pw-dora-12345")
    sim = services.endpoint_create_simulator(user=user)
    s = selectors.NextTurnSettings(sim.pk, "sim-fast", "", {})
    comparison = csv.compare_create(user=user, lanes=[s, s])
    plans = cs.compare_plan_send(user=user, conversation_id=comparison.pk, turn_id=uuid.uuid4(), content=PROMPT,
                                 settings={})
    assert [p.target.extra_headers for p in plans] == [{}, {}]  # first answers: today's text
    for p in plans:
        services.turn_commit(plan=p)
    done, failed = plans[0].assistant, plans[1].assistant
    Message.objects.filter(pk=done.pk).update(status="complete", content="first")
    Message.objects.filter(pk=failed.pk).update(status="error")
    again = cs.compare_plan_retry(user=user, conversation_id=comparison.pk, message_id=done.pk)
    assert again.target.extra_headers == {"X-Simulator-Options": "take=2"}
    services.turn_commit(plan=again)
    Message.objects.filter(pk=again.assistant.pk).update(status="complete", content="second")
    assert cs.compare_plan_retry(user=user, conversation_id=comparison.pk,
                                 message_id=again.assistant.pk).target.extra_headers == {"X-Simulator-Options": "take=3"}
    assert cs.compare_plan_retry(user=user, conversation_id=comparison.pk, message_id=failed.pk).target.extra_headers == {}
    # A seed in the lane's settings fixes the answer.
    seeded = {plans[0].lane_id: selectors.NextTurnSettings(sim.pk, "sim-fast", "", {"seed": 1})}
    assert cs.compare_plan_retry(user=user, conversation_id=comparison.pk, message_id=again.assistant.pk,
                                 settings=seeded).target.extra_headers == {}
