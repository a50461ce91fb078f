"""The seed's non-chat endpoints (seed 002): ``POST /completions`` and ``POST /embeddings``.

- ``/completions`` (seed 002 ``CompletionRequest``): a raw ``prompt`` continued by the same
  deterministic planner as chat (the prompt plays the user message, knobs in the model name
  or ``X-Simulator-Options`` apply). Streamed: SSE ``CompletionStreamResponse`` chunks whose
  choices carry ``text`` (seed 002 ``CompletionChunkChoice``), a finish chunk, a usage chunk
  with ``choices: []`` and SambaNova's timing fields, ``data: [DONE]``. Not streamed: one
  ``CompletionResponse`` (``choices[0].text``). ``logprobs`` (int ≥ 0 or true) adds OpenAI's
  legacy ``{tokens, token_logprobs, top_logprobs: [{token: logprob}], text_offset}`` per chunk.
- ``/embeddings`` (seed 002 ``EmbeddingsRequest``): deterministic unit vectors of
  :data:`EMBED_DIM` floats per input, from the hashed words of the text (texts sharing words are
  similar), ``encoding_format`` ``float`` (default) or ``base64`` (little-endian float32);
  usage ``{prompt_tokens, total_tokens}``. Model :data:`EMBED_MODEL` (or any chat model of
  :data:`chat.simulator.knobs.MODELS`); inputs over :data:`EMBED_MAX_TOKENS` simulated tokens
  get a 400.

Errors use seed 002's examples (``missing_model``, ``model_not_found``, ``invalid_json``).

May import: the standard library and this package (no Django).
"""

from __future__ import annotations

import base64
import hashlib
import math
import re
import struct
import time
import uuid
from typing import Any

from .completions import SYSTEM_FINGERPRINT, _usage
from .completions import _Chat as _ChatState
from .errors import (
    fault_response,
    general_error,
    missing_key_error,
    stream_error_chunk,
    validation_error,
)
from .knobs import MODELS, KnobError, parse_knobs, split_model
from .plan import build_plan, request_digest, token_logprobs
from .recorder import Recorder
from .request import chat_turn
from .wire import Exchange, Frame, StreamContext, run_stream

__all__ = ["EMBED_DIM", "EMBED_MODEL", "embed_text", "handle_completions", "handle_embeddings"]

#: The simulator's embeddings model and its vector length.
EMBED_MODEL = "sim-embed"
EMBED_DIM = 64
#: Largest input the embeddings model takes, in simulated tokens (words and punctuation).
EMBED_MAX_TOKENS = 512
#: Most inputs per embeddings request.
EMBED_MAX_INPUTS = 256

_WORD = re.compile(r"\w+|[^\w\s]", re.UNICODE)


def _tokens(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def embed_text(text: str, dim: int = EMBED_DIM) -> list[float]:
    """The simulator's embedding of ``text``: a unit vector of ``dim`` floats (float32-exact),
    the normalised sum of one pseudo-random vector per word (SHA-256 of the word), plus a small
    component of the whole text so two different texts never coincide."""
    acc = [0.0] * dim
    words = _tokens(text) or [""]
    for word in [*words, "\x00" + text]:
        weight = 1.0 if not word.startswith("\x00") else 0.25
        digest = b""
        counter = 0
        while len(digest) < dim:
            digest += hashlib.sha256(f"{counter}:{word}".encode()).digest()
            counter += 1
        for i in range(dim):
            acc[i] += weight * (digest[i] / 127.5 - 1.0)
    norm = math.sqrt(sum(v * v for v in acc)) or 1.0
    # Round through float32 so float and base64 encodings decode to the same numbers.
    return [struct.unpack("<f", struct.pack("<f", v / norm))[0] for v in acc]


async def _common(ex: Exchange, options: str | None, raw: bytes, dialect: str) -> tuple[dict, Any, str] | None:
    """Decode the body, parse knobs, check key, model and faults. None when answered."""
    rid = ex.request_id
    ex.record.dialect = dialect
    try:
        body = Recorder.set_body(ex.record, raw, ex.api_key)
    except ValueError:
        body = None
    if not isinstance(body, dict):
        await ex.error(validation_error("invalid_json", request_id=rid))
        return None
    model = body.get("model")
    if not isinstance(model, str) or not model.strip():
        await ex.error(validation_error("missing_model", request_id=rid))
        return None
    try:
        knobs = parse_knobs(model, options)
    except KnobError as exc:
        await ex.error(validation_error("invalid_option", request_id=rid, message=str(exc), param=exc.param))
        return None
    base = split_model(model)[0]
    ex.record.model = base
    ex.record.knobs = knobs.as_dict()
    if knobs.require_key and not ex.api_key:
        await ex.error(missing_key_error(rid))
        return None
    if knobs.http_fault:
        await ex.error(fault_response(knobs.http_fault, **ex.fault_args(base, knobs.retry_after)))
        return None
    return body, knobs, base


def _legacy_logprobs(entries: list[dict[str, Any]], offset: int) -> dict[str, Any]:
    """OpenAI's legacy completions ``logprobs`` object for seed-shaped entries."""
    tokens, lps, tops, offsets = [], [], [], []
    for entry in entries:
        tokens.append(entry["token"])
        lps.append(entry["logprob"])
        tops.append({alt["token"]: alt["logprob"] for alt in entry["top_logprobs"]})
        offsets.append(offset)
        offset += len(entry["token"])
    return {"tokens": tokens, "token_logprobs": lps, "top_logprobs": tops, "text_offset": offsets}


async def handle_completions(ex: Exchange, options: str | None, raw: bytes) -> None:
    """Answer one ``POST /completions`` (see the module docstring)."""
    common = await _common(ex, options, raw, "openai_completions")
    if common is None:
        return
    body, knobs, base = common
    rid = ex.request_id
    ex.split_utf8 = knobs.split_utf8
    if base not in MODELS:
        await ex.error(validation_error("model_not_found", request_id=rid, model=base))
        return
    prompt = body.get("prompt")
    if not isinstance(prompt, str):
        await ex.error(validation_error("invalid_param", request_id=rid, param="prompt", value=prompt))
        return
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    if max_tokens is not None and (not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1):
        await ex.error(validation_error("invalid_param", request_id=rid, param="max_tokens", value=max_tokens))
        return
    logprobs_value = body.get("logprobs")
    top: int | None = None
    if logprobs_value is True:
        top = body.get("top_logprobs") if isinstance(body.get("top_logprobs"), int) else 0
    elif isinstance(logprobs_value, int) and not isinstance(logprobs_value, bool):
        top = logprobs_value
    if top is not None and not 0 <= top <= 20:
        await ex.error(validation_error("invalid_param", request_id=rid, param="logprobs", value=logprobs_value))
        return
    chat_body = {**body, "messages": [{"role": "user", "content": prompt}]}
    turn = chat_turn(chat_body)
    digest = request_digest(chat_body, options)
    plan = build_plan(turn, knobs, reasoning=False, max_tokens=max_tokens, digest=digest)
    stream = body.get("stream") is True
    ex.record.stream = stream
    state = _ChatState(
        completion_id=str(uuid.UUID(hex=digest[:32])), created=time.time(), model=base,
        knobs=knobs, plan=plan, logprobs=top, sansa=None,
    )
    if stream:
        await run_stream(ex, StreamContext(knobs), _completion_frames(state),
                         lambda fault: [Frame("error", obj=stream_error_chunk(ex.request_id))])
        return
    if not await ex.wait_latency(knobs, len(plan.events)):
        return
    choice: dict[str, Any] = {"finish_reason": plan.finish_reason if plan.finish_reason in ("stop", "length") else "stop",
                              "index": 0, "text": plan.content, "logprobs": None}
    if top is not None:
        choice["logprobs"] = _legacy_logprobs(token_logprobs(plan.content_pieces, max(top, 1)), 0)
    response = {
        "choices": [choice], "created": state.created, "id": state.completion_id, "model": base,
        "object": "text_completion", "system_fingerprint": SYSTEM_FINGERPRINT,
    }
    if knobs.usage != "none":
        response["usage"] = _usage(state)
    await ex.json(200, response, tokens=plan.completion_tokens, ascii_only=knobs.ascii)


def _completion_frames(state: _ChatState) -> list[Frame]:
    knobs, plan = state.knobs, state.plan

    def chunk(choices: list[dict[str, Any]], usage: dict[str, Any] | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "choices": choices, "created": state.created, "id": state.completion_id, "model": state.model,
            "object": "text_completion", "system_fingerprint": SYSTEM_FINGERPRINT,
        }
        if usage is not None:
            out["usage"] = usage
        return out

    frames: list[Frame] = []
    offset = 0
    for event in plan.events:
        if event.kind != "content":
            continue
        logprobs = None
        if state.logprobs is not None:
            logprobs = _legacy_logprobs(token_logprobs(event.pieces, max(state.logprobs, 1)), offset)
        offset += len(event.text)
        frames.append(Frame("content", obj=chunk([{"text": event.text, "index": 0, "finish_reason": None,
                                                    "logprobs": logprobs}]), tokens=event.tokens, token=True))
    reason = plan.finish_reason if plan.finish_reason in ("stop", "length") else "stop"
    usage = _usage(state) if knobs.usage != "none" else None
    frames.append(Frame("finish", obj=chunk([{"text": "", "index": 0, "finish_reason": reason, "logprobs": None}],
                                            usage if knobs.usage == "beside" else None), tail=True))
    if knobs.usage == "last":
        frames.append(Frame("usage", obj=chunk([], usage), tail=True))
    if knobs.done:
        nl = "\r\n" if knobs.crlf else "\n"
        frames.append(Frame("done", raw=f"data: [DONE]{nl}{nl}", tail=True))
    return frames


async def handle_embeddings(ex: Exchange, options: str | None, raw: bytes) -> None:
    """Answer one ``POST /embeddings`` (see the module docstring)."""
    common = await _common(ex, options, raw, "openai_embeddings")
    if common is None:
        return
    body, knobs, base = common
    rid = ex.request_id
    if base != EMBED_MODEL and base not in MODELS:
        await ex.error(validation_error("model_not_found", request_id=rid, model=base))
        return
    value = body.get("input")
    inputs = [value] if isinstance(value, str) else value
    if not isinstance(inputs, list) or not inputs or not all(isinstance(t, str) for t in inputs):
        await ex.error(validation_error("invalid_param", request_id=rid, param="input", value=type(value).__name__))
        return
    if len(inputs) > EMBED_MAX_INPUTS:
        await ex.error(general_error(400, message=f"Too many inputs: {len(inputs)} (at most {EMBED_MAX_INPUTS}).",
                                     type_="invalid_request_error", code=None, param="input", request_id=rid))
        return
    encoding = body.get("encoding_format") or "float"
    if encoding not in ("float", "base64"):
        await ex.error(validation_error("invalid_param", request_id=rid, param="encoding_format", value=encoding))
        return
    counts = [len(_tokens(t)) or 1 for t in inputs]
    for index, count in enumerate(counts):
        if count > EMBED_MAX_TOKENS:
            await ex.error(general_error(
                400, message=f"Input {index} has {count} tokens, more than the model's limit of {EMBED_MAX_TOKENS}.",
                type_="invalid_request_error", code="context_length_exceeded", param="input", request_id=rid))
            return
    if not await ex.wait_latency(knobs, 0):
        return
    data = []
    for index, text in enumerate(inputs):
        vector = embed_text(text)
        item: Any = vector
        if encoding == "base64":
            item = base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")
        data.append({"index": index, "object": "embedding", "embedding": item})
    total = sum(counts)
    response = {"data": data, "model": base, "object": "list",
                "usage": {"prompt_tokens": total, "total_tokens": total}}
    await ex.json(200, response, tokens=0, ascii_only=knobs.ascii)
