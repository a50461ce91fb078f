"""Deterministic JSON values built from a JSON Schema: structured output and tool arguments.

:func:`value_for_schema` returns a value that validates against the schema it is given (the
``schema`` of a ``response_format: {type: json_schema, json_schema: {schema}}`` in seed 002's
``ChatCompletionRequest``, of ``text.format`` in its ``ResponseRequest``, or a tool's
``parameters`` / Anthropic ``input_schema``). It understands ``type`` (also lists), ``enum``,
``const``, ``properties``/``required``, ``items``/``prefixItems``/``minItems``/``maxItems``/
``uniqueItems``, ``minimum``/``maximum``/``exclusiveMinimum``/``exclusiveMaximum``/
``multipleOf``, ``minLength``/``maxLength``, common ``format`` values, ``anyOf``/``oneOf``
(the first alternative that is not ``null``), ``allOf`` (merged), ``nullable`` and local
``$ref`` (``#/$defs/…``, ``#/definitions/…``). It does not solve ``pattern``, ``not``,
``if``/``then`` or ``dependentRequired``: a schema that needs them may get a value that does
not validate. :func:`invalid_value_for_schema` returns a value that violates the schema (for
the "invalid answer" knob ``invalid_json=1``). :func:`json_pieces` splits JSON text into the
token pieces the simulator streams.

The same schema always gives the same value (no randomness).

May import: the standard library only (no Django).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import uuid
from contextvars import ContextVar
from typing import Any

__all__ = [
    "dumps_answer",
    "invalid_value_for_schema",
    "json_object_answer",
    "json_pieces",
    "value_for_schema",
]

#: Characters a generated value may take (strings, and a few per value and array item); a
#: schema asking for more (``minLength: 1e8``, nested ``minItems``) gets a shorter answer that
#: may not validate. The app sets it per request (``create_app(max_answer_chars=…)``).
MAX_ANSWER_CHARS: ContextVar[int] = ContextVar("max_answer_chars", default=1_000_000)
_budget: ContextVar[list[int] | None] = ContextVar("_structured_budget", default=None)

#: Recursion depth after which optional properties are left out.
MAX_DEPTH = 12
#: Depth from which arrays get only their ``minItems`` (keeps recursive schemas small).
SHALLOW = 4

_FORMATS: dict[str, str] = {
    "date": "2024-01-02",
    "date-time": "2024-01-02T03:04:05Z",
    "time": "03:04:05Z",
    "duration": "P1D",
    "email": "sim@example.com",
    "idn-email": "sim@example.com",
    "hostname": "example.com",
    "idn-hostname": "example.com",
    "ipv4": "192.0.2.1",
    "ipv6": "2001:db8::1",
    "uri": "https://example.com/sim",
    "url": "https://example.com/sim",
    "iri": "https://example.com/sim",
    "uri-reference": "https://example.com/sim",
}


def value_for_schema(schema: Any, *, label: str = "answer") -> Any:
    """A deterministic JSON value that validates against ``schema`` (see the module docstring).

    ``label`` names the value in generated strings ("Simulated answer"); object properties use
    their own names ("Simulated city"). A missing or empty schema gives a small object.
    """
    root = schema if isinstance(schema, dict) else {}
    token = _budget.set([MAX_ANSWER_CHARS.get()])
    try:
        return _value(root, root, label, 0, 0)
    finally:
        _budget.reset(token)


def _left() -> int:
    budget = _budget.get()
    return budget[0] if budget is not None else MAX_ANSWER_CHARS.get()


def _spend(chars: int) -> None:
    budget = _budget.get()
    if budget is not None:
        budget[0] -= chars


def json_object_answer(prompt_echo: str) -> dict[str, Any]:
    """The small object answered for ``response_format: {type: json_object}``."""
    return {"answer": "Simulated JSON answer", "you_said": prompt_echo}


def invalid_value_for_schema(schema: Any) -> Any:
    """A JSON value that violates ``schema``, or ``None`` when no violation can be made.

    An object schema loses its first required property (or gets its first property with the
    wrong type); any other typed schema gets a value of another type; an ``enum``/``const``
    gets a value outside it.
    """
    root = schema if isinstance(schema, dict) else {}
    node = _resolve(root, root)
    valid = value_for_schema(root)
    if isinstance(valid, dict):
        required = [r for r in node.get("required", []) if isinstance(r, str)]
        if required and required[0] in valid:
            broken = dict(valid)
            del broken[required[0]]
            return broken
        props = node.get("properties")
        if isinstance(props, dict) and props:
            name = next(iter(props))
            broken = dict(valid)
            broken[name] = _wrong_type(_resolve(root, props[name]))
            return broken
    if "enum" in node or "const" in node:
        return "not one of the allowed values (simulated invalid answer)"
    if _types(node):
        return _wrong_type(node)
    return None


def json_pieces(text: str) -> list[str]:
    """Split JSON ``text`` into stream pieces the way a tokenizer might: a word or a run of
    punctuation, each with the whitespace before it (``{"``, ``city``, ``":``, `` "``,
    ``Simulated``, `` city``, ``"}``). ``"".join(json_pieces(t)) == t``."""
    return re.findall(r"\s*[A-Za-z0-9_]+|\s*[^\sA-Za-z0-9_]+|\s+", text)


# ---- internals --------------------------------------------------------------------------


def _wrong_type(node: dict[str, Any]) -> Any:
    types = _types(node)
    if "string" not in types:
        return "simulated wrong type"
    return 12345


def _types(node: dict[str, Any]) -> list[str]:
    kind = node.get("type")
    if isinstance(kind, str):
        return [kind]
    if isinstance(kind, list):
        return [k for k in kind if isinstance(k, str)]
    return []


def _resolve(root: dict[str, Any], node: Any, depth: int = 0) -> dict[str, Any]:
    """Follow local ``$ref``s and merge ``allOf``; returns a plain schema dict."""
    if not isinstance(node, dict):
        return {}
    seen = 0
    while isinstance(node.get("$ref"), str) and seen < 32:
        target = _pointer(root, node["$ref"])
        rest = {k: v for k, v in node.items() if k != "$ref"}
        node = {**target, **rest} if isinstance(target, dict) else rest
        seen += 1
    if isinstance(node.get("allOf"), list) and depth < MAX_DEPTH:
        merged: dict[str, Any] = {k: v for k, v in node.items() if k != "allOf"}
        for part in node["allOf"]:
            sub = _resolve(root, part, depth + 1)
            for key, value in sub.items():
                if key == "properties" and isinstance(value, dict):
                    merged["properties"] = {**merged.get("properties", {}), **value}
                elif key == "required" and isinstance(value, list):
                    merged["required"] = list(dict.fromkeys([*merged.get("required", []), *value]))
                else:
                    merged.setdefault(key, value)
        node = merged
    return node


def _pointer(root: dict[str, Any], ref: str) -> Any:
    if not ref.startswith("#"):
        return {}
    target: Any = root
    for part in ref[1:].split("/"):
        if not part:
            continue
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(target, dict):
            target = target.get(part, {})
        elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
            target = target[int(part)]
        else:
            return {}
    return target


def _value(root: dict[str, Any], raw: Any, label: str, depth: int, index: int) -> Any:
    if depth > 2 * MAX_DEPTH or _left() <= 0:  # recursive forever, or over the size budget
        return None
    _spend(4)
    node = _resolve(root, raw)
    if "const" in node:
        return node["const"]
    enum = node.get("enum")
    if isinstance(enum, list) and enum:
        choices = [e for e in enum if e is not None] or enum
        return choices[index % len(choices)]
    for key in ("anyOf", "oneOf"):
        options = node.get(key)
        if isinstance(options, list) and options:
            chosen = next(
                (o for o in options if _types(_resolve(root, o)) != ["null"]),
                options[0],
            )
            base = {k: v for k, v in node.items() if k not in ("anyOf", "oneOf")}
            return _value(root, {**base, **_resolve(root, chosen)}, label, depth, index)
    types = [t for t in _types(node) if t != "null"]
    if not types and _types(node) == ["null"]:
        return None
    kind = types[0] if types else _guess_type(node)
    if kind == "object":
        return _object(root, node, label, depth)
    if kind == "array":
        return _array(root, node, label, depth)
    if kind == "string":
        return _string(node, label, index)
    if kind == "integer":
        return _integer(node, index)
    if kind == "number":
        return _number(node, index)
    if kind == "boolean":
        return index % 2 == 0
    if kind == "null":
        return None
    return f"Simulated {label}"


def _guess_type(node: dict[str, Any]) -> str:
    if "properties" in node or "required" in node or "additionalProperties" in node:
        return "object"
    if "items" in node or "prefixItems" in node:
        return "array"
    if any(k in node for k in ("minimum", "maximum", "multipleOf")):
        return "number"
    if node:
        return "string"
    return "object"


def _object(root: dict[str, Any], node: dict[str, Any], label: str, depth: int) -> dict[str, Any]:
    props = node.get("properties") if isinstance(node.get("properties"), dict) else {}
    required = [r for r in node.get("required", []) if isinstance(r, str)]
    if depth >= MAX_DEPTH:
        names = required
    elif "required" in node:
        names = [*[p for p in props if p in required], *[r for r in required if r not in props]]
    else:
        names = list(props)
    out: dict[str, Any] = {}
    extra = node.get("additionalProperties")
    for name in names:
        sub = props.get(name, extra if isinstance(extra, dict) else {})
        out[name] = _value(root, sub, name.replace("_", " "), depth + 1, 0)
    if not out and not props and not required and depth == 0 and node.get("type") is None:
        return {"answer": f"Simulated {label}"}
    return out


def _array(root: dict[str, Any], node: dict[str, Any], label: str, depth: int) -> list[Any]:
    prefix = node.get("prefixItems") if isinstance(node.get("prefixItems"), list) else []
    low = node.get("minItems", 0) if isinstance(node.get("minItems"), int) else 0
    high = node.get("maxItems") if isinstance(node.get("maxItems"), int) else None
    count = max(low, len(prefix), 1 if depth < SHALLOW else 0)
    if high is not None:
        count = min(count, high)
    items = node.get("items")
    item_label = label[:-1] if label.endswith("s") and len(label) > 1 else f"{label} item"
    out = []
    for i in range(count):
        if _left() <= 0:
            break
        sub = prefix[i] if i < len(prefix) else (items if isinstance(items, dict) else {})
        out.append(_value(root, sub, item_label, depth + 1, i))
    return out


def _string(node: dict[str, Any], label: str, index: int) -> str:
    fmt = node.get("format")
    if fmt == "uuid":
        digest = hashlib.sha256(f"{label}\x00{index}".encode()).hexdigest()
        text = str(uuid.UUID(hex=digest[:32]))
    elif isinstance(fmt, str) and fmt in _FORMATS:
        text = _FORMATS[fmt]
    else:
        text = f"Simulated {label}" + (f" {index + 1}" if index else "")
    low = node.get("minLength")
    high = node.get("maxLength")
    if isinstance(low, int) and len(text) < low:
        text = text + "x" * max(0, min(low, _left()) - len(text))
    if isinstance(high, int) and len(text) > high:
        text = text[: max(high, 0)]
    _spend(len(text))
    return text


def _bounds(node: dict[str, Any]) -> tuple[float | None, float | None, bool, bool]:
    low, high = node.get("minimum"), node.get("maximum")
    ex_low, ex_high = node.get("exclusiveMinimum"), node.get("exclusiveMaximum")
    low_open = high_open = False
    if isinstance(ex_low, bool):  # draft 4 style
        low_open = ex_low
    elif isinstance(ex_low, int | float) and (low is None or ex_low >= low):
        low, low_open = ex_low, True
    if isinstance(ex_high, bool):
        high_open = ex_high
    elif isinstance(ex_high, int | float) and (high is None or ex_high <= high):
        high, high_open = ex_high, True
    low = low if isinstance(low, int | float) and not isinstance(low, bool) else None
    high = high if isinstance(high, int | float) and not isinstance(high, bool) else None
    return low, high, low_open, high_open


def _integer(node: dict[str, Any], index: int) -> int:
    low, high, low_open, high_open = _bounds(node)
    lo = None if low is None else (math.floor(low) + 1 if low_open else math.ceil(low))
    hi = None if high is None else (math.ceil(high) - 1 if high_open else math.floor(high))
    value = 42 + index
    if lo is not None and value < lo:
        value = lo + index
    if hi is not None and value > hi:
        value = hi if lo is None else max(lo, hi - index)
    step = node.get("multipleOf")
    if isinstance(step, int) and step > 0 and value % step:
        up = value + (step - value % step)
        value = up if hi is None or up <= hi else value - value % step
    return value


def _number(node: dict[str, Any], index: int) -> float | int:
    step = node.get("multipleOf")
    if isinstance(step, int | float) and step > 0:
        low, high, low_open, high_open = _bounds(node)
        n = 1 + index
        if low is not None:
            n = max(n, math.floor(low / step) + 1 if low_open else math.ceil(low / step))
        value = n * step
        if high is not None and (value > high or (high_open and value >= high)):
            value = (math.ceil(high / step) - 1 if high_open else math.floor(high / step)) * step
        return value
    low, high, low_open, high_open = _bounds(node)
    value = 3.5 + index
    if low is not None and (value < low or (low_open and value <= low)):
        value = low + 0.5 if high is None or low + 0.5 < high else low + (high - low) / 2
    if high is not None and (value > high or (high_open and value >= high)):
        value = high - 0.5 if low is None or high - 0.5 > low else low + (high - low) / 2
    return value


def dumps_answer(value: Any) -> str:
    """The JSON text of a structured answer (compact separators with a space, raw UTF-8)."""
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
