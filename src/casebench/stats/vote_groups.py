"""Agreement within and across groups of annotators, and each group's safe share per case
(``casebench annotate stats --by TRAIT``), the groups made by a trait the annotators chose to
tell (``annotate.traits``); annotators who did not tell it form the group ``NOT_GIVEN``.

Within a group: Krippendorff's alpha (nominal) of the group's own votes, with a bootstrap
interval over cases (``stats.votes.alpha_with_interval``). Across two groups: the pair-counting
alpha of the pairs of votes on the same case one from each group (``stats.votes.pair_alpha``),
with its bootstrap interval; two groups drawn from one crowd agree across as they agree within, so
an across figure clearly below both within figures says the groups see the cases differently.
Each group's safe share of each case comes with its Wilson interval.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations
from typing import Any, Mapping, Sequence

import numpy as np

from .votes import Alpha, Interval, Vote, VoteArrays, VotesError, _counts, _interval, alpha_with_interval, pair_alpha

SCHEMA_VERSION = 1
#: the group of the annotators who did not tell the trait
NOT_GIVEN = "(not given)"


@dataclass(frozen=True)
class GroupShare:
    """A group's safe votes on one case, their share and its Wilson interval."""

    case: int
    index: int
    safe_votes: int
    votes: int
    share: float
    interval: Interval

    def to_dict(self) -> dict[str, Any]:
        return {"case": self.case, "index": self.index, "safe_votes": self.safe_votes, "votes": self.votes,
                "share": self.share, "interval": self.interval.to_dict()}


@dataclass(frozen=True)
class Group:
    """One group: its annotators, their votes, their agreement among themselves and their shares."""

    value: str
    annotators: int
    votes: int
    within: Alpha
    shares: tuple[GroupShare, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"group": self.value, "annotators": self.annotators, "votes": self.votes,
                "within": self.within.to_dict(), "shares": [s.to_dict() for s in self.shares]}


@dataclass(frozen=True)
class Across:
    """Agreement between two groups' votes on the same cases."""

    first: str
    second: str
    alpha: float | None
    interval: Interval
    cases: int

    def to_dict(self) -> dict[str, Any]:
        return {"groups": [self.first, self.second], "alpha": self.alpha, "interval": self.interval.to_dict(),
                "cases": self.cases}


@dataclass(frozen=True)
class TraitGroups:
    """``annotate stats --by TRAIT``."""

    trait: str
    groups: tuple[Group, ...]
    across: tuple[Across, ...]
    n_boot: int
    seed: int
    level: float

    def to_dict(self) -> dict[str, Any]:
        return {"schema_version": SCHEMA_VERSION, "trait": self.trait, "bootstrap": self.n_boot, "seed": self.seed,
                "level": self.level, "groups": [g.to_dict() for g in self.groups],
                "across": [a.to_dict() for a in self.across]}


def trait_groups(votes: Sequence[Vote], traits: Mapping[str, Mapping[str, str]], trait: str, *,
                 n_boot: int = 400, seed: int = 0, level: float = 0.95) -> TraitGroups:
    """Agreement within and across the groups ``trait`` makes, and each group's shares."""
    from .bootstrap import wilson_ci

    told = {a: t.get(trait) for a, t in traits.items()}
    if not any(v for v in told.values()):
        raise VotesError(f"no annotator told the trait {trait!r}")
    v = VoteArrays.of(votes)
    n_cases = len(v.case_ids)
    group_of = np.array([told.get(a) or NOT_GIVEN for a in v.annotators])[v.annotator]
    values = sorted(set(group_of.tolist()), key=lambda g: (g == NOT_GIVEN, g))
    rng = np.random.default_rng(seed)
    counts: dict[str, np.ndarray] = {}
    groups = []
    for g in values:
        mine = group_of == g
        c = _counts(v.case[mine], v.safe[mine], n_cases)
        counts[g] = c
        shares = []
        for i in range(n_cases):
            k, n = int(c[i, 0]), int(c[i, 0] + c[i, 1])
            if n:
                lo, hi = wilson_ci(k, n, level)
                shares.append(GroupShare(v.case_ids[i], v.indexes[i], k, n, k / n, Interval(lo, hi, level)))
        groups.append(Group(g, int(len(set(v.annotator[mine].tolist()))), int(mine.sum()),
                            alpha_with_interval(c, rng, n_boot, level), tuple(sorted(shares, key=lambda s: s.index))))
    across = []
    for a, b in combinations(values, 2):
        ca, cb = counts[a], counts[b]
        both = int(((ca.sum(axis=1) > 0) & (cb.sum(axis=1) > 0)).sum())
        draws = np.full(n_boot, np.nan)
        point = pair_alpha(ca, cb)
        if point is not None:
            for r in range(n_boot):
                pick = rng.integers(0, n_cases, n_cases)
                got = pair_alpha(ca[pick], cb[pick])
                draws[r] = np.nan if got is None else got
        across.append(Across(a, b, point, _interval(draws, level), both))
    return TraitGroups(trait, tuple(groups), tuple(across), n_boot, seed, level)
