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
    metric's *primary* test; Benjamini-Hochberg (``fdr.bh_adjust``: scipy
    ``false_discovery_control``) runs over the primary p-values of all pairs and metrics together,
    so one family-wise decision is made per table and no hypothesis is counted twice. PCC, BCE and Brier are compared only when
    both inputs are continuous (score or prob modes); a binary verdict has no P(safe) to score.

Clusters (``ScoringOptions.cluster``, ``bootstrap``)
    Clustered by query (the default) or category, the resamples draw whole clusters (the cases
    and query pairs of a drawn cluster together, ``resamples``), accuracy's primary test is
    McNemar's test for clustered pairs (``mcnemar_clustered``, Durkalski et al. 2003) and Pearson
    r's the paired cluster bootstrap (Williams' t assumes independent cases). By case (and with
    ``paper_compat``) everything is as described above.

Minimum detectable difference
    Each ``MetricDiff.mdd``: the smallest difference the paired design had 80% power to detect at
    ``options.alpha`` (``mdd``), from the centred SE of the per-case (per-cluster) accuracy
    differences for accuracy (``paired_tests.centred_se``) and from
    the SD of the paired bootstrap differences otherwise. A bootstrap p at its floor
    (``bootstrap.p_floor``) carries ``p_floor`` so that it is printed as a bound.

Which cases
    Default: of the cases both inputs hold, those *both* answered (a missing answer is not a wrong
    answer); how many were dropped is reported. ``ScoringOptions(paper_compat=True)``: every
    shared case, with missing answers handled as
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

Case sets
    A pair is compared over the cases both inputs hold (``PairComparison.shared``; ``only_a``
    and ``only_b`` count the rest), so two subsets of one dataset pair over what they share; one
    set of resamples is drawn over every case any input holds (the first input's order, then new
    cases as they appear: with one case set, exactly the first input's cases) and each pair is
    scored on the drawn cases it shares. ``Comparison.case_sets`` groups the inputs by the cases
    they hold, so inputs over different case sets are never read as ranked together.

Significance marks
    No difference is marked significant from fewer than ``metrics.MIN_PAIRED`` paired cases (of
    the metric's own: the human-safe ones for safe recall, ...) nor, for McNemar's test, from
    fewer than ``metrics.MIN_DISCORDANT`` discordant cases (``MetricDiff.withheld`` says why);
    its p-values are still shown.

Refusals
    Inputs must come from the same dataset (the content fingerprint of the cases they share) and
    share at least one case; otherwise ``CompareError`` says which inputs differ and how.

Where the parts live
    This module decides what is compared and scores the pairs; the tests themselves (McNemar,
    Williams' t, the MDD, the all-pairs accuracy matrix) are plain functions of arrays in
    ``paired_tests``, and which inputs may be compared over which cases (``check_comparable``,
    ``case_set_groups``, ``CompareError``) is ``case_sets``: other modules ask those questions
    without running a comparison.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field, fields
from typing import Any, Sequence, Mapping

import numpy as np

from ..session import in_session
from ..jsonutil import json_safe
from .schema import SCHEMA_VERSION, check_schema
from ..predictions import Predictions
from .bootstrap import (
    bootstrap_p, case_clusters, cluster_labels, cluster_resample_weights, p_floor, percentile_ci, resample_weights,
)
from .case_sets import CompareError, case_set_groups, check_comparable, input_label, shared_cases, union_positions
from .paired_tests import MDD_POWER, PairedDiff, mcnemar_clustered, mcnemar_exact, mdd, williams_t
from .metrics import METRIC, MIN_DISCORDANT, MIN_PAIRED, ScoringArrays, figure_cases, metric_values
from .options import DEFAULT_OPTIONS, ScoringOptions
from .result import score_input


# --------------------------------------------------------------------------------------------
# Results


@dataclass
class MetricDiff(PairedDiff):
    """One metric of one pair of inputs over their shared cases (``PairedDiff``)."""

    KEY_FIELDS = ("metric",)

    metric: str = field(kw_only=True)
    #: how ``ci`` was made where it is not the paired percentile bootstrap (a proportion's
    #: Newcombe interval; the analytic fallback where the bootstrap gave a point), or why there is
    #: none; None: the paired bootstrap
    ci_note: str | None = None
    #: the paired percentile bootstrap interval, also where ``ci`` is another (its bootstrap p is
    #: read from the same resamples)
    ci_bootstrap: list[float] | None = None


@dataclass
class PairComparison:
    """One pair: ``shared`` cases both inputs hold (``only_a``/``only_b``: held by one alone),
    of which ``n_paired`` are scored and ``dropped`` are not (not answered by both)."""

    a: int
    b: int
    n_paired: int
    dropped: int
    mcnemar: dict[str, Any]
    williams: dict[str, Any] | None
    metrics: dict[str, MetricDiff]
    shared: int = 0
    only_a: int = 0
    only_b: int = 0
    #: the query pairs both inputs answered both cases of (the per-pair figures' paired rows)
    context_pairs: int = 0
    #: people's references on those pairs (``context.people_references``; default scoring only)
    people: Mapping[str, Any] | None = None


@dataclass
class Comparison:
    inputs: list[dict[str, Any]]
    pairs: list[PairComparison]
    settings: dict[str, Any] = field(default_factory=dict)
    #: the inputs grouped by the cases they hold (``case_set_groups``), as input labels
    case_sets: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        num = json_safe
        # paper-compatible output is what it always was (no clustering, MDD or p floor)
        old = bool(self.settings.get("paper_compat"))
        pairs = []
        for pc in self.pairs:
            pairs.append(num({
                "a": self.inputs[pc.a]["label"], "b": self.inputs[pc.b]["label"],
                "a_source": self.inputs[pc.a]["source"], "b_source": self.inputs[pc.b]["source"],
                "shared": pc.shared, "only_a": pc.only_a, "only_b": pc.only_b,
                "n_paired": pc.n_paired, "dropped": pc.dropped,
                "mcnemar": _without(pc.mcnemar, PAPER_COMPAT_NEW_MCNEMAR_KEYS) if old else pc.mcnemar,
                "williams": pc.williams,
                "metrics": {k: _without(m.to_dict(), PAPER_COMPAT_NEW_KEYS) if old else m.to_dict()
                            for k, m in pc.metrics.items()},
                **({"people": pc.people} if pc.people is not None else {}),
            }))
        return {"schema_version": SCHEMA_VERSION, "inputs": num(self.inputs), "settings": num(self.settings),
                "case_sets": num(self.case_sets), "pairs": pairs}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Comparison":
        """The comparison of its ``to_dict`` (``compare --json``): each pair's inputs by position
        again, each metric's difference typed (a null number read back as NaN)."""
        check_schema(d, "comparison")
        inputs = [dict(x) for x in d["inputs"]]
        where = {x["label"]: i for i, x in enumerate(inputs)}
        known = {f.name for f in fields(MetricDiff)}

        def diff(m: Mapping[str, Any]) -> MetricDiff:
            kw = {k: v for k, v in m.items() if k in known}
            for k in ("a", "b", "diff", "p_bootstrap", "mdd"):
                if k in kw and kw[k] is None:
                    kw[k] = float("nan")
            return MetricDiff(**kw)

        pairs = [PairComparison(
            where[p["a"]], where[p["b"]], int(p["n_paired"]), int(p["dropped"]), dict(p["mcnemar"]), p.get("williams"),
            {k: diff(m) for k, m in p["metrics"].items()}, shared=int(p.get("shared", 0)),
            only_a=int(p.get("only_a", 0)), only_b=int(p.get("only_b", 0)), people=p.get("people"))
            for p in d["pairs"]]
        return cls(inputs, pairs, dict(d.get("settings") or {}), [dict(g) for g in d.get("case_sets") or []])


#: the keys this version added to a comparison, left out of paper-compatible output (which
#: stays what the published figures were checked against)
PAPER_COMPAT_NEW_KEYS = ("mdd", "p_floor", "ci_note", "ci_bootstrap")
PAPER_COMPAT_NEW_MCNEMAR_KEYS = ("test", "se0", "se", "clusters")


def _without(d: dict[str, Any], keys: Sequence[str]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if k not in keys}


def _paired_arrays(
    a: Predictions, b: Predictions, options: ScoringOptions = DEFAULT_OPTIONS,
    union: dict[int, int] | None = None,
) -> tuple[ScoringArrays, ScoringArrays, np.ndarray, int]:
    """Scoring arrays of both inputs over the paired cases (see the module docstring), aligned by
    case index: the cases both hold (all of them with ``paper_compat``, else those both
    answered); the positions of those cases among the resampled ones (``union``: case index ->
    position; default ``a``'s cases); and how many shared cases were dropped because only one
    (or neither) input answered. Each input's arrays are its one scoring result's
    (``result.score_input``), taken at the paired cases."""
    ra, rb = score_input(a, options), score_input(b, options)
    a, b = ra.pred, rb.pred  # as scored: at the options' minimum verdict mass
    order_b = {int(c): k for k, c in enumerate(b.case_indices)}
    perm = np.array([order_b.get(int(c), -1) for c in a.case_indices], dtype=int)
    held = perm >= 0
    keep = held.copy()
    if not options.paper_compat:
        keep &= a.answered & b.answered[np.where(held, perm, 0)]
    sa, ma = ra.arrays, ra.mask
    sb, mb = rb.arrays, rb.mask
    # map each input's (masked) arrays back to the paired positions
    pos_a = np.cumsum(ma) - 1
    pos_b = np.cumsum(mb) - 1
    kept = np.flatnonzero(keep)
    ia = pos_a[kept]
    ib = pos_b[perm[kept]]
    if union is None:
        positions = kept
    else:
        positions = np.array([union[int(c)] for c in a.case_indices[kept]], dtype=int)
    sa, sb = sa.take(ia), sb.take(ib)
    if sa.pairs is not None and sb.pairs is not None and sa.pair_ids is not None:
        # the same cases in the same order: keep the query pairs both inputs answered both cases of
        theirs = {tuple(x) for x in sb.pairs.tolist()}
        common = np.array([tuple(x) in theirs for x in sa.pairs.tolist()], dtype=bool)
        sa.pairs, sa.pair_ids = sa.pairs[common], sa.pair_ids[common]
        sb.pairs, sb.pair_ids = sa.pairs.copy(), sa.pair_ids.copy()
    return sa, sb, positions, int(held.sum() - keep.sum())


def _describe(p: Predictions, i: int, name: str) -> dict[str, Any]:
    return {"label": input_label(i), "name": name, "source": p.source, "model": p.model, "mode": p.mode.name,
            "removed": list(p.removed), "n": p.n, "answered": int(p.answered.sum()),
            **({"state": p.state.to_dict()} if p.state is not None else {})}


def compare_pair(
    a: Predictions, b: Predictions, options: ScoringOptions = DEFAULT_OPTIONS, *,
    weights: np.ndarray | None = None, union: dict[int, int] | None = None,
    pair_weights: np.ndarray | None = None, clusters: np.ndarray | None = None,
) -> PairComparison:
    """All tests for one pair (no multiple-testing adjustment: see ``compare``).

    ``weights``: the resamples (``resamples``) when several pairs share them, drawn over the
    cases of ``union`` (case index -> column of ``weights``; default ``a``'s cases). Both inputs
    are scored by the same metric formulas (``metrics.metric_values``) on the same resamples,
    over the cases both hold. ``pair_weights``: likewise for the per-pair context figures
    (``stats.context``), resampling the query pairs of ``a``'s cases; they are scored on the
    pairs both inputs answered both cases of. ``clusters``: the cluster label of each resampled
    case (default: of ``a``'s cases under ``options.resample_by``), for the clustered McNemar
    test. The minimum detectable differences (``mdd``) are at ``options.alpha``.
    """
    if union is None and weights is not None and weights.shape[1] != a.n:
        raise CompareError("the resamples were drawn over other cases than the first input's; pass union")
    sa, sb, positions, dropped = _paired_arrays(a, b, options, union)
    n_boot, seed, level = options.n_boot, options.bootstrap_seed, options.level
    by = options.resample_by
    clustered = by != "case"
    if clusters is None:
        clusters = case_clusters(_resampled_cases([a, b], union), by)
    n = len(sa.y)
    both_cont = a.is_continuous and b.is_continuous
    behaviour = a.mode.reads_behaviour or b.mode.reads_behaviour
    metrics = [m for m in METRIC if METRIC[m].test is not None and (both_cont or not METRIC[m].continuous)
               and not (behaviour and METRIC[m].calibration) and (METRIC[m].paper or not options.paper_compat)]
    W = PW = None
    if n_boot > 0 and n > 0:
        if weights is None:
            W0, PW0 = resamples(_resampled_cases([a, b], union), a, union, options, clusters)
            weights = W0
            pair_weights = PW0 if pair_weights is None else pair_weights
        elif pair_weights is None:
            # the case resamples were drawn over every input's cases (``union``, which may hold
            # cases neither a nor b has); the pairs are drawn over a's own (pair ids number a's pairs)
            _, pair_weights = resamples(list(a.cases), a, None, options)
        W = weights
        if _all_pairs(a) and sa.pairs is not None and len(sa.pairs):
            PW = pair_weights
    (pa, ba), (pb, bb) = metric_values([sa, sb], metrics, W, positions, PW, sa.pair_ids)
    mc = (mcnemar_clustered(sa.correct, sb.correct, clusters[positions]) if clustered
          else mcnemar_exact(sa.correct, sb.correct))
    wt = None
    if both_cont and n and not clustered:  # Williams' t assumes independent cases
        r23 = _pearson_point(sa.value, sb.value)
        wt = williams_t(pa["pcc"], pb["pcc"], r23, n)
    floor = p_floor(n_boot)
    out: dict[str, MetricDiff] = {}
    for m in metrics:
        with np.errstate(invalid="ignore"):
            diff = 0.0 if pa[m] == pb[m] else pa[m] - pb[m]
        se = float("nan")
        if m in ba:
            with np.errstate(invalid="ignore"):
                d = ba[m] - bb[m]
            d = np.where((ba[m] == bb[m]), 0.0, d)  # inf - inf of identical inputs is no difference
            ci, pboot = percentile_ci(d, level), bootstrap_p(d)
            fin = d[np.isfinite(d)]
            se = float(np.std(fin, ddof=1)) if fin.size > 1 else float("nan")
        else:
            ci, pboot = [float("nan")] * 2, float("nan")
        test = _test_of(m, clustered)
        if test.startswith("mcnemar"):
            p, se = mc["p"], mc["se"]
        elif test == "williams":
            p = (wt or {}).get("p")
        else:
            p = pboot
        note, boot_ci = None, list(ci)
        if not options.paper_compat and n_boot > 0:
            ci, note, small = _paired_interval(m, sa, sb, clusters[positions], ci, float(diff), level)
            if small is not None and test == "bootstrap":
                # one method for the interval and its p (they cannot disagree)
                test, p, pboot = small.test, small.p, small.p
                se = small.se if math.isfinite(small.se) else se
        out[m] = MetricDiff(pa[m], pb[m], float(diff), ci, pboot, test,
                            None if p is None or (isinstance(p, float) and math.isnan(p)) else float(p),
                            metric=m, withheld=_withheld(m, sa, mc), mdd=mdd(se, options.alpha),
                            p_floor=floor if test == "bootstrap" and n_boot > 0 and not options.paper_compat else None,
                            ci_note=note, ci_bootstrap=boot_ci)
    shared = len(shared_cases(a, b))
    people = None
    if not options.paper_compat and sa.pairs is not None and len(sa.pairs):
        from .context import pair_clusters_of, people_references

        # the same people on the same pairs for both inputs: their references there, drawn as the
        # pair's figures are (an input over the same pairs reads the same computation)
        pc, k = pair_clusters_of(sa)
        if pc is not None and len(np.unique(pc)) == len(pc):
            pc = k = None  # every pair its own cluster (a pair is one query): pairs drawn one by one
        people = people_references(sa.g, sa.y, sa.pairs, n_boot=n_boot, seed=seed, level=level,
                                   label_source=options.label_source, pair_clusters=pc, n_clusters=k)
    return PairComparison(-1, -1, n, dropped, mc, wt, out, shared, a.n - shared, b.n - shared,
                          0 if sa.pairs is None else len(sa.pairs), people)


def paired_table(m: str, sa: ScoringArrays, sb: ScoringArrays) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The rows of a paired proportion ``m`` (``MetricDef.proportion``) that both inputs count
    over: each input's 0/1 count per row (case, or query pair for a per-pair figure) and the
    row's position among the rows; None when ``m`` is not a share of the same rows for both
    inputs (the rows' denominators differ, or a row counts other than 0 or 1)."""
    from .metrics import metric_columns, pair_columns

    d = METRIC[m]
    if d.proportion is None:
        return None
    if d.unit == "pair":
        if sa.pairs is None or sb.pairs is None or not len(sa.pairs):
            return None
        ca, cb = pair_columns(sa, [m]), pair_columns(sb, [m])
    else:
        ca, cb = metric_columns(sa, [m]), metric_columns(sb, [m])
    if not all(c in ca and c in cb for c in (d.columns.names if d.columns else ())):
        return None
    ka, na = (np.asarray(x, dtype=float) for x in d.proportion(ca))
    kb, nb = (np.asarray(x, dtype=float) for x in d.proportion(cb))
    if ka.shape != kb.shape or not np.array_equal(na, nb) or not np.isin(na, (0.0, 1.0)).all():
        return None
    rows = np.flatnonzero(na == 1.0)
    ka, kb = ka[rows], kb[rows]
    if not (np.isin(ka, (0.0, 1.0)).all() and np.isin(kb, (0.0, 1.0)).all()):
        return None
    return ka, kb, rows


def _paired_interval(m: str, sa: ScoringArrays, sb: ScoringArrays, case_clusters_: np.ndarray,
                     ci: list[float], diff: float, level: float) -> tuple[list[float], str | None, Any]:
    """The interval of a paired difference A - B in default scoring, how it was made when it is
    not the paired percentile bootstrap, and, where the interval is a small-sample one, the
    ``small_sample.SmallSampleFigure`` whose p goes with it (else None).

    A difference of two shares of the same rows (accuracy, the recalls, follow, blind, moved,
    ...) gets Newcombe's paired interval (``bootstrap.newcombe_paired_ci``), on the effective
    number of rows under clustering (the counts divided by the design effect of the per-row
    difference, floored at 1, as a single share's Wilson interval is): never a point, even
    between two identical inputs; from fewer than ``small_sample.FEW_CLUSTERS`` clusters on t
    with K - 1 df, with the p that inverts it (``small_sample.p_inverting``). A bounded mean
    (``MetricDef.bounds``: the shift, ...) from fewer clusters, or whose bootstrap gave a point,
    gets ``small_sample.cluster_mean`` of the per-row differences (t on K - 1 df, clipped to the
    difference's range, or the exact interval where they have no spread), interval and p alike.
    Any other figure keeps the bootstrap interval unless it is a point; then none, with the
    reason."""
    from .bootstrap import degenerate, mean_design_effect, newcombe_paired_ci
    from .metrics import row_clusters, row_values
    from .small_sample import FEW_CLUSTERS, SmallSampleFigure, cluster_mean, p_inverting

    unit = METRIC[m].unit
    tab = paired_table(m, sa, sb)
    if tab is not None:
        ka, kb, rows = tab
        labels = row_clusters(sa, m, case_clusters_)[rows]
        deff = 1.0
        if sa.cluster_by != "case" and len(rows) > 1:
            est = mean_design_effect(ka - kb, cluster_labels(labels.tolist()))
            deff = max(1.0, est) if np.isfinite(est) else 1.0
        k = len(np.unique(labels))
        df = k - 1 if 2 <= k < FEW_CLUSTERS else None
        both, a_only = float(np.sum(ka * kb)), float(np.sum(ka * (1 - kb)))
        b_only, neither = float(np.sum((1 - ka) * kb)), float(np.sum((1 - ka) * (1 - kb)))
        cells = (both / deff, a_only / deff, b_only / deff, neither / deff)
        out = newcombe_paired_ci(*cells, level, df)
        note = ("Newcombe's paired interval (square-and-add of Wilson intervals, phi-corrected)"
                + (f" on the effective number of {unit}s (design effect {deff:.2f})" if deff > 1 else ""))
        if df is None:
            return out, note, None
        p = p_inverting(lambda lv: newcombe_paired_ci(*cells, lv, df))
        return out, note + f", on t with {df} df ({k} clusters), p from the same interval", SmallSampleFigure(
            (out[0], out[1]), p, f"Newcombe on t, {df} df", float("nan"), k, note)
    bounds = METRIC[m].bounds
    va, vb = (row_values(sa, m), row_values(sb, m)) if bounds is not None else (None, None)
    if va is not None and vb is not None and va.shape == vb.shape:
        rows = np.flatnonzero(np.isfinite(va) & np.isfinite(vb))
        d, labels = va[rows] - vb[rows], row_clusters(sa, m, case_clusters_)[rows]
        # the figure a plain mean of its rows, from few clusters (or a bootstrap that gave a point)
        if rows.size and math.isclose(float(d.mean()), diff, abs_tol=1e-9) and (
                len(np.unique(labels)) < FEW_CLUSTERS or degenerate(ci)):
            width = bounds[1] - bounds[0]  # type: ignore[index]
            fig = cluster_mean(d, labels, (-width, width), level)
            return list(fig.ci), fig.note + f" (paired per-{unit} differences)", fig
    if not degenerate(ci):
        return ci, None, None
    return [float("nan"), float("nan")], f"no interval: every resample gave {diff:.4g}, and it is not a bounded mean", None


def _test_of(metric: str, clustered: bool) -> str:
    """The primary test of a metric (``MetricDef.test``) under the clustering: clustered,
    accuracy gets the clustered McNemar test (``mcnemar_clustered``) and Pearson r the paired
    cluster bootstrap (Williams' t assumes independent cases)."""
    test = METRIC[metric].test or "bootstrap"
    if clustered and test == "mcnemar":
        return "mcnemar_clustered"
    if clustered and test == "williams":
        return "bootstrap"
    return test


def _resampled_cases(preds: Sequence[Predictions], union: dict[int, int] | None) -> list[Any]:
    """The cases the resamples draw from: the first input's, or those of ``union`` (in its order)."""
    if union is None:
        return list(preds[0].cases)
    by_index: dict[int, Any] = {}
    for p in preds:
        for c, case in zip(p.case_indices, p.cases):
            by_index.setdefault(int(c), case)
    order = sorted(union, key=union.__getitem__)
    return [by_index[c] for c in order]


def resamples(cases: Sequence[Any], first: Predictions, union: dict[int, int] | None, options: ScoringOptions,
              clusters: np.ndarray | None = None) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The resamples of ``cases`` (the columns of the case weights: ``union``'s order, default
    ``first``'s cases) and of the query pairs of ``first``'s cases (the columns of the pair
    weights), under ``options.resample_by``: cases and pairs drawn apart when clustering by
    case (as always); else the clusters drawn once (``bootstrap.cluster_resample_weights``) and
    each case and each pair weighing its cluster's draw. (None, None) without resamples."""
    n_boot, seed = options.n_boot, options.bootstrap_seed
    if n_boot <= 0 or not len(cases):
        return None, None
    from .pairs import pair_by_query

    pairs = np.array(pair_by_query(first.cases).pairs, dtype=int).reshape(-1, 2)
    if options.resample_by == "case":
        W = resample_weights(len(cases), n_boot, seed)
        return W, (resample_weights(len(pairs), n_boot, seed) if len(pairs) else None)
    labels = case_clusters(cases, options.resample_by) if clusters is None else cluster_labels(list(clusters))
    k = int(labels.max()) + 1
    W = cluster_resample_weights(labels, n_boot, seed, k)
    if not len(pairs):
        return W, None
    col = (np.arange(first.n) if union is None
           else np.array([union[int(c)] for c in first.case_indices], dtype=int))
    return W, cluster_resample_weights(labels[col[pairs[:, 0]]], n_boot, seed, k)


def _withheld(metric: str, sa: ScoringArrays, mc: dict[str, Any]) -> str | None:
    """Why a difference may not be marked significant, whatever its p: from fewer than
    ``MIN_PAIRED`` paired cases (of the metric's own: human-safe ones for safe recall, ...), or,
    for McNemar's test, fewer than ``MIN_DISCORDANT`` discordant cases."""
    n = figure_cases(sa, [metric]).get(metric, len(sa.y))
    if n < MIN_PAIRED:
        return f"{n} paired cases < {MIN_PAIRED}"
    if METRIC[metric].test == "mcnemar":
        disc = mc["a_only"] + mc["b_only"]
        if disc < MIN_DISCORDANT:
            return f"{disc} discordant cases < {MIN_DISCORDANT}"
    return None


def _all_pairs(p: Predictions) -> int:
    """How many query pairs ``p``'s cases hold (the rows a pair resample draws from)."""
    from .pairs import pair_by_query

    return len(pair_by_query(p.cases).pairs)


def _pearson_point(x: np.ndarray | None, z: np.ndarray | None) -> float:
    """Pearson r of two judges' predictions over the same cases (Williams' r23), with exactly
    rounded sums (``math.fsum``): numpy's pairwise sums depend on how an array happens to be
    aligned in memory, which moved r in its last bits from one run to another."""
    if x is None or z is None or len(x) < 2 or np.std(x) == 0 or np.std(z) == 0:
        return float("nan")
    if np.array_equal(x, z):
        return 1.0
    n = len(x)
    dx = np.asarray(x, dtype=float) - math.fsum(x) / n
    dz = np.asarray(z, dtype=float) - math.fsum(z) / n
    r = math.fsum(dx * dz) / math.sqrt(math.fsum(dx * dx) * math.fsum(dz * dz))
    return float(min(1.0, max(-1.0, r)))


def adjust(pairs: Sequence[PairComparison], alpha: float) -> None:
    """Benjamini-Hochberg over every primary p-value of every pair (in place), one family of
    metrics at a time (``MetricDef.family``: the paper's metrics, then the context figures, then
    the human-reference figures), so that adding metrics never moves the adjusted p-values of
    the metrics that were there before. A difference whose mark is withheld
    (``MetricDiff.withheld``: too few cases) stays in its family (its p-value is shown and
    adjusted) but is never marked significant."""
    from .fdr import bh_adjust

    families: dict[str, list[MetricDiff]] = {}
    for pc in pairs:
        for m in pc.metrics.values():
            if m.p is not None and math.isfinite(m.p):
                families.setdefault(METRIC[m.metric].family, []).append(m)
    for tested in families.values():
        p_adj, reject = bh_adjust(np.array([m.p for m in tested], dtype=float), alpha)
        for m, r, pa in zip(tested, reject, p_adj):
            m.p_adjusted = float(pa)
            m.significant = bool(r) and m.withheld is None


@in_session
def compare(
    preds: Sequence[Predictions], options: ScoringOptions = DEFAULT_OPTIONS, *,
    pairs: Sequence[tuple[int, int]] | None = None,
) -> Comparison:
    """Compare every pair of inputs (or the given index pairs), then adjust all primary p-values
    together with Benjamini-Hochberg at ``options.alpha``. Raises ``CompareError`` for
    incomparable inputs (and ``metrics.LabelSourceError`` for votes-only labels on cases without
    votes)."""
    todo = list(pairs) if pairs is not None else list(itertools.combinations(range(len(preds)), 2))
    check_comparable(preds, pairs=todo)
    paper_compat, n_boot, seed, label_source = (options.paper_compat, options.n_boot, options.bootstrap_seed,
                                                options.label_source)
    level, alpha = options.level, options.alpha
    union = union_positions(preds)
    cases = _resampled_cases(preds, union)
    clusters = case_clusters(cases, options.resample_by)
    weights, pair_weights = resamples(cases, preds[0], union, options, clusters)
    # the pair resamples are shared only when every input holds the same cases (pair ids are
    # numbered within an input's cases); otherwise each comparison draws its own
    if len(case_set_groups(preds)) != 1:
        pair_weights = None
    results = []
    for i, j in todo:
        pc = compare_pair(preds[i], preds[j], options, weights=weights, union=union,
                          pair_weights=pair_weights, clusters=clusters)
        pc.a, pc.b = i, j
        results.append(pc)
    adjust(results, alpha)
    settings = {"paper_compat": paper_compat, "bootstrap": n_boot, "seed": seed, "level": level, "alpha": alpha,
                "difference": "A - B", "adjustment": "Benjamini-Hochberg over all primary p-values",
                "adjustment_families": "the paper's metrics; the context figures; the human-reference figures "
                                       "(each adjusted on its own, so added figures never move earlier ones)",
                "context_pairs": "query pairs whose two cases both inputs answered, resampled as pairs",
                "cases": "all cases (paper-compatible)" if paper_compat else "cases both inputs answered",
                "label_source": label_source, "min_paired": MIN_PAIRED, "min_discordant": MIN_DISCORDANT}
    if not paper_compat:  # paper-compatible output stays what it was: cases resampled, no MDD
        settings.update({
            "cluster": options.resample_by, "clusters": int(clusters.max()) + 1 if len(clusters) else 0,
            "p_floor": p_floor(n_boot),
            "mdd": f"the smallest difference each test had {MDD_POWER:.0%} power to detect at alpha {alpha} "
                   "(two-sided, before the adjustment), from the paired design"})
    sets = [{"inputs": [input_label(i) for i in g], "cases": preds[g[0]].n} for g in case_set_groups(preds)]
    from ..naming import display_names

    return Comparison([_describe(p, i, n) for i, (p, n) in enumerate(zip(preds, display_names(preds)))], results,
                      settings, sets)
