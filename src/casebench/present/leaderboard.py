"""The leaderboard site (``casebench leaderboard``): a static folder, self-contained (no network
when opened from disk), written from one ``stats.board.Board`` and never hand-edited.

``DIR/leaderboard.json`` is the board as data (``Board.to_dict``); ``DIR/index.html`` its tables
(one per case set and kind: chatbots, judges, ablation conditions, each ranked among its own),
sortable by any column with a few lines of inline script, readable at 1,400 px and on a phone
(at 390 px a row becomes a card), with the over/under-refusal plane as inline SVG (also
``DIR/plot.svg``); ``DIR/inputs/<n>.html`` one page per input: every figure with its interval,
its figures by category, its context figures beside people's, the cases it disagrees with people
on most (their text only with ``show_text``). ``DIR/eee/`` holds the Every Eval Ever records
(``present.eee``) when asked.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Sequence

from ..stats.board import Board, BoardRow, Ceiling, Figure
from ..stats.metric_registry import METRIC
from .numbers import report_bounds, report_num as _f
from .report_html import _e

CSS = """
* { box-sizing: border-box; }
body { font-family: -apple-system, "Segoe UI", "DejaVu Sans", Helvetica, Arial, sans-serif; font-size: 15px;
       line-height: 1.45; color: #1d1d1f; margin: 0; }
main { max-width: 1360px; margin: 0 auto; padding: 20px 24px 56px; }
h1 { font-size: 26px; margin: 6px 0 4px; } h2 { font-size: 20px; margin: 32px 0 6px; } h3 { font-size: 16px; }
.note { color: #555; font-size: 13.5px; max-width: 980px; }
table { border-collapse: collapse; margin: 8px 0 14px; font-size: 13px; width: 100%; }
th, td { border-bottom: 1px solid #e3e3e3; padding: 5px 7px; text-align: right; vertical-align: top; }
th { background: #f5f5f7; font-weight: 600; cursor: pointer; user-select: none; }
th[aria-sort="ascending"]::after { content: " ▲"; } th[aria-sort="descending"]::after { content: " ▼"; }
td.l, th.l { text-align: left; } td.name { overflow-wrap: anywhere; min-width: 140px; }
.ci { display: block; color: #666; font-size: 11px; white-space: nowrap; }
.ppl { display: block; color: #2a7a70; font-size: 11px; }
tr.g1 td { background: #f1faf5; } tr.reference td.name { font-style: italic; }
.wide { overflow-x: auto; } figure { margin: 10px 0; } figure svg { max-width: 100%; height: auto; }
details > summary { cursor: pointer; color: #444; }
@media (max-width: 700px) {
  main { padding: 12px; }
  table.board, table.board thead, table.board tbody, table.board tr, table.board td { display: block; width: 100%; }
  table.board thead tr { display: flex; flex-wrap: wrap; gap: 4px; }
  table.board thead th { border: 1px solid #ddd; border-radius: 4px; padding: 2px 6px; font-size: 12px; }
  table.board tr { border: 1px solid #ddd; border-radius: 6px; margin: 8px 0; padding: 4px 8px; }
  table.board td { text-align: left; border: 0; padding: 2px 0; }
  table.board td::before { content: attr(data-label) ": "; font-weight: 600; color: #333; }
  .ci { display: inline; margin-left: 4px; }
}
"""

#: sorts a table by the clicked column (numbers by value, text alphabetically; a second click reverses)
SORT_JS = """
document.querySelectorAll('table.board').forEach(function (t) {
  t.querySelectorAll('thead th').forEach(function (th, k) {
    th.addEventListener('click', function () {
      var dir = th.getAttribute('aria-sort') === 'ascending' ? 'descending' : 'ascending';
      t.querySelectorAll('thead th').forEach(function (h) { h.removeAttribute('aria-sort'); });
      th.setAttribute('aria-sort', dir);
      var rows = Array.prototype.slice.call(t.tBodies[0].rows);
      rows.sort(function (a, b) {
        var x = a.cells[k].getAttribute('data-v'), y = b.cells[k].getAttribute('data-v');
        var nx = parseFloat(x), ny = parseFloat(y), r;
        if (isNaN(nx) || isNaN(ny)) { r = isNaN(nx) - isNaN(ny) || String(x).localeCompare(String(y)); }
        else { r = nx - ny; }
        return dir === 'ascending' ? r : -r;
      });
      rows.forEach(function (r) { t.tBodies[0].appendChild(r); });
    });
  });
});
"""

KIND_TITLES = {"respond": "Chatbots (respond runs): what each did", "judge": "Judges: what each said",
               "ablated": "Ablation conditions (CI parameters removed)"}


def _ci(f: Figure | None) -> str:
    return f'<span class="ci">{report_bounds(f.ci)}</span>' if f is not None and f.ci else ""


def _cell(label: str, f: Figure | None, people: Figure | None = None, people_word: str = "one person") -> str:
    if f is None or f.value is None:
        return f'<td data-label="{_e(label)}" data-v="">–</td>'
    ppl = (f'<span class="ppl">{people_word} {_f(people.value)}{report_bounds(people.ci, " ")}</span>'
           if people is not None and people.value is not None else "")
    return f'<td data-label="{_e(label)}" data-v="{f.value:.6g}">{_f(f.value)}{_ci(f)}{ppl}</td>'


def _text(label: str, text: str, sort: str | int | None = None, cls: str = "") -> str:
    c = f' class="{cls}"' if cls else ""
    return f'<td{c} data-label="{_e(label)}" data-v="{_e(text if sort is None else sort)}">{text}</td>'


def _reader(r: BoardRow) -> str:
    if r.reader is None:
        return ""
    rd = r.reader
    if not rd.validated:
        return f"{_e(rd.name)} v{_e(rd.version)}: not validated"
    who = {"people": "people's labels", "ai-readers": "AI readers' labels",
           "writers": "the writers' own labels"}.get(rd.labelled_by or "", "labels not given by people")
    agree = rd.agreement
    bits = [f"{_e(rd.name)} v{_e(rd.version)}", f"agrees with {who} on {_f(agree.value if agree else None)}"
            + (f" [{_f(agree.ci[0])}, {_f(agree.ci[1])}]" if agree is not None and agree.ci else "")]
    if rd.sensitivity is not None and rd.specificity is not None:
        bits.append(f"Se {_f(rd.sensitivity, 2)}, Sp {_f(rd.specificity, 2)}")
    if rd.set:
        bits.append(f"on {_e(rd.set)}")
    return "; ".join(bits)


def _page_name(r: BoardRow) -> str:
    return f"inputs/{r.position + 1}-{re.sub(r'[^A-Za-z0-9._-]+', '-', r.name).strip('-')[:60]}.html"


COLUMNS = ("#", "Tie group", "Input", "Accuracy", "Over-refusal", "Under-refusal", "Context shift", "Say-do",
           "Brier", "Majority-knowing acc.", "Reader", "Placement", "Mutation", "Cases")


def _row_html(r: BoardRow, respond: bool) -> str:
    g = r.tie_group
    tip = f' title="adjusted p against its group\'s first: {r.p_adjusted:.3g}"' if r.p_adjusted is not None else ""
    name = (f'<a href="{_e(_page_name(r))}"><b>{_e(r.name)}</b></a>'
            + (" (published)" if r.reference else ""))
    cells = [
        _text("#", str(r.rank), r.rank),
        f'<td data-label="Tie group" data-v="{g}" class="tie"><span{tip}>{g}</span></td>',
        _text("Input", name, r.name, "l name"),
        _cell("Accuracy", r.figure),
        _cell("Over-refusal", r.over_refusal, r.people.over_refusal),
        _cell("Under-refusal", r.under_refusal, r.people.under_refusal),
        _cell("Context shift", r.context_shift, r.people.context_shift),
        _cell("Say-do", r.say_do.agreement) if r.say_do else _text("Say-do", "–", ""),
        _cell("Brier", r.figures.get("brier")),
        _cell("Majority-knowing acc.", r.figures.get("accuracy_ceiling")),
        _text("Reader", _reader(r) if respond else "–", _reader(r), "l"),
        _text("Placement", _e(r.placement), r.placement),
        _text("Mutation", _e(r.mutation or "–"), r.mutation or ""),
        _text("Cases", f"{r.answered}/{r.cases}", r.answered),
    ]
    cls = ("g1 " if g == 1 else "") + ("reference" if r.reference else "")
    return f'<tr class="{cls.strip()}">' + "".join(cells) + "</tr>"


def _all_figures(rows: Sequence[BoardRow]) -> str:
    names = [m for m in METRIC if any(m in r.figures for r in rows)]
    head = "".join(f'<th>{_e(METRIC[m].heading)}</th>' for m in names)
    body = "".join(
        f'<tr><td class="l name">{r.rank}. {_e(r.name)}</td>'
        + "".join(f"<td>{_f(r.figures[m].value)}{_ci(r.figures[m])}</td>" if m in r.figures else "<td>–</td>"
                  for m in names) + "</tr>" for r in rows)
    return (f'<details><summary>Every figure with its interval ({len(names)} figures)</summary><div class="wide">'
            f'<table class="figures"><thead><tr><th class="l">Input</th>{head}</tr></thead><tbody>{body}</tbody>'
            "</table></div></details>")


def plot_svg(board: Board, case_set: int = 1) -> str:
    """The over/under-refusal plane of one case set (``plots.refusal_plane``) as SVG text."""
    from .plots import refusal_plane, to_svg

    rows = [r for r in board.rows if r.case_set == case_set]
    points = [{"label": f"{r.rank}" if r.kind == "judge" else f"{r.kind[0].upper()}{r.rank}",
               "over": r.over_refusal.value, "over_ci": r.over_refusal.ci, "under": r.under_refusal.value,
               "under_ci": r.under_refusal.ci, "respond": r.kind == "respond"} for r in rows]
    first = rows[0] if rows else None
    people = None if first is None else {
        "over": first.people.over_refusal.value, "over_ci": first.people.over_refusal.ci,
        "under": first.people.under_refusal.value, "under_ci": first.people.under_refusal.ci}
    ce: Ceiling | None = next((c for c in board.ceilings if c.case_set == case_set), None)
    ceiling = None if ce is None else {"over": ce.over_refusal, "under": ce.under_refusal,
                                       "safe_share": ce.safe_share if ce.safe_share is not None else 0.5}
    return to_svg(refusal_plane(points, people, ceiling))


def _fitted_note(board: Board, case_set: int) -> str:
    """The ceiling's two estimates of its accuracy, said where the diamond is drawn."""
    ce = next((c for c in board.ceilings if c.case_set == case_set), None)
    if ce is None or ce.accuracy is None or ce.accuracy_fitted is None:
        return ""
    return (f" (its accuracy {ce.accuracy:.3f} as a plug-in of each case's vote share, biased low; "
            f"{ce.accuracy_fitted:.3f} with a beta-binomial prior fitted to the cases; neither is a threshold)")


def _inline(svg: str) -> str:
    return re.sub(r"^.*?(<svg)", r"\1", svg, count=1, flags=re.S)


def _page(title: str, body: str, script: str = "") -> str:
    js = f"<script>{script}</script>" if script else ""
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1"><title>{_e(title)}</title>'
            f"<style>{CSS}</style></head><body><main>{body}</main>{js}</body></html>")


def index_html(board: Board, svgs: dict[int, str], title: str, eee: bool = False) -> str:
    o = board.options
    tables = []
    for t in sorted({r.table for r in board.rows}):
        rows = [r for r in board.rows if r.table == t]
        kind, cs = rows[0].kind, rows[0].case_set
        sets = len({r.case_set for r in board.rows}) > 1
        head = "".join(f'<th class="{"l" if c in ("Input", "Reader") else ""}">{_e(c)}</th>' for c in COLUMNS)
        cap = KIND_TITLES[kind] + (f" (case set {cs}: {rows[0].cases} cases)" if sets else "")
        tables.append(f"<h2>{_e(cap)}</h2>"
                      f'<div class="board-wrap"><table class="board" id="board-{t}"><thead><tr>{head}</tr></thead><tbody>'
                      + "".join(_row_html(r, kind == "respond") for r in rows) + "</tbody></table></div>"
                      + _all_figures(rows))
    plots = "".join(f'<figure id="plot-{cs}">{_inline(svg)}<figcaption class="note">Over-refusal against '
                    f"under-refusal{f' (case set {cs})' if len(svgs) > 1 else ''}: each input at its place on the "
                    f"board with its {o.level:.0%} intervals; the star: one person (an annotator drawn at random per "
                    "case, people's votes); the diamond: a judge that knew people's population majority, scored "
                    "against the recorded labels (the ceiling), and the dotted line every point as accurate as it"
                    f"{_fitted_note(board, cs)}.</figcaption></figure>" for cs, svg in svgs.items())
    how = (f"Ranked by accuracy (the share of cases whose verdict or behaviour matches people's label), each kind "
           f"among its own. Tie group 1 (shaded): the inputs a paired test cannot separate from the first — "
           f"{_e(board.test)}, at alpha {o.alpha}; the next group starts at the first input it separates. "
           f"Intervals: {o.level:.0%}, clustered by {_e(o.resample_by)}. Over-refusal = 1 − safe recall, "
           "under-refusal = 1 − unsafe recall; beside each, one person's (an annotator drawn at random per case). "
           "Context shift: how far the answer moves between a query's safe and unsafe context, beside one person's. "
           "Say-do: agreement of a model's verdicts with what it did as a chatbot. Reader: the refusal classifier "
           "that read a chatbot's answers, with its validation (whose labels, agreement, sensitivity and "
           "specificity). Brier and the ceiling are columns, never a reason to re-rank. Click a heading to sort.")
    body = (f"<h1>{_e(title)}</h1><p class=\"note\">{how}</p>" + "".join(tables) + plots
            + '<p class="note">Data: <a href="leaderboard.json">leaderboard.json</a> (this page is written from it'
            + ("; Every Eval Ever records in the folder eee/" if eee else "") + ").</p>")
    return _page(title, body, SORT_JS)


def input_html(board: Board, r: BoardRow) -> str:
    def value(m: str, f: Figure) -> str:  # a count (no interval, e.g. the pairs) as a whole number
        return str(int(f.value or 0)) if m in METRIC and not METRIC[m].interval else _f(f.value) + _ci(f)

    figs = "".join(f"<tr><td class=\"l\">{_e(METRIC[m].label if m in METRIC else m)}</td><td>{value(m, f)}"
                   f"</td><td>{f.cases or '–'}</td></tr>" for m, f in r.figures.items())
    ctx = "".join(
        f"<tr><td class=\"l\">{_e(lab)}</td><td>{_f(a.value)}{_ci(a)}</td><td>{_f(b.value)}{_ci(b)}</td></tr>"
        for lab, a, b in (("context shift (people: one person)", r.context_shift, r.people.context_shift),
                          ("context follow (people: the majority)", r.context_follow, r.people.context_follow),
                          ("over-refusal (people: one person)", r.over_refusal, r.people.over_refusal),
                          ("under-refusal (people: one person)", r.under_refusal, r.people.under_refusal)))
    cat_metrics = [m for m in ("accuracy", "safe_recall", "unsafe_recall", "refusal_rate", "context_shift",
                               "context_follow") if any(m in v for v in r.categories.values())]
    cats = "".join(f"<tr><td class=\"l\">{_e(c)}</td>" + "".join(
        f"<td>{_f(v[m].value)}{_ci(v[m])}</td>" if m in v else "<td>–</td>" for m in cat_metrics) + "</tr>"
        for c, v in sorted(r.categories.items()))
    said = "P(safe)" if any(0 < d.said < 1 for d in r.disagreements) else "said (1 safe, 0 unsafe)"
    dis = "".join(
        f"<tr><td>{d.index}</td><td class=\"l\">{_e(d.category)}</td><td>{'safe' if d.intended_safe else 'unsafe'}</td>"
        f"<td>{_f(d.safe_rate)}</td><td>{_f(d.said)}</td><td>{_f(d.gap)}</td>"
        + (f"<td class=\"l query\">{_e(d.query)}</td>" if board.show_text else "") + "</tr>" for d in r.disagreements)
    text_head = "<th class=\"l\">Query</th>" if board.show_text else ""
    hidden = "" if board.show_text else (" The queries' text is left out (the dataset's licence); "
                                         "<code>--show-text</code> lists it.")
    body = (f'<p><a href="../index.html">← the board</a></p><h1>{_e(r.name)}</h1>'
            f'<p class="note">Rank {r.rank}, tie group {r.tie_group} ({_e(KIND_TITLES[r.kind].split(":")[0].lower())}); '
            f"{r.answered} of {r.cases} cases answered; placement {_e(r.placement)}"
            f"{'; mutation ' + _e(r.mutation) if r.mutation else ''}; source <code>{_e(r.source)}</code>."
            + (f" Reader: {_reader(r)}." if r.reader else "") + "</p>"
            + '<h2>Every figure</h2><div class="wide"><table><thead><tr><th class="l">Figure</th><th>Value</th>'
              f'<th>Cases</th></tr></thead><tbody>{figs}</tbody></table></div>'
            + '<h2>Context figures beside people\'s</h2><div class="wide"><table><thead><tr><th class="l">Figure</th>'
              f'<th>This input</th><th>People</th></tr></thead><tbody>{ctx}</tbody></table></div>'
            + '<h2>By category</h2><div class="wide"><table><thead><tr><th class="l">Category</th>'
            + "".join(f"<th>{_e(METRIC[m].heading)}</th>" for m in cat_metrics)
            + f"</tr></thead><tbody>{cats}</tbody></table></div>"
            + f"<h2>The cases it disagrees with people on most</h2><p class=\"note\">By the gap between what it said "
              f"and people's safe_rate.{hidden}</p>"
              '<div class="wide"><table><thead><tr><th>Case</th><th class="l">Category</th><th>Context intent</th>'
              f"<th>People's safe_rate</th><th>{said}</th><th>Gap</th>{text_head}</tr></thead><tbody>{dis}</tbody>"
              "</table></div>")
    return _page(r.name, body)


def write_leaderboard(out: str | Path, board: Board, *, title: str | None = None,
                      extra: dict[str, str] | None = None) -> Path:
    """Write the site into the folder ``out`` (created; the files of an earlier board replaced):
    ``leaderboard.json`` and, from the same board, ``index.html``, ``plot.svg`` and the input
    pages; ``extra``: more files (relative path -> text, e.g. the Every Eval Ever records). Every
    page is rendered before the first file is written, and each file is written whole (a failed
    render leaves nothing half-written). Returns the index's path."""
    from ..atomic import write_text_atomic

    d = Path(out)
    files: dict[str, str] = {"leaderboard.json": json.dumps(board.to_dict(), indent=1, allow_nan=False) + "\n"}
    svgs = {cs: plot_svg(board, cs) for cs in sorted({r.case_set for r in board.rows})}
    if svgs:
        files["plot.svg"] = svgs[min(svgs)]
    for r in board.rows:
        files[_page_name(r)] = input_html(board, r)
    files.update(extra or {})
    files["index.html"] = index_html(board, svgs, title or "casebench leaderboard", eee=any(
        k.startswith("eee/") for k in files))
    for name, text in files.items():
        (d / name).parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(d / name, text)
    return d / "index.html"
