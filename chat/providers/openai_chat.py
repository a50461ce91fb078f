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
* Before raising, text held back by the ``<think>`` splitter is yielded, so nothing received is
  lost.
* SSE framing is httpx-sse's (WHATWG rules): comment lines (``: keep-alive``) are not events,
  multi-line ``data:`` is joined with ``\n``, CR/LF/CRLF all end lines, and a last event not
  followed by a blank line is incomplete and dropped (so a body cut inside an event is a cut).

Callers must close the generator when they stop early (``contextlib.aclosing``) or cancel the
task; either closes the upstream response at once. Adapters never time, persist or render.

May import: the standard library, httpx, httpx-sse (no Django).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Iterable
from typing import Any
from urllib.parse import urlsplit

import httpx
from httpx_sse import SSEError

from .base import (
    ChatRequest,
    EndpointConfig,
    Event,
    Finish,
    ModelInfo,
    ProviderError,
    RawEvent,
    ReasoningDelta,
    ResponseStarted,
    TextDelta,
    ToolCallDelta,
    Usage,
    scrub,
)
from .errors import (
    EXCERPT_CHARS,
    error_from_event,
    parse_error,
    request_id_from_headers,
    secret_variants,
)
from .http import (
    STREAM_CUT_MESSAGE,
    LenientEventSource,
    build_http_request,
    host_of,
    merge_headers,
    read_capped,
    send_stream,
    transport_error,
)

API_STYLE = "openai_chat"

#: Request parameters passed through when the user set them (``ChatRequest.params``).
PARAMS = ("temperature", "top_p", "top_k", "max_tokens", "stop", "seed")

#: Hosts that reject ``top_k`` and want ``max_completion_tokens`` instead of ``max_tokens``.
OPENAI_HOSTS = frozenset({"api.openai.com"})

#: Seconds spent reading the rest of the body after ``[DONE]`` (see :func:`_drain`).
DRAIN_AFTER_DONE_S = 0.5

#: Transport failures that, after a finish_reason, only lose trailing usage / ``[DONE]``.
_INTERRUPTIONS = (httpx.RemoteProtocolError, httpx.ReadError, httpx.ReadTimeout)


# ---- request ------------------------------------------------------------------------------


def _auth_headers(config: EndpointConfig, accept: str) -> dict[str, str]:
    headers = {"Accept": accept}
    if config.api_key:
        headers["Authorization"] = f"Bearer {config.api_key}"
    return headers


def build_request(config: EndpointConfig, request: ChatRequest) -> tuple[str, dict[str, str], dict]:
    """Build ``(url, headers, json_body)`` for a streamed chat completion.

    * url: ``{base_url}/chat/completions`` (trailing slashes of the base removed).
    * headers: ``Content-Type``/``Accept: text/event-stream``, ``Authorization: Bearer <key>``
      when a key is set, then ``config.extra_headers`` (which win, case-insensitively).
    * body (OpenAI ``CreateChatCompletionRequest``; seed 000 ``ChatCompletionRequest``):
      ``model``; ``messages`` with the system prompt first as ``role: system`` when it is not
      blank; only the params the user set among temperature, top_p, top_k, max_tokens,
      stop (a string becomes a one-item list, an empty list is dropped), seed; ``stream: true``;
      ``stream_options: {"include_usage": true}`` unless ``config.stream_options`` is False.
      For ``api.openai.com`` ``top_k`` is dropped (OpenAI rejects it) and ``max_tokens`` is sent
      as ``max_completion_tokens`` (reasoning models reject ``max_tokens``).

    Pure; raises nothing.
    """
    base = config.base_url.strip().rstrip("/")
    url = f"{base}/chat/completions"
    headers = _auth_headers(config, "text/event-stream")
    headers["Content-Type"] = "application/json"
    headers["Cache-Control"] = "no-store"
    headers = merge_headers(headers, config.extra_headers)

    messages: list[dict[str, Any]] = []
    if request.system and request.system.strip():
        messages.append({"role": "system", "content": request.system})
    messages.extend({"role": m.role, "content": m.content} for m in request.messages)

    body: dict[str, Any] = {"model": request.model, "messages": messages}
    try:
        is_openai = (urlsplit(base).hostname or "").lower() in OPENAI_HOSTS
    except ValueError:
        is_openai = False
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
    body["stream"] = True
    if config.stream_options:
        body["stream_options"] = {"include_usage": True}
    return url, headers, body


# ---- <think> splitting --------------------------------------------------------------------


class ThinkSplitter:
    """Split inline ``<think>…</think>`` reasoning out of streamed content.

    Rules:

    * Only a ``<think>`` at the very start of the content (leading whitespace allowed) opens
      reasoning. Until the first non-whitespace characters decide it, whitespace and a partial
      ``<think>`` prefix (``"<"``, ``"<thi"``) are held back; anything else ("a < b",
      ``"<thinking>"``) makes the whole content plain answer text from then on, and no later
      ``<think>`` is treated specially.
    * Inside reasoning, text is released at once except a trailing partial ``</think>``
      prefix (held until the next piece decides it). Leading whitespace of the reasoning and of
      the answer after ``</think>`` is dropped (``<think>\\n\\n</think>\\n\\nHi`` → answer
      ``"Hi"``, no reasoning).
    * :meth:`flush` (at ``finish_reason`` and at the end) releases what is held: an unclosed
      ``<think>`` means everything after it was reasoning (e.g. cut by ``max_tokens``).

    ``feed``/``flush`` return a list of ``TextDelta``/``ReasoningDelta``.
    """

    OPEN = "<think>"
    CLOSE = "</think>"

    def __init__(self) -> None:
        self._state = "start"  # start | think_start | think | after | answer
        self._buf = ""

    def feed(self, text: str) -> list[TextDelta | ReasoningDelta]:
        out: list[TextDelta | ReasoningDelta] = []
        if not text:
            return out
        if self._state == "answer":
            out.append(TextDelta(text))
            return out
        self._buf += text
        while True:
            buf = self._buf
            if self._state == "start":
                stripped = buf.lstrip()
                if not stripped:
                    return out
                if stripped.startswith(self.OPEN):
                    self._state = "think_start"
                    self._buf = stripped[len(self.OPEN) :]
                    continue
                if self.OPEN.startswith(stripped):
                    return out
                self._state = "answer"
                self._buf = ""
                out.append(TextDelta(buf))
                return out
            if self._state in ("think_start", "after"):
                stripped = buf.lstrip()
                if not stripped:
                    self._buf = ""
                    return out
                self._buf = stripped
                self._state = "think" if self._state == "think_start" else "answer"
                continue
            if self._state == "think":
                end = buf.find(self.CLOSE)
                if end >= 0:
                    if end:
                        out.append(ReasoningDelta(buf[:end]))
                    self._buf = buf[end + len(self.CLOSE) :]
                    self._state = "after"
                    continue
                hold = 0
                for k in range(min(len(self.CLOSE) - 1, len(buf)), 0, -1):
                    if buf.endswith(self.CLOSE[:k]):
                        hold = k
                        break
                if len(buf) > hold:
                    out.append(ReasoningDelta(buf[: len(buf) - hold]))
                self._buf = buf[len(buf) - hold :]
                return out
            # answer
            self._buf = ""
            if buf:
                out.append(TextDelta(buf))
            return out

    def flush(self) -> list[TextDelta | ReasoningDelta]:
        buf, self._buf = self._buf, ""
        if not buf:
            return []
        if self._state == "start":
            self._state = "answer"
            return [TextDelta(buf)]
        if self._state == "think":
            return [ReasoningDelta(buf)]
        return []


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


class _Chunks:
    """Per-stream state: the ``<think>`` splitter, whether a finish_reason / ``[DONE]`` came,
    and usage (emitted whenever the usage or ``sansa`` object changes; the last one wins)."""

    def __init__(self, secrets: list[str], request_id: str | None) -> None:
        self.secrets = secrets
        self.request_id = request_id
        self.splitter = ThinkSplitter()
        self.finished = False
        self.done = False
        self._usage: dict[str, Any] | None = None
        self._sansa: dict[str, Any] | None = None
        self._emitted: tuple[Any, Any] | None = None

    def chunk(self, payload: Any, data: str) -> list[Event]:
        """Events for one decoded chunk. Raises ProviderError for an error chunk."""
        if not isinstance(payload, dict):
            return []
        if payload.get("error"):
            raise error_from_event(payload, data, self.secrets, request_id=self.request_id)
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
            events.append(ReasoningDelta(reasoning))
        content = delta.get("content")
        if isinstance(content, str):
            events.extend(self.splitter.feed(content))
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
                    if text:
                        events.append(ReasoningDelta(text))
        tool_calls = delta.get("tool_calls")
        for position, call in enumerate(tool_calls if isinstance(tool_calls, list) else []):
            if not isinstance(call, dict):
                continue
            function = call.get("function") if isinstance(call.get("function"), dict) else {}
            index = call.get("index")
            arguments = function.get("arguments")
            events.append(
                ToolCallDelta(
                    index=index if isinstance(index, int) else position,
                    id=call.get("id") if isinstance(call.get("id"), str) else None,
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
        return events


# ---- streaming ----------------------------------------------------------------------------


async def stream(
    client: httpx.AsyncClient, config: EndpointConfig, request: ChatRequest
) -> AsyncIterator[Event]:
    """Stream one chat completion as events.

    Yields ``ResponseStarted(status, request_id)`` once the 2xx headers arrive (request id from
    ``x-request-id``/``request-id``), then for every SSE event a ``RawEvent(event, data)``
    (secrets scrubbed; comments and keep-alives are not events) followed by its semantic events:
    ``ReasoningDelta`` (``delta.reasoning``, else ``delta.reasoning_content``, or inline
    ``<think>``), ``TextDelta``, ``ToolCallDelta``, ``Finish(finish_reason)`` (once),
    ``Usage`` (each time the usage changes; the last one wins). A 2xx JSON body (a server that
    ignored ``stream: true``) is relayed as one ``RawEvent`` plus the same semantic events.

    Raises ``ProviderError``: ``parse_error(...)`` for a non-2xx status (the body read is capped
    at 64 KiB); for transport failures see :func:`chat.providers.http.transport_error`; for
    in-stream errors and cut streams see the module docstring. Never raises httpx exceptions.
    Close it with ``contextlib.aclosing`` when stopping early; cancellation closes the upstream
    response too.
    """
    url, headers, body = build_request(config, request)
    secrets = secret_variants(config.secrets())
    host = host_of(url)
    http_request = build_http_request(client, "POST", url, headers, secrets, json=body)
    started = False
    state: _Chunks | None = None
    failure: httpx.HTTPError | None = None
    try:
        async with send_stream(client, http_request) as response:
            started = True
            if not response.is_success:
                raw = await read_capped(response)
                raise parse_error(response.status_code, response.headers, raw, secrets)
            request_id = request_id_from_headers(response.headers)
            state = _Chunks(secrets, request_id)
            yield ResponseStarted(response.status_code, request_id)

            content_type = response.headers.get("content-type", "").lower()
            if "json" in content_type and "event-stream" not in content_type:
                async with contextlib.aclosing(_relay_json_body(response, state)) as relayed:
                    async for event in relayed:
                        yield event
                return

            response.encoding = "utf-8"  # SSE is always UTF-8 (WHATWG HTML §9.2.5)
            source = LenientEventSource(response)
            async with contextlib.aclosing(source.aiter_sse()) as sse_events:
                async for sse in sse_events:
                    # httpx-sse reports an absent ``event:`` field as "message" (the SSE default)
                    name = "" if sse.event == "message" else sse.event
                    if not sse.data and not name:
                        continue  # a blank dispatch after an id:/retry: line
                    yield RawEvent(name, scrub(sse.data, secrets))
                    if sse.data.strip() == "[DONE]":
                        state.done = True
                        break
                    for event in _interpret(state, name, sse.data):
                        yield event
                if state.done:
                    await _drain(sse_events)
            for event in state.end():
                yield event
            if not state.done and not state.finished:
                raise ProviderError(STREAM_CUT_MESSAGE, code="stream_cut")
    except ProviderError as exc:
        if state is not None:
            for event in state.end():
                yield event
        raise exc from None
    except SSEError as exc:  # pragma: no cover - only if httpx-sse changes its content check
        raise ProviderError(
            scrub(f"The upstream did not send an event stream: {exc}", secrets), code="stream_error"
        ) from None
    except httpx.HTTPError as exc:
        failure = exc  # handled below, outside the except block, so it is not chained
    if failure is not None:
        if state is not None:
            for event in state.end():
                yield event
            if state.finished and isinstance(failure, _INTERRUPTIONS):
                return  # the answer was complete; only trailing usage / [DONE] was lost
        raise transport_error(failure, host, secrets, started=started)


_NOT_JSON = object()


def _loads(text: str) -> Any:
    """``json.loads`` or :data:`_NOT_JSON`. No exception escapes: a ``JSONDecodeError`` carries
    the whole document (which may echo a key) and would be chained to what we raise next."""
    try:
        return json.loads(text)
    except ValueError:
        return _NOT_JSON


async def _drain(events: AsyncIterator[Any]) -> None:
    """Read what follows ``[DONE]`` (normally only the end of the chunked body) for at most
    :data:`DRAIN_AFTER_DONE_S`, so the connection can return to the pool instead of being
    closed half-read. Whatever comes after ``[DONE]`` is ignored."""
    with contextlib.suppress(TimeoutError, httpx.HTTPError):
        async with asyncio.timeout(DRAIN_AFTER_DONE_S):
            async for _ in events:
                pass


def _interpret(state: _Chunks, event_name: str, data: str) -> list[Event]:
    """Semantic events for one SSE event's data. Raises ProviderError for error events."""
    payload = _loads(data)
    if payload is _NOT_JSON:
        payload = None
    if event_name == "error":
        raise error_from_event(payload, data, state.secrets, request_id=state.request_id)
    if payload is None:
        return []  # not JSON (a stray keep-alive as data): only the RawEvent shows it
    return state.chunk(payload, data)


async def _relay_json_body(response: httpx.Response, state: _Chunks) -> AsyncIterator[Event]:
    """A 2xx ``application/json`` answer to a streamed request: a whole ``chat.completion``."""
    raw = await response.aread()
    text = raw.decode("utf-8", errors="replace")
    yield RawEvent("", scrub(text, state.secrets))
    payload = _loads(text)
    if payload is _NOT_JSON:
        raise ProviderError(
            "The upstream answered with JSON that could not be parsed",
            code="bad_response",
            body_excerpt=scrub(text, state.secrets)[:EXCERPT_CHARS],
        )
    for event in state.chunk(payload, text):
        yield event
    state.done = True
    for event in state.end():
        yield event


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


def _models_from(payload: Any) -> Iterable[dict[str, Any]]:
    items = payload.get("data") if isinstance(payload, dict) else payload
    if not isinstance(items, list):
        return []
    return [item for item in items if isinstance(item, dict) and isinstance(item.get("id"), str)]


async def list_models(client: httpx.AsyncClient, config: EndpointConfig) -> list[ModelInfo]:
    """``GET {base}/models`` → ``ModelInfo`` list, in the upstream's order.

    Follows seed 002 ``ModelMetadataList``/``ModelMetadata``: ``data[].id``, ``owned_by``,
    ``context_length`` and ``max_completion_tokens`` (tokens), ``pricing.prompt`` /
    ``pricing.completion`` documented as "price per prompt/completion token in USD"; they are
    multiplied by 1,000,000 into USD per million tokens (numeric strings, as OpenRouter sends,
    are accepted; negative "variable" prices become None). OpenRouter's
    ``top_provider.max_completion_tokens`` is a fallback. A bare top-level list is accepted.

    Raises ``ProviderError``: :func:`chat.providers.errors.parse_error` for a non-2xx status,
    :func:`chat.providers.http.transport_error` codes for transport failures, ``bad_response`` for a 2xx body that
    is not JSON.
    """
    base = config.base_url.strip().rstrip("/")
    url = f"{base}/models"
    headers = merge_headers(_auth_headers(config, "application/json"), config.extra_headers)
    secrets = secret_variants(config.secrets())
    http_request = build_http_request(client, "GET", url, headers, secrets)
    failure: httpx.HTTPError | None = None
    try:
        response = await client.send(http_request)
    except httpx.HTTPError as exc:
        failure = exc  # raised below, outside the except block, so it is not chained
    if failure is not None:
        raise transport_error(failure, host_of(url), secrets, started=False)
    if not response.is_success:
        raise parse_error(response.status_code, response.headers, response.content, secrets)
    text = response.content.decode("utf-8", errors="replace")
    payload = _loads(text)
    if payload is _NOT_JSON:
        raise ProviderError(
            "The model list is not JSON",
            status=response.status_code,
            code="bad_response",
            body_excerpt=scrub(text, secrets)[:EXCERPT_CHARS],
        )
    models = []
    for item in _models_from(payload):
        pricing = item.get("pricing") if isinstance(item.get("pricing"), dict) else {}
        max_completion = _int(item.get("max_completion_tokens"))
        if max_completion is None:
            max_completion = _int(_sub(item.get("top_provider"), "max_completion_tokens"))
        owned_by = item.get("owned_by")
        models.append(
            ModelInfo(
                id=item["id"],
                owned_by=owned_by if isinstance(owned_by, str) else None,
                context_length=_int(item.get("context_length")),
                max_completion_tokens=max_completion,
                prompt_price_per_mtok=_price_per_mtok(pricing.get("prompt")),
                completion_price_per_mtok=_price_per_mtok(pricing.get("completion")),
            )
        )
    return models
