"""Tables as text, CSV, JSON lines and Markdown: ``casebench score --format``, and the text of
``casebench compare``, ``casebench ablate``, ``casebench study`` and the say-do comparison.

Every metric's name, label, direction and digits come from the one table ``stats.metrics.METRICS``;
every figure, interval and count from the input's one scoring result (``stats.result``): this
module only lays them out, and a figure's small-sample mark reads the count it rests on
(``Score.cases_of``). Statistics never import this module (data flows forward).
"""

from __future__ import annotations

import csv
import io
import json
import math
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from ..jsonutil import json_safe
from ..input_state import PARTIAL
from ..naming import partial_name
from . import people

from ..stats.metrics import (
    BREAKDOWN_METRICS, METRIC, MIN_CASES, MIN_DISCORDANT, MIN_PAIRED, Score,
    metric_names, metrics_where,
)

if TYPE_CHECKING:  # pragma: no cover
    from ..stats.refusal_result import CorrectedShare, PooledRateSummary, RefusalCorrection
    from ..stats.ablation import AblationResult
    from ..stats.compare import Comparison
    from ..stats.placement import PlacementResult
    from ..stats.saydo import SayDo

#: the metrics of the CSV and Markdown rows (every metric, in table order)


def row_metrics() -> tuple[str, ...]:
    """Every registered metric, in table order, read when a table is drawn (a metric registered
    after this module was imported is shown too)."""
    return tuple(METRIC)


#: how every format writes a figure that applies but is undefined (a recall with no case of its
#: class, F1 with nothing to score): table, CSV and Markdown alike; JSON writes null. A figure
#: that does not apply to an input (PCC of a binary verdict) is left blank instead.
UNDEFINED = "–"
#: the note on a figure from fewer than ``MIN_CASES`` cases (explained under the table)
SMALL = "†"
#: the metrics an ablation study prints per condition
STUDY_METRICS = ("accuracy", "safe_recall", "unsafe_recall", "pcc", "bce")

__all__ = ["FORMATS", "row_metrics", "SMALL", "UNDEFINED", "breakdown_table", "classifier_note", "csv_table", "fmt_num",
           "reader_error_words", "who_labelled",
           "fmt_p", "format_ablation",
           "format_comparison", "format_placements", "json_lines", "json_safe", "markdown_table", "text_table"]


def fmt_num(x: float | None, digits: int = 4, missing: str = UNDEFINED, inf: tuple[str, str] = ("inf", "-inf")) -> str:
    """A number for people: fixed digits; NaN/None as ``missing``; infinities spelled out."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return missing
    if isinstance(x, float) and math.isinf(x):
        return inf[0] if x > 0 else inf[1]
    return f"{x:.{digits}f}"


#: below this a p prints as ``< 1e-10`` (the JSON keeps the value): its digits there are the
#: sampling model's tail, not the data's (a clustered McNemar z of 26 prints 1e-149 where no model
#: of the sampling is that accurate; an exact sign-flip p of 6e-124 speaks of the sign-flip model)
P_PRINT_FLOOR = 1e-10


def fmt_p(p: float | None, digits: int = 4, sci_digits: int = 2, missing: str = UNDEFINED,
          floor: float | None = None, exact: bool = False) -> str:
    """A p-value: scientific notation below 0.001. ``floor``: the smallest p the test can give
    (a bootstrap p from B resamples, ``bootstrap.p_floor``); a p there is not measured, only
    bounded, and prints as ``< bound``, the floor rounded up to one significant digit
    (``< 0.001`` for 2000 resamples, ``< 0.002`` for 1000). Any p, ``exact`` or not (the flag is
    kept for callers), prints as ``< 1e-10`` below ``P_PRINT_FLOOR``."""
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return missing
    if floor is not None and math.isfinite(floor) and p <= floor * (1 + 1e-9):
        return "< " + _bound_up(floor)
    if p < P_PRINT_FLOOR:
        return f"< {P_PRINT_FLOOR:.0e}"
    return f"{p:.{sci_digits}e}" if p < 1e-3 else f"{p:.{digits}f}"


def fmt_p_adjusted(p_adjusted: float | None, p: float | None, floor: float | None = None, **kw: Any) -> str:
    """A Benjamini-Hochberg adjusted p: where the raw ``p`` sits at its test's ``floor`` (a
    bootstrap p from B resamples, only bounded) its adjusted value is a bound too, and prints as
    ``< bound`` (every p ranked after it is at least as large, so no other p set the adjustment);
    else as ``fmt_p``."""
    if (floor is not None and math.isfinite(floor) and p is not None and p_adjusted is not None
            and math.isfinite(p_adjusted) and p <= floor * (1 + 1e-9)):
        return "< " + _bound_up(max(p_adjusted, floor))
    return fmt_p(p_adjusted, floor=floor, **kw)


def _eq(p_text: str) -> str:
    """``= 0.0123``, or the bound itself (``< 1e-10``, ``< 0.001``) after a p's name."""
    return p_text if p_text.startswith("<") else f"= {p_text}"


def _bound_up(x: float) -> str:
    """``x`` rounded up to one significant digit, in plain decimals (0.0009995 -> ``0.001``)."""
    e = math.floor(math.log10(x))
    m = math.ceil(round(x / 10 ** e, 9))
    if m == 10:
        m, e = 1, e + 1
    return f"{m * 10 ** e:.{max(0, -e)}f}"


def fmt_metric(name: str, x: float | None, compact: bool = False) -> str:
    """A metric's value (or a difference or CI bound of it) with the metric's digits
    (``MetricDef.digits``; one fewer in the compact Markdown and HTML tables)."""
    digits = max(0, METRIC[name].digits - (1 if compact else 0))
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


def mass_pct(x: float) -> str:
    """A verdict mass as a percentage (one decimal below 10%)."""
    return f"{100 * x:.1f}%" if x < 0.1 else f"{100 * x:.0f}%"


def verdict_mass_line(s: Score) -> str:
    """``verdict mass: median 3.1%, 12 of 12 cases below 50%`` (prob-mode runs)."""
    vm = s.verdict_mass or {}
    line = (f"verdict mass (probability on the verdict words): median {mass_pct(vm['median'])}, "
            f"{vm['below']} of {vm['known']} cases below {mass_pct(vm['threshold'])}")
    if s.paper_compat and vm["below"]:
        line += " (scored anyway, as the authors' script does)"
    return line


def verdict_mass_cells(s: Score) -> dict[str, Any]:
    """The verdict-mass columns of a CSV or Markdown row (empty where the input has no mass)."""
    vm = s.verdict_mass
    if not vm:
        return {"verdict_mass_median": None, "verdict_mass_below": None, "low_mass_missing": None}
    return {"verdict_mass_median": vm["median"], "verdict_mass_below": vm["below"],
            "low_mass_missing": s.low_mass_missing}


def who_labelled(validation: dict[str, Any] | None) -> str:
    """Whose labels a reader's validation is measured against, in words for a line of output:
    "people's labels", "AI readers' labels (following the guide; 2 per answer, agreeing on 98.8%)",
    "the writers' own labels (AI writers, by what each answer was written to do)". Never
    "people's" for labels people did not give (``classify.validation.LABELLED_BY``)."""
    v = validation or {}
    info = v.get("labelled_by") or ({"by": "people"} if v.get("own_run") else None)
    if not info:
        return "labels not given by people (AI readers or the answers' writers; recorded before casebench named them)"
    by = info.get("by")
    if by == "people":
        head, more = "people's labels", []
    elif by == "ai-readers":
        head, more = "AI readers' labels", ["following the guide"]
    else:
        head, more = "the writers' own labels", ["AI writers, by what each answer was written to do"]
    n, agree = info.get("labellers"), info.get("agreement")
    if n and n > 1:
        more.append(f"{n} per answer" + (f", agreeing on {100 * agree:.1f}%" if agree is not None else ""))
    return head + (f" ({'; '.join(more)})" if more else "")


def reader_error_words(validation: Mapping[str, Any] | None, corrected: "RefusalCorrection | None" = None) -> str:
    """The reader's sensitivity and specificity in words, beside its agreement: the pooled ones a
    correction uses (``stats.refusal``: over the blind sets of the run's kind of writer, with
    their set-by-set range) when there are, else those of the validation's own set. Empty when
    neither is known."""
    pooled = corrected.pooled if corrected is not None else None
    if pooled:
        se, sp = pooled.sensitivity, pooled.specificity
        k = len(pooled.sets)
        # the values the correction draws around (the predictive's medians), where it made them
        se_v = corrected.sensitivity if corrected is not None and corrected.sensitivity is not None else se.estimate
        sp_v = corrected.specificity if corrected is not None and corrected.specificity is not None else sp.estimate
        text = f"sensitivity {se_v:.2f}, specificity {sp_v:.2f}"
        if k > 1:
            def rng(r: "PooledRateSummary") -> str:
                return f"{min(r.per_set):.2f}-{max(r.per_set):.2f}"

            people = pooled.labelled_by_people
            text += (f" pooled over {k} sets (set by set: Se {rng(se)}, Sp {rng(sp)}"
                     + (f"; labelled by people: {', '.join(people)}" if people else "") + ")")
        return text
    v = validation or {}
    if v.get("sensitivity") is None or v.get("specificity") is None:
        return ""
    return f"sensitivity {v['sensitivity']:.2f}, specificity {v['specificity']:.2f}"


def classifier_note(classifier: dict[str, Any] | None, corrected: "RefusalCorrection | None" = None) -> str:
    """One sentence, printed beside every refusal rate, saying which refusal classifier read the
    answers, whose labels it was measured against (``who_labelled``) and how often it agrees with
    them on answers it was not tuned on, with its sensitivity and specificity
    (``reader_error_words``; ``corrected``: the score's ``refusal_corrected``), or that it has no
    such figure."""
    if not classifier:
        return ("refusals read by a classifier this run did not record: the refusal rate's reading error "
                "is unknown")
    name = f"{classifier.get('name', '?')} v{classifier.get('version', '?')}"
    v = classifier.get("validation")
    if not v or v.get("agreement") is None:
        return (f"refusals read by {name}, not validated on labelled answers here "
                f"(measure it with casebench refusal-eval): the refusal rate's reading error is unknown")
    ci = v.get("agreement_ci95") or [None, None]
    undecided = (f", {v['undetermined']} undetermined and left out" if v.get("undetermined") else "")
    bounds = f" [{100 * ci[0]:.1f}%, {100 * ci[1]:.1f}%]" if ci[0] is not None else ""
    setting = f", partial counted as {'answering' if v.get('partial_as') == 'safe' else 'refusing'}" \
        if v.get("partial_as") else ""
    if v.get("own_run"):
        where = f"{v.get('set')}"
    else:
        where = v.get("what") or f"{v.get('n', '?')} held-aside answers of our own"
    error = reader_error_words(v, corrected)
    line = (f"refusals read by {name}: it agrees with {who_labelled(v)} on {100 * v['agreement']:.1f}%{bounds} of "
            f"{where} (coverage {100 * v.get('coverage', 0):.1f}%{undecided}{setting})"
            + (f"; {error}" if error else "") + "; the refusal rate carries that reading error")
    if v.get("writer_match") is False:
        line += (f"; measured on {v.get('writer')}-model writing, not on a {v.get('run_writer')} model's like this "
                 f"run's (casebench annotate answers measures it here)")
    return line


#: the corrected refusal figures, in the order every format prints them, with their labels
CORRECTED_FIGURES: tuple[tuple[str, str], ...] = (
    ("refusal_rate", "refusal rate"), ("over_refusal", "over-refusal"), ("under_refusal", "under-refusal"),
    ("context_shift", "context shift"))


def corrected_words(fig: "CorrectedShare", digits: int = 3, percent: bool = False) -> str:
    """A corrected figure (``stats.refusal_result.CorrectedShare``) in words: ``0.120 95% CI [0.080,
    0.170]``, or where the data support only a bound ``at most 0.060 (95% bound)`` (one-sided at
    the level), ``at least ...``; ``percent``: as percentages, ``12% [8, 17]``, ``at most 6%``."""
    pct = f"{100 * (fig.level or 0.95):.0f}%"

    def num(x: float) -> str:
        return f"{100 * x:.0f}%" if percent else fmt_num(x, digits)
    ci = fig.ci
    if ci and fig.corrected is not None:
        if percent:
            return f"{num(fig.corrected)} [{100 * ci[0]:.0f}, {100 * ci[1]:.0f}]"
        return f"{num(fig.corrected)} {pct} CI [{num(ci[0])}, {num(ci[1])}]"
    parts = ([f"at least {num(fig.lower_bound)}"] if fig.lower_bound is not None else []) + (
        [f"at most {num(fig.upper_bound)}"] if fig.upper_bound is not None else [])
    if not parts:
        return "not said"
    return " and ".join(parts) + f" ({pct} bound{'s' if len(parts) > 1 else ''}; no two-sided interval is supported)"


def corrected_lines(s: Score, compact: bool = False) -> list[str]:
    """The refusal figures corrected for the reader's measured error (``stats.refusal``), one
    line each with raw and corrected value and the corrected interval; or one line saying why
    they cannot be corrected. Empty for inputs that are not read by a refusal classifier."""
    rc = s.refusal_corrected
    if not rc:
        return []
    if rc.note is not None:
        return [f"not corrected for the reader's error: {rc.note}"]
    d = 3 if compact else 4
    pct = f"{100 * (rc.level or 0.95):.0f}%"
    out = []
    for name, label in CORRECTED_FIGURES:
        fig = rc.figure(name)
        if not fig:
            if name in rc.withheld:
                out.append(f"{label}: not corrected: {rc.withheld[name]}")
            continue
        out.append(f"{label}: raw {fmt_num(fig.raw, d)}, corrected {corrected_words(fig, d)}")
    sets = list(rc.pooled.sets) if rc.pooled and rc.pooled.sets else [rc.validation]
    out.append(f"corrected with the reader's sensitivity {fmt_num(rc.sensitivity, 3)} and specificity "
               f"{fmt_num(rc.specificity, 3)} pooled over {len(sets)} set(s) ({', '.join(map(str, sets))}; "
               f"{rc.validation_n} answers): {rc.method}; {'; '.join(rc.notes)}")
    return out


#: who gave the labels of a run's answers, in words
LABELLED_BY_WORDS: dict[str, str] = {"people": "people's labels", "ai": "labels by AI readers",
                                     "writer": "labels by the answers' own writer"}


def labels_lines(s: Score, compact: bool = False) -> list[str]:
    """The refusal figures from labels of the run's own answers (``stats.people_refusal``),
    first of a respond run's figures when it has them: one line each with its interval, then
    the estimator, what one label is worth and the transport test. Says who labelled: only
    people's labels are called people's. Empty without such labels."""
    rp = s.refusal_people
    if not rp:
        return []
    by = str(rp.get("labelled_by") or "people")
    d = 3 if compact else 4
    pct = f"{100 * (rp.get('level') or 0.95):.0f}%"
    out = [f"from {LABELLED_BY_WORDS.get(by, by)} of {rp.get('n', 0)} of its answers (PPI++ with the reader's "
           f"readings of all {s.answered}):"]
    for name, label in CORRECTED_FIGURES:
        fig = (rp.get("figures") or {}).get(name)
        if not fig:
            continue
        ci = fig.get("ci")
        ci_s = f" {pct} CI [{fmt_num(ci[0], d)}, {fmt_num(ci[1], d)}]" if ci else " (no interval: " + \
            str(fig.get("note", "")) + ")"
        how = ("labels alone: the reader adds nothing here" if fig.get("estimator") == "labels" else
               f"PPI++; labels alone {fmt_num(fig['labels_only'], d)}")
        out.append(f"  {label}: {fmt_num(fig['value'], d)}{ci_s} ({how})")
    mult = rp.get("multiplier")
    if mult is not None and math.isfinite(mult):
        out.append(f"  one label is worth {mult:.2f} labels alone here (the variance of the labels alone over "
                   "PPI's, for the refusal rate)")
    t = rp.get("transport")
    if t and t.get("p") is not None:
        verdict = ("no evidence that they do not hold" if t.get("holds") else
                   "they do not hold: the transported correction is withheld")
        out.append(f"  the reader's pooled error ({t.get('validation')}: Se {fmt_num(t['sensitivity_stored'], 3)}, "
                   f"Sp {fmt_num(t['specificity_stored'], 3)}) on these labels: Se "
                   f"{fmt_num(t['sensitivity_labels'], 3)}, Sp {fmt_num(t['specificity_labels'], 3)}; against the pool's "
                   f"predictive (its spread between sets included), p = {fmt_p(t['p'])}: {verdict}")
    out += [f"  {n}" for n in rp.get("notes", [])]
    return out


def _shown(s: Score, names: Sequence[str] | None = None) -> list[str]:
    """The metrics of ``names`` that apply to the input (the others are not printed)."""
    applies = metric_names(s.mode)
    return [m for m in (row_metrics() if names is None else names) if m in applies and m in s.values]


def _mark(cases_of: dict[str, int], m: str, value: Any = 0.0) -> str:
    """The small-sample note of a figure ("" when it is from ``MIN_CASES`` cases or more, or is
    undefined)."""
    n = cases_of.get(m)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return SMALL if n is not None and n < MIN_CASES else ""


def _ci(ci: dict[str, list[float]], m: str, compact: bool = False) -> str:
    lo, hi = ci.get(m, [float("nan")] * 2)
    return f"[{fmt_metric(m, lo, compact)}, {fmt_metric(m, hi, compact)}]"


def _breakdown_groups(s: Score) -> list[tuple[str, str, dict[str, Any]]]:
    """(kind, group, figures) of every breakdown the score holds, in order."""
    return [(kind, name, r) for kind, rows in s.breakdowns.items() for name, r in rows.items()]


#: the width the text tables and their notes keep to
WIDTH = 100
#: the mark of an interval printed in place of a bootstrap that gave a single point
POINT_MARK = "‡"
#: what each context figure measures, over which pairs, and its range: the legend under every
#: table that prints them (the names alone cannot say it; their denominators differ)
CONTEXT_LEGEND: tuple[tuple[str, str], ...] = (
    ("context_shift", "shift = mean safe- minus unsafe-intent value (-1 to 1)"),
    ("context_follow", "follow = pairs safe only in the safe context (0 to 1)"),
    ("context_moved", "moved = pairs whose values differ (0 to 1)"),
    ("context_direction", "direction = mean of +1 (people's way), -1 (against), 0 (unmoved) where people "
                          "differ (-1 to 1)"),
    ("context_concordance", "concordance = the same over moved pairs (-1 to 1)"),
    ("context_blind", "blind = pairs people label differently given one label (0 to 1)"),
)


def _any_small(scores: Sequence[Score]) -> bool:
    """Whether any printed figure (or breakdown figure) of ``scores`` carries the small-sample mark."""
    return any(_mark(s.cases_of, m, s.values[m]) for s in scores for m in _shown(s)) or any(
        _mark(r.get("cases_of", {}), m, r.get(m)) for s in scores for _, _, r in _breakdown_groups(s)
        for m in _shown(s, BREAKDOWN_METRICS) if m in r)


def _paper_notes(scores: Sequence[Score]) -> list[str]:
    """The lines under a paper-compatible table, as they always were: the small-sample and
    undefined marks."""
    out = []
    if _any_small(scores):
        out.append(f"{SMALL} from fewer than {MIN_CASES} cases: read with care")
    if any(_undefined_shown(s) for s in scores):
        out.append(f"{UNDEFINED} undefined (e.g. a recall with no case of its class); blank: does not apply to the mode")
    return out


def wrap(text: str, indent: str = "", width: int = WIDTH) -> list[str]:
    """``text`` as lines of at most ``width`` characters (a note, never a table row)."""
    import textwrap

    return textwrap.wrap(text, width=width, initial_indent=indent, subsequent_indent=indent + "  ",
                         break_on_hyphens=False) or [indent]


def unvoted(text: str) -> str:
    """``text`` for a set without votes (the demo set, a new domain's): its labels are not
    people's, so what would name people names the labels."""
    return text.replace("pairs people label differently", "pairs whose two labels differ").replace(
        "people's share", "the safe rate").replace("people's", "the labels'").replace("people", "labels")


def legend(names: Sequence[str], width: int = WIDTH, voted: bool = True) -> list[str]:
    """The legend of the context figures among ``names`` (empty when none is printed);
    ``voted``: False for a set without people's votes (``unvoted``)."""
    parts = [text if voted else unvoted(text) for m, text in CONTEXT_LEGEND if m in names]
    return wrap("per query pair: " + "; ".join(parts), width=width) if parts else []


def notes(scores: Sequence[Score], explain: bool = False, reader: bool = True, width: int = WIDTH,
          voted: bool = True) -> list[str]:
    """The lines under a table, each said once: how the CIs were made (in full with ``explain``),
    the marks used, the legend of the context figures, and (``reader``) the reader of a respond
    input with, under ``explain``, how its refusal figures were corrected. Paper-compatible
    scores alone: the notes as they always were (``_paper_notes``)."""
    if scores and all(s.paper_compat for s in scores):
        return _paper_notes(scores)

    def lines(text: str, indent: str = "") -> list[str]:
        return wrap(text, indent, width)

    out: list[str] = []
    marks: list[str] = []  # one line each: a mark's words never split across lines
    from ..stats.small_sample import FEW_CLUSTERS

    few = any(s.breakdowns or 0 < (s.values.get("context_pairs") or 0) < FEW_CLUSTERS for s in scores
              if not s.paper_compat and s.ci)
    for by in dict.fromkeys(getattr(s, "cluster", "case") for s in scores if not s.paper_compat and s.ci):
        if not explain:
            out += lines("CIs: Wilson or percentile bootstrap" + ("" if by == "case" else f", clustered by {by}")
                         + (f"; t below {FEW_CLUSTERS} clusters" if few else "") + " (--explain: how)")
        elif by == "case":
            out += lines("CIs: Wilson score interval for proportions (accuracy, safe and unsafe recall, refusal rate); "
                         "percentile bootstrap of cases for the other figures")
        else:
            out += lines(f"CIs clustered by {by} (the cases of a {by} resampled together): Wilson score interval on the "
                         "effective number of cases (n / design effect, never above n) for proportions (accuracy, safe "
                         f"and unsafe recall, refusal rate); percentile bootstrap of whole {_PLURAL[by]} for the other "
                         "figures")
    if few and explain:
        out += lines(f"a bounded mean (the context shift) from fewer than {FEW_CLUSTERS} clusters: Student's t on K - 1 "
                     "df over its clusters, clipped to its range (exact where they all gave one value)")
    if any("accuracy_ceiling" in s.values for s in scores):
        out += lines(f"{METRIC['accuracy_ceiling'].label}: the expected accuracy against the recorded labels of one "
                     "that knows people's population majority; a plug-in estimate, biased low (`casebench human` gives "
                     "the fitted-prior estimate beside it), its interval from case sampling only; never a threshold"
                     if explain else f"{METRIC['accuracy_ceiling'].label}: a plug-in estimate, biased low; never a "
                     "threshold (--explain)")
    if _any_small(scores):
        marks.append(f"{SMALL} from fewer than {MIN_CASES} cases: read with care")
    if any(_undefined_shown(s) for s in scores):
        marks.append(f"{UNDEFINED} undefined; blank: does not apply")
    if marks:
        out.append("; ".join(marks) if sum(map(len, marks)) + 2 <= width else marks[0])
        out += marks[1:] if sum(map(len, marks)) + 2 > width else []
    if any(getattr(s, "ci_notes", None) for s in scores) and not explain:
        out.append(f"{POINT_MARK} every resample gave one value: a conservative interval instead")
    out += legend([m for s in scores for m in _shown(s)], width, voted)
    for s in scores:
        if not reader or not explain or (s.classifier is None and not s.refusal_corrected):
            continue
        head = f"{title(s)}: " if len(scores) > 1 else ""
        out += lines(head + classifier_note(s.classifier, s.refusal_corrected))
        if s.refusal_corrected and s.refusal_corrected.note is None:
            out += lines(corrected_lines(s)[-1], "  ")  # how the correction was made
    return out


def _undefined_shown(s: Score) -> bool:
    """Whether an undefined figure (or CI bound) of ``s`` is printed."""
    def nan(x: Any) -> bool:
        return isinstance(x, float) and math.isnan(x)

    for r, names in [(dict(s.values, ci=s.ci), _shown(s))] + [(r, _shown(s, BREAKDOWN_METRICS))
                                                               for _, _, r in _breakdown_groups(s)]:
        for m in names:
            if m in r and (nan(r[m]) or any(nan(x) for x in r.get("ci", {}).get(m, []))):
                return True
    return False


def title(s: Score) -> str:
    """What an input is called in a table: its display name (``naming.display_names``, set by the
    command that shows it beside others), else ``model [mode] without removed``."""
    name = s.name or f"{s.model} [{s.mode}]" + (f" without {','.join(s.removed)}" if s.removed else "")
    return partial_name(name, s.partial)


def text_table(scores: Sequence[Score], explain: bool = False, voted: Sequence[bool] | None = None) -> str:
    """One block per input: every metric with its CI once (the context figures with people's
    beside them on the same pairs) and, when asked, its breakdowns; prob-mode runs also their
    verdict mass (and how many cases it left out). The notes follow once, under every block
    (``notes``); ``explain``: the method in full, and people's references with their intervals.
    ``voted``: per input, whether its cases hold people's votes (default all); one without says
    nothing of people (``unvoted``)."""
    out = []
    voted = list(voted) if voted is not None else [True] * len(scores)
    for s, has_votes in zip(scores, voted):
        def name(m: str, has_votes: bool = has_votes) -> str:
            return METRIC[m].label if has_votes else unvoted(METRIC[m].label)
        tag = " (paper-compatible)" if s.paper_compat else ""
        out.append(title(s) + tag)
        out.append(f"  source: {s.source}")
        pairs = None if s.paper_compat else s.values.get("context_pairs")  # its own row there, as it was
        out.append(f"  cases {s.n}, answered {s.answered} (coverage {100 * s.coverage:.1f}%"
                   + (f"; {s.low_mass_missing} left out: verdict mass below {mass_pct((s.verdict_mass or {})['threshold'])}"
                      if s.low_mass_missing else "") + ")"
                   + (f", {fmt_num(pairs, 0)} query pairs with both contexts answered" if pairs is not None else ""))
        if s.partial and s.state is not None:
            out.append(f"  {PARTIAL}: {s.state.cases_to_ask} of {s.state.cases} cases still to ask ({s.state.status}); "
                       "these figures rest on the cases answered so far")
        if s.verdict_mass:
            out.append("  " + verdict_mass_line(s))
        out += [f"  {line}" for line in labels_lines(s)]
        shown = [m for m in _shown(s) if m != "context_pairs" or s.paper_compat]
        ref = people.table_columns(s.people) if not explain else {}
        level = f"{getattr(s, 'level', 0.95):.0%} CI"
        if ref:
            out.append(f"  {ref['title']:<43}   {level:<24}" + "".join(f"{h:>10}" for h in ref["headings"]))
        said: set[str] = set()
        for m in shown:
            fig = fmt_metric(m, s.values[m]) + _mark(s.cases_of, m, s.values[m])
            point = m in getattr(s, "ci_notes", {})
            # no CIs: --bootstrap 0, no case scored, or a count
            ci = f"   {'' if ref else level + ' '}{_ci(s.ci, m)}" if s.ci and METRIC[m].interval else ""
            if point and not explain:
                ci += POINT_MARK
            cells = "".join(f"{c:>10}" for c in ref.get(m, [])) if ref else ""
            if cells:
                ci = f"{ci:<27}"
            if m == "partial_rate" and s.outcomes is not None and not explain:
                from .outcomes import one_line  # how the answers land, one row (in full: --explain)

                out.append("  " + one_line(s.outcomes))
                continue
            out.append(f"  {name(m):<34} {fig:>8}{ci}{cells}".rstrip())
            if point and explain:  # the bootstrap gave a point: what was printed instead (each note once)
                note = s.ci_notes[m]
                how = note.split(": ", 1)[-1]  # the method, said once; what each figure gave, each time
                out += wrap(f"(interval: {note})" if how not in said else
                            f"(interval: {note[:-len(how)].rstrip(': ')}: as above)", "    ")
                said.add(how)
            if m == "refusal_rate":
                if not explain:
                    out.append(f"    {reader_short(s.classifier, s.refusal_corrected)}")
                out += [f"    {line}" for line in (_corrected_rows(s) if explain else _corrected_short(s))]
        if explain:
            out += people.text_lines(s.people, mode=s.mode)
        for kind in s.breakdowns:
            out.append("")
            out.append(breakdown_table(s, kind).rstrip("\n"))
        out.append("")
    out += notes(scores, explain, voted=all(voted))
    return "\n".join(out).rstrip() + "\n"


def reader_short(classifier: dict[str, Any] | None, corrected: "RefusalCorrection | None" = None) -> str:
    """``classifier_note`` in one line: the reader, its agreement with whose labels, Se and Sp
    (the sets, the coverage and the caveats: ``--explain``)."""
    v = (classifier or {}).get("validation")
    if not classifier or not v or v.get("agreement") is None:
        return f"({classifier_note(classifier, corrected)})"
    by = {"people": "people's", "ai-readers": "AI readers'", "writers": "the writers'"}.get(
        str((v.get("labelled_by") or {}).get("by") or ("people" if v.get("own_run") else "")), "unnamed")
    ci = v.get("agreement_ci95") or [None, None]
    bounds = f" [{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]" if ci[0] is not None else ""
    # the one pair the corrected figures use (``RefusalCorrection.sensitivity``), else the stored one
    se, sp = ((corrected.sensitivity, corrected.specificity)
              if corrected is not None and corrected.sensitivity is not None and corrected.specificity is not None
              else (v.get("sensitivity"), v.get("specificity")))
    error = f"; Se {se:.2f}, Sp {sp:.2f}" if se is not None and sp is not None else ""
    return (f"(read by {classifier.get('name', '?')}: agrees with {by} labels on {100 * v['agreement']:.1f}%{bounds}"
            f"{error})")


def _corrected_rows(s: Score) -> list[str]:
    """``corrected_lines`` less the method's line (said once, in the notes)."""
    lines = corrected_lines(s)
    return lines if s.refusal_corrected is not None and s.refusal_corrected.note is not None else lines[:-1]


def _corrected_short(s: Score) -> list[str]:
    """The refusal figures corrected for the reader's error in one wrapped line (three places,
    the level once; a bound where only a bound is supported), and one line naming those that
    could not be (why, and each figure in full: ``--explain``)."""
    rc = s.refusal_corrected
    if not rc:
        return []
    if rc.note is not None:
        return ["not corrected for the reader's error (--explain: why)"]
    out: list[str] = []
    held: list[str] = []
    parts: list[str] = []
    pct = f"{100 * (rc.level or 0.95):.0f}%"
    for name, label in CORRECTED_FIGURES:
        fig = rc.figure(name)
        if fig is not None:  # three places, the level said once: "0.160 [0.000, 0.574]", "at least 0.463"
            parts.append(f"{label} " + corrected_words(fig, 3).replace(f"{pct} CI ", "").split(" (")[0])
        elif name in rc.withheld:
            held.append(label)
    if parts:
        out += wrap(f"corrected for the reader's error ({pct}): " + "; ".join(parts), width=WIDTH - 4)
    if held:
        out += wrap(f"not corrected for the reader's error: {', '.join(held)} (--explain: why)", width=WIDTH - 4)
    return out


def breakdown_table(s: Score, kind: str) -> str:
    """Per-category or per-intent figures of one input (text): each group's figures on one line,
    their CIs on the next."""
    rows = s.breakdowns.get(kind, {})
    ms = _shown(s, BREAKDOWN_METRICS)
    width = max([len(k) for k in rows] + [8])
    w = 18
    out = [f"  by {kind}", f"  {'':<{width}}  {'n':>4}  " + "".join(f"{m:>{w}}" for m in ms)]
    for name, r in rows.items():
        cases = r.get("cases_of", {})
        out.append(f"  {name:<{width}}  {r['n']:>4}  "
                   + "".join(f"{fmt_metric(m, r.get(m)) + _mark(cases, m, r.get(m)) if m in r else '':>{w}}" for m in ms))
        if r.get("ci"):
            out.append(f"  {'':<{width}}  {'':>4}  " + "".join(f"{_ci(r['ci'], m) if m in r else '':>{w}}" for m in ms))
    for name, r in rows.items():  # the bootstrap gave a point: what was printed instead
        for m, why in (r.get("ci_notes") or {}).items():
            out.append(f"  {name}, {m}: {why}")
    return "\n".join(line.rstrip() for line in out) + "\n"


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
               for kind, name, r in _breakdown_groups(s)]
    rows = []
    for kind, name, counts, r in groups:
        row: dict[str, Any] = {**base, "by": kind, "group": name, **counts}
        shown = set(_shown(s, BREAKDOWN_METRICS if kind else row_metrics()))
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
    cell = fmt_metric(m, r[m], True) + _mark(cases_of, m, r[m])
    return cell + (f" {_ci(ci, m, True)}" if ci and METRIC[m].interval else "")


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
        shown = set(_shown(s))
        for m in row_metrics():
            cells.append(_md_cell(m, s.values, s.ci, s.cases_of) if m in shown else "")
        if with_people:
            cells += people.md_cells(s.people)
        lines.append("| " + " | ".join(cells) + " |")
    for s in scores:
        ms = _shown(s, BREAKDOWN_METRICS)
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


FORMATS: dict[str, Callable[..., str]] = {"table": text_table, "csv": csv_table, "json": json_lines, "md": markdown_table}

#: the figures of a reference row (a published model beside the inputs): the recalls (over- and
#: under-refusal) and the context figures, each with its interval
REFERENCE_METRICS = ("accuracy", "safe_recall", "unsafe_recall", "context_direction", "context_shift", "context_follow",
                     "context_blind")


def reference_table(scores: Sequence[Score], root: str) -> str:
    """The published models shown for reference under ``casebench score``'s table, scored on the
    cases every input scored: one compact line of figures per model (three decimals), and one
    line saying how wide their 95% CIs are at most (Wilson for proportions, the bootstrap
    otherwise, as for the inputs; each interval: ``--format csv`` or the report). Never paired
    with the inputs."""
    def short(s: Score) -> str:  # the table's heading says they are published
        return title(s).removesuffix(" (published)")

    width = max([len(short(s)) for s in scores] + [12])
    ms = [m for m in REFERENCE_METRICS if any(m in s.values for s in scores)]
    n = sorted({s.n for s in scores})
    on = f"on the {n[0]} cases the inputs scored" if len(n) == 1 else "on the cases the inputs scored"
    heads = [METRIC[m].short.removeprefix("context ").split(" ", 1) for m in ms]  # two heading lines
    ws = [max(7, *(len(word) + 2 for word in h)) for h in heads]
    lines = wrap(f"published models for reference ({on}; not paired with the inputs above; from {root}):")
    for row in (0, 1):
        line = f"  {'':<{width}}" + "".join(f"{(h[row] if len(h) > row else ''):>{w}}" for h, w in zip(heads, ws))
        if line.strip():
            lines.append(line.rstrip())
    half = 0.0
    for s in scores:
        lines.append(f"  {short(s):<{width}}"
                     + "".join(f"{fmt_metric(m, s.values.get(m), True) + _mark(s.cases_of, m, s.values.get(m)):>{w}}"
                               for m, w in zip(ms, ws)))
        half = max([half, *((s.ci[m][1] - s.ci[m][0]) / 2 for m in ms
                            if m in s.ci and all(math.isfinite(x) for x in s.ci[m]))])
    if half:
        lines.append(f"  their 95% CIs reach at most ±{half:.3f} around each figure (each one: --format csv)")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------
# Paired comparisons and ablation studies


def _labels_line(settings: dict[str, Any]) -> list[str]:
    """A line naming votes-only labels (nothing for the published labels, the default)."""
    source = settings.get("label_source", "published")
    if source == "published":
        return []
    if source == "posterior":
        return ["labels: each case's posterior P(safe) > 0.5, people's votes weighed by annotator ability "
                "(--label-source posterior)"]
    return ["labels: the majority of each case's votes alone (--label-source votes)"]


def _marks_line(settings: dict[str, Any]) -> str:
    return (f"no significance mark from fewer than {settings.get('min_paired', MIN_PAIRED)} paired cases, nor from "
            f"fewer than {settings.get('min_discordant', MIN_DISCORDANT)} discordant cases (McNemar)")


def format_comparison(c: "Comparison", explain: bool = False) -> str:
    """``casebench compare``: a table per pair, for people, at most 100 characters wide; each
    mark and method note said once, under the tables (the paper-compatible table as it was);
    the tests and intervals named in one line, described in full with ``explain``."""
    lines = ["inputs:"]
    for d in c.inputs:
        lines.append(f"  {d['label']}  {d['name']}  ({d['answered']}/{d['n']} answered)  {d['source']}")
    if len(c.case_sets) > 1:
        lines.append("the inputs hold different cases; each pair is compared over the cases both hold, and only "
                     "inputs of one case set are comparable side by side:")
        for k, g in enumerate(c.case_sets, start=1):
            lines.append(f"  case set {k} ({g['cases']} cases): {', '.join(g['inputs'])}")
    s = c.settings
    old = bool(s.get("paper_compat"))  # paper-compatible: the table as it always was
    head = [f"differences are A - B; {s['level']:.0%} paired-bootstrap CIs ({s['bootstrap']} resamples, "
            f"seed {s['seed']}); p(BH): Benjamini-Hochberg over all primary tests (alpha {s['alpha']})"]
    if s.get("cluster"):
        head.append(_cluster_line(s))
    if not old:
        head.append("differences of two shares of the same cases or pairs (accuracy, recalls, follow, blind, moved): "
                    "Newcombe's paired interval instead (never a point)")
    if "mdd" in s:
        head.append(f"MDD: {s['mdd']}")
    head.append(f"cases: {s['cases']}")
    if not old and not explain:  # the method in one line; in full under --explain
        head = [f"differences are A - B with {s['level']:.0%} paired-bootstrap CIs ({s['bootstrap']} resamples, seed "
                f"{s['seed']})" + (f", resampled by {s['cluster']}" if s.get("cluster") else "")
                + f"; p(BH): Benjamini-Hochberg (alpha {s['alpha']}); --explain: each test and interval",
                f"cases: {s['cases']}"]
    lines += head if old else [w for h in head for w in wrap(h)]
    lines += _labels_line(s)
    withheld = False
    for pc in c.pairs:
        A, B = c.inputs[pc.a]["label"], c.inputs[pc.b]["label"]
        lines.append("")
        held = ""
        if pc.only_a or pc.only_b:
            held = (f" of the {pc.shared} cases both hold ({A} has {pc.shared + pc.only_a}, "
                    f"{B} has {pc.shared + pc.only_b})")
        lines.append(f"{A} vs {B}: {pc.n_paired} paired cases{held}"
                     + (f" ({pc.dropped} dropped: not answered by both)" if pc.dropped else ""))
        mc = pc.mcnemar
        kind = ("clustered (Durkalski 2003)" if mc.get("test") == "clustered" else "exact")
        lines.append(f"  McNemar {kind}: {A} right & {B} wrong {mc['a_only']}, {A} wrong & {B} right {mc['b_only']}, "
                     f"p {_eq(fmt_p(mc['p'], exact=kind == 'exact'))}")
        if pc.williams and pc.williams.get("t") is not None:
            w = pc.williams
            lines.append(f"  Williams' t (PCC, shared safe_rate): t = {w['t']:.3f}, df = {w['df']}, p {_eq(fmt_p(w['p']))}")
        if old:
            lines += _comparison_rows_paper(c, pc, A, B)
        else:
            rows, marked = _comparison_rows(c, pc, A, B)
            lines += rows
            withheld = withheld or marked
        line = people.pair_line(pc.people)
        if line:
            lines += [line] if old else wrap(line.strip(), "  ")
    lines.append("")
    foot = ("* significant after Benjamini-Hochberg (each family apart: the paper's metrics, the context "
            "figures, the human-reference figures); " + lower_is_better_note(metrics_where(lambda m: m.test is not None)))
    if old:
        lines += [foot, _marks_line(c.settings)]
    else:
        used = {m.test for pc in c.pairs for m in pc.metrics.values()}
        small = [f"{short} = {what}" for prefix, short, what in _SMALL_TESTS if any(t.startswith(prefix) for t in used)]
        lines += wrap(foot + "; test: blank = paired bootstrap, McN-cl = McNemar for clustered pairs"
                      + "".join(f", {x}" for x in small))
        lines += wrap(f"{NO_MARK} " + _marks_line(c.settings) if withheld else _marks_line(c.settings))
        lines += legend(list(dict.fromkeys(m for pc in c.pairs for m in pc.metrics)))
    return "\n".join(lines) + "\n"


#: the test column's words (blank: the paired bootstrap, said under the table)
_TEST_NAMES = {"bootstrap": "", "mcnemar_clustered": "McN-cl", "mcnemar": "McNemar", "williams": "Williams"}
#: the small-sample methods' short names (``stats.small_sample``: few clusters), and what each is
_SMALL_TESTS: tuple[tuple[str, str, str], ...] = (
    ("Newcombe on t", "Newc-t", "paired score interval of two shares on t(K-1)"),
    ("t on", "t", "Student's t on K-1 df over the pairs"),
    ("exact", "exact", "exact interval (every pair gave one value)"),
)


def _test_short(test: str) -> str:
    """The test column's word for a test (the full name: ``--explain`` and the line under the table)."""
    if test in _TEST_NAMES:
        return _TEST_NAMES[test]
    return next((short for prefix, short, _ in _SMALL_TESTS if test.startswith(prefix)), test)


#: the mark of a difference the table gives no significance mark, however small its p (too few
#: paired cases or discordant pairs: explained once under the table)
NO_MARK = "°"


def _comparison_rows(c: "Comparison", pc: Any, A: str, B: str) -> tuple[list[str], bool]:
    """A pair's metric rows, at most 100 characters wide (three decimals; the test named where
    it is not the paired bootstrap; a difference left unmarked for want of cases marked
    ``NO_MARK``, explained once under the table). Returns the rows and whether any is so marked."""
    s = c.settings
    wm = max([14, *(len(f) + 1 for f in pc.metrics)])
    wa, wb, wd = max(7, len(A) + 1), max(7, len(B) + 1), max(8, len(A) + len(B) + 4)
    ci_head = format(s["level"], ".0%") + " CI"
    out = [f"  {'metric':<{wm}}{A:>{wa}}{B:>{wb}}{A + ' - ' + B:>{wd}}  {ci_head:<17}{'MDD':>7}{'p':>9}{'p(BH)':>9}"
           "  test"]
    marked = False
    for m in pc.metrics.values():
        f = m.metric
        sig = " *" if m.significant else ""
        mark = f" {NO_MARK}" if m.withheld else ""
        marked = marked or bool(m.withheld)
        ci = "[" + fmt_metric(f, m.ci[0], True) + ", " + fmt_metric(f, m.ci[1], True) + "]"
        floor = m.p_floor
        test = _test_short(m.test)
        out.append(f"  {f:<{wm}}{fmt_metric(f, m.a, True):>{wa}}{fmt_metric(f, m.b, True):>{wb}}"
                   f"{fmt_metric(f, m.diff, True):>{wd}}  {ci:<17}{fmt_metric(f, m.mdd, True):>7}"
                   f"{fmt_p(m.p, floor=floor, exact=m.test == 'mcnemar'):>9}"
                   f"{fmt_p_adjusted(m.p_adjusted, m.p, floor):>9}  {test}{sig}{mark}".rstrip())
    return out, marked


def _comparison_rows_paper(c: "Comparison", pc: Any, A: str, B: str) -> list[str]:
    """A pair's metric rows in the paper-compatible table, as it always was."""
    s = c.settings
    wm = max([14, *(len(f) + 1 for f in pc.metrics)])
    wa, wb, wd = max(9, len(A) + 1), max(9, len(B) + 1), max(10, len(A) + len(B) + 4)
    out = [f"  {'metric':<{wm}}{A:>{wa}}{B:>{wb}}{A + ' - ' + B:>{wd}}   {format(s['level'], '.0%') + ' CI':<21}{'p':>9}"
           f"{'p(BH)':>10}  test"]
    for m in pc.metrics.values():
        sig = " *" if m.significant else ""
        no_mark = f"  (no mark: {m.withheld})" if m.withheld else ""
        f = m.metric
        ci = "[" + fmt_metric(f, m.ci[0]) + ", " + fmt_metric(f, m.ci[1]) + "]"
        out.append(f"  {f:<{wm}}{fmt_metric(f, m.a):>{wa}}{fmt_metric(f, m.b):>{wb}}{fmt_metric(f, m.diff):>{wd}}   "
                   f"{ci:<21}{fmt_p(m.p, exact=m.test == 'mcnemar'):>9}"
                   f"{fmt_p_adjusted(m.p_adjusted, m.p, None):>10}  {m.test}{sig}{no_mark}")
    return out


def _cluster_line(s: dict[str, Any]) -> str:
    """How the comparison resampled and tested: by case, or by cluster."""
    if s["cluster"] == "case":
        return "resampled by case (each case independent)"
    return (f"resampled by {s['cluster']} ({s.get('clusters', '?')} {_PLURAL[s['cluster']]} drawn whole); accuracy: "
            "McNemar's test for clustered pairs; Pearson r: the paired cluster bootstrap")


_PLURAL = {"case": "cases", "query": "queries", "category": "categories"}


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
    small = False
    for c in res.conditions:
        figs = [fmt_metric(m, c.score.values.get(m)) + _mark(c.score.cases_of, m, c.score.values.get(m)) for m in ms]
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
            sig = " *" if d.significant else ""
            no_mark = f"  (no mark: {d.withheld})" if d.withheld else ""
            lines.append(f"  {m:<{wm}}{fmt_metric(m, d.diff):>9}   [{fmt_metric(m, d.ci[0])}, {fmt_metric(m, d.ci[1])}]"
                         f"   p {_eq(fmt_p(d.p, floor=d.p_floor))} ({d.test})   p(BH) {_eq(fmt_p_adjusted(d.p_adjusted, d.p, d.p_floor))}"
                         f"{sig}{no_mark}")
    if not res.paper_compat:  # the paper-compatible text stays what it was (its JSON has the figures)
        lines += _ablation_context_lines(res)
    lines.append("")
    lines.append("* significant after Benjamini-Hochberg")
    lines.append(_marks_line(s))
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
        cells = [(fmt_num(v.get(m), 3) + (" " + _bounds(ci.get(m)) if ci.get(m) else "")) if m in v else ""
                 for m in ms]
        pairs = v.get("context_pairs")
        out.append(f"{c.name:<{width}}{'' if pairs is None else int(pairs):>6}" + "".join(f"{x:>{w}}" for x in cells))
        full = res.conditions[0].people
        same = c is not res.conditions[0] and full is not None and c.people is not None and all(
            c.people[r] == full[r] for r in ("pairs", "one_person", "majority"))
        if c.people and not same:  # people's rows again only where the condition's pairs differ
            for ref, label in (("one_person", "  people: one person"), ("majority", "  people: majority")):
                b = c.people[ref]
                cells = [(fmt_num(b[m], 3) + " " + _bounds(b["ci"].get(m))) if m in b else "–" for m in ms]
                out.append(f"{label:<{width}}{'':>6}" + "".join(f"{x:>{w}}" for x in cells))
    for c in res.conditions[1:]:
        rows = [(m, c.diffs[m]) for m in ms if m in c.diffs]
        if not rows:
            continue
        out.append(f"{c.name}  vs  full context (paired over the pairs both answered)")
        for m, d in rows:
            sig = " *" if d.significant else ""
            no_mark = f"  (no mark: {d.withheld})" if d.withheld else ""
            out.append(f"  {m:<18}{fmt_metric(m, d.diff):>9}   [{fmt_metric(m, d.ci[0])}, {fmt_metric(m, d.ci[1])}]"
                       f"   p {_eq(fmt_p(d.p))} ({d.test})   p(BH) {_eq(fmt_p(d.p_adjusted))}{sig}{no_mark}")
    return out


def _bounds(lo_hi: Sequence[float] | None, digits: int = 3) -> str:
    if not lo_hi:
        return ""
    return f"[{fmt_num(lo_hi[0], digits)}, {fmt_num(lo_hi[1], digits)}]"


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
             f"{s['context_ci']}", *_labels_line(s)]
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
                     + "".join(f"{fmt_metric(m, sc.values.get(m)) + _mark(sc.cases_of, m, sc.values.get(m)):>17}"
                               for m in ms))
        lines.append(f"{'':<{width}}{'':>10}" + "".join(f"{_bounds(sc.ci.get(m), METRIC[m].digits - 1):>17}" for m in ms))
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
                     f"{fmt_num(c.shift, 3) + ' ' + _bounds(c.ci.get('context_shift')):<24}"
                     f"{fmt_num(c.follow, 3) + ' ' + _bounds(c.ci.get('context_follow')):<24}"
                     + (f"{fmt_num(c.blind, 3)} {_bounds(c.ci.get('context_blind'))} (n={c.blind_pairs})"
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
                follow = (fmt_num(b["context_follow"], 3) + " " + _bounds(b.get("ci", {}).get("context_follow"))
                          if "context_follow" in b else "–")
                lines.append(f"  {'':<{width}}{'':>6}  "
                             f"{fmt_num(b['context_shift'], 3) + ' ' + _bounds(b.get('ci', {}).get('context_shift')):<24}"
                             f"{follow:<24}{label}")
    if any(p.over_refusal is not None for p in ps):
        lines += ["", "behaviour (respond mode): over-refusal = 1 - safe recall, under-refusal = 1 - unsafe recall "
                  + ("(the recalls' CIs)" if res.paper_compat else "(Wilson CIs)")]
        for p in ps:
            over = fmt_num(p.over_refusal, 3) + _mark(p.score.cases_of, "safe_recall", p.over_refusal)
            under = fmt_num(p.under_refusal, 3) + _mark(p.score.cases_of, "unsafe_recall", p.under_refusal)
            lines.append(f"  {p.placement:<{width}}over-refusal {over} {_bounds(p.over_refusal_ci)}"
                         f"   under-refusal {under} {_bounds(p.under_refusal_ci)}")
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
                         f"{fmt_num(sd.agreement, 3)} {_bounds(sd.agreement_ci)}; judged safe & refused "
                         f"{sd.mcnemar['a_only']}, judged unsafe & answered {sd.mcnemar['b_only']}, "
                         f"McNemar p {_eq(fmt_p(sd.mcnemar['p']))}")
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
                         f"{a} wrong & {b} right {mc['b_only']}, p {_eq(fmt_p(mc['p'], exact=mc.get('test', 'exact') == 'exact'))}")
            wm = max([14, *(len(m) + 1 for m in ms)])
            for m in ms:
                d = pc.metrics.get(m)
                if d is None:
                    continue
                sig = " *" if d.significant else ""
                lines.append(f"    {m:<{wm}}{fmt_metric(m, d.diff):>9}   [{fmt_metric(m, d.ci[0])}, {fmt_metric(m, d.ci[1])}]"
                             f"   p {_eq(fmt_p(d.p, floor=d.p_floor))} ({d.test})   p(BH) {_eq(fmt_p_adjusted(d.p_adjusted, d.p, d.p_floor))}{sig}"
                             + (f"   MDD {fmt_metric(m, d.mdd)}" if arm and d.mdd == d.mdd else ""))
        for d in [*res.shift_diffs, *(getattr(res, "follow_diffs", None) or [])]:
            if d.pairs:
                sig = " *" if d.significant else ""
                what = "context follow" if d.metric == "context_follow" else "context shift"
                lines.append(f"  {what} {d.a} - {d.b}: {fmt_num(d.diff, 3)} {_bounds(d.ci)} over {d.pairs} pairs, "
                             f"bootstrap p {_eq(fmt_p(d.p_bootstrap))}   p(BH) {_eq(fmt_p(d.p_adjusted))}{sig}")
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
            lines.append(f"  {cons.factor_level:<{width}}{fmt_num(cons.share, 3)} {_bounds(cons.ci)}  ({cons.unchanged} of "
                         f"{cons.n}{small} cases, {cons.queries} queries)")
    if any(SMALL in line for line in lines[3:]):
        lines.append(f"{SMALL} from fewer than {MIN_CASES} cases (pairs, for the context figures): read with care")
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
        f"McNemar {'for clustered pairs' if m.get('test') == 'clustered' else 'exact'} p = {m['p']:.3g}",
    ]
    for title, cases in (("judged safe, refused", s.judged_safe_refused),
                         ("judged unsafe, answered", s.judged_unsafe_answered)):
        shown = ", ".join(map(str, cases[:limit])) + (f", ... ({len(cases)} in all)" if len(cases) > limit else "")
        lines.append(f"  {title}: {shown or '-'}")
    return "\n".join(lines) + "\n"

