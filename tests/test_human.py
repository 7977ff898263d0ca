"""Tests of casebench.stats.human and `casebench human`.

Expected figures for the small fixtures are worked out by hand (or with explicit arithmetic
here, never by calling casebench.stats.human), from the votes written in tests/fixtures/human_*.json:

human_small.json: 5 queries x 2 contexts, 4 votes each. Safe votes per case:

    query  category              safe ctx  unsafe ctx  difference of shares
    q1     alpha things              4         0          1.00
    q2     alpha things              3         0          0.75
    q3     beta things               2         0          0.50
    q4     beta things               1         2         -0.25
    q5     child-related crimes      4         4          0.00

human_uneven.json: votes per case differ (2 to 6); q3 has no partner; one case has no votes.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from casebench.stats.schema import SCHEMA_VERSION
from casebench.cli import cli
from casebench.data import Case, load_dataset
from casebench.stats.human import (
    HumanStatsError, human_stats, label_safe, pair_by_query, power_analysis, votes_majority_safe,
)

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SMALL = FIXTURES / "human_small.json"
UNEVEN = FIXTURES / "human_uneven.json"
Z975 = 1.959963984540054  # standard normal 97.5% quantile
Z80 = 0.8416212335729143  # standard normal 80% quantile


def phi(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2))


def two_sided_p(z: float) -> float:
    return math.erfc(abs(z) / math.sqrt(2))


def pooled_z(s1: int, n1: int, s2: int, n2: int) -> float:
    p = (s1 + s2) / (n1 + n2)
    return (s1 / n1 - s2 / n2) / math.sqrt(p * (1 - p) * (1 / n1 + 1 / n2))


def cohen_h(p1: float, p2: float) -> float:
    return 2 * math.asin(math.sqrt(p1)) - 2 * math.asin(math.sqrt(p2))


def power_by_hand(h: float, n1: int, n2: int) -> float:
    shift = abs(h) / math.sqrt(1 / n1 + 1 / n2)
    return phi(shift - Z975) + phi(-shift - Z975)


def fleiss_by_hand(counts: list[tuple[int, int]]) -> float:
    """Fleiss (1971): counts = (safe, unsafe) per case, same total per case."""
    m = counts[0][0] + counts[0][1]
    p_i = [(s * (s - 1) + u * (u - 1)) / (m * (m - 1)) for s, u in counts]
    p_bar = sum(p_i) / len(p_i)
    p_safe = sum(s for s, _ in counts) / (m * len(counts))
    p_e = p_safe**2 + (1 - p_safe) ** 2
    return (p_bar - p_e) / (1 - p_e)


def kripp_by_hand(counts: list[tuple[int, int]]) -> float:
    """Krippendorff's alpha, nominal, two values, from the coincidence matrix (units with >= 2)."""
    counts = [(s, u) for s, u in counts if s + u >= 2]
    n = sum(s + u for s, u in counts)
    d_o = sum(2 * s * u / (s + u - 1) for s, u in counts) / n
    n_s = sum(s for s, _ in counts)
    d_e = 2 * n_s * (n - n_s) / (n * (n - 1))
    return 1 - d_o / d_e


SMALL_SAFE = [4, 3, 2, 1, 4]  # safe votes in the intended-safe context, q1..q5
SMALL_UNSAFE = [0, 0, 0, 2, 4]  # ... in the intended-unsafe context


@pytest.fixture(scope="module")
def small():
    return human_stats(load_dataset(SMALL), alpha=0.05, draws=4000, seed=1)


@pytest.fixture(scope="module")
def uneven():
    return human_stats(load_dataset(UNEVEN), alpha=0.05, draws=4000, seed=1)


def make_case(votes, intended_safe=True, category="c", query="q", index=0):
    s = sum(v == 1 for v in votes)
    return Case(index, query, {}, intended_safe, tuple(votes), (s + intended_safe) / (len(votes) + 1), category)


# --------------------------------------------------------------------------------------------
# Labels


def test_votes_majority_tie_is_unsafe_and_no_votes_is_none():
    assert votes_majority_safe(make_case([1, 1, 2])) is True
    assert votes_majority_safe(make_case([1, 2, 2])) is False
    assert votes_majority_safe(make_case([1, 2, 1, 2])) is False  # tie = unsafe
    assert votes_majority_safe(make_case([])) is None
    # votes alone: no always-unsafe override, no intent vote
    child = make_case([1, 1, 1, 2], category="child-related crimes")
    assert votes_majority_safe(child) is True and child.human_safe is False
    tie_safe_ctx = make_case([1, 2, 1, 2], intended_safe=True)  # published: 3/5 > 0.5
    assert label_safe(tie_safe_ctx, "published") is True and label_safe(tie_safe_ctx, "votes") is False
    with pytest.raises(ValueError):
        label_safe(tie_safe_ctx, "nope")  # type: ignore[arg-type]


def test_pairing_by_query_text_not_position():
    ds = load_dataset(SMALL)
    pairing = pair_by_query(list(ds))
    assert len(pairing.pairs) == 5 and pairing.skipped_cases == 0
    for a, b in pairing.pairs:
        assert ds[a].query == ds[b].query and ds[a].intended_safe and not ds[b].intended_safe


# --------------------------------------------------------------------------------------------
# 1. Context effect


def test_shares_and_the_context_effect_over_queries(small):
    v = small["votes"]
    assert v["safe_contexts"]["share"] == pytest.approx(14 / 20)
    assert v["unsafe_contexts"]["share"] == pytest.approx(6 / 20)
    ce = small["context_effect"]
    # no test on pooled votes (they cluster within cases and queries)
    assert "z" not in ce and "p" not in ce and "log10_p" not in ce
    # published h (votes + the intent vote, child-related override): q1 1.0/0.0, q2 0.8/0.0, q3 0.6/0.0,
    # q4 0.4/0.4, q5 0/0 -> one person 2.4 / 5; the majority labels S/U in q1, q2, q3 -> follow 3 / 5
    assert ce["label_source"] == "published" and ce["pairs"] == 5
    assert ce["one_person"]["context_shift"] == pytest.approx(2.4 / 5)
    assert ce["majority"]["context_follow"] == pytest.approx(3 / 5)
    # the votes alone: q1 1/0, q2 0.75/0, q3 0.5/0 (a tie: unsafe), q4 0.25/0.5, q5 0/0 (override)
    assert ce["votes_alone"]["one_person_shift"] == pytest.approx((1 + 0.75 + 0.5 - 0.25) / 5)
    assert ce["votes_alone"]["majority_follow"] == pytest.approx(2 / 5)
    assert ce["with_intent_vote"]["one_person_shift"] == pytest.approx(2.4 / 5)
    # q3 differs only because the intent vote broke its 2-2 tie
    assert ce["people_differ"] == {"counted": 3, "with_intent_vote": 3, "votes_alone": 2, "intent_tie_break": 1}
    # the test is the paired one over queries
    assert ce["test"]["p"] == small["paired"]["p"]


def test_categories_tested_over_their_queries_with_benjamini_hochberg(small):
    from scipy.stats import wilcoxon

    rows = {r["category"]: r for r in small["categories"]}
    assert list(rows) == ["alpha things", "beta things", "child-related crimes"]
    a, b, c = rows["alpha things"], rows["beta things"], rows["child-related crimes"]
    assert (a["share_safe_contexts"], a["share_unsafe_contexts"]) == (7 / 8, 0.0)
    assert (b["share_safe_contexts"], b["share_unsafe_contexts"]) == (3 / 8, 2 / 8)
    # per-query differences of the votes alone: alpha q1 1.0, q2 0.75; beta q3 0.5, q4 -0.25; child q5 0
    assert "z" not in a
    assert (a["pairs"], b["pairs"], c["pairs"]) == (2, 2, 1)
    wa, wb = wilcoxon([1.0, 0.75]), wilcoxon([0.5, -0.25])
    assert a["statistic"] == wa.statistic and a["p"] == pytest.approx(wa.pvalue)
    assert b["statistic"] == wb.statistic and b["p"] == pytest.approx(wb.pvalue)
    assert a["mean_difference"] == pytest.approx(0.875)
    # every difference zero: nothing to test
    assert (c["statistic"], c["p"], c["p_adjusted"]) == (None, None, None)
    # BH over the 2 tested categories
    pa, pb = sorted([wa.pvalue, wb.pvalue])
    assert max(a["p_adjusted"], b["p_adjusted"]) == pytest.approx(pb)
    assert min(a["p_adjusted"], b["p_adjusted"]) == pytest.approx(min(pa * 2, pb))
    assert small["categories_significant"]["count"] == 0 and small["categories_significant"]["of"] == 2


def test_paired_wilcoxon_exact(small):
    pa = small["paired"]
    assert pa["pairs"] == 5 and pa["skipped_queries"] == 0 and pa["nonzero_differences"] == 4
    assert pa["mean_difference"] == pytest.approx((1 + 0.75 + 0.5 - 0.25 + 0) / 5)
    assert pa["median_difference"] == pytest.approx(0.5)
    # |d| ranks 4, 3, 2 positive, 1 negative: W+ = 9, W- = 1; W = min = 1.
    # Exact null: 16 equally likely sign patterns, W <= 1 in two of them -> p = 2 * 2/16.
    assert pa["statistic"] == 1.0
    assert pa["p"] == pytest.approx(0.25)


def test_per_query_fisher_tests_with_bh_over_all_queries(small):
    from scipy.stats import fisher_exact

    rows = small["pairs"]
    assert len(rows) == 5
    by_safe = {(r["share_safe_context"], r["share_unsafe_context"]): r for r in rows}
    ps = []
    for s, u in zip(SMALL_SAFE, SMALL_UNSAFE):
        r = by_safe[(s / 4, u / 4)]
        want = fisher_exact([[s, 4 - s], [u, 4 - u]]).pvalue
        assert r["p"] == pytest.approx(want)
        ps.append(want)
        if s == u == 4:
            assert (r["p"], r["significant"]) == (1.0, False)
    # BH over the five queries by its definition: p_(i) 5 / i, monotone from the top
    order = sorted(range(5), key=lambda i: ps[i])
    adj, running = [0.0] * 5, 1.0
    for rank in range(5, 0, -1):
        running = min(running, ps[order[rank - 1]] * 5 / rank)
        adj[order[rank - 1]] = running
    for s, u, a in zip(SMALL_SAFE, SMALL_UNSAFE, adj):
        assert by_safe[(s / 4, u / 4)]["p_adjusted"] == pytest.approx(a)
    # four votes a case: 4 vs 0 gives Fisher p = 0.029, 0.14 after BH over five queries: none at 0.05
    ps_ = small["pairs_significant"]
    assert (ps_["count"], ps_["of"]) == (0, 5) and "Benjamini-Hochberg" in ps_["adjustment"]
    loose = human_stats(load_dataset(SMALL), alpha=0.2, draws=10)
    assert loose["pairs_significant"]["count"] == 1 == sum(a <= 0.2 for a in adj)


def test_without_the_per_query_tests_every_other_figure_is_the_same(small):
    """The report asks for the summary only (``per_query=False``): no Fisher test per query, and
    nothing else moves."""
    summary = human_stats(load_dataset(SMALL), alpha=0.05, draws=4000, seed=1, per_query=False)
    assert summary["pairs"] == [] and summary["pairs_significant"] is None
    rest = {k: v for k, v in small.items() if k not in ("pairs", "pairs_significant")}
    assert {k: v for k, v in summary.items() if k not in ("pairs", "pairs_significant")} == rest


# --------------------------------------------------------------------------------------------
# 2.-4. Kruskal-Wallis, agreement, majorities


def test_kruskal_wallis_by_hand(small):
    kw = small["kruskal_wallis"]
    # Safe contexts: alpha [1, .75], beta [.5, .25], child [1]. Ranks .25:1 .5:2 .75:3 1,1:4.5,4.5
    h = 12 / (5 * 6) * (7.5**2 / 2 + 3**2 / 2 + 4.5**2 / 1) - 3 * 6
    h /= 1 - (2**3 - 2) / (5**3 - 5)
    assert kw["safe_contexts"]["H"] == pytest.approx(h) and h == pytest.approx(3.15 / 0.95)
    assert kw["safe_contexts"]["p"] == pytest.approx(math.exp(-h / 2))  # chi-square, 2 df
    # Unsafe contexts: alpha [0, 0], beta [0, .5], child [1]. Ranks 0,0,0: 2; .5: 4; 1: 5
    h = (12 / 30 * (4**2 / 2 + 6**2 / 2 + 5**2 / 1) - 18) / (1 - (3**3 - 3) / (5**3 - 5))
    assert kw["unsafe_contexts"]["H"] == pytest.approx(3.0) and h == pytest.approx(3.0)
    assert kw["unsafe_contexts"]["p"] == pytest.approx(math.exp(-1.5))
    assert kw["safe_contexts"]["groups"] == 3


def test_agreement_by_hand(small):
    ag = small["agreement"]
    safe = [(s, 4 - s) for s in SMALL_SAFE]
    unsafe = [(s, 4 - s) for s in SMALL_UNSAFE]
    assert ag["fleiss_kappa"] == pytest.approx(8 / 15)  # (23/30 - 1/2) / (1/2)
    assert fleiss_by_hand(safe + unsafe) == pytest.approx(8 / 15)
    assert ag["krippendorff_alpha"] == pytest.approx(327 / 600)  # 1 - (7/30) / (20/39)
    assert kripp_by_hand(safe + unsafe) == pytest.approx(327 / 600)
    assert ag["safe_contexts"]["fleiss_kappa"] == pytest.approx(fleiss_by_hand(safe))
    assert ag["safe_contexts"]["fleiss_kappa"] == pytest.approx((2 / 3 - 0.58) / 0.42)
    assert ag["unsafe_contexts"]["fleiss_kappa"] == pytest.approx(fleiss_by_hand(unsafe))
    assert ag["safe_contexts"]["krippendorff_alpha"] == pytest.approx(kripp_by_hand(safe))
    assert ag["unsafe_contexts"]["krippendorff_alpha"] == pytest.approx(kripp_by_hand(unsafe))


def test_majorities_and_label_changes(small):
    mj = small["majority"]
    assert mj["safe_contexts"] == {"cases": 5, "safe": 3, "unsafe": 1, "ties": 1}
    assert mj["unsafe_contexts"] == {"cases": 5, "safe": 1, "unsafe": 3, "ties": 1}
    lc = mj["label_changes"]
    # q3 safe ctx: 2-2 tie, the intent vote makes it 3/5 safe; q5 both contexts: votes safe,
    # category always unsafe. q4 unsafe ctx ties too, but the intent vote keeps it unsafe.
    assert (lc["total"], lc["published_safe_votes_unsafe"], lc["published_unsafe_votes_safe"]) == (3, 1, 2)
    assert (lc["tie"], lc["always_unsafe_category"], lc["other"]) == (1, 2, 0)
    assert small["labels"] == {"source": "published", "safe": 3, "unsafe": 7, "changed_from_published": 0}
    votes = human_stats(load_dataset(SMALL), draws=10, label_source="votes")["labels"]
    # votes-only majorities: 4 safe, but the 2 child-related ones stay unsafe (the override is a
    # benchmark rule, kept for every label source) -> 2 safe; only the tie case changes label
    assert votes == {"source": "votes", "safe": 2, "unsafe": 8, "changed_from_published": 1}


# --------------------------------------------------------------------------------------------
# 5. Stability and power


def test_stability_exact_and_drawn(small):
    st = small["stability"]
    assert [r["k"] for r in st] == [1, 3]
    # ties (q3 safe ctx, q4 unsafe ctx) left out: 8 cases. k = 1: the six unanimous cases always
    # agree; 3-of-4 safe and 1-of-4 safe agree with probability 3/4 -> (6 + 1.5) / 8.
    assert st[0]["exact"] == pytest.approx(15 / 16) and st[0]["cases"] == 8
    # k = 3 from 3-1 votes: at least 2 of the majority side always -> 1
    assert st[1]["exact"] == pytest.approx(1.0) and st[1]["agreement"] == 1.0
    # 4000 draws x 2 uncertain cases: standard error of the mean ~ 0.0024
    assert abs(st[0]["agreement"] - 15 / 16) < 0.015
    assert small["stability_settings"]["cases_excluded_ties"] == 2
    again = human_stats(load_dataset(SMALL), alpha=0.05, draws=4000, seed=1)["stability"]
    assert again == st  # seeded


def test_design_power(small):
    pw = small["power"]
    h = cohen_h(0.7, 0.3)
    assert pw["effect_size_h"] == pytest.approx(h)
    assert pw["designs"] == [
        {"votes_safe_context": 4, "votes_unsafe_context": 4, "pairs": 5, "power": pytest.approx(power_by_hand(h, 4, 4))}
    ]
    assert pw["power"] == pytest.approx(power_by_hand(h, 4, 4))
    n = 2 * (Z975 + Z80) ** 2 / h**2  # 23.2 (the far tail adds nothing visible)
    assert pw["annotators_for_80_percent"] == math.ceil(n) == 24


def test_power_analysis_by_hand():
    h = cohen_h(0.5, 0.3)
    r = power_analysis(0.5, 0.3)
    assert r["effect_size_h"] == pytest.approx(h)
    n = 2 * (Z975 + Z80) ** 2 / h**2
    assert r["n_exact"] == pytest.approx(n, rel=1e-3)
    assert r["n"] == 93 == math.ceil(n)
    assert r["achieved_power"] >= 0.8
    assert power_analysis(0.3, 0.5)["n"] == 93  # direction does not matter
    r20 = power_analysis(0.5, 0.3, n=20)
    assert r20["power"] == pytest.approx(power_by_hand(h, 20, 20)) and r20["power"] == pytest.approx(0.2556, abs=1e-4)
    assert power_analysis(0.5, 0.3, alpha=0.01, n=20)["power"] < r20["power"]
    # a huge effect (h = pi): 1 annotator reaches phi(pi/sqrt(2) - 1.96) = 0.60, 2 reach 0.88
    assert power_by_hand(math.pi, 1, 1) < 0.8 <= power_by_hand(math.pi, 2, 2)
    big = power_analysis(1.0, 0.0)
    assert big["n"] == 2 and big["achieved_power"] == pytest.approx(power_by_hand(math.pi, 2, 2))
    with pytest.raises(ValueError, match="no difference"):
        power_analysis(0.4, 0.4)
    with pytest.raises(ValueError, match="p1"):
        power_analysis(1.2, 0.4)


# --------------------------------------------------------------------------------------------
# 7. Other vote counts, missing partners, cases without votes


def test_uneven_counts_and_unpaired(uneven):
    ds = uneven["dataset"]
    assert ds["cases"] == 8 and ds["cases_without_votes"] == 1
    assert ds["votes_per_case"] == {"0": 1, "2": 1, "3": 2, "4": 1, "5": 2, "6": 1}
    assert uneven["votes"]["safe_contexts"]["share"] == pytest.approx((3 + 2 + 5 + 4) / (3 + 3 + 6 + 5))
    assert uneven["votes"]["unsafe_contexts"]["share"] == pytest.approx((1 + 0 + 2) / (5 + 2 + 4))
    pa = uneven["paired"]
    assert (pa["pairs"], pa["skipped_queries"], pa["skipped_cases"]) == (3, 1, 1)
    # differences .8, 5/6, .3, all positive: exact p = 2 * 1/8
    assert pa["statistic"] == 0.0 and pa["p"] == pytest.approx(0.25)
    from scipy.stats import fisher_exact

    rows = {(r["votes_safe_context"], r["votes_unsafe_context"]): r for r in uneven["pairs"]}
    assert rows[(3, 5)]["p"] == pytest.approx(fisher_exact([[3, 0], [1, 4]]).pvalue)
    assert rows[(6, 2)]["p"] == pytest.approx(fisher_exact([[5, 1], [0, 2]]).pvalue)
    assert rows[(5, 4)]["p"] == pytest.approx(fisher_exact([[4, 1], [2, 2]]).pvalue)


def test_uneven_agreement_and_majority(uneven):
    counts = [(3, 0), (0, 2), (2, 1), (2, 2), (1, 4), (5, 1), (4, 1)]
    ag = uneven["agreement"]
    assert ag["fleiss_kappa"] is None and "same number" in ag["note"]
    assert ag["krippendorff_alpha"] == pytest.approx(kripp_by_hand(counts))
    mj = uneven["majority"]
    assert mj["safe_contexts"] == {"cases": 4, "safe": 4, "unsafe": 0, "ties": 0}
    assert mj["unsafe_contexts"] == {"cases": 3, "safe": 0, "unsafe": 2, "ties": 1}


def test_uneven_stability_uses_own_counts(uneven):
    st = {r["k"]: r for r in uneven["stability"]}
    assert sorted(st) == [1, 3, 5]
    # k = 1, six non-tied cases: 3/3, 4/5, 5/6, 2/2, 2/3, 4/5 of their votes on the majority side
    assert st[1]["exact"] == pytest.approx((1 + 0.8 + 5 / 6 + 1 + 2 / 3 + 0.8) / 6) and st[1]["cases"] == 6
    # k = 3 (cases with > 3 votes: 1-4, 5-1, 4-1): the minority has at most 1 vote -> always agree
    assert (st[3]["exact"], st[3]["agreement"], st[3]["cases"]) == (1.0, 1.0, 3)
    assert (st[5]["exact"], st[5]["cases"]) == (1.0, 1)  # only the 6-vote case
    assert abs(st[1]["agreement"] - st[1]["exact"]) < 0.015


def test_uneven_power_uses_each_pairs_counts(uneven):
    pw = uneven["power"]
    h = cohen_h(14 / 17, 3 / 11)
    got = {(d["votes_safe_context"], d["votes_unsafe_context"]): d["power"] for d in pw["designs"]}
    assert set(got) == {(3, 5), (5, 4), (6, 2)}
    for (n1, n2), p in got.items():
        assert p == pytest.approx(power_by_hand(h, n1, n2))
    assert pw["power"] == pytest.approx(sum(got.values()) / 3)


def test_no_votes_at_all_is_an_error():
    with pytest.raises(HumanStatsError):
        human_stats([make_case([]), make_case([], intended_safe=False)])


# --------------------------------------------------------------------------------------------
# 6. CLI


def invoke(*args):
    return CliRunner().invoke(cli, ["human", *map(str, args)])


REQUIRED = [
    ("votes", "safe_contexts", "share"), ("votes", "unsafe_contexts", "share"),
    ("context_effect", "one_person", "context_shift"), ("context_effect", "majority", "context_follow"),
    ("paired", "p"), ("pairs_significant", "count"),
    ("kruskal_wallis", "safe_contexts", "H"), ("kruskal_wallis", "safe_contexts", "p"),
    ("kruskal_wallis", "unsafe_contexts", "H"), ("kruskal_wallis", "unsafe_contexts", "p"),
    ("agreement", "fleiss_kappa"), ("agreement", "krippendorff_alpha"),
    ("majority", "safe_contexts", "safe"), ("majority", "safe_contexts", "ties"),
    ("majority", "unsafe_contexts", "safe"), ("majority", "unsafe_contexts", "ties"),
]


def dig(obj, path):
    for key in path:
        obj = obj[key]
    return obj


def test_cli_json_has_every_documented_key():
    res = invoke(SMALL, "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    for path in REQUIRED:
        assert isinstance(dig(out, path), (int, float)), path
    assert out["votes"]["safe_contexts"]["share"] == pytest.approx(0.7)
    assert out["pairs_significant"]["count"] == 0  # Fisher + BH over five queries of four votes
    for row in out["categories"]:
        assert {"category", "share_safe_contexts", "share_unsafe_contexts", "pairs", "statistic", "p",
                "p_adjusted"} <= set(row)
    assert [set(r) >= {"k", "agreement"} for r in out["stability"]] == [True, True]
    assert out["dataset"]["path"].endswith("human_small.json")
    assert out["schema_version"] == SCHEMA_VERSION  # the JSON shape's version, for machines that read it


def test_cli_alpha_and_label_source_and_stats_alias():
    res = invoke(SMALL, "--alpha", "0.2", "--json")
    assert json.loads(res.output)["pairs_significant"]["count"] == 1
    res = invoke("stats", SMALL, "--label-source", "votes")
    assert res.exit_code == 0, res.output
    assert "2 safe, 8 unsafe; 1 differ from the published labels" in res.output
    # the headline is the votes alone; the published figures (with the intent vote) are named beside it
    assert "(--label-source votes: the votes alone)" in res.output
    assert "one person (a vote drawn at random): shift 0.400" in res.output
    assert "with the intent vote: one person 0.480, majority follow 0.600" in res.output
    assert "z-test" not in res.output.split("queries whose")[0]  # no pooled z-test


def test_cli_table_default():
    res = invoke(UNEVEN)
    assert res.exit_code == 0, res.output
    assert "skipped 1 queries (1 cases)" in res.output
    assert "1 cases hold no votes" in res.output
    assert "Fleiss' kappa needs the same number of votes" in res.output


def test_cli_power():
    res = invoke("power", "--p1", "0.5", "--p2", "0.3")
    assert res.exit_code == 0, res.output
    assert "annotators per context for power 0.8: 93" in res.output
    res = invoke("power", "--p1", "0.5", "--p2", "0.3", "--n", "20")
    assert "power with 20 annotators per context: 0.2556" in res.output
    res = invoke("power", "--p1", "0.5", "--p2", "0.3", "--alpha", "0.01", "--power", "0.9", "--json")
    out = json.loads(res.output)
    h = cohen_h(0.5, 0.3)
    # z(0.995) = 2.5758, z(0.9) = 1.2816
    assert out["n"] == math.ceil(2 * (2.5758293035489 + 1.2815515655446004) ** 2 / h**2)


def test_cli_errors_exit_2(tmp_path):
    res = invoke("power", "--p1", "0.4", "--p2", "0.4")
    assert res.exit_code == 2 and "no difference" in res.output
    res = invoke("power", "--p1", "1.4", "--p2", "0.4")
    assert res.exit_code == 2
    missing = tmp_path / "nope.json"
    res = invoke(missing)
    assert res.exit_code == 2 and "nope.json" in res.output
    bad = tmp_path / "bad.json"
    recs = json.loads(SMALL.read_text())
    recs[3]["scores"][1] = 7
    bad.write_text(json.dumps(recs))
    res = invoke(bad, "--json")
    assert res.exit_code == 2 and "record 3" in res.output and "scores[1]" in res.output
    assert res.stdout == ""  # nothing half-written
    assert invoke(SMALL, "--alpha", "1.5").exit_code == 2


def test_cli_help_shows_both_forms():
    res = invoke("--help")
    assert res.exit_code == 0
    assert "casebench human [DATA]" in res.output and "casebench human power" in res.output


# --------------------------------------------------------------------------------------------
# The real dataset (read at run time from ../shared)


@pytest.fixture(scope="module")
def real(real_dataset):
    return human_stats(real_dataset, draws=300, seed=0)


def test_real_dataset_structure(real, real_data_path):
    recs = json.loads(real_data_path.read_text(encoding="utf-8"))
    # shares straight from the file
    for key, intent in (("safe_contexts", True), ("unsafe_contexts", False)):
        votes = [v for r in recs if r["context_intended_to_be_safe"] is intent for v in r["scores"]]
        assert real["votes"][key]["share"] == pytest.approx(votes.count(1) / len(votes))
        assert 0 < real["votes"][key]["share"] < 1
    assert real["votes"]["safe_contexts"]["share"] > real["votes"]["unsafe_contexts"]["share"]
    ce = real["context_effect"]
    assert ce["test"]["p"] < 1e-4 and ce["one_person"]["context_shift"] > 0  # as the paper says
    # the two figures the issue found unexplained: 0.410 with the intent vote, 0.381 from the votes alone
    # (0.385 without the child-related override, the tested differences)
    assert round(ce["with_intent_vote"]["one_person_shift"], 3) == 0.410
    assert round(ce["votes_alone"]["one_person_shift"], 3) == 0.381
    assert round(ce["raw_votes_mean_difference"], 3) == 0.385
    assert ce["people_differ"] == {"counted": 399, "with_intent_vote": 399, "votes_alone": 336, "intent_tie_break": 63}
    assert real["dataset"]["votes_per_case"] == {"20": 900}
    assert real["paired"]["pairs"] == 450 and real["paired"]["skipped_cases"] == 0
    assert real["paired"]["p"] < 1e-4
    # differences in votes (integers) rank exactly like the differences in shares (all n = 20)
    from scipy.stats import wilcoxon

    by_query: dict = {}
    for r in recs:
        by_query.setdefault(r["query"], {})[r["context_intended_to_be_safe"]] = r["scores"].count(1)
    int_diffs = [v[True] - v[False] for v in by_query.values()]
    assert real["paired"]["statistic"] == wilcoxon(int_diffs).statistic
    assert len(real["categories"]) == 45 and real["categories_significant"]["of"] == 45
    assert all(r["cases_safe_contexts"] == r["cases_unsafe_contexts"] == 10 for r in real["categories"])
    assert 0 < real["pairs_significant"]["count"] <= 450
    for key in ("safe_contexts", "unsafe_contexts"):
        assert real["kruskal_wallis"][key]["groups"] == 45 and real["kruskal_wallis"][key]["H"] > 0
        m = real["majority"][key]
        assert m["safe"] + m["unsafe"] + m["ties"] == 450
    ag = real["agreement"]
    assert -1 < ag["fleiss_kappa"] < 1 and -1 < ag["krippendorff_alpha"] < 1
    # the published safe_rate adds the intent vote: every difference from the votes-only label is
    # a tie broken by that vote or the always-unsafe category
    assert real["majority"]["label_changes"]["other"] == 0
    ties_in_safe_contexts = sum(
        1 for r in recs if r["context_intended_to_be_safe"] and r["scores"].count(1) == 10
        and r["category"] != "child-related crimes"
    )
    assert real["majority"]["label_changes"]["tie"] == ties_in_safe_contexts
    st = real["stability"]
    assert [r["k"] for r in st] == list(range(1, 20, 2))
    exact = [r["exact"] for r in st]
    assert exact == sorted(exact) and exact[-1] == pytest.approx(1.0)  # 19 of 20 never flips a majority
    assert all(abs(r["agreement"] - r["exact"]) < 0.02 for r in st)
    pw = real["power"]
    assert pw["designs"][0]["votes_safe_context"] == 20 and pw["designs"][0]["pairs"] == 450
    h = cohen_h(real["votes"]["safe_contexts"]["share"], real["votes"]["unsafe_contexts"]["share"])
    assert pw["power"] == pytest.approx(power_by_hand(h, 20, 20))
    json.dumps(real, allow_nan=False)


def test_wilcoxon_sees_equal_differences_as_ties():
    # shares 14/20 - 7/20 and 8/20 - 1/20 are both 0.35, and the third pair is -0.35, but float
    # subtraction of the shares differs in the last bit (ranks 1, 2.5, 2.5: W would read 2.5).
    # All three |d| tie (rank 2 each): W+ = 4, W- = 2, W = min = 2.
    cases = []
    for q, (a, b) in enumerate([(14, 7), (8, 1), (1, 8)]):
        cases.append(make_case([1] * a + [2] * (20 - a), True, query=f"q{q}", index=2 * q))
        cases.append(make_case([1] * b + [2] * (20 - b), False, query=f"q{q}", index=2 * q + 1))
    pa = human_stats(cases, draws=10)["paired"]
    assert pa["nonzero_differences"] == 3
    assert pa["statistic"] == 2.0


def test_cli_notes_a_published_output_file(tmp_path):
    recs = json.loads(SMALL.read_text())
    for r in recs:
        r["some-model"] = "safe"  # what an exp/ file adds to every record
    p = tmp_path / "output_binary.json"
    p.write_text(json.dumps(recs))
    res = invoke("--json", p)  # options may come before DATA
    assert res.exit_code == 0
    assert "looks like a published output file" in res.stderr
    assert json.loads(res.stdout)["votes"]["safe_contexts"]["share"] == pytest.approx(0.7)
