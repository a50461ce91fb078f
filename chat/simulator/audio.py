"""``POST /audio/transcriptions`` and ``POST /audio/translations`` (seed 002
``TranscriptionRequest`` / ``TranslationRequest``, ``multipart/form-data``).

Deterministic: the audio's duration (a WAV's frames ÷ rate via the stdlib ``wave`` module, else
bytes ÷ 16000 s) cuts it into segments of :data:`SEGMENT_S` seconds; each segment's words come
from a SHA-256 of the audio bytes, the segment number and the task (a translation says other
words than a transcription of the same file).

``response_format``: ``json`` (default; ``{"text"}``) and ``text`` (``text/plain``), as seed 002
lists them; ``verbose_json`` is OpenAI's extension the issue asks for (``{task, language,
duration, text, segments: [{id, start, end, text}]}``, not in seed 002). ``stream=true``:
seed 002's ``TranscriptionStreamResponse`` chunks (``chat.completion.chunk`` objects with
``delta.content``, one per segment), a finish chunk, a usage chunk with ``choices: []`` when
``stream_options[include_usage]`` is true, ``data: [DONE]``. Knobs (``ttft_ms``, ``delay_ms``,
faults) work as for chat through the model name or ``X-Simulator-Options``.

Errors: seed 002's ``missing_model`` example; ``invalid_param`` for a missing file, an unknown
``response_format`` or ``language``; files over :data:`MAX_FILE_BYTES` get 413.

May import: the standard library and this package (no Django).
"""

from __future__ import annotations

import hashlib
import io
import math
import time
import uuid
import wave
from email.parser import BytesParser
from email.policy import HTTP
from typing import Any

from .errors import fault_response, missing_key_error, stream_error_chunk, validation_error
from .knobs import KnobError, parse_knobs, split_model
from .wire import Exchange, Frame, StreamContext, run_stream

__all__ = ["SEGMENT_S", "handle_transcriptions", "handle_translations", "parse_multipart", "segments_for"]

AUDIO_MODEL = "sim-whisper"
SEGMENT_S = 2.0
MAX_FILE_BYTES = 25 * 1024 * 1024  # seed 002: "File size limit is 25MB"
FORMATS = ("json", "text", "verbose_json")
LANGUAGES = ("en", "es", "fr", "de", "it", "pt", "nl", "ja", "zh", "ru")
_WORDS = ("the", "bell", "rings", "over", "a", "quiet", "town", "while", "church", "morning", "light", "falls",
          "softly", "on", "old", "stone", "streets", "and", "people", "listen")


def parse_multipart(raw: bytes) -> dict[str, tuple[bytes, str, str]] | None:
    """``{name: (bytes, filename, content_type)}`` of a ``multipart/form-data`` body (the
    boundary read from its first line), or None when it is not one."""
    first, _, _ = raw.partition(b"\r\n")
    if not first.startswith(b"--") or len(first) < 3:
        return None
    boundary = first[2:].decode("latin-1")
    message = BytesParser(policy=HTTP).parsebytes(
        f'Content-Type: multipart/form-data; boundary="{boundary}"\r\n\r\n'.encode("latin-1") + raw)
    if not message.is_multipart():
        return None
    out: dict[str, tuple[bytes, str, str]] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if not name:
            continue
        payload = part.get_payload(decode=True) or b""
        out[str(name)] = (payload, str(part.get_filename() or ""), part.get_content_type())
    return out


def _duration(audio: bytes) -> float:
    try:
        with wave.open(io.BytesIO(audio)) as w:
            return w.getnframes() / float(w.getframerate() or 1)
    except (wave.Error, EOFError, ValueError):
        return len(audio) / 16000.0


def segments_for(audio: bytes, task: str) -> tuple[float, list[dict[str, Any]]]:
    """``(duration_s, segments)``: one segment ``{id, start, end, text}`` per started
    :data:`SEGMENT_S` seconds (at least one)."""
    duration = round(_duration(audio), 3)
    count = max(1, math.ceil(duration / SEGMENT_S))
    digest = hashlib.sha256(audio).hexdigest()
    segments = []
    for i in range(count):
        h = hashlib.sha256(f"{digest}:{task}:{i}".encode()).digest()
        words = [_WORDS[b % len(_WORDS)] for b in h[: 4 + h[31] % 4]]
        text = " ".join(words).capitalize() + "."
        segments.append({"id": i, "start": round(i * SEGMENT_S, 2), "end": round(min(duration, (i + 1) * SEGMENT_S), 2),
                         "text": text})
    return duration, segments


async def handle_transcriptions(ex: Exchange, options: str | None, raw: bytes) -> None:
    """Answer one ``POST /audio/transcriptions``."""
    await _handle(ex, options, raw, "transcribe")


async def handle_translations(ex: Exchange, options: str | None, raw: bytes) -> None:
    """Answer one ``POST /audio/translations`` (always English)."""
    await _handle(ex, options, raw, "translate")


def _field(form: dict[str, tuple[bytes, str, str]], name: str) -> str:
    value = form.get(name)
    return value[0].decode("utf-8", errors="replace").strip() if value else ""


async def _handle(ex: Exchange, options: str | None, raw: bytes, task: str) -> None:
    rid = ex.request_id
    ex.record.dialect = "openai_audio"
    form = parse_multipart(raw)
    if form is None:
        await ex.error(validation_error("invalid_param", request_id=rid, param="body", value="not multipart/form-data"))
        return
    if ex.record.keep:
        ex.record.body = {k: (f"<{len(v[0])} bytes {v[2]} {v[1]}>" if v[1] else v[0].decode("utf-8", "replace")[:500])
                          for k, v in form.items()}
    model = _field(form, "model")
    if not model:
        await ex.error(validation_error("missing_model", request_id=rid))
        return
    try:
        knobs = parse_knobs(model, options)
    except KnobError as exc:
        await ex.error(validation_error("invalid_option", request_id=rid, message=str(exc), param=exc.param))
        return
    base = split_model(model)[0]
    ex.record.model = base
    if knobs.require_key and not ex.api_key:
        await ex.error(missing_key_error(rid))
        return
    if knobs.http_fault:
        await ex.error(fault_response(knobs.http_fault, **ex.fault_args(base, knobs.retry_after)))
        return
    if base != AUDIO_MODEL:
        await ex.error(validation_error("model_not_found", request_id=rid, model=base))
        return
    audio = form.get("file")
    if audio is None or not audio[0]:
        await ex.error(validation_error("invalid_param", request_id=rid, param="file", value="missing"))
        return
    if len(audio[0]) > MAX_FILE_BYTES:
        await ex.error(fault_response("413", **ex.fault_args(base, 0)))
        return
    fmt = _field(form, "response_format") or "json"
    if fmt not in FORMATS:
        await ex.error(validation_error("invalid_param", request_id=rid, param="response_format", value=fmt))
        return
    language = _field(form, "language")
    if language and language not in LANGUAGES:
        await ex.error(validation_error("invalid_param", request_id=rid, param="language", value=language))
        return
    duration, segments = segments_for(audio[0], task)
    text = " ".join(s["text"] for s in segments)
    stream = _field(form, "stream").lower() == "true"
    ex.record.stream = stream
    created = time.time()
    cid = str(uuid.UUID(hex=hashlib.sha256(audio[0] + task.encode()).hexdigest()[:32]))
    tokens = [len(s["text"].split()) + 1 for s in segments]
    usage = {"completion_tokens": sum(tokens), "prompt_tokens": max(1, int(duration * 10)),
             "total_tokens": sum(tokens) + max(1, int(duration * 10)), "time_to_first_token": knobs.ttft_ms / 1000,
             "total_latency": (knobs.ttft_ms + knobs.delay_ms * max(0, len(segments) - 1)) / 1000,
             "is_last_response": True}
    if stream:
        def chunk(choices: list[dict[str, Any]], with_usage: bool = False) -> dict[str, Any]:
            out: dict[str, Any] = {"choices": choices, "created": created, "id": cid, "model": base,
                                   "object": "chat.completion.chunk", "system_fingerprint": "simulator"}
            if with_usage:
                out["usage"] = usage
            return out

        frames = [Frame("content", obj=chunk([{"delta": {"content": s["text"] + (" " if i < len(segments) - 1 else "")},
                                               "index": 0, "finish_reason": None, "logprobs": None}]),
                        tokens=tokens[i], token=True) for i, s in enumerate(segments)]
        frames.append(Frame("finish", obj=chunk([{"delta": {"content": ""}, "index": 0, "finish_reason": "stop",
                                                  "logprobs": None}]), tail=True))
        if _field(form, "stream_options[include_usage]").lower() == "true" or knobs.usage != "none":
            frames.append(Frame("usage", obj=chunk([], with_usage=True), tail=True))
        frames.append(Frame("done", raw="data: [DONE]\n\n", tail=True))
        await run_stream(ex, StreamContext(knobs), frames, lambda fault: [Frame("error", obj=stream_error_chunk(rid))])
        return
    if not await ex.wait_latency(knobs, len(segments)):
        return
    if fmt == "text":
        await ex.start(200, [("content-type", "text/plain; charset=utf-8")])
        await ex.write(text, "body", sum(tokens))
        await ex.end("complete")
        return
    body: dict[str, Any] = {"text": text}
    if fmt == "verbose_json":
        body = {"task": task, "language": "en" if task == "translate" else (language or "en"), "duration": duration,
                "text": text, "segments": segments}
    await ex.json(200, body, tokens=sum(tokens))
