"""One scoring pass per input: the one place an input's figures are computed, and kept.

Every consumer of a score (``casebench score``, ``compare``, ``ablate``, the placement study,
say-do, the report, the CLI after ``casebench run``, the inspect metric) asks ``score_input``
for an input's ``ScoredInput`` and reads it; none rebuilds the scoring arrays or runs a
bootstrap of its own over one input's figures. ``score_input`` builds the input's scoring
arrays (``metrics.scoring_arrays``) once per ``ScoringOptions``, computes every figure with its
interval and the count it rests on (``metrics.score_arrays``), the per-case figures behind the
report's plots, the per-pair context table (``context.pair_table``) and people's references
(``PeopleReferences``: on the pairs the input answered, and over every case it holds), all under
the same options (level, clustering, label source, resamples).

The result is frozen and kept beside the predictions, never in them (``_KEPT``, keyed by the
predictions and the options): a second consumer of the same input with the same options gets
the same object. The predictions are treated as fixed once scored (nothing in casebench changes
loaded predictions; the minimum verdict mass is an option, applied through a view,
``Predictions.at_min_verdict_mass``).

Published reference rows are scored through ``reference_rows`` (one path, one JSON cache on
disk), which hands ``score_input`` the figures it kept (``Kept``) so that nothing is computed
twice.

``BUILDS`` counts, per input source, how often its scoring arrays were built, and ``SCORED`` how
often its figures were computed (the bootstraps): the tests check that a report over several
inputs builds each input's arrays once and that kept reference rows are not scored again.
"""

from __future__ import annotations

import weakref
from collections import Counter, OrderedDict
from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

import numpy as np

from ..data import Case
from ..predictions import Predictions
from .metrics import (
    ECE_BINS, Score, ScoringArrays, breakdown_kinds, ece_bins, score_arrays, score_breakdowns, scoring_arrays,
)
from .options import DEFAULT_OPTIONS, ScoringOptions

#: per input source, how many times its scoring arrays were built (instrumentation for tests)
BUILDS: Counter[str] = Counter()
#: per input source, how many times its figures were computed (``metrics.score_arrays``: the
#: bootstraps) rather than read from a kept reference row (instrumentation for tests)
SCORED: Counter[str] = Counter()


@dataclass(frozen=True, eq=False)
class Reliability:
    """The reliability curve of one input: per non-empty ECE bin (``metrics.ECE_BINS``
    equal-width bins of P(safe)), its mean P(safe), its mean human safe_rate, its case count and
    its centre."""

    p_mean: np.ndarray
    g_mean: np.ndarray
    count: np.ndarray
    centres: np.ndarray


def reliability_curve(a: ScoringArrays) -> Reliability | None:
    """The reliability curve of scored cases with a P(safe); None without one (or no case)."""
    if a.p is None:
        return None
    p = np.clip(np.asarray(a.p, dtype=float), 0, 1)
    if not len(p):
        return None
    bins = ece_bins(p)
    cnt = np.bincount(bins, minlength=ECE_BINS)
    keep = cnt > 0
    pm = np.bincount(bins, weights=p, minlength=ECE_BINS)[keep] / cnt[keep]
    gm = np.bincount(bins, weights=a.g, minlength=ECE_BINS)[keep] / cnt[keep]
    centres = (np.arange(ECE_BINS) + 0.5)[keep] / ECE_BINS
    return Reliability(pm, gm, cnt[keep], centres)


@dataclass(frozen=True)
class PeopleReferences:
    """People's references of one input under its ``ScoringOptions``: the one home that
    ``score``, ``compare``, the report, the first screen after ``run`` and the inspect metric read.

    ``pairs``: on the pairs the input answered, on the judge's own footing
    (``context.score_people``: one person and people's majority, the judge's shift minus each,
    the pairs people label differently), drawn as the input's own pair figures are; None without
    a pair. ``cases``: over every case of the input with votes (``context.human_references``:
    both label sources, annotator agreement, the vote-agreement ceiling, the BCE floor: the line
    under every table); None when a case holds no votes. Both JSON-ready, at the options' level,
    clustering, label source and resamples.
    """

    pairs: Mapping[str, Any] | None = None
    cases: Mapping[str, Any] | None = None

    @property
    def pair_count(self) -> int:
        """How many pairs ``pairs`` rests on (0 without)."""
        return int(self.pairs["pairs"]) if self.pairs else 0

    def shift(self) -> tuple[float, list[float] | None]:
        """One person's expected context shift on the input's pairs, and its interval."""
        b = (self.pairs or {}).get("one_person") or {}
        return float(b.get("context_shift", float("nan"))), b.get("ci", {}).get("context_shift")

    def follow(self) -> tuple[float, list[float] | None]:
        """How often people's majority label follows the context on the input's pairs, and its
        interval."""
        b = (self.pairs or {}).get("majority") or {}
        return float(b.get("context_follow", float("nan"))), b.get("ci", {}).get("context_follow")


def _people_on_pairs(a: ScoringArrays, scored_cases: Sequence[Case], o: ScoringOptions) -> dict[str, Any] | None:
    from .context import score_people

    if a.pairs is None or not len(a.pairs):
        return None
    return score_people(a, scored_cases, n_boot=o.n_boot, seed=o.bootstrap_seed, level=o.level,
                        label_source=o.label_source)


def _people_over_cases(pred: Predictions, o: ScoringOptions) -> dict[str, Any] | None:
    from .context import human_references

    if not pred.cases or not all(c.has_votes for c in pred.cases) or not any(c.votes for c in pred.cases):
        return None  # a set labelled by a safe_rate alone (the demo set): no individual vote
    try:
        return human_references(pred.cases, n_boot=o.n_boot, seed=o.bootstrap_seed, level=o.level,
                                label_source=o.label_source, cluster=o.resample_by)
    except ValueError:
        return None


@dataclass(frozen=True, eq=False, repr=False)
class ScoredInput:
    """One input scored once under one ``ScoringOptions``: everything any command shows of it.

    ``pred``: the predictions as scored (at the options' minimum verdict mass); ``arrays`` and
    ``mask``: its scoring arrays and which of its cases are scored (every case with
    paper-compatible scoring, else those answered); ``score``: every figure with its interval
    and the count it rests on (``Score.cases_of``); ``category_accuracy``: accuracy per category
    over the scored cases; ``g``: the human safe_rate of the scored cases; ``p``: their P(safe),
    or the predicted label (0/1) for a label-only input; ``reliability``: None for a label-only
    input; ``scored_mask`` / ``correct_all``: per case of the input (all of them, in order)
    scored, and right where scored; ``scored_cases``: the scored cases (``g`` and ``p`` follow
    their order); ``pairs``: the per-pair context table (``context.pair_table``), None without
    pairs; ``people``: people's references (``PeopleReferences``) under the same options.

    Frozen: nothing changes a scored input (``with_breakdowns`` keeps what it derives from the
    same arrays, so each kind of breakdown is computed once).
    """

    pred: Predictions
    options: ScoringOptions
    arrays: ScoringArrays
    mask: np.ndarray
    score: Score
    category_accuracy: dict[str, float]
    g: np.ndarray
    p: np.ndarray
    reliability: Reliability | None
    scored_mask: np.ndarray
    correct_all: np.ndarray
    scored_cases: tuple[Case, ...]
    pairs: dict[str, np.ndarray] | None = None
    people: PeopleReferences = field(default_factory=PeopleReferences)
    _broken_down: dict[tuple[str, ...], Score] = field(default_factory=dict, compare=False)

    def __repr__(self) -> str:
        return f"ScoredInput({self.pred.name!r}, scored={self.scored}/{self.pred.n})"

    @property
    def scored(self) -> int:
        """How many cases are scored."""
        return int(self.mask.sum())

    @property
    def binary(self) -> bool:
        """A label-only input (no continuous P(safe))."""
        return not self.pred.is_continuous

    def with_breakdowns(self, breakdowns: bool | Sequence[str]) -> Score:
        """The score with the asked breakdowns (``metrics.BREAKDOWNS``), from the same arrays;
        each kind is computed once."""
        kinds = breakdown_kinds(breakdowns)
        if not kinds:
            return self.score
        if kinds not in self._broken_down:
            self._broken_down[kinds] = replace(
                self.score, breakdowns=score_breakdowns(self.pred, self.arrays, self.mask, self.options, kinds))
        return self._broken_down[kinds]

    def to_dict(self) -> dict[str, Any]:
        """The score as ``casebench score --json`` writes it."""
        return self.score.to_dict()


@dataclass(frozen=True)
class Kept:
    """A reference row's figures as ``reference_rows`` kept them (computed before under the
    same files, dataset, options, cases and version): the score and people's references on its
    pairs. ``score_input`` builds the (cheap) arrays again and computes none of these."""

    score: Score
    people_pairs: Mapping[str, Any] | None = None


def _build(pred: Predictions, options: ScoringOptions, human_rate: np.ndarray | None = None,
           kept: Kept | None = None) -> ScoredInput:
    BUILDS[pred.source] += 1
    a, mask = scoring_arrays(pred, options, human_rate)
    mask = np.asarray(mask, dtype=bool)
    if kept is None:
        SCORED[pred.source] += 1
        score = score_arrays(pred, a, mask, options)
    else:
        score = kept.score
    if pred.turns is not None:  # a reveal run: its figures by turn beside the final turn's
        from .turns import turn_figures

        t = pred.turns
        score = replace(score, turns=turn_figures(pred.cases, t.behaviours, t.holds, t.placement,
                                                  t.partial_as_safe, options.level))
    c = np.array([x.category for x in pred.cases], dtype=object)[mask]
    acc = {}
    for cat in sorted(set(c.tolist())):
        sel = c == cat
        acc[cat] = float(a.correct[sel].mean()) if sel.any() else float("nan")
    continuous = pred.is_continuous
    p = a.p if continuous else a.pred_safe.astype(float)
    correct_all = np.zeros(pred.n, dtype=bool)
    correct_all[np.flatnonzero(mask)] = a.correct
    pairs = None
    if a.pairs is not None and len(a.pairs):
        from .context import pair_table

        pairs = pair_table(a)
    scored_cases = tuple(x for x, m in zip(pred.cases, mask) if m)
    on_pairs = kept.people_pairs if kept is not None else _people_on_pairs(a, scored_cases, options)
    people = PeopleReferences(on_pairs, _people_over_cases(pred, options))
    return ScoredInput(pred, options, a, mask, score, acc, a.g, p, reliability_curve(a) if continuous else None,
                       mask, correct_all, scored_cases, pairs, people)


#: every input's scored result by (the predictions' identity, the options), the most recently
#: used last, with a weak reference to the predictions (an identity is reused once they are
#: gone); kept beside the predictions, never in them, at most ``_KEPT_MAX``
_KEPT: "OrderedDict[tuple[int, ScoringOptions], tuple[weakref.ref[Predictions], ScoredInput]]" = OrderedDict()
_KEPT_MAX = 512


def score_input(pred: Predictions, options: ScoringOptions = DEFAULT_OPTIONS, *,
                kept: Kept | None = None) -> ScoredInput:
    """The one ``ScoredInput`` of ``pred`` under ``options``: built on the first call, the same
    object afterwards (kept beside the predictions, keyed by them and the options, which include
    the threshold they are read at). ``kept``: a reference row's figures kept on disk
    (``reference_rows``), used instead of computing them on the first call. Raises
    ``options.LabelSourceError`` when the cases cannot be labelled."""
    key = (id(pred), options)
    got = _KEPT.get(key)
    if got is not None and got[0]() is pred:
        _KEPT.move_to_end(key)
        return got[1]
    scored = _build(pred.at_min_verdict_mass(options.min_verdict_mass), options, kept=kept)
    _KEPT[key] = (weakref.ref(pred), scored)
    while len(_KEPT) > _KEPT_MAX:
        _KEPT.popitem(last=False)
    return scored


def score_predictions(
    pred: Predictions, options: ScoringOptions = DEFAULT_OPTIONS, *, breakdowns: bool | Sequence[str] = False,
    human_rate: np.ndarray | None = None,
) -> Score:
    """Every metric of ``pred`` with its CI and count (``score_input(...).score``), optionally
    broken down (``breakdowns``: the kinds of ``metrics.BREAKDOWNS``, or True for all).

    ``human_rate``: score against these human safe_rates instead of the options' label source
    (an explicit array; such a score is computed afresh, not kept)."""
    if human_rate is not None:
        return _build(pred.at_min_verdict_mass(options.min_verdict_mass), options, human_rate).with_breakdowns(breakdowns)
    return score_input(pred, options).with_breakdowns(breakdowns)


def people_by_case_set(inputs: Sequence[ScoredInput]) -> list[tuple[list[int], Mapping[str, Any]]]:
    """People's references over every case (``PeopleReferences.cases``) of each distinct set of
    voted cases among ``inputs``, read from the inputs' own results: (positions of the inputs
    that hold it, the references). Inputs of one dataset share one (an ablation condition shares
    its full context's: the votes are the same); inputs without votes are left out."""
    groups: dict[tuple[Any, ...], list[int]] = {}
    for i, s in enumerate(inputs):
        if s.people.cases is None:
            continue
        key = tuple((c.index, c.query, c.votes, c.safe_rate, c.category, c.intended_safe) for c in s.pred.cases)
        groups.setdefault(key, []).append(i)
    return [(members, inputs[members[0]].people.cases) for members in groups.values()]
