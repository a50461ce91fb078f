"""The benchmark reads the relay's frames only through ``bench.frames.classify``: this checks it
against frames built by the server's own ``chat.frames`` (so a change of the frame format
fails here, in the test suite, not silently in ``make bench``). No server is started."""

from __future__ import annotations

import uuid

import pytest

from bench.frames import classify, is_refusal
from chat import frames


def view(status: str, content: str = "Hello <b> & 🙂") -> frames.MessageView:
    return frames.MessageView(id=uuid.uuid4(), role="assistant", content=content, status=status, conversation_id=1)


def test_delta_frames_carry_text_and_code_point_offsets() -> None:
    mid = frames.key(uuid.uuid4())
    f = classify(frames.delta(mid, "text", 7, "x<y & 🙂\r\n"))
    assert [(d["kind"], d["start"], d["end"], d["text"]) for d in f.deltas] == [("text", 7, 16, "x<y & 🙂\r\n")]
    assert not f.started and f.status == "" and f.notice == ""
    r = classify(frames.delta(mid, "reasoning", 0, "think"))
    assert [d["kind"] for d in r.deltas] == ["reasoning"]


def test_turn_started_frame() -> None:
    user = frames.MessageView(id=uuid.uuid4(), role="user", content="hi", status="complete", conversation_id=1)
    f = classify(frames.turn_started(user, [view("streaming", "")]))
    assert f.started and not f.deltas
    assert f.status == ""  # the skeleton's status is "streaming": not a final frame


@pytest.mark.parametrize("status", ["complete", "error", "stopped", "interrupted"])
def test_final_frames(status: str) -> None:
    f = classify(frames.final(view(status)))
    assert f.status == status and not f.started and not f.deltas


def test_a_frame_with_a_last_delta_and_the_final_message_is_both() -> None:
    v = view("complete")
    f = classify(frames.delta(v.k, "text", 0, "Hello") + frames.final(v))
    assert f.deltas[0]["text"] == "Hello" and f.status == "complete"


def test_notices() -> None:
    busy = classify(frames.notice("The server is busy, try again in a moment."))
    assert busy.notice.startswith("The server is busy") and busy.status == ""
    assert is_refusal(busy.notice)
    other = classify(frames.turn_finished_elsewhere(3, "Title", "complete"))
    assert other.notice.startswith("An answer in") and not is_refusal(other.notice)
