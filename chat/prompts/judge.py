"""Judge checks: ask a chosen endpoint and model a yes/no rubric question about each final
answer of a run; the question sent and the judge's answer are stored on the cell and shown.

The verdict is the judge answer's first word (``yes`` passes; ``no`` or anything else fails).
Judge requests are bounded (:data:`CONCURRENCY` at once per run, :data:`MAX_JUDGE_TOKENS`
each, :data:`TIMEOUT_S` per request) and never stream to anyone.

May import: Django, chat.models, chat.providers, chat.history, chat.prompts.*.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from chat.history import make_request
from chat.models import Endpoint, Message, MessageStatus
from chat.prompts import checks as checks_mod
from chat.prompts.models import TestRun, TestRunCell
from chat.providers import get_adapter
from chat.providers.base import ChatMessage, ChatRequest, EndpointConfig, TextDelta
from chat.providers.http import get_client
from chat.selectors import endpoint_list_for_user

CONCURRENCY = 2
MAX_JUDGE_TOKENS = 64
TIMEOUT_S = 60.0
SYSTEM = "You grade answers against a rubric. Reply with yes or no first, then at most one short sentence."


def judge_prompt(question: str, answer: str, rubric: str) -> str:
    """The user message sent to the judge."""
    return (f"Question that was asked:\n{question}\n\nAnswer given:\n{answer}\n\nRubric: {rubric}\n\n"
            "Does the answer satisfy the rubric? Reply yes or no.")


def verdict(text: str) -> bool:
    """True when the judge's answer starts with "yes" (case, spaces and punctuation ignored)."""
    m = re.match(r"\W*(\w+)", text or "")
    return bool(m) and m.group(1).lower() == "yes"


@dataclass(frozen=True)
class Job:
    cell_id: int
    rubric: str
    prompt: str


@dataclass(frozen=True)
class Plan:
    """What a run's judging needs: the judge endpoint (None: not set or not the user's), model
    and one job per (cell, rubric) of final, complete answers not judged yet."""

    endpoint: Endpoint | None
    model: str
    jobs: tuple[Job, ...]


def plan(*, run: TestRun) -> Plan:
    """The judge jobs of ``run`` (sync; the caller checked the user owns the run)."""
    test_set = run.test_set
    cfg = test_set.judge or {}
    endpoint = endpoint_list_for_user(user=run.owner).filter(pk=cfg.get("endpoint_id") or 0).first()
    cells = list(run.cells.filter(judge__isnull=True, message_id__isnull=False))
    answers = {m.id: m for m in Message.objects.filter(id__in=[c.message_id for c in cells], status=MessageStatus.COMPLETE)}
    questions = dict(Message.objects.filter(id__in=[m.parent_id for m in answers.values() if m.parent_id]).values_list("id", "content"))
    jobs = []
    for c in cells:
        m = answers.get(c.message_id)
        if m is None or c.row >= len(test_set.rows):
            continue
        for k in [*test_set.checks, *test_set.rows[c.row]["checks"]]:
            if k["type"] == checks_mod.JUDGE:
                jobs.append(Job(c.pk, k["arg"], judge_prompt(questions.get(m.parent_id, ""), m.content, k["arg"])))
    return Plan(endpoint, (cfg.get("model") or (endpoint.default_model if endpoint else "")), tuple(jobs))


StreamFn = Callable[[EndpointConfig, ChatRequest], AsyncIterator[Any]]


def _stream(config: EndpointConfig, request: ChatRequest) -> AsyncIterator[Any]:
    return get_adapter(config.api_style).stream(get_client(), config, request)


async def ask(*, jobs: tuple[Job, ...], config: EndpointConfig, model: str, stream_fn: StreamFn | None = None) -> dict[int, list[dict[str, Any]]]:
    """Ask every job (at most :data:`CONCURRENCY` at once); ``{cell_id: [{"rubric", "prompt",
    "answer", "ok", "error"}]}``. A failed request is a failed check with its error."""
    stream_fn = stream_fn or _stream
    gate = asyncio.Semaphore(CONCURRENCY)
    out: dict[int, list[dict[str, Any]]] = {}

    async def one(job: Job) -> None:
        request = make_request(api_style=config.api_style, model=model, system=SYSTEM,
                               stored={"max_tokens": MAX_JUDGE_TOKENS, "temperature": 0.0},
                               messages=(ChatMessage("user", job.prompt),))
        text, error = "", ""
        async with gate:
            try:
                async with asyncio.timeout(TIMEOUT_S):
                    async for ev in stream_fn(config, request):
                        if isinstance(ev, TextDelta):
                            text += ev.text
                            if len(text) > 4000:
                                break
            except Exception as exc:  # noqa: BLE001 - any upstream failure fails this check
                error = f"judge request failed: {str(exc)[:200]}"
        out.setdefault(job.cell_id, []).append({
            "rubric": job.rubric, "prompt": job.prompt, "answer": text, "ok": bool(text) and not error and verdict(text),
            "error": error,
        })

    await asyncio.gather(*(one(j) for j in jobs))
    return out


def store(*, results: dict[int, list[dict[str, Any]]]) -> None:
    """Write each cell's verdicts once (one UPDATE per cell)."""
    for cell_id, verdicts in results.items():
        TestRunCell.objects.filter(pk=cell_id, judge__isnull=True).update(judge=verdicts)
