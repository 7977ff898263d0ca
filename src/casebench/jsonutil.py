"""Strict JSON for results: one leaf helper that statistics and presentation both use.

It lives outside ``stats/`` and ``present/`` so that statistics can serialise their results
without importing presentation code (data flows forward). Standard library only.
"""

from __future__ import annotations

import json
import math
from typing import Any, overload


@overload
def json_safe(x: dict[str, Any]) -> dict[str, Any]: ...
@overload
def json_safe(x: Any) -> Any: ...


def json_safe(x: Any) -> Any:
    """Strict JSON: NaN as null, infinities as the strings "inf"/"-inf" (recursively)."""
    if isinstance(x, float) and (math.isnan(x) or math.isinf(x)):
        return None if math.isnan(x) else ("inf" if x > 0 else "-inf")
    if isinstance(x, dict):
        return {k: json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [json_safe(v) for v in x]
    return x


def json_error_where(e: "json.JSONDecodeError", line: bool = True) -> str:
    """A JSON syntax error in words: its message, then where ("line 3, column 7") in
    parentheses. Several of the decoder's messages end in "at" ("Unterminated string starting
    at"), so "<msg> at line 3" would read "starting at at line 3"."""
    where = f"line {e.lineno}, column {e.colno}" if line else f"column {e.colno}"
    return f"{e.msg} ({where})"
