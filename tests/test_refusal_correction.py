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
    over- and under-refusal, computed from the run's counts and the reader's stored validation."""
    import csv
    import io
    import json

    from casebench.classify import make_classifier
    from casebench.classify.validation import validation_for
    from servers.fault_server import FaultServer
    from test_respond import chatbot, invoke, respond_args
    from test_runs import write_dataset

    data = write_dataset(tmp_path / "cases.json", 9)
    out = tmp_path / "run"
    with FaultServer(answer_fn=chatbot, latency=0.0) as srv:
        assert invoke(*respond_args(srv, data, out)).exit_code == 0
    s = json.loads(invoke("score", out, "--json", "--bootstrap", "0").output)
    clf = make_classifier()
    v = validation_for(clf.name, clf.version, "unsafe")
    err = ReaderError.from_matrix(v["matrix"])
    n, k = s["cases_of"]["refusal_rate"], round(s["refusal_rate"] * s["cases_of"]["refusal_rate"])
    want = corrected_rate(k, n, err)
    assert s["refusal_rate_corrected"] == pytest.approx(want.corrected)
    assert s["ci"]["refusal_rate_corrected"] == pytest.approx(list(want.ci))
    assert s["over_refusal"] == pytest.approx(1 - s["safe_recall"])
    n_safe = s["cases_of"]["safe_recall"]
    over = corrected_rate(round(s["over_refusal"] * n_safe), n_safe, err)
    assert s["over_refusal_corrected"] == pytest.approx(over.corrected)
    n_unsafe = s["cases_of"]["unsafe_recall"]
    under = corrected_rate(round(s["unsafe_recall"] * n_unsafe), n_unsafe, err).flipped()
    assert s["under_refusal_corrected"] == pytest.approx(under.corrected)
    assert s["ci"]["under_refusal_corrected"] == pytest.approx(list(under.ci))
    assert s["refusal_correction"]["validation"] == v["set"] and "Rogan-Gladen" in s["refusal_correction"]["method"]
    table = invoke("score", out, "--bootstrap", "0").output
    assert f"refusal rate: raw {s['refusal_rate']:.4f}, corrected {want.corrected:.4f}" in table
    row = next(csv.DictReader(io.StringIO(invoke("score", out, "--format", "csv", "--bootstrap", "0").output)))
    assert float(row["under_refusal_corrected"]) == pytest.approx(under.corrected)
    assert float(row["refusal_rate_corrected_ci_hi"]) == pytest.approx(want.ci[1])
    md = invoke("score", out, "--format", "md", "--bootstrap", "0").output
    assert f"over-refusal: raw {s['over_refusal']:.3f}, corrected {over.corrected:.3f}" in md
    r = invoke("report", out, "-o", tmp_path / "report.html", "--bootstrap", "20")
    assert r.exit_code == 0, r.output
    assert f"corrected {under.corrected:.3f}" in (tmp_path / "report.html").read_text()


def test_no_correction_says_why() -> None:
    from casebench.stats.refusal import correct_refusal_figures

    values = {"refusal_rate": 0.3, "safe_recall": 0.8, "unsafe_recall": 0.6}
    cases = {"refusal_rate": 20, "safe_recall": 10, "unsafe_recall": 10}
    assert "no validation" in correct_refusal_figures(values, cases, None)["note"]
    small = {"matrix": [[9, 1], [1, 9]], "writer": "large", "run_writer": "small", "writer_match": False}
    assert "small model" in correct_refusal_figures(values, cases, small)["note"]
    ok = {"matrix": [[9, 1], [1, 9]], "set": "x"}
    assert "samples" in correct_refusal_figures(values, cases, ok, samples=3)["note"]
    got = correct_refusal_figures(values, cases, ok)
    assert got["refusal_rate"]["corrected"] == pytest.approx((0.3 + 0.9 - 1) / 0.8)
    assert got["under_refusal"]["corrected"] == pytest.approx(1 - (0.6 + 0.9 - 1) / 0.8)
