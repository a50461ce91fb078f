"""Deterministic answer and reasoning text for the built-in upstream simulator.

A "token" here is a string piece; the join of the pieces is the text. The same inputs always
give the same pieces (no ``random``, no ``hash()``: only ``hashlib``), so tests and benchmarks
can compare bytes.

The default answer is short readable markdown that echoes the user's last message and then
exercises the hard cases of a streaming chat UI, each on purpose:

- emoji, including a multi-codepoint ZWJ sequence (👩‍💻) split across two tokens and a
  skin-tone modifier;
- CJK and accented Latin text;
- ``\\r\\n`` with the CR and the LF in different tokens, and U+2028 (LINE SEPARATOR);
- markdown: a heading, a list, a fenced ``python`` code block;
- ``<`` / ``&`` / ``&amp;`` and ``<script>``-looking text split across tokens, to prove the app
  escapes and sanitizes model output.

May import: the standard library only (no Django).
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

__all__ = [
    "ECHO_MAX_WORDS",
    "answer_text",
    "count_prompt_tokens",
    "echo_words",
    "media_note",
    "message_text",
    "reasoning_text",
    "tool_result_answer",
]

#: How many words of the user's last message the answer echoes ("You said: …").
ECHO_MAX_WORDS = 8

# The tricky part of every answer, already split into tokens. Keep it compact: with the default
# ``length`` knob (64) the whole of it fits even when the echo is at its maximum.
_HARD_CASES: tuple[str, ...] = (
    "- ",
    "Emoji: ",
    "👩",
    "\u200d💻 ",  # ZWJ sequence 👩‍💻 split across two tokens
    "🎉 ",
    "👍🏽",
    "\n",
    "- ",
    "CJK: ",
    "你好",
    "，世界",
    "\n",
    "- ",
    "Accents: ",
    "café ",
    "naïve ",
    "Ångström",
    "\n",
    "- ",
    "Markup: ",
    "a < b ",
    "&& ",
    "c &amp; d ",
    "<",
    "script>alert(1)</",
    "script>",
    "\n\n",
    "```python",
    "\n",
    "def greet():",
    "\n",
    '    return "hi <b>"',
    "\n",
    "```",
    "\n\n",
    "Line one",
    "\r",  # CRLF split across two tokens
    "\nline two",
    "\u2028",
    "line three.",
    "\n\n",
)

_FILLER_SENTENCES: tuple[str, ...] = (
    "The simulator streams this text one token at a time.",
    "Every run with the same inputs produces the same pieces.",
    "Tokens per second depend on the delay between events.",
    "Time to first token is set by the ttft_ms knob.",
    "Reasoning can arrive in its own field or inline between think tags.",
    "Usage arrives in a final chunk unless the usage knob says otherwise.",
    "Faults can cut, stall or break the stream on purpose.",
    "Nothing here comes from a real model, so nothing here is true or false.",
    "Markdown is rendered on the server and sanitized before display.",
    "A stopped turn closes the connection and the simulator notices.",
    "Café, naïve and 東京 are here to keep the encoder honest.",
    "Small numbers like 3 < 4 & 5 > 2 must survive escaping.",
)

#: Headings of a regenerated answer (knob ``take`` > 1), picked by the prompt and the take.
_TAKE_HEADINGS: tuple[str, ...] = (
    "Another simulated answer",
    "A second look",
    "Simulated answer, retold",
    "One more try",
    "A different take",
)

_REASONING_HEAD: tuple[str, ...] = (
    "Check: ",
    "2 < 3 ",
    "& 3 > 2. ",
    "Hmm 🤔 ",
    "思考中… ",
)

_REASONING_SENTENCES: tuple[str, ...] = (
    "The user wants a short answer.",
    "A list and a code block will do.",
    "Keep the markdown simple.",
    "Mention the emoji and the CJK text.",
    "Do not forget the line separator.",
    "The answer should echo the question first.",
    "Consider whether anything needs escaping.",
    "That seems complete enough.",
)


def echo_words(prompt: str) -> tuple[list[str], bool]:
    """Return the first :data:`ECHO_MAX_WORDS` whitespace-separated words of ``prompt``.

    The second item is True when words were dropped (the echo then ends with "…").
    """
    words = prompt.split()
    return words[:ECHO_MAX_WORDS], len(words) > ECHO_MAX_WORDS


def _echo_tokens(prompt: str) -> list[str]:
    words, truncated = echo_words(prompt)
    tokens = [f"{w} " for w in words[:-1]]
    if words:
        tokens.append(words[-1] + ("…" if truncated else ""))
    return tokens


def _pick(seed: int, prompt: str, salt: str, n: int, size: int) -> int:
    digest = hashlib.sha256(f"{salt}\x00{seed}\x00{n}\x00{prompt}".encode()).digest()
    return int.from_bytes(digest[:4], "big") % size


def _filler(
    prompt: str,
    seed: int,
    salt: str,
    sentences: tuple[str, ...],
    paragraph_every: int,
    count: int,
) -> list[str]:
    """``count`` deterministic sentence tokens (words with a trailing space or paragraph break)."""
    out: list[str] = []
    n = 0
    while len(out) < count:
        words = sentences[_pick(seed, prompt, salt, n, len(sentences))].split(" ")
        n += 1
        out.extend(f"{w} " for w in words[:-1])
        out.append(words[-1] + ("\n\n" if n % paragraph_every == 0 else " "))
    return out[:count]


def answer_text(prompt: str, *, length_tokens: int, seed: int = 0, take: int = 1) -> list[str]:
    """Return exactly ``length_tokens`` tokens of the deterministic answer to ``prompt``.

    ``prompt`` is the text of the user's last message (what the answer echoes). The answer is
    markdown: a heading, "You said: “…”" (at most :data:`ECHO_MAX_WORDS` words), the hard cases
    listed in this module's docstring, then filler sentences chosen by ``seed`` and ``prompt``.
    A short ``length_tokens`` truncates the answer; 0 gives ``[]``. The pieces play the role of
    the ``delta.content`` strings of seed 000/002's ``ChatCompletionStreamResponse`` chunks.

    ``take`` (the ``take`` knob: which attempt at the same message this is, 1 = the first) > 1
    gives another answer to the same prompt, the same for the same prompt, seed and take: its
    heading names the take ("## Another simulated answer (take 2)", the words chosen by
    ``prompt``, ``seed`` and ``take``) and the filler varies with ``take``; the hard cases stay.
    ``take`` 1 is the answer without the knob, token for token.

    Raises ``ValueError`` when ``length_tokens`` is negative or ``take`` < 1.
    """
    if length_tokens < 0:
        raise ValueError("length_tokens must be >= 0")
    if take < 1:
        raise ValueError("take must be >= 1")
    salt = "answer" if take == 1 else f"answer\x00take{take}"
    if take == 1:
        head = ["## ", "Simulated ", "answer", "\n\n", "You ", "said: ", "“"]
    else:
        heading = _TAKE_HEADINGS[_pick(seed, prompt, salt, -1, len(_TAKE_HEADINGS))].split(" ")
        head = ["## ", *(f"{w} " for w in heading), f"(take {take})", "\n\n", "You ", "said: ", "“"]
    head += _echo_tokens(prompt)
    head += ["”", "\n\n"]
    tokens = (head + list(_HARD_CASES))[:length_tokens]
    missing = length_tokens - len(tokens)
    return tokens + _filler(prompt, seed, salt, _FILLER_SENTENCES, 3, missing)


def reasoning_text(prompt: str, *, length_tokens: int, seed: int = 0, take: int = 1) -> list[str]:
    """Return exactly ``length_tokens`` tokens of deterministic reasoning about ``prompt``.

    Starts "Let me think about “…”." (the echo), then a few hard characters (``<``, ``&``, an
    emoji, CJK), then filler sentences. Never contains ``<think>``/``</think>``. The pieces play
    the role of seed 002's ``CompletionResponseDelta.reasoning`` strings.

    ``take`` > 1 (a regenerate, see :func:`answer_text`) varies the filler sentences.

    Raises ``ValueError`` when ``length_tokens`` is negative.
    """
    if length_tokens < 0:
        raise ValueError("length_tokens must be >= 0")
    head = ["Let ", "me ", "think ", "about ", "“"]
    head += _echo_tokens(prompt)
    head += ["”. "]
    tokens = (head + list(_REASONING_HEAD))[:length_tokens]
    missing = length_tokens - len(tokens)
    salt = "reasoning" if take <= 1 else f"reasoning\x00take{take}"
    return tokens + _filler(prompt, seed, salt, _REASONING_SENTENCES, 4, missing)


def count_prompt_tokens(messages: list[dict[str, Any]]) -> int:
    """Deterministic prompt token count: whitespace words of every message's text + 4 each.

    ``messages`` are chat completion request messages (seed 002 ``ChatCompletionRequest``);
    ``content`` may be a string, ``None`` or a list of content parts (only ``text`` parts
    count).
    """
    total = 0
    for message in messages:
        total += 4 + len(message_text(message.get("content")).split())
    return total


def message_text(content: object) -> str:
    """The plain text of a message ``content`` (string, ``None`` or list of content parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif isinstance(part, str):
                parts.append(part)
        return " ".join(parts)
    return ""


def media_note(images: int, audios: int) -> list[str]:
    """Tokens saying what arrived: "I see 1 image. I hear 2 audio clips.\n\n" (``[]`` when
    nothing did). Put before the answer so a test can check attachments reached the model."""
    tokens: list[str] = []
    if images:
        tokens += ["I ", "see ", f"{images} ", "image" + ("s" if images != 1 else "") + ". "]
    if audios:
        tokens += ["I ", "hear ", f"{audios} ", "audio ", "clip" + ("s" if audios != 1 else "")]
        tokens.append(". ")
    if tokens:
        tokens[-1] = tokens[-1].rstrip() + "\n\n"
    return tokens


def tool_result_answer(result: str) -> list[str]:
    """Tokens of the answer to a tool result: "The tool returned: <result>" (the result as
    sent, split after whitespace, so its text appears verbatim)."""
    pieces = re.findall(r"\S+\s*|\s+", result)
    return ["The ", "tool ", "returned: ", *pieces]
