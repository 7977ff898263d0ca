"""Clustered intervals and tests (``--cluster``), minimum detectable differences and the printing
of p-values at the resampling floor.

The fixture is our own: 6 categories x 4 queries x 2 contexts (48 cases), with votes and
predictions drawn from a seeded generator so that categories differ (a design effect above one
under category clustering). Every clustered figure is checked against a cluster bootstrap
written out here, independently of ``stats.bootstrap``: draw whole clusters with numpy's
``default_rng(seed).integers`` (the same seed), gather their cases, compute the figure directly.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner

from casebench.cli import cli
from casebench.data import load_dataset
from casebench.predictions import Predictions
from casebench.present.numbers import fmt_p
from casebench.stats.bootstrap import case_clusters, cluster_resample_weights, p_floor, resample_weights
from casebench.stats.compare import compare
from casebench.stats.paired_tests import accuracy_matrix, mcnemar_clustered
from casebench.stats.result import score_predictions
from casebench.stats.options import ScoringOptions

N_CAT, N_Q = 6, 4
B, SEED = 400, 5
Z975, Z80 = 1.959963984540054, 0.8416212335729143  # normal quantiles, written out


@pytest.fixture(scope="module")
def fixture_cases(tmp_path_factory):
    rng = np.random.default_rng(11)
    records = []
    for c in range(N_CAT):
        lean = (c - 2.5) / 3.0  # each category leans its own way: people and judges alike
        for q in range(N_Q):
            query = f"Fixture question {c}.{q}: how should a club treasurer store the raffle money?"
            for safe_ctx in (True, False):
                p_safe = 1 / (1 + math.exp(-(lean + (1.2 if safe_ctx else -1.2))))
                ones = int(rng.binomial(20, p_safe))
                scores = [1] * ones + [2] * (20 - ones)
                ctx = {"sender": {"nature_of_the_interaction": f"fixture interaction {safe_ctx}",
                                  "platform_type": "a members' forum"},
                       "recipient": {"type": "treasurer", "background": f"fixture background {c}"},
                       "transmission_principle": {"sender_purpose": f"fixture purpose {q}",
                                                  "confidentiality": "Private.", "source_accountability": "Reviewed.",
                                                  "urgency": "Routine"}}
                records.append({"scores": scores, "query": query, "context": ctx,
                                "safe_rate": (ones + int(safe_ctx)) / 21, "category": f"fixture category {c}",
                                "context_intended_to_be_safe": safe_ctx})
    path = tmp_path_factory.mktemp("cluster") / "cluster_cases.json"
    path.write_text(json.dumps(records))
    return load_dataset(path).cases


def _prob_input(cases, seed: int, name: str) -> Predictions:
    rng = np.random.default_rng(seed)
    g = np.array([c.human_safe_rate for c in cases])
    cat = np.array([int(c.category.split()[-1]) for c in cases])
    p = np.clip(g + 0.25 * (cat - 2.5) / 2.5 * rng.uniform(0.5, 1.0) + rng.normal(0, 0.2, len(cases)), 0.01, 0.99)
    return Predictions.from_values(name, name, "prob", cases, [float(x) for x in p])


def _members(keys: list) -> list[np.ndarray]:
    """The case positions of each cluster, clusters in order of first appearance."""
    order: dict = {}
    for i, k in enumerate(keys):
        order.setdefault(k, []).append(i)
    return [np.array(v) for v in order.values()]


def _key(c, by: str):
    return {"query": c.query, "category": c.category, "case": c.index}[by]


def _independent(cases, by: str, stat) -> np.ndarray:
    """``stat(idx)`` over B cluster resamples drawn here: clusters with replacement, whole."""
    groups = _members([_key(c, by) for c in cases])
    draws = np.random.default_rng(SEED).integers(0, len(groups), size=(B, len(groups)))
    return np.array([stat(np.concatenate([groups[k] for k in row])) for row in draws])


def _pct(v: np.ndarray, level: float = 0.95) -> list[float]:
    v = np.round(v, 12)
    return [float(np.percentile(v, (1 - level) / 2 * 100)), float(np.percentile(v, (1 + level) / 2 * 100))]


@pytest.mark.parametrize("by", ["query", "category"])
def test_clustered_intervals_equal_an_independent_cluster_bootstrap(fixture_cases, by):
    pred = _prob_input(fixture_cases, 1, "judge-a")
    s = score_predictions(pred, ScoringOptions(n_boot=B, bootstrap_seed=SEED, cluster=by))
    g, p = pred.human_rate, pred.p_safe
    def brier(i):
        return np.mean((p[i] - g[i]) ** 2)

    def pcc(i):
        return np.corrcoef(pred.value[i], g[i])[0, 1]

    def floored(stat):
        # the cluster bootstrap's interval, or the cases' where that is wider (the design-effect floor)
        clustered, cases = _pct(_independent(fixture_cases, by, stat)), _pct(_independent(fixture_cases, "case", stat))
        return cases if cases[1] - cases[0] > clustered[1] - clustered[0] else clustered

    # Brier is a bounded mean: from fewer than 30 clusters (24 queries, 6 categories here) its
    # interval is Student's t on K - 1 df over the clusters (stats.small_sample), not the bootstrap
    from casebench.stats.small_sample import FEW_CLUSTERS, cluster_mean

    labels = np.array([_key(c, by) for c in fixture_cases])
    assert len(set(labels.tolist())) < FEW_CLUSTERS
    want = cluster_mean((p - g) ** 2, labels, (0.0, 1.0)).ci
    assert s.ci["brier"] == pytest.approx(list(want), abs=1e-9)
    assert s.ci["pcc"] == pytest.approx(floored(pcc), abs=1e-9)  # r is no bounded mean: the bootstrap
    assert s.cluster == by and s.to_dict()["cluster"] == by


def test_clustering_by_case_is_the_plain_case_bootstrap(fixture_cases):
    labels = np.arange(len(fixture_cases))
    assert np.array_equal(cluster_resample_weights(labels, B, SEED), resample_weights(len(labels), B, SEED))
    pred = _prob_input(fixture_cases, 1, "judge-a")
    s = score_predictions(pred, ScoringOptions(n_boot=B, bootstrap_seed=SEED, cluster="case"))
    g, p = pred.human_rate, pred.p_safe
    draws = np.random.default_rng(SEED).integers(0, len(g), size=(B, len(g)))
    assert s.ci["brier"] == pytest.approx(_pct(np.array([np.mean((p[i] - g[i]) ** 2) for i in draws])), abs=1e-9)
    assert not s.design_effects


def _wilson(k: float, n: float, z: float = Z975) -> list[float]:
    p = k / n
    den = 1 + z ** 2 / n
    mid = (p + z ** 2 / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z ** 2 / (4 * n * n)) / den
    return [max(0.0, mid - half), min(1.0, mid + half)]


def _uneven_judge(cases) -> Predictions:
    """A binary judge right on most cases of half the categories and on few of the others."""
    rng = np.random.default_rng(3)
    values = []
    for c in cases:
        good = int(c.category.split()[-1]) < N_CAT // 2
        right = rng.uniform() < (0.95 if good else 0.35)
        values.append("safe" if (c.human_safe_rate > 0.5) == right else "unsafe")
    return Predictions.from_values("uneven", "uneven", "binary", cases, values)


def test_clustered_wilson_interval_uses_the_effective_number_of_cases(fixture_cases):
    pred = _uneven_judge(fixture_cases)
    correct = (pred.label == 1.0) == (pred.human_rate > 0.5)
    cats = [c.category for c in fixture_cases]
    # the design effect by hand: clusters' variance of the ratio over the cases' variance
    groups = _members(cats)
    N, K = len(correct), len(groups)
    p = correct.mean()
    kc = np.array([correct[g].sum() for g in groups])
    nc = np.array([len(g) for g in groups])
    deff = (K / (K - 1) * np.sum((kc - p * nc) ** 2)) / (N / (N - 1) * N * p * (1 - p))
    assert deff > 1.2  # the fixture's categories lean: clustering matters
    s = score_predictions(pred, ScoringOptions(n_boot=B, bootstrap_seed=SEED, cluster="category"))
    assert s.design_effects["accuracy"] == pytest.approx(deff)
    from scipy.stats import t as student_t

    # clustered: Student's t with K - 1 degrees of freedom in place of z
    assert s.ci["accuracy"] == pytest.approx(_wilson(correct.sum() / deff, N / deff, student_t.ppf(0.975, K - 1)))
    plain = score_predictions(pred, ScoringOptions(n_boot=B, bootstrap_seed=SEED, cluster="case"))
    assert plain.ci["accuracy"] == pytest.approx(_wilson(correct.sum(), N))
    assert s.ci["accuracy"][1] - s.ci["accuracy"][0] > plain.ci["accuracy"][1] - plain.ci["accuracy"][0]


def test_a_design_effect_below_one_never_narrows_a_wilson_interval(fixture_cases):
    # a judge right on exactly one context of every query: by query, every cluster is 1 of 2
    cases = fixture_cases
    values = ["safe" if (c.human_safe_rate > 0.5) == c.intended_safe else "unsafe" for c in cases]
    pred = Predictions.from_values("half", "half", "binary", cases, values)
    s = score_predictions(pred, ScoringOptions(n_boot=B, bootstrap_seed=SEED, cluster="query"))
    plain = score_predictions(pred, ScoringOptions(n_boot=B, bootstrap_seed=SEED, cluster="case"))
    # every query exactly 1 of 2: no variance between clusters at all, so the design effect is
    # undefined (issue 36: a ratio of 0 says nothing), and the interval is the cases' one
    assert math.isnan(s.design_effects["accuracy"])
    lo, hi = s.ci["accuracy"]
    assert lo <= plain.ci["accuracy"][0] and hi >= plain.ci["accuracy"][1]  # t with K - 1 df: a little wider


@pytest.mark.parametrize("by", ["query", "category"])
def test_clustered_paired_differences_equal_an_independent_cluster_bootstrap(fixture_cases, by):
    a, b = _prob_input(fixture_cases, 1, "judge-a"), _prob_input(fixture_cases, 2, "judge-b")
    res = compare([a, b], ScoringOptions(n_boot=B, bootstrap_seed=SEED, cluster=by))
    g = a.human_rate
    ca, cb = (a.label == 1.0) == (g > 0.5), (b.label == 1.0) == (g > 0.5)
    d_acc = _independent(fixture_cases, by, lambda i: ca[i].mean() - cb[i].mean())
    d_brier = _independent(fixture_cases, by,
                           lambda i: np.mean((a.p_safe[i] - g[i]) ** 2) - np.mean((b.p_safe[i] - g[i]) ** 2))
    m = res.pairs[0].metrics
    assert m["accuracy"].ci_bootstrap == pytest.approx(_pct(d_acc), abs=1e-9)
    assert m["accuracy"].ci_note.startswith("Newcombe")  # the interval shown for a difference of shares
    # a difference of bounded means from fewer than 30 clusters: t on K - 1 df over the clusters'
    # paired differences, within the difference's range (stats.small_sample); the bootstrap's beside
    from casebench.stats.small_sample import cluster_mean

    labels = np.array([_key(c, by) for c in fixture_cases])
    rows = (a.p_safe - g) ** 2 - (b.p_safe - g) ** 2
    assert m["brier"].ci == pytest.approx(list(cluster_mean(rows, labels, (-1.0, 1.0)).ci), abs=1e-9)
    # the tests follow the clustering: McNemar for clustered pairs, the cluster bootstrap for r
    assert m["accuracy"].test == "mcnemar_clustered" and m["pcc"].test == "bootstrap"
    assert res.pairs[0].williams is None and res.settings["cluster"] == by
    # the MDD: (z_.975 + z_.8) x the SE its interval rests on (here the t method's, over the clusters);
    # the bootstrap's interval is kept beside it, equal to an independent cluster bootstrap
    assert m["brier"].mdd == pytest.approx((Z975 + Z80) * cluster_mean(rows, labels, (-1.0, 1.0)).se, rel=1e-6)
    assert m["brier"].ci_bootstrap == pytest.approx(_pct(d_brier), abs=1e-9)


def test_mcnemar_for_clustered_pairs_by_hand():
    a = np.array([1, 1, 0, 1, 1, 0, 1, 1, 1, 0], dtype=bool)
    b = np.array([0, 0, 0, 1, 0, 1, 1, 0, 1, 1], dtype=bool)
    clusters = np.array([0, 0, 1, 1, 2, 2, 3, 3, 4, 4])
    # discordance per cluster: (a right, b wrong) - (a wrong, b right): 2, 0, 0, 1, -1
    stat = (2 + 0 + 0 + 1 - 1) ** 2 / (4 + 0 + 0 + 1 + 1)
    from scipy.stats import chi2

    got = mcnemar_clustered(a, b, clusters)
    from scipy.stats import t as student_t

    # five clusters: referred to F(1, 4), i.e. Student's t with K - 1 = 4 degrees of freedom, two-sided
    assert got["statistic"] == pytest.approx(stat)
    assert got["p"] == pytest.approx(2 * student_t.sf(math.sqrt(stat), 4))
    assert got["p"] > chi2.sf(stat, 1)
    assert (got["a_only"], got["b_only"]) == (4, 2)
    assert got["se0"] == pytest.approx(math.sqrt(6) / 10)
    # every case its own cluster: McNemar's asymptotic (b - c)^2 / (b + c)
    single = mcnemar_clustered(a, b, np.arange(10))
    assert single["statistic"] == pytest.approx((4 - 2) ** 2 / 6)
    # the report's matrix gives the same test for every pair at once
    mx = accuracy_matrix(np.array([a, b]), np.ones((2, 10), dtype=bool), clusters=clusters)
    assert mx.test == "clustered" and mx.p[0, 1] == pytest.approx(got["p"]) and mx.p[1, 0] == pytest.approx(got["p"])
    # the MDD's SE is centred on the difference 0.2: D_c - 0.2 x 2 = 1.6, -0.4, -0.4, 0.6, -1.4, with 5/4
    se = math.sqrt(5 / 4 * (1.6 ** 2 + 0.4 ** 2 + 0.4 ** 2 + 0.6 ** 2 + 1.4 ** 2)) / 10
    assert got["se"] == pytest.approx(se)
    assert mx.mdd[0, 1] == pytest.approx((Z975 + Z80) * se)


def test_accuracy_mdd_from_the_discordant_proportion_by_hand(fixture_cases):
    a, b = _prob_input(fixture_cases, 1, "judge-a"), _prob_input(fixture_cases, 2, "judge-b")
    res = compare([a, b], ScoringOptions(n_boot=B, bootstrap_seed=SEED, cluster="case"))
    pc = res.pairs[0]
    n, disc = pc.n_paired, pc.mcnemar["a_only"] + pc.mcnemar["b_only"]
    assert disc > 0
    # the SE of the per-case differences (+1, -1 or 0) centred on their mean, with n / (n - 1)
    d = np.array([1.0] * pc.mcnemar["a_only"] + [-1.0] * pc.mcnemar["b_only"] + [0.0] * (n - disc))
    se = float(np.std(d, ddof=1)) / math.sqrt(n)
    assert pc.metrics["accuracy"].mdd == pytest.approx((1.959964 + 0.841621) * se, rel=1e-6)
    assert pc.metrics["accuracy"].test == "mcnemar" and pc.mcnemar["test"] == "exact"
    # an input against itself: no discordant case, nothing to say how the two could differ
    same = compare([a, a], ScoringOptions(n_boot=B, bootstrap_seed=SEED)).pairs[0].metrics["accuracy"]
    assert math.isnan(same.mdd)


def test_p_values_at_the_resampling_floor_print_as_a_bound():
    assert p_floor(2000) == pytest.approx(2 / 2001)
    assert fmt_p(p_floor(2000), floor=p_floor(2000)) == "< 0.001"
    assert fmt_p(p_floor(1000), floor=p_floor(1000)) == "< 0.002"
    assert fmt_p(p_floor(10000), floor=p_floor(10000)) == "< 0.0002"
    assert fmt_p(0.0123, floor=p_floor(2000)) == "0.0123"
    assert fmt_p(3e-7) == "3.00e-07"  # an exact test's p is measured, not bounded


def test_compare_cli_prints_the_floor_the_clustering_and_the_mdd(exp_dir):
    a = str(exp_dir / "safety_gpt-4o" / "output_binary.json")
    b = str(exp_dir / "safety_llama370B" / "output_binary.json")
    r = CliRunner().invoke(cli, ["compare", a, b, "--bootstrap", "1000", "--explain"])
    assert r.exit_code == 0, r.output
    row = next(line for line in r.output.splitlines() if line.strip().startswith("safe_recall"))
    assert "< 0.002" in row and "e-03" not in row
    assert "resampled by query (450 queries drawn whole)" in r.output and "MDD" in r.output
    r = CliRunner().invoke(cli, ["compare", a, b, "--bootstrap", "1000", "--json", "--cluster", "category"])
    d = json.loads(r.output)
    assert d["settings"]["cluster"] == "category" and d["settings"]["clusters"] == 45
    acc = d["pairs"][0]["metrics"]["accuracy"]
    assert acc["test"] == "mcnemar_clustered" and acc["mdd"] > 0
    assert d["pairs"][0]["metrics"]["safe_recall"]["p_floor"] == pytest.approx(2 / 1001)
    # paper-compatible comparisons resample cases, whatever --cluster says, and print what they always did
    r = CliRunner().invoke(cli, ["compare", a, b, "--bootstrap", "200", "--json", "--paper-compat"])
    d = json.loads(r.output)
    assert "cluster" not in d["settings"] and d["pairs"][0]["metrics"]["accuracy"]["test"] == "mcnemar"


def test_case_clusters_follow_query_text_and_category(fixture_cases):
    q = case_clusters(fixture_cases, "query")
    c = case_clusters(fixture_cases, "category")
    assert q.max() + 1 == N_CAT * N_Q and c.max() + 1 == N_CAT
    assert list(q[:4]) == [0, 0, 1, 1] and list(c[:2 * N_Q]) == [0] * 2 * N_Q
    with pytest.raises(ValueError, match="unknown clustering"):
        ScoringOptions(cluster="model")  # type: ignore[arg-type]


def test_compare_on_a_subset_of_query_pairs_detects_less(exp_dir):
    a = str(exp_dir / "safety_gpt-4o" / "output_binary.json")
    b = str(exp_dir / "safety_llama370B" / "output_binary.json")
    full = json.loads(CliRunner().invoke(cli, ["compare", a, b, "--bootstrap", "0", "--json"]).output)
    r = CliRunner().invoke(cli, ["compare", a, b, "--bootstrap", "0", "--json", "--pairs", "45"])
    assert r.exit_code == 0, r.output
    sub = json.loads(r.output)
    assert sub["pairs"][0]["n_paired"] == 90 and sub["settings"]["clusters"] == 45
    assert sub["pairs"][0]["metrics"]["accuracy"]["mdd"] > full["pairs"][0]["metrics"]["accuracy"]["mdd"]


def test_say_do_follows_the_clustering(fixture_cases):
    from casebench.stats.saydo import say_do

    rng = np.random.default_rng(4)
    n = len(fixture_cases)
    judge = Predictions.from_values("j", "bot", "binary", fixture_cases,
                                    ["safe" if x else "unsafe" for x in rng.uniform(size=n) < 0.6])
    answered = (judge.label == 1.0) ^ (rng.uniform(size=n) < 0.3)
    respond = Predictions.from_values("r", "bot", "respond", fixture_cases, [float(x) for x in answered],
                                      behaviour=[["comply" if x else "refuse"] for x in answered])
    sd = say_do(judge, respond, ScoringOptions(n_boot=B, cluster="category"))
    said, did = judge.label == 1.0, respond.label == 1.0
    cats = case_clusters(fixture_cases, "category")
    assert sd.mcnemar == mcnemar_clustered(said, did, cats)
    agree = (said == did).astype(float)
    groups = _members(list(cats))
    K, p = len(groups), agree.mean()
    deff = (K / (K - 1) * sum((agree[g].sum() - p * len(g)) ** 2 for g in groups)) / (n / (n - 1) * n * p * (1 - p))
    assert sd.agreement_ci == pytest.approx(_wilson(agree.sum() / max(1.0, deff), n / max(1.0, deff)))
