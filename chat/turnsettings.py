"""The settings of a turn: which fields exist, which each API style accepts, and how stored
settings become a ``ChatRequest``.

One source of "the settings of the next turn" for every action that starts a turn (send,
regenerate, retry, continue, edit and resend, tool result) and for View code: the settings
panel's values, validated by ``chat.forms.ParamsForm`` and turned into request fields here.

May import: the standard library only.
"""

from __future__ import annotations

from typing import Any

PARAM_FIELDS = ("temperature", "top_p", "top_k", "max_tokens", "stop", "seed", "frequency_penalty", "presence_penalty")
OPTION_FIELDS = (
    "reasoning_effort", "thinking_budget", "enable_thinking", "response_format", "schema_name",
    "schema_strict", "json_schema", "tools", "tool_choice", "logprobs", "top_logprobs", "session_id",
)

# What each API style accepts (seed 002 ChatCompletionRequest / ResponsesRequest, seed 004
# MessagesRequest, seed 001 for Sansa's reasoning values). The panel shows only these; the
# relay drops the rest.
STYLE_FIELDS: dict[str, frozenset[str]] = {
    "openai_chat": frozenset({
        "temperature", "top_p", "top_k", "max_tokens", "stop", "seed", "frequency_penalty",
        "presence_penalty", "reasoning_effort", "enable_thinking", "response_format", "schema_name",
        "schema_strict", "json_schema", "tools", "tool_choice", "logprobs", "top_logprobs", "session_id",
    }),
    "anthropic_messages": frozenset({
        "temperature", "top_p", "top_k", "max_tokens", "stop", "thinking_budget", "tools", "tool_choice",
    }),
    "openai_responses": frozenset({
        "temperature", "top_p", "max_tokens", "reasoning_effort", "response_format", "schema_name",
        "schema_strict", "json_schema", "tools", "tool_choice",
    }),
}
EFFORTS = ["none", "minimal", "low", "medium", "high", "xhigh"]



def request_fields(stored: dict[str, Any], api_style: str) -> dict[str, Any]:
    """Stored settings → ``ChatRequest`` keyword arguments for ``api_style`` (only what it takes).

    Returns ``{"params": {...}, "tools": (...), "tool_choice", "response_format", "reasoning",
    "logprobs", "top_logprobs", "extra"}``; see ``chat.providers.base.ChatRequest``.
    """
    allowed = STYLE_FIELDS.get(api_style, STYLE_FIELDS["openai_chat"])
    s = {k: v for k, v in stored.items() if k in allowed}
    params = {k: s[k] for k in PARAM_FIELDS if k in s}
    reasoning: dict[str, Any] = {}
    if s.get("reasoning_effort"):
        reasoning["effort"] = s["reasoning_effort"]
    if s.get("thinking_budget") is not None and "thinking_budget" in s:
        reasoning["budget_tokens"] = s["thinking_budget"]
    if s.get("enable_thinking"):
        reasoning["enable_thinking"] = s["enable_thinking"] == "on"
    response_format = None
    kind = s.get("response_format")
    if kind == "json_schema" and s.get("json_schema"):
        response_format = {"type": "json_schema", "json_schema": {
            "name": s.get("schema_name") or "answer", "strict": bool(s.get("schema_strict")), "schema": s["json_schema"],
        }}
    elif kind in ("text", "json_object"):
        response_format = {"type": kind}
    extra = {"session_id": s["session_id"]} if s.get("session_id") else {}
    return {
        "params": params,
        "tools": tuple(s.get("tools") or ()),
        "tool_choice": s.get("tool_choice") or None,
        "response_format": response_format,
        "reasoning": reasoning,
        "logprobs": bool(s.get("logprobs")),
        "top_logprobs": s.get("top_logprobs"),
        "extra": extra,
    }
