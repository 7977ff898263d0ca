"""The authors' published output format (``exp/safety_<model>/output_<mode>[_<params>].json``).

Such a file is the dataset, in order, with one key added per record: the model's name, holding
its prediction ("safe"/"unsafe"/"" in binary mode, a float or "" otherwise). This module reads
those files into ``Predictions`` and writes predictions back in the same shape, so the authors'
tooling can read casebench runs.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Sequence

from .atomic import write_json_atomic
from .data import (
    VOTE_SAFE, VOTE_UNSAFE, AblationError, Case, DatasetError, cases_from_records, read_records,
    validate_parameter_names,
)
from .modes import Mode, detect_mode, get_mode, mode_from_file_name
from .predictions import Predictions

_NAME_RE = re.compile(r"^output_([A-Za-z]+)(?:_(.+))?\.json$")


def parse_file_name(path: str | Path) -> tuple[Mode | None, tuple[str, ...]]:
    """(mode, removed parameters) from a published file name, or (None, ()) if it does not match.

    ``output_score_sender,urgency.json`` is a score-mode run with ``sender`` and ``urgency``
    removed from every context; an unknown parameter name in it is an error naming the file.
    """
    m = _NAME_RE.match(Path(path).name)
    if not m:
        return None, ()
    mode = mode_from_file_name(m.group(1))
    if mode is None:
        return None, ()
    removed: tuple[str, ...] = ()
    if m.group(2):
        try:
            removed = validate_parameter_names(m.group(2))
        except AblationError as e:
            raise DatasetError(path, [(None, None, f"file name names an unknown ablation: {e}")]) from None
    return mode, removed


def model_name_from_path(path: str | Path) -> str | None:
    parent = Path(path).resolve().parent.name
    return parent[len("safety_"):] if parent.startswith("safety_") else None


def _check_values(path: Path, key: str, mode: Mode, values: Sequence[Any]) -> tuple[list[Any], int]:
    """Validate prediction values; return them (None = missing) and how many present values the
    mode reads as missing (binary strings other than "safe"/"unsafe", as the published script)."""
    problems = []
    out: list[Any] = []
    unrecognised = 0
    for i, v in enumerate(values):
        value, problem = mode.check_value(v)
        if problem:
            problems.append((i, key, problem))
        elif value is None and v not in ("", None):
            unrecognised += 1
        out.append(value)
    if problems:
        raise DatasetError(path, problems)
    return out, unrecognised


def _intent_vote(c: Case) -> int:
    return VOTE_SAFE if c.intended_safe else VOTE_UNSAFE


def _strip_intent_vote(c: Case) -> tuple[int, ...]:
    """Published output files append the intent vote to ``scores`` (21 entries); the dataset
    file holds only the 20 human votes. Drop the appended vote so both read the same."""
    v = c.votes
    if v and v[-1] == _intent_vote(c) and abs(sum(x == VOTE_SAFE for x in v) / len(v) - c.safe_rate) < 1e-9:
        return v[:-1]
    return v


def load_published(path: str | Path, model: str | None = None, mode: str | Mode | None = None) -> Predictions:
    """Read a published output file. The model key is the one key a record has beyond the
    dataset fields; the mode comes from the file name (``output_<mode>...``) or, failing that,
    from the values (strings: binary; numbers above 1: score; else prob).

    An ablation file (``output_<mode>_<params>.json``) stores its contexts with the removed CI
    parameters already absent, as the authors' runs wrote them: exactly those absences are
    accepted (any other missing field is still an error), and the predictions carry the removal.
    """
    p = Path(path)
    records = read_records(p)
    file_mode, removed = parse_file_name(p)
    cases = cases_from_records(records, p, removed=removed)
    extra_keys: list[str] = []
    for c in cases:
        for k in c.extra:
            if k not in extra_keys:
                extra_keys.append(k)
    if model is None:
        if len(extra_keys) != 1:
            found = ", ".join(extra_keys) or "none"
            raise DatasetError(p, [(None, None, f"expected exactly one model key beyond the dataset fields, found: {found}")])
        model = extra_keys[0]
    missing = [(c.index, model, "missing (every record needs the model's prediction)") for c in cases if model not in c.extra]
    if missing:
        raise DatasetError(p, missing)
    raw = [c.extra[model] for c in cases]
    mode_obj = get_mode(mode) if mode is not None else (file_mode or detect_mode(raw))
    values, unrecognised = _check_values(p, model, mode_obj, raw)
    plain = [Case(c.index, c.query, c.context, c.intended_safe, _strip_intent_vote(c), c.safe_rate, c.category)
             for c in cases]
    meta = {"format": "published", "unrecognised_labels": unrecognised}
    return Predictions.from_values(str(p), model, mode_obj, plain, values, removed, meta)


def published_records(cases: Sequence[Case], model: str, mode: str | Mode, values: Sequence[Any]) -> list[dict[str, Any]]:
    """Records in the published format: each case's record plus ``model`` -> value ("" if None)."""
    m = get_mode(mode)
    out = []
    for c, v in zip(cases, values):
        rec = c.to_record()
        for k in list(c.extra):
            rec.pop(k, None)
        rec["scores"] = list(c.votes) + [_intent_vote(c)]  # as published: the intent vote appended
        rec[model] = m.published_value(v)
        out.append(rec)
    return out


def write_published(path: str | Path, cases: Sequence[Case], model: str, mode: str | Mode,
                    values: Sequence[Any]) -> None:
    write_json_atomic(path, published_records(cases, model, mode, values), indent=4)


def published_file_name(mode: str | Mode, removed: Sequence[str] = ()) -> str:
    tail = "_" + ",".join(removed) if removed else ""
    return f"output_{get_mode(mode).file_name}{tail}.json"
