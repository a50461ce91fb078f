"""The ``openai_responses`` adapter: ``POST {base}/responses`` with ``stream: true``.

Speaks the OpenAI Responses dialect as served by SambaNova Cloud (``/responses`` in seed 002:
``ResponseRequest``, ``ResponseStreamEvent``, ``ResponseResponse``), OpenAI and llama.cpp's
``llama-server``. It turns the SSE stream into the events of :mod:`chat.providers.base` and
raises one ``ProviderError`` for every failure.

Wire facts handled here:

* Every event's kind is read from the data's ``type`` field; the ``event:`` line is only a
  fallback, so streams with and without ``event:`` lines read the same.
* Text: ``response.output_text.delta`` (with ``logprobs`` → ``LogprobsDelta``) and
  ``response.refusal.delta``. Reasoning: ``response.reasoning_text.delta`` (SambaNova,
  llama.cpp) and ``response.reasoning_summary_text.delta`` (OpenAI), both ``ReasoningDelta``.
* Tool calls: ``response.output_item.added`` with a ``function_call`` item gives ``call_id``
  and ``name``; ``response.function_call_arguments.delta`` pieces are matched to it by
  ``item_id`` (llama.cpp sends no ``output_index``) or ``output_index``. ``ToolCallDelta.index``
  counts tool calls; a new item id at an ``output_index`` already used starts a new call.
* Server-side tools (``web_search_call``, ``file_search_call``, ``code_interpreter_call``,
  ``image_generation_call``, ``mcp_call``, ``mcp_list_tools``) become one ``ServerToolUse``
  each when their item is done (or from the final ``output``), never a ``ToolCallDelta``.
* Inline reasoning: output text passes through the shared
  :class:`chat.providers.text.InlineReasoningSplitter` (llama.cpp builds this dialect from the
  same parsed message as chat completions, so ``<think>`` or a lone ``</think>`` can arrive in
  ``output_text`` too).
* Final text: the protocol repeats the whole text at the end (``response.output_text.done``,
  else the ``output`` of ``response.completed`` / ``response.incomplete``). When that copy
  differs from what was streamed (a delta lost to an unreadable chunk), a ``FinalText`` with
  the copy's answer comes before ``Usage`` and ``Finish``; the upstream's copy wins.
* Servers that send only ``*.done`` events or whole items: the text, reasoning or arguments of
  an item whose deltas never came are taken from ``response.output_text.done``,
  ``response.reasoning_text.done``, ``response.function_call_arguments.done``,
  ``response.output_item.done`` or ``response.completed``'s ``output`` (once per item).
* End: ``response.completed`` → ``Usage`` and ``Finish("stop")`` (``"tool_calls"`` when the
  model called a tool); ``response.incomplete`` → ``Finish("length")`` for
  ``max_output_tokens``, ``"content_filter"`` for ``content_filter``, else the reason as sent;
  ``response.failed`` → ``Usage`` if any, then ``ProviderError`` with ``response.error``'s code
  and message; ``error`` events and bare ``{"error": …}`` chunks (llama.cpp) →
  ``ProviderError`` (status None). The upstream's word is kept in ``Finish.upstream_reason``.
  The body ending before a terminal event raises ``stream_cut``.
* Usage (seed 002 ``ResponseUsage``): ``input_tokens``, ``output_tokens``, ``total_tokens``,
  ``output_tokens_details.reasoning_tokens``, ``input_tokens_details.cached_tokens``, and
  SambaNova's timings (``time_to_first_token`` and ``total_latency`` in seconds → ms,
  ``output_tokens_per_sec``).

Request decisions: the history goes in ``input`` as ``type: message`` items with content
arrays (llama.cpp requires ``type: message`` on assistant items), tool calls and results as
``function_call`` / ``function_call_output`` items; ``store: false`` (the playground sends the
whole history every turn, nothing needs keeping upstream); a JSON ``response_format`` goes as
``text.format`` and, except to ``api.openai.com``, also as ``response_format`` (llama.cpp's
``/v1/responses`` copies the body into a chat completion and reads only that field). Not carried by this dialect and
dropped: ``stop``, ``seed``; ``top_k`` is sent (seed 002 takes it) except to
``api.openai.com``.

May import: the standard library, httpx, httpx-sse and this package (no Django).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx

from . import openai_chat
from .base import (
    ChatMessage,
    ChatRequest,
    EndpointConfig,
    Event,
    FinalText,
    Finish,
    ModelInfo,
    ProviderError,
    ServerToolUse,
    ToolCallDelta,
    Usage,
    part_base64,
    replay_arguments,
    scrub,
)
from .errors import EXCERPT_CHARS, error_from_event, model_output_error, unsupported_content_error
from .http import loads, merge_headers, stream_sse
from .openai_chat import (
    _int,
    _num,
    _sub,
    audio_format,
    data_uri,
    host_in,
    logprobs_event,
    merge_extra,
    tool_function,
    user_param_items,
)
from .text import InlineReasoningSplitter, split_inline_reasoning

API_STYLE = "openai_responses"

#: Attachment types (``ContentPart.type``) this API style carries: ``input_image`` and
#: ``input_audio`` (seed 002 ``ResponseImageContent`` / ``ResponseAudioContent``).
CONTENT_TYPES = frozenset({"image", "audio"})

#: ``ChatRequest.params`` name → body field (seed 002 ``ResponseRequest``).
PARAMS = {
    "temperature": "temperature",
    "top_p": "top_p",
    "top_k": "top_k",
    "max_tokens": "max_output_tokens",
    "frequency_penalty": "frequency_penalty",
    "presence_penalty": "presence_penalty",
}

#: Hosts that reject ``top_k``; they get ``reasoning.summary: "auto"`` (OpenAI streams no
#: reasoning text otherwise) and ``include`` for log probabilities.
OPENAI_HOSTS = openai_chat.OPENAI_HOSTS

#: ``incomplete_details.reason`` → ``Finish.reason``.
INCOMPLETE_REASONS = {"max_output_tokens": "length", "content_filter": "content_filter"}


# ---- request ------------------------------------------------------------------------------


def _headers(config: EndpointConfig, accept: str) -> dict[str, str]:
    headers = {"Accept": accept, "Content-Type": "application/json"}
    if config.api_key:
        headers["Authorization"] = f"Bearer {config.api_key}"
    return merge_headers(headers, config.extra_headers)


def _items(message: ChatMessage) -> list[dict[str, Any]]:
    """The ``input`` items of one history message (seed 002 ``ResponseInputItem``)."""
    if message.role == "tool":
        return [
            {
                "type": "function_call_output",
                "call_id": message.tool_call_id,
                "output": message.content,
            }
        ]
    if message.role == "assistant":
        items: list[dict[str, Any]] = []
        if message.content:
            items.append(
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": message.content}],
                }
            )
        for call in message.tool_calls:
            items.append(
                {
                    "type": "function_call",
                    "call_id": call.id,
                    "name": call.name,
                    "arguments": replay_arguments(call.arguments),
                }
            )
        return items
    content: list[dict[str, Any]] = []
    if message.content or not message.parts:
        content.append({"type": "input_text", "text": message.content})
    if message.role == "user":
        for part in message.parts:
            if part.type == "image":
                content.append({"type": "input_image", "image_url": data_uri(part)})
            elif part.type == "audio":
                content.append(
                    {
                        "type": "input_audio",
                        "input_audio": {"data": part_base64(part), "format": audio_format(part)},
                    }
                )
    return [{"type": "message", "role": message.role, "content": content}]


def _tools(request: ChatRequest) -> list[dict[str, Any]]:
    """Tools in Responses form (seed 002 ``ResponseTool``: flat ``type``, ``name``,
    ``description``, ``parameters``, ``strict``) from OpenAI chat form."""
    tools = []
    for tool in request.tools:
        function = tool_function(tool) if isinstance(tool, dict) else None
        if function is None:
            continue
        out: dict[str, Any] = {"type": "function", "name": function["name"]}
        for key in ("description", "parameters", "strict"):
            if function.get(key) is not None:
                out[key] = function[key]
        tools.append(out)
    return tools


def _tool_choice(choice: str) -> str | dict[str, Any]:
    if choice in ("auto", "none", "required"):
        return choice
    return {"type": "function", "name": choice}


def text_format(response_format: dict[str, Any] | None) -> dict[str, Any] | None:
    """``text.format`` (seed 002 ``ResponseFormatConfiguration``) from a chat-completions
    ``response_format``: ``json_schema``'s ``name``, ``schema``, ``strict``, ``description``
    move up beside ``type`` (Responses has no ``json_schema`` wrapper); ``json_object`` and
    ``text`` pass as ``{"type"}``; None for None or an unknown type."""
    if not isinstance(response_format, dict):
        return None
    kind = response_format.get("type")
    if kind in ("text", "json_object"):
        return {"type": kind}
    if kind != "json_schema":
        return None
    inner = response_format.get("json_schema")
    spec = inner if isinstance(inner, dict) else response_format
    out: dict[str, Any] = {"type": "json_schema", "name": spec.get("name") or "response"}
    for key in ("description", "schema", "strict"):
        if spec.get(key) is not None:
            out[key] = spec[key]
    return out


def build_request(config: EndpointConfig, request: ChatRequest) -> tuple[str, dict[str, str], dict]:
    """Build ``(url, headers, json_body)`` for a streamed ``POST {base}/responses``.

    * url: ``{base_url}/responses``; headers: ``Accept: text/event-stream``, ``Content-Type``,
      ``Authorization: Bearer <key>`` when a key is set, then ``config.extra_headers``.
    * body (seed 002 ``ResponseRequest``): ``model``; ``input`` items: ``{"type": "message",
      "role", "content": [...]}`` with ``input_text`` / ``input_image`` (data URI or URL) /
      ``input_audio`` (``{"data", "format"}``) parts for user and system turns and
      ``output_text`` for assistant turns, ``function_call`` items (``call_id``, ``name``,
      ``arguments`` as :func:`chat.providers.base.replay_arguments` makes them: ``"{}"`` for
      blank, never invalid JSON) for an assistant's tool calls, ``function_call_output`` (``call_id``,
      ``output``) for tool results; ``instructions`` = the system prompt when not blank; the
      params the user set among temperature, top_p, top_k (not for api.openai.com),
      ``max_tokens`` as ``max_output_tokens``, frequency_penalty, presence_penalty;
      ``reasoning: {"effort"}`` when an effort is set (plus ``summary: "auto"`` for
      api.openai.com); ``text: {"format": …}`` from ``response_format`` (see
      :func:`text_format`) and, except for api.openai.com, ``response_format`` itself as well
      (llama.cpp reads only that one, so its grammar constrains the answer); ``tools`` in Responses form and, with tools, ``tool_choice``
      ("auto", "none", "required", or ``{"type": "function", "name"}``); ``top_logprobs``
      when log probabilities are asked for (plus ``include:
      ["message.output_text.logprobs"]`` for api.openai.com); ``store: false``;
      ``stream: true``; ``request.extra`` merged last (never replacing model, input, stream).

    Pure; raises nothing.
    """
    base = config.base_url.strip().rstrip("/")
    url = f"{base}/responses"
    headers = _headers(config, "text/event-stream")
    is_openai = host_in(base, OPENAI_HOSTS)

    items: list[dict[str, Any]] = []
    for message in request.messages:
        items.extend(_items(message))
    body: dict[str, Any] = {"model": request.model, "input": items}
    if request.system.strip():
        body["instructions"] = request.system
    for name, value in user_param_items(request):
        field = PARAMS.get(name)
        if field is None or (is_openai and name == "top_k"):
            continue
        body[field] = value
    effort = request.reasoning.get("effort")
    if isinstance(effort, str) and effort:
        body["reasoning"] = {"effort": effort, **({"summary": "auto"} if is_openai else {})}
    text = text_format(request.response_format)
    if text is not None:
        body["text"] = {"format": text}
        if not is_openai and text["type"] != "text":
            # llama.cpp's /v1/responses turns the body into a chat completion by copying it and
            # ignores text.format, so the chat-completions form rides along (seed 002's
            # ResponseRequest allows additional properties; OpenAI rejects the field).
            body["response_format"] = request.response_format
    tools = _tools(request)
    if tools:
        body["tools"] = tools
        if request.tool_choice:
            body["tool_choice"] = _tool_choice(request.tool_choice)
    if request.logprobs:
        body["top_logprobs"] = request.top_logprobs if request.top_logprobs is not None else 0
        if is_openai:
            body["include"] = ["message.output_text.logprobs"]
    body["store"] = False
    body["stream"] = True
    return url, headers, merge_extra(body, request.extra)


# ---- usage and finish ---------------------------------------------------------------------


def normalize_usage(usage: dict[str, Any] | None) -> Usage:
    """Map seed 002 ``ResponseUsage`` to ``Usage``: ``input_tokens`` → prompt,
    ``output_tokens`` → completion (reasoning included), ``total_tokens``,
    ``output_tokens_details.reasoning_tokens``, ``input_tokens_details.cached_tokens``;
    SambaNova's ``time_to_first_token`` and ``total_latency`` (seconds) → ms,
    ``output_tokens_per_sec`` → tokens per second. ``raw`` is the object as received."""
    usage = usage if isinstance(usage, dict) else {}
    ttft = _num(usage.get("time_to_first_token"))
    total_latency = _num(usage.get("total_latency"))
    return Usage(
        prompt_tokens=_int(usage.get("input_tokens")),
        completion_tokens=_int(usage.get("output_tokens")),
        total_tokens=_int(usage.get("total_tokens")),
        reasoning_tokens=_int(_sub(usage.get("output_tokens_details"), "reasoning_tokens")),
        cached_tokens=_int(_sub(usage.get("input_tokens_details"), "cached_tokens")),
        upstream_ttft_ms=ttft * 1000.0 if ttft is not None else None,
        upstream_tokens_per_sec=_num(usage.get("output_tokens_per_sec")),
        upstream_total_ms=total_latency * 1000.0 if total_latency is not None else None,
        raw=dict(usage),
    )


# ---- stream interpretation ----------------------------------------------------------------


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _texts(parts: Any, *kinds: str) -> str:
    """The joined ``text`` of the parts of the given types."""
    if not isinstance(parts, list):
        return ""
    return "".join(
        p["text"]
        for p in parts
        if isinstance(p, dict) and p.get("type") in kinds and isinstance(p.get("text"), str)
    )


#: Output item types the server ran itself (shown as ``ServerToolUse``).
SERVER_ITEMS = frozenset(
    {
        "web_search_call",
        "file_search_call",
        "code_interpreter_call",
        "image_generation_call",
        "mcp_call",
        "mcp_list_tools",
    }
)


def _clip(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def server_item_event(item: dict[str, Any]) -> ServerToolUse:
    """The ``ServerToolUse`` of a server-side output item: ``name`` the item type without
    ``_call`` (or the MCP tool's name), ``input_json`` its ``action`` / ``arguments`` /
    ``queries`` / ``code`` as JSON, ``result_summary`` its status and, where present, its
    ``output`` or ``error`` (≤ 300 characters)."""
    kind = _str(item.get("type"))
    name = _str(item.get("name")) or kind.removesuffix("_call")
    tool_input: Any = None
    for key in ("action", "arguments", "queries", "code"):
        if item.get(key) not in (None, "", [], {}):
            tool_input = item[key]
            break
    if tool_input is None:
        input_json = ""
    elif isinstance(tool_input, str):
        input_json = tool_input if key == "arguments" else json.dumps(tool_input)
    else:
        input_json = json.dumps(tool_input, ensure_ascii=False)
    parts = [_str(item.get("status"))]
    for key in ("error", "output"):
        value = item.get(key)
        if value not in (None, "", [], {}):
            text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            parts.append(f"{key}: {text}")
    results = item.get("results")
    if isinstance(results, list) and results:
        parts.append(f"{len(results)} results")
    return ServerToolUse(
        kind,
        name=name,
        id=_str(item.get("id")),
        input_json=input_json,
        result_summary=_clip("; ".join(p for p in parts if p)),
    )


def _message_text(item: dict[str, Any]) -> str:
    """The answer text of a ``message`` output item: its ``output_text`` and ``refusal``
    parts in order."""
    content = item.get("content")
    if not isinstance(content, list):
        return ""
    out = []
    for part in content:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "output_text" and isinstance(part.get("text"), str):
            out.append(part["text"])
        elif part.get("type") == "refusal" and isinstance(part.get("refusal"), str):
            out.append(part["refusal"])
    return "".join(out)


class _ResponseStream:
    """Per-stream state for :func:`chat.providers.http.stream_sse`.

    Items are keyed by ``item_id`` and by ``"#<output_index>"`` (servers send one, the other or
    both). ``_streamed`` holds the keys of items whose text/reasoning/arguments arrived as
    deltas, so a later ``*.done`` or ``response.completed`` does not repeat them. ``_raw``
    holds the answer text as it went into the inline-reasoning splitter, and ``_done_texts``
    the ``*.done`` copies, to compare with the final copy (``FinalText``).
    """

    def __init__(self, secrets: list[str], request_id: str | None) -> None:
        self.secrets = secrets
        self.request_id = request_id
        self.finished = False
        self.done = False
        self.splitter = InlineReasoningSplitter()
        self._calls: dict[str, int] = {}  # item key → tool-call ordinal
        self._call_items: dict[int, str] = {}  # ordinal → item id (or call id)
        self._call_count = 0
        self._streamed: set[str] = set()
        self._streamed_kinds: set[str] = set()  # "text" / "reasoning" / "arguments"
        self._server_done: set[str] = set()
        self._raw: list[str] = []
        self._done_texts: dict[str, list[str]] = {}  # item key → its parts' done texts
        self._pending: list[Event] = []

    # -- helpers --------------------------------------------------------------------------
    @staticmethod
    def _keys(item_id: Any, output_index: Any) -> list[str]:
        keys = []
        if isinstance(item_id, str) and item_id:
            keys.append(item_id)
        if isinstance(output_index, int) and not isinstance(output_index, bool):
            keys.append(f"#{output_index}")
        return keys

    def _mark(self, keys: list[str], kind: str) -> None:
        self._streamed.update(f"{kind}:{k}" for k in keys)
        self._streamed_kinds.add(kind)

    def _was_streamed(self, keys: list[str], kind: str) -> bool:
        if not keys:
            return kind in self._streamed_kinds
        return any(f"{kind}:{k}" in self._streamed for k in keys)

    def _call_ordinal(self, keys: list[str], identity: str = "") -> tuple[int, bool]:
        """``(ordinal, is_new)`` of the tool call known under any of ``keys``. ``identity``
        (the item id, else the call id) of a call being announced: a different identity at a
        known key (the same ``output_index``) is a new call."""
        for key in keys:
            if key in self._calls:
                ordinal = self._calls[key]
                known = self._call_items.get(ordinal, "")
                if identity and known and known != identity:
                    break
                if identity:
                    self._call_items[ordinal] = identity
                self._calls.update(dict.fromkeys(keys, ordinal))
                return ordinal, False
        ordinal = self._call_count
        self._call_count += 1
        self._calls.update(dict.fromkeys(keys or [f"anon-{ordinal}"], ordinal))
        if identity:
            self._call_items[ordinal] = identity
        return ordinal, True

    def _fail(self, payload: Any, data: str) -> ProviderError:
        output = model_output_error(payload, self.secrets)
        if output is not None:
            self._pending.append(output)
        return error_from_event(payload, data, self.secrets, request_id=self.request_id)

    def _text(self, text: str) -> list[Event]:
        """Answer text into the splitter (and into the copy compared with the final text)."""
        if not text:
            return []
        self._raw.append(text)
        return self.splitter.feed(text)

    # -- events ---------------------------------------------------------------------------
    def interpret(self, event: str, payload: Any, data: str) -> list[Event]:
        """Events for one SSE event (kind from the data's ``type``, else the ``event:`` line).
        Raises ``ProviderError`` for ``error``, ``response.failed`` and ``{"error": …}``."""
        kind = payload.get("type") if isinstance(payload, dict) else None
        if not isinstance(kind, str) or not kind:
            kind = event
        if kind == "error" or event == "error":
            raise self._fail(payload, data)
        if not isinstance(payload, dict):
            return []  # JSON but not an object: only the RawEvent shows it
        if payload.get("error") and not kind.startswith("response."):
            raise self._fail(payload, data)  # llama.cpp: ``data: {"error": {…}}``, no type
        handler = HANDLERS.get(kind)
        return handler(self, payload) if handler else []

    def output_item_added(self, payload: dict[str, Any]) -> list[Event]:
        item = payload.get("item")
        if not isinstance(item, dict) or item.get("type") != "function_call":
            return []
        keys = self._keys(item.get("id"), payload.get("output_index"))
        identity = _str(item.get("id")) or _str(item.get("call_id"))
        ordinal, _ = self._call_ordinal(keys, identity)
        arguments = _str(item.get("arguments"))
        if arguments:
            self._mark(keys, "arguments")
        return [
            ToolCallDelta(
                index=ordinal,
                id=_str(item.get("call_id")) or _str(item.get("id")) or None,
                name=_str(item.get("name")) or None,
                arguments=arguments,
            )
        ]

    def output_text_delta(self, payload: dict[str, Any]) -> list[Event]:
        delta = _str(payload.get("delta"))
        events: list[Event] = []
        if delta:
            self._mark(self._keys(payload.get("item_id"), payload.get("output_index")), "text")
            events.extend(self._text(delta))
        logprobs = logprobs_event(payload.get("logprobs"))
        if logprobs is not None:
            events.append(logprobs)
        return events

    def reasoning_delta(self, payload: dict[str, Any]) -> list[Event]:
        delta = _str(payload.get("delta"))
        if not delta:
            return []
        self._mark(self._keys(payload.get("item_id"), payload.get("output_index")), "reasoning")
        return self.splitter.reasoning(delta)

    def arguments_delta(self, payload: dict[str, Any]) -> list[Event]:
        delta = _str(payload.get("delta"))
        if not delta:
            return []
        keys = self._keys(payload.get("item_id"), payload.get("output_index"))
        ordinal, _ = self._call_ordinal(keys)
        self._mark(keys, "arguments")
        return [ToolCallDelta(index=ordinal, arguments=delta)]

    def arguments_done(self, payload: dict[str, Any]) -> list[Event]:
        keys = self._keys(payload.get("item_id"), payload.get("output_index"))
        arguments = _str(payload.get("arguments"))
        if not arguments or self._was_streamed(keys, "arguments"):
            return []
        ordinal, _ = self._call_ordinal(keys)
        self._mark(keys, "arguments")
        return [ToolCallDelta(index=ordinal, arguments=arguments)]

    def output_text_done(self, payload: dict[str, Any]) -> list[Event]:
        keys = self._keys(payload.get("item_id"), payload.get("output_index"))
        text = _str(payload.get("text")) or _str(payload.get("refusal"))
        if text:
            self._done_texts.setdefault(keys[0] if keys else "", []).append(text)
        if not text or self._was_streamed(keys, "text"):
            return []
        self._mark(keys, "text")
        return self._text(text)

    def reasoning_done(self, payload: dict[str, Any]) -> list[Event]:
        keys = self._keys(payload.get("item_id"), payload.get("output_index"))
        text = _str(payload.get("text"))
        if not text or self._was_streamed(keys, "reasoning"):
            return []
        self._mark(keys, "reasoning")
        return self.splitter.reasoning(text)

    def output_item_done(self, payload: dict[str, Any]) -> list[Event]:
        item = payload.get("item")
        if not isinstance(item, dict):
            return []
        return self._backfill(item, self._keys(item.get("id"), payload.get("output_index")))

    def _backfill(self, item: dict[str, Any], keys: list[str]) -> list[Event]:
        """The content of a finished output item that did not arrive as deltas."""
        kind = item.get("type")
        if kind == "message":
            text = _message_text(item)
            if text and not self._was_streamed(keys, "text"):
                self._mark(keys, "text")
                return self._text(text)
        elif kind == "reasoning":
            text = _texts(item.get("content"), "reasoning_text") or _texts(
                item.get("summary"), "summary_text"
            )
            if text and not self._was_streamed(keys, "reasoning"):
                self._mark(keys, "reasoning")
                return self.splitter.reasoning(text)
        elif kind == "function_call":
            identity = _str(item.get("id")) or _str(item.get("call_id"))
            ordinal, new = self._call_ordinal(keys, identity)
            arguments = _str(item.get("arguments"))
            if new:
                self._mark(keys, "arguments")
                return [
                    ToolCallDelta(
                        index=ordinal,
                        id=_str(item.get("call_id")) or _str(item.get("id")) or None,
                        name=_str(item.get("name")) or None,
                        arguments=arguments,
                    )
                ]
            if arguments and not self._was_streamed(keys, "arguments"):
                self._mark(keys, "arguments")
                return [ToolCallDelta(index=ordinal, arguments=arguments)]
        elif kind in SERVER_ITEMS:
            done_key = keys[0] if keys else f"anon-{len(self._server_done)}"
            if any(k in self._server_done for k in keys):
                return []
            self._server_done.update(keys or [done_key])
            return [server_item_event(item)]
        return []

    def _final_text(self, output: Any) -> list[Event]:
        """``FinalText`` when the upstream's final copy of the answer differs from what was
        streamed. The copy is, per message item in order, its ``response.output_text.done``
        texts when they came (each is "the full accumulated output text" of its content part,
        seed 002 ``ResponseOutputTextDoneEvent``), else the item's text in the terminal event's
        ``output`` (seed 002's own ``ResponseCompletedEvent`` example carries a shorter text
        than its done events, so done events win); without ``output``, the done texts."""
        parts: list[str] = []
        used: set[str] = set()
        items = output if isinstance(output, list) else []
        for index, item in enumerate(items):
            if not isinstance(item, dict) or item.get("type") != "message":
                continue
            keys = self._keys(item.get("id"), index)
            key = next((k for k in keys if k in self._done_texts), None)
            if key is not None:
                parts.extend(self._done_texts[key])
                used.add(key)
            else:
                parts.append(_message_text(item))
        for key, texts in self._done_texts.items():
            if key not in used:
                parts.extend(texts)
        if not parts:
            return []
        final = "".join(parts)
        if final == "".join(self._raw):
            return []
        _, answer = split_inline_reasoning(final)
        return [FinalText(answer)]

    def _response_end(self, response: Any) -> list[Event]:
        """Backfill from ``response.output``, then held text, the final-text check and the
        usage, for a terminal event."""
        if not isinstance(response, dict):
            return [*self.splitter.flush(), *self._final_text(None)]
        events: list[Event] = []
        output = response.get("output")
        for index, item in enumerate(output if isinstance(output, list) else []):
            if isinstance(item, dict):
                events.extend(self._backfill(item, self._keys(item.get("id"), index)))
        events.extend(self.splitter.flush())
        events.extend(self._final_text(output))
        usage = response.get("usage")
        if isinstance(usage, dict) and usage:
            events.append(normalize_usage(usage))
        return events

    def completed(self, payload: dict[str, Any]) -> list[Event]:
        events = self._response_end(payload.get("response"))
        reason = "tool_calls" if self._call_count else "stop"
        events.append(Finish(reason, upstream_reason="completed"))
        self.finished = self.done = True
        return events

    def incomplete(self, payload: dict[str, Any]) -> list[Event]:
        response = payload.get("response")
        events = self._response_end(response)
        details = response.get("incomplete_details") if isinstance(response, dict) else None
        raw = _str(details.get("reason")) if isinstance(details, dict) else ""
        events.append(
            Finish(INCOMPLETE_REASONS.get(raw, raw or "incomplete"), upstream_reason=raw or None)
        )
        self.finished = self.done = True
        return events

    def failed(self, payload: dict[str, Any]) -> list[Event]:
        response = payload.get("response")
        self._pending.extend(self._response_end(response))
        error = response.get("error") if isinstance(response, dict) else None
        data = scrub(json.dumps(payload, ensure_ascii=False), self.secrets)
        if isinstance(error, dict):
            raise self._fail({"error": error}, data)
        raise ProviderError(
            "The upstream reported that the response failed",
            code="response_failed",
            request_id=self.request_id,
            body_excerpt=data[:EXCERPT_CHARS],
        )

    def relay_json(self, text: str) -> list[Event]:
        """A whole ``ResponseResponse`` (seed 002) answering a streamed request."""
        payload = loads(text)
        if not isinstance(payload, dict):
            raise ProviderError(
                "The upstream answered with JSON that could not be parsed",
                code="bad_response",
                body_excerpt=scrub(text, self.secrets)[:EXCERPT_CHARS],
            )
        if payload.get("error") and payload.get("object") != "response":
            raise self._fail(payload, text)
        status = payload.get("status")
        wrapped = {"response": payload}
        if status == "failed":
            return self.failed(wrapped)
        if status == "incomplete":
            return self.incomplete(wrapped)
        return self.completed(wrapped)

    def end(self) -> list[Event]:
        events: list[Event] = [*self.splitter.flush(), *self._pending]
        self._pending = []
        return events


def _nothing(state: _ResponseStream, payload: dict[str, Any]) -> list[Event]:
    return []


HANDLERS = {
    "response.created": _nothing,
    "response.in_progress": _nothing,
    "response.output_item.added": _ResponseStream.output_item_added,
    "response.content_part.added": _nothing,
    "response.output_text.delta": _ResponseStream.output_text_delta,
    "response.refusal.delta": _ResponseStream.output_text_delta,
    "response.reasoning_text.delta": _ResponseStream.reasoning_delta,
    "response.reasoning_summary_text.delta": _ResponseStream.reasoning_delta,
    "response.function_call_arguments.delta": _ResponseStream.arguments_delta,
    "response.function_call_arguments.done": _ResponseStream.arguments_done,
    "response.output_text.done": _ResponseStream.output_text_done,
    "response.refusal.done": _ResponseStream.output_text_done,
    "response.reasoning_text.done": _ResponseStream.reasoning_done,
    "response.output_item.done": _ResponseStream.output_item_done,
    "response.completed": _ResponseStream.completed,
    "response.incomplete": _ResponseStream.incomplete,
    "response.failed": _ResponseStream.failed,
}


# ---- public API ---------------------------------------------------------------------------


def stream(
    client: httpx.AsyncClient, config: EndpointConfig, request: ChatRequest
) -> AsyncIterator[Event]:
    """Stream one ``POST {base}/responses`` as events (an async iterator; nothing is sent
    before the first iteration).

    Yields ``ResponseStarted(status, request_id)``, then per SSE event a ``RawEvent`` followed
    by its semantic events: ``TextDelta`` (+ ``LogprobsDelta``; through the inline-reasoning
    splitter, so also ``AnswerWasReasoning``), ``ReasoningDelta``, ``ToolCallDelta``,
    ``ServerToolUse``, ``StreamWarning`` for data that is not JSON, and at the end
    ``FinalText`` (only when the final copy differs), ``Usage`` and ``Finish`` (see the module
    docstring). A 2xx JSON ``ResponseResponse`` body is relayed as the same events.

    Raises ``ProviderError``: ``unsupported_content`` for attachments other than images and
    audio (before sending); :func:`chat.providers.errors.parse_error` for a non-2xx status
    (preceded by a ``ModelOutputError`` event for seed 002's ``adapter_mapping_failed`` with
    ``error_model_output``; ``path_not_found`` for a 404/405 that does not mention a model);
    the error of ``error`` / ``response.failed`` events (status None; code from the error,
    ``response_failed`` when it has none); ``stream_cut``, ``limit_exceeded`` and transport
    codes as in :func:`chat.providers.http.stream_sse`.
    """
    unsupported = unsupported_content_error(request, CONTENT_TYPES, API_STYLE)
    url, headers, body = build_request(config, request)
    return stream_sse(
        client, config, url, headers, body, _ResponseStream, error=unsupported, api_style=API_STYLE
    )


async def list_models(client: httpx.AsyncClient, config: EndpointConfig) -> list[ModelInfo]:
    """``GET {base}/models``, exactly as :func:`chat.providers.openai_chat.list_models`."""
    return await openai_chat.list_models(client, config)
