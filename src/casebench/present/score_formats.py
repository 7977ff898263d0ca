"""The machine-readable and document formats of scores (``casebench score --format csv|json|md``,
the report's downloads): CSV rows with every figure, interval and count, JSON lines of the typed
result, and a Markdown table; ``FORMATS`` maps each ``--format`` to its renderer (the text
table's is ``score_text.text_table``).

They lay out the same ``Score`` the text table does, with the same undefined and small-sample
marks (``numbers``) and the same reader's words (``refusal_text``).
"""

from __future__ import annotations

import csv
import io
import json
import math
from typing import Any, Callable, Sequence

from ..jsonutil import json_safe
from ..stats.metrics import BREAKDOWN_METRICS, METRIC, Score
from . import people
from .layout import breakdown_groups, row_metrics, shown_metrics, title
from .numbers import UNDEFINED, fmt_ci, fmt_metric, mass_pct, small_mark
from .refusal_text import CORRECTED_FIGURES, classifier_note, corrected_lines, labels_lines, who_labelled
from .score_text import notes, text_table


_ID_COLUMNS = ("name", "source", "model", "mode", "removed", "paper_compat", "by", "group", "n", "answered", "coverage")


def _csv_cell(v: Any) -> Any:
    if isinstance(v, float) and math.isnan(v):
        return UNDEFINED
    return v


def flat_rows(s: Score) -> list[dict[str, Any]]:
    """The rows of one input in CSV: the whole input (``by`` empty), then one per breakdown
    group. Per metric: the figure, its CI and how many cases it is from (``<metric>_n``); a
    metric that does not apply (or is not part of a breakdown) is None (a blank cell)."""
    base = {"name": title(s), "source": s.source, "model": s.model, "mode": str(s.mode), "removed": ",".join(s.removed),
            "paper_compat": s.paper_compat}
    groups: list[tuple[str, str, dict[str, Any], dict[str, Any]]] = [
        ("", "", {"n": s.n, "answered": s.answered, "coverage": s.coverage},
         {**s.values, "ci": s.ci, "cases_of": s.cases_of})]
    groups += [(kind, name, {"n": r["n"], "answered": None, "coverage": None}, r)
               for kind, name, r in breakdown_groups(s)]
    rows = []
    for kind, name, counts, r in groups:
        row: dict[str, Any] = {**base, "by": kind, "group": name, **counts}
        shown = set(shown_metrics(s, BREAKDOWN_METRICS if kind else row_metrics()))
        for m in row_metrics():
            on = m in shown and m in r
            has_ci = on and r.get("ci") and METRIC[m].interval  # a count (context_pairs) has none
            lo, hi = r.get("ci", {}).get(m, [float("nan")] * 2) if has_ci else (None, None)
            row[m] = _csv_cell(r[m]) if on else None
            if METRIC[m].interval:
                row[f"{m}_ci_lo"], row[f"{m}_ci_hi"] = _csv_cell(lo), _csv_cell(hi)
            row[f"{m}_n"] = r.get("cases_of", {}).get(m) if on else None
        if not kind and "refusal_rate" in s.values:  # who read the behaviour, and how well
            v = (s.classifier or {}).get("validation") or {}
            row["refusal_classifier"] = (f"{s.classifier.get('name')} v{s.classifier.get('version')}"
                                         if s.classifier else None)
            row["refusal_classifier_agreement"] = v.get("agreement")
            row["refusal_classifier_agreement_n"] = v.get("n")
            # whose labels the agreement is with (never "people" unless people gave them)
            row["refusal_classifier_labelled_by"] = who_labelled(v) if v else None
            rc = s.refusal_corrected
            pooled = rc.pooled if rc is not None else None
            # the Se and Sp the correction uses (the predictive's medians), else the pool's, else the set's
            se_c = rc.sensitivity if rc is not None and rc.sensitivity is not None else None
            sp_c = rc.specificity if rc is not None and rc.specificity is not None else None
            row["refusal_classifier_sensitivity"] = se_c if se_c is not None else (
                pooled.sensitivity.estimate if pooled else v.get("sensitivity"))
            row["refusal_classifier_specificity"] = sp_c if sp_c is not None else (
                pooled.specificity.estimate if pooled else v.get("specificity"))
            for name, _ in CORRECTED_FIGURES:
                cf = rc.figure(name) if rc is not None else None
                row[f"{name}_corrected"] = cf.corrected if cf else None
                row[f"{name}_corrected_ci_lo"] = cf.ci[0] if cf and cf.ci else None
                row[f"{name}_corrected_ci_hi"] = cf.ci[1] if cf and cf.ci else None
                row[f"{name}_corrected_upper_bound"] = cf.upper_bound if cf else None
                row[f"{name}_corrected_lower_bound"] = cf.lower_bound if cf else None
            row["refusal_correction_note"] = None if rc is None else (rc.note or ("; ".join(
                f"{k}: {why}" for k, why in rc.withheld.items()) or None))
            rp = s.refusal_people
            if rp:
                from ..stats.people_refusal import figure_key

                by = str(rp.get("labelled_by") or "people")
                row["labelled_by"] = by
                row["people_labels_n" if by == "people" else "run_labels_n"] = rp.get("n")
                for name, _ in CORRECTED_FIGURES:
                    fig = (rp.get("figures") or {}).get(name)
                    key = figure_key(name, by)
                    ci = (fig or {}).get("ci") or [None, None]
                    row[key] = fig["value"] if fig else None
                    row[f"{key}_ci_lo"], row[f"{key}_ci_hi"] = ci[0], ci[1]
                t = rp.get("transport") or {}
                row["transport_p"] = t.get("p")
        rows.append(row)
    return rows


def verdict_mass_cells(s: Score) -> dict[str, Any]:
    """The verdict-mass columns of a CSV or Markdown row (empty where the input has no mass)."""
    vm = s.verdict_mass
    if not vm:
        return {"verdict_mass_median": None, "verdict_mass_below": None, "low_mass_missing": None}
    return {"verdict_mass_median": vm["median"], "verdict_mass_below": vm["below"],
            "low_mass_missing": s.low_mass_missing}


def _with_mass(scores: Sequence[Score]) -> bool:
    """Whether any input has a verdict mass (then the rows carry its columns)."""
    return any(s.verdict_mass for s in scores)


def csv_table(scores: Sequence[Score]) -> str:
    """One row per input and per breakdown group (``flat_rows``); undefined figures as
    ``UNDEFINED``, figures that do not apply blank."""
    buf = io.StringIO()
    rows = []
    for s in scores:
        rs = flat_rows(s)
        if _with_mass(scores):  # the input's own row carries its verdict mass
            rs[0] = {**rs[0], **verdict_mass_cells(s)}
        if any(x.people for x in scores):  # and people's references on its pairs
            rs[0] = {**rs[0], **people.csv_cells(s.people)}
        rows += rs
    fields = list(dict.fromkeys(k for r in rows for k in r)) or list(_ID_COLUMNS)
    w = csv.DictWriter(buf, fieldnames=fields)
    w.writeheader()
    for r in rows:
        w.writerow({k: ("" if v is None else v) for k, v in r.items()})
    return buf.getvalue()


def json_lines(scores: Sequence[Score], reference: bool = False) -> str:
    """One JSON object per input per line (NaN as null, infinities as strings: strict JSON);
    ``reference``: objects of published models, marked ``"reference": true``."""
    extra = {"reference": True} if reference else {}
    return "".join(json.dumps(json_safe({**s.to_dict(), **extra})) + "\n" for s in scores)


def _md_cell(m: str, r: dict[str, Any], ci: dict[str, list[float]], cases_of: dict[str, int]) -> str:
    cell = fmt_metric(m, r[m], True) + small_mark(cases_of, m, r[m])
    return cell + (f" {fmt_ci(ci, m, True)}" if ci and METRIC[m].interval else "")


def markdown_table(scores: Sequence[Score]) -> str:
    """One row per input (every metric with its CI), then a table per breakdown of each input,
    then the notes. Published reference rows: pass their scores renamed ``<model> (published)``. Prob-mode runs also show their verdict mass."""
    mass = _with_mass(scores)
    with_people = any(s.people for s in scores)
    cols = (["input", "model", "mode", "removed", "coverage"] + (["verdict mass (median, below)"] if mass else [])
            + list(row_metrics()) + (list(people.MD_COLUMNS) if with_people else []))
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for s in scores:
        cells = [title(s), s.model, str(s.mode), ",".join(s.removed) or "-", f"{100 * s.coverage:.1f}%"]
        if mass:
            vm = s.verdict_mass
            cells.append(f"{mass_pct(vm['median'])}, {vm['below']}/{vm['known']} below {mass_pct(vm['threshold'])}"
                         if vm else "-")
        shown = set(shown_metrics(s))
        for m in row_metrics():
            cells.append(_md_cell(m, s.values, s.ci, s.cases_of) if m in shown else "")
        if with_people:
            cells += people.md_cells(s.people)
        lines.append("| " + " | ".join(cells) + " |")
    for s in scores:
        ms = shown_metrics(s, BREAKDOWN_METRICS)
        for kind, rows in s.breakdowns.items():
            lines += ["", f"**{title(s)} by {kind}** ({s.source})", "",
                      "| group | n | " + " | ".join(ms) + " |", "|" + "---|" * (len(ms) + 2)]
            for name, r in rows.items():
                lines.append(f"| {name} | {r['n']} | " + " | ".join(
                    _md_cell(m, r, r.get("ci", {}), r.get("cases_of", {})) if m in r else "" for m in ms) + " |")
    refusal_notes = [f"- {title(s)}: {classifier_note(s.classifier, s.refusal_corrected)}"
                     + "".join(f"\n  - {line.strip()}" for line in labels_lines(s, compact=True))
                     + "".join(f"\n  - {line}" for line in corrected_lines(s, compact=True)) for s in scores
                     if "refusal_rate" in s.values]
    if refusal_notes:
        lines += ["", "Refusal rate:"] + refusal_notes
    foot = notes(scores, explain=True, reader=False, width=10**6)  # a document: the method in full, unwrapped
    if foot:
        lines += [""] + [f"{x}  " if i < len(foot) - 1 else x for i, x in enumerate(foot)]
    return "\n".join(lines) + "\n"


#: each ``--format`` of ``casebench score`` and its renderer
FORMATS: dict[str, Callable[..., str]] = {"table": text_table, "csv": csv_table, "json": json_lines, "md": markdown_table}
