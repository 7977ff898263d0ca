"""The report's sections on studies and people: context ablation, where the context goes
(placement), the human votes and context sensitivity beside people's."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from ..modes import Mode
from ..stats.metrics import METRIC
from .numbers import report_metric as _fm, report_num as _f, report_p as _fp
from .report_html import _details, _e, _figure, _lv
from .report_inputs import PLOT_MAX_INPUTS, ReportContext, _best, _left_out_note
from .study_text import STUDY_METRICS

def _ablation(ctx: ReportContext) -> str | None:
    from .plots import ablation_chart

    if not ctx.overview.ablations:
        return None
    parts = ['<p class="note">Each bar: the paired difference condition − full context, with a ' + _lv(ctx.options)
             + ' paired-bootstrap '
             "CI (same cases, same model and mode); a bar left of zero means removing those CI parameters hurt. "
             "The same study in text or JSON: <code>casebench ablate INPUTS…</code>.</p>"]
    for _, res in ctx.overview.ablations:
        ms = [m for m in STUDY_METRICS if m in res.conditions[1].diffs]
        drawn = [m for m in ms if m != "bce"]  # four panels stay legible; BCE is in the table
        conds = res.conditions[1:]
        d = np.array([[c.diffs[m].diff for m in drawn] for c in conds])
        ci = np.array([[c.diffs[m].ci for m in drawn] for c in conds])
        png = ctx.figures.draw(ablation_chart, [c.name for c in conds], drawn, d, ci,
                               f"{res.model} [{res.mode}]: condition − full context",
                               higher_is_better=[METRIC[m].higher_is_better for m in drawn])
        parts.append(f"<h3>{_e(res.model)} [{_e(res.mode)}]</h3>")
        parts.append(_figure(png, f"ablation of {res.model} {res.mode}",
                             "Removed CI parameters on the left; green: better than the full context, orange: worse."))
        head = (["Condition", "Coverage"] + [METRIC[m].heading for m in ms]
                + [f"Δ {METRIC[m].heading}" for m in ms[:3]])
        rows = []
        for c in res.conditions:
            cells = [f'<td class="l">{_e(c.name)}</td>', f"<td>{100 * c.score.coverage:.1f}%</td>"]
            cells += [f"<td>{_fm(m, c.score.values.get(m))}</td>" for m in ms]
            cells += [_diff_cell(m, c.diffs.get(m)) for m in ms[:3]]
            rows.append("<tr>" + "".join(cells) + "</tr>")
        parts.append('<div class="wide"><table class="ablation"><thead><tr>'
                     + "".join(f'<th class="{"l" if h == "Condition" else ""}">{_e(h)}</th>' for h in head)
                     + "</tr></thead><tbody>" + "".join(rows) + "</tbody></table></div>")
        parts.append(_ablation_context(res))
    return "".join(parts)


def _diff_cell(m: str, dd: Any) -> str:
    """One paired difference from the full context as a table cell: the difference, its CI and
    its Benjamini-Hochberg p (marked when significant); a dash when there is none."""
    if dd is None:
        return "<td>–</td>"
    cls = ' class="sig"' if dd.significant else ""
    return (f'<td{cls}>{_fm(m, dd.diff)}<span class="ci">[{_fm(m, dd.ci[0])}, {_fm(m, dd.ci[1])}] '
            f"p(BH) {_fp(dd.p_adjusted, dd.p_floor)}</span></td>")


#: the context figures of the report's ablation tables (each with its paired difference)
ABLATION_CONTEXT = ("context_direction", "context_shift", "context_follow", "context_blind")


def _ablation_context(res: Any) -> str:
    """One ablation study's context figures per condition, with CIs and the paired difference
    from the full context (over the pairs both answered), and people's two references on the
    full context's pairs: removing what the context says should drive a judge's shift to 0."""
    ms = [m for m in ABLATION_CONTEXT if any(m in c.score.values for c in res.conditions)]
    if not ms:
        return ""

    def fig(m: str, v: Any, ci: Any) -> str:
        return _fm(m, v) + (f'<span class="ci">[{_fm(m, ci[0])}, {_fm(m, ci[1])}]</span>' if ci else "")

    rows = []
    for c in res.conditions:
        v = c.score.values
        cells = [f'<td class="l">{_e(c.name)}</td>', f"<td>{_fm('context_pairs', v.get('context_pairs'))}</td>"]
        for m in ms:
            cells.append(f"<td>{fig(m, v.get(m), c.score.ci.get(m))}</td>")
            cells.append(_diff_cell(m, c.diffs.get(m)))
        rows.append("<tr>" + "".join(cells) + "</tr>")
    people = res.conditions[0].people
    if people:
        for ref, label in (("one_person", "People: one person"), ("majority", "People: majority")):
            b = people[ref]
            cells = [f'<td class="l"><b>{label}</b></td>', f"<td>{people['pairs']}</td>"]
            for m in ms:
                cells.append(f"<td>{fig(m, b[m], b['ci'].get(m))}</td>" if m in b else "<td>–</td>")
                cells.append("<td></td>")
            rows.append('<tr class="reference">' + "".join(cells) + "</tr>")
    head = ["Condition", "Pairs"] + [h for m in ms for h in (METRIC[m].heading, f"Δ {METRIC[m].heading}")]
    return ('<div class="wide"><table class="ablation-context"><thead><tr>'
            + "".join(f'<th class="{"l" if h == "Condition" else ""}">{_e(h)}</th>' for h in head)
            + "</tr></thead><tbody>" + "".join(rows) + "</tbody></table></div>"
            '<p class="note">Context figures over the query pairs each condition answered (Δ: condition − full '
            "context, paired over the pairs both answered, Benjamini–Hochberg with the study's other tests). "
            "<b>Direction</b> is scale-free (the net share of pairs the judge moves the way people's vote share "
            "moves); <b>shift</b> is on the judge's own scale, beside one person's and people's majority's on the "
            "full context's pairs.</p>")


def _placement(ctx: ReportContext) -> str | None:
    """The placement studies among the inputs: the same model with the context in the prompt,
    the system prompt or the turns before the query (``stats.placement``)."""
    if not ctx.overview.placements:
        return None
    method = ('<p class="note">The same model, mode and cases with the context inside the user message (user), as '
             "the operator's system prompt (system) or as the conversation before the query (turns). Figures with "
             f"{_lv(ctx.options)} CIs (as in the leaderboard); context shift, follow and blind over the query pairs with both "
             "contexts answered (the shift's CI resamples pairs; follow and blind: Wilson intervals); over-refusal = "
             "1 − safe recall, under-refusal = 1 − unsafe recall (Wilson CIs). Between placements: McNemar's exact "
             "test on per-case correctness and paired-bootstrap CIs over the shared cases, Benjamini–Hochberg over "
             'all pairs and metrics (<span class="sig">red</span> = significant). The same study in text or JSON: '
             "<code>casebench study INPUTS…</code>.</p>")
    return _study_tables(method, [res for _, _, res in ctx.overview.placements])


def _mutations(ctx: ReportContext) -> str | None:
    """The query-mutation studies among the inputs: the same model with the queries in their own
    wording and in SORRY-Bench's rewordings, the contexts untouched (``stats.mutation_effects.MUTATION``)."""
    if not ctx.overview.mutations:
        return None
    method = ('<p class="note">The same model, mode, placement and cases with each query in its own wording (base) '
              "and in SORRY-Bench's rewordings, the contexts untouched. <b>People voted on the base wording only</b>: "
              "every wording is scored against those votes, and no figure says what people would vote on a "
              f"rewording. Figures with {_lv(ctx.options)} CIs; context shift, follow and blind over the query pairs with both "
              "contexts answered. Each mutation against the base wording (mutation − base): McNemar's test on "
              "per-case correctness and paired-bootstrap CIs over the shared cases, clustered by query, "
              'Benjamini–Hochberg over all mutations and metrics (<span class="sig">red</span> = significant); '
              "wording consistency: the share of cases both wordings answered whose verdict is unchanged "
              "(Wilson CI widened by the query clusters). The same study in text or JSON: "
              "<code>casebench study INPUTS…</code>.</p>")
    return _study_tables(method, [res for _, res in ctx.overview.mutations])


def _study_tables(method: str, results: Sequence[Any]) -> str:
    """The tables of one-factor studies (``stats.placement.analyse_factor``): per level its
    figures, then the paired tests between levels; the method folded beneath."""
    from .refusal_text import classifier_note

    parts = []

    def cell(x: float | None, ci: Sequence[float] | None = None) -> str:
        return f"<td>{_f(x)}" + (f'<span class="ci">[{_f(ci[0])}, {_f(ci[1])}]</span>' if ci else "") + "</td>"

    for res in results:
        behaviour = any(p.over_refusal is not None for p in res.placements)
        saydo = any(p.say_do is not None or p.say_do_missing for p in res.placements)
        rm = f" − {', '.join(res.removed)}" if res.removed else ""
        factor = res.factor.capitalize()
        held = f", context as {res.held['context_placement']}" if "context_placement" in res.held else ""
        parts.append(f"<h3>{_e(res.model)} [{_e(res.mode)}]{_e(rm)}{_e(held)}</h3>")
        head = [factor, "Answered", "Accuracy", "Safe recall", "Unsafe recall"]
        head += ["Over-refusal", "Under-refusal"] if behaviour else []
        head += ["Pairs", "Context shift", "Context follow", "Context blind"]
        head += ["Say-do agreement", "Say-do gap"] if saydo else []
        rows = []
        for p in res.placements:
            sc, c = p.score, p.context
            cells = [f'<td class="l">{_e(p.placement)}</td>', f"<td>{sc.answered}/{sc.n}</td>"]
            cells += [cell(sc.values.get(m), sc.ci.get(m)) for m in ("accuracy", "safe_recall", "unsafe_recall")]
            if behaviour:
                cells += [cell(p.over_refusal, p.over_refusal_ci), cell(p.under_refusal, p.under_refusal_ci)]
            cells.append(f"<td>{c.pairs}</td>")
            cells += [cell(c.shift, c.ci.get("context_shift")), cell(c.follow, c.ci.get("context_follow")),
                      cell(c.blind, c.ci.get("context_blind"))]
            if saydo:
                sd = p.say_do
                cells += ([cell(sd.agreement, sd.agreement_ci), cell(sd.judged_safe - sd.answered)] if sd
                          else ["<td>–</td>", "<td>–</td>"])
            rows.append("<tr>" + "".join(cells) + "</tr>")
        parts.append('<div class="wide"><table class="placement"><thead><tr>'
                     + "".join(f'<th class="{"l" if h == factor else ""}">{_e(h)}</th>' for h in head)
                     + "</tr></thead><tbody>" + "".join(rows) + "</tbody></table></div>")
        notes = []
        for c in res.consistency:
            notes.append(f"Wording consistency of {_e(c.factor_level)}: {_f(c.share)} [{_f(c.ci[0])}, {_f(c.ci[1])}] "
                         f"({c.unchanged} of {c.n} cases unchanged, {c.queries} queries)." if c.n else
                         f"Wording consistency of {_e(c.factor_level)}: no case answered under both wordings.")
        if not any(p.context.pairs for p in res.placements):
            notes.append("No query has both its contexts among these cases, so the context figures are left out "
                         "(run the study with <code>--pairs N</code>).")
        cl = next((p.classifier for p in res.placements if p.classifier), None)
        if cl:
            note = classifier_note(cl)
            notes.append(_e(note[:1].upper() + note[1:]) + ".")
        for p in res.placements:
            if p.say_do is None and p.say_do_missing:
                notes.append(f"Say-do gap in placement {_e(p.placement)} not available: {_e(p.say_do_missing)}.")
        parts.append('<p class="note">' + " ".join(notes) + "</p>")
        if res.comparison is None:
            continue
        shifts = {(d.a, d.b): d for d in res.shift_diffs}
        prow = []
        for pc in res.comparison.pairs:
            a, b = res.placements[pc.a].placement, res.placements[pc.b].placement
            mc = pc.mcnemar
            cells = [f'<td class="l">{_e(a)} − {_e(b)}</td>',
                     f"<td>{pc.n_paired}" + (f" ({pc.dropped} dropped)" if pc.dropped else "") + "</td>",
                     f"<td>{mc['a_only']} / {mc['b_only']}<span class=\"ci\">p {_fp(mc['p'])}</span></td>"]
            for m in ("accuracy", "safe_recall", "unsafe_recall"):
                d = pc.metrics.get(m)
                if d is None:
                    cells.append("<td>–</td>")
                    continue
                cls = ' class="sig"' if d.significant else ""
                cells.append(f'<td{cls}>{_fm(m, d.diff)}<span class="ci">[{_fm(m, d.ci[0])}, {_fm(m, d.ci[1])}] '
                             f"p(BH) {_fp(d.p_adjusted, d.p_floor)}</span></td>")
            sd = shifts.get((a, b))
            cells.append(cell(sd.diff, sd.ci) if sd and sd.pairs else "<td>–</td>")
            prow.append("<tr>" + "".join(cells) + "</tr>")
        phead = [f"{factor}s (A − B)", "Paired cases", "McNemar (A only / B only)", "Δ Accuracy", "Δ Safe recall",
                 "Δ Unsafe recall", "Δ Context shift"]
        parts.append('<div class="wide"><table class="placement-pairs"><thead><tr>'
                     + "".join(f'<th class="{"l" if i == 0 else ""}">{_e(h)}</th>' for i, h in enumerate(phead))
                     + "</tr></thead><tbody>" + "".join(prow) + "</tbody></table></div>")
    parts.append(_details("How to read these tables", method))
    return "".join(parts)


def _people_effect_html(eff: dict[str, Any]) -> str:
    """People's context effect (``stats.human.people_context_effect``), as every output states it:
    one person's shift and the majority's follow under the label source, the other source's
    beside them, and the pairs that differ only by the intent vote's tie-break."""
    src, pd = eff["label_source"], eff["people_differ"]
    w, v = eff["with_intent_vote"], eff["votes_alone"]

    def ci(x: Any) -> str:
        return f' <span class="ci">[{_f(x[0])}, {_f(x[1])}]</span>' if x else ""

    this, other, names = (w, v, ("with the intent vote", "from the votes alone")) if src == "published" else (
        v, w, ("from the votes alone", "with the intent vote"))
    return (f"one person {_f(this['one_person_shift'])}{ci(this['one_person_shift_ci'])}, people's majority follows "
            f"in {_f(this['majority_follow'])}{ci(this['majority_follow_ci'])} of {eff['pairs']} query pairs "
            f"({names[0]}, <code>--label-source {src}</code>); {names[1]}: {_f(other['one_person_shift'])} and "
            f"{_f(other['majority_follow'])}. The published safe_rate counts the intent as a 21st vote: "
            f"{pd['intent_tie_break']} of the {pd['with_intent_vote']} pairs people label differently differ only "
            "because it broke a 10–10 tie.")


def _human(ctx: ReportContext) -> str | None:
    ov = ctx.overview
    if not ov.human_asked:
        return None
    if ov.human_error is not None:
        return f'<p class="note">{_e(ov.human_error)}</p>'
    st = ov.human
    if st is None:
        return '<p class="note">No cases with votes were given.</p>'
    from .plots import context_effect, stability_curve

    votes, eff = st["votes"], st["context_effect"]
    s_share, u_share = votes["safe_contexts"]["share"], votes["unsafe_contexts"]["share"]
    cats = st["categories"]
    sig = st["categories_significant"]
    agr = st["agreement"]
    pw = st["power"]
    paired = st["paired"]
    rows = [
        ("Cases / votes", f"{st['dataset']['cases']} cases, {votes['all']['votes']} votes"),
        ("Safe votes in intended-safe / -unsafe contexts", f"{_f(s_share)} / {_f(u_share)} (pooled, descriptive)"),
        ("People's context effect", _people_effect_html(eff)),
        ("Test, paired over queries", f"Wilcoxon signed-rank over {paired.get('pairs')} queries (votes alone), "
         f"p {'' if _fp(paired.get('p'), exact=True).startswith('<') else '= '}{_fp(paired.get('p'), exact=True)}; votes cluster within cases and queries, so no test pools them"),
        ("Categories with a significant effect", f"{sig['count']} of {sig['of']} (Wilcoxon over each category's "
         f"queries, Benjamini–Hochberg, alpha {sig['alpha']})"),
        ("Agreement (Krippendorff's alpha)", _f(agr.get("krippendorff_alpha"))),
        ("Design power for the overall effect", _f(pw.get("power"))
         + (f"; {pw['annotators_for_80_percent']} annotators per context for 80%"
            if pw.get("annotators_for_80_percent") else "")),
    ]
    table = ('<table class="kv"><tbody>' + "".join(f'<tr><td class="l"><b>{_e(k)}</b></td><td class="l">{v}</td></tr>'
                                                   for k, v in rows) + "</tbody></table>")
    parts = ['<p class="note">From the votes stored with the cases (20 per case in the released data; the '
             "published outputs' 21st vote, the context's intent, is counted only where the published safe_rate "
             "is, as stated). Same figures: <code>casebench human DATA</code>.</p>", table]
    if cats:
        png = ctx.figures.draw(context_effect, [c["category"] for c in cats], [c["share_safe_contexts"] for c in cats],
                               [c["share_unsafe_contexts"] for c in cats], [c["significant"] for c in cats])
        parts.append("<h3>Context effect by category</h3>")
        parts.append(_figure(png, "share of safe votes by context kind and category",
                             "Per category, the share of annotators voting safe when the context was written to be "
                             "safe (green) and unsafe (orange). * : significant after Benjamini–Hochberg "
                             "(Wilcoxon signed-rank over the category's queries)."))
    stab = st["stability"]
    if stab:
        png = ctx.figures.draw(stability_curve, [r["k"] for r in stab], [r["agreement"] for r in stab],
                               [r["exact"] for r in stab])
        ss = st["stability_settings"]
        parts.append("<h3>How many annotators are enough</h3>")
        parts.append(_figure(png, "annotator stability curve",
                             f"How often the majority of k randomly chosen annotators equals the majority of the whole "
                             f"panel ({ss['draws']} draws per case and k; {ss['cases_excluded_ties']} cases whose full "
                             "panel ties are left out). Few annotators give unstable labels."))
    return "".join(parts)


# --------------------------------------------------------------------------------------------
# The page


#: how many context-blind queries the report lists per input
BLIND_LIMIT = 12


def _input_people(it: Any) -> Mapping[str, Any] | None:
    """People's references on the pairs this input answered (``stats.context.people_references``),
    as its scoring result carries them; None without pairs."""
    pairs: Mapping[str, Any] | None = it.figures.people.pairs
    return pairs


def _direction_order(items: Sequence[Any]) -> list[Any]:
    """Inputs grouped by mode (in order of first appearance) and ranked by direction *within*
    each mode (best first, undefined last; ties keep their order). Direction depends on how
    finely a mode outputs (a verdict moves only where its label flips: Llama-3-70B 0.80 as
    verdicts, 0.95 as P(safe), with the same concordance), so it is never ranked across modes;
    across modes the section compares follow and blind (labels, which every mode has) and
    concordance (the sign of the moves that happen)."""
    modes: dict[Mode, int] = {}
    for it in items:
        modes.setdefault(it.pred.mode, len(modes))
    return sorted(items, key=lambda it: (modes[it.pred.mode],
                                         -np.nan_to_num(it.score.values.get("context_direction", np.nan), nan=-9.0)))




def _people_context_note(ref: Mapping[str, Any]) -> str:
    """People's references over every pair of the dataset (``context.human_references``) in one
    paragraph: one person and the majority under the label source, the other source beside them,
    and the pairs that differ only by the intent vote's tie-break."""
    src = ref.get("label_source", "published")
    op, mj, pd = ref["one_person"], ref["majority"], ref["people_differ"]
    other = "votes" if src == "published" else "published"
    ob = ref["by_label_source"][other]
    names = {"published": "with the intent vote counted as a 21st vote (the published safe_rate)",
             "votes": "from the votes alone", "posterior": "from the votes alone (labels: the posterior)"}

    def ci(b: dict[str, Any], m: str) -> str:
        c = b["ci"].get(m)
        return f" [{_f(c[0])}, {_f(c[1])}]" if c else ""

    return (f'<p class="reference"><b>People</b> ({ref["cases"]} cases, {ref["context_pairs"]} pairs, '
            f'{names[src]}): <b>one person</b> (a vote drawn at random) shifts by {_f(op["context_shift"])}'
            f'{ci(op, "context_shift")}; <b>people\'s majority label</b> shifts by {_f(mj["context_shift"])} and follows '
            f'the context in {_f(mj["context_follow"])}{ci(mj, "context_follow")} of pairs; its direction is '
            f'{_f(mj["context_direction"])}{ci(mj, "context_direction")}; it moves in {_f(mj.get("context_moved"))}'
            f'{ci(mj, "context_moved")} of pairs and never against people\'s rate (concordance 1 by construction), '
            f'one person in {_f(op.get("context_moved"))}{ci(op, "context_moved")}, concordant '
            f'{_f(op.get("context_concordance"))}{ci(op, "context_concordance")}. {names[other].capitalize()}: one person '
            f'{_f(ob["one_person"]["context_shift"])}, majority follow {_f(ob["majority"]["context_follow"])}. '
            f'People label the two contexts differently in {pd["with_intent_vote"]} pairs with the intent vote and '
            f'{pd["votes_alone"]} from the votes alone ({pd["intent_tie_break"]} only because the intent vote broke a '
            f'10–10 tie); <b>blind</b> counts the {pd["counted"]}. One annotator agrees with another on '
            f'{_f(ref["annotator_agreement"])} of votes, the majority with {_f(ref["oracle_vote_agreement"])}; BCE '
            f'floor {_f(ref["bce_floor"])} nats.</p>')


def _context(ctx: "ReportContext") -> str:
    """Does each judge move with context like people do (``stats.context``), each figure beside
    people's on the judge's own footing: the scale-free direction and the label-based follow and
    blind rates (ranked, comparable across modes), the shift drawn per mode beside one person's
    and people's majority's on the judge's own pairs, per-pair shifts against people's, and the
    queries on which it is context-blind although people are not."""
    from .plots import context_direction_dots, context_shift_by_mode, shift_scatter

    inputs = list(ctx.inputs) + list(ctx.references)
    show_text = ctx.show_text
    head = ""
    shown = _direction_order([it for it in inputs if "context_pairs" in it.score.values])
    own = [it for it in shown if not it.reference]
    if not shown:
        return head + '<p class="note">No input holds both contexts of any query, so there is no pair to compare.</p>'
    # people's references over the whole dataset: those of the first group holding one of the report's own inputs
    own_ids = {id(it) for it in own}
    own_pos = {k for k, it in enumerate(ctx.inputs) if id(it) in own_ids}
    ref = next((r for members, r in ctx.overview.people if own_pos & set(members)), None)
    nan2 = [float("nan")] * 2
    parts = [head]
    method = ('<p class="note">Every query of CASE-Bench comes with two contexts, one written to make answering '
             "safe and one to make it unsafe. A <em>pair</em> is the two cases of one query, both answered. "
             "<b>Does the judge move where people move?</b> <b>Direction</b>: among the pairs where people's vote "
             "share moves, the share the judge moves the same way minus the share it moves the other way "
             "(scale-free: any monotone rescaling of P(safe) leaves it unchanged; a verdict moves only where its "
             "label flips). <b>Follow</b>: share of pairs labelled safe in the safe context and unsafe in the other; "
             "<b>blind</b>: among pairs people label differently, the share the judge labels alike (both read labels, "
             "so they mean the same in every mode). <b>How far does it move on its own scale?</b> <b>Shift</b>: mean "
             "over pairs of P(safe) in the safe context minus in the unsafe one (binary: the verdict as 1/0; score: "
             "(s − 0.5)/10; respond: answered as 1/0). It depends on the mode (a binary judge moves in whole "
             "labels, a P(safe) judge by how extreme its probabilities are), so it is set beside people's on the "
             "same footing, never ranked across modes: <b>one person</b> (a vote drawn at random, the expectation of a "
             "0/1 vote: the scale of a P(safe)) and <b>people's majority label</b> (the scale of a verdict), each over "
             "the pairs that judge answered. <b>Moved</b>: share of pairs where the judge's value differs between "
             "the two contexts (output resolution: a P(safe) nearly always moves, a verdict only where its label "
             "flips); <b>concordance</b>: over the pairs that move, (with people − against) / (with + against). "
             "Direction is about moved × concordance, so it depends on how finely a mode outputs: inputs are "
             "ranked by direction <em>within each mode</em> only; across modes compare concordance, follow and "
             "blind. CIs: Wilson for shares of pairs (follow, "
             "blind, the majority's follow), percentile bootstrap over pairs otherwise. Same figures: <code>casebench "
             "score</code>; people's: <code>casebench human DATA</code>.</p>")
    if ref is not None and "one_person" in ref:
        parts.append(_people_context_note(ref))
        if len(ctx.overview.people) > 1:
            parts.append('<p class="note">The inputs come from more than one set of cases; the people\'s paragraph is '
                         "that of the first; each row's references are on its own pairs.</p>")
    maj = ref["majority"] if ref is not None and "majority" in ref else {}
    png = ctx.figures.draw(
        context_direction_dots,
        [it.name for it in shown], [it.score.values.get("context_direction", float("nan")) for it in shown],
        [it.score.ci.get("context_direction", nan2) for it in shown],
        [it.score.values.get("context_follow", float("nan")) for it in shown],
        [it.score.values.get("context_blind", float("nan")) for it in shown],
        maj.get("context_direction"), maj.get("context_follow"), [it.reference for it in shown],
        level=ctx.options.level)
    parts.append(_figure(png, "context direction per input beside people's majority",
                         f"Left: each input's direction with its {_lv(ctx.options)} CI, ranked within its mode; the dotted line is what a labeller "
                         "giving people's majority label reaches. Right: how often each input's labels follow the "
                         "context, and how often they are blind (same label in both contexts) where people's labels "
                         "differ; dotted: how often people's majority follows."))
    groups: dict[Any, list[Any]] = {}
    for it in shown:
        groups.setdefault(it.pred.mode, []).append(it)
    panels_by_mode = []
    for mode, its in groups.items():
        pp = [_input_people(it) or {} for it in its]
        panels_by_mode.append({
            "title": f"{mode} ({mode.scale})",
            "names": [it.name for it in its],
            "shift": [it.score.values.get("context_shift", float("nan")) for it in its],
            "ci": [it.score.ci.get("context_shift", nan2) for it in its],
            "one_person": [p.get("one_person", {}).get("context_shift", float("nan")) for p in pp],
            "majority": [p.get("majority", {}).get("context_shift", float("nan")) for p in pp],
            "reference": [it.reference for it in its]})
    parts.append(_figure(ctx.figures.draw(context_shift_by_mode, panels_by_mode), "context shift per mode beside people's",
                         f"The shift of each input (dot, {_lv(ctx.options)} CI), one panel per mode, with people's two references on "
                         "the pairs that input answered: grey, one person (the vote share); black, people's majority "
                         "label. A binary judge's verdicts are on the majority's scale, a P(safe) judge's on one "
                         "person's; a shift between the two marks moves more than one typical person and less than "
                         "people's majority."))

    def cell(m: str, v: Any, ci: Any) -> str:
        extra = f'<span class="ci">[{_fm(m, ci[0])}, {_fm(m, ci[1])}]</span>' if ci else ""
        return f"<td>{_fm(m, v)}{extra}</td>"

    rows = []
    for it in shown:
        v, c = it.score.values, it.score.ci
        pair_people = _input_people(it) or {}
        op, mj = pair_people.get("one_person", {}), pair_people.get("majority", {})
        cells = [f'<td class="l">{_e(it.name)}</td>', f"<td>{_fm('context_pairs', v.get('context_pairs'))}</td>",
                 cell("context_direction", v.get("context_direction"), c.get("context_direction")),
                 cell("context_moved", v.get("context_moved"), c.get("context_moved")),
                 cell("context_concordance", v.get("context_concordance"), c.get("context_concordance")),
                 cell("context_shift", v.get("context_shift"), c.get("context_shift")),
                 cell("context_shift", op.get("context_shift"), op.get("ci", {}).get("context_shift")),
                 cell("context_shift", mj.get("context_shift"), mj.get("ci", {}).get("context_shift")),
                 cell("context_follow", v.get("context_follow"), c.get("context_follow")),
                 cell("context_follow", mj.get("context_follow"), mj.get("ci", {}).get("context_follow")),
                 cell("context_blind", v.get("context_blind"), c.get("context_blind")),
                 cell("shift_pcc", v.get("shift_pcc"), c.get("shift_pcc"))]
        rows.append("<tr>" + "".join(cells) + "</tr>")
    head_cells = ["Input", "Pairs", "Direction", "Moved", "Concordance", "Shift", "Shift, one person", "Shift, majority", "Follow",
                  "Follow, majority", "Blind", "Shift r"]
    parts.append('<div class="wide"><table class="context"><thead><tr>'
                 + "".join(f'<th class="{"l" if h == "Input" else ""}">{_e(h)}</th>' for h in head_cells)
                 + "</tr></thead><tbody>" + "".join(rows) + "</tbody></table></div>"
                 '<p class="note">Grouped by mode, ranked by direction within a mode. People\'s columns are on each input\'s own pairs (an input '
                 "that left answers out is compared on the pairs it answered). <b>Shift r</b>: Pearson r between the "
                 "judge's and people's per-pair shifts (it depends on the scale too).</p>")
    ms = ("vote_agreement", "accuracy_contested", "accuracy_clear")
    rows = []
    for it in shown:
        rows.append(f'<tr><td class="l">{_e(it.name)}</td>'
                    + "".join(cell(m, it.score.values.get(m), it.score.ci.get(m)) for m in ms) + "</tr>")
    if ref is not None:
        rows.append(f'<tr class="reference"><td class="l"><b>People</b></td><td>{_f(ref["annotator_agreement"])}'
                    f'<span class="ci">ceiling {_f(ref["oracle_vote_agreement"])}</span></td><td>–</td><td>–</td></tr>')
    parts.append('<div class="wide"><table class="context-votes"><thead><tr><th class="l">Input</th>'
                 + "".join(f"<th>{_e(METRIC[m].heading)}</th>" for m in ms) + "</tr></thead><tbody>" + "".join(rows)
                 + "</tbody></table></div>"
                 '<p class="note">Vote agreement: mean share of a case\'s individual votes equal to the judge\'s '
                 "label (people's row: one annotator with another; ceiling: the majority label). Accuracy is split "
                 "into contested cases (0.3 ≤ h ≤ 0.7, people split) and clear ones.</p>")
    if not any(it.reference for it in shown):
        parts.append('<p class="note">To see the authors\' published models here for reference, run '
                     "<code>casebench data fetch</code> (it caches them; <code>report</code> then shows them) or "
                     "pass <code>--reference DIR</code>.</p>")
    panels, blind_parts = [], []
    drawn, left_out = _best(own, PLOT_MAX_INPUTS)  # one panel and one list per input: the best few
    for it in drawn:
        t = it.figures.pairs
        if t is None:
            continue
        panels.append({"name": it.name, "human": t["human_shift"], "model": t["shift"],
                       "r": it.score.values.get("shift_pcc"), "binary": not it.pred.is_continuous})
        cases, g = it.figures.scored_cases, it.figures.g
        blind = np.flatnonzero(t["blind_vs_people"])
        if not len(blind):
            continue
        # the largest human shifts first: where people moved most and the judge not at all
        order = blind[np.argsort(-np.abs(t["human_shift"][blind]), kind="stable")][:BLIND_LIMIT]
        items = []
        for k in order:
            cs, cu = cases[int(t["safe"][k])], cases[int(t["unsafe"][k])]
            lab = "safe" if t["label_safe"][k] else "unsafe"
            text = ""
            if show_text:
                q = cs.query if len(cs.query) <= 140 else cs.query[:139] + "…"
                text = f" “{_e(q)}”"
            items.append(f"<li>cases {cs.index} / {cu.index} ({_e(cs.category)}):{text} people "
                         f"{_f(g[int(t['safe'][k])], 2)} vs {_f(g[int(t['unsafe'][k])], 2)} safe; judge: {lab} "
                         "in both</li>")
        blind_parts.append(f"<h4>{_e(it.name)}: {len(blind)} queries</h4><ul class=\"blind\">{''.join(items)}</ul>"
                           + (f'<p class="note">… and {len(blind) - len(order)} more.</p>'
                              if len(blind) > len(order) else ""))
    if panels:
        parts.append("<h3>Per query: the judge's shift against people's</h3>")
        parts.append(_figure(ctx.figures.draw(shift_scatter, panels), "per-pair shift of each judge against people's",
                             "Each dot is a query pair: x = people's shift (safe-context minus unsafe-context safe "
                             "rate), y = the judge's. A judge that moves where people move lies along the dashed "
                             "diagonal; r is the shift r of the table." + _left_out_note(left_out)))
    if blind_parts:
        parts.append("<h3>Where the judge is context-blind and people are not</h3>"
                     '<p class="note">Queries whose two contexts people label differently but the judge labels '
                     f"alike, the largest human shifts first (at most {BLIND_LIMIT} per input)"
                     + ("" if show_text else "; query text hidden") + ".</p>" + "".join(blind_parts))
    parts.append(_details("How to read this section", method))
    return "".join(parts)


