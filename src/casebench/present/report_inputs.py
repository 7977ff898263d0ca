"""What every section of the report reads: the inputs with their display names
(``ReportInput``), the figures (``ReportContext`` over ``stats.overview.Overview``), a section's
entry (``Section``), and the leaderboard's ranking that the other sections follow."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from ..predictions import Predictions
from ..stats.metrics import METRIC, MIN_DISCORDANT, MIN_PAIRED, Score
from ..stats.options import ScoringOptions
from ..stats.overview import InputFigures, Overview
from .report_figures import Figures

def leaderboard_metrics() -> tuple[str, ...]:
    """The leaderboard's columns: the paper's metrics (family ``primary``), in the registry's
    order, read when the report is drawn; the context figures and human references have their
    own section, and every figure is in the leaderboard's downloads (so the table fits 1400 px)."""
    return tuple(m for m in METRIC if METRIC[m].family == "primary")


#: the paired differences the report shows per pair (``casebench compare`` shows them all)
PAIRWISE_METRICS = ("accuracy", "safe_recall", "unsafe_recall", "pcc")
# A group of more than ``stats.overview.PAIRWISE_TABLE_MAX`` inputs gets the compact view (a
# matrix of every pair's accuracy difference, the ``NEIGHBOUR_ROWS`` neighbours in the ranking,
# every pair as a CSV) instead of one row per pair.
#: no significance mark in the matrix below these paired / discordant case counts (``stats.metrics``)
MATRIX_MIN_PAIRED, MATRIX_MIN_DISCORDANT = MIN_PAIRED, MIN_DISCORDANT
#: at most this many inputs get a panel in the scatter and a curve in the calibration plot (the
#: best by accuracy); the caption names how many were left out
PLOT_MAX_INPUTS = 9
TEST_NAMES = {"mcnemar": "McNemar", "mcnemar_clustered": "clustered McNemar", "williams": "Williams",
              "bootstrap": "bootstrap"}



@dataclass
class ReportInput:
    """One input as the report shows it: a unique display name and its figures
    (``stats.overview.InputFigures``: predictions, score, per-case figures)."""

    name: str
    figures: InputFigures
    #: a published model shown for reference (``--reference``): in the leaderboard and the context
    #: section, marked, and never in a paired comparison
    reference: bool = False

    @property
    def pred(self) -> Predictions:
        return self.figures.pred

    @property
    def score(self) -> Score:
        return self.figures.score


@dataclass
class ReportContext:
    """What every section reads: the inputs with their display names, the scoring options and
    the figures (``stats.overview.Overview``)."""

    inputs: list[ReportInput]
    overview: Overview
    #: published models shown for reference (leaderboard and context section only)
    references: list[ReportInput] = field(default_factory=list)
    reference_root: str | None = None
    #: list the context-blind queries with their text (else case indices only; the default: the
    #: queries are the dataset's, gated by its licence)
    show_text: bool = False
    #: where the sections' figures are drawn (``report_figures``: at once, or beside the rest)
    figures: Figures = field(default_factory=Figures)

    @property
    def options(self) -> ScoringOptions:
        return self.overview.options


@dataclass(frozen=True)
class Section:
    """One section of the report: its anchor (``key``), its title (heading and table of
    contents) and ``render``, the section's body from the context, or None when it does not
    apply to these inputs (it is then neither shown nor listed)."""

    key: str
    title: str
    render: Callable[[ReportContext], "str | None"]




#: the kinds of input the report ranks apart, in the order it shows them: respond runs (what a
#: chatbot did), judges (what a model said), ablation conditions (a model less some CI parameters)
KINDS = ("respond", "judge", "ablated")
KIND_TITLES = {"respond": "Chatbots (respond runs): what each did, ranked among chatbots",
               "judge": "Judges: what each said, ranked among judges",
               "ablated": "Ablation conditions (CI parameters removed), ranked apart from the models"}
#: more one-line verdicts than this are folded away (``<details>``)
VERDICT_LINES = 6
#: the leaderboard's number prefix of each kind (judges plain; chatbots only when judges are shown too)
KIND_PREFIX = {"respond": "R", "judge": "", "ablated": "A"}


def _kind(it: ReportInput) -> str:
    """Which kind ``it`` is ranked among (``KINDS``: ``stats.ranking.kind_of``)."""
    from ..stats.ranking import kind_of

    return kind_of(it.pred)


def _prefix(kind: str, kinds: set[str]) -> str:
    """The number prefix of ``kind`` when ``kinds`` are shown ("" for chatbots shown alone)."""
    return "" if kind == "respond" and "judge" not in kinds else KIND_PREFIX[kind]


def _ranks(inputs: Sequence[ReportInput]) -> list[int]:
    """Each input's place (1 = best accuracy): by kind (``KINDS``), then by accuracy, as
    ``_leaderboard`` sorts them (``_rank_labels`` names the places)."""
    order = sorted(range(len(inputs)), key=lambda i: (KINDS.index(_kind(inputs[i])), -np.nan_to_num(
        inputs[i].score.values.get("accuracy", np.nan), nan=-1.0)))
    rank = [0] * len(inputs)
    for r, i in enumerate(order, start=1):
        rank[i] = r
    return rank


def _rank_labels(inputs: Sequence[ReportInput]) -> list[str]:
    """The leaderboard's numbers, counted within each kind: judges 1, 2, ...; chatbots R1, R2, ...
    (1, 2, ... without judges); ablation conditions A1, A2, ..."""
    kinds = [_kind(it) for it in inputs]
    shown = set(kinds)
    out = [""] * len(inputs)
    seen: dict[str, int] = {}
    for i in sorted(range(len(inputs)), key=lambda i: _ranks(inputs)[i]):
        seen[kinds[i]] = seen.get(kinds[i], 0) + 1
        out[i] = f"{_prefix(kinds[i], shown)}{seen[kinds[i]]}"
    return out


def _best(inputs: Sequence[ReportInput], k: int) -> tuple[list[ReportInput], int]:
    """The ``k`` most accurate inputs, in leaderboard order, and how many were left out."""
    ranks = _ranks(inputs)
    ordered = [it for _, it in sorted(zip(ranks, inputs), key=lambda x: x[0])]
    return ordered[:k], max(0, len(ordered) - k)


def _left_out_note(left_out: int) -> str:
    return (f" Only the {PLOT_MAX_INPUTS} most accurate inputs are drawn; {left_out} more are in the leaderboard."
            if left_out else "")


