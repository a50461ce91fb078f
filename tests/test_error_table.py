"""Every upstream error of the seeds, as the user sees it: one table-driven test.

Each row sends a real request through the real adapter to the standalone simulator (which
answers with the seeds' error bodies: seed 000 validation examples, seed 001's codes, seed 004's
Anthropic types), or feeds a seed 002 example body to the shared error parser, then renders
the message partial the page and the final frame use, and asserts the status, code, message,
request id and the hint of what to do.
"""

from __future__ import annotations

import html as html_lib
import json
import uuid
from pathlib import Path

import pytest

from chat.frames import MessageView, render_message
from chat.providers import get_adapter
from chat.providers.base import ChatMessage, ChatRequest, EndpointConfig, ProviderError
from chat.providers.errors import parse_error
from chat.providers.http import make_client

SEEDS = Path(__file__).parent / "fixtures" / "seeds"
HI = (ChatMessage("user", "hi"),)


def shown(exc: ProviderError) -> str:
    view = MessageView(id=uuid.uuid4(), role="assistant", status="error", error=exc.as_dict(), conversation_id=1)
    return render_message(view)


async def fail(sim, style: str, request: ChatRequest, *, key: str = "sk-table-0000", header: str = "") -> ProviderError:  # noqa: ANN001
    config = EndpointConfig(base_url=sim.base_url, api_key=key, api_style=style,
                            extra_headers={"X-Simulator-Options": header} if header else {})
    client = make_client()
    try:
        async for _ in get_adapter(style).stream(client, config, request):
            pass
    except ProviderError as exc:
        return exc
    finally:
        await client.aclose()
    raise AssertionError("no error raised")


# (style, model, messages, header knobs, status, code, message part, hint part)
ROWS = [
    # seed 000 validation examples (SambaNova chat completions)
    ("openai_chat", "sim-fast", (), "", 400, "empty_array", "messages", "parameter messages"),
    ("openai_chat", "sim-fast", (ChatMessage("wizard", "hi"),), "", 400, None, "wizard", "parameter"),
    ("openai_chat", "", HI, "", 400, None, "model", "refused"),
    ("openai_chat", "no-such-model", HI, "", 404, None, "model", "Pick another model"),
    ("openai_chat", "sim-fast?fault=401", HI, "", 401, None, "", "API key"),
    ("openai_chat", "sim-fast?require_key=1", HI, "", 401, None, "", "API key"),
    # seed 001 status codes (Sansa)
    ("openai_chat", "sansa-auto?fault=402", HI, "", 402, None, "credit", "credits"),
    ("openai_chat", "sim-fast?fault=408", HI, "", 408, None, "", "timed out"),
    ("openai_chat", "sim-fast?fault=410", HI, "", 410, None, "", ""),
    ("openai_chat", "sim-fast?fault=413", HI, "", 413, None, "", "too large"),
    ("openai_chat", "sim-fast?fault=429", HI, "", 429, None, "", "wait 7 s"),
    ("openai_chat", "sim-fast?fault=500", HI, "", 500, None, "", "trouble"),
    ("openai_chat", "sim-fast?fault=503", HI, "", 503, None, "Service Temporarily Unavailable", "trouble"),
    # seed 004 / Anthropic error types
    ("anthropic_messages", "sim-fast?fault=400", HI, "", 400, "invalid_request_error", "", "refused"),
    ("anthropic_messages", "sim-fast?fault=401", HI, "", 401, "authentication_error", "", "API key"),
    ("anthropic_messages", "sim-fast?fault=403", HI, "", 403, "permission_error", "", "API key"),
    ("anthropic_messages", "sim-fast?fault=404", HI, "", 404, "not_found_error", "", "Pick another model"),
    ("anthropic_messages", "sim-fast?fault=413", HI, "", 413, "request_too_large", "", "too large"),
    ("anthropic_messages", "sim-fast?fault=429", HI, "", 429, "rate_limit_error", "", "wait 7 s"),
    ("anthropic_messages", "sim-fast?fault=500", HI, "", 500, "api_error", "", "trouble"),
    ("anthropic_messages", "sim-fast?fault=529", HI, "", 529, "overloaded_error", "", "trouble"),
    # OpenAI responses
    ("openai_responses", "sim-fast?fault=429", HI, "", 429, None, "", "wait 7 s"),
    ("openai_responses", "sim-fast?fault=500", HI, "", 500, None, "", "trouble"),
]


@pytest.mark.parametrize("style,model,messages,header,status,code,message,hint", ROWS,
                         ids=[f"{r[0]}-{r[4]}-{i}" for i, r in enumerate(ROWS)])
async def test_upstream_error_is_shown_with_status_code_message_request_id_and_hint(
    sim, style, model, messages, header, status, code, message, hint  # noqa: ANN001
) -> None:
    key = "" if "require_key" in model else "sk-table-0000"  # the missing-key row sends none
    exc = await fail(sim, style, ChatRequest(model=model, messages=messages, params={"max_tokens": 16}), header=header, key=key)
    assert exc.status == status, exc.as_dict()
    if code:
        assert exc.code == code, exc.as_dict()
    html = shown(exc)
    assert f"HTTP {status}" in html
    assert exc.message and exc.message.split("\n")[0][:40].replace("&", "&amp;").replace("'", "&#x27;").replace('"', "&quot;").replace("<", "&lt;") in html
    if message:
        assert message.lower() in exc.message.lower()
    if exc.code:
        assert exc.code in html
    if style != "openai_responses" or exc.request_id:
        assert exc.request_id and exc.request_id in html
    if hint:
        assert hint in html
    assert "Traceback" not in html and "sk-table-0000" not in html


def _seed_002_error_examples() -> list[tuple[str, int, dict]]:
    doc = json.loads((SEEDS / "002_4752eb619b9f0e10.txt").read_text())
    rows = []
    for path, ops in doc["paths"].items():
        for verb, op in ops.items():
            for status, resp in (op.get("responses") or {}).items():
                if not status.isdigit() or int(status) < 400:
                    continue
                for content in (resp.get("content") or {}).values():
                    for name, ex in (content.get("examples") or {}).items():
                        value = ex.get("value")
                        if value is not None:
                            rows.append((f"{verb} {path} {status} {name}", int(status), value))
    return rows


SEED2 = _seed_002_error_examples()


@pytest.mark.parametrize("label,status,body", SEED2, ids=[r[0] for r in SEED2])
def test_every_seed_002_error_example_is_shown_clearly(label: str, status: int, body) -> None:  # noqa: ANN001
    raw = body if isinstance(body, str) else json.dumps(body)
    exc = parse_error(status, {"x-request-id": "req-seed"}, raw.encode(), ["sk-secret-seed"])
    html = shown(exc)
    assert exc.status == status and f"HTTP {status}" in html
    assert exc.message and "Traceback" not in html
    assert exc.request_id and exc.request_id in html
    # A hint of what to do for every status the seeds use.
    assert 'class="err-hint"' in html or status in (410, 501), html


def test_context_overflow_says_so_plainly() -> None:
    body = {"error": {"message": "This model's maximum context length is 8192 tokens. However, you requested 9000 tokens.",
                      "type": "invalid_request_error", "code": "context_length_exceeded", "param": "messages"}}
    exc = parse_error(400, {}, json.dumps(body).encode(), [])
    assert "longer than the model's context window" in html_lib.unescape(shown(exc))
