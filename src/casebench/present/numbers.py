"""How casebench prints a number: one home for every figure's digits, a p-value's notation and
bounds, an interval's brackets and the marks beside a figure (undefined, small sample).

Every text, Markdown and HTML table, the first screen and the report print numbers through this
module, so a figure reads the same wherever it is shown; each metric's digits come from the one
table ``stats.metrics.METRICS``. Statistics never import this module (data flows forward).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from ..stats.metrics import METRIC, MIN_CASES

#: how every format writes a figure that applies but is undefined (a recall with no case of its
#: class, F1 with nothing to score): table, CSV and Markdown alike; JSON writes null. A figure
#: that does not apply to an input (PCC of a binary verdict) is left blank instead.
UNDEFINED = "–"
#: the note on a figure from fewer than ``MIN_CASES`` cases (explained under the table)
SMALL = "†"


def fmt_num(x: float | None, digits: int = 4, missing: str = UNDEFINED, inf: tuple[str, str] = ("inf", "-inf")) -> str:
    """A number for people: fixed digits; NaN/None as ``missing``; infinities spelled out."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return missing
    if isinstance(x, float) and math.isinf(x):
        return inf[0] if x > 0 else inf[1]
    return f"{x:.{digits}f}"


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
    digits = max(0, METRIC[name].digits - (1 if compact else 0))
    return fmt_num(x, digits)


def small_mark(cases_of: dict[str, int], m: str, value: Any = 0.0) -> str:
    """The small-sample note of a figure ("" when it is from ``MIN_CASES`` cases or more, or is
    undefined)."""
    n = cases_of.get(m)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return SMALL if n is not None and n < MIN_CASES else ""


def fmt_ci(ci: dict[str, list[float]], m: str, compact: bool = False) -> str:
    """Metric ``m``'s interval from ``ci`` as ``[lo, hi]`` with the metric's digits (undefined bounds as
    ``UNDEFINED``)."""
    lo, hi = ci.get(m, [float("nan")] * 2)
    return f"[{fmt_metric(m, lo, compact)}, {fmt_metric(m, hi, compact)}]"


def fmt_bounds(lo_hi: Sequence[float] | None, digits: int = 3) -> str:
    """An interval as ``[lo, hi]`` with ``digits`` places; empty when there is none."""
    if not lo_hi:
        return ""
    return f"[{fmt_num(lo_hi[0], digits)}, {fmt_num(lo_hi[1], digits)}]"


def mass_pct(x: float) -> str:
    """A verdict mass as a percentage (one decimal below 10%)."""
    return f"{100 * x:.1f}%" if x < 0.1 else f"{100 * x:.0f}%"
