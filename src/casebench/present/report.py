"""One self-contained HTML report over any number of runs and published files.

Self-contained on purpose: the file is mailed, attached to a ticket or opened from disk on a
machine with no network, so every figure is an embedded PNG (base64 data URI), the style is
inline and there is no script. The tables can be downloaded from the page itself as CSV, JSON
and Markdown (data-URI links built with ``score_formats.FORMATS``, the same renderers as
``casebench score --format``).

The report only presents: every figure comes from ``stats.overview.overview`` (scores, the
per-case figures behind the plots, paired comparisons, ablation studies, say-and-do, the human
votes), computed once. The page is built from ``SECTIONS``, one ordered list of ``Section``
entries (anchor, title, a function of the ``ReportContext`` that returns the section's body or
None when it does not apply); a new section is one entry there. Sections are numbered in the
order shown, and the table of contents lists those shown.

The report leads with what its inputs are: respond runs (chatbots) with their behaviour beside
people's, judges with their agreement; each kind ranked among its own; its title says what it
compares (``report_title``). Each explanation is given once, folded away (``<details>``) beneath
the figures it explains, and nothing needs a horizontal scroll bar at 1400 px.

Sections (each only when its inputs allow it):

1. behaviour (respond runs only): over- and under-refusal beside one person's, the context
   shift beside one person's and people's majority's, how the answers were read;
2. leaderboard: every input, one row each (``table#leaderboard``, rows ``tr.leaderboard-row``),
   ranked by accuracy within its kind and case set, every figure with its CI;
3. over- and under-refusal: safe and unsafe recall side by side;
4. judgement and behaviour (a model's judge input beside its respond run);
5. paired differences between inputs that hold cases in common (``compare``; a matrix per case
   set when there are many);
6. accuracy by category and input (heat map);
7. P(safe) against the human safe_rate, per input;
8. reliability diagram (inputs with a continuous P(safe));
9. ablation studies, when the inputs hold ablation conditions with their full context
   (``ablation``);
10. placement studies, when the inputs hold one model in several context placements
   (``placement``): per placement the figures, context shift/follow/blind, over- and
   under-refusal and the say-do gap, and the paired tests between placements; query-mutation
   studies (``mutations``: the same model with the queries in SORRY-Bench's rewordings) the
   same way, each mutation against the base wording, with its wording consistency;
11. the human votes (``human.human_stats``): context effect by category and how many annotators
   a stable majority needs;
12. context sensitivity beside people's.

Modules: ``report_html`` (style and HTML primitives), ``report_inputs`` (the inputs, their
kinds and ranks), ``report_behaviour``, ``report_scores`` and ``report_studies`` (the sections);
this module assembles the page.
"""

from __future__ import annotations

import datetime as _dt
import logging
import warnings
from pathlib import Path
from typing import Any, Callable, Sequence

from ..session import in_session
from ..data import Case
from ..naming import display_name, display_names
from ..predictions import Predictions
from ..stats.options import DEFAULT_OPTIONS, ScoringOptions
from ..stats.result import ScoredInput
from ..stats.overview import NEIGHBOUR_ROWS, PAIRWISE_TABLE_MAX, input_figures, overview
from .report_html import CSS, _e
from .report_inputs import (
    PAIRWISE_METRICS, PLOT_MAX_INPUTS, ReportContext, ReportInput, Section,
    leaderboard_metrics,
)
from .report_scores import (
    _category_heatmap, _leaderboard, _pairwise, _refusal, _reliability, _say_do, _scatter,
)
from .report_studies import _ablation, _context, _human, _mutations, _placement
from .report_behaviour import _behaviour
from .report_outcomes import _outcomes
from .report_turns import _by_turn

__all__ = ["NEIGHBOUR_ROWS", "PAIRWISE_METRICS", "PAIRWISE_TABLE_MAX", "PLOT_MAX_INPUTS", "SECTIONS", "ReportContext",
           "ReportInput", "Section", "build_report", "display_name", "leaderboard_metrics", "render_sections",
           "write_report"]

log = logging.getLogger("casebench.report")


SECTIONS: list[Section] = [
    Section("behaviour", "Behaviour", _behaviour),
    Section("leaderboard-section", "Leaderboard", _leaderboard),
    Section("refusal", "Over- and under-refusal", _refusal),
    Section("outcomes", "How the answers land", _outcomes),
    Section("saydo", "Judgement and behaviour", _say_do),
    Section("pairwise", "Paired differences", _pairwise),
    Section("categories", "Accuracy by category", _category_heatmap),
    Section("scatter", "P(safe) against the human safe_rate", _scatter),
    Section("reliability", "Calibration", _reliability),
    Section("ablation", "Context ablation", _ablation),
    Section("placement", "Where the context goes", _placement),
    Section("turns", "Context revealed over a conversation, by turn", _by_turn),
    Section("mutations", "Reworded queries", _mutations),
    Section("human", "The human votes", _human),
    Section("context", "Context sensitivity", _context),
]


def render_sections(ctx: ReportContext, sections: Sequence[Section] | None = None,
                    progress: Callable[[str], None] | None = None) -> tuple[str, str]:
    """The table of contents and the sections that apply, numbered in the order shown;
    ``progress`` is told each section's title as it starts."""
    toc: list[str] = []
    body: list[str] = []
    for sec in SECTIONS if sections is None else sections:
        if progress:
            progress(sec.title.lower() if sec.title[1:2].islower() else sec.title)
        html_ = sec.render(ctx)
        if html_ is None:
            continue
        toc.append(f'<li><a href="#{sec.key}">{_e(sec.title)}</a></li>')
        body.append(f'<h2 id="{sec.key}">{len(body) + 1}. {_e(sec.title)}</h2>' + html_)
    return "".join(toc), "".join(body)


def _kinds_count(ctx: ReportContext) -> tuple[int, int]:
    """How many of the report's own inputs are respond runs, and how many judges (ablation
    conditions counted with their kind; published reference rows left out)."""
    respond = sum(it.pred.mode.reads_behaviour for it in ctx.inputs)
    return respond, len(ctx.inputs) - respond


def report_title(ctx: ReportContext) -> str:
    """What the report compares, in its title (the ``--title`` default): "What openai/bot does
    as a chatbot", "How well 3 LLM judges agree with people", or both; the published models shown
    beside them counted."""
    from ..naming import who

    bots = [it for it in ctx.inputs if it.pred.mode.reads_behaviour]
    # the judges counted as models: ablation conditions are the same models less some parameters
    judges = [it for it in ctx.inputs if not it.pred.mode.reads_behaviour and not it.pred.removed] or [
        it for it in ctx.inputs if not it.pred.mode.reads_behaviour]
    parts = []
    if bots:
        models = {who(it.pred) for it in bots}
        parts.append(f"what {next(iter(models))} does as a chatbot" if len(models) == 1
                     else f"what {len(bots)} chatbots do")
    if judges:
        models = {who(it.pred) for it in judges}
        parts.append(f"how well {next(iter(models))} agrees with people as a judge" if len(judges) == 1
                     else f"how well {len(judges)} LLM judges agree with people")
    title = " and ".join(parts)
    refs = f", beside {len(ctx.references)} published judges" if ctx.references else ""
    return title[:1].upper() + title[1:] + refs


def report_lead(ctx: ReportContext) -> str:
    """The sentence under the title: what the figures measure, for the kinds of input shown."""
    respond, judges = _kinds_count(ctx)
    cite = " (CASE-Bench, ICML 2025)."
    if respond and not judges:
        return ("Whether the chatbot answers what people find safe to answer and refuses what they find unsafe "
                "<em>in its context</em>, beside what people do on the same cases" + cite)
    if not respond:
        return ("How well LLM judges agree with people about whether answering a query is safe "
                "<em>in its context</em>" + cite)
    return ("What the chatbots do (answer or refuse) beside what people do, and how well the judges agree with people "
            "about whether answering a query is safe <em>in its context</em>" + cite)


def _state_note(preds: Sequence[Predictions]) -> str:
    """The report's first words when an input is unfinished (``input_state.state_lines``): what is
    still to ask, the command that resumes it, and that its figures (named "(partial)") are
    partial; "" when every input is whole."""
    from ..input_state import state_lines

    lines = state_lines([p.state for p in preds])
    if not lines:
        return ""
    return ('<div class="partial-note" role="note" style="border:2px solid #b45309;padding:.5em 1em;margin:1em 0">'
            + "".join(f"<p>{_e(line.strip())}</p>" for line in lines) + "</div>")


@in_session
def build_report(
    preds: Sequence[Predictions], options: ScoringOptions = DEFAULT_OPTIONS, *,
    human_cases: Sequence[Case] | None = None, title: str | None = None, human: bool = True,
    show_text: bool = False, references: Sequence[Predictions | ScoredInput] | None = None,
    reference_root: str | None = None,
    progress: Callable[[str], None] | None = None, helper: bool = True,
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
    ``helper``: where a second CPU is free, compute the human statistics and draw the figures in
    a helper process beside the rest (``offload``, ``report_figures``); the page is the same
    bytes with or without it (False: all in this process).
    """
    preds = list(preds)
    if not preds:
        raise ValueError("a report needs at least one input")
    say = progress or (lambda line: None)
    from ..offload import helper_possible, long_lived, offload
    from ..stats.bootstrap import one_blas_thread
    from .report_figures import Figures

    helper = helper and helper_possible()
    if helper:  # what both processes use, loaded once before the fork (not once in each)
        import scipy.stats  # noqa: F401

        from .plots import load_matplotlib

        load_matplotlib()
    with warnings.catch_warnings(record=True) as caught, one_blas_thread(), long_lived(), offload(helper) as off:
        warnings.simplefilter("always")
        say(f"scoring {len(preds)} input(s) and pairing them")
        ov = overview(preds, options, human_cases=human_cases, human=human, offload=off)
        # published rows come as predictions, or as their results (``reference_rows``: kept on disk)
        ref_preds = [p.pred if isinstance(p, ScoredInput) else p for p in references or ()]
        refs = [ReportInput(f"{n} (published)", p if isinstance(p, ScoredInput) else input_figures(p, options),
                            reference=True)
                for p, n in zip(references or (), display_names(ref_preds))]
        ctx = ReportContext([ReportInput(n, f) for n, f in zip(display_names(preds), ov.inputs)], ov, refs,
                            reference_root, show_text, Figures(off))
        toc, sections = render_sections(ctx, progress=say)
        sections = ctx.figures.place(sections)
    title = title or report_title(ctx)
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
        f'<p class="lead">{report_lead(ctx)}</p>' + _state_note(preds) +
        f'<p class="meta">{len(preds)} input(s) · {mode} · {options.n_boot} bootstrap resamples, seed {options.bootstrap_seed} · '
        f"casebench {_e(ver)} · generated {when}</p>"
        f"<nav><ol>{toc}</ol></nav>" + sections + "</main></body></html>\n"
    )


def write_report(path: str | Path, preds: Sequence[Predictions], options: ScoringOptions = DEFAULT_OPTIONS,
                 **kw: Any) -> Path:
    """Build the report (``build_report``) and write it atomically (never a half-written file)."""
    from ..atomic import write_text_atomic

    return write_text_atomic(path, build_report(preds, options, **kw))
