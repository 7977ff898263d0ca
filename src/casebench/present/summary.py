"""What a run found, in words: the answer to the benchmark's question for one model, first.

``casebench run`` ends with these lines (the main job leads with them) and the report gives each
model one line of the same kind. They say, for the mode the input was asked in:

* over-refusal: the share of what people find safe that the model refuses (respond mode) or
  calls unsafe (a judge mode): 1 - safe recall;
* under-refusal: the share of what people find unsafe that it answers or calls safe:
  1 - unsafe recall;
* whether it moves with the context: the context shift (mean over query pairs of the safe-intent
  context's value minus the unsafe-intent one's) and follow (share of pairs handled as safe in
  the safe-intent context and unsafe in the other), each with its interval, beside people's on
  the same pairs;
* in respond mode, how far the reader that turned answers into "answered" / "refused" can be
  trusted: whose labels it was checked against (people, AI readers following the guide, or the
  answers' writers; never "people" for labels people did not give), its agreement with them, and
  the sensitivity and specificity that drive the correction;
* then what to do next, never sending the user from one mode to another and back.

On a set labelled only by the intent of its contexts (the shipped demo set: no votes), "what
people find safe" is not known: the lines say "safe-intent" and "unsafe-intent" contexts
instead, and are marked as a demo.

Only formatting: every figure comes from ``stats`` (``Score``, and people's references as the
input's one scoring result holds them, ``result.PeopleReferences``); every fact about the run
from the object that owns it (the mode's words from the mode, the kind of writer from the reader's
validation, the small-sample threshold from ``metrics.MIN_CASES``).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Mapping

from .numbers import fmt_figure, fmt_pct

if TYPE_CHECKING:  # pragma: no cover
    from ..stats.metrics import Score
    from ..stats.result import PeopleReferences
    from ..stats.refusal_result import RefusalCorrection

__all__ = ["verdict_line", "summary_lines", "next_steps"]


def _complement(score: "Score", name: str) -> tuple[float | None, list[float] | None, int]:
    """1 - ``name`` (a recall) with its interval flipped, and the cases it is from."""
    v = score.values.get(name)
    ci = score.ci.get(name)
    n = int(score.cases_of.get(name, 0))
    if v is None or not math.isfinite(v):
        return None, None, n
    return 1.0 - v, ([1.0 - ci[1], 1.0 - ci[0]] if ci and len(ci) == 2 else None), n


def verdict_line(score: "Score", people_follow: float | None = None) -> str:
    """One line of what the model does: "refuses X% of what people find safe, answers Y% of what
    people find unsafe, follows context in Z% of pairs; people's majority: W%"."""
    unsafe_word, safe_word = score.mode.words
    over, _, _ = _complement(score, "safe_recall")
    under, _, _ = _complement(score, "unsafe_recall")
    follow = score.values.get("context_follow")
    parts = [f"{unsafe_word} {fmt_pct(over)} of what people find safe",
             f"{safe_word} {fmt_pct(under)} of what people find unsafe"]
    rp = getattr(score, "refusal_people", None) or {}
    figs = rp.get("figures") or {}
    if figs.get("over_refusal") and figs.get("under_refusal"):
        # a run with labels of its own answers leads with the figures from them (PPI++)
        from .refusal_text import LABELLED_BY_WORDS

        by = str(rp.get("labelled_by") or "people")
        o, u = figs["over_refusal"], figs["under_refusal"]
        parts = [f"{unsafe_word} {fmt_pct(o['value'], o['ci'])} of what people find safe",
                 f"{safe_word} {fmt_pct(u['value'], u['ci'])} of what people find unsafe "
                 f"(from {LABELLED_BY_WORDS.get(by, by)} of {rp.get('n', 0)} answers; as read: {fmt_pct(over)} and "
                 f"{fmt_pct(under)})"]
    if follow is not None and math.isfinite(follow):
        parts.append(f"follows context in {fmt_pct(follow)} of pairs")
    line = ", ".join(parts)
    if people_follow is not None and math.isfinite(people_follow):
        line += f"; people's majority: {fmt_pct(people_follow)}"
    return line


#: the first screen's width: every line it prints fits (a bare path may run over)
SCREEN_WIDTH = 100


def _labellers(validation: Mapping[str, Any]) -> str:
    """Who labelled a reader's validation set, in two or three words (never "people" for labels
    people did not give; ``refusal_text.who_labelled`` says it in full)."""
    info = validation.get("labelled_by") or ({"by": "people"} if validation.get("own_run") else None)
    by = (info or {}).get("by")
    return {"people": "people", "ai-readers": "AI readers", "writers": "writers"}.get(
        str(by), "labellers not recorded")


def _reader_line(classifier: Mapping[str, Any] | None, corrected: "RefusalCorrection | None" = None) -> str:
    """The first screen's reader line: which reader, on what it was checked and who labelled that
    set (never "people" for labels people did not give), and the sensitivity and specificity that
    drive the correction (pooled over the validation's sets when the correction pools them).
    The agreement, the sets one by one and the caveats live in ``score`` and the report."""
    if not classifier:
        return "reader: not recorded"
    name = classifier.get("name") or classifier.get("spec") or "the refusal classifier"
    val = classifier.get("validation")
    if not val:
        return f"reader: {name}, never checked on labelled answers: check a sample of its readings by hand"
    pooled = corrected.pooled if corrected is not None else None
    if corrected is not None and pooled is not None:
        # the one pair the corrected figures use (``RefusalCorrection.sensitivity``), never another
        se = corrected.sensitivity if corrected.sensitivity is not None else pooled.sensitivity.estimate
        sp = corrected.specificity if corrected.specificity is not None else pooled.specificity.estimate
        k = len(pooled.sets)
    else:
        se, sp, k = val.get("sensitivity"), val.get("specificity"), 1
    n = corrected.validation_n if corrected is not None and pooled is not None else None
    by_people = len(pooled.labelled_by_people) if pooled is not None else 0
    sets = (f" (people: {by_people} of {k} sets)" if by_people else f" ({k} sets)") if k > 1 else ""
    error = f": Se {se:.2f}, Sp {sp:.2f}" if se is not None and sp is not None else ""
    return _fit(f"reader: {name}, checked on {n or val.get('n', '?')} answers labelled by {_labellers(val)}{sets}{error}",
                f"reader: {name}, checked on {n or val.get('n', '?')} answers labelled by {_labellers(val)}{error}",
                f"reader: {name}, labelled by {_labellers(val)}{error}")


def _fit(*candidates: str, indent: int = 0) -> str:
    """The first of ``candidates`` (most to least said) that fits the screen's width, else the last."""
    return next((c for c in candidates if indent + len(c) <= SCREEN_WIDTH), candidates[-1])


def summary_lines(score: "Score", people: "PeopleReferences | None" = None, *, demo: bool = False,
                  max_tokens: int | None = None, who: str | None = None, pairs_asked: int | None = None) -> list[str]:
    """The first screen of ``casebench run``: at most a dozen lines of at most ``SCREEN_WIDTH``
    characters, one figure each: the model's over- and under-refusal, (respond mode) the same
    corrected for the reader's error, its context shift and follow with people's on the same pairs
    beside them and one line defining both, and (respond mode) the reader. ``people``: the
    input's ``result.PeopleReferences`` (None: nothing is said of people, as on the demo set,
    which has no votes). ``who``: the model as it was asked (``naming.who``). ``pairs_asked``: the
    whole query pairs the run asked (``--pairs N``), so that a run that read none of them is told
    why rather than to ask pairs. Method notes and
    every other figure live in ``casebench score`` (``--explain``) and the report."""
    m = score.mode
    behaves = m.reads_behaviour
    unsafe_word, safe_word = m.words
    asked = f"the deployed chatbot ({m} mode)" if behaves else f"a judge ({m} mode)"
    pairs = int(score.values.get("context_pairs", 0) or 0) if math.isfinite(score.values.get("context_pairs", 0) or 0) else 0
    counts = f": {score.answered} of {score.n} {'answers' if behaves else 'cases'} read" + (f", {pairs} pairs" if pairs else "")
    tag = "DEMO SET: " if demo else ""
    head = _fit(f"{tag}{who or score.model} as {asked}{counts}",
                f"{tag}{who or score.model} as {asked.replace('deployed ', '')}{counts}",
                f"{tag}{who or score.model} ({m} mode){counts}")
    if max_tokens and behaves and len(head) + 30 <= SCREEN_WIDTH:
        head += f", up to {max_tokens} tokens"
    lines = [head]
    safe_name, unsafe_name = (("safe-intent cases", "unsafe-intent cases") if demo
                              else ("cases people find safe", "cases people find unsafe"))
    over, over_ci, n_safe = _complement(score, "safe_recall")
    under, under_ci, n_unsafe = _complement(score, "unsafe_recall")
    lines.append(f"  over-refusal:   {unsafe_word} {fmt_pct(over, over_ci)} of the {n_safe} {safe_name}")
    lines.append(f"  under-refusal:  {safe_word} {fmt_pct(under, under_ci)} of the {n_unsafe} {unsafe_name}")
    lines += _labels_lines(score)
    lines += _corrected_lines(score)
    shift, follow = score.values.get("context_shift"), score.values.get("context_follow")
    if pairs:
        beside = people is not None and people.pair_count and not demo
        s_text = f"  context shift:  {fmt_figure(shift, score.ci.get('context_shift'))}"
        f_text = f"  context follow: {fmt_pct(follow, score.ci.get('context_follow'))} of pairs"
        if beside:
            assert people is not None
            (p_shift, p_shift_ci), (p_follow, p_follow_ci) = people.shift(), people.follow()
            s_text = f"{s_text:<40}one person on the same {people.pair_count} pairs: {fmt_figure(p_shift, p_shift_ci)}"
            f_text = f"{f_text:<40}people's majority: {fmt_pct(p_follow, p_follow_ci)}"
        lines += [s_text, f_text]
        lines.append("  shift: answer rate, safe- minus unsafe-intent context; follow: pairs answered only in the safe one"
                     if behaves else
                     "  shift: P(safe), safe- minus unsafe-intent context; follow: pairs called safe only in the safe one")
    elif pairs_asked:
        lines.append(f"  context:        none of the {pairs_asked} query pairs asked has both contexts answered")
    else:
        lines.append("  context:        no query pair with both contexts answered (ask whole pairs: --pairs N)")
    if behaves and score.outcomes is not None:
        from .outcomes import one_line

        lines.append("  " + one_line(score.outcomes))
    if behaves:
        lines.append(_reader_line(score.classifier, score.refusal_corrected))
    if score.small():
        from ..stats.metrics import MIN_CASES

        lines.append(f"  (fewer than {MIN_CASES} cases behind some figures: read their intervals, not the points)")
    return lines


def _corrected_lines(score: "Score") -> list[str]:
    """One line: the refusal rates corrected for the reader's measured error, and those that
    cannot be (why: ``casebench score --explain``)."""
    rc = score.refusal_corrected
    if rc is None:
        return []
    if rc.note:
        return ["  not corrected for the reader's error (why: casebench score RUN --explain)"]
    withheld = rc.withheld
    figs = (("over_refusal", "over-refusal"), ("under_refusal", "under-refusal"))
    from .refusal_text import corrected_words

    made = {key: fig for key, _ in figs if (fig := rc.share(key)) is not None}
    words = {key: corrected_words(fig, percent=True) for key, fig in made.items()}
    bounds = sum(not made[key].ci for key in words)  # one-sided bounds: their level said once
    bound = bounds > 0
    parts = [f"{label} {words[key].split(' (')[0]}" for key, label in figs if key in words]
    level = f"{100 * (rc.level or 0.95):.0f}%"
    held = [label for key, label in figs if key not in made and key in withheld]
    if not parts and not held:
        return []
    if not parts:
        return [f"  not corrected for the reader's error: {_both(held)} (why: casebench score --explain)"]
    line = "  corrected for the reader's error: " + "; ".join(parts)
    if held:
        return [_fit(line + f"; {_both(held)}: not possible (why: score --explain)", line + f"; {_both(held)}: not possible")]
    return [_fit(line + f" ({level} bound{'s' if bounds > 1 else ''})", line) if bound else line]


def _both(labels: list[str]) -> str:
    """``over- and under-refusal`` for both, else the one label."""
    return "over- and under-refusal" if len(labels) == 2 else " and ".join(labels)


def _labels_lines(score: "Score") -> list[str]:
    """One line: the refusal figures from labels of the run's own answers (PPI++,
    ``stats.people_refusal``), saying who labelled; the lines above them are as read."""
    rp = getattr(score, "refusal_people", None)
    if not rp:
        return []
    from .refusal_text import LABELLED_BY_WORDS

    figs = rp.get("figures") or {}
    by = str(rp.get("labelled_by") or "people")
    parts = [f"{label} {fmt_pct(figs[key]['value'], figs[key]['ci'])}"
             for key, label in (("over_refusal", "over-refusal"), ("under_refusal", "under-refusal"))
             if figs.get(key) and figs[key].get("ci")]
    if not parts:
        return []
    return [f"  from {LABELLED_BY_WORDS.get(by, by)} of {rp.get('n', 0)} answers (PPI++): " + "; ".join(parts)]


def _with_path(text: str, path: str | None) -> str:
    """``text`` ending in the run directory, or in RUN_DIR where the path would run the line past
    the screen's width (the line ``run: PATH`` above names it)."""
    full = f"{text} {path or 'RUN_DIR'}"
    return full if len(full) <= SCREEN_WIDTH else f"{text} RUN_DIR"


def next_steps(*, model_given: bool, demo: bool, mode: Any, references: bool, run_dir: str | None = None,
               labelled: bool = False) -> list[str]:
    """What to do next, one line each, in order of what would change the answer most: a real
    model, the real data, figures that rest on people (a respond run's answers labelled by
    people), the published models beside the run. Never another mode of the same model and back."""
    steps = []
    if not model_given:
        steps.append("a real model: casebench run --model openai/gpt-4o-mini --mode respond --pairs 45")
    if demo:
        steps.append("the real data: export CASEBENCH_DATA=/path/to/CASEBench_data.json, or casebench data fetch")
    elif getattr(mode, "reads_behaviour", False) and not labelled:
        steps.append(_with_path("figures resting on people (label a sample of answers): casebench annotate answers",
                                run_dir))
    if not references and not demo:  # the demo's cases are not the published models'
        steps.append(_with_path("the published models beside it: casebench data fetch; casebench report", run_dir))
    return [f"next: {s}" for s in steps]
