"""Small helpers shared by tests: reading frames and what the simulator sent."""

from __future__ import annotations

import html
import json
import re
from typing import Any

DELTA_RE = re.compile(
    r'<div hx-swap-oob="beforeend:#m-(?P<mid>[0-9a-f-]+)-(?P<kind>text|reasoning)" '
    r'data-start="(?P<start>\d+)" data-end="(?P<end>\d+)">(?P<body>.*?)</div>',
    re.S,
)


def deltas(frames: list[str]) -> list[dict[str, Any]]:
    """Every delta in ``frames`` as dicts (mid, kind, start, end, text unescaped)."""
    out = []
    for f in frames:
        for m in DELTA_RE.finditer(f):
            out.append({
                "mid": m["mid"], "kind": m["kind"], "start": int(m["start"]), "end": int(m["end"]),
                "text": html.unescape(m["body"]),
            })
    return out


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
