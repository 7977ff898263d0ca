"""One self-contained HTML report over any number of runs and published files.

Self-contained on purpose: the file is mailed, attached to a ticket or opened from disk on a
machine with no network, so every figure is an embedded PNG (base64 data URI), the style is
inline and there is no script. The tables can be downloaded from the page itself as CSV, JSON
and Markdown (data-URI links built with ``tables.FORMATS``, the same renderers as
``casebench score --format``).

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
8. the human votes (``human.human_stats``): context effect by category and how many annotators
   a stable majority needs;
9. placement studies, when the inputs hold one model in several context placements
   (``placement``): per placement the figures, context shift/follow/blind, over- and
   under-refusal and the say-do gap, and the paired tests between placements.
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..data import Case
from ..predictions import Predictions
from ..stats.bootstrap import DEFAULT_BOOTSTRAP
from ..stats.metrics import (
    ALL_METRICS, METRIC, Score, ece_bins, human_rates, metric_names, score_predictions, scoring_arrays,
)
from .tables import STUDY_METRICS, fmt_num, fmt_p

#: the leaderboard's columns: every metric, in the table's order (``stats.metrics.METRICS``)
LEADERBOARD_METRICS = ALL_METRICS
#: the paired differences the report shows per pair (``casebench compare`` shows them all)
PAIRWISE_METRICS = ("accuracy", "safe_recall", "unsafe_recall", "pcc")
TEST_NAMES = {"mcnemar": "McNemar", "williams": "Williams", "bootstrap": "bootstrap"}
HUMAN_DRAWS = 1000

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
"""


@dataclass
class ReportInput:
    """One input as the report shows it: a unique display name, its predictions and score, and
    the human safe_rate it is scored against (None: the published one)."""

    name: str
    pred: Predictions
    score: Score
    rates: np.ndarray | None = None


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _f(x: float | None, digits: int = 3) -> str:
    return fmt_num(x, digits, missing="–", inf=("∞", "−∞"))


def _fm(metric: str, x: float | None) -> str:
    """A metric's figure in the report's compact tables (``MetricDef.digits`` minus one)."""
    return _f(x, METRIC[metric].digits - 1)


def _fp(p: float | None) -> str:
    return fmt_p(p, digits=3, sci_digits=1, missing="–")


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
    """``model [mode]``, and ``− removed, parameters`` for an ablation condition."""
    base = f"{p.model} [{p.mode}]"
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


def _leaderboard(inputs: Sequence[ReportInput], paper_compat: bool, n_boot: int) -> str:
    from .tables import FORMATS

    order = sorted(range(len(inputs)), key=lambda i: -np.nan_to_num(inputs[i].score.values.get("accuracy", np.nan),
                                                                      nan=-1.0))
    # behaviour columns (refusal rate, partial answers) only when some input is a respond run
    shown = [m for m in LEADERBOARD_METRICS
             if not METRIC[m].behaviour or any(it.pred.mode_spec.reads_behaviour for it in inputs)]
    head = ["#", "Input", "Cases", "Answered"] + [METRIC[m].heading for m in shown]
    rows = []
    for rank, i in enumerate(order, start=1):
        it = inputs[i]
        s = it.score
        src = f'<span class="src" title="{_e(s.source)}">{_e(_short_source(s.source))}</span>'
        cells = [f'<td>{rank}</td>', f'<td class="l name"><b>{_e(it.name)}</b>{src}</td>',
                 f"<td>{s.n}</td>", f"<td>{100 * s.coverage:.1f}%</td>"]
        for m in shown:
            if m not in metric_names(s.mode) or m not in s.values:
                cells.append("<td>–</td>")
                continue
            lo, hi = s.ci.get(m, [float("nan")] * 2)
            ci = f'<span class="ci">[{_fm(m, lo)}, {_fm(m, hi)}]</span>' if s.ci else ""
            cells.append(f"<td>{_fm(m, s.values[m])}{ci}</td>")
        cls = "leaderboard-row best" if rank == 1 and len(inputs) > 1 else "leaderboard-row"
        rows.append(f'<tr class="{cls}">' + "".join(cells) + "</tr>")
    scores = [inputs[i].score for i in order]
    downloads = " ".join([
        _download(FORMATS["csv"](scores), "leaderboard.csv", "text/csv", "CSV"),
        _download(FORMATS["json"](scores), "leaderboard.jsonl", "application/json", "JSON lines"),
        _download(FORMATS["md"](scores), "leaderboard.md", "text/markdown", "Markdown"),
    ])
    how = ("paper-compatible scoring (missing answers filled as the published script does)" if paper_compat
           else "cases each input answered (coverage in 'Answered')")
    ci = f"95% bootstrap CIs ({n_boot} resamples of cases) under each figure" if n_boot else "no CIs (bootstrap off)"
    return (
        '<h2 id="leaderboard-section">1. Leaderboard</h2>'
        f'<p class="note">One row per input, best accuracy first; {ci}; scored on {how}. '
        "Safe recall = share of human-safe cases judged safe (1 − over-refusal); unsafe recall = share of "
        "human-unsafe cases judged unsafe (1 − under-refusal); PCC = Pearson r between the raw prediction and the "
        "human safe_rate; BCE, Brier and ECE compare P(safe) with the safe_rate (lower is better). "
        "Continuous figures are blank for binary verdicts.</p>"
        f'<div class="wide"><table id="leaderboard"><thead><tr>'
        + "".join(f'<th class="{"l" if h == "Input" else ""}">{_e(h)}</th>' for h in head)
        + "</tr></thead><tbody>" + "".join(rows) + "</tbody></table></div>"
        f'<p class="downloads">Download this table: {downloads}</p>'
    )


def _refusal(inputs: Sequence[ReportInput]) -> str:
    from .plots import refusal_bars

    nan2 = [float("nan")] * 2
    png = refusal_bars(
        [it.name for it in inputs],
        [it.score.values.get("safe_recall", float("nan")) for it in inputs],
        [it.score.ci.get("safe_recall", nan2) for it in inputs],
        [it.score.values.get("unsafe_recall", float("nan")) for it in inputs],
        [it.score.ci.get("unsafe_recall", nan2) for it in inputs],
    )
    return ('<h2 id="refusal">2. Over- and under-refusal</h2>'
            + _figure(png, "safe and unsafe recall per input",
                      "Left: how many human-safe cases each judge lets through (a low bar is over-refusal). "
                      "Right: how many human-unsafe cases it stops (a low bar is under-refusal). "
                      "Error bars: 95% bootstrap CIs."))


def _say_do(inputs: Sequence[ReportInput], n_boot: int, seed: int) -> str:
    """Judgement and behaviour side by side: each model with a judge input and a respond run on
    the same cases; what it says against what it does (``stats.saydo``)."""
    from ..stats.compare import CompareError
    from ..stats.saydo import is_say_do_pair, say_do

    rows = []
    for i, a in enumerate(inputs):
        for b in inputs[i + 1:]:
            if not (is_say_do_pair(a.pred, b.pred) and a.pred.model == b.pred.model):
                continue
            judge, respond = (a, b) if b.pred.mode_spec.reads_behaviour else (b, a)
            try:
                sd = say_do(judge.pred, respond.pred, n_boot=n_boot, seed=seed)
            except CompareError:
                continue
            jv, rv = judge.score.values, respond.score.values
            rows.append(
                f"<tr><td>{_e(judge.pred.model)}</td><td>{_e(judge.name)}</td><td>{_e(respond.name)}</td>"
                f"<td>{_f(jv.get('safe_recall'))}</td><td>{_f(rv.get('safe_recall'))}</td>"
                f"<td>{_f(jv.get('unsafe_recall'))}</td><td>{_f(rv.get('unsafe_recall'))}</td>"
                f"<td>{_f(sd.agreement)} [{_f(sd.agreement_ci[0])}, {_f(sd.agreement_ci[1])}]</td>"
                f"<td>{len(sd.judged_safe_refused)}</td><td>{len(sd.judged_unsafe_answered)}</td>"
                f"<td>{_fp(sd.mcnemar['p'])}</td></tr>")
    if not rows:
        return ""
    return ('<h2 id="saydo">3. Judgement and behaviour</h2>'
            "<p>Each model as a judge (does it say answering is safe?) and as the deployed chatbot (does it "
            "answer?), on the same cases: safe and unsafe recall of each, how often the behaviour matches the "
            "model's own verdict (95% bootstrap CI), the cases it judged safe but refused and judged unsafe "
            "but answered, and McNemar's exact p between verdict and behaviour.</p>"
            '<div class="wide"><table class="saydo"><thead><tr><th>Model</th><th>Judge</th><th>Chatbot</th>'
            "<th>Safe recall, judged</th><th>Safe recall, behaved</th><th>Unsafe recall, judged</th>"
            "<th>Unsafe recall, behaved</th><th>Agreement</th><th>Judged safe, refused</th>"
            "<th>Judged unsafe, answered</th><th>McNemar p</th></tr></thead><tbody>"
            + "".join(rows) + "</tbody></table></div>")


def _cases_keys(preds: Sequence[Predictions]) -> list[tuple[str, tuple[int, ...]]]:
    """Per input, what ``compare`` checks: the cases' fingerprint (leaving out every CI parameter
    any input removed, so an ablation condition matches its full context) and the case indices."""
    ignore = tuple(dict.fromkeys(n for p in preds for n in p.removed))
    return [(p.fingerprint(ignore), tuple(p.case_indices.tolist())) for p in preds]


def _groups_by_cases(preds: Sequence[Predictions]) -> list[list[int]]:
    """Inputs that hold the same cases of the same dataset (the ones ``compare`` accepts)."""
    groups: dict[tuple[str, tuple[int, ...]], list[int]] = {}
    for i, key in enumerate(_cases_keys(preds)):
        groups.setdefault(key, []).append(i)
    return [g for g in groups.values() if len(g) > 1]


def _pairwise(inputs: Sequence[ReportInput], paper_compat: bool, n_boot: int, seed: int,
              label_source: str = "published") -> str:
    from ..stats.compare import compare

    groups = _groups_by_cases([it.pred for it in inputs])
    if not groups:
        return ('<h2 id="pairwise">3. Paired differences</h2><p class="note">No two inputs hold the same cases, '
                "so no paired comparison applies (casebench compare refuses different case sets).</p>")
    parts = ['<h2 id="pairwise">3. Paired differences</h2>',
             '<p class="note">Differences A − B over the cases both inputs answered'
             + (" (all cases, paper-compatible)" if paper_compat else "")
             + ", with 95% paired-bootstrap CIs. Accuracy: McNemar's exact test; PCC: Williams' t for two "
             "correlations sharing the human safe_rate; recalls: paired bootstrap. p(BH): Benjamini–Hochberg over "
             'every pair and metric of the group; <span class="sig">red</span> = significant at 0.05. '
             "The same figures, for any inputs: <code>casebench compare</code>.</p>"]
    for g in groups:
        res = compare([inputs[i].pred for i in g], paper_compat=paper_compat, n_boot=n_boot, seed=seed,
                      label_source=label_source)
        head = ["A", "B", "Paired cases"] + [f"Δ {METRIC[m].short}" for m in PAIRWISE_METRICS]
        rows = []
        for pc in res.pairs:
            a, b = inputs[g[pc.a]].name, inputs[g[pc.b]].name
            cells = [f'<td class="l">{_e(a)}</td>', f'<td class="l">{_e(b)}</td>',
                     f"<td>{pc.n_paired}" + (f" ({pc.dropped} dropped)" if pc.dropped else "") + "</td>"]
            for m in PAIRWISE_METRICS:
                d = pc.metrics.get(m)
                if d is None:
                    cells.append("<td>–</td>")
                    continue
                cls = ' class="sig"' if d.significant else ""
                test = TEST_NAMES[d.test]
                cells.append(f'<td{cls}>{_fm(m, d.diff)}<span class="ci">[{_fm(m, d.ci[0])}, {_fm(m, d.ci[1])}]</span>'
                             f'<span class="ci">{test} p {_fp(d.p)} · BH {_fp(d.p_adjusted)}</span></td>')
            rows.append("<tr>" + "".join(cells) + "</tr>")
        parts.append('<div class="wide"><table class="pairwise"><thead><tr>'
                     + "".join(f'<th class="{"l" if h in ("A", "B") else ""}">{_e(h)}</th>' for h in head)
                     + "</tr></thead><tbody>" + "".join(rows) + "</tbody></table></div>")
    return "".join(parts)


def _category_heatmap(inputs: Sequence[ReportInput], paper_compat: bool) -> str:
    from .plots import category_heatmap

    per: list[dict[str, float]] = []
    cats: set[str] = set()
    for it in inputs:
        a, mask = scoring_arrays(it.pred, paper_compat, it.rates)
        c = np.array([x.category for x in it.pred.cases], dtype=object)[mask]
        acc = {}
        for cat in sorted(set(c.tolist())):
            sel = c == cat
            acc[cat] = float(a.correct[sel].mean()) if sel.any() else float("nan")
        per.append(acc)
        cats.update(x.category for x in it.pred.cases)
    categories = sorted(cats)
    m = np.array([[per[j].get(cat, float("nan")) for j in range(len(inputs))] for cat in categories])
    counts = [it.pred.n if paper_compat else int(it.pred.answered.sum()) for it in inputs]
    png = category_heatmap(categories, [it.name for it in inputs], m, counts)
    return ('<h2 id="categories">4. Accuracy by category</h2>'
            + _figure(png, "accuracy by category and input",
                      f"Accuracy (%) of each input in each of the {len(categories)} categories; the number of cases "
                      "scored is under each input's name (the full benchmark has 20 per category, 10 safe and 10 "
                      "unsafe contexts, so a cell moves in steps of 5 points; a subset run has fewer). "
                      "Grey: the input has no scored case of that category. Category names as published."))


def _scatter(inputs: Sequence[ReportInput], paper_compat: bool) -> str:
    from .plots import p_vs_human

    panels = []
    for it in inputs:
        a, mask = scoring_arrays(it.pred, paper_compat, it.rates)
        if it.pred.is_continuous:
            p = a.p
        else:
            p = a.pred_safe.astype(float)
        panels.append({"name": it.name, "g": a.g, "p": p, "binary": not it.pred.is_continuous,
                       "r": it.score.values.get("pcc")})
    png = p_vs_human(panels)
    return ('<h2 id="scatter">5. P(safe) against the human safe_rate</h2>'
            + _figure(png, "P(safe) against the human safe_rate per input",
                      "Each dot is a case: x = share of annotators (plus the intent vote, as published) judging it "
                      "safe, y = the judge's P(safe) (score mode: (score − 0.5)/10; binary: the verdict, jittered). "
                      "A judge that tracks the humans lies near the dashed diagonal; dots in the top-left and "
                      "bottom-right quadrants are wrong verdicts. r: Pearson correlation (PCC)."))


def _reliability(inputs: Sequence[ReportInput], paper_compat: bool) -> str:
    from ..stats.metrics import ECE_BINS
    from .plots import reliability

    curves = []
    for it in inputs:
        if not it.pred.is_continuous:
            continue
        a, _ = scoring_arrays(it.pred, paper_compat, it.rates)
        p = np.clip(np.asarray(a.p, dtype=float), 0, 1)
        if not len(p):
            continue
        bins = ece_bins(p)
        cnt = np.bincount(bins, minlength=ECE_BINS)
        keep = cnt > 0
        pm = np.bincount(bins, weights=p, minlength=ECE_BINS)[keep] / cnt[keep]
        gm = np.bincount(bins, weights=a.g, minlength=ECE_BINS)[keep] / cnt[keep]
        centres = (np.arange(ECE_BINS) + 0.5)[keep] / ECE_BINS
        curves.append({"name": it.name, "p_mean": pm, "g_mean": gm, "count": cnt[keep], "centres": centres,
                       "ece": it.score.values.get("ece")})
    head = '<h2 id="reliability">6. Calibration</h2>'
    if not curves:
        return head + '<p class="note">No input gives a continuous P(safe) (binary verdicts only).</p>'
    return head + _figure(reliability(curves), "reliability diagram",
                          "Cases binned by P(safe) (10 equal-width bins); each point is a bin's mean P(safe) against "
                          "its mean human safe_rate, its area the bin's share of cases. Right: how the predictions "
                          "spread over the bins. ECE as in the leaderboard. Binary inputs are left out.")


def _ablation_groups(preds: Sequence[Predictions]) -> list[list[int]]:
    from ..stats.ablation import canonical

    groups: dict[tuple[Any, ...], list[int]] = {}
    for i, (p, key) in enumerate(zip(preds, _cases_keys(preds))):
        groups.setdefault((p.model, p.mode, *key), []).append(i)
    out = []
    for g in groups.values():
        conds = [canonical(preds[i].removed) for i in g]
        if () in conds and any(conds) and len(set(conds)) == len(conds):
            out.append(g)
    return out


def _ablation(inputs: Sequence[ReportInput], paper_compat: bool, n_boot: int, seed: int,
              label_source: str = "published") -> str:
    from ..stats.ablation import analyse_ablation
    from .plots import ablation_chart

    groups = _ablation_groups([it.pred for it in inputs])
    if not groups:
        return ""
    parts = ['<h2 id="ablation">7. Context ablation</h2>',
             '<p class="note">Each bar: the paired difference condition − full context, with a 95% paired-bootstrap '
             "CI (same cases, same model and mode); a bar left of zero means removing those CI parameters hurt. "
             "The same study in text or JSON: <code>casebench ablate INPUTS…</code>.</p>"]
    for g in groups:
        res = analyse_ablation([inputs[i].pred for i in g], paper_compat=paper_compat, n_boot=n_boot, seed=seed,
                               label_source=label_source)
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
            for m in ms[:3]:
                dd = c.diffs.get(m)
                if dd is None:
                    cells.append("<td>–</td>")
                    continue
                cls = ' class="sig"' if dd.significant else ""
                cells.append(f'<td{cls}>{_fm(m, dd.diff)}<span class="ci">[{_fm(m, dd.ci[0])}, {_fm(m, dd.ci[1])}] '
                             f"p(BH) {_fp(dd.p_adjusted)}</span></td>")
            rows.append("<tr>" + "".join(cells) + "</tr>")
        parts.append('<div class="wide"><table class="ablation"><thead><tr>'
                     + "".join(f'<th class="{"l" if h == "Condition" else ""}">{_e(h)}</th>' for h in head)
                     + "</tr></thead><tbody>" + "".join(rows) + "</tbody></table></div>")
    return "".join(parts)


def _placement_groups(preds: Sequence[Predictions]) -> list[tuple[list[int], list[int]]]:
    """Placement studies among the inputs: (study inputs, judge inputs for the say-do gap). A
    study is one model, mode and removal over the same cases in at least two placements, each
    once; a respond study's judges are that model's judge inputs over the same cases."""
    from ..stats.placement import placement_of

    keys = _cases_keys(preds)
    groups: dict[tuple[Any, ...], list[int]] = {}
    for i, (p, key) in enumerate(zip(preds, keys)):
        groups.setdefault((p.model, p.mode, tuple(p.removed), *key), []).append(i)
    out = []
    for (model, mode, removed, *key), g in groups.items():
        where = [placement_of(preds[i]) for i in g]
        if len(g) < 2 or len(set(where)) != len(where):
            continue
        judges: list[int] = []
        if preds[g[0]].mode_spec.reads_behaviour:
            seen: set[str] = set()
            for j, (p, k) in enumerate(zip(preds, keys)):
                if (p.model == model and not p.mode_spec.reads_behaviour and k == tuple(key)
                        and placement_of(p) not in seen and placement_of(p) in where):
                    seen.add(placement_of(p))
                    judges.append(j)
        out.append((g, judges))
    return out


def _placement(inputs: Sequence[ReportInput], paper_compat: bool, n_boot: int, seed: int,
               label_source: str = "published") -> str:
    """The placement study: the same model with the context in the prompt, the system prompt or
    the turns before the query (``stats.placement``)."""
    from ..stats.placement import analyse_placements, classifier_line

    preds = [it.pred for it in inputs]
    groups = _placement_groups(preds)
    if not groups:
        return ""
    parts = ['<h2 id="placement">9. Where the context goes</h2>',
             '<p class="note">The same model, mode and cases with the context inside the user message (user), as '
             "the operator's system prompt (system) or as the conversation before the query (turns). Figures with "
             "95% CIs (as in the leaderboard); context shift, follow and blind over the query pairs with both contexts answered "
             "(the shift's CI resamples pairs; follow and blind: Wilson intervals); over-refusal = 1 − safe recall, under-refusal = 1 − unsafe recall (Wilson CIs). Between "
             "placements: McNemar's exact test on per-case correctness and paired-bootstrap CIs over the shared "
             'cases, Benjamini–Hochberg over all pairs and metrics (<span class="sig">red</span> = significant). '
             "The same study in text or JSON: <code>casebench study INPUTS…</code>.</p>"]
    for g, judges in groups:
        res = analyse_placements([preds[i] for i in g], judges=[preds[j] for j in judges], paper_compat=paper_compat,
                                 n_boot=n_boot, seed=seed, label_source=label_source)
        behaviour = any(p.over_refusal is not None for p in res.placements)
        saydo = any(p.say_do is not None for p in res.placements)
        rm = f" − {', '.join(res.removed)}" if res.removed else ""
        parts.append(f"<h3>{_e(res.model)} [{_e(res.mode)}]{_e(rm)}</h3>")
        head = ["Placement", "Answered", "Accuracy", "Safe recall", "Unsafe recall"]
        head += ["Over-refusal", "Under-refusal"] if behaviour else []
        head += ["Pairs", "Context shift", "Context follow", "Context blind"]
        head += ["Say-do agreement", "Say-do gap"] if saydo else []

        def cell(x: float | None, ci: Sequence[float] | None = None) -> str:
            return f"<td>{_f(x)}" + (f'<span class="ci">[{_f(ci[0])}, {_f(ci[1])}]</span>' if ci else "") + "</td>"

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
            notes.append("Answers read by the refusal classifier " + _e(classifier_line(cl)) + ".")
        if res.placements[0].context.note:
            notes.append("Context figures " + _e(res.placements[0].context.note) + ".")
        parts.append('<p class="note">' + " ".join(notes) + "</p>")
        if res.comparison is None:
            continue
        shifts = {(d.a, d.b): d for d in res.shift_diffs}
        ms = ("accuracy", "safe_recall", "unsafe_recall")
        prow = []
        for pc in res.comparison.pairs:
            a, b = res.placements[pc.a].placement, res.placements[pc.b].placement
            mc = pc.mcnemar
            cells = [f'<td class="l">{_e(a)} − {_e(b)}</td>',
                     f"<td>{pc.n_paired}" + (f" ({pc.dropped} dropped)" if pc.dropped else "") + "</td>",
                     f"<td>{mc['a_only']} / {mc['b_only']}<span class=\"ci\">p {_fp(mc['p'])}</span></td>"]
            for m in ms:
                d = pc.metrics.get(m)
                if d is None:
                    cells.append("<td>–</td>")
                    continue
                cls = ' class="sig"' if d.significant else ""
                cells.append(f'<td{cls}>{_fm(m, d.diff)}<span class="ci">[{_fm(m, d.ci[0])}, {_fm(m, d.ci[1])}] '
                             f"p(BH) {_fp(d.p_adjusted)}</span></td>")
            sd = shifts.get((a, b))
            cells.append(cell(sd.diff, sd.ci) if sd and sd.pairs else "<td>–</td>")
            prow.append("<tr>" + "".join(cells) + "</tr>")
        phead = ["Placements (A − B)", "Paired cases", "McNemar (A only / B only)", "Δ Accuracy", "Δ Safe recall",
                 "Δ Unsafe recall", "Δ Context shift"]
        parts.append('<div class="wide"><table class="placement-pairs"><thead><tr>'
                     + "".join(f'<th class="{"l" if i == 0 else ""}">{_e(h)}</th>' for i, h in enumerate(phead))
                     + "</tr></thead><tbody>" + "".join(prow) + "</tbody></table></div>")
    return "".join(parts)


def _human(cases: Sequence[Case] | None, seed: int) -> str:
    head = '<h2 id="human">8. The human votes</h2>'
    if not cases:
        return head + '<p class="note">No cases with votes were given.</p>'
    from ..stats.human import HumanStatsError, human_stats
    from .plots import context_effect, stability_curve

    try:
        st = human_stats(cases, draws=HUMAN_DRAWS, seed=seed)
    except HumanStatsError as e:
        return head + f'<p class="note">{_e(e)}</p>'
    votes, eff = st["votes"], st["context_effect"]
    s_share, u_share = votes["safe_contexts"]["share"], votes["unsafe_contexts"]["share"]
    cats = st["categories"]
    sig = st["categories_significant"]
    agr = st["agreement"]
    pw = st["power"]
    paired = st["paired"]
    rows = [
        ("Cases / votes", f"{st['dataset']['cases']} cases, {votes['all']['votes']} votes"),
        ("Safe votes in intended-safe contexts", _f(s_share)),
        ("Safe votes in intended-unsafe contexts", _f(u_share)),
        ("Context effect (difference)", f"{_f(eff['difference'])}; z = {_f(eff['z'], 1)}, "
         f"log10 p = {_f(eff['log10_p'], 1)} ({_e(eff['test'])})"),
        ("Per query (paired)", f"{paired.get('pairs')} pairs; Wilcoxon p = {_fp(paired.get('p'))}"),
        ("Categories with a significant effect", f"{sig['count']} of {sig['of']} (Benjamini–Hochberg, alpha {sig['alpha']})"),
        ("Agreement (Krippendorff's alpha)", _f(agr.get("krippendorff_alpha"))),
        ("Design power for the overall effect", _f(pw.get("power"))
         + (f"; {pw['annotators_for_80_percent']} annotators per context for 80%"
            if pw.get("annotators_for_80_percent") else "")),
    ]
    table = ('<table class="kv"><tbody>' + "".join(f'<tr><td class="l"><b>{_e(k)}</b></td><td class="l">{v}</td></tr>'
                                                   for k, v in rows) + "</tbody></table>")
    parts = [head, '<p class="note">From the votes stored with the cases (20 per case in the released data; the '
             "published outputs' 21st vote, the context's intent, is not counted). Same figures: "
             "<code>casebench human DATA</code>.</p>", table]
    if cats:
        png = context_effect([c["category"] for c in cats], [c["share_safe_contexts"] for c in cats],
                             [c["share_unsafe_contexts"] for c in cats], [c["significant"] for c in cats])
        parts.append("<h3>Context effect by category</h3>")
        parts.append(_figure(png, "share of safe votes by context kind and category",
                             "Per category, the share of annotators voting safe when the context was written to be "
                             "safe (green) and unsafe (orange). * : significant after Benjamini–Hochberg "
                             "(two-proportion z-test per category)."))
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


def _number_sections(sections: Sequence[str]) -> list[str]:
    """Replace each section's ``<h2 ...>N. `` number with its place among the sections shown."""
    import re

    out, k = [], 0
    for sec in sections:
        if sec:
            k += 1
            sec = re.sub(r"^(<h2 [^>]*>)\d+\. ", lambda m: f"{m.group(1)}{k}. ", sec, count=1)
        out.append(sec)
    return out


def build_report(
    preds: Sequence[Predictions], *, human_cases: Sequence[Case] | None = None, paper_compat: bool = False,
    n_boot: int = DEFAULT_BOOTSTRAP, seed: int = 0, title: str = "casebench report", human: bool = True,
    label_source: str = "published",
) -> str:
    """The report as one HTML string (see the module docstring).

    ``human_cases``: the cases whose votes the human section analyses (a dataset); by default,
    the cases of the input that holds the most. ``label_source``: the human labels every input
    is scored against (``stats.metrics.human_rates``: published, or the votes alone).
    """
    preds = list(preds)
    if not preds:
        raise ValueError("a report needs at least one input")
    names = _unique_names(preds)
    inputs = []
    for n, p in zip(names, preds):
        rates = human_rates(p, label_source)
        inputs.append(ReportInput(n, p, score_predictions(p, paper_compat=paper_compat, n_boot=n_boot, seed=seed,
                                                          human_rate=rates), rates))
    if human and human_cases is None:
        human_cases = max(preds, key=lambda p: p.n).cases
    sections = [
        _leaderboard(inputs, paper_compat, n_boot),
        _refusal(inputs),
        _say_do(inputs, n_boot, seed),
        _pairwise(inputs, paper_compat, n_boot, seed, label_source),
        _category_heatmap(inputs, paper_compat),
        _scatter(inputs, paper_compat),
        _reliability(inputs, paper_compat),
        _ablation(inputs, paper_compat, n_boot, seed, label_source),
        _human(human_cases, seed) if human else "",
        _placement(inputs, paper_compat, n_boot, seed, label_source),
    ]
    sections = _number_sections(sections)
    toc = "".join(
        f'<li><a href="#{anchor}">{_e(label)}</a></li>'
        for anchor, label, present in (
            ("leaderboard-section", "Leaderboard", True), ("refusal", "Over- and under-refusal", True),
            ("saydo", "Judgement and behaviour", bool(sections[2])), ("pairwise", "Paired differences", True), ("categories", "Accuracy by category", True),
            ("scatter", "P(safe) against the human safe_rate", True), ("reliability", "Calibration", True),
            ("ablation", "Context ablation", bool(sections[7])), ("human", "The human votes", human),
            ("placement", "Where the context goes", bool(sections[9])),
        ) if present
    )
    try:
        from importlib.metadata import version

        ver = version("casebench")
    except Exception:  # pragma: no cover - not installed
        ver = "unknown"
    when = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    mode = "paper-compatible scoring" if paper_compat else "default scoring"
    if label_source != "published":
        mode += f" · labels: {label_source} only"
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)}</title><style>{CSS}</style></head><body><main>"
        f"<h1>{_e(title)}</h1>"
        '<p class="lead">How well LLM judges agree with people about whether answering a query is safe '
        "<em>in its context</em> (CASE-Bench, ICML 2025).</p>"
        f'<p class="meta">{len(preds)} input(s) · {mode} · {n_boot} bootstrap resamples, seed {seed} · '
        f"casebench {_e(ver)} · generated {when}</p>"
        f"<nav><ol>{toc}</ol></nav>" + "".join(sections) + "</main></body></html>\n"
    )


def write_report(path: str | Path, preds: Sequence[Predictions], **kw: Any) -> Path:
    """Build the report and write it atomically (never a half-written file)."""
    from ..atomic import write_text_atomic

    return write_text_atomic(path, build_report(preds, **kw))
