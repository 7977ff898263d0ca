"""The votes model (``stats.votes``) on simulated crowds of known ability, in process: abilities
ranked like the truth, the posterior at least as right as the majority, intervals that hold the
estimate, the pair-counting alpha equal to Krippendorff's where their weights coincide, the drift
alarm silent for a steady crowd and loud for a cohort voting against the truth."""

from __future__ import annotations

import random

import numpy as np
import pytest
from scipy.stats import spearmanr

from casebench.stats.votes import Vote, VotesError, _kalpha, pair_alpha, vote_stats


def crowd(seed: int, cohort: bool = False, cases: int = 60) -> tuple[list[bool], dict[str, float], list[Vote]]:
    """20 annotators of ability 0.55-0.95 in turn take the case with the fewest votes they have not
    voted on (10 a case); with ``cohort`` the crowd stops at 400 votes and 5 annotators of
    ability 0.1 cast the last 200."""
    rng = random.Random(seed)
    truth = [rng.random() < 0.5 for _ in range(cases)]
    ability = {f"a{j:02d}": 0.55 + 0.4 * j / 19 for j in range(20)}
    counts = [0] * cases
    seen: dict[str, set[int]] = {}
    votes: list[Vote] = []

    def cast(a: str, acc: float) -> None:
        mine = seen.setdefault(a, set())
        open_ = [c for c in range(cases) if counts[c] < 10 and c not in mine]
        if open_:
            c = min(open_, key=lambda c: (counts[c], random.Random(f"{a}{c}").random()))
            right = random.Random(f"{seed}-{a}-{c}").random() < acc
            votes.append(Vote(c, 100 + c, a, truth[c] if right else not truth[c]))
            counts[c] += 1
            mine.add(c)

    for _ in range(20 if cohort else 30):
        for a, acc in ability.items():
            cast(a, acc)
    if cohort:
        for _ in range(40):
            for k in range(5):
                cast(f"z{k}", 0.1)
    return truth, ability, votes


def test_the_posterior_is_right_more_often_than_the_majority():
    """Over ten crowds (not seed by seed: on 4 of 30 seeds the majority is right on one case
    more), the posterior's 0.5 cut beats the plain majority, whose 5-5 ties count as unsafe."""
    post = majority = 0
    for seed in range(10):
        truth, _, votes = crowd(seed)
        s = vote_stats(votes, n_boot=0, seed=seed)
        post += sum((i.posterior_safe > 0.5) == truth[i.case] for i in s.items)
        majority += sum((i.safe_votes * 2 > i.votes) == truth[i.case] for i in s.items)
    assert post > majority


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_steady_crowd(seed):
    truth, ability, votes = crowd(seed)
    s = vote_stats(votes, n_boot=100, seed=seed)
    est = {a.annotator: a for a in s.annotators}
    assert spearmanr(list(ability.values()), [est[k].ability for k in ability]).statistic >= 0.6
    assert all(i.index == 100 + i.case and i.votes == 10 for i in s.items)
    for a in s.annotators:
        assert a.interval.low is not None and a.interval.high is not None
        assert a.interval.low <= a.ability <= a.interval.high and 0 < a.ability < 1
    assert not s.drift.alert and s.drift.flagged == ()
    d = s.to_dict()
    assert d["schema_version"] == 1 and d["drift"]["alert"] is False and len(d["items"]) == 60


@pytest.mark.parametrize("seed", [0, 1])
def test_a_cohort_against_the_truth_raises_the_alarm(seed):
    truth, _, votes = crowd(seed, cohort=True)
    s = vote_stats(votes, n_boot=100, seed=seed)
    assert s.drift.alert and s.drift.window == len(s.agreement.windows)
    assert {f.annotator for f in s.drift.flagged} == {f"z{k}" for k in range(5)}
    assert s.drift.difference is not None and s.drift.difference <= -0.1
    assert sum((i.posterior_safe > 0.5) == truth[i.case] for i in s.items) >= 55


def test_pair_alpha_is_krippendorffs_with_two_votes_a_case():
    rng = np.random.default_rng(0)
    safe = rng.integers(0, 3, 40)
    counts = np.column_stack([safe, 2 - safe]).astype(float)
    assert pair_alpha(counts) == pytest.approx(_kalpha(counts))
    # two halves of one crowd agree across as they agree within
    a = np.column_stack([safe >= 1, safe < 1]).astype(float)
    b = np.column_stack([safe == 2, safe < 2]).astype(float)
    assert pair_alpha(a, b) == pytest.approx(pair_alpha(a + b), abs=1e-12)


def test_nothing_to_model():
    with pytest.raises(VotesError, match="no votes"):
        vote_stats([])
    with pytest.raises(VotesError, match="window"):
        vote_stats([Vote(1, 1, "a", True)], window=1)
    one = vote_stats([Vote(1, 1, "a", True), Vote(1, 1, "b", True)], n_boot=10)
    assert one.agreement.overall.alpha is None  # every vote alike: alpha is undefined, not 1
