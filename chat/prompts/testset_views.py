"""Views of test sets and runs (owner of the prompt only; anyone else gets 404).

The run start is an async view: it writes the run and plans its turns in a thread, then starts
them on this process's turn runner (``chat.turns.registry``), which applies admission control
(per-user and per-process bounds, FIFO queue) exactly as for chat turns.

May import: Django, chat.views (base URL resolution), chat.turns, chat.prompts.*.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.contrib import messages as flash
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.shortcuts import redirect, render
from django.urls import reverse

from chat.prompts import checks as checks_mod
from chat.prompts import selectors, testsets
from chat.prompts.models import TestSet
from chat.providers.base import EndpointConfig
from chat.selectors import endpoint_list_for_user
from chat.turns import TurnSpec, registry


def _testset(user: Any, prompt_id: int, set_id: int) -> tuple[Any, TestSet]:
    prompt = selectors.prompt_get_owned(user=user, prompt_id=prompt_id)
    test_set = TestSet.objects.filter(pk=set_id, prompt=prompt).first()
    if test_set is None:
        raise Http404("No such test set")
    return prompt, test_set


def testset_edit(request: HttpRequest, prompt_id: int, set_id: int | None = None) -> HttpResponse:
    """Create or edit a test set: rows as CSV/JSONL text or an uploaded file (≤ 1 MB, ≤ 200
    rows), checks for all rows (``type: arg`` lines). Shows missing/unused variables against
    the newest version, the run form and the runs."""
    if set_id is None:
        prompt, test_set = selectors.prompt_get_owned(user=request.user, prompt_id=prompt_id), None
    else:
        prompt, test_set = _testset(request.user, prompt_id, set_id)
    latest = selectors.version_latest(prompt=prompt)
    error = ""
    rows_text = testsets.rows_as_csv(test_set.rows) if test_set else ""
    checks_text = checks_mod.as_lines(test_set.checks) if test_set else ""
    name = test_set.name if test_set else "Test set"
    if request.method == "POST":
        name = (request.POST.get("name") or "").strip()[:100] or "Test set"
        rows_text = request.POST.get("rows", "")[: testsets.MAX_BYTES + 1]
        checks_text = request.POST.get("checks", "")[:50_000]
        upload = request.FILES.get("file")
        try:
            if upload is not None:
                if upload.size > testsets.MAX_BYTES:
                    raise testsets.TestSetError("The file is larger than 1 MB.")
                raw: str | bytes = upload.read(testsets.MAX_BYTES + 1)
            else:
                raw = rows_text
            rows = testsets.parse_rows(raw)
            checks = checks_mod.parse_lines(checks_text)
            judge_endpoint = endpoint_list_for_user(user=request.user).filter(pk=request.POST.get("judge_endpoint_id") or 0).first()
            judge = {"endpoint_id": judge_endpoint.pk, "model": (request.POST.get("judge_model") or "").strip()[:200]} if judge_endpoint else {}
            if any(k["type"] == checks_mod.JUDGE for k in checks) or any(k["type"] == checks_mod.JUDGE for r in rows for k in r["checks"]):
                if not judge:
                    raise testsets.TestSetError("A judge check needs a judge endpoint.")
            test_set = testsets.testset_save(prompt=prompt, name=name, rows=rows, checks=checks, test_set=test_set)
            TestSet.objects.filter(pk=test_set.pk).update(judge=judge)
            flash.success(request, f"Test set saved with {len(rows)} rows.")
            return redirect("prompts:testset", prompt.pk, test_set.pk)
        except (testsets.TestSetError, checks_mod.CheckError) as exc:
            error = str(exc)
    missing, unused = testsets.variable_report(latest, test_set.rows) if test_set else ([], [])
    return render(request, "prompts/testset.html", {
        "prompt": prompt, "test_set": test_set, "error": error, "rows_text": rows_text, "checks_text": checks_text,
        "name": name, "missing": missing, "unused": unused, "variables": selectors.version_variables(latest),
        "versions": prompt.versions.order_by("-number"), "endpoints": endpoint_list_for_user(user=request.user),
        "runs": test_set.runs.all()[:20] if test_set else [], "lane_slots": range(testsets.MAX_LANES),
        "latest": latest, "judge": (test_set.judge if test_set else {}) or {},
    })


def _plan_run(request: HttpRequest, prompt_id: int, set_id: int) -> tuple[Any, list[Any]] | HttpResponse:
    prompt, test_set = _testset(request.user, prompt_id, set_id)
    lanes = []
    for j in range(testsets.MAX_LANES):
        number = request.POST.get(f"lane_version_{j}")
        if not number:
            continue
        version = selectors.version_get(prompt=prompt, number=number)
        endpoint = endpoint_list_for_user(user=request.user).filter(pk=request.POST.get(f"lane_endpoint_{j}") or 0).first()
        if endpoint is None:
            flash.error(request, f"Lane {j + 1}: pick one of your endpoints.")
            return redirect("prompts:testset", prompt.pk, test_set.pk)
        model = (request.POST.get(f"lane_model_{j}") or "").strip()[:200] or (version.config or {}).get("model") or endpoint.default_model
        lanes.append(testsets.Lane(version, endpoint, model))
    if not registry.admission.can_queue(request.user.pk):
        flash.error(request, "Too many turns are waiting on this server; try again in a moment.")
        return redirect("prompts:testset", prompt.pk, test_set.pk)
    try:
        return testsets.run_create(user=request.user, test_set=test_set, lanes=lanes)
    except testsets.TestSetError as exc:
        flash.error(request, f"Not run: {exc}")
        return redirect("prompts:testset", prompt.pk, test_set.pk)


def _config(request: HttpRequest, target: Any) -> EndpointConfig:
    from chat.views import endpoint_base_url_for_request

    return EndpointConfig(
        base_url=endpoint_base_url_for_request(request, target.base_url), api_key=target.api_key,
        extra_headers=target.extra_headers, api_style=target.api_style, stream_options=target.stream_options,
        allow_private=True if target.is_simulator else None,
    )


async def testset_run(request: HttpRequest, prompt_id: int, set_id: int) -> HttpResponse:
    """POST: run the test set in the posted lanes (``lane_version_<j>``, ``lane_endpoint_<j>``,
    ``lane_model_<j>``); each row × lane is an ordinary turn on the runner."""
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    result = await sync_to_async(_plan_run)(request, prompt_id, set_id)
    if isinstance(result, HttpResponse):
        return result
    run, plans = result
    user_id = run.owner_id
    for plan in plans:
        a = plan.assistant
        spec = TurnSpec(
            message_id=a.id, conversation_id=plan.conversation_id, user_id=user_id, config=_config(request, plan.target),
            request=plan.request, prompt_price_per_mtok=plan.prompt_price_per_mtok,
            completion_price_per_mtok=plan.completion_price_per_mtok, prefill=plan.prefill,
            conversation_title=plan.title, turn_id=a.turn_id, lane_id=plan.lane_id, plan=plan,
        )
        registry.start(spec, snapshot_meta=dict(a.settings_snapshot))
    return HttpResponse(status=303, headers={"Location": reverse("prompts:run", args=[run.pk])})


def run_page(request: HttpRequest, run_id: int, partial: bool = False) -> HttpResponse:
    """The grid of rows × lanes (the partial is polled while answers are running)."""
    run = testsets.run_get_for_user(user=request.user, run_id=run_id)
    grid = testsets.run_grid(run=run)
    ctx = {"run": run, "grid": grid, "prompt": run.test_set.prompt, "test_set": run.test_set}
    return render(request, "prompts/run.html#grid" if partial else "prompts/run.html", ctx)


def run_grid(request: HttpRequest, run_id: int) -> HttpResponse:
    return run_page(request, run_id, partial=True)


def run_stop(request: HttpRequest, run_id: int) -> HttpResponse:
    """POST: stop the run's answers still running on this process."""
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    run = testsets.run_get_for_user(user=request.user, run_id=run_id)
    stopped = sum(1 for mid in testsets.run_live_message_ids(run=run) if registry.stop(mid))
    flash.info(request, f"Stopped {stopped} running answer{'s' if stopped != 1 else ''}.")
    return redirect("prompts:run", run.pk)


def run_compare(request: HttpRequest, run_id: int) -> HttpResponse:
    """Rows that went from pass to fail (and back) between run ``run_id`` and run ``with``
    (both the user's, of the same test set; 404 otherwise)."""
    a = testsets.run_get_for_user(user=request.user, run_id=run_id)
    other = request.GET.get("with", "")
    b = testsets.run_get_for_user(user=request.user, run_id=int(other) if other.isdigit() else 0)
    if a.test_set_id != b.test_set_id:
        raise Http404("Runs of different test sets")
    return render(request, "prompts/run_compare.html", {
        "a": a, "b": b, "diff": testsets.runs_compare(a=a, b=b), "prompt": a.test_set.prompt, "test_set": a.test_set,
    })


def _judge_plan(request: HttpRequest, run_id: int) -> Any:
    from chat.prompts import judge

    run = testsets.run_get_for_user(user=request.user, run_id=run_id)
    return run, judge.plan(run=run)


async def run_judge(request: HttpRequest, run_id: int) -> HttpResponse:
    """POST: ask the test set's judge endpoint and model each pending ``judge`` check of the
    run's final answers; the questions and answers are stored on the cells."""
    from chat.prompts import judge
    from chat.selectors import EndpointTarget

    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    run, plan = await sync_to_async(_judge_plan)(request, run_id)
    if plan.endpoint is not None and plan.jobs:
        target = await sync_to_async(EndpointTarget.of)(plan.endpoint)
        results = await judge.ask(jobs=plan.jobs, config=_config(request, target), model=plan.model)
        await sync_to_async(judge.store)(results=results)
    return HttpResponse(status=303, headers={"Location": reverse("prompts:run", args=[run.pk])})
