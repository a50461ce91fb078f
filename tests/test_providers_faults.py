"""Issue 7 faults and issue 8 limits, each across every API style it can occur in.

Each example of the issues is a test with its exact value; variants of our own follow it.
Streams are served by ``httpx.MockTransport`` (bodies delivered in small reads so pairs, tags
and lines split across reads), so the shared SSE loop, the adapters and the stream guard run as
in production. No Django, no network.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from chat.providers import anthropic_messages, get_adapter, openai_chat, openai_responses
from chat.providers.base import (
    AnswerWasReasoning,
    ChatMessage,
    ChatRequest,
    EndpointConfig,
    FinalText,
    Finish,
    Limits,
    LogprobsDelta,
    ModelOutputError,
    ProviderError,
    RawEvent,
    RedactedThinking,
    ServerToolUse,
    StreamWarning,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    Usage,
    tool_arguments_complete,
)
from chat.providers.errors import MODELS_NOT_LISTED_MESSAGE, parse_error
from tests.provider_events import applied

FIXTURES = Path(__file__).parent / "fixtures"
STYLES = ("openai_chat", "anthropic_messages", "openai_responses")
KEY = "sk-fault-KEY-0123456789"
REQUEST = ChatRequest(model="m", messages=(ChatMessage("user", "hi"),))
SSE = {"content-type": "text/event-stream"}
HIGH, LOW = "\\ud83d", "\\ude00"  # JSON escapes of the halves of 😀


class Reads(httpx.AsyncByteStream):
    def __init__(self, data: bytes, size: int) -> None:
        self.data, self.size = data, size

    async def __aiter__(self):
        for start in range(0, len(self.data), self.size):
            yield self.data[start : start + self.size]


def client_for(body: bytes, *, status: int = 200, headers: dict[str, str] | None = None, size: int = 7):
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, headers=headers or SSE, stream=Reads(body, size))

    return httpx.AsyncClient(transport=httpx.MockTransport(handler))


async def run(style: str, body: bytes, *, config: EndpointConfig | None = None, **kwargs):
    """All events of one stream and the ProviderError it ended with (or None)."""
    config = config or EndpointConfig(base_url="https://up.test/v1", api_key=KEY, api_style=style)
    events: list[Any] = []
    error = None
    async with client_for(body, **kwargs) as client:
        try:
            async for event in get_adapter(style).stream(client, config, REQUEST):
                events.append(event)
        except ProviderError as exc:
            error = exc
    return events, error


def fixture(dialect: str, name: str) -> bytes:
    return (FIXTURES / dialect / f"{name}.sse").read_bytes()


def semantic(events):
    return [e for e in events if not isinstance(e, RawEvent) and type(e).__name__ != "ResponseStarted"]


# ---- bodies in each dialect, from raw JSON text (so escapes stay escapes) --------------------


def chat_body(*contents: str, field: str = "content", finish: str | None = "stop") -> bytes:
    out = "".join(
        f'data: {{"choices":[{{"index":0,"delta":{{"{field}":"{c}"}},"finish_reason":null}}]}}\n\n'
        for c in contents
    )
    if finish:
        out += f'data: {{"choices":[{{"index":0,"delta":{{}},"finish_reason":"{finish}"}}]}}\n\n'
        out += "data: [DONE]\n\n"
    return out.encode()


def messages_body(*texts: str, kind: str = "text", stop: str | None = "end_turn") -> bytes:
    delta = {"text": ("text_delta", "text"), "thinking": ("thinking_delta", "thinking")}[kind]
    out = (
        'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","type":"message",'
        '"role":"assistant","content":[],"model":"m","usage":{"input_tokens":9,"output_tokens":1}}}\n\n'
        'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
        f'"content_block":{{"type":"{kind}","{delta[1]}":""}}}}\n\n'
    )
    for text in texts:
        out += (
            'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
            f'"delta":{{"type":"{delta[0]}","{delta[1]}":"{text}"}}}}\n\n'
        )
    if stop:
        out += (
            'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
            'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"'
            + stop
            + '"},"usage":{"output_tokens":7}}\n\nevent: message_stop\ndata: {"type":"message_stop"}\n\n'
        )
    return out.encode()


def responses_body(*texts: str, kind: str = "output_text", complete: bool = True) -> bytes:
    out = 'data: {"type":"response.created","response":{"id":"r","object":"response","status":"in_progress"}}\n\n'
    for text in texts:
        out += f'data: {{"type":"response.{kind}.delta","item_id":"it_1","output_index":0,"delta":"{text}"}}\n\n'
    if complete:
        out += (
            'data: {"type":"response.completed","response":{"id":"r","object":"response",'
            '"status":"completed","output":[],"usage":{"input_tokens":9,"output_tokens":7,"total_tokens":16}}}\n\n'
        )
    return out.encode()


def body_for(style: str, *pieces: str, reasoning: bool = False, finish: bool = True) -> bytes:
    if style == "openai_chat":
        return chat_body(*pieces, field="reasoning_content" if reasoning else "content", finish="stop" if finish else None)
    if style == "anthropic_messages":
        return messages_body(*pieces, kind="thinking" if reasoning else "text", stop="end_turn" if finish else None)
    return responses_body(*pieces, kind="reasoning_text" if reasoning else "output_text", complete=finish)


def all_strings_encodable(events, error=None) -> None:
    for event in events:
        json.dumps(repr(event)).encode("utf-8")
        for value in vars(event).values():
            if isinstance(value, str):
                value.encode("utf-8")
    if error is not None:
        json.dumps(error.as_dict(), ensure_ascii=False).encode("utf-8")


# ---- issue 7 item 1a: valid Unicode from every adapter -------------------------------------


@pytest.mark.parametrize("dialect", STYLES)
async def test_issue_example_surrogate_pair_split_across_two_events(dialect):
    events, error = await run(dialect, fixture(dialect, "surrogate_split")) if dialect != "openai_responses" else await run(
        dialect, body_for(dialect, f"Smile {HIGH}", f"{LOW} done")
    )
    assert error is None
    assert applied(events)[1] == "Smile 😀 done"
    all_strings_encodable(events)


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("reasoning", [False, True])
async def test_pair_joined_and_lone_halves_replaced(style, reasoning):
    events, error = await run(
        style, body_for(style, f"a{HIGH}", f"{LOW}b{LOW}", f"c{HIGH}", "d", f"e{HIGH}", reasoning=reasoning)
    )
    assert error is None
    got = applied(events)[0 if reasoning else 1]
    assert got == "a😀b\ufffdc\ufffdde\ufffd"  # each lone half is exactly one U+FFFD
    all_strings_encodable(events)


@pytest.mark.parametrize("style", STYLES)
async def test_lone_half_at_a_cut_stream_end(style):
    events, error = await run(style, body_for(style, "x", f"y{HIGH}", finish=False))
    assert error is not None and error.code == "stream_cut"
    assert applied(events)[1] == "xy\ufffd"
    all_strings_encodable(events, error)


async def test_tool_call_arguments_names_and_logprob_tokens_are_valid_unicode():
    body = (
        'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function",'
        f'"function":{{"name":"say{HIGH}","arguments":"{{\\"t\\": \\"{HIGH}"}}}}]}}}}]}}\n\n'
        'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,'
        f'"function":{{"arguments":"{LOW}\\"}}"}}}}]}}}}]}}\n\n'
        f'data: {{"choices":[{{"index":0,"delta":{{"content":"x"}},"logprobs":{{"content":[{{"token":"{HIGH}","logprob":-0.5,"top_logprobs":[{{"token":"{LOW}","logprob":-1.0}}]}}]}}}}]}}\n\n'
        'data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}\n\n'
    ).encode()
    events, error = await run("openai_chat", body)
    assert error is None
    calls = [e for e in events if isinstance(e, ToolCallDelta)]
    assert calls[0].name == "say\ufffd"
    assert json.loads("".join(c.arguments for c in calls)) == {"t": "😀"}
    (logprobs,) = [e for e in events if isinstance(e, LogprobsDelta)]
    assert logprobs.tokens[0].token == "\ufffd" and logprobs.tokens[0].top == (("\ufffd", -1.0),)
    all_strings_encodable(events)


@pytest.mark.parametrize(
    ("style", "piece"),
    [
        ("anthropic_messages", "content_block_delta"),
        ("openai_responses", "response.function_call_arguments.delta"),
    ],
)
async def test_tool_arguments_pair_split_in_other_dialects(style, piece):
    if style == "anthropic_messages":
        body = (
            'event: message_start\ndata: {"type":"message_start","message":{"usage":{"input_tokens":1}}}\n\n'
            'data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t1","name":"say","input":{}}}\n\n'
            f'data: {{"type":"content_block_delta","index":0,"delta":{{"type":"input_json_delta","partial_json":"{{\\"t\\": \\"{HIGH}"}}}}\n\n'
            f'data: {{"type":"content_block_delta","index":0,"delta":{{"type":"input_json_delta","partial_json":"{LOW}\\"}}"}}}}\n\n'
            'data: {"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":5}}\n\n'
            'data: {"type":"message_stop"}\n\n'
        ).encode()
    else:
        body = (
            'data: {"type":"response.output_item.added","output_index":0,"item":{"id":"fc_1","type":"function_call","call_id":"c1","name":"say","arguments":""}}\n\n'
            f'data: {{"type":"{piece}","item_id":"fc_1","delta":"{{\\"t\\": \\"{HIGH}"}}\n\n'
            f'data: {{"type":"{piece}","item_id":"fc_1","delta":"{LOW}\\"}}"}}\n\n'
            'data: {"type":"response.completed","response":{"status":"completed","output":[]}}\n\n'
        ).encode()
    events, error = await run(style, body)
    assert error is None
    arguments = "".join(e.arguments for e in events if isinstance(e, ToolCallDelta))
    assert json.loads(arguments) == {"t": "😀"}


@pytest.mark.parametrize(
    ("style", "body"),
    [
        ("openai_chat", f'data: {{"error":{{"message":"bad {HIGH} output","code":"server_error"}}}}\n\n'),
        ("anthropic_messages", f'event: error\ndata: {{"type":"error","error":{{"type":"api_error","message":"bad {HIGH} output"}}}}\n\n'),
        ("openai_responses", f'data: {{"type":"error","code":"server_error","message":"bad {HIGH} output"}}\n\n'),
    ],
)
async def test_error_messages_are_valid_unicode(style, body):
    events, error = await run(style, body.encode())
    assert error is not None and error.message == "bad \ufffd output"
    all_strings_encodable(events, error)


async def test_http_error_body_with_lone_surrogate():
    body = f'{{"error":{{"message":"quota {HIGH}{LOW} {LOW}","type":"insufficient_quota"}}}}'.encode()
    exc = parse_error(429, {}, body, [])
    assert exc.message == "quota 😀 \ufffd"
    json.dumps(exc.as_dict(), ensure_ascii=False).encode("utf-8")


async def test_model_list_strings_are_valid_unicode():
    body = f'{{"data":[{{"id":"m{HIGH}","owned_by":"o{LOW}"}}]}}'.encode()
    async with client_for(body, headers={"content-type": "application/json"}) as client:
        (model,) = await openai_chat.list_models(client, EndpointConfig(base_url="https://up.test/v1"))
    assert (model.id, model.owned_by) == ("m\ufffd", "o\ufffd")


# ---- issue 7 item 2: a closing reasoning tag without an opening tag -------------------------


@pytest.mark.parametrize("dialect", STYLES)
async def test_issue_example_orphan_closing_tag(dialect):
    events, error = await run(dialect, fixture(dialect, "orphan_think_close"))
    assert error is None
    assert applied(events) == ("Plan: add 2+2", "4")
    assert sum(isinstance(e, AnswerWasReasoning) for e in events) == 1
    assert not any(isinstance(e, TextDelta) and "think" in e.text for e in events)


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize(
    ("pieces", "expected"),
    [
        (("Let me see", " more</thi", "nking>", "\\n\\nParis."), ("Let me see more", "Paris.")),
        (("No tag", " at all."), ("", "No tag at all.")),
        (("<thinking>plan</thinking>", "done"), ("plan", "done")),
        (("a <think>b</think>", " c"), ("", "a <think>b</think> c")),
    ],
)
async def test_inline_tags_in_every_dialect(style, pieces, expected):
    events, error = await run(style, body_for(style, *pieces), size=3)
    assert error is None
    assert applied(events) == expected


async def test_orphan_tag_after_structured_reasoning_is_literal():
    body = chat_body("thinking", field="reasoning_content", finish=None) + chat_body("The tag </think> closes")
    events, _ = await run("openai_chat", body)
    assert applied(events) == ("thinking", "The tag </think> closes")


# ---- issue 7 item 3: tool calls -----------------------------------------------------------


def calls_of(events) -> dict[int, dict[str, str]]:
    calls: dict[int, dict[str, str]] = {}
    for e in events:
        if isinstance(e, ToolCallDelta):
            call = calls.setdefault(e.index, {"id": "", "name": "", "arguments": ""})
            call["id"] = e.id or call["id"]
            call["name"] = e.name or call["name"]
            call["arguments"] += e.arguments
    return calls


async def test_issue_example_parallel_calls_on_one_index_stay_apart():
    events, error = await run("openai_chat", fixture("openai_chat", "parallel_same_index"), size=5)
    assert error is None
    assert calls_of(events) == {
        0: {"id": "call_a", "name": "get_weather", "arguments": '{"city": "Paris"}'},
        1: {"id": "call_b", "name": "get_weather", "arguments": '{"city": "Bogotá"}'},
    }


async def test_an_id_repeated_on_every_delta_is_one_call():
    body = (
        b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"f","arguments":"{\\"a\\""}}]}}]}\n\n'
        b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"arguments":": 1}"}}]}}]}\n\n'
        b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"c2","function":{"name":"g","arguments":"{}"}}]}}]}\n\n'
        b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}\n\n'
    )
    events, _ = await run("openai_chat", body)
    assert calls_of(events) == {
        0: {"id": "c1", "name": "f", "arguments": '{"a": 1}'},
        1: {"id": "c2", "name": "g", "arguments": "{}"},
    }


async def test_anthropic_new_tool_use_id_at_a_used_block_index_is_a_new_call():
    body = (
        b'data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_a","name":"f","input":{}}}\n\n'
        b'data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\\"x\\": 1}"}}\n\n'
        b'data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_b","name":"f","input":{}}}\n\n'
        b'data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\\"x\\": 2}"}}\n\n'
        b'data: {"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":9}}\n\n'
    )
    events, _ = await run("anthropic_messages", body)
    assert calls_of(events) == {
        0: {"id": "toolu_a", "name": "f", "arguments": '{"x": 1}'},
        1: {"id": "toolu_b", "name": "f", "arguments": '{"x": 2}'},
    }


async def test_issue_example_server_tools_are_not_client_calls():
    events, error = await run("anthropic_messages", fixture("anthropic_messages", "server_tools"))
    assert error is None
    assert not any(isinstance(e, ToolCallDelta) for e in events)
    assert [e for e in events if isinstance(e, ServerToolUse)] == [
        ServerToolUse(
            "server_tool_use",
            name="web_search",
            id="srvtoolu_014hJH82Qum7Td6UV8gDXThB",
            input_json='{"query": "weather NYC today"}',
        ),
        ServerToolUse(
            "web_search_tool_result",
            name="web_search",
            id="srvtoolu_014hJH82Qum7Td6UV8gDXThB",
            result_summary="2 results: Weather in New York City — https://weather.example/nyc; "
            "NYC forecast — https://forecast.example/nyc",
        ),
    ]
    assert [e.reason for e in events if isinstance(e, Finish)] == ["stop"]


async def test_other_server_blocks_mcp_errors_and_unknown_types():
    blocks = [
        {"type": "mcp_tool_use", "id": "mcptoolu_1", "name": "echo", "server_name": "s", "input": {"q": 1}},
        {"type": "mcp_tool_result", "tool_use_id": "mcptoolu_1", "is_error": False, "content": [{"type": "text", "text": "pong"}]},
        {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_9", "content": {"type": "web_search_tool_result_error", "error_code": "max_uses_exceeded"}},
        {"type": "code_execution_tool_result", "tool_use_id": "srvtoolu_8", "content": {"type": "code_execution_result", "stdout": "4\n", "stderr": "", "return_code": 0}},
        {"type": "future_tool_result", "tool_use_id": "x", "content": {"answer": 42}},
    ]
    body = "".join(
        f'data: {json.dumps({"type": "content_block_start", "index": i, "content_block": b})}\n\n'
        f'data: {json.dumps({"type": "content_block_stop", "index": i})}\n\n'
        for i, b in enumerate(blocks)
    ) + 'data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":3}}\n\n'
    events, _ = await run("anthropic_messages", body.encode())
    assert not any(isinstance(e, ToolCallDelta) for e in events)
    assert [(e.block_type, e.name, e.input_json, e.result_summary) for e in events if isinstance(e, ServerToolUse)] == [
        ("mcp_tool_use", "echo", '{"q": 1}', ""),
        ("mcp_tool_result", "echo", "", "pong"),
        ("web_search_tool_result", "", "", "error: max_uses_exceeded"),
        ("code_execution_tool_result", "", "", "exit 0: 4"),
        ("future_tool_result", "", "", '{"answer": 42}'),
    ]


async def test_server_block_without_stop_is_still_reported():
    body = (
        b'data: {"type":"content_block_start","index":0,"content_block":{"type":"server_tool_use","id":"srv_1","name":"web_fetch","input":{}}}\n\n'
        b'data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\\"url\\": \\"https://a.test\\"}"}}\n\n'
    )
    events, error = await run("anthropic_messages", body)
    assert error.code == "stream_cut"
    assert [e for e in events if isinstance(e, ServerToolUse)] == [
        ServerToolUse("server_tool_use", name="web_fetch", id="srv_1", input_json='{"url": "https://a.test"}')
    ]


async def test_responses_server_tool_item():
    events, error = await run("openai_responses", fixture("openai_responses", "web_search_call"))
    assert error is None
    assert [e for e in events if isinstance(e, ServerToolUse)] == [
        ServerToolUse(
            "web_search_call",
            name="web_search",
            id="ws_1",
            input_json='{"type": "search", "query": "weather NYC today"}',
            result_summary="completed",
        )
    ]
    assert not any(isinstance(e, ToolCallDelta) for e in events)


REDACTED = "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"


async def test_issue_example_redacted_thinking_is_kept_and_sent_back():
    events, error = await run("anthropic_messages", fixture("anthropic_messages", "redacted_thinking"))
    assert error is None
    assert [e for e in events if isinstance(e, RedactedThinking)] == [RedactedThinking(REDACTED)]
    # the next request (thinking enabled, with the tool result) carries it unchanged
    request = ChatRequest(
        model="claude-sonnet-4-5",
        reasoning={"budget_tokens": 2048},
        messages=(
            ChatMessage("user", "Weather in Paris?"),
            ChatMessage(
                "assistant",
                "",
                reasoning="Need the weather tool.",
                reasoning_signature="EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds",
                redacted_thinking=(REDACTED,),
                tool_calls=(ToolCall("toolu_01", "get_weather", '{"city": "Paris"}'),),
            ),
            ChatMessage("tool", "18 C", tool_call_id="toolu_01"),
        ),
    )
    _, _, body = anthropic_messages.build_request(EndpointConfig(base_url="https://api.anthropic.com/v1"), request)
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert body["messages"][1] == {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "Need the weather tool.", "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"},
            {"type": "redacted_thinking", "data": REDACTED},
            {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {"city": "Paris"}},
        ],
    }
    assert json.dumps(body).count(REDACTED) == 1  # byte-identical, once


async def test_redacted_thinking_in_a_whole_json_answer():
    message = {"type": "message", "role": "assistant", "stop_reason": "end_turn", "usage": {"input_tokens": 3, "output_tokens": 2},
               "content": [{"type": "redacted_thinking", "data": "opaque+/=="}, {"type": "text", "text": "Hi"}]}
    events, _ = await run("anthropic_messages", json.dumps(message).encode(), headers={"content-type": "application/json"})
    assert [e for e in events if isinstance(e, RedactedThinking)] == [RedactedThinking("opaque+/==")]
    assert applied(events)[1] == "Hi"


@pytest.mark.parametrize("style", STYLES)
async def test_empty_and_cut_tool_arguments_are_never_replayed_invalid(style):
    request = ChatRequest(
        model="m",
        messages=(
            ChatMessage("user", "go"),
            ChatMessage("assistant", "", tool_calls=(ToolCall("c1", "now", ""), ToolCall("c2", "find", '{"q": "Par'))),
            ChatMessage("tool", "12:00", tool_call_id="c1"),
            ChatMessage("tool", "?", tool_call_id="c2"),
        ),
    )
    _, _, body = get_adapter(style).build_request(EndpointConfig(base_url="https://up.test/v1"), request)
    if style == "openai_chat":
        sent = [c["function"]["arguments"] for c in body["messages"][1]["tool_calls"]]
    elif style == "openai_responses":
        sent = [i["arguments"] for i in body["input"] if i["type"] == "function_call"]
    else:
        sent = [json.dumps(b["input"]) for b in body["messages"][1]["content"] if b["type"] == "tool_use"]
    assert sent[0] == "{}"
    assert json.loads(sent[1]) == {"_incomplete_arguments": '{"q": "Par'}


async def test_arguments_cut_by_max_tokens_are_flagged():
    body = (
        b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"f","arguments":"{\\"q\\": \\"Par"}}]}}]}\n\n'
        b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}\n\n'
    )
    events, _ = await run("openai_chat", body)
    assert [e.reason for e in events if isinstance(e, Finish)] == ["length"]
    assert not tool_arguments_complete(calls_of(events)[0]["arguments"])


# ---- issue 7 item 15: provisional Anthropic usage -------------------------------------------


async def test_issue_example_cut_stream_keeps_completion_tokens_unknown():
    events, error = await run("anthropic_messages", messages_body("one two three", stop=None))
    assert error.code == "stream_cut"
    usages = [e for e in events if isinstance(e, Usage)]
    assert usages[-1].prompt_tokens == 9  # real
    assert usages[-1].completion_tokens is None and usages[-1].total_tokens is None  # not 1


async def test_stopped_stream_keeps_completion_tokens_unknown():
    """Stop (the runner closes the stream) right after the first text."""
    events = []
    async with client_for(messages_body("one", "two")) as client:
        config = EndpointConfig(base_url="https://up.test/v1", api_style="anthropic_messages")
        stream = anthropic_messages.stream(client, config, REQUEST)
        async for event in stream:
            events.append(event)
            if isinstance(event, TextDelta):
                break
        await stream.aclose()
    usage = [e for e in events if isinstance(e, Usage)][-1]
    assert (usage.prompt_tokens, usage.completion_tokens) == (9, None)


async def test_message_delta_brings_the_final_figures():
    events, _ = await run("anthropic_messages", messages_body("x"))
    usage = [e for e in events if isinstance(e, Usage)][-1]
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (9, 7, 16)


async def test_responses_usage_only_from_terminal_events():
    body = (
        b'data: {"type":"response.created","response":{"status":"in_progress","usage":{"input_tokens":9,"output_tokens":0,"total_tokens":9}}}\n\n'
        b'data: {"type":"response.output_text.delta","item_id":"m","delta":"Hi"}\n\n'
    )
    events, error = await run("openai_responses", body)
    assert error.code == "stream_cut"
    assert not any(isinstance(e, Usage) for e in events)  # no placeholder counts


# ---- issue 7 item 16: unparsable events are never silent ------------------------------------


async def test_issue_example_cut_json_chunk_is_reported():
    events, error = await run("openai_chat", fixture("openai_chat", "cut_json_chunk"))
    assert error is None
    (warning,) = [e for e in events if isinstance(e, StreamWarning)]
    assert warning.code == "unparsable_event"
    assert warning.raw_excerpt.endswith('"delta":{"content":" wor')
    index = events.index(warning)
    assert isinstance(events[index - 1], RawEvent) and events[index - 1].data.endswith(" wor")
    assert applied(events)[1] == "Hello there"


@pytest.mark.parametrize(
    ("style", "cut"),
    [
        ("anthropic_messages", 'data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" wo\n\n'),
        ("openai_responses", 'data: {"type":"response.output_text.delta","item_id":"it_1","delta":" wo\n\n'),
    ],
)
async def test_cut_json_chunk_in_other_dialects(style, cut):
    whole = body_for(style, "Hello", " there").decode()
    end = whole.index("\n\n", whole.index("Hello")) + 2  # after the event holding "Hello"
    body = (whole[:end] + cut + whole[end:]).encode()
    events, error = await run(style, body)
    assert error is None
    assert [e.code for e in events if isinstance(e, StreamWarning)] == ["unparsable_event"]
    assert applied(events)[1] == "Hello there"  # " wo" is missing, and the warning says so


async def test_issue_example_final_text_wins_when_it_differs():
    events, error = await run("openai_responses", fixture("openai_responses", "lost_delta"))
    assert error is None
    assert [e for e in events if isinstance(e, FinalText)] == [FinalText("The quick brown fox.")]
    kinds = [type(e).__name__ for e in semantic(events)]
    assert kinds.index("FinalText") < kinds.index("Usage") < kinds.index("Finish")
    assert applied(events)[1] == "The quick brown fox."


async def test_no_final_text_when_the_copy_matches():
    body = (
        b'data: {"type":"response.output_text.delta","item_id":"m","delta":"Plan</think>"}\n\n'
        b'data: {"type":"response.output_text.delta","item_id":"m","delta":"Yes"}\n\n'
        b'data: {"type":"response.output_text.done","item_id":"m","text":"Plan</think>Yes"}\n\n'
        b'data: {"type":"response.completed","response":{"status":"completed","output":[]}}\n\n'
    )
    events, _ = await run("openai_responses", body)
    assert not any(isinstance(e, FinalText) for e in events)
    assert applied(events) == ("Plan", "Yes")


async def test_final_text_from_completed_output_without_done_events():
    body = (
        b'data: {"type":"response.output_text.delta","item_id":"m","delta":"Hello"}\n\n'
        b'data: {"type":"response.output_text.delta","item_id":"m","delta":" wo\n\n'
        b'data: {"type":"response.completed","response":{"status":"completed","output":[{"id":"m","type":"message",'
        b'"content":[{"type":"output_text","text":"Hello world"}]}]}}\n\n'
    )
    events, _ = await run("openai_responses", body)
    assert [e for e in events if isinstance(e, FinalText)] == [FinalText("Hello world")]


async def test_body_ending_inside_an_event_is_reported():
    finished = b'data: {"choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]}\n\n'
    events, error = await run("openai_chat", finished + b'data: {"choices":[],"usage":{"prompt_tokens":1')
    assert error is None  # the answer was complete; only the usage chunk was cut ...
    assert [e.code for e in events if isinstance(e, StreamWarning)] == ["incomplete_event"]  # ... and said so
    events, error = await run("openai_chat", chat_body("ok", finish=None) + b'data: {"choices":[{"index":0,"delta":{"content":" mo')
    assert error.code == "stream_cut"
    assert [e.code for e in events if isinstance(e, StreamWarning)] == ["incomplete_event"]


# ---- issue 7 item 17: error bodies sent as SSE; code and type per dialect --------------------


@pytest.mark.parametrize("style", STYLES)
async def test_issue_example_http_error_with_an_sse_body(style):
    body = fixture("openai_chat", "http_429_sse_body")
    events, error = await run(style, body, status=429, headers={"content-type": "text/event-stream", "retry-after": "3"})
    assert events == []
    assert (error.status, error.code, error.type) == (429, "rate_limit_exceeded", "rate_limit_exceeded")
    assert error.message == "Rate limit reached for requests"
    assert error.retry_after_s == 3.0
    assert "data:" in error.body_excerpt  # the raw body stays available


def test_anthropic_error_event_as_an_http_body():
    body = b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n'
    exc = parse_error(529, {"content-type": "text/event-stream"}, body, [])
    assert (exc.code, exc.type, exc.message) == ("overloaded_error", "overloaded_error", "Overloaded")


@pytest.mark.parametrize(
    ("error", "code", "type_"),
    [
        ({"message": "slow down", "type": "rate_limit_error", "code": "429"}, "rate_limit_error", "rate_limit_error"),
        ({"message": "slow down", "type": "tokens", "code": "rate_limit_exceeded"}, "rate_limit_exceeded", "tokens"),
        ({"message": "no credits", "code": 402}, "402", None),
        ({"message": "x", "type": "invalid_request_error", "code": 400}, "invalid_request_error", "invalid_request_error"),
    ],
)
def test_code_and_type_as_each_dialect_defines_them(error, code, type_):
    exc = parse_error(429, {}, json.dumps({"error": error}).encode(), [])
    assert (exc.code, exc.type) == (code, type_)
    assert exc.as_dict()["type"] == type_


def test_sse_body_without_an_error_says_so():
    exc = parse_error(500, {}, b"data: [DONE]\n\n", [])
    assert exc.message == "HTTP 500 Internal Server Error: the upstream answered with an event stream that holds no error"


# ---- issue 7 item 18 / 10: /models and 404s ---------------------------------------------


@pytest.mark.parametrize("status", [404, 405, 501])
@pytest.mark.parametrize("style", STYLES)
async def test_server_without_models_is_reachable(style, status):
    async with client_for(b'{"detail":"Not Found"}', status=status, headers={"content-type": "application/json"}) as client:
        with pytest.raises(ProviderError) as info:
            await get_adapter(style).list_models(client, EndpointConfig(base_url="https://up.test/v1"))
    assert (info.value.code, info.value.status) == ("models_not_listed", status)
    assert info.value.message == MODELS_NOT_LISTED_MESSAGE
    assert MODELS_NOT_LISTED_MESSAGE == "The server is reachable but does not list models; type the model id"


async def test_unreachable_server_is_a_connection_error():
    def handler(request):
        raise httpx.ConnectError("Connection refused")

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        with pytest.raises(ProviderError) as info:
            await openai_chat.list_models(client, EndpointConfig(base_url="https://up.test/v1"))
    assert info.value.code == "connection_error"


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("body", [b'{"detail":"Not Found"}', b"", b"<html><title>404 Not Found</title></html>"])
async def test_chat_path_404_points_at_the_base_url_and_style(style, body):
    events, error = await run(style, body, status=404, headers={"content-type": "application/json"})
    assert (error.status, error.code) == (404, "path_not_found")
    assert style in error.message and "base URL" in error.message
    path = {"openai_chat": "/v1/chat/completions", "anthropic_messages": "/v1/messages", "openai_responses": "/v1/responses"}[style]
    assert f"POST {path}" in error.message


@pytest.mark.parametrize("style", STYLES)
async def test_chat_path_404_about_a_model_keeps_its_error(style):
    body = json.dumps({"error": {"message": "The model `nope` does not exist", "code": "model_not_found"}}).encode()
    _, error = await run(style, body, status=404, headers={"content-type": "application/json"})
    assert (error.code, error.message) == ("model_not_found", "The model `nope` does not exist")


async def test_llamacpp_models_report_n_ctx():
    body = (FIXTURES / "llamacpp" / "models.json").read_bytes()
    async with client_for(body, headers={"content-type": "application/json"}) as client:
        (model,) = await openai_chat.list_models(client, EndpointConfig(base_url="http://127.0.0.1:8080/v1"))
    assert (model.id, model.owned_by, model.context_length) == ("smollm2", "llamacpp", 1024)


# ---- issue 8 item 10: limits on everything an upstream sends ------------------------------


def limited(style: str, **limits) -> EndpointConfig:
    return EndpointConfig(base_url="https://up.test/v1", api_style=style, limits=Limits(**limits))


@pytest.mark.parametrize("style", STYLES)
async def test_answer_limit_ends_the_stream_and_keeps_the_text(style):
    body = body_for(style, *["0123456789"] * 10)
    events, error = await run(style, body, config=limited(style, max_answer_chars=25))
    assert error.code == "limit_exceeded" and error.param == "max_answer_chars"
    assert "25" in error.message and "max_answer_chars" in error.message
    assert applied(events)[1] == "0123456789012345678901234"
    assert not any(isinstance(e, Finish) for e in events)


@pytest.mark.parametrize("style", STYLES)
async def test_sse_line_limit(style):
    body = body_for(style, "short", "x" * 5000)
    events, error = await run(style, body, config=limited(style, max_sse_line_bytes=1000))
    assert error.code == "limit_exceeded" and "max_sse_line_bytes" in error.message
    assert applied(events)[1] == "short"


async def test_gzip_bomb_is_stopped_on_decoded_bytes():
    bomb = gzip.compress(b"data: " + b"0" * (20 * 1024 * 1024))
    assert len(bomb) < 64 * 1024
    headers = {"content-type": "text/event-stream", "content-encoding": "gzip"}
    events, error = await run("openai_chat", bomb, headers=headers, size=8192,
                              config=limited("openai_chat", max_decoded_bytes=2 * 1024 * 1024))
    assert error.code == "limit_exceeded" and "max_decoded_bytes" in error.message


async def test_gzip_stream_is_decoded():
    body = gzip.compress(chat_body("Hallo", " Welt"))
    events, error = await run("openai_chat", body, headers={"content-type": "text/event-stream", "content-encoding": "gzip"}, size=5)
    assert error is None and applied(events)[1] == "Hallo Welt"


async def test_unbounded_encodings_are_refused():
    events, error = await run("openai_chat", b"\x1b\x00garbage", headers={"content-type": "text/event-stream", "content-encoding": "br"})
    assert error.code == "bad_response" and "'br'" in error.message


async def test_json_body_limit_for_models_and_count_tokens():
    body = json.dumps({"data": [{"id": f"model-{i}"} for i in range(100)]}).encode()
    async with client_for(body, headers={"content-type": "application/json"}) as client:
        with pytest.raises(ProviderError) as info:
            await openai_chat.list_models(client, limited("openai_chat", max_json_body_bytes=1000))
        assert info.value.code == "limit_exceeded" and "max_json_body_bytes" in info.value.message
        with pytest.raises(ProviderError) as info:
            await anthropic_messages.count_tokens(client, limited("anthropic_messages", max_json_body_bytes=1000), REQUEST)
        assert info.value.code == "limit_exceeded"


async def test_model_list_size_limit():
    body = json.dumps({"data": [{"id": f"model-{i}"} for i in range(3)]}).encode()
    async with client_for(body, headers={"content-type": "application/json"}) as client:
        assert len(await openai_responses.list_models(client, limited("openai_responses", max_models=3))) == 3
        with pytest.raises(ProviderError) as info:
            await openai_responses.list_models(client, limited("openai_responses", max_models=2))
    assert info.value.code == "limit_exceeded" and "max_models" in info.value.message


async def test_whole_json_answer_limit():
    message = json.dumps({"choices": [{"message": {"content": "x" * 5000}, "finish_reason": "stop"}]}).encode()
    events, error = await run("openai_chat", message, headers={"content-type": "application/json"},
                              config=limited("openai_chat", max_json_body_bytes=1000))
    assert error.code == "limit_exceeded"


async def test_error_body_is_read_only_up_to_its_limit():
    body = json.dumps({"error": {"message": "m" * 50, "type": "server_error"}}).encode() + b" " * 100_000
    events, error = await run("openai_chat", body, status=500, headers={"content-type": "application/json"},
                              config=limited("openai_chat", max_error_body_bytes=200))
    assert (error.status, error.code) == (500, "server_error")
    assert len(error.body_excerpt) <= 200


async def test_inspect_budget():
    body = chat_body(*["word"] * 50)
    events, _ = await run("openai_chat", body, config=limited("openai_chat", max_raw_chars=300, max_raw_event_chars=40))
    raws = [e for e in events if isinstance(e, RawEvent)]
    assert sum(len(r.data) for r in raws) <= 300
    assert all(len(r.data) <= 40 for r in raws)
    assert raws[0].omitted > 0 and raws[-1].data == "" and raws[-1].omitted == len("[DONE]")
    assert applied(events)[1] == "word" * 50  # the answer itself is untouched


async def test_module_default_limits_apply(monkeypatch):
    from chat.providers import base

    monkeypatch.setattr(base, "DEFAULT_LIMITS", Limits(max_answer_chars=3))
    events, error = await run("openai_chat", chat_body("abcdef"))
    assert error.code == "limit_exceeded" and applied(events)[1] == "abc"


async def test_model_output_error_still_comes_first():
    body = json.dumps({"error": {"message": "bad", "code": "model_output_error", "model_output": "<tool>"}}).encode()
    events, error = await run("openai_chat", body, status=400, headers={"content-type": "application/json"})
    assert events == [ModelOutputError("bad", "<tool>")] and error.code == "model_output_error"
