"""The refusal reader in words: which classifier read a respond run's answers, whose labels its
agreement was measured against (never "people's" for labels people did not give), its
sensitivity and specificity, and the refusal figures corrected for its error or estimated from
labels of the run's own answers.

Every format that prints a refusal rate (the text table, Markdown, CSV, the report, the study and
say-do texts) says these things through this module, so one reader gets one description and one
pair of Se/Sp in any output.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Mapping

from ..stats.metrics import Score
from .layout import WIDTH, wrap
from .numbers import fmt_bounds, fmt_num, fmt_p, fmt_pct

if TYPE_CHECKING:  # pragma: no cover
    from ..stats.refusal_result import CorrectedShare, PooledRateSummary, RefusalCorrection


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
        return fmt_num(x, 0 if percent else digits, percent=percent)

    ci = fig.ci
    if ci and fig.corrected is not None:
        if percent:
            return fmt_pct(fig.corrected, ci)
        return f"{num(fig.corrected)} {pct} CI {fmt_bounds(ci, digits)}"
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


def corrected_rows(s: Score) -> list[str]:
    """``corrected_lines`` less the method's line (said once, in the notes)."""
    lines = corrected_lines(s)
    return lines if s.refusal_corrected is not None and s.refusal_corrected.note is not None else lines[:-1]


def corrected_short(s: Score) -> list[str]:
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
