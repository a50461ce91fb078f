"""Small helpers shared by tests: reading frames and what the simulator sent."""

from __future__ import annotations

import html
import json
import re
from typing import Any

DELTA_RE = re.compile(
    r'<x-d (?:hx-swap-oob="beforeend:#|i=)(?P<kind>[tr])(?P<k>[0-9a-f]{10})"? s=(?P<start>\d+) e=(?P<end>\d+)>(?P<body>.*?)</x-d>',
    re.S,
)
BLOCKS_RE = re.compile(
    r'<x-b (?:hx-swap-oob="beforeend:#|i=)(?P<kind>[tr])(?P<k>[0-9a-f]{10})"? u=(?P<upto>\d+)>(?P<html>.*?)</x-b>', re.S,
)
# The end of a turn: the foot marked data-final (the final frame of a streamed turn, or a whole
# message sent after a reload or from another process).
FINAL_RE = re.compile(
    r'<div class="msg-foot" id="f[0-9a-f]{10}" data-mid="(?P<mid>[0-9a-f-]+)" '
    r'data-status="(?P<status>complete|error|stopped|interrupted)" data-final="1"'
)
# The message skeleton (turn started) of an answer.
ANSWER_RE = re.compile(r'<article id="m-(?P<mid>[0-9a-f-]+)" class="msg msg-assistant')


def key(mid: str) -> str:
    return mid.replace("-", "")[:10]


def deltas(frames: list[str]) -> list[dict[str, Any]]:
    """Every delta in ``frames`` as dicts (k, kind "text"|"reasoning", start, end, text unescaped)."""
    out = []
    for f in frames:
        for m in DELTA_RE.finditer(f):
            out.append({
                "k": m["k"], "kind": "text" if m["kind"] == "t" else "reasoning", "start": int(m["start"]),
                "end": int(m["end"]), "text": html.unescape(m["body"]),
            })
    return out


def block_frames(frames: list[str], kind: str = "text") -> list[dict[str, Any]]:
    """Every blocks frame of ``kind``: ``{"k", "upto", "html"}`` in order."""
    want = "t" if kind == "text" else "r"
    return [
        {"k": m["k"], "upto": int(m["upto"]), "html": m["html"]}
        for f in frames for m in BLOCKS_RE.finditer(f) if m["kind"] == want
    ]


def streamed_blocks(frames: list[str], kind: str = "text") -> str:
    """The HTML of every block streamed for ``kind``, concatenated (equals the final render)."""
    return "".join(b["html"] for b in block_frames(frames, kind))


def is_delta(frame: str) -> bool:
    return "<x-d " in frame


def joined(frames: list[str], kind: str = "text") -> str:
    """Join deltas of one kind, checking offsets are contiguous (nothing missing or twice)."""
    text = ""
    for d in deltas(frames):
        if d["kind"] != kind:
            continue
        assert d["start"] == len(text), f"gap or overlap at {d['start']} (have {len(text)})"
        assert d["end"] == d["start"] + len(d["text"])
        text += d["text"]
    return text


def sim_text(record: dict[str, Any], field: str = "content") -> str:
    """The text the simulator streamed in one recorded request (``content`` or ``reasoning``)."""
    out = []
    for ev in record["events"]:
        data = ev["data"]
        for line in data.split("\n"):  # not splitlines(): U+2028 is text here
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            try:
                chunk = json.loads(line[6:])
            except ValueError:
                continue
            for choice in chunk.get("choices") or []:
                piece = (choice.get("delta") or {}).get(field)
                if piece:
                    out.append(piece)
    return "".join(out)


def chat_requests(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if r["path"].endswith("/chat/completions")]


SNAP_RE = re.compile(
    r'id="(?P<kind>[tr])(?P<k>[0-9a-f]{10})" data-end="(?P<end>\d+)" data-u="(?P<upto>\d+)">(?P<body>.*?)'
    r'<div class="md-open" dir="auto"></div>(?:<template class="md-src">(?P<open>.*?)</template>)?</div>',
    re.S,
)


def snapshot_state(frame: str, kind: str = "text") -> dict[str, Any]:
    """What a snapshot (or page) shows of a streamed text: ``end`` (characters received),
    ``upto`` (covered by rendered blocks), ``blocks`` (their HTML) and ``open`` (the raw open
    text the browser renders)."""
    want = "t" if kind == "text" else "r"
    for m in SNAP_RE.finditer(frame):
        if m["kind"] == want:
            return {"end": int(m["end"]), "upto": int(m["upto"]), "blocks": m["body"],
                    "open": html.unescape(m["open"] or "")}
    raise AssertionError(f"no {kind} state in frame")
