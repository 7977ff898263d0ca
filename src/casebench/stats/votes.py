"""Votes that weigh their voters: annotator ability, each case's posterior P(safe), agreement over
time and drift, from the individual votes of a study (``casebench annotate stats``).

**The model.** A two-class latent-class model of the votes (Dawid and Skene, 1979) in its
one-coin form: each case is safe or unsafe (prior ``prior_safe``), and annotator ``j`` gives the
case's class with probability ``ability_j`` whichever the class is. It is fitted by EM to the MAP
estimate under a Beta(2, 2) prior on each ability and on the prior (add-one smoothing: an
annotator who agrees with every posterior gets an ability just below 1, never exactly 1, which
would let one vote decide a case). One accuracy rather than a sensitivity and a specificity per
annotator: a study hands each annotator some tens of cases, split over two classes, so two rates
would each rest on half as many votes; the one-coin model halves the parameters, and the
ability it gives is what a ranking of annotators needs.

Why not a library: crowd-kit (Toloka's, maintained) fits Dawid-Skene, but it requires pandas,
scikit-learn, pyarrow, nltk and transformers unconditionally, far too heavy for the annotation
app's ``web`` extra (the admin page fits the model live); the EM below is 30 lines of numpy.

**Intervals.** A nonparametric bootstrap over cases (seeded): cases are drawn with replacement
and the model refitted; an annotator's ability interval is the percentile interval of their
refitted ability (over the resamples that hold one of their votes); a case's posterior interval is
the percentile interval of its posterior under each resample's fitted abilities and prior (what
the uncertainty in the abilities does to the weighed label).

**Agreement.** Krippendorff's alpha (nominal; the ``krippendorff`` package) over all votes and
within each window of ``window`` consecutive votes (by the order they were cast), each with a
percentile bootstrap interval over cases.

**Drift.** Two alarms. (1) The latest window's votes agree with the earlier votes (alpha of the
pairs one from each, ``cross_alpha``) clearly less than the earlier votes agree among themselves
(the same pair-counting alpha): the bootstrap interval of the difference lies wholly below zero
and the drop is at least ``MIN_DROP``. Agreement *within* a late window alone would miss a cohort
that votes consistently against everybody else, so the comparison is across. (2) Annotators who
agree with the consensus of the others (the posterior leaving their own vote out, 0.5 cut) less
often than a coin would: a one-sided binomial test against 0.5, Benjamini-Hochberg adjusted over
annotators; an honest but weak annotator (ability 0.55) is not flagged, one voting against the
crowd is, with the windows their votes fell in.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Sequence

import numpy as np

#: version of the ``to_dict`` layout of ``VoteStats``
SCHEMA_VERSION = 1
#: the smallest drop in alpha (latest window against the earlier votes) that raises the alarm
MIN_DROP = 0.10
#: an annotator needs this many votes to be tested against the consensus
MIN_FLAG_VOTES = 10
#: default bootstrap resamples of cases
DEFAULT_BOOT = 400
#: EM stops when no posterior moves more than this
_TOL = 1e-9
_MAX_ITER = 1000


class VotesError(ValueError):
    """The votes cannot be modelled (none, or an unknown annotator or case)."""


@dataclass(frozen=True)
class Vote:
    """One vote as cast: the case (the store's id), its dataset index, who voted and what."""

    case: int
    index: int
    annotator: str
    safe: bool


@dataclass(frozen=True)
class Interval:
    """A percentile bootstrap interval at ``level``; ``None`` bounds when nothing was resampled."""

    low: float | None
    high: float | None
    level: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class AnnotatorAbility:
    """An annotator's ability (P(their vote is the case's latent class)), with its interval, and
    how often they agree with the others' consensus (the posterior without their vote)."""

    annotator: str
    ability: float
    interval: Interval
    votes: int
    agrees_with_others: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"annotator": self.annotator, "ability": self.ability, "interval": self.interval.to_dict(),
                "votes": self.votes, "agrees_with_others": self.agrees_with_others}


@dataclass(frozen=True)
class ItemPosterior:
    """A case's posterior P(safe) given every vote and every ability, beside the plain share."""

    case: int
    index: int
    posterior_safe: float
    interval: Interval
    votes: int
    safe_votes: int

    @property
    def vote_share(self) -> float:
        """The plain share of safe votes (every vote alike)."""
        return self.safe_votes / self.votes

    def to_dict(self) -> dict[str, Any]:
        return {"case": self.case, "index": self.index, "posterior_safe": self.posterior_safe,
                "interval": self.interval.to_dict(), "votes": self.votes, "safe_votes": self.safe_votes,
                "vote_share": self.vote_share}


@dataclass(frozen=True)
class Alpha:
    """Krippendorff's alpha (nominal) with its bootstrap interval; ``alpha`` is None when it is
    undefined (no case with two votes, or every vote the same)."""

    alpha: float | None
    interval: Interval
    votes: int
    pairable_cases: int

    def to_dict(self) -> dict[str, Any]:
        return {"alpha": self.alpha, "interval": self.interval.to_dict(), "votes": self.votes,
                "pairable_cases": self.pairable_cases}


@dataclass(frozen=True)
class Window:
    """Votes ``first``..``last`` (1-based, in the order cast) and the agreement among them."""

    window: int
    first: int
    last: int
    agreement: Alpha

    def to_dict(self) -> dict[str, Any]:
        return {"window": self.window, "first_vote": self.first, "last_vote": self.last,
                "agreement": self.agreement.to_dict()}


@dataclass(frozen=True)
class Agreement:
    """Krippendorff's alpha over all votes and per window of ``window_votes`` votes."""

    overall: Alpha
    window_votes: int
    windows: tuple[Window, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"overall": self.overall.to_dict(), "window_votes": self.window_votes,
                "windows": [w.to_dict() for w in self.windows]}


@dataclass(frozen=True)
class FlaggedAnnotator:
    """An annotator who agrees with the others' consensus less often than chance."""

    annotator: str
    votes: int
    agrees_with_others: float
    p_adjusted: float
    windows: tuple[int, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"annotator": self.annotator, "votes": self.votes, "agrees_with_others": self.agrees_with_others,
                "p_adjusted": self.p_adjusted, "windows": list(self.windows)}


@dataclass(frozen=True)
class Drift:
    """Whether agreement fell in the latest window, or a cohort votes against the rest.

    ``latest_vs_earlier``: pair-counting alpha between the latest window's votes and the earlier
    votes; ``earlier``: the same among the earlier votes; ``difference`` the first minus the
    second, with its bootstrap interval. ``rest_agrees``: how often the unflagged annotators
    agree with the others' consensus (beside each flagged annotator's figure)."""

    alert: bool
    reasons: tuple[str, ...]
    window: int | None
    latest_vs_earlier: float | None
    earlier: float | None
    difference: float | None
    difference_interval: Interval
    min_drop: float
    flagged: tuple[FlaggedAnnotator, ...]
    rest_agrees: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"alert": self.alert, "reasons": list(self.reasons), "window": self.window,
                "latest_vs_earlier": self.latest_vs_earlier, "earlier": self.earlier,
                "difference": self.difference, "difference_interval": self.difference_interval.to_dict(),
                "min_drop": self.min_drop, "flagged": [f.to_dict() for f in self.flagged],
                "rest_agrees": self.rest_agrees}


@dataclass(frozen=True)
class Fit:
    """The fitted one-coin model: the prior P(safe), each annotator's ability, each case's
    posterior (in the order of ``VoteArrays``)."""

    prior_safe: float
    ability: tuple[float, ...]
    posterior: tuple[float, ...]
    iterations: int

    def to_dict(self) -> dict[str, Any]:
        return {"prior_safe": self.prior_safe, "iterations": self.iterations}


@dataclass(frozen=True)
class VoteStats:
    """Everything ``annotate stats`` reports: abilities, posteriors, agreement, drift."""

    annotators: tuple[AnnotatorAbility, ...]
    items: tuple[ItemPosterior, ...]
    agreement: Agreement
    drift: Drift
    prior_safe: float
    votes: int
    n_boot: int
    seed: int
    level: float
    model: str = "Dawid-Skene, one coin (one accuracy per annotator), MAP with Beta(2,2) priors, EM"

    def to_dict(self) -> dict[str, Any]:
        return {"schema_version": SCHEMA_VERSION, "model": self.model, "prior_safe": self.prior_safe,
                "votes": self.votes, "bootstrap": self.n_boot, "seed": self.seed, "level": self.level,
                "annotators": [a.to_dict() for a in self.annotators], "items": [i.to_dict() for i in self.items],
                "agreement": self.agreement.to_dict(), "drift": self.drift.to_dict()}


@dataclass(frozen=True)
class VoteArrays:
    """The votes as index arrays (cases and annotators numbered in order of first appearance)."""

    case_ids: tuple[int, ...]
    indexes: tuple[int, ...]
    annotators: tuple[str, ...]
    case: np.ndarray      # per vote: case number
    annotator: np.ndarray  # per vote: annotator number
    safe: np.ndarray      # per vote: 1 safe, 0 unsafe

    @classmethod
    def of(cls, votes: Sequence[Vote]) -> "VoteArrays":
        if not votes:
            raise VotesError("there are no votes to model")
        cases: dict[int, int] = {}
        index: dict[int, int] = {}
        people: dict[str, int] = {}
        c = np.empty(len(votes), dtype=np.int64)
        a = np.empty(len(votes), dtype=np.int64)
        s = np.empty(len(votes), dtype=np.float64)
        for k, v in enumerate(votes):
            c[k] = cases.setdefault(v.case, len(cases))
            index.setdefault(v.case, v.index)
            a[k] = people.setdefault(v.annotator, len(people))
            s[k] = 1.0 if v.safe else 0.0
        return cls(tuple(cases), tuple(index[k] for k in cases), tuple(people), c, a, s)


def _logit(p: np.ndarray | float) -> Any:
    return np.log(p) - np.log1p(-np.asarray(p))


def fit_one_coin(case: np.ndarray, annotator: np.ndarray, safe: np.ndarray, n_cases: int,
                 n_annotators: int) -> Fit:
    """EM for the one-coin Dawid-Skene model (module docstring), started from the smoothed vote
    share, so the solution is the one in which annotators are better than chance on the whole."""
    n = np.bincount(case, minlength=n_cases).astype(float)
    k = np.bincount(case, weights=safe, minlength=n_cases)
    t = (k + 1.0) / (n + 2.0)
    sign = 2.0 * safe - 1.0
    per = np.bincount(annotator, minlength=n_annotators).astype(float)
    acc = np.full(n_annotators, 0.7)
    prior = 0.5
    it = 0
    for it in range(1, _MAX_ITER + 1):
        right = np.where(safe > 0.5, t[case], 1.0 - t[case])
        acc = (np.bincount(annotator, weights=right, minlength=n_annotators) + 1.0) / (per + 2.0)
        prior = (t.sum() + 1.0) / (n_cases + 2.0)
        new = posterior_of(case, annotator, sign, acc, prior, n_cases)
        moved = float(np.max(np.abs(new - t)))
        t = new
        if moved < _TOL:
            break
    return Fit(float(prior), tuple(float(x) for x in acc), tuple(float(x) for x in t), it)


def posterior_of(case: np.ndarray, annotator: np.ndarray, sign: np.ndarray, acc: np.ndarray, prior: float,
                 n_cases: int) -> np.ndarray:
    """P(safe) of each case given its votes (``sign`` +1 safe, -1 unsafe), abilities and prior."""
    log_odds = float(_logit(prior)) + np.bincount(case, weights=sign * _logit(acc)[annotator], minlength=n_cases)
    return np.asarray(1.0 / (1.0 + np.exp(-log_odds)), dtype=float)


def _interval(draws: np.ndarray, level: float) -> Interval:
    draws = draws[np.isfinite(draws)]
    if not draws.size:
        return Interval(None, None, level)
    lo, hi = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2])
    return Interval(float(lo), float(hi), level)


def _counts(case: np.ndarray, safe: np.ndarray, n_cases: int) -> np.ndarray:
    """Cases x (safe, unsafe) value counts."""
    k = np.bincount(case, weights=safe, minlength=n_cases)
    n = np.bincount(case, minlength=n_cases).astype(float)
    return np.column_stack([k, n - k])


def _kalpha(counts: np.ndarray) -> float | None:
    """Krippendorff's alpha (nominal) from value counts; None when undefined."""
    import krippendorff

    pairable = counts[counts.sum(axis=1) >= 2]
    if not pairable.size or not (pairable[:, 0].sum() and pairable[:, 1].sum()):
        return None
    return float(krippendorff.alpha(value_counts=pairable, level_of_measurement="nominal"))


def alpha_with_interval(counts: np.ndarray, rng: np.random.Generator, n_boot: int, level: float) -> Alpha:
    """Krippendorff's alpha of value counts, with a percentile bootstrap interval over cases."""
    point = _kalpha(counts)
    pairable = int((counts.sum(axis=1) >= 2).sum())
    draws = np.full(n_boot, np.nan)
    if point is not None and len(counts) > 1:
        for b in range(n_boot):
            got = _kalpha(counts[rng.integers(0, len(counts), len(counts))])
            draws[b] = np.nan if got is None else got
    return Alpha(point, _interval(draws, level), int(counts.sum()), pairable)


def pair_alpha(a: np.ndarray, b: np.ndarray | None = None) -> float | None:
    """Alpha by counting pairs of votes on the same case: 1 - (share of pairs that disagree) /
    (the share expected by chance from the pooled votes). ``b`` None: pairs within ``a`` (cases x
    (safe, unsafe)); else pairs with one vote from ``a`` and one from ``b`` (a cross-group
    agreement; the same number for two groups drawn from one crowd). Krippendorff's own alpha
    weights each case's pairs by 1 / (votes - 1); counting pairs alike makes within and across
    comparable."""
    if b is None:
        pairs = (a.sum(axis=1) * (a.sum(axis=1) - 1)).sum()
        disagree = (2 * a[:, 0] * a[:, 1]).sum()
        pooled = a[a.sum(axis=1) >= 2]
    else:
        na, nb = a.sum(axis=1), b.sum(axis=1)
        both = (na > 0) & (nb > 0)
        pairs = (na * nb)[both].sum()
        disagree = (a[:, 0] * b[:, 1] + a[:, 1] * b[:, 0])[both].sum()
        pooled = (a + b)[both]
    n = pooled.sum()
    if pairs <= 0 or n < 2:
        return None
    expected = 2 * pooled[:, 0].sum() * pooled[:, 1].sum() / (n * (n - 1))
    if expected <= 0:
        return None
    return float(1.0 - (disagree / pairs) / expected)


def _bh(p: np.ndarray) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values."""
    m = len(p)
    if not m:
        return p
    order = np.argsort(p)
    adj = np.empty(m)
    running = 1.0
    for rank in range(m, 0, -1):
        i = order[rank - 1]
        running = min(running, p[i] * m / rank)
        adj[i] = running
    return adj


def vote_stats(votes: Sequence[Vote], *, n_boot: int = DEFAULT_BOOT, seed: int = 0, level: float = 0.95,
               window: int | None = None, alpha: float = 0.05) -> VoteStats:
    """Abilities, posteriors, agreement over time and drift of ``votes`` (in the order cast).

    ``window``: votes per window of time (default: a sixth of the votes, at least 30);
    ``alpha``: the significance level of the flags on annotators."""
    if not 0 < level < 1:
        raise VotesError(f"the interval level must be in (0, 1), got {level}")
    if n_boot < 0:
        raise VotesError(f"bootstrap resamples must be 0 or more, got {n_boot}")
    v = VoteArrays.of(votes)
    n_cases, n_people = len(v.case_ids), len(v.annotators)
    fit = fit_one_coin(v.case, v.annotator, v.safe, n_cases, n_people)
    acc = np.array(fit.ability)
    sign = 2.0 * v.safe - 1.0
    rng = np.random.default_rng(seed)

    # the bootstrap over cases: refit, keep abilities and the original cases' posteriors
    by_case = [np.flatnonzero(v.case == i) for i in range(n_cases)]
    boot_acc = np.full((n_boot, n_people), np.nan)
    boot_post = np.full((n_boot, n_cases), np.nan)
    for b in range(n_boot):
        pick = rng.integers(0, n_cases, n_cases)
        rows = np.concatenate([by_case[i] for i in pick])
        new_case = np.repeat(np.arange(n_cases), [len(by_case[i]) for i in pick])
        f = fit_one_coin(new_case, v.annotator[rows], v.safe[rows], n_cases, n_people)
        present = np.bincount(v.annotator[rows], minlength=n_people) > 0
        a_b = np.where(present, np.array(f.ability), acc)
        boot_acc[b, present] = a_b[present]
        boot_post[b] = posterior_of(v.case, v.annotator, sign, a_b, f.prior_safe, n_cases)

    # each annotator against the others' consensus: the posterior with their own vote taken out
    post = np.array(fit.posterior)
    own = sign * _logit(acc)[v.annotator]
    loo = 1.0 / (1.0 + np.exp(-(_logit(np.clip(post[v.case], 1e-15, 1 - 1e-15)) - own)))
    agrees = ((loo > 0.5) == (v.safe > 0.5)).astype(float)
    per_votes = np.bincount(v.annotator, minlength=n_people)
    per_agree = np.bincount(v.annotator, weights=agrees, minlength=n_people)

    annotators = tuple(sorted(
        (AnnotatorAbility(v.annotators[j], float(acc[j]), _interval(boot_acc[:, j], level), int(per_votes[j]),
                          float(per_agree[j] / per_votes[j]) if per_votes[j] else None)
         for j in range(n_people)), key=lambda x: -x.ability))
    safe_votes = np.bincount(v.case, weights=v.safe, minlength=n_cases)
    n_votes = np.bincount(v.case, minlength=n_cases)
    items = tuple(sorted(
        (ItemPosterior(v.case_ids[i], v.indexes[i], float(post[i]), _interval(boot_post[:, i], level),
                       int(n_votes[i]), int(safe_votes[i])) for i in range(n_cases)), key=lambda x: x.index))

    agreement = _agreement(v, rng, n_boot, level, window)
    drift = _drift(v, agreement, per_votes, per_agree, rng, n_boot, level, alpha)
    return VoteStats(annotators, items, agreement, drift, fit.prior_safe, len(votes), n_boot, seed, level)


def _window_of(n_votes: int, window: int | None) -> int:
    if window is not None:
        if window < 2:
            raise VotesError(f"a window holds at least 2 votes, got {window}")
        return window
    return max(30, math.ceil(n_votes / 6))


def _windows(n: int, size: int) -> list[tuple[int, int]]:
    """[start, stop) of consecutive windows of ``size`` votes; a last window shorter than half a
    window joins the one before (too few votes to say anything on its own)."""
    bounds = [(s, min(s + size, n)) for s in range(0, n, size)]
    if len(bounds) > 1 and bounds[-1][1] - bounds[-1][0] < size / 2:
        bounds[-2:] = [(bounds[-2][0], n)]
    return bounds


def _agreement(v: VoteArrays, rng: np.random.Generator, n_boot: int, level: float,
               window: int | None) -> Agreement:
    n_cases = len(v.case_ids)
    overall = alpha_with_interval(_counts(v.case, v.safe, n_cases), rng, n_boot, level)
    size = _window_of(len(v.case), window)
    out = []
    for w, (start, stop) in enumerate(_windows(len(v.case), size), start=1):
        counts = _counts(v.case[start:stop], v.safe[start:stop], n_cases)
        out.append(Window(w, start + 1, stop, alpha_with_interval(counts, rng, n_boot, level)))
    return Agreement(overall, size, tuple(out))


def _drift(v: VoteArrays, agreement: Agreement, per_votes: np.ndarray, per_agree: np.ndarray,
           rng: np.random.Generator, n_boot: int, level: float, alpha: float) -> Drift:
    from scipy.stats import binomtest

    n_cases = len(v.case_ids)
    reasons: list[str] = []
    latest = agreement.windows[-1] if len(agreement.windows) > 1 else None
    cross = earlier = diff = None
    diff_iv = Interval(None, None, level)
    if latest is not None:
        cut = latest.first - 1
        late = _counts(v.case[cut:], v.safe[cut:], n_cases)
        early = _counts(v.case[:cut], v.safe[:cut], n_cases)
        cross, earlier = pair_alpha(late, early), pair_alpha(early)
        if cross is not None and earlier is not None:
            diff = cross - earlier
            draws = np.full(n_boot, np.nan)
            for b in range(n_boot):
                pick = rng.integers(0, n_cases, n_cases)
                c_b, e_b = pair_alpha(late[pick], early[pick]), pair_alpha(early[pick])
                if c_b is not None and e_b is not None:
                    draws[b] = c_b - e_b
            diff_iv = _interval(draws, level)
            if diff_iv.high is not None and diff_iv.high < 0 and -diff >= MIN_DROP:
                reasons.append(
                    f"agreement fell in window {latest.window} (votes {latest.first}-{latest.last}): its votes agree "
                    f"with the earlier votes at alpha {cross:.2f}, the earlier votes among themselves at "
                    f"{earlier:.2f} (difference {diff:+.2f}, {level:.0%} interval {diff_iv.low:+.2f} to "
                    f"{diff_iv.high:+.2f})")

    # annotators below chance against the others' consensus
    testable = [j for j in range(len(v.annotators)) if per_votes[j] >= MIN_FLAG_VOTES]
    p = np.array([binomtest(int(per_agree[j]), int(per_votes[j]), 0.5, alternative="less").pvalue
                  for j in testable])
    adj = _bh(p) if len(p) else p
    flagged: list[FlaggedAnnotator] = []
    bounds = [(w.window, w.first - 1, w.last) for w in agreement.windows]
    order = np.arange(len(v.case))
    for j, q in zip(testable, adj):
        if q < alpha:
            mine = order[v.annotator == j]
            wins = tuple(w for w, s, e in bounds if ((mine >= s) & (mine < e)).any())
            flagged.append(FlaggedAnnotator(v.annotators[j], int(per_votes[j]),
                                            float(per_agree[j] / per_votes[j]), float(q), wins))
    rest = [j for j in range(len(v.annotators)) if v.annotators[j] not in {f.annotator for f in flagged}]
    rest_votes = per_votes[rest].sum() if rest else 0
    rest_agrees = float(per_agree[rest].sum() / rest_votes) if rest_votes else None
    if flagged:
        all_wins = sorted({w for f in flagged for w in f.windows})
        reasons.append(
            f"{len(flagged)} annotator(s) agree with the others' consensus less often than chance: "
            + ", ".join(f"{f.annotator} ({f.agrees_with_others:.0%} of {f.votes})" for f in flagged)
            + (f", against {rest_agrees:.0%} for the rest" if rest_agrees is not None else "")
            + f"; their votes fall in window(s) {', '.join(map(str, all_wins))}")
    return Drift(bool(reasons), tuple(reasons), latest.window if latest else None, cross, earlier, diff, diff_iv,
                 MIN_DROP, tuple(flagged), rest_agrees)
