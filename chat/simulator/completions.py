"""``POST /chat/completions``: OpenAI chat completions in SambaNova's dialect, and Sansa's.

Request: seed 000/002 ``ChatCompletionRequest``. Response: SSE ``ChatCompletionStreamResponse``
chunks ending with ``data: [DONE]`` when ``stream`` is true, else one ``ChatCompletionResponse``.

- Reasoning as ``delta.reasoning`` / ``delta.reasoning_content`` / inline ``<think>`` (knob
  ``reasoning_field``); usage with SambaNova's timing fields (seed 002 ``Usage``) in a last
  chunk with ``choices: []``, beside the finish, or not at all (knob ``usage``).
- Tools: streamed ``delta.tool_calls`` (seed 002 ``AssistantToolCall``: the first piece carries
  ``id``, ``type`` and ``function.name``, every piece ``index`` 0 and ``function.arguments``),
  finish reason ``tool_calls``; ``message.tool_calls`` without streaming.
- Structured output: ``response_format`` ``json_schema`` / ``json_object`` answers JSON.
- Log probabilities: with ``logprobs: true`` each content chunk's choice carries
  ``logprobs: {content: [LogProbsContent, …]}`` (seed 002's examples: ``content`` and
  ``top_logprobs`` are arrays, although its schema types them as single objects), with
  ``top_logprobs`` alternatives; other chunks carry ``logprobs: null``.
- Sansa (seed 001), knob ``sansa`` (default on for model ``sansa-auto``; in
  ``X-Simulator-Options`` it also routes a request without a model): ``model`` is the routed
  model, usage is Sansa's ``{prompt_tokens, completion_tokens, total_tokens, cost, …}`` (cost in
  USD from the routed model's ``GET /models`` pricing), and a top-level ``sansa`` object
  ``{routed, routed_model, routing_latency_ms}`` rides on the chunk that carries ``usage`` (the
  finish chunk when ``usage=none``) and on the non-streamed body. ``logprobs``/``top_logprobs``
  and ``n > 1`` are seed 001's 400 ``unsupported_parameter``; errors use seed 001's shape.
  Reasoning follows ``reasoning`` / ``reasoning_effort`` (``sansa-auto`` without either reasons,
  like the seed's default effort ``high``); ``reasoning.exclude`` counts reasoning tokens but
  sends none.

May import: the standard library and this package (no Django).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

from .errors import (
    ErrorResponse,
    fault_response,
    missing_key_error,
    sansa_error,
    sansa_fault_response,
    stream_error_chunk,
    validation_error,
)
from .knobs import MODELS, SANSA_AUTO, KnobError, Knobs, parse_knobs, split_model
from .plan import Plan, build_plan, request_digest, scheduled_timing, token_logprobs
from .recorder import Recorder
from .request import chat_turn
from .wire import Exchange, Frame, StreamContext, run_stream

__all__ = ["SYSTEM_FINGERPRINT", "VALID_ROLES", "handle_chat_completions"]

#: ``system_fingerprint`` of every chunk and response.
SYSTEM_FINGERPRINT = "simulator"
#: Roles SambaNova accepts (seed 000 ``invalid_role`` example).
VALID_ROLES = ("system", "assistant", "user", "function", "tool", "developer")
#: Sansa's reasoning efforts (seed 001).
SANSA_EFFORTS = ("xhigh", "high", "medium", "low", "minimal", "none")
_FINISH = {"stop": "stop", "length": "length", "tool_calls": "tool_calls", "stop_sequence": "stop"}


@dataclass
class _Chat:
    completion_id: str
    created: float
    model: str
    knobs: Knobs
    plan: Plan
    logprobs: int | None  # None: off; else the number of top_logprobs alternatives
    sansa: dict[str, Any] | None  # the ``sansa`` object in Sansa mode
    cost_prices: tuple[float, float] = (0.0, 0.0)


async def handle_chat_completions(ex: Exchange, options: str | None, raw: bytes) -> None:
    """Answer one ``POST /chat/completions`` (see the module docstring)."""
    rid = ex.request_id
    ex.record.dialect = "openai_chat"
    try:
        body = Recorder.set_body(ex.record, raw, ex.api_key)
    except ValueError:
        body = None
    if not isinstance(body, dict):
        await ex.error(validation_error("invalid_json", request_id=rid))
        return
    model = body.get("model")
    has_model = isinstance(model, str) and bool(model.strip())
    try:
        knobs = parse_knobs(model if has_model else "", options)
    except KnobError as exc:
        if not has_model:
            await ex.error(validation_error("missing_model", request_id=rid))
            return
        await ex.error(
            validation_error("invalid_option", request_id=rid, message=str(exc), param=exc.param)
        )
        return
    if not has_model and not knobs.sansa:
        await ex.error(validation_error("missing_model", request_id=rid))
        return
    base = split_model(model)[0] if has_model else SANSA_AUTO
    ex.record.model = base
    ex.record.knobs = knobs.as_dict()
    ex.split_utf8 = knobs.split_utf8
    stream = body.get("stream") is True
    ex.record.stream = stream
    sansa_mode = knobs.sansa
    if knobs.require_key and not ex.api_key:
        error = (
            sansa_error(401, "unauthorized", "Invalid or missing API key.")
            if sansa_mode
            else missing_key_error(rid)
        )
        await ex.error(error)
        return
    if knobs.http_fault:
        error = sansa_fault_response(knobs.http_fault, retry_after=knobs.retry_after)
        if error is None or not sansa_mode:
            error = fault_response(knobs.http_fault, **ex.fault_args(base, knobs.retry_after))
        await ex.error(error)
        return
    routed = base == SANSA_AUTO
    if not routed and base not in MODELS:
        if sansa_mode:
            message = (
                f'The model `{base}` is not a known model ID. Use "sansa-auto" or a model '
                "from the Models page."
            )
            await ex.error(sansa_error(400, "invalid_model", message))
        else:
            await ex.error(validation_error("model_not_found", request_id=rid, model=base))
        return
    problem = _validate_messages(body.get("messages"), rid)
    if problem is None and sansa_mode:
        problem = _validate_sansa(body)
    if problem is not None:
        await ex.error(problem)
        return
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    if max_tokens is not None and (
        not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1
    ):
        param = "max_completion_tokens" if "max_completion_tokens" in body else "max_tokens"
        await ex.error(
            validation_error("invalid_param", request_id=rid, param=param, value=max_tokens)
        )
        return
    logprobs: int | None = None
    if body.get("logprobs") is True:
        top = body.get("top_logprobs", 0)
        if top is None:
            top = 0
        if not isinstance(top, int) or isinstance(top, bool) or not 0 <= top <= 20:
            await ex.error(
                validation_error("invalid_param", request_id=rid, param="top_logprobs", value=top)
            )
            return
        logprobs = top
    turn = chat_turn(body)
    ex.record.media = turn.media
    if turn.tool_choice == "named" and turn.chosen_tool(True) is None and turn.tool_result is None:
        await ex.error(
            validation_error(
                "invalid_param", request_id=rid, param="tool_choice", value=turn.tool_name
            )
        )
        return
    reasoning, hide = knobs.reasoning, False
    if sansa_mode:
        reasoning, hide = _sansa_reasoning(body, knobs, routed)
    digest = request_digest(body, options)
    plan = build_plan(
        turn,
        knobs,
        reasoning=reasoning,
        max_tokens=max_tokens,
        digest=digest,
        hide_reasoning=hide,
    )
    shown_model = base
    sansa = None
    prices = (0.0, 0.0)
    if sansa_mode:
        if routed:
            shown_model = knobs.routed_model or ("sim-reasoning" if reasoning else "sim-fast")
        spec = MODELS[shown_model]
        prices = (spec.prompt_price, spec.completion_price)
        sansa = {
            "routed": routed,
            "routed_model": shown_model,
            "routing_latency_ms": knobs.routing_ms if routed else 0,
        }
    chat = _Chat(
        completion_id=str(uuid.UUID(hex=digest[:32])),
        created=time.time(),
        model=shown_model,
        knobs=knobs,
        plan=plan,
        logprobs=logprobs,
        sansa=sansa,
        cost_prices=prices,
    )
    if stream:
        ctx = StreamContext(knobs)
        await run_stream(ex, ctx, _frames(chat), lambda fault: _error_frames(ex))
    else:
        await _complete(ex, chat)


def _error_frames(ex: Exchange) -> list[Frame]:
    return [Frame("error", obj=stream_error_chunk(ex.request_id))]


def _choice(
    delta: dict[str, Any], finish_reason: str | None = None, logprobs: Any = None
) -> dict[str, Any]:
    """A seed 002 ``ChatCompletionChunkChoice``."""
    return {"delta": delta, "index": 0, "finish_reason": finish_reason, "logprobs": logprobs}


def _chunk(
    chat: _Chat,
    choices: list[dict[str, Any]],
    usage: dict[str, Any] | None = None,
    sansa: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A seed 002 ``ChatCompletionStreamResponse`` (plus seed 001's ``sansa`` object)."""
    chunk: dict[str, Any] = {
        "choices": choices,
        "created": chat.created,
        "id": chat.completion_id,
        "model": chat.model,
        "object": "chat.completion.chunk",
        "system_fingerprint": SYSTEM_FINGERPRINT,
    }
    if usage is not None:
        chunk["usage"] = usage
    if sansa is not None:
        chunk["sansa"] = sansa
    return chunk


def _frames(chat: _Chat) -> list[Frame]:
    knobs, plan = chat.knobs, chat.plan
    frames = [Frame("role", obj=_chunk(chat, [_choice({"role": "assistant", "content": ""})]))]
    first_tool = True
    for event in plan.events:
        logprobs = None
        if event.kind == "content":
            delta: dict[str, Any] = {"content": event.text}
            if chat.logprobs is not None:
                logprobs = {"content": token_logprobs(event.pieces, chat.logprobs)}
        elif event.kind == "reasoning":
            delta = {knobs.reasoning_field: event.text}
        else:
            call = plan.tool_call
            assert call is not None
            piece: dict[str, Any] = {"index": 0}
            if first_tool:
                piece.update(
                    {
                        "id": f"call_{call.key}",
                        "type": "function",
                        "function": {"name": call.name, "arguments": event.text},
                    }
                )
                first_tool = False
            else:
                piece["function"] = {"arguments": event.text}
            delta = {"tool_calls": [piece]}
        frames.append(
            Frame(
                event.kind,
                obj=_chunk(chat, [_choice(delta, logprobs=logprobs)]),
                tokens=event.tokens,
                token=True,
            )
        )
    usage = _usage(chat) if knobs.usage != "none" else None
    finish_delta: dict[str, Any] = {} if plan.finish_reason == "tool_calls" else {"content": ""}
    finish = _choice(finish_delta, _FINISH[plan.finish_reason])
    beside = usage if knobs.usage == "beside" else None
    sansa_on_finish = chat.sansa if knobs.usage != "last" else None
    frames.append(Frame("finish", obj=_chunk(chat, [finish], beside, sansa_on_finish), tail=True))
    if knobs.usage == "last":
        frames.append(Frame("usage", obj=_chunk(chat, [], usage, chat.sansa), tail=True))
    if knobs.done:
        nl = "\r\n" if knobs.crlf else "\n"
        frames.append(Frame("done", raw=f"data: [DONE]{nl}{nl}", tail=True))
    return frames


def _usage(chat: _Chat) -> dict[str, Any]:
    """Seed 002 ``Usage`` with SambaNova's timing fields (seconds), or Sansa's usage.

    Timing figures are the scheduled ones (``ttft_ms``, ``delay_ms``), so they are
    deterministic; ``start_time``/``end_time`` are wall-clock Unix seconds. Sansa (seed 001):
    ``prompt_tokens``, ``completion_tokens``, ``total_tokens``, ``cost`` (USD),
    ``prompt_tokens_details.cached_tokens`` and, with reasoning,
    ``completion_tokens_details.reasoning_tokens``.
    """
    plan, knobs = chat.plan, chat.knobs
    completion = plan.completion_tokens
    total = plan.prompt_tokens + completion
    if chat.sansa is not None:
        prompt_price, completion_price = chat.cost_prices
        cost = plan.prompt_tokens * prompt_price + completion * completion_price
        usage: dict[str, Any] = {
            "prompt_tokens": plan.prompt_tokens,
            "completion_tokens": completion,
            "total_tokens": total,
            "cost": round(cost, 12),
            "prompt_tokens_details": {"cached_tokens": 0},
        }
        if plan.reasoning_tokens:
            usage["completion_tokens_details"] = {"reasoning_tokens": plan.reasoning_tokens}
        return usage
    timing = scheduled_timing(plan, knobs)
    start = chat.created
    rate = round(timing.tokens_after_first_per_sec, 6)
    usage = {
        "completion_tokens": completion,
        "completion_tokens_after_first_per_sec": rate,
        "completion_tokens_after_first_per_sec_first_ten": rate,
        "completion_tokens_after_first_per_sec_graph": rate,
        "completion_tokens_per_sec": round(timing.tokens_per_sec, 6),
    }
    if knobs.reasoning:
        usage["completion_tokens_details"] = {"reasoning_tokens": plan.reasoning_tokens}
    usage.update(
        {
            "end_time": start + timing.total_latency,
            "is_last_response": True,
            "prompt_tokens": plan.prompt_tokens,
            "prompt_tokens_details": {"cached_tokens": 0},
            "start_time": start,
            "stop_reason": _FINISH[plan.finish_reason],
            "time_to_first_token": round(timing.time_to_first_token, 6),
            "time_to_first_token_graph": round(timing.time_to_first_token, 6),
            "total_latency": round(timing.total_latency, 6),
            "total_tokens": total,
            "total_tokens_per_sec": round(timing.total_tokens_per_sec, 6),
        }
    )
    return usage


async def _complete(ex: Exchange, chat: _Chat) -> None:
    """Answer with one seed 002 ``ChatCompletionResponse`` after the simulated latency."""
    knobs, plan = chat.knobs, chat.plan
    if not await ex.wait_latency(knobs, len(plan.events)):
        return
    if knobs.has("error_chunk") or knobs.has("error_event"):
        body = stream_error_chunk(ex.request_id)
        outcome = "error_chunk" if knobs.has("error_chunk") else "error_event"
        await ex.json(500, body, ascii_only=knobs.ascii, outcome=outcome)
        return
    message: dict[str, Any] = {"role": "assistant", "content": plan.content}
    if plan.reasoning and knobs.reasoning_field != "think":
        message[knobs.reasoning_field] = plan.reasoning
    if plan.tool_call is not None:
        call = plan.tool_call
        message["content"] = plan.content or None
        message["tool_calls"] = [
            {
                "id": f"call_{call.key}",
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
        ]
    logprobs = None
    if chat.logprobs is not None:
        logprobs = {"content": token_logprobs(plan.content_pieces, chat.logprobs)}
    choice = {
        "finish_reason": _FINISH[plan.finish_reason],
        "index": 0,
        "message": message,
        "logprobs": logprobs,
    }
    response: dict[str, Any] = {
        "choices": [choice],
        "created": chat.created,
        "id": chat.completion_id,
        "model": chat.model,
        "object": "chat.completion",
        "system_fingerprint": SYSTEM_FINGERPRINT,
    }
    if knobs.usage != "none":
        response["usage"] = _usage(chat)
    if chat.sansa is not None:
        response["sansa"] = chat.sansa
    if knobs.has("cut"):
        await ex.send_half(response, plan.completion_tokens // 2, knobs.ascii)
        return
    await ex.json(200, response, tokens=plan.completion_tokens, ascii_only=knobs.ascii)


def _validate_messages(messages: Any, request_id: str) -> ErrorResponse | None:
    """SambaNova's minimal checks, with seed 000's error examples."""
    if messages is None or not isinstance(messages, list):
        return validation_error("missing_messages", request_id=request_id)
    if not messages:
        return validation_error("empty_messages", request_id=request_id)
    for index, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if role not in VALID_ROLES:
            return validation_error("invalid_role", request_id=request_id, role=role, index=index)
        if role == "user" and message.get("content") is None:
            return validation_error("null_content", request_id=request_id, index=index)
    return None


def _validate_sansa(body: dict[str, Any]) -> ErrorResponse | None:
    """Seed 001's 400s: ``n > 1``, ``logprobs``/``top_logprobs``, unknown reasoning effort."""
    n = body.get("n")
    if isinstance(n, int) and not isinstance(n, bool) and n > 1:
        return sansa_error(
            400,
            "unsupported_parameter",
            "Multiple completions (n > 1) are not supported. Sansa returns a single completion "
            "per request.",
        )
    for name in ("logprobs", "top_logprobs"):
        if body.get(name) is not None:  # no seed example wording
            return sansa_error(
                400,
                "unsupported_parameter",
                f"'{name}' is not supported: log probabilities aren't returned yet.",
            )
    reasoning = body.get("reasoning")
    efforts = [body.get("reasoning_effort")]
    if isinstance(reasoning, dict):
        efforts.append(reasoning.get("effort"))
    for effort in efforts:
        if effort is not None and effort not in SANSA_EFFORTS:  # no seed example wording
            return sansa_error(
                400,
                "invalid_request",
                f"Invalid reasoning effort '{effort}'. Use one of: {', '.join(SANSA_EFFORTS)}.",
            )
    return None


def _sansa_reasoning(body: dict[str, Any], knobs: Knobs, routed: bool) -> tuple[bool, bool]:
    """(reasoning on, reasoning hidden) for a Sansa request (seed 001's ``reasoning`` object and
    ``reasoning_effort``; ``reasoning`` wins). An explicit ``reasoning`` knob wins over both."""
    reasoning = body.get("reasoning")
    hide = isinstance(reasoning, dict) and reasoning.get("exclude") is True
    if "reasoning" in knobs.explicit:
        return knobs.reasoning, hide
    if isinstance(reasoning, dict):
        if reasoning.get("enabled") is False or reasoning.get("effort") == "none":
            return False, hide
        return True, hide
    effort = body.get("reasoning_effort")
    if isinstance(effort, str):
        return effort != "none", hide
    return (True if routed else knobs.reasoning), hide
