"""``{{variable}}`` templates: find the names, report missing/unused values, fill them in.

A variable is ``{{ name }}`` with ``name`` a letter or ``_`` then letters, digits or ``_`` (at
most 64 characters). Anything else between braces is left as it is. No Django imports.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

VAR_RE = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]{0,63})\s*\}\}")


def variables_in(texts: Iterable[str]) -> list[str]:
    """Distinct variable names in ``texts``, in order of first appearance."""
    seen: dict[str, None] = {}
    for text in texts:
        for m in VAR_RE.finditer(text or ""):
            seen.setdefault(m.group(1), None)
    return list(seen)


def check(names: Iterable[str], values: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """``(missing, unused)``: template variables without a non-empty value, and given values
    that no template uses."""
    names = list(names)
    missing = [n for n in names if not str(values.get(n, "") or "").strip()]
    unused = [k for k in values if k not in names]
    return missing, unused


def fill(text: str, values: Mapping[str, str]) -> str:
    """``text`` with every ``{{name}}`` replaced by ``values[name]`` (unknown names stay)."""
    return VAR_RE.sub(lambda m: str(values[m.group(1)]) if m.group(1) in values else m.group(0), text or "")
