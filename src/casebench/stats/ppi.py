"""Prediction-powered inference of a mean (PPI++, Angelopoulos, Duchi & Zrnic 2023, arXiv 2311.01453).

Why: a respond run's refusal figures are read by a classifier (the *reader*); people's labels of
a sample of the run's answers measure the truth directly, but only on the sample. PPI combines
the two: the reader's readings of *every* answer, and people's labels of some, as

    theta = lam * mean(f over the population) + mean(Y - lam * f over the labelled answers)

which is unbiased for the mean of ``Y`` (people's label) for any fixed ``lam``: the second term
removes the reader's bias as measured on the labels. ``lam`` = 0 is the labels alone; PPI++ picks
the ``lam`` that minimises the variance (``power tuning``), clipped to [0, 1]. Here it is fitted
*out of fold* (cross-fitting): the labels are split into folds (whole clusters, e.g. both
contexts of one query, stay together), each fold's ``lam`` is fitted on the other folds' labels,
so no label both chooses ``lam`` and is corrected by it.

Two settings of the population:

* ``population="disjoint"``: ``f_pop`` are readings of answers *other* than the labelled ones,
  an independent sample of the same distribution (the setting of the paper and of its
  ``ppi-python`` package, which the tests use as an oracle): ``lam = cov(Y, f) / ((1 + n/N)
  var(f))`` and the variance ``var(Y - lam f) / n + lam^2 var(f) / N``.
* ``population="includes"``: ``f_pop`` are the readings of the whole run, the labelled answers
  among them (what a run with people's labels of a sample is); ``lam`` is the regression slope
  of ``Y`` on ``f`` and the variance comes from the same influence values.

The variance is the sum over clusters of the squared summed influence values (a sandwich
estimate that carries correlation within a query, and between a labelled answer and the same
answer's reading in the population), with the small-sample factor ``K / (K - 1)`` unless asked
without (the oracle's plain ``ddof=0`` form). Weights ``w`` are the labelled answers' inverse
inclusion probabilities (a stratified draw); means over the labels are then weighted (Hajek).
``strata``: the estimate is the population-share-weighted sum of per-stratum PPI estimates (each
with its own ``lam``), or any fixed combination of them (``coef``: a difference of two strata,
e.g. the context shift).

numpy only; no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal, Mapping, Sequence

import numpy as np

__all__ = ["PPIEstimate", "ppi_mean", "PPI_METHOD"]

#: the estimator, in words the JSON and the notes use
PPI_METHOD = ("PPI++ (Angelopoulos, Duchi & Zrnic 2023): the reader's readings of every answer, corrected by "
              "people's labels of a sample; power-tuning parameter fitted out of fold (cross-fitting)")

Population = Literal["disjoint", "includes"]


@dataclass(frozen=True)
class PPIEstimate:
    """A prediction-powered estimate of a mean, and the labels-only estimate beside it.

    ``estimate`` and ``se``: the estimator used (``estimator``: "ppi++" or "labels": the labels
    alone, where the reader adds nothing); ``ppi`` / ``ppi_se`` and ``labels`` / ``labels_se``:
    both estimators, always computed; ``multiplier``: ``labels_se^2 / ppi_se^2``, what one label
    is worth in labels-alone labels (None where undefined); ``lam``: per stratum, the folds'
    fitted power-tuning parameters."""

    estimate: float
    se: float
    estimator: str
    ppi: float
    ppi_se: float
    labels: float
    labels_se: float
    n_labels: int
    n_population: int
    lam: dict[str, list[float]] = field(default_factory=dict)
    multiplier: float | None = None
    why_labels: str | None = None

    def wald(self, level: float = 0.95) -> tuple[float, float]:
        """``estimate -/+ z se`` (unclipped): the interval the oracle computes."""
        z = _z(level)
        return self.estimate - z * self.se, self.estimate + z * self.se

    def effective_n(self) -> float:
        """The number of labels a simple random sample would need for this estimate's variance
        of a proportion, ``p(1-p)/se^2``, at most the population's size; where that is undefined
        (an estimate at 0 or 1, no variance) the labels' number times the multiplier (at least
        one), i.e. what the labels alone would give."""
        p = min(1.0, max(0.0, self.estimate))
        cap = float(max(self.n_population, self.n_labels))
        if self.se > 0 and 0 < p < 1:
            return float(min(cap, p * (1 - p) / self.se ** 2))
        mult = self.multiplier if self.multiplier and math.isfinite(self.multiplier) else 1.0
        return float(min(cap, self.n_labels * max(1.0, mult)))

    def rate_ci(self, level: float = 0.95) -> tuple[float, float]:
        """The interval of a proportion: Wilson's score interval at the estimate with the
        effective number of labels (``effective_n``; the Korn-Graubard device for proportions
        from complex samples), so it stays inside [0, 1] and is never a point."""
        from .bootstrap import wilson_ci

        n = self.effective_n()
        p = min(1.0, max(0.0, self.estimate))
        lo, hi = wilson_ci(p * n, n, level)
        return float(lo), float(hi)

    def to_dict(self) -> dict[str, Any]:
        return {"estimate": self.estimate, "se": self.se, "estimator": self.estimator, "ppi": self.ppi,
                "ppi_se": self.ppi_se, "labels_only": self.labels, "labels_only_se": self.labels_se,
                "n_labels": self.n_labels, "n_population": self.n_population, "lambda": self.lam,
                "multiplier": self.multiplier, "why_labels_only": self.why_labels}


def _z(level: float) -> float:
    from statistics import NormalDist

    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), not {level!r}")
    return NormalDist().inv_cdf((1 + level) / 2)


def _arr(x: Any, n: int, name: str, default: Any = None, dtype: Any = float) -> np.ndarray:
    if x is None:
        return np.asarray(default, dtype=dtype)
    a = np.asarray(x, dtype=dtype).reshape(-1)
    if a.shape[0] != n:
        raise ValueError(f"{name} has {a.shape[0]} entries, expected {n}")
    return a


def _wmean(x: np.ndarray, w: np.ndarray) -> float:
    return float(np.sum(w * x) / np.sum(w))


def _fit_lambda(y: np.ndarray, f: np.ndarray, w: np.ndarray, f_pop: np.ndarray, w_pop: np.ndarray,
                n_all: int, population: Population) -> float:
    """PPI++'s power-tuning parameter from labels (``y``, ``f``, weights ``w``) and the
    population's readings, clipped to [0, 1]; 0 where it cannot be fitted (fewer than two labels,
    a constant reader)."""
    if len(y) < 2:
        return 0.0
    if population == "disjoint":
        # ppi-python's _calc_lam_glm for a mean: cov (ddof 0, labelled) / ((1 + n/N) var (ddof 1,
        # labelled and unlabelled readings together))
        yc, fc = y - _wmean(y, w), f - _wmean(f, w)
        cov = float(np.sum(w * yc * fc) / np.sum(w))
        allf = np.concatenate([f, f_pop])
        var = float(np.var(allf, ddof=1)) if len(allf) > 1 else 0.0
        if not var > 0 or not len(f_pop):
            return 0.0
        lam = cov / ((1 + n_all / len(f_pop)) * var)
    else:
        fc = f - _wmean(f, w)
        var = float(np.sum(w * fc * fc))
        if not var > 0:
            return 0.0
        lam = float(np.sum(w * (y - _wmean(y, w)) * fc)) / var
    return float(min(1.0, max(0.0, lam)))


def _folds(clusters: np.ndarray, k: int, seed: int) -> np.ndarray:
    """Each label's fold: whole clusters to one fold, in a seeded random order, round robin."""
    uniq = np.unique(clusters)
    order = np.random.default_rng(seed).permutation(len(uniq))
    fold_of = {u: int(i % k) for u, i in zip(uniq[order], range(len(uniq)))}
    return np.array([fold_of[c] for c in clusters], dtype=int)


def ppi_mean(
    y: Sequence[float], f: Sequence[float], f_pop: Sequence[float], *,
    population: Population = "disjoint",
    w: Sequence[float] | None = None,
    strata: Sequence[Any] | None = None, strata_pop: Sequence[Any] | None = None,
    coef: Mapping[Any, float] | None = None,
    clusters: Sequence[Any] | None = None, clusters_pop: Sequence[Any] | None = None,
    lam: float | None = None, folds: int = 5, seed: int = 0, small_sample: bool = True,
    fallback: bool = True,
) -> PPIEstimate:
    """The PPI++ estimate of the mean of ``y`` (people's labels of ``n`` answers; ``f`` the
    reader's readings of the same answers) with ``f_pop`` the reader's readings of the population
    (``population``: "disjoint" or "includes", module docstring).

    ``lam``: a fixed power-tuning parameter (no fitting); None: fitted, out of fold over ``folds``
    folds of whole clusters (``folds`` <= 1: in sample, as ppi-python does). ``strata`` /
    ``strata_pop``: per-answer strata; the estimate is ``sum_g coef[g] * theta_g`` with ``coef``
    the strata's shares of the population when not given (then the shares' own randomness enters
    the variance). ``clusters`` / ``clusters_pop``: cluster ids (with "includes", a labelled
    answer and its population reading must share one). ``fallback``: use the labels alone where
    the reader adds nothing (every fitted ``lam`` 0, or the labels alone are at least as precise)."""
    y_ = np.asarray(y, dtype=float).reshape(-1)
    n = y_.shape[0]
    f_ = _arr(f, n, "f")
    fp = np.asarray(f_pop, dtype=float).reshape(-1)
    N = fp.shape[0]
    if n == 0:
        raise ValueError("no labels: PPI needs people's labels of at least one answer")
    if not (np.all(np.isfinite(y_)) and np.all(np.isfinite(f_)) and np.all(np.isfinite(fp))):
        raise ValueError("labels and readings must be finite numbers")
    w_ = _arr(w, n, "w", np.ones(n))
    if np.any(w_ <= 0) or not np.all(np.isfinite(w_)):
        raise ValueError("weights must be positive and finite")
    s_ = _arr(strata, n, "strata", np.zeros(n, dtype=object), dtype=object)
    sp = _arr(strata_pop, N, "strata_pop", np.zeros(N, dtype=object), dtype=object)
    c_ = _arr(clusters, n, "clusters", np.array([("L", i) for i in range(n)] + [None], dtype=object)[:-1],
              dtype=object)
    cp = _arr(clusters_pop, N, "clusters_pop",
              np.array([("P", i) for i in range(N)] + [None], dtype=object)[:-1], dtype=object)
    groups = sorted({*s_.tolist(), *sp.tolist()}, key=str)
    if population == "includes":
        total = {g: int(np.sum(sp == g)) for g in groups}
    else:
        total = {g: int(np.sum(sp == g) + np.sum(s_ == g)) for g in groups}
    shares = coef is None
    cf = {g: (total[g] / sum(total.values()) if shares else float((coef or {}).get(g, 0.0))) for g in groups}
    fold = _folds(c_, folds, seed) if (lam is None and folds > 1) else np.zeros(n, dtype=int)
    k = int(fold.max()) + 1 if n else 1

    lam_of: dict[str, list[float]] = {}
    lam_label = np.zeros(n)  # each label's lam
    lam_pop: dict[Any, float] = {}  # each stratum's mean lam (the population term's)
    for g in groups:
        if cf[g] == 0:
            continue
        L, P = s_ == g, sp == g
        if not L.any():
            raise ValueError(f"stratum {g!r} has no labelled answer: PPI cannot estimate it")
        n_g = int(L.sum())
        if lam is not None:
            lams = [float(lam)] * k
        else:
            lams = []
            for j in range(k):
                tr = L & (fold != j) if k > 1 else L
                lams.append(_fit_lambda(y_[tr], f_[tr], w_[tr], fp[P], np.ones(int(P.sum())), n_g, population))
        lam_label[L] = [lams[j] for j in fold[L]]
        wl = w_[L]
        lam_pop[g] = float(np.sum(wl * lam_label[L]) / np.sum(wl))
        lam_of[str(g)] = [lams[j] for j in sorted(set(fold[L].tolist()))]

    def estimate(lam_l: np.ndarray, lam_p: Mapping[Any, float]) -> tuple[float, float]:
        theta_g: dict[Any, float] = {}
        infl_l = np.zeros(n)
        infl_p = np.zeros(N)
        for g in groups:
            if cf[g] == 0:
                continue
            L, P = s_ == g, sp == g
            wl = w_[L]
            d = y_[L] - lam_l[L] * f_[L]
            dbar = _wmean(d, wl)
            fbar = float(fp[P].mean()) if P.any() else 0.0
            theta_g[g] = lam_p[g] * fbar + dbar
            infl_l[L] += cf[g] * wl * (d - dbar) / np.sum(wl)
            if P.any():
                infl_p[P] += cf[g] * lam_p[g] * (fp[P] - fbar) / P.sum()
        theta = sum(cf[g] * t for g, t in theta_g.items())
        if shares and len(theta_g) > 1:
            # the strata's shares are counts of the population: their randomness (ratio estimate)
            base = sp if population == "includes" else np.concatenate([s_, sp])
            m = len(base)
            contrib = np.array([theta_g.get(b, theta) - theta for b in base]) / m
            if population == "includes":
                infl_p = infl_p + contrib
            else:
                infl_l, infl_p = infl_l + contrib[:n], infl_p + contrib[n:]
        ids = np.concatenate([c_, cp]) if N else c_
        vals = np.concatenate([infl_l, infl_p]) if N else infl_l
        sums: dict[Any, float] = {}
        for cid, v in zip(ids.tolist(), vals.tolist()):
            sums[cid] = sums.get(cid, 0.0) + v
        kk = len(sums)
        var = float(sum(v * v for v in sums.values()))
        if small_sample and kk > 1:
            var *= kk / (kk - 1)
        return float(theta), math.sqrt(max(var, 0.0))

    ppi, ppi_se = estimate(lam_label, lam_pop)
    lab, lab_se = estimate(np.zeros(n), {g: 0.0 for g in lam_pop})
    mult = (lab_se ** 2 / ppi_se ** 2) if ppi_se > 0 else None
    why = None
    if fallback:
        if N == 0:
            why = "every answer of the population is labelled"
        elif all(v == 0 for v in lam_label):
            why = "the fitted power-tuning parameter is 0 in every fold: the reader's readings add nothing"
        elif mult is not None and mult <= 1:
            why = "the reader's readings make the estimate no more precise than the labels alone"
    use_labels = why is not None
    return PPIEstimate(
        estimate=lab if use_labels else ppi, se=lab_se if use_labels else ppi_se,
        estimator="labels" if use_labels else "ppi++", ppi=ppi, ppi_se=ppi_se, labels=lab, labels_se=lab_se,
        n_labels=n, n_population=N if population == "includes" else N + n, lam=lam_of, multiplier=mult,
        why_labels=why)
