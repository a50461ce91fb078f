"""``POST /responses``: the OpenAI Responses API as SambaNova serves it (``/responses`` in seed 002).

Request: seed 002 ``ResponseRequest`` (``model`` and ``input`` required; ``instructions``,
``max_output_tokens``, ``tools`` (flat ``{type: function, name, parameters}``), ``tool_choice``,
``text.format``, ``reasoning.effort``). Errors are seed 002's ``/responses`` examples
(``GeneralError``/``SimpleError``, as for chat completions: ``missing_input``, ``empty_input``,
``invalid_role``, ``invalid_json``, ``model_not_found``, ``adapter_mapping_failed``).

Streaming (``stream: true``): SSE events ``event: <type>`` + ``data: {...}`` (knob
``event_lines=0`` drops the ``event:`` lines; ``type`` stays in the JSON), each with a
``sequence_number`` from 0, following seed 002's ``ResponseStreamEvent`` members::

    response.created, response.in_progress                  (ResponseResponse, in_progress)
    response.output_item.added (reasoning)                   when reasoning
      response.content_part.added (reasoning_text)
      response.reasoning_text.delta …  response.reasoning_text.done
      response.content_part.done
    response.output_item.done
    response.output_item.added (message)
      response.content_part.added (output_text)
      response.output_text.delta …  response.output_text.done
      response.content_part.done
    response.output_item.done
    response.output_item.added (function_call)               when the model calls a tool
      response.function_call_arguments.delta …  response.function_call_arguments.done
    response.output_item.done
    response.completed                                       (status completed, usage)

Not in seed 002 (shapes from OpenAI's Responses API reference): with ``reasoning_kind=summary``
reasoning comes as ``response.reasoning_summary_part.added`` /
``response.reasoning_summary_text.delta`` / ``.done`` / ``response.reasoning_summary_part.done``
with ``summary_index`` (the item's ``summary`` holds ``summary_text`` parts); a
``max_output_tokens`` cut ends with ``response.incomplete`` (status ``incomplete``,
``incomplete_details.reason`` ``max_output_tokens``); fault ``error_chunk`` ends the stream with
``response.failed`` (status ``failed``, ``error {code, message}``) and ``error_event`` with an
``error`` event (``code``, ``message``, ``param``). Usage (seed 002 ``ResponseUsage``):
``input_tokens``, ``output_tokens``, ``total_tokens``, ``input_tokens_details.cached_tokens``,
``output_tokens_details.reasoning_tokens`` and SambaNova's timing fields (seconds). Without
streaming the answer is one ``ResponseResponse``.

May import: the standard library and this package (no Django).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from .errors import (
    ErrorResponse,
    fault_response,
    missing_key_error,
    responses_error_event,
    stream_error_chunk,
    validation_error,
)
from .knobs import MODELS, KnobError, Knobs, parse_knobs, split_model
from .plan import Event, Plan, build_plan, request_digest, scheduled_timing
from .recorder import Recorder
from .request import responses_turn
from .wire import Exchange, Frame, StreamContext, run_stream

__all__ = ["INPUT_ROLES", "handle_responses"]

#: Roles of ``input`` message items (seed 002 ``ResponseMessage`` / ``invalid_role`` example).
INPUT_ROLES = ("user", "assistant", "system", "developer")
_EFFORTS = ("low", "medium", "high")


@dataclass
class _Resp:
    body: dict[str, Any]
    knobs: Knobs
    plan: Plan
    model: str
    response_id: str
    key: str
    created: int


async def handle_responses(ex: Exchange, options: str | None, raw: bytes) -> None:
    """Answer one ``POST /responses`` (see the module docstring)."""
    rid = ex.request_id
    ex.record.dialect = "openai_responses"
    try:
        body = Recorder.set_body(ex.record, raw, ex.api_key)
    except ValueError:
        body = None
    if not isinstance(body, dict):
        await ex.error(validation_error("invalid_json", request_id=rid))
        return
    model = body.get("model")
    if not isinstance(model, str) or not model.strip():
        await ex.error(validation_error("missing_model", request_id=rid))
        return
    base = split_model(model)[0]
    ex.record.model = base
    try:
        knobs = parse_knobs(model, options)
    except KnobError as exc:
        await ex.error(
            validation_error("invalid_option", request_id=rid, message=str(exc), param=exc.param)
        )
        return
    ex.record.knobs = knobs.as_dict()
    ex.split_utf8 = knobs.split_utf8
    stream = body.get("stream") is True
    ex.record.stream = stream
    if knobs.require_key and not ex.api_key:
        await ex.error(missing_key_error(rid))
        return
    if knobs.http_fault:
        await ex.error(fault_response(knobs.http_fault, **ex.fault_args(base, knobs.retry_after)))
        return
    if base not in MODELS:
        await ex.error(validation_error("model_not_found", request_id=rid, model=base))
        return
    problem = _check_input(body.get("input"), rid)
    if problem is not None:
        await ex.error(problem)
        return
    max_tokens = body.get("max_output_tokens")
    if max_tokens is not None and (
        not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1
    ):
        await ex.error(
            validation_error(
                "invalid_param", request_id=rid, param="max_output_tokens", value=max_tokens
            )
        )
        return
    turn = responses_turn(body)
    ex.record.media = turn.media
    if turn.tool_choice == "named" and turn.chosen_tool(True) is None and turn.tool_result is None:
        await ex.error(
            validation_error(
                "invalid_param", request_id=rid, param="tool_choice", value=turn.tool_name
            )
        )
        return
    digest = request_digest(body, options)
    plan = build_plan(turn, knobs, reasoning=knobs.reasoning, max_tokens=max_tokens, digest=digest)
    resp = _Resp(
        body=body,
        knobs=knobs,
        plan=plan,
        model=base,
        response_id=f"resp_{digest[:32]}",
        key=digest[:24],
        created=int(time.time()),
    )
    if stream:
        ctx = StreamContext(knobs, sequence=True)
        await run_stream(ex, ctx, _frames(resp), lambda fault: _error_frames(resp, fault))
    else:
        await _complete(ex, resp)


def _check_input(value: Any, request_id: str) -> ErrorResponse | None:
    """Seed 002's ``/responses`` 400 examples: missing, empty, or a bad role."""
    if value is None:
        return validation_error("missing_input", request_id=request_id)
    if value == "" or value == [] or not isinstance(value, str | list):
        return validation_error("empty_input", request_id=request_id)
    if isinstance(value, list):
        for index, item in enumerate(value):
            if not isinstance(item, dict):
                return validation_error("empty_input", request_id=request_id)
            if (item.get("type") or "message") == "message" and item.get("role") not in INPUT_ROLES:
                return validation_error(
                    "invalid_input_role", request_id=request_id, role=item.get("role"), index=index
                )
    return None


# ---- shapes -------------------------------------------------------------------------------


def _number(value: Any, default: float) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value
    return default


def _response(resp: _Resp, status: str, output: list[dict[str, Any]]) -> dict[str, Any]:
    """A seed 002 ``ResponseResponse`` (without ``usage``) echoing the request's settings."""
    body = resp.body
    reasoning = body.get("reasoning") if isinstance(body.get("reasoning"), dict) else {}
    effort = reasoning.get("effort") if reasoning.get("effort") in _EFFORTS else None
    summary = reasoning.get("summary") if isinstance(reasoning.get("summary"), str) else None
    text = body.get("text") if isinstance(body.get("text"), dict) else {}
    fmt = text.get("format") if isinstance(text.get("format"), dict) else {"type": "text"}
    # only function tools: the seed says other tool types are filtered server-side
    tools = [
        t for t in body.get("tools") or [] if isinstance(t, dict) and t.get("type") == "function"
    ]
    metadata = body.get("metadata") if isinstance(body.get("metadata"), dict) else {}
    instructions = body.get("instructions")
    max_output = body.get("max_output_tokens")
    return {
        "id": resp.response_id,
        "object": "response",
        "created_at": resp.created,
        "status": status,
        "completed_at": None,
        "model": resp.model,
        "output": output,
        "error": None,
        "incomplete_details": None,
        "instructions": instructions if isinstance(instructions, str) else None,
        "max_output_tokens": max_output if isinstance(max_output, int) else None,
        "metadata": metadata,
        "parallel_tool_calls": body.get("parallel_tool_calls") is not False,
        "previous_response_id": None,
        "reasoning": {"effort": effort, "summary": summary},
        "store": False,
        "background": False,
        "service_tier": "default",
        "temperature": _number(body.get("temperature"), 1.0),
        "top_p": _number(body.get("top_p"), 1.0),
        "frequency_penalty": _number(body.get("frequency_penalty"), 0.0),
        "presence_penalty": _number(body.get("presence_penalty"), 0.0),
        "text": {"format": fmt},
        "tool_choice": body.get("tool_choice") or "auto",
        "tools": tools,
        "truncation": "disabled",
        "user": None,
    }


def _usage(resp: _Resp) -> dict[str, Any]:
    """Seed 002 ``ResponseUsage`` with SambaNova's timing fields (seconds, scheduled)."""
    plan, knobs = resp.plan, resp.knobs
    timing = scheduled_timing(plan, knobs)
    start = float(resp.created)
    return {
        "input_tokens": plan.prompt_tokens,
        "output_tokens": plan.completion_tokens,
        "total_tokens": plan.prompt_tokens + plan.completion_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens_details": {"reasoning_tokens": plan.reasoning_tokens},
        "start_time": start,
        "end_time": start + timing.total_latency,
        "time_to_first_token": round(timing.time_to_first_token, 6),
        "total_latency": round(timing.total_latency, 6),
        "output_tokens_per_sec": round(timing.tokens_per_sec, 6),
        "output_tokens_after_first_per_sec": round(timing.tokens_after_first_per_sec, 6),
        "total_tokens_per_sec": round(timing.total_tokens_per_sec, 6),
        "is_last_response": True,
    }


def _segments(plan: Plan) -> list[tuple[str, list[Event]]]:
    """The plan's events grouped into output items, in order: reasoning, message, tool."""
    groups: dict[str, list[Event]] = {"reasoning": [], "content": [], "tool": []}
    for event in plan.events:
        groups[event.kind].append(event)
    out: list[tuple[str, list[Event]]] = []
    if groups["reasoning"]:
        out.append(("reasoning", groups["reasoning"]))
    if groups["content"] or plan.tool_call is None:
        out.append(("content", groups["content"]))
    if plan.tool_call is not None:
        out.append(("tool", groups["tool"]))
    return out


def _items(resp: _Resp) -> list[dict[str, Any]]:
    """The completed ``output`` items (seed 002 ``ResponseOutputItem``)."""
    plan, key = resp.plan, resp.key
    items: list[dict[str, Any]] = []
    for kind, events in _segments(plan):
        text = "".join(e.text for e in events)
        if kind == "reasoning":
            item: dict[str, Any] = {"id": f"rs_{key}", "type": "reasoning", "status": "completed"}
            if resp.knobs.reasoning_kind == "summary":
                item["summary"] = [{"type": "summary_text", "text": text}]
            else:
                item["summary"] = []
                item["content"] = [{"type": "reasoning_text", "text": text}]
        elif kind == "content":
            item = {
                "id": f"msg_{key}",
                "type": "message",
                "role": "assistant",
                "status": "completed" if plan.finish_reason != "length" else "incomplete",
                "content": [_text_part(text)],
            }
        else:
            call = plan.tool_call
            assert call is not None
            item = {
                "id": f"fc_{key}",
                "type": "function_call",
                "call_id": f"call_{call.key}",
                "name": call.name,
                "arguments": text,
                "status": "completed" if plan.finish_reason != "length" else "incomplete",
            }
        items.append(item)
    return items


def _text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def _final(resp: _Resp) -> dict[str, Any]:
    """The final ``ResponseResponse``: completed, or incomplete after a ``max_output_tokens``
    cut; with usage unless ``usage=none``."""
    incomplete = resp.plan.finish_reason == "length"
    final = _response(resp, "incomplete" if incomplete else "completed", _items(resp))
    if incomplete:
        final["incomplete_details"] = {"reason": "max_output_tokens"}
    else:
        latency = scheduled_timing(resp.plan, resp.knobs).total_latency
        final["completed_at"] = resp.created + round(latency)
    if resp.knobs.usage != "none":
        final["usage"] = _usage(resp)
    return final


def _ev(kind: str, obj: dict[str, Any], **extra: Any) -> Frame:
    """A frame of event type ``obj["type"]`` with a ``sequence_number`` placeholder."""
    payload = {"type": obj.pop("type"), "sequence_number": None, **obj}
    return Frame(kind, obj=payload, event=payload["type"], **extra)


def _frames(resp: _Resp) -> list[Frame]:
    plan, knobs = resp.plan, resp.knobs
    frames = [
        _ev("start", {"type": "response.created", "response": _response(resp, "in_progress", [])}),
        _ev(
            "start",
            {"type": "response.in_progress", "response": _response(resp, "in_progress", [])},
        ),
    ]
    done_items = _items(resp)
    for index, ((kind, events), done_item) in enumerate(
        zip(_segments(plan), done_items, strict=True)
    ):
        item_id = done_item["id"]
        place = {"item_id": item_id, "output_index": index}
        text = "".join(e.text for e in events)
        if kind == "reasoning":
            added: dict[str, Any] = {"id": item_id, "type": "reasoning", "status": "in_progress"}
            added["summary"] = []
            if knobs.reasoning_kind == "text":
                added["content"] = []
        elif kind == "content":
            added = {
                "id": item_id,
                "type": "message",
                "role": "assistant",
                "status": "in_progress",
                "content": [],
            }
        else:
            added = {**done_item, "arguments": "", "status": "in_progress"}
        frames.append(
            _ev(
                "block",
                {"type": "response.output_item.added", "output_index": index, "item": added},
            )
        )
        if kind == "reasoning" and knobs.reasoning_kind == "summary":
            summary_place = {**place, "summary_index": 0}
            frames.append(
                _ev(
                    "block",
                    {
                        "type": "response.reasoning_summary_part.added",
                        **summary_place,
                        "part": {"type": "summary_text", "text": ""},
                    },
                )
            )
            for event in events:
                frames.append(
                    _ev(
                        "reasoning",
                        {
                            "type": "response.reasoning_summary_text.delta",
                            **summary_place,
                            "delta": event.text,
                        },
                        tokens=event.tokens,
                        token=True,
                    )
                )
            frames.append(
                _ev(
                    "block",
                    {"type": "response.reasoning_summary_text.done", **summary_place, "text": text},
                )
            )
            frames.append(
                _ev(
                    "block",
                    {
                        "type": "response.reasoning_summary_part.done",
                        **summary_place,
                        "part": {"type": "summary_text", "text": text},
                    },
                )
            )
        elif kind == "reasoning":
            part_place = {**place, "content_index": 0}
            frames.append(
                _ev(
                    "block",
                    {
                        "type": "response.content_part.added",
                        **part_place,
                        "part": {"type": "reasoning_text", "text": ""},
                    },
                )
            )
            for event in events:
                frames.append(
                    _ev(
                        "reasoning",
                        {
                            "type": "response.reasoning_text.delta",
                            **part_place,
                            "delta": event.text,
                        },
                        tokens=event.tokens,
                        token=True,
                    )
                )
            frames.append(
                _ev("block", {"type": "response.reasoning_text.done", **part_place, "text": text})
            )
            frames.append(
                _ev(
                    "block",
                    {
                        "type": "response.content_part.done",
                        **part_place,
                        "part": {"type": "reasoning_text", "text": text},
                    },
                )
            )
        elif kind == "content":
            part_place = {**place, "content_index": 0}
            frames.append(
                _ev(
                    "block",
                    {"type": "response.content_part.added", **part_place, "part": _text_part("")},
                )
            )
            for event in events:
                frames.append(
                    _ev(
                        "content",
                        {
                            "type": "response.output_text.delta",
                            **part_place,
                            "delta": event.text,
                            "annotations": [],
                            "logprobs": [],
                        },
                        tokens=event.tokens,
                        token=True,
                    )
                )
            frames.append(
                _ev(
                    "block",
                    {
                        "type": "response.output_text.done",
                        **part_place,
                        "text": text,
                        "annotations": [],
                        "logprobs": [],
                    },
                )
            )
            frames.append(
                _ev(
                    "block",
                    {"type": "response.content_part.done", **part_place, "part": _text_part(text)},
                )
            )
        else:
            for event in events:
                frames.append(
                    _ev(
                        "tool",
                        {
                            "type": "response.function_call_arguments.delta",
                            **place,
                            "delta": event.text,
                        },
                        tokens=event.tokens,
                        token=True,
                    )
                )
            frames.append(
                _ev(
                    "block",
                    {
                        "type": "response.function_call_arguments.done",
                        **place,
                        "name": done_item["name"],
                        "arguments": text,
                    },
                )
            )
        frames.append(
            _ev(
                "block",
                {"type": "response.output_item.done", "output_index": index, "item": done_item},
            )
        )
    final = _final(resp)
    event_type = "response.incomplete" if final["status"] == "incomplete" else "response.completed"
    frames.append(_ev("finish", {"type": event_type, "response": final}, tail=True))
    return frames


def _error_frames(resp: _Resp, fault: str) -> list[Frame]:
    if fault == "error_event":
        return [_ev("error", responses_error_event())]
    failed = _response(resp, "failed", [])
    failed["error"] = {
        "code": "server_error",
        "message": "The model stopped unexpectedly (simulated mid-stream error).",
    }
    return [_ev("error", {"type": "response.failed", "response": failed})]


async def _complete(ex: Exchange, resp: _Resp) -> None:
    knobs, plan = resp.knobs, resp.plan
    if not await ex.wait_latency(knobs, len(plan.events)):
        return
    if knobs.has("error_chunk") or knobs.has("error_event"):
        outcome = "error_chunk" if knobs.has("error_chunk") else "error_event"
        await ex.json(
            500, stream_error_chunk(ex.request_id), ascii_only=knobs.ascii, outcome=outcome
        )
        return
    final = _final(resp)
    if knobs.has("cut"):
        await ex.send_half(final, plan.completion_tokens // 2, knobs.ascii)
        return
    await ex.json(200, final, tokens=plan.completion_tokens, ascii_only=knobs.ascii)
