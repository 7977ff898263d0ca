"""The text table of scores (``casebench score``, the end of a run): one block per input with
every metric and its interval, people's references beside the context figures, breakdowns, and
the notes said once under the table; and the compact rows of published models shown for
reference under it.

Every metric's name, label, direction and digits come from the one table ``stats.metrics.METRICS``;
every figure, interval and count from the input's one scoring result (``stats.result``): this
module only lays them out, and a figure's small-sample mark reads the count it rests on
(``Score.cases_of``). Statistics never import this module (data flows forward).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from ..input_state import PARTIAL
from ..stats.metrics import BREAKDOWN_METRICS, METRIC, MIN_CASES, Score
from . import people
from .layout import CLUSTER_PLURAL, WIDTH, breakdown_groups, legend, shown_metrics, title, unvoted, wrap
from .numbers import SMALL, UNDEFINED, fmt_ci, fmt_metric, fmt_num, mass_pct, small_mark
from .refusal_text import classifier_note, corrected_lines, corrected_rows, corrected_short, labels_lines, reader_short


#: the mark of an interval printed in place of a bootstrap that gave a single point
POINT_MARK = "‡"


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
        shown = [m for m in shown_metrics(s) if m != "context_pairs" or s.paper_compat]
        ref = people.table_columns(s.people) if not explain else {}
        level = f"{getattr(s, 'level', 0.95):.0%} CI"
        if ref:
            out.append(f"  {ref['title']:<43}   {level:<24}" + "".join(f"{h:>10}" for h in ref["headings"]))
        said: set[str] = set()
        for m in shown:
            fig = fmt_metric(m, s.values[m]) + small_mark(s.cases_of, m, s.values[m])
            point = m in getattr(s, "ci_notes", {})
            # no CIs: --bootstrap 0, no case scored, or a count
            ci = f"   {'' if ref else level + ' '}{fmt_ci(s.ci, m)}" if s.ci and METRIC[m].interval else ""
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
                out += [f"    {line}" for line in (corrected_rows(s) if explain else corrected_short(s))]
        if explain:
            out += people.text_lines(s.people, mode=s.mode)
        for kind in s.breakdowns:
            out.append("")
            out.append(breakdown_table(s, kind).rstrip("\n"))
        out.append("")
    out += notes(scores, explain, voted=all(voted))
    return "\n".join(out).rstrip() + "\n"


def breakdown_table(s: Score, kind: str) -> str:
    """Per-category or per-intent figures of one input (text): each group's figures on one line,
    their CIs on the next."""
    rows = s.breakdowns.get(kind, {})
    ms = shown_metrics(s, BREAKDOWN_METRICS)
    width = max([len(k) for k in rows] + [8])
    w = 18
    out = [f"  by {kind}", f"  {'':<{width}}  {'n':>4}  " + "".join(f"{m:>{w}}" for m in ms)]
    for name, r in rows.items():
        cases = r.get("cases_of", {})
        out.append(f"  {name:<{width}}  {r['n']:>4}  "
                   + "".join(f"{fmt_metric(m, r.get(m)) + small_mark(cases, m, r.get(m)) if m in r else '':>{w}}" for m in ms))
        if r.get("ci"):
            out.append(f"  {'':<{width}}  {'':>4}  " + "".join(f"{fmt_ci(r['ci'], m) if m in r else '':>{w}}" for m in ms))
    for name, r in rows.items():  # the bootstrap gave a point: what was printed instead
        for m, why in (r.get("ci_notes") or {}).items():
            out.append(f"  {name}, {m}: {why}")
    return "\n".join(line.rstrip() for line in out) + "\n"


def verdict_mass_line(s: Score) -> str:
    """``verdict mass: median 3.1%, 12 of 12 cases below 50%`` (prob-mode runs)."""
    vm = s.verdict_mass or {}
    line = (f"verdict mass (probability on the verdict words): median {mass_pct(vm['median'])}, "
            f"{vm['below']} of {vm['known']} cases below {mass_pct(vm['threshold'])}")
    if s.paper_compat and vm["below"]:
        line += " (scored anyway, as the authors' script does)"
    return line


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
                         f"and unsafe recall, refusal rate); percentile bootstrap of whole {CLUSTER_PLURAL[by]} for the other "
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
    out += legend([m for s in scores for m in shown_metrics(s)], width, voted)
    for s in scores:
        if not reader or not explain or (s.classifier is None and not s.refusal_corrected):
            continue
        head = f"{title(s)}: " if len(scores) > 1 else ""
        out += lines(head + classifier_note(s.classifier, s.refusal_corrected))
        if s.refusal_corrected and s.refusal_corrected.note is None:
            out += lines(corrected_lines(s)[-1], "  ")  # how the correction was made
    return out


def _any_small(scores: Sequence[Score]) -> bool:
    """Whether any printed figure (or breakdown figure) of ``scores`` carries the small-sample mark."""
    return any(small_mark(s.cases_of, m, s.values[m]) for s in scores for m in shown_metrics(s)) or any(
        small_mark(r.get("cases_of", {}), m, r.get(m)) for s in scores for _, _, r in breakdown_groups(s)
        for m in shown_metrics(s, BREAKDOWN_METRICS) if m in r)


def _paper_notes(scores: Sequence[Score]) -> list[str]:
    """The lines under a paper-compatible table, as they always were: the small-sample and
    undefined marks."""
    out = []
    if _any_small(scores):
        out.append(f"{SMALL} from fewer than {MIN_CASES} cases: read with care")
    if any(_undefined_shown(s) for s in scores):
        out.append(f"{UNDEFINED} undefined (e.g. a recall with no case of its class); blank: does not apply to the mode")
    return out


def _undefined_shown(s: Score) -> bool:
    """Whether an undefined figure (or CI bound) of ``s`` is printed."""
    def nan(x: Any) -> bool:
        return isinstance(x, float) and math.isnan(x)

    for r, names in [(dict(s.values, ci=s.ci), shown_metrics(s))] + [(r, shown_metrics(s, BREAKDOWN_METRICS))
                                                               for _, _, r in breakdown_groups(s)]:
        for m in names:
            if m in r and (nan(r[m]) or any(nan(x) for x in r.get("ci", {}).get(m, []))):
                return True
    return False


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
                     + "".join(f"{fmt_metric(m, s.values.get(m), True) + small_mark(s.cases_of, m, s.values.get(m)):>{w}}"
                               for m, w in zip(ms, ws)))
        half = max([half, *((s.ci[m][1] - s.ci[m][0]) / 2 for m in ms
                            if m in s.ci and all(math.isfinite(x) for x in s.ci[m]))])
    if half:
        lines.append(f"  their 95% CIs reach at most ±{half:.3f} around each figure (each one: --format csv)")
    return "\n".join(lines) + "\n"
