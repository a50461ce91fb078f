"""What is sent upstream: the active branch of a conversation as provider messages.

``history(thread)`` turns the rows of the branch the user sees into the ``ChatMessage`` tuple
the adapters take: exactly the branch as shown — system, user (with its images and audio),
assistant (with its tool calls and thinking signature), tool results — leaving out answers that
failed with no text and answers still streaming. ``make_request`` adds the settings of the turn.

May import: Django (ORM reads), chat.models, chat.turnsettings, chat.providers.base.
"""

from __future__ import annotations

from typing import Any

from chat.models import Attachment, Message, MessageStatus
from chat.providers.base import ChatMessage, ChatRequest, ContentPart, ToolCall
from chat.turnsettings import request_fields

#: Message fields the history and the page need; the heavy ``inspect`` JSON is never loaded here.
HISTORY_DEFER = ("inspect", "usage_raw")


def attachments_by_message(thread: list[Message]) -> dict[Any, list[Attachment]]:
    """The attachments of the user messages in ``thread``, by message id (one query, none when
    the thread has no user message). Rows come without their bytes; :func:`parts` loads them."""
    ids = [m.pk for m in thread if m.role == "user"]
    out: dict[Any, list[Attachment]] = {}
    if ids:
        for a in Attachment.objects.filter(message_id__in=ids).defer("data").order_by("created_at"):
            out.setdefault(a.message_id, []).append(a)
    return out


def parts(attachments: list[Attachment]) -> tuple[ContentPart, ...]:
    """Provider content parts for attachments: an image URL as is, else the bytes (each
    attachment read once per turn, held once; base64 is made while the request is sent)."""
    out = []
    for a in attachments:
        if a.url:
            out.append(ContentPart(type=a.kind, media_type=a.media_type, url=a.url, filename=a.filename))
            continue
        data = Attachment.objects.filter(pk=a.pk).values_list("data", flat=True).first() or b""
        # Raw bytes (one copy per turn): the adapter's body encodes them to base64 in pieces
        # while the request is sent (chat.providers.base.Base64Media).
        out.append(ContentPart(type=a.kind, media_type=a.media_type, filename=a.filename,
                               data=data if isinstance(data, bytes) else bytes(data)))
    return tuple(out)


def history(thread: list[Message], attachments: dict[Any, list[Attachment]] | None = None) -> tuple[ChatMessage, ...]:
    """The messages sent upstream for ``thread`` (root first). ``attachments``: from
    :func:`attachments_by_message` (queried when not given)."""
    if attachments is None:
        attachments = attachments_by_message(thread)
    out = []
    for m in thread:
        if m.role == "user":
            out.append(ChatMessage("user", m.content, parts=parts(attachments.get(m.pk, []))))
        elif m.role == "system":
            out.append(ChatMessage("system", m.content))
        elif m.role == "tool":
            out.append(ChatMessage("tool", m.content, tool_call_id=m.tool_call_id))
        elif m.role == "assistant" and (m.content or m.tool_calls) and m.status != MessageStatus.STREAMING:
            out.append(ChatMessage(
                "assistant", m.content,
                # Client calls only (the server's own tools are not sent back); the adapters
                # replay blank or cut-off arguments as a JSON object (replay_arguments).
                tool_calls=tuple(
                    ToolCall(c.get("id", ""), c.get("name", ""), c.get("arguments", ""))
                    for c in m.tool_calls if not c.get("server")
                ),
                reasoning=m.reasoning if m.reasoning_signature else "", reasoning_signature=m.reasoning_signature,
                redacted_thinking=tuple(
                    b["data"] for b in (m.replay_blocks or []) if b.get("type") == "redacted_thinking"
                ),
            ))
    return tuple(out)


def make_request(
    *, api_style: str, model: str, system: str, stored: dict[str, Any], messages: tuple[ChatMessage, ...]
) -> ChatRequest:
    """A ``ChatRequest`` from stored settings, keeping only what ``api_style`` accepts."""
    return ChatRequest(model=model, messages=messages, system=system, **request_fields(stored, api_style))
