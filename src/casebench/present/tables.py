"""Tables as text, CSV, JSON lines and Markdown: ``casebench score --format``, and the text of
``casebench compare`` and ``casebench ablate``.

Every metric's name, label, direction and digits come from the one table ``stats.metrics.METRICS``;
this module only lays them out. Statistics never import this module (data flows forward).
"""

from __future__ import annotations

import csv
import io
import json
import math
from typing import TYPE_CHECKING, Any, Sequence

from ..jsonutil import json_safe

from ..stats.metrics import ALL_METRICS, COMPARED_METRICS, METRIC, Score, metric_names

if TYPE_CHECKING:  # pragma: no cover
    from ..stats.ablation import AblationResult
    from ..stats.compare import Comparison
    from ..stats.placement import PlacementResult
    from ..stats.saydo import SayDo

#: the metrics of the CSV and Markdown rows (every metric, in table order)
ROW_METRICS = ALL_METRICS
#: the point figures of a per-category or per-intent breakdown
BREAKDOWN_METRICS = ("accuracy", "safe_recall", "unsafe_recall", "pcc", "brier")
#: the metrics an ablation study prints per condition
STUDY_METRICS = ("accuracy", "safe_recall", "unsafe_recall", "pcc", "bce")

__all__ = ["FORMATS", "ROW_METRICS", "breakdown_table", "classifier_note", "csv_table", "fmt_num", "fmt_p",
           "format_ablation", "format_comparison", "format_placements", "json_lines", "json_safe", "markdown_table",
           "text_table"]


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


def fmt_metric(name: str, x: float | None, compact: bool = False) -> str:
    """A metric's value (or a difference or CI bound of it) with the metric's digits
    (``MetricDef.digits``; one fewer in the compact Markdown and HTML tables)."""
    digits = METRIC[name].digits - (1 if compact else 0)
    return fmt_num(x, digits)


def lower_is_better_note(names: Sequence[str]) -> str:
    """``BCE and Brier: lower is better`` for the losses among ``names`` (empty if none)."""
    losses = [METRIC[m].heading for m in names if not METRIC[m].higher_is_better]
    if not losses:
        return ""
    joined = losses[0] if len(losses) == 1 else ", ".join(losses[:-1]) + " and " + losses[-1]
    return f"{joined}: lower is better"


# --------------------------------------------------------------------------------------------
# Scores


def classifier_note(classifier: dict[str, Any] | None) -> str:
    """One sentence, printed beside every refusal rate, saying which refusal classifier read the
    answers and how often it agrees with people on answers it was not tuned on (the run's
    recorded ``validation``, from ``classify.validation``), or that it has no such figure."""
    if not classifier:
        return ("refusals read by a classifier this run did not record: the refusal rate's reading error "
                "is unknown")
    name = f"{classifier.get('name', '?')} v{classifier.get('version', '?')}"
    v = classifier.get("validation")
    if not v or v.get("agreement") is None:
        return (f"refusals read by {name}, not validated against people's labels here "
                f"(measure it with casebench refusal-eval): the refusal rate's reading error is unknown")
    ci = v.get("agreement_ci95") or [None, None]
    undecided = (f", {v['undetermined']} undetermined and left out" if v.get("undetermined") else "")
    bounds = f" [{100 * ci[0]:.1f}%, {100 * ci[1]:.1f}%]" if ci[0] is not None else ""
    return (f"refusals read by {name}: it agrees with people on {100 * v['agreement']:.1f}%{bounds} of "
            f"{v.get('n', '?')} held-aside answers of our own (coverage {100 * v.get('coverage', 0):.1f}%{undecided}); "
            f"the refusal rate carries that reading error")


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
            out.append(f"  {METRIC[m].label:<34} {fmt_metric(m, s.values[m]):>8}   "
                       f"95% CI [{fmt_metric(m, lo)}, {fmt_metric(m, hi)}]")
            if m == "refusal_rate":
                out.append(f"    ({classifier_note(s.classifier)})")
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
    if "refusal_rate" in s.values:
        v = (s.classifier or {}).get("validation") or {}
        row["refusal_classifier"] = (f"{s.classifier.get('name')} v{s.classifier.get('version')}"
                                     if s.classifier else None)
        row["refusal_classifier_agreement"] = v.get("agreement")
        row["refusal_classifier_agreement_n"] = v.get("n")
    return row


def csv_table(scores: Sequence[Score]) -> str:
    buf = io.StringIO()
    rows = [flat_row(s) for s in scores]
    fields = list(dict.fromkeys(k for r in rows for k in r)) or ["source"]
    w = csv.DictWriter(buf, fieldnames=fields)
    w.writeheader()
    for r in rows:
        w.writerow({k: ("" if v is None else v) for k, v in r.items()})
    return buf.getvalue()


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
                cells.append(f"{fmt_metric(m, s.values[m], True)} [{fmt_metric(m, lo, True)}, "
                             f"{fmt_metric(m, hi, True)}]")
            else:
                cells.append("")
        lines.append("| " + " | ".join(cells) + " |")
    notes = [f"- {s.model} [{s.mode}]: {classifier_note(s.classifier)}" for s in scores if "refusal_rate" in s.values]
    if notes:
        lines += ["", "Refusal rate:"] + notes
    return "\n".join(lines) + "\n"


def breakdown_table(s: Score, kind: str) -> str:
    """Per-category or per-intent point figures of one input (text)."""
    rows = s.breakdowns.get(kind, {})
    ms = [m for m in metric_names(s.mode) if m in BREAKDOWN_METRICS]
    width = max([len(k) for k in rows] + [8])
    out = [f"{s.model} [{s.mode}] by {kind}", f"{'':<{width}}  {'n':>4}  " + "  ".join(f"{m:>13}" for m in ms)]
    for name, r in rows.items():
        out.append(f"{name:<{width}}  {r['n']:>4}  " + "  ".join(f"{fmt_metric(m, r.get(m)):>13}" for m in ms))
    return "\n".join(out) + "\n"


FORMATS = {"table": text_table, "csv": csv_table, "json": json_lines, "md": markdown_table}


# --------------------------------------------------------------------------------------------
# Paired comparisons and ablation studies


def _labels_line(settings: dict[str, Any]) -> list[str]:
    """A line naming votes-only labels (nothing for the published labels, the default)."""
    if settings.get("label_source", "published") == "published":
        return []
    return ["labels: the majority of each case's votes alone (--label-source votes)"]


def format_comparison(c: "Comparison") -> str:
    """``casebench compare``: a table per pair, for people."""
    lines = ["inputs:"]
    for d in c.inputs:
        lines.append(f"  {d['label']}  {d['name']}  ({d['answered']}/{d['n']} answered)  {d['source']}")
    s = c.settings
    lines.append(f"differences are A - B; {s['level']:.0%} paired-bootstrap CIs ({s['bootstrap']} resamples, "
                 f"seed {s['seed']}); p(BH): Benjamini-Hochberg over all primary tests (alpha {s['alpha']})")
    lines.append(f"cases: {s['cases']}")
    lines += _labels_line(s)
    for pc in c.pairs:
        A, B = c.inputs[pc.a]["label"], c.inputs[pc.b]["label"]
        lines.append("")
        lines.append(f"{A} vs {B}: {pc.n_paired} paired cases" + (f" ({pc.dropped} dropped: not answered by both)"
                                                                   if pc.dropped else ""))
        mc = pc.mcnemar
        lines.append(f"  McNemar exact: {A} right & {B} wrong {mc['a_only']}, {A} wrong & {B} right {mc['b_only']}, "
                     f"p = {fmt_p(mc['p'])}")
        if pc.williams and pc.williams.get("t") is not None:
            w = pc.williams
            lines.append(f"  Williams' t (PCC, shared safe_rate): t = {w['t']:.3f}, df = {w['df']}, p = {fmt_p(w['p'])}")
        lines.append(f"  {'metric':<14}{A:>9}{B:>9}{A + ' - ' + B:>10}   {'95% CI':<21}{'p':>9}{'p(BH)':>10}  test")
        for m in pc.metrics.values():
            sig = " *" if m.significant else ""
            f = m.metric
            ci = "[" + fmt_metric(f, m.ci[0]) + ", " + fmt_metric(f, m.ci[1]) + "]"
            lines.append(f"  {f:<14}{fmt_metric(f, m.a):>9}{fmt_metric(f, m.b):>9}{fmt_metric(f, m.diff):>10}   "
                         f"{ci:<21}{fmt_p(m.p):>9}{fmt_p(m.p_adjusted):>10}  {m.test}{sig}")
    lines.append("")
    lines.append("* significant after Benjamini-Hochberg; " + lower_is_better_note(COMPARED_METRICS))
    return "\n".join(lines) + "\n"


def format_ablation(res: "AblationResult") -> str:
    """``casebench ablate``: each condition's figures, then its difference from the full
    context with a CI."""
    ms = [m for m in STUDY_METRICS if m in metric_names(res.mode)]
    tag = " (paper-compatible)" if res.paper_compat else ""
    s = res.settings
    lines = [f"ablation: {res.model} [{res.mode}]{tag}, {len(res.conditions)} conditions",
             f"difference = condition - full context; {s['level']:.0%} paired-bootstrap CI ({s['bootstrap']} "
             f"resamples); p(BH): Benjamini-Hochberg over all conditions and metrics", *_labels_line(s), ""]
    width = max(len(c.name) for c in res.conditions) + 2
    lines.append(f"{'condition':<{width}}{'coverage':>9}" + "".join(f"{m:>15}" for m in ms))
    for c in res.conditions:
        lines.append(f"{c.name:<{width}}{100 * c.score.coverage:>8.1f}%"
                     + "".join(f"{fmt_metric(m, c.score.values.get(m)):>15}" for m in ms))
    lines.append("")
    if len(res.conditions) == 1:
        lines.append("only the full context was given: add ablation runs or files to see differences")
    for c in res.conditions[1:]:
        lines.append(f"{c.name}  vs  full context ({c.n_paired} paired cases"
                     + (f", {c.dropped} dropped" if c.dropped else "") + ")")
        for m in ms:
            d = c.diffs.get(m)
            if d is None:
                continue
            sig = " *" if d.significant else ""
            lines.append(f"  {m:<14}{fmt_metric(m, d.diff):>9}   [{fmt_metric(m, d.ci[0])}, {fmt_metric(m, d.ci[1])}]"
                         f"   p = {fmt_p(d.p)} ({d.test})   p(BH) = {fmt_p(d.p_adjusted)}{sig}")
    lines.append("")
    lines.append("* significant after Benjamini-Hochberg")
    return "\n".join(lines) + "\n"


def _ci(lo_hi: Sequence[float] | None, digits: int = 3) -> str:
    if not lo_hi:
        return ""
    return f"[{fmt_num(lo_hi[0], digits)}, {fmt_num(lo_hi[1], digits)}]"


def format_placements(res: "PlacementResult") -> str:
    """``casebench study``: per placement its metrics, context figures and (respond mode)
    refusal figures and say-do gap; then the paired tests between placements."""
    ms = [m for m in STUDY_METRICS if m in metric_names(res.mode)]
    if any(p.over_refusal is not None for p in res.placements):
        ms.append("refusal_rate")
    tag = " (paper-compatible)" if res.paper_compat else ""
    s = res.settings
    rm = f", - {', '.join(res.removed)}" if res.removed else ""
    ps = res.placements
    lines = [f"placement study: {res.model} [{res.mode}{rm}]{tag}, context as {', '.join(p.placement for p in ps)}",
             f"{s['level']:.0%} CIs ({s['bootstrap']} bootstrap resamples, seed {s['seed']}); context figures: "
             f"{s['context_ci']}", *_labels_line(s), ""]
    width = max(12, max(len(p.placement) for p in ps) + 2)
    lines.append(f"{'placement':<{width}}{'answered':>10}" + "".join(f"{m:>17}" for m in ms))
    for p in ps:
        sc = p.score
        lines.append(f"{p.placement:<{width}}{f'{sc.answered}/{sc.n}':>10}"
                     + "".join(f"{fmt_metric(m, sc.values.get(m)):>17}" for m in ms))
        lines.append(f"{'':<{width}}{'':>10}" + "".join(f"{_ci(sc.ci.get(m), METRIC[m].digits - 1):>17}" for m in ms))
    lines += ["", "context figures over query pairs (both cases answered):",
              f"  {'placement':<{width}}{'pairs':>6}  {'shift':<24}{'follow':<24}blind (of pairs people split)"]
    for p in ps:
        c = p.context
        if not c.pairs:
            lines.append(f"  {p.placement:<{width}}{0:>6}  - (no query with both contexts answered; run with --pairs N)")
            continue
        lines.append(f"  {p.placement:<{width}}{c.pairs:>6}  "
                     f"{fmt_num(c.shift, 3) + ' ' + _ci(c.ci.get('context_shift')):<24}"
                     f"{fmt_num(c.follow, 3) + ' ' + _ci(c.ci.get('context_follow')):<24}"
                     + (f"{fmt_num(c.blind, 3)} {_ci(c.ci.get('context_blind'))} (n={c.blind_pairs})"
                        if c.blind_pairs else "- (no pair whose human labels differ)"))
    if ps and ps[0].context.note:
        lines.append(f"  ({ps[0].context.note})")
    if any(p.over_refusal is not None for p in ps):
        lines += ["", "behaviour (respond mode): over-refusal = 1 - safe recall, under-refusal = 1 - unsafe recall "
                  + ("(the recalls' CIs)" if res.paper_compat else "(Wilson CIs)")]
        for p in ps:
            lines.append(f"  {p.placement:<{width}}over-refusal {fmt_num(p.over_refusal, 3)} {_ci(p.over_refusal_ci)}"
                         f"   under-refusal {fmt_num(p.under_refusal, 3)} {_ci(p.under_refusal_ci)}")
        cl = next((p.classifier for p in ps if p.classifier), None)
        if cl:
            lines.append("  " + classifier_note(cl))
    if any(p.say_do is not None for p in ps):
        lines += ["", "say-do gap (the model as judge vs as chatbot, same placement):"]
        for p in ps:
            sd = p.say_do
            if sd is None:
                lines.append(f"  {p.placement:<{width}}- (no judge run in this placement)")
                continue
            lines.append(f"  {p.placement:<{width}}{sd.n} cases: judged safe {fmt_num(sd.judged_safe, 3)}, answered "
                         f"{fmt_num(sd.answered, 3)}, gap {fmt_num(sd.judged_safe - sd.answered, 3)}; agreement "
                         f"{fmt_num(sd.agreement, 3)} {_ci(sd.agreement_ci)}; judged safe & refused "
                         f"{sd.mcnemar['a_only']}, judged unsafe & answered {sd.mcnemar['b_only']}, "
                         f"McNemar p = {fmt_p(sd.mcnemar['p'])}")
    if res.comparison is not None:
        lines += ["", f"between placements (A - B; paired over the cases both answered; p(BH): Benjamini-Hochberg "
                      f"over all pairs and metrics, alpha {s['alpha']}):"]
        for pc in res.comparison.pairs:
            a, b = ps[pc.a].placement, ps[pc.b].placement
            mc = pc.mcnemar
            lines.append(f"  {a} vs {b}: {pc.n_paired} paired cases" + (f" ({pc.dropped} dropped)" if pc.dropped else "")
                         + f"; McNemar exact on correctness: {a} right & {b} wrong {mc['a_only']}, "
                         f"{a} wrong & {b} right {mc['b_only']}, p = {fmt_p(mc['p'])}")
            for m in ms:
                d = pc.metrics.get(m)
                if d is None:
                    continue
                sig = " *" if d.significant else ""
                lines.append(f"    {m:<14}{fmt_metric(m, d.diff):>9}   [{fmt_metric(m, d.ci[0])}, {fmt_metric(m, d.ci[1])}]"
                             f"   p = {fmt_p(d.p)} ({d.test})   p(BH) = {fmt_p(d.p_adjusted)}{sig}")
        for d in res.shift_diffs:
            if d.pairs:
                lines.append(f"  context shift {d.a} - {d.b}: {fmt_num(d.diff, 3)} {_ci(d.ci)} over {d.pairs} pairs, "
                             f"bootstrap p = {fmt_p(d.p_bootstrap)} (not in the BH family)")
        lines += ["", "* significant after Benjamini-Hochberg"]
    return "\n".join(lines) + "\n"


def format_say_do(s: "SayDo", limit: int = 20) -> str:
    """The say-and-do comparison of a judge run and a respond run, as text."""
    m = s.mcnemar
    lines = [
        f"say and do: {s.judge} vs {s.respond} ({s.n} cases)",
        f"  behaviour matches its own verdict: {s.agreement:.3f} [{s.agreement_ci[0]:.3f}, {s.agreement_ci[1]:.3f}]",
        f"  judged safe: {s.judged_safe:.3f}   answered: {s.answered:.3f}",
        f"    ({classifier_note(s.classifier)})",
        f"  judged safe but refused: {m['a_only']}   judged unsafe but answered: {m['b_only']}   "
        f"McNemar exact p = {m['p']:.3g}",
    ]
    for title, cases in (("judged safe, refused", s.judged_safe_refused),
                         ("judged unsafe, answered", s.judged_unsafe_answered)):
        shown = ", ".join(map(str, cases[:limit])) + (f", ... ({len(cases)} in all)" if len(cases) > limit else "")
        lines.append(f"  {title}: {shown or '-'}")
    return "\n".join(lines) + "\n"
