"""Rows of the playground: endpoints, conversations, lanes, messages, site settings.

A conversation has one or more lanes (a plain chat is one lane; comparisons add more); messages
form a tree through ``parent`` (branches come later) and belong to a lane. An assistant message
keeps everything needed to show its turn again: content, reasoning, usage (raw and normalized),
metrics, finish reason, status, error and the settings snapshot it was made with.

May import: Django, chat.crypto, chat.process.
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone

from chat import crypto, process
from chat.teams.models import Budget, Membership, Team  # noqa: F401  (rows of teams)

SIMULATOR_BASE_URL = "sim://builtin/v1"


class ApiStyle(models.TextChoices):
    OPENAI_CHAT = "openai_chat", "OpenAI chat completions"
    ANTHROPIC_MESSAGES = "anthropic_messages", "Anthropic messages"
    OPENAI_RESPONSES = "openai_responses", "OpenAI responses"


class SiteSettings(models.Model):
    """Singleton (pk=1) of instance-wide switches the admin controls."""

    open_signup = models.BooleanField(default=False)
    # "Anyone with the link" share links: True allowed, False forbidden, None (never saved) the
    # server default PLAYGROUND_PUBLIC_SHARE_LINKS (chat.sharing.services.public_links_allowed).
    public_share_links = models.BooleanField(null=True, blank=True, default=None)

    def __str__(self) -> str:
        return "Site settings"

    @classmethod
    def load(cls) -> SiteSettings:
        """The row, or the defaults unsaved (reading never writes: pages are GETs)."""
        return cls.objects.filter(pk=1).first() or cls(pk=1)


class Endpoint(models.Model):
    """An upstream the user can chat with. Secrets are encrypted (``chat.crypto``) and write-only.

    ``base_url`` is an http(s) URL or the symbolic ``sim://builtin/v1`` of the in-process
    simulator, resolved to the running server at call time.
    """

    # Exactly one of owner (a personal endpoint) and team (a shared one) is set.
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="endpoints"
    )
    team = models.ForeignKey(Team, null=True, blank=True, on_delete=models.CASCADE, related_name="endpoints")
    name = models.CharField(max_length=100)
    base_url = models.CharField(max_length=500)
    api_style = models.CharField(max_length=32, choices=ApiStyle.choices, default=ApiStyle.OPENAI_CHAT)
    api_key_encrypted = models.TextField(blank=True, default="")
    api_key_hint = models.CharField(max_length=8, blank=True, default="")
    extra_headers_encrypted = models.TextField(blank=True, default="")  # JSON object, encrypted
    extra_header_names = models.JSONField(default=list, blank=True)  # names only, for display
    stream_options = models.BooleanField(
        default=True, help_text="Send stream_options.include_usage (switch off for servers that reject it)."
    )
    default_model = models.CharField(max_length=200, blank=True, default="")
    models_cache = models.JSONField(default=list, blank=True)  # list of ModelInfo dicts
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name", "id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(owner__isnull=False, team__isnull=True)
                | models.Q(owner__isnull=True, team__isnull=False),
                name="endpoint_owner_xor_team",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        # Names only: never the key, its hint or header values (debug pages and logs print reprs).
        return f"<Endpoint {self.pk}: {self.name!r} {self.api_style} {self.base_url!r}>"

    @property
    def is_simulator(self) -> bool:
        return self.base_url.startswith("sim://")

    def set_api_key(self, key: str) -> None:
        self.api_key_encrypted = crypto.encrypt(key)
        self.api_key_hint = crypto.hint(key)

    def get_api_key(self) -> str:
        """The decrypted key. A ``sim://`` endpoint gets the per-install simulator key
        (``settings.PLAYGROUND_SIMULATOR_KEY``), which the in-process simulator requires from
        callers without a session; it is never stored on the row."""
        if self.is_simulator:
            return settings.PLAYGROUND_SIMULATOR_KEY
        return crypto.decrypt(self.api_key_encrypted)

    def set_extra_headers(self, headers: dict[str, str]) -> None:
        import json

        self.extra_headers_encrypted = crypto.encrypt(json.dumps(headers)) if headers else ""
        self.extra_header_names = sorted(headers)

    def get_extra_headers(self) -> dict[str, str]:
        import json

        raw = crypto.decrypt(self.extra_headers_encrypted)
        return json.loads(raw) if raw else {}

    def settings_snapshot(self, model: str, system_prompt: str, params: dict[str, Any]) -> dict[str, Any]:
        """What an answer keeps of the settings it was made with (shown under it)."""
        return {
            "endpoint_id": self.pk, "endpoint_name": self.name, "api_style": self.api_style, "team_id": self.team_id,
            "base_url": self.base_url, "model": model, "system_prompt": system_prompt, "params": params,
        }


class Attachment(models.Model):
    """An image or audio file uploaded over HTTP and referenced by id from a websocket send.

    The bytes live in the row (bounded by ``PLAYGROUND_MAX_ATTACHMENT_BYTES``); ``message`` is
    set when the message that carries it is written.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="attachments")
    message = models.ForeignKey("Message", null=True, blank=True, on_delete=models.SET_NULL, related_name="attachments")
    kind = models.CharField(max_length=8)  # image | audio
    media_type = models.CharField(max_length=100)
    filename = models.CharField(max_length=255, blank=True, default="")
    url = models.URLField(max_length=2000, blank=True, default="")  # an image URL instead of bytes
    data = models.BinaryField(blank=True, default=b"")
    size = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.filename or self.url or str(self.id)

    def __repr__(self) -> str:
        # Never the bytes (a debug page or log line would print megabytes).
        return f"<Attachment {self.id}: {self.kind} {self.media_type} {self.size} bytes>"


class Conversation(models.Model):
    """A chat owned by one user, with its current settings (endpoint, model, system prompt, params)."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="conversations")
    title = models.CharField(max_length=200, blank=True, default="")
    endpoint = models.ForeignKey(Endpoint, null=True, blank=True, on_delete=models.SET_NULL)
    model = models.CharField(max_length=200, blank=True, default="")
    system_prompt = models.TextField(blank=True, default="")
    params = models.JSONField(default=dict, blank=True)
    # The message the view follows: the thread is root → current_leaf, then newest children.
    current_leaf = models.ForeignKey(
        "Message", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # "chat" (one lane) or "compare" (2–6 lanes side by side; chat.compare). ``blind``: a
    # comparison whose lanes show as A, B, … until the user votes.
    kind = models.CharField(max_length=16, default="chat", db_index=True)
    blind = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at", "-id"]
        indexes = [models.Index(fields=["owner", "-updated_at"])]

    def __str__(self) -> str:
        return self.title or f"Conversation {self.pk}"


class Lane(models.Model):
    """One column of answers in a conversation (a plain chat has exactly one, position 0)."""

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="lanes")
    position = models.PositiveSmallIntegerField(default=0)
    endpoint = models.ForeignKey(Endpoint, null=True, blank=True, on_delete=models.SET_NULL)
    model = models.CharField(max_length=200, blank=True, default="")
    # A comparison's lane settings (a plain chat keeps them on the conversation).
    label = models.CharField(max_length=60, blank=True, default="")
    system_prompt = models.TextField(blank=True, default="")
    params = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["position", "id"]
        constraints = [models.UniqueConstraint(fields=["conversation", "position"], name="lane_position_unique")]

    def __str__(self) -> str:
        return f"lane {self.position} of {self.conversation_id}"


class MessageStatus(models.TextChoices):
    STREAMING = "streaming"
    COMPLETE = "complete"
    STOPPED = "stopped"
    ERROR = "error"
    INTERRUPTED = "interrupted"


#: Columns the usage indexes carry after (owner, day), so usage sums never read the table.
USAGE_COVER = (
    "usage_endpoint", "usage_model", "usage_user", "usage_team", "usage_prompt", "usage_completion",
    "usage_reasoning", "usage_cached", "usage_cost_usd", "usage_ttft_ms", "usage_tokens_per_sec",
)


class Message(models.Model):
    """A user or assistant message. Assistant rows carry the turn's results.

    ``id`` is a UUID made in Python, so a turn's user and assistant rows go in one INSERT.
    ``turn_id``: client-made UUID of the send (unique per role within a turn); ``owner_process``
    and ``heartbeat_at`` say which process is streaming it and when it last saved a partial.
    ``usage``: normalized token counts; ``usage_raw``: the upstream's usage object as received;
    ``metrics``: ttft_ms, ttfat_ms, total_ms, tokens_per_sec, cost_usd, upstream figures.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="messages")
    lane = models.ForeignKey(Lane, null=True, blank=True, on_delete=models.CASCADE, related_name="messages")
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.CASCADE, related_name="children")
    role = models.CharField(max_length=16)
    turn_id = models.UUIDField(default=uuid.uuid4, db_index=True)
    content = models.TextField(blank=True, default="")
    reasoning = models.TextField(blank=True, default="")
    status = models.CharField(max_length=16, choices=MessageStatus.choices, default=MessageStatus.COMPLETE)
    finish_reason = models.CharField(max_length=32, blank=True, default="")
    usage = models.JSONField(default=dict, blank=True)
    usage_raw = models.JSONField(default=dict, blank=True)
    metrics = models.JSONField(default=dict, blank=True)
    error = models.JSONField(default=dict, blank=True)
    settings_snapshot = models.JSONField(default=dict, blank=True)
    inspect = models.JSONField(default=dict, blank=True)  # request sent (redacted), raw events
    edited = models.BooleanField(default=False)  # content changed by the user after the fact
    tool_calls = models.JSONField(default=list, blank=True)  # [{id, name, arguments}] of an answer
    tool_call_id = models.CharField(max_length=200, blank=True, default="")  # role "tool": which call
    reasoning_signature = models.TextField(blank=True, default="")  # Anthropic thinking signature
    # Dialect blocks sent back unchanged in later requests: [{"type": "redacted_thinking", "data"}].
    replay_blocks = models.JSONField(default=list, blank=True)
    logprobs = models.JSONField(default=list, blank=True)  # [{token, logprob, top: [[t, lp], …]}]
    prefill_len = models.PositiveIntegerField(default=0)  # leading chars the user wrote (prefill/continue)
    # A comparison's repeat run: 0 = the lane's answer (its history), 1..N-1 = extra runs of the
    # same prompt, measured but never part of the lane's history.
    run = models.PositiveSmallIntegerField(default=0)
    # The prompt version a turn came from (set in the turn's INSERT; chat.prompts).
    prompt_version = models.ForeignKey(
        "chat.PromptVersion", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    owner_process = models.CharField(max_length=64, blank=True, default="")
    owner_channel = models.CharField(max_length=120, blank=True, default="")  # channel layer name
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    # Not auto_now_add: turn_start sets it so a user message and its answer order correctly
    # inside one multi-row INSERT.
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)
    # Usage columns of an answer, set in the INSERT that starts its turn (Message.new_answer; a
    # fork's copies leave them empty, so usage counts each turn once): who ran it, on which
    # endpoint (and its team) and model, on which UTC day. Indexed for the usage page and budgets.
    usage_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+", db_index=False
    )
    usage_endpoint = models.ForeignKey(
        Endpoint, null=True, blank=True, on_delete=models.SET_NULL, related_name="+", db_index=False
    )
    usage_team = models.ForeignKey(Team, null=True, blank=True, on_delete=models.SET_NULL, related_name="+", db_index=False)
    usage_model = models.CharField(max_length=200, blank=True, default="")
    usage_day = models.DateField(null=True, blank=True)
    # The figures of a finished answer as plain numbers (copied from ``usage``/``metrics`` in the
    # same UPDATE that writes them, :meth:`usage_figures`), so usage sums need no JSON parsing.
    usage_prompt = models.PositiveIntegerField(null=True, blank=True)
    usage_completion = models.PositiveIntegerField(null=True, blank=True)
    usage_reasoning = models.PositiveIntegerField(null=True, blank=True)
    usage_cached = models.PositiveIntegerField(null=True, blank=True)
    usage_cost_usd = models.FloatField(null=True, blank=True)
    usage_ttft_ms = models.FloatField(null=True, blank=True)
    usage_tokens_per_sec = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            # A send queued while the socket was down must never start two turns.
            models.UniqueConstraint(
                fields=["turn_id"], condition=models.Q(role="user"), name="message_user_turn_unique"
            ),
            models.UniqueConstraint(
                fields=["turn_id", "lane"], condition=models.Q(role="assistant"),
                name="message_assistant_turn_lane_unique",
            ),
        ]
        indexes = [
            models.Index(fields=["status", "heartbeat_at"]),
            # The usage page and budgets read only these indexes (they cover every column the
            # aggregates use), for one user or one team over a range of days; answers only.
            models.Index(fields=["usage_user", "usage_day", *(c for c in USAGE_COVER if c != "usage_user")], name="message_usage_user_day",
                         condition=models.Q(usage_day__isnull=False)),
            models.Index(fields=["usage_team", "usage_day", *(c for c in USAGE_COVER if c != "usage_team")], name="message_usage_team_day",
                         condition=models.Q(usage_day__isnull=False)),
        ]

    def __str__(self) -> str:
        return f"{self.role} #{self.pk}"

    @staticmethod
    def usage_figures(usage: dict[str, Any] | None, metrics: dict[str, Any] | None) -> dict[str, Any]:
        """The ``usage_*`` number columns of a finished answer from its normalized ``usage``
        (token counts) and ``metrics`` (``cost_usd``, ``ttft_ms``, ``tokens_per_sec``); None
        for a figure that is missing or not a number."""
        usage, metrics = usage or {}, metrics or {}

        def num(d: dict[str, Any], k: str, cast: Any) -> Any:
            v = d.get(k)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v or v < 0:
                return None
            return cast(v)

        return {
            "usage_prompt": num(usage, "prompt_tokens", int), "usage_completion": num(usage, "completion_tokens", int),
            "usage_reasoning": num(usage, "reasoning_tokens", int), "usage_cached": num(usage, "cached_tokens", int),
            "usage_cost_usd": num(metrics, "cost_usd", float), "usage_ttft_ms": num(metrics, "ttft_ms", float),
            "usage_tokens_per_sec": num(metrics, "tokens_per_sec", float),
        }

    # -- unsaved rows of a turn (UUID keys made here, so a turn's rows go in one INSERT) ---------
    @classmethod
    def new_user(cls, *, conversation: Conversation, parent_id: Any, turn_id: Any, content: str, created_at: Any) -> Message:
        """An unsaved user message."""
        return cls(
            id=uuid.uuid4(), conversation=conversation, lane=None, parent_id=parent_id, role="user",
            turn_id=turn_id, content=content, status=MessageStatus.COMPLETE, created_at=created_at,
        )

    @classmethod
    def new_tool(
        cls, *, conversation: Conversation, parent_id: Any, turn_id: Any, tool_call_id: str, content: str, created_at: Any
    ) -> Message:
        """An unsaved ``tool`` message: the user's result for tool call ``tool_call_id``."""
        return cls(
            id=uuid.uuid4(), conversation=conversation, parent_id=parent_id, role="tool", turn_id=turn_id,
            content=content, tool_call_id=tool_call_id, status=MessageStatus.COMPLETE, created_at=created_at,
        )

    @classmethod
    def new_answer(
        cls, *, conversation: Conversation, lane_id: int | None, parent_id: Any, turn_id: Any,
        snapshot: dict[str, Any], prefill: str = "", created_at: Any = None,
    ) -> Message:
        """An unsaved streaming answer owned by this process (``owner_process``,
        ``owner_channel``, heartbeat now); ``prefill`` starts its text."""
        now = created_at or timezone.now()
        return cls(
            id=uuid.uuid4(), conversation=conversation, lane_id=lane_id, parent_id=parent_id, role="assistant",
            turn_id=turn_id, content=prefill, prefill_len=len(prefill), status=MessageStatus.STREAMING,
            settings_snapshot=snapshot, owner_process=process.PROCESS_ID,
            owner_channel=process.identity.channel_name, heartbeat_at=now, created_at=now,
            usage_user_id=conversation.owner_id, usage_endpoint_id=snapshot.get("endpoint_id"),
            usage_team_id=snapshot.get("team_id"), usage_model=str(snapshot.get("model") or "")[:200],
            usage_day=now.astimezone(dt.UTC).date(),
        )


from chat.compare.models import Vote  # noqa: E402,F401  (comparison votes; chat.compare)
from chat.modes.models import ModeRun  # noqa: E402,F401 - issue 14 modes (own module)
from chat.prompts.models import (  # noqa: E402,F401
    ApiToken,
    Prompt,
    PromptLabel,
    PromptLabelMove,
    PromptVersion,
    TestRun,
    TestRunCell,
    TestSet,
)
from chat.sharing.models import ShareLink  # noqa: E402,F401
