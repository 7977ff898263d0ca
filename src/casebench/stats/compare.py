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

    Every metric also gets a paired-bootstrap CI (and bootstrap p). The test named above is the
    metric's *primary* test; Benjamini-Hochberg (statsmodels ``multipletests``, ``fdr_bh``) runs
    over the primary p-values of all pairs and metrics together, so one family-wise decision is
    made per table and no hypothesis is counted twice. PCC, BCE and Brier are compared only when
    both inputs are continuous (score or prob modes); a binary verdict has no P(safe) to score.

Which cases
    Default: the cases *both* inputs answered (a missing answer is not a wrong answer); how many
    were dropped is reported. ``paper_compat=True``: every case, with missing answers handled as
    the published script does (see ``metrics``), so the figures line up with
    ``casebench score --paper-compat``.

Paired bootstrap
    One set of resamples of the inputs' cases drives both inputs of a pair, and every pair (the
    inputs hold the same cases). A resample is held as case weights: ``W`` (B x n) says how often
    each case was drawn, so a metric of a resample is a function of weighted sums and a whole
    bootstrap is one matrix product per pair. In default mode a pair is scored on the drawn cases
    both inputs answered (the resampled set varies in size with the missing answers, as the
    observed one does); with every case answered this is the plain case bootstrap. CIs are percentile intervals of the resampled differences. The bootstrap p-value is the
    two-sided ``2 * min(P*(d <= 0), P*(d >= 0))`` with the usual +1 correction
    (``(k + 1) / (B + 1)``, so it is never exactly 0 from finitely many resamples), clipped to 1.
    An input compared with itself gives d = 0 in every resample: CI [0, 0] and p = 1.

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
from .metrics import BCE_EPS, DEFAULT_BOOTSTRAP, ScoringArrays, scoring_arrays
from ..predictions import Predictions
from ..present.tables import fmt_num, fmt_p, json_safe

LABEL_COMPARE = ("accuracy", "safe_recall", "unsafe_recall")
CONTINUOUS_COMPARE = ("pcc", "bce", "brier")
COMPARE_METRICS = LABEL_COMPARE + CONTINUOUS_COMPARE
#: the primary test of each metric (see the module docstring)
PRIMARY_TEST = {
    "accuracy": "mcnemar", "pcc": "williams",
    "safe_recall": "bootstrap", "unsafe_recall": "bootstrap", "bce": "bootstrap", "brier": "bootstrap",
}
#: lower is better for these (the sign of a difference reads the other way)
LOWER_IS_BETTER = frozenset({"bce", "brier"})


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
    holds between a dataset file, a run directory and a published ``exp/`` file alike; the case
    check compares the sets of case indices.
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
        fa = cases_fingerprint([ref.cases[ref_pos[c]] for c in common])
        fb = cases_fingerprint([p.cases[mine[c]] for c in common])
        if not common or fa != fb:
            problems.append(
                f"{names[0]} and {name} are not from the same dataset (the content of their cases differs: "
                f"fingerprints {ref.dataset_fingerprint[:12]} and {p.dataset_fingerprint[:12]})"
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


def bootstrap_weights(n: int, n_boot: int, seed: int) -> np.ndarray:
    """(n_boot, n) case weights: how often each of n cases was drawn in each resample.

    Drawn as an index matrix (``rng.integers``), as ``metrics.bootstrap_ci`` does, then counted
    per row, so weighted sums equal sums over the resampled cases.
    """
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(n_boot, n))
    idx += np.arange(n_boot)[:, None] * n
    return np.bincount(idx.ravel(), minlength=n_boot * n).reshape(n_boot, n).astype(float)


def _case_log_loss(a: ScoringArrays) -> np.ndarray:
    """Per-case BCE terms with the same conventions as ``metrics._bce``."""
    p, g = a.p, a.g
    assert p is not None
    with np.errstate(divide="ignore", invalid="ignore"):
        if a.paper_compat:
            return -(g * np.log(p) + (1 - g) * np.log(1 - p + 1e-9))
        pc = np.clip(p, BCE_EPS, 1 - BCE_EPS)
        return -(g * np.log(pc) + (1 - g) * np.log1p(-pc))


def moment_columns(a: ScoringArrays, metrics: Sequence[str]) -> dict[str, np.ndarray]:
    """Per-case columns whose (weighted) sums give every compared metric (``metrics_from_sums``).

    Writing each metric as a function of sums is what makes the bootstrap one matrix product:
    the sums of every resample are ``W @ columns``.
    """
    y = a.y.astype(float)
    c = a.correct.astype(float)
    cols = {"w": np.ones(len(y)), "y": y, "c": c, "cy": c * y}
    if a.value is not None and a.p is not None:
        if "pcc" in metrics:
            # centred on the sample means first, so the moments of a resample stay accurate
            x = a.value - a.value.mean() if len(y) else a.value
            g = a.g - a.g.mean() if len(y) else a.g
            cols.update(x=x, g=g, xg=x * g, xx=x * x, gg=g * g)
        if "bce" in metrics:
            ll = _case_log_loss(a)
            # +inf terms (unclipped paper-compatible BCE) and NaN terms (0 * ln 0) are counted
            # apart: a resample that draws one has an infinite (or undefined) mean
            cols.update(ll=np.where(np.isfinite(ll), ll, 0.0), ll_inf=(ll == np.inf).astype(float),
                        ll_nan=np.isnan(ll).astype(float))
        if "brier" in metrics:
            cols["sq"] = (a.p - a.g) ** 2
    return cols


def metrics_from_sums(s: dict[str, np.ndarray], metrics: Sequence[str]) -> dict[str, np.ndarray]:
    """The metrics from the sums of ``moment_columns`` (same formulas as ``metrics``)."""
    out: dict[str, np.ndarray] = {}
    with np.errstate(invalid="ignore", divide="ignore"):
        sw, sy = s["w"], s["y"]
        sn = sw - sy
        if "accuracy" in metrics:
            out["accuracy"] = np.where(sw > 0, s["c"] / sw, np.nan)
        if "safe_recall" in metrics:
            out["safe_recall"] = np.where(sy > 0, s["cy"] / sy, np.nan)
        if "unsafe_recall" in metrics:
            out["unsafe_recall"] = np.where(sn > 0, (s["c"] - s["cy"]) / sn, np.nan)
        if "pcc" in metrics and "xg" in s:
            mx, mg = s["x"] / sw, s["g"] / sw
            cov = s["xg"] / sw - mx * mg
            vx = np.clip(s["xx"] / sw - mx * mx, 0, None)
            vg = np.clip(s["gg"] / sw - mg * mg, 0, None)
            den = np.sqrt(vx * vg)
            out["pcc"] = np.where(den > 0, cov / np.where(den > 0, den, 1), np.nan)
        if "bce" in metrics and "ll" in s:
            bce = s["ll"] / sw
            bce = np.where(s["ll_inf"] > 0, np.inf, bce)
            out["bce"] = np.where(s["ll_nan"] > 0, np.nan, bce)
        if "brier" in metrics and "sq" in s:
            out["brier"] = s["sq"] / sw
    return out


def paired_metric_matrices(
    sa: ScoringArrays, sb: ScoringArrays, W: np.ndarray | None, positions: np.ndarray, metrics: Sequence[str],
) -> tuple[dict[str, float], dict[str, float], dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Point values and resampled values of both inputs of a pair.

    ``sa``/``sb`` hold the paired cases, which sit at ``positions`` among the ``W.shape[1]`` cases
    that were resampled; the other cases get zero columns (they are drawn but not scored).
    """
    ca, cb = moment_columns(sa, metrics), moment_columns(sb, metrics)
    names = list(ca) + list(cb)
    V = np.column_stack([ca[k] for k in ca] + [cb[k] for k in cb]) if len(positions) else np.zeros((0, len(names)))
    point = V.sum(axis=0)
    ka = len(ca)
    pa = metrics_from_sums({k: point[i:i + 1] for i, k in enumerate(ca)}, metrics)
    pb = metrics_from_sums({k: point[ka + i:ka + i + 1] for i, k in enumerate(cb)}, metrics)
    ba: dict[str, np.ndarray] = {}
    bb: dict[str, np.ndarray] = {}
    if W is not None:
        full = np.zeros((W.shape[1], V.shape[1]))
        full[positions] = V
        S = W @ full
        ba = metrics_from_sums({k: S[:, i] for i, k in enumerate(ca)}, metrics)
        bb = metrics_from_sums({k: S[:, ka + i] for i, k in enumerate(cb)}, metrics)
    return ({k: float(v[0]) for k, v in pa.items()}, {k: float(v[0]) for k, v in pb.items()}, ba, bb)


def bootstrap_p(d: np.ndarray) -> float:
    """Two-sided bootstrap p of ``d`` (resampled differences): 2 min(P*(d<=0), P*(d>=0)) with
    the +1 correction, clipped to 1 (see the module docstring)."""
    d = d[~np.isnan(d)]
    if d.size == 0:
        return float("nan")
    b = d.size
    le = (np.sum(d <= 0) + 1) / (b + 1)
    ge = (np.sum(d >= 0) + 1) / (b + 1)
    return float(min(1.0, 2 * min(le, ge)))


def _percentile_ci(d: np.ndarray, level: float) -> list[float]:
    d = d[~np.isnan(d)]
    if d.size == 0:
        return [float("nan"), float("nan")]
    lo, hi = (1 - level) / 2 * 100, (1 + level) / 2 * 100
    with np.errstate(invalid="ignore"):
        return [float(np.percentile(d, lo)), float(np.percentile(d, hi))]


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
    a: Predictions, b: Predictions, paper_compat: bool,
) -> tuple[ScoringArrays, ScoringArrays, np.ndarray, int]:
    """Scoring arrays of both inputs over the paired cases (see the module docstring), aligned by
    case index; the positions of those cases among ``a``'s cases; and how many cases were
    dropped because only one (or neither) input answered."""
    order_b = {int(c): k for k, c in enumerate(b.case_indices)}
    perm = np.array([order_b[int(c)] for c in a.case_indices], dtype=int)
    if paper_compat:
        keep = np.ones(a.n, dtype=bool)
    else:
        keep = a.answered & b.answered[perm]
    sa, ma = scoring_arrays(a, paper_compat)
    sb, mb = scoring_arrays(b, paper_compat)
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
    a: Predictions, b: Predictions, *, paper_compat: bool = False, n_boot: int = DEFAULT_BOOTSTRAP,
    seed: int = 0, level: float = 0.95, weights: np.ndarray | None = None,
) -> PairComparison:
    """All tests for one pair (no multiple-testing adjustment: see ``compare``).

    ``weights``: the resamples (``bootstrap_weights(a.n, ...)``) when several pairs share them.
    """
    sa, sb, positions, dropped = _paired_arrays(a, b, paper_compat)
    n = len(sa.y)
    both_cont = a.is_continuous and b.is_continuous
    metrics = COMPARE_METRICS if both_cont else LABEL_COMPARE
    W = None
    if n_boot > 0 and n > 0:
        W = weights if weights is not None else bootstrap_weights(a.n, n_boot, seed)
    pa, pb, ba, bb = paired_metric_matrices(sa, sb, W, positions, metrics)
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
            ci, pboot = _percentile_ci(d, level), bootstrap_p(d)
        else:
            ci, pboot = [float("nan")] * 2, float("nan")
        test = PRIMARY_TEST[m]
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
    preds: Sequence[Predictions], *, paper_compat: bool = False, n_boot: int = DEFAULT_BOOTSTRAP,
    seed: int = 0, level: float = 0.95, alpha: float = 0.05,
    pairs: Sequence[tuple[int, int]] | None = None,
) -> Comparison:
    """Compare every pair of inputs (or the given index pairs), then adjust all primary p-values
    together with Benjamini-Hochberg. Raises ``CompareError`` for incomparable inputs."""
    check_comparable(preds)
    if n_boot < 0:
        raise CompareError(f"the number of bootstrap resamples must be 0 or more, got {n_boot}")
    if not 0 < level < 1:
        raise CompareError(f"the CI level must be in (0, 1), got {level}")
    weights = bootstrap_weights(preds[0].n, n_boot, seed) if n_boot > 0 and preds[0].n else None
    todo = list(pairs) if pairs is not None else list(itertools.combinations(range(len(preds)), 2))
    results = []
    for i, j in todo:
        pc = compare_pair(preds[i], preds[j], paper_compat=paper_compat, n_boot=n_boot, seed=seed, level=level,
                          weights=weights)
        pc.a, pc.b = i, j
        results.append(pc)
    adjust(results, alpha)
    settings = {"paper_compat": paper_compat, "bootstrap": n_boot, "seed": seed, "level": level, "alpha": alpha,
                "difference": "A - B", "adjustment": "Benjamini-Hochberg over all primary p-values",
                "cases": "all cases (paper-compatible)" if paper_compat else "cases both inputs answered"}
    return Comparison([_describe(p, i) for i, p in enumerate(preds)], results, settings)


# --------------------------------------------------------------------------------------------
# Text


def _f(x: float | None, digits: int = 4) -> str:
    return fmt_num(x, digits)


def _fp(p: float | None) -> str:
    return fmt_p(p)


def format_comparison(c: Comparison) -> str:
    """A table per pair, for people."""
    lines = ["inputs:"]
    for d in c.inputs:
        lines.append(f"  {d['label']}  {d['name']}  ({d['answered']}/{d['n']} answered)  {d['source']}")
    s = c.settings
    lines.append(f"differences are A - B; {s['level']:.0%} paired-bootstrap CIs ({s['bootstrap']} resamples, "
                 f"seed {s['seed']}); p(BH): Benjamini-Hochberg over all primary tests (alpha {s['alpha']})")
    lines.append(f"cases: {s['cases']}")
    for pc in c.pairs:
        A, B = c.inputs[pc.a]["label"], c.inputs[pc.b]["label"]
        lines.append("")
        lines.append(f"{A} vs {B}: {pc.n_paired} paired cases" + (f" ({pc.dropped} dropped: not answered by both)"
                                                                   if pc.dropped else ""))
        mc = pc.mcnemar
        lines.append(f"  McNemar exact: {A} right & {B} wrong {mc['a_only']}, {A} wrong & {B} right {mc['b_only']}, "
                     f"p = {_fp(mc['p'])}")
        if pc.williams and pc.williams.get("t") is not None:
            w = pc.williams
            lines.append(f"  Williams' t (PCC, shared safe_rate): t = {w['t']:.3f}, df = {w['df']}, p = {_fp(w['p'])}")
        lines.append(f"  {'metric':<14}{A:>9}{B:>9}{A + ' - ' + B:>10}   {'95% CI':<21}{'p':>9}{'p(BH)':>10}  test")
        for m in pc.metrics.values():
            sig = " *" if m.significant else ""
            lines.append(f"  {m.metric:<14}{_f(m.a):>9}{_f(m.b):>9}{_f(m.diff):>10}   "
                         f"{'[' + _f(m.ci[0]) + ', ' + _f(m.ci[1]) + ']':<21}{_fp(m.p):>9}{_fp(m.p_adjusted):>10}  "
                         f"{m.test}{sig}")
    lines.append("")
    lines.append("* significant after Benjamini-Hochberg; BCE and Brier: lower is better")
    return "\n".join(lines) + "\n"
