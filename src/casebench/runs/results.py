"""What a run directory says: per-case predictions, counts, and export to the published format.

Readers only: they never write into the run (``casebench classify`` writes a *new* run). The
mode decides how samples aggregate into one value per case (``modes.Mode.aggregate``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ..data import Dataset, load_dataset
from ..modes import get_mode
from .record import (
    Manifest, Record, RunCounts, RunError, RunState, final_records, iter_records, read_manifest,
)

if TYPE_CHECKING:
    from ..predictions import Predictions


def model_short_name(spec: str) -> str:
    """The short name published files use: the last path component of the model spec
    (``openai/gpt-4o-mini`` -> ``gpt-4o-mini``)."""
    return spec.rstrip("/").split("/")[-1] or spec


def aggregate(mode: str, finals: Mapping[tuple[int, int], Record], cases: Sequence[int],
              samples: int) -> list[Any]:
    """One raw value per case from its answered final records (None = missing), as the mode
    aggregates samples. Non-final (transport) records never reach here."""
    m = get_mode(mode)
    out: list[Any] = []
    for c in cases:
        recs = [finals[(c, s)] for s in range(samples) if (c, s) in finals]
        out.append(m.aggregate([r for r in recs if r.answered]))
    return out


def run_dataset(run_path: str | Path, manifest: Manifest, dataset: Dataset | None = None) -> Dataset:
    """The dataset a run was asked on: the one given, or the file its manifest names; its
    SHA-256 (or, failing that, its content fingerprint) must match the manifest."""
    want = manifest.dataset
    if dataset is None:
        if not want.path:
            raise RunError(f"{run_path}: the manifest names no dataset path; pass the dataset explicitly")
        p = Path(want.path)
        if not p.is_absolute():
            p = (Path(run_path) / p) if (Path(run_path) / p).exists() else p
        if not p.exists():
            raise RunError(f"{run_path}: the run's dataset {want.path} is not there any more; "
                           "pass the dataset (--data) explicitly")
        dataset = load_dataset(p)
    if dataset.sha256 != want.sha256 and dataset.fingerprint != want.fingerprint:
        raise RunError(f"{run_path}: the run was asked on dataset sha256 {want.sha256}, "
                       f"but {dataset.path} has sha256 {dataset.sha256}")
    return dataset


@dataclass
class RunProgress(RunCounts):
    """A run directory's counts as its records say them (``RunCounts``), the state its manifest
    records, and how many transport failures its records hold."""

    status: RunState = RunState.RUNNING
    transport_failures: int = 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (the state as its value)."""
        return {**asdict(self), "status": self.status.value}


def run_status(run_path: str | Path) -> RunProgress:
    """Counts of a run read from its records: requests planned, final, answered, missing,
    pending; the manifest's state; transport failures."""
    m = read_manifest(run_path)
    recs = list(iter_records(run_path))
    counts = RunCounts.tally(((c, s) for c in m.cases for s in range(m.samples)), final_records(recs))
    return RunProgress(**asdict(counts), status=m.status, transport_failures=sum(1 for r in recs if not r.final))


def _values(run_path: str | Path, m: Manifest, ds: Dataset) -> tuple[list[int], list[Any], int, dict]:
    cases = m.cases
    bad = [c for c in cases if not 0 <= c < len(ds)]
    if bad:
        raise RunError(f"{run_path}: the manifest selects case {bad[0]}, but the dataset has {len(ds)} cases")
    finals = final_records(iter_records(run_path))
    values = aggregate(m.mode, finals, cases, m.samples)
    pending = sum(1 for c in cases for s in range(m.samples) if (c, s) not in finals)
    return cases, values, pending, finals


def load_run(run_path: str | Path, dataset: Dataset | None = None) -> "Predictions":
    """Per-case predictions of a run over its selected cases, in dataset order.

    Cases still pending (no final record) are missing values; ``pending`` says how many, so a
    scorer can warn that the run is incomplete. The predictions carry the run's context
    placement; respond runs also carry, per case, the behaviour the refusal classifier read
    (``behaviour``).
    """
    from ..predictions import Predictions

    m = read_manifest(run_path)
    ds = run_dataset(run_path, m, dataset)
    cases, values, pending, finals = _values(run_path, m, ds)
    meta: dict[str, Any] = {
        "format": "run", "run_dir": str(run_path), "model_spec": m.model, "status": m.status.value,
        "samples": m.samples,
    }
    behaviours = [[finals[(c, s)].behaviour for s in range(m.samples) if (c, s) in finals] for c in cases]
    if m.asked.classifier:
        # provenance: which classifier read the answers, and its validated agreement with people
        meta["classifier"] = dict(m.asked.classifier)
    return Predictions.from_values(str(run_path), model_short_name(m.model), m.mode, ds.subset(cases),
                                   values, m.removed, meta, context_as=m.asked.context_as or "", pending=pending,
                                   behaviour=behaviours if any(b for bs in behaviours for b in bs) else None)


def export_run(run_path: str | Path, out_path: str | Path, dataset: Dataset | None = None,
               name: str | None = None, allow_incomplete: bool = False) -> Path:
    """Write a run in the published ``exp/`` format (atomically).

    The file holds the run's *selected* cases only, in dataset order, each with one key named
    after the model (``name`` or the spec's last component), in the mode's published value
    format ("" = missing, as the published files write failures). A run over the whole dataset
    therefore exports the full published shape; a subset run exports a file that is itself a
    (smaller) dataset, scored on the same cases as the run directory.

    An incomplete run (requests still pending) is refused unless ``allow_incomplete``: the
    published format cannot tell "not asked yet" from "could not be parsed".
    """
    from ..published import write_published

    m = read_manifest(run_path)
    ds = run_dataset(run_path, m, dataset)
    cases, values, pending, _ = _values(run_path, m, ds)
    if pending and not allow_incomplete:
        raise RunError(f"{run_path}: {pending} request(s) still pending; resume the run first "
                       "(or export anyway with allow_incomplete, writing \"\" for them)")
    out = Path(out_path)
    write_published(out, ds.subset(cases), name or model_short_name(m.model), m.mode, values)
    return out
