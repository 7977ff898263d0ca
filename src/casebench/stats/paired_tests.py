"""The paired tests themselves: McNemar (exact and clustered), Williams' t, the MDD.

These are plain functions of arrays (per-case correctness, correlations, cluster labels) with no
knowledge of inputs, options or case sets, so they live apart from ``compare``, which decides what
to feed them; ``saydo``, ``sample_compare``, ``ranking`` and ``overview`` call them directly too.
``accuracy_matrix`` is the same McNemar test (exact or clustered, with the same centred SE for
its MDD) run on every pair of many inputs at once by matrix products, kept beside the one-pair
versions so that the two cannot drift apart.

Minimum detectable difference
    ``mdd``: the smallest difference the paired design had 80% power to detect at ``alpha``,
    from the centred SE of the per-case (per-cluster) accuracy differences for accuracy
    (``centred_se``) and, in ``compare``, from the SD of the paired bootstrap differences
    otherwise.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from .bootstrap import cluster_labels


@dataclass
class PairedDiff:
    """One figure's paired difference between two inputs, whatever the unit they were paired on
    (cases in ``compare.MetricDiff``, samples of a log in ``sample_compare.ScorerDiff``): both
    means, A - B with its interval and bootstrap p, the primary test and its p, what the
    family's adjustment made of it, and why no mark may be given. One shape, so both
    comparisons print and serialise alike."""

    a: float
    b: float
    diff: float
    ci: list[float]
    p_bootstrap: float
    test: str
    p: float | None
    p_adjusted: float | None = None
    significant: bool = False
    #: why no significance mark may be given whatever p is (too few paired or discordant
    #: units: ``metrics.MIN_PAIRED``, ``metrics.MIN_DISCORDANT``); None: a mark can be given
    withheld: str | None = None
    #: the smallest difference the paired design had 80% power to detect at the comparison's
    #: alpha (``mdd``); NaN where it cannot be said
    mdd: float = float("nan")
    #: the resampling floor of ``p`` (``bootstrap.p_floor``) when ``p`` is a bootstrap p: a p
    #: there is printed as ``< floor``; None for the exact and asymptotic tests
    p_floor: float | None = None

    #: the fields that say which figure this is, written first in ``to_dict``
    KEY_FIELDS: ClassVar[tuple[str, ...]] = ()

    def to_dict(self) -> dict[str, Any]:
        rest = dict(vars(self))
        return {**{k: rest.pop(k) for k in self.KEY_FIELDS}, **rest}


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
    n = len(a)
    return {"both_right": int(table[0, 0]), "a_only": a_only, "b_only": b_only, "both_wrong": int(table[1, 1]),
            "statistic": stat, "p": min(1.0, p), "test": "exact",
            "se0": math.sqrt(a_only + b_only) / n if n else float("nan"),
            "se": centred_se(float(a_only + b_only), float(a_only - b_only), float(n), float(n))}


def centred_se(sum_sq: float, total: float, n: float, units: float, sum_nc_sq: float | None = None,
                cross: float | None = None) -> float:
    """The standard error of a mean difference d = total / n from its units (cases, or clusters of
    cases), *centred* on that mean, with the small-sample factor of its ``units``::

        SE^2 = K/(K-1) sum_c (D_c - d n_c)^2 / n^2

    ``sum_sq`` = sum_c D_c^2, ``cross`` = sum_c D_c n_c, ``sum_nc_sq`` = sum_c n_c^2 (for cases,
    n_c = 1: both equal to ``total`` and ``n``). The MDD reads this (the uncentred sum_c D_c^2,
    the variance under no difference, overstated it whenever the two inputs differ: 0.0385
    against 0.0353 for Claude-3.5-Sonnet's against GPT-4o's verdicts). NaN below two units."""
    if not (n > 0 and units > 1):
        return float("nan")
    m = total / n
    cross = total if cross is None else cross
    sum_nc_sq = n if sum_nc_sq is None else sum_nc_sq
    ss = max(sum_sq - 2 * m * cross + m * m * sum_nc_sq, 0.0)
    return math.sqrt(units / (units - 1) * ss) / n


def mcnemar_clustered(correct_a: np.ndarray, correct_b: np.ndarray, clusters: np.ndarray) -> dict[str, Any]:
    """McNemar's test for clustered matched pairs (Durkalski, Palesch, Lipsitz and Rust 2003,
    "Analysis of clustered matched-pair data", Statistics in Medicine 22(15), 2417-2428)::

        X^2 = (sum_c D_c)^2 / sum_c D_c^2,   D_c = (A right & B wrong) - (A wrong & B right) in cluster c,

    referred to F(1, K - 1) for K clusters (the square of Student's t with K - 1 degrees of
    freedom: with 45 categories the chi-square's normal tail is too thin), chi-square with one
    degree of freedom when every case is its own cluster. The discordances of one cluster (the two contexts of
    a query) are summed before they are squared, so correlated discordances count as the one
    piece of evidence they are; with every case its own cluster it is McNemar's asymptotic
    (b - c)^2 / (b + c). No discordant case: p = 1. The counts are those of ``mcnemar_exact``;
    ``se0`` is the standard error of the accuracy difference under no difference,
    ``sqrt(sum_c D_c^2) / n`` (``mdd``)."""
    from scipy.stats import chi2

    a = np.asarray(correct_a, dtype=bool)
    b = np.asarray(correct_b, dtype=bool)
    labels = np.asarray(clusters, dtype=int)
    out = _mcnemar_counts(a, b)
    d = a.astype(float) - b.astype(float)
    if not len(d):
        return {**out, "statistic": 0.0, "p": 1.0, "test": "clustered", "clusters": 0, "se0": float("nan"),
                "se": float("nan")}
    lab = cluster_labels(labels.tolist())
    dc = np.bincount(lab, weights=d)
    nc = np.bincount(lab).astype(float)
    den = float(np.sum(dc ** 2))
    stat = float(dc.sum() ** 2 / den) if den > 0 else 0.0
    K = int(np.sum(nc > 0))
    if den > 0 and 1 < K < len(d):
        from scipy.stats import f as f_dist

        p = float(f_dist.sf(stat, 1, K - 1))
    else:
        p = float(chi2.sf(stat, 1)) if den > 0 else 1.0
    return {**out, "statistic": stat, "p": min(1.0, p), "test": "clustered", "clusters": int(len(dc)),
            "se0": math.sqrt(den) / len(d),
            "se": centred_se(den, float(dc.sum()), float(len(d)), float(np.sum(nc > 0)),
                              float(np.sum(nc ** 2)), float(np.sum(dc * nc)))}


def _mcnemar_counts(a: np.ndarray, b: np.ndarray) -> dict[str, int]:
    return {"both_right": int(np.sum(a & b)), "a_only": int(np.sum(a & ~b)), "b_only": int(np.sum(~a & b)),
            "both_wrong": int(np.sum(~a & ~b))}


#: the power at which ``mdd`` gives the smallest detectable difference
MDD_POWER = 0.8


def mdd(se: float, alpha: float = 0.05, power: float = MDD_POWER) -> float:
    """The minimum detectable difference: the smallest true difference a two-sided test at
    ``alpha`` finds with probability ``power``, ``(z_{1-alpha/2} + z_power) x SE`` (normal
    approximation; 2.80 x SE at alpha 0.05 and power 0.8). ``SE``: the standard error of the
    paired difference from the paired design itself: for accuracy (McNemar) the SE of the
    per-case differences centred on their mean (clustered: per-cluster sums, ``centred_se``);
    for the other figures the SD of the paired (cluster)
    bootstrap differences. NaN when SE is not positive (no discordant case: nothing says how
    the two could differ)."""
    if se is None or not (isinstance(se, (int, float)) and math.isfinite(se) and se > 0):
        return float("nan")
    return float(_mdd_factor(float(alpha), float(power)) * se)


@functools.lru_cache(maxsize=8)
def _mdd_factor(alpha: float, power: float) -> float:
    """``z_{1-alpha/2} + z_power`` (``mdd``), once per alpha and power: a 43-input matrix asks for
    it 1,849 times, and each scipy quantile costs about 0.1 ms."""
    from scipy.stats import norm

    return float(norm.ppf(1 - alpha / 2) + norm.ppf(power))


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
# Every pair at once: accuracy only (the report's matrix over many inputs)


@dataclass
class AccuracyMatrix:
    """Paired accuracy of every pair of inputs over the same cases, from three matrix products.

    Entry ``[i, j]``: ``n_paired`` cases both scored, ``a_only`` cases i got right and j wrong,
    ``diff`` = accuracy of i - accuracy of j over those cases, ``p`` McNemar's exact p (the same
    binomial test as ``mcnemar_exact``), ``p_adjusted`` Benjamini-Hochberg over the pairs i < j
    (one family: accuracy, every pair), ``significant`` where BH rejects at ``alpha``. All
    matrices are symmetric except ``a_only`` (its transpose is ``b_only``) and ``diff``
    (antisymmetric). Diagonals: 0 differences, p = 1, never significant.
    """

    n_paired: np.ndarray
    a_only: np.ndarray
    diff: np.ndarray
    p: np.ndarray
    p_adjusted: np.ndarray
    significant: np.ndarray
    alpha: float
    #: the minimum detectable accuracy difference of each pair (``mdd``); NaN on the diagonal
    mdd: np.ndarray | None = None
    #: the test: ``exact`` (McNemar's exact test) or ``clustered`` (``mcnemar_clustered``)
    test: str = "exact"


def accuracy_matrix(correct: np.ndarray, scored: np.ndarray, alpha: float = 0.05,
                    clusters: np.ndarray | None = None) -> AccuracyMatrix:
    """``correct`` and ``scored``: (inputs, cases) boolean arrays aligned by case (a case an
    input did not score is neither right nor wrong; pairs use the cases both scored).
    ``clusters``: the cluster label of each case; given (and not every case its own cluster),
    ``p`` is the clustered McNemar test (``mcnemar_clustered``) and ``mdd`` from the centred SE of
    the difference (``centred_se``)."""
    from scipy.stats import binom, chi2
    from scipy.stats import f as f_dist
    from .fdr import bh_adjust

    s = np.asarray(scored, dtype=float)
    c = np.asarray(correct, dtype=bool) & np.asarray(scored, dtype=bool)
    right = c.astype(float)
    wrong = s - right
    n_paired = s @ s.T
    a_only = right @ wrong.T  # i right, j wrong, both scored
    right_paired = right @ s.T  # i right among the cases both scored
    with np.errstate(invalid="ignore", divide="ignore"):
        diff = np.where(n_paired > 0, (right_paired - right_paired.T) / n_paired, np.nan)
    b_only = a_only.T
    k = np.minimum(a_only, b_only)
    m = a_only + b_only
    test = "exact"
    labels = None if clusters is None else cluster_labels(list(clusters))
    if labels is not None and len(labels) and int(labels.max()) + 1 < len(labels):
        test = "clustered"
        # per cluster, D_c[i, j] = (i right, j wrong) - (i wrong, j right) over the cases both scored
        var = np.zeros_like(n_paired)
        cross = np.zeros_like(n_paired)
        nsq = np.zeros_like(n_paired)
        units = np.zeros_like(n_paired)
        order = np.argsort(labels, kind="stable")
        bounds = np.flatnonzero(np.diff(labels[order])) + 1
        for idx in np.split(order, bounds):
            rc, sc = right[:, idx], s[:, idx]
            dc = rc @ sc.T - sc @ rc.T
            ncc = sc @ sc.T  # the cluster's cases both scored
            var += dc * dc
            cross += dc * ncc
            nsq += ncc * ncc
            units += ncc > 0
        num = (a_only - b_only) ** 2
        with np.errstate(invalid="ignore", divide="ignore"):
            stat = num / np.where(var > 0, var, 1)
            # F(1, K - 1), K the clusters holding paired cases (``mcnemar_clustered``)
            p = np.where((var > 0) & (units > 1), f_dist.sf(stat, 1, np.maximum(units - 1, 1)),
                         np.where(var > 0, chi2.sf(stat, 1), 1.0))
    else:
        var = m.astype(float)
        cross, nsq, units = (a_only - b_only).astype(float), n_paired.astype(float), n_paired.astype(float)
        p = np.where(m > 0, np.minimum(1.0, 2.0 * binom.cdf(k, np.maximum(m, 1), 0.5)), 1.0)
    # the MDD's SE, centred on each pair's difference (``centred_se``)
    tot = (a_only - b_only).astype(float)
    se = np.array([[centred_se(float(var[i, j]), float(tot[i, j]), float(n_paired[i, j]), float(units[i, j]),
                                float(nsq[i, j]), float(cross[i, j])) for j in range(len(s))] for i in range(len(s))])
    mdds = np.vectorize(lambda x: mdd(float(x), alpha))(se) if se.size else se
    np.fill_diagonal(mdds, np.nan)
    np.fill_diagonal(p, 1.0)
    np.fill_diagonal(diff, 0.0)
    iu = np.triu_indices(len(s), k=1)
    p_adj = np.ones_like(p)
    sig = np.zeros(p.shape, dtype=bool)
    if len(iu[0]):
        adj, reject = bh_adjust(p[iu], alpha)
        p_adj[iu] = adj
        p_adj.T[iu] = adj
        sig[iu] = reject
        sig.T[iu] = reject
    return AccuracyMatrix(n_paired.astype(int), a_only.astype(int), diff, p, p_adj, sig, alpha, mdds, test)
