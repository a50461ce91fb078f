"""Issue 3 features against the real llama-server: grammar-constrained JSON schema output in
the styles that carry it, and reasoning from the tiny thinking model through Anthropic
messages and Responses (thinking shows as reasoning)."""

from __future__ import annotations

import json
import uuid

import pytest
from channels.db import database_sync_to_async
from django.contrib.auth import get_user_model

from chat import services
from chat.models import Message
from chat.turns import registry
from tests.helpers import deltas
from tests.llama import llama_paths, missing_reason, start_llama_server
from tests.test_consumers import connect, send_frame, until_final

pytestmark = [pytest.mark.real_upstream, pytest.mark.django_db(transaction=True)]

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}, "country": {"type": "string"}},
          "required": ["city", "country"]}


@pytest.fixture(scope="module")
def llama():  # noqa: ANN201
    paths = llama_paths()
    if paths is None:
        pytest.skip(missing_reason())
    smol = start_llama_server(paths[1])
    think = start_llama_server(paths[2])
    yield smol, think
    smol.stop()
    think.stop()


def setup_for(style: str, base_url: str):  # noqa: ANN201
    user = get_user_model().objects.create_user(f"r-{uuid.uuid4().hex[:6]}", password="pw-123456")
    endpoint = services.endpoint_create(user=user, name=style, base_url=base_url, api_style=style)
    return user, endpoint, services.conversation_create(user=user, endpoint=endpoint)


@pytest.mark.parametrize("style", ["openai_chat", "openai_responses"])
async def test_json_schema_is_grammar_constrained_on_llama(style, llama) -> None:  # noqa: ANN001
    smol, _ = llama
    user, endpoint, conv = await database_sync_to_async(setup_for)(style, smol.base_url)
    comm = await connect(user, conv.pk)
    await comm.send_json_to(send_frame(endpoint.pk, "smollm2", content="Name the capital of France as JSON.",
                                       temperature="0", max_tokens="60", response_format="json_schema",
                                       schema_name="place", json_schema=json.dumps(SCHEMA)))
    _, mid, status = await until_final(comm, timeout=120)
    await registry.drain()
    row = await database_sync_to_async(Message.objects.get)(pk=mid)
    assert status == "complete", row.error
    assert row.metrics["schema_check"]["valid"] is True, (row.content, row.metrics["schema_check"])
    assert set(json.loads(row.content)) >= {"city", "country"}
    await comm.disconnect()


@pytest.mark.parametrize("style", ["openai_chat", "anthropic_messages", "openai_responses"])
async def test_reasoning_from_llama_in_every_style(style, llama) -> None:  # noqa: ANN001
    _, think = llama
    user, endpoint, conv = await database_sync_to_async(setup_for)(style, think.base_url)
    comm = await connect(user, conv.pk)
    await comm.send_json_to(send_frame(endpoint.pk, "think-tiny", content="Think.", max_tokens="24", seed="1"))
    frames, mid, status = await until_final(comm, timeout=120)
    await registry.drain()
    row = await database_sync_to_async(Message.objects.get)(pk=mid)
    assert status == "complete", row.error
    assert row.reasoning.strip(), "llama-server's reasoning did not arrive as reasoning"
    assert [d for d in deltas(frames) if d["kind"] == "reasoning"], "reasoning streamed as reasoning deltas"
    await comm.disconnect()
