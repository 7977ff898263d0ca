"""The refusal rate corrected for the reader's measured error (``stats.refusal``): against a hand
computation, and its interval against the uncorrected Wilson interval."""

from __future__ import annotations

import math

import pytest

from casebench.stats.metrics import wilson_ci
from casebench.stats.refusal import ReaderError, corrected_difference, corrected_rate, rogan_gladen

Z = 1.959963984540054  # the 97.5% normal quantile


def test_rogan_gladen_by_hand() -> None:
    # 6 of 20 answers read as refusals; the reader found 18 of 20 refusals (Se 0.9) and read 19 of
    # 20 answers as answers (Sp 0.95): (0.3 + 0.95 - 1) / (0.9 + 0.95 - 1) = 0.25 / 0.85
    err = ReaderError(tp=18, fn=2, tn=19, fp=1, source="fixture")
    assert err.sensitivity == pytest.approx(0.9) and err.specificity == pytest.approx(0.95)
    r = corrected_rate(6, 20, err)
    assert r is not None
    assert r.raw == pytest.approx(0.3)
    assert r.corrected == pytest.approx(0.25 / 0.85, abs=1e-12)
    assert rogan_gladen(0.3, 0.9, 0.95) == pytest.approx(0.294117647, abs=1e-9)
    # clipped: fewer refusals read than the reader's false refusals alone would give
    assert rogan_gladen(0.02, 0.9, 0.95) == 0.0
    assert rogan_gladen(0.99, 0.9, 0.95) == 1.0


def test_interval_by_hand() -> None:
    """Lee et al.'s interval, worked step by step on paper for the fixture above:
    q~ = (6 + z^2/2) / (20 + z^2) = 7.92073 / 23.84146 = 0.332225; Sp~ = 20/22, Se~ = 19/22,
    J~ = 0.772727; theta~ = (0.332225 + 0.909091 - 1) / 0.772727 = 0.312291;
    shift = 2 z^2 (-(1 - theta~) Sp~(1 - Sp~)/22 + theta~ Se~(1 - Se~)/22) = -0.0070045;
    sd = sqrt(q~(1 - q~)/23.84146 + (1 - theta~)^2 Sp~(1 - Sp~)/22 + theta~^2 Se~(1 - Se~)/22) / J~
       = 0.139405; bounds 0.312291 - 0.007004 -/+ 1.959964 * 0.139405."""
    r = corrected_rate(6, 20, ReaderError(tp=18, fn=2, tn=19, fp=1))
    assert r is not None
    assert r.ci[0] == pytest.approx(0.032058, abs=2e-6)
    assert r.ci[1] == pytest.approx(0.578515, abs=2e-6)
    assert r.ci == r.ci_unclipped  # inside [0, 1]: nothing clipped


def test_under_refusal_is_the_complement() -> None:
    err = ReaderError(tp=18, fn=2, tn=19, fp=1)
    r = corrected_rate(6, 20, err)
    u = r.flipped()
    assert u.raw == pytest.approx(0.7) and u.corrected == pytest.approx(1 - r.corrected)
    assert u.ci == pytest.approx((1 - r.ci[1], 1 - r.ci[0]))
    assert (u.k, u.n) == (14, 20)


def _errors() -> list[ReaderError]:
    out = []
    for m1 in (10, 40, 161):
        for m0 in (10, 44, 135):
            for fn in sorted({0, 1, m1 // 10, m1 // 4}):
                for fp in sorted({0, 1, m0 // 20, m0 // 5}):
                    if fn + fp:  # the reader errs
                        out.append(ReaderError(tp=m1 - fn, fn=fn, tn=m0 - fp, fp=fp))
    return out


@pytest.mark.parametrize("level", [0.9, 0.95, 0.99])
def test_interval_never_narrower_than_uncorrected(level: float) -> None:
    """With a reader that errs, the corrected interval is at least as wide as the raw rate's Wilson
    interval: always before clipping, and after clipping wherever it lies inside [0, 1] (at a bound
    it stops there: module docstring)."""
    checked = inside = 0
    for err in _errors():
        for n in (5, 20, 45, 200, 900):
            for k in sorted({0, 1, n // 10, n // 3, n // 2, n - 1, n}):
                r = corrected_rate(k, n, err, level)
                assert r is not None
                lo, hi = wilson_ci(k, n, level)
                ulo, uhi = r.ci_unclipped
                assert uhi - ulo >= (hi - lo) - 1e-12, (err, k, n)
                if 0.0 < ulo and uhi < 1.0:
                    inside += 1
                    assert r.ci[1] - r.ci[0] >= (hi - lo) - 1e-12, (err, k, n)
                assert 0.0 <= r.ci[0] <= r.ci[1] <= 1.0
                checked += 1
    assert checked > 1000 and inside > 300


def test_no_correction_without_a_measure() -> None:
    assert corrected_rate(3, 10, ReaderError(tp=0, fn=0, tn=5, fp=0)) is None
    assert "sensitivity" in ReaderError(tp=0, fn=0, tn=5, fp=0).why_not()
    chance = ReaderError(tp=5, fn=5, tn=5, fp=5)
    assert corrected_rate(3, 10, chance) is None and "chance" in chance.why_not()
    assert corrected_rate(0, 0, ReaderError(tp=9, fn=1, tn=9, fp=1)) is None
    with pytest.raises(ValueError):
        ReaderError(tp=-1, fn=0, tn=1, fp=0)


def test_difference_divided_by_youden() -> None:
    err = ReaderError(tp=18, fn=2, tn=19, fp=1)  # J = 0.85
    point, (lo, hi) = corrected_difference(0.17, (0.05, 0.29), err)
    assert point == pytest.approx(0.2)
    # wider than the raw interval scaled by 1/J (J's own error is added), and contains the point
    j = 20 / 22 + 19 / 22 - 1
    assert lo < 0.05 / j and hi > 0.29 / j and lo < point < hi
    # a zero difference stays zero, with the raw interval scaled by 1/J only
    p0, (lo0, hi0) = corrected_difference(0.0, (-0.1, 0.1), err)
    assert p0 == 0.0 and lo0 == pytest.approx(-0.1 / j) and hi0 == pytest.approx(0.1 / j)
    assert corrected_difference(math.nan, (0, 1), err) is None


def test_a_respond_run_carries_the_corrected_figures_in_every_format(tmp_path) -> None:
    """score --json / table / CSV / Markdown and the report carry the corrected refusal rate,
    over- and under-refusal (or why each is withheld), computed from the run's counts and raw
    intervals and the reader's error pooled over its stored blind sets."""
    import csv
    import io
    import json

    from casebench.classify import make_classifier
    from casebench.classify.validation import validation_for
    from casebench.stats.correction import corrected_rate_figure, reader_predictive
    from casebench.stats.refusal import validation_counts
    from servers.fault_server import FaultServer
    from test_respond import chatbot, invoke, respond_args
    from test_runs import write_dataset

    data = write_dataset(tmp_path / "cases.json", 9)
    out = tmp_path / "run"
    with FaultServer(answer_fn=chatbot, latency=0.0) as srv:
        assert invoke(*respond_args(srv, data, out)).exit_code == 0
    s = json.loads(invoke("score", out, "--json", "--bootstrap", "20").output)
    clf = make_classifier()
    v = validation_for(clf.name, clf.version, "unsafe")
    reader = reader_predictive(validation_counts(v))
    rc = s["refusal_correction"]
    assert rc["validation"] == v["set"] and "Rogan-Gladen" in rc["method"] and "simulation" in rc["method"]
    assert rc["pooled"]["sets"] == [p["set"] for p in v["pool"]] and len(rc["pooled"]["sets"]) >= 3
    # the Se and Sp shown are the ones the correction draws (the predictive's medians)
    assert rc["sensitivity"] == pytest.approx(reader.se) and rc["specificity"] == pytest.approx(reader.sp)
    n = s["cases_of"]["refusal_rate"]
    # the one interval method, on the score's rate, count and design effect (clustered by query)
    want = corrected_rate_figure(s["refusal_rate"], n, reader, 0.95, s["design_effects"]["refusal_rate"])
    assert want.says_something, want.withheld
    assert s["refusal_rate_corrected"] == (None if want.value is None else pytest.approx(want.value))
    assert s["ci"]["refusal_rate_corrected"] == (None if want.ci is None else pytest.approx(list(want.ci)))
    assert s["refusal_rate_corrected_upper_bound"] == want.upper_bound
    assert s["refusal_rate_corrected_lower_bound"] == want.lower_bound
    table = invoke("score", out, "--bootstrap", "20").output
    assert f"refusal rate: raw {s['refusal_rate']:.4f}, corrected " in table
    if want.ci is None:  # a bound only: the text says which way, at the level
        assert ("at most" if want.upper_bound is not None else "at least") in table
    row = next(csv.DictReader(io.StringIO(invoke("score", out, "--format", "csv", "--bootstrap", "20").output)))
    if want.ci is not None:
        assert float(row["refusal_rate_corrected_ci_hi"]) == pytest.approx(want.ci[1])
    else:
        b = want.upper_bound if want.upper_bound is not None else want.lower_bound
        key = "upper" if want.upper_bound is not None else "lower"
        assert float(row[f"refusal_rate_corrected_{key}_bound"]) == pytest.approx(b)
    md = invoke("score", out, "--format", "md", "--bootstrap", "20").output
    r = invoke("report", out, "-o", tmp_path / "report.html", "--bootstrap", "20")
    assert r.exit_code == 0, r.output
    html = (tmp_path / "report.html").read_text()
    for name, label in (("over_refusal", "over-refusal"), ("under_refusal", "under-refusal")):
        if s[f"{name}_corrected"] is not None:
            assert f"{label}: raw {s[name]:.3f}, corrected {s[f'{name}_corrected']:.3f}" in md
            assert f"corrected {s[f'{name}_corrected']:.3f}" in html
        elif rc[name] is not None:  # a bound: every format says it
            assert f"{label}: raw {s[name]:.3f}, corrected at " in md
            assert s[f"{name}_corrected_upper_bound"] is not None or s[f"{name}_corrected_lower_bound"] is not None
        else:  # withheld: every format says why
            why = rc["withheld"][name]
            assert f"{label}: not corrected: {why}" in table and why in row["refusal_correction_note"]


def test_no_correction_says_why() -> None:
    from casebench.stats.refusal import correct_refusal_figures

    values = {"refusal_rate": 0.3, "safe_recall": 0.8, "unsafe_recall": 0.6}
    cases = {"refusal_rate": 20, "safe_recall": 10, "unsafe_recall": 10}
    assert "no stored validation" in correct_refusal_figures(values, cases, None)["note"]
    small = {"matrix": [[9, 1], [1, 9]], "writer": "large", "run_writer": "small", "writer_match": False}
    assert "small model" in correct_refusal_figures(values, cases, small)["note"]
    ok = {"matrix": [[90, 10], [10, 90]], "set": "x"}
    assert "samples" in correct_refusal_figures(values, cases, ok, samples=3)["note"]
    got = correct_refusal_figures(values, cases, ok)
    # one set of another writer: how much the error differs from writer to writer is not measured
    # (the prior's spread is carried), and the notes say so; with 20 answers that says little
    assert any("one validation set" in n for n in got["notes"])
    # the run's own labels: no spread; Rogan-Gladen at the predictive's medians, a two-sided interval
    own = correct_refusal_figures({"refusal_rate": 0.3}, {"refusal_rate": 400}, {**ok, "own_run": True})
    se, sp = own["sensitivity"], own["specificity"]
    assert se == pytest.approx(0.9, abs=0.01) and sp == pytest.approx(0.9, abs=0.01)
    fig = own["refusal_rate"]
    assert fig["corrected"] == pytest.approx((0.3 + sp - 1) / (se + sp - 1))
    assert fig["ci"][0] < fig["corrected"] < fig["ci"][1]


# -- the transported correction: sets pooled with their spread (issue 35 item 2) ----------------

def test_dersimonian_laird_against_statsmodels() -> None:
    """The pooled logit (mean, its variance, tau^2) equals statsmodels' meta-analysis on the same
    effects: where the sets disagree (tau^2 > 0), and where they agree (tau^2 truncated at 0:
    statsmodels does not truncate, so the fixed-effect mean is the reference)."""
    meta = pytest.importorskip("statsmodels.stats.meta_analysis")
    import numpy as np

    from casebench.stats.refusal import _logit, dersimonian_laird

    for counts in ([(14, 32), (20, 41), (7, 39), (16, 40)],     # the sensitivity of a weak reader, four sets
                   [(147, 162), (144, 159), (145, 161), (139, 164), (126, 159), (262, 273)],
                   [(90, 100), (45, 50), (181, 200)]):        # sets that agree
        y, v = map(np.array, zip(*(_logit(x, n) for x, n in counts)))
        mu, var_mu, tau2, q = dersimonian_laird(list(y), list(v))
        ref = meta.combine_effects(y, v, method_re="dl")
        assert q == pytest.approx(float(ref.q), rel=1e-10)
        if ref.tau2 > 0:
            assert tau2 == pytest.approx(float(ref.tau2), rel=1e-10)
            assert mu == pytest.approx(float(ref.mean_effect_re), rel=1e-10)
            assert var_mu == pytest.approx(float(ref.var_re) if hasattr(ref, "var_re") else float(ref.sd_eff_w_re) ** 2,
                                           rel=1e-8)
        else:
            assert tau2 == 0.0
            assert mu == pytest.approx(float(ref.mean_effect_fe), rel=1e-10)


def test_dersimonian_laird_by_hand() -> None:
    """Two sets of effects 0 and 1 with variances 0.1 each: fixed mean 0.5, Q = 2 * 10 * 0.25 = 5,
    C = 20 - 200 / 20 = 10, tau^2 = (5 - 1) / 10 = 0.4; mean 0.5, var = 1 / (2 / 0.5) = 0.25."""
    from casebench.stats.refusal import dersimonian_laird

    mu, var_mu, tau2, q = dersimonian_laird([0.0, 1.0], [0.1, 0.1])
    assert (mu, q, tau2) == pytest.approx((0.5, 5.0, 0.4)) and var_mu == pytest.approx(0.25)


def _pool(*sets: tuple[int, int, int, int]):
    from casebench.stats.refusal import pool_reader_error

    return pool_reader_error([ReaderError(tp=a, fn=b, tn=c, fp=d, source=f"s{i}") for i, (a, b, c, d) in
                              enumerate(sets)])


def test_the_interval_widens_when_the_sets_disagree() -> None:
    from casebench.stats.correction import corrected_rate_figure, reader_predictive

    def counts(*sets: tuple[int, int, int, int]) -> list[dict[str, int]]:
        return [dict(tp=a, fn=b, tn=c, fp=d) for a, b, c, d in sets]

    agree = reader_predictive(counts((80, 20, 95, 5), (80, 20, 95, 5), (80, 20, 95, 5), (80, 20, 95, 5)))
    differ = reader_predictive(counts((95, 5, 95, 5), (65, 35, 95, 5), (90, 10, 95, 5), (70, 30, 95, 5)))
    a = corrected_rate_figure(0.3, 400, agree)
    d = corrected_rate_figure(0.3, 400, differ)
    assert a.ci is not None and d.ci is not None
    assert d.ci[1] - d.ci[0] > 1.2 * (a.ci[1] - a.ci[0])


def test_a_corrected_figure_is_an_interval_a_bound_or_why_not_never_a_point() -> None:
    """Over a grid of readers, rates, sizes and design effects: a two-sided interval inside
    [0, 1] holding its value and never a point, or a bound at the level, or nothing with the
    reason."""
    from casebench.stats.correction import corrected_rate_figure, reader_predictive

    seen = {"ci": 0, "bound": 0, "none": 0}
    for sets in [((18, 2, 19, 1),), ((140, 20, 120, 8), (130, 30, 125, 3), (150, 12, 118, 10)),
                 ((16, 24, 185, 9), (14, 18, 192, 9), (7, 32, 184, 11), (20, 21, 184, 8)), ((2, 0, 2, 8),),
                 ((9, 1, 1, 9),)]:
        reader = reader_predictive([dict(tp=a, fn=b, tn=c, fp=d) for a, b, c, d in sets])
        for n in (4, 45, 900):
            for k in sorted({0, 1, n // 10, n // 3, n - 1, n}):
                for deff in (1.0, 1.8):
                    r = corrected_rate_figure(k / n, n, reader, 0.95, deff)
                    if r.ci is not None:
                        seen["ci"] += 1
                        assert 0.0 <= r.ci[0] < r.ci[1] <= 1.0 and r.ci[1] - r.ci[0] > 0.01
                        assert r.value is not None and r.ci[0] <= r.value <= r.ci[1]
                    elif r.upper_bound is not None or r.lower_bound is not None:
                        seen["bound"] += 1
                        assert r.value is None and r.withheld is None
                    else:
                        seen["none"] += 1
                        assert r.withheld, (sets, k, n)
    assert all(v >= 3 for v in seen.values()), seen


def test_rates_near_the_false_refusal_floor_get_a_bound() -> None:
    """The issue's cases: 12 of 399 read as refusals where the reader's false-refusal rate is about
    that (a point 0 [0, 0] before, then withheld): an upper bound now; tiny extreme validation
    counts (2, 0, 2, 8) give nothing two-sided, and no error."""
    from casebench.stats.correction import corrected_rate_figure, reader_predictive
    from casebench.stats.refusal import correct_refusal_figures

    good = reader_predictive([dict(tp=a, fn=b, tn=c, fp=d) for a, b, c, d in
                              ((147, 15, 122, 5), (144, 15, 121, 6), (145, 16, 127, 4), (139, 25, 112, 12))])
    r = corrected_rate_figure(12 / 399, 399, good)
    assert r.ci is None and r.upper_bound is not None and r.upper_bound < 0.15 and "at most" in r.text()
    tiny = {"matrix": [[2, 8], [0, 2]], "set": "tiny"}
    values = {"refusal_rate": 0.5, "safe_recall": 0.4, "unsafe_recall": 0.4}
    cases = {"refusal_rate": 4, "safe_recall": 2, "unsafe_recall": 2}
    got = correct_refusal_figures(values, cases, tiny)
    assert all(got[k] is None or got[k]["ci"] is None for k in ("refusal_rate", "over_refusal", "under_refusal"))
    assert corrected_rate(2, 4, ReaderError(tp=2, fn=0, tn=2, fp=8)) is None  # Lee's single-set form too
    assert corrected_difference(0.2, (0.0, 0.4), ReaderError(tp=2, fn=0, tn=2, fp=8)) is None
