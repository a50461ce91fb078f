"""Adapter for the legacy text completions endpoint: ``POST {base}/completions`` (seed 002
``CompletionRequest`` / ``CompletionStreamResponse``; llama-server ``/v1/completions``).

The request is a :class:`CompletionRequest` (a raw ``prompt``, no messages); the stream uses
the shared event vocabulary of :mod:`chat.providers.base`: ``ResponseStarted``, ``RawEvent``,
``TextDelta`` (``choices[0].text``; a chat-shaped ``delta.content`` is read too, as seed 002's
own streaming example sends it), ``LogprobsDelta`` (OpenAI's legacy ``{tokens,
token_logprobs, top_logprobs: [{token: logprob}]}`` or the chat shape ``{content: [...]}``
llama-server sends), ``Finish``, ``Usage`` (SambaNova timing fields normalised as for chat),
``StreamWarning``. Everything goes through :func:`chat.providers.http.stream_sse` (limits,
pinned transport, valid Unicode, error parsing).

May import: the standard library, httpx and this package (no Django).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx

from .base import (
    EndpointConfig,
    Event,
    Finish,
    LogprobsDelta,
    ProviderError,
    TextDelta,
    TokenLogprob,
    scrub,
)
from .errors import error_from_event
from .http import NOT_JSON, loads, stream_sse
from .openai_chat import _auth_headers, logprobs_event, normalize_usage

API_STYLE = "openai_completions"
PATH = "/completions"
#: Parameters passed through when set (None / "" mean unset).
PARAMS = ("max_tokens", "temperature", "top_p", "top_k", "stop", "seed", "frequency_penalty", "presence_penalty")


@dataclass(frozen=True)
class CompletionRequest:
    """A raw text completion. ``prompt``: the whole text the model continues; ``params``: the
    user's settings among :data:`PARAMS` (``stop`` a list of strings); ``logprobs``: None for
    off, else the number of alternatives per token (0–20) sent as ``logprobs``."""

    model: str
    prompt: str
    params: dict[str, Any] = field(default_factory=dict)
    logprobs: int | None = None
    stream: bool = True


def build_request(config: EndpointConfig, request: CompletionRequest) -> tuple[str, dict[str, str], dict[str, Any]]:
    """``(url, headers, json_body)`` of the call (pure; also the Inspect and View code view).
    Headers carry the bearer key: redact before showing."""
    url = config.base_url.rstrip("/") + PATH
    headers = _auth_headers(config, "text/event-stream" if request.stream else "application/json")
    headers.update(config.extra_headers)
    body: dict[str, Any] = {"model": request.model, "prompt": request.prompt}
    for name in PARAMS:
        value = request.params.get(name)
        if value is None or value == "" or value == []:
            continue
        body[name] = value
    if request.logprobs is not None:
        body["logprobs"] = request.logprobs
    if request.stream:
        body["stream"] = True
        if config.stream_options:
            body["stream_options"] = {"include_usage": True}
    return url, headers, body


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def legacy_logprobs(value: Any) -> LogprobsDelta | None:
    """``LogprobsDelta`` from a completions ``logprobs`` object: the legacy parallel lists
    (``tokens``, ``token_logprobs``, ``top_logprobs`` as ``{token: logprob}`` maps) or the chat
    form ``{"content": [LogProbsContent, …]}``; None when it holds nothing usable."""
    if not isinstance(value, dict):
        return None
    if isinstance(value.get("content"), list):
        return logprobs_event(value["content"])
    tokens, lps = value.get("tokens"), value.get("token_logprobs")
    if not isinstance(tokens, list) or not isinstance(lps, list):
        return None
    tops = value.get("top_logprobs") if isinstance(value.get("top_logprobs"), list) else []
    out = []
    for i, (token, lp) in enumerate(zip(tokens, lps, strict=False)):
        number = _num(lp)
        if not isinstance(token, str) or number is None:
            continue
        alts: list[tuple[str, float]] = []
        top = tops[i] if i < len(tops) else None
        if isinstance(top, dict):
            alts = [(k, float(v)) for k, v in top.items() if isinstance(k, str) and _num(v) is not None]
            alts.sort(key=lambda kv: -kv[1])
        out.append(TokenLogprob(token, number, tuple(alts)))
    return LogprobsDelta(tuple(out)) if out else None


class _Chunks:
    """Per-stream state for :func:`chat.providers.http.stream_sse`."""

    def __init__(self, secrets: list[str], request_id: str | None) -> None:
        self.secrets = secrets
        self.request_id = request_id
        self.finished = False
        self.done = False
        self._usage: dict[str, Any] | None = None

    def interpret(self, event: str, payload: Any, data: str) -> list[Event]:
        """Events of one SSE event; raises ``ProviderError`` for an error event or chunk."""
        if event == "error" or (isinstance(payload, dict) and payload.get("error")):
            raise error_from_event(payload, data, self.secrets, request_id=self.request_id)
        return self.chunk(payload)

    def relay_json(self, text: str) -> list[Event]:
        """A whole ``text_completion`` body (a server that ignored ``stream``)."""
        payload = loads(text)
        if payload is NOT_JSON:
            raise ProviderError("The upstream answered with JSON that could not be parsed", code="bad_response",
                                body_excerpt=scrub(text, self.secrets)[:300])
        if isinstance(payload, dict) and payload.get("error"):
            raise error_from_event(payload, text, self.secrets, request_id=self.request_id)
        events = self.chunk(payload)
        self.done = True
        return events

    def chunk(self, payload: Any) -> list[Event]:
        """Events of one decoded chunk (only choice 0 is relayed)."""
        if not isinstance(payload, dict):
            return []
        events: list[Event] = []
        choices = payload.get("choices")
        for position, choice in enumerate(choices if isinstance(choices, list) else []):
            if not isinstance(choice, dict) or choice.get("index", position) not in (0, None):
                continue
            text = choice.get("text")
            if not isinstance(text, str):
                delta = choice.get("delta") if isinstance(choice.get("delta"), dict) else {}
                text = delta.get("content") if isinstance(delta.get("content"), str) else ""
            if text:
                events.append(TextDelta(text))
            lp = legacy_logprobs(choice.get("logprobs"))
            if lp is not None:
                events.append(lp)
            reason = choice.get("finish_reason")
            if reason and not self.finished:
                events.append(Finish(str(reason)))
                self.finished = True
        usage = payload.get("usage")
        if isinstance(usage, dict) and usage and usage != self._usage:
            self._usage = usage
            events.append(normalize_usage(usage))
        return events

    def end(self) -> list[Event]:
        """Nothing is held back by this dialect."""
        return []


def stream(client: httpx.AsyncClient, config: EndpointConfig, request: CompletionRequest) -> AsyncIterator[Event]:
    """Stream one text completion as events (nothing is sent before the first iteration).

    Yields ``ResponseStarted``, then per SSE event a ``RawEvent`` and its ``TextDelta`` /
    ``LogprobsDelta`` / ``Finish`` (once) / ``Usage`` (when it changes). Raises ``ProviderError``
    only (non-2xx answers parsed as for chat, ``path_not_found`` for a server without
    ``/completions``, ``limit_exceeded``, ``stream_cut``, transport codes)."""
    url, headers, body = build_request(config, request)
    return stream_sse(client, config, url, headers, body, _Chunks, api_style=API_STYLE)
