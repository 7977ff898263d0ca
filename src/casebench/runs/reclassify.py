"""Re-reading a finished respond run with another refusal classifier, without asking the model
again: a new run directory that shares the answers (their text, usage and latency) and holds the
new classifier's readings. The original run stays as it was."""

from __future__ import annotations

import asyncio
import os
import platform
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..backends.base import Answer
from ..modes import get_mode
from ..prompts import REVEAL_PLACEMENTS
from .record import (
    Invocation, Manifest, Record, RunDir, RunError, RunState, final_records, iter_records, now_iso,
    read_manifest, write_records,
)
from .redact import redact_json, redact_text


def _version() -> str:
    from .. import __version__

    return __version__


async def areclassify(run_dir: str | Path, out: str | Path, classifier: Any, *, partial_as_safe: bool = False,
                      batch: int = 64) -> Manifest:
    """Classify every answer of ``run_dir`` (a respond run) with ``classifier`` into a new run
    directory ``out``; returns its manifest. Refuses a run that is not a respond run, an
    unfinished run, and an ``out`` that already exists."""
    from .repair import check_not_damaged

    src = Path(run_dir)
    check_not_damaged(src)  # records of another model or settings are never re-read as this run's
    m = read_manifest(src)
    mode = get_mode(m.mode)
    if not mode.reads_behaviour:
        raise RunError(f"{src} is a {m.mode} run; only runs whose answers are behaviour (respond mode) can be "
                       "re-classified")
    if m.status is not RunState.COMPLETE:
        raise RunError(f"{src} is not complete (status {m.status.value}); finish it first (re-run its command)")
    dst = Path(out)
    if dst.exists() and any(dst.iterdir()):
        raise RunError(f"{dst} exists and is not empty; choose a new directory for the re-classified run")
    from .results import run_dataset

    ds = run_dataset(src, m)
    finals = final_records(iter_records(src))
    keys = [(c, s) for c in m.cases for s in range(m.samples) if (c, s) in finals]
    recs = [finals[k] for k in keys]
    from ..classify import Item

    verdicts: list[Any] = []
    for i in range(0, len(recs), batch):
        chunk = recs[i:i + batch]
        verdicts.extend(await classifier.aclassify([Item(ds[r.case].query, r.text or "") for r in chunk]))
    new_records: list[Record] = []
    answered = 0
    for r, v in zip(recs, verdicts):
        ans = Answer(text=r.text, usage=r.usage)
        if r.text is None:  # the model gave nothing: nothing to re-read
            new_records.append(r)
            continue
        reading = mode.read_behaviour(ans, v, partial_as_safe=partial_as_safe)
        detail = {k: v for k, v in r.detail.items() if k != "classifier_reason"}
        detail.update(reading.detail)
        new = Record(case=r.case, sample=r.sample, text=r.text, usage=r.usage, latency_s=r.latency_s,
                     attempts=r.attempts, label=reading.label, p_safe=reading.p_safe, behaviour=reading.behaviour,
                     error=None if reading.ok else redact_text(str(reading.error)), detail=detail)
        answered += int(new.answered)
        new_records.append(new)
    asked = replace(m.asked, classifier={**redact_json(classifier.describe()),
                                         "partial_as": "safe" if partial_as_safe else "unsafe"})
    started = now_iso()
    invocation = Invocation(started_at=started, host=platform.node(), pid=os.getpid(), casebench_version=_version(),
                            transport={"reclassified_from": str(src.resolve())}, finished_at=now_iso(),
                            status=RunState.COMPLETE.value, asked=0)
    manifest = replace(m, asked=asked, created_at=started, casebench_version=_version(), status=RunState.COMPLETE,
                       message=f"answers from {src.resolve()}, re-classified", finished_at=now_iso(),
                       totals=replace(m.totals, answered=answered, missing=len(new_records) - answered),
                       history=[*m.history, invocation])
    tmp = dst.with_name(f".{dst.name}.tmp-{os.getpid()}")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    try:
        with RunDir(tmp) as rd:
            write_records(tmp, new_records, producer=asked.fingerprint())
            if m.asked.context_as in REVEAL_PLACEMENTS:  # a reveal run: its earlier turns read again too
                from .reveal import reread_turns

                await reread_turns(src, tmp, classifier, mode, {c: ds[c].query for c in m.cases},
                                   m.asked.context_as == "reveal-early", partial_as_safe, asked.fingerprint(), batch)
            rd.write_manifest(manifest)
        if dst.exists():
            dst.rmdir()
        os.replace(tmp, dst)  # the new run appears whole, or not at all
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return manifest


def reclassify(run_dir: str | Path, out: str | Path, classifier: Any, *, partial_as_safe: bool = False) -> Manifest:
    """The synchronous ``areclassify``."""
    return asyncio.run(areclassify(run_dir, out, classifier, partial_as_safe=partial_as_safe))
