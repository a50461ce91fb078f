"""Test sets (issue 13): rows from CSV/JSONL with limits, checks (RE2 regex, JSON schema,
latency and cost limits), missing/unused variables, the run grid's pass rates, and a second
user who gets 404 for every test-set and run view and starts no turn."""

from __future__ import annotations

import uuid

import pytest
from django.test import Client

from chat import services
from chat.models import Conversation, Message
from chat.prompts import checks, testsets
from chat.prompts import services as psvc
from chat.prompts.models import Prompt, TestRun, TestRunCell, TestSet
from tests.accounts import PASSWORD, client_for, fast_accounts  # noqa: F401


def make_prompt(user) -> Prompt:  # noqa: ANN001
    return psvc.prompt_create(user=user, name="capital", content=psvc.VersionContent(
        "Answer briefly.", ({"role": "user", "content": "Capital of {{country}}?"},), {"model": "sim-fast", "params": {}}))


def test_checks() -> None:
    run = checks.run_check
    assert run({"type": "contains", "arg": "Paris"}, "It is Paris.", {})["ok"]
    assert not run({"type": "not_contains", "arg": "sorry"}, "sorry!", {})["ok"]
    assert run({"type": "equals", "arg": "42"}, " 42\n", {})["ok"]
    assert run(checks.parse_check("regex", r"^\d+$"), "123", {})["ok"]
    with pytest.raises(checks.CheckError):
        checks.parse_check("regex", r"(a)\1")  # back-references: not RE2
    assert run({"type": "json", "arg": ""}, '{"a": 1}', {})["ok"]
    r = run({"type": "json", "arg": ""}, "nope", {})
    assert not r["ok"] and r["reason"].startswith("not JSON")
    schema = checks.parse_check("schema", '{"type": "object", "required": ["city"]}')
    assert run(schema, '{"city": "Paris"}', {})["ok"]
    r = run(schema, '{"town": "Paris"}', {})
    assert not r["ok"] and "city" in r["reason"]
    assert run(checks.parse_check("max_ttft_ms", "500"), "", {"ttft_ms": 120})["ok"]
    r = run(checks.parse_check("max_ttft_ms", "100"), "", {"ttft_ms": 120})
    assert not r["ok"] and "120" in r["reason"]
    assert not run(checks.parse_check("max_cost_usd", "0.01"), "", {})["ok"]  # not measured
    assert checks.parse_lines("contains: a\n\njson\nmax_total_ms: 3000") == [
        {"type": "contains", "arg": "a"}, {"type": "json", "arg": ""}, {"type": "max_total_ms", "arg": 3000.0}]
    with pytest.raises(checks.CheckError):
        checks.parse_lines("frobnicate: x")


def test_rows_csv_jsonl_and_limits() -> None:
    rows = testsets.parse_rows("country,check:contains,check:json\nFrance,Paris,\nJapan,Tokyo,1\n")
    assert rows == [
        {"vars": {"country": "France"}, "checks": [{"type": "contains", "arg": "Paris"}]},
        {"vars": {"country": "Japan"}, "checks": [{"type": "contains", "arg": "Tokyo"}, {"type": "json", "arg": ""}]},
    ]
    assert testsets.parse_rows(testsets.rows_as_csv(rows)) == rows
    assert testsets.parse_rows(b'{"country": "Peru", "check:regex": "^L"}\n') == [
        {"vars": {"country": "Peru"}, "checks": [{"type": "regex", "arg": "^L"}]}]
    with pytest.raises(testsets.TestSetError, match="200 rows"):
        testsets.parse_rows("a\n" + "x\n" * 201)
    with pytest.raises(testsets.TestSetError, match="1 MB"):
        testsets.parse_rows(b"a\n" + b"x" * (1024 * 1024))
    with pytest.raises(testsets.TestSetError, match="JSONL line 1"):
        testsets.parse_rows("{bad")


def test_testset_views_report_variables_and_are_owner_only(alice, bob) -> None:  # noqa: ANN001
    p = make_prompt(alice)
    a = client_for(alice)
    r = a.post(f"/prompts/{p.pk}/sets/new/", {"name": "caps", "rows": '{"country": "France", "extra": 1}\n{"extra": 2}\n', "checks": "contains: a"})
    ts = TestSet.objects.get()
    assert r.status_code == 302 and len(ts.rows) == 2 and ts.checks == [{"type": "contains", "arg": "a"}]
    page = a.get(f"/prompts/{p.pk}/sets/{ts.pk}/").content.decode()
    assert 'id="missing-vars"' in page and "country" in page  # row 2 has no country
    assert 'id="unused-vars"' in page and "extra" in page
    r = a.post(f"/prompts/{p.pk}/sets/{ts.pk}/", {"name": "caps", "rows": "country\nFrance\n", "checks": "regex: (a)\\1"})
    assert "not supported" in r.content.decode()
    assert TestSet.objects.get().rows == ts.rows  # nothing saved
    # Running with a missing variable is refused before any turn.
    n_conv = Conversation.objects.count()
    r = a.post(f"/prompts/{p.pk}/sets/{ts.pk}/run/", {"lane_version_0": "1", "lane_endpoint_0": alice.endpoints.get().pk}, follow=True)
    assert "rows lack values for country" in r.content.decode() and Conversation.objects.count() == n_conv
    assert not TestRun.objects.exists()
    # Bob: 404 everywhere, nothing changes, no turn.
    b = client_for(bob)
    for url in (f"/prompts/{p.pk}/sets/new/", f"/prompts/{p.pk}/sets/{ts.pk}/"):
        assert b.get(url).status_code == 404
        assert b.post(url, {"name": "x", "rows": "country\nX\n"}).status_code == 404
    assert b.post(f"/prompts/{p.pk}/sets/{ts.pk}/run/", {"lane_version_0": "1", "lane_endpoint_0": bob.endpoints.get().pk}).status_code == 404
    assert TestSet.objects.get().rows == ts.rows and not TestRun.objects.exists() and Conversation.objects.count() == n_conv


def test_run_grid_pass_rates_from_stored_answers(alice, bob) -> None:  # noqa: ANN001
    p = make_prompt(alice)
    ts = testsets.testset_save(prompt=p, name="caps", rows=testsets.parse_rows(
        "country,check:contains\nFrance,Paris\nJapan,Tokyo\nPeru,Lima\n"), checks=[{"type": "max_ttft_ms", "arg": 500.0}])
    endpoint = alice.endpoints.get()
    run, plans = testsets.run_create(user=alice, test_set=ts, lanes=[
        testsets.Lane(p.versions.get(), endpoint, "sim-fast"), testsets.Lane(p.versions.get(), endpoint, "sim-slow")])
    assert len(plans) == 6 and all(pl.user_message.content.startswith("Capital of ") for pl in plans)
    assert all(row.prompt_version_id == p.versions.get().pk for pl in plans for row in pl.rows)
    for pl in plans:
        services.turn_commit(plan=pl)
    answers = {(0, 0): ("Paris", 100), (1, 0): ("Kyoto", 100), (2, 0): ("Lima", 900),
               (0, 1): ("Paris", 200), (1, 1): ("Tokyo", 200), (2, 1): ("Lima", 300)}
    for cell in run.cells.all():
        text, ttft = answers[(cell.row, cell.lane)]
        services.message_complete(message_id=cell.message_id, status="complete", content=text, reasoning="",
                                  finish_reason="stop", usage={}, usage_raw={}, metrics={"ttft_ms": ttft, "tokens_per_sec": 10.0},
                                  error={}, inspect={})
    grid = testsets.run_grid(run=run)
    assert grid["done"]
    s0, s1 = grid["summary"]
    assert (s0["passed"], s0["done"], s0["pass_rate"]) == (1, 3, 33.3)  # Kyoto fails contains, Lima too slow
    assert (s1["passed"], s1["done"], s1["pass_rate"]) == (3, 3, 100.0)
    assert s0["ttft_median"] == 100 and s0["ttft_p90"] == 900
    assert all(c.checks is not None for c in TestRunCell.objects.filter(run=run))  # stored once final
    # Bob: the run and its grid are 404; Stop changes nothing.
    b = client_for(bob)
    for url in (f"/prompts/runs/{run.pk}/", f"/prompts/runs/{run.pk}/grid/"):
        assert b.get(url).status_code == 404
    assert b.post(f"/prompts/runs/{run.pk}/stop/").status_code == 404
    page = client_for(alice).get(f"/prompts/runs/{run.pk}/").content.decode()
    assert "33.3%" in page and "100.0%" in page and "Kyoto" in page
    assert Message.objects.filter(role="user", conversation__owner=alice).count() == 6
    assert uuid.UUID(str(run.cells.first().message_id))


def test_compare_two_runs(alice, bob) -> None:  # noqa: ANN001
    p = make_prompt(alice)
    ts = testsets.testset_save(prompt=p, name="caps", rows=testsets.parse_rows("country,check:contains\nFrance,Paris\nJapan,Tokyo\n"), checks=[])
    endpoint = alice.endpoints.get()
    runs = []
    for answers in (("Paris", "Kyoto"), ("Lyon", "Tokyo")):
        run, plans = testsets.run_create(user=alice, test_set=ts, lanes=[testsets.Lane(p.versions.get(), endpoint, "sim-fast")])
        for pl in plans:
            services.turn_commit(plan=pl)
        for cell in run.cells.all():
            services.message_complete(message_id=cell.message_id, status="complete", content=answers[cell.row], reasoning="",
                                      finish_reason="stop", usage={}, usage_raw={}, metrics={}, error={}, inspect={})
        runs.append(run)
    diff = testsets.runs_compare(a=runs[0], b=runs[1])
    assert diff == {"regressed": [{"row": 1, "lane": 1, "vars": {"country": "France"}}],
                    "fixed": [{"row": 2, "lane": 1, "vars": {"country": "Japan"}}]}
    page = client_for(alice).get(f"/prompts/runs/{runs[0].pk}/compare/?with={runs[1].pk}").content.decode()
    assert "row 1, lane 1" in page and "row 2, lane 1" in page
    assert client_for(bob).get(f"/prompts/runs/{runs[0].pk}/compare/?with={runs[1].pk}").status_code == 404


def test_share_a_run_as_a_frozen_grid(alice, bob) -> None:  # noqa: ANN001
    from chat.sharing.models import ShareLink

    p = make_prompt(alice)
    ts = testsets.testset_save(prompt=p, name="caps", rows=testsets.parse_rows("country,check:contains\nFrance,Paris\n"), checks=[])
    run, plans = testsets.run_create(user=alice, test_set=ts, lanes=[testsets.Lane(p.versions.get(), alice.endpoints.get(), "sim-fast")])
    for pl in plans:
        services.turn_commit(plan=pl)
    cell = run.cells.get()
    services.message_complete(message_id=cell.message_id, status="complete", content="Paris <script>x</script>", reasoning="",
                              finish_reason="stop", usage={}, usage_raw={}, metrics={"ttft_ms": 10}, error={}, inspect={})
    assert client_for(bob).post(f"/shares/new-run/{run.pk}/", {"visibility": "link"}).status_code == 404
    r = client_for(alice).post(f"/shares/new-run/{run.pk}/", {"visibility": "link"})
    token = r.context["new_url"].split("/s/")[1].rstrip("/")
    link = ShareLink.objects.get()
    assert link.kind == "run" and "conversation_id" not in str(link.snapshot) and "message_id" not in str(link.snapshot)
    page = Client().get(f"/s/{token}/").content.decode()
    assert "100.0%" in page and "&lt;script&gt;x" in page and "<script>x" not in page
    assert Client().post(f"/s/{token}/copy/").status_code in (302, 404)
    assert client_for(bob).post(f"/s/{token}/copy/").status_code == 404


def test_judge_check_prompt_answer_stored_and_counted(alice, bob) -> None:  # noqa: ANN001
    import asyncio

    from chat.prompts import judge
    from chat.providers.base import EndpointConfig, TextDelta

    assert judge.verdict("Yes, it is polite.") and judge.verdict("  YES") and not judge.verdict("No.") and not judge.verdict("yesterday")
    p = make_prompt(alice)
    rows = testsets.parse_rows("country\nFrance\nJapan\n")
    ts = testsets.testset_save(prompt=p, name="caps", rows=rows, checks=checks.parse_lines("judge: Does it name a capital city?"))
    endpoint = alice.endpoints.get()
    TestSet.objects.filter(pk=ts.pk).update(judge={"endpoint_id": endpoint.pk, "model": "judge-model"})
    ts.refresh_from_db()
    run, plans = testsets.run_create(user=alice, test_set=ts, lanes=[testsets.Lane(p.versions.get(), endpoint, "sim-fast")])
    for pl in plans:
        services.turn_commit(plan=pl)
    for cell in run.cells.all():
        services.message_complete(message_id=cell.message_id, status="complete", content=["Paris", "Sushi"][cell.row],
                                  reasoning="", finish_reason="stop", usage={}, usage_raw={}, metrics={}, error={}, inspect={})
    grid = testsets.run_grid(run=run)
    assert grid["done"] and grid["judge_pending"] == 2 and grid["summary"][0]["done"] == 0  # not judged: not counted yet
    # Bob cannot judge Alice's run.
    assert client_for(bob).post(f"/prompts/runs/{run.pk}/judge/").status_code == 404
    assert all(c.judge is None for c in run.cells.all())
    plan = judge.plan(run=run)
    assert plan.endpoint == endpoint and plan.model == "judge-model" and len(plan.jobs) == 2
    assert "Capital of France?" in plan.jobs[0].prompt and "Answer given:\nParis" in plan.jobs[0].prompt
    seen = []

    async def fake_stream(config, request):  # noqa: ANN001, ANN202
        seen.append(request)
        text = request.messages[-1].content
        yield TextDelta("Yes, Paris." if "Paris" in text else "No, that is food.")

    config = EndpointConfig(base_url="http://judge.invalid/v1", api_key="", extra_headers={}, api_style="openai_chat")
    results = asyncio.run(judge.ask(jobs=plan.jobs, config=config, model=plan.model, stream_fn=fake_stream))
    judge.store(results=results)
    assert all(r.model == "judge-model" and r.system == judge.SYSTEM for r in seen)
    grid = testsets.run_grid(run=run)
    s = grid["summary"][0]
    assert grid["judge_pending"] == 0 and (s["passed"], s["done"]) == (1, 2)
    page = client_for(alice).get(f"/prompts/runs/{run.pk}/").content.decode()
    assert "judge prompt and answer" in page and "No, that is food." in page and "Rubric: Does it name a capital city?" in page


def test_an_empty_cell_is_a_value_and_every_bad_row_is_reported_at_once(alice) -> None:  # noqa: ANN001
    prompt = make_prompt(alice)
    version = prompt.versions.get()
    rows = testsets.parse_rows("country,check:contains\n,Paris\nFrance,\n")
    assert rows[0]["vars"] == {"country": ""}  # an empty cell: test of empty input
    assert testsets.variable_report(version, rows) == ([], [])
    assert testsets.variable_report(version, testsets.parse_rows("city\nRome\n"))[0] == ["country"]  # no column
    with pytest.raises(testsets.TestSetError) as exc:
        testsets.parse_rows("country,check:bogus,check:regex\nA,x,\nB,,(a)\\1\nC,y,\n")
    message = str(exc.value)
    assert "Row 1" in message and "Row 2" in message and "Row 3" in message
