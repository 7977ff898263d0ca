"""The case bootstrap: one seeded draw of resamples, one percentile CI, one bootstrap p-value;
and the Wilson interval a proportion gets instead (``wilson_ci``; its home is here so that every
stats module can reach it without importing ``metrics``).

Every bootstrap in casebench goes through here: the CIs of a single input (``metrics``), the
paired differences (``compare``, and through it ``ablation`` and the report). A resample is drawn
as an index matrix (``resample_indices``: B rows of n case positions, with replacement) and used
as case weights (``resample_weights``: how often each case was drawn), so that a metric of every
resample at once is one matrix product of the weights with the metric's per-case columns
(``metrics.metric_values``). The same seed gives the same resamples everywhere.

Clusters (``--cluster``, ``options.CLUSTERINGS``): cases are not independent draws. The two
contexts of a query share its wording (and the per-pair context figures are per query), and the
cases of a category share a kind of harm. A *cluster* (block) bootstrap resamples whole clusters
with replacement (``cluster_resample_weights``): the clusters are drawn exactly as cases are
(``resample_indices`` over the k clusters), and each case weighs what its cluster was drawn;
the query pairs of the context figures take their query's (or category's) weight from the same
draw, so a case figure and a pair figure of one resample come from the same clusters. Clustering
by ``case`` (each case its own cluster) gives exactly the plain case bootstrap.
"""

from __future__ import annotations

import functools
import math
from contextlib import contextmanager
from typing import TYPE_CHECKING, Hashable, Iterator, Sequence

import numpy as np

from .options import check_cluster
from .options import DEFAULT_BOOTSTRAP as DEFAULT_BOOTSTRAP  # re-exported; its home is ``options``

if TYPE_CHECKING:  # pragma: no cover
    from ..data import Case


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """Run the block with BLAS (numpy's matrix products) on one thread (``threadpoolctl``).

    Why: the products here are small (B resamples by at most a few thousand cases or pairs),
    and a threaded BLAS spends more than it saves on them: its threads wait for each other
    spinning, and on a busy machine they wait for a core as well (the 43-file report spent about
    a quarter of its CPU time there on 2 busy cores). A sum may differ from a threaded one in
    its last bits (added in another order), far below what ``settle`` and the printed rounding
    keep. Work that runs a model (``run``) is never inside such a block."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        yield


def resample_indices(n: int, n_boot: int, seed: int) -> np.ndarray:
    """(n_boot, n) case positions drawn with replacement (numpy ``default_rng(seed).integers``)."""
    rng = np.random.default_rng(seed)
    return rng.integers(0, n, size=(n_boot, n))


def resample_weights(n: int, n_boot: int, seed: int) -> np.ndarray:
    """(n_boot, n) case weights: how often each of n cases was drawn in each resample of
    ``resample_indices(n, n_boot, seed)``, so weighted sums equal sums over the resampled cases.

    The draw is a pure function of its arguments, so the last few are kept (scoring 43 inputs of
    900 cases draws once, not 43 times; 16 sizes: the 43 published files answer 11 distinct
    numbers of cases, clusters and pairs, each drawn once); the array is read-only, shared
    between callers."""
    return _resample_weights(int(n), int(n_boot), int(seed))


@functools.lru_cache(maxsize=16)
def _resample_weights(n: int, n_boot: int, seed: int) -> np.ndarray:
    idx = resample_indices(n, n_boot, seed)
    idx += np.arange(n_boot)[:, None] * n
    w = np.bincount(idx.ravel(), minlength=n_boot * n).reshape(n_boot, n).astype(float)
    w.flags.writeable = False
    return w


def cluster_labels(keys: Sequence[Hashable]) -> np.ndarray:
    """Compact cluster labels 0 .. k-1 of ``keys`` (one per case), numbered in order of first
    appearance, so the same cases in the same order always get the same labels."""
    whole = isinstance(keys, np.ndarray) or (isinstance(keys, list) and bool(keys)
                                             and isinstance(keys[0], (int, np.integer)))
    arr = np.asarray(keys) if whole else None
    if arr is not None and arr.ndim == 1 and arr.dtype.kind in "iu":
        # whole numbers (labels already, relabelled after a mask): the same labels, vectorised
        # (a report relabels 900 cases some 1,600 times)
        _, first, inverse = np.unique(arr, return_index=True, return_inverse=True)
        rank = np.empty(len(first), dtype=int)
        rank[np.argsort(first)] = np.arange(len(first))
        return rank[inverse.ravel()]
    seen: dict[Hashable, int] = {}
    return np.array([seen.setdefault(k, len(seen)) for k in keys], dtype=int)


def case_clusters(cases: Sequence["Case"], by: str) -> np.ndarray:
    """The cluster label of each case under a clustering (``options.CLUSTERINGS``): ``case``
    (each case its own), ``query`` (the two contexts of a query: identical query text, as
    ``pairs.pair_by_query`` pairs them) or ``category``. Labels are ``cluster_labels``."""
    by = check_cluster(by)
    if by == "case":
        return np.arange(len(cases), dtype=int)
    if by == "query":
        return cluster_labels([c.query for c in cases])
    return cluster_labels([c.category for c in cases])


def cluster_resample_weights(labels: np.ndarray, n_boot: int, seed: int, n_clusters: int | None = None) -> np.ndarray:
    """(n_boot, len(labels)) weights of a cluster bootstrap: the ``n_clusters`` clusters (default
    ``labels.max() + 1``) are drawn with replacement as ``resample_weights(n_clusters, n_boot,
    seed)`` draws cases, and each row of ``labels`` (a case, or a query pair) weighs how often its
    cluster was drawn. Rows given labels of one label space with one ``n_clusters`` (the cases and
    the query pairs of one input) get weights from the same draw. With every row its own cluster
    (``labels = arange(n)``) this is ``resample_weights(n, n_boot, seed)`` itself."""
    labels = np.asarray(labels, dtype=int)
    k = int(labels.max()) + 1 if n_clusters is None and labels.size else int(n_clusters or 0)
    if k == 0:
        return np.zeros((n_boot, labels.size))
    if labels.size == k and np.array_equal(labels, np.arange(k)):
        return resample_weights(k, n_boot, seed)
    return _spread_weights(labels.tobytes(), int(n_boot), int(seed), k)


@functools.lru_cache(maxsize=4)
def _spread_weights(labels: bytes, n_boot: int, seed: int, k: int) -> np.ndarray:
    """The cluster draw spread over the rows (``cluster_resample_weights``), kept for the last
    few label vectors: inputs answering the same cases share their labels (the 43-file report
    spread the same 900 labels 86 times); read-only, shared between callers."""
    w = resample_weights(k, n_boot, seed)[:, np.frombuffer(labels, dtype=int)]
    w.flags.writeable = False
    return w


def proportion_design_effect(k: np.ndarray, n: np.ndarray, labels: np.ndarray) -> float:
    """The design effect of the proportion sum(k) / sum(n) (per row: ``k`` counted of ``n``, rows in
    clusters ``labels``): its variance with the clusters as the independent units over its variance
    with the rows as the units (Kish), both by the linearised estimator of a ratio, each with its
    own small-sample factor: ``[K/(K-1) sum_c (k_c - p n_c)^2] / [N/(N-1) N p (1 - p)]``. NaN
    (undefined, printed as such) where it cannot be estimated: p 0 or 1 (no variance to
    inflate), fewer than two clusters or cases, or no variance between clusters at all (every
    cluster at exactly p: a ratio of 0 that says nothing, e.g. a constant prediction scored on
    queries whose two contexts people label apart). ``metrics.design_effect`` says how the
    Wilson interval uses it (floored at 1, and 1 where undefined)."""
    labels = np.asarray(labels, dtype=int)
    if not labels.size:
        return float("nan")
    K = int(labels.max()) + 1
    kc = np.bincount(labels, weights=np.asarray(k, dtype=float), minlength=K)
    nc = np.bincount(labels, weights=np.asarray(n, dtype=float), minlength=K)
    N = float(nc.sum())
    used = nc > 0
    k_used = int(used.sum())
    if N < 2 or k_used < 2:
        return float("nan")
    p = float(kc.sum()) / N
    srs = N / (N - 1) * N * p * (1 - p)
    if not srs > 0:
        return float("nan")
    between = float(np.sum((kc[used] - p * nc[used]) ** 2))
    if between <= 1e-12 * srs:
        return float("nan")
    return k_used / (k_used - 1) * between / srs


#: decimals resampled figures are rounded to before they are ranked or compared with zero
SETTLE_DECIMALS = 12


def settle(values: np.ndarray) -> np.ndarray:
    """Resampled figures rounded to ``SETTLE_DECIMALS`` decimals: far below any printed figure,
    far above float noise. Sums of the same numbers added in another order (another CPU's
    vector width, another numpy build) differ in their last bits; rounded, they are the same
    floats, so a percentile on a rounding boundary (-0.01635 printed with 4 decimals) and a
    difference that is exactly zero come out the same on every machine."""
    return np.round(np.asarray(values, dtype=float), SETTLE_DECIMALS)


def percentile_ci(values: np.ndarray, level: float, finite_only: bool = False) -> list[float]:
    """The percentile interval of resampled ``values`` at ``level`` (e.g. 0.95: 2.5th to 97.5th).

    Resamples where the figure is undefined (NaN, e.g. a recall of a resample that drew no safe
    case) are left out. ``finite_only`` also leaves out infinite ones: a single input's CI is an
    interval of the finite figures (an unclipped paper-compatible BCE is infinite in the
    resamples that draw a p = 0 case); a paired difference keeps them (a difference from an
    infinite BCE is infinite). No usable resample: [NaN, NaN]. The values are settled first
    (``settle``) so the interval is the same on every machine.
    """
    v = settle(values)
    v = v[np.isfinite(v)] if finite_only else v[~np.isnan(v)]
    if v.size == 0:
        return [float("nan"), float("nan")]
    lo, hi = (1 - level) / 2 * 100, (1 + level) / 2 * 100
    with np.errstate(invalid="ignore"):
        return [float(np.percentile(v, lo)), float(np.percentile(v, hi))]


def p_floor(n_boot: int) -> float:
    """The smallest p ``bootstrap_p`` can give from ``n_boot`` resamples: ``2 / (B + 1)`` (no
    resample on one side of zero). A p there says only that p is below about this resolution;
    it is printed as ``< floor`` (``format_p``), never as if it were measured (``1.00e-03``)."""
    return 2.0 / (n_boot + 1) if n_boot > 0 else float("nan")


def bootstrap_p(d: np.ndarray) -> float:
    """Two-sided bootstrap p of resampled differences ``d``: ``2 min(P*(d <= 0), P*(d >= 0))``
    with the +1 correction (``(k + 1) / (B + 1)``, never exactly 0 from finitely many
    resamples), clipped to 1; NaN differences are left out.

    The differences are settled first (``settle``): the difference of two means of the same
    votes is exactly zero in exact arithmetic, but its float sign depends on the order numpy
    adds in, which differs between CPUs and numpy builds; reading that sign made p move by 0.02
    from one machine to another. A settled zero is a tie and counts on both sides."""
    d = settle(d[~np.isnan(d)])
    if d.size == 0:
        return float("nan")
    b = d.size
    le = (np.sum(d <= 0) + 1) / (b + 1)
    ge = (np.sum(d >= 0) + 1) / (b + 1)
    return float(min(1.0, 2 * min(le, ge)))


def wilson_ci(k: float, n: float, level: float = 0.95, df: int | None = None) -> list[float]:
    """The Wilson score interval of a proportion k / n (Wilson 1927): never collapses to a point
    at 0 or 1 and stays inside [0, 1]. ``n`` = 0: [NaN, NaN].

    ``(p + z^2/2n -/+ z sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n)``, z the normal quantile of
    ``(1 + level) / 2``; with ``df`` (clustered: K - 1 for K clusters, ``cluster_df``) the
    quantile of Student's t with ``df`` degrees of freedom instead, as a design-based interval
    from few clusters takes it (Korn and Graubard 1998)."""
    if not n > 0:
        return [float("nan"), float("nan")]
    z = critical_value(level, df)
    p = k / n
    den = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(max(p * (1 - p) / n + z * z / (4 * n * n), 0.0)) / den
    return [float(max(0.0, centre - half)), float(min(1.0, centre + half))]


def _z(level: float) -> float:
    from scipy.stats import norm

    return float(norm.ppf((1 + level) / 2))


def newcombe_paired_ci(both: float, a_only: float, b_only: float, neither: float,
                       level: float = 0.95, df: int | None = None) -> list[float]:
    """Newcombe's interval for the difference of two *paired* proportions p_A - p_B (Newcombe
    1998, Statistics in Medicine 17: 2635-2650, method 10: the square-and-add of the two Wilson
    intervals with the phi correlation of the 2x2 table, its numerator AD - BC reduced by n/2 as
    the paper does, so two identical inputs get an interval around 0, not a point). The counts are the cases both count
    (``both``), A alone, B alone and ``neither``; they may be fractional (an effective sample
    size under clustering). Never a point: the Wilson intervals it is built from never are.
    ``df``: the Wilson intervals on Student's t with ``df`` degrees of freedom (few clusters:
    K - 1), as ``wilson_ci`` takes it. No case: [NaN, NaN]."""
    n = both + a_only + b_only + neither
    if not n > 0:
        return [float("nan"), float("nan")]
    p1, p2 = (both + a_only) / n, (both + b_only) / n
    l1, u1 = wilson_ci(both + a_only, n, level, df)
    l2, u2 = wilson_ci(both + b_only, n, level, df)
    # phi as Newcombe defines it for method 10: AD - BC shrunk by n/2 when positive (0 between 0
    # and n/2), kept when negative; 0 where a margin is empty
    den = (both + a_only) * (b_only + neither) * (both + b_only) * (a_only + neither)
    ad_bc = both * neither - a_only * b_only
    num = ad_bc - n / 2 if ad_bc > n / 2 else (ad_bc if ad_bc < 0 else 0.0)
    phi = num / math.sqrt(den) if den > 0 else 0.0
    d = p1 - p2
    lo = d - math.sqrt(max((p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2, 0.0))
    hi = d + math.sqrt(max((u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2, 0.0))
    return [float(max(-1.0, lo)), float(min(1.0, hi))]


def mean_design_effect(d: np.ndarray, labels: np.ndarray) -> float:
    """The design effect of the mean of per-row values ``d`` (rows in clusters ``labels``): the
    variance of the mean with the clusters as the units over its variance with the rows as the
    units, each by the usual estimator with its small-sample factor,
    ``[K/(K-1) sum_c (D_c - m n_c)^2] / [N/(N-1) sum_i (d_i - m)^2]`` (D_c the sum of cluster c's
    values, n_c its rows, m the mean). NaN where it cannot be estimated (fewer than two rows or
    clusters, or ``d`` constant: there is no variance to inflate)."""
    d = np.asarray(d, dtype=float)
    labels = np.asarray(labels, dtype=int)
    if d.size < 2:
        return float("nan")
    K = int(labels.max()) + 1
    Dc = np.bincount(labels, weights=d, minlength=K)
    nc = np.bincount(labels, minlength=K).astype(float)
    used = nc > 0
    k_used = int(used.sum())
    m = float(d.mean())
    srs = d.size / (d.size - 1) * float(np.sum((d - m) ** 2))
    if k_used < 2 or not srs > 1e-12:
        return float("nan")
    return k_used / (k_used - 1) * float(np.sum((Dc[used] - m * nc[used]) ** 2)) / srs


def bounded_mean_ci(mean: float, n: float, bounds: tuple[float, float], level: float = 0.95) -> list[float]:
    """An analytic interval for the mean of ``n`` values that lie in ``bounds`` = (a, b), for
    where the percentile bootstrap degenerates to a point (every value the same, e.g. a binary
    judge that follows the context in all ten pairs of a category): the Wilson interval of the
    mean rescaled to [0, 1], mapped back. A variable in [0, 1] with mean mu has variance at most
    mu (1 - mu), a Bernoulli's, so the interval is conservative; and like Wilson's it is never a
    point. ``n`` 0: [NaN, NaN]."""
    a, b = bounds
    if not n > 0 or not np.isfinite(mean):
        return [float("nan"), float("nan")]
    t = min(1.0, max(0.0, (mean - a) / (b - a)))
    lo, hi = wilson_ci(t * n, n, level)
    return [float(a + lo * (b - a)), float(a + hi * (b - a))]


def degenerate(ci: Sequence[float]) -> bool:
    """A finite interval of zero width (both ends equal after ``settle``): a point."""
    lo, hi = settle(np.asarray(ci, dtype=float))
    return bool(np.isfinite(lo) and np.isfinite(hi) and hi <= lo)


def critical_value(level: float, df: int | None = None) -> float:
    """The two-sided critical value at ``level``: the normal quantile of ``(1 + level) / 2``, or
    Student's t with ``df`` degrees of freedom (``df`` >= 1). Kept per level and df (a report
    asks for a few values some 600 times)."""
    return _critical_value(float(level), df)


@functools.lru_cache(maxsize=64)
def _critical_value(level: float, df: float | None) -> float:
    if df is not None and df >= 1:
        from scipy.stats import t

        return float(t.ppf((1 + level) / 2, df))
    from scipy.stats import norm

    return float(norm.ppf((1 + level) / 2))


def cluster_df(labels: np.ndarray | None) -> int | None:
    """Degrees of freedom of a design-based interval from clustered rows: K - 1 for the K
    clusters that hold a row; None (the normal quantile) when unclustered or with fewer than two."""
    if labels is None:
        return None
    labels = np.asarray(labels, dtype=int)
    k = int(np.unique(labels).size) if labels.size else 0
    return k - 1 if k >= 2 else None
