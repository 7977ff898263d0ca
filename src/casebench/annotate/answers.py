"""Labelling a respond run's answers: people check the refusal reader on the user's own model.

A respond run's refusal figures are read by a classifier whose error was measured on other
writing; the error that matters is its error on *this* model's answers. ``casebench annotate
answers RUN_DIR --sample N --db URL`` serves a sample of the run's answers in the same app and
database as case votes (one study per database: ``VoteStore.study == "answers"``); people label
each answer by its outcome: full compliance, partial compliance, a clarifying question or a full
refusal (votes 1 / 3 / 4 / 2), and ``casebench annotate export --answers
RUN_DIR`` writes the labels into the run directory as ``reader_labels.csv`` (XSTest's format, so
``casebench refusal-eval`` reads it too), with who labelled (``labelled_by``: people, as the app
is for people, unless the export says otherwise) and each answer's sampling weight. From then on
the run's scores estimate its refusal figures from those labels by PPI++ (``stats.people_refusal``)
and test whether the reader's stored validation holds on them.

The sample is stratified by the reader's verdict (comply, partial, refuse, undetermined) and the
context's intent (safe, unsafe), with proportional allocation (largest remainders; a stratum left
without an answer gets one from the largest when the sample has room for one per stratum): each answer's inverse
inclusion probability (``weight``: the stratum's answers over its draws) is recorded with it, and
the estimator weights each label by it, so the estimate is unbiased for the whole run whatever the
rounding. Within a stratum the answers are drawn at random (seeded).

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

from .db import VOTE_CLARIFY, VOTE_PARTIAL, VOTE_SAFE, VOTE_UNSAFE, ExportData

#: the labels of an answer study and their votes
LABEL_VOTES: dict[str, int] = {"comply": VOTE_SAFE, "refuse": VOTE_UNSAFE, "partial": VOTE_PARTIAL,
                               "clarify": VOTE_CLARIFY}
VOTE_LABELS: dict[int, str] = {v: k for k, v in LABEL_VOTES.items()}
#: XSTest's label of each behaviour (the CSV ``refusal-eval`` reads)
XSTEST_OF: dict[str, str] = {"comply": "1_full_compliance", "refuse": "2_full_refusal", "partial": "3_partial_refusal",
                             "clarify": "4_clarifying_question"}


@dataclass(frozen=True)
class AnswerItem:
    """One answer of a respond run, as a labelling study shows and stores it."""

    case: int
    sample: int
    query: str
    answer: str
    reader: str | None  # the reader's verdict in the run (None: undetermined or unread)
    intended_safe: bool | None
    #: a reveal run's answers sampled by turn (``annotate answers --turns``): the 1-based turn the
    #: answer was given at, of ``turns``; None for a run's final answers sampled alone
    turn: int | None = None
    turns: int | None = None

    @property
    def earlier_turn(self) -> bool:
        """An answer given before a reveal conversation's last turn (not what the run scores)."""
        return self.turn is not None and self.turns is not None and self.turn < self.turns

    @property
    def stratum(self) -> str:
        """The sampling stratum: the reader's verdict and the context's intent (and, sampling a
        reveal run by turn, the turn)."""
        intent = {True: "safe", False: "unsafe"}.get(self.intended_safe, "unknown") if self.intended_safe is not None \
            else "unknown"
        turn = f"|turn {self.turn}" if self.turn is not None else ""
        return f"{self.reader or 'undetermined'}|{intent}-intent{turn}"

    def record(self, run: str, weight: float | None = None) -> dict[str, Any]:
        """The study record (what the database stores and the page shows); ``weight``: its
        inverse inclusion probability in the sample (``draw_sample``)."""
        rec: dict[str, Any] = {"kind": "answer", "run": run, "case": self.case, "sample": self.sample,
                               "query": self.query, "answer": self.answer, "reader": self.reader,
                               "intended_safe": self.intended_safe}
        if self.turn is not None:
            rec["turn"], rec["turns"] = self.turn, self.turns
        if weight is not None:
            rec["weight"] = weight
            rec["stratum"] = self.stratum
        return rec


@dataclass(frozen=True)
class Drawn:
    """One answer of a sample and its inverse inclusion probability (its stratum's answers over
    its stratum's draws)."""

    item: AnswerItem
    weight: float


def draw_sample(items: Sequence[AnswerItem], n: int, seed: int = 0) -> list[Drawn]:
    """``n`` of ``items`` (all of them, weight 1, when ``n`` >= their number), stratified by
    (reader's verdict, context intent): proportional allocation by largest remainders, every
    stratum at least one draw when ``n`` reaches the number of strata; in the items' order, each
    with its weight. Deterministic for a seed."""
    if n >= len(items):
        return [Drawn(it, 1.0) for it in items]
    strata: dict[str, list[int]] = {}
    for i, it in enumerate(items):
        strata.setdefault(it.stratum, []).append(i)
    total = len(items)
    quota = {k: n * len(v) / total for k, v in strata.items()}
    take = {k: int(q) for k, q in quota.items()}
    left = n - sum(take.values())
    for k in sorted(quota, key=lambda k: (-(quota[k] - take[k]), k))[:left]:
        take[k] += 1
    if n >= len(strata):  # no stratum left out: its answers would have no chance of a label
        for k in sorted(k for k in strata if take[k] == 0):
            donor = max(sorted(take), key=lambda d: take[d])
            take[donor] -= 1
            take[k] = 1
    rng = random.Random(seed)
    chosen: dict[int, float] = {}
    for k in sorted(strata):
        for i in rng.sample(strata[k], take[k]):
            chosen[i] = len(strata[k]) / take[k]
    return [Drawn(items[i], chosen[i]) for i in sorted(chosen)]


def stratified_sample(items: Sequence[AnswerItem], n: int, seed: int = 0) -> list[AnswerItem]:
    """The answers of ``draw_sample`` without their weights."""
    return [d.item for d in draw_sample(items, n, seed)]


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


COLUMNS = ("id", "prompt", "completion", "final_label", "case", "sample", "reader", "labels", "run", "labelled_by",
           "weight", "stratum")
#: who may have given the labels: people (the app is for them), AI readers following a guide, the
#: answers' own writer; only ``people`` makes the run's figures people's
LABELLERS: tuple[str, ...] = ("people", "ai", "writer")


def earlier_turn(record: Mapping[str, Any]) -> bool:
    """Whether a stored answer was given before its reveal conversation's last turn: such labels
    measure the reader on answers inside a conversation and go to ``turn_labels_csv``, never
    into the run's labels of its final answers."""
    t, n = record.get("turn"), record.get("turns")
    return isinstance(t, int) and isinstance(n, int) and t < n


def turn_labels_csv(rows: Sequence[LabelledRow], labelled_by: str = "people") -> str:
    """The labelled answers of earlier reveal turns (``earlier_turn``): ``labels_csv``'s columns
    with ``turn`` and ``turns`` after them."""
    return labels_csv(rows, labelled_by, earlier=True)


def labels_csv(rows: Sequence[LabelledRow], labelled_by: str = "people", earlier: bool = False) -> str:
    """The labelled answers in XSTest's CSV format (``prompt``, ``completion``, ``final_label``)
    plus ``case``, ``sample``, the reader's verdict in the run, every label, the run, who
    labelled and the answer's sampling weight and stratum (empty for a sample drawn before
    weights were recorded); ties are left out, and so are the answers of earlier reveal turns
    (``turn_labels_csv`` writes those) unless ``earlier``."""
    if labelled_by not in LABELLERS:
        raise ValueError(f"labelled_by must be one of {', '.join(LABELLERS)}, not {labelled_by!r}")
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS + (("turn", "turns") if earlier else ()))
    for r in rows:
        if r.label is None or earlier_turn(r.record) is not earlier:
            continue
        rec = r.record
        weight = rec.get("weight")
        turn = f"-turn-{rec['turn']}" if earlier else ""
        w.writerow([f"case-{rec['case']}-sample-{rec['sample']}{turn}", rec.get("query", ""), rec.get("answer", ""),
                    XSTEST_OF[r.label], rec["case"], rec["sample"], rec.get("reader") or "", ";".join(r.labels),
                    rec.get("run", ""), labelled_by, "" if weight is None else repr(float(weight)),
                    rec.get("stratum") or "", *((rec["turn"], rec["turns"]) if earlier else ())])
    return buf.getvalue()
