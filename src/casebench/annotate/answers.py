"""Labelling a respond run's answers: people check the refusal reader on the user's own model.

A respond run's refusal figures are read by a classifier whose error was measured on other
writing; the error that matters is its error on *this* model's answers. ``casebench annotate
answers RUN_DIR --sample N --db URL`` serves a sample of the run's answers in the same app and
database as case votes (one study per database: ``VoteStore.study == "answers"``); people label
each answer comply / partial / refuse (votes 1 / 3 / 2), and ``casebench annotate export --answers
RUN_DIR`` writes the labels into the run directory as ``reader_labels.csv`` (XSTest's format, so
``casebench refusal-eval`` reads it too). From then on the run's scores, reports and corrected
refusal rates use the reader's error measured on those answers
(``classify.validation.from_labels``).

The sample is stratified by the reader's verdict (comply, partial, refuse, undetermined) and the
context's intent (safe, unsafe), with proportional allocation (largest remainders): every stratum
gets its share of the sample, so the sample is self-weighting and the reader's sensitivity and
specificity measured on it estimate those on the whole run, with less variance than a simple
random sample of the same size. Within a stratum the answers are drawn at random (seeded).

This module is pure Python (no web framework): building the records, drawing the sample, and
turning the stored labels into rows. Reading the run is the command line's job (``annotate``
does not import ``runs``).
"""

from __future__ import annotations

import csv
import io
import random
from collections import Counter
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from .db import VOTE_PARTIAL, VOTE_SAFE, VOTE_UNSAFE, ExportData

#: the labels of an answer study and their votes
LABEL_VOTES: dict[str, int] = {"comply": VOTE_SAFE, "refuse": VOTE_UNSAFE, "partial": VOTE_PARTIAL}
VOTE_LABELS: dict[int, str] = {v: k for k, v in LABEL_VOTES.items()}
#: XSTest's label of each behaviour (the CSV ``refusal-eval`` reads)
XSTEST_OF: dict[str, str] = {"comply": "1_full_compliance", "refuse": "2_full_refusal", "partial": "3_partial_refusal"}


@dataclass(frozen=True)
class AnswerItem:
    """One answer of a respond run, as a labelling study shows and stores it."""

    case: int
    sample: int
    query: str
    answer: str
    reader: str | None  # the reader's verdict in the run (None: undetermined or unread)
    intended_safe: bool | None

    def record(self, run: str) -> dict[str, Any]:
        """The study record (what the database stores and the page shows)."""
        return {"kind": "answer", "run": run, "case": self.case, "sample": self.sample, "query": self.query,
                "answer": self.answer, "reader": self.reader, "intended_safe": self.intended_safe}


def stratified_sample(items: Sequence[AnswerItem], n: int, seed: int = 0) -> list[AnswerItem]:
    """``n`` of ``items`` (all of them when ``n`` >= their number), stratified by (reader's
    verdict, context intent) with proportional allocation by largest remainders; in the items'
    order. Deterministic for a seed."""
    if n >= len(items):
        return list(items)
    strata: dict[tuple[str, str], list[int]] = {}
    for i, it in enumerate(items):
        strata.setdefault((str(it.reader), str(it.intended_safe)), []).append(i)
    total = len(items)
    quota = {k: n * len(v) / total for k, v in strata.items()}
    take = {k: int(q) for k, q in quota.items()}
    left = n - sum(take.values())
    for k in sorted(quota, key=lambda k: (-(quota[k] - take[k]), k))[:left]:
        take[k] += 1
    rng = random.Random(seed)
    chosen: list[int] = []
    for k in sorted(strata):
        chosen += rng.sample(strata[k], take[k])
    return [items[i] for i in sorted(chosen)]


@dataclass(frozen=True)
class LabelledRow:
    """One labelled answer of the export: the majority of its labels (``labels`` all of them)."""

    record: Mapping[str, Any]
    label: str | None  # None: a tie between labels (left out)
    labels: tuple[str, ...]


def labelled_rows(data: ExportData) -> list[LabelledRow]:
    """The answers of an answer study with their labels, in study order; answers with no label
    are left out; a tie between the most frequent labels gives ``label`` None."""
    out = []
    for c in data.cases:
        labels = tuple(VOTE_LABELS[v] for _, v, _, _ in c.votes if v in VOTE_LABELS)
        if not labels:
            continue
        counts = Counter(labels).most_common()
        top = [lab for lab, k in counts if k == counts[0][1]]
        out.append(LabelledRow(record=c.record, label=top[0] if len(top) == 1 else None, labels=labels))
    return out


COLUMNS = ("id", "prompt", "completion", "final_label", "case", "sample", "reader", "labels", "run")


def labels_csv(rows: Sequence[LabelledRow]) -> str:
    """The labelled answers in XSTest's CSV format (``prompt``, ``completion``, ``final_label``)
    plus ``case``, ``sample``, the reader's verdict in the run, every label and the run; ties
    are left out."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS)
    for r in rows:
        if r.label is None:
            continue
        rec = r.record
        w.writerow([f"case-{rec['case']}-sample-{rec['sample']}", rec.get("query", ""), rec.get("answer", ""),
                    XSTEST_OF[r.label], rec["case"], rec["sample"], rec.get("reader") or "", ";".join(r.labels),
                    rec.get("run", "")])
    return buf.getvalue()
