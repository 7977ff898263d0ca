"""Damaged run directories: what is wrong with one, and how to keep every valid record.

A kill can only tear the *last* line of ``records.jsonl``, which ``RunDir`` repairs on open.
Other damage (a bad line in the middle, from a disk error, an editor or two files pasted
together; a ``manifest.json`` deleted or unreadable) is never guessed about: ``casebench run``
refuses such a directory and says what it found and how to recover (``RunDamaged``), and

* ``repair_records`` (``casebench runs repair DIR``) moves every damaged line of
  ``records.jsonl`` aside, into ``records.damaged.jsonl`` (one JSON object per line: its line
  number, why it is damaged, its raw text), and keeps every valid record, in order. The
  requests of the moved lines are asked again on resume.
* ``salvage`` (``casebench run ... --salvage``) does the same, and when the manifest is missing
  or unreadable rebuilds it from the command's own settings, but only when every surviving
  record proves it fits them (``record_misfit``: it names its producer, the fingerprint of the
  backend, model and answer-changing settings that wrote it, and that is this command's; its
  case among the command's cases, its sample within its samples, the mode's kind of answer).
  Otherwise nothing is changed and the first misfits are named. Records written before records
  named their producer cannot prove anything, so a manifest is never rebuilt from them. An
  unreadable manifest is kept beside, as ``manifest.json.damaged``.
* A record whose producer is not the run's own (``records.jsonl`` pasted from another run) is
  damage too: a resume refuses it and ``repair_records`` moves it aside with the damaged lines.

``Diagnosis.story`` is the one account of a damaged directory (what was found, and the command
that fixes it) that ``casebench run``, ``score`` and ``runs repair`` all print.

Nothing here is silent: every function returns or raises what it found and what it did.
"""

from __future__ import annotations

import json
import os
import platform
from dataclasses import dataclass, field
from pathlib import Path

from ..modes import get_mode
from ..atomic import write_bytes_atomic
from .record import (
    MANIFEST, RECORDS, Asked, Invocation, Manifest, Record, RunDir, RunError, RunState, now_iso, read_manifest,
)

#: where ``repair_records`` moves damaged lines (appended to, never overwritten)
DAMAGED_RECORDS = "records.damaged.jsonl"
#: where ``salvage`` keeps an unreadable manifest before rebuilding it
DAMAGED_MANIFEST = MANIFEST + ".damaged"


@dataclass
class DamagedLine:
    """A complete line of ``records.jsonl`` that is not a valid record."""

    line: int
    reason: str
    raw: bytes

    def to_json(self) -> str:
        # surrogateescape + ASCII JSON: any bytes survive the round trip exactly
        return json.dumps({"line": self.line, "reason": self.reason,
                           "raw": self.raw.decode("utf-8", "surrogateescape")}, ensure_ascii=True)


@dataclass
class ScannedRecords:
    """``records.jsonl`` read line by line, without raising: the valid records (with their line
    numbers and bytes), the damaged lines, and a torn last line (bytes after the last newline)."""

    valid: list[tuple[int, Record, bytes]] = field(default_factory=list)
    damaged: list[DamagedLine] = field(default_factory=list)
    torn: bytes = b""


def parse_record_line(raw: bytes) -> Record:
    """One line of ``records.jsonl`` as a ``Record``; ``ValueError`` saying why it is not one."""
    try:
        obj = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"not valid JSON: {e}") from None
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    for key in ("case", "sample"):
        if not isinstance(obj.get(key), int) or isinstance(obj.get(key), bool):
            raise ValueError(f"{key!r} missing or not an integer")
    try:
        return Record.from_dict(obj)
    except TypeError as e:
        raise ValueError(str(e)) from None


def scan_records(run_path: str | Path) -> ScannedRecords:
    """Every line of a run's ``records.jsonl`` sorted into valid and damaged (never raises on
    content; a missing file is empty)."""
    p = Path(run_path) / RECORDS
    out = ScannedRecords()
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        return out
    *lines, out.torn = data.split(b"\n")
    for lineno, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            out.valid.append((lineno, parse_record_line(raw), raw))
        except ValueError as e:
            out.damaged.append(DamagedLine(lineno, str(e), raw))
    return out


@dataclass
class Diagnosis:
    """What a look at a run directory found."""

    path: Path
    has_manifest: bool
    #: why an existing manifest cannot be read (None: readable, or absent)
    manifest_error: str | None
    records: ScannedRecords
    #: the manifest's run fingerprint (None: no readable manifest)
    producer: str | None = None
    #: every fingerprint a record of this run may name (``Asked.fingerprints``)
    producers: frozenset[str] = frozenset()

    @property
    def manifest_ok(self) -> bool:
        return self.has_manifest and self.manifest_error is None

    @property
    def foreign(self) -> list[tuple[int, Record]]:
        """(line, record) of the valid records that name another producer than the manifest's
        run (written by another model or with other settings)."""
        if self.producer is None:
            return []
        accepted = self.producers or frozenset({self.producer})
        return [(n, r) for n, r, _ in self.records.valid if r.producer is not None and r.producer not in accepted]

    @property
    def healthy(self) -> bool:
        """Nothing a resume would refuse (a torn last line is repaired on open)."""
        return self.manifest_ok and not self.records.damaged and not self.foreign

    @property
    def damaged(self) -> bool:
        """Damage a resume or a reader must not guess about: a damaged line, a record of another
        run, records without a readable manifest, or an unreadable manifest. A directory without
        records and without a manifest is not damaged (it is not a run directory)."""
        return bool(self.records.damaged or self.foreign or (self.holds_records and not self.manifest_ok)
                    or (self.has_manifest and self.manifest_error))

    @property
    def holds_records(self) -> bool:
        return bool(self.records.valid or self.records.damaged)

    def found(self) -> list[str]:
        """What is wrong, one line per finding."""
        out = []
        recs = self.path / RECORDS
        if not self.has_manifest and self.holds_records:
            out.append(f"{self.path} holds {len(self.records.valid)} valid record(s) in {RECORDS} but no {MANIFEST} "
                       "(deleted, or lost with a copy), so nothing says which run they belong to")
        elif self.manifest_error:
            out.append(f"{self.path / MANIFEST}: cannot be read ({self.manifest_error})")
        if self.records.damaged:
            lines = ", ".join(str(d.line) for d in self.records.damaged[:10])
            more = f" and {len(self.records.damaged) - 10} more" if len(self.records.damaged) > 10 else ""
            first = self.records.damaged[0]
            out.append(f"{recs}: line(s) {lines}{more} damaged (line {first.line}: {first.reason}); "
                       f"{len(self.records.valid)} other line(s) are valid records")
        foreign = self.foreign
        if foreign:
            n, r = foreign[0]
            out.append(f"{recs}: {len(foreign)} record(s) were written by another run (another model or other "
                       f"settings): the first, line {n} (case {r.case}, sample {r.sample}), names producer "
                       f"{r.producer}; this run's manifest is {self.producer}")
        return out

    def advice(self) -> list[str]:
        """The command that fixes what ``found`` says, keeping every record that fits."""
        if not self.manifest_ok:
            return [
                "To keep the records, repeat the command that started this run with --salvage: it moves damaged "
                f"lines aside ({DAMAGED_RECORDS}) and rebuilds {MANIFEST} from that command's settings, only if "
                "every record proves it was written by that command's model and settings; if one does not, it names "
                "it and changes nothing. Or put the run's manifest.json back (from a copy), or choose another -o."]
        return [
            f"To keep every valid record and go on: `casebench runs repair {self.path}` moves the damaged line(s) "
            f"and any record of another run to {self.path / DAMAGED_RECORDS} (their requests are asked again), then "
            "repeat the run's command (or repeat it with --salvage, which does both)."]

    def story(self) -> str:
        """What was found and how to fix it: the one message ``run``, ``score`` and ``runs
        repair`` print about a damaged directory."""
        return "\n".join([*self.found(), *self.advice()])


def diagnose(run_path: str | Path) -> Diagnosis:
    """Look at a run directory without changing anything."""
    path = Path(run_path)
    has_manifest = (path / MANIFEST).exists()
    error = None
    producer = None
    producers: frozenset[str] = frozenset()
    if has_manifest:
        try:
            asked = read_manifest(path).asked
            producer, producers = asked.fingerprint(), asked.fingerprints()
        except RunError as e:
            error = str(e).split(": ", 1)[-1] if str(e).startswith(str(path)) else str(e)
    return Diagnosis(path, has_manifest, error, scan_records(path), producer, producers)


class RunDamaged(RunError):
    """A run directory a resume cannot trust as it is; the message says what was found and how
    to recover without losing a valid record."""

    def __init__(self, diagnosis: Diagnosis):
        self.diagnosis = diagnosis
        super().__init__("\n".join([*diagnosis.found(), "Nothing was changed.", *diagnosis.advice()]))


def check_not_damaged(run_path: str | Path) -> None:
    """Raise ``RunDamaged`` when a run directory holds damage a resume or a reader must not
    guess about (``Diagnosis.damaged``): a damaged line of ``records.jsonl``, a record of another
    run, records without a readable manifest."""
    d = diagnose(run_path)
    if d.damaged:
        raise RunDamaged(d)


@dataclass
class RepairReport:
    """What a repair did."""

    path: Path
    kept: int = 0
    moved: list[DamagedLine] = field(default_factory=list)
    torn_bytes: int = 0
    manifest_rebuilt: bool = False
    manifest_kept_aside: bool = False
    #: what is still wrong after the repair (a lost manifest ``runs repair`` cannot rebuild)
    remaining: Diagnosis | None = None

    def lines(self) -> list[str]:
        out = []
        if self.torn_bytes:
            out.append(f"{self.path / RECORDS}: removed a torn last line ({self.torn_bytes} bytes; a write cut short "
                       "by a kill); its request is asked again")
        if self.moved:
            nums = ", ".join(str(d.line) for d in self.moved)
            out.append(f"{self.path / RECORDS}: moved {len(self.moved)} damaged line(s) ({nums}) to "
                       f"{self.path / DAMAGED_RECORDS}; their requests are asked again")
        if self.manifest_kept_aside:
            out.append(f"{self.path / MANIFEST}: unreadable; kept as {self.path / DAMAGED_MANIFEST}")
        if self.manifest_rebuilt:
            out.append(f"{self.path / MANIFEST}: rebuilt from this command's settings (every one of the {self.kept} "
                       "records proves it was written by this command's model and settings)")
        if out:
            out.append(f"{self.path}: {self.kept} valid record(s) kept")
        elif self.remaining is None:
            out.append(f"{self.path}: nothing to repair ({self.kept} valid record(s))")
        return out


def _move_damaged(rundir: RunDir, scanned: ScannedRecords, report: RepairReport,
                  producer: str | None = None, producers: frozenset[str] = frozenset()) -> None:
    """Append the damaged lines (and, given the run's ``producer``, the records another run
    wrote) to ``records.damaged.jsonl`` (flushed to disk first), then rewrite ``records.jsonl``
    with the remaining valid lines only, atomically: a kill in between leaves the moved lines in
    both files, never in neither."""
    accepted = producers or frozenset({producer} if producer is not None else ())
    foreign = {n for n, r, _ in scanned.valid if producer is not None and r.producer is not None
               and r.producer not in accepted}
    moved = sorted([*scanned.damaged,
                    *(DamagedLine(n, f"written by another run (producer {r.producer}, this run's is {producer})", raw)
                      for n, r, raw in scanned.valid if n in foreign)], key=lambda d: d.line)
    if not moved:
        return
    aside = rundir.path / DAMAGED_RECORDS
    with open(aside, "ab") as f:
        f.write("".join(d.to_json() + "\n" for d in moved).encode("ascii"))
        f.flush()
        os.fsync(f.fileno())
    write_bytes_atomic(rundir.path / RECORDS, b"".join(raw + b"\n" for n, _, raw in scanned.valid
                                                      if n not in foreign), fsync=True)
    report.moved = moved
    report.kept = len(scanned.valid) - len(foreign)


def repair_records(run_path: str | Path) -> RepairReport:
    """Move the damaged lines of a run's ``records.jsonl`` aside, and the records another run
    wrote (when the manifest says which run this is), keeping every valid record of this run
    (``casebench runs repair``); takes the run's lock. The manifest is left alone: one that is
    missing or unreadable can only be rebuilt from the command's settings (``salvage``), which
    ``RepairReport.remaining`` then says."""
    path = Path(run_path)
    if not path.is_dir():
        raise RunError(f"{path}: no such run directory")
    with RunDir(path, create=False) as rundir:
        report = RepairReport(path, torn_bytes=rundir.repaired_bytes)
        d = diagnose(path)
        report.kept = len(d.records.valid)
        _move_damaged(rundir, d.records, report, d.producer, d.producers)
    after = diagnose(path)
    report.remaining = after if after.damaged else None
    return report


def record_misfit(rec: Record, asked: Asked) -> str | None:
    """Why a record cannot have been written by a run that asks ``asked`` (None: it fits).

    Proven from the record alone: its producer (the fingerprint of the backend, model and
    answer-changing settings that wrote it; a record without one proves nothing), its case and
    sample, the kind of answer the mode records, and the settings a record names (prob method,
    temperature, token budget)."""
    if rec.producer is None:
        return ("names no producer (written by a casebench from before records said which model and settings "
                "produced them), so it cannot prove it fits")
    mine = asked.fingerprint()
    if rec.producer not in asked.fingerprints():
        return (f"was produced by another model or other settings (producer {rec.producer}; this command's is "
                f"{mine})")
    cases = set(asked.cases)
    if rec.case not in cases:
        return f"case {rec.case} is not among this command's {len(cases)} case(s)"
    if not 0 <= rec.sample < asked.samples:
        return f"sample {rec.sample} is outside this command's {asked.samples} sample(s) per case"
    if rec.final and rec.error is None:
        misfit = get_mode(asked.mode).record_misfit(rec)
        if misfit is not None:
            return misfit
    detail = rec.detail or {}
    method = (asked.backend_options or {}).get("prob_method")
    if "method" in detail and method is not None and detail["method"] != method:
        return f"was asked with prob method {detail['method']!r}, this command asks {method!r}"
    temperature = (asked.settings or {}).get("temperature")
    if "temperature" in detail and temperature is not None:
        if float(detail["temperature"]) != float(temperature):
            return f"was generated at temperature {detail['temperature']}, this command asks {temperature}"
    max_tokens = (asked.settings or {}).get("max_tokens")
    completion = (rec.usage or {}).get("completion_tokens", (rec.usage or {}).get("output_tokens"))
    if isinstance(max_tokens, int) and isinstance(completion, int) and completion > max_tokens * max(1, rec.attempts):
        return f"used {completion} completion tokens in {rec.attempts} answer(s), more than --max-tokens {max_tokens} allows"
    return None


def salvage(path: Path, manifest: Manifest) -> RepairReport:
    """``casebench run --salvage``: make the run directory ``path`` resumable without losing a
    valid record. Damaged lines are moved aside; a missing or unreadable manifest is rebuilt as
    ``manifest`` (the one the command would write for a new run) when every valid record fits
    what it asks, else ``RunError`` names the records that do not fit and nothing is changed. A
    directory that needs nothing is left as it is (the report says so)."""
    from .. import __version__

    path = Path(path)
    if not path.exists():
        return RepairReport(path)
    with RunDir(path, create=False) as rundir:
        report = RepairReport(path, torn_bytes=rundir.repaired_bytes)
        d = diagnose(path)
        report.kept = len(d.records.valid)
        if not d.manifest_ok and d.holds_records:
            misfits = [(n, why) for n, rec, _ in d.records.valid
                       if (why := record_misfit(rec, manifest.asked)) is not None]
            if misfits:
                n, why = misfits[0]
                rec = next(r for m, r, _ in d.records.valid if m == n)
                unproven = sum(1 for _, r, _ in d.records.valid if r.producer is None)
                if unproven == len(d.records.valid):
                    fix = ("These records are from an older casebench, which did not record their producer: put the "
                           f"run's {MANIFEST} back (from a copy) to resume it, or start afresh in another -o.")
                else:
                    fix = "Repeat the exact command that started this run, or choose another -o."
                raise RunError(
                    f"--salvage: {len(misfits)} of the {len(d.records.valid)} valid record(s) in {path / RECORDS} do "
                    f"not prove they fit this command, so its settings cannot stand for the lost manifest; the first, "
                    f"line {n} (case {rec.case}, sample {rec.sample}), {why}. Nothing was changed. {fix}")
        _move_damaged(rundir, d.records, report, d.producer, d.producers)
        if not d.manifest_ok and (d.holds_records or d.has_manifest):
            if d.has_manifest:
                os.replace(path / MANIFEST, path / DAMAGED_MANIFEST)
                report.manifest_kept_aside = True
            manifest.status = RunState.INTERRUPTED
            manifest.history.append(Invocation(
                started_at=now_iso(), host=platform.node(), pid=os.getpid(), casebench_version=__version__,
                finished_at=now_iso(), status="salvaged",
                message=(f"manifest rebuilt by --salvage from this command's settings; {report.kept} record(s) kept, "
                         f"{len(report.moved)} damaged line(s) moved to {DAMAGED_RECORDS}")))
            rundir.write_manifest(manifest)
            report.manifest_rebuilt = True
    return report
