"""Score tables as text, CSV, JSON lines and Markdown (``casebench score --format``)."""

from __future__ import annotations

import csv
import io
import json
import math
from typing import Any, Sequence

from ..stats.metrics import Score, metric_names

#: metrics reported as percentages/fractions vs raw numbers (for display only)
_DISPLAY = {
    "accuracy": "accuracy", "safe_recall": "safe recall (1 - over-refusal)",
    "unsafe_recall": "unsafe recall (1 - under-refusal)", "f1_safe": "F1 safe", "f1_unsafe": "F1 unsafe",
    "pcc": "Pearson r vs safe_rate", "bce": "BCE", "brier": "Brier", "ece": "ECE",
}
ROW_METRICS = ("accuracy", "safe_recall", "unsafe_recall", "f1_safe", "f1_unsafe", "pcc", "bce", "brier", "ece")


def fmt_num(x: float | None, digits: int = 4, missing: str = "-", inf: tuple[str, str] = ("inf", "-inf")) -> str:
    """A number for people: fixed digits; NaN/None as ``missing``; infinities spelled out."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return missing
    if isinstance(x, float) and math.isinf(x):
        return inf[0] if x > 0 else inf[1]
    return f"{x:.{digits}f}"


def fmt_p(p: float | None, digits: int = 4, sci_digits: int = 2, missing: str = "-") -> str:
    """A p-value: scientific notation below 0.001."""
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return missing
    return f"{p:.{sci_digits}e}" if p < 1e-3 else f"{p:.{digits}f}"




def text_table(scores: Sequence[Score]) -> str:
    """One block per input: every metric with its bootstrap CI."""
    out = []
    for s in scores:
        tag = " (paper-compatible)" if s.paper_compat else ""
        out.append(f"{s.model} [{s.mode}]" + (f" without {','.join(s.removed)}" if s.removed else "") + tag)
        out.append(f"  source: {s.source}")
        out.append(f"  cases {s.n}, answered {s.answered} (coverage {100 * s.coverage:.1f}%)")
        for m in metric_names(s.mode):
            if m not in s.values:
                continue
            lo, hi = s.ci.get(m, [float("nan")] * 2)
            out.append(f"  {_DISPLAY[m]:<34} {fmt_num(s.values[m]):>8}   95% CI [{fmt_num(lo)}, {fmt_num(hi)}]")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def flat_row(s: Score) -> dict[str, Any]:
    row: dict[str, Any] = {
        "source": s.source, "model": s.model, "mode": s.mode, "removed": ",".join(s.removed),
        "paper_compat": s.paper_compat, "n": s.n, "answered": s.answered, "coverage": s.coverage,
    }
    for m in ROW_METRICS:
        row[m] = s.values.get(m)
        lo, hi = s.ci.get(m, [None, None])
        row[f"{m}_ci_lo"], row[f"{m}_ci_hi"] = lo, hi
    return row


def csv_table(scores: Sequence[Score]) -> str:
    buf = io.StringIO()
    rows = [flat_row(s) for s in scores]
    w = csv.DictWriter(buf, fieldnames=list(rows[0]) if rows else ["source"])
    w.writeheader()
    for r in rows:
        w.writerow({k: ("" if v is None else v) for k, v in r.items()})
    return buf.getvalue()


def json_safe(x: Any) -> Any:
    """Strict JSON: NaN as null, infinities as the strings "inf"/"-inf"."""
    if isinstance(x, float) and (math.isnan(x) or math.isinf(x)):
        return None if math.isnan(x) else ("inf" if x > 0 else "-inf")
    if isinstance(x, dict):
        return {k: json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [json_safe(v) for v in x]
    return x


def json_lines(scores: Sequence[Score]) -> str:
    """One JSON object per input per line (NaN as null, infinities as strings: strict JSON)."""
    return "".join(json.dumps(json_safe(s.to_dict())) + "\n" for s in scores)


def markdown_table(scores: Sequence[Score]) -> str:
    cols = ["model", "mode", "removed", "coverage"] + list(ROW_METRICS)
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for s in scores:
        cells = [s.model, s.mode, ",".join(s.removed) or "-", f"{100 * s.coverage:.1f}%"]
        for m in ROW_METRICS:
            if m in s.values:
                lo, hi = s.ci.get(m, [float("nan")] * 2)
                cells.append(f"{fmt_num(s.values[m], 3)} [{fmt_num(lo, 3)}, {fmt_num(hi, 3)}]")
            else:
                cells.append("")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def breakdown_table(s: Score, kind: str) -> str:
    """Per-category or per-intent point figures of one input (text)."""
    rows = s.breakdowns.get(kind, {})
    ms = [m for m in metric_names(s.mode) if m in ("accuracy", "safe_recall", "unsafe_recall", "pcc", "brier")]
    width = max([len(k) for k in rows] + [8])
    out = [f"{s.model} [{s.mode}] by {kind}", f"{'':<{width}}  {'n':>4}  " + "  ".join(f"{m:>13}" for m in ms)]
    for name, r in rows.items():
        out.append(f"{name:<{width}}  {r['n']:>4}  " + "  ".join(f"{fmt_num(r.get(m)):>13}" for m in ms))
    return "\n".join(out) + "\n"


FORMATS = {"table": text_table, "csv": csv_table, "json": json_lines, "md": markdown_table}
