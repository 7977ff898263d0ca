"""The version of the JSON shape of the results that leave ``stats/``.

Why: ``score --json``, ``compare --json``, ``human --json``, a kept reference row and the report's
embedded data are read by other programs and by casebench itself later; each carries
``schema_version`` so that a reader can tell which shape it holds, and a typed block's
``from_dict`` refuses one written by a newer casebench rather than misread it. Standard library only.
"""

from __future__ import annotations

from typing import Any, Mapping

#: the version of the typed results' JSON shape; raise it when a field changes meaning or goes
SCHEMA_VERSION = 1


def check_schema(d: Mapping[str, Any], what: str) -> None:
    """Refuse a dict written by a newer schema (its fields may mean something else)."""
    v = d.get("schema_version")
    if v is not None and int(v) > SCHEMA_VERSION:
        raise ValueError(f"{what}: schema version {v} is newer than this casebench reads ({SCHEMA_VERSION})")
