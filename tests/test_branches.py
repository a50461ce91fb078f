"""Branches and history editing over the websocket: regenerate (1/2), edit-and-resend, select,
continue, prefill, insert any role, delete, fork. The history sent upstream is asserted on the
request the simulator received."""

from __future__ import annotations

import re
import uuid

import pytest
from channels.db import database_sync_to_async

from chat import selectors, services
from chat.models import Conversation, Message
from chat.turns import registry
from tests.helpers import chat_requests, sim_text
from tests.test_consumers import alice, connect, send_frame, until_final  # noqa: F401

pytestmark = [pytest.mark.django_db(transaction=True)]

FAST = "sim-fast?ttft_ms=5&delay_ms=1&length=12&reasoning=0"


def sent_messages(sim) -> list[tuple[str, str]]:  # noqa: ANN001
    body = chat_requests(sim.requests())[-1]["body"]
    return [(m["role"], m["content"]) for m in body["messages"]]


@database_sync_to_async
def thread_of(conv_id: int) -> list[Message]:
    return selectors.conversation_thread(conversation=Conversation.objects.get(pk=conv_id))


async def test_regenerate_edit_select_continue_and_exact_history(alice, fresh_sim) -> None:  # noqa: ANN001, F811
    user, endpoint, conv = alice
    comm = await connect(user, conv.pk)
    await comm.send_json_to(send_frame(endpoint.pk, FAST, content="Q1", system_prompt="Be brief"))
    _, a1, _ = await until_final(comm)
    await comm.send_json_to(send_frame(endpoint.pk, FAST, content="Q2", system_prompt="Be brief"))
    _, a2, _ = await until_final(comm)
    await registry.drain()
    a1_text = (await database_sync_to_async(Message.objects.get)(pk=a1)).content
    assert sent_messages(fresh_sim) == [("system", "Be brief"), ("user", "Q1"), ("assistant", a1_text), ("user", "Q2")]

    # Regenerate the second answer: a sibling, shown as 2/2, same history upstream.
    await comm.send_json_to({"action": "regenerate", "message_id": a2})
    frames, a2b, status = await until_final(comm)
    await registry.drain()
    assert a2b != a2 and status == "complete"
    assert f'outerHTML:#m-{a2}' in frames[0]
    assert sent_messages(fresh_sim)[-1] == ("user", "Q2")
    thread = await thread_of(conv.pk)
    assert [m.pk for m in thread][-1] == uuid.UUID(a2b)
    assert (thread[-1].sibling_index, thread[-1].sibling_count) == (1, 2)
    assert "2/2" in frames[-1]

    # Browse back to 1/2.
    await comm.send_json_to({"action": "select", "message_id": a2})
    frame = await comm.receive_from(timeout=5)
    assert 'id="thread"' in frame and f'id="m-{a2}"' in frame and f'id="m-{a2b}"' not in frame and "1/2" in frame
    thread = await thread_of(conv.pk)
    assert thread[-1].pk == uuid.UUID(a2)

    # Edit the first question and resend: a new branch from the root; history is exactly it.
    q1 = thread[1].pk if thread[0].role == "system" else thread[0].pk
    await comm.send_json_to({"action": "edit", "message_id": str(q1), "content": "Q1 edited", "resend": "true",
                             "turn_id": str(uuid.uuid4())})
    frames, a1b, _ = await until_final(comm)
    await registry.drain()
    assert sent_messages(fresh_sim) == [("system", "Be brief"), ("user", "Q1 edited")]
    thread = await thread_of(conv.pk)
    assert [m.content for m in thread if m.role == "user"] == ["Q1 edited"]
    assert (thread[0].sibling_index, thread[0].sibling_count) == (1, 2)

    # Switching back to the first question restores its whole branch (newest answers).
    await comm.send_json_to({"action": "select", "message_id": str(q1)})
    await comm.receive_from(timeout=5)
    thread = await thread_of(conv.pk)
    assert [m.content for m in thread if m.role == "user"] == ["Q1", "Q2"]
    await comm.disconnect()


async def test_continue_after_length_resumes_the_same_text(alice, fresh_sim) -> None:  # noqa: ANN001, F811
    user, endpoint, conv = alice
    comm = await connect(user, conv.pk)
    await comm.send_json_to(send_frame(endpoint.pk, "sim-fast?ttft_ms=5&delay_ms=1&length=40&reasoning=0",
                                       content="Long one", max_tokens="6"))
    _, a1, _ = await until_final(comm)
    await registry.drain()
    row = await database_sync_to_async(Message.objects.get)(pk=a1)
    assert row.finish_reason == "length"
    first = row.content
    await comm.send_json_to({"action": "continue", "message_id": a1})
    frames, a1c, status = await until_final(comm)
    await registry.drain()
    cont = await database_sync_to_async(Message.objects.get)(pk=a1c)
    rec = chat_requests(fresh_sim.requests())[-1]
    assert [(m["role"], m["content"]) for m in rec["body"]["messages"]] == [("user", "Long one"), ("assistant", first)]
    assert cont.content == first + sim_text(rec)
    assert cont.prefill_len == len(first)
    assert "Continue" in frames[-1] or cont.finish_reason == "length"
    await comm.disconnect()


async def test_insert_any_role_prefill_edit_in_place_and_delete(alice, fresh_sim) -> None:  # noqa: ANN001, F811
    user, endpoint, conv = alice
    comm = await connect(user, conv.pk)
    # Insert a user and an assistant message without running, then a system message.
    for role, text in (("user", "What is 2+2?"), ("assistant", "It is 4."), ("system", "Answer in French.")):
        await comm.send_json_to(send_frame(endpoint.pk, FAST, content=text, role=role, mode="append"))
        frame = await comm.receive_from(timeout=5)
        assert 'id="thread"' in frame
    assert chat_requests(fresh_sim.requests()) == []
    # Prefill: the answer starts with what the user wrote.
    await comm.send_json_to(send_frame(endpoint.pk, FAST, content="Bien sûr,", role="assistant"))
    _, a, _ = await until_final(comm)
    await registry.drain()
    assert sent_messages(fresh_sim) == [("user", "What is 2+2?"), ("assistant", "It is 4."),
                                        ("system", "Answer in French."), ("assistant", "Bien sûr,")]
    row = await database_sync_to_async(Message.objects.get)(pk=a)
    assert row.content.startswith("Bien sûr,") and row.content != "Bien sûr,"
    # Edit the inserted assistant answer in place; the next request carries the edit.
    thread = await thread_of(conv.pk)
    await comm.send_json_to({"action": "edit", "message_id": str(thread[1].pk), "content": "It is four."})
    assert "It is four." in await comm.receive_from(timeout=5)
    await comm.send_json_to(send_frame(endpoint.pk, FAST, content="And 3+3?"))
    await until_final(comm)
    await registry.drain()
    assert sent_messages(fresh_sim)[:2] == [("user", "What is 2+2?"), ("assistant", "It is four.")]
    # Delete the system message: it and everything after it leave the branch.
    await comm.send_json_to({"action": "delete", "message_id": str(thread[2].pk)})
    frame = await comm.receive_from(timeout=5)
    assert "Answer in French." not in frame
    thread = await thread_of(conv.pk)
    assert [m.content for m in thread] == ["What is 2+2?", "It is four."]
    await comm.disconnect()


async def test_fork_copies_the_branch(alice, fresh_sim) -> None:  # noqa: ANN001, F811
    user, endpoint, conv = alice
    comm = await connect(user, conv.pk)
    await comm.send_json_to(send_frame(endpoint.pk, FAST, content="Fork me"))
    _, a, _ = await until_final(comm)
    await registry.drain()
    await comm.disconnect()

    @database_sync_to_async
    def fork() -> tuple[list[str], str]:
        c = Conversation.objects.get(pk=conv.pk)
        f = services.conversation_fork(conversation=c)
        return [m.content for m in selectors.conversation_thread(conversation=f)], f.title

    contents, title = await fork()
    original = [m.content for m in await thread_of(conv.pk)]
    assert contents == original and title.endswith("(fork)")
    assert re.match(r"Fork me", title)
