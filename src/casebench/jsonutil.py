"""Strict JSON for results: one leaf helper that statistics and presentation both use.

It lives outside ``stats/`` and ``present/`` so that statistics can serialise their results
without importing presentation code (data flows forward). Standard library only.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any, Iterator, overload


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


def json_object(text: str | bytes, *, line: bool = True) -> dict[str, Any]:
    """The JSON object a text holds. Anything else raises ``ValueError`` saying why in words
    ("not valid JSON: <why> (line 3, column 7)", or "must be a JSON object"), which the caller
    prefixes with its file, flag or line, so every reader of a JSON object words it alike."""
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"not valid JSON: {json_error_where(e, line=line)}") from None
    if not isinstance(obj, dict):
        raise ValueError("must be a JSON object")
    return obj


def jsonl_objects(data: bytes) -> Iterator[tuple[int, dict[str, Any]]]:
    """The JSON objects of a JSON-lines file's bytes, with their 1-based line numbers: blank
    lines skipped, and the torn tail after the last newline (a write a kill cut short) left out.
    A whole line that is not a JSON object raises ``ValueError`` whose ``args`` are (line
    number, why), so each reader names its own file in the message."""
    lines = data.split(b"\n")
    lines.pop()  # after the last newline: b"" when the file is whole, else a torn line
    for lineno, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except ValueError as e:
            raise ValueError(lineno, str(e)) from None
        if not isinstance(obj, dict):
            raise ValueError(lineno, "not an object")
        yield lineno, obj


def append_line(fd: int, data: bytes) -> None:
    """Write ``data`` (one whole line) to an ``O_APPEND`` descriptor with as few ``write`` calls
    as the kernel allows: no user-space buffer that a kill could lose."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
