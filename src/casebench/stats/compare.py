"""Paired significance tests between judges scored on the same cases.

Two judges that answered the same cases are *paired*: their errors are correlated (the hard cases
are hard for both), so comparing their CIs side by side wastes power and can mislead. Every test
here uses the pairing.

What is compared, and with which test
    For each pair (A, B) and each metric, the difference A - B:

    * **accuracy**: McNemar's exact test on per-case correctness (statsmodels ``mcnemar``,
      ``exact=True``: a binomial test on the discordant cases);
    * **PCC** (Pearson r with the human safe_rate): Williams' t for two dependent correlations
      sharing a variable (see ``williams_t``);
    * **safe recall, unsafe recall, BCE, Brier**: the paired bootstrap.

    (The primary test of each metric is its ``test`` in ``metrics.METRICS``.)

    Every metric also gets a paired-bootstrap CI (and bootstrap p). The test named above is the
    metric's *primary* test; Benjamini-Hochberg (statsmodels ``multipletests``, ``fdr_bh``) runs
    over the primary p-values of all pairs and metrics together, so one family-wise decision is
    made per table and no hypothesis is counted twice. PCC, BCE and Brier are compared only when
    both inputs are continuous (score or prob modes); a binary verdict has no P(safe) to score.

Which cases
    Default: the cases *both* inputs answered (a missing answer is not a wrong answer); how many
    were dropped is reported. ``ScoringOptions(paper_compat=True)``: every case, with missing answers handled as
    the published script does (see ``metrics``), so the figures line up with
    ``casebench score --paper-compat``.

Paired bootstrap
    One set of resamples of the inputs' cases (``bootstrap.resample_weights``) drives both inputs
    of a pair, and every pair (the inputs hold the same cases). A resample is held as case
    weights: ``W`` (B x n) says how often each case was drawn, and both inputs are scored by the
    same formulas as ``casebench score`` (``metrics.metric_values``: a metric of a resample is a
    function of weighted sums, so a whole bootstrap is one matrix product per pair). In default
    mode a pair is scored on the drawn cases both inputs answered (the resampled set varies in
    size with the missing answers, as the observed one does); with every case answered this is
    the plain case bootstrap. CIs are percentile intervals of the resampled differences
    (``bootstrap.percentile_ci``); the bootstrap p-value (``bootstrap.bootstrap_p``) is the
    two-sided ``2 * min(P*(d <= 0), P*(d >= 0))`` with the usual +1 correction
    (``(k + 1) / (B + 1)``, so it is never exactly 0 from finitely many resamples), clipped to 1.
    An input compared with itself gives d = 0 in every resample: CI [0, 0] and p = 1.

Labels
    The human labels are the published ones, or with ``label_source="votes"`` (``ScoringOptions``) the majority of
    each case's votes alone (``metrics.human_rates``), for both inputs alike.

Refusals
    Inputs must come from the same dataset (the content fingerprint of the cases they share) and
    cover the same cases; otherwise ``CompareError`` says which inputs differ and how.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ..data import cases_fingerprint
from ..jsonutil import json_safe
from ..predictions import Predictions
from .bootstrap import bootstrap_p, percentile_ci, resample_weights
from .metrics import COMPARED_METRICS, METRIC, ScoringArrays, metric_values, scoring_arrays
from .options import DEFAULT_OPTIONS, ScoringOptions


class CompareError(ValueError):
    """Inputs that cannot be compared (different datasets or case sets, too few inputs)."""


# --------------------------------------------------------------------------------------------
# Same dataset, same cases


def input_label(i: int) -> str:
    """A, B, ..., Z, AA, AB, ... (short names for inputs in tables)."""
    s = ""
    i += 1
    while i:
        i, r = divmod(i - 1, 26)
        s = chr(65 + r) + s
    return s


def check_comparable(preds: Sequence[Predictions], names: Sequence[str] | None = None) -> None:
    """Raise ``CompareError`` unless every input holds the same cases of the same dataset.

    The dataset check compares the content fingerprint of the cases two inputs share, so it
    holds between a dataset file, a run directory and a published ``exp/`` file alike; the CI
    parameters either input removed (an ablation condition) are left out of both fingerprints, so
    an ablation file whose contexts lack them pairs with its full-context file. The case check
    compares the sets of case indices.
    """
    if len(preds) < 2:
        raise CompareError("comparing needs at least two inputs")
    names = list(names or [p.source for p in preds])
    ref = preds[0]
    ref_idx = ref.case_indices
    ref_pos = {int(c): k for k, c in enumerate(ref_idx)}
    problems = []
    for p, name in zip(preds[1:], names[1:]):
        idx = p.case_indices
        common = [int(c) for c in idx if int(c) in ref_pos]
        mine = {int(c): k for k, c in enumerate(idx)}
        ignore = tuple(dict.fromkeys([*ref.removed, *p.removed]))
        fa = cases_fingerprint([ref.cases[ref_pos[c]] for c in common], ignore)
        fb = cases_fingerprint([p.cases[mine[c]] for c in common], ignore)
        if not common or fa != fb:
            problems.append(
                f"{names[0]} and {name} are not from the same dataset (the content of their cases differs: "
                f"fingerprints {ref.fingerprint(ignore)[:12]} and {p.fingerprint(ignore)[:12]})"
            )
            continue
        if set(common) != set(ref_pos) or len(common) != len(idx):
            only_a = len(set(ref_pos) - set(mine))
            only_b = len(set(mine) - set(ref_pos))
            problems.append(
                f"{names[0]} has {len(ref_idx)} cases, {name} has {len(idx)} "
                f"({only_a} only in the first, {only_b} only in the second); compare runs over the same cases"
            )
    if problems:
        raise CompareError("cannot compare these inputs:\n  " + "\n  ".join(problems))


# --------------------------------------------------------------------------------------------
# The tests


def mcnemar_exact(correct_a: np.ndarray, correct_b: np.ndarray) -> dict[str, Any]:
    """McNemar's exact test on paired correctness (statsmodels). ``a_only``: cases A got right
    and B wrong; ``b_only`` the reverse. No discordant case: p = 1."""
    from statsmodels.stats.contingency_tables import mcnemar

    a = np.asarray(correct_a, dtype=bool)
    b = np.asarray(correct_b, dtype=bool)
    table = np.array([[np.sum(a & b), np.sum(a & ~b)], [np.sum(~a & b), np.sum(~a & ~b)]])
    a_only, b_only = int(table[0, 1]), int(table[1, 0])
    if a_only + b_only == 0:
        stat, p = 0.0, 1.0
    else:
        res = mcnemar(table, exact=True)
        stat, p = float(res.statistic), float(res.pvalue)
    return {"both_right": int(table[0, 0]), "a_only": a_only, "b_only": b_only, "both_wrong": int(table[1, 1]),
            "statistic": stat, "p": min(1.0, p)}


def williams_t(r12: float, r13: float, r23: float, n: int) -> dict[str, Any]:
    """Williams' t for two dependent correlations that share variable 1 (here: the human
    safe_rate; 2 and 3 are the two judges' predictions over the same cases).

    Steiger (1980), "Tests for comparing elements of a correlation matrix", Psychological
    Bulletin 87(2), eq. 7 (Williams, 1959)::

        t = (r12 - r13) * sqrt( (n - 1)(1 + r23) /
                                ( 2 (n - 1)/(n - 3) |R| + rbar^2 (1 - r23)^3 ) ),
        |R| = 1 - r12^2 - r13^2 - r23^2 + 2 r12 r13 r23,   rbar = (r12 + r13) / 2,

    with n - 3 degrees of freedom; the p-value is two-sided from Student's t (scipy).
    Equal correlations (e.g. an input compared with itself) give t = 0, p = 1.
    """
    from scipy.stats import t as student_t

    out: dict[str, Any] = {"r_a": r12, "r_b": r13, "r_ab": r23, "n": n, "df": n - 3, "t": None, "p": None,
                           "test": "Williams' t, Steiger (1980) eq. 7"}
    if n < 4 or not all(math.isfinite(x) for x in (r12, r13, r23)):
        return out
    if r12 == r13:
        out.update(t=0.0, p=1.0)
        return out
    det = 1 - r12 ** 2 - r13 ** 2 - r23 ** 2 + 2 * r12 * r13 * r23
    rbar = (r12 + r13) / 2
    den = 2 * (n - 1) / (n - 3) * det + rbar ** 2 * (1 - r23) ** 3
    if den <= 0:
        return out
    t = (r12 - r13) * math.sqrt((n - 1) * (1 + r23) / den)
    out.update(t=float(t), p=float(min(1.0, 2 * student_t.sf(abs(t), n - 3))))
    return out


# --------------------------------------------------------------------------------------------
# Results


@dataclass
class MetricDiff:
    """One metric of one pair: both values, A - B, its bootstrap CI and p, the primary test."""

    metric: str
    a: float
    b: float
    diff: float
    ci: list[float]
    p_bootstrap: float
    test: str
    p: float | None
    p_adjusted: float | None = None
    significant: bool = False


@dataclass
class PairComparison:
    a: int
    b: int
    n_paired: int
    dropped: int
    mcnemar: dict[str, Any]
    williams: dict[str, Any] | None
    metrics: dict[str, MetricDiff]


@dataclass
class Comparison:
    inputs: list[dict[str, Any]]
    pairs: list[PairComparison]
    settings: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        num = json_safe
        pairs = []
        for pc in self.pairs:
            pairs.append(num({
                "a": self.inputs[pc.a]["label"], "b": self.inputs[pc.b]["label"],
                "a_source": self.inputs[pc.a]["source"], "b_source": self.inputs[pc.b]["source"],
                "n_paired": pc.n_paired, "dropped": pc.dropped,
                "mcnemar": pc.mcnemar, "williams": pc.williams,
                "metrics": {k: dict(vars(m)) for k, m in pc.metrics.items()},
            }))
        return {"inputs": num(self.inputs), "settings": num(self.settings), "pairs": pairs}


def _paired_arrays(
    a: Predictions, b: Predictions, options: ScoringOptions = DEFAULT_OPTIONS,
) -> tuple[ScoringArrays, ScoringArrays, np.ndarray, int]:
    """Scoring arrays of both inputs over the paired cases (see the module docstring), aligned by
    case index; the positions of those cases among ``a``'s cases; and how many cases were
    dropped because only one (or neither) input answered."""
    order_b = {int(c): k for k, c in enumerate(b.case_indices)}
    perm = np.array([order_b[int(c)] for c in a.case_indices], dtype=int)
    if options.paper_compat:
        keep = np.ones(a.n, dtype=bool)
    else:
        keep = a.answered & b.answered[perm]
    sa, ma = scoring_arrays(a, options)
    sb, mb = scoring_arrays(b, options)
    # map each input's (masked) arrays back to the paired positions
    pos_a = np.cumsum(ma) - 1
    pos_b = np.cumsum(mb) - 1
    ia = pos_a[np.flatnonzero(keep)]
    ib = pos_b[perm[np.flatnonzero(keep)]]
    return sa.take(ia), sb.take(ib), np.flatnonzero(keep), int((~keep).sum())


def _describe(p: Predictions, i: int) -> dict[str, Any]:
    return {"label": input_label(i), "name": p.name, "source": p.source, "model": p.model, "mode": p.mode,
            "removed": list(p.removed), "n": p.n, "answered": int(p.answered.sum())}


def compare_pair(
    a: Predictions, b: Predictions, options: ScoringOptions = DEFAULT_OPTIONS, *, level: float = 0.95,
    weights: np.ndarray | None = None,
) -> PairComparison:
    """All tests for one pair (no multiple-testing adjustment: see ``compare``).

    ``weights``: the resamples (``bootstrap.resample_weights(a.n, ...)``) when several pairs
    share them. Both inputs are scored by the same metric formulas (``metrics.metric_values``)
    on the same resamples.
    """
    sa, sb, positions, dropped = _paired_arrays(a, b, options)
    n_boot, seed = options.n_boot, options.seed
    n = len(sa.y)
    both_cont = a.is_continuous and b.is_continuous
    metrics = [m for m in COMPARED_METRICS if both_cont or not METRIC[m].continuous]
    W = None
    if n_boot > 0 and n > 0:
        W = weights if weights is not None else resample_weights(a.n, n_boot, seed)
    (pa, ba), (pb, bb) = metric_values([sa, sb], metrics, W, positions)
    mc = mcnemar_exact(sa.correct, sb.correct)
    wt = None
    if both_cont and n:
        r23 = _pearson_point(sa.value, sb.value)
        wt = williams_t(pa["pcc"], pb["pcc"], r23, n)
    out: dict[str, MetricDiff] = {}
    for m in metrics:
        with np.errstate(invalid="ignore"):
            diff = 0.0 if pa[m] == pb[m] else pa[m] - pb[m]
        if m in ba:
            with np.errstate(invalid="ignore"):
                d = ba[m] - bb[m]
            d = np.where((ba[m] == bb[m]), 0.0, d)  # inf - inf of identical inputs is no difference
            ci, pboot = percentile_ci(d, level), bootstrap_p(d)
        else:
            ci, pboot = [float("nan")] * 2, float("nan")
        test = METRIC[m].test
        p = mc["p"] if test == "mcnemar" else (wt or {}).get("p") if test == "williams" else pboot
        out[m] = MetricDiff(m, pa[m], pb[m], float(diff), ci, pboot, test,
                            None if p is None or (isinstance(p, float) and math.isnan(p)) else float(p))
    return PairComparison(-1, -1, n, dropped, mc, wt, out)


def _pearson_point(x: np.ndarray | None, z: np.ndarray | None) -> float:
    from scipy.stats import pearsonr

    if x is None or z is None or len(x) < 2 or np.std(x) == 0 or np.std(z) == 0:
        return float("nan")
    if np.array_equal(x, z):
        return 1.0
    return float(pearsonr(x, z)[0])


def adjust(pairs: Sequence[PairComparison], alpha: float) -> None:
    """Benjamini-Hochberg over every primary p-value of every pair (in place)."""
    from statsmodels.stats.multitest import multipletests

    tested = [m for pc in pairs for m in pc.metrics.values() if m.p is not None and math.isfinite(m.p)]
    if not tested:
        return
    reject, p_adj, _, _ = multipletests([m.p for m in tested], alpha=alpha, method="fdr_bh")
    for m, r, pa in zip(tested, reject, p_adj):
        m.p_adjusted = float(pa)
        m.significant = bool(r)


def compare(
    preds: Sequence[Predictions], options: ScoringOptions = DEFAULT_OPTIONS, *, level: float = 0.95,
    alpha: float = 0.05, pairs: Sequence[tuple[int, int]] | None = None,
) -> Comparison:
    """Compare every pair of inputs (or the given index pairs), then adjust all primary p-values
    together with Benjamini-Hochberg. Raises ``CompareError`` for incomparable inputs (and
    ``metrics.LabelSourceError`` for votes-only labels on cases without votes)."""
    check_comparable(preds)
    paper_compat, n_boot, seed, label_source = options.paper_compat, options.n_boot, options.seed, options.label_source
    if n_boot < 0:
        raise CompareError(f"the number of bootstrap resamples must be 0 or more, got {n_boot}")
    if not 0 < level < 1:
        raise CompareError(f"the CI level must be in (0, 1), got {level}")
    weights = resample_weights(preds[0].n, n_boot, seed) if n_boot > 0 and preds[0].n else None
    todo = list(pairs) if pairs is not None else list(itertools.combinations(range(len(preds)), 2))
    results = []
    for i, j in todo:
        pc = compare_pair(preds[i], preds[j], options, level=level, weights=weights)
        pc.a, pc.b = i, j
        results.append(pc)
    adjust(results, alpha)
    settings = {"paper_compat": paper_compat, "bootstrap": n_boot, "seed": seed, "level": level, "alpha": alpha,
                "difference": "A - B", "adjustment": "Benjamini-Hochberg over all primary p-values",
                "cases": "all cases (paper-compatible)" if paper_compat else "cases both inputs answered",
                "label_source": label_source}
    return Comparison([_describe(p, i) for i, p in enumerate(preds)], results, settings)
