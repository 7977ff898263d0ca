"""Few clusters: one interval and its own p for a bounded mean (or a paired difference of two).

Below ``FEW_CLUSTERS`` clusters the percentile bootstrap under-covers (0.88 at 10 pairs) and its
p comes from another calculation than the interval printed beside it, so the two could
disagree ("-0.200 [-0.600, 0.000] p = 0.6727"). Here the interval and the p are one method:

- values with spread: Student's t on K - 1 degrees of freedom over the cluster totals (the
  ratio estimator's variance, as a design-based interval from few clusters takes it), its p
  the same t test of 0; the interval clipped to the figure's range (said in the note);
- values without spread (every cluster at the same mean m, e.g. two identical inputs, whose
  paired differences are all 0): the exact interval of a mean of values in [a, b] from K
  clusters that all gave m: a mean mu > m would give K values <= m with probability at most
  ((b - mu) / (b - m))^K (its least favourable law: mass at m and b), so mu is kept while that
  is above 1 - level, i.e. ``[m - u (m - a), m + u (b - m)]``, ``u = 1 - (1 - level)^(1/K)``;
  never a point, and its p is the same test's. Five identical pairs of a shift difference
  (range [-2, 2]) get [-0.90, 0.90]; ten, [-0.52, 0.52].

``p_inverting`` gives any nested family of intervals its own p (the level at which the interval
first reaches the null), so a share's Newcombe interval and its p cannot disagree either.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

#: below this many clusters a bounded mean gets ``cluster_mean`` (and a share Wilson's interval
#: on t with K - 1 df) rather than the percentile bootstrap
FEW_CLUSTERS = 30


@dataclass(frozen=True)
class SmallSampleFigure:
    """An interval and its own p of a bounded mean from ``clusters`` clusters: ``test`` names the
    method (``t on K-1 df``, ``exact (no spread)``); ``se`` the standard error where it has one
    (NaN otherwise); ``note`` says how the interval was made, and where it was clipped."""

    ci: tuple[float, float]
    p: float
    test: str
    se: float
    clusters: int
    note: str


def constant_mean_ci(m: float, k: int, bounds: tuple[float, float], level: float = 0.95) -> list[float]:
    """The exact interval of a mean of values in ``bounds`` when all ``k`` clusters gave ``m``
    (see the module docstring): never a point for ``k`` >= 1; [NaN, NaN] without clusters."""
    a, b = bounds
    if k < 1 or not math.isfinite(m):
        return [float("nan"), float("nan")]
    m = min(b, max(a, m))
    u = 1.0 - (1.0 - level) ** (1.0 / k)
    return [float(m - u * (m - a)), float(m + u * (b - m))]


def _constant_mean_p(m: float, k: int, bounds: tuple[float, float], null: float) -> float:
    """The p of ``constant_mean_ci``'s test of ``null``: the largest chance of ``k`` clusters all
    on m's side of the null under the least favourable law with mean ``null``."""
    a, b = bounds
    if m == null:
        return 1.0
    ratio = (null - a) / (m - a) if m > null else (b - null) / (b - m)
    return float(min(1.0, max(0.0, ratio) ** k))


def cluster_mean(d: np.ndarray, labels: np.ndarray, bounds: tuple[float, float], level: float = 0.95,
                 null: float = 0.0) -> SmallSampleFigure:
    """The interval and p (of ``null``) of the mean of per-row values ``d`` in ``bounds``, rows in
    clusters ``labels`` (one method for both; see the module docstring)."""
    from scipy.stats import t as student_t

    from .bootstrap import cluster_labels

    d = np.asarray(d, dtype=float)
    lab = cluster_labels(list(np.asarray(labels).tolist()))
    n = d.size
    k = int(lab.max()) + 1 if n else 0
    a, b = bounds
    if not n:
        return SmallSampleFigure((float("nan"), float("nan")), float("nan"), "none", float("nan"), 0, "no rows")
    m = float(d.mean())
    tot = np.bincount(lab, weights=d, minlength=k)
    cnt = np.bincount(lab, minlength=k).astype(float)
    var = k / (k - 1) * float(np.sum((tot - m * cnt) ** 2)) / n ** 2 if k > 1 else 0.0
    if var > 1e-24:
        se = math.sqrt(var)
        q = float(student_t.ppf((1 + level) / 2, k - 1))
        lo, hi = m - q * se, m + q * se
        p = float(2 * student_t.sf(abs(m - null) / se, k - 1))
        note = f"Student's t on {k - 1} df over {k} clusters"
        if lo < a or hi > b:
            lo, hi = max(a, lo), min(b, hi)
            note += f", clipped to the figure's range [{a:g}, {b:g}]"
        return SmallSampleFigure((float(lo), float(hi)), p, f"t on {k - 1} df", se, k, note)
    lo, hi = constant_mean_ci(m, k, bounds, level)
    return SmallSampleFigure(
        (lo, hi), _constant_mean_p(m, k, bounds, null), "exact (no spread)", float("nan"), k,
        f"all {k} clusters gave {m:.4g}: exact interval of a mean in [{a:g}, {b:g}] (least favourable law)")


def p_inverting(interval: Callable[[float], Sequence[float]], null: float = 0.0, tol: float = 1e-6) -> float:
    """The p of ``null`` that a nested family of intervals (``interval(level)``, wider as the
    level rises) implies: 1 - the level at which the interval's end reaches ``null``, found by
    bisection; 1 where every interval holds it. Printed beside the interval at ``level`` it says
    p < 1 - level exactly when the interval leaves the null out."""
    def holds(level: float) -> bool:
        lo, hi = interval(level)
        return bool(lo <= null <= hi)

    if holds(1e-9):
        return 1.0
    lo_l, hi_l = 1e-9, 1.0 - 1e-12
    if not holds(hi_l):
        return float(1.0 - hi_l)
    while hi_l - lo_l > tol:
        mid = (lo_l + hi_l) / 2
        if holds(mid):
            hi_l = mid
        else:
            lo_l = mid
    return float(1.0 - hi_l)
