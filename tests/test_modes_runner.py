"""The mode runner (``chat.modes.runner``) with scripted adapter streams: coalesced frames in
order, the key never reaching a frame or the row, the answer limit, a provider error keeping the
text so far, the admission slot always freed, one final write."""

from __future__ import annotations

import asyncio

import pytest
from django.contrib.auth import get_user_model

from chat import services
from chat.modes import runner
from chat.modes import services as mode_services
from chat.modes.models import ModeRun
from chat.modes.requests import completion_request
from chat.providers.base import (
    EndpointConfig,
    Finish,
    LogprobsDelta,
    ProviderError,
    RawEvent,
    ResponseStarted,
    TextDelta,
    TokenLogprob,
    Usage,
)
from chat.turns import registry

pytestmark = [pytest.mark.django_db(transaction=True)]

KEY = "sk-secret-key-123456"
CONFIG = EndpointConfig(base_url="http://127.0.0.1:9/v1", api_key=KEY)


@pytest.fixture
def run_row():  # noqa: ANN201
    user = get_user_model().objects.create_user("u1", password="pw-123456")
    endpoint = services.endpoint_create(user=user, name="e", base_url="http://127.0.0.1:9/v1", api_key=KEY)
    run = mode_services.run_create(user=user, endpoint=endpoint, kind="completion", model="m",
                                   params={"max_tokens": 5, "logprobs": 1}, prompt="Once")
    assert mode_services.run_claim(run_id=run.pk)
    return run


def scripted(events, fail: Exception | None = None):  # noqa: ANN001, ANN201
    async def gen(client, config, request):  # noqa: ANN001, ANN202
        for ev in events:
            await asyncio.sleep(0.001)
            yield ev
        if fail is not None:
            raise fail
    return gen


async def go(run, monkeypatch, events, fail=None):  # noqa: ANN001, ANN201
    monkeypatch.setattr(runner.openai_completions, "stream", scripted(events, fail))
    frames: list[dict] = []
    before = registry.admission.running
    await runner.run_completion(run.pk, run.owner_id, CONFIG, completion_request(run), frames.append)
    assert registry.admission.running == before  # the slot is always freed
    return frames, await asyncio.to_thread(ModeRun.objects.get, pk=run.pk)


async def test_complete_run_stores_text_logprobs_usage_and_scrubs_the_key(run_row, monkeypatch) -> None:  # noqa: ANN001
    events = [ResponseStarted(200), RawEvent("", '{"x":1}'), TextDelta(" upon"), LogprobsDelta((TokenLogprob(" upon", -0.1),)),
              TextDelta(" a " + KEY[:8]), TextDelta(KEY[8:] + " time"), Usage(prompt_tokens=2, completion_tokens=5),
              Finish("length")]
    frames, row = await go(run_row, monkeypatch, events)
    assert row.status == "complete" and row.output == " upon a [REDACTED] time" and row.finish_reason == "length"
    assert row.usage["completion_tokens"] == 5 and row.logprobs[0]["token"] == " upon"
    assert row.metrics["ttft_ms"] is not None and row.inspect["events"] == [{"event": "", "data": '{"x":1}'}]
    assert row.inspect["request"]["headers"]["Authorization"] == "[REDACTED]"
    assert frames[-1] == {"t": "final", "status": "complete"}
    streamed = "".join(f.get("text", "") for f in frames if f["t"] == "delta")
    assert streamed == row.output and KEY not in repr(frames)


async def test_provider_error_keeps_the_text_so_far(run_row, monkeypatch) -> None:  # noqa: ANN001
    err = ProviderError("upstream went away", code="stream_cut")
    frames, row = await go(run_row, monkeypatch, [TextDelta("partial")], fail=err)
    assert row.status == "error" and row.output == "partial" and row.error["code"] == "stream_cut"
    assert frames[-1] == {"t": "final", "status": "error"}


async def test_answer_limit(run_row, monkeypatch, settings) -> None:  # noqa: ANN001
    settings.PLAYGROUND_MAX_ANSWER_CHARS = 10
    frames, row = await go(run_row, monkeypatch, [TextDelta("x" * 6), TextDelta("y" * 6), TextDelta("never")])
    assert row.status == "error" and row.error["code"] == "limit_exceeded" and "never" not in row.output
