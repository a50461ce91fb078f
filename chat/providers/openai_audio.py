"""Adapter for ``POST {base}/audio/transcriptions`` and ``/audio/translations`` (seed 002
``TranscriptionRequest`` / ``TranslationRequest``: ``multipart/form-data``).

The answer comes in one of the seed's shapes: ``application/json`` ``{"text"}``
(``response_format=json``), ``text/plain`` (``text``), OpenAI's ``verbose_json`` with
``segments`` (an extension the seed does not list), or, with ``stream=true``, SSE
``TranscriptionStreamResponse`` chunks (``delta.content``, usage on the last chunk). Events: the
shared vocabulary (``ResponseStarted``, ``RawEvent``, ``TextDelta``, ``Usage``, ``Finish``)
plus :class:`Segments` for timed segments. Strings pass the same
:class:`chat.providers.text.StreamGuard` as every stream (valid Unicode, answer budget, raw
budget); errors are parsed as for chat (:func:`chat.providers.errors.parse_error`).

May import: the standard library, httpx and this package (no Django).
"""

from __future__ import annotations

import contextlib
import secrets as _secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx

from .base import EndpointConfig, Event, Finish, ProviderError, ResponseStarted, TextDelta
from .errors import (
    error_from_event,
    parse_error,
    request_id_from_headers,
    route_error,
    secret_variants,
)
from .http import (
    INCOMPLETE,
    NOT_JSON,
    build_http_request,
    iter_sse,
    loads,
    read_body,
    send_stream,
    transport_error,
)
from .openai_chat import _auth_headers, normalize_usage
from .text import StreamGuard

API_STYLE = "openai_audio"
PATHS = {"transcription": "/audio/transcriptions", "translation": "/audio/translations"}
#: Seed 002: "FLAC, MP3, MP4, MPEG, MPGA, M4A, Ogg, WAV, or WebM … File size limit is 25MB."
EXTENSIONS = ("flac", "mp3", "mp4", "mpeg", "mpga", "m4a", "ogg", "wav", "webm")
MAX_FILE_BYTES = 25 * 1024 * 1024
RESPONSE_FORMATS = ("json", "text", "verbose_json")


@dataclass(frozen=True)
class AudioRequest:
    """One transcription or translation. ``task``: ``transcription`` | ``translation``;
    ``audio``: the file's bytes with its ``filename`` and ``media_type``; ``language``
    (ISO-639-1, the input's language), ``prompt``, ``response_format`` (one of
    :data:`RESPONSE_FORMATS`), ``temperature`` (None: unset), ``stream``."""

    task: str
    model: str
    audio: bytes
    filename: str = "audio.wav"
    media_type: str = "audio/wav"
    language: str = ""
    prompt: str = ""
    response_format: str = "json"
    temperature: float | None = None
    stream: bool = False

    def __repr__(self) -> str:
        return f"AudioRequest({self.task}, {self.model!r}, {len(self.audio)} bytes)"


@dataclass(frozen=True)
class Segments:
    """Timed segments of a ``verbose_json`` answer: ``({"id", "start", "end", "text"}, …)``
    with times in seconds; ``duration`` (s) and ``language`` when the server said."""

    items: tuple[dict[str, Any], ...]
    duration: float | None = None
    language: str = ""


def form_fields(request: AudioRequest) -> dict[str, str]:
    """The text fields of the multipart body (what was set), in order."""
    fields = {"model": request.model}
    if request.language:  # the input's language, for translations too (seed 002's example)
        fields["language"] = request.language
    if request.prompt:
        fields["prompt"] = request.prompt
    if request.response_format:
        fields["response_format"] = request.response_format
    if request.temperature is not None:
        fields["temperature"] = repr(float(request.temperature))
    if request.stream:
        fields["stream"] = "true"
        fields["stream_options[include_usage]"] = "true"
    return fields


def encode_multipart(request: AudioRequest, boundary: str | None = None) -> tuple[bytes, str]:
    """``(body, content_type)`` of the ``multipart/form-data`` request (RFC 7578)."""
    boundary = boundary or "----playground" + _secrets.token_hex(12)
    out = bytearray()
    for name, value in form_fields(request).items():
        out += f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'.encode()
        out += value.encode("utf-8") + b"\r\n"
    safe_name = "".join(c for c in request.filename if c.isalnum() or c in "._-") or "audio"
    out += (f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{safe_name}"\r\n'
            f"Content-Type: {request.media_type or 'application/octet-stream'}\r\n\r\n").encode()
    out += request.audio + b"\r\n" + f"--{boundary}--\r\n".encode()
    return bytes(out), f"multipart/form-data; boundary={boundary}"


def build_request(config: EndpointConfig, request: AudioRequest) -> tuple[str, dict[str, str], dict[str, Any]]:
    """``(url, headers, fields)`` for Inspect and View code: the text fields plus
    ``file`` as ``"@<filename>"`` (the bytes are not shown). Headers carry the key."""
    url = config.base_url.rstrip("/") + PATHS[request.task]
    headers = _auth_headers(config, "text/event-stream" if request.stream else "application/json")
    headers.update(config.extra_headers)
    return url, headers, {**form_fields(request), "file": f"@{request.filename}"}


def _json_events(payload: Any, text: str, secrets: list[str]) -> list[Event]:
    if isinstance(payload, dict) and payload.get("error"):
        raise error_from_event(payload, text, secrets)
    if not isinstance(payload, dict) or not isinstance(payload.get("text"), str):
        raise ProviderError("The transcription answer has no text", code="bad_response", body_excerpt=text[:300])
    events: list[Event] = [TextDelta(payload["text"])]
    segments = payload.get("segments")
    if isinstance(segments, list):
        items = []
        for seg in segments:
            if isinstance(seg, dict) and isinstance(seg.get("text"), str):
                start, end = seg.get("start"), seg.get("end")
                items.append({"id": seg.get("id", len(items)), "text": seg["text"],
                              "start": float(start) if isinstance(start, (int, float)) else None,
                              "end": float(end) if isinstance(end, (int, float)) else None})
        duration = payload.get("duration")
        events.append(Segments(tuple(items), float(duration) if isinstance(duration, (int, float)) else None,
                               str(payload.get("language") or "")))
    if isinstance(payload.get("usage"), dict):
        events.append(normalize_usage(payload["usage"]))
    events.append(Finish("stop"))
    return events


def _chunk_events(payload: Any, data: str, secrets: list[str], state: dict[str, bool]) -> list[Event]:
    if not isinstance(payload, dict):
        return []
    if payload.get("error"):
        raise error_from_event(payload, data, secrets)
    events: list[Event] = []
    for choice in payload.get("choices") or []:
        if not isinstance(choice, dict) or choice.get("index", 0) != 0:
            continue
        delta = choice.get("delta") if isinstance(choice.get("delta"), dict) else {}
        if isinstance(delta.get("content"), str) and delta["content"]:
            events.append(TextDelta(delta["content"]))
        if choice.get("finish_reason") and not state["finished"]:
            state["finished"] = True
            events.append(Finish(str(choice["finish_reason"])))
    if isinstance(payload.get("usage"), dict) and payload["usage"]:
        events.append(normalize_usage(payload["usage"]))
    return events


async def stream(client: httpx.AsyncClient, config: EndpointConfig, request: AudioRequest) -> AsyncIterator[Event]:
    """Send the file and yield the answer as events (see the module docstring). Raises
    ``ProviderError`` only: parsed non-2xx answers, ``stream_cut``, ``limit_exceeded``,
    ``bad_response``, transport codes."""
    limits = config.effective_limits()
    secrets = secret_variants(config.secrets())
    url, headers, _ = build_request(config, request)
    body, content_type = encode_multipart(request)
    headers = {**headers, "Content-Type": content_type}
    http_request = build_http_request(client, "POST", url, headers, secrets, config, content=body)
    guard = StreamGuard(limits, secrets)
    failure: httpx.HTTPError | None = None
    started = False
    state = {"finished": False}
    try:
        async with send_stream(client, http_request) as response:
            started = True
            if not response.is_success:
                raw = await read_body(response, limits.max_error_body_bytes, truncate=True,
                                      limits_decoded=limits.max_decoded_bytes)
                raise route_error(parse_error(response.status_code, response.headers, raw, secrets), raw, url, API_STYLE)
            yield ResponseStarted(response.status_code, request_id_from_headers(response.headers))
            content = response.headers.get("content-type", "").lower()
            if "event-stream" not in content:
                raw = await read_body(response, limits.max_json_body_bytes, truncate=False,
                                      limits_decoded=limits.max_decoded_bytes)
                text = raw.decode("utf-8", errors="replace")
                yield guard.raw("", text)
                if "json" in content:
                    payload = loads(text)
                    if payload is NOT_JSON:
                        raise ProviderError("The transcription answer is not JSON", code="bad_response",
                                            body_excerpt=guard.scrub(text)[:300])
                    events = _json_events(payload, text, secrets)
                else:
                    events = [TextDelta(text), Finish("stop")]
                for event in guard.process(events) + guard.flush():
                    yield event
                if guard.error is not None:
                    raise guard.error
                return
            done = False
            async with contextlib.aclosing(iter_sse(response, limits)) as sse_events:
                async for name, data in sse_events:
                    if not data and not name:
                        continue
                    if name is INCOMPLETE:
                        yield guard.warning(data, "incomplete_event")
                        continue
                    yield guard.raw(name, data)
                    if data.strip() == "[DONE]":
                        done = True
                        break
                    payload = loads(data)
                    if payload is NOT_JSON:
                        yield guard.warning(data)
                        continue
                    for event in guard.process(_chunk_events(payload, data, secrets, state)):
                        yield event
                    if guard.error is not None:
                        raise guard.error
            for event in guard.flush():
                yield event
            if not done and not state["finished"]:
                raise ProviderError("The stream ended before the transcription was complete", code="stream_cut")
    except httpx.HTTPError as exc:
        failure = exc
    if failure is not None:
        raise transport_error(failure, httpx.URL(url).host, secrets, started=started)
