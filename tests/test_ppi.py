"""PPI++ estimation of a mean (``stats.ppi``), checked against the authors' own implementation
(``ppi-python``, the test extra), against closed forms computed another way, and by coverage
with known truth."""

from __future__ import annotations

import math

import numpy as np
import pytest

from casebench.stats.ppi import ppi_mean


def _fixture(seed: int, n: int = 60, N: int = 300, se: float = 0.85, sp: float = 0.9, p: float = 0.35):
    """People's labels (1: refused) of ``n`` answers, a reader's readings of them and of ``N``
    other answers, the reader erring with the given sensitivity and specificity."""
    rng = np.random.default_rng(seed)
    y = (rng.random(n + N) < p).astype(float)
    f = np.where(y == 1, rng.random(n + N) < se, rng.random(n + N) >= sp).astype(float)
    return y[:n], f[:n], f[n:], y


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("lam", [0.0, 0.4, 1.0, None])
def test_matches_ppi_python_with_its_lambda(seed: int, lam: float | None) -> None:
    """Labelled and unlabelled answers disjoint, lambda fixed or fitted in sample, the plain
    variance: the authors' ppi_mean_pointestimate and ppi_mean_ci to 1e-10."""
    ppi_py = pytest.importorskip("ppi_py", reason="ppi-python (the test extra) is not installed")
    y, f, fu, _ = _fixture(seed)
    ours = ppi_mean(y, f, fu, lam=lam, folds=1, small_sample=False, fallback=False)
    point = float(np.asarray(ppi_py.ppi_mean_pointestimate(y, f, fu, lam=lam)).reshape(-1)[0])
    lo, hi = ppi_py.ppi_mean_ci(y, f, fu, alpha=0.05, lam=lam)
    assert ours.estimate == pytest.approx(point, abs=1e-10)
    wlo, whi = ours.wald(0.95)
    assert wlo == pytest.approx(float(np.asarray(lo).reshape(-1)[0]), abs=1e-10)
    assert whi == pytest.approx(float(np.asarray(hi).reshape(-1)[0]), abs=1e-10)


@pytest.mark.parametrize("seed", [4, 5, 6, 7])
def test_cross_fitted_lambda_stays_near_the_oracle(seed: int) -> None:
    """Cross-fitting changes lambda a little, not the estimate's meaning: within a third of a
    standard error of ppi-python's in-sample PPI++, and about as precise."""
    ppi_py = pytest.importorskip("ppi_py", reason="ppi-python (the test extra) is not installed")
    y, f, fu, _ = _fixture(seed)
    ours = ppi_mean(y, f, fu, folds=5, small_sample=False, fallback=False)
    point = float(np.asarray(ppi_py.ppi_mean_pointestimate(y, f, fu)).reshape(-1)[0])
    lo, hi = (float(np.asarray(x).reshape(-1)[0]) for x in ppi_py.ppi_mean_ci(y, f, fu, alpha=0.05))
    assert abs(ours.estimate - point) < ours.se / 3
    assert ours.se * 2 * 1.959963984540054 == pytest.approx(hi - lo, rel=0.1)
    assert len(ours.lam["0"]) == 5 and all(0 <= v <= 1 for v in ours.lam["0"])


def test_reader_stratified_sample_gives_the_post_stratified_mean() -> None:
    """Labels drawn stratified by the reader's reading, weighted by inverse inclusion
    probabilities, the population's readings including the labelled answers: whatever fixed
    lambda, the estimate is the post-stratified mean of the labels (sum over strata of the
    stratum's share times its labels' mean), computed here directly; with lambda fitted per fold
    (each fold's readings are not exactly the population's) within a tenth of a standard error."""
    rng = np.random.default_rng(11)
    N = 200
    f = (rng.random(N) < 0.3).astype(float)
    y = np.where(f == 1, rng.random(N) < 0.8, rng.random(N) < 0.1).astype(float)
    chosen, weights = [], []
    for v, take in ((1.0, 12), (0.0, 18)):
        idx = np.flatnonzero(f == v)
        pick = rng.choice(idx, take, replace=False)
        chosen += pick.tolist()
        weights += [len(idx) / take] * take
    chosen_a = np.array(chosen)
    direct = sum(np.mean(f == v) * y[chosen_a][f[chosen_a] == v].mean() for v in (0.0, 1.0))
    for lam in (0.0, 0.5, 1.0):
        got = ppi_mean(y[chosen_a], f[chosen_a], f, population="includes", w=weights, lam=lam,
                       clusters=chosen_a, clusters_pop=np.arange(N), fallback=False)
        assert got.ppi == pytest.approx(direct, abs=1e-12)
    # the reader carries the stratification: its lambda makes the estimate more precise than
    # the same labels read without it
    fitted = ppi_mean(y[chosen_a], f[chosen_a], f, population="includes", w=weights,
                      clusters=chosen_a, clusters_pop=np.arange(N))
    assert fitted.estimator == "ppi++" and fitted.multiplier > 1.5
    assert abs(fitted.estimate - direct) < fitted.se / 10


def test_clusters_count_a_query_once() -> None:
    """Every answer twice, each copy in its original's cluster: the same estimate and the same
    standard error (the copies add no information); the copies as independent answers would
    shrink it by sqrt(2)."""
    y, f, fu, _ = _fixture(9, n=40, N=120)
    base = ppi_mean(y, f, fu, lam=0.6, small_sample=False)
    cl, clu = np.arange(40), np.arange(40, 160)
    twice = ppi_mean(np.repeat(y, 2), np.repeat(f, 2), np.repeat(fu, 2), lam=0.6, small_sample=False,
                     clusters=np.repeat(cl, 2), clusters_pop=np.repeat(clu, 2))
    assert twice.estimate == pytest.approx(base.estimate, abs=1e-12)
    assert twice.se == pytest.approx(base.se, rel=1e-12)
    naive = ppi_mean(np.repeat(y, 2), np.repeat(f, 2), np.repeat(fu, 2), lam=0.6, small_sample=False)
    assert naive.se == pytest.approx(base.se / math.sqrt(2), rel=1e-9)


def test_a_difference_of_strata() -> None:
    """``coef`` +1 / -1: the difference of two strata's PPI estimates, each computed alone."""
    rng = np.random.default_rng(3)
    y, f, fu, _ = _fixture(12, n=80, N=200)
    s, su = rng.integers(0, 2, 80), rng.integers(0, 2, 200)
    diff = ppi_mean(y, f, fu, strata=s, strata_pop=su, coef={1: 1.0, 0: -1.0}, lam=0.5, fallback=False)
    a = ppi_mean(y[s == 1], f[s == 1], fu[su == 1], lam=0.5, fallback=False)
    b = ppi_mean(y[s == 0], f[s == 0], fu[su == 0], lam=0.5, fallback=False)
    assert diff.estimate == pytest.approx(a.estimate - b.estimate, abs=1e-12)


def test_a_reader_that_adds_nothing_falls_back_to_the_labels() -> None:
    rng = np.random.default_rng(5)
    y = (rng.random(80) < 0.4).astype(float)
    noise = ppi_mean(y, (rng.random(80) < 0.5).astype(float), (rng.random(300) < 0.5).astype(float))
    assert noise.estimator == "labels" and noise.estimate == pytest.approx(y.mean())
    assert "add" in noise.why_labels or "no more precise" in noise.why_labels
    constant = ppi_mean(y, np.ones(80), np.ones(300))
    assert constant.estimator == "labels" and constant.lam["0"] == [0.0] * 5


def test_intervals_are_never_points() -> None:
    """Every label 0 (no variance): the interval is Wilson's on the labels, not [0, 0]."""
    got = ppi_mean(np.zeros(30), np.zeros(30), np.zeros(100))
    lo, hi = got.rate_ci()
    assert lo == 0.0 and 0.05 < hi < 0.2


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="no labels"):
        ppi_mean([], [], [0.0, 1.0])
    with pytest.raises(ValueError, match="stratum 'b' has no labelled answer"):
        ppi_mean([1.0, 0.0], [1.0, 0.0], [0.0, 1.0], strata=["a", "a"], strata_pop=["a", "b"])
    with pytest.raises(ValueError, match="weights"):
        ppi_mean([1.0, 0.0], [1.0, 0.0], [0.0], w=[1.0, -2.0])


def test_coverage_with_known_truth() -> None:
    """400 runs drawn from a known model (queries with two answers each, refusals clustered by
    query, a reader of sensitivity 0.8 and specificity 0.9), 40 labels each: the 95% intervals
    cover the true refusal rate in 90% to 99% of runs (the bench, bench_ppi_coverage.py, has the
    full table)."""
    rng = np.random.default_rng(2026)
    q, mu = 60, np.array([-1.2, 0.4])
    u = rng.normal(0, 1.2, 1_000_000)
    truth = float(np.mean([(1 / (1 + np.exp(-(m + u)))).mean() for m in mu]))
    hits = 0
    for draw in range(400):
        uq = rng.normal(0, 1.2, q)
        p = 1 / (1 + np.exp(-(np.tile(mu, q) + np.repeat(uq, 2))))
        y = (rng.random(2 * q) < p).astype(float)
        f = np.where(y == 1, rng.random(2 * q) < 0.8, rng.random(2 * q) >= 0.9).astype(float)
        lab = rng.choice(2 * q, 40, replace=False)
        qid = np.repeat(np.arange(q), 2)
        got = ppi_mean(y[lab], f[lab], f, population="includes", clusters=qid[lab], clusters_pop=qid, seed=draw)
        lo, hi = got.rate_ci()
        hits += lo <= truth <= hi
    assert 0.90 <= hits / 400 <= 0.99
