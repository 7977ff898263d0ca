"""The run directory: what one model x mode x ablation asked, and every answer it got.

A run directory holds two files:

* ``manifest.json`` — what was asked (casebench version, dataset path/SHA-256/fingerprint, model
  spec, backend description, mode, samples, generation settings, template hash, ablation, case
  selection, parse re-asks) and how it went (status, start/finish times, totals). Written
  atomically (temp file + ``os.replace``), so it is always either the old or the new version.
* ``records.jsonl`` — one JSON line per *outcome* of a request (case, sample), appended with a
  single ``write`` on an unbuffered descriptor. A kill at any point leaves, at worst, a torn last
  line, which ``RunDir.open`` detects and truncates (the request is then simply asked again).

Record semantics (the contract the runner and every reader share):

* A **final** record (``final: true``) is a judgement outcome: either a parsed answer, or a
  missing value after the parse re-asks were spent (``label``/``score``/``p_safe`` null,
  ``error`` the parse error, ``text`` the last answer). Each (case, sample) has at most one.
* A **non-final** record (``final: false``, ``error`` starting with ``"transport: "``) says that
  the transport retries were spent without any answer. It is kept so a user can see what failed
  overnight, but it is never a judgement: aggregation ignores it and a resumed run asks that
  request again.

Resume therefore asks exactly the (case, sample) pairs that have no final record.
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import math
import os
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Mapping, Sequence

from ..atomic import write_json_atomic
from ..data import Dataset, load_dataset

if TYPE_CHECKING:
    from ..predictions import Predictions

log = logging.getLogger("casebench.run.rundir")

MANIFEST = "manifest.json"
RECORDS = "records.jsonl"
LOCK = ".lock"
FORMAT_VERSION = 1

#: manifest fields that describe what was asked; a resumed run must match them all
ASKED_FIELDS = ("dataset.sha256", "model", "mode", "samples", "settings", "templates.sha256", "removed",
                "selection.cases", "parse_retries")


class RunError(Exception):
    """A run directory cannot be used (unreadable, corrupt, mismatching, locked)."""


class ManifestMismatch(RunError):
    """The command asks something different from what the run directory holds."""

    def __init__(self, path: str | Path, differences: Sequence[tuple[str, Any, Any]]):
        self.differences = list(differences)
        lines = [f"{path} holds a different run; refusing to resume it. What differs (run dir -> this command):"]
        for name, old, new in self.differences:
            lines.append(f"  {name}: {_short(old)} -> {_short(new)}")
        lines.append("Use another output directory (-o), or repeat the command that started this run.")
        super().__init__("\n".join(lines))


class RunLocked(RunError):
    """Another process is writing this run directory."""


def _short(value: Any, limit: int = 120) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False) if not isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass
class Record:
    """One line of ``records.jsonl``. The first nine field names are the documented format.

    ``usage`` and ``latency_s`` add up every ask that led to this outcome (parse re-asks cost
    tokens too); ``attempts`` is how many answers were received for it.
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
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> tuple[int, int]:
        return (self.case, self.sample)

    @property
    def answered(self) -> bool:
        """A final record with a usable judgement."""
        return self.final and self.error is None and (self.label is not None or self.p_safe is not None)

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, allow_nan=False)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Record":
        known = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        return cls(**known)


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


# --------------------------------------------------------------------------------------------
# The directory


class RunDir:
    """An open run directory. Use as a context manager; holds an exclusive lock while open.

    ``open`` creates the directory when needed, takes the lock (so two runners never write the
    same run), and repairs a torn last line of ``records.jsonl``.
    """

    def __init__(self, path: str | Path, *, lock: bool = True, create: bool = True):
        self.path = Path(path)
        self.repaired_bytes = 0
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

    # -- lifecycle
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

    def read_manifest(self) -> dict[str, Any]:
        return read_manifest(self.path)

    def write_manifest(self, manifest: Mapping[str, Any]) -> None:
        write_json_atomic(self.manifest_path, manifest, fsync=True)  # what a resume trusts

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
            # find the last newline, reading backwards in blocks
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
        with open(p, "r+b") as f:
            f.truncate(keep)
            f.flush()
            os.fsync(f.fileno())
        log.warning("%s: repaired a torn last line (%d bytes removed; that request will be asked again)",
                    p, removed)
        return removed

    def append(self, record: Record) -> None:
        """Append one record as one line with one ``write`` (no user-space buffer to lose)."""
        if self._rec_fd is None:
            self._rec_fd = os.open(self.records_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        data = (record.to_json() + "\n").encode("utf-8")
        view = memoryview(data)
        while view:
            n = os.write(self._rec_fd, view)
            view = view[n:]

    def records(self) -> list[Record]:
        return list(iter_records(self.path))


def iter_records(run_path: str | Path) -> Iterator[Record]:
    """Every record of a run, in file order. A torn last line is skipped (readers never write);
    any other bad line raises ``RunError`` naming the file and line."""
    p = Path(run_path) / RECORDS
    if not p.exists():
        return
    with open(p, "rb") as f:
        data = f.read()
    lines = data.split(b"\n")
    torn = lines.pop()  # after the last newline: b"" when the file is whole
    if torn:
        log.warning("%s: ignoring a torn last line (%d bytes); the runner repairs it on resume", p, len(torn))
    for lineno, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
            if not isinstance(obj, dict):
                raise ValueError("not an object")
            rec = Record.from_dict(obj)
            if not isinstance(rec.case, int) or not isinstance(rec.sample, int):
                raise ValueError("'case' and 'sample' must be integers")
        except (ValueError, TypeError) as e:
            raise RunError(f"{p}, line {lineno}: not a valid record ({e})") from None
        yield rec


def final_records(records: Iterable[Record]) -> dict[tuple[int, int], Record]:
    """The final record of each (case, sample). If a file somehow holds two, the first wins
    (it is the one that was reported when it was written)."""
    out: dict[tuple[int, int], Record] = {}
    for r in records:
        if r.final and r.key not in out:
            out[r.key] = r
    return out


def read_manifest(run_path: str | Path) -> dict[str, Any]:
    p = Path(run_path) / MANIFEST
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RunError(f"{Path(run_path)}: not a run directory (no {MANIFEST})") from None
    try:
        m = json.loads(text)
    except json.JSONDecodeError as e:
        raise RunError(f"{p}: not valid JSON ({e.msg} at line {e.lineno})") from None
    if not isinstance(m, dict):
        raise RunError(f"{p}: the manifest must be a JSON object")
    for k in ("mode", "model", "dataset", "selection", "samples"):
        if k not in m:
            raise RunError(f"{p}: field '{k}' missing")
    return m


def is_run_dir(path: str | Path) -> bool:
    p = Path(path)
    return p.is_dir() and (p / MANIFEST).exists()


# --------------------------------------------------------------------------------------------
# Comparing what was asked


def _get(d: Mapping[str, Any], dotted: str) -> Any:
    cur: Any = d
    for part in dotted.split("."):
        if not isinstance(cur, Mapping) or part not in cur:
            return None
        cur = cur[part]
    return cur


def _normal(value: Any) -> Any:
    """JSON round trip, so tuples and lists (and int/float) compare as they would on disk."""
    return json.loads(json.dumps(value, sort_keys=True))


def manifest_differences(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    """Each field of ``ASKED_FIELDS`` whose value differs: (name, old, new). Settings are
    compared key by key so the message names e.g. ``settings.temperature``."""
    diffs: list[tuple[str, Any, Any]] = []
    for name in ASKED_FIELDS:
        a, b = _normal(_get(old, name)), _normal(_get(new, name))
        if a == b:
            continue
        if isinstance(a, dict) and isinstance(b, dict):
            for k in sorted(set(a) | set(b)):
                if a.get(k) != b.get(k):
                    diffs.append((f"{name}.{k}", a.get(k), b.get(k)))
        elif name == "selection.cases" and isinstance(a, list) and isinstance(b, list):
            diffs.append((name, _describe_selection(old), _describe_selection(new)))
        else:
            diffs.append((name, a, b))
    return diffs


def _describe_selection(manifest: Mapping[str, Any]) -> str:
    sel = manifest.get("selection") or {}
    n = len(sel.get("cases") or [])
    how = sel.get("how", "?")
    return f"{n} cases ({how})"


# --------------------------------------------------------------------------------------------
# Aggregation to predictions, and export


def model_short_name(spec: str) -> str:
    """The short name published files use: the last path component of the model spec
    (``openai/gpt-4o-mini`` -> ``gpt-4o-mini``)."""
    return spec.rstrip("/").split("/")[-1] or spec


def aggregate(mode: str, finals: Mapping[tuple[int, int], Record], cases: Sequence[int],
              samples: int) -> list[Any]:
    """One raw value per case from its final records (None = missing).

    * score: the mean of the parsed sample scores (missing only if no sample parsed), as the
      published runs averaged up to 3 samples;
    * prob: the mean P(safe) of the parsed samples (normally one);
    * binary: the majority label of the parsed samples (normally one); a tie is "unsafe",
      matching the human label rule where 0.5 is unsafe.
    Non-final (transport) records never reach here.
    """
    out: list[Any] = []
    for c in cases:
        recs = [finals[(c, s)] for s in range(samples) if (c, s) in finals]
        recs = [r for r in recs if r.answered]
        if mode == "score":
            vals = [float(r.score) for r in recs if r.score is not None]
            out.append(sum(vals) / len(vals) if vals else None)
        elif mode == "prob":
            vals = [float(r.p_safe) for r in recs if r.p_safe is not None and math.isfinite(r.p_safe)]
            out.append(sum(vals) / len(vals) if vals else None)
        else:
            labels = [r.label for r in recs if r.label in ("safe", "unsafe")]
            if not labels:
                out.append(None)
            else:
                out.append("safe" if labels.count("safe") > len(labels) / 2 else "unsafe")
    return out


def run_dataset(run_path: str | Path, manifest: Mapping[str, Any], dataset: Dataset | None = None) -> Dataset:
    """The dataset a run was asked on: the one given, or the file its manifest names; its
    SHA-256 (or, failing that, its content fingerprint) must match the manifest."""
    want = manifest.get("dataset") or {}
    if dataset is None:
        path = want.get("path")
        if not path:
            raise RunError(f"{run_path}: the manifest names no dataset path; pass the dataset explicitly")
        p = Path(path)
        if not p.is_absolute():
            p = (Path(run_path) / p) if (Path(run_path) / p).exists() else p
        if not p.exists():
            raise RunError(f"{run_path}: the run's dataset {path} is not there any more; "
                           "pass the dataset (--data) explicitly")
        dataset = load_dataset(p)
    if dataset.sha256 != want.get("sha256") and dataset.fingerprint != want.get("fingerprint"):
        raise RunError(f"{run_path}: the run was asked on dataset sha256 {want.get('sha256')}, "
                       f"but {dataset.path} has sha256 {dataset.sha256}")
    return dataset


def run_status(run_path: str | Path) -> dict[str, Any]:
    """Counts of a run: requests planned, final, answered, missing, pending, transport failures."""
    m = read_manifest(run_path)
    recs = list(iter_records(run_path))
    finals = final_records(recs)
    cases = list(m["selection"]["cases"])
    samples = int(m["samples"])
    planned = {(c, s) for c in cases for s in range(samples)}
    done = {k for k in finals if k in planned}
    answered = sum(1 for k in done if finals[k].answered)
    return {
        "requests": len(planned),
        "final": len(done),
        "answered": answered,
        "missing": len(done) - answered,
        "pending": len(planned - done),
        "transport_failures": sum(1 for r in recs if not r.final),
        "status": m.get("status"),
    }


def load_run(run_path: str | Path, dataset: Dataset | None = None) -> "Predictions":
    """Per-case predictions of a run over its selected cases, in dataset order.

    Cases still pending (no final record) are missing values; ``meta`` says how many, so a
    scorer can warn that the run is incomplete.
    """
    from ..predictions import Predictions

    m = read_manifest(run_path)
    ds = run_dataset(run_path, m, dataset)
    cases = [int(c) for c in m["selection"]["cases"]]
    bad = [c for c in cases if not 0 <= c < len(ds)]
    if bad:
        raise RunError(f"{run_path}: the manifest selects case {bad[0]}, but the dataset has {len(ds)} cases")
    samples = int(m["samples"])
    removed = tuple(m.get("removed") or ())
    finals = final_records(iter_records(run_path))
    values = aggregate(m["mode"], finals, cases, samples)
    pending = sum(1 for c in cases for s in range(samples) if (c, s) not in finals)
    meta = {"format": "run", "run_dir": str(run_path), "model_spec": m["model"], "pending_requests": pending,
            "complete": pending == 0, "status": m.get("status"), "samples": samples}
    return Predictions.from_values(str(run_path), model_short_name(m["model"]), m["mode"], ds.subset(cases),
                                   values, removed, meta)


def export_run(run_path: str | Path, out_path: str | Path, dataset: Dataset | None = None,
               name: str | None = None, allow_incomplete: bool = False) -> Path:
    """Write a run in the published ``exp/`` format (atomically).

    The file holds the run's *selected* cases only, in dataset order, each with one key named
    after the model (``name`` or the spec's last path component): "safe"/"unsafe"/"" in binary
    mode, a float or "" otherwise ("" = missing, as the published files write failures). A run
    over the whole dataset therefore exports the full published shape; a subset run exports a
    file that is itself a (smaller) dataset, scored on the same cases as the run directory.

    An incomplete run (requests still pending) is refused unless ``allow_incomplete``: the
    published format cannot tell "not asked yet" from "could not be parsed".
    """
    from ..published import write_published

    m = read_manifest(run_path)
    ds = run_dataset(run_path, m, dataset)
    cases = [int(c) for c in m["selection"]["cases"]]
    samples = int(m["samples"])
    finals = final_records(iter_records(run_path))
    pending = sum(1 for c in cases for s in range(samples) if (c, s) not in finals)
    if pending and not allow_incomplete:
        raise RunError(f"{run_path}: {pending} request(s) still pending; resume the run first "
                       "(or export anyway with allow_incomplete, writing \"\" for them)")
    values = aggregate(m["mode"], finals, cases, samples)
    key = name or model_short_name(m["model"])
    out = Path(out_path)
    write_published(out, ds.subset(cases), key, m["mode"], values)
    return out
