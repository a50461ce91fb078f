"""Text that is always safe to store, show and check.

- :func:`valid_text`: every string entering a turn is valid Unicode (surrogate pairs that
  arrived as two halves joined, a lone half replaced by one U+FFFD), so no final write or page
  render can fail on it.
- :class:`SecretFilter`: removes an endpoint's secrets from streamed text, also when a secret
  is split across deltas (the tail that could start a secret is held back until it cannot).
- :func:`safe_json_loads`: JSON of model output or user input parsed with a size bound and
  without ``RecursionError`` or ``ValueError`` escaping.
- :func:`schema_errors`: JSON Schema validation with ``pattern``/``patternProperties`` matched
  by RE2 (linear time, google-re2), so a user's pattern such as ``^(a+)+$`` cannot freeze the
  server; a pattern RE2 cannot compile (look-arounds, back-references) is reported, never run
  on a backtracking engine.

May import: the standard library, jsonschema, google-re2, chat.providers.base (scrub).
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from chat.providers.base import REDACTED

#: Largest JSON text parsed for checks and pretty views, in characters.
MAX_JSON_CHARS = 5_000_000
#: Most error lines a schema check reports.
MAX_SCHEMA_ERRORS = 20


def valid_text(text: str) -> str:
    """``text`` as valid Unicode: adjacent surrogate halves joined into their character, lone
    halves replaced by U+FFFD. Cheap for the usual (valid) case."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def valid_data(value: Any) -> Any:
    """:func:`valid_text` applied to every string (keys too) of a JSON-like value."""
    if isinstance(value, str):
        return valid_text(value)
    if isinstance(value, dict):
        return {valid_data(k): valid_data(v) for k, v in value.items()}
    if isinstance(value, list):
        return [valid_data(v) for v in value]
    return value


def finite(value: Any) -> Any:
    """A JSON-like value with every non-finite float (``inf``, ``nan``: an upstream's odd
    usage or log probability) replaced by None and every string valid Unicode, so it can be
    stored as JSON (SQLite's JSON check and PostgreSQL's jsonb refuse ``Infinity``)."""
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else None
    if isinstance(value, str):
        return valid_text(value)
    if isinstance(value, dict):
        return {valid_text(str(k)): finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


class SecretFilter:
    """Streamed text with secrets replaced by ``[REDACTED]``, across delta boundaries.

    ``feed(piece)`` returns the text that is safe to publish now; the longest tail that is the
    start of a secret is held back until the next piece shows whether it is one. ``flush()``
    returns what is held at the end (a tail that never completed a secret is not one).
    """

    __slots__ = ("_firsts", "_held", "_secrets")

    def __init__(self, secrets: list[str]) -> None:
        self._secrets = sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True)
        self._firsts = {s[0] for s in self._secrets}
        self._held = ""

    def feed(self, piece: str) -> str:
        if not self._secrets:
            return piece
        text = self._held + piece
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, REDACTED)
        keep = self._held_tail(text)
        if keep:
            self._held = text[-keep:]
            return text[:-keep]
        self._held = ""
        return text

    def _held_tail(self, text: str) -> int:
        longest = 0
        n = len(text)
        for secret in self._secrets:
            lo = max(0, n - len(secret) + 1)
            i = text.find(secret[0], lo)
            while i != -1:
                if secret.startswith(text[i:]):
                    longest = max(longest, n - i)
                    break
                i = text.find(secret[0], i + 1)
        return longest

    def flush(self) -> str:
        held, self._held = self._held, ""
        return held


def safe_json_loads(text: str, *, max_chars: int = MAX_JSON_CHARS) -> tuple[bool, Any, str]:
    """``(True, value, "")`` or ``(False, None, reason)``: never raises (not on deep nesting,
    not on huge numbers, not on text over ``max_chars``)."""
    if len(text) > max_chars:
        return False, None, f"longer than {max_chars:,} characters"
    try:
        return True, json.loads(text), ""
    except RecursionError:
        return False, None, "nested too deeply"
    except ValueError as exc:
        return False, None, str(exc)[:200]


def pretty_json(text: str) -> str:
    """``text`` re-indented when it is JSON (never raises), else ""."""
    ok, value, _ = safe_json_loads(text)
    if not ok:
        return ""
    try:
        return json.dumps(value, indent=2, ensure_ascii=False)
    except (RecursionError, ValueError):
        return ""


class UnsupportedPattern(ValueError):
    """A pattern the linear-time engine does not support."""


@lru_cache(maxsize=256)
def _re2(pattern: str) -> Any:
    import re2

    try:
        return re2.compile(pattern)
    except Exception as exc:  # re2.error and friends
        raise UnsupportedPattern(f"pattern {pattern!r} is not supported by the linear-time matcher ({exc})") from None


@lru_cache(maxsize=8)
def _validator_class(base: type) -> type:
    import jsonschema
    from jsonschema import _keywords

    def pattern(validator: Any, patrn: str, instance: Any, schema: Any) -> Any:
        if validator.is_type(instance, "string") and not _re2(patrn).search(instance):
            yield jsonschema.ValidationError(f"{instance!r} does not match {patrn!r}")

    def pattern_properties(validator: Any, props: dict[str, Any], instance: Any, schema: Any) -> Any:
        if not validator.is_type(instance, "object"):
            return
        for patrn, subschema in props.items():
            rx = _re2(patrn)
            for k, v in instance.items():
                if rx.search(k):
                    yield from validator.descend(v, subschema, path=k, schema_path=patrn)

    def additional_properties(validator: Any, aP: Any, instance: Any, schema: Any) -> Any:
        if not validator.is_type(instance, "object"):
            return
        props = schema.get("properties", {})
        patterns = [_re2(p) for p in schema.get("patternProperties", {})]
        extras = [k for k in instance if k not in props and not any(rx.search(k) for rx in patterns)]
        if validator.is_type(aP, "object"):
            for extra in extras:
                yield from validator.descend(instance[extra], aP, path=extra)
        elif not aP and extras:
            yield jsonschema.ValidationError(f"Additional properties are not allowed ({', '.join(map(repr, extras))} unexpected)")

    del _keywords
    return jsonschema.validators.extend(base, {
        "pattern": pattern, "patternProperties": pattern_properties, "additionalProperties": additional_properties,
    })


def _prescan(schema: Any, depth: int = 0) -> None:
    """Compile every pattern of ``schema`` with RE2 before any validation, and refuse the one
    keyword combination jsonschema would match with Python's backtracking ``re``."""
    if depth > 200:
        raise RecursionError
    if isinstance(schema, dict):
        if isinstance(schema.get("pattern"), str):
            _re2(schema["pattern"])
        pp = schema.get("patternProperties")
        if isinstance(pp, dict):
            for p in pp:
                _re2(p)
            if "unevaluatedProperties" in schema:
                raise UnsupportedPattern("unevaluatedProperties together with patternProperties is not supported")
        for v in schema.values():
            _prescan(v, depth + 1)
    elif isinstance(schema, list):
        for v in schema:
            _prescan(v, depth + 1)


def schema_errors(schema: dict[str, Any], value: Any) -> list[str]:
    """Error lines (``path: message``, at most :data:`MAX_SCHEMA_ERRORS`) of ``value`` against
    the JSON Schema ``schema`` (its own draft), patterns matched by RE2. Never raises: an
    unsupported pattern or a schema too deep to check becomes an error line."""
    import jsonschema

    try:
        _prescan(schema)
        base = jsonschema.validators.validator_for(schema)
        validator = _validator_class(base)(schema)
        errors = []
        for e in validator.iter_errors(value):
            errors.append(f"{'/'.join(str(p) for p in e.absolute_path) or '(root)'}: {e.message}")
            if len(errors) >= MAX_SCHEMA_ERRORS:
                break
        return sorted(errors)
    except UnsupportedPattern as exc:
        return [f"(schema): {exc}"]
    except RecursionError:
        return ["(root): the answer or the schema is nested too deeply to check"]
    except jsonschema.SchemaError as exc:
        return [f"(schema): not a valid JSON Schema: {exc.message}"]
