"""Everything the report shows about a set of inputs, computed once (``present.report`` only
lays it out).

Per input: its one scoring result (``result.score_input``: the score, and from the same
scoring arrays the per-case figures behind the plots: accuracy by category, P(safe) against the
human safe_rate, the reliability curve, the per-pair context table), which every analysis below
reads rather than scoring the input again. Across inputs
(``Overview``): the inputs grouped by case set, the paired comparisons of inputs that share cases
of one dataset, over the cases each pair shares (``compare``), the
ablation studies among them (``ablation``), judgement against behaviour for a model with a judge
input and a respond run (``saydo``), and the statistics of the human votes (``human``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ..data import Case
from ..predictions import Predictions
from .ablation import AblationResult
from .compare import AccuracyMatrix, Comparison, PairComparison, case_set_groups
from .options import DEFAULT_OPTIONS, ScoringOptions
from .placement import PlacementResult
from .result import ScoredInput, score_input
from .saydo import SayDo

#: random draws per case and k of the human section's stability curve
HUMAN_DRAWS = 1000

#: the report's names for one input's scored result (``result.ScoredInput``, ``result.score_input``)
InputFigures = ScoredInput
input_figures = score_input


#: the compact view's rows of neighbours in the ranking (each with paired-bootstrap CIs)
NEIGHBOUR_ROWS = 12


@dataclass
class PairMatrix:
    """Many inputs over the same cases, compared at once: ``order`` (positions in the group, most
    accurate first, as the leaderboard ranks them), every pair's accuracy difference in that
    order (``compare.accuracy_matrix``: McNemar's exact test, Benjamini-Hochberg over all pairs)
    and each input against the next one in the ranking (``compare.compare_pair``, at most
    ``NEIGHBOUR_ROWS``)."""

    order: list[int]
    matrix: AccuracyMatrix
    neighbours: list[PairComparison]


def accuracy_order(figs: Sequence[ScoredInput]) -> list[int]:
    """Positions of ``figs`` by accuracy, best first (an undefined accuracy last; ties in order)."""
    return sorted(range(len(figs)), key=lambda i: -np.nan_to_num(figs[i].score.values.get("accuracy", np.nan),
                                                                  nan=-1.0))


def pair_matrix(figs: Sequence[ScoredInput], options: ScoringOptions = DEFAULT_OPTIONS) -> PairMatrix:
    """The ``PairMatrix`` of inputs over the same cases."""
    from .bootstrap import case_clusters
    from .compare import accuracy_matrix, compare_pair, resamples

    order = accuracy_order(figs)
    its = [figs[k] for k in order]
    clusters = case_clusters(its[0].pred.cases, options.resample_by) if its else None
    mx = accuracy_matrix(np.array([f.correct_all for f in its]), np.array([f.scored_mask for f in its]),
                         clusters=clusters)
    W, PW = resamples(its[0].pred.cases, its[0].pred, None, options, clusters) if its else (None, None)
    neighbours = [compare_pair(its[i].pred, its[i + 1].pred, options, weights=W, pair_weights=PW, clusters=clusters)
                  for i in range(min(NEIGHBOUR_ROWS, len(its) - 1))]
    return PairMatrix(order, mx, neighbours)


# --------------------------------------------------------------------------------------------
# Which inputs go together


def _cases_keys(preds: Sequence[Predictions]) -> list[tuple[str, tuple[int, ...]]]:
    """Per input, what ``compare`` checks: the cases' fingerprint (leaving out every CI parameter
    any input removed, so an ablation condition matches its full context) and the case indices."""
    ignore = tuple(dict.fromkeys(n for p in preds for n in p.removed))
    return [(p.fingerprint(ignore), tuple(p.case_indices.tolist())) for p in preds]


def comparisons(preds: Sequence[Predictions], options: ScoringOptions = DEFAULT_OPTIONS) -> list[tuple[list[int], Comparison | None]]:
    """The paired comparisons of inputs that share cases of one dataset (``compare.comparable_groups``):
    per group, every pair that shares a case, over the cases it shares (``compare``)."""
    from .compare import comparable_groups, compare, shared_cases

    out = []
    for g in comparable_groups(preds):
        if len(g) < 2:
            continue
        if len(g) > PAIRWISE_TABLE_MAX:
            # shown as a matrix (``compare.accuracy_matrix``), not one row per pair: every pair's
            # bootstrap would be most of the report's time (43 inputs: 903 pairs)
            out.append((g, None))
            continue
        sub = [preds[i] for i in g]
        todo = [(x, y) for x in range(len(g)) for y in range(x + 1, len(g)) if shared_cases(sub[x], sub[y])]
        out.append((g, compare(sub, options, pairs=todo)))
    return out


def ablation_groups(preds: Sequence[Predictions]) -> list[list[int]]:
    """Groups of inputs that form an ablation study: one model in one mode over the same cases,
    a full-context input and at least one condition, no condition twice."""
    from .ablation import canonical

    groups: dict[tuple[Any, ...], list[int]] = {}
    for i, (p, key) in enumerate(zip(preds, _cases_keys(preds))):
        groups.setdefault((p.model, p.mode, p.context_as, *key), []).append(i)
    out = []
    for g in groups.values():
        conds = [canonical(preds[i].removed) for i in g]
        if () in conds and any(conds) and len(set(conds)) == len(conds):
            out.append(g)
    return out


def placement_groups(preds: Sequence[Predictions]) -> list[tuple[list[int], list[int]]]:
    """Placement studies among a set of inputs (the report's): (study positions, judge positions
    for the say-do gap). A study is one model, mode and removal over the same cases (as
    ``compare`` checks them) in at least two placements, each once; a respond study's judges are
    that model's judge inputs over the same cases in the study's placements, one per placement."""
    from .placement import placement_of

    keys = _cases_keys(preds)
    groups: dict[tuple[Any, ...], list[int]] = {}
    for i, (p, key) in enumerate(zip(preds, keys)):
        groups.setdefault((p.model, p.mode, tuple(p.removed), key), []).append(i)
    out = []
    for (model, _, _, key), g in groups.items():
        where = [placement_of(preds[i]) for i in g]
        if len(g) < 2 or len(set(where)) != len(where):
            continue
        judges: list[int] = []
        if preds[g[0]].mode_spec.reads_behaviour:
            seen: set[str] = set()
            for j, (p, k) in enumerate(zip(preds, keys)):
                w = placement_of(p)
                if p.model == model and not p.mode_spec.reads_behaviour and k == key and w in where and w not in seen:
                    seen.add(w)
                    judges.append(j)
        out.append((g, judges))
    return out


def say_do_pairs(preds: Sequence[Predictions], options: ScoringOptions = DEFAULT_OPTIONS) -> list[tuple[int, int, SayDo]]:
    """Each model's judge input against its respond run on the same cases: (judge position,
    respond position, ``saydo.say_do``); pairs ``say_do`` refuses are left out."""
    from .compare import CompareError
    from .saydo import is_say_do_pair, say_do

    out = []
    for i, a in enumerate(preds):
        for j in range(i + 1, len(preds)):
            b = preds[j]
            if not (is_say_do_pair(a, b) and a.model == b.model):
                continue
            judge, respond = (i, j) if b.mode_spec.reads_behaviour else (j, i)
            try:
                sd = say_do(preds[judge], preds[respond], options)
            except CompareError:
                continue
            out.append((judge, respond, sd))
    return out


# --------------------------------------------------------------------------------------------
# Everything


@dataclass
class Overview:
    """Everything the report shows (see the module docstring). ``comparisons`` and
    ``ablations`` pair each result with the input positions it covers (its inputs A, B, ... or
    its conditions, in that order). ``human``: the statistics of the human votes, None when not
    asked (``human_asked``) or not possible (``human_error`` says why)."""

    options: ScoringOptions
    inputs: list[ScoredInput]
    say_do: list[tuple[int, int, SayDo]] = field(default_factory=list)
    comparisons: list[tuple[list[int], Comparison | None]] = field(default_factory=list)
    #: the groups compared as a matrix (``comparisons`` holds None for them): (positions, matrix)
    matrices: list[tuple[list[int], PairMatrix]] = field(default_factory=list)
    #: the people's references (``context.references_by_dataset``) of the inputs with votes
    people: list[tuple[list[int], dict[str, Any]]] = field(default_factory=list)
    #: the inputs grouped by the cases they hold (``compare.case_set_groups``): ranked per group
    case_sets: list[list[int]] = field(default_factory=list)
    ablations: list[tuple[list[int], AblationResult]] = field(default_factory=list)
    #: placement studies: (study positions, judge positions for the say-do gap, the analysis)
    placements: list[tuple[list[int], list[int], PlacementResult]] = field(default_factory=list)
    human_asked: bool = False
    human: dict[str, Any] | None = None
    human_error: str | None = None


#: a group of inputs over the same cases with more inputs than this is not compared pair by pair
#: here (``Overview.comparisons`` holds None for it); the report shows it as a matrix
PAIRWISE_TABLE_MAX = 8


def overview(
    preds: Sequence[Predictions], options: ScoringOptions = DEFAULT_OPTIONS, *,
    human_cases: Sequence[Case] | None = None, human: bool = True,
) -> Overview:
    """Every figure of the report over ``preds`` (see the module docstring).

    ``human_cases``: the cases whose votes the human statistics use (a dataset); by default the
    cases of the input that holds the most. ``human=False`` leaves those statistics out.
    """
    from .ablation import analyse_ablation
    from .placement import analyse_placements
    from .human import HumanStatsError, human_stats

    preds = list(preds)
    out = Overview(options, [score_input(p, options) for p in preds])
    out.say_do = say_do_pairs(preds, options)
    out.comparisons = comparisons(preds, options)
    out.matrices = [(g, pair_matrix([out.inputs[i] for i in g], options)) for g, res in out.comparisons if res is None]
    out.case_sets = case_set_groups(preds)
    from .context import references_by_dataset

    out.people = references_by_dataset(preds, n_boot=options.n_boot, seed=options.bootstrap_seed,
                                       label_source=options.label_source, level=options.level)
    out.ablations = [(g, analyse_ablation([preds[i] for i in g], options)) for g in ablation_groups(preds)]
    out.placements = [(g, j, analyse_placements([preds[i] for i in g], options, judges=[preds[i] for i in j]))
                      for g, j in placement_groups(preds)]
    out.human_asked = human
    if human:
        if human_cases is None and preds:
            human_cases = max(preds, key=lambda p: p.n).cases
        if human_cases:
            try:
                out.human = human_stats(human_cases, draws=HUMAN_DRAWS, seed=options.human_draw_seed,
                                        label_source=options.label_source)
            except HumanStatsError as e:
                out.human_error = str(e)
    return out
