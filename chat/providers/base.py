"""The event vocabulary every API-style adapter emits, and the one error it raises.

Adapters (``openai_chat``, ``anthropic_messages`` and ``openai_responses``) turn a wire format
into a stream of the frozen dataclasses below. The turn runner (``chat/turns.py``) times,
accumulates and persists them; adapters never time, persist or render.

Guarantees every adapter gives (enforced once, in :func:`chat.providers.http.stream_sse`):

* every string in an event or a ``ProviderError`` is valid Unicode (a UTF-16 surrogate pair
  split across two events as JSON escapes is joined, a lone half becomes one U+FFFD), so it can
  always be encoded, stored and rendered;
* the text, reasoning and tool-call arguments one stream emits are at most
  ``Limits.max_answer_chars`` characters in total; past any limit of :class:`Limits` the stream
  ends with ``ProviderError(code="limit_exceeded")`` and every event before it stays valid;
* an event the adapter cannot read is never silent (:class:`StreamWarning`).

May import: the standard library only (no Django, no httpx here).
"""

from __future__ import annotations

import base64
import dataclasses
import json
import re
import secrets as _secrets
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

# ---- limits -------------------------------------------------------------------------------

MIB = 1024 * 1024


@dataclass(frozen=True)
class Limits:
    """Upper bounds on everything an upstream sends (DESIGN.md, "Storage and scale").

    Every field is a count of bytes or characters; past one, the call ends with
    ``ProviderError(code="limit_exceeded")`` whose message names the field, and what was
    emitted before stays emitted (the runner keeps the text so far).

    * ``max_json_body_bytes``: a whole JSON body (``/models``, ``count_tokens``, a 2xx JSON
      answer to a streamed request), after decompression.
    * ``max_error_body_bytes``: how much of a non-2xx body is read (the rest is ignored, not
      an error: the error is raised from what was read).
    * ``max_decoded_bytes``: one response body after decompression (gzip/deflate bombs are
      stopped here: the cap is on decoded bytes, enforced while inflating).
    * ``max_sse_line_bytes``: one SSE line (a ``data:`` line holds one whole event).
    * ``max_answer_chars``: answer text + reasoning + tool-call arguments emitted by one stream.
    * ``max_models``: entries of one ``GET /models`` list.
    * ``max_raw_event_chars``: characters of one ``RawEvent.data`` kept for Inspect (longer
      data is cut, see ``RawEvent.omitted``).
    * ``max_raw_chars``: characters of ``RawEvent.data`` kept per stream; later raw events
      carry ``data=""`` and ``omitted`` (they still mark the time of a byte).
    """

    max_json_body_bytes: int = 16 * MIB
    max_error_body_bytes: int = 64 * 1024
    max_decoded_bytes: int = 256 * MIB
    max_sse_line_bytes: int = 16 * MIB
    max_answer_chars: int = 2_000_000
    max_models: int = 5_000
    max_raw_event_chars: int = 16 * 1024
    max_raw_chars: int = 512 * 1024


#: The limits used when ``EndpointConfig.limits`` is None. A module-level setting: the
#: settings layer may replace it at start-up (``base.DEFAULT_LIMITS = Limits(...)``).
DEFAULT_LIMITS = Limits()

#: Whether loopback and private addresses may be connected to when
#: ``EndpointConfig.allow_private`` is None (module-level setting, see
#: :class:`chat.providers.transport.PinnedTransport`).
ALLOW_PRIVATE = True


def limit_error(name: str, limit: int, what: str) -> ProviderError:
    """``ProviderError(code="limit_exceeded")`` for the :class:`Limits` field ``name``:
    "``what`` exceeded the limit of ``limit`` (Limits.``name``); the text so far is kept"."""
    return ProviderError(
        f"{what} exceeded the limit of {limit:,} (Limits.{name}); what arrived before it is kept",
        code="limit_exceeded",
        param=name,
    )


@dataclass(frozen=True)
class EndpointConfig:
    """What an adapter needs to reach one endpoint.

    ``base_url`` is already resolved (no symbolic ``sim://`` URL) and checked; ``api_key`` and
    ``extra_headers`` are decrypted secrets: adapters must never put them in an event, an error
    message or a log line (use :func:`scrub`).
    """

    base_url: str
    api_key: str = field(default="", repr=False)
    extra_headers: dict[str, str] = field(default_factory=dict, repr=False)
    api_style: str = "openai_chat"
    stream_options: bool = True  # False for servers that reject ``stream_options``
    #: Loopback/private addresses allowed for this endpoint; None = :data:`ALLOW_PRIVATE`.
    #: Callers set True for the built-in simulator (loopback) when private URLs are refused.
    allow_private: bool | None = None
    #: Size limits; None = :data:`DEFAULT_LIMITS`.
    limits: Limits | None = None

    def effective_limits(self) -> Limits:
        """``limits``, else the module default :data:`DEFAULT_LIMITS` (read at call time)."""
        return self.limits if self.limits is not None else DEFAULT_LIMITS

    def effective_allow_private(self) -> bool:
        """``allow_private``, else the module default :data:`ALLOW_PRIVATE`."""
        return self.allow_private if self.allow_private is not None else ALLOW_PRIVATE

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
    #: The raw bytes instead of ``data_b64``: encoded to base64 only while the request body is
    #: written (:class:`Base64Media`), so a turn holds one copy of each attachment, not three.
    data: bytes = b""

    def __repr__(self) -> str:
        size = len(self.data) or len(self.data_b64)
        return f"ContentPart(type={self.type!r}, media_type={self.media_type!r}, {size} bytes, url={self.url!r})"


class Base64Media:
    """Bytes that go into a JSON request body as base64 text (``prefix`` + base64), encoded in
    pieces while the body is written (:func:`encode_json_body`) instead of as one string held
    beside the bytes, the body's ``str`` and its ``bytes`` (issue 8 item 12: 10 images of 10 MB
    peaked at 2.1 GB per turn). ``prefix``: e.g. ``data:image/png;base64,`` (RFC 2397) or "".
    Equal to its full text, so tests may compare bodies with strings."""

    __slots__ = ("data", "prefix")
    CHUNK = 3 * 64 * 1024  # a multiple of 3: pieces concatenate into one valid base64 text

    def __init__(self, data: bytes, prefix: str = "") -> None:
        self.data = data
        self.prefix = prefix

    def encoded_length(self) -> int:
        """Bytes of ``prefix`` + base64 text (ASCII), without quotes."""
        return len(self.prefix.encode("utf-8")) + 4 * ((len(self.data) + 2) // 3)

    def text(self) -> str:
        """The whole text (for View code and tests; the relay streams :meth:`chunks`)."""
        return self.prefix + base64.b64encode(self.data).decode("ascii")

    def chunks(self) -> Iterator[bytes]:
        """``prefix`` then base64 pieces of at most 256 KiB."""
        if self.prefix:
            yield self.prefix.encode("utf-8")
        view = memoryview(self.data)
        for start in range(0, len(view), self.CHUNK):
            yield base64.b64encode(view[start:start + self.CHUNK])

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Base64Media):
            return self.prefix == other.prefix and self.data == other.data
        if isinstance(other, str):
            return self.text() == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Base64Media({self.prefix!r}, {len(self.data)} bytes)"


def part_base64(part: ContentPart, prefix: str = "") -> str | Base64Media:
    """A part's bytes as base64 for a JSON body: :class:`Base64Media` when it holds raw
    ``data``, else ``prefix`` + its ``data_b64`` text."""
    if part.data:
        return Base64Media(part.data, prefix)
    return prefix + part.data_b64


def json_default(value: Any) -> Any:
    """``json.dumps(default=…)`` for bodies holding :class:`Base64Media` (their whole text)."""
    if isinstance(value, Base64Media):
        return value.text()
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


class MediaBody:
    """An async byte stream of a JSON body with :class:`Base64Media` encoded as it is sent;
    re-iterable (a second send encodes again). ``length``: its exact size in bytes."""

    def __init__(self, pieces: list[bytes | Base64Media]) -> None:
        self.pieces = pieces
        self.length = sum(len(p) if isinstance(p, bytes) else p.encoded_length() for p in pieces)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for piece in self.pieces:
            if isinstance(piece, bytes):
                yield piece
            else:
                for chunk in piece.chunks():
                    yield chunk


def encode_json_body(body: Any) -> dict[str, Any]:
    """Keyword arguments for ``httpx.AsyncClient.build_request`` sending ``body`` as JSON the
    way httpx's ``json=`` does (UTF-8, compact separators, no NaN): ``{"json": body}`` when it
    holds no :class:`Base64Media`, else ``{"content": MediaBody, "headers": {Content-Type,
    Content-Length}}`` with the media streamed in base64 pieces (a fixed length, not chunked)."""
    token = _secrets.token_hex(8)
    found: list[Base64Media] = []

    def hook(value: Any) -> str:
        if isinstance(value, Base64Media):
            found.append(value)
            return f"@@media-{token}-{len(found) - 1}@@"
        raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")

    text = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=hook)
    if not found:
        return {"json": body}
    pieces: list[bytes | Base64Media] = []
    rest = text
    for index, media in enumerate(found):
        before, _, rest = rest.partition(f"@@media-{token}-{index}@@")
        pieces.extend([before.encode("utf-8"), media])
    pieces.append(rest.encode("utf-8"))
    stream = MediaBody(pieces)
    return {"content": stream, "headers": {"Content-Type": "application/json", "Content-Length": str(stream.length)}}


def tool_arguments_complete(arguments: str) -> bool:
    """Whether a tool call's assembled ``arguments`` text is usable as sent: blank (no
    arguments, replayed as ``{}``) or a JSON object. False for text cut off by ``max_tokens``
    (finish ``length``), other invalid JSON, a JSON value that is not an object, and JSON
    nested too deeply to parse. The runner flags a call for which this is False ("arguments
    incomplete") and offers no result form for it."""
    if not arguments.strip():
        return True
    try:
        return isinstance(json.loads(arguments), dict)
    except (ValueError, RecursionError):
        return False


def replay_arguments(arguments: str) -> str:
    """The ``arguments`` text sent back in history (every API style): the text unchanged when
    it is a JSON object; ``"{}"`` when blank (an empty string is not JSON and servers reject
    it); otherwise (cut off, invalid, or not an object) a JSON object that keeps what the model
    wrote: ``{"_incomplete_arguments": "<the text>"}``, never invalid JSON."""
    if not arguments.strip():
        return "{}"
    if tool_arguments_complete(arguments):
        return arguments
    return json.dumps({"_incomplete_arguments": arguments}, ensure_ascii=False)


@dataclass(frozen=True)
class ToolCall:
    """A complete tool call of an assistant message: ``arguments`` is the JSON text as
    received (possibly blank or cut off; adapters send :func:`replay_arguments` of it)."""

    id: str
    name: str
    arguments: str

    @property
    def arguments_complete(self) -> bool:
        """:func:`tool_arguments_complete` of ``arguments``."""
        return tool_arguments_complete(self.arguments)


@dataclass(frozen=True)
class ChatMessage:
    """One message of the history sent upstream.

    ``role``: system | user | assistant | tool. ``parts``: attachments besides the text
    (user). ``tool_calls``: what an assistant message asked for; ``tool_call_id``: which
    call a ``tool`` message answers. ``reasoning`` / ``reasoning_signature``: an assistant's
    prior thinking, sent back where the API requires it (Anthropic thinking blocks).
    ``redacted_thinking``: the ``data`` of each :class:`RedactedThinking` the assistant's turn
    produced, in order; ``anthropic_messages`` sends them back unchanged as
    ``{"type": "redacted_thinking", "data"}`` blocks after the thinking block (the API rejects
    a tool-result turn with thinking enabled whose thinking blocks are missing); other API
    styles have no such block and ignore them.
    """

    role: str
    content: str
    parts: tuple[ContentPart, ...] = ()
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str = ""
    name: str = ""
    reasoning: str = ""
    reasoning_signature: str = ""
    redacted_thinking: tuple[str, ...] = ()


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
class AnswerWasReasoning:
    """All answer text this stream emitted so far (every ``TextDelta`` since its
    ``ResponseStarted``) was reasoning.

    Sent when a closing ``</think>`` / ``</thinking>`` arrives in the answer without an opening
    tag (chat templates that open the tag in the prompt, so the model streams only the close).
    At most once per stream, only when answer text was emitted before the tag, and never when
    the stream already carried reasoning in a reasoning field (then the tag is literal text).
    The tag itself is never emitted; text between the last ``TextDelta`` and the tag follows
    as a ``ReasoningDelta``, the answer after the tag as ``TextDelta``.

    Runner: take the characters this stream appended to the answer (not a prefill or the
    answer a Continue started from), remove them from the answer and append them to the
    reasoning, then send the message again whole (a snapshot frame: the streamed answer
    shrank, so no delta can express it).
    """


@dataclass(frozen=True)
class ToolCallDelta:
    """A piece of a streamed tool call (assembled by index in the runner).

    ``index`` numbers the calls of one answer 0, 1, 2… as the adapter tells them apart: two
    calls streamed on the same upstream index with different ids get different indices.
    ``arguments`` pieces are concatenated; check the whole with
    :func:`tool_arguments_complete` when the stream ends (a call cut off by ``max_tokens`` is
    not valid JSON).
    """

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""


@dataclass(frozen=True)
class ServerToolUse:
    """Something the upstream ran itself (a server-side tool), to be shown as what the server
    did, never as a client tool call asking for a result.

    One event per finished block/item. ``block_type``: the Anthropic content block type
    (``server_tool_use``, ``web_search_tool_result``, ``web_fetch_tool_result``,
    ``code_execution_tool_result``, ``mcp_tool_use``, ``mcp_tool_result``, … any block other
    than text, thinking, redacted_thinking and tool_use) or the Responses output item type
    (``web_search_call``, ``file_search_call``, ``code_interpreter_call``,
    ``image_generation_call``, ``mcp_call``, ``mcp_list_tools``). ``id``: the block's ``id``
    (uses) or ``tool_use_id`` (results), "" if none. ``name``: the tool's name (for a result,
    the name of the use it answers when known). ``input_json``: the tool's input as JSON text
    ("" for results). ``result_summary``: one line of plain text about a result ("3 results:
    Title — https://…; …", "error: max_uses_exceeded"), "" for uses. Not sent back in history.
    """

    block_type: str
    name: str = ""
    id: str = ""
    input_json: str = ""
    result_summary: str = ""


@dataclass(frozen=True)
class RedactedThinking:
    """An Anthropic ``redacted_thinking`` block: ``data`` is opaque (encrypted reasoning) and
    kept byte-identical. Runner: show "Thinking (redacted)", store ``data`` in order, and put
    it in ``ChatMessage.redacted_thinking`` of this assistant message in later requests."""

    data: str


@dataclass(frozen=True)
class StreamWarning:
    """Something in the stream could not be used and was skipped; the stream goes on.

    ``code``: ``unparsable_event`` (an event whose data is not JSON, e.g. a chunk cut in half;
    the text it held is missing) or ``incomplete_event`` (the body ended inside an event).
    ``message``: for the user. ``raw_excerpt``: at most 300 characters of the raw data,
    secrets removed (the whole event is in the ``RawEvent`` just before). Runner: show a warning
    on the answer ("part of the answer may be missing"), keep the RawEvent for Inspect.
    """

    message: str
    raw_excerpt: str = ""
    code: str = "unparsable_event"


@dataclass(frozen=True)
class FinalText:
    """The upstream's own final copy of the answer differs from the text streamed.

    Sent where the protocol repeats the whole text at the end (Responses
    ``response.output_text.done`` and the ``output`` of ``response.completed`` /
    ``response.incomplete``), at most once, before ``Finish``. ``text`` is this stream's whole
    answer per that copy (inline reasoning tags removed as in the stream). Runner: replace the
    answer text this stream emitted (after any ``AnswerWasReasoning``; not the prefill) with
    ``text`` and send the message again whole; the upstream's copy wins.
    """

    text: str


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

    None means unknown, never a placeholder: Anthropic's ``message_start`` usage is provisional
    (its ``output_tokens`` is 0 or 1 before generation), so ``completion_tokens`` and
    ``total_tokens`` stay None until ``message_delta`` reports them; a stream stopped or cut
    before that has unknown completion tokens.

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
    ``omitted``: characters of the data not kept (cut at ``Limits.max_raw_event_chars``, or
    all of it once ``Limits.max_raw_chars`` were kept for this stream); 0 when whole.
    """

    event: str
    data: str
    omitted: int = 0


Event = (
    ResponseStarted
    | TextDelta
    | ReasoningDelta
    | AnswerWasReasoning
    | ReasoningSignature
    | RedactedThinking
    | ToolCallDelta
    | ServerToolUse
    | LogprobsDelta
    | ModelOutputError
    | StreamWarning
    | FinalText
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
    ``stream_error``, ``stream_cut``, ``limit_exceeded``, ``base_url_refused``,
    ``models_not_listed``, ``path_not_found``, ``bad_response``). ``type``: the upstream's
    error ``type`` when it sent one besides the code (OpenAI ``invalid_request_error`` next to
    code ``context_length_exceeded``; for Anthropic errors code and type are the same).
    ``retry_after_s``: seconds from ``Retry-After``. ``body_excerpt``: at most 2,000 characters
    of the raw body, secrets removed. ``message`` never contains a secret (the adapter scrubs
    it). Every string is made valid Unicode here (lone surrogates → U+FFFD), so the error can
    always be stored and shown.
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
        type: str | None = None,  # noqa: A002 - the upstream's field name
    ) -> None:
        message = fix_surrogates(message)
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = fix_surrogates(code) if code else code
        self.param = fix_surrogates(param) if param else param
        self.request_id = fix_surrogates(request_id) if request_id else request_id
        self.retry_after_s = retry_after_s
        self.body_excerpt = fix_surrogates(body_excerpt)
        self.type = fix_surrogates(type) if type else type

    def as_dict(self) -> dict[str, Any]:
        """JSON-safe form stored on the message row and shown to the user."""
        return {
            "message": self.message,
            "status": self.status,
            "code": self.code,
            "type": self.type,
            "param": self.param,
            "request_id": self.request_id,
            "retry_after_s": self.retry_after_s,
            # When Retry becomes worth pressing (epoch seconds): a page drawn later (a reload,
            # another tab) counts down what is left, not Retry-After again.
            "retry_at": round(time.time() + self.retry_after_s, 3) if self.retry_after_s else None,
            "body_excerpt": self.body_excerpt,
        }

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return (
            f"ProviderError(status={self.status!r}, code={self.code!r}, message={self.message!r})"
        )


REDACTED = "[REDACTED]"

_SURROGATE = re.compile("[\ud800-\udfff]")
_PAIR_OR_LONE = re.compile("[\ud800-\udbff][\udc00-\udfff]|[\ud800-\udfff]")


def _join_pair(match: re.Match[str]) -> str:
    pair = match.group()
    if len(pair) == 2:
        high, low = ord(pair[0]), ord(pair[1])
        return chr(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))
    return "\ufffd"


def fix_surrogates(text: str) -> str:
    """``text`` as valid Unicode: UTF-16 surrogate pairs (as ``json.loads`` makes them from
    ``"\\ud83d\\ude00"``) joined into their character, every lone surrogate replaced by one
    U+FFFD. Returns ``text`` itself when it holds no surrogate (the common case; cheap)."""
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    return _PAIR_OR_LONE.sub(_join_pair, text)


def fix_surrogates_deep(value: Any) -> Any:
    """:func:`fix_surrogates` applied to every string (keys too) inside dicts, lists, tuples
    and dataclass instances (e.g. ``Usage.raw``, ``LogprobsDelta.tokens``); other values are
    returned as they are. Returns an equal value when nothing needed fixing."""
    if isinstance(value, str):
        return fix_surrogates(value)
    if isinstance(value, dict):
        return {fix_surrogates_deep(k): fix_surrogates_deep(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(fix_surrogates_deep(v) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {}
        for f in dataclasses.fields(value):
            current = getattr(value, f.name)
            fixed = fix_surrogates_deep(current)
            if fixed != current:
                changes[f.name] = fixed
        return dataclasses.replace(value, **changes) if changes else value
    return value


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
