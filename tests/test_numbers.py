"""present/numbers.py: the one home of how a number prints. Each formatter's edge cases (missing,
NaN, infinities, bounds, p floors) are checked here; the goldens (test_golden_outputs) check that
every command prints its figures through them unchanged."""

from __future__ import annotations

import math

from casebench.present.numbers import (
    SMALL, UNDEFINED, fmt_bounds, fmt_figure, fmt_num, fmt_p, fmt_p_adjusted, fmt_p_short, fmt_pct, fmt_stat,
    p_eq, p_words, report_bounds, report_num, report_p, small_mark,
)
from casebench.stats.metrics import MIN_CASES


def test_fmt_num_missing_infinite_percent_signed() -> None:
    assert fmt_num(0.12345) == "0.1235" and fmt_num(0.12345, 2) == "0.12"
    assert fmt_num(None) == UNDEFINED and fmt_num(float("nan"), missing="n/a") == "n/a"
    assert fmt_num(math.inf) == "inf" and fmt_num(-math.inf, inf=("∞", "−∞")) == "−∞"
    assert fmt_num(0.125, 1, percent=True) == "12.5%" and fmt_num(0.05, 3, signed=True) == "+0.050"
    assert fmt_num(-0.05, 3, signed=True) == "-0.050"


def test_fmt_bounds_lead_percent_and_what_counts_as_none() -> None:
    assert fmt_bounds([0.1, 0.25]) == "[0.100, 0.250]"
    assert fmt_bounds([0.1, 0.25], 2, lead=" ") == " [0.10, 0.25]"
    assert fmt_bounds([0.08, 0.171], 0, percent=True) == "[8, 17]"
    assert fmt_bounds(None) == "" and fmt_bounds([]) == "" and fmt_bounds([None, None]) == ""
    # an undefined bound prints as the missing mark, unless the caller wants finite bounds only
    assert fmt_bounds([float("nan"), 0.5], 2) == f"[{UNDEFINED}, 0.50]"
    assert fmt_bounds([float("nan"), 0.5], 2, finite_only=True) == ""
    assert fmt_bounds([None, 0.5], 2, finite_only=True) == ""


def test_figure_with_interval_as_the_first_screen_prints_it() -> None:
    assert fmt_figure(0.1234, [0.05, 0.2]) == "0.12 [0.05, 0.20]"
    assert fmt_pct(0.1234, [0.05, 0.2]) == "12% [5, 20]" and fmt_pct(0.5) == "50%"
    assert fmt_figure(float("nan"), [0.0, 1.0]) == UNDEFINED and fmt_pct(None) == UNDEFINED
    assert fmt_pct(0.3, [float("nan"), 0.4]) == "30%"  # no half interval


def test_p_values_floor_bound_and_notation() -> None:
    assert fmt_p(0.01234) == "0.0123" and fmt_p(0.0001234) == "1.23e-04"
    assert fmt_p(1e-140) == "< 1e-10" and fmt_p(None) == UNDEFINED
    # a bootstrap p at its resampling floor (1/2001) is only bounded: rounded up, never down
    assert fmt_p(1 / 2001, floor=1 / 2001) == "< 0.0005"
    assert fmt_p(1 / 1001, floor=1 / 1001) == "< 0.001"
    assert fmt_p_adjusted(0.004, 1 / 2001, floor=1 / 2001) == "< 0.004"
    assert fmt_p_adjusted(0.04, 0.02) == "0.0400"
    assert p_eq("0.0123") == "= 0.0123" and p_eq("< 0.001") == "< 0.001"
    assert fmt_p_short(0.011449) == "0.0114" and fmt_p_short(1e-12) == "< 1e-10" and fmt_p_short(None) == "-"
    assert p_words(fmt_p_short(0.5)) == "p = 0.5" and p_words(fmt_p_short(0.0)) == "p < 1e-10"
    assert fmt_stat(1234567.0) == "1.23457e+06" and fmt_stat(None) == "-"


def test_report_figures_and_small_sample_mark() -> None:
    assert report_num(0.12345) == "0.123" and report_num(math.inf) == "∞" and report_num(None) == UNDEFINED
    assert report_bounds([0.1, 0.2]) == "[0.100, 0.200]" and report_bounds(None) == ""
    assert report_bounds([0.1, 0.2], " ") == " [0.100, 0.200]"
    assert report_p(0.00001234) == "1.2e-05"
    assert small_mark({"accuracy": MIN_CASES - 1}, "accuracy", 0.5) == SMALL
    assert small_mark({"accuracy": MIN_CASES}, "accuracy", 0.5) == ""
    assert small_mark({"accuracy": 1}, "accuracy", float("nan")) == ""  # an undefined figure has no mark
