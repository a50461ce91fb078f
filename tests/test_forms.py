"""Parameter validation before any upstream call (seed 000/002 ranges)."""

from __future__ import annotations

import pytest

from chat.forms import ParamsForm, request_fields


def test_zero_values_are_values_not_unset() -> None:
    form = ParamsForm({"temperature": "0", "seed": "0", "frequency_penalty": "0", "thinking_budget": "0",
                       "top_logprobs": "0", "presence_penalty": "0.0"})
    assert form.is_valid(), form.errors
    params = form.params()
    assert params["temperature"] == 0 and params["seed"] == 0 and params["thinking_budget"] == 0
    assert params["top_logprobs"] == 0 and params["frequency_penalty"] == 0 and params["presence_penalty"] == 0
    assert request_fields(params, "anthropic_messages")["reasoning"] == {"budget_tokens": 0}


@pytest.mark.parametrize("field,value", [
    ("temperature", "2.01"), ("temperature", "-0.1"), ("top_p", "1.01"), ("top_k", "0"), ("top_k", "101"),
    ("max_tokens", "0"), ("frequency_penalty", "2.5"), ("presence_penalty", "-2.5"), ("top_logprobs", "21"),
    ("stop", "a\nb\nc\nd\ne"), ("seed", "1.5"), ("tools", "[{}]"), ("tools", "nope"),
])
def test_out_of_range_values_are_refused_with_a_message(field: str, value: str) -> None:
    form = ParamsForm({field: value})
    assert not form.is_valid()
    assert form.errors[field]


def test_max_tokens_within_the_models_limit() -> None:
    assert not ParamsForm({"max_tokens": "5000"}, max_completion_tokens=4096).is_valid()
    assert ParamsForm({"max_tokens": "4096"}, max_completion_tokens=4096).is_valid()


def test_json_schema_needs_a_schema_and_tool_choice_a_known_tool() -> None:
    assert "json_schema" in ParamsForm({"response_format": "json_schema"}).errors
    tools = '[{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]'
    assert ParamsForm({"tools": tools, "tool_choice": "f"}).is_valid()
    assert "tool_choice" in ParamsForm({"tools": tools, "tool_choice": "g"}).errors


def test_only_what_the_style_accepts() -> None:
    stored = {"temperature": 0.5, "seed": 3, "top_k": 4, "thinking_budget": 2048, "reasoning_effort": "high",
              "logprobs": True, "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]}
    chat = request_fields(stored, "openai_chat")
    assert chat["params"] == {"temperature": 0.5, "seed": 3, "top_k": 4} and chat["logprobs"]
    assert chat["reasoning"] == {"effort": "high"}
    anth = request_fields(stored, "anthropic_messages")
    assert anth["params"] == {"temperature": 0.5, "top_k": 4} and not anth["logprobs"]
    assert anth["reasoning"] == {"budget_tokens": 2048} and len(anth["tools"]) == 1
    resp = request_fields(stored, "openai_responses")
    assert resp["params"] == {"temperature": 0.5} and resp["reasoning"] == {"effort": "high"}


@pytest.mark.parametrize("field,value", [
    ("json_schema", "{no"), ("json_schema", '{"type": 5}'), ("schema_name", "bad name!"),
])
def test_schema_fields_are_checked_when_json_schema_is_sent(field: str, value: str) -> None:
    form = ParamsForm({"response_format": "json_schema", "json_schema": '{"type": "object"}', field: value})
    assert not form.is_valid()
    assert form.errors[field]


@pytest.mark.parametrize("fmt", ["", "text", "json_object"])
def test_an_unsent_schema_editor_never_blocks_a_send(fmt: str) -> None:
    """Issue 7 item 9: invalid JSON left in the schema editor with the response format set to
    "(not sent)" (or another format) is not validated and not sent."""
    form = ParamsForm({"response_format": fmt, "json_schema": "{no", "schema_name": "bad name!"})
    assert form.is_valid(), form.errors
    assert "json_schema" not in form.params() and "schema_name" not in form.params()


def test_fields_the_api_style_does_not_take_are_not_validated_nor_sent() -> None:
    """A hidden field (not taken by the endpoint's API style) with a bad value blocks nothing:
    seed and logprobs are not Anthropic parameters; thinking budget is not an OpenAI one."""
    anthropic = ParamsForm({"seed": "1.5", "top_logprobs": "99", "temperature": "0.3"}, api_style="anthropic_messages")
    assert anthropic.is_valid(), anthropic.errors
    assert anthropic.params() == {"temperature": 0.3}
    openai = ParamsForm({"thinking_budget": "-4", "top_p": "0.5"}, api_style="openai_chat")
    assert openai.is_valid(), openai.errors
    assert openai.params() == {"top_p": 0.5}
    # A field the style does take is still checked.
    assert "temperature" in ParamsForm({"temperature": "3"}, api_style="anthropic_messages").errors


def test_tool_choice_without_tools_is_not_sent() -> None:
    form = ParamsForm({"tool_choice": "lookup"})
    assert form.is_valid(), form.errors
    assert "tool_choice" not in form.params()
