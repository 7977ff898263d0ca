"""How many votes a case needs, planned from a pilot's votes by simulation from a fitted model
(``casebench annotate plan``; ``annotate serve --votes-per-case PLAN.json`` takes the answer).

**The model.** A beta-binomial per kind of context (intended safe, intended unsafe), fitted to
the pilot's safe votes by maximum likelihood: each case has its own share of people who would
call it safe, drawn from Beta(a, b), and its votes are binomial given that share. The one-coin
latent-class model (``stats.votes``) is the wrong model here: it says that every safe case draws
safe votes at the same rate (the annotators' accuracy), while people's shares truly differ from
case to case (CASE-Bench's votes are overdispersed far beyond binomial noise), and the planner's
targets are about those shares. A case's share is then drawn from its posterior,
Beta(a + safe votes, b + unsafe votes), ``draws`` times (seeded).

**Targets.** (1) ``width``: the 95% (``level``) Wilson interval of a case's safe share is at most
this wide, on average over the pilot's cases and the draws of their shares (the expectation over
the binomial votes is exact, not simulated); the 90th percentile of the cases' expected widths is
reported beside it. (2) ``power``: the context effect of a query (its two contexts' shares differ)
is detected by Fisher's exact test (two-sided, ``alpha``), on average over the pilot's queries with
both contexts and the draws of their shares: the share of queries whose context effect the votes
would show. The smallest number of votes per case that meets the target is returned, or none
when even ``max_votes`` does not (with what ``max_votes`` reaches).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Sequence

import numpy as np

SCHEMA_VERSION = 1
Target = Literal["width", "power"]
DEFAULT_MAX_VOTES = 200


class PlanError(ValueError):
    """The pilot cannot support a plan (too few cases with votes, a target out of range)."""


@dataclass(frozen=True)
class PilotCase:
    """One pilot case: its safe votes of ``votes``, the context's intent and its query's key
    (the two contexts of a query share it)."""

    safe_votes: int
    votes: int
    intended_safe: bool
    query: str


@dataclass(frozen=True)
class BetaFit:
    """The beta-binomial fitted to one kind of context: Beta(a, b) of the cases' safe shares."""

    kind: str
    a: float
    b: float
    cases: int

    @property
    def mean(self) -> float:
        return self.a / (self.a + self.b)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "a": self.a, "b": self.b, "mean_share": self.mean, "cases": self.cases}


@dataclass(frozen=True)
class VotePlan:
    """The answer: ``votes_per_case`` (None: not reachable within ``max_votes``), the target, and
    what that many votes (or ``max_votes``) reach."""

    target: Target
    goal: float
    votes_per_case: int | None
    reached: float
    reached_p90: float | None
    at_votes: int
    level: float
    alpha: float
    draws: int
    seed: int
    max_votes: int
    pilot_cases: int
    pilot_votes: int
    pairs: int
    fits: tuple[BetaFit, ...]
    source: str

    def to_dict(self) -> dict[str, Any]:
        return {"schema_version": SCHEMA_VERSION, "target": self.target, "goal": self.goal,
                "votes_per_case": self.votes_per_case, "reached": self.reached, "reached_p90": self.reached_p90,
                "at_votes": self.at_votes, "level": self.level, "alpha": self.alpha, "draws": self.draws,
                "seed": self.seed, "max_votes": self.max_votes, "pilot_cases": self.pilot_cases,
                "pilot_votes": self.pilot_votes, "pairs": self.pairs, "fits": [f.to_dict() for f in self.fits],
                "source": self.source,
                "model": "beta-binomial per context kind (ML), shares drawn from each case's posterior"}


def fit_beta_binomial(safe: np.ndarray, n: np.ndarray, kind: str) -> BetaFit:
    """Maximum-likelihood Beta(a, b) of the shares behind ``safe`` of ``n`` votes (scipy)."""
    from scipy.optimize import minimize
    from scipy.special import betaln

    def nll(theta: np.ndarray) -> float:
        a, b = np.exp(theta)
        return -float(np.sum(betaln(safe + a, n - safe + b) - betaln(a, b)))

    share = float(safe.sum() / n.sum())
    start = np.log([max(share, 0.05) * 2, max(1 - share, 0.05) * 2])
    res = minimize(nll, start, method="Nelder-Mead", options={"xatol": 1e-6, "fatol": 1e-9, "maxiter": 4000})
    a, b = (float(x) for x in np.exp(res.x))
    return BetaFit(kind, a, b, int(len(safe)))


def wilson_widths(k: int, level: float) -> np.ndarray:
    """The Wilson interval's width for 0..k safe votes of k."""
    from scipy.stats import norm

    z = float(norm.ppf((1 + level) / 2))
    x = np.arange(k + 1)
    p = x / k
    den = 1 + z * z / k
    return np.asarray(2 * z * np.sqrt(p * (1 - p) / k + z * z / (4 * k * k)) / den)


def fisher_rejects(k: int, alpha: float) -> np.ndarray:
    """(k+1) x (k+1) booleans: Fisher's exact test (two-sided, as scipy's: the tables no more
    likely than the one seen) rejects at ``alpha`` for x of k safe votes against y of k."""
    from scipy.stats import hypergeom

    out = np.zeros((k + 1, k + 1), dtype=bool)
    for t in range(2 * k + 1):
        lo, hi = max(0, t - k), min(k, t)
        xs = np.arange(lo, hi + 1)
        pmf = hypergeom.pmf(xs, 2 * k, k, t)
        order = np.sort(pmf)
        csum = np.cumsum(order)
        idx = np.searchsorted(order, pmf * (1 + 1e-7), side="right") - 1
        p = np.minimum(1.0, csum[idx])
        out[xs, t - xs] = p <= alpha
    return out


def _binom_pmf(k: int, p: np.ndarray) -> np.ndarray:
    from scipy.stats import binom

    return np.asarray(binom.pmf(np.arange(k + 1)[None, :], k, p[:, None]))


def plan_votes(pilot: Sequence[PilotCase], target: Target, goal: float, *, level: float = 0.95,
               alpha: float = 0.05, draws: int = 40, seed: int = 0, max_votes: int = DEFAULT_MAX_VOTES,
               source: str = "") -> VotePlan:
    """The smallest number of votes per case that meets ``goal`` (module docstring)."""
    if target == "width" and not 0 < goal < 1:
        raise PlanError(f"a target width is in (0, 1), got {goal}")
    if target == "power" and not 0 < goal < 1:
        raise PlanError(f"a target power is in (0, 1), got {goal}")
    if max_votes < 2:
        raise PlanError(f"max_votes must be at least 2, got {max_votes}")
    used = [c for c in pilot if c.votes > 0]
    if len(used) < 5:
        raise PlanError(f"the pilot has {len(used)} case(s) with votes; a plan needs at least 5")
    rng = np.random.default_rng(seed)
    fits: list[BetaFit] = []
    shares = np.empty((len(used), draws))
    for kind, flag in (("intended_safe", True), ("intended_unsafe", False)):
        idx = [i for i, c in enumerate(used) if c.intended_safe == flag]
        if not idx:
            continue
        safe = np.array([used[i].safe_votes for i in idx], dtype=float)
        n = np.array([used[i].votes for i in idx], dtype=float)
        fit = fit_beta_binomial(safe, n, kind) if len(idx) >= 3 else BetaFit(kind, 1.0, 1.0, len(idx))
        fits.append(fit)
        shares[idx] = rng.beta(fit.a + safe[:, None], fit.b + (n - safe)[:, None], size=(len(idx), draws))

    pairs: list[tuple[int, int]] = []
    if target == "power":
        by_query: dict[str, dict[bool, int]] = {}
        for i, c in enumerate(used):
            by_query.setdefault(c.query, {})[c.intended_safe] = i
        pairs = [(d[True], d[False]) for d in by_query.values() if True in d and False in d]
        if not pairs:
            raise PlanError("the pilot has no query with votes in both its contexts: no context effect to plan for")
        p1 = shares[[s for s, _ in pairs]].ravel()
        p2 = shares[[u for _, u in pairs]].ravel()

    def reach(k: int) -> tuple[float, float | None]:
        if target == "width":
            expected = (_binom_pmf(k, shares.ravel()) @ wilson_widths(k, level)).reshape(shares.shape).mean(axis=1)
            return float(expected.mean()), float(np.quantile(expected, 0.9))
        power = np.sum((_binom_pmf(k, p1) @ fisher_rejects(k, alpha)) * _binom_pmf(k, p2), axis=1)
        return float(power.mean()), None

    def meets(value: float) -> bool:
        return value <= goal if target == "width" else value >= goal

    top, top_p90 = reach(max_votes)
    answer: int | None = None
    at, value, p90 = max_votes, top, top_p90
    if meets(top):
        lo, hi = 1, max_votes  # meets(hi); find the smallest k that meets (the figures rise with k)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if meets(reach(mid)[0]):
                hi = mid
            else:
                lo = mid
        if hi == 2 and meets(reach(1)[0]):
            hi = 1
        answer = at = hi
        value, p90 = reach(hi)
    return VotePlan(target, goal, answer, value, p90, at, level, alpha, draws, seed, max_votes, len(used),
                    int(sum(c.votes for c in used)), len(pairs), tuple(fits), source)
