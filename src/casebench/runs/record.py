"""The run record: a run directory's files, their typed contents, and the lock. The one module
that reads and writes them (no other module names a run file or a format version).

A run directory holds:

* ``manifest.json`` (``Manifest``): what was asked (``Asked``: everything that can change an
  answer: dataset SHA-256, model, mode, context placement, removed CI parameters, cases,
  samples, generation settings, template hash, parse re-asks, stop-at-verdict, the backend's
  answer-changing options with their defaults resolved, the refusal classifier), where the data
  came from, and how it went: ``status``, ``totals``, and ``history``, one ``Invocation`` per
  command that worked on the run (start, end, host, pid, version, counts, transport options,
  the backend's description). Written atomically (temp file + ``os.replace``). A resume whose
  ``Asked`` differs in anything is refused before the manifest is touched; an invocation appends
  its own history entry and never rewrites an earlier one.
* ``records.jsonl`` (``Record``): one JSON line per *outcome* of a request (case, sample),
  appended with a single ``write``. A kill at any point leaves, at worst, a torn last line, which
  ``RunDir`` truncates on open (the request is then asked again).

Record semantics (the contract the runner and every reader share):

* A **final** record (``final: true``) is a judgement outcome: either a read answer, or a missing
  value after the parse re-asks were spent (``label``/``score``/``p_safe`` null, ``error`` the
  reason, ``text`` the last answer). Each (case, sample) has at most one.
* A **non-final** record (``final: false``, ``error`` starting with ``"transport: "``) says the
  transport retries were spent without any answer. It is kept so a user can see what failed, but
  it is never a judgement: aggregation ignores it and a resumed run asks that request again.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import logging
import os
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Mapping, Sequence

from ..atomic import write_json_atomic
from ..jsonutil import append_line, json_object, jsonl_objects

if TYPE_CHECKING:
    from ..modes import Mode

log = logging.getLogger("casebench.runs")

MANIFEST = "manifest.json"
RECORDS = "records.jsonl"
LOCK = ".lock"
FORMAT = "casebench-run"
#: 2: typed manifest with ``asked`` and ``history`` (1: the first, flat format; still readable)
FORMAT_VERSION = 2


class RunError(Exception):
    """A run directory cannot be used (unreadable, corrupt, mismatching, locked)."""


class ManifestMismatch(RunError):
    """The command asks something different from what the run directory holds."""

    def __init__(self, path: str | Path, differences: Sequence[tuple[str, Any, Any]], why: str | None = None):
        self.differences = list(differences)
        lines = [f"{path} holds a different run; refusing to resume it (nothing was changed). "
                 "What differs (run dir -> this command):"]
        for name, old, new in self.differences:
            lines.append(f"  {name}: {_short(old)} -> {_short(new)}")
        if why:  # why the cases cannot grow (``select.growth_refusal``)
            lines.append(f"  ({why})")
        lines.append("Use another output directory (-o), or repeat the command that started this run.")
        super().__init__("\n".join(lines))


class RunLocked(RunError):
    """Another process is writing this run directory."""


class RunState(str, Enum):
    """Where a run stands. ``complete``: every request has a final record. Prints as its value
    (``complete``), which is also how the manifest stores it."""

    RUNNING = "running"
    COMPLETE = "complete"
    INCOMPLETE = "incomplete"  # some requests failed in transport; re-run to ask them again
    INTERRUPTED = "interrupted"  # Ctrl-C / SIGTERM
    BUDGET = "budget"  # stopped before passing --max-cost
    FAILED = "failed"  # the backend refused a request, or an unexpected error

    def __str__(self) -> str:
        return self.value

    __format__ = str.__format__  # type: ignore[assignment]  # f"{state}" is the value on every Python version


#: the former name of ``RunState``
RunStatus = RunState


@dataclass
class RunCounts:
    """How far a run is, counted over the requests it plans (cases x samples): the one
    definition the runner's summary, the manifest's totals and ``run_status`` share.

    ``final``: requests with a final record; of those ``answered`` (a usable answer) and
    ``missing`` (re-asks spent, no usable answer); ``pending``: requests without a final record
    (never asked, or failed in transport), asked again by a resume."""

    requests: int = 0
    final: int = 0
    answered: int = 0
    missing: int = 0
    pending: int = 0

    @classmethod
    def tally(cls, planned: Iterable[tuple[int, int]], finals: Mapping[tuple[int, int], "Record"]) -> "RunCounts":
        """The counts of the ``planned`` (case, sample) requests given their final records
        (``final_records``); final records of requests not planned are not counted."""
        keys = list(dict.fromkeys(planned))
        done = [k for k in keys if k in finals]
        answered = sum(1 for k in done if finals[k].answered)
        return cls(requests=len(keys), final=len(done), answered=answered, missing=len(done) - answered,
                   pending=len(keys) - len(done))

    def counts(self) -> "RunCounts":
        """Just the counts (of a subclass that adds more, e.g. ``Totals``)."""
        return RunCounts(**{f.name: getattr(self, f.name) for f in fields(RunCounts)})

    @property
    def all_final(self) -> bool:
        """Every planned request has a final record."""
        return self.pending == 0

    def describe(self) -> str:
        """``F/R requests final (A answered, M missing), P pending``."""
        return (f"{self.final}/{self.requests} requests final ({self.answered} answered, {self.missing} missing), "
                f"{self.pending} pending")


def _short(value: Any, limit: int = 120) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False) if not isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _build(cls: type, data: Mapping[str, Any] | None) -> Any:
    """A dataclass from a dict, ignoring unknown keys (a newer casebench may add fields)."""
    data = data or {}
    names = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in data.items() if k in names})


# --------------------------------------------------------------------------------------------
# The manifest


@dataclass
class DatasetRef:
    """The dataset a run was asked on."""

    path: str
    sha256: str
    fingerprint: str = ""
    cases: int | None = None


@dataclass
class Selection:
    """How the run's cases were chosen (the cases themselves are in ``Asked.cases``)."""

    how: str
    limit: int | None = None
    stratified: int | None = None
    seed: int | None = None
    #: whole query pairs (both contexts of each query), stratified by category
    pairs: int | None = None
    #: the procedure that chose a seeded subset (``select.SELECTION_PROCEDURE``); None in a run
    #: written before it was recorded, which was chosen by procedure 1 (subsets that do not nest)
    procedure: int | None = None

    @property
    def kind(self) -> str | None:
        """"limit", "stratified" or "pairs" (None: every case, or an explicit list)."""
        return next((k for k in ("pairs", "stratified", "limit") if getattr(self, k) is not None), None)

    @property
    def effective_procedure(self) -> int | None:
        """The procedure that chose a seeded subset (1 when the manifest predates the record);
        None for a selection that is not a seeded subset."""
        if self.kind not in ("pairs", "stratified"):
            return None
        return 1 if self.procedure is None else int(self.procedure)


@dataclass
class Asked:
    """Everything that can change an answer. A resume must ask exactly this, field for field;
    an option added to casebench later belongs here, so that it is compared too, with a None
    default (``fingerprint`` leaves None fields out, so older runs' records still fit)."""

    dataset_sha256: str
    model: str
    mode: str
    context_as: str
    removed: list[str]
    cases: list[int]
    samples: int
    #: generation settings (temperature, top_p, max_tokens, seed, system, top_logprobs)
    settings: dict[str, Any]
    #: SHA-256 of the judge template's text (None: the mode uses no template)
    template_sha256: str | None
    parse_retries: int
    #: text modes stop generating once the verdict is parsed (False: ``--full-answers``)
    stop_at_verdict: bool
    #: the backend's answer-changing options, defaults resolved (e.g. prob_method, dtype, extra_body)
    backend_options: dict[str, Any]
    #: respond mode: the refusal classifier's identity and version, and how partial answers count
    classifier: dict[str, Any] | None = None
    #: context as turns, concat or reveal: SHA-256 of the fixed wording the placement adds
    #: (``prompts.wording_of``)
    context_wording_sha256: str | None = None
    #: reveal and concat placements: the version of their fixed wording
    #: (``prompts.REVEAL_WORDING_VERSION``), beside its hash above
    context_wording_version: int | None = None
    #: how an unreadable answer is asked again (``effective_reask``): "repair" (the answer and a
    #: short repair message quoting the format), "same" (the question as it was) or None (no
    #: re-asks: prob mode, or ``--parse-retries 0``)
    reask: str | None = None
    #: a query mutation (``mutations.MutationSource.describe``: name, kind, version, where the
    #: rewordings came from and, for texts not built in, a hash of the texts asked); None: the
    #: queries as the dataset words them
    mutation: dict[str, Any] | None = None

    def fingerprint(self) -> str:
        """Who produces an answer: a short hash of everything here that changes one answer (the
        dataset, backend and model, mode, placement, removals, generation settings, template,
        re-asks, backend options, classifier), leaving out which cases and how many samples are
        asked (they change what is asked, not an answer). Each record carries its producer's
        fingerprint (``Record.producer``), so a record can prove which run wrote it. Fields that
        are None are left out, so that a field added later (with a None default) keeps the
        fingerprints of the runs written before it, and their records go on fitting."""
        return self._fingerprint(_producing(_canonical(_normal(asdict(self)))))

    def fingerprints(self) -> frozenset[str]:
        """Every fingerprint a record written by this run may carry: ``fingerprint()``, and the
        one casebench wrote before the reader's validation figures were left out of it
        (``_DESCRIPTIVE``), so that the records of a run begun then still prove they fit."""
        return frozenset({self.fingerprint(), self._fingerprint(_canonical(_normal(asdict(self))))})

    @staticmethod
    def _fingerprint(d: dict[str, Any]) -> str:
        d = dict(d)
        for name in _NOT_IN_FINGERPRINT:
            d.pop(name, None)
        d = {k: v for k, v in d.items() if v is not None}
        blob = json.dumps(d, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
        return "fp1:" + hashlib.sha256(blob.encode("ascii")).hexdigest()[:16]

    def differences(self, other: "Asked") -> list[tuple[str, Any, Any]]:
        """(name, self's value, other's value) for each field that differs; dict fields are
        compared key by key so the message names e.g. ``settings.temperature``."""
        a, b = _producing(_normal(asdict(self))), _producing(_normal(asdict(other)))
        out: list[tuple[str, Any, Any]] = []
        for name in a:
            x, y = a[name], b.get(name)
            if x == y:
                continue
            if isinstance(x, dict) and isinstance(y, dict):
                for k in sorted(set(x) | set(y)):
                    if x.get(k) != y.get(k):
                        out.append((f"{name}.{k}", x.get(k), y.get(k)))
            elif name == "cases" and isinstance(x, list) and isinstance(y, list):
                out.append((name, f"{len(x)} cases", f"{len(y)} cases" + (" (other cases)" if len(x) == len(y) else "")))
            else:
                out.append((name, x, y))
        return out


#: ``Asked`` fields that say what is asked but not how one answer comes about
_NOT_IN_FINGERPRINT = ("cases", "samples")

#: (field, key) of ``Asked`` that describe a producer without changing an answer or a verdict:
#: the refusal reader's validated error, recorded for the report, is re-measured and grows
#: between casebench versions while the reader (name, version, settings) stays the same, so it
#: is neither compared on a resume nor hashed into the fingerprint.
_DESCRIPTIVE: tuple[tuple[str, str], ...] = (("classifier", "validation"),)


def _producing(d: dict[str, Any]) -> dict[str, Any]:
    """``d`` (an ``Asked`` as a dict) without the descriptive keys of ``_DESCRIPTIVE``."""
    out = dict(d)
    for field_name, key in _DESCRIPTIVE:
        if isinstance(out.get(field_name), dict):
            out[field_name] = {k: v for k, v in out[field_name].items() if k != key}
    return out


#: how a text mode asks again after an unreadable answer (``--reask``)
REASK_CHOICES: tuple[str, ...] = ("repair", "same")


def effective_reask(mode: "str | Mode", parse_retries: int, reask: str) -> str | None:
    """What ``--reask`` means for a run: None when nothing is ever re-asked for a parse failure
    (prob mode reads no text; ``--parse-retries 0``); "same" for a mode with no repair message
    (respond mode, context generation: the question as it was); else ``reask`` itself."""
    from ..modes import get_mode

    if reask not in REASK_CHOICES:
        raise RunError(f"--reask must be one of {', '.join(REASK_CHOICES)}, got {reask!r}")
    m = get_mode(mode)
    if parse_retries <= 0 or m.want == "p_safe":
        return None
    if m.repair_message(None) is None:
        return "same"
    return reask


def _asked(d: Mapping[str, Any]) -> "Asked":
    """``Asked`` from the manifest; one written before re-asks were recorded re-asked the same
    question, and says so now (so a resume with repair messages is refused)."""
    asked = _build(Asked, d)
    if "reask" not in d:
        try:
            asked.reask = effective_reask(asked.mode, int(asked.parse_retries), "same")
        except (RunError, ValueError):
            asked.reask = "same"
    return asked


@dataclass
class Totals(RunCounts):
    """The run's counts (``RunCounts``) after its last invocation, and its tokens, cost and time
    over all invocations (the manifest's ``totals``)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    cost_status: str = "unknown"
    elapsed_s: float = 0.0


@dataclass
class Invocation:
    """One command that worked on the run: when, where, with what transport, and what it did."""

    started_at: str
    host: str
    pid: int
    casebench_version: str
    #: options that do not change answers and may differ between invocations (base URL, batch
    #: size, connections, timeouts)
    transport: dict[str, Any] = field(default_factory=dict)
    #: the backend's own description (model, endpoint, library versions; never a key)
    backend: dict[str, Any] = field(default_factory=dict)
    finished_at: str | None = None
    status: str | None = None
    asked: int = 0
    retries: int = 0
    transport_failures: int = 0
    elapsed_s: float = 0.0
    message: str | None = None
    #: the command line that made this invocation (``casebench run ...``, credentials redacted;
    #: None: made through the Python API) and the directory it ran in: what resumes the run
    #: (``runs.results.resume_command``)
    command: list[str] | None = None
    cwd: str | None = None
    #: the run grew in this invocation (a larger ``--pairs``/``--stratified``/``--limit``):
    #: {"from": the old selection, "to": the new, "cases_before", "cases_added"}; the records
    #: already there were kept as they were
    grew: dict[str, Any] | None = None


@dataclass
class Manifest:
    """``manifest.json``, typed. See the module docstring."""

    dataset: DatasetRef
    asked: Asked
    selection: Selection
    templates_source: str | None
    price: dict[str, Any]
    retry: dict[str, Any]
    created_at: str
    casebench_version: str
    status: RunState = RunState.RUNNING
    message: str | None = None
    finished_at: str | None = None
    totals: Totals = field(default_factory=Totals)
    history: list[Invocation] = field(default_factory=list)
    format: str = FORMAT
    format_version: int = FORMAT_VERSION

    # convenient read-only views
    @property
    def model(self) -> str:
        return self.asked.model

    @property
    def mode(self) -> str:
        return self.asked.mode

    @property
    def samples(self) -> int:
        return self.asked.samples

    @property
    def cases(self) -> list[int]:
        return list(self.asked.cases)

    @property
    def removed(self) -> tuple[str, ...]:
        return tuple(self.asked.removed)

    @property
    def mutation(self) -> str | None:
        """The query mutation's name (``mutations``), None for the dataset's own wording."""
        return (self.asked.mutation or {}).get("name")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["status"] = self.status.value
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = MANIFEST) -> "Manifest":
        if d.get("format_version") == 1 or ("asked" not in d and "mode" in d):
            return _from_v1(d)
        try:
            return cls(
                dataset=_build(DatasetRef, d["dataset"]),
                asked=_asked(d["asked"]),
                selection=_build(Selection, d.get("selection")),
                templates_source=d.get("templates_source"),
                price=dict(d.get("price") or {}),
                retry=dict(d.get("retry") or {}),
                created_at=d.get("created_at") or "",
                casebench_version=d.get("casebench_version") or "unknown",
                status=RunState(d.get("status") or RunState.RUNNING),
                message=d.get("message"),
                finished_at=d.get("finished_at"),
                totals=_build(Totals, d.get("totals")),
                history=[_build(Invocation, h) for h in d.get("history") or []],
                format=d.get("format", FORMAT),
                format_version=int(d.get("format_version", FORMAT_VERSION)),
            )
        except KeyError as e:
            raise RunError(f"{where}: field {e.args[0]!r} missing") from None
        except (TypeError, ValueError) as e:
            raise RunError(f"{where}: not a valid manifest ({e})") from None


def _from_v1(d: Mapping[str, Any]) -> Manifest:
    """Read a format-1 manifest (casebench 0.1's flat layout) for scoring and export. Such a run
    is not resumed: the first format did not record every answer-changing option."""
    for k in ("mode", "model", "dataset", "selection", "samples"):
        if k not in d:
            raise RunError(f"{MANIFEST}: field '{k}' missing")
    sel = dict(d["selection"])
    asked = Asked(
        dataset_sha256=d["dataset"].get("sha256", ""), model=d["model"], mode=d["mode"], context_as="user",
        removed=list(d.get("removed") or []), cases=list(sel.get("cases") or []), samples=int(d["samples"]),
        settings=dict(d.get("settings") or {}), template_sha256=(d.get("templates") or {}).get("sha256"),
        parse_retries=int(d.get("parse_retries", 2)), stop_at_verdict=False, backend_options={},
    )
    try:
        asked.reask = effective_reask(asked.mode, asked.parse_retries, "same")
    except (RunError, ValueError):
        asked.reask = "same"
    return Manifest(
        dataset=_build(DatasetRef, d["dataset"]), asked=asked,
        selection=Selection(sel.get("how", "?"), sel.get("limit"), sel.get("stratified"), sel.get("seed")),
        templates_source=(d.get("templates") or {}).get("source"), price=dict(d.get("price") or {}),
        retry=dict(d.get("retry") or {}), created_at=d.get("started_at") or "",
        casebench_version=d.get("casebench_version", "unknown"), status=RunState(d.get("status") or RunState.RUNNING),
        message=d.get("message"), finished_at=d.get("finished_at"), totals=_build(Totals, d.get("totals")),
        history=[], format_version=1,
    )


def _canonical(value: Any) -> Any:
    """``value`` with whole floats as ints (``0.0`` and ``0`` ask the same), for hashing."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _canonical(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    return value


def _normal(value: Any) -> Any:
    """JSON round trip, so tuples and lists (and int/float) compare as they would on disk."""
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def read_manifest(run_path: str | Path) -> Manifest:
    """The manifest of a run directory; ``RunError`` naming the file when it is missing or bad."""
    p = Path(run_path) / MANIFEST
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RunError(f"{Path(run_path)}: not a run directory (no {MANIFEST})") from None
    try:
        m = json_object(text)
    except ValueError as e:
        raise RunError(f"{p}: {e}") from None
    return Manifest.from_dict(m, where=str(p))


def is_run_dir(path: str | Path) -> bool:
    p = Path(path)
    return p.is_dir() and (p / MANIFEST).exists()


def manifest_bytes(run_path: str | Path) -> bytes | None:
    """The manifest file's bytes (None if absent): what a refused resume must leave as it was."""
    try:
        return (Path(run_path) / MANIFEST).read_bytes()
    except FileNotFoundError:
        return None


# --------------------------------------------------------------------------------------------
# Records


@dataclass
class Record:
    """One line of ``records.jsonl``.

    ``usage`` and ``latency_s`` add up every ask that led to this outcome (parse re-asks cost
    tokens too); ``attempts`` is how many answers were received for it. ``behaviour`` is the
    refusal classifier's reading of a chatbot answer (respond mode): comply, partial or refuse.
    """

    case: int
    sample: int
    text: str | None = None
    label: str | None = None
    score: float | None = None
    p_safe: float | None = None
    error: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    latency_s: float = 0.0
    attempts: int = 1
    final: bool = True
    behaviour: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    #: the fingerprint of the run that produced this record (``Asked.fingerprint``); None in
    #: records written before records named their producer
    producer: str | None = None

    @property
    def key(self) -> tuple[int, int]:
        return (self.case, self.sample)

    @property
    def answered(self) -> bool:
        """A final record with a usable judgement."""
        return self.final and self.error is None and (self.label is not None or self.p_safe is not None)

    def to_json(self) -> str:
        d = asdict(self)
        if d["behaviour"] is None:
            del d["behaviour"]  # judge modes: keep their lines as they were
        if d["producer"] is None:
            del d["producer"]
        return json.dumps(d, ensure_ascii=False, allow_nan=False)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Record":
        return _build(cls, d)


def usage_tokens(usage: Mapping[str, Any]) -> tuple[int, int]:
    """(prompt, completion) tokens from an OpenAI- or Anthropic-style usage dict."""
    prompt = usage.get("prompt_tokens", usage.get("input_tokens", 0)) or 0
    completion = usage.get("completion_tokens", usage.get("output_tokens", 0)) or 0
    return int(prompt), int(completion)


def add_usage(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, int]:
    out = dict(a)
    for k, v in b.items():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out[k] = out.get(k, 0) + v
    return out


def iter_records(run_path: str | Path) -> Iterator[Record]:
    """Every record of a run, in file order. A torn last line is skipped (readers never write);
    any other bad line raises ``RunError`` naming the file and line."""
    p = Path(run_path) / RECORDS
    if not p.exists():
        return
    with open(p, "rb") as f:
        data = f.read()
    torn = data[data.rfind(b"\n") + 1:]  # after the last newline: b"" when the file is whole
    if torn:
        log.warning("%s: ignoring a torn last line (%d bytes); the runner repairs it on resume", p, len(torn))
    lineno = 0
    try:
        for lineno, obj in jsonl_objects(data):
            rec = Record.from_dict(obj)
            if not isinstance(rec.case, int) or not isinstance(rec.sample, int):
                raise ValueError("'case' and 'sample' must be integers")
            yield rec
    except (ValueError, TypeError) as e:
        where, why = (e.args if len(e.args) == 2 and isinstance(e.args[0], int) else (lineno, e))
        raise RunError(f"{p}, line {where}: not a valid record ({why}); `casebench runs repair "
                       f"{Path(run_path)}` moves damaged lines aside and keeps every valid record") from None


def _whole_record(raw: bytes) -> bool:
    """Whether ``raw`` (a line without its newline) is a complete record."""
    try:
        obj = json.loads(raw)
    except ValueError:
        return False
    return (isinstance(obj, dict) and isinstance(obj.get("case"), int) and isinstance(obj.get("sample"), int)
            and "final" in obj)


def final_records(records: Iterable[Record]) -> dict[tuple[int, int], Record]:
    """The final record of each (case, sample). If a file somehow holds two, the first wins
    (it is the one that was reported when it was written)."""
    out: dict[tuple[int, int], Record] = {}
    for r in records:
        if r.final and r.key not in out:
            out[r.key] = r
    return out


def write_records(run_path: str | Path, records: Iterable[Record], producer: str | None = None) -> None:
    """Write a whole ``records.jsonl`` at once (atomically): for a new run directory derived from
    another one (``casebench classify``), never for appending. ``producer``: the new run's
    fingerprint, stamped on every record (the records are that run's readings)."""
    from ..atomic import write_text_atomic

    if producer is not None:
        records = [replace(r, producer=producer) for r in records]
    write_text_atomic(Path(run_path) / RECORDS, "".join(r.to_json() + "\n" for r in records))


def write_manifest(run_path: str | Path, manifest: Manifest) -> None:
    write_json_atomic(Path(run_path) / MANIFEST, manifest.to_dict(), fsync=True)  # what a resume trusts


# --------------------------------------------------------------------------------------------
# The directory


class RunDir:
    """An open run directory. Use as a context manager; holds an exclusive lock while open.

    Opening creates the directory when needed, takes the lock (so two runners never write the
    same run), and repairs a torn last line of ``records.jsonl``.
    """

    def __init__(self, path: str | Path, *, lock: bool = True, create: bool = True):
        self.path = Path(path)
        self.repaired_bytes = 0
        #: the fingerprint stamped on every record appended (set when a manifest is written or
        #: read: the records that follow are that manifest's run's)
        self.producer: str | None = None
        self._lock_fd: int | None = None
        self._rec_fd: int | None = None
        if not self.path.exists():
            if not create:
                raise RunError(f"{self.path}: no such run directory")
            self.path.mkdir(parents=True)
        elif not self.path.is_dir():
            raise RunError(f"{self.path}: not a directory")
        if lock:
            self._acquire_lock()
        try:
            self.repaired_bytes = self.repair()
        except BaseException:
            self.close()
            raise

    @property
    def manifest_path(self) -> Path:
        return self.path / MANIFEST

    @property
    def records_path(self) -> Path:
        return self.path / RECORDS

    def _acquire_lock(self) -> None:
        fd = os.open(self.path / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
            os.close(fd)
            if e.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                who = f" (pid {holder})" if holder else ""
                raise RunLocked(f"{self.path} is in use by another casebench process{who}; "
                                "wait for it to finish or stop it first") from None
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._lock_fd = fd

    def close(self) -> None:
        if self._rec_fd is not None:
            os.close(self._rec_fd)
            self._rec_fd = None
        if self._lock_fd is not None:
            # The lock file stays (removing it would race with a waiting opener); the lock goes.
            os.close(self._lock_fd)
            self._lock_fd = None

    def __enter__(self) -> "RunDir":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- manifest
    def has_manifest(self) -> bool:
        return self.manifest_path.exists()

    def read_manifest(self) -> Manifest:
        return read_manifest(self.path)

    def write_manifest(self, manifest: Manifest) -> None:
        """Write the manifest; every record appended after it names its run as the producer."""
        write_manifest(self.path, manifest)
        self.producer = manifest.asked.fingerprint()

    # -- records
    def repair(self) -> int:
        """Truncate a torn last line (no trailing newline: a write cut short by a kill).

        Returns the number of bytes removed. A complete line that is not valid JSON cannot come
        from a kill (each record is one ``write``), so it is reported as corruption instead of
        being silently dropped.
        """
        p = self.records_path
        if not p.exists():
            return 0
        size = p.stat().st_size
        if size == 0:
            return 0
        with open(p, "rb") as f:
            f.seek(max(0, size - 1))
            if f.read(1) == b"\n":
                return 0
            pos, keep = size, 0
            while pos > 0:
                step = min(1 << 16, pos)
                pos -= step
                f.seek(pos)
                block = f.read(step)
                nl = block.rfind(b"\n")
                if nl >= 0:
                    keep = pos + nl + 1
                    break
        removed = size - keep
        with open(p, "rb") as f:
            f.seek(keep)
            tail = f.read()
        if _whole_record(tail):  # a whole record that only lacks its newline (an edit): keep it
            with open(p, "ab") as f:
                f.write(b"\n")
                f.flush()
                os.fsync(f.fileno())
            log.warning("%s: the last line lacked its newline; added it (the record is kept)", p)
            return 0
        with open(p, "r+b") as f:
            f.truncate(keep)
            f.flush()
            os.fsync(f.fileno())
        log.warning("%s: repaired a torn last line (%d bytes removed; that request will be asked again)",
                    p, removed)
        return removed

    def append(self, record: Record) -> None:
        """Append one record as one line with one ``write`` (no user-space buffer to lose)."""
        if record.producer is None and self.producer is not None:
            record = replace(record, producer=self.producer)
        if self._rec_fd is None:
            self._rec_fd = os.open(self.records_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        append_line(self._rec_fd, (record.to_json() + "\n").encode("utf-8"))

    def records(self) -> list[Record]:
        return list(iter_records(self.path))
