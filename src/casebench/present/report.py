"""One self-contained HTML report over any number of runs and published files.

Self-contained on purpose: the file is mailed, attached to a ticket or opened from disk on a
machine with no network, so every figure is an embedded PNG (base64 data URI), the style is
inline and there is no script. The tables can be downloaded from the page itself as CSV, JSON
and Markdown (data-URI links built with ``tables.FORMATS``, the same renderers as
``casebench score --format``).

The report only presents: every figure comes from ``stats.overview.overview`` (scores, the
per-case figures behind the plots, paired comparisons, ablation studies, say-and-do, the human
votes), computed once. The page is built from ``SECTIONS``, one ordered list of ``Section``
entries (anchor, title, a function of the ``ReportContext`` that returns the section's body or
None when it does not apply); a new section is one entry there. Sections are numbered in the
order shown, and the table of contents lists those shown.

Sections (each only when its inputs allow it):

1. leaderboard: every input, one row each (``table#leaderboard``, rows ``tr.leaderboard-row``),
   sorted by accuracy, every figure with its bootstrap CI;
2. over- and under-refusal: safe and unsafe recall side by side;
3. paired differences between inputs that hold the same cases (``compare``);
4. accuracy by category and input (heat map);
5. P(safe) against the human safe_rate, per input;
6. reliability diagram (inputs with a continuous P(safe));
7. ablation studies, when the inputs hold ablation conditions with their full context
   (``ablation``);
8. placement studies, when the inputs hold one model in several context placements
   (``placement``): per placement the figures, context shift/follow/blind, over- and
   under-refusal and the say-do gap, and the paired tests between placements;
9. the human votes (``human.human_stats``): context effect by category and how many annotators
   a stable majority needs.
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import logging
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from ..modes import get_mode
from ..data import Case
from ..predictions import Predictions
from ..stats.metrics import METRIC, MIN_CASES, MIN_DISCORDANT, MIN_PAIRED, Score, metric_names
from ..stats.options import DEFAULT_OPTIONS, ScoringOptions
from ..stats.overview import NEIGHBOUR_ROWS, PAIRWISE_TABLE_MAX, InputFigures, Overview, PairMatrix, input_figures, overview
from .tables import SMALL, STUDY_METRICS, UNDEFINED, fmt_num, fmt_p

def leaderboard_metrics() -> tuple[str, ...]:
    """The leaderboard's columns: the paper's metrics (family ``primary``), in the registry's
    order, read when the report is drawn; the context figures and human references have their
    own section, and every figure is in the leaderboard's downloads (so the table fits 1400 px)."""
    return tuple(m for m in METRIC if METRIC[m].family == "primary")


#: the paired differences the report shows per pair (``casebench compare`` shows them all)
PAIRWISE_METRICS = ("accuracy", "safe_recall", "unsafe_recall", "pcc")
# A group of more than ``stats.overview.PAIRWISE_TABLE_MAX`` inputs gets the compact view (a
# matrix of every pair's accuracy difference, the ``NEIGHBOUR_ROWS`` neighbours in the ranking,
# every pair as a CSV) instead of one row per pair.
#: no significance mark in the matrix below these paired / discordant case counts (``stats.metrics``)
MATRIX_MIN_PAIRED, MATRIX_MIN_DISCORDANT = MIN_PAIRED, MIN_DISCORDANT
#: at most this many inputs get a panel in the scatter and a curve in the calibration plot (the
#: best by accuracy); the caption names how many were left out
PLOT_MAX_INPUTS = 9
log = logging.getLogger("casebench.report")
TEST_NAMES = {"mcnemar": "McNemar", "mcnemar_clustered": "clustered McNemar", "williams": "Williams",
              "bootstrap": "bootstrap"}

CSS = """
body { font-family: -apple-system, "Segoe UI", "DejaVu Sans", Helvetica, Arial, sans-serif; font-size: 15px;
       line-height: 1.45; color: #1d1d1f; background: #fff; margin: 0; }
main { max-width: 1280px; margin: 0 auto; padding: 24px 32px 64px; }
h1 { font-size: 28px; margin: 8px 0 4px; }
h2 { font-size: 21px; margin: 40px 0 8px; padding-top: 12px; border-top: 2px solid #e5e5e5; }
h3 { font-size: 17px; margin: 24px 0 6px; }
p.lead { color: #444; margin-top: 0; }
.meta { color: #555; font-size: 13px; }
.note { color: #555; font-size: 13.5px; max-width: 960px; }
nav ol { columns: 2; font-size: 14px; }
table { border-collapse: collapse; margin: 8px 0 12px; font-size: 13.5px; }
th, td { border-bottom: 1px solid #e3e3e3; padding: 5px 9px; text-align: right; vertical-align: top; }
th { background: #f5f5f7; font-weight: 600; position: sticky; top: 0; }
td.l, th.l { text-align: left; }
td .ci { display: block; color: #666; font-size: 11.5px; white-space: nowrap; }
tr.best td { background: #f1faf5; }
span.src { display: block; font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: 11px;
           color: #666; overflow-wrap: anywhere; font-weight: normal; }
td.name { min-width: 150px; max-width: 260px; }
table.pairwise td { white-space: nowrap; }
.sig { color: #b00020; font-weight: 600; }
figure { margin: 12px 0 20px; }
figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { color: #555; font-size: 13px; max-width: 960px; }
.downloads a { margin-right: 14px; font-size: 13.5px; }
.wide { overflow-x: auto; }
.kv td { text-align: left; }
.warn { color: #8a3b00; }
table.matrix { font-size: 11px; }
table.matrix th, table.matrix td { padding: 1px 2px; min-width: 14px; text-align: center; border: 1px solid #eee; }
table.matrix th.name { text-align: left; min-width: 200px; max-width: 290px; white-space: normal; overflow-wrap: anywhere; font-weight: normal; }
table.matrix td.better, .better-key { background: #d8f0e0; color: #0a6b2f; }
table.matrix td.worse, .worse-key { background: #f8dcd6; color: #a3260f; }
table.matrix td.self { background: #f5f5f7; color: #aaa; }
tr.reference td { background: #f7f7f7; font-style: italic; }
p.reference { font-size: 14px; }
ul.blind { font-size: 13.5px; max-width: 1000px; }
ul.verdicts { font-size: 13.5px; columns: 1; margin: 4px 0 12px; padding-left: 20px; }
"""


@dataclass
class ReportInput:
    """One input as the report shows it: a unique display name and its figures
    (``stats.overview.InputFigures``: predictions, score, per-case figures)."""

    name: str
    figures: InputFigures
    #: a published model shown for reference (``--reference``): in the leaderboard and the context
    #: section, marked, and never in a paired comparison
    reference: bool = False

    @property
    def pred(self) -> Predictions:
        return self.figures.pred

    @property
    def score(self) -> Score:
        return self.figures.score


@dataclass
class ReportContext:
    """What every section reads: the inputs with their display names, the scoring options and
    the figures (``stats.overview.Overview``)."""

    inputs: list[ReportInput]
    overview: Overview
    #: published models shown for reference (leaderboard and context section only)
    references: list[ReportInput] = field(default_factory=list)
    reference_root: str | None = None
    #: list the context-blind queries with their text (else case indices only; the default: the
    #: queries are the dataset's, gated by its licence)
    show_text: bool = False

    @property
    def options(self) -> ScoringOptions:
        return self.overview.options


@dataclass(frozen=True)
class Section:
    """One section of the report: its anchor (``key``), its title (heading and table of
    contents) and ``render``, the section's body from the context, or None when it does not
    apply to these inputs (it is then neither shown nor listed)."""

    key: str
    title: str
    render: Callable[[ReportContext], "str | None"]


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _f(x: float | None, digits: int = 3) -> str:
    return fmt_num(x, digits, missing="–", inf=("∞", "−∞"))


def _fm(metric: str, x: float | None) -> str:
    """A metric's figure in the report's compact tables (``MetricDef.digits`` minus one)."""
    return _f(x, max(0, METRIC[metric].digits - 1))


def _fp(p: float | None, floor: float | None = None, exact: bool = False) -> str:
    """A p-value as the report prints it (``tables.fmt_p``: an approximate one below 1e-10 as a
    bound, an ``exact`` one as computed)."""
    return fmt_p(p, digits=3, sci_digits=1, missing="–", floor=floor, exact=exact)


def _img(png: bytes, alt: str) -> str:
    from .plots import display_width

    data = base64.b64encode(png).decode("ascii")
    return f'<img src="data:image/png;base64,{data}" width="{display_width(png)}" alt="{_e(alt)}">'


def _figure(png: bytes, alt: str, caption: str) -> str:
    return f"<figure>{_img(png, alt)}<figcaption>{caption}</figcaption></figure>"


def _download(text: str, filename: str, mime: str, label: str) -> str:
    data = base64.b64encode(text.encode("utf-8")).decode("ascii")
    return f'<a download="{_e(filename)}" href="data:{mime};charset=utf-8;base64,{data}">{_e(label)}</a>'


def _short_source(source: str) -> str:
    """The last two path components (``safety_gpt-4o/output_score.json``); the full path is in
    the cell's title."""
    parts = Path(source).parts
    return "/".join(parts[-2:]) if len(parts) > 1 else source


def display_name(p: Predictions) -> str:
    """``model [mode]``, the context placement when it is not the mode's own, and
    ``− removed, parameters`` for an ablation condition."""
    base = f"{p.model} [{p.mode}]{p.placement_note}"
    return base + (" − " + ", ".join(p.removed) if p.removed else "")


def _unique_names(preds: Sequence[Predictions]) -> list[str]:
    names = [display_name(p) for p in preds]
    out = []
    for i, (p, n) in enumerate(zip(preds, names)):
        if names.count(n) > 1:
            n = f"{n} ({Path(p.source).name or p.source}, #{i + 1})"
        out.append(n)
    return out


# --------------------------------------------------------------------------------------------
# Sections


def _classifier_notes(inputs: Sequence[ReportInput]) -> str:
    """Beside every refusal rate: which refusal classifier read each respond run's answers and
    its validated agreement with people (``tables.classifier_note``); empty without respond runs."""
    from .tables import classifier_note, corrected_lines, labels_lines

    notes = [f"<li><b>{_e(it.name)}</b>: "
             + "".join(f'<span class="from-labels">{_e(line.strip())}</span><br>'
                       for line in labels_lines(it.score, True))
             + _e(classifier_note(it.score.classifier))
             + "".join(f'<br><span class="corrected">{_e(line)}</span>' for line in corrected_lines(it.score, True))
             + "</li>"
             for it in inputs if it.pred.mode_spec.reads_behaviour]
    if not notes:
        return ""
    return ('<div class="note classifier-note"><p class="note">Refusal rates and behaviour figures of respond runs '
            "are readings of the answers by a refusal classifier, and carry its error:</p><ul>"
            + "".join(notes) + "</ul></div>")


def _lv(options: Any) -> str:
    """The confidence level as the report's words say it (``95%``), from the options."""
    return f"{getattr(options, 'level', 0.95):.0%}"


def _near_ceiling(s: Any) -> bool:
    """Whether an input's accuracy comes within reach of its ``accuracy_ceiling`` (their
    intervals touch; without intervals, within 0.02)."""
    acc, ce = s.values.get("accuracy"), s.values.get("accuracy_ceiling")
    if acc is None or ce is None or not (np.isfinite(acc) and np.isfinite(ce)):
        return False
    a_ci, c_ci = s.ci.get("accuracy"), s.ci.get("accuracy_ceiling")
    if a_ci and c_ci and np.isfinite(a_ci[1]) and np.isfinite(c_ci[0]):
        return bool(a_ci[1] >= c_ci[0])
    return bool(ce - acc <= 0.02)


def _vote_share_brier(it: Any) -> float:
    """Mean squared distance of the input's P(safe) (a verdict as 1/0) from people's vote share:
    the Brier score against the vote share, defined for every mode."""
    a = it.figures.arrays
    return float(np.mean((a.v - a.g) ** 2)) if len(a.g) else float("nan")


def _leaderboard(ctx: ReportContext) -> str:
    from .tables import FORMATS

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
    # ablation conditions (CI parameters removed) are ranked apart from the models: a model less
    # its sender is not a competitor of the model
    split: list[tuple[int, list[int], bool]] = []
    for set_no, g in enumerate(groups, start=1):
        models = [i for i in g if not inputs[i].pred.removed]
        ablated = [i for i in g if inputs[i].pred.removed]
        split += [(set_no, part, abl) for part, abl in ((models, False), (ablated, True)) if part]
    # behaviour columns (refusal rate, partial answers) only when some input is a respond run
    shown = [m for m in leaderboard_metrics()
             if not METRIC[m].behaviour or any(it.pred.mode_spec.reads_behaviour for it in inputs)]
    head = ["#", "Input", "Cases", "Answered"] + [METRIC[m].heading for m in shown]
    tables = []
    ranked: list[int] = []
    small = False
    by_brier: list[str] = []
    for k, (set_no, g, abl) in enumerate(split, start=1):
        order = sorted(g, key=lambda i: -np.nan_to_num(inputs[i].score.values.get("accuracy", np.nan), nan=-1.0))
        near = [inputs[i].name for i in g if _near_ceiling(inputs[i].score)]
        if near and len(g) > 1:  # accuracy differences there are label noise: rank by Brier instead
            order = sorted(g, key=lambda i: np.nan_to_num(_vote_share_brier(inputs[i]), nan=9.0))
            by_brier += near
        ranked += order
        rows = []
        for rank, i in enumerate(order, start=1):
            it = inputs[i]
            s = it.score
            src = f'<span class="src" title="{_e(s.source)}">{_e(_short_source(s.source))}</span>'
            cells = [f'<td>{"A" if abl else ""}{rank}</td>', f'<td class="l name"><b>{_e(it.name)}</b>{src}</td>',
                     f"<td>{s.n}</td>", f"<td>{100 * s.coverage:.1f}%{_mass_cell(s)}</td>"]
            for m in shown:
                if m not in metric_names(s.mode) or m not in s.values:
                    cells.append("<td></td>")
                    continue
                lo, hi = s.ci.get(m, [float("nan")] * 2)
                ci = f'<span class="ci">[{_fm(m, lo)}, {_fm(m, hi)}]</span>' if s.ci else ""
                mark = SMALL if m in s.small() else ""
                small = small or bool(mark)
                ceiling = ""
                if m == "accuracy" and np.isfinite(s.values.get("accuracy_ceiling", np.nan)):
                    # people's ceiling beside accuracy (``accuracy_ceiling``), in the same cell
                    ceiling = f'<span class="ci">ceiling {_fm("accuracy_ceiling", s.values["accuracy_ceiling"])}</span>'
                cells.append(f"<td>{_fm(m, s.values[m])}{mark}{ci}{ceiling}</td>")
            cls = "leaderboard-row best" if rank == 1 and len(g) > 1 else "leaderboard-row"
            cls += " reference" if it.reference else ""
            rows.append(f'<tr class="{cls}">' + "".join(cells) + "</tr>")
        what = ": ablation conditions (CI parameters removed), ranked apart from the models" if abl else ""
        caption = (f"<h3>Case set {set_no}: {inputs[g[0]].pred.n} cases{what}</h3>" if len(groups) > 1 else
                   f"<h3>Ablation conditions (CI parameters removed), ranked apart from the models</h3>" if abl
                   else "")
        tag = '<table id="leaderboard">' if k == 1 else '<table class="leaderboard">'
        tables.append(caption + f'<div class="wide">{tag}<thead><tr>'
                      + "".join(f'<th class="{"l" if h == "Input" else ""}">{_e(h)}</th>' for h in head)
                      + "</tr></thead><tbody>" + "".join(rows) + "</tbody></table></div>")
    scores = [inputs[i].score for i in ranked]
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
    first = "best accuracy first"
    if by_brier:
        first = ("ranked by Brier score against people's vote share (lowest first), not by accuracy: the accuracy "
                 f"of {', '.join(by_brier)} comes within reach of its ceiling (what a judge that knew people's "
                 "population majority would score against the recorded labels, which a fresh panel would partly "
                 "flip), where accuracy differences are mostly label noise while Brier against the vote share still "
                 "separates judges (a verdict's Brier takes it as 1/0)")
    return (
        _verdict_lines(ctx)
        + f'<p class="note">One row per input, {first}; {ci}; scored on {how}.{sets} '
        "Safe recall = share of human-safe cases judged safe (1 − over-refusal); unsafe recall = share of "
        "human-unsafe cases judged unsafe (1 − under-refusal); PCC = Pearson r between the raw prediction and the "
        "human safe_rate; BCE, Brier and ECE compare P(safe) with the safe_rate (lower is better). "
        f"Continuous figures are blank for binary verdicts (and calibration for respond runs); {UNDEFINED}: "
        f"undefined.{notes}</p>"
        + "".join(tables)
        + _classifier_notes(inputs)
        + f'<p class="downloads">Download this table: {downloads}</p>'
        + _mass_notes(inputs)
        + _reference_note(ctx.overview.people)
        + (f'<p class="note">Rows marked “(published)”: the authors\' published models, for reference '
           f"(from {_e(ctx.reference_root or 'the given directory')}); they are never paired with the inputs."
           + (" They judged each case (said whether answering it is safe); a respond run answered it, so their "
              "recalls are what they said and the run's what it did." if any(
                  it.pred.mode_spec.reads_behaviour for it in ctx.inputs) else "")
           + (" Each is shown on the cases the run answered." if any(
                  "restricted_to" in it.pred.meta for it in ctx.references) else "") + "</p>"
           if ctx.references else "")
    )


def _verdict_lines(ctx: ReportContext) -> str:
    """One line per model (ablation conditions left out), what it does in words
    (``summary.verdict_line``): "refuses X% of what people find safe, answers Y% of what people
    find unsafe, follows context in Z% of pairs; people's majority: W%" (a judge "judges unsafe" and
    "judges safe"); published models marked as such (they judged; a respond run answered)."""
    from .summary import verdict_line

    people = next((r for _, r in ctx.overview.people), None)
    follow = None if people is None else people.get("context_follow")
    items = []
    for it in list(ctx.inputs) + list(ctx.references):
        if it.pred.removed:
            continue
        line = verdict_line(it.score, follow)
        items.append(f"<li><b>{_e(it.name)}</b>: {_e(line)}</li>")
    if not items:
        return ""
    return ('<div class="verdicts"><p class="note">What each model does, in one line (respond runs: what the chatbot '
            "did; judges: what the model said; published models judged). People's majority: how often the majority "
            "of people's votes follows the context on the same pairs.</p>"
            f'<ul class="verdicts">{"".join(items)}</ul></div>')


def _mass_cell(s: Score) -> str:
    """Under the coverage: the median verdict mass and how many cases fell below it (prob mode)."""
    vm = s.verdict_mass
    if not vm:
        return ""
    from .tables import mass_pct

    return (f'<span class="ci" title="probability on the verdict words: median; cases below '
            f'{mass_pct(vm["threshold"])}">mass {mass_pct(vm["median"])} · {vm["below"]}/{vm["known"]} low</span>')


def _mass_notes(inputs: Sequence[ReportInput]) -> str:
    """The verdict-mass rule, and a warning per input whose median mass is below the threshold."""
    with_mass = [it for it in inputs if it.score.verdict_mass]
    if not with_mass:
        return ""
    thr = with_mass[0].score.verdict_mass["threshold"]
    from .tables import mass_pct

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
    behave = [it.pred.mode_spec.reads_behaviour for it in inputs]
    verbs = (("answered", "refused") if all(behave) else ("judged safe", "judged unsafe") if not any(behave)
             else ("judged safe / answered", "judged unsafe / refused"))
    png = refusal_bars(
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
                      f"Error bars: {_lv(ctx.options)} CIs (Wilson score intervals; bootstrap under paper-compatible scoring).")
            + _classifier_notes(inputs))


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
            + "".join(rows) + "</tbody></table></div>" + _classifier_notes(ctx.inputs))


def _pairwise(ctx: ReportContext) -> str:
    inputs, options = ctx.inputs, ctx.options
    if len(inputs) < 2:
        return None
    if not ctx.overview.comparisons:
        return ('<p class="note">No two inputs share cases of one dataset, so no paired comparison '
                "applies.</p>")
    parts = ['<p class="note">Differences A − B over the cases both inputs answered'
             + (" (all cases, paper-compatible)" if options.paper_compat else "")
             + f", with {_lv(options)} paired-bootstrap CIs. Accuracy: McNemar's exact test; PCC: Williams' t for two "
             "correlations sharing the human safe_rate; recalls: paired bootstrap. p(BH): Benjamini–Hochberg over "
             'every pair and metric of the group; <span class="sig">red</span> = significant at 0.05 (never from '
             f"fewer than {MIN_PAIRED} paired cases or {MIN_DISCORDANT} discordant ones). Inputs over different "
             "case sets are paired over the cases both hold (how many: 'Paired cases'). "
             "The same figures, for any inputs: <code>casebench compare</code>.</p>"]
    labels = _rank_labels(inputs)
    for g, res in ctx.overview.comparisons:
        if res is None:  # too many pairs for one row each: a matrix, neighbours, a download
            pm = next(m for members, m in ctx.overview.matrices if members == g)
            parts.append(_pairwise_matrix([inputs[i] for i in g], [labels[i] for i in g], pm, level=options.level))
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
                test = TEST_NAMES[d.test]
                cells.append(f'<td{cls}>{_fm(m, d.diff)}<span class="ci">[{_fm(m, d.ci[0])}, {_fm(m, d.ci[1])}]</span>'
                             f'<span class="ci">{test} p {_fp(d.p, d.p_floor, d.test == "mcnemar")} · BH {_fp(d.p_adjusted, d.p_floor, d.test == "mcnemar")}'
                             f' · MDD {_fm(m, d.mdd)}</span></td>')
            rows.append("<tr>" + "".join(cells) + "</tr>")
        parts.append('<div class="wide"><table class="pairwise"><thead><tr>'
                     + "".join(f'<th class="{"l" if h in ("A", "B") else ""}">{_e(h)}</th>' for h in head)
                     + "</tr></thead><tbody>" + "".join(rows) + "</tbody></table></div>")
    return "".join(parts)


def _ranks(inputs: Sequence[ReportInput]) -> list[int]:
    """Each input's place (1 = best accuracy): the models first, then the ablation conditions,
    each by accuracy, as ``_leaderboard`` sorts them (``_rank_labels`` names the places)."""
    order = sorted(range(len(inputs)), key=lambda i: (bool(inputs[i].pred.removed), -np.nan_to_num(
        inputs[i].score.values.get("accuracy", np.nan), nan=-1.0)))
    rank = [0] * len(inputs)
    for r, i in enumerate(order, start=1):
        rank[i] = r
    return rank


def _rank_labels(inputs: Sequence[ReportInput]) -> list[str]:
    """The leaderboard's numbers: models 1, 2, ...; ablation conditions, ranked apart, A1, A2, ..."""
    models = sum(not it.pred.removed for it in inputs)
    return [str(r) if r <= models else f"A{r - models}" for r in _ranks(inputs)]


def _pairwise_matrix(its: Sequence[ReportInput], ranks: Sequence[str], pm: PairMatrix, level: float = 0.95) -> str:
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
    return (f'<h3>{len(its)} inputs over the same {n} cases: {npairs} pairs</h3>'
            '<p class="note">Accuracy of the row input minus the column input over the cases both scored: '
            '<span class="better-key">▲</span> significantly more accurate, <span class="worse-key">▼</span> '
            + ("significantly less (McNemar's test for clustered pairs, Durkalski 2003, " if mx.test == "clustered"
               else "significantly less (McNemar's exact test, ") + "Benjamini–Hochberg over all "
            f"{npairs} pairs at {mx.alpha}; no mark with fewer than {MATRIX_MIN_PAIRED} paired or "
            f"{MATRIX_MIN_DISCORDANT} discordant cases); blank: no significant difference. Hover a cell for the "
            "figures; inputs numbered as in the leaderboard. Every pair, with its counts and p-values: "
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
    png = category_heatmap(categories, [it.name for it in inputs], m, counts)
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
                         if any(it.pred.mode_spec.reads_behaviour for it in inputs) else "") +
                      f"Every cell is from fewer than {MIN_CASES} cases: read single cells with care." + numbers))


def _best(inputs: Sequence[ReportInput], k: int) -> tuple[list[ReportInput], int]:
    """The ``k`` most accurate inputs, in leaderboard order, and how many were left out."""
    ranks = _ranks(inputs)
    ordered = [it for _, it in sorted(zip(ranks, inputs), key=lambda x: x[0])]
    return ordered[:k], max(0, len(ordered) - k)


def _left_out_note(left_out: int) -> str:
    return (f" Only the {PLOT_MAX_INPUTS} most accurate inputs are drawn; {left_out} more are in the leaderboard."
            if left_out else "")


def _scatter(ctx: ReportContext) -> str:
    from .plots import p_vs_human

    judged = [it for it in ctx.inputs if not it.pred.mode_spec.reads_behaviour and it.score.answered]
    if not judged:  # respond runs answer, they state no P(safe): the section does not apply
        return None
    shown, left_out = _best(judged, PLOT_MAX_INPUTS)
    panels = [{"name": it.name, "g": it.figures.g, "p": it.figures.p, "binary": it.figures.binary,
               "r": it.score.values.get("pcc")} for it in shown]
    png = p_vs_human(panels)
    return (_figure(png, "P(safe) against the human safe_rate per input",
                      "Each dot is a case: x = share of annotators (plus the intent vote, as published) judging it "
                      "safe, y = the judge's P(safe) (score mode: (score − 0.5)/10; binary: the verdict, jittered). "
                      "A judge that tracks the humans lies near the dashed diagonal; dots in the top-left and "
                      "bottom-right quadrants are wrong verdicts. r: Pearson correlation (PCC). Judge modes only "
                      "(a respond run answers; it states no P(safe))." + _left_out_note(left_out)))


def _reliability(ctx: ReportContext) -> str:
    from .plots import reliability

    curves = []
    stated = [it for it in ctx.inputs if it.figures.reliability is not None and not it.pred.mode_spec.reads_behaviour
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
    return _figure(reliability(curves), "reliability diagram",
                          "Cases binned by P(safe) (10 equal-width bins); each point is a bin's mean P(safe) against "
                          "its mean human safe_rate, its area the bin's share of cases. Right: how the predictions "
                          "spread over the bins. ECE as in the leaderboard. Score and prob modes only (binary verdicts and respond "
                          "runs state no probability)."
                          + _left_out_note(left_out))


def _ablation(ctx: ReportContext) -> str | None:
    from .plots import ablation_chart

    if not ctx.overview.ablations:
        return None
    parts = ['<p class="note">Each bar: the paired difference condition − full context, with a ' + _lv(ctx.options) + ' paired-bootstrap '
             "CI (same cases, same model and mode); a bar left of zero means removing those CI parameters hurt. "
             "The same study in text or JSON: <code>casebench ablate INPUTS…</code>.</p>"]
    for _, res in ctx.overview.ablations:
        ms = [m for m in STUDY_METRICS if m in res.conditions[1].diffs]
        drawn = [m for m in ms if m != "bce"]  # four panels stay legible; BCE is in the table
        conds = res.conditions[1:]
        d = np.array([[c.diffs[m].diff for m in drawn] for c in conds])
        ci = np.array([[c.diffs[m].ci for m in drawn] for c in conds])
        png = ablation_chart([c.name for c in conds], drawn, d, ci, f"{res.model} [{res.mode}]: condition − full context",
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
    from .tables import classifier_note

    if not ctx.overview.placements:
        return None
    parts = ['<p class="note">The same model, mode and cases with the context inside the user message (user), as '
             "the operator's system prompt (system) or as the conversation before the query (turns). Figures with "
             f"{_lv(ctx.options)} CIs (as in the leaderboard); context shift, follow and blind over the query pairs with both "
             "contexts answered (the shift's CI resamples pairs; follow and blind: Wilson intervals); over-refusal = "
             "1 − safe recall, under-refusal = 1 − unsafe recall (Wilson CIs). Between placements: McNemar's exact "
             "test on per-case correctness and paired-bootstrap CIs over the shared cases, Benjamini–Hochberg over "
             'all pairs and metrics (<span class="sig">red</span> = significant). The same study in text or JSON: '
             "<code>casebench study INPUTS…</code>.</p>"]

    def cell(x: float | None, ci: Sequence[float] | None = None) -> str:
        return f"<td>{_f(x)}" + (f'<span class="ci">[{_f(ci[0])}, {_f(ci[1])}]</span>' if ci else "") + "</td>"

    for _, _, res in ctx.overview.placements:
        behaviour = any(p.over_refusal is not None for p in res.placements)
        saydo = any(p.say_do is not None or p.say_do_missing for p in res.placements)
        rm = f" − {', '.join(res.removed)}" if res.removed else ""
        parts.append(f"<h3>{_e(res.model)} [{_e(res.mode)}]{_e(rm)}</h3>")
        head = ["Placement", "Answered", "Accuracy", "Safe recall", "Unsafe recall"]
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
                     + "".join(f'<th class="{"l" if h == "Placement" else ""}">{_e(h)}</th>' for h in head)
                     + "</tr></thead><tbody>" + "".join(rows) + "</tbody></table></div>")
        notes = []
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
        phead = ["Placements (A − B)", "Paired cases", "McNemar (A only / B only)", "Δ Accuracy", "Δ Safe recall",
                 "Δ Unsafe recall", "Δ Context shift"]
        parts.append('<div class="wide"><table class="placement-pairs"><thead><tr>'
                     + "".join(f'<th class="{"l" if i == 0 else ""}">{_e(h)}</th>' for i, h in enumerate(phead))
                     + "</tr></thead><tbody>" + "".join(prow) + "</tbody></table></div>")
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
        png = context_effect([c["category"] for c in cats], [c["share_safe_contexts"] for c in cats],
                             [c["share_unsafe_contexts"] for c in cats], [c["significant"] for c in cats])
        parts.append("<h3>Context effect by category</h3>")
        parts.append(_figure(png, "share of safe votes by context kind and category",
                             "Per category, the share of annotators voting safe when the context was written to be "
                             "safe (green) and unsafe (orange). * : significant after Benjamini–Hochberg "
                             "(Wilcoxon signed-rank over the category's queries)."))
    stab = st["stability"]
    if stab:
        png = stability_curve([r["k"] for r in stab], [r["agreement"] for r in stab], [r["exact"] for r in stab])
        ss = st["stability_settings"]
        parts.append("<h3>How many annotators are enough</h3>")
        parts.append(_figure(png, "annotator stability curve",
                             f"How often the majority of k randomly chosen annotators equals the majority of the whole "
                             f"panel ({ss['draws']} draws per case and k; {ss['cases_excluded_ties']} cases whose full "
                             "panel ties are left out). Few annotators give unstable labels."))
    return "".join(parts)


# --------------------------------------------------------------------------------------------
# The page


#: the report's sections, in order (see the module docstring); a new section is one entry
def _reference_note(refs: Sequence[tuple[list[int], dict[str, Any]]]) -> str:
    """The human references every judge's figures stand beside (under the leaderboard):
    ``Overview.people``."""
    if not refs:
        return ""
    ref = refs[0][1]
    return (f'<p class="note reference">Reference, people ({ref["cases"]} cases): one annotator agrees with another '
            f'on {_f(ref["annotator_agreement"])} of votes and the majority label with '
            f'{_f(ref["oracle_vote_agreement"])} (the ceiling of vote agreement); no P(safe) reaches a BCE below '
            f'{_f(ref["bce_floor"])}; one person\'s context shift is {_f(ref["context_shift"])} and people\'s majority '
            f'label follows the context in {_f(ref["context_follow"])} of {ref["context_pairs"]} query pairs '
            f'({"with the intent vote" if ref.get("label_source", "published") == "published" else "from the votes alone"};'
            ' see “Context sensitivity”).</p>')


#: how many context-blind queries the report lists per input
BLIND_LIMIT = 12


def _input_people(it: Any) -> dict[str, Any] | None:
    """People's references on the pairs this input answered (``stats.context.people_references``),
    as its scoring result carries them; None without pairs."""
    fig = it.figures
    blocks = getattr(fig, "blocks", None)
    if isinstance(blocks, dict) and "people" in blocks:
        return blocks["people"]
    return getattr(fig, "people", None)


def _direction_order(items: Sequence[Any]) -> list[Any]:
    """Inputs grouped by mode (in order of first appearance) and ranked by direction *within*
    each mode (best first, undefined last; ties keep their order). Direction depends on how
    finely a mode outputs (a verdict moves only where its label flips: Llama-3-70B 0.80 as
    verdicts, 0.95 as P(safe), with the same concordance), so it is never ranked across modes;
    across modes the section compares follow and blind (labels, which every mode has) and
    concordance (the sign of the moves that happen)."""
    modes: dict[str, int] = {}
    for it in items:
        modes.setdefault(it.pred.mode, len(modes))
    return sorted(items, key=lambda it: (modes[it.pred.mode],
                                         -np.nan_to_num(it.score.values.get("context_direction", np.nan), nan=-9.0)))




def _people_context_note(ref: dict[str, Any]) -> str:
    """People's references over every pair of the dataset (``context.human_references``) in one
    paragraph: one person and the majority under the label source, the other source beside them,
    and the pairs that differ only by the intent vote's tie-break."""
    src = ref.get("label_source", "published")
    op, mj, pd = ref["one_person"], ref["majority"], ref["people_differ"]
    other = "votes" if src == "published" else "published"
    ob = ref["by_label_source"][other]
    names = {"published": "with the intent vote counted as a 21st vote (the published safe_rate)",
             "votes": "from the votes alone"}

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
    parts = [head, '<p class="note">Every query of CASE-Bench comes with two contexts, one written to make answering '
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
             "score</code>; people's: <code>casebench human DATA</code>.</p>"]
    if ref is not None and "one_person" in ref:
        parts.append(_people_context_note(ref))
        if len(ctx.overview.people) > 1:
            parts.append('<p class="note">The inputs come from more than one set of cases; the people\'s paragraph is '
                         "that of the first; each row's references are on its own pairs.</p>")
    maj = ref["majority"] if ref is not None and "majority" in ref else {}
    png = context_direction_dots(
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
    groups: dict[str, list[Any]] = {}
    for it in shown:
        groups.setdefault(it.pred.mode, []).append(it)
    panels_by_mode = []
    for mode, its in groups.items():
        pp = [_input_people(it) or {} for it in its]
        panels_by_mode.append({
            "title": f"{mode} ({get_mode(mode).scale})",
            "names": [it.name for it in its],
            "shift": [it.score.values.get("context_shift", float("nan")) for it in its],
            "ci": [it.score.ci.get("context_shift", nan2) for it in its],
            "one_person": [p.get("one_person", {}).get("context_shift", float("nan")) for p in pp],
            "majority": [p.get("majority", {}).get("context_shift", float("nan")) for p in pp],
            "reference": [it.reference for it in its]})
    parts.append(_figure(context_shift_by_mode(panels_by_mode), "context shift per mode beside people's",
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
        pp = _input_people(it) or {}
        op, mj = pp.get("one_person", {}), pp.get("majority", {})
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
        parts.append(_figure(shift_scatter(panels), "per-pair shift of each judge against people's",
                             "Each dot is a query pair: x = people's shift (safe-context minus unsafe-context safe "
                             "rate), y = the judge's. A judge that moves where people move lies along the dashed "
                             "diagonal; r is the shift r of the table." + _left_out_note(left_out)))
    if blind_parts:
        parts.append("<h3>Where the judge is context-blind and people are not</h3>"
                     '<p class="note">Queries whose two contexts people label differently but the judge labels '
                     f"alike, the largest human shifts first (at most {BLIND_LIMIT} per input)"
                     + ("" if show_text else "; query text hidden") + ".</p>" + "".join(blind_parts))
    return "".join(parts)


SECTIONS: list[Section] = [
    Section("leaderboard-section", "Leaderboard", _leaderboard),
    Section("refusal", "Over- and under-refusal", _refusal),
    Section("saydo", "Judgement and behaviour", _say_do),
    Section("pairwise", "Paired differences", _pairwise),
    Section("categories", "Accuracy by category", _category_heatmap),
    Section("scatter", "P(safe) against the human safe_rate", _scatter),
    Section("reliability", "Calibration", _reliability),
    Section("ablation", "Context ablation", _ablation),
    Section("placement", "Where the context goes", _placement),
    Section("human", "The human votes", _human),
    Section("context", "Context sensitivity", _context),
]


def render_sections(ctx: ReportContext, sections: Sequence[Section] | None = None,
                    progress: Callable[[str], None] | None = None) -> tuple[str, str]:
    """The table of contents and the sections that apply, numbered in the order shown;
    ``progress`` is told each section's title as it starts."""
    toc, body = [], []
    for sec in SECTIONS if sections is None else sections:
        if progress:
            progress(sec.title.lower() if sec.title[1:2].islower() else sec.title)
        html_ = sec.render(ctx)
        if html_ is None:
            continue
        toc.append(f'<li><a href="#{sec.key}">{_e(sec.title)}</a></li>')
        body.append(f'<h2 id="{sec.key}">{len(body) + 1}. {_e(sec.title)}</h2>' + html_)
    return "".join(toc), "".join(body)


def build_report(
    preds: Sequence[Predictions], options: ScoringOptions = DEFAULT_OPTIONS, *,
    human_cases: Sequence[Case] | None = None, title: str = "casebench report", human: bool = True,
    show_text: bool = False, references: Sequence[Predictions] | None = None, reference_root: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> str:
    """The report as one HTML string (see the module docstring).

    ``progress``: called with a short line as each step starts (the CLI prints them on stderr);
    warnings raised while building (matplotlib's, say) are told through it and logged, never
    printed raw.

    ``options``: how every input is scored, including the human labels (``label_source``:
    published, or the votes alone). ``human_cases``: the cases whose votes the human section
    analyses (a dataset); by default, the cases of the input that holds the most.
    ``show_text``: list the context-blind queries with their text (else case indices only).
    ``references``: published models shown for reference (from ``reference_root``): ranked in the
    leaderboard and drawn in the context section, marked "(published)", never paired with the
    inputs; without them, the context section says how to get them.
    """
    preds = list(preds)
    if not preds:
        raise ValueError("a report needs at least one input")
    say = progress or (lambda line: None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        say(f"scoring {len(preds)} input(s) and pairing them")
        ov = overview(preds, options, human_cases=human_cases, human=human)
        refs = [ReportInput(f"{display_name(p)} (published)", input_figures(p, options), reference=True)
                for p in references or ()]
        ctx = ReportContext([ReportInput(n, f) for n, f in zip(_unique_names(preds), ov.inputs)], ov, refs,
                            reference_root, show_text)
        toc, sections = render_sections(ctx, progress=say)
    for note in dict.fromkeys(f"{w.category.__name__}: {w.message}" for w in caught):
        log.warning("report: %s", note)
        say(f"note: {note}")
    try:
        from importlib.metadata import version

        ver = version("casebench")
    except Exception:  # pragma: no cover - not installed
        ver = "unknown"
    when = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    mode = "paper-compatible scoring" if options.paper_compat else "default scoring"
    if options.label_source != "published":
        mode += f" · labels: {options.label_source} only"
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)}</title><style>{CSS}</style></head><body><main>"
        f"<h1>{_e(title)}</h1>"
        '<p class="lead">How well LLM judges agree with people about whether answering a query is safe '
        "<em>in its context</em> (CASE-Bench, ICML 2025).</p>"
        f'<p class="meta">{len(preds)} input(s) · {mode} · {options.n_boot} bootstrap resamples, seed {options.bootstrap_seed} · '
        f"casebench {_e(ver)} · generated {when}</p>"
        f"<nav><ol>{toc}</ol></nav>" + sections + "</main></body></html>\n"
    )


def write_report(path: str | Path, preds: Sequence[Predictions], options: ScoringOptions = DEFAULT_OPTIONS,
                 **kw: Any) -> Path:
    """Build the report (``build_report``) and write it atomically (never a half-written file)."""
    from ..atomic import write_text_atomic

    return write_text_atomic(path, build_report(preds, options, **kw))
