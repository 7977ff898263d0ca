"""Paired comparison of two evaluations of any task, per scorer (``casebench.stats.sample_compare``),
on small inputs whose figures can be worked out by hand. (Real inspect logs of another task go
through it in ``test_inspect_logs.py``.)"""

from __future__ import annotations

import math

import numpy as np
import pytest

from casebench.stats.bootstrap import cluster_resample_weights, resample_weights
from casebench.stats.paired_tests import mcnemar_exact, mdd
from casebench.stats.sample_compare import SampleCompareError, ScoredSamples, compare_samples, disagreements


def _inp(name: str, values: dict[str, dict[str, float]], groups: dict[str, str] | None = None) -> ScoredSamples:
    md = None if groups is None else {k: {"group": g} for k, g in groups.items()}
    return ScoredSamples(name, f"{name}.eval", values, md)


IDS = [f"s{i}" for i in range(40)]
A01 = {i: float(k % 3 != 0) for k, i in enumerate(IDS)}  # wrong on every third
B01 = {i: float(k % 4 != 0) for k, i in enumerate(IDS)}  # wrong on every fourth


def test_binary_scores_get_mcnemar_and_the_plain_paired_bootstrap():
    a = _inp("a", {"acc": A01, "len": {i: float(k) for k, i in enumerate(IDS)}})
    b = _inp("b", {"acc": B01, "len": {i: float(k) / 2 for k, i in enumerate(IDS)}})
    c = compare_samples([a, b], n_boot=300, seed=2)
    (pair,) = c.pairs
    s = pair.scorers["acc"]
    x = np.array([A01[i] for i in IDS])
    y = np.array([B01[i] for i in IDS])
    assert (s.n, s.a, s.b, s.diff) == (40, x.mean(), y.mean(), pytest.approx(x.mean() - y.mean()))
    mc = mcnemar_exact(x == 1, y == 1)
    assert s.test == "mcnemar" and s.p == mc["p"] and s.mdd == pytest.approx(mdd(mc["se"]))
    # without clusters the interval is the plain paired bootstrap of the mean difference
    boot = resample_weights(40, 300, 2) @ (x - y) / 40
    assert s.ci == pytest.approx(list(np.percentile(np.round(boot, 12), [2.5, 97.5])))
    cont = pair.scorers["len"]
    assert cont.test == "bootstrap" and not cont.binary and cont.diff == pytest.approx(np.arange(40).mean() / 2)
    assert cont.p == cont.p_bootstrap and cont.p_floor == pytest.approx(2 / 301)
    # Benjamini-Hochberg over both scorers
    ps = sorted([s.p, cont.p])
    assert max(s.p_adjusted, cont.p_adjusted) == pytest.approx(ps[1])
    assert min(s.p_adjusted, cont.p_adjusted) == pytest.approx(min(1.0, min(ps[0] * 2, ps[1])))


def test_clusters_are_drawn_whole_and_switch_to_the_clustered_mcnemar():
    groups = {i: f"g{k // 8}" for k, i in enumerate(IDS)}  # 5 clusters of 8
    a, b = _inp("a", {"acc": A01}, groups), _inp("b", {"acc": B01}, groups)
    plain = compare_samples([a, b], n_boot=500).pairs[0].scorers["acc"]
    clus = compare_samples([a, b], n_boot=500, cluster_by="group").pairs[0].scorers["acc"]
    assert clus.test == "mcnemar_clustered" and clus.mcnemar["clusters"] == 5
    assert clus.diff == plain.diff and clus.n == plain.n
    W = cluster_resample_weights(np.repeat(np.arange(5), 8), 500, 0)  # whole groups drawn
    d = np.array([A01[i] - B01[i] for i in IDS])
    assert clus.ci == pytest.approx(list(np.percentile(np.round(W @ d / W.sum(axis=1), 12), [2.5, 97.5])))
    with pytest.raises(SampleCompareError, match="sample 's0' has no metadata field 'nope'"):
        compare_samples([a, b], cluster_by="nope")


def test_only_samples_both_scored_are_paired_and_few_get_no_mark():
    a = _inp("a", {"acc": {"x": 1.0, "y": 0.0, "z": 1.0}})
    b = _inp("b", {"acc": {"y": 1.0, "z": 1.0, "w": 0.0}})
    s = compare_samples([a, b], n_boot=100).pairs[0].scorers["acc"]
    assert (s.n, s.only_a, s.only_b, s.diff) == (2, 1, 1, -0.5)
    assert s.withheld == "2 paired samples < 30" and not s.significant
    assert disagreements(a, b) == [{"scorer": "acc", "sample": "y", "a": 0.0, "b": 1.0}]


def test_inputs_without_a_shared_scorer_or_sample_are_refused():
    with pytest.raises(SampleCompareError, match="share no scorer"):
        compare_samples([_inp("a", {"x": {"s": 1.0}}), _inp("b", {"y": {"s": 1.0}})])
    with pytest.raises(SampleCompareError, match="share no scored sample"):
        compare_samples([_inp("a", {"x": {"s": 1.0}}), _inp("b", {"x": {"t": 1.0}})])
    with pytest.raises(SampleCompareError, match="at least two"):
        compare_samples([_inp("a", {"x": {"s": 1.0}})])
    assert math.isnan(compare_samples([_inp("a", {"x": {"s": 1.0}}), _inp("b", {"x": {"s": 1.0}})], n_boot=0)
                      .pairs[0].scorers["x"].ci[0])


def test_few_samples_get_one_t_method_inside_the_range():
    """Six samples of a score in [0, 1]: Student's t on 5 df gives the interval and the p (they
    agree: the interval excludes 0 exactly when p < 0.05), inside [-1, 1] (the percentile bootstrap
    printed 1.0000 [-0.9756, 1.8526] p 0.0010 for such inputs)."""
    from scipy.stats import ttest_rel

    ids = [f"q{i}" for i in range(6)]
    xa = [1.0, 0.9, 1.0, 0.8, 1.0, 0.7]
    xb = [0.0, 0.1, 0.3, 0.0, 0.2, 0.1]
    s = compare_samples([_inp("a", {"r": dict(zip(ids, xa))}), _inp("b", {"r": dict(zip(ids, xb))})],
                        n_boot=1000).pairs[0].scorers["r"]
    assert s.test == "t on 5 df" and s.p == pytest.approx(ttest_rel(xa, xb).pvalue, rel=1e-9)
    assert -1.0 <= s.ci[0] < s.diff < s.ci[1] <= 1.0
    assert (s.ci[0] > 0) == (s.p < 0.05)


def test_identical_inputs_never_get_a_point_interval():
    """Two identical inputs (binary and not, with the bootstrap or few samples): an interval
    around 0 that is not a point, and p 1 where the method gives one."""
    ids = [f"q{i}" for i in range(40)]
    vals = {i: float(k % 2) for k, i in enumerate(ids)}
    cont = {i: k / 40 for k, i in enumerate(ids)}
    c = compare_samples([_inp("a", {"acc": vals, "r": cont}), _inp("b", {"acc": vals, "r": cont})], n_boot=200)
    for s in c.pairs[0].scorers.values():
        assert s.diff == 0.0 and s.ci[0] < 0.0 < s.ci[1] and -1.0 <= s.ci[0] and s.ci[1] <= 1.0, s
    assert c.pairs[0].scorers["r"].p == pytest.approx(1.0)


def test_the_text_says_when_samples_were_taken_as_independent():
    from casebench.present.sample_tables import format_sample_comparison

    groups = {i: f"g{k // 8}" for k, i in enumerate(IDS)}
    a, b = _inp("a", {"acc": A01}, groups), _inp("b", {"acc": B01}, groups)
    plain = format_sample_comparison(compare_samples([a, b], n_boot=100))
    assert "taken as independent" in plain and "no --cluster-by" in plain
    clus = format_sample_comparison(compare_samples([a, b], n_boot=100, cluster_by="group"))
    assert "taken as independent" not in clus and "clustered by sample metadata field 'group'" in clus
