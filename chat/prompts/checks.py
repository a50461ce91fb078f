"""Checks of test-set answers: pure functions of an answer's text and metrics.

A check is ``{"type": t, "arg": a}`` written one per line as ``type: arg`` (``json`` takes no
argument). Types: ``equals``, ``contains``, ``not_contains``, ``regex`` (RE2: linear time, via
google-re2), ``json`` (valid JSON), ``schema`` (matches a JSON Schema), ``max_ttft_ms``,
``max_total_ms``, ``max_cost_usd``, ``judge`` (a yes/no rubric asked of a judge model:
``chat.prompts.judge``). A result is ``{"type", "arg", "ok": bool, "reason": str}``.

May import: the standard library, chat.textsafety.
"""

from __future__ import annotations

import json
from typing import Any

from chat.textsafety import safe_json_loads, schema_errors

TYPES = ("equals", "contains", "not_contains", "regex", "json", "schema", "max_ttft_ms", "max_total_ms", "max_cost_usd", "judge")
#: Asked of a judge model (see chat.prompts.judge), not computed here.
JUDGE = "judge"
NUMERIC = {"max_ttft_ms": "ttft_ms", "max_total_ms": "total_ms", "max_cost_usd": "cost_usd"}
MAX_CHECKS = 20
MAX_ARG = 20_000


class CheckError(ValueError):
    """A check line that cannot be used; the message names it."""


def parse_check(type_: str, arg: str) -> dict[str, Any]:
    """One check, validated (regex compiles in RE2, schema is JSON, limits are numbers).
    Raises CheckError."""
    type_ = type_.strip().lower().replace(" ", "_").replace("-", "_")
    if type_ not in TYPES:
        raise CheckError(f"Unknown check “{type_}” (use one of: {', '.join(TYPES)}).")
    if len(arg) > MAX_ARG:
        raise CheckError(f"{type_}: argument longer than {MAX_ARG} characters.")
    if type_ == "regex":
        import re2

        try:
            re2.compile(arg)
        except Exception as exc:
            raise CheckError(f"regex: not supported by the linear-time matcher ({exc}).") from None
    if type_ == "schema":
        ok, value, why = safe_json_loads(arg)
        if not ok or not isinstance(value, dict):
            raise CheckError(f"schema: not a JSON object ({why or 'not an object'}).")
        return {"type": type_, "arg": value}
    if type_ in NUMERIC:
        try:
            return {"type": type_, "arg": float(arg)}
        except ValueError:
            raise CheckError(f"{type_}: needs a number.") from None
    if type_ == JUDGE and not 1 <= len(arg) <= 2000:
        raise CheckError("judge: needs a yes/no rubric question of at most 2 000 characters.")
    if type_ in ("equals", "contains", "not_contains", "regex") and arg == "":
        raise CheckError(f"{type_}: needs an argument.")
    return {"type": type_, "arg": arg}


def parse_lines(text: str) -> list[dict[str, Any]]:
    """Checks from ``type: arg`` lines (blank lines ignored). Raises CheckError."""
    out = []
    for line in (text or "").splitlines():
        if not line.strip():
            continue
        type_, _, arg = line.partition(":")
        out.append(parse_check(type_, arg.strip()))
    if len(out) > MAX_CHECKS:
        raise CheckError(f"At most {MAX_CHECKS} checks.")
    return out


def as_lines(checks: list[dict[str, Any]]) -> str:
    """The inverse of :func:`parse_lines`."""
    lines = []
    for c in checks:
        arg = c["arg"]
        if isinstance(arg, dict):
            arg = json.dumps(arg)
        elif isinstance(arg, float) and arg.is_integer():
            arg = int(arg)
        lines.append(f"{c['type']}: {arg}" if arg != "" else c["type"])
    return "\n".join(lines)


def run_check(check: dict[str, Any], text: str, metrics: dict[str, Any]) -> dict[str, Any]:
    """The result of one check on an answer ``text`` with ``metrics`` (ttft_ms, total_ms, cost_usd)."""
    t, arg = check["type"], check["arg"]
    ok, reason = False, ""
    if t == "equals":
        ok = text.strip() == str(arg).strip()
        reason = "" if ok else "answer differs"
    elif t == "contains":
        ok = str(arg) in text
        reason = "" if ok else f"“{arg}” not found"
    elif t == "not_contains":
        ok = str(arg) not in text
        reason = "" if ok else f"“{arg}” found"
    elif t == "regex":
        import re2

        ok = re2.search(str(arg), text) is not None
        reason = "" if ok else "no match"
    elif t in ("json", "schema"):
        parsed, value, why = safe_json_loads(text.strip())
        if not parsed:
            ok, reason = False, f"not JSON: {why}"
        elif t == "json":
            ok = True
        else:
            errors = schema_errors(arg, value)
            ok, reason = not errors, "; ".join(errors[:3])
    elif t in NUMERIC:
        value = (metrics or {}).get(NUMERIC[t])
        if value is None:
            ok, reason = False, f"{NUMERIC[t]} not measured"
        else:
            ok = float(value) <= float(arg)
            reason = "" if ok else f"{NUMERIC[t]} {value} > {arg:g}"
    return {"type": t, "arg": arg if not isinstance(arg, dict) else "(schema)", "ok": ok, "reason": reason}


def run_checks(checks: list[dict[str, Any]], text: str, metrics: dict[str, Any]) -> list[dict[str, Any]]:
    """Results of every check but ``judge`` (asked of a model separately)."""
    return [run_check(c, text, metrics) for c in checks if c["type"] != JUDGE]
