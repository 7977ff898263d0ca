"""The authors' published output format (``exp/safety_<model>/output_<mode>[_<params>].json``).

Such a file is the dataset, in order, with one key added per record: the model's name, holding
its prediction ("safe"/"unsafe"/"" in binary mode, a float or "" otherwise). This module reads
those files into ``Predictions`` and writes predictions back in the same shape, so the authors'
tooling can read casebench runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from .atomic import write_json_atomic
from .data import (
    POSTERIOR_FIELD,
    DATA_FILE_NAME_PUBLISHED, VOTE_SAFE, VOTE_UNSAFE, AblationError, Case, Dataset, DatasetError, ablate_context,
    cases_from_records, check_no_duplicates, duplicate_groups, read_records, validate_parameter_names,
)
from .modes import MODES, Mode, detect_mode, get_mode, mode_from_file_name
from .predictions import Predictions

_NAME_RE = re.compile(r"^output_([A-Za-z]+)(?:_(.+))?\.json$")
#: The record field of an export of a subset run that names the dataset record it holds (its
#: index in the dataset the run asked), so the file is scored on exactly those records. The
#: authors' files (whole datasets, in order) have none; a file either has it on every record or
#: on none.
DATASET_RECORD_FIELD = "dataset_record"
#: The record field of a casebench export that says what the file holds (``ExportHeader``): the
#: mode, context placement, query mutation, reader, selection and state of the run it came from,
#: so that a file of any name scores as its run does. Written on the first record only (the
#: authors' tooling reads the model key and ignores it); a file whose records carry it must carry
#: the same one wherever it appears.
EXPORT_FIELD = "casebench_export"


@dataclass(frozen=True)
class ExportHeader:
    """What a casebench export holds, inside the file (``EXPORT_FIELD``): its ``mode``, the
    context placement (``context_as``), the CI parameters ``removed``, the query ``mutation``
    (None: the dataset's wording), the ``reader`` that read a respond run's answers (its
    identity, version and ``partial_as``; None in judge modes), the ``selection`` of cases
    (``how``, ``pairs``/``stratified``/``limit``, ``seed``), the model as asked (``model_spec``)
    and the model key of the records (``model_key``), and ``state``: whether the run was whole
    when exported (``input_state.InputState.to_dict``; an export with ``--allow-incomplete``
    is partial). ``schema_version`` grows with its fields."""

    mode: str
    model_key: str
    model_spec: str
    context_as: str
    removed: tuple[str, ...] = ()
    mutation: str | None = None
    reader: Mapping[str, Any] | None = None
    selection: Mapping[str, Any] | None = None
    samples: int = 1
    state: Mapping[str, Any] | None = None
    #: the run directory it was exported from (absolute): where a partial export is finished
    run_dir: str | None = None
    schema_version: int = 1

    def to_dict(self) -> dict[str, Any]:
        return {"schema_version": self.schema_version, "mode": self.mode, "model_key": self.model_key,
                "model_spec": self.model_spec, "context_as": self.context_as, "removed": list(self.removed),
                "mutation": self.mutation, "reader": dict(self.reader) if self.reader is not None else None,
                "selection": dict(self.selection) if self.selection is not None else None,
                "samples": self.samples, "state": dict(self.state) if self.state is not None else None,
                "run_dir": self.run_dir}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], path: str | Path = "") -> "ExportHeader":
        """The header of its ``to_dict``; ``DatasetError`` naming the file and field when a field
        is missing or of the wrong kind."""
        def bad(fld: str, why: str) -> DatasetError:
            return DatasetError(Path(path), [(0, f"{EXPORT_FIELD}.{fld}", why)])

        if not isinstance(d, Mapping):
            raise bad("", "must be a JSON object (what the export holds)")
        for fld in ("mode", "model_key", "context_as"):
            if not isinstance(d.get(fld), str) or not d.get(fld):
                raise bad(fld, "missing or not a string")
        try:
            get_mode(str(d["mode"]))
        except Exception as e:  # an unknown mode: named with the modes there are
            raise bad("mode", str(e)) from None
        removed = d.get("removed") or []
        if not isinstance(removed, list) or not all(isinstance(x, str) for x in removed):
            raise bad("removed", "must be a list of CI parameter names")
        for fld in ("reader", "selection", "state"):
            if d.get(fld) is not None and not isinstance(d.get(fld), Mapping):
                raise bad(fld, "must be a JSON object or null")
        return cls(mode=str(d["mode"]), model_key=str(d["model_key"]), model_spec=str(d.get("model_spec") or
                                                                                      d["model_key"]),
                   context_as=str(d["context_as"]), removed=tuple(validate_parameter_names(removed)),
                   mutation=str(d["mutation"]) if d.get("mutation") else None, reader=d.get("reader"),
                   selection=d.get("selection"), samples=int(d.get("samples") or 1), state=d.get("state"),
                   run_dir=str(d["run_dir"]) if d.get("run_dir") else None,
                   schema_version=int(d.get("schema_version") or 1))


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
    if m.group(2) and _names_a_parameter(m.group(2)):
        try:
            removed = validate_parameter_names(m.group(2))
        except AblationError as e:
            raise DatasetError(path, [(None, None, f"file name names an unknown ablation: {e}")]) from None
    return mode, removed


def _names_a_parameter(tail: str) -> bool:
    """Whether the part of a file name after its mode names, or nearly names, a CI parameter
    (``output_score_sender,urgency.json``; ``output_score_sendr.json``, a typo that
    ``parse_file_name`` refuses). A tail that names none is the user's own label
    (``output_binary_mine.json``: binary mode, full contexts)."""
    import difflib

    from .data import all_parameter_names

    names = all_parameter_names()
    return any(part.strip() in names or difflib.get_close_matches(part.strip(), names, n=1, cutoff=0.75)
               for part in tail.split(","))


def model_name_from_path(path: str | Path) -> str | None:
    parent = Path(path).resolve().parent.name
    return parent[len("safety_"):] if parent.startswith("safety_") else None


def _check_values(path: Path, key: str, mode: Mode, values: Sequence[Any]) -> tuple[list[Any], int, list[list[Any]]]:
    """Validate prediction values; return them (None = missing), how many present values the
    mode reads as missing (binary strings other than "safe"/"unsafe", as the published script),
    and each value that is neither a prediction nor the format's missing value ``""`` (a JSON
    null, "maybe"), as [record index, value]: they count as missing, and ``unreadable_warning``
    names them."""
    problems = []
    out: list[Any] = []
    unrecognised = 0
    unreadable: list[list[Any]] = []
    for i, v in enumerate(values):
        value, problem = mode.check_value(v)
        if problem:
            problems.append((i, key, problem))
        elif value is None and v != "":
            unrecognised += v is not None
            unreadable.append([i, v])
        out.append(value)
    if problems:
        raise DatasetError(path, problems)
    return out, unrecognised, unreadable


def unreadable_warning(pred: Predictions, shown: int = 3) -> str | None:
    """One line naming the predictions of a published file that could not be read and count as
    missing (record index and value), or None when there are none."""
    bad = (pred.meta or {}).get("unreadable") or []
    if not bad:
        return None
    import json

    names = ", ".join(f"record {i} holds {json.dumps(v, ensure_ascii=False)}" for i, v in bad[:shown])
    more = f" and {len(bad) - shown} more" if len(bad) > shown else ""
    what = "a number" if pred.mode.continuous else '"safe" or "unsafe"'
    return (f"{pred.source}: {len(bad)} prediction(s) of {pred.model!r} cannot be read and count as missing: "
            f"{names}{more} (a {pred.mode} prediction is {what}, and a missing one \"\")")


def _intent_vote(c: Case) -> int:
    return VOTE_SAFE if c.intended_safe else VOTE_UNSAFE


def _strip_intent_vote(c: Case) -> tuple[int, ...]:
    """Published output files append the intent vote to ``scores`` (21 entries); the dataset
    file holds only the 20 human votes. Drop the appended vote so both read the same."""
    v = c.votes
    if v and v[-1] == _intent_vote(c) and abs(sum(x == VOTE_SAFE for x in v) / len(v) - c.safe_rate) < 1e-9:
        return v[:-1]
    return v


def _declared(p: Path, mode: str | Mode | None, removed: Sequence[str] | None) -> tuple[Mode | None, tuple[str, ...]]:
    """The mode and removals a file holds. A name that says them (``output_score_sender.json``)
    is read; ``mode`` and ``removed`` (``--mode``, ``--remove``) name them where the name does not
    (``output_binary_mine.json``: "mine" is no CI parameter; ``mine.json``: no mode). A name that
    does not parse is an error only when the user named neither, and the error says how to name
    them; a mode the user named that contradicts the file name's is an error naming both."""
    named_mode = get_mode(mode) if mode is not None else None
    named_removed = validate_parameter_names(removed) if removed is not None else None
    m = _NAME_RE.match(p.name)
    try:
        file_mode, file_removed = parse_file_name(p)
        name_says_removal = file_mode is not None
    except DatasetError as e:
        if named_mode is None and named_removed is None:
            raise DatasetError(p, [(None, None, f"{e.problems[0][2]}; if the name does not say what the file "
                                                "holds, name it with --mode (and --remove)")]) from None
        file_mode = mode_from_file_name(m.group(1)) if m else None
        file_removed, name_says_removal = (), False
    if named_mode is not None and file_mode is not None and named_mode.name != file_mode.name:
        raise DatasetError(p, [(None, None, f"the file name says mode {file_mode.name!r} but --mode says "
                                            f"{named_mode.name!r}; rename the file or drop --mode")])
    if name_says_removal or named_removed is None:
        return (named_mode or file_mode), file_removed
    return (named_mode or file_mode), named_removed


def load_published(path: str | Path, model: str | None = None, mode: str | Mode | None = None,
                   removed: Sequence[str] | None = None, reference: Dataset | None = None,
                   reference_origin: str | None = None) -> Predictions:
    """Read a published output file. The model key is the one key a record has beyond the
    dataset fields; the mode comes from ``mode`` (``--mode``), else the file name
    (``output_<mode>...``), else the values (strings: binary; numbers above 1: score; else prob).

    An ablation file (``output_<mode>_<params>.json``) stores its contexts with the removed CI
    parameters already absent, as the authors' runs wrote them: exactly those absences are
    accepted (any other missing field is still an error), and the predictions carry the removal.
    ``removed`` (``--remove``) names them when the file name does not.

    Duplicated records (same query, context and intent) are refused: they would count twice.
    ``reference``: the dataset the file must hold, record for record and in order
    (``check_against_dataset``); None: no such check. ``reference_origin``: where that dataset
    came from, said in a refusal (e.g. "from $CASEBENCH_DATA").
    """
    p = Path(path)
    records = read_records(p)
    header, records = export_header(p, records)
    if header is None:
        mode_obj, removed_t = _declared(p, mode, removed)
    else:  # a casebench export says what it holds: its name is the user's to choose
        mode_obj, removed_t = get_mode(header.mode), header.removed
        if mode is not None and get_mode(mode).name != mode_obj.name:
            raise DatasetError(p, [(0, f"{EXPORT_FIELD}.mode", f"the file is an export of a {mode_obj.name} run, "
                                                               f"but --mode says {get_mode(mode).name!r}; drop --mode")])
        model = model or header.model_key
    records, positions = _dataset_records(p, records)
    cases = cases_from_records(records, p, removed=removed_t)
    if positions is not None:  # an export of a subset run: each case is the dataset record it names
        cases = [replace(c, index=i) for c, i in zip(cases, positions)]
    if reference is not None and positions is None and not _reference_duplicates(reference, removed_t):
        # a file equal to a dataset without duplicates, record for record, has none either: its
        # own duplicate check (a JSON dump of every record) is only needed when the check fails,
        # where it comes first, as it always did (a file with both problems names its duplicates)
        try:
            check_against_dataset(p, cases, reference, removed_t, origin=reference_origin)
        except DatasetError:
            check_no_duplicates(cases, p)
            raise
    else:
        check_no_duplicates(cases, p)
        if reference is not None:
            check_against_dataset(p, cases, reference, removed_t, origin=reference_origin, positions=positions)
    contexts = [c.context for c in cases]
    if reference is not None and not removed_t:
        # the file's contexts equal the dataset's, record for record (just checked): its cases hold
        # the dataset's context objects, so what is kept per context (``data.cases_fingerprint``)
        # is computed once for every file checked against that dataset
        contexts = [reference.cases[j].context for j in (positions if positions is not None else range(len(cases)))]
    extra_keys: list[str] = []
    for c in cases:
        for k in c.extra:
            if k not in extra_keys and k != POSTERIOR_FIELD:  # annotate export's field, not a model's
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
    mode_obj = mode_obj or detect_mode(raw)
    values, unrecognised, unreadable = _check_values(p, model, mode_obj, raw)
    plain = [Case(c.index, c.query, ctx, c.intended_safe, _strip_intent_vote(c), c.safe_rate, c.category,
                  {POSTERIOR_FIELD: c.extra[POSTERIOR_FIELD]} if POSTERIOR_FIELD in c.extra else {})
             for c, ctx in zip(cases, contexts)]
    meta: dict[str, Any] = {"format": "published", "unrecognised_labels": unrecognised}
    if unreadable:
        meta["unreadable"] = unreadable
    if reference is not None:
        meta["checked_against"] = reference.path
    if header is None:
        return Predictions.from_values(str(p), model, mode_obj, plain, values, removed_t, meta)
    from .input_state import InputState

    # what the run was: the model as asked, its samples, selection and reader (the loader turns
    # the reader into the one that applies, ``classify.validation.reader_as_read``)
    meta.update(format="casebench-export", export=header.to_dict(), model_spec=header.model_spec,
                samples=header.samples)
    state = InputState.from_dict({**header.state, "source": str(p)}) if header.state else None
    if state is not None and not state.complete:  # resuming the run, then exporting it again, finishes the file
        import shlex

        again = (f"casebench export {shlex.quote(header.run_dir)} -o {shlex.quote(str(p.resolve()))}"
                 if header.run_dir else None)
        state = replace(state, resume=f"{state.resume} && {again}" if state.resume and again else None,
                        resume_hint=None if state.resume and again else
                        f"resume the run it was exported from ({state.resume or state.resume_hint}), then export it "
                        "again")
    return Predictions.from_values(str(p), model, mode_obj, plain, values, removed_t, meta,
                                   context_as=header.context_as, mutation=header.mutation, state=state)


def export_header(path: Path, records: list[Any]) -> tuple[ExportHeader | None, list[Any]]:
    """What a casebench export says it holds (``EXPORT_FIELD``; None: the file does not say, as
    the authors' files do not) and the records without it. Records that carry it must carry the
    same one; ``DatasetError`` names the record that differs."""
    found: tuple[int, Any] | None = None
    for i, r in enumerate(records):
        if isinstance(r, dict) and EXPORT_FIELD in r:
            if found is None:
                found = (i, r[EXPORT_FIELD])
            elif r[EXPORT_FIELD] != found[1]:
                raise DatasetError(path, [(i, EXPORT_FIELD, f"differs from record {found[0]}'s: an export says what it "
                                                            "holds once")])
    if found is None:
        return None, records
    header = ExportHeader.from_dict(found[1], path)
    return header, [{k: v for k, v in r.items() if k != EXPORT_FIELD} if isinstance(r, dict) else r for r in records]


def _dataset_records(path: Path, records: list[Any]) -> tuple[list[Any], list[int] | None]:
    """The records without ``DATASET_RECORD_FIELD`` and the dataset record each names (None: the
    file has no such field, and is a whole dataset in order). A field on some records only, or a
    value that is not a distinct whole number of at least 0, is an error naming the record."""
    has = [isinstance(r, dict) and DATASET_RECORD_FIELD in r for r in records]
    if not any(has):
        return records, None
    problems: list[tuple[int | None, str | None, str]] = []
    seen: dict[int, int] = {}
    positions: list[int] = []
    for i, (r, h) in enumerate(zip(records, has)):
        v = r.get(DATASET_RECORD_FIELD) if h else None
        if not h:
            problems.append((i, DATASET_RECORD_FIELD, "missing (the file's other records name the dataset record "
                                                      "they hold; every record must)"))
        elif isinstance(v, bool) or not isinstance(v, int) or v < 0:
            problems.append((i, DATASET_RECORD_FIELD, f"must be a whole number of at least 0 (a record index of "
                                                      f"the dataset), got {v!r}"))
        elif v in seen:
            problems.append((i, DATASET_RECORD_FIELD, f"names dataset record {v}, as record {seen[v]} does"))
        else:
            seen[v] = i
        positions.append(v if isinstance(v, int) else -1)
    if problems:
        raise DatasetError(path, problems)
    return [{k: x for k, x in r.items() if k != DATASET_RECORD_FIELD} for r in records], positions


#: the fields ``check_against_dataset`` compares, in the order it reports them
_CHECKED_FIELDS = ("query", "context", "category", "context_intended_to_be_safe", "safe_rate")


def _field_values(c: Case, removed: Sequence[str]) -> dict[str, Any]:
    rate = None if c.safe_rate != c.safe_rate else round(c.safe_rate, 9)
    return {"query": c.query, "context": ablate_context(c.context, removed) if removed else dict(c.context),
            "category": c.category, "context_intended_to_be_safe": c.intended_safe, "safe_rate": rate}


def _reference_fields(reference: Dataset, removed: Sequence[str]) -> list[dict[str, Any]]:
    """``_field_values`` of every record of ``reference``, once per dataset and removals in the
    scoring session (a report checks dozens of files against the same dataset)."""
    from .session import memo_by_object

    return memo_by_object("reference fields", reference, tuple(removed),
                          lambda: [_field_values(c, removed) for c in reference.cases])


def _reference_duplicates(reference: Dataset, removed: Sequence[str]) -> bool:
    """Whether ``reference``, less the CI parameters ``removed``, holds duplicated records
    (``duplicate_groups``), once per dataset and removals in the scoring session."""
    from .session import memo_by_object

    def find() -> bool:
        fields = _reference_fields(reference, removed)  # the contexts less ``removed``, made once
        return bool(duplicate_groups([replace(c, context=f["context"]) for c, f in zip(reference.cases, fields)]))

    return memo_by_object("reference duplicates", reference, tuple(removed), find)


def check_against_dataset(path: str | Path, cases: Sequence[Case], reference: Dataset,
                          removed: Sequence[str] = (), origin: str | None = None,
                          positions: Sequence[int] | None = None) -> None:
    """Refuse (``DatasetError``) a published file that is not ``reference``, record for record
    and in order, naming the first difference: the record count, or the first record and field
    that differ (and, when that record is another record of the dataset, that the order differs).
    ``positions``: the dataset record each of the file's records names (an export of a subset
    run, ``DATASET_RECORD_FIELD``): each is compared with that record, and the count is free.
    Removed CI parameters (an ablation file) are left out of the dataset's contexts first.
    ``origin``: where the dataset came from, when the user did not name it (said in the message,
    with how to name another)."""
    where = f"the dataset {reference.path}" + (f" ({origin}; --data names another)" if origin else "")
    ref = _reference_fields(reference, removed)
    for i, c in enumerate(cases):
        j = i if positions is None else positions[i]
        if j >= len(ref):
            if positions is None:
                break
            raise DatasetError(path, [(i, DATASET_RECORD_FIELD, f"names record {j}, but {where} has {len(ref)} "
                                                                f"records")])
        mine = _field_values(c, removed)
        for fld in _CHECKED_FIELDS:
            if mine[fld] != ref[j][fld]:
                msg = f"differs from record {j} of {where}"
                same = [k for k, r in enumerate(ref) if r["query"] == mine["query"] and r["context"] == mine["context"]]
                if same and same[0] != j:
                    msg += (f"; it is the dataset's record {same[0]}: " + (
                        "the records are not in the dataset's order" if positions is None else
                        f"'{DATASET_RECORD_FIELD}' names another record"))
                if positions is None and len(cases) < len(ref):
                    msg += (f" (the file has {len(cases)} records, the dataset {len(ref)}: an export of a subset "
                            f"run names the dataset record each holds in '{DATASET_RECORD_FIELD}'; export it again "
                            "with this casebench)")
                raise DatasetError(path, [(i, fld, msg)])
    if positions is not None:
        return
    if len(cases) != len(ref):
        raise DatasetError(path, [(min(len(cases), len(ref)), None,
                                   f"the file has {len(cases)} records, {where} has {len(ref)}: the first "
                                   f"{'missing' if len(cases) < len(ref) else 'extra'} record is this one")])


def reference_dataset_path(path: str | Path) -> Path | None:
    """The dataset a published file sits beside in the authors' layout
    (``<root>/exp/safety_<model>/output_*.json`` beside ``<root>/CASEBench_data.json``), or None."""
    p = Path(path).resolve()
    if p.parent.name.startswith("safety_") and p.parent.parent.name == "exp":
        cand = p.parent.parent.parent / DATA_FILE_NAME_PUBLISHED
        if cand.is_file():
            return cand
    return None


def published_records(cases: Sequence[Case], model: str, mode: str | Mode, values: Sequence[Any],
                      name_records: bool = False, header: ExportHeader | None = None) -> list[dict[str, Any]]:
    """Records in the published format: each case's record plus ``model`` -> value ("" if None).
    ``name_records``: each record also names the dataset record it is (``DATASET_RECORD_FIELD``:
    the case's index), as an export of a subset of a dataset does. ``header``: what the export
    holds, on the first record (``EXPORT_FIELD``)."""
    m = get_mode(mode)
    out = []
    for i, (c, v) in enumerate(zip(cases, values)):
        rec = c.to_record()
        for k in list(c.extra):
            rec.pop(k, None)
        rec["scores"] = list(c.votes) + [_intent_vote(c)]  # as published: the intent vote appended
        if name_records:
            rec[DATASET_RECORD_FIELD] = c.index
        if header is not None and i == 0:
            rec[EXPORT_FIELD] = header.to_dict()
        rec[model] = m.published_value(v)
        out.append(rec)
    return out


def write_published(path: str | Path, cases: Sequence[Case], model: str, mode: str | Mode,
                    values: Sequence[Any], name_records: bool = False, header: ExportHeader | None = None) -> None:
    write_json_atomic(path, published_records(cases, model, mode, values, name_records, header), indent=4)


def published_file_name(mode: str | Mode, removed: Sequence[str] = ()) -> str:
    tail = "_" + ",".join(removed) if removed else ""
    return f"output_{get_mode(mode).file_name}{tail}.json"


def reference_files(root: str | Path) -> list[Path]:
    """The authors' full-context output files under ``root`` (a directory holding ``exp/``, or
    ``exp/`` itself): ``safety_<model>/output_<binary|score|logits>.json``, sorted; ablation files
    are left out (a reference row is a model over the full contexts)."""
    r = Path(root)
    base = r / "exp" if (r / "exp").is_dir() else r
    names = {f"output_{m.file_name}.json" for m in MODES.values() if m.published}
    return sorted(p for p in base.glob("safety_*/output_*.json") if p.name in names)


def load_references(root: str | Path, reference: Dataset | None = None) -> list[Predictions]:
    """The published models under ``root`` (``reference_files``) as predictions, to show beside
    a user's own inputs as reference rows. Raises ``DatasetError`` naming the directory when it
    holds none."""
    files = reference_files(root)
    if not files:
        raise DatasetError(Path(root), [(None, None, "no published output files (exp/safety_<model>/output_<mode>.json) "
                                                     "here; fetch them with `casebench data fetch`")])
    return [load_published(f, reference=reference) for f in files]


def restrict_to(pred: Predictions, cases: Sequence[Case]) -> Predictions | None:
    """``pred`` (a published model) on ``cases`` alone, in their order: the cases of another input
    (a run of a subset) matched by query, intent and category, so that the published model and the
    run are compared on the same cases. None when no case matches (another dataset)."""
    where: dict[tuple[str, bool, str], int] = {}
    for pos, c in enumerate(pred.cases):
        where.setdefault((c.query, bool(c.intended_safe), c.category), pos)
    keep = [where[k] for k in ((c.query, bool(c.intended_safe), c.category) for c in cases) if k in where]
    return pred.take(keep) if keep else None
