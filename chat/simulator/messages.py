"""``POST /messages`` and ``POST /messages/count_tokens``: the Anthropic Messages API as SambaNova
serves it (seed 004, and ``/messages`` in seed 002).

Request: seed 002 ``MessageCreateRequest`` (``model``, ``max_tokens`` and ``messages``
required; ``system`` as text or blocks; ``thinking``; ``tools`` with ``input_schema``;
``tool_choice``; ``stop_sequences``). Auth: ``x-api-key`` or ``Authorization: Bearer`` (the
same key); ``anthropic-version`` is accepted and ignored, as the seed says.

Streaming (``stream: true``): SSE with ``event:`` lines (knob ``event_lines=0`` drops them) and
seed 002 ``MessageStreamEvent`` payloads::

    message_start        (MessageStartEvent: usage.input_tokens, output_tokens 0)
    content_block_start  (index 0: thinking, when reasoning)   ping
    content_block_delta  thinking_delta …, then one signature_delta
    content_block_stop
    content_block_start  (text)  content_block_delta text_delta …  content_block_stop
    content_block_start  (tool_use: id, name, input {})  input_json_delta …  content_block_stop
    message_delta        (stop_reason end_turn|max_tokens|tool_use|stop_sequence,
                          usage.output_tokens, usage.input_tokens)
    message_stop

``ping`` follows the first ``content_block_start``, as Anthropic sends it. Thinking happens when
the request has ``thinking: {type: enabled|adaptive}`` or the model reasons by default (an id
containing "reasoning"); ``thinking: {type: disabled}`` turns it off; an explicit ``reasoning``
knob wins over both. With ``refuse_thinking=1`` an enabled ``thinking`` is seed 004's 400
(SambaNova v1). Faults: HTTP faults in Anthropic's envelope
(:func:`chat.simulator.errors.messages_fault_response`); ``error_chunk``/``error_event`` mid-stream
are ``event: error`` with ``overloaded_error`` (seed 002 ``MessageStreamErrorEvent``). Without
streaming the answer is one seed 002 ``Message``. The ``usage``, ``done`` and ``reasoning_kind``
knobs do not apply here.

``/messages/count_tokens`` answers seed 002 ``MessageCountTokensResponse`` ``{"input_tokens": N}``
with N equal to ``/messages``' ``input_tokens`` for the same prompt (system, messages, tools).

May import: the standard library and this package (no Django).
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from typing import Any

from .errors import ErrorResponse, anthropic_error, messages_fault_response, messages_stream_error
from .knobs import MODELS, KnobError, Knobs, parse_knobs, split_model
from .plan import Plan, build_plan, request_digest
from .recorder import Recorder
from .request import Turn, messages_turn
from .wire import Exchange, Frame, StreamContext, run_stream

__all__ = ["STOP_REASONS", "handle_count_tokens", "handle_messages", "thinking_signature"]

#: Neutral finish reason -> seed 002 ``MessageStopReason``.
STOP_REASONS = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "stop_sequence": "stop_sequence",
}


def thinking_signature(thinking: str) -> str:
    """The deterministic ``signature`` of a thinking block (base64 of its sha256)."""
    return base64.b64encode(hashlib.sha256(thinking.encode()).digest()).decode()


@dataclass
class _Request:
    body: dict[str, Any]
    base: str
    knobs: Knobs
    turn: Turn


def _invalid(message: str, request_id: str) -> ErrorResponse:
    return anthropic_error(400, message, request_id=request_id)


async def _common(
    ex: Exchange, options: str | None, raw: bytes, *, create: bool
) -> _Request | None:
    """Parse and check a ``/messages`` or ``/messages/count_tokens`` request; on a problem send
    the seed's error and return ``None``."""
    rid = ex.request_id
    try:
        body = Recorder.set_body(ex.record, raw, ex.api_key)
    except ValueError:
        await ex.error(_invalid("There was an error parsing the body of your request.", rid))
        return None
    if not isinstance(body, dict):
        await ex.error(_invalid("The request body must be a JSON object.", rid))
        return None
    ex.record.stream = body.get("stream") is True if create else False
    model = body.get("model")
    if not isinstance(model, str) or not model.strip():
        await ex.error(_invalid("model: Field required", rid))
        return None
    base = split_model(model)[0]
    ex.record.model = base
    try:
        knobs = parse_knobs(model, options)
    except KnobError as exc:
        await ex.error(_invalid(str(exc), rid))
        return None
    ex.record.knobs = knobs.as_dict()
    ex.split_utf8 = knobs.split_utf8
    if knobs.require_key and not ex.api_key:
        await ex.error(anthropic_error(401, "x-api-key header is required", request_id=rid))
        return None
    if knobs.http_fault:
        await ex.error(
            messages_fault_response(knobs.http_fault, **ex.fault_args(base, knobs.retry_after))
        )
        return None
    if base not in MODELS:
        await ex.error(anthropic_error(404, f"model: {base}", request_id=rid))
        return None
    if create:
        max_tokens = body.get("max_tokens")
        if max_tokens is None:
            await ex.error(_invalid("max_tokens: Field required", rid))
            return None
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
            await ex.error(_invalid("max_tokens: Input should be greater than or equal to 1", rid))
            return None
    problem = _check_messages(body.get("messages"))
    if problem is not None:
        await ex.error(_invalid(problem, rid))
        return None
    thinking = body.get("thinking")
    kind = thinking.get("type") if isinstance(thinking, dict) else None
    if kind in ("enabled", "adaptive") and knobs.refuse_thinking:
        message = (
            f"thinking: type '{kind}' is not supported (unsupported_parameter). Only "
            "type 'disabled' is accepted."
        )
        await ex.error(_invalid(message, rid))
        return None
    turn = messages_turn(body)
    ex.record.media = turn.media
    if turn.tool_choice == "named" and turn.chosen_tool(True) is None and turn.tool_result is None:
        await ex.error(_invalid(f"tool_choice: tool '{turn.tool_name}' not found in tools", rid))
        return None
    return _Request(body, base, knobs, turn)


def _check_messages(messages: Any) -> str | None:
    if not isinstance(messages, list):
        return "messages: Field required"
    if not messages:
        return "messages: List should have at least 1 item after validation, not 0"
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            return f"messages.{index}: Input should be a valid dictionary"
        if message.get("role") not in ("user", "assistant"):
            return f"messages.{index}.role: Input should be 'user' or 'assistant'"
        content = message.get("content")
        if not isinstance(content, str | list):
            return f"messages.{index}.content: Field required"
    return None


async def handle_count_tokens(ex: Exchange, options: str | None, raw: bytes) -> None:
    """``POST /messages/count_tokens`` (seed 002 ``countMessageTokens``)."""
    ex.record.dialect = "count_tokens"
    request = await _common(ex, options, raw, create=False)
    if request is None:
        return
    await ex.json(200, {"input_tokens": request.turn.prompt_tokens})


async def handle_messages(ex: Exchange, options: str | None, raw: bytes) -> None:
    """``POST /messages`` (seed 002/004 ``createMessage``; see the module docstring)."""
    ex.record.dialect = "anthropic_messages"
    request = await _common(ex, options, raw, create=True)
    if request is None:
        return
    body, knobs = request.body, request.knobs
    stream = body.get("stream") is True
    reasoning = knobs.reasoning
    thinking = body.get("thinking")
    kind = thinking.get("type") if isinstance(thinking, dict) else None
    if "reasoning" not in knobs.explicit and kind is not None:
        reasoning = kind in ("enabled", "adaptive")
    digest = request_digest(body, options)
    plan = build_plan(
        request.turn,
        knobs,
        reasoning=reasoning,
        max_tokens=body["max_tokens"],
        digest=digest,
    )
    message_id = f"msg_{digest[:24]}"
    if stream:
        ctx = StreamContext(knobs)
        frames = _frames(plan, message_id, request.base)
        await run_stream(ex, ctx, frames, lambda fault: _error_frames())
    else:
        await _complete(ex, plan, knobs, message_id, request.base)


def _error_frames() -> list[Frame]:
    return [Frame("error", obj=messages_stream_error(), event="error")]


def _event(kind: str, obj: dict[str, Any], **extra: Any) -> Frame:
    return Frame(kind, obj=obj, event=obj["type"], **extra)


def _frames(plan: Plan, message_id: str, model: str) -> list[Frame]:
    start = {
        "type": "message_start",
        "message": {
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "content": [],
            "model": model,
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": plan.prompt_tokens, "output_tokens": 0},
        },
    }
    frames = [_event("start", start)]
    index = -1
    open_kind: str | None = None

    def close() -> None:
        if open_kind == "reasoning":
            delta = {"type": "signature_delta", "signature": thinking_signature(plan.reasoning)}
            frames.append(
                _event("signature", {"type": "content_block_delta", "index": index, "delta": delta})
            )
        frames.append(_event("block", {"type": "content_block_stop", "index": index}))

    def open_block(kind: str) -> None:
        nonlocal index, open_kind
        if open_kind is not None:
            close()
        index += 1
        open_kind = kind
        if kind == "reasoning":
            block: dict[str, Any] = {"type": "thinking", "thinking": "", "signature": ""}
        elif kind == "content":
            block = {"type": "text", "text": ""}
        else:
            call = plan.tool_call
            assert call is not None
            block = {"type": "tool_use", "id": f"toolu_{call.key}", "name": call.name, "input": {}}
        frames.append(
            _event("block", {"type": "content_block_start", "index": index, "content_block": block})
        )
        if index == 0:
            frames.append(_event("ping", {"type": "ping"}))

    for event in plan.events:
        if event.kind != open_kind:
            open_block(event.kind)
        if event.kind == "reasoning":
            delta: dict[str, Any] = {"type": "thinking_delta", "thinking": event.text}
        elif event.kind == "content":
            delta = {"type": "text_delta", "text": event.text}
        else:
            delta = {"type": "input_json_delta", "partial_json": event.text}
        frames.append(
            _event(
                event.kind,
                {"type": "content_block_delta", "index": index, "delta": delta},
                tokens=event.tokens,
                token=True,
            )
        )
    if open_kind is None:
        open_block("content")  # an empty answer still has one (empty) text block
    close()
    message_delta = {
        "type": "message_delta",
        "delta": {
            "stop_reason": STOP_REASONS[plan.finish_reason],
            "stop_sequence": plan.stop_sequence,
        },
        "usage": {"output_tokens": plan.completion_tokens, "input_tokens": plan.prompt_tokens},
    }
    frames.append(_event("finish", message_delta, tail=True))
    frames.append(_event("done", {"type": "message_stop"}, tail=True))
    return frames


def message_content(plan: Plan) -> list[dict[str, Any]]:
    """The ``content`` blocks of the non-streamed ``Message`` (seed 002
    ``MessageOutputContentBlock``: thinking with signature, text, tool_use)."""
    content: list[dict[str, Any]] = []
    if plan.reasoning:
        content.append(
            {
                "type": "thinking",
                "thinking": plan.reasoning,
                "signature": thinking_signature(plan.reasoning),
            }
        )
    if plan.content or plan.tool_call is None:
        content.append({"type": "text", "text": plan.content})
    if plan.tool_call is not None:
        call = plan.tool_call
        complete = plan.finish_reason == "tool_calls"
        content.append(
            {
                "type": "tool_use",
                "id": f"toolu_{call.key}",
                "name": call.name,
                "input": call.input if complete else {},
            }
        )
    return content


async def _complete(ex: Exchange, plan: Plan, knobs: Knobs, message_id: str, model: str) -> None:
    if not await ex.wait_latency(knobs, len(plan.events)):
        return
    if knobs.has("error_chunk") or knobs.has("error_event"):
        error = anthropic_error(529, "Overloaded", request_id=ex.request_id)
        outcome = "error_chunk" if knobs.has("error_chunk") else "error_event"
        await ex.send_whole(error, tokens=0, outcome=outcome)
        return
    response = {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "content": message_content(plan),
        "model": model,
        "stop_reason": STOP_REASONS[plan.finish_reason],
        "stop_sequence": plan.stop_sequence,
        "usage": {"input_tokens": plan.prompt_tokens, "output_tokens": plan.completion_tokens},
    }
    if knobs.has("cut"):
        await ex.send_half(response, plan.completion_tokens // 2, knobs.ascii)
        return
    await ex.json(200, response, tokens=plan.completion_tokens, ascii_only=knobs.ascii)
