"""Every websocket frame the server sends, built in one place.

Frames are HTML for htmx 2's websocket extension: each top-level element carries
``hx-swap-oob``. The message partials live in ``templates/chat/message.html``; an assistant
message's DOM ids use its short key ``k`` (the first 10 hex digits of its UUID): head ``#h<k>``,
reasoning ``#r<k>``, answer ``#t<k>``, foot ``#f<k>``, queue line ``#q<k>``. Kinds:

- ``turn_started``: the user message and the assistant skeleton appended to ``#thread``.
- ``delta`` (hot path, ≤ 64 bytes of envelope): ``<x-d i=t<k> s=S e=E>`` with escaped raw text
  at code-point offsets S..E (computed here, never from the DOM); inside a message that also
  carries other elements (the final frame) the ``hx-swap-oob="beforeend:#t<k>"`` form instead.
- ``blocks``: ``<x-b i=t<k> u=U>`` (same two forms) with the rendered HTML of blocks
  that closed; the text up to offset U is now covered by rendered blocks, the rest is the open
  block the browser renders (static/chat/app.js). Deltas and blocks are applied by the page's
  script, never re-created.
- ``final`` of a streamed turn: the head and the foot (``data-final``) swapped by id, after the
  last blocks; the answer's blocks are not sent again. ``final_full``: the whole message (after
  a reload, from another process, or when the answer changed shape: structured output, moved
  reasoning).
- ``snapshot``: the whole message partial (live blocks + open text) replacing ``#m-<id>``.
- ``notice``, ``field_errors``, ``queue_position``, ``turn_refused``, ``thread``, ``sidebar``.

CR is sent as ``&#13;`` so the browser keeps it (the HTML parser folds a raw CR into LF).

May import: Django templates and utils.html, chat.rendering, chat.textsafety.
"""

from __future__ import annotations

import html
import math
import time
import uuid
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Any

from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from chat.rendering import render_blocks
from chat.textsafety import pretty_json

MESSAGE_TEMPLATE = "chat/message.html#message"


@lru_cache(maxsize=64)
def _url_pattern(name: str) -> tuple[str, str]:
    """The URL of route ``name`` around a placeholder id, reversed once (a ``{% url %}`` per
    button per frame cost more than the rest of the foot)."""
    marker = "00000000-0000-0000-0000-000000000000"
    url = reverse(name, args=[marker] if "conversation" not in name else [987654321])
    placeholder = marker if marker in url else "987654321"
    head, _, tail = url.partition(placeholder)
    return head, tail


def url_for(name: str, object_id: Any) -> str:
    """``reverse(name, args=[object_id])`` from a cached pattern."""
    head, tail = _url_pattern(name)
    return f"{head}{object_id}{tail}"


def key(message_id: uuid.UUID | str) -> str:
    """The short DOM key of a message: the first 10 hex digits of its UUID."""
    return (message_id.hex if isinstance(message_id, uuid.UUID) else str(message_id).replace("-", ""))[:10]


@dataclass
class MessageView:
    """What the message partial needs, from a row or from a live turn (no DB access).

    A live turn sets ``live_blocks`` (``{"text"|"reasoning": (html blocks, upto offset)}``):
    the blocks already rendered and sent; otherwise the blocks are rendered from the text.
    """

    id: uuid.UUID
    role: str
    content: str = ""
    reasoning: str = ""
    status: str = "complete"
    finish_reason: str = ""
    usage: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    error: dict[str, Any] = field(default_factory=dict)
    snapshot: dict[str, Any] = field(default_factory=dict)
    started_at: float | None = None  # epoch seconds, for the "waiting N s" counter
    sibling_index: int = 0
    sibling_count: int = 1
    turn_id: uuid.UUID | None = None
    prev_sibling_id: uuid.UUID | None = None
    next_sibling_id: uuid.UUID | None = None
    edited: bool = False
    prefill_len: int = 0
    conversation_id: int | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    tool_call_id: str = ""
    logprobs: list[dict[str, Any]] = field(default_factory=list)
    attachments: list[dict[str, str]] = field(default_factory=list)  # {id, kind, filename, url}
    queue_position: int = 0  # > 0 while the turn waits for an admission slot
    answered_calls: frozenset[str] = frozenset()  # tool calls whose result was sent
    replay_blocks: list[dict[str, Any]] = field(default_factory=list)
    live_blocks: dict[str, tuple[list[str], int]] | None = None
    blind: bool = False  # a blind comparison's answer before the vote: no figure that names the model

    @classmethod
    def from_row(cls, m: Any, *, sibling_index: int = 0, sibling_count: int = 1) -> MessageView:
        return cls(
            id=m.id, role=m.role, content=m.content, reasoning=m.reasoning, status=m.status,
            finish_reason=m.finish_reason, usage=m.usage or {}, metrics=m.metrics or {},
            error=m.error or {}, snapshot=m.settings_snapshot or {},
            started_at=m.created_at.timestamp() if m.created_at else None,
            sibling_index=getattr(m, "sibling_index", sibling_index),
            sibling_count=getattr(m, "sibling_count", sibling_count), turn_id=m.turn_id,
            prev_sibling_id=getattr(m, "prev_sibling_id", None), next_sibling_id=getattr(m, "next_sibling_id", None),
            edited=m.edited, prefill_len=m.prefill_len, conversation_id=m.conversation_id,
            tool_calls=m.tool_calls or [], tool_call_id=m.tool_call_id, logprobs=m.logprobs or [],
            replay_blocks=getattr(m, "replay_blocks", None) or [],
            attachments=[
                {"id": str(a.id), "kind": a.kind, "filename": a.filename, "url": a.url}
                for a in getattr(m, "prefetched_attachments", [])
            ],
        )

    @property
    def k(self) -> str:
        return key(self.id)

    @property
    def retry_wait_s(self) -> float:
        """Seconds until Retry is worth pressing after a rate limit (``Retry-After``): what is
        left of it since the error (``error.retry_at``), 0 once passed; rows from before
        ``retry_at`` was stored count the whole ``retry_after_s``."""
        at, after = self.error.get("retry_at"), self.error.get("retry_after_s")
        if isinstance(at, (int, float)):
            return max(0.0, float(at) - time.time())
        return float(after) if isinstance(after, (int, float)) and after > 0 else 0.0

    @cached_property
    def urls(self) -> dict[str, str]:
        """The message's links (raw text, editor, Inspect, Fork of its conversation)."""
        return {
            "raw": url_for("chat:message_raw", self.id), "edit": url_for("chat:message_edit_form", self.id),
            "inspect": url_for("chat:message_inspect", self.id),
            "code": url_for("chat:message_code", self.id),
            "fork": url_for("chat:conversation_fork", self.conversation_id) if self.conversation_id else "",
        }

    @property
    def sibling_number(self) -> int:
        return self.sibling_index + 1

    @property
    def dom_id(self) -> str:
        return f"m-{self.id}"

    @property
    def is_streaming(self) -> bool:
        return self.status == "streaming"

    def _blocks(self, kind: str) -> tuple[tuple[str, ...] | list[str], int]:
        if self.live_blocks is not None and kind in self.live_blocks:
            return self.live_blocks[kind]
        text = self.content if kind == "text" else self.reasoning
        if self.is_streaming:  # a row mid-turn without its live state: all of it is open
            return (), 0
        return render_blocks(text), len(text)

    @property
    def content_blocks(self) -> tuple[str, ...] | list[str]:
        return self._blocks("text")[0] if self.role != "user" else ()

    @property
    def content_upto(self) -> int:
        return self._blocks("text")[1]

    @property
    def content_open(self) -> str:
        return self.content[self.content_upto:]

    @property
    def content_closed(self) -> str:
        """While streaming: the raw text its rendered blocks cover (the page keeps the whole raw
        text for Copy and checks); "" otherwise."""
        return self.content[: self.content_upto] if self.is_streaming else ""

    @property
    def reasoning_closed(self) -> str:
        return self.reasoning[: self.reasoning_upto] if self.is_streaming else ""

    @property
    def reasoning_blocks(self) -> tuple[str, ...] | list[str]:
        return self._blocks("reasoning")[0]

    @property
    def reasoning_upto(self) -> int:
        return self._blocks("reasoning")[1]

    @property
    def reasoning_open(self) -> str:
        return self.reasoning[self.reasoning_upto:]

    @property
    def content_len(self) -> int:
        return len(self.content)

    @property
    def reasoning_len(self) -> int:
        return len(self.reasoning)

    @property
    def can_continue(self) -> bool:
        """Continue resumes an answer cut by ``length``, a stop, an interruption or a broken
        stream (whenever the hint under it says "Continue")."""
        if self.role != "assistant" or self.is_streaming:
            return False
        return self.finish_reason == "length" or self.status in ("stopped", "interrupted") or (
            self.status == "error" and str(self.error.get("code")) in ("stream_cut", "stream_error", "idle_timeout",
                                                                       "turn_timeout", "limit_exceeded")
        ) and bool(self.content or self.reasoning)

    @property
    def empty_answer_note(self) -> str:
        """What to say when a finished answer has no text to show."""
        if self.role != "assistant" or self.is_streaming or self.content.strip() or self.tool_calls or self.error:
            return ""
        if self.status == "stopped":
            return ""
        reason = self.finish_reason or "unknown"
        if self.finish_reason == "length":
            if self.reasoning:
                return ("The model used the whole token budget on reasoning before it wrote an answer: "
                        "raise max tokens, or Continue.")
            return "The answer hit max tokens before any text: raise max tokens, or Continue."
        return f"The model returned no text (finish reason: {reason})."

    @property
    def tool_calls_pretty(self) -> list[dict[str, Any]]:
        """The client tool calls with their arguments pretty-printed when they are JSON (never
        raises); ``incomplete`` ones (cut off by max tokens) get no result form."""
        out = []
        for c in self.tool_calls:
            if c.get("server"):
                continue
            args = str(c.get("arguments", ""))
            out.append({**c, "pretty": pretty_json(args) or args})
        return out

    @property
    def server_tools(self) -> list[dict[str, Any]]:
        """What the upstream ran itself (Anthropic server tools, Responses built-in tools),
        shown as what the server did; its input pretty-printed."""
        return [{**c, "pretty": pretty_json(str(c.get("input", ""))) or str(c.get("input", ""))}
                for c in self.tool_calls if c.get("server")]

    @property
    def redacted_thinking(self) -> int:
        """How many redacted thinking blocks the answer carries (kept, never shown)."""
        return sum(1 for b in self.replay_blocks if b.get("type") == "redacted_thinking")

    @property
    def warnings(self) -> list[dict[str, str]]:
        """Problems met while streaming (an unreadable event: part of the answer may be missing)."""
        return list(self.metrics.get("warnings") or [])

    @property
    def schema_check(self) -> dict[str, Any] | None:
        return self.metrics.get("schema_check")

    @property
    def json_pretty(self) -> str:
        """The answer as formatted JSON when it parses (structured output), else ""."""
        if not self.schema_check or self.is_streaming:
            return ""
        return pretty_json(self.content)

    @property
    def model_output_error(self) -> dict[str, Any] | None:
        return self.metrics.get("model_output_error")

    @property
    def error_hint(self) -> str:
        return error_hint(self.error) if self.error else ""

    @property
    def logprob_tokens(self) -> list[dict[str, Any]]:
        """Tokens with probability (0–1), a tint class and the top alternatives, for the
        probability view (log probabilities clamped: an upstream's odd value never raises)."""
        out = []
        for t in self.logprobs:
            p = _prob(t.get("logprob"))
            tint = "p-high" if p >= 0.9 else "p-mid" if p >= 0.5 else "p-low" if p >= 0.2 else "p-vlow"
            alts = ", ".join(f"{a[0]!r} {_prob(a[1]):.1%}" for a in t.get("top", []) if len(a) == 2)
            out.append({"token": t.get("token", ""), "p": p, "tint": tint, "title": f"{p:.1%}" + (f" · top: {alts}" if alts else "")})
        return out

    @property
    def metric_items(self) -> list[tuple[str, str, str]]:
        items = metric_items(self.metrics, self.usage, self.finish_reason)
        if self.blind:  # price, reasoning/cache support and the router's pick give the model away
            items = [it for it in items if it[0] not in BLIND_HIDDEN_METRICS]
        return items


def _prob(logprob: Any) -> float:
    try:
        return math.exp(min(0.0, max(-1000.0, float(logprob))))
    except (TypeError, ValueError, OverflowError):
        return 0.0


def thread_views(thread: list[Any], live: Any = None) -> list[MessageView]:
    """Views of the rows of a branch; a running turn's live state (``live(message_id)`` →
    MessageView or None, e.g. ``chat.turns.registry.live_view``) wins over its row."""
    views: list[MessageView] = []
    for i, m in enumerate(thread):
        view = MessageView.from_row(m)
        if m.role == "assistant" and m.tool_calls:
            answered = set()
            for later in thread[i + 1:]:
                if later.role != "tool":
                    break
                answered.add(later.tool_call_id)
            view.answered_calls = frozenset(answered)
        if live is not None and m.status == "streaming":
            now = live(m.id)
            if now is not None:
                now.attachments = view.attachments
                now.sibling_index, now.sibling_count = view.sibling_index, view.sibling_count
                now.prev_sibling_id, now.next_sibling_id = view.prev_sibling_id, view.next_sibling_id
                view = now
        views.append(view)
    return views


def error_hint(error: dict[str, Any]) -> str:
    """What to do about an upstream error, in one sentence (shown under the error)."""
    status = error.get("status")
    code = str(error.get("code") or "").lower()
    message = str(error.get("message") or "").lower()
    if any(k in message or k in code for k in ("context length", "context window", "maximum context", "context_length", "too many tokens", "prompt is too long")):
        return "The conversation is longer than the model's context window: shorten it, start a new one, or pick a model with a longer context."
    if status in (401, 403) or "auth" in code or "api_key" in code or "permission" in code:
        return "Check the endpoint's API key (Endpoints → Edit) and that it may use this model."
    if status == 402 or "credit" in message or "insufficient" in code:
        return "Add credits to your account with this provider, then retry."
    if code == "path_not_found":
        return ("The endpoint has no such path: check the base URL (it usually ends in /v1) and the API style "
                "on the Endpoints page.")
    if code == "models_not_listed":
        return "The server is reachable but does not list its models: type the model id."
    if code == "limit_exceeded":
        return "A size limit was reached: the text so far is kept. Continue, or ask for a shorter answer."
    if status == 404 or "not_found" in code or "model_not_found" in code:
        return "Pick another model: Test connection on the Endpoints page lists what this endpoint serves."
    if status == 413 or "too_large" in code:
        return "The request is too large: shorten the conversation or remove attachments."
    if status == 429 or "rate" in code:
        wait = error.get("retry_after_s")
        if wait:
            return f"Rate limited: wait {max(1, math.ceil(float(wait)))} s, then retry."
        return "Rate limited: wait a moment, then retry."
    if status in (408, 504) or code == "timeout":
        return "The upstream timed out: retry, or lower max tokens."
    if code == "connection_error":
        return "Could not reach the endpoint: check the base URL and that the server is running."
    if code in ("stream_cut", "stream_error"):
        return "The stream broke off: the text so far is kept; Retry, or Continue from it."
    if code == "base_url_refused":
        return "This base URL is not allowed: change it on the Endpoints page."
    if code == "interrupted":
        return "Retry runs this turn again."
    if status in (500, 502, 503, 529) or "overloaded" in code:
        return "The provider is having trouble: retry in a moment or pick another model."
    if status == 400 and error.get("param"):
        return f"Check the parameter {error['param']} in the settings."
    if status == 400:
        return "The endpoint refused the request: check the parameters and the model's limits."
    return ""


def _fmt_ms(v: Any) -> str:
    if v is None:
        return "—"
    return f"{v / 1000:.2f} s" if v >= 10_000 else f"{v:.0f} ms"


def _fmt(v: Any, suffix: str = "") -> str:
    return "—" if v is None else f"{v}{suffix}"


#: Metrics left out of a blind answer before the vote (they tell models apart by price, by
#: support for reasoning or caching, or by name): see :attr:`MessageView.blind`.
BLIND_HIDDEN_METRICS = frozenset({"reasoning", "cached", "cost", "upstream TTFT", "upstream tok/s", "upstream total",
                                  "routed to", "routing"})


def metric_items(metrics: dict[str, Any], usage: dict[str, Any], finish_reason: str) -> list[tuple[str, str, str]]:
    """(label, value, tooltip) rows of the metrics strip; "—" where not measurable."""
    if not metrics and not usage:
        return []
    items = [
        ("TTFT", _fmt_ms(metrics.get("ttft_ms")), "Time to first token (reasoning or answer), measured by the playground"),
        ("TTFAT", _fmt_ms(metrics.get("ttfat_ms")), "Time to first answer token"),
        ("tok/s", _fmt(metrics.get("tokens_per_sec")), "Completion tokens per second between first and last token"),
        ("total", _fmt_ms(metrics.get("total_ms")), "Request sent to last byte"),
        ("prompt", _fmt(usage.get("prompt_tokens")), "Prompt tokens (usage)"),
        ("completion", _fmt(usage.get("completion_tokens")), "Completion tokens (usage)"),
        ("reasoning", _fmt(usage.get("reasoning_tokens")), "Reasoning tokens (usage)"),
        ("cached", _fmt(usage.get("cached_tokens")), "Cached prompt tokens (usage)"),
    ]
    cost = metrics.get("cost_usd")
    items.append(("cost", "—" if cost is None else f"${cost:.6f}", f"USD ({metrics.get('cost_source') or 'unknown price'})"))
    items.append(("finish", finish_reason or "—", "Finish reason"))
    if metrics.get("upstream_ttft_ms") is not None:
        items.append(("upstream TTFT", _fmt_ms(metrics["upstream_ttft_ms"]), "time_to_first_token reported by the endpoint"))
    if metrics.get("upstream_tokens_per_sec") is not None:
        items.append(("upstream tok/s", f"{metrics['upstream_tokens_per_sec']:.1f}", "completion_tokens_per_sec reported by the endpoint"))
    if metrics.get("upstream_total_ms") is not None:
        items.append(("upstream total", _fmt_ms(metrics["upstream_total_ms"]), "total_latency reported by the endpoint"))
    if metrics.get("routed_model"):
        items.append(("routed to", str(metrics["routed_model"]), "Model the router picked"))
    if metrics.get("routing_latency_ms") is not None:
        items.append(("routing", _fmt_ms(metrics["routing_latency_ms"]), "Routing latency reported by the router"))
    return items


def escape_text(text: str) -> str:
    """HTML-escape streamed text (``&``, ``<``, ``>``); CR as ``&#13;`` so the DOM keeps it."""
    return html.escape(text, quote=False).replace("\r", "&#13;")


def render_message(view: MessageView, *, oob: bool | str = False) -> str:
    """The message partial (page load, htmx swap and websocket frames share it).

    ``oob``: False (in-page), True (replace ``#m-<id>``) or an htmx oob value string.
    """
    oob_value = "true" if oob is True else (oob or "")
    return render_to_string(MESSAGE_TEMPLATE, {"m": view, "oob": oob_value})


def turn_started(user_view: MessageView | None, assistant_views: list[MessageView]) -> str:
    """Append the new user message (if any) and the answers' skeletons to ``#thread``."""
    inner = (render_message(user_view) if user_view else "") + "".join(render_message(v) for v in assistant_views)
    return format_html('<div hx-swap-oob="beforeend:#thread">{}</div>', SafeString(inner))


def snapshot(view: MessageView) -> str:
    """The whole message as it stands (live blocks + open text), replacing ``#m-<id>``."""
    return render_message(view, oob=True)


def final_full(view: MessageView) -> str:
    """The whole finished message replacing ``#m-<id>`` (its foot marked ``data-final``)."""
    return render_to_string(MESSAGE_TEMPLATE, {"m": view, "oob": "true", "final": True})


def final(view: MessageView) -> str:
    """The end of a streamed turn: its head and foot swapped by id (the answer's blocks stay);
    the whole message when the answer changed shape (structured output shown as JSON)."""
    if view.json_pretty:
        return final_full(view)
    ctx = {"m": view, "oob": True, "final": True}
    return (render_to_string("chat/message.html#msg-head", ctx)
            + render_to_string("chat/message.html#msg-foot", ctx))


def delta(k: str, kind: str, start: int, text: str, *, short: bool = False) -> str:
    """Append ``text`` (kind "text" | "reasoning") at code-point offset ``start`` of message
    ``k`` (see :func:`key`). ``short``: the hot-path form ``<x-d i=t<k> s=S e=E>`` (an envelope
    of 33–41 bytes) for a websocket message made only of deltas and blocks, which the page's
    script applies itself; otherwise the ``hx-swap-oob`` form (46–56 bytes) that htmx routes
    when the message also carries other elements (the final frame)."""
    if short:
        return format_html(
            "<x-d i={}{} s={} e={}>{}</x-d>",
            "t" if kind == "text" else "r", k, start, start + len(text), SafeString(escape_text(text)),
        )
    return format_html(
        '<x-d hx-swap-oob="beforeend:#{}{}" s={} e={}>{}</x-d>',
        "t" if kind == "text" else "r", k, start, start + len(text), SafeString(escape_text(text)),
    )


def blocks(k: str, kind: str, rendered: list[str], upto: int, *, short: bool = False) -> str:
    """Rendered blocks (already sanitized HTML) appended before the open block of message
    ``k``; the text up to offset ``upto`` is now covered by them. ``short``: as for
    :func:`delta`."""
    if short:
        return format_html(
            "<x-b i={}{} u={}>{}</x-b>",
            "t" if kind == "text" else "r", k, upto, SafeString("".join(rendered)),
        )
    return format_html(
        '<x-b hx-swap-oob="beforeend:#{}{}" u={}>{}</x-b>',
        "t" if kind == "text" else "r", k, upto, SafeString("".join(rendered)),
    )


def queue_position(message_id: uuid.UUID, position: int) -> str:
    """The waiting line of a queued answer: its position in the admission queue."""
    return render_to_string("chat/frames.html#queue", {"k": key(message_id), "position": position})


def turn_refused(message_id: uuid.UUID, message: str) -> str:
    """A turn whose rows could not be written: remove its skeleton and say why."""
    return render_to_string("chat/frames.html#refused", {"mid": message_id, "message": message})


def final_fallback(view: MessageView) -> str:
    """A minimal final frame when the message partial could not be rendered: the answer as
    escaped text, its status and error, and Retry."""
    return render_to_string("chat/frames.html#fallback", {"m": view})


def notice(text: str, *, level: str = "info") -> str:
    return format_html(
        '<div id="notice" hx-swap-oob="true" class="notice notice-{}" role="{}">{}</div>',
        level, "alert" if level == "error" else "status", text,
    )


def replace(old_message_id: uuid.UUID, view: MessageView) -> str:
    """Put a new answer (a retry) where ``old_message_id`` was shown."""
    return render_message(view, oob=f"outerHTML:#m-{old_message_id}")


def sidebar(conversations: list[Any], *, current_id: int | None) -> str:
    """The sidebar's conversation list (after a title appears or changes)."""
    return render_to_string(
        "chat/conversation.html#sidebar-list",
        {"sidebar": conversations, "conversation": {"pk": current_id} if current_id else None, "oob": True},
    )


def turn_finished_elsewhere(conversation_id: int, title: str, status: str) -> str:
    """Tell a user's other tabs that an answer of theirs finished (with a link to it)."""
    word = {"complete": "finished", "stopped": "was stopped", "error": "failed"}.get(status, status)
    return format_html(
        '<div id="notice" hx-swap-oob="true" class="notice notice-info" role="status">'
        'An answer in <a href="/c/{}/">{}</a> {}.</div>', conversation_id, title or "a conversation", word,
    )


def thread(views: list[MessageView]) -> str:
    """The whole active branch, replacing ``#thread`` (after a branch switch or an edit)."""
    inner = "".join(render_message(v) for v in views)
    return format_html('<div id="thread" class="thread" hx-swap-oob="true">{}</div>', SafeString(inner))


def field_errors(errors: dict[str, list[str]], fields: tuple[str, ...]) -> str:
    """One ``#err-<field>`` span per settings field: its messages, or empty to clear."""
    return format_html_join(
        "", '<span class="field-error" id="err-{}" hx-swap-oob="true">{}</span>',
        ((f, " ".join(errors.get(f, []))) for f in fields),
    )
