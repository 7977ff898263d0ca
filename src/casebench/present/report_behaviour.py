"""The report's first section when it holds respond runs: what each chatbot did, beside what
people do on the same cases. Over- and under-refusal beside one person's (``stats.overview.
one_person_refusal``), the context shift beside one person's and people's majority's (the
input's people's references, ``ScoredInput.people``), and, once, how the answers were read
(the refusal classifier and its corrected figures), folded away beneath the table."""

from __future__ import annotations

from typing import Any, Sequence

from .numbers import report_metric as _fm
from .report_html import _details, _e, _lv
from .report_inputs import ReportContext, ReportInput, _kind, _ranks
from .report_scores import _classifier_notes, _verdict_lines
from .report_studies import _input_people


def _flip(ci: Sequence[float] | None) -> list[float] | None:
    """The interval of 1 - x from that of x."""
    return None if not ci else [1.0 - ci[1], 1.0 - ci[0]]


def _cell(metric: str, v: Any, ci: Sequence[float] | None, cls: str = "") -> str:
    extra = f'<span class="ci">[{_fm(metric, ci[0])}, {_fm(metric, ci[1])}]</span>' if ci else ""
    return f'<td{cls}>{_fm(metric, v)}{extra}</td>'


def _row(ctx: ReportContext, pos: int, it: ReportInput) -> str:
    v, c = it.score.values, it.score.ci
    one = ctx.overview.people_refusal.get(pos, {})
    pp = _input_people(it) or {}
    op, mj = pp.get("one_person", {}), pp.get("majority", {})
    nan = float("nan")
    over = 1.0 - v["safe_recall"] if "safe_recall" in v else nan
    under = 1.0 - v["unsafe_recall"] if "unsafe_recall" in v else nan
    ref = ' class="people"'
    cells = [f'<td class="l name"><b>{_e(it.name)}</b></td>', f"<td>{it.score.answered}/{it.score.n}</td>",
             _cell("safe_recall", over, _flip(c.get("safe_recall"))),
             _cell("safe_recall", one.get("over_refusal"), one.get("ci", {}).get("over_refusal"), ref),
             _cell("unsafe_recall", under, _flip(c.get("unsafe_recall"))),
             _cell("unsafe_recall", one.get("under_refusal"), one.get("ci", {}).get("under_refusal"), ref),
             f"<td>{_fm('context_pairs', v.get('context_pairs'))}</td>",
             _cell("context_shift", v.get("context_shift"), c.get("context_shift")),
             _cell("context_shift", op.get("context_shift"), op.get("ci", {}).get("context_shift"), ref),
             _cell("context_shift", mj.get("context_shift"), mj.get("ci", {}).get("context_shift"), ref)]
    return "<tr>" + "".join(cells) + "</tr>"


def _behaviour(ctx: ReportContext) -> str | None:
    """Each respond run's behaviour beside people's (see the module docstring); None without one."""
    ranks = _ranks(ctx.inputs)
    runs = sorted(((ranks[i], i, it) for i, it in enumerate(ctx.inputs) if _kind(it) == "respond"),
                  key=lambda x: x[0])
    if not runs:
        return None
    head = ["Chatbot", "Answered", "Over-refusal", "one person", "Under-refusal", "one person", "Pairs",
            "Context shift", "one person", "people's majority"]
    table = ('<div class="wide"><table class="behaviour"><thead><tr>'
             + "".join(f'<th class="{"l" if h == "Chatbot" else ""}">{_e(h)}</th>' for h in head)
             + "</tr></thead><tbody>" + "".join(_row(ctx, i, it) for _, i, it in runs) + "</tbody></table></div>")
    method = ('<p class="note"><b>Over-refusal</b>: the share of the cases people find safe that the chatbot '
              "refused (1 − safe recall); <b>under-refusal</b>: the share of those people find unsafe that it "
              f"answered (1 − unsafe recall), each with its {_lv(ctx.options)} CI as in the leaderboard. <b>One person</b>: an "
              "annotator drawn at random for each case, who calls it unsafe as often as its votes do: the share of "
              "the people-safe cases such a person would call unsafe, and of the people-unsafe ones they would call "
              "safe (percentile bootstrap CIs); people's majority label is the yardstick itself, so it has none. "
              "<b>Context shift</b>: over the query pairs with both cases answered, how much more often the chatbot "
              "answers in the safe context than in the unsafe one, beside one person's shift and people's majority "
              "label's on the same pairs (people's figures over all pairs: “Context sensitivity”).</p>")
    from .refusal_text import labels_lines

    # figures that rest on people's labels of a run's own answers lead, in the open
    labelled = "".join(f'<p class="note from-labels"><b>{_e(it.name)}</b>: '
                       + "<br>".join(_e(line.strip()) for line in labels_lines(it.score, True)) + "</p>"
                       for _, _, it in runs if labels_lines(it.score, True))
    return (_verdict_lines(ctx, ("respond",)) + table + labelled
            + _details("How the answers were read (the refusal classifier, its error and the corrected figures)",
                       _classifier_notes([it for _, _, it in runs], with_labels=False))
            + _details("How to read this table", method))
