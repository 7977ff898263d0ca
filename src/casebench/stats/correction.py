"""A refusal rate read by an erring reader, corrected by simulation: the one interval method of
every corrected figure (``score``, the first screen, ``casebench.corrected_refusal_rate``).

Why simulation: the true rate is ``p = (q + Sp - 1) / (Se + Sp - 1)`` (Rogan-Gladen), a ratio
whose denominator is uncertain. Where the reader's sensitivity is poorly known (validation sets
of different writers that disagree, as the stored pools do) the delta method's straight line
through ``Se`` is far from the ratio, and a normal quantile for a between-set spread estimated
from 3-6 sets is far from its own uncertainty; the printed intervals then cover 0.73-0.91. Here
each ingredient is drawn as it is known and the ratio is computed draw by draw:

* **Se and Sp of the run's writer** (``predictive_logits``): a new draw from the hierarchical
  normal model of the validation sets on the logit scale (each set's logit with its binomial
  variance ``1/x + 1/(n-x)``; sets ``N(mu, tau^2)``), ``mu`` flat, ``tau`` half-normal with scale
  ``TAU_SCALE`` on the logit scale (weak: a factor of e^1 between writers is a typical spread).
  The posterior of ``tau`` is computed on a grid (the marginal likelihood of the sets given
  ``tau``), so its own uncertainty, large with a few sets, is carried to the new writer's
  ``Se`` and ``Sp``. With the run's own labels (``own``) the writer is the validation's: no spread.
* **the raw rate** ``q``: Jeffreys' beta, ``Beta(x + 1/2, n - x + 1/2)``, on the run's effective
  size ``n`` = answers over the design effect of its clustering (queries), shrunk further by
  ``(z / t_{K-1})^2`` with ``K`` clusters, so a few clusters widen it as Student's t does.

Each draw gives ``p* = (q* + Sp* - 1) / (Se* + Sp* - 1)``. A draw with ``Se* + Sp* <= 1`` (a new
writer on whom the reader is no better than chance) is dropped: the correction assumes the reader
better than chance on the run's writer (without it there is nothing to correct with), so the
predictive is taken given ``J > 0``; where more than ``1 - level`` of the draws are of that kind
that assumption does not hold at the level and nothing is said.

The draws' percentiles at ``(1 -/+ level) / 2`` are close to a pivot: the ratio's quantiles move
with the writer's ``J = Se + Sp - 1``, not with the true figure, so with the run's writer a draw
from the same predictive the interval holds the figure at the level *whatever the figure is*;
clipped to the figure's range (``[0, 1]`` for a rate, ``[-1, 1]`` for a difference) it loses no
coverage. What is printed follows the **point** (Rogan-Gladen at the pooled Se and Sp, the
predictive medians), not the interval's ends:

* point inside the range: the **two-sided interval**, clipped (it may reach an end: "3% [0, 9]");
* point at or beyond an end: a **one-sided bound** away from that end, from the draws that put
  the figure in its range (the draws beyond it contradict the range, which the point says the
  figure is near), taken at one-sided ``1 - (1 - level) * SELECTED_SHARE`` (99.5% for a 95%
  figure) and said as a bound at the level: "over-refusal at most 6%" (below);
* point inside but the interval the whole range: the one-sided bounds at the level (from all the
  draws: the figure is not near an end) that say more than a uniform prior's would (more than
  ``1 - level`` of the range from its end); else nothing, and ``withheld`` says why.

Why the point and not the interval's ends: whether the ends lie inside the range depends on the
observed rate, which carries the new writer's unseen error, so a rule on the ends prints
two-sided intervals mostly for the writers whose error pulls the rate away from an end, the very
runs the interval misses (at a true rate of 0.9 read by the rules classifier, the runs whose
interval lay inside [0, 1] were 11% of runs and covered 0.88). The point's side splits the runs
about evenly near an end, so each kind of statement keeps about its level.

Why a bound is taken further out than the level: the point lies beyond an end, for a figure not
near that end, only for a writer in the far tail of the spread, and then a bound at the level's
own quantile misses most of the time (at a true 0.6 read by the rules classifier, a bound was
printed in 3% of runs and held in 0.81-0.89 of them). A statement printed only in a share ``s``
of runs holds given that it was printed at ``1 - beta / s`` at worst, ``beta`` its one-sided
miss rate; ``beta = (1 - level) / 10`` keeps the level for a selection as rare as one run in ten,
the default of Andrews, Kitagawa and McCloskey's hybrid (projection) intervals after selection
(2024). An exact conditional bound (the raw rate's law given the point beyond the end) says
nothing in 10-23% of runs where bounds are common; this one costs the bounds a little width.

A difference of two rates read by the same reader (the context shift) is corrected as ``d / J``
(the ``1 - Sp`` terms cancel): its sampling distribution is taken from its own interval (normal
on each side of the point, e.g. a clustered bootstrap's), divided draw by draw by ``J*``.

The draws come from a generator seeded by ``SEED`` and the inputs' counts, so a figure is the same
on every run. numpy only; no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

__all__ = ["CORRECTION_METHOD", "CorrectedFigure", "DRAWS", "ReaderPredictive", "SEED", "SELECTED_SHARE", "TAU_SCALE",
           "corrected_difference_figure", "corrected_rate_figure", "corrected_refusal_rate", "predictive_logits",
           "reader_predictive"]

#: draws per figure: a 2.5% percentile's Monte-Carlo error is about 0.0011 in probability
DRAWS = 20_000
#: the simulation's seed (mixed with the inputs' counts: the same inputs give the same figure)
SEED = 43
#: a bound where the point lies at or beyond an end is taken at one-sided ``(1 - level) *
#: SELECTED_SHARE`` (module docstring: the point is there by selection)
SELECTED_SHARE = 0.1
#: the half-normal prior's scale for the between-set standard deviation on the logit scale
TAU_SCALE = 1.0
#: the grid of tau for its posterior (logit scale)
_TAU_GRID = np.linspace(0.0, 6.0, 601)

#: how the corrected figures are made, for the JSON and the notes (``stats.refusal`` re-exports it)
CORRECTION_METHOD = ("Rogan-Gladen (p = (q + Sp - 1) / (Se + Sp - 1)); interval by simulation: the run's writer's Se "
                     "and Sp drawn from the hierarchical (random-effects) predictive of the validation sets on the "
                     "logit scale, the between-set spread with its own uncertainty (half-normal prior), the raw rate "
                     "from Jeffreys' beta on the run's effective size (clustered by query); the draws' percentiles "
                     "clipped to the range where the point lies inside it, else a one-sided bound away from the end "
                     "the point reaches (taken at one-sided 1 - (1 - level) / 10: the point is there by selection)")



def _logits(x: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each set's logit and variance ``1/x + 1/(n-x)``, a half added to both cells where one is empty."""
    c = np.where((x == 0) | (x == n), 0.5, 0.0)
    return np.log((x + c) / (n - x + c)), 1.0 / (x + c) + 1.0 / (n - x + c)


def predictive_logits(counts: Sequence[tuple[int, int]], draws: int, rng: np.random.Generator,
                      spread: bool = True) -> np.ndarray:
    """``draws`` logits of a new set's proportion (module docstring): from ``(x, n)`` per
    validation set (sets with ``n`` 0 left out), the hierarchical normal model with ``tau``'s grid
    posterior under its half-normal prior; ``spread`` False: no between-set spread (the run's own
    labels), the pooled mean's posterior alone. Raises ``ValueError`` when no set has any."""
    kept = [(x, n) for x, n in counts if n > 0]
    if not kept:
        raise ValueError("no validation set has a case of this kind")
    x = np.array([c[0] for c in kept], dtype=float)
    n = np.array([c[1] for c in kept], dtype=float)
    y, v = _logits(x, n)
    grid = _TAU_GRID if spread else np.zeros(1)
    tau2 = grid[:, None] ** 2
    w = 1.0 / (v[None, :] + tau2)
    sw = w.sum(axis=1)
    mu_hat = (w * y[None, :]).sum(axis=1) / sw
    # log marginal likelihood of the sets given tau (mu integrated out under a flat prior), plus
    # the log of the half-normal prior
    loglik = (0.5 * np.log(w).sum(axis=1) - 0.5 * np.log(sw)
              - 0.5 * (w * (y[None, :] - mu_hat[:, None]) ** 2).sum(axis=1))
    logpost = loglik - 0.5 * (grid / TAU_SCALE) ** 2
    post = np.exp(logpost - logpost.max())
    post /= post.sum()
    pick = rng.choice(grid.size, size=draws, p=post)
    step = grid[1] - grid[0] if grid.size > 1 else 0.0
    tau = np.abs(grid[pick] + (rng.random(draws) - 0.5) * step)
    mu = mu_hat[pick] + rng.standard_normal(draws) / np.sqrt(sw[pick])
    out: np.ndarray = mu + tau * rng.standard_normal(draws)
    return out


@dataclass(frozen=True)
class ReaderPredictive:
    """Draws of the run's writer's sensitivity and specificity (``reader_predictive``), shared by
    every figure of one run, with the pooled values (the predictive medians) for the point."""

    sensitivity: np.ndarray
    specificity: np.ndarray
    sets: int
    spread: bool

    @property
    def se(self) -> float:
        return float(np.median(self.sensitivity))

    @property
    def sp(self) -> float:
        return float(np.median(self.specificity))

    @property
    def youden(self) -> np.ndarray:
        j: np.ndarray = self.sensitivity + self.specificity - 1.0
        return j

    def interval(self, which: str, level: float = 0.95) -> tuple[float, float]:
        """Where the run's writer's ``sensitivity`` or ``specificity`` lies (the predictive's
        percentiles at the level)."""
        a = (1 - level) / 2
        d = self.sensitivity if which == "sensitivity" else self.specificity
        lo, hi = np.quantile(d, [a, 1 - a])
        return float(lo), float(hi)


def _seed(*parts: float) -> np.random.Generator:
    """A generator seeded by ``SEED`` and the inputs (rounded): the same inputs, the same draws."""
    key = [SEED] + [int(round(abs(p) * 1e6)) % (2 ** 32) for p in parts]
    return np.random.default_rng(key)


def reader_predictive(validation: Sequence[Any], spread: bool = True, draws: int = DRAWS,
                      rng: np.random.Generator | None = None) -> ReaderPredictive:
    """The run's writer's Se and Sp as drawn from ``validation``: per set a mapping with
    ``tp``, ``fn``, ``tn``, ``fp`` (refusal = positive) or an object with those attributes
    (``stats.refusal.ReaderError``). ``spread`` False: the validation is the run's own labels.
    Raises ``ValueError`` naming the set and field on a bad count, or when no set has a refusal
    or no set an answer by its labels."""
    rows: list[tuple[int, int, int, int]] = []
    for i, s in enumerate(validation):
        got = []
        for f in ("tp", "fn", "tn", "fp"):
            v = s.get(f) if isinstance(s, dict) else getattr(s, f, None)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
                raise ValueError(f"validation set {i}: field {f!r} must be a count (an int >= 0), not {v!r}")
            got.append(int(v))
        rows.append((got[0], got[1], got[2], got[3]))
    if not rows:
        raise ValueError("validation: at least one set of counts {tp, fn, tn, fp} is needed")
    se_counts = [(tp, tp + fn) for tp, fn, _, _ in rows]
    sp_counts = [(tn, tn + fp) for _, _, tn, fp in rows]
    if not any(n for _, n in se_counts):
        raise ValueError("validation: no set has a refusal by its labels (tp + fn = 0): the sensitivity is unmeasured")
    if not any(n for _, n in sp_counts):
        raise ValueError("validation: no set has an answer by its labels (tn + fp = 0): the specificity is unmeasured")
    rng = rng if rng is not None else _seed(*[c for r in rows for c in r], float(spread))
    se = 1.0 / (1.0 + np.exp(-predictive_logits(se_counts, draws, rng, spread)))
    sp = 1.0 / (1.0 + np.exp(-predictive_logits(sp_counts, draws, rng, spread)))
    return ReaderPredictive(se, sp, len(rows), spread)


@dataclass(frozen=True)
class CorrectedFigure:
    """A figure read by an erring reader, corrected (module docstring). ``value`` and ``ci``
    where a two-sided interval at ``level`` is supported (else None); ``upper_bound`` /
    ``lower_bound``: one-sided bounds at ``level`` where it is not (None where none holds or the
    interval is given); ``withheld``: why nothing is said (None when something is). ``raw``: the
    figure as read; ``n``: the answers (or pairs) it rests on; ``range``: the figure's range."""

    raw: float
    value: float | None
    ci: tuple[float, float] | None
    upper_bound: float | None
    lower_bound: float | None
    withheld: str | None
    level: float
    n: int
    effective_n: float
    range: tuple[float, float] = (0.0, 1.0)
    complement: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "ci": list(self.ci) if self.ci else None, "upper_bound": self.upper_bound,
                "lower_bound": self.lower_bound, "withheld": self.withheld, "raw": self.raw, "level": self.level,
                "n": self.n, "effective_n": self.effective_n}

    @property
    def says_something(self) -> bool:
        return self.ci is not None or self.upper_bound is not None or self.lower_bound is not None

    def flipped(self) -> "CorrectedFigure":
        """One minus this rate (a refusal rate among human-unsafe cases -> under-refusal): the
        interval mirrored, an upper bound becoming a lower one."""
        def f(x: float | None) -> float | None:
            return None if x is None else 1.0 - x
        ci = None if self.ci is None else (1.0 - self.ci[1], 1.0 - self.ci[0])
        return CorrectedFigure(1.0 - self.raw, f(self.value), ci, f(self.lower_bound), f(self.upper_bound),
                               self.withheld, self.level, self.n, self.effective_n, self.range, not self.complement)

    def text(self, percent: bool = True, digits: int = 0) -> str:
        """The figure in words: ``12% [8, 17]``, ``at most 6%``, ``at least 40%``, or ``not said``."""
        def s(x: float) -> str:
            return f"{100 * x:.{digits}f}%" if percent else f"{x:.{max(digits, 2)}f}"
        if self.ci is not None and self.value is not None:
            lo, hi = self.ci
            inner = (f"{100 * lo:.{digits}f}, {100 * hi:.{digits}f}" if percent else
                     f"{lo:.{max(digits, 2)}f}, {hi:.{max(digits, 2)}f}")
            return f"{s(self.value)} [{inner}]"
        parts = []
        if self.lower_bound is not None:
            parts.append(f"at least {s(self.lower_bound)}")
        if self.upper_bound is not None:
            parts.append(f"at most {s(self.upper_bound)}")
        if parts:
            return " and ".join(parts) + f" ({100 * self.level:.0f}% bound{'s' if len(parts) > 1 else ''})"
        return "not said"


def _decide(raw: float, value: float, draws: np.ndarray, level: float, lo_r: float, hi_r: float, n: int,
            n_eff: float, why_nothing: str) -> CorrectedFigure:
    """Interval, bound or nothing from the draws (NaN: a reader no better than chance, dropped)
    and the point ``value`` (unclipped); module docstring. The interval is the draws' equal-tailed percentiles
    clipped to the range (a true figure lies in it, so clipping loses no coverage). What is said
    follows the point, not the interval's ends: inside the range, the two-sided interval; at or
    beyond an end, a bound away from it at one-sided ``(1 - level) * SELECTED_SHARE``. Where that says nothing
    (the whole range), a one-sided bound at the level where one lies in the range; else nothing."""
    a = (1 - level) / 2
    chance = float(np.mean(np.isnan(draws)))
    if chance > 1 - level:
        why = (f"the reader may be no better than chance on a new writer ({100 * chance:.0f}% of the predictive's "
               f"draws): the figure could be anywhere in [{lo_r:g}, {hi_r:g}]")
        return CorrectedFigure(raw, None, None, None, None, why, level, n, n_eff, (lo_r, hi_r))
    draws = draws[~np.isnan(draws)]
    lo2 = float(np.quantile(draws, a, method="inverted_cdf"))
    hi2 = float(np.quantile(draws, 1 - a, method="inverted_cdf"))

    def out(value: float | None = None, ci: tuple[float, float] | None = None, upper: float | None = None,
            lower: float | None = None, withheld: str | None = None) -> CorrectedFigure:
        return CorrectedFigure(raw, value, ci, upper, lower, withheld, level, n, n_eff, (lo_r, hi_r))
    lo, hi = max(lo2, lo_r), min(hi2, hi_r)
    inside = math.isfinite(value) and lo_r < value < hi_r
    if inside and (lo > lo_r or hi < hi_r):
        return out(min(hi, max(lo, value)), (lo, hi))
    below = math.isfinite(value) and value <= lo_r
    above = math.isfinite(value) and value >= hi_r
    # the draws that put the figure in its range: the ones consistent with a figure near the end
    # the point reaches (a draw beyond the range contradicts it)
    kept = draws[(draws >= lo_r) & (draws <= hi_r)]
    if not kept.size:
        return out(withheld=why_nothing)
    if below or above:
        # the point at an end (there by selection: module docstring): a bound away from it at
        # one-sided beta = (1 - level) * SELECTED_SHARE, the end the point reaches being the range's
        beta = (1 - level) * SELECTED_SHARE
        b = float(np.quantile(kept, 1 - beta if below else beta, method="inverted_cdf"))
        if below and b < hi_r:
            return out(upper=b)
        if above and b > lo_r:
            return out(lower=b)
    elif math.isfinite(value):
        # the point inside but the interval the whole range: the pivot's one-sided bounds at the
        # level (all draws: the figure is not near an end), each where it says more than the
        # range does
        ub1 = float(np.quantile(draws, level, method="inverted_cdf"))
        lb1 = float(np.quantile(draws, 1 - level, method="inverted_cdf"))
        ub_ok, lb_ok = ub1 < hi_r - (1 - level) * (hi_r - lo_r), lb1 > lo_r + (1 - level) * (hi_r - lo_r)
        if ub_ok or lb_ok:
            return out(upper=ub1 if ub_ok else None, lower=lb1 if lb_ok else None)
    return out(withheld=why_nothing)


def _t_shrink(level: float, clusters: int | None) -> float:
    """``(z / t_{K-1})^2``: the effective size's shrinkage for ``K`` clusters (1 without)."""
    if clusters is None or clusters < 2:
        return 1.0
    from scipy.stats import norm, t

    return float((norm.ppf((1 + level) / 2) / t.ppf((1 + level) / 2, clusters - 1)) ** 2)


def corrected_rate_figure(q: float, n: int, reader: ReaderPredictive, level: float = 0.95,
                          design_effect: float | None = None, clusters: int | None = None) -> CorrectedFigure:
    """The rate ``q`` read over ``n`` answers, corrected with ``reader``'s draws (module
    docstring); ``design_effect`` of the run's clustering (floored at 1; None or NaN: 1),
    ``clusters`` its number of clusters (t on K - 1 df; None: normal)."""
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), not {level!r}")
    if n <= 0 or not math.isfinite(q) or not 0 <= q <= 1:
        raise ValueError(f"a rate needs answers and a share in [0, 1]; got q={q!r}, n={n!r}")
    deff = design_effect if design_effect is not None and math.isfinite(design_effect) else 1.0
    n_eff = n / max(1.0, deff) * _t_shrink(level, clusters)
    rng = _seed(q, n, n_eff, level, reader.se, reader.sp)
    m = reader.sensitivity.size
    qs = rng.beta(q * n_eff + 0.5, (1 - q) * n_eff + 0.5, size=m)
    j = reader.youden
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(j > 0, (qs + reader.specificity - 1.0) / j, np.nan)
    jp = reader.se + reader.sp - 1.0
    value = (q + reader.sp - 1.0) / jp if jp > 0 else float("nan")
    why = (f"the reader's error on a new writer and the run's {n} answers leave the rate anywhere in [0, 1] at "
           f"{100 * level:.0f}% (Se {reader.se:.2f} and Sp {reader.sp:.2f} as pooled)")
    return _decide(q, value, p, level, 0.0, 1.0, int(n), n_eff, why)


def corrected_difference_figure(diff: float, ci: Sequence[float], n: int, reader: ReaderPredictive,
                                level: float = 0.95) -> CorrectedFigure:
    """A difference of two rates read by the same reader (the context shift), corrected as
    ``d / J`` draw by draw: ``d`` drawn normal on each side of ``diff`` with the spread of its
    own interval ``ci`` at ``level`` (a clustered bootstrap's); the figure's range [-1, 1]."""
    lo, hi = float(ci[0]), float(ci[1])
    if not all(math.isfinite(x) for x in (diff, lo, hi)):
        raise ValueError("the raw difference needs a finite value and interval")
    from statistics import NormalDist

    z = NormalDist().inv_cdf((1 + level) / 2)
    rng = _seed(diff, lo, hi, n, level, reader.se, reader.sp)
    m = reader.sensitivity.size
    e = rng.standard_normal(m)
    d = diff + np.where(e < 0, (diff - lo) / z, (hi - diff) / z) * e
    j = reader.youden
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(j > 0, d / j, np.nan)
    jp = reader.se + reader.sp - 1.0
    value = diff / jp if jp > 0 else float("nan")
    why = (f"the reader's error on a new writer and the raw shift's interval leave the corrected shift anywhere in "
           f"[-1, 1] at {100 * level:.0f}%")
    return _decide(diff, value, p, level, -1.0, 1.0, int(n), float(n), why)


def _clustered(reads: np.ndarray, queries: Sequence[Any]) -> tuple[float, int]:
    """The design effect of the share of ``reads`` clustered by ``queries`` (NaN where
    undefined) and the number of clusters."""
    from .bootstrap import cluster_labels, proportion_design_effect

    labels = cluster_labels(list(queries))
    k = int(labels.max()) + 1 if labels.size else 0
    return proportion_design_effect(reads, np.ones_like(reads), labels), k


def corrected_refusal_rate(reads: Sequence[int], queries: Sequence[Any], validation: Sequence[Any],
                           level: float = 0.95, *, own: bool = False) -> CorrectedFigure:
    """A chatbot's refusal rate read by a refusal classifier, corrected for the classifier's
    measured error, with an interval that carries the run's clustering, the classifier's error on
    its validation sets and how that error differs from writer to writer.

    ``reads``: the classifier's reading of each answer, 1 = refusal, 0 = answer; ``queries``: the
    query of each answer (the clustering unit: a query's answers go together); ``validation``:
    one mapping per validation set with the counts ``tp``, ``fn``, ``tn``, ``fp`` (refusal =
    positive: ``tp`` labelled refusals the classifier read as refusals); ``own`` True: the
    validation is labels of this run's own answers (no writer-to-writer spread to carry).

    Returns a ``CorrectedFigure``: ``to_dict()`` has ``value`` and ``ci`` where a two-sided
    interval at ``level`` is supported, else ``upper_bound`` / ``lower_bound`` (one-sided at
    ``level``), and ``withheld`` (the reason) where no bound says anything. Deterministic: the
    same inputs give the same figure. Raises ``ValueError`` on bad input (naming the field)."""
    r = np.asarray(list(reads), dtype=float)
    if r.ndim != 1 or not r.size:
        raise ValueError("reads: at least one reading (0 or 1) is needed")
    if not np.all((r == 0) | (r == 1)):
        bad = int(np.flatnonzero(~((r == 0) | (r == 1)))[0])
        raise ValueError(f"reads[{bad}]: a reading is 0 (answered) or 1 (refused), not {reads[bad]!r}")
    if len(queries) != r.size:
        raise ValueError(f"queries: one per reading ({r.size}), not {len(queries)}")
    reader = reader_predictive(validation, spread=not own)
    deff, k = _clustered(r, queries)
    return corrected_rate_figure(float(r.mean()), int(r.size), reader, level, deff, k)
