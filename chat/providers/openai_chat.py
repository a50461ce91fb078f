"""The ``openai_chat`` adapter: ``POST {base}/chat/completions`` with ``stream: true``.

Speaks the OpenAI chat completions streaming dialect as served by SambaNova Cloud (seeds 000
and 002: ``delta.reasoning``, rich ``usage`` in a final ``choices: []`` chunk), Sansa (seed 001:
``usage.cost`` and a top-level ``sansa`` object), OpenAI, vLLM, llama.cpp, Ollama and
OpenRouter (``delta.reasoning_content``, ``<think>`` inline in content). It turns the SSE stream
into the events of :mod:`chat.providers.base` and raises one ``ProviderError`` for every failure.

Stream-end rules (the runner relies on them):

* ``data: [DONE]`` ends the stream normally; events after it are ignored (the rest of the body
  is drained for at most :data:`DRAIN_AFTER_DONE_S` so the connection can be reused).
* The body ending *after* a ``finish_reason`` (without ``[DONE]``) ends normally too: the answer
  is complete, only usage may be missing. So does a transport error or read timeout after the
  ``finish_reason`` (the connection dropped while we waited for the usage chunk).
* The body ending with neither a ``finish_reason`` nor ``[DONE]`` raises
  ``ProviderError(code="stream_cut")``; so does a read error (``RemoteProtocolError``,
  ``ReadError``) before the ``finish_reason``. A read timeout raises ``code="timeout"``.
* An ``{"error": …}`` chunk or an ``event: error`` raises ``ProviderError`` (status None, code
  from the chunk, else ``stream_error``), whenever it comes.
* An error whose body carries the model's raw output (seed 002 ``ModelOutputError``
  ``error.model_output``, or ``GeneralError`` ``error.error_model_output``) is preceded by a
  ``ModelOutputError(message, raw_output)`` event, in a stream and in a non-2xx body alike: the
  turn still ends with the ``ProviderError``, and the UI can show what the model wrote.
* Before raising, text held back by the ``<think>`` splitter is yielded, so nothing received is
  lost.
* SSE framing is httpx-sse's (WHATWG rules, fed by :func:`chat.providers.http.iter_sse`):
  comment lines (``: keep-alive``) are not events, multi-line ``data:`` is joined with ``\n``,
  CR/LF/CRLF all end lines, and a last event not followed by a blank line is incomplete and
  dropped with a ``StreamWarning`` (so a body cut inside an event is a cut). Data that is not
  JSON (a chunk cut in half) gives a ``StreamWarning`` and the stream goes on.
* Parallel tool calls: a delta whose ``id`` differs from the call already streaming at its
  ``index`` starts a new call (some servers stream every call on index 0); ``ToolCallDelta``
  indices are the adapter's own, one per call.
* The SSE loop, limits and Unicode repair are shared: :func:`chat.providers.http.stream_sse`.

Callers must close the generator when they stop early (``contextlib.aclosing``) or cancel the
task; either closes the upstream response at once. Adapters never time, persist or render.

May import: the standard library, httpx, httpx-sse (no Django).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import httpx

from .base import (
    Base64Media,
    ChatMessage,
    ChatRequest,
    ContentPart,
    EndpointConfig,
    Event,
    Finish,
    LogprobsDelta,
    ModelInfo,
    ProviderError,
    TokenLogprob,
    ToolCallDelta,
    Usage,
    fix_surrogates,
    limit_error,
    part_base64,
    replay_arguments,
    scrub,
)
from .errors import (
    EXCERPT_CHARS,
    error_from_event,
    model_output_error,
    models_not_listed,
    unsupported_content_error,
)
from .http import (
    NOT_JSON,
    loads,
    merge_headers,
    request_json,
    stream_sse,
)
from .text import InlineReasoningSplitter

API_STYLE = "openai_chat"

#: Request parameters passed through when the user set them (``ChatRequest.params``).
PARAMS = (
    "temperature",
    "top_p",
    "top_k",
    "max_tokens",
    "stop",
    "seed",
    "frequency_penalty",
    "presence_penalty",
)

#: Attachment types (``ContentPart.type``) this API style carries: ``image_url`` parts and
#: ``input_audio`` parts (seed 001).
CONTENT_TYPES = frozenset({"image", "audio"})

#: Hosts that reject ``top_k`` and want ``max_completion_tokens`` instead of ``max_tokens``.
OPENAI_HOSTS = frozenset({"api.openai.com"})

#: Hosts whose chat completions take audio as seed 002 ``AudioContent``
#: (``{"type": "audio_content", "audio_content": {"content": <base64>}}``), not ``input_audio``.
SAMBANOVA_HOSTS = frozenset({"api.sambanova.ai"})

#: Body keys that ``ChatRequest.extra`` may not replace (the adapter owns them).
PROTECTED_KEYS = frozenset({"model", "messages", "input", "stream"})

#: Keys of ``ChatRequest.reasoning`` that only Sansa's (and OpenRouter's) ``reasoning`` object
#: carries; when the user set one of them, effort travels inside that object too.
REASONING_OBJECT_KEYS = ("effort", "max_tokens", "exclude", "enabled")

#: ``ContentPart.media_type`` → ``input_audio.format`` (seed 001 formats).
AUDIO_FORMATS = {
    "audio/mpeg": "mp3",
    "audio/mp3": "mp3",
    "audio/wav": "wav",
    "audio/x-wav": "wav",
    "audio/wave": "wav",
    "audio/vnd.wave": "wav",
    "audio/mp4": "m4a",
    "audio/m4a": "m4a",
    "audio/x-m4a": "m4a",
    "audio/aac": "m4a",
    "audio/webm": "webm",
    "audio/ogg": "ogg",
    "audio/flac": "flac",
    "audio/x-flac": "flac",
    "audio/opus": "opus",
}


# ---- request ------------------------------------------------------------------------------


def _auth_headers(config: EndpointConfig, accept: str) -> dict[str, str]:
    headers = {"Accept": accept}
    if config.api_key:
        headers["Authorization"] = f"Bearer {config.api_key}"
    return headers


# ---- helpers shared with the other adapters (pure) ------------------------------------------


def host_in(base_url: str, hosts: frozenset[str]) -> bool:
    """Whether the base URL's host name is one of ``hosts`` (exact, case-insensitive)."""
    try:
        return (urlsplit(base_url.strip()).hostname or "").lower() in hosts
    except ValueError:
        return False


def data_uri(part: ContentPart) -> str | Base64Media:
    """``part.url`` when set, else ``data:<media_type>;base64,<data>`` (RFC 2397; a
    :class:`Base64Media` encoded while the body is sent when the part holds raw bytes)."""
    if part.url:
        return part.url
    media_type = part.media_type or "application/octet-stream"
    return part_base64(part, f"data:{media_type};base64,")


def audio_format(part: ContentPart) -> str:
    """The ``input_audio.format`` for an audio part: from its media type (``audio/mpeg`` →
    ``mp3``), else its file name's extension, else the media subtype, else ``"wav"``."""
    media_type = (part.media_type or "").split(";", 1)[0].strip().lower()
    if media_type in AUDIO_FORMATS:
        return AUDIO_FORMATS[media_type]
    _, dot, extension = part.filename.rpartition(".")
    if dot and extension:
        return extension.lower()
    if "/" in media_type:
        return media_type.split("/", 1)[1]
    return "wav"


def user_param_items(request: ChatRequest) -> list[tuple[str, Any]]:
    """``(name, value)`` of the params the user set (None and "" mean unset), ``stop`` as a
    list of non-empty strings (a string becomes a one-item list; an empty list is dropped)."""
    items = []
    for name, value in request.params.items():
        if value is None or value == "":
            continue
        if name == "stop":
            value = [value] if isinstance(value, str) else [s for s in value if s]
            if not value:
                continue
        items.append((name, value))
    return items


def merge_extra(body: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """``body`` with ``ChatRequest.extra`` merged in last (extra wins), except the keys the
    adapter owns (:data:`PROTECTED_KEYS`: model, messages, input, stream)."""
    for key, value in extra.items():
        if key not in PROTECTED_KEYS:
            body[key] = value
    return body


def tool_function(tool: dict[str, Any]) -> dict[str, Any] | None:
    """The ``{"name", "description", "parameters", …}`` of a tool in OpenAI chat form
    (``{"type": "function", "function": {…}}``), also accepting the flat Responses form; None
    when it has no name."""
    function = tool.get("function") if isinstance(tool.get("function"), dict) else tool
    if not isinstance(function.get("name"), str) or not function["name"]:
        return None
    return function


def _image_part(part: ContentPart) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": data_uri(part)}}


def _audio_part(part: ContentPart, sambanova: bool) -> dict[str, Any]:
    if sambanova:  # seed 002 ``AudioContent``
        return {"type": "audio_content", "audio_content": {"content": part_base64(part)}}
    return {
        "type": "input_audio",
        "input_audio": {"data": part_base64(part), "format": audio_format(part)},
    }


def _chat_message(message: ChatMessage, sambanova: bool) -> dict[str, Any]:
    """One message of seed 002 ``ChatCompletionRequest.messages``."""
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    if message.role == "assistant" and message.tool_calls:
        return {
            "role": "assistant",
            "content": message.content or None,
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": replay_arguments(call.arguments)},
                }
                for call in message.tool_calls
            ],
        }
    parts = [p for p in message.parts if p.type in CONTENT_TYPES] if message.role == "user" else []
    if not parts:
        return {"role": message.role, "content": message.content}
    content: list[dict[str, Any]] = []
    if message.content:
        content.append({"type": "text", "text": message.content})
    for part in parts:
        content.append(_image_part(part) if part.type == "image" else _audio_part(part, sambanova))
    return {"role": "user", "content": content}


def _tool_choice(choice: str) -> str | dict[str, Any]:
    if choice in ("auto", "none", "required"):
        return choice
    return {"type": "function", "function": {"name": choice}}


def _reasoning_fields(reasoning: dict[str, Any]) -> dict[str, Any]:
    """Body fields for ``ChatRequest.reasoning`` (what the user set decides the form):

    * ``enable_thinking`` (bool) → ``chat_template_kwargs: {"enable_thinking": …}`` (seed 002,
      SambaNova and llama.cpp models with thinking templates);
    * any of Sansa's ``max_tokens`` / ``exclude`` / ``enabled`` → the ``reasoning`` object
      (seed 001) with those and ``effort``;
    * else ``effort`` alone → top-level ``reasoning_effort`` (seed 002, Sansa, OpenAI, vLLM,
      llama.cpp all take it).

    ``budget_tokens`` (Anthropic thinking) has no chat completions form and is not sent.
    """
    fields: dict[str, Any] = {}
    enable = reasoning.get("enable_thinking")
    if isinstance(enable, bool):
        fields["chat_template_kwargs"] = {"enable_thinking": enable}
    effort = reasoning.get("effort")
    if any(reasoning.get(k) is not None for k in ("max_tokens", "exclude", "enabled")):
        fields["reasoning"] = {
            k: reasoning[k] for k in REASONING_OBJECT_KEYS if reasoning.get(k) not in (None, "")
        }
    elif isinstance(effort, str) and effort:
        fields["reasoning_effort"] = effort
    return fields


def build_request(config: EndpointConfig, request: ChatRequest) -> tuple[str, dict[str, str], dict]:
    """Build ``(url, headers, json_body)`` for a streamed chat completion.

    * url: ``{base_url}/chat/completions`` (trailing slashes of the base removed).
    * headers: ``Content-Type``/``Accept: text/event-stream``, ``Authorization: Bearer <key>``
      when a key is set, then ``config.extra_headers`` (which win, case-insensitively).
    * body (OpenAI ``CreateChatCompletionRequest``; seed 000/002 ``ChatCompletionRequest``):
      ``model``; ``messages`` with the system prompt first as ``role: system`` when it is not
      blank; only the params the user set among temperature, top_p, top_k, max_tokens,
      stop (a string becomes a one-item list, an empty list is dropped), seed,
      frequency_penalty, presence_penalty; ``stream: true``;
      ``stream_options: {"include_usage": true}`` unless ``config.stream_options`` is False.
      For ``api.openai.com`` ``top_k`` is dropped (OpenAI rejects it) and ``max_tokens`` is sent
      as ``max_completion_tokens`` (reasoning models reject ``max_tokens``).
    * messages: a user message with ``parts`` becomes a content array: a ``text`` part, then
      ``image_url`` parts (a data URI, or the image URL) and ``input_audio`` parts
      (``{"data": <base64>, "format": "mp3"|"wav"|…}``, seed 001; seed 002's ``audio_content``
      form for ``api.sambanova.ai``). An assistant message with ``tool_calls`` carries them
      (``content`` null when empty; ``arguments`` as :func:`chat.providers.base.replay_arguments`
      makes them: ``"{}"`` for blank, never invalid JSON); a ``tool`` message carries
      ``tool_call_id``. Prior reasoning is not sent back (chat templates drop it).
    * ``tools`` as given (OpenAI form) and, only with tools, ``tool_choice`` ("auto", "none",
      "required", or ``{"type": "function", "function": {"name"}}`` for a function name).
    * ``response_format`` as given, except ``{"type": "text"}`` (the default; seed 002 says
      chat completions do not take it).
    * ``logprobs: true`` and ``top_logprobs`` when asked.
    * reasoning fields from ``request.reasoning``, see :func:`_reasoning_fields`.
    * ``request.extra`` merged last (e.g. Sansa ``session_id``), never replacing model,
      messages or stream.

    Pure; raises nothing.
    """
    base = config.base_url.strip().rstrip("/")
    url = f"{base}/chat/completions"
    headers = _auth_headers(config, "text/event-stream")
    headers["Content-Type"] = "application/json"
    headers["Cache-Control"] = "no-store"
    headers = merge_headers(headers, config.extra_headers)
    sambanova = host_in(base, SAMBANOVA_HOSTS)

    messages: list[dict[str, Any]] = []
    if request.system and request.system.strip():
        messages.append({"role": "system", "content": request.system})
    messages.extend(_chat_message(m, sambanova) for m in request.messages)

    body: dict[str, Any] = {"model": request.model, "messages": messages}
    is_openai = host_in(base, OPENAI_HOSTS)
    for name in PARAMS:
        value = request.params.get(name)
        if value is None or value == "":
            continue
        if name == "stop":
            stops = [value] if isinstance(value, str) else [s for s in value if s]
            if not stops:
                continue
            value = stops
        if is_openai and name == "top_k":
            continue
        if is_openai and name == "max_tokens":
            body["max_completion_tokens"] = value
            continue
        body[name] = value
    tools = [t for t in request.tools if isinstance(t, dict)]
    if tools:
        body["tools"] = tools
        if request.tool_choice:
            body["tool_choice"] = _tool_choice(request.tool_choice)
    if request.response_format and request.response_format.get("type") != "text":
        body["response_format"] = request.response_format
    if request.logprobs:
        body["logprobs"] = True
        if request.top_logprobs is not None:
            body["top_logprobs"] = request.top_logprobs
    body.update(_reasoning_fields(request.reasoning))
    body["stream"] = True
    if config.stream_options:
        body["stream_options"] = {"include_usage": True}
    return url, headers, merge_extra(body, request.extra)


# ---- inline reasoning ---------------------------------------------------------------------

#: The shared splitter (kept under its old name for callers of this module).
ThinkSplitter = InlineReasoningSplitter


# ---- usage --------------------------------------------------------------------------------


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _int(value: Any) -> int | None:
    number = _num(value)
    return int(number) if number is not None else None


def _sub(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, dict) else None


def normalize_usage(usage: dict[str, Any] | None, sansa: dict[str, Any] | None = None) -> Usage:
    """Map an OpenAI-style ``usage`` object (plus Sansa's top-level ``sansa``) to ``Usage``.

    * tokens: ``prompt_tokens``, ``completion_tokens``, ``total_tokens``;
      ``completion_tokens_details.reasoning_tokens``; ``prompt_tokens_details.cached_tokens``
      (DeepSeek's ``prompt_cache_hit_tokens`` as a fallback).
    * SambaNova (seed 000/002 ``Usage``): ``time_to_first_token`` s → ``upstream_ttft_ms``;
      ``completion_tokens_per_sec`` → ``upstream_tokens_per_sec``; ``total_latency`` s →
      ``upstream_total_ms``.
    * Sansa (seed 001): ``usage.cost`` (USD) → ``cost_usd``; ``sansa.routed_model`` and
      ``sansa.routing_latency_ms`` (ms).
    * ``raw``: the usage object as received (``{}`` when only ``sansa`` was sent).
    """
    usage = usage if isinstance(usage, dict) else {}
    sansa = sansa if isinstance(sansa, dict) else {}
    ttft = _num(usage.get("time_to_first_token"))
    total = _num(usage.get("total_latency"))
    cached = _int(_sub(usage.get("prompt_tokens_details"), "cached_tokens"))
    if cached is None:
        cached = _int(usage.get("prompt_cache_hit_tokens"))
    routed = sansa.get("routed_model")
    return Usage(
        prompt_tokens=_int(usage.get("prompt_tokens")),
        completion_tokens=_int(usage.get("completion_tokens")),
        total_tokens=_int(usage.get("total_tokens")),
        reasoning_tokens=_int(_sub(usage.get("completion_tokens_details"), "reasoning_tokens")),
        cached_tokens=cached,
        cost_usd=_num(usage.get("cost")),
        upstream_ttft_ms=ttft * 1000.0 if ttft is not None else None,
        upstream_tokens_per_sec=_num(usage.get("completion_tokens_per_sec")),
        upstream_total_ms=total * 1000.0 if total is not None else None,
        routed_model=routed if isinstance(routed, str) and routed else None,
        routing_latency_ms=_num(sansa.get("routing_latency_ms")),
        raw=dict(usage),
    )


# ---- chunk interpretation -----------------------------------------------------------------


def _first_text(*values: Any) -> str:
    for value in values:
        if isinstance(value, str) and value:
            return value
    return ""


def logprobs_event(items: Any) -> LogprobsDelta | None:
    """``LogprobsDelta`` for a list of seed 002 ``LogProbsContent`` (``token``, ``logprob``,
    ``top_logprobs: [{token, logprob}]``); entries without a token or a numeric logprob are
    skipped; None when nothing is left."""
    tokens = []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict) or not isinstance(item.get("token"), str):
            continue
        logprob = _num(item.get("logprob"))
        if logprob is None:
            continue
        top = []
        for alt in item.get("top_logprobs") or []:
            if isinstance(alt, dict) and isinstance(alt.get("token"), str):
                alt_logprob = _num(alt.get("logprob"))
                if alt_logprob is not None:
                    top.append((alt["token"], alt_logprob))
        tokens.append(TokenLogprob(item["token"], logprob, tuple(top)))
    return LogprobsDelta(tuple(tokens)) if tokens else None


class ToolCallIndexer:
    """The adapter's own number (0, 1, 2…) for each tool call of one answer.

    ``ordinal(key, call_id)``: ``key`` is where the dialect streams the call (chat
    ``tool_calls[].index``, an Anthropic content block index, a Responses item key) and
    ``call_id`` its id when this delta carries one. A delta without an id, or with the id of
    the call already at ``key``, continues that call; a *different* id at an occupied key
    starts a new call (servers that stream parallel calls on one index), as does an unseen
    key.
    """

    def __init__(self) -> None:
        self._calls: dict[Any, list[Any]] = {}  # key → [ordinal, id]
        self.count = 0

    def ordinal(self, key: Any, call_id: str | None = None) -> int:
        known = self._calls.get(key)
        if known is not None and (not call_id or not known[1] or known[1] == call_id):
            if call_id and not known[1]:
                known[1] = call_id
            return known[0]
        ordinal = self.count
        self.count += 1
        self._calls[key] = [ordinal, call_id or ""]
        return ordinal

    def known(self, key: Any) -> bool:
        return key in self._calls


class _Chunks:
    """Per-stream state: the ``<think>`` splitter, whether a finish_reason / ``[DONE]`` came,
    the tool-call numbering, and usage (emitted whenever the usage or ``sansa`` object
    changes; the last one wins)."""

    def __init__(self, secrets: list[str], request_id: str | None) -> None:
        self.secrets = secrets
        self.request_id = request_id
        self.splitter = InlineReasoningSplitter()
        self.tools = ToolCallIndexer()
        self.finished = False
        self.done = False
        self._usage: dict[str, Any] | None = None
        self._sansa: dict[str, Any] | None = None
        self._emitted: tuple[Any, Any] | None = None
        self._pending: list[Event] = []

    def fail(self, payload: Any, data: str) -> ProviderError:
        """The error for an error chunk / event; a ``ModelOutputError`` is held for :meth:`end`."""
        output = model_output_error(payload, self.secrets)
        if output is not None:
            self._pending.append(output)
        return error_from_event(payload, data, self.secrets, request_id=self.request_id)

    def interpret(self, event: str, payload: Any, data: str) -> list[Event]:
        """Events for one SSE event (see :class:`chat.providers.http.StreamState`). Raises
        ``ProviderError`` for an ``event: error`` and for an ``{"error": …}`` chunk."""
        if event == "error":
            raise self.fail(payload, data)
        return self.chunk(payload, data)

    def relay_json(self, text: str) -> list[Event]:
        """A 2xx ``application/json`` answer to a streamed request: a whole
        ``chat.completion`` (its ``message`` is read like a delta)."""
        payload = loads(text)
        if payload is NOT_JSON:
            raise ProviderError(
                "The upstream answered with JSON that could not be parsed",
                code="bad_response",
                body_excerpt=scrub(text, self.secrets)[:EXCERPT_CHARS],
            )
        events = self.chunk(payload, text)
        self.done = True
        return events

    def chunk(self, payload: Any, data: str) -> list[Event]:
        """Events for one decoded chunk. Raises ProviderError for an error chunk."""
        if not isinstance(payload, dict):
            return []
        if payload.get("error"):
            raise self.fail(payload, data)
        events: list[Event] = []
        choices = payload.get("choices")
        for position, choice in enumerate(choices if isinstance(choices, list) else []):
            if not isinstance(choice, dict):
                continue
            index = choice.get("index", position)
            if index not in (0, None):
                continue  # only the first choice is relayed (the request never sets n)
            events.extend(self._choice(choice))
        usage = payload.get("usage")
        if isinstance(usage, dict) and usage:
            self._usage = usage
        sansa = payload.get("sansa")
        if isinstance(sansa, dict) and sansa:
            self._sansa = sansa
        if self._usage is not None:
            events.extend(self._usage_event())
        return events

    def _choice(self, choice: dict[str, Any]) -> list[Event]:
        events: list[Event] = []
        delta = choice.get("delta")
        if not isinstance(delta, dict):
            delta = choice.get("message") if isinstance(choice.get("message"), dict) else {}
        reasoning = _first_text(delta.get("reasoning"), delta.get("reasoning_content"))
        if reasoning:
            events.extend(self.splitter.reasoning(reasoning))
        content = delta.get("content")
        if isinstance(content, str):
            events.extend(self.splitter.feed(content))
            logprobs = choice.get("logprobs")
            if isinstance(logprobs, dict):
                lp_event = logprobs_event(logprobs.get("content"))
                if lp_event is not None:
                    events.append(lp_event)
        elif isinstance(content, list):  # content parts (Mistral-style text / thinking parts)
            for part in content:
                if not isinstance(part, dict):
                    continue
                if part.get("type") == "text" and isinstance(part.get("text"), str):
                    events.extend(self.splitter.feed(part["text"]))
                elif part.get("type") == "thinking":
                    inner = part.get("thinking")
                    texts = (
                        [p.get("text", "") for p in inner if isinstance(p, dict)]
                        if isinstance(inner, list)
                        else [inner]
                    )
                    text = "".join(t for t in texts if isinstance(t, str))
                    events.extend(self.splitter.reasoning(text))
        tool_calls = delta.get("tool_calls")
        for position, call in enumerate(tool_calls if isinstance(tool_calls, list) else []):
            if not isinstance(call, dict):
                continue
            function = call.get("function") if isinstance(call.get("function"), dict) else {}
            index = call.get("index")
            arguments = function.get("arguments")
            call_id = call.get("id") if isinstance(call.get("id"), str) and call["id"] else None
            key = index if isinstance(index, int) and not isinstance(index, bool) else position
            events.append(
                ToolCallDelta(
                    index=self.tools.ordinal(key, call_id),
                    id=call_id,
                    name=function.get("name") if isinstance(function.get("name"), str) else None,
                    arguments=arguments if isinstance(arguments, str) else "",
                )
            )
        reason = choice.get("finish_reason")
        if reason and not self.finished:
            events.extend(self.splitter.flush())
            events.append(Finish(str(reason)))
            self.finished = True
        return events

    def _usage_event(self) -> list[Event]:
        key = (self._usage, self._sansa)
        if key == self._emitted:
            return []
        self._emitted = (self._usage, self._sansa)
        return [normalize_usage(self._usage, self._sansa)]

    def end(self) -> list[Event]:
        """Events released at the end of the stream: held text, and Sansa routing metadata
        when it came without any usage."""
        events: list[Event] = list(self.splitter.flush())
        if self._usage is None and self._sansa is not None:
            self._usage = {}
            events.extend(self._usage_event())
        events.extend(self._pending)
        self._pending = []
        return events


# ---- streaming ----------------------------------------------------------------------------


def stream(
    client: httpx.AsyncClient, config: EndpointConfig, request: ChatRequest
) -> AsyncIterator[Event]:
    """Stream one chat completion as events (an async iterator; nothing is sent before the
    first iteration).

    Yields ``ResponseStarted(status, request_id)`` once the 2xx headers arrive (request id from
    ``x-request-id``/``request-id``), then for every SSE event a ``RawEvent(event, data)``
    (secrets scrubbed; comments and keep-alives are not events) followed by its semantic events:
    ``ReasoningDelta`` (``delta.reasoning``, else ``delta.reasoning_content``, or inline
    ``<think>``/``<thinking>``), ``TextDelta``, ``AnswerWasReasoning`` (an orphan closing tag),
    ``ToolCallDelta`` (one index per call, see :class:`ToolCallIndexer`),
    ``LogprobsDelta``, ``Finish(finish_reason)`` (once), ``Usage`` (each time the usage
    changes; the last one wins), ``StreamWarning`` for data that is not JSON. A 2xx JSON body
    (a server that ignored ``stream: true``) is relayed as one ``RawEvent`` plus the same
    semantic events.

    Raises ``ProviderError``: ``unsupported_content`` (before sending); ``parse_error(...)``
    for a non-2xx status (``path_not_found`` for a 404/405 that does not mention a model);
    ``limit_exceeded``; for transport failures see
    :func:`chat.providers.http.transport_error`; for in-stream errors and cut streams see the
    module docstring. Never raises httpx exceptions. Close it with ``contextlib.aclosing`` when
    stopping early; cancellation closes the upstream response too.
    """
    unsupported = unsupported_content_error(request, CONTENT_TYPES, API_STYLE)
    url, headers, body = build_request(config, request)
    return stream_sse(
        client, config, url, headers, body, _Chunks, error=unsupported, api_style=API_STYLE
    )


# ---- models -------------------------------------------------------------------------------


def _price_per_mtok(value: Any) -> float | None:
    """USD per token (number or numeric string) → USD per million tokens; negative → None."""
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return None
    number = _num(value)
    if number is None or number < 0:
        return None
    return round(number * 1_000_000, 6)


def _models_from(payload: Any) -> list[dict[str, Any]]:
    items = payload.get("data") if isinstance(payload, dict) else payload
    if not isinstance(items, list):
        return []
    return [item for item in items if isinstance(item, dict) and isinstance(item.get("id"), str)]


async def list_models(
    client: httpx.AsyncClient,
    config: EndpointConfig,
    *,
    headers: dict[str, str] | None = None,
) -> list[ModelInfo]:
    """``GET {base}/models`` → ``ModelInfo`` list, in the upstream's order.

    ``headers``: the request headers to use instead of ``Authorization: Bearer`` plus
    ``config.extra_headers`` (other API styles pass their own auth headers).

    Follows seed 002 ``ModelMetadataList``/``ModelMetadata``: ``data[].id``, ``owned_by``,
    ``context_length`` and ``max_completion_tokens`` (tokens), ``pricing.prompt`` /
    ``pricing.completion`` documented as "price per prompt/completion token in USD"; they are
    multiplied by 1,000,000 into USD per million tokens (numeric strings, as OpenRouter sends,
    are accepted; negative "variable" prices become None). OpenRouter's
    ``top_provider.max_completion_tokens`` is a fallback. llama.cpp's ``llama-server`` reports
    the context length (per slot, what one request may use) in ``meta.n_ctx``
    (tools/server/server-context.cpp ``get_res_model_info``); it is read when
    ``context_length`` is absent. A bare top-level list is accepted. Strings are made valid
    Unicode.

    Raises ``ProviderError``: ``models_not_listed`` ("The server is reachable but does not list
    models; type the model id") for 404, 405 or 501, so a server without ``/models`` is told
    apart from one that cannot be reached; :func:`chat.providers.errors.parse_error` for
    another non-2xx status; :func:`chat.providers.http.transport_error` codes for transport
    failures (``connection_error``, ``timeout``, ``base_url_refused``); ``bad_response`` for a
    2xx body that is not JSON; ``limit_exceeded`` for a body over ``Limits.max_json_body_bytes``
    or more than ``Limits.max_models`` models.
    """
    base = config.base_url.strip().rstrip("/")
    url = f"{base}/models"
    if headers is None:
        headers = merge_headers(_auth_headers(config, "application/json"), config.extra_headers)
    try:
        _response, payload, _text = await request_json(
            client, config, "GET", url, headers, what="model list"
        )
    except ProviderError as exc:
        raise models_not_listed(exc) from None
    items = _models_from(payload)
    limit = config.effective_limits().max_models
    if len(items) > limit:
        raise limit_error("max_models", limit, f"The model list ({len(items):,} models)")
    models = []
    for item in items:
        pricing = item.get("pricing") if isinstance(item.get("pricing"), dict) else {}
        max_completion = _int(item.get("max_completion_tokens"))
        if max_completion is None:
            max_completion = _int(_sub(item.get("top_provider"), "max_completion_tokens"))
        context_length = _int(item.get("context_length"))
        if context_length is None:
            context_length = _int(_sub(item.get("meta"), "n_ctx"))
        owned_by = item.get("owned_by")
        models.append(
            ModelInfo(
                id=fix_surrogates(item["id"]),
                owned_by=fix_surrogates(owned_by) if isinstance(owned_by, str) else None,
                context_length=context_length if context_length and context_length > 0 else None,
                max_completion_tokens=max_completion,
                prompt_price_per_mtok=_price_per_mtok(pricing.get("prompt")),
                completion_price_per_mtok=_price_per_mtok(pricing.get("completion")),
                input_modalities=_input_modalities(item),
            )
        )
    return models


def _input_modalities(item: dict[str, Any]) -> tuple[str, ...] | None:
    """What a model reads, where ``/models`` says it: ``input_modalities`` (top level or in
    OpenRouter's ``architecture``) or ``modalities.input``; None when the endpoint is silent."""
    for value in (
        item.get("input_modalities"),
        _sub(item.get("architecture"), "input_modalities"),
        _sub(item.get("modalities"), "input"),
    ):
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return tuple(fix_surrogates(v) for v in value[:16])
    return None
