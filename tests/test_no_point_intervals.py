"""No figure from data gets a point interval, no undefined figure gets a number (issue 36, item 2):
Newcombe's paired interval against an independent computation, the analytic fallback where the
bootstrap degenerates, Pearson r and design effects of a constant undefined; through the CLI on
the published files where they show it."""

import json
import math

import numpy as np
import pytest

from casebench.data import Case
from casebench.predictions import Predictions
from casebench.stats.bootstrap import bounded_mean_ci, mean_design_effect, newcombe_paired_ci, proportion_design_effect
from casebench.stats.compare import compare
from casebench.stats.options import ScoringOptions
from casebench.stats.result import score_predictions

SHARED = __import__("pathlib").Path(__file__).resolve().parents[2] / "shared" / "casebench"
needs_data = pytest.mark.skipif(not (SHARED / "exp").is_dir(), reason="the published files are not at ../shared")
Z95 = 1.959963984540054


def _wilson(k: float, n: float, z: float = Z95) -> tuple[float, float]:
    # the roots of (p - k/n)^2 = z^2 p (1 - p) / n, written out
    a = 1 + z * z / n
    b = -(2 * k / n + z * z / n)
    c = (k / n) ** 2
    r = math.sqrt(b * b - 4 * a * c)
    return (-b - r) / (2 * a), (-b + r) / (2 * a)


def _newcombe(e: float, f: float, g: float, h: float) -> tuple[float, float]:
    """Newcombe (1998) method 10 as biostatUZH's confIntPairedProportion writes it (phi's numerator
    AD - BC less n/2 when above n/2, 0 up to it, kept when negative): e both, f A only, g B only,
    h neither."""
    n = e + f + g + h
    p1, p2 = (e + f) / n, (e + g) / n
    l1, u1 = _wilson(e + f, n)
    l2, u2 = _wilson(e + g, n)
    den = (e + f) * (g + h) * (e + g) * (f + h)
    b = e * h - f * g
    c = b - n / 2 if b > n / 2 else (b if b < 0 else 0.0)
    phi = c / math.sqrt(den) if den else 0.0
    dl = math.sqrt((p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2)
    du = math.sqrt((u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2)
    return p1 - p2 - dl, p1 - p2 + du


@pytest.mark.parametrize("table", [(12, 5, 2, 21), (40, 0, 0, 10), (3, 7, 1, 0), (50, 9, 14, 27), (2, 0, 0, 2),
                                   (14, 5, 0, 22)])
def test_newcombe_equals_an_independent_computation(table):
    got = newcombe_paired_ci(*table)
    want = _newcombe(*table)
    assert got == pytest.approx([max(-1, want[0]), min(1, want[1])], abs=1e-12)
    assert got[1] > got[0]


def test_bounded_mean_fallback_is_the_rescaled_wilson_and_never_a_point():
    # ten pairs that all shift by 1 on [-1, 1]: Wilson of 10 of 10, mapped back
    lo, hi = bounded_mean_ci(1.0, 10, (-1.0, 1.0))
    wl, wh = _wilson(10, 10)
    assert (lo, hi) == pytest.approx((-1 + 2 * wl, -1 + 2 * wh))
    assert hi == pytest.approx(1.0) and lo < 1.0


def test_design_effects_of_a_constant_are_undefined():
    labels = np.repeat(np.arange(5), 2)
    # every cluster exactly at p (one of its two cases counted): no between-cluster variance
    assert math.isnan(proportion_design_effect(np.tile([1.0, 0.0], 5), np.ones(10), labels))
    assert math.isnan(proportion_design_effect(np.ones(10), np.ones(10), labels))  # p = 1
    assert math.isnan(mean_design_effect(np.zeros(10), labels))
    # and a defined one: two clusters apart, the rest split
    k = np.array([1, 1, 0, 0, 1, 0, 1, 0, 1, 0], dtype=float)
    assert proportion_design_effect(k, np.ones(10), labels) > 0


def _case(i: int, q: str, safe_ctx: bool, safe: int) -> Case:
    votes = (1,) * safe + (2,) * (20 - safe)
    return Case(i, q, {"x": {"y": str(i)}}, safe_ctx, votes, (safe + safe_ctx) / 21, "a")


CASES = [_case(2 * q + j, f"q{q}", j == 0, s) for q, pair in enumerate([(16, 3), (14, 5), (12, 9), (17, 2), (6, 8)])
         for j, s in enumerate(pair)]


def test_constant_prediction_has_pearson_r_undefined():
    for v in (0.1, 0.7, 1 / 3):
        s = score_predictions(Predictions.from_values("c", "m", "prob", CASES, [v] * len(CASES)),
                              ScoringOptions(n_boot=200))
        assert math.isnan(s.values["pcc"])
        d = json.loads(json.dumps(__import__("casebench.jsonutil", fromlist=["x"]).json_safe(s.to_dict())))
        assert d["pcc"] is None
        assert all(x is None for x in d["ci"].get("pcc", [None, None]))


def test_two_identical_inputs_differ_by_zero_with_an_interval_that_is_not_a_point():
    vals = ["safe", "unsafe", "safe", "safe", "unsafe", "unsafe", "safe", "unsafe", "unsafe", "safe"]
    a = Predictions.from_values("a", "m1", "binary", CASES, vals)
    b = Predictions.from_values("b", "m2", "binary", CASES, vals)
    c = compare([a, b], ScoringOptions(n_boot=300))
    for name, m in c.pairs[0].metrics.items():
        if math.isnan(m.diff):
            continue
        lo, hi = m.ci
        assert not (lo == hi), (name, m.ci, m.ci_note)
        if m.ci_note and m.ci_note.startswith("Newcombe"):
            assert lo < 0 < hi


@needs_data
def test_gpt4o_binary_by_category_has_no_interval_of_zero_width(monkeypatch):
    from click.testing import CliRunner

    from casebench.cli import cli

    monkeypatch.setenv("CASEBENCH_DATA", str(SHARED / "CASEBench_data.json"))
    f = str(SHARED / "exp" / "safety_gpt-4o" / "output_binary.json")
    for cluster in ("case", "query"):
        res = CliRunner().invoke(cli, ["score", f, "--by", "category", "--json", "--cluster", cluster,
                                       "--bootstrap", "300"], catch_exceptions=False)
        assert res.exit_code == 0, res.output
        d = json.loads(res.output.splitlines()[0])
        widths, notes = [], 0
        for name, row in [("all", d)] + list(d["breakdowns"]["category"].items()):
            for m, ci in row["ci"].items():
                if ci is not None and None not in ci:
                    widths.append((name, m, ci[1] - ci[0]))
            notes += len(row.get("ci_notes", {}))
        assert len(d["breakdowns"]["category"]) == 45
        assert all(w > 0 for _, _, w in widths), [x for x in widths if x[2] <= 0]
        if cluster == "case":
            assert notes > 0  # the fallback was needed and says so


@needs_data
def test_clustered_bootstrap_intervals_are_never_narrower_than_the_cases():
    """The design-effect floor for bootstrap intervals: by query the two contexts of a query pull
    opposite ways and the cluster bootstrap came out 0.83-0.94 times the case-level width."""
    from casebench.published import load_published
    from casebench.stats.metrics import METRIC

    p = load_published(SHARED / "exp" / "safety_llama370B" / "output_logits.json")
    q = score_predictions(p, ScoringOptions(n_boot=300, cluster="query"))
    c = score_predictions(p, ScoringOptions(n_boot=300, cluster="case"))
    checked = 0
    for m, (lo, hi) in q.ci.items():
        if METRIC[m].proportion is None and m in c.ci:
            assert hi - lo >= c.ci[m][1] - c.ci[m][0] - 1e-12, m
            checked += 1
    assert checked >= 8


def test_the_demo_sets_constant_prediction_prints_r_and_design_effects_undefined():
    """The demo set (labelled by intent) with a chatbot that answers everything: Pearson r and
    the design effects are undefined, in the table and in JSON, not 0.0000 [0.0000, 0.0000]."""
    import pathlib

    import casebench
    from casebench.data import load_dataset
    from casebench.jsonutil import json_safe
    from casebench.present.score_text import text_table

    ds = load_dataset(pathlib.Path(casebench.__file__).parent / "demo" / "demo_cases.json")
    p = Predictions.from_values("demo", "m", "respond", list(ds), [1.0] * len(ds))
    s = score_predictions(p, ScoringOptions(n_boot=200))
    line = next(x for x in text_table([s]).splitlines() if "Pearson r vs safe_rate" in x)
    assert "0.0000" not in line
    d = json_safe(s.to_dict())
    assert d["pcc"] is None and d["design_effects"]["accuracy"] is None
    assert "accuracy_ceiling" not in d  # no individual votes: no ceiling
