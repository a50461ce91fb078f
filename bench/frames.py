"""What the benchmark reads from the relay's websocket frames: the one place to adapt when the
frame format changes.

The relay is measured only through its public interface (``/ws/c/<id>/`` frames, see
``chat/frames.py`` and DESIGN.md "A turn, end to end"). A frame may carry several of:

- text deltas, parsed by ``tests.helpers.deltas`` (the tests' own parser of the delta
  envelope, kept in step with the server by the test suite), each ``{"kind": "text" |
  "reasoning", "start", "end", "text"}`` with offsets in code points;
- the turn-started mark: the user message and the assistant skeleton appended to the thread
  (``hx-swap-oob="beforeend:#thread"``);
- a final status: the message foot marked ``data-final`` (``tests.helpers.FINAL_RE``: the
  final frame of a streamed turn swaps the head and the foot; a whole message sent after a
  reload carries the same marked foot);
- a notice (``<div id="notice">``): a refusal ends the turn, news about another tab ("An
  answer in …") does not.

Anything else (snapshots, form resets, sidebar updates) only counts in frames and bytes.

May import: the standard library, ``tests.helpers``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from tests.helpers import FINAL_RE, deltas

NOTICE_RE = re.compile(r'<div id="notice"[^>]*>(?P<text>.*?)</div>', re.S)
STARTED_MARK = 'hx-swap-oob="beforeend:#thread"'
FINAL_MARK = 'data-final="1"'


@dataclass
class Frame:
    """One classified frame (a frame may be several things at once, e.g. a last delta and
    the final message): its text ``deltas``, whether it is the turn-started frame, the final
    ``status`` ("" when not final) and the ``notice`` text ("" when none)."""

    deltas: list[dict[str, Any]] = field(default_factory=list)
    started: bool = False
    status: str = ""
    notice: str = ""


def classify(msg: str) -> Frame:
    """Classify one websocket text frame (see the module docstring)."""
    f = Frame(deltas=deltas([msg]))
    if STARTED_MARK in msg:
        f.started = True
    if FINAL_MARK in msg:
        m = FINAL_RE.search(msg)
        if m:
            f.status = m["status"]
    n = NOTICE_RE.search(msg)
    if n:
        f.notice = n["text"]
    return f


def is_refusal(notice_text: str) -> bool:
    """Whether a notice ends the turn that is waiting for frames (a refusal such as "busy"),
    as opposed to news about another tab's answer."""
    return "An answer in" not in notice_text
