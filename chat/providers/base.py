"""The event vocabulary every API-style adapter emits, and the one error it raises.

Adapters (``openai_chat``, later ``anthropic_messages`` and ``openai_responses``) turn a wire
format into a stream of the frozen dataclasses below. The turn runner (``chat/turns.py``) times,
accumulates and persists them; adapters never time, persist or render.

May import: the standard library only (no Django, no httpx here).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal


@dataclass(frozen=True)
class EndpointConfig:
    """What an adapter needs to reach one endpoint.

    ``base_url`` is already resolved (no symbolic ``sim://`` URL) and checked; ``api_key`` and
    ``extra_headers`` are decrypted secrets: adapters must never put them in an event, an error
    message or a log line (use :func:`scrub`).
    """

    base_url: str
    api_key: str = ""
    extra_headers: dict[str, str] = field(default_factory=dict)
    api_style: str = "openai_chat"
    stream_options: bool = True  # False for servers that reject ``stream_options``

    def secrets(self) -> list[str]:
        """Every secret value that must never leave the server (key and header values)."""
        values = [self.api_key, *self.extra_headers.values()]
        return [v for v in values if v and len(v) >= 4]


@dataclass(frozen=True)
class ContentPart:
    """A non-text part of a user message (issue 3: images and audio).

    ``type``: "image" | "audio". Either ``data_b64`` (base64 of the bytes, with ``media_type``
    like ``image/png`` or ``audio/wav``) or ``url`` (an http(s) image URL, where the API takes
    one). Adapters map it to ``image_url`` / ``input_audio`` parts (OpenAI chat), ``image``
    blocks with a base64 source (Anthropic), or ``input_image`` (Responses).
    """

    type: str
    media_type: str = ""
    data_b64: str = ""
    url: str = ""
    filename: str = ""


@dataclass(frozen=True)
class ToolCall:
    """A complete tool call of an assistant message: ``arguments`` is the JSON text as sent."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ChatMessage:
    """One message of the history sent upstream.

    ``role``: system | user | assistant | tool. ``parts``: attachments besides the text
    (user). ``tool_calls``: what an assistant message asked for; ``tool_call_id``: which
    call a ``tool`` message answers. ``reasoning`` / ``reasoning_signature``: an assistant's
    prior thinking, sent back where the API requires it (Anthropic thinking blocks).
    """

    role: str
    content: str
    parts: tuple[ContentPart, ...] = ()
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str = ""
    name: str = ""
    reasoning: str = ""
    reasoning_signature: str = ""


@dataclass(frozen=True)
class ChatRequest:
    """A request in API-neutral terms.

    ``params`` holds only what the user set: temperature, top_p, top_k, max_tokens, stop
    (list of str), seed, frequency_penalty, presence_penalty. Adapters map them to their
    dialect and drop what it cannot take.

    ``tools``: function definitions in OpenAI chat form
    (``{"type": "function", "function": {"name", "description", "parameters"}}``);
    ``tool_choice``: "auto" | "none" | "required" | a function name. ``response_format``:
    ``{"type": "text" | "json_object"}`` or ``{"type": "json_schema", "json_schema": {"name",
    "strict", "schema"}}`` (OpenAI chat form). ``reasoning``: ``effort`` (low…high, Sansa's
    xhigh…none), ``budget_tokens`` (Anthropic thinking; 0 = disabled), ``enable_thinking``
    (bool, SambaNova ``chat_template_kwargs``), ``exclude`` / ``enabled`` / ``max_tokens``
    (Sansa ``reasoning`` object). ``logprobs`` / ``top_logprobs``: token probabilities where
    supported. ``extra``: dialect-specific fields passed through as given (e.g. Sansa
    ``session_id``).
    """

    model: str
    messages: tuple[ChatMessage, ...]
    system: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    tools: tuple[dict[str, Any], ...] = ()
    tool_choice: str | None = None
    response_format: dict[str, Any] | None = None
    reasoning: dict[str, Any] = field(default_factory=dict)
    logprobs: bool = False
    top_logprobs: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


# ---- events -----------------------------------------------------------------------------


@dataclass(frozen=True)
class ResponseStarted:
    """HTTP status 2xx and headers received (first byte). ``request_id`` from headers if any."""

    status: int
    request_id: str | None = None


@dataclass(frozen=True)
class TextDelta:
    """A piece of the answer text."""

    text: str


@dataclass(frozen=True)
class ReasoningDelta:
    """A piece of reasoning ("thinking") text, never part of the answer."""

    text: str


@dataclass(frozen=True)
class ToolCallDelta:
    """A piece of a streamed tool call (assembled by index in the runner)."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""


@dataclass(frozen=True)
class ReasoningSignature:
    """The signature closing a thinking block (Anthropic ``signature_delta``), kept so the
    block can be sent back on the next turn."""

    signature: str


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token with its log probability and the top alternatives (token, logprob)."""

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class LogprobsDelta:
    """Log probabilities of the tokens of the last text delta(s)."""

    tokens: tuple[TokenLogprob, ...]


@dataclass(frozen=True)
class ModelOutputError:
    """The model's raw output that failed to parse as a tool call (seed 002 ``ModelOutputError``)."""

    message: str
    raw_output: str = ""


@dataclass(frozen=True)
class Usage:
    """Token usage as the upstream reported it, normalized.

    Tokens are counts; ``cost_usd`` in USD when the upstream sent it (Sansa ``usage.cost``).
    Upstream-reported timings keep the upstream's own units converted to ms / tokens per second:
    ``upstream_ttft_ms`` (SambaNova ``time_to_first_token`` is in seconds, converted here),
    ``upstream_tokens_per_sec`` (``completion_tokens_per_sec``), ``upstream_total_ms``
    (``total_latency`` s → ms). ``raw`` is the usage object exactly as received.
    """

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    reasoning_tokens: int | None = None
    cached_tokens: int | None = None
    cost_usd: float | None = None
    upstream_ttft_ms: float | None = None
    upstream_tokens_per_sec: float | None = None
    upstream_total_ms: float | None = None
    routed_model: str | None = None
    routing_latency_ms: float | None = None
    raw: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Finish:
    """The choice ended. ``reason``: stop | length | tool_calls | content_filter | … .

    ``openai_chat`` sends the upstream's ``finish_reason`` as is. Adapters of other dialects map
    their own terms onto that vocabulary (Anthropic ``end_turn`` → ``stop``, ``max_tokens`` →
    ``length``, ``tool_use`` → ``tool_calls``; Responses ``incomplete`` with
    ``max_output_tokens`` → ``length``) and keep the upstream's word in ``upstream_reason``.
    """

    reason: str | None
    upstream_reason: str | None = None


@dataclass(frozen=True)
class RawEvent:
    """One upstream SSE event as received (for the Inspect view), secrets scrubbed.

    ``event`` is the SSE ``event:`` field ("" when absent), ``data`` the data field text.
    """

    event: str
    data: str


Event = (
    ResponseStarted
    | TextDelta
    | ReasoningDelta
    | ReasoningSignature
    | ToolCallDelta
    | LogprobsDelta
    | ModelOutputError
    | Usage
    | Finish
    | RawEvent
)

EventKind = Literal["text", "reasoning"]


# ---- errors -----------------------------------------------------------------------------


class ProviderError(Exception):
    """Any failure talking to an upstream, normalized.

    ``status``: HTTP status, or None for transport failures (connection refused, timeout, cut
    stream). ``code``: the upstream's error code/type (``invalid_request_error``,
    ``rate_limit_exceeded``, …) or one of ours (``connection_error``, ``timeout``,
    ``stream_error``, ``stream_cut``). ``retry_after_s``: seconds from ``Retry-After``.
    ``body_excerpt``: at most 2,000 characters of the raw body, secrets removed.
    ``message`` never contains a secret (the adapter scrubs it).
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: str | None = None,
        param: str | None = None,
        request_id: str | None = None,
        retry_after_s: float | None = None,
        body_excerpt: str = "",
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.param = param
        self.request_id = request_id
        self.retry_after_s = retry_after_s
        self.body_excerpt = body_excerpt

    def as_dict(self) -> dict[str, Any]:
        """JSON-safe form stored on the message row and shown to the user."""
        return {
            "message": self.message,
            "status": self.status,
            "code": self.code,
            "param": self.param,
            "request_id": self.request_id,
            "retry_after_s": self.retry_after_s,
            "body_excerpt": self.body_excerpt,
        }

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return (
            f"ProviderError(status={self.status!r}, code={self.code!r}, message={self.message!r})"
        )


REDACTED = "[REDACTED]"


def scrub(text: str, secrets: list[str]) -> str:
    """Return ``text`` with every secret (and its ``Bearer`` form) replaced by ``[REDACTED]``."""
    for secret in sorted(set(secrets), key=len, reverse=True):
        if secret:
            text = text.replace(secret, REDACTED)
    return text


@dataclass(frozen=True)
class ModelInfo:
    """One model from ``GET {base}/models`` (seed 002 ``ModelMetadata`` where available).

    Prices in USD per million tokens; ``context_length`` and ``max_completion_tokens`` in tokens.
    """

    id: str
    owned_by: str | None = None
    context_length: int | None = None
    max_completion_tokens: int | None = None
    prompt_price_per_mtok: float | None = None
    completion_price_per_mtok: float | None = None
    input_modalities: tuple[str, ...] | None = None  # e.g. ("text", "image"); None = not reported
