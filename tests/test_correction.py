"""The corrected refusal rate by simulation (``stats.correction``, ``casebench.corrected_refusal_rate``):
its contract, its determinism, and its coverage where the run's writer is new (loosely, on a few
hundred draws: ``bench/bench_correction_coverage.py`` measures it properly)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import casebench
from casebench.stats.correction import (CorrectedFigure, corrected_difference_figure, corrected_rate_figure,
                                        reader_predictive)

#: the learned reader's stored sets on large models' writing, as counts (refusal = positive)
LEARNED_LARGE = [dict(tp=147, fn=15, tn=122, fp=5), dict(tp=144, fn=15, tn=121, fp=6), dict(tp=145, fn=16, tn=127, fp=4),
                 dict(tp=139, fn=25, tn=112, fp=12), dict(tp=126, fn=33, tn=115, fp=12),
                 dict(tp=262, fn=11, tn=161, fp=14)]


def _run(rate: float, queries: int, rng: np.random.Generator, se: float, sp: float) -> tuple[np.ndarray, np.ndarray]:
    qid = np.repeat(np.arange(queries), 2)
    u = rng.normal(0.0, 1.0, queries)
    a = math.log(rate / (1 - rate))
    y = rng.random(2 * queries) < 1 / (1 + np.exp(-(a + u[qid])))
    f = np.where(y, rng.random(2 * queries) < se, rng.random(2 * queries) >= sp).astype(int)
    return f, qid


def test_the_public_function_and_its_contract() -> None:
    """``casebench.corrected_refusal_rate`` is re-exported lazily; ``to_dict`` has value, ci,
    upper_bound, lower_bound and withheld; the value lies in its interval; the same inputs give
    the same figure."""
    rng = np.random.default_rng(1)
    reads, queries = _run(0.3, 300, rng, 0.9, 0.95)
    got = casebench.corrected_refusal_rate(reads.tolist(), queries.tolist(), LEARNED_LARGE)
    d = got.to_dict()
    assert {"value", "ci", "upper_bound", "lower_bound", "withheld"} <= set(d)
    assert d["withheld"] is None and d["ci"] is not None and d["upper_bound"] is None and d["lower_bound"] is None
    lo, hi = d["ci"]
    assert 0.0 <= lo < d["value"] < hi <= 1.0 and hi - lo > 0.05  # never a point
    assert casebench.corrected_refusal_rate(reads.tolist(), queries.tolist(), LEARNED_LARGE).to_dict() == d
    # the value: Rogan-Gladen at the medians of the run's writer's Se and Sp as drawn
    r = reader_predictive(LEARNED_LARGE)
    assert d["value"] == pytest.approx((reads.mean() + r.sp - 1) / (r.se + r.sp - 1))


def test_bounds_not_silence() -> None:
    """A rate near the reader's false-refusal floor (over-refusal of a few per cent) gets an upper
    bound where a two-sided interval would reach below 0; the complement (under-refusal) turns it
    into a lower bound; only where nothing can be said is it withheld, with the reason."""
    reader = reader_predictive(LEARNED_LARGE)
    low = corrected_rate_figure(0.06, 900, reader, design_effect=1.4)
    assert low.ci is None and low.value is None and low.upper_bound is not None and low.lower_bound is None
    assert 0.0 < low.upper_bound < 0.2 and "at most" in low.text()
    flipped = low.flipped()
    assert flipped.lower_bound == pytest.approx(1 - low.upper_bound) and flipped.upper_bound is None
    assert "at least" in flipped.text()
    # a reader no better than chance on its one set: nothing, with the reason
    chance = reader_predictive([dict(tp=5, fn=5, tn=5, fp=5)])
    none = corrected_rate_figure(0.5, 100, chance)
    assert not none.says_something and none.withheld and "anywhere" in none.withheld
    # a difference: never beyond [-1, 1]
    shift = corrected_difference_figure(0.1, (0.06, 0.14), 400, reader)
    for x in (shift.ci or ()) + tuple(v for v in (shift.upper_bound, shift.lower_bound) if v is not None):
        assert -1.0 <= x <= 1.0


def test_bad_input_names_the_field() -> None:
    with pytest.raises(ValueError, match=r"validation set 1: field 'fp'"):
        casebench.corrected_refusal_rate([0, 1], [0, 1], [dict(tp=1, fn=1, tn=1, fp=1), dict(tp=1, fn=1, tn=1, fp=-1)])
    with pytest.raises(ValueError, match=r"reads\[1\]"):
        casebench.corrected_refusal_rate([0, 2], [0, 1], LEARNED_LARGE)
    with pytest.raises(ValueError, match="queries"):
        casebench.corrected_refusal_rate([0, 1], [0], LEARNED_LARGE)
    with pytest.raises(ValueError, match="no set has a refusal"):
        casebench.corrected_refusal_rate([0, 1], [0, 1], [dict(tp=0, fn=0, tn=5, fp=1)])


def test_the_own_run_labels_carry_no_spread() -> None:
    """Labels of the run's own answers: the writer is the validation's, so the interval is
    narrower than with the same counts taken as one set of another writer."""
    rng = np.random.default_rng(2)
    reads, queries = _run(0.4, 300, rng, 0.9, 0.95)
    one = [dict(tp=90, fn=10, tn=95, fp=5)]
    own = casebench.corrected_refusal_rate(reads, queries, one, own=True)
    other = casebench.corrected_refusal_rate(reads, queries, one)
    assert own.ci is not None
    width = own.ci[1] - own.ci[0]
    assert other.ci is None or other.ci[1] - other.ci[0] > width


@pytest.mark.parametrize("rate", [0.15, 0.6])
def test_coverage_where_the_writer_is_new(rate: float) -> None:
    """A few hundred simulated runs, the run's writer a new draw from the learned pool's spread
    (DerSimonian-Laird on the logit scale), refusals correlated within a query: the figures
    printed hold the true rate about as often as they claim (loosely: 300 draws), and something
    is printed in most runs."""
    rng = np.random.default_rng(43)
    mu_se, tau_se, mu_sp, tau_sp = 2.13, 0.56, 2.64, 0.30  # the learned/large pool's fit
    from casebench.stats.correction import _clustered

    reader = reader_predictive(LEARNED_LARGE)  # as corrected_refusal_rate draws it, once for all runs
    held = printed = 0
    draws = 300
    for _ in range(draws):
        se = 1 / (1 + math.exp(-rng.normal(mu_se, tau_se)))
        sp = 1 / (1 + math.exp(-rng.normal(mu_sp, tau_sp)))
        reads, queries = _run(rate, 150, rng, se, sp)
        deff, k = _clustered(reads.astype(float), queries)
        f = corrected_rate_figure(float(reads.mean()), reads.size, reader, 0.95, deff, k)
        if not f.says_something:
            continue
        printed += 1
        lo = f.ci[0] if f.ci else f.lower_bound
        hi = f.ci[1] if f.ci else f.upper_bound
        held += int((lo is None or lo <= rate) and (hi is None or rate <= hi))
    assert printed >= 0.9 * draws
    assert held / printed >= 0.9, held / printed


def test_a_figure_is_a_frozen_dataclass() -> None:
    f = corrected_rate_figure(0.3, 100, reader_predictive(LEARNED_LARGE))
    assert isinstance(f, CorrectedFigure)
    with pytest.raises(AttributeError):
        f.value = 0.5  # type: ignore[misc]


#: the rules reader's stored sets on large models' writing (its Se differs most between writers)
RULES_LARGE = [dict(tp=105, fn=62, tn=124, fp=3), dict(tp=88, fn=79, tn=127, fp=4), dict(tp=94, fn=70, tn=129, fp=5),
               dict(tp=71, fn=95, tn=125, fp=4), dict(tp=65, fn=97, tn=126, fp=2), dict(tp=264, fn=10, tn=162, fp=14)]


def test_what_is_said_follows_the_point() -> None:
    """The point (Rogan-Gladen at the pooled Se and Sp) inside [0, 1]: a two-sided interval, even
    where it reaches an end (clipped); at or beyond an end: a bound away from it."""
    reader = reader_predictive(LEARNED_LARGE)
    near_top = corrected_rate_figure(0.85, 900, reader, design_effect=1.4)
    assert near_top.ci is not None and near_top.ci[1] == 1.0 and near_top.value is not None
    assert near_top.ci[0] < near_top.value < 1.0
    beyond = corrected_rate_figure(0.95, 900, reader, design_effect=1.4)
    assert beyond.ci is None and beyond.lower_bound is not None and beyond.upper_bound is None
    assert 0.5 < beyond.lower_bound < 1.0 and "at least" in beyond.text()


@pytest.mark.parametrize("rate", [0.9])
def test_two_sided_intervals_cover_near_an_end_where_writers_differ_most(rate: float) -> None:
    """The rules reader on large writers (Se 0.40-0.96 between sets), a true rate of 0.9: a rule
    on the interval's ends printed two-sided intervals mostly for the runs they missed (0.88);
    following the point, the two-sided intervals and the bounds each hold about at the level
    (loosely: 300 draws, the stored validation, the writer a new draw from its spread)."""
    rng = np.random.default_rng(7)
    mu_se, tau_se, mu_sp, tau_sp = 0.54, 0.82, 3.26, 0.46  # the rules/large pool's DerSimonian-Laird fit
    from casebench.stats.correction import _clustered

    reader = reader_predictive(RULES_LARGE)
    two = two_hit = bound = bound_hit = 0
    for _ in range(300):
        se = 1 / (1 + math.exp(-rng.normal(mu_se, tau_se)))
        sp = 1 / (1 + math.exp(-rng.normal(mu_sp, tau_sp)))
        reads, queries = _run(rate, 300, rng, se, sp)
        deff, k = _clustered(reads.astype(float), queries)
        f = corrected_rate_figure(float(reads.mean()), reads.size, reader, 0.95, deff, k)
        if f.ci is not None:
            two += 1
            two_hit += int(f.ci[0] <= rate <= f.ci[1])
        elif f.says_something:
            bound += 1
            bound_hit += int((f.lower_bound is None or f.lower_bound <= rate)
                             and (f.upper_bound is None or rate <= f.upper_bound))
    assert two >= 60 and bound >= 30, (two, bound)
    assert two_hit / two >= 0.9 and bound_hit / bound >= 0.9, (two_hit / two, bound_hit / bound)
