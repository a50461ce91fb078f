"""Runs one mode run: admission, upstream call, coalesced frames, heartbeat saves, final row.

Built from the chat runner's pieces: the per-process :class:`chat.turns.Admission` of
:data:`chat.turns.registry` (mode runs count against the same per-user and per-process bounds
and wait in the same queue), :class:`chat.metrics.TurnClock` and
:func:`chat.metrics.compute_metrics` (the same TTFT / tokens per second / total definitions),
the writer thread (:mod:`chat.db`: partial saves never awaited on the token path, one final
write), :class:`chat.textsafety.SecretFilter` (the key never reaches the page).

``push(dict)`` sends one JSON frame to the page (never awaits): ``{"t": "queued", "position"}``,
``{"t": "delta", "text", "lp": [[token, logprob], …]}`` at most once per
``PLAYGROUND_FRAME_INTERVAL_S``, and ``{"t": "final", "status"}`` once the row is written. The
task is not tied to the socket: a closed tab does not stop a run (``push`` becomes a no-op);
cancelling the task (Stop) ends it ``stopped`` with its text kept.

May import: Django settings, chat.db, chat.metrics, chat.textsafety, chat.turns, chat.providers,
chat.modes.services.
"""

from __future__ import annotations

import asyncio
import json
import logging
import struct
import time
import uuid
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from django.conf import settings

from chat import db
from chat.metrics import TurnClock, compute_metrics, usage_dict
from chat.modes import services
from chat.providers import openai_audio, openai_completions, openai_embeddings
from chat.providers.base import (
    EndpointConfig,
    Finish,
    LogprobsDelta,
    ProviderError,
    RawEvent,
    ResponseStarted,
    StreamWarning,
    TextDelta,
    Usage,
    scrub,
)
from chat.providers.errors import secret_variants
from chat.providers.http import get_client
from chat.textsafety import SecretFilter, finite, valid_text
from chat.turns import registry

log = logging.getLogger(__name__)

Push = Callable[[dict[str, Any]], None]

MAX_RAW_EVENTS = 2000
MAX_RAW_BYTES = 512 * 1024
MAX_LOGPROB_TOKENS = 8192
#: Largest embeddings result kept (bytes of float32): inputs × dims × 4.
MAX_VECTOR_BYTES = 32 * 1024 * 1024

#: Running mode tasks of this process, by run id (strong references; Stop cancels them).
RUNNING: dict[uuid.UUID, asyncio.Task[None]] = {}


def redacted_request(config: EndpointConfig, url: str, headers: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
    """``{"url", "headers", "body"}`` for Inspect: auth and extra header values redacted and
    every secret scrubbed."""
    secret_names = {"authorization", "x-api-key", *(h.lower() for h in config.extra_headers)}
    safe = {k: ("[REDACTED]" if k.lower() in secret_names else v) for k, v in headers.items()}
    text = json.dumps({"url": url, "headers": safe, "body": body})
    return json.loads(scrub(text, secret_variants(config.secrets())))


class _Slot:
    """What :class:`chat.turns.Admission` needs of a waiter: ``spec.user_id`` and
    ``queue_position``."""

    def __init__(self, user_id: int) -> None:
        self.spec = SimpleNamespace(user_id=user_id)
        self.queue_position = 0


async def _admitted(user_id: int, push: Push) -> _Slot:
    slot = _Slot(user_id)
    await registry.admission.acquire(slot, lambda s: push({"t": "queued", "position": s.queue_position}))  # type: ignore[arg-type]
    return slot


def _release(user_id: int) -> None:
    registry.admission.release(user_id, None)


def start(run_id: uuid.UUID, coro: Any) -> asyncio.Task[None]:
    """Run ``coro`` as the task of ``run_id`` (kept in :data:`RUNNING` until it ends)."""
    task = asyncio.get_running_loop().create_task(coro, name=f"mode-{run_id}")
    RUNNING[run_id] = task
    task.add_done_callback(lambda _t: RUNNING.pop(run_id, None))
    return task


def stop(run_id: uuid.UUID) -> bool:
    """Cancel a running run of this process; it saves itself as ``stopped``."""
    task = RUNNING.get(run_id)
    if task is None or task.done():
        return False
    task.cancel()
    return True


async def run_completion(run_id: uuid.UUID, user_id: int, config: EndpointConfig,
                         request: openai_completions.CompletionRequest, push: Push,
                         *, prompt_price: float | None = None, completion_price: float | None = None) -> None:
    """Stream one raw completion and store it (see the module docstring)."""
    frame_s = float(settings.PLAYGROUND_FRAME_INTERVAL_S)
    save_s = float(settings.PLAYGROUND_PARTIAL_SAVE_S)
    max_chars = int(getattr(settings, "PLAYGROUND_MAX_ANSWER_CHARS", 2_000_000))
    secrets = secret_variants(config.secrets())
    filt = SecretFilter(secrets)
    tc = TurnClock()
    pieces: list[str] = []
    pending: list[str] = []
    pending_lp: list[list[Any]] = []
    logprobs: list[dict[str, Any]] = []
    raw_events: list[dict[str, str]] = []
    raw_bytes = 0
    usage: Usage | None = None
    finish = ""
    status = "complete"
    error: dict[str, Any] = {}
    admitted = False
    last_frame = last_save = 0.0
    length = 0

    def flush() -> None:
        nonlocal last_frame
        if pending or pending_lp:
            push({"t": "delta", "text": "".join(pending), "lp": list(pending_lp)})
            pending.clear()
            pending_lp.clear()
        last_frame = time.monotonic()

    try:
        await _admitted(user_id, push)
        admitted = True
        events = openai_completions.stream(get_client(), config, request)
        tc.sent()
        async with asyncio.timeout(float(getattr(settings, "PLAYGROUND_MAX_TURN_S", 1800.0))):
            async for ev in events:
                if isinstance(ev, TextDelta):
                    tc.token(answer=True)
                    text = filt.feed(valid_text(ev.text))
                    if text:
                        pieces.append(text)
                        pending.append(text)
                        length += len(text)
                    if length > max_chars:
                        raise ProviderError(f"The completion reached the limit of {max_chars:,} characters "
                                            "(PLAYGROUND_MAX_ANSWER_CHARS); the text so far is kept.",
                                            code="limit_exceeded")
                elif isinstance(ev, RawEvent):
                    tc.byte()
                    if len(raw_events) < MAX_RAW_EVENTS and raw_bytes < MAX_RAW_BYTES:
                        raw_bytes += len(ev.data)
                        raw_events.append({"event": ev.event, "data": ev.data})
                elif isinstance(ev, LogprobsDelta):
                    if len(logprobs) < MAX_LOGPROB_TOKENS:
                        for t in ev.tokens:
                            logprobs.append({"token": valid_text(t.token), "logprob": t.logprob,
                                             "top": [[valid_text(a), b] for a, b in t.top]})
                            pending_lp.append([valid_text(t.token), t.logprob])
                elif isinstance(ev, Usage):
                    usage = ev
                elif isinstance(ev, Finish):
                    finish = ev.reason or ""
                elif isinstance(ev, ResponseStarted):
                    tc.byte()
                elif isinstance(ev, StreamWarning):
                    log.info("mode run %s: stream warning", run_id)
                now = time.monotonic()
                if now - last_frame >= frame_s:
                    flush()
                if now - last_save >= save_s and pieces:
                    last_save = now
                    fut = db.write_nowait(services.run_partial, run_id=run_id, output="".join(pieces))
                    fut.add_done_callback(lambda f: f.cancelled() or f.exception())
    except asyncio.CancelledError:
        status = "stopped"
    except TimeoutError:
        status, error = "error", {"message": "The completion took longer than PLAYGROUND_MAX_TURN_S; the text so far is kept.",
                                  "code": "turn_timeout"}
    except ProviderError as exc:
        status, error = "error", exc.as_dict()
    except Exception as exc:  # never a traceback to the user, always a stored status
        log.error("mode run %s failed: %s", run_id, type(exc).__name__, exc_info=True)
        status, error = "error", {"message": f"Internal error: {type(exc).__name__}", "code": "internal_error"}
    finally:
        if admitted:
            _release(user_id)
    tail = filt.flush()
    if tail:
        pieces.append(tail)
        pending.append(tail)
    flush()
    url, headers, body = openai_completions.build_request(config, request)
    metrics = compute_metrics(tc, usage, prompt_price_per_mtok=prompt_price, completion_price_per_mtok=completion_price)
    inspect = {"request": redacted_request(config, url, headers, body), "events": raw_events,
               "events_truncated": len(raw_events) >= MAX_RAW_EVENTS or raw_bytes >= MAX_RAW_BYTES}
    await _final(run_id, push, status, output=valid_text("".join(pieces)), finish_reason=finish[:40],
                 usage=finite(usage_dict(usage)), metrics=finite(metrics), error=finite(error),
                 inspect=finite(inspect), logprobs=finite(logprobs))


async def run_embeddings(run_id: uuid.UUID, user_id: int, config: EndpointConfig,
                         request: openai_embeddings.EmbeddingsRequest, push: Push,
                         *, prompt_price: float | None = None) -> None:
    """Embed the run's texts once and store the vectors (float32) with usage and latency."""
    tc = TurnClock()
    status, error = "complete", {}
    fields: dict[str, Any] = {}
    admitted = False
    raw = ""
    try:
        await _admitted(user_id, push)
        admitted = True
        client = get_client()
        tc.sent()
        result = await openai_embeddings.embed(client, config, request)
        tc.byte()
        raw = result.raw
        dims = len(result.vectors[0]) if result.vectors else 0
        if len(result.vectors) * dims * 4 > MAX_VECTOR_BYTES:
            raise ProviderError(f"The embeddings are larger than {MAX_VECTOR_BYTES // (1024 * 1024)} MiB; not kept.",
                                code="limit_exceeded")
        flat = [v for vector in result.vectors for v in vector]
        fields = {"vectors": struct.pack(f"<{len(flat)}f", *flat), "dims": dims,
                  "usage": finite(usage_dict(result.usage)),
                  "result": {"model": result.model, "request_id": result.request_id}}
    except asyncio.CancelledError:
        status = "stopped"
    except ProviderError as exc:
        status, error = "error", exc.as_dict()
    except Exception as exc:
        log.error("mode run %s failed: %s", run_id, type(exc).__name__, exc_info=True)
        status, error = "error", {"message": f"Internal error: {type(exc).__name__}", "code": "internal_error"}
    finally:
        if admitted:
            _release(user_id)
    metrics = compute_metrics(tc, None)
    metrics["latency_ms"] = metrics.get("total_ms")
    url, headers, body = openai_embeddings.build_request(config, request)
    inspect = {"request": redacted_request(config, url, headers, body),
               "events": [{"event": "", "data": raw[:MAX_RAW_BYTES]}] if raw else [],
               "events_truncated": len(raw) > MAX_RAW_BYTES}
    await _final(run_id, push, status, metrics=finite(metrics), error=finite(error), inspect=finite(inspect), **fields)


async def _final(run_id: uuid.UUID, push: Push, status: str, **fields: Any) -> None:
    try:
        await asyncio.shield(db.write(services.run_finish, run_id=run_id, status=status, **fields))
    except Exception as exc:
        log.error("final write of mode run %s failed: %s", run_id, type(exc).__name__)
        status = "error"
    push({"t": "final", "status": status})


async def run_audio(run_id: uuid.UUID, user_id: int, config: EndpointConfig, request: openai_audio.AudioRequest,
                    push: Push) -> None:
    """Transcribe or translate one file; streamed text goes out as deltas (TTFT and total
    measured as for chat); segments, usage and the text are stored once."""
    frame_s = float(settings.PLAYGROUND_FRAME_INTERVAL_S)
    secrets = secret_variants(config.secrets())
    filt = SecretFilter(secrets)
    tc = TurnClock()
    pieces: list[str] = []
    pending: list[str] = []
    raw_events: list[dict[str, str]] = []
    raw_bytes = 0
    usage: Usage | None = None
    result: dict[str, Any] = {}
    finish = ""
    status, error = "complete", {}
    admitted = False
    last_frame = 0.0

    def flush() -> None:
        nonlocal last_frame
        if pending:
            push({"t": "delta", "text": "".join(pending), "lp": []})
            pending.clear()
        last_frame = time.monotonic()

    try:
        await _admitted(user_id, push)
        admitted = True
        events = openai_audio.stream(get_client(), config, request)
        tc.sent()
        async with asyncio.timeout(float(getattr(settings, "PLAYGROUND_MAX_TURN_S", 1800.0))):
            async for ev in events:
                if isinstance(ev, TextDelta):
                    tc.token(answer=True)
                    piece = filt.feed(valid_text(ev.text))
                    if piece:
                        pieces.append(piece)
                        pending.append(piece)
                elif isinstance(ev, RawEvent):
                    tc.byte()
                    if len(raw_events) < MAX_RAW_EVENTS and raw_bytes < MAX_RAW_BYTES:
                        raw_bytes += len(ev.data)
                        raw_events.append({"event": ev.event, "data": ev.data})
                elif isinstance(ev, openai_audio.Segments):
                    result = {"segments": [{**s, "text": valid_text(s["text"])} for s in ev.items[:10_000]],
                              "duration": ev.duration, "language": ev.language}
                elif isinstance(ev, Usage):
                    usage = ev
                elif isinstance(ev, Finish):
                    finish = ev.reason or ""
                elif isinstance(ev, ResponseStarted):
                    tc.byte()
                if time.monotonic() - last_frame >= frame_s:
                    flush()
    except asyncio.CancelledError:
        status = "stopped"
    except TimeoutError:
        status, error = "error", {"message": "The transcription took longer than PLAYGROUND_MAX_TURN_S.", "code": "turn_timeout"}
    except ProviderError as exc:
        status, error = "error", exc.as_dict()
    except Exception as exc:
        log.error("mode run %s failed: %s", run_id, type(exc).__name__, exc_info=True)
        status, error = "error", {"message": f"Internal error: {type(exc).__name__}", "code": "internal_error"}
    finally:
        if admitted:
            _release(user_id)
    tail = filt.flush()
    if tail:
        pieces.append(tail)
        pending.append(tail)
    flush()
    url, headers, fields = openai_audio.build_request(config, request)
    metrics = compute_metrics(tc, usage)
    inspect = {"request": redacted_request(config, url, headers, fields), "events": raw_events,
               "events_truncated": len(raw_events) >= MAX_RAW_EVENTS or raw_bytes >= MAX_RAW_BYTES}
    await _final(run_id, push, status, output=valid_text("".join(pieces)), finish_reason=finish[:40],
                 usage=finite(usage_dict(usage)), metrics=finite(metrics), error=finite(error),
                 inspect=finite(inspect), result=finite(result))
