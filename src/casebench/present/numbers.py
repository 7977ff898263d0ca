"""How casebench prints a number: one home for every figure's digits, a p-value's notation and
bounds, an interval's brackets and the marks beside a figure (undefined, small sample).

Every text, Markdown and HTML table, the first screen and the report print numbers through this
module, so a figure reads the same wherever it is shown; each metric's digits come from the one
table ``stats.metrics.METRICS``. Statistics never import this module (data flows forward).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

# stats.metrics (and with it numpy) is imported inside the few formatters that need a metric's
# digits: light commands (refusal-eval, the readers) print through this module too.

#: how every format writes a figure that applies but is undefined (a recall with no case of its
#: class, F1 with nothing to score): table, CSV and Markdown alike; JSON writes null. A figure
#: that does not apply to an input (PCC of a binary verdict) is left blank instead.
UNDEFINED = "–"
#: the note on a figure from fewer than ``MIN_CASES`` cases (explained under the table)
SMALL = "†"


def fmt_num(x: float | None, digits: int = 4, missing: str = UNDEFINED, inf: tuple[str, str] = ("inf", "-inf"),
            *, percent: bool = False, signed: bool = False) -> str:
    """A number for people: fixed digits; NaN/None as ``missing``; infinities spelled out (``inf``).
    ``percent``: as a percentage with its sign (``12.5%``); ``signed``: with a sign (``+0.120``),
    for a change."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return missing
    if isinstance(x, float) and math.isinf(x):
        return inf[0] if x > 0 else inf[1]
    if percent:
        return f"{100 * x:.{digits}f}%"
    return f"{x:+.{digits}f}" if signed else f"{x:.{digits}f}"


def fmt_stat(x: float | None, missing: str = "-") -> str:
    """A test statistic (W, chi-square) in general notation (``12.5``, ``3.2e+04``); None as ``missing``."""
    return missing if x is None else format(x, "g")


#: below this a p prints as ``< 1e-10`` (the JSON keeps the value): its digits there are the
#: sampling model's tail, not the data's (a clustered McNemar z of 26 prints 1e-149 where no model
#: of the sampling is that accurate; an exact sign-flip p of 6e-124 speaks of the sign-flip model)
P_PRINT_FLOOR = 1e-10


def fmt_p(p: float | None, digits: int = 4, sci_digits: int = 2, missing: str = UNDEFINED,
          floor: float | None = None, exact: bool = False) -> str:
    """A p-value: scientific notation below 0.001. ``floor``: the smallest p the test can give
    (a bootstrap p from B resamples, ``bootstrap.p_floor``); a p there is not measured, only
    bounded, and prints as ``< bound``, the floor rounded up to one significant digit
    (``< 0.001`` for 2000 resamples, ``< 0.002`` for 1000). Any p, ``exact`` or not (the flag is
    kept for callers), prints as ``< 1e-10`` below ``P_PRINT_FLOOR``."""
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return missing
    if floor is not None and math.isfinite(floor) and p <= floor * (1 + 1e-9):
        return "< " + _bound_up(floor)
    if p < P_PRINT_FLOOR:
        return f"< {P_PRINT_FLOOR:.0e}"
    return f"{p:.{sci_digits}e}" if p < 1e-3 else f"{p:.{digits}f}"


def fmt_p_adjusted(p_adjusted: float | None, p: float | None, floor: float | None = None, **kw: Any) -> str:
    """A Benjamini-Hochberg adjusted p: where the raw ``p`` sits at its test's ``floor`` (a
    bootstrap p from B resamples, only bounded) its adjusted value is a bound too, and prints as
    ``< bound`` (every p ranked after it is at least as large, so no other p set the adjustment);
    else as ``fmt_p``."""
    if (floor is not None and math.isfinite(floor) and p is not None and p_adjusted is not None
            and math.isfinite(p_adjusted) and p <= floor * (1 + 1e-9)):
        return "< " + _bound_up(max(p_adjusted, floor))
    return fmt_p(p_adjusted, floor=floor, **kw)


def p_eq(p_text: str) -> str:
    """``= 0.0123``, or the bound itself (``< 1e-10``, ``< 0.001``) after a p's name."""
    return p_text if p_text.startswith("<") else f"= {p_text}"


def _bound_up(x: float) -> str:
    """``x`` rounded up to one significant digit, in plain decimals (0.0009995 -> ``0.001``)."""
    e = math.floor(math.log10(x))
    m = math.ceil(round(x / 10 ** e, 9))
    if m == 10:
        m, e = 1, e + 1
    return f"{m * 10 ** e:.{max(0, -e)}f}"


def fmt_metric(name: str, x: float | None, compact: bool = False) -> str:
    """A metric's value (or a difference or CI bound of it) with the metric's digits
    (``MetricDef.digits``; one fewer in the compact Markdown and HTML tables)."""
    from ..stats.metrics import METRIC

    digits = max(0, METRIC[name].digits - (1 if compact else 0))
    return fmt_num(x, digits)


def small_mark(cases_of: dict[str, int], m: str, value: Any = 0.0) -> str:
    """The small-sample note of a figure ("" when it is from ``MIN_CASES`` cases or more, or is
    undefined)."""
    from ..stats.metrics import MIN_CASES

    n = cases_of.get(m)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return SMALL if n is not None and n < MIN_CASES else ""


def fmt_ci(ci: dict[str, list[float]], m: str, compact: bool = False) -> str:
    """Metric ``m``'s interval from ``ci`` as ``[lo, hi]`` with the metric's digits (undefined bounds as
    ``UNDEFINED``)."""
    lo, hi = ci.get(m, [float("nan")] * 2)
    return f"[{fmt_metric(m, lo, compact)}, {fmt_metric(m, hi, compact)}]"


def fmt_bounds(lo_hi: Sequence[float | None] | None, digits: int = 3, missing: str = UNDEFINED, *, lead: str = "",
               percent: bool = False, finite_only: bool = False) -> str:
    """An interval as ``[lo, hi]`` with ``digits`` places (undefined bounds as ``missing``), after
    ``lead`` (``" "`` to follow a figure); empty when there is none (no bounds, or both None; with
    ``finite_only`` also when a bound is not a finite number). ``percent``: in percentage points
    without the sign (``[8, 17]``: the figure before it carries the %)."""
    if not lo_hi or all(x is None for x in lo_hi):
        return ""
    if finite_only and not (len(lo_hi) == 2 and all(x is not None and math.isfinite(x) for x in lo_hi)):
        return ""
    scale = [None if x is None else 100 * x for x in lo_hi] if percent else list(lo_hi)
    return f"{lead}[{fmt_num(scale[0], digits, missing)}, {fmt_num(scale[1], digits, missing)}]"


def fmt_figure(x: float | None, ci: Sequence[float | None] | None = None, digits: int = 2, *,
               percent: bool = False) -> str:
    """A figure with its interval after it, as the first screen prints them (``0.12 [0.05, 0.20]``;
    ``percent``: ``12% [5, 20]``, the points of the interval without the sign); ``UNDEFINED`` for a
    figure that is not a finite number, and no interval unless both bounds are finite."""
    if x is None or not math.isfinite(x):
        return UNDEFINED
    return fmt_num(x, digits, percent=percent) + fmt_bounds(ci, digits, lead=" ", percent=percent, finite_only=True)


def fmt_pct(x: float | None, ci: Sequence[float | None] | None = None, digits: int = 0) -> str:
    """A share as a percentage, with its interval where given (``fmt_figure``): ``12% [5, 20]``."""
    return fmt_figure(x, ci, digits, percent=True)


def mass_pct(x: float) -> str:
    """A verdict mass as a percentage (one decimal below 10%)."""
    return f"{100 * x:.1f}%" if x < 0.1 else f"{100 * x:.0f}%"


def fmt_p_short(p: float | None, missing: str = "-") -> str:
    """A p-value in three significant digits (``0.0114``, ``2.3e-05``), as ``casebench human``
    prints its tests; below ``P_PRINT_FLOOR`` as ``< 1e-10`` (the JSON keeps the value)."""
    if p is None:
        return missing
    if p < P_PRINT_FLOOR:
        return f"< {P_PRINT_FLOOR:.0e}"
    return f"{p:.3g}"


def p_words(p_text: str) -> str:
    """``p = 0.0114`` or ``p < 1e-10``: a printed p after its name."""
    return f"p {p_eq(p_text)}"


#: the report's and the leaderboard's HTML figures: three places (a metric's digits less one, as
#: in the compact tables), infinities as the sign, a p with one significant digit in notation
def report_num(x: float | None, digits: int = 3) -> str:
    """A figure in the report's HTML: ``digits`` places, undefined as ``UNDEFINED``, infinities as ∞."""
    return fmt_num(x, digits, missing=UNDEFINED, inf=("∞", "−∞"))


def report_metric(metric: str, x: float | None) -> str:
    """A metric's figure in the report's compact tables (``MetricDef.digits`` minus one)."""
    from ..stats.metrics import METRIC

    return report_num(x, max(0, METRIC[metric].digits - 1))


def report_bounds(ci: Sequence[float | None] | None, lead: str = "") -> str:
    """An interval in the report's HTML, ``[0.120, 0.340]`` as ``report_num`` writes each bound,
    after ``lead``; empty when there is none."""
    return f"{lead}[{report_num(ci[0])}, {report_num(ci[1])}]" if ci else ""


def report_p(p: float | None, floor: float | None = None, exact: bool = False) -> str:
    """A p-value as the report prints it (``fmt_p``: an approximate one below 1e-10 as a bound,
    an ``exact`` one as computed)."""
    return fmt_p(p, digits=3, sci_digits=1, missing=UNDEFINED, floor=floor, exact=exact)
