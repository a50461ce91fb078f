"""Issue 3 through the websocket, against the simulator, in every API style: the relay calls
the right path, tools round-trip with a typed result, structured output is checked against the
schema, images reach the upstream, logprobs are kept, count_tokens answers; "View code" gives
the same body the relay sends and no secret."""

from __future__ import annotations

import base64
import html
import json
import re
import shutil
import subprocess
import sys
import uuid

import pytest
from channels.db import database_sync_to_async
from django.contrib.auth import get_user_model
from django.test import Client

from chat import services
from chat.models import Attachment, Message
from chat.turns import registry
from tests.helpers import sim_text  # noqa: F401
from tests.test_consumers import connect, send_frame, until_final

pytestmark = [pytest.mark.django_db(transaction=True)]

STYLES = ["openai_chat", "anthropic_messages", "openai_responses"]
PATHS = {"openai_chat": "/v1/chat/completions", "anthropic_messages": "/v1/messages",
         "openai_responses": "/v1/responses"}
KEY = "sk-dialect-SECRET-9876"
FAST = "sim-fast?ttft_ms=5&delay_ms=1&length=10&reasoning=0"
WEATHER = [{"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}, "population": {"type": "integer"}},
          "required": ["city", "population"], "additionalProperties": False}
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAwS2OUAAAAABJRU5ErkJggg==")


def user_with(style: str, sim, *, keyed: bool = True):  # noqa: ANN001, ANN201
    user = get_user_model().objects.create_user(f"u-{style}-{uuid.uuid4().hex[:4]}", password="pw-123456")
    endpoint = services.endpoint_create(user=user, name=f"sim {style}", base_url=sim.base_url, api_style=style,
                                        api_key=KEY if keyed else "",
                                        extra_headers={"X-Team": "team-SECRET-hdr"} if keyed else {})
    conversation = services.conversation_create(user=user, endpoint=endpoint)
    return user, endpoint, conversation


def last(sim, style: str) -> dict:  # noqa: ANN001
    return [r for r in sim.requests() if r["path"] == PATHS[style]][-1]


@pytest.mark.parametrize("style", STYLES)
async def test_tools_round_trip_in_every_style(style, fresh_sim) -> None:  # noqa: ANN001
    user, endpoint, conv = await database_sync_to_async(user_with)(style, fresh_sim)
    comm = await connect(user, conv.pk)
    await comm.send_json_to(send_frame(endpoint.pk, FAST + "&tool=1", content="Weather in Paris?",
                                       tools=json.dumps(WEATHER), tool_choice="auto"))
    frames, mid, status = await until_final(comm)
    await registry.drain()
    assert status == "complete"
    row = await database_sync_to_async(Message.objects.get)(pk=mid)
    assert row.finish_reason == "tool_calls"
    assert len(row.tool_calls) == 1 and row.tool_calls[0]["name"] == "get_weather"
    assert "city" in json.loads(row.tool_calls[0]["arguments"])
    assert "get_weather" in frames[-1] and "tool-result-form" in frames[-1]
    call_id = row.tool_calls[0]["id"]
    # The user types the tool's result and the turn continues.
    await comm.send_json_to({"action": "tool_result", "message_id": mid, "tool_call_id": call_id,
                             "content": '{"temp_c": 21}'})
    frames, mid2, status = await until_final(comm)
    await registry.drain()
    answer = await database_sync_to_async(Message.objects.get)(pk=mid2)
    assert status == "complete" and "The tool returned" in answer.content and "21" in answer.content
    rec = last(fresh_sim, style)
    assert rec["path"] == PATHS[style]
    body = json.dumps(rec["body"])
    assert call_id in body and "temp_c" in body  # the tool call and its result went back upstream
    await comm.disconnect()


@pytest.mark.parametrize("style", ["openai_chat", "openai_responses"])
@pytest.mark.parametrize("invalid", [False, True])
async def test_structured_output_is_checked_against_the_schema(style, invalid, fresh_sim) -> None:  # noqa: ANN001
    user, endpoint, conv = await database_sync_to_async(user_with)(style, fresh_sim)
    comm = await connect(user, conv.pk)
    model = FAST + ("&invalid_json=1" if invalid else "")
    await comm.send_json_to(send_frame(endpoint.pk, model, content="A city as JSON", response_format="json_schema",
                                       schema_name="city", json_schema=json.dumps(SCHEMA), schema_strict="on"))
    frames, mid, status = await until_final(comm)
    await registry.drain()
    row = await database_sync_to_async(Message.objects.get)(pk=mid)
    check = row.metrics["schema_check"]
    assert check["valid"] is (not invalid), check
    if invalid:
        assert check["errors"] and "Does not match" in frames[-1]
    else:
        assert set(json.loads(row.content)) == {"city", "population"}
        assert "Valid against the JSON schema" in frames[-1] and "json-answer" in frames[-1]
    body = last(fresh_sim, style)["body"]
    sent = body.get("response_format") or body.get("text", {}).get("format")
    assert json.dumps(SCHEMA["properties"]) in json.dumps(sent)
    await comm.disconnect()


@pytest.mark.parametrize("style", STYLES)
async def test_image_attachment_reaches_the_upstream(style, fresh_sim) -> None:  # noqa: ANN001
    user, endpoint, conv = await database_sync_to_async(user_with)(style, fresh_sim)
    att = await database_sync_to_async(Attachment.objects.create)(
        owner=user, kind="image", media_type="image/png", filename="dot.png", data=PNG, size=len(PNG))
    comm = await connect(user, conv.pk)
    await comm.send_json_to(send_frame(endpoint.pk, FAST, content="What is this?", attachment_ids=[str(att.pk)]))
    frames, mid, status = await until_final(comm)
    await registry.drain()
    row = await database_sync_to_async(Message.objects.get)(pk=mid)
    assert status == "complete" and "I see 1 image" in row.content
    assert f"/a/{att.pk}/" in "".join(frames)  # the thumbnail shows in the user's message
    rec = last(fresh_sim, style)
    assert rec["media"] and rec["media"][0]["bytes"] == len(PNG)
    # The same attachment cannot be sent twice; another user's attachment is refused.
    await comm.send_json_to(send_frame(endpoint.pk, FAST, content="again", attachment_ids=[str(att.pk)]))
    assert "attachment" in (await comm.receive_from(timeout=5)).lower()
    await comm.disconnect()


async def test_logprobs_are_kept_and_shown(fresh_sim) -> None:  # noqa: ANN001
    user, endpoint, conv = await database_sync_to_async(user_with)("openai_chat", fresh_sim)
    comm = await connect(user, conv.pk)
    await comm.send_json_to(send_frame(endpoint.pk, FAST, logprobs="on", top_logprobs="3"))
    frames, mid, status = await until_final(comm)
    await registry.drain()
    row = await database_sync_to_async(Message.objects.get)(pk=mid)
    assert row.logprobs and len(row.logprobs[0]["top"]) == 3
    assert "Token probabilities" in frames[-1] and 'class="lp ' in frames[-1]
    assert last(fresh_sim, "openai_chat")["body"]["top_logprobs"] == 3
    await comm.disconnect()


async def test_settings_the_style_does_not_take_are_not_sent(fresh_sim) -> None:  # noqa: ANN001
    user, endpoint, conv = await database_sync_to_async(user_with)("anthropic_messages", fresh_sim)
    comm = await connect(user, conv.pk)
    await comm.send_json_to(send_frame(endpoint.pk, FAST, seed="7", frequency_penalty="1", top_k="5",
                                       thinking_budget="2048", reasoning_effort="high"))
    await until_final(comm)
    await registry.drain()
    body = last(fresh_sim, "anthropic_messages")["body"]
    assert body["top_k"] == 5 and body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert "seed" not in body and "frequency_penalty" not in body and "reasoning_effort" not in body
    await comm.disconnect()


async def test_count_tokens_on_an_anthropic_endpoint(fresh_sim) -> None:  # noqa: ANN001
    user, endpoint, conv = await database_sync_to_async(user_with)("anthropic_messages", fresh_sim)
    comm = await connect(user, conv.pk)
    await comm.send_json_to({"action": "count_tokens", "content": "How many tokens is this?", "endpoint_id": str(endpoint.pk),
                             "model": "sim-fast"})
    frame = await comm.receive_from(timeout=10)
    assert "Input tokens (count_tokens):" in frame
    assert [r for r in fresh_sim.requests() if r["path"] == "/v1/messages/count_tokens"]
    await comm.disconnect()


@pytest.mark.parametrize("keyed", [True, False], ids=["keyed", "keyless"])
@pytest.mark.parametrize("style", STYLES)
async def test_view_code_snippets_send_the_same_request_as_the_relay_and_no_secret(style, keyed, fresh_sim, tmp_path) -> None:  # noqa: ANN001
    """Issue 7 item 8, end to end: the View code dialog (the view's HTML, unescaped as the
    browser shows it) for the composer's settings, then the same settings sent as a turn; each
    snippet (curl, Python SDK, Node fetch) run against the simulator sends the relay's body and
    key. A keyless endpoint's snippets run with no environment variable at all."""
    if shutil.which("node") is None:
        pytest.skip("node is not installed: the JavaScript snippet cannot be run")
    user, endpoint, conv = await database_sync_to_async(user_with)(style, fresh_sim, keyed=keyed)
    settings = {"endpoint_id": str(endpoint.pk), "model": FAST, "content": 'Same body please: "true" $HOME `x`',
                "system_prompt": "Be exact", "temperature": "0.5", "max_tokens": "20", "top_p": "0.9",
                "tools": json.dumps(WEATHER), "tool_choice": "auto"}

    @database_sync_to_async
    def view_code() -> dict[str, str]:
        client = Client()
        client.force_login(user)
        resp = client.get(f"/c/{conv.pk}/code/", settings)
        assert resp.status_code == 200
        page = resp.content.decode()
        return {lang: html.unescape(re.search(rf'<pre class="snippet" id="snippet-{lang}"[^>]*>(.*?)</pre>', page, re.S)[1])
                for lang in ("curl", "python", "javascript")}

    code = await view_code()
    for text in code.values():
        assert KEY not in text and "team-SECRET-hdr" not in text
    comm = await connect(user, conv.pk)
    frame = send_frame(endpoint.pk, FAST, **{k: v for k, v in settings.items() if k not in ("endpoint_id", "model")})
    await comm.send_json_to(frame)
    _, _, status = await until_final(comm)
    await registry.drain()
    await comm.disconnect()
    assert status == "complete"
    relay = last(fresh_sim, style)
    assert relay["body"]["messages" if style != "openai_responses" else "input"]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    if keyed:
        env |= {"SIM_" + style.upper() + "_API_KEY": KEY, "HEADER_X_TEAM": "team-SECRET-hdr"}
    runs = {"curl": ["sh", "snippet.sh"], "python": [sys.executable, "snippet.py"], "javascript": ["node", "snippet.js"]}
    for lang, cmd in runs.items():
        (tmp_path / cmd[1]).write_text(code[lang], encoding="utf-8")
        out = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)  # noqa: ASYNC221
        assert out.returncode == 0, (lang, out.stderr)
        rec = last(fresh_sim, style)
        assert rec["request_id"] != relay["request_id"]
        assert rec["body"] == relay["body"], lang
        assert rec["auth_fingerprint"] == relay["auth_fingerprint"], lang
        assert rec["headers"].get("x-team") == relay["headers"].get("x-team"), lang
        relay = rec
