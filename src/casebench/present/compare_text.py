"""The text of ``casebench compare`` (paired differences between inputs, with their tests and
Benjamini-Hochberg marks) and of the say-and-do comparison of a judge run with a respond run.

Each mark and method note is said once under the tables; the paper-compatible table stays as it
always was. The studies' texts (``study_text``) share the lines naming the labels used and the
significance marks withheld.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..stats.metrics import MIN_DISCORDANT, MIN_PAIRED, metrics_where
from . import people
from .layout import CLUSTER_PLURAL, legend, lower_is_better_note, wrap
from .numbers import fmt_metric, fmt_p, fmt_p_adjusted, p_eq
from .refusal_text import classifier_note

if TYPE_CHECKING:  # pragma: no cover
    from ..stats.compare import Comparison
    from ..stats.saydo import SayDo


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
    lines += label_source_line(s)
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
                     f"p {p_eq(fmt_p(mc['p'], exact=kind == 'exact'))}")
        if pc.williams and pc.williams.get("t") is not None:
            w = pc.williams
            lines.append(f"  Williams' t (PCC, shared safe_rate): t = {w['t']:.3f}, df = {w['df']}, p {p_eq(fmt_p(w['p']))}")
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
        lines += [foot, marks_line(c.settings)]
    else:
        used = {m.test for pc in c.pairs for m in pc.metrics.values()}
        small = [f"{short} = {what}" for prefix, short, what in _SMALL_TESTS if any(t.startswith(prefix) for t in used)]
        lines += wrap(foot + "; test: blank = paired bootstrap, McN-cl = McNemar for clustered pairs"
                      + "".join(f", {x}" for x in small))
        lines += wrap(f"{NO_MARK} " + marks_line(c.settings) if withheld else marks_line(c.settings))
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


def label_source_line(settings: dict[str, Any]) -> list[str]:
    """A line naming votes-only labels (nothing for the published labels, the default)."""
    source = settings.get("label_source", "published")
    if source == "published":
        return []
    if source == "posterior":
        return ["labels: each case's posterior P(safe) > 0.5, people's votes weighed by annotator ability "
                "(--label-source posterior)"]
    return ["labels: the majority of each case's votes alone (--label-source votes)"]


def marks_line(settings: dict[str, Any]) -> str:
    return (f"no significance mark from fewer than {settings.get('min_paired', MIN_PAIRED)} paired cases, nor from "
            f"fewer than {settings.get('min_discordant', MIN_DISCORDANT)} discordant cases (McNemar)")


def _cluster_line(s: dict[str, Any]) -> str:
    """How the comparison resampled and tested: by case, or by cluster."""
    if s["cluster"] == "case":
        return "resampled by case (each case independent)"
    return (f"resampled by {s['cluster']} ({s.get('clusters', '?')} {CLUSTER_PLURAL[s['cluster']]} drawn whole); accuracy: "
            "McNemar's test for clustered pairs; Pearson r: the paired cluster bootstrap")


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
