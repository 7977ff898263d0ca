"""Paired comparisons (``casebench.stats.compare`` and ``casebench compare``).

Expected values come from independent routes: McNemar's exact p from scipy's binomial test on
counts taken straight from the files, metric values from ``metrics.score_predictions``, Williams'
t from the worked example in Steiger (1980), and the test's size from a simulation under the null.
"""

from __future__ import annotations

import json

import numpy as np

from casebench.stats.schema import SCHEMA_VERSION
from casebench.stats.metrics import METRIC
import pytest
from click.testing import CliRunner

from casebench.cli import cli
from casebench.present.compare_text import format_comparison
from casebench.stats.bootstrap import bootstrap_p, resample_indices, resample_weights
from casebench.stats.case_sets import CompareError, check_comparable
from casebench.stats.compare import compare
from casebench.stats.paired_tests import mcnemar_exact, williams_t
from casebench.stats.metrics import METRIC, metric_columns, metric_values, metrics_from_sums, scoring_arrays
from casebench.stats.result import score_predictions
from casebench.predictions import Predictions
from casebench.stats.options import ScoringOptions
from casebench.published import load_published, write_published


@pytest.fixture(scope="module")
def gpt4o(exp_dir):
    return (load_published(exp_dir / "safety_gpt-4o" / "output_binary.json"),
            load_published(exp_dir / "safety_gpt-4o" / "output_score.json"))


@pytest.fixture(scope="module")
def llama(exp_dir):
    return load_published(exp_dir / "safety_llama370B" / "output_logits.json")


def _correct(p: Predictions) -> np.ndarray:
    """Per-case correctness straight from labels (every published case is answered)."""
    return (p.label == 1.0) == p.human_safe


# ------------------------------------------------------------------------------ published files


def test_binary_vs_score_mcnemar_matches_an_exact_binomial_test(gpt4o):
    from scipy.stats import binomtest

    a, b = gpt4o
    res = compare([a, b], ScoringOptions(n_boot=500, bootstrap_seed=1, cluster="case"))
    (pc,) = res.pairs
    ca, cb = _correct(a), _correct(b)
    a_only, b_only = int(np.sum(ca & ~cb)), int(np.sum(~ca & cb))
    assert (pc.mcnemar["a_only"], pc.mcnemar["b_only"]) == (a_only, b_only)
    assert pc.mcnemar["p"] == pytest.approx(binomtest(min(a_only, b_only), a_only + b_only, 0.5).pvalue)
    acc = pc.metrics["accuracy"]
    # the published figures (README): 0.77000 and 0.78556
    assert acc.a == pytest.approx(0.77, abs=5e-6) and acc.b == pytest.approx(0.78556, abs=5e-6)
    assert acc.diff == pytest.approx(acc.a - acc.b)
    assert acc.ci[0] < acc.diff < acc.ci[1]
    assert acc.test == "mcnemar" and acc.p == pc.mcnemar["p"]
    # a binary verdict has no P(safe): only label metrics are compared
    assert set(pc.metrics) == {"accuracy", "safe_recall", "unsafe_recall", "context_direction", "context_moved",
                               "context_concordance", "context_shift", "context_follow",
                               "context_blind", "shift_pcc", "vote_agreement", "accuracy_contested", "accuracy_clear"}
    assert pc.williams is None
    for m in pc.metrics.values():
        assert 0 < m.p_bootstrap <= 1 and m.p_adjusted >= m.p


def test_point_differences_equal_the_scores_of_each_input(gpt4o, llama):
    _, b = gpt4o
    res = compare([b, llama], ScoringOptions(n_boot=200, cluster="case"))
    sb = score_predictions(b, ScoringOptions(n_boot=0))
    sl = score_predictions(llama, ScoringOptions(n_boot=0))
    for m, d in res.pairs[0].metrics.items():
        # one formula for both commands: the very same floats, not merely close ones
        assert d.a == sb.values[m] and d.b == sl.values[m], m
        assert d.test == METRIC[m].test
    w = res.pairs[0].williams
    assert w["r_a"] == pytest.approx(sb.values["pcc"]) and w["r_b"] == pytest.approx(sl.values["pcc"])
    from scipy.stats import pearsonr

    assert w["r_ab"] == pytest.approx(pearsonr(b.value, llama.value)[0])


@pytest.mark.parametrize("which", [0, 1])
def test_an_input_compared_with_itself_shows_no_difference(gpt4o, which):
    p = gpt4o[which]
    res = compare([p, p], ScoringOptions(n_boot=300, bootstrap_seed=3))
    for m in res.pairs[0].metrics.values():
        assert m.diff == 0.0
        # never a point (issue 36): Newcombe's interval for shares, the analytic fallback otherwise
        assert m.ci_bootstrap == [0.0, 0.0] and m.ci_note
        assert m.ci[0] < 0.0 < m.ci[1] or all(np.isnan(m.ci))
        assert m.p == 1.0 and m.p_bootstrap == 1.0 and not m.significant
    assert res.pairs[0].mcnemar["a_only"] == res.pairs[0].mcnemar["b_only"] == 0


def test_cli_compare_published_files_table_and_json(gpt4o, exp_dir):
    a = str(exp_dir / "safety_gpt-4o" / "output_binary.json")
    b = str(exp_dir / "safety_gpt-4o" / "output_score.json")
    r = CliRunner().invoke(cli, ["compare", a, b, "--bootstrap", "300", "--cluster", "case"])
    assert r.exit_code == 0, r.output
    assert "McNemar exact" in r.output and "accuracy" in r.output and "95% CI" in r.output
    r = CliRunner().invoke(cli, ["compare", a, b, "--bootstrap", "300", "--json", "--cluster", "case"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    (pair,) = d["pairs"]
    assert pair["n_paired"] == 900 and pair["metrics"]["accuracy"]["test"] == "mcnemar"
    assert d["settings"]["adjustment"].startswith("Benjamini-Hochberg")
    assert d["schema_version"] == SCHEMA_VERSION  # the JSON shape's version, for machines that read it
    r = CliRunner().invoke(cli, ["compare", b, b, "--bootstrap", "200", "--json"])
    m = json.loads(r.output)["pairs"][0]["metrics"]
    assert all(v["p"] == 1.0 and v["ci_bootstrap"] == [0.0, 0.0] and v["ci"] != [0.0, 0.0] for v in m.values())


# ------------------------------------------------------------------------------ refusals


def test_subsets_of_one_dataset_pair_over_the_cases_they_share(gpt4o, tmp_path):
    """Two subsets of one dataset are compared over the cases both hold, and the output says
    how many and in which case set each input is; the shared-case figures are those of the
    inputs cut to the shared cases."""
    a, b = gpt4o
    subset = tmp_path / "safety_small" / "output_binary.json"
    write_published(subset, a.cases[:45], "small", "binary",
                    ["safe" if x == 1.0 else "unsafe" for x in a.label[:45]])
    small = load_published(subset)
    check_comparable([a, small], names=["A", "B"])  # accepted
    c = compare([a, small, b], ScoringOptions(n_boot=50))
    assert [g["inputs"] for g in c.case_sets] == [["A", "C"], ["B"]]
    ab = c.pairs[0]
    assert (ab.shared, ab.only_a, ab.only_b, ab.n_paired) == (45, 855, 0, 45)
    assert ab.metrics["accuracy"].a == pytest.approx(score_predictions(small, ScoringOptions(n_boot=0)).values["accuracy"])
    assert ab.metrics["accuracy"].diff == 0.0
    # an input paired with itself on the shared cases: no difference, no mark
    text = format_comparison(c)
    assert "45 paired cases of the 45 cases both hold (A has 900, B has 45)" in text
    assert "case set 1 (900 cases): A, C" in text and "case set 2 (45 cases): B" in text
    r = CliRunner().invoke(cli, ["compare", a.source, str(subset), "--bootstrap", "20"])
    assert r.exit_code == 0, r.output
    assert "of the 45 cases both hold" in r.output


def test_a_pair_is_compared_beside_inputs_of_other_cases(gpt4o):
    """Inputs of two case sets in one comparison (a report over runs of different selections):
    the case resamples run over every input's cases, and a pair whose cases are not all of them
    draws its query pairs over its own cases (it used to look for the other inputs' cases in
    its own and fail)."""
    a, b = gpt4o
    first = Predictions.from_values("x", "x", "binary", a.cases[:40], ["safe" if v == 1.0 else "unsafe" for v in a.label[:40]])
    other = Predictions.from_values("y", "y", "binary", a.cases[40:80], ["safe"] * 40)
    c = compare([first, first, other], ScoringOptions(n_boot=50), pairs=[(0, 1)])
    (pc,) = c.pairs
    assert pc.n_paired == 40 and pc.context_pairs > 0 and pc.metrics["context_shift"].diff == 0.0


def test_inputs_with_no_case_in_common_are_refused(gpt4o):
    from dataclasses import replace

    a, _ = gpt4o
    first, second = slice(0, 10), slice(10, 20)
    x = replace(a, cases=a.cases[first], label=a.label[first], value=a.value[first], meta={})
    y = replace(a, cases=a.cases[second], label=a.label[second], value=a.value[second], meta={})
    with pytest.raises(CompareError, match="have no case in common"):
        compare([x, y], ScoringOptions(n_boot=10))


def test_no_significance_mark_from_few_cases(gpt4o):
    """A 4-case difference is never marked, whatever its p; the reason is in the output."""
    from dataclasses import replace

    a, b = gpt4o
    # four cases where A is right and B wrong... built by flipping B's verdicts
    idx = [i for i in range(a.n) if (a.label[i] == 1.0) == a.human_safe[i]][:40]
    a40 = replace(a, cases=[a.cases[i] for i in idx], label=a.label[idx], value=a.value[idx], meta={})
    flipped = replace(a40, label=1.0 - a40.label, source="flipped")
    few = compare([replace(a40, cases=a40.cases[:4], label=a40.label[:4], value=a40.value[:4]),
                   replace(flipped, cases=flipped.cases[:4], label=flipped.label[:4], value=flipped.value[:4])],
                  ScoringOptions(n_boot=200))
    acc = few.pairs[0].metrics["accuracy"]
    assert few.pairs[0].mcnemar["a_only"] == 4 and not acc.significant
    assert acc.withheld == "4 paired cases < 30"
    many = compare([a40, flipped], ScoringOptions(n_boot=200))
    assert many.pairs[0].metrics["accuracy"].significant and many.pairs[0].metrics["accuracy"].withheld is None
    text = format_comparison(few)
    row = next(line for line in text.splitlines() if line.strip().startswith("accuracy "))
    assert row.endswith(" °") and text.count("° no significance mark from fewer than 30 paired cases") == 1


def test_different_datasets_are_refused(gpt4o, tmp_path):
    from casebench.data import Case

    a, _ = gpt4o
    changed = [Case(c.index, c.query + " (edited)" if c.index == 7 else c.query, c.context, c.intended_safe,
                    c.votes, c.safe_rate, c.category) for c in a.cases]
    path = tmp_path / "safety_other" / "output_binary.json"
    write_published(path, changed, "other", "binary", ["safe"] * len(changed))
    with pytest.raises(CompareError, match="not from the same dataset"):
        compare([a, load_published(path)], ScoringOptions(n_boot=10))
    r = CliRunner().invoke(cli, ["compare", a.source, str(path)])
    assert r.exit_code == 2 and "not from the same dataset" in r.output


def test_one_input_is_refused(gpt4o):
    r = CliRunner().invoke(cli, ["compare", gpt4o[0].source])
    assert r.exit_code == 2 and "at least two" in r.output


# ------------------------------------------------------------------------------ missing answers


def test_default_mode_pairs_answered_cases_and_paper_compat_uses_all(gpt4o):
    _, b = gpt4o
    values = list(b.value)
    gone_a, gone_b = [0, 5, 9], [5, 11]
    va = [None if i in gone_a else v for i, v in enumerate(values)]
    vb = [None if i in gone_b else v for i, v in enumerate(values)]
    pa = Predictions.from_values("a", "m", "score", b.cases, va)
    pb = Predictions.from_values("b", "m", "score", b.cases, vb)
    res = compare([pa, pb], ScoringOptions(n_boot=200))
    pc = res.pairs[0]
    assert pc.dropped == len(set(gone_a) | set(gone_b)) and pc.n_paired == 900 - pc.dropped
    # on the paired cases the two inputs are identical
    assert all(m.diff == 0 and m.ci_bootstrap == [0.0, 0.0] and m.ci != [0.0, 0.0] for m in pc.metrics.values())
    res = compare([pa, pb], ScoringOptions(paper_compat=True, n_boot=200))
    pc = res.pairs[0]
    assert pc.n_paired == 900 and pc.dropped == 0
    # paper-compatible: a missing score is read as 1.0 (unsafe), so each side loses its own cases
    sa = score_predictions(pa, ScoringOptions(paper_compat=True, n_boot=0)).values
    sb = score_predictions(pb, ScoringOptions(paper_compat=True, n_boot=0)).values
    assert pc.metrics["accuracy"].diff == pytest.approx(sa["accuracy"] - sb["accuracy"])


# ------------------------------------------------------------------------------ building blocks


def test_weighted_formulas_equal_direct_figures_of_the_resampled_cases(llama):
    """A resample as weights (one matrix product for all) gives the figures computed directly,
    one resample at a time, from its drawn cases (scipy's Pearson r, plain means, sklearn-style
    F1 and a hand-written ECE)."""
    from scipy.stats import pearsonr

    a, _ = scoring_arrays(llama)
    n = len(a.y)
    idx = resample_indices(n, 5, seed=11)
    W = resample_weights(n, 5, seed=11)
    assert np.array_equal(W, np.stack([np.bincount(row, minlength=n) for row in idx]))
    _, got = metric_values([a], tuple(METRIC), W)[0]
    for r, rows in enumerate(idx):
        y, c, ps, p, g = a.y[rows], a.correct[rows], a.pred_safe[rows], a.p[rows], a.g[rows]
        tp, fp, fn, tn = np.sum(ps & y), np.sum(ps & ~y), np.sum(~ps & y), np.sum(~ps & ~y)
        bins = np.minimum((p * 10).astype(int), 9)
        pc = np.clip(p, 1e-6, 1 - 1e-6)
        want = {
            "accuracy": c.mean(), "safe_recall": c[y].mean(), "unsafe_recall": c[~y].mean(),
            "f1_safe": 2 * tp / (2 * tp + fp + fn), "f1_unsafe": 2 * tn / (2 * tn + fn + fp),
            "pcc": pearsonr(a.value[rows], g)[0], "bce": -np.mean(g * np.log(pc) + (1 - g) * np.log(1 - pc)),
            "brier": np.mean((p - g) ** 2),
            "ece": sum(abs(np.sum(p[bins == b] - g[bins == b])) for b in range(10)) / n,
        }
        for m, v in want.items():
            assert got[m][r] == pytest.approx(v, rel=1e-9, abs=1e-12), m


def test_paper_compatible_infinite_bce_terms_propagate():
    from casebench.stats.metrics import ScoringArrays

    g = np.array([0.9, 0.2, 0.6, 0.1])
    p = np.array([0.0, 0.3, 0.7, 0.2])  # p = 0 with g > 0: an infinite unclipped BCE term
    a = ScoringArrays(g > 0.5, np.ones(4, bool), p > 0.5, g, p, p, True)
    cols = metric_columns(a, ("bce",))
    W = np.array([[1.0, 1, 1, 1], [0, 2, 1, 1]])
    out = metrics_from_sums({k: W @ v for k, v in cols.items()}, ("bce",))["bce"]
    assert out[0] == np.inf and np.isfinite(out[1])


def test_bootstrap_weights_count_n_draws_per_resample():
    W = resample_weights(50, 40, seed=2)
    assert W.shape == (40, 50) and np.all(W.sum(axis=1) == 50)
    assert np.array_equal(W, resample_weights(50, 40, seed=2))


def test_bootstrap_p_is_two_sided_and_never_zero():
    assert bootstrap_p(np.zeros(100)) == 1.0
    assert bootstrap_p(np.full(999, 0.3)) == pytest.approx(2 / 1000)
    d = np.linspace(-1, 3, 1000)  # a quarter of the mass at or below 0
    assert bootstrap_p(d) == pytest.approx(2 * (np.sum(d <= 0) + 1) / 1001)
    assert bootstrap_p(-d) == bootstrap_p(d)


def test_bootstrap_p_does_not_read_the_sign_of_rounding_noise():
    """Differences of means of the same votes are exactly 0 in exact arithmetic; whether numpy
    leaves +1e-17 or -1e-17 depends on the CPU, so both must give the same p."""
    rng = np.random.default_rng(0)
    d = np.round(rng.normal(0.01, 0.02, 999), 2)  # many exact ties at 0
    zeros = d == 0
    assert zeros.sum() > 50
    up, down = d.copy(), d.copy()
    up[zeros], down[zeros] = 1e-17, -1e-17
    assert bootstrap_p(up) == bootstrap_p(down) == bootstrap_p(d)
    exact = 2 * min(np.sum(d <= 0) + 1, np.sum(d >= 0) + 1) / 1000
    assert bootstrap_p(d) == pytest.approx(min(1.0, exact))


def test_mcnemar_without_discordant_cases_is_p_one():
    c = np.array([True, False, True])
    assert mcnemar_exact(c, c)["p"] == 1.0


def test_williams_t_reproduces_steigers_worked_example():
    # Steiger (1980), Psychological Bulletin 87(2), the example of two dependent correlations
    # (r12 = .4, r13 = .5, r23 = .1, n = 103; also psych::r.test's example): t = -0.89, df = 100
    w = williams_t(0.4, 0.5, 0.1, 103)
    assert w["df"] == 100
    assert w["t"] == pytest.approx(-0.89, abs=0.005)
    assert w["p"] == pytest.approx(0.375, abs=0.005)
    assert williams_t(0.5, 0.4, 0.1, 103)["t"] == pytest.approx(-w["t"])
    assert williams_t(0.6, 0.6, 1.0, 50)["p"] == 1.0


def test_williams_t_holds_its_size_under_the_null():
    """Two predictors equally correlated with a shared target: about 5% rejections at 0.05."""
    rng = np.random.default_rng(0)
    n, sims, rejections = 60, 1500, 0
    for _ in range(sims):
        z = rng.normal(size=n)
        common = rng.normal(size=n)
        x1 = 0.5 * z + 0.6 * common + rng.normal(size=n)
        x2 = 0.5 * z + 0.6 * common + rng.normal(size=n)
        r = np.corrcoef([z, x1, x2])
        rejections += williams_t(r[0, 1], r[0, 2], r[1, 2], n)["p"] < 0.05
    assert 0.03 < rejections / sims < 0.07


def test_benjamini_hochberg_runs_over_every_pair_and_metric(gpt4o, llama):
    from statsmodels.stats.multitest import multipletests

    a, b = gpt4o
    res = compare([a, b, llama], ScoringOptions(n_boot=300, cluster="case"))
    primary = [m for pc in res.pairs for m in pc.metrics.values() if METRIC[m.metric].family == "primary"]
    ps = [m.p for m in primary]
    assert len(ps) == 3 + 3 + 6  # binary pairs: 3 label metrics; score vs prob: 6
    _, adj, _, _ = multipletests(ps, method="fdr_bh")
    np.testing.assert_allclose([m.p_adjusted for m in primary], adj)
    # the added figures (context, human reference) are each a family of their own
    for fam in ("context", "reference"):
        ms = [m for pc in res.pairs for m in pc.metrics.values() if METRIC[m.metric].family == fam]
        # context: direction, moved and concordance with shift, follow, blind and shift r (one family)
        assert len(ms) == 3 * (7 if fam == "context" else 3)
        _, adj, _, _ = multipletests([m.p for m in ms], method="fdr_bh")
        np.testing.assert_allclose([m.p_adjusted for m in ms], adj)
    text = format_comparison(res)
    assert text.count(" vs ") == 3 and "Williams' t" in text


# ------------------------------------------------------------------------------ labels, layering


def test_compare_scores_against_votes_only_labels(gpt4o, exp_dir):
    """``--label-source votes`` labels both inputs by their votes alone, exactly as ``score`` does."""
    a, b = gpt4o
    res = compare([a, b], ScoringOptions(n_boot=100, label_source="votes"))
    published = compare([a, b], ScoringOptions(n_boot=100))
    sa = score_predictions(a, ScoringOptions(n_boot=0, label_source="votes"))
    sb = score_predictions(b, ScoringOptions(n_boot=0, label_source="votes"))
    for m, d in res.pairs[0].metrics.items():
        assert (d.a, d.b) == (sa.values[m], sb.values[m]), m
    assert res.settings["label_source"] == "votes"
    assert res.pairs[0].metrics["accuracy"].a != published.pairs[0].metrics["accuracy"].a
    files = [str(exp_dir / "safety_gpt-4o" / n) for n in ("output_binary.json", "output_score.json")]
    r = CliRunner().invoke(cli, ["compare", *files, "--label-source", "votes", "--bootstrap", "100", "--json"])
    assert r.exit_code == 0, r.output
    acc = json.loads(r.stdout)["pairs"][0]["metrics"]["accuracy"]
    assert acc["a"] == sa.values["accuracy"] and acc["b"] == sb.values["accuracy"]
    text = CliRunner().invoke(cli, ["compare", *files, "--label-source", "votes", "--bootstrap", "50"]).stdout
    assert "labels: the majority of each case's votes alone" in text
    r = CliRunner().invoke(cli, ["compare", *files, "--label-source", "votes", "--paper-compat"])
    assert r.exit_code == 2 and "--paper-compat uses the published labels" in r.output


def test_votes_only_labels_need_votes(small_data_path):
    from casebench.data import Case, load_dataset
    from casebench.stats.metrics import LabelSourceError

    cases = [Case(c.index, c.query, c.context, c.intended_safe, (), c.safe_rate, c.category)
             for c in load_dataset(small_data_path)]
    pa = Predictions.from_values("a.json", "m", "binary", cases, ["safe"] * len(cases))
    pb = Predictions.from_values("b.json", "m", "binary", cases, ["unsafe"] * len(cases))
    assert compare([pa, pb], ScoringOptions(n_boot=10)).pairs[0].n_paired == len(cases)  # the published labels still work
    with pytest.raises(LabelSourceError, match=r"a\.json: --label-source votes needs the votes of every case"):
        compare([pa, pb], ScoringOptions(n_boot=10, label_source="votes"))


def test_statistics_import_no_presentation():
    """Data flows forward: no module under casebench.stats imports casebench.present (or matplotlib)."""
    import subprocess
    import sys

    code = ("import sys, casebench.stats.metrics, casebench.stats.bootstrap, casebench.stats.compare, "
            "casebench.stats.ablation, casebench.stats.human; "
            "print(sorted(m for m in sys.modules if m.startswith(('casebench.present', 'matplotlib'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
