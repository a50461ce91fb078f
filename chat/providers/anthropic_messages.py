"""The ``anthropic_messages`` adapter: ``POST {base}/messages`` with ``stream: true``.

Speaks the Anthropic Messages dialect as served by SambaNova Cloud (seed 004 and ``/messages``
in seed 002: ``MessageCreateRequest``, ``MessageStreamEvent``, ``MessageErrorResponse``),
Anthropic and llama.cpp's ``llama-server``. It turns the SSE stream into the events of
:mod:`chat.providers.base` and raises one ``ProviderError`` for every failure.

Decisions, each from a seed or a server's behaviour:

* **Auth**: ``x-api-key`` *and* ``Authorization: Bearer`` carry the key. Seed 004/002 say
  SambaNova accepts either (``api_key`` and ``x_api_key`` security schemes, same key);
  llama-server checks ``Authorization`` first and falls back to ``X-Api-Key``; vLLM and Ollama
  Cloud take only Bearer. Anthropic's own API treats a Bearer header as an OAuth token and
  answers 401 "Invalid bearer token" for an API key, so for ``api.anthropic.com`` only
  ``x-api-key`` is sent. ``config.extra_headers`` win over both (set ``Authorization`` there to
  override).
* **Version**: ``anthropic-version: 2023-06-01`` (seed 004: accepted, any value, no effect).
* **max_tokens** is required by the API: the user's ``max_tokens``, else
  :data:`DEFAULT_MAX_TOKENS` (1024); with thinking enabled and no user value,
  ``budget_tokens + 1024`` (Anthropic requires ``max_tokens > budget_tokens``).
* **thinking**: ``{"type": "enabled", "budget_tokens": n}`` when ``reasoning["budget_tokens"]``
  is > 0, ``{"type": "disabled"}`` when it is exactly 0, absent otherwise. SambaNova v1 answers
  400 ``invalid_request_error`` to ``enabled`` (seed 004); that error is relayed as is.
* **Prior thinking** goes back as a ``thinking`` block only with its signature
  (``MessageInputThinkingBlock`` requires one; Anthropic rejects unsigned thinking). llama.cpp
  signs with an empty string, so its thinking is not sent back. ``redacted_thinking`` blocks
  arrive as :class:`RedactedThinking` (their ``data`` untouched) and go back unchanged, after
  the thinking block (``ChatMessage.redacted_thinking``): with thinking enabled, a tool-result
  turn must carry the previous turn's thinking blocks.
* **Server tools** (``server_tool_use``, ``web_search_tool_result``, ``mcp_tool_use``, any
  ``*_tool_result`` and every other block type but text, thinking, redacted_thinking and
  tool_use) ran on the server: each becomes one :class:`ServerToolUse` when its block stops,
  never a ``ToolCallDelta`` (the client has nothing to run or answer). They are not sent back.
* **Tool calls**: ``ToolCallDelta.index`` counts tool calls, not blocks; a ``tool_use`` block
  with a new id at a block index already used starts a new call. Arguments go back as
  :func:`chat.providers.base.replay_arguments` parsed (``{}`` for blank; cut-off JSON is
  wrapped, never sent invalid).
* **Inline reasoning**: text blocks pass through the shared
  :class:`chat.providers.text.InlineReasoningSplitter` (llama.cpp with
  ``--reasoning-format none`` puts ``<think>…</think>`` or only ``</think>`` in text).
* **Finish**: ``end_turn``/``stop_sequence`` → ``stop``, ``max_tokens``/
  ``model_context_window_exceeded`` → ``length``, ``tool_use`` → ``tool_calls``, ``refusal`` →
  ``content_filter``; other values as sent; the upstream word is kept in
  ``Finish.upstream_reason``.
* **Usage**: ``prompt_tokens`` = ``input_tokens`` + ``cache_read_input_tokens`` +
  ``cache_creation_input_tokens`` (Anthropic's ``input_tokens`` excludes cached tokens, and
  llama.cpp follows it); ``cached_tokens`` = ``cache_read_input_tokens``. The usage of
  ``message_start`` is provisional: its ``output_tokens`` is a placeholder (0 or 1), so that
  ``Usage`` has ``completion_tokens=None`` (prompt tokens are real); ``message_delta`` brings
  the final figures, merged (the last ``Usage`` wins). A stream stopped or cut before
  ``message_delta`` keeps completion tokens unknown, never the placeholder.
* Not carried by this dialect and dropped: ``seed``, penalties, ``response_format``,
  ``logprobs``. Audio attachments raise ``ProviderError(code="unsupported_content")``.

Stream-end rules: ``message_stop`` ends the stream normally (the rest of the body is drained);
the body ending after ``message_delta`` brought a ``stop_reason`` ends normally too; ending
before either raises ``ProviderError(code="stream_cut")``. An ``event: error`` (or a data
object of ``type: error``) raises ``ProviderError`` with status None and the error's type as
code (``overloaded_error``…). The SSE loop is :func:`chat.providers.http.stream_sse`. Anthropic
streams no final copy of the text (``content_block_stop`` and ``message_stop`` carry no text),
so there is no ``FinalText`` in this dialect; unreadable events still give ``StreamWarning``.

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
    Finish,
    ModelInfo,
    ProviderError,
    ReasoningSignature,
    RedactedThinking,
    ServerToolUse,
    ToolCallDelta,
    Usage,
    part_base64,
    replay_arguments,
    scrub,
)
from .errors import (
    EXCERPT_CHARS,
    error_from_event,
    model_output_error,
    secret_variants,
    unsupported_content_error,
)
from .http import (
    loads,
    merge_headers,
    request_json,
    stream_sse,
)
from .openai_chat import (
    ToolCallIndexer,
    _int,
    host_in,
    merge_extra,
    tool_function,
    user_param_items,
)
from .text import InlineReasoningSplitter

API_STYLE = "anthropic_messages"

#: Sent as ``anthropic-version`` (seed 004 example; the value Anthropic's SDK sends).
ANTHROPIC_VERSION = "2023-06-01"

#: ``max_tokens`` when the user set none (the API requires the field).
DEFAULT_MAX_TOKENS = 1024

#: Attachment types (``ContentPart.type``) this API style carries (``image`` blocks).
CONTENT_TYPES = frozenset({"image"})

#: Hosts that take the key only as ``x-api-key`` (a Bearer header there means an OAuth token).
X_API_KEY_ONLY_HOSTS = frozenset({"api.anthropic.com"})

#: ``ChatRequest.params`` name → body field (seed 002 ``MessageCreateRequest``).
PARAMS = {
    "temperature": "temperature",
    "top_p": "top_p",
    "top_k": "top_k",
    "stop": "stop_sequences",
}

#: Anthropic ``stop_reason`` (seed 002 ``MessageStopReason``) → ``Finish.reason``.
STOP_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}


# ---- request ------------------------------------------------------------------------------


def _base(config: EndpointConfig) -> str:
    return config.base_url.strip().rstrip("/")


def _headers(config: EndpointConfig, accept: str) -> dict[str, str]:
    """Accept, JSON content type, ``anthropic-version`` and the key (see the module docstring),
    then ``config.extra_headers`` (which win, case-insensitively)."""
    headers = {
        "Accept": accept,
        "Content-Type": "application/json",
        "anthropic-version": ANTHROPIC_VERSION,
    }
    if config.api_key:
        headers["x-api-key"] = config.api_key
        if not host_in(config.base_url, X_API_KEY_ONLY_HOSTS):
            headers["Authorization"] = f"Bearer {config.api_key}"
    return merge_headers(headers, config.extra_headers)


def _tool_input(arguments: str) -> dict[str, Any]:
    """A tool call's JSON arguments as the ``input`` object:
    :func:`chat.providers.base.replay_arguments` decoded (``{}`` when blank; text that is not
    a JSON object, e.g. cut off by ``max_tokens``, as ``{"_incomplete_arguments": <text>}`` so
    nothing the model wrote is lost and nothing invalid is sent)."""
    parsed = loads(replay_arguments(arguments))
    return parsed if isinstance(parsed, dict) else {}


def _blocks(message: ChatMessage) -> tuple[str, list[dict[str, Any]]]:
    """``(role, content blocks)`` of one history message (seed 002 ``MessageInputMessage``)."""
    if message.role == "tool":
        block = {"type": "tool_result", "tool_use_id": message.tool_call_id}
        if message.content:
            block["content"] = message.content
        return "user", [block]
    blocks: list[dict[str, Any]] = []
    if message.role == "assistant":
        if message.reasoning and message.reasoning_signature:
            blocks.append(
                {
                    "type": "thinking",
                    "thinking": message.reasoning,
                    "signature": message.reasoning_signature,
                }
            )
        for data in message.redacted_thinking:
            blocks.append({"type": "redacted_thinking", "data": data})
        if message.content:
            blocks.append({"type": "text", "text": message.content})
        for call in message.tool_calls:
            blocks.append(
                {
                    "type": "tool_use",
                    "id": call.id,
                    "name": call.name,
                    "input": _tool_input(call.arguments),
                }
            )
        return "assistant", blocks
    # user: images first (Anthropic's advice for vision prompts), then the text
    for part in message.parts:
        if part.type != "image":
            continue
        if part.url:
            source = {"type": "url", "url": part.url}
        else:
            source = {
                "type": "base64",
                "media_type": part.media_type or "image/png",
                "data": part_base64(part),
            }
        blocks.append({"type": "image", "source": source})
    if message.content:
        blocks.append({"type": "text", "text": message.content})
    return "user", blocks


def _messages(request: ChatRequest) -> tuple[str, list[dict[str, Any]]]:
    """``(system text, messages)``: ``system`` messages of the history join the system prompt
    (the API has no system role); consecutive messages of one role are merged into one (tool
    results of parallel calls form one user turn, as the API requires); a lone text block is
    sent as a plain string; messages without content are left out."""
    system_parts = [request.system] if request.system.strip() else []
    merged: list[tuple[str, list[dict[str, Any]]]] = []
    for message in request.messages:
        if message.role == "system":
            if message.content.strip():
                system_parts.append(message.content)
            continue
        role, blocks = _blocks(message)
        if not blocks:
            continue
        if merged and merged[-1][0] == role:
            merged[-1][1].extend(blocks)
        else:
            merged.append((role, blocks))
    messages = []
    for role, blocks in merged:
        if len(blocks) == 1 and blocks[0]["type"] == "text":
            messages.append({"role": role, "content": blocks[0]["text"]})
        else:
            messages.append({"role": role, "content": blocks})
    return "\n\n".join(system_parts), messages


def _tools(request: ChatRequest) -> list[dict[str, Any]]:
    """Tools in Anthropic form (seed 002 ``MessageTool``: ``name``, ``description``,
    ``input_schema``) from OpenAI chat form; a tool without parameters gets an empty object
    schema."""
    tools = []
    for tool in request.tools:
        function = tool_function(tool) if isinstance(tool, dict) else None
        if function is None:
            continue
        out: dict[str, Any] = {"name": function["name"]}
        if isinstance(function.get("description"), str) and function["description"]:
            out["description"] = function["description"]
        schema = function.get("parameters") or function.get("input_schema")
        out["input_schema"] = (
            schema if isinstance(schema, dict) else {"type": "object", "properties": {}}
        )
        tools.append(out)
    return tools


def _tool_choice(choice: str) -> dict[str, Any]:
    """seed 002 ``MessageToolChoice``: auto → auto, none → none, required → any, a name →
    ``{"type": "tool", "name"}``."""
    if choice in ("auto", "none"):
        return {"type": choice}
    if choice == "required":
        return {"type": "any"}
    return {"type": "tool", "name": choice}


def _thinking(request: ChatRequest) -> dict[str, Any] | None:
    budget = request.reasoning.get("budget_tokens")
    if isinstance(budget, bool) or not isinstance(budget, int):
        return None
    if budget > 0:
        return {"type": "enabled", "budget_tokens": budget}
    if budget == 0:
        return {"type": "disabled"}
    return None


def _prompt_fields(request: ChatRequest) -> dict[str, Any]:
    """The fields ``/messages`` and ``/messages/count_tokens`` share (seed 002
    ``MessageCountTokensRequest``): model, system, messages, thinking, tools, tool_choice."""
    system, messages = _messages(request)
    body: dict[str, Any] = {"model": request.model}
    if system:
        body["system"] = system
    body["messages"] = messages
    thinking = _thinking(request)
    if thinking is not None:
        body["thinking"] = thinking
    tools = _tools(request)
    if tools:
        body["tools"] = tools
        if request.tool_choice:
            body["tool_choice"] = _tool_choice(request.tool_choice)
    return body


def build_request(config: EndpointConfig, request: ChatRequest) -> tuple[str, dict[str, str], dict]:
    """Build ``(url, headers, json_body)`` for a streamed ``POST {base}/messages``.

    * url: ``{base_url}/messages`` (trailing slashes of the base removed).
    * headers: ``Accept: text/event-stream``, ``Content-Type``, ``anthropic-version:
      2023-06-01``, ``x-api-key`` and (except for ``api.anthropic.com``) ``Authorization:
      Bearer``, then ``config.extra_headers``.
    * body (seed 002 ``MessageCreateRequest``): ``model``; ``max_tokens`` (the user's, else
      1024, else ``budget_tokens + 1024`` with thinking); ``system`` as text (the system prompt
      and any ``system`` history messages, joined by blank lines) when not blank; ``messages``
      (user text and ``image`` blocks with a ``base64`` source, or a ``url`` source for an image
      URL; assistant ``thinking`` (signed only), ``redacted_thinking`` (``data`` as received),
      ``text`` and ``tool_use`` blocks (``input`` from :func:`_tool_input`); ``tool``
      messages as ``tool_result`` blocks in a user turn); the params the user set among
      ``temperature``, ``top_p``, ``top_k``, ``stop`` (as ``stop_sequences``); ``thinking``;
      ``tools`` (``name``, ``description``, ``input_schema``) and, with tools, ``tool_choice``;
      ``chat_template_kwargs.enable_thinking`` only when the user set ``enable_thinking``
      (llama.cpp passes it to the chat template); ``stream: true``; ``request.extra`` merged
      last (never replacing model, messages or stream).

    Pure; raises nothing.
    """
    url = f"{_base(config)}/messages"
    headers = _headers(config, "text/event-stream")
    prompt = _prompt_fields(request)
    body: dict[str, Any] = {"model": prompt.pop("model")}
    params = dict(user_param_items(request))
    max_tokens = params.get("max_tokens")
    if max_tokens is None:
        thinking = prompt.get("thinking") or {}
        budget = thinking.get("budget_tokens") if thinking.get("type") == "enabled" else None
        max_tokens = DEFAULT_MAX_TOKENS + budget if budget else DEFAULT_MAX_TOKENS
    body["max_tokens"] = max_tokens
    if "system" in prompt:
        body["system"] = prompt.pop("system")
    body["messages"] = prompt.pop("messages")
    for name, field in PARAMS.items():
        if name in params:
            body[field] = params[name]
    body.update(prompt)  # thinking, tools, tool_choice
    enable = request.reasoning.get("enable_thinking")
    if isinstance(enable, bool):
        body["chat_template_kwargs"] = {"enable_thinking": enable}
    body["stream"] = True
    return url, headers, merge_extra(body, request.extra)


def build_count_tokens_request(
    config: EndpointConfig, request: ChatRequest
) -> tuple[str, dict[str, str], dict]:
    """``(url, headers, json_body)`` for ``POST {base}/messages/count_tokens`` (seed 002
    ``MessageCountTokensRequest``: the prompt fields of :func:`build_request`, without
    ``max_tokens``, sampling, ``stop_sequences`` or ``stream``). Pure; raises nothing."""
    url = f"{_base(config)}/messages/count_tokens"
    return url, _headers(config, "application/json"), _prompt_fields(request)


# ---- usage --------------------------------------------------------------------------------


def normalize_usage(usage: dict[str, Any] | None, *, final: bool = True) -> Usage:
    """Map Anthropic usage (seed 002 ``MessageUsage`` / ``MessageDeltaUsage``) to ``Usage``.

    ``prompt_tokens`` = ``input_tokens`` + ``cache_read_input_tokens`` +
    ``cache_creation_input_tokens`` (None without ``input_tokens``); ``completion_tokens`` =
    ``output_tokens``; ``total_tokens`` their sum when both are known; ``cached_tokens`` =
    ``cache_read_input_tokens``. ``final=False`` (the usage of ``message_start``): its
    ``output_tokens`` is a placeholder, so completion and total tokens are None. ``raw`` is the
    (merged) usage object as received.
    """
    usage = usage if isinstance(usage, dict) else {}
    uncached = _int(usage.get("input_tokens"))
    cache_read = _int(usage.get("cache_read_input_tokens"))
    cache_creation = _int(usage.get("cache_creation_input_tokens"))
    prompt = None
    if uncached is not None:
        prompt = uncached + (cache_read or 0) + (cache_creation or 0)
    completion = _int(usage.get("output_tokens")) if final else None
    total = prompt + completion if prompt is not None and completion is not None else None
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=total,
        cached_tokens=cache_read,
        raw=dict(usage),
    )


def finish_event(stop_reason: str) -> Finish:
    """``Finish`` for an Anthropic ``stop_reason`` (see :data:`STOP_REASONS`)."""
    return Finish(STOP_REASONS.get(stop_reason, stop_reason), upstream_reason=stop_reason)


# ---- stream interpretation ----------------------------------------------------------------


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


#: Content block types the adapter reads itself; every other type ran on the server.
CLIENT_BLOCKS = frozenset({"text", "thinking", "redacted_thinking", "tool_use"})

#: At most this many characters in a ``ServerToolUse.result_summary``.
SUMMARY_CHARS = 300


def _clip(text: str, limit: int = SUMMARY_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def result_summary(block: dict[str, Any]) -> str:
    """One line about a server tool's result block: ``"N results: Title — URL; …"`` for search
    results, ``"error: <error_code>"`` for ``*_error`` content, ``"exit <code>: <stdout>"``
    for code execution, the text of text content, else the content as compact JSON (≤ 300
    characters)."""
    original = content = block.get("content")
    if isinstance(content, dict):
        if "error_code" in content:
            return _clip(f"error: {_str(content.get('error_code')) or content.get('error_code')}")
        if "return_code" in content or "stdout" in content:
            out = _str(content.get("stdout")) or _str(content.get("stderr"))
            return _clip(f"exit {content.get('return_code')}: {out}")
        content = [content]
    if isinstance(content, list):
        results = [c for c in content if isinstance(c, dict) and ("url" in c or "title" in c)]
        if results:
            shown = "; ".join(
                " — ".join(p for p in (_str(r.get("title")), _str(r.get("url"))) if p)
                for r in results[:3]
            )
            return _clip(f"{len(results)} results: {shown}")
        texts = [_str(c.get("text")) for c in content if isinstance(c, dict)]
        if any(texts):
            return _clip(" ".join(t for t in texts if t))
    if isinstance(content, str):
        return _clip(content)
    if original is None:
        return ""
    return _clip(json.dumps(original, ensure_ascii=False))


class _MessageStream:
    """Per-stream state for :func:`chat.providers.http.stream_sse`: usage merged across
    ``message_start`` (provisional) and ``message_delta`` (final), the content blocks by index
    (tool calls numbered by :class:`chat.providers.openai_chat.ToolCallIndexer`, server tool
    blocks collected until they stop), and the inline-reasoning splitter of the text."""

    def __init__(self, secrets: list[str], request_id: str | None) -> None:
        self.secrets = secrets
        self.request_id = request_id
        self.finished = False
        self.done = False
        self.splitter = InlineReasoningSplitter()
        self._usage: dict[str, Any] = {}
        self._tools = ToolCallIndexer()
        self._blocks: dict[Any, dict[str, Any]] = {}  # block index → {"type", …}
        self._last_tool: Any = None
        self._names: dict[str, str] = {}  # server tool use id → name
        self._pending: list[Event] = []

    # -- helpers --------------------------------------------------------------------------
    def _fail(self, payload: Any, data: str) -> ProviderError:
        output = model_output_error(payload, self.secrets)
        if output is not None:
            self._pending.append(output)
        return error_from_event(payload, data, self.secrets, request_id=self.request_id)

    def _merge_usage(self, usage: Any, *, final: bool) -> list[Event]:
        if not isinstance(usage, dict):
            return []
        self._usage.update({k: v for k, v in usage.items() if v is not None})
        return [normalize_usage(self._usage, final=final)]

    def _finish(self, stop_reason: Any) -> list[Event]:
        if self.finished or not isinstance(stop_reason, str) or not stop_reason:
            return []
        self.finished = True
        return [*self.splitter.flush(), finish_event(stop_reason)]

    def _server_block_done(self, block: dict[str, Any]) -> list[Event]:
        """The ``ServerToolUse`` of a server block (once)."""
        if block.get("emitted"):
            return []
        block["emitted"] = True
        raw = block["block"]
        kind = block["type"]
        block_id = _str(raw.get("id"))
        if block_id:  # a use: its input, streamed or whole
            name = _str(raw.get("name"))
            self._names[block_id] = name
            pieces = block.get("input") or []
            if pieces:
                input_json = "".join(pieces)
            else:
                tool_input = raw.get("input")
                input_json = json.dumps(tool_input, ensure_ascii=False) if tool_input else ""
            return [ServerToolUse(kind, name=name, id=block_id, input_json=input_json)]
        use_id = _str(raw.get("tool_use_id"))
        return [
            ServerToolUse(
                kind,
                name=self._names.get(use_id, ""),
                id=use_id,
                result_summary=result_summary(raw),
            )
        ]

    # -- events ---------------------------------------------------------------------------
    def interpret(self, event: str, payload: Any, data: str) -> list[Event]:
        """Events for one SSE event; the data's ``type`` decides, the ``event:`` line is the
        fallback. Raises ``ProviderError`` for ``error``."""
        kind = payload.get("type") if isinstance(payload, dict) else None
        if not isinstance(kind, str) or not kind:
            kind = event
        if kind == "error" or event == "error":
            raise self._fail(payload, data)
        if not isinstance(payload, dict):
            return []  # JSON but not an object: only the RawEvent shows it
        if payload.get("error") and kind not in HANDLERS:
            raise self._fail(payload, data)  # a bare ``{"error": …}`` chunk from a proxy
        handler = HANDLERS.get(kind)
        return handler(self, payload) if handler else []

    def message_start(self, payload: dict[str, Any]) -> list[Event]:
        message = payload.get("message")
        if not isinstance(message, dict):
            return []
        return self._merge_usage(message.get("usage"), final=False)

    def content_block_start(self, payload: dict[str, Any]) -> list[Event]:
        block = payload.get("content_block")
        if not isinstance(block, dict):
            return []
        index = payload.get("index")
        kind = _str(block.get("type"))
        if kind == "text":
            self._blocks[index] = {"type": kind}
            return self.splitter.feed(_str(block.get("text")))
        if kind == "thinking":
            self._blocks[index] = {"type": kind}
            events = self.splitter.reasoning(_str(block.get("thinking")))
            if _str(block.get("signature")):
                events.append(ReasoningSignature(block["signature"]))
            return events
        if kind == "redacted_thinking":
            self._blocks[index] = {"type": kind}
            data = block.get("data")
            return [RedactedThinking(data)] if isinstance(data, str) else []
        if kind == "tool_use":
            call_id = _str(block.get("id")) or None
            key = index if isinstance(index, int) else ("no-index", self._tools.count)
            ordinal = self._tools.ordinal(key, call_id)
            self._blocks[index] = {"type": kind, "ordinal": ordinal}
            self._last_tool = ordinal
            tool_input = block.get("input")
            arguments = (
                json.dumps(tool_input) if isinstance(tool_input, dict) and tool_input else ""
            )
            return [
                ToolCallDelta(
                    index=ordinal,
                    id=call_id,
                    name=_str(block.get("name")) or None,
                    arguments=arguments,
                )
            ]
        # a block the server ran (or a future type): shown when it stops, never asked of the user
        self._blocks[index] = {"type": kind or "unknown", "block": block, "input": []}
        return []

    def content_block_delta(self, payload: dict[str, Any]) -> list[Event]:
        delta = payload.get("delta")
        if not isinstance(delta, dict):
            return []
        kind = delta.get("type")
        if kind == "text_delta":
            return self.splitter.feed(_str(delta.get("text")))
        if kind == "thinking_delta":
            return self.splitter.reasoning(_str(delta.get("thinking")))
        if kind == "signature_delta":
            signature = _str(delta.get("signature"))
            return [ReasoningSignature(signature)] if signature else []
        if kind == "input_json_delta":
            partial = _str(delta.get("partial_json"))
            if not partial:
                return []
            index = payload.get("index")
            block = self._blocks.get(index)
            if block is not None and "block" in block:
                block["input"].append(partial)  # a server tool's input
                return []
            if block is not None and "ordinal" in block:
                ordinal = block["ordinal"]
            elif not isinstance(index, int) and self._last_tool is not None:
                ordinal = self._last_tool
            else:
                ordinal = self._tools.ordinal(index if isinstance(index, int) else ("no-index",))
                self._blocks[index] = {"type": "tool_use", "ordinal": ordinal}
                self._last_tool = ordinal
            return [ToolCallDelta(index=ordinal, arguments=partial)]
        return []  # citations_delta and future delta types

    def content_block_stop(self, payload: dict[str, Any]) -> list[Event]:
        block = self._blocks.get(payload.get("index"))
        if block is not None and "block" in block:
            return self._server_block_done(block)
        return []

    def message_delta(self, payload: dict[str, Any]) -> list[Event]:
        delta = payload.get("delta")
        events = self._finish(delta.get("stop_reason")) if isinstance(delta, dict) else []
        return events + self._merge_usage(payload.get("usage"), final=True)

    def message_stop(self, payload: dict[str, Any]) -> list[Event]:
        self.done = True
        return []

    def relay_json(self, text: str) -> list[Event]:
        """A whole ``Message`` (seed 002) answering a streamed request: its content blocks in
        order, usage (final), and the stop reason."""
        payload = loads(text)
        if not isinstance(payload, dict):
            raise ProviderError(
                "The upstream answered with JSON that could not be parsed",
                code="bad_response",
                body_excerpt=scrub(text, self.secrets)[:EXCERPT_CHARS],
            )
        if payload.get("type") == "error" or payload.get("error"):
            raise self._fail(payload, text)
        events: list[Event] = []
        content = payload.get("content")
        for index, block in enumerate(content if isinstance(content, list) else []):
            if isinstance(block, dict):
                events.extend(self.content_block_start({"index": index, "content_block": block}))
                events.extend(self.content_block_stop({"index": index}))
        events.extend(self._merge_usage(payload.get("usage"), final=True))
        events.extend(self._finish(payload.get("stop_reason")))
        self.done = True
        return events

    def end(self) -> list[Event]:
        """Held events: inline-reasoning text, server blocks that never stopped, and what an
        error left (a ``ModelOutputError``). Idempotent."""
        events: list[Event] = list(self.splitter.flush())
        for block in self._blocks.values():
            if "block" in block:
                events.extend(self._server_block_done(block))
        events.extend(self._pending)
        self._pending = []
        return events


HANDLERS = {
    "message_start": _MessageStream.message_start,
    "content_block_start": _MessageStream.content_block_start,
    "content_block_delta": _MessageStream.content_block_delta,
    "content_block_stop": _MessageStream.content_block_stop,
    "message_delta": _MessageStream.message_delta,
    "message_stop": _MessageStream.message_stop,
    "ping": lambda state, payload: [],
}


# ---- public API ---------------------------------------------------------------------------


def stream(
    client: httpx.AsyncClient, config: EndpointConfig, request: ChatRequest
) -> AsyncIterator[Event]:
    """Stream one ``POST {base}/messages`` as events (an async iterator; nothing is sent
    before the first iteration).

    Yields ``ResponseStarted(status, request_id)`` (request id from ``request-id`` /
    ``x-request-id``), then per SSE event a ``RawEvent`` followed by its semantic events:
    ``Usage`` (``message_start``: input and cache tokens, completion unknown;
    ``message_delta``: merged with the final output tokens), ``TextDelta`` (``text_delta``,
    through the inline-reasoning splitter, so also ``AnswerWasReasoning``),
    ``ReasoningDelta`` (``thinking_delta``), ``ReasoningSignature`` (non-empty
    ``signature_delta``), ``RedactedThinking`` (``redacted_thinking`` block), ``ToolCallDelta``
    (``tool_use`` block start with id and name, then ``input_json_delta`` pieces; ``index`` is
    the tool call's ordinal), ``ServerToolUse`` (a server block, when it stops), ``Finish``
    (``message_delta.stop_reason``, see the module docstring), ``StreamWarning`` for data that
    is not JSON. ``ping`` only shows as ``RawEvent``. A 2xx JSON ``Message`` body is relayed as
    the same events.

    Raises ``ProviderError``: ``unsupported_content`` for audio attachments (before sending);
    every Anthropic error type of a non-2xx body (``invalid_request_error`` 400,
    ``authentication_error`` 401, ``permission_error`` 403, ``not_found_error`` 404,
    ``request_too_large`` 413, ``rate_limit_error`` 429 with ``retry-after``, ``api_error``
    500, ``overloaded_error`` 529/503) with status, code = the error type, message and request
    id (``request_id`` in the body, else the ``request-id`` header); ``path_not_found`` for a
    404/405 that does not mention a model; an ``error`` event with status None;
    ``stream_cut``, ``limit_exceeded`` and transport codes as in
    :func:`chat.providers.http.stream_sse`.
    """
    unsupported = unsupported_content_error(request, CONTENT_TYPES, API_STYLE)
    url, headers, body = build_request(config, request)
    return stream_sse(
        client, config, url, headers, body, _MessageStream, error=unsupported, api_style=API_STYLE
    )


async def count_tokens(
    client: httpx.AsyncClient, config: EndpointConfig, request: ChatRequest
) -> int:
    """Input tokens the request's prompt would use: ``POST {base}/messages/count_tokens`` →
    seed 002 ``MessageCountTokensResponse.input_tokens`` (tokens; system, messages and tools).

    Raises ``ProviderError``: :func:`chat.providers.errors.parse_error` for a non-2xx status
    (404 where the endpoint has no such route), transport codes from
    :func:`chat.providers.http.transport_error`, ``limit_exceeded`` for a body over
    ``Limits.max_json_body_bytes``, ``bad_response`` for a 2xx body without an integer
    ``input_tokens``.
    """
    url, headers, body = build_count_tokens_request(config, request)
    response, payload, text = await request_json(
        client, config, "POST", url, headers, body=body, what="token count answer"
    )
    tokens = payload.get("input_tokens") if isinstance(payload, dict) else None
    if isinstance(tokens, bool) or not isinstance(tokens, int):
        raise ProviderError(
            "The token count answer has no input_tokens",
            status=response.status_code,
            code="bad_response",
            body_excerpt=scrub(text, secret_variants(config.secrets()))[:EXCERPT_CHARS],
        )
    return tokens


async def list_models(client: httpx.AsyncClient, config: EndpointConfig) -> list[ModelInfo]:
    """``GET {base}/models`` with this style's auth headers (``x-api-key``, Bearer except for
    ``api.anthropic.com``, ``anthropic-version``); parsed and failing as
    :func:`chat.providers.openai_chat.list_models` (Anthropic's ``data[].id`` list fits it)."""
    return await openai_chat.list_models(
        client, config, headers=_headers(config, "application/json")
    )
