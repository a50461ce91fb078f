"""Text handling every adapter shares: inline reasoning tags, valid Unicode, the answer budget.

* :class:`InlineReasoningSplitter` splits ``<think>…</think>`` / ``<thinking>…</thinking>``
  reasoning out of streamed answer text. Every adapter runs its answer text through one
  (``openai_chat`` content, ``anthropic_messages`` text blocks, ``openai_responses``
  output text): llama.cpp builds all three dialects from one parsed chat message, and with
  ``--reasoning-format none`` (or a template it cannot parse) the tags arrive inside the text
  of each of them.
* :class:`StreamGuard` is applied by the shared SSE loop (:func:`chat.providers.http.stream_sse`)
  to every event any adapter emits, so the guarantees of :mod:`chat.providers.base` hold in one
  place: UTF-16 surrogate pairs split across events joined (per channel: answer, reasoning,
  each tool call's arguments), lone halves replaced by U+FFFD in every string, the answer budget
  (``Limits.max_answer_chars``), and the raw-event budget kept for Inspect.

May import: the standard library and ``.base`` (no httpx, no Django).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .base import (
    REDACTED,
    AnswerWasReasoning,
    Event,
    FinalText,
    Finish,
    Limits,
    ProviderError,
    RawEvent,
    ReasoningDelta,
    StreamWarning,
    TextDelta,
    ToolCallDelta,
    fix_surrogates,
    fix_surrogates_deep,
    limit_error,
)

# ---- inline reasoning tags ----------------------------------------------------------------

_OPEN_TAGS = (("<think>", "</think>"), ("<thinking>", "</thinking>"))
_CLOSE_TAGS = ("</think>", "</thinking>")
#: Tags that decide answer text while a closing tag may still reclaim it.
_ANSWER_TAGS = ("<think>", "<thinking>", *_CLOSE_TAGS)
_LONGEST = max(len(t) for t in _ANSWER_TAGS)


def _scan(buf: str, tags: tuple[str, ...]) -> tuple[int, str | None]:
    """The first tag of ``tags`` in ``buf``: ``(position, tag)``; ``(position, None)`` when
    ``buf`` ends with a proper prefix of one (undecided until more text comes); ``(-1, "")``
    when there is neither."""
    start = 0
    while True:
        pos = buf.find("<", start)
        if pos < 0:
            return -1, ""
        rest = buf[pos : pos + _LONGEST]
        for tag in tags:
            if rest.startswith(tag):
                return pos, tag
        if pos + len(rest) == len(buf) and any(tag.startswith(rest) for tag in tags):
            return pos, None
        start = pos + 1


class InlineReasoningSplitter:
    """Split inline reasoning tags out of a stream's answer text.

    Rules:

    * An opening ``<think>`` or ``<thinking>`` at the very start of the answer (leading
      whitespace allowed) opens reasoning, closed by its own closing tag. Until the first
      non-whitespace characters decide it, whitespace and a partial opening tag (``"<"``,
      ``"<thi"``) are held back. Anything else makes the text answer text.
    * Inside reasoning, text is released at once except a trailing partial closing tag (held
      until the next piece decides it). Leading whitespace of the reasoning and of the answer
      after the closing tag is dropped (``<think>\\n\\n</think>\\n\\nHi`` → answer ``"Hi"``).
    * A closing ``</think>`` / ``</thinking>`` in answer text that no tag opened (templates
      that open the tag in the prompt) means everything before it was reasoning: the answer
      already emitted is reclaimed with one :class:`AnswerWasReasoning`, the text between it
      and the tag follows as ``ReasoningDelta``, the rest is answer. Only the first such tag
      counts, and only when the stream carried no reasoning through a reasoning field
      (:meth:`reasoning`) and no opening tag came first in the answer (``Hi <think>x</think>``
      is literal text). While the answer may still hold such a tag, a trailing partial
      ``"</thi"`` is held back until decided.
    * No tag at all: every piece passes through unchanged (nothing is moved).
    * :meth:`flush` (at the finish and at the end) releases what is held: an unclosed opening
      tag means everything after it was reasoning (e.g. cut by ``max_tokens``).

    ``feed`` / ``reasoning`` / ``flush`` return lists of ``TextDelta``, ``ReasoningDelta`` and
    ``AnswerWasReasoning``.
    """

    def __init__(self) -> None:
        # start | think_start | think | after | open (answer, orphan close possible) | answer
        self._state = "start"
        self._buf = ""
        self._close: tuple[str, ...] = ()
        self._answer_emitted = False
        self._field_reasoning = False

    def reasoning(self, text: str) -> list[Event]:
        """A ``ReasoningDelta`` for reasoning that arrived in a reasoning field (not inline);
        from then on an orphan closing tag in the answer is literal text."""
        if not text:
            return []
        self._field_reasoning = True
        return [ReasoningDelta(text)]

    def _answer(self, text: str, out: list[Event]) -> None:
        if text:
            self._answer_emitted = True
            out.append(TextDelta(text))

    def feed(self, text: str) -> list[Event]:
        """Events for one piece of answer text."""
        if not text:
            return []
        if self._state == "answer":
            self._answer_emitted = True
            return [TextDelta(text)]
        if self._state == "open" and not self._buf and "<" not in text:
            self._answer_emitted = True
            return [TextDelta(text)]
        out: list[Event] = []
        self._buf += text
        while True:
            buf = self._buf
            state = self._state
            if state == "start":
                stripped = buf.lstrip()
                if not stripped:
                    return out
                for open_tag, close_tag in _OPEN_TAGS:
                    if stripped.startswith(open_tag):
                        self._state = "think_start"
                        self._close = (close_tag,)
                        self._buf = stripped[len(open_tag) :]
                        break
                else:
                    if any(t.startswith(stripped) for t, _ in _OPEN_TAGS):
                        return out  # a partial opening tag: wait for the next piece
                    self._state = "open"
                continue
            if state in ("think_start", "after"):
                stripped = buf.lstrip()
                if not stripped:
                    self._buf = ""
                    return out
                self._buf = stripped
                self._state = "think" if state == "think_start" else "answer"
                continue
            if state == "think":
                pos, tag = _scan(buf, self._close)
                if tag:
                    if pos:
                        out.append(ReasoningDelta(buf[:pos]))
                    self._buf = buf[pos + len(tag) :]
                    self._state = "after"
                    continue
                hold = len(buf) - pos if pos >= 0 else 0
                if len(buf) > hold:
                    out.append(ReasoningDelta(buf[: len(buf) - hold]))
                self._buf = buf[len(buf) - hold :]
                return out
            if state == "open":
                if self._field_reasoning:
                    self._state = "answer"
                    continue
                pos, tag = _scan(buf, _ANSWER_TAGS)
                if tag in _CLOSE_TAGS:  # an orphan closing tag: what came before was reasoning
                    if self._answer_emitted:
                        out.append(AnswerWasReasoning())
                    if pos:
                        out.append(ReasoningDelta(buf[:pos]))
                    self._buf = buf[pos + len(tag) :]  # type: ignore[arg-type]
                    self._state = "after"
                    continue
                if tag:  # an opening tag inside the answer: tags are the model's text now
                    self._state = "answer"
                    continue
                hold = len(buf) - pos if pos >= 0 else 0
                self._answer(buf[: len(buf) - hold], out)
                self._buf = buf[len(buf) - hold :]
                return out
            # answer
            self._buf = ""
            self._answer(buf, out)
            return out

    def flush(self) -> list[Event]:
        """Release what is held (at the finish and at the end of the stream)."""
        buf, self._buf = self._buf, ""
        if not buf:
            return []
        if self._state == "think":
            return [ReasoningDelta(buf)]
        if self._state in ("start", "open", "answer"):
            self._state = "answer" if self._state == "start" else self._state
            out: list[Event] = []
            self._answer(buf, out)
            return out
        return []


def split_inline_reasoning(text: str) -> tuple[str, str]:
    """``(reasoning, answer)`` of a whole text by the rules of
    :class:`InlineReasoningSplitter` (used for a final copy of the answer)."""
    splitter = InlineReasoningSplitter()
    reasoning: list[str] = []
    answer: list[str] = []
    for event in splitter.feed(text) + splitter.flush():
        if isinstance(event, AnswerWasReasoning):
            reasoning.extend(answer)
            answer.clear()
        elif isinstance(event, ReasoningDelta):
            reasoning.append(event.text)
        elif isinstance(event, TextDelta):
            answer.append(event.text)
    return "".join(reasoning), "".join(answer)


# ---- the guard every event passes ---------------------------------------------------------

_HIGH_FIRST, _HIGH_LAST = "\ud800", "\udbff"


def _fix_fields(event: Any) -> Any:
    """``event`` with every string (also inside dicts, lists, tuples, dataclasses) made valid
    Unicode; the same object when nothing changed."""
    return fix_surrogates_deep(event)


class StreamGuard:
    """The checks every adapter's events pass, in :func:`chat.providers.http.stream_sse`.

    * :meth:`process` makes every string valid Unicode: answer text, reasoning and each tool
      call's arguments are *channels* whose UTF-16 surrogate pairs are joined across events (a
      trailing high surrogate is held until the next piece of its channel; one still held at a
      ``Finish``, an ``AnswerWasReasoning`` (answer channel) or the end becomes U+FFFD); every
      other string (tool names, logprob tokens, usage, errors…) gets lone halves replaced.
    * It counts the characters of answer, reasoning and arguments against
      ``Limits.max_answer_chars``: the piece that crosses it is cut to fit, nothing after it is
      emitted, and :attr:`error` is set (``limit_exceeded``) for the loop to raise.
    * :meth:`raw` builds ``RawEvent``s within ``max_raw_event_chars`` / ``max_raw_chars``,
      scrubbed of ``secrets`` before they are cut; :meth:`warning` builds ``StreamWarning``s.
    """

    def __init__(self, limits: Limits, secrets: list[str]) -> None:
        self.limits = limits
        self.secrets = secrets
        self.error: ProviderError | None = None
        self._answer_left = limits.max_answer_chars
        self._raw_left = limits.max_raw_chars
        self._held: dict[Any, str] = {}  # channel → a held high surrogate

    # -- Unicode --------------------------------------------------------------------------
    def _join(self, channel: Any, text: str) -> str:
        if self._held:
            held = self._held.pop(channel, "")
            text = held + text
        if text.isascii():
            return text
        last = text[-1:]
        if _HIGH_FIRST <= last <= _HIGH_LAST:
            self._held[channel] = last
            text = text[:-1]
        return fix_surrogates(text)

    def _flush_channel(self, channel: Any) -> list[Event]:
        if channel not in self._held:
            return []
        del self._held[channel]
        if channel == "text":
            return [TextDelta("\ufffd")]
        if channel == "reasoning":
            return [ReasoningDelta("\ufffd")]
        return [ToolCallDelta(index=channel[1], arguments="\ufffd")]

    def flush(self) -> list[Event]:
        """Every held surrogate half as U+FFFD (at the end of the stream)."""
        out: list[Event] = []
        for channel in list(self._held):
            out.extend(self._flush_channel(channel))
        return self._count(out)

    # -- budget -----------------------------------------------------------------------------
    def _take(self, text: str) -> str | None:
        """``text`` within the answer budget: whole, cut to what is left, or None when the
        budget was already used up (then :attr:`error` is set)."""
        if self.error is not None:
            return None
        left = self._answer_left - len(text)
        if left >= 0:
            self._answer_left = left
            return text
        kept = text[: self._answer_left]
        self._answer_left = 0
        self.error = limit_error(
            "max_answer_chars", self.limits.max_answer_chars, "The answer (text, reasoning and tool arguments)"
        )
        return kept or None

    def _count(self, events: list[Event]) -> list[Event]:
        out: list[Event] = []
        for event in events:
            kind = type(event)
            if kind is TextDelta or kind is ReasoningDelta:
                text = self._take(event.text)  # type: ignore[union-attr]
                if text is None:
                    break
                out.append(event if text is event.text else kind(text))  # type: ignore[union-attr,call-arg]
            elif kind is ToolCallDelta:
                arguments = self._take(event.arguments) if event.arguments else ""  # type: ignore[union-attr]
                if arguments is None:
                    break
                out.append(
                    event
                    if arguments is event.arguments  # type: ignore[union-attr]
                    else dataclasses.replace(event, arguments=arguments)  # type: ignore[arg-type]
                )
            elif self.error is None:
                out.append(event)
            if self.error is not None:
                break
        return out

    # -- the pass ---------------------------------------------------------------------------
    def process(self, events: list[Event]) -> list[Event]:
        """The events to yield for ``events`` (see the class docstring). After a limit was
        crossed it returns only what fits and :attr:`error` is set; later calls return []."""
        if self.error is not None:
            return []
        out: list[Event] = []
        for event in events:
            kind = type(event)
            if kind is TextDelta:
                text = self._join("text", event.text)  # type: ignore[union-attr]
                if text:
                    out.append(event if text is event.text else TextDelta(text))  # type: ignore[union-attr]
            elif kind is ReasoningDelta:
                text = self._join("reasoning", event.text)  # type: ignore[union-attr]
                if text:
                    out.append(event if text is event.text else ReasoningDelta(text))  # type: ignore[union-attr]
            elif kind is ToolCallDelta:
                arguments = event.arguments  # type: ignore[union-attr]
                if arguments:
                    arguments = self._join(("tool", event.index), arguments)  # type: ignore[union-attr]
                name = event.name  # type: ignore[union-attr]
                call_id = event.id  # type: ignore[union-attr]
                fixed_name = fix_surrogates(name) if name else name
                fixed_id = fix_surrogates(call_id) if call_id else call_id
                if (
                    arguments is event.arguments  # type: ignore[union-attr]
                    and fixed_name is name
                    and fixed_id is call_id
                ):
                    out.append(event)
                elif arguments or fixed_name or fixed_id:
                    out.append(
                        ToolCallDelta(event.index, fixed_id, fixed_name, arguments)  # type: ignore[union-attr]
                    )
            elif kind is AnswerWasReasoning:
                out.extend(self._flush_channel("text"))
                out.append(event)
            elif kind is Finish:
                for channel in list(self._held):
                    out.extend(self._flush_channel(channel))
                out.append(_fix_fields(event))
            elif kind is RawEvent:
                out.append(event)
            else:
                out.append(_fix_fields(event))
        return self._count(out)

    # -- raw events and warnings ------------------------------------------------------------
    def scrub(self, text: str) -> str:
        """``text`` with every secret variant replaced by ``[REDACTED]``."""
        for secret in self.secrets:
            if secret in text:
                text = text.replace(secret, REDACTED)
        return text

    def raw(self, event: str, data: str) -> RawEvent:
        """The ``RawEvent`` for one SSE event: scrubbed, cut at ``max_raw_event_chars``, and
        empty (``omitted`` = its length) once ``max_raw_chars`` were kept for this stream."""
        if self._raw_left <= 0:
            return RawEvent(event, "", len(data))
        data = self.scrub(data)
        cap = min(self.limits.max_raw_event_chars, self._raw_left)
        if len(data) > cap:
            omitted = len(data) - cap
            data = data[:cap]
        else:
            omitted = 0
        self._raw_left -= len(data)
        return RawEvent(event, data, omitted)

    def warning(self, data: str, code: str = "unparsable_event") -> StreamWarning:
        """A ``StreamWarning`` for event data that could not be used."""
        excerpt = fix_surrogates(self.scrub(data))
        excerpt = excerpt if len(excerpt) <= 300 else excerpt[:299] + "…"
        if code == "incomplete_event":
            message = "The stream ended inside an event; its data was dropped"
        else:
            message = "An event of the stream could not be read (not JSON) and was skipped; part of the answer may be missing"
        return StreamWarning(message, excerpt, code)

    def final_text(self, text: str) -> FinalText:
        """A ``FinalText`` with valid Unicode."""
        return FinalText(fix_surrogates(text))
