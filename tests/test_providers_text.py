"""Tests for ``chat.providers.text`` and the Unicode helpers of ``chat.providers.base``: the
shared inline-reasoning splitter, the stream guard every adapter's events pass (surrogate pairs,
the answer budget, the Inspect budget), and the tool-argument helpers. Pure; no I/O, no Django.
"""

from __future__ import annotations

import itertools
import json

import pytest

from chat.providers.base import (
    AnswerWasReasoning,
    FinalText,
    Finish,
    Limits,
    LogprobsDelta,
    ModelOutputError,
    ProviderError,
    RawEvent,
    ReasoningDelta,
    ServerToolUse,
    TextDelta,
    TokenLogprob,
    ToolCall,
    ToolCallDelta,
    Usage,
    fix_surrogates,
    replay_arguments,
    tool_arguments_complete,
)
from chat.providers.text import InlineReasoningSplitter, StreamGuard, split_inline_reasoning

HIGH, LOW = "\ud83d", "\ude00"  # the two halves of 😀 (U+1F600)


def apply(events, reasoning: str = "", answer: str = "") -> tuple[str, str]:
    """Apply events the way the runner does: AnswerWasReasoning moves the answer to reasoning."""
    for event in events:
        if isinstance(event, AnswerWasReasoning):
            reasoning, answer = reasoning + answer, ""
        elif isinstance(event, ReasoningDelta):
            reasoning += event.text
        elif isinstance(event, TextDelta):
            answer += event.text
    return reasoning, answer


def split(pieces: list[str]) -> tuple[str, str, list]:
    splitter = InlineReasoningSplitter()
    events = [e for p in pieces for e in splitter.feed(p)] + splitter.flush()
    reasoning, answer = apply(events)
    return reasoning, answer, events


# ---- the orphan closing tag (issue 7 item 2) -----------------------------------------------


def test_issue_example_closing_tag_without_opening_tag():
    reasoning, answer, events = split(["Plan: add 2+2", "</think>", "4"])
    assert (reasoning, answer) == ("Plan: add 2+2", "4")
    # the text before the tag was already emitted as answer, so it is reclaimed once
    assert events == [TextDelta("Plan: add 2+2"), AnswerWasReasoning(), TextDelta("4")]


ORPHAN_CASES = [
    # (pieces, reasoning, answer)
    (["Plan: add 2+2", "</think>", "4"], "Plan: add 2+2", "4"),
    (["Let me think", "</thinking>", "\n\nParis."], "Let me think", "Paris."),
    (["step one ", "step two</th", "ink>", " done"], "step one step two", "done"),
    (["a", "b</", "thinking", ">c"], "ab", "c"),
    (["</think>only answer"], "", "only answer"),
    (["No tags here.", " None at all."], "", "No tags here. None at all."),
    (["x < y", " and y > z"], "", "x < y and y > z"),
    (["Hi <think>literal</think>", " text"], "", "Hi <think>literal</think> text"),
    (["first</think>second</think>third"], "first", "second</think>third"),
    (["ends with </thi"], "", "ends with </thi"),
]


@pytest.mark.parametrize(("pieces", "reasoning", "answer"), ORPHAN_CASES)
def test_orphan_closing_tag_cases(pieces, reasoning, answer):
    assert split(pieces)[:2] == (reasoning, answer)


@pytest.mark.parametrize(("pieces", "reasoning", "answer"), ORPHAN_CASES)
def test_orphan_closing_tag_every_split(pieces, reasoning, answer):
    whole = "".join(pieces)
    for cut_a, cut_b in itertools.combinations(range(len(whole) + 1), 2):
        parts = [whole[:cut_a], whole[cut_a:cut_b], whole[cut_b:]]
        assert split(parts)[:2] == (reasoning, answer), parts


def test_no_tag_nothing_moved_and_not_delayed():
    splitter = InlineReasoningSplitter()
    assert splitter.feed("Hello") == [TextDelta("Hello")]
    assert splitter.feed(" world") == [TextDelta(" world")]
    assert splitter.flush() == []


def test_partial_closing_tag_is_held_only_until_decided():
    splitter = InlineReasoningSplitter()
    assert splitter.feed("a </") == [TextDelta("a ")]
    assert splitter.feed("b> c") == [TextDelta("</b> c")]


def test_orphan_tag_is_literal_after_field_reasoning():
    """A server that already separated reasoning: a later </think> in the answer is text."""
    splitter = InlineReasoningSplitter()
    events = splitter.reasoning("structured") + splitter.feed("The tag </think> closes")
    events += splitter.flush()
    assert apply(events) == ("structured", "The tag </think> closes")
    assert not any(isinstance(e, AnswerWasReasoning) for e in events)


def test_answer_was_reasoning_only_when_answer_was_emitted():
    _, _, events = split(["plan</think>answer"])
    assert events == [ReasoningDelta("plan"), TextDelta("answer")]


def test_split_inline_reasoning():
    assert split_inline_reasoning("Plan: add 2+2</think>4") == ("Plan: add 2+2", "4")
    assert split_inline_reasoning("<thinking>a</thinking>b") == ("a", "b")
    assert split_inline_reasoning("plain") == ("", "plain")


# ---- valid Unicode (issue 7 item 1a) -------------------------------------------------------


def test_fix_surrogates():
    assert fix_surrogates(f"Smile {HIGH}{LOW} done") == "Smile 😀 done"
    assert fix_surrogates(f"a{HIGH}b") == "a\ufffdb"
    assert fix_surrogates(f"{LOW}{HIGH}") == "\ufffd\ufffd"
    same = "plain ascii"
    assert fix_surrogates(same) is same


def guard(**limits) -> StreamGuard:
    return StreamGuard(Limits(**limits), ["sk-secret-KEY-1234"])


def test_guard_joins_a_pair_split_across_two_events():
    g = guard()
    out = g.process([TextDelta(f"Smile {HIGH}")]) + g.process([TextDelta(f"{LOW} done")])
    out += g.process([Finish("stop")])
    assert "".join(e.text for e in out if isinstance(e, TextDelta)) == "Smile 😀 done"
    for event in out:
        for value in vars(event).values():
            if isinstance(value, str):
                value.encode("utf-8")  # never raises


def test_guard_lone_half_at_finish_and_at_end_becomes_one_replacement():
    g = guard()
    out = g.process([TextDelta(f"x{HIGH}"), Finish("stop")])
    assert out == [TextDelta("x"), TextDelta("\ufffd"), Finish("stop")]
    g = guard()
    out = g.process([ReasoningDelta(f"r{HIGH}")]) + g.flush()
    assert out == [ReasoningDelta("r"), ReasoningDelta("\ufffd")]
    g = guard()
    assert g.process([TextDelta(f"{LOW}a")]) == [TextDelta("\ufffda")]


def test_guard_channels_are_separate():
    """A half held in the answer is not joined with reasoning or another call's arguments."""
    g = guard()
    out = g.process(
        [
            TextDelta(f"t{HIGH}"),
            ReasoningDelta(f"{LOW}r{HIGH}"),
            ToolCallDelta(0, arguments=f'{{"a": "{HIGH}'),
            ToolCallDelta(1, arguments=f"{LOW}"),
            ToolCallDelta(0, arguments=f'{LOW}"}}'),
            TextDelta(f"{LOW}t"),
            ReasoningDelta(f"{LOW}"),
        ]
    )
    text = "".join(e.text for e in out if isinstance(e, TextDelta))
    reasoning = "".join(e.text for e in out if isinstance(e, ReasoningDelta))
    args0 = "".join(e.arguments for e in out if isinstance(e, ToolCallDelta) and e.index == 0)
    args1 = "".join(e.arguments for e in out if isinstance(e, ToolCallDelta) and e.index == 1)
    assert text == "t😀t"
    assert reasoning == "\ufffdr😀"
    assert json.loads(args0) == {"a": "😀"}
    assert args1 == "\ufffd"


def test_guard_fixes_every_other_string():
    g = guard()
    out = g.process(
        [
            ToolCallDelta(0, id=f"call{HIGH}", name=f"get{LOW}"),
            LogprobsDelta((TokenLogprob(HIGH, -0.1, ((LOW, -2.0),)),)),
            Usage(prompt_tokens=1, raw={"model": f"m{HIGH}", f"k{LOW}": [f"{HIGH}"]}),
            ModelOutputError(f"bad {HIGH}", f"raw {LOW}"),
            ServerToolUse("server_tool_use", name=f"web{HIGH}", input_json=f'"{LOW}"'),
            FinalText(f"final {HIGH}{LOW}"),
        ]
    )
    assert out[0] == ToolCallDelta(0, id="call\ufffd", name="get\ufffd")
    assert out[1] == LogprobsDelta((TokenLogprob("\ufffd", -0.1, (("\ufffd", -2.0),)),))
    assert out[2].raw == {"model": "m\ufffd", "k\ufffd": ["\ufffd"]}
    assert out[3] == ModelOutputError("bad \ufffd", "raw \ufffd")
    assert out[4].name == "web\ufffd" and out[4].input_json == '"\ufffd"'
    assert out[5] == FinalText("final 😀")
    json.dumps([repr(e) for e in out]).encode("utf-8")


def test_provider_error_strings_are_valid_unicode():
    error = ProviderError(f"bad {HIGH}{LOW} and {HIGH}", code=f"c{LOW}", body_excerpt=f"{HIGH}")
    assert error.message == "bad 😀 and \ufffd"
    assert error.code == "c\ufffd" and error.body_excerpt == "\ufffd"
    json.dumps(error.as_dict(), ensure_ascii=False).encode("utf-8")


# ---- budgets (issue 8 item 10) -------------------------------------------------------------


def test_answer_budget_cuts_the_crossing_piece_and_stops():
    g = guard(max_answer_chars=10)
    out = g.process([ReasoningDelta("abcd"), TextDelta("efghijkl"), TextDelta("more")])
    assert out == [ReasoningDelta("abcd"), TextDelta("efghij")]
    assert g.error is not None and g.error.code == "limit_exceeded"
    assert "max_answer_chars" in g.error.message and "10" in g.error.message
    assert g.process([TextDelta("x"), Finish("stop")]) == []


def test_answer_budget_counts_tool_arguments():
    g = guard(max_answer_chars=5)
    out = g.process([ToolCallDelta(0, id="c", name="f", arguments='{"a": 1}')])
    assert out == [ToolCallDelta(0, id="c", name="f", arguments='{"a":')]
    assert g.error.param == "max_answer_chars"


def test_raw_events_are_scrubbed_then_cut_then_dropped():
    g = guard(max_raw_event_chars=20, max_raw_chars=30)
    first = g.raw("", "key=sk-secret-KEY-1234 and a long tail")
    assert first == RawEvent("", "key=[REDACTED] and a", 10)  # omitted: of the scrubbed text
    second = g.raw("ping", "0123456789abcdef")
    assert second == RawEvent("ping", "0123456789", 6)
    third = g.raw("", "anything")
    assert third == RawEvent("", "", 8)


def test_warning_excerpt_is_scrubbed_before_cutting():
    g = guard()
    data = "x" * 290 + "sk-secret-KEY-1234" + "y" * 50
    warning = g.warning(data)
    assert "sk-secret" not in warning.raw_excerpt and len(warning.raw_excerpt) <= 300


# ---- tool arguments (issue 7 item 3d) ------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "complete", "replayed"),
    [
        ("", True, "{}"),
        ("   ", True, "{}"),
        ('{"city": "Paris"}', True, '{"city": "Paris"}'),
        ('{"city": "Par', False, '{"_incomplete_arguments": "{\\"city\\": \\"Par"}'),
        ("[1, 2]", False, '{"_incomplete_arguments": "[1, 2]"}'),
        ("[" * 100_000, False, None),
    ],
)
def test_tool_arguments_helpers(arguments, complete, replayed):
    assert tool_arguments_complete(arguments) is complete
    assert ToolCall("c", "f", arguments).arguments_complete is complete
    out = replay_arguments(arguments)
    assert isinstance(json.loads(out), dict)  # never invalid JSON
    if replayed is not None:
        assert out == replayed
    else:
        assert json.loads(out) == {"_incomplete_arguments": arguments}
