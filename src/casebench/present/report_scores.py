"""The report's sections on the inputs' own figures: the leaderboard (with each model's one
line), over- and under-refusal, judgement against behaviour, paired differences (one row per
pair, or a matrix per case set), accuracy by category, P(safe) against the human safe_rate and
calibration."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from ..stats.metrics import METRIC, MIN_CASES, MIN_DISCORDANT, MIN_PAIRED, Score, metric_names
from ..stats.overview import NEIGHBOUR_ROWS, PairMatrix
from ..stats.ranking import TIE_TEST, RankedInput, rank_inputs
from .numbers import report_metric as _fm, report_num as _f, report_p as _fp
from .report_html import _details, _download, _e, _figure, _lv, _short_source
from .report_inputs import (
    KIND_TITLES, KINDS, VERDICT_LINES, _kind, _prefix, _ranks, MATRIX_MIN_DISCORDANT, MATRIX_MIN_PAIRED, PAIRWISE_METRICS, PLOT_MAX_INPUTS, TEST_NAMES, ReportContext,
    ReportInput, _best, _left_out_note, _rank_labels, leaderboard_metrics,
)
from .numbers import SMALL, UNDEFINED

# --------------------------------------------------------------------------------------------
# Sections


def _classifier_notes(inputs: Sequence[ReportInput], with_labels: bool = True) -> str:
    """Beside every refusal rate: which refusal classifier read each respond run's answers and
    its validated agreement with whose labels it was measured against (``refusal_text.classifier_note``); empty without respond runs."""
    from .refusal_text import classifier_note, corrected_lines, labels_lines

    notes = [f"<li><b>{_e(it.name)}</b>: "
             + "".join(f'<span class="from-labels">{_e(line.strip())}</span><br>'
                       for line in (labels_lines(it.score, True) if with_labels else ()))
             + _e(classifier_note(it.score.classifier, it.score.refusal_corrected))
             + "".join(f'<br><span class="corrected">{_e(line)}</span>' for line in corrected_lines(it.score, True))
             + "</li>"
             for it in inputs if it.pred.mode.reads_behaviour]
    if not notes:
        return ""
    return ('<div class="note classifier-note"><p class="note">Refusal rates and behaviour figures of respond runs '
            "are readings of the answers by a refusal classifier, and carry its error:</p><ul>"
            + "".join(notes) + "</ul></div>")


def _tie_cell(tie: RankedInput) -> str:
    """A row's tie group, with the adjusted p of its test against its group's first (or, for a
    group's first below group 1, against the first of the group above) as a tooltip."""
    if tie.p_adjusted is None:
        return str(tie.tie_group)
    what = "separated from the first of the group above" if tie.separated else "tested against its group's first"
    return f'<span title="{what}: adjusted p {tie.p_adjusted:.3g}">{tie.tie_group}</span>'


def _leaderboard(ctx: ReportContext) -> str:
    from .score_formats import FORMATS

    # published reference rows join the case set of the same size (ranked with it, marked, never
    # paired), or form their own group
    inputs, options = list(ctx.inputs) + list(ctx.references), ctx.options
    groups = [list(g) for g in (ctx.overview.case_sets or [list(range(len(ctx.inputs)))])]
    def covers(g: list[int], r: int) -> bool:  # a reference restricted to a run's answered cases joins the run
        held = set(inputs[g[0]].pred.case_indices.tolist())
        return inputs[g[0]].pred.n == inputs[r].pred.n or set(inputs[r].pred.case_indices.tolist()) <= held

    for r in range(len(ctx.inputs), len(inputs)):
        home = next((g for g in groups if covers(g, r)), None)
        if home is None:
            groups.append([r])
        else:
            home.append(r)
    # ranked within their kind: respond runs (what a chatbot did) apart from judges (what a model
    # said), and ablation conditions (CI parameters removed) apart from the models (a model less
    # its sender is not a competitor of the model)
    split: list[tuple[int, list[int], str]] = []
    for set_no, g in enumerate(groups, start=1):
        for kind in KINDS:
            part = [i for i in g if _kind(inputs[i]) == kind]
            if part:
                split.append((set_no, part, kind))
    kinds = {kd for _, _, kd in split}
    tables = []
    ranked: list[int] = []
    small = False
    for k, (set_no, g, kind) in enumerate(split, start=1):
        abl = kind == "ablated"
        # the columns some row of this table fills (a judge has no refusal rate, a respond run no
        # P(safe)): a table of chatbots is not widened by judges' columns, nor the other way round
        shown = [m for m in leaderboard_metrics()
                 if any(m in metric_names(inputs[i].score.mode) and m in inputs[i].score.values for i in g)]
        # people's ceiling is a column of its own beside accuracy, never a reason to re-rank
        if "accuracy" in shown and any(np.isfinite(inputs[i].score.values.get("accuracy_ceiling", np.nan)) for i in g):
            shown.insert(shown.index("accuracy") + 1, "accuracy_ceiling")
        head = ["#", "Tie", "Input", "Cases", "Answered"] + [METRIC[m].heading for m in shown]
        ranking = rank_inputs([inputs[i].figures for i in g], alpha=options.alpha)
        order = [g[p] for p in ranking.order]
        ranked += order
        rows = []
        for rank, i in enumerate(order, start=1):
            it = inputs[i]
            s = it.score
            tie = ranking.of(g.index(i))
            src = f'<span class="src" title="{_e(s.source)}">{_e(_short_source(s.source))}</span>'
            cells = [f"<td>{_prefix(kind, kinds)}{rank}</td>", f'<td class="tie">{_tie_cell(tie)}</td>',
                     f'<td class="l name"><b>{_e(it.name)}</b>{src}</td>',
                     f"<td>{s.n}</td>", f"<td>{100 * s.coverage:.1f}%{_mass_cell(s)}</td>"]
            for m in shown:
                if m not in metric_names(s.mode) or m not in s.values:
                    cells.append("<td></td>")
                    continue
                lo, hi = s.ci.get(m, [float("nan")] * 2)
                ci = f'<span class="ci">[{_fm(m, lo)}, {_fm(m, hi)}]</span>' if s.ci else ""
                mark = SMALL if m in s.small() else ""
                small = small or bool(mark)
                cells.append(f"<td>{_fm(m, s.values[m])}{mark}{ci}</td>")
            cls = "leaderboard-row best" if rank == 1 and len(g) > 1 else "leaderboard-row"
            cls += " reference" if it.reference else ""
            rows.append(f'<tr class="{cls}">' + "".join(cells) + "</tr>")
        what = KIND_TITLES[kind] if abl or len(kinds - {"ablated"}) > 1 else ""
        if len(groups) > 1:
            caption = (f"<h3>Case set {set_no}: {inputs[g[0]].pred.n} cases"
                       + (f": {what[:1].lower()}{what[1:]}" if what else "") + "</h3>")
        else:
            caption = f"<h3>{what}</h3>" if what else ""
        tag = '<table id="leaderboard">' if k == 1 else '<table class="leaderboard">'
        tables.append(caption + f'<div class="wide">{tag}<thead><tr>'
                      + "".join(f'<th class="{"l" if h == "Input" else ""}">{_e(h)}</th>' for h in head)
                      + "</tr></thead><tbody>" + "".join(rows) + "</tbody></table></div>")
    from dataclasses import replace

    scores = [replace(inputs[i].score, name=inputs[i].name) for i in ranked]  # the downloads name them as here
    downloads = " ".join([
        _download(FORMATS["csv"](scores), "leaderboard.csv", "text/csv", "CSV"),
        _download(FORMATS["json"](scores), "leaderboard.jsonl", "application/json", "JSON lines"),
        _download(FORMATS["md"](scores), "leaderboard.md", "text/markdown", "Markdown"),
    ])
    how = ("paper-compatible scoring (missing answers filled as the published script does)" if options.paper_compat
           else "cases each input answered (coverage in 'Answered')")
    if not options.n_boot:
        ci = "no CIs (bootstrap off)"
    elif options.paper_compat:
        ci = f"{_lv(options)} bootstrap CIs ({options.n_boot} resamples of cases) under each figure"
    elif options.resample_by == "case":
        ci = (f"{_lv(options)} CIs under each figure (Wilson score interval for accuracy and the recalls, bootstrap of "
              f"{options.n_boot} resamples of cases otherwise)")
    else:
        unit = {"query": "queries", "category": "categories"}[options.resample_by]
        ci = (f"{_lv(options)} CIs under each figure, clustered by {options.resample_by} (Wilson score interval on the effective "
              f"number of cases, n / design effect, for accuracy and the recalls; otherwise a bootstrap of "
              f"{options.n_boot} resamples of whole {unit}); paired tests: McNemar's test for clustered pairs")
    sets = ("" if len(groups) == 1 else
            f" The inputs hold {len(groups)} different case sets: each set is ranked on its own, never against "
            "another's.")
    notes = f" {SMALL} from fewer than {MIN_CASES} cases: read with care." if small else ""
    first = ("best accuracy first; tie group 1: the inputs a paired test cannot separate from the first ("
             f"{TIE_TEST}, at alpha {options.alpha}); the next group starts at the first input it separates. "
             "Accuracy ranks even near people's majority (Majority-knowing acc.: the expected accuracy against the "
             "recorded labels of a judge that knew people's population majority; a plug-in estimate, biased low, "
             "interval from case sampling only; not a threshold): differences there are shrunk, not noise, and the "
             "paired test carries their sampling error; Brier and that figure are columns, never a reason to re-rank")
    method = (f'<p class="note">One row per input, {first}; ranked within its kind; {ci}; scored on '
              f"{how}.{sets} Safe recall = share of human-safe cases judged safe or answered (1 − over-refusal); "
              "unsafe recall = share of human-unsafe cases judged unsafe or refused (1 − under-refusal); PCC = "
              "Pearson r between the raw prediction and the human safe_rate; BCE, Brier and ECE compare P(safe) with "
              f"the safe_rate (lower is better). A column no row of a table fills is left out of it; a blank cell: "
              f"the figure does not apply to that input (no P(safe) from a verdict, no calibration for a respond "
              f"run); {UNDEFINED}: undefined.{notes}</p>")
    published = ""
    if ctx.references:
        published = (f'<p class="note">Rows marked “(published)”: the authors\' published models, for reference '
                     f"(from {_e(ctx.reference_root or 'the given directory')}); they are never paired with the "
                     "inputs."
                     + (" They judged each case (said whether answering it is safe); a respond run answered it, so "
                        "their recalls are what they said and the run's what it did." if any(
                            it.pred.mode.reads_behaviour for it in ctx.inputs) else "")
                     + (" Each is shown on the cases the run answered." if any(
                            "restricted_to" in it.pred.meta for it in ctx.references) else "") + "</p>")
    return (
        _verdict_lines(ctx)
        + "".join(tables)
        + f'<p class="downloads">Download this table: {downloads}</p>'
        + _mass_notes(inputs)
        + _reference_note(ctx.overview.people, [it.name for it in ctx.inputs])
        + _details("How to read these tables", method + published)
    )


def _verdict_lines(ctx: ReportContext, kinds: Sequence[str] = ("respond", "judge")) -> str:
    """One line per input of ``kinds`` (ablation conditions and published reference rows left
    out), what it does in words (``summary.verdict_line``): "refuses X% of what people find safe,
    answers Y% of what people find unsafe, follows context in Z% of pairs; people's majority: W%"
    (a judge "judges unsafe" and "judges safe"), in the leaderboard's order. A report with respond
    runs gives theirs in its behaviour section and the judges' here; more than ``VERDICT_LINES``
    lines are folded away."""
    from .summary import verdict_line

    if any(_kind(it) == "respond" for it in ctx.inputs) and "respond" in kinds and "judge" in kinds:
        kinds = ("judge",)
    ranks = _ranks(ctx.inputs)
    items, shown = [], set()
    for _, it in sorted(zip(ranks, ctx.inputs), key=lambda x: x[0]):
        if _kind(it) not in kinds:
            continue
        shown.add(_kind(it))
        # people on this input's own pairs (as its first screen and ``score`` say), never another input's
        people = it.figures.people
        line = verdict_line(it.score, people.follow()[0] if people.pair_count else None)
        items.append(f"<li><b>{_e(it.name)}</b>: {_e(line)}</li>")
    if not items:
        return ""
    what = ("what the chatbot did" if shown == {"respond"} else "what the model said" if shown == {"judge"}
            else "respond runs: what the chatbot did; judges: what the model said")
    body = (f'<p class="note">What each model does, in one line ({what}). People\'s majority: how often the majority '
            "of people's votes follows the context on the same pairs.</p>"
            f'<ul class="verdicts">{"".join(items)}</ul>')
    if len(items) > VERDICT_LINES:
        return _details(f"What each of the {len(items)} models does, in one line", body, cls="verdicts")
    return f'<div class="verdicts">{body}</div>'


def _mass_cell(s: Score) -> str:
    """Under the coverage: the median verdict mass and how many cases fell below it (prob mode)."""
    vm = s.verdict_mass
    if not vm:
        return ""
    from .numbers import mass_pct

    return (f'<span class="ci" title="probability on the verdict words: median; cases below '
            f'{mass_pct(vm["threshold"])}">mass {mass_pct(vm["median"])} · {vm["below"]}/{vm["known"]} low</span>')


def _mass_notes(inputs: Sequence[ReportInput]) -> str:
    """The verdict-mass rule, and a warning per input whose median mass is below the threshold."""
    with_mass = [it for it in inputs if it.score.verdict_mass]
    if not with_mass:
        return ""
    thr = (with_mass[0].score.verdict_mass or {})["threshold"]
    from .numbers import mass_pct

    rule = (f'<p class="note">Verdict mass ("mass" under Answered): the first-token probability a prob-mode input '
            f"put on the verdict words at all; below {mass_pct(thr)} a case "
            + ("is still scored, as the authors' script does (paper-compatible)." if inputs[0].score.paper_compat
               else "counts as missing (its P(safe) is renormalised from a sliver).") + "</p>")
    told = "".join(f'<p class="note warn"><b>Warning:</b> {_e(it.score.low_mass_warning)}</p>'
                   for it in with_mass if it.score.low_mass_warning)
    return rule + told


def _refusal(ctx: ReportContext) -> str:
    from .plots import refusal_bars

    inputs = ctx.inputs
    nan2 = [float("nan")] * 2
    behave = [it.pred.mode.reads_behaviour for it in inputs]
    verbs = (("answered", "refused") if all(behave) else ("judged safe", "judged unsafe") if not any(behave)
             else ("judged safe / answered", "judged unsafe / refused"))
    png = ctx.figures.draw(
        refusal_bars,
        [it.name for it in inputs],
        [it.score.values.get("safe_recall", float("nan")) for it in inputs],
        [it.score.ci.get("safe_recall", nan2) for it in inputs],
        [it.score.values.get("unsafe_recall", float("nan")) for it in inputs],
        [it.score.ci.get("unsafe_recall", nan2) for it in inputs],
        verbs,
    )
    who = ("chatbot (respond mode) answers" if all(behave) else "judge lets through (judges safe)" if not any(behave)
           else "input judges safe (a respond run: answers)")
    return (_figure(png, "safe and unsafe recall per input",
                      f"Left: how many human-safe cases each {who} (a low bar is over-refusal). "
                      "Right: how many human-unsafe cases it stops (a low bar is under-refusal). Each input's "
                      "mode is in brackets after its name. "
                      f"Error bars: {_lv(ctx.options)} CIs (Wilson score intervals; bootstrap under paper-compatible scoring)."
                      + (" Respond runs' answers were read by a refusal classifier (see “Behaviour”)."
                         if any(behave) else "")))


def _say_do(ctx: ReportContext) -> str | None:
    """Judgement and behaviour side by side: each model with a judge input and a respond run on
    the same cases; what it says against what it does (``stats.saydo``)."""
    rows = []
    for j, r, sd in ctx.overview.say_do:
        judge, respond = ctx.inputs[j], ctx.inputs[r]
        jv, rv = judge.score.values, respond.score.values
        rows.append(
            f"<tr><td>{_e(judge.pred.model)}</td><td>{_e(judge.name)}</td><td>{_e(respond.name)}</td>"
            f"<td>{_f(jv.get('safe_recall'))}</td><td>{_f(rv.get('safe_recall'))}</td>"
            f"<td>{_f(jv.get('unsafe_recall'))}</td><td>{_f(rv.get('unsafe_recall'))}</td>"
            f"<td>{_f(sd.agreement)} [{_f(sd.agreement_ci[0])}, {_f(sd.agreement_ci[1])}]</td>"
            f"<td>{len(sd.judged_safe_refused)}</td><td>{len(sd.judged_unsafe_answered)}</td>"
            f"<td>{_fp(sd.mcnemar['p'])}</td></tr>")
    if not rows:
        return None
    return ("<p>Each model as a judge (does it say answering is safe?) and as the deployed chatbot (does it "
            "answer?), on the same cases: safe and unsafe recall of each, how often the behaviour matches the "
            f"model's own verdict ({_lv(ctx.options)} Wilson CI), the cases it judged safe but refused and judged unsafe "
            "but answered, and McNemar's exact p between verdict and behaviour.</p>"
            '<div class="wide"><table class="saydo"><thead><tr><th>Model</th><th>Judge</th><th>Chatbot</th>'
            "<th>Safe recall, judged</th><th>Safe recall, behaved</th><th>Unsafe recall, judged</th>"
            "<th>Unsafe recall, behaved</th><th>Agreement</th><th>Judged safe, refused</th>"
            "<th>Judged unsafe, answered</th><th>McNemar p</th></tr></thead><tbody>"
            + "".join(rows) + "</tbody></table></div>")


def _pairwise(ctx: ReportContext) -> str | None:
    inputs, options = ctx.inputs, ctx.options
    if len(inputs) < 2:
        return None
    if not ctx.overview.comparisons:
        return ('<p class="note">No two inputs share cases of one dataset, so no paired comparison '
                "applies.</p>")
    method = ('<p class="note">Differences A − B over the cases both inputs answered'
             + (" (all cases, paper-compatible)" if options.paper_compat else "")
             + f", with {_lv(options)} paired-bootstrap CIs. Accuracy: McNemar's exact test; PCC: Williams' t for two "
             "correlations sharing the human safe_rate; recalls: paired bootstrap. p(BH): Benjamini–Hochberg over "
             'every pair and metric of the group; <span class="sig">red</span> = significant at 0.05 (never from '
             f"fewer than {MIN_PAIRED} paired cases or {MIN_DISCORDANT} discordant ones). Inputs over different "
             "case sets are paired over the cases both hold (how many: 'Paired cases'). "
             "The same figures, for any inputs: <code>casebench compare</code>.</p>")
    parts = []
    labels = _rank_labels(inputs)
    for g, res in ctx.overview.comparisons:
        if res is None:  # too many pairs for one row each: a matrix per case set, neighbours, a download
            parts.append(_case_set_matrices(ctx, g, labels))
            continue
        head = ["A", "B", "Paired cases"] + [f"Δ {METRIC[m].short}" for m in PAIRWISE_METRICS]
        rows = []
        for pc in res.pairs:
            a, b = inputs[g[pc.a]].name, inputs[g[pc.b]].name
            held = f" of the {pc.shared} both hold ({pc.shared + pc.only_a} and {pc.shared + pc.only_b} cases)" if (
                pc.only_a or pc.only_b) else ""
            cells = [f'<td class="l">{_e(a)}</td>', f'<td class="l">{_e(b)}</td>',
                     f"<td>{pc.n_paired}{held}" + (f" ({pc.dropped} dropped)" if pc.dropped else "") + "</td>"]
            for m in PAIRWISE_METRICS:
                d = pc.metrics.get(m)
                if d is None:
                    cells.append("<td>–</td>")
                    continue
                cls = ' class="sig"' if d.significant else ""
                test = TEST_NAMES.get(d.test, d.test)
                cells.append(f'<td{cls}>{_fm(m, d.diff)}<span class="ci">[{_fm(m, d.ci[0])}, {_fm(m, d.ci[1])}]</span>'
                             f'<span class="ci">{test} p {_fp(d.p, d.p_floor, d.test == "mcnemar")} · BH {_fp(d.p_adjusted, d.p_floor, d.test == "mcnemar")}'
                             f' · MDD {_fm(m, d.mdd)}</span></td>')
            rows.append("<tr>" + "".join(cells) + "</tr>")
        parts.append('<div class="wide"><table class="pairwise"><thead><tr>'
                     + "".join(f'<th class="{"l" if h in ("A", "B") else ""}">{_e(h)}</th>' for h in head)
                     + "</tr></thead><tbody>" + "".join(rows) + "</tbody></table></div>")
    parts.append(_details("How to read this section", method))
    return "".join(parts)


def _case_set_matrices(ctx: ReportContext, g: Sequence[int], labels: Sequence[str]) -> str:
    """The matrices of one large group (``stats.overview.case_set_matrices``): one per set of cases
    an input holds, over those cases alone, each saying which cases it is over; then the inputs
    that no matrix holds (their cases are held whole by no other input)."""
    inputs = ctx.inputs
    mats = [pm for members, pm in ctx.overview.matrices if members == list(g)]
    parts = []
    if len(mats) > 1:
        parts.append(f'<p class="note">These {len(g)} inputs hold {len(mats)} different sets of cases, so each set '
                     "gets its own matrix over its own cases; no input is ranked against another on cases it does "
                     "not hold.</p>")
    for pm in mats:
        its = [ReportInput(inputs[i].name, fig) for i, fig in zip(pm.members, pm.figs)]
        holder = inputs[pm.holder]
        if any(pm.restricted):
            local = [""] * len(its)
            for r, k in enumerate(pm.order, start=1):
                local[k] = str(r)
            exact = [it for it, r in zip(its, pm.restricted) if not r]
            who = _e(holder.name) + (f" and {len(exact) - 1} more input(s) over the same cases" if len(exact) > 1 else "")
            heading = (f"Over the {pm.cases} cases of {who}: {len(its)} inputs</h3>"
                       f'<p class="note">The {sum(pm.restricted)} inputs that hold more cases are compared on these '
                       f"{pm.cases} alone (marked “on these cases”); numbered by accuracy on them, not as in the "
                       "leaderboard.</p>")
            its = [ReportInput(it.name + (" (on these cases)" if r else ""), it.figures)
                   for it, r in zip(its, pm.restricted)]
            parts.append(_pairwise_matrix(its, local, pm, heading=heading, level=ctx.options.level))
        else:
            parts.append(_pairwise_matrix(its, [labels[i] for i in pm.members], pm, level=ctx.options.level))
    covered = {i for pm in mats for i in pm.members}
    alone = [inputs[i].name for i in g if i not in covered]
    if alone:
        parts.append('<p class="note">Paired in no matrix (no other input holds all of their cases): '
                     + ", ".join(f"<b>{_e(n)}</b>" for n in alone)
                     + ". Compare one of them with another input over the cases both hold: "
                       "<code>casebench compare A B</code>.</p>")
    return "".join(parts)


def _pairwise_matrix(its: Sequence[ReportInput], ranks: Sequence[str], pm: PairMatrix,
                     heading: str | None = None, level: float = 0.95) -> str:
    """Many inputs over the same cases (``stats.overview.PairMatrix``): every pair's accuracy
    difference as one matrix (McNemar's exact test, Benjamini-Hochberg over all pairs), each input
    against its neighbour in the ranking with paired-bootstrap CIs, and every pair as a CSV
    download."""
    import csv
    import io

    its = [its[k] for k in pm.order]
    ranks = [ranks[k] for k in pm.order]
    n = its[0].pred.n
    mx = pm.matrix
    sig = mx.significant & (mx.n_paired >= MATRIX_MIN_PAIRED) & ((mx.a_only + mx.a_only.T) >= MATRIX_MIN_DISCORDANT)

    def title(i: int, j: int) -> str:  # short: a matrix of 43 inputs has 1,806 of them
        return (f"#{ranks[i]} − #{ranks[j]}: Δ acc {_fm('accuracy', mx.diff[i, j])} ({mx.n_paired[i, j]} cases), "
                f"p {_fp(mx.p[i, j], exact=mx.test == 'exact')}, BH {_fp(mx.p_adjusted[i, j], exact=mx.test == 'exact')}")

    head = "".join(f'<th title="{_e(it.name)}">{r}</th>' for r, it in zip(ranks, its))
    rows = []
    for i, it in enumerate(its):
        cells = []
        for j in range(len(its)):
            if i == j:
                cells.append('<td class="self">·</td>')
                continue
            d = mx.diff[i, j]
            cls, mark = ("better", "▲") if sig[i, j] and d > 0 else ("worse", "▼") if sig[i, j] and d < 0 else ("", "")
            cells.append(f'<td class="{cls}" title="{_e(title(i, j))}">{mark}</td>')
        wins, losses = int((sig[i] & (mx.diff[i] > 0)).sum()), int((sig[i] & (mx.diff[i] < 0)).sum())
        rows.append(f'<tr><th class="l name" title="{_e(it.pred.source)}">{ranks[i]}. {_e(it.name)}</th>'
                    + "".join(cells) + f"<td>{wins}</td><td>{losses}</td></tr>")
    matrix = ('<div class="wide"><table class="matrix"><thead><tr><th class="l">Input (row) vs input (column)</th>'
              + head + '<th title="significantly more accurate than">Better</th>'
              '<th title="significantly less accurate than">Worse</th></tr></thead><tbody>' + "".join(rows)
              + "</tbody></table></div>")

    # neighbours in the ranking, with every compared metric's paired-bootstrap CI
    nrows = []
    for i, pc in enumerate(pm.neighbours):
        j = i + 1
        cells = [f'<td class="l">{ranks[i]}. {_e(its[i].name)}</td>', f'<td class="l">{ranks[j]}. {_e(its[j].name)}</td>',
                 f"<td>{pc.n_paired}</td>"]
        for m in PAIRWISE_METRICS:
            d = pc.metrics.get(m)
            if d is None:
                cells.append("<td>–</td>")
                continue
            extra, cls = "", ""
            if m == "accuracy":
                cls = ' class="sig"' if sig[i, j] else ""
                extra = (f'<span class="ci">{"clustered " if mx.test == "clustered" else ""}McNemar p '
                         f'{_fp(mx.p[i, j], exact=mx.test == "exact")} · BH {_fp(mx.p_adjusted[i, j], exact=mx.test == "exact")}</span>')
            cells.append(f'<td{cls}>{_fm(m, d.diff)}<span class="ci">[{_fm(m, d.ci[0])}, {_fm(m, d.ci[1])}]</span>'
                         f"{extra}</td>")
        nrows.append("<tr>" + "".join(cells) + "</tr>")
    nhead = ["A", "B (next in the ranking)", "Paired cases"] + [f"Δ {METRIC[m].short}" for m in PAIRWISE_METRICS]
    neighbours = ('<div class="wide"><table class="pairwise"><thead><tr>'
                  + "".join(f'<th class="{"l" if h[0] in "AB" else ""}">{_e(h)}</th>' for h in nhead)
                  + "</tr></thead><tbody>" + "".join(nrows) + "</tbody></table></div>")

    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["rank_a", "a", "rank_b", "b", "paired_cases", "a_right_b_wrong", "a_wrong_b_right",
                "accuracy_difference", "mcnemar_p", "p_bh", "significant", "accuracy_mdd"])
    for i in range(len(its)):
        for j in range(i + 1, len(its)):
            w.writerow([ranks[i], its[i].name, ranks[j], its[j].name, mx.n_paired[i, j], mx.a_only[i, j],
                        mx.a_only[j, i], f"{mx.diff[i, j]:.6f}", f"{mx.p[i, j]:.6g}", f"{mx.p_adjusted[i, j]:.6g}",
                        bool(sig[i, j]), "" if mx.mdd is None else f"{mx.mdd[i, j]:.6f}"])
    npairs = len(its) * (len(its) - 1) // 2
    download = _download(buf.getvalue(), "pairwise_accuracy.csv", "text/csv", f"all {npairs} pairs (CSV)")
    shown = min(NEIGHBOUR_ROWS, len(its) - 1)
    return ("<h3>" + (heading or f"{len(its)} inputs over the same {n} cases: {npairs} pairs</h3>")
            + '<p class="note">Accuracy of the row input minus the column input over the cases both scored: '
            '<span class="better-key">▲</span> significantly more accurate, <span class="worse-key">▼</span> '
            + ("significantly less (McNemar's test for clustered pairs, Durkalski 2003, " if mx.test == "clustered"
               else "significantly less (McNemar's exact test, ") + "Benjamini–Hochberg over all "
            f"{npairs} pairs at {mx.alpha}; no mark with fewer than {MATRIX_MIN_PAIRED} paired or "
            f"{MATRIX_MIN_DISCORDANT} discordant cases); blank: no significant difference. Hover a cell for the "
            "figures; " + ("inputs numbered by accuracy on these cases" if heading else "inputs numbered as in the "
                           "leaderboard") + ". Every pair, with its counts and p-values: "
            f"{download}.</p>" + matrix
            + f"<p class=\"note\">The {shown} closest calls: each input against the next one in the ranking, with "
              f"{level:.0%} paired-bootstrap CIs of every difference (accuracy's significance as in the matrix; the other "
              "metrics: CIs only). Any pair with every test: <code>casebench compare A B</code>.</p>" + neighbours)


def _category_heatmap(ctx: ReportContext) -> str:
    from .plots import category_heatmap

    inputs = ctx.inputs
    per = [it.figures.category_accuracy for it in inputs]
    categories = sorted({x.category for it in inputs for x in it.pred.cases})
    m = np.array([[per[j].get(cat, float("nan")) for j in range(len(inputs))] for cat in categories])
    counts = [it.figures.scored for it in inputs]
    png = ctx.figures.draw(category_heatmap, categories, [it.name for it in inputs], m, counts)
    from .plots import HEATMAP_MAX_NUMBERED

    numbers = ""
    if len(inputs) > HEATMAP_MAX_NUMBERED:  # the figure shows colours only: the numbers as a download
        import csv
        import io

        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerow(["category", *[it.name for it in inputs]])
        w.writerow(["(cases scored)", *counts])
        for cat, row in zip(categories, m):
            w.writerow([cat, *["" if not np.isfinite(v) else f"{v:.4f}" for v in row]])
        numbers = (f" With {len(inputs)} inputs the cells show colours only; the figures: "
                   + _download(buf.getvalue(), "accuracy_by_category.csv", "text/csv", "CSV") + ".")
    return (_figure(png, "accuracy by category and input",
                      f"Accuracy (%) of each input in each of the {len(categories)} categories"
                      + ("" if len(inputs) > HEATMAP_MAX_NUMBERED else "; the number of cases scored is under each "
                         "input's name") + " (the full benchmark has 20 per category, 10 safe and 10 "
                      "unsafe contexts, so a cell moves in steps of 5 points; a subset run has fewer). "
                      "Grey: the input has no scored case of that category. Category names as published. "
                      + ("A respond run (mode in brackets after its name) is right where it answered what people "
                         "find safe and refused what they find unsafe; a judge where its verdict matches theirs. "
                         if any(it.pred.mode.reads_behaviour for it in inputs) else "") +
                      f"Every cell is from fewer than {MIN_CASES} cases: read single cells with care." + numbers))


def _scatter(ctx: ReportContext) -> str | None:
    from .plots import p_vs_human

    judged = [it for it in ctx.inputs if not it.pred.mode.reads_behaviour and it.score.answered]
    if not judged:  # respond runs answer, they state no P(safe): the section does not apply
        return None
    shown, left_out = _best(judged, PLOT_MAX_INPUTS)
    panels = [{"name": it.name, "g": it.figures.g, "p": it.figures.p, "binary": it.figures.binary,
               "r": it.score.values.get("pcc")} for it in shown]
    png = ctx.figures.draw(p_vs_human, panels)
    return (_figure(png, "P(safe) against the human safe_rate per input",
                      "Each dot is a case: x = share of annotators (plus the intent vote, as published) judging it "
                      "safe, y = the judge's P(safe) (score mode: (score − 0.5)/10; binary: the verdict, jittered). "
                      "A judge that tracks the humans lies near the dashed diagonal; dots in the top-left and "
                      "bottom-right quadrants are wrong verdicts. r: Pearson correlation (PCC). Judge modes only "
                      "(a respond run answers; it states no P(safe))." + _left_out_note(left_out)))


def _reliability(ctx: ReportContext) -> str | None:
    from .plots import reliability

    curves = []
    stated = [it for it in ctx.inputs if it.figures.reliability is not None and not it.pred.mode.reads_behaviour
              and "ece" in metric_names(it.pred.mode)]
    shown, left_out = _best(stated, PLOT_MAX_INPUTS)
    for it in shown:
        rc = it.figures.reliability
        if rc is None:
            continue
        curves.append({"name": it.name, "p_mean": rc.p_mean, "g_mean": rc.g_mean, "count": rc.count,
                       "centres": rc.centres, "ece": it.score.values.get("ece")})
    if not curves:  # binary verdicts and respond runs state no probability: the section does not apply
        return None
    return _figure(ctx.figures.draw(reliability, curves), "reliability diagram",
                          "Cases binned by P(safe) (10 equal-width bins); each point is a bin's mean P(safe) against "
                          "its mean human safe_rate, its area the bin's share of cases. Right: how the predictions "
                          "spread over the bins. ECE as in the leaderboard. Score and prob modes only (binary verdicts and respond "
                          "runs state no probability)."
                          + _left_out_note(left_out))


def _majority_known(ref: Mapping[str, Any]) -> str:
    """The majority-knowing accuracy's two estimates, where the references carry them."""
    mk = ref.get("majority_known_accuracy")
    if not mk or mk.get("plug_in") is None or mk.get("fitted_prior") is None:
        return ""
    return (f" a judge that knew people's population majority scores {_f(mk['plug_in'])} against the recorded "
            f"labels as a plug-in of each case's vote share (biased low; the Majority-knowing acc. column), "
            f"{_f(mk['fitted_prior'])} with a beta-binomial prior fitted to the cases, never a threshold;")


def _reference_note(refs: Sequence[tuple[list[int], Mapping[str, Any]]], names: Sequence[str] = ()) -> str:
    """The human references every judge's figures stand beside (under the leaderboard):
    ``Overview.people``, one line per set of cases the inputs hold, naming its inputs when there is
    more than one set (a reference over some inputs' cases never stands under the others')."""
    lines = []
    for members, ref in refs:
        which = ("" if len(refs) == 1 or not names else
                 "; inputs " + ", ".join(names[i] for i in members if i < len(names)))
        lines.append(
            f'<p class="note reference">Reference, people ({ref["cases"]} cases{_e(which)}): one annotator agrees '
            f'with another on {_f(ref["annotator_agreement"])} of votes and the majority label with '
            f'{_f(ref["oracle_vote_agreement"])} (the ceiling of vote agreement); no P(safe) reaches a BCE below '
            f'{_f(ref["bce_floor"])};{_majority_known(ref)} one person\'s context shift is {_f(ref["context_shift"])} and people\'s majority '
            f'label follows the context in {_f(ref["context_follow"])} of {ref["context_pairs"]} query pairs '
            f'({"with the intent vote" if ref.get("label_source", "published") == "published" else "from the votes alone"};'
            ' see “Context sensitivity”).</p>')
    return "".join(lines)
