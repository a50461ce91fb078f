"""Test sets and runs: parse rows (CSV or JSONL, typed in or uploaded), report missing/unused
variables, plan a run (one ordinary conversation and turn per row × lane, through
``chat.selectors.turn_plan_send``), and summarize a run's grid with check results.

Limits: 1 MB of rows, 200 rows, 50 columns, 10 000 characters per value, 4 lanes, 400 cells.

May import: Django, chat.models, chat.selectors, chat.services, chat.prompts.*.
"""

from __future__ import annotations

import csv
import io
import json
import statistics
import uuid
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from chat import selectors as chat_selectors
from chat.models import Endpoint, Message, MessageStatus
from chat.prompts import checks as checks_mod
from chat.prompts import selectors, services
from chat.prompts.models import PromptVersion, TestRun, TestRunCell, TestSet

MAX_BYTES = 1024 * 1024
MAX_ROWS = 200
MAX_COLUMNS = 50
MAX_VALUE = 10_000
MAX_LANES = 4
MAX_CELLS = 400
CHECK_PREFIX = "check:"
TERMINAL = {MessageStatus.COMPLETE, MessageStatus.STOPPED, MessageStatus.ERROR, MessageStatus.INTERRUPTED}


#: How many row problems one refusal lists.
MAX_REPORTED = 20


class TestSetError(ValueError):
    """Rows or checks that cannot be used; the message is for the user. Nothing is saved."""

    __test__ = False


def _row(record: dict[str, Any], n: int) -> dict[str, Any]:
    if len(record) > MAX_COLUMNS:
        raise TestSetError(f"Row {n}: more than {MAX_COLUMNS} columns.")
    vars_: dict[str, str] = {}
    row_checks = []
    for key, value in record.items():
        key = str(key or "").strip()
        if not key:
            continue
        value = "" if value is None else (value if isinstance(value, str) else json.dumps(value))
        if len(value) > MAX_VALUE:
            raise TestSetError(f"Row {n}, column {key}: longer than {MAX_VALUE} characters.")
        if key.lower().startswith(CHECK_PREFIX):
            ctype = key[len(CHECK_PREFIX):].strip().lower()
            if not value.strip():
                continue
            if ctype == "json":
                if value.strip().lower() in ("1", "true", "yes", "x"):
                    row_checks.append({"type": "json", "arg": ""})
                continue
            try:
                row_checks.append(checks_mod.parse_check(ctype, value))
            except checks_mod.CheckError as exc:
                raise TestSetError(f"Row {n}: {exc}") from None
        else:
            vars_[key] = value
    return {"vars": vars_, "checks": row_checks}


def parse_rows(raw: str | bytes) -> list[dict[str, Any]]:
    """Rows from CSV (a header line of column names) or JSONL (one object per line). Columns
    ``check:<type>`` hold a per-row check argument; the others are variables. Raises
    TestSetError (too big, malformed, bad check)."""
    if isinstance(raw, bytes):
        if len(raw) > MAX_BYTES:
            raise TestSetError("Rows larger than 1 MB.")
        try:
            raw = raw.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise TestSetError("Rows must be UTF-8 text.") from None
    if len(raw) > MAX_BYTES:
        raise TestSetError("Rows larger than 1 MB.")
    text = raw.strip()
    if not text:
        return []
    records: list[dict[str, Any]] = []
    if text.startswith("{"):
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except ValueError as exc:
                raise TestSetError(f"JSONL line {n}: {exc}") from None
            if not isinstance(obj, dict):
                raise TestSetError(f"JSONL line {n}: not an object.")
            records.append(obj)
            if len(records) > MAX_ROWS:
                break
    else:
        try:
            reader = csv.DictReader(io.StringIO(text))
            for rec in reader:
                if None in rec:
                    raise TestSetError(f"CSV line {reader.line_num}: more values than columns.")
                records.append(rec)
                if len(records) > MAX_ROWS:
                    break
        except csv.Error as exc:
            raise TestSetError(f"CSV: {exc}") from None
    if len(records) > MAX_ROWS:
        raise TestSetError(f"At most {MAX_ROWS} rows.")
    # Every row's problem at once (the first MAX_REPORTED), not one per save.
    rows, errors = [], []
    for n, r in enumerate(records, 1):
        try:
            rows.append(_row(r, n))
        except TestSetError as exc:
            errors.append(str(exc))
    if errors:
        more = f" (and {len(errors) - MAX_REPORTED} more)" if len(errors) > MAX_REPORTED else ""
        raise TestSetError(" ".join(errors[:MAX_REPORTED]) + more)
    return rows


def rows_as_csv(rows: list[dict[str, Any]]) -> str:
    """Rows back as CSV text (for editing)."""
    columns: dict[str, None] = {}
    for r in rows:
        for k in r["vars"]:
            columns.setdefault(k, None)
        for c in r["checks"]:
            columns.setdefault(CHECK_PREFIX + c["type"], None)
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(list(columns))
    for r in rows:
        by_check = {CHECK_PREFIX + c["type"]: (json.dumps(c["arg"]) if isinstance(c["arg"], dict) else ("1" if c["type"] == "json" else c["arg"])) for c in r["checks"]}
        w.writerow([r["vars"].get(k, by_check.get(k, "")) for k in columns])
    return out.getvalue()


def variable_report(version: PromptVersion, rows: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """``(missing, unused)`` over all rows: template variables some row has no column for, and
    columns no template uses. An empty cell is a value (the empty string: a test of empty
    input), unlike an empty field in the "use a prompt" form."""
    names = selectors.version_variables(version)
    missing: dict[str, None] = {}
    unused: dict[str, None] = {}
    for r in rows:
        m = [n for n in names if n not in r["vars"]]
        _, u = services.variables.check(names, r["vars"])
        for x in m:
            missing.setdefault(x, None)
        for x in u:
            unused.setdefault(x, None)
    return list(missing), list(unused)


def testset_save(*, prompt: Any, name: str, rows: list[dict[str, Any]], checks: list[dict[str, Any]], test_set: TestSet | None = None) -> TestSet:
    """Create or replace a test set of ``prompt`` (the caller checked the user owns it)."""
    if test_set is None:
        return TestSet.objects.create(prompt=prompt, name=name[:100], rows=rows, checks=checks)
    TestSet.objects.filter(pk=test_set.pk).update(name=name[:100], rows=rows, checks=checks)
    test_set.refresh_from_db()
    return test_set


# ---- runs -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Lane:
    """One lane of a run: a version of the prompt, on an endpoint and model of the user."""

    version: PromptVersion
    endpoint: Endpoint
    model: str


def run_create(*, user: AbstractBaseUser, test_set: TestSet, lanes: list[Lane]) -> tuple[TestRun, list[Any]]:
    """Write the run, one conversation per row × lane (system prompt, settings, prefix messages
    filled) and its cell; return the run and the turn plans (``chat.selectors.TurnPlan``, rows
    not yet written: the runner commits them beside the upstream request), each recording its
    prompt version. Raises TestSetError (no rows, too many cells, missing variables)."""
    rows = test_set.rows
    if not rows:
        raise TestSetError("The test set has no rows.")
    if not 1 <= len(lanes) <= MAX_LANES:
        raise TestSetError(f"Use 1 to {MAX_LANES} lanes.")
    if len(rows) * len(lanes) > MAX_CELLS:
        raise TestSetError(f"At most {MAX_CELLS} answers per run.")
    for lane in lanes:
        missing, _ = variable_report(lane.version, rows)
        if missing:
            raise TestSetError(f"v{lane.version.number}: rows lack values for {', '.join(missing)}.")
    plans = []
    with transaction.atomic():
        run = TestRun.objects.create(test_set=test_set, owner=user, lanes=[
            {"version": ln.version.number, "version_id": ln.version.pk, "endpoint_id": ln.endpoint.pk,
             "endpoint_name": ln.endpoint.name, "model": ln.model} for ln in lanes
        ])
        cells = []
        for i, row in enumerate(rows):
            for j, lane in enumerate(lanes):
                use = services.conversation_from_version(
                    user=user, version=lane.version, values=row["vars"], endpoint=lane.endpoint, model=lane.model,
                    title=f"Test run {run.pk} · row {i + 1} · lane {j + 1}", empty_is_a_value=True,
                )
                if not use.send:
                    raise TestSetError(f"v{lane.version.number} has no user message to send.")
                conv = use.conversation
                plan = chat_selectors.turn_plan_send(
                    user=user, conversation_id=conv.pk, turn_id=uuid.uuid4(), content=use.send, role="user",
                    settings=chat_selectors.NextTurnSettings(lane.endpoint.pk, lane.model, conv.system_prompt, dict(conv.params)),
                    prompt_version_id=lane.version.pk,
                )
                plans.append(plan)
                cells.append(TestRunCell(run=run, row=i, lane=j, conversation=conv, message_id=plan.assistant.id))
        TestRunCell.objects.bulk_create(cells)
    return run, plans


def run_get_for_user(*, user: AbstractBaseUser, run_id: int) -> TestRun:
    """A run of a test set of a prompt ``user`` owns. Raises Http404."""
    from django.http import Http404

    run = TestRun.objects.select_related("test_set__prompt").filter(pk=run_id, owner=user).first()
    if run is None:
        raise Http404("No such run")
    return run


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    k = max(0, min(len(values) - 1, round(q * (len(values) - 1))))
    return values[k]


def run_grid(*, run: TestRun) -> dict[str, Any]:
    """The grid: ``rows`` (each with vars and one cell per lane: status, content, metrics, check
    results, pass) and per-lane ``summary`` (done, passed, pass_rate, median/p90 TTFT, median
    tokens per second, total cost). Check results are computed once per final answer and
    stored on the cell; ``judge`` checks show the stored verdicts (``chat.prompts.judge``) or are
    pending (the cell's pass is None until judged). ``done``: every answer is final;
    ``judge_pending``: final answers whose judge checks were not asked yet."""
    test_set = run.test_set
    cells = list(run.cells.all())
    messages = {m.id: m for m in Message.objects.filter(id__in=[c.message_id for c in cells if c.message_id])}
    to_store = []
    judge_pending = 0
    grid: dict[int, dict[int, dict[str, Any]]] = {}
    for c in cells:
        m = messages.get(c.message_id)
        status = m.status if m else "queued"
        row = test_set.rows[c.row] if c.row < len(test_set.rows) else {"vars": {}, "checks": []}
        results = c.checks
        if results is None and m is not None and m.status in TERMINAL:
            if m.status == MessageStatus.COMPLETE:
                results = checks_mod.run_checks([*test_set.checks, *row["checks"]], m.content, m.metrics or {})
            else:
                results = [{"type": "status", "arg": m.status, "ok": False, "reason": (m.error or {}).get("message", m.status)}]
            c.checks = results
            to_store.append(c)
        shown = results
        rubrics = [k["arg"] for k in [*test_set.checks, *row["checks"]] if k["type"] == checks_mod.JUDGE]
        if results is not None and rubrics and m is not None and m.status == MessageStatus.COMPLETE:
            if c.judge is None:
                judge_pending += 1
                shown = results + [{"type": "judge", "arg": r, "ok": None, "reason": "not judged yet"} for r in rubrics]
            else:
                shown = results + [{
                    "type": "judge", "arg": j["rubric"], "ok": j["ok"], "prompt": j["prompt"], "answer": j["answer"],
                    "reason": j.get("error") or "" if j["ok"] else (j.get("error") or f"judge said: {j['answer'][:100]}"),
                } for j in c.judge]
        grid.setdefault(c.row, {})[c.lane] = {
            "status": status, "content": m.content if m else "", "metrics": (m.metrics if m else {}) or {},
            "checks": shown,
            "passed": None if shown is None or any(r["ok"] is None for r in shown) else all(r["ok"] for r in shown),
            "conversation_id": c.conversation_id, "message_id": c.message_id,
        }
    if to_store:
        TestRunCell.objects.bulk_update(to_store, ["checks"])
    rows = []
    for i, row in enumerate(test_set.rows):
        rows.append({"index": i + 1, "vars": row["vars"], "cells": [grid.get(i, {}).get(j) for j in range(len(run.lanes))]})
    summary = []
    for j, lane in enumerate(run.lanes):
        lane_cells = [grid.get(i, {}).get(j) for i in range(len(test_set.rows))]
        lane_cells = [x for x in lane_cells if x]
        done = [x for x in lane_cells if x["passed"] is not None]
        ttft = [x["metrics"]["ttft_ms"] for x in done if x["metrics"].get("ttft_ms") is not None]
        tps = [x["metrics"]["tokens_per_sec"] for x in done if x["metrics"].get("tokens_per_sec") is not None]
        costs = [x["metrics"]["cost_usd"] for x in done if x["metrics"].get("cost_usd") is not None]
        passed = sum(1 for x in done if x["passed"])
        summary.append({
            **lane, "total": len(lane_cells), "done": len(done), "passed": passed,
            "pass_rate": round(100 * passed / len(done), 1) if done else None,
            "ttft_median": statistics.median(ttft) if ttft else None, "ttft_p90": _pct(ttft, 0.9),
            "tps_median": statistics.median(tps) if tps else None, "tps_p90": _pct(tps, 0.9),
            "cost_total": round(sum(costs), 8) if costs else None,
        })
    done_all = all(c.checks is not None for c in cells)
    return {"rows": rows, "summary": summary, "done": done_all, "judge_pending": judge_pending}


def run_live_message_ids(*, run: TestRun) -> list[uuid.UUID]:
    """Answer ids of the run that are not final yet (for Stop)."""
    ids = [c.message_id for c in run.cells.all() if c.message_id]
    final = set(Message.objects.filter(id__in=ids, status__in=TERMINAL).values_list("id", flat=True))
    return [i for i in ids if i not in final]


def runs_compare(*, a: TestRun, b: TestRun) -> dict[str, list[dict[str, Any]]]:
    """Which cells changed between two runs of the same test set, matched by row and lane
    position: ``{"regressed": [...pass → fail], "fixed": [...fail → pass]}``, each item
    ``{"row": n (1-based), "lane": n (1-based), "vars": {...}}``. Cells not final in either run
    are left out."""
    ga, gb = run_grid(run=a), run_grid(run=b)
    out: dict[str, list[dict[str, Any]]] = {"regressed": [], "fixed": []}
    for ra, rb in zip(ga["rows"], gb["rows"], strict=False):
        for j, (ca, cb) in enumerate(zip(ra["cells"], rb["cells"], strict=False)):
            if not ca or not cb or ca["passed"] is None or cb["passed"] is None or ca["passed"] == cb["passed"]:
                continue
            item = {"row": ra["index"], "lane": j + 1, "vars": rb["vars"]}
            out["regressed" if ca["passed"] else "fixed"].append(item)
    return out
