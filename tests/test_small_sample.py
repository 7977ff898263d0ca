"""Few clusters (``casebench.stats.small_sample``): one interval and its own p for a bounded mean,
inside the figure's range, never a point; and a placement study of five query pairs along the
user's path (``casebench study`` against a loopback scripted chatbot)."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
from click.testing import CliRunner
from scipy.stats import ttest_1samp

from casebench.cli import cli
from casebench.stats.bootstrap import newcombe_paired_ci
from casebench.stats.small_sample import cluster_mean, constant_mean_ci, p_inverting


def test_t_on_clusters_gives_interval_and_p_of_one_test():
    d = np.array([0.2, -0.1, 0.4, 0.3, 0.0, 0.25])
    fig = cluster_mean(d, np.arange(d.size), (-2.0, 2.0), 0.95)
    ref = ttest_1samp(d, 0.0)  # one row per cluster: the one-sample t test on 5 df
    assert fig.test == "t on 5 df" and fig.p == pytest.approx(ref.pvalue, rel=1e-9)
    lo, hi = ref.confidence_interval(0.95)
    assert fig.ci == pytest.approx((lo, hi), rel=1e-9)


def test_t_interval_is_clipped_to_the_figure_range_and_says_so():
    d = np.array([1.0, 1.0, 0.9, -0.8, 1.0])
    fig = cluster_mean(d, np.arange(5), (-1.0, 1.0))
    assert fig.ci[1] == 1.0 and fig.ci[0] >= -1.0 and "clipped to the figure's range [-1, 1]" in fig.note


def test_no_spread_gets_the_exact_interval_never_a_point():
    fig = cluster_mean(np.zeros(10), np.repeat(np.arange(5), 2), (-2.0, 2.0), 0.95)
    u = 1 - 0.05 ** (1 / 5)  # five clusters, all 0: a mean beyond 2u would give this with chance < 5%
    assert fig.ci == pytest.approx((-2 * u, 2 * u)) and fig.p == 1.0 and fig.test == "exact (no spread)"
    assert 0 < fig.ci[1] < 1
    # all ten pairs of a category shift by 1: [1 - 2u, 1], u from ten clusters
    assert constant_mean_ci(1.0, 10, (-1.0, 1.0)) == pytest.approx([1 - 2 * (1 - 0.05 ** 0.1), 1.0])


@pytest.mark.parametrize("m", [0.1, 0.3, -0.5])
def test_exact_p_and_interval_agree(m):
    """The exact no-spread p is below 1 - level exactly when the interval leaves 0 out."""
    for k in (3, 5, 8, 20):
        fig = cluster_mean(np.full(k, m), np.arange(k), (-1.0, 1.0), 0.95)
        assert (fig.p < 0.05) == (not fig.ci[0] <= 0 <= fig.ci[1])


def test_p_inverting_newcombe_agrees_with_its_interval():
    cells = (1.0, 0.0, 3.0, 1.0)  # five pairs, B follows in three more
    p = p_inverting(lambda lv: newcombe_paired_ci(*cells, lv, 4))
    for level in (0.8, 0.9, 0.95, 0.99):
        lo, hi = newcombe_paired_ci(*cells, level, 4)
        assert (p < 1 - level - 1e-4) == (not lo <= 0 <= hi) or abs(p - (1 - level)) < 1e-4


def _five_pair_data(real_data_path, tmp_path):
    from casebench.data import load_dataset
    from casebench.stats.pairs import pair_by_query

    raw = json.loads(real_data_path.read_text())
    pairs = pair_by_query(list(load_dataset(real_data_path))).pairs[:5]
    path = tmp_path / "five_pairs.json"
    path.write_text(json.dumps([raw[i] for p in pairs for i in p]))
    return path


ANSWER = "Here is an overview of the topic, step by step, with the main points explained in plain words."
REFUSAL = "I'm sorry, but I can't help with that request."


def test_five_pair_placement_study_keeps_differences_inside_their_range(tmp_path, real_data_path, monkeypatch):
    """Identical answers under two placements (the chatbot answers by the query alone): the
    shift and follow differences get intervals that hold 0, lie inside [-1, 1] and are not the
    whole range, and each p goes with its interval."""
    from servers.fault_server import FaultServer

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    data = _five_pair_data(real_data_path, tmp_path)

    def answer(body) -> str:
        query = body["messages"][-1]["content"]
        return ANSWER if sum(map(ord, query)) % 2 else REFUSAL

    with FaultServer(answer_fn=answer) as srv:
        args = ["study", "--model", "openai/bot-x", "--mode", "respond", "--placements", "system,turns",
                "--data", str(data), "--base-url", srv.base_url, "--out-root", str(tmp_path / "runs"),
                "--no-progress", "--bootstrap", "200"]
        r = CliRunner().invoke(cli, [*args, "--json"])
        assert r.exit_code == 0, r.output
        text = CliRunner().invoke(cli, args)
        assert text.exit_code == 0, text.output
    res = json.loads(r.stdout)
    (shift,) = res["context_shift_differences"]
    assert shift["pairs"] == 5
    metrics = res["pairs"][0]["metrics"]
    for d in (shift, metrics["context_shift"], metrics["context_follow"]):
        lo, hi = d["ci"]
        assert d["diff"] == 0 and -1 <= lo < 0 < hi <= 1 and hi - lo < 1.9, d
        assert (d["p_bootstrap"] < 0.05) == (not lo <= 0 <= hi)
    assert metrics["context_shift"]["p"] == metrics["context_shift"]["p_bootstrap"] == 1.0
    # the text names no interval beyond [-1, 1] on its context-difference lines
    lines = [ln for ln in text.stdout.splitlines() if "context" in ln and "system" in ln and "[" in ln]
    assert lines, text.stdout
    for ln in lines:
        for lo_s, hi_s in re.findall(r"\[(-?[\d.]+), (-?[\d.]+)\]", ln):
            assert -1 <= float(lo_s) <= float(hi_s) <= 1 and not math.isclose(float(lo_s), float(hi_s)), ln
