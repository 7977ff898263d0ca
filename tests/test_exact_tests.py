"""Tests as a statistician would run them (issue 36, item 3): the exact sign-flip Wilcoxon against
a brute-force enumeration of every sign flip, Fisher's exact test per query with Benjamini-Hochberg
over all queries against scipy and a BH of our own, p-values printed with no false precision, and
the context figures adjusted in one family in ``compare``."""

import itertools
import json
import re

import numpy as np
import pytest
from scipy.stats import fisher_exact, rankdata

from casebench.stats.fdr import bh_adjust
from casebench.stats.human import signed_rank_exact

SHARED = __import__("pathlib").Path(__file__).resolve().parents[2] / "shared" / "casebench"
needs_data = pytest.mark.skipif(not (SHARED / "exp").is_dir(), reason="the published files are not at ../shared")


def _brute_force(d: np.ndarray) -> float:
    nz = d[d != 0]
    r = rankdata(np.abs(nz))
    t = r[nz > 0].sum()
    ts = np.array([r[np.array(s, dtype=bool)].sum() for s in itertools.product([0, 1], repeat=len(r))])
    return float(min(1.0, 2 * min(np.mean(ts <= t + 1e-9), np.mean(ts >= t - 1e-9))))


@pytest.mark.parametrize("d", [
    np.arange(1, 11) / 20,                                          # n = 10, all positive: 2 / 2^10
    np.array([0.1, 0.1, 0.2, -0.05, 0.3, 0.3, 0.3, 0.0, -0.1, 0.45, 0.2, 0.05]),   # ties and a zero
    np.array([-0.2, 0.2, -0.2, 0.2, 0.1]),
    np.array([0.35, 0.4, 0.1, 0.45, 0.3, 0.25, 0.4, 0.5, 0.3, 0.35]),  # a category's ten queries
])
def test_exact_signed_rank_equals_every_sign_flip_enumerated(d):
    got = signed_rank_exact(d)
    assert got["p"] == pytest.approx(_brute_force(d), rel=1e-12)
    assert got["method"].startswith("exact")


def test_the_normal_approximation_is_not_used_at_n_10():
    got = signed_rank_exact(np.arange(1, 11) / 20)
    assert got["p"] == pytest.approx(2 / 1024)  # the normal approximation says 0.0049


def test_a_large_n_says_it_is_approximate(monkeypatch):
    import casebench.stats.human as h

    monkeypatch.setattr(h, "EXACT_SIGNED_RANK_MAX", 5)
    got = h.signed_rank_exact(np.arange(1, 11) / 20)
    assert "normal approximation" in got["method"]


def _bh(p: list[float], alpha: float) -> tuple[list[float], list[bool]]:
    """Benjamini-Hochberg by its definition: p_(i) m / i, made monotone from the top."""
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    adj = [0.0] * m
    running = 1.0
    for rank in range(m, 0, -1):
        i = order[rank - 1]
        running = min(running, p[i] * m / rank)
        adj[i] = running
    return adj, [a <= alpha for a in adj]


def test_bh_equals_its_definition():
    p = [0.001, 0.04, 0.03, 0.2, 0.0005, 0.049, 0.9]
    adj, rej = bh_adjust(p, 0.05)
    want_adj, want_rej = _bh(p, 0.05)
    assert adj.tolist() == pytest.approx(want_adj)
    assert rej.tolist() == want_rej


@needs_data
def test_pairs_significant_is_fisher_with_bh_over_all_queries(monkeypatch):
    """Through the CLI: 247 of 450 queries on the published data, recomputed from the raw file
    with scipy's Fisher test and a BH of our own."""
    from click.testing import CliRunner

    from casebench.cli import cli

    data = SHARED / "CASEBench_data.json"
    res = CliRunner().invoke(cli, ["human", str(data), "--json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    recs = json.loads(data.read_text())
    by_q: dict = {}
    for r in recs:
        by_q.setdefault(r["query"], {})[r["context_intended_to_be_safe"]] = r["scores"]
    ps = []
    for q in by_q.values():
        s, u = q[True], q[False]
        ks, ku = s.count(1), u.count(1)
        ps.append(fisher_exact([[ks, len(s) - ks], [ku, len(u) - ku]]).pvalue)
    _, rej = _bh(ps, 0.05)
    assert len(ps) == 450
    assert out["pairs_significant"]["count"] == sum(rej) == 247
    assert "Benjamini-Hochberg over all 450 queries" in out["pairs_significant"]["adjustment"]
    # the exact Wilcoxon over the 446 nonzero per-query differences
    assert out["paired"]["method"].startswith("exact")
    assert out["paired"]["p"] == pytest.approx(6.1e-124, rel=0.01)
    text = CliRunner().invoke(cli, ["human", str(data)], catch_exceptions=False).output
    # printed as a bound (a statement about the sign-flip model, not the data); the JSON keeps the value
    assert "p < 1e-10" in text and "6.11e-124" not in text and "Fisher's exact test" in text
    assert not re.search(r"\d\.?\d*e-(1[1-9]|[2-9]\d|\d{3})", text)  # no p below 1e-10 printed as a number


def test_p_values_below_the_floor_print_as_a_bound():
    from casebench.present.numbers import fmt_p

    assert fmt_p(3.15e-74) == "< 1e-10"
    assert fmt_p(3.15e-74, exact=True) == "< 1e-10"  # exact or not
    assert fmt_p(2e-5) == "2.00e-05"


@needs_data
def test_compare_adjusts_the_context_figures_as_one_family():
    from casebench.published import load_published
    from casebench.stats.compare import compare
    from casebench.stats.metrics import METRIC
    from casebench.stats.options import ScoringOptions

    a = load_published(SHARED / "exp" / "safety_gpt-4o" / "output_binary.json")
    b = load_published(SHARED / "exp" / "safety_llama370B" / "output_binary.json")
    pc = compare([a, b], ScoringOptions(n_boot=300)).pairs[0]
    fam = [m for m in pc.metrics.values() if METRIC[m.metric].family == "context" and m.p is not None]
    assert {"context_direction", "context_moved", "context_concordance", "context_shift"} <= {m.metric for m in fam}
    adj, _ = _bh([m.p for m in fam], 0.05)
    assert [m.p_adjusted for m in fam] == pytest.approx(adj)


def test_an_adjusted_p_from_a_floored_p_prints_as_a_bound():
    """A bootstrap p at its floor is only bounded; its Benjamini-Hochberg adjusted value is too."""
    from casebench.present.numbers import fmt_p_adjusted

    assert fmt_p_adjusted(0.0015, 0.0005, 0.0005) == "< 0.002"
    assert fmt_p_adjusted(0.03, 0.01, 0.0005) == "0.0300"
    assert fmt_p_adjusted(0.03, 0.01, None) == "0.0300"
