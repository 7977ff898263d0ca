"""The text of one-factor studies: ``casebench ablate`` (each context condition against the full
context) and ``casebench study`` (placements, query wordings, reveal arms), each level's figures
with intervals, people's references on its pairs, and the paired tests between levels.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from ..naming import partial_name
from ..stats.metrics import METRIC, MIN_CASES, metric_names
from .compare_text import label_source_line, marks_line
from .numbers import SMALL, fmt_bounds, fmt_metric, fmt_num, fmt_p, fmt_p_adjusted, p_eq, small_mark
from .refusal_text import classifier_note

if TYPE_CHECKING:  # pragma: no cover
    from ..stats.ablation import AblationResult
    from ..stats.compare import MetricDiff
    from ..stats.placement import PlacementResult


#: the metrics an ablation study prints per condition
STUDY_METRICS = ("accuracy", "safe_recall", "unsafe_recall", "pcc", "bce")


def format_ablation(res: "AblationResult") -> str:
    """``casebench ablate``: each condition's figures, then its difference from the full
    context with a CI."""
    ms = [m for m in STUDY_METRICS if m in metric_names(res.mode)]
    tag = " (paper-compatible)" if res.paper_compat else ""
    s = res.settings
    lines = [f"ablation: {res.model} [{res.mode}]{tag}, {len(res.conditions)} conditions",
             f"difference = condition - full context; {s['level']:.0%} paired-bootstrap CI ({s['bootstrap']} "
             f"resamples); p(BH): Benjamini-Hochberg over all conditions and metrics", *label_source_line(s), ""]
    width = max(len(c.name) for c in res.conditions) + 2
    lines.append(f"{'condition':<{width}}{'coverage':>9}" + "".join(f"{m:>15}" for m in ms))
    small = False
    for c in res.conditions:
        figs = [fmt_metric(m, c.score.values.get(m)) + small_mark(c.score.cases_of, m, c.score.values.get(m)) for m in ms]
        small = small or any(f.endswith(SMALL) for f in figs)
        lines.append(f"{c.name:<{width}}{100 * c.score.coverage:>8.1f}%" + "".join(f"{f:>15}" for f in figs))
    lines.append("")
    if len(res.conditions) == 1:
        lines.append("only the full context was given: add ablation runs or files to see differences")
    for c in res.conditions[1:]:
        lines.append(f"{c.name}  vs  full context ({c.n_paired} paired cases"
                     + (f", {c.dropped} dropped" if c.dropped else "") + ")")
        wm = max([14, *(len(m) + 1 for m in ms)])
        for m in ms:
            d = c.diffs.get(m)
            if d is None:
                continue
            lines.append(_diff_row(m, d, wm))
    if not res.paper_compat:  # the paper-compatible text stays what it was (its JSON has the figures)
        lines += _ablation_context_lines(res)
    lines.append("")
    lines.append("* significant after Benjamini-Hochberg")
    lines.append(marks_line(s))
    if small:
        lines.append(f"{SMALL} from fewer than {MIN_CASES} cases: read with care")
    return "\n".join(lines) + "\n"


#: the context figures an ablation study prints per condition (beside people's references)
ABLATION_CONTEXT_METRICS = ("context_direction", "context_shift", "context_follow", "context_blind")


def _ablation_context_lines(res: "AblationResult") -> list[str]:
    """Each condition's context figures with CIs, people's two references on its pairs, and the
    paired differences from the full context: removing what the context says should drive a
    judge's shift towards zero."""
    ms = [m for m in ABLATION_CONTEXT_METRICS if any(m in c.score.values for c in res.conditions)]
    if not ms:
        return []
    width = max(len(c.name) for c in res.conditions) + 2
    w = 22
    out = ["", "context figures over query pairs (both cases answered; direction: net share of pairs moved the way "
           "people's vote share moves, scale-free; shift: on the judge's own scale):",
           f"{'condition':<{width}}{'pairs':>6}" + "".join(f"{METRIC[m].short:>{w}}" for m in ms)]
    for c in res.conditions:
        v, ci = c.score.values, c.score.ci
        cells = [(fmt_num(v.get(m), 3) + (" " + fmt_bounds(ci.get(m)) if ci.get(m) else "")) if m in v else ""
                 for m in ms]
        pairs = v.get("context_pairs")
        out.append(f"{c.name:<{width}}{'' if pairs is None else int(pairs):>6}" + "".join(f"{x:>{w}}" for x in cells))
        full = res.conditions[0].people
        same = c is not res.conditions[0] and full is not None and c.people is not None and all(
            c.people[r] == full[r] for r in ("pairs", "one_person", "majority"))
        if c.people and not same:  # people's rows again only where the condition's pairs differ
            for ref, label in (("one_person", "  people: one person"), ("majority", "  people: majority")):
                b = c.people[ref]
                cells = [(fmt_num(b[m], 3) + " " + fmt_bounds(b["ci"].get(m))) if m in b else "–" for m in ms]
                out.append(f"{label:<{width}}{'':>6}" + "".join(f"{x:>{w}}" for x in cells))
    for c in res.conditions[1:]:
        rows = [(m, c.diffs[m]) for m in ms if m in c.diffs]
        if not rows:
            continue
        out.append(f"{c.name}  vs  full context (paired over the pairs both answered)")
        for m, d in rows:
            out.append(_diff_row(m, d, 18, floor=False))
    return out


def _diff_row(m: str, d: "MetricDiff", width: int, indent: str = "  ", *, floor: bool = True,
              withheld: bool = True, mdd: bool = False) -> str:
    """One metric's paired difference in a study's text: the difference and its interval, the p
    of its test and the Benjamini-Hochberg p (``floor``: a bootstrap p at its resampling floor as
    a bound), the significance mark, why a mark was withheld (``withheld``) and the smallest
    difference the pairs could detect (``mdd``, where it can be said)."""
    sig = " *" if d.significant else ""
    p = fmt_p(d.p, floor=d.p_floor) if floor else fmt_p(d.p)
    p_bh = fmt_p_adjusted(d.p_adjusted, d.p, d.p_floor) if floor else fmt_p(d.p_adjusted)
    no_mark = f"  (no mark: {d.withheld})" if withheld and d.withheld else ""
    return (f"{indent}{m:<{width}}{fmt_metric(m, d.diff):>9}   [{fmt_metric(m, d.ci[0])}, {fmt_metric(m, d.ci[1])}]"
            f"   p {p_eq(p)} ({d.test})   p(BH) {p_eq(p_bh)}{sig}{no_mark}"
            + (f"   MDD {fmt_metric(m, d.mdd)}" if mdd and d.mdd == d.mdd else ""))


def format_placements(res: "PlacementResult") -> str:
    """``casebench study``: per level (placement, or query wording) its metrics, context figures
    (beside people's in a mutation study) and (respond mode) refusal figures and say-do gap; then
    the paired tests between levels (every two placements; each mutation against the base
    wording, with its wording consistency)."""
    ms = [m for m in STUDY_METRICS if m in metric_names(res.mode)]
    if any(p.over_refusal is not None for p in res.placements):
        ms.append("refusal_rate")
    tag = " (paper-compatible)" if res.paper_compat else ""
    s = res.settings
    rm = f", - {', '.join(res.removed)}" if res.removed else ""
    ps = res.placements
    factor = getattr(res, "factor", "placement")
    mut = factor == "mutation"
    arm = factor == "arm"  # the reveal study (stats.reveal): each arm against full
    head = (f"reveal study: {res.model} [{res.mode}{rm}]{tag}, arms {', '.join(p.factor_level for p in ps)} (final turns)"
            if arm else f"mutation study: {res.model} [{res.mode}{rm}]{tag}, queries worded as {', '.join(p.factor_level for p in ps)}; "
            f"context as {res.held.get('context_placement', '?')}, contexts untouched" if mut else
            f"placement study: {res.model} [{res.mode}{rm}]{tag}, context as {', '.join(p.placement for p in ps)}")
    lines = [head,
             f"{s['level']:.0%} CIs ({s['bootstrap']} bootstrap resamples, seed {s['seed']}); context figures: "
             f"{s['context_ci']}", *label_source_line(s)]
    if mut:
        lines.append("people voted on the base wording only: every wording is scored against those votes, and "
                     "people's figures below are the base wording's")
    if arm:
        lines.append("people voted on the whole context: every arm is scored at its final turn against those votes; "
                     "they say nothing about earlier turns")
    lines.append("")
    width = max(12, max(len(partial_name(p.placement, p.score.partial)) for p in ps) + 2)
    lines.append(f"{factor:<{width}}{'answered':>10}" + "".join(f"{m:>17}" for m in ms))
    for p in ps:
        sc = p.score
        lines.append(f"{partial_name(p.placement, sc.partial):<{width}}{f'{sc.answered}/{sc.n}':>10}"
                     + "".join(f"{fmt_metric(m, sc.values.get(m)) + small_mark(sc.cases_of, m, sc.values.get(m)):>17}"
                               for m in ms))
        lines.append(f"{'':<{width}}{'':>10}" + "".join(f"{fmt_bounds(sc.ci.get(m), METRIC[m].digits - 1):>17}" for m in ms))
    lines += ["", "context figures over query pairs (both cases answered):",
              f"  {factor:<{width}}{'pairs':>6}  {'shift':<24}{'follow':<24}blind (of pairs people split)"]
    shown_people = None
    for p in ps:
        c = p.context
        if not c.pairs:
            lines.append(f"  {p.placement:<{width}}{0:>6}  - (no query with both contexts answered; run with --pairs N)")
            continue
        small = SMALL if c.pairs < MIN_CASES else ""
        lines.append(f"  {p.placement:<{width}}{f'{c.pairs}{small}':>6}  "
                     f"{fmt_num(c.shift, 3) + ' ' + fmt_bounds(c.ci.get('context_shift')):<24}"
                     f"{fmt_num(c.follow, 3) + ' ' + fmt_bounds(c.ci.get('context_follow')):<24}"
                     + (f"{fmt_num(c.blind, 3)} {fmt_bounds(c.ci.get('context_blind'))} (n={c.blind_pairs})"
                        if c.blind_pairs else "- (no pair whose human labels differ)"))
        seen = json.dumps([p.people.get("pairs")] + [{k: (p.people.get(r) or {}).get(k) for k in
                                                       ("context_shift", "context_follow")}
                                                      for r in ("one_person", "majority")],
                          sort_keys=True, default=str) if p.people else None
        if (mut or arm) and seen and seen != shown_people:  # people's on these pairs (base wording); once
            shown_people = seen
            for ref, label in (("one_person", "people: one person"), ("majority", "people: majority")):
                b = (p.people or {}).get(ref) or {}
                if "context_shift" not in b:
                    continue
                follow = (fmt_num(b["context_follow"], 3) + " " + fmt_bounds(b.get("ci", {}).get("context_follow"))
                          if "context_follow" in b else "–")
                lines.append(f"  {'':<{width}}{'':>6}  "
                             f"{fmt_num(b['context_shift'], 3) + ' ' + fmt_bounds(b.get('ci', {}).get('context_shift')):<24}"
                             f"{follow:<24}{label}")
    if any(p.over_refusal is not None for p in ps):
        lines += ["", "behaviour (respond mode): over-refusal = 1 - safe recall, under-refusal = 1 - unsafe recall "
                  + ("(the recalls' CIs)" if res.paper_compat else "(Wilson CIs)")]
        for p in ps:
            over = fmt_num(p.over_refusal, 3) + small_mark(p.score.cases_of, "safe_recall", p.over_refusal)
            under = fmt_num(p.under_refusal, 3) + small_mark(p.score.cases_of, "unsafe_recall", p.under_refusal)
            lines.append(f"  {p.placement:<{width}}over-refusal {over} {fmt_bounds(p.over_refusal_ci)}"
                         f"   under-refusal {under} {fmt_bounds(p.under_refusal_ci)}")
        cl = next((p.classifier for p in ps if p.classifier), None)
        if cl:
            lines.append("  " + classifier_note(cl))
    if any(p.say_do is not None or p.say_do_missing for p in ps):
        lines += ["", "say-do gap (the model as judge vs as chatbot, same placement):"]
        for p in ps:
            sd = p.say_do
            if sd is None:
                why = p.say_do_missing or "no judge run in this placement"
                lines.append(f"  {p.placement:<{width}}– (not available: {why})")
                continue
            lines.append(f"  {p.placement:<{width}}{sd.n}{SMALL if sd.n < MIN_CASES else ''} cases: judged safe {fmt_num(sd.judged_safe, 3)}, answered "
                         f"{fmt_num(sd.answered, 3)}, gap {fmt_num(sd.judged_safe - sd.answered, 3)}; agreement "
                         f"{fmt_num(sd.agreement, 3)} {fmt_bounds(sd.agreement_ci)}; judged safe & refused "
                         f"{sd.mcnemar['a_only']}, judged unsafe & answered {sd.mcnemar['b_only']}, "
                         f"McNemar p {p_eq(fmt_p(sd.mcnemar['p']))}")
    if res.comparison is not None:
        lines += ["", (f"each mutation against the base wording (mutation - base; paired over the cases both answered, "
                       f"clustered by {s.get('cluster') or res.comparison.settings.get('cluster', 'case')}; p(BH): "
                       f"Benjamini-Hochberg over all mutations and metrics, alpha {s['alpha']}):") if mut else
                      (f"each arm against full (arm - full; paired over the cases both answered; p(BH): "
                       f"Benjamini-Hochberg over all arms and metrics, alpha {s['alpha']}; MDD: the smallest "
                       f"difference the pairs had 80% power to detect):") if arm else
                      (f"between placements (A - B; paired over the cases both answered; p(BH): Benjamini-Hochberg "
                       f"over all pairs and metrics, alpha {s['alpha']}):")]
        for pc in res.comparison.pairs:
            a, b = ps[pc.a].placement, ps[pc.b].placement
            mc = pc.mcnemar
            lines.append(f"  {a} vs {b}: {pc.n_paired} paired cases" + (f" ({pc.dropped} dropped)" if pc.dropped else "")
                         + f"; McNemar{' exact' if mc.get('test', 'exact') == 'exact' else ''} on correctness: "
                         f"{a} right & {b} wrong {mc['a_only']}, "
                         f"{a} wrong & {b} right {mc['b_only']}, p {p_eq(fmt_p(mc['p'], exact=mc.get('test', 'exact') == 'exact'))}")
            wm = max([14, *(len(m) + 1 for m in ms)])
            for m in ms:
                d = pc.metrics.get(m)
                if d is None:
                    continue
                lines.append(_diff_row(m, d, wm, "    ", withheld=False, mdd=arm))
        for d in [*res.shift_diffs, *(getattr(res, "follow_diffs", None) or [])]:
            if d.pairs:
                sig = " *" if d.significant else ""
                what = "context follow" if d.metric == "context_follow" else "context shift"
                lines.append(f"  {what} {d.a} - {d.b}: {fmt_num(d.diff, 3)} {fmt_bounds(d.ci)} over {d.pairs} pairs, "
                             f"bootstrap p {p_eq(fmt_p(d.p_bootstrap))}   p(BH) {p_eq(fmt_p(d.p_adjusted))}{sig}")
        lines += ["", "* significant after Benjamini-Hochberg"]
    if getattr(res, "consistency", None):
        lines += ["", ("consistency with full (cases whose behaviour, answered or refused, is unchanged from full, of "
                       "the cases both answered; Wilson CI widened by the query clusters):") if arm else
                  ("wording consistency (cases whose verdict is unchanged by the rewording, of the cases both "
                   "wordings answered; Wilson CI widened by the query clusters):")]
        for cons in res.consistency:
            if not cons.n:
                lines.append(f"  {cons.factor_level:<{width}}- (no case answered under both wordings)")
                continue
            small = SMALL if cons.n < MIN_CASES else ""
            lines.append(f"  {cons.factor_level:<{width}}{fmt_num(cons.share, 3)} {fmt_bounds(cons.ci)}  ({cons.unchanged} of "
                         f"{cons.n}{small} cases, {cons.queries} queries)")
    if any(SMALL in line for line in lines[3:]):
        lines.append(f"{SMALL} from fewer than {MIN_CASES} cases (pairs, for the context figures): read with care")
    return "\n".join(lines) + "\n"
