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
from typing import TYPE_CHECKING, Any, Mapping, Sequence

if TYPE_CHECKING:  # pragma: no cover
    from ..stats.metrics import Score
    from ..stats.result import PeopleReferences

__all__ = ["verdict_line", "summary_lines", "next_steps"]


def _pct(x: float | None, digits: int = 0) -> str:
    return "–" if x is None or not math.isfinite(x) else f"{100 * x:.{digits}f}%"


def _ci_pct(ci: Sequence[float] | None, digits: int = 0) -> str:
    if not ci or len(ci) != 2 or not all(math.isfinite(c) for c in ci):
        return ""
    return f" [{100 * ci[0]:.{digits}f}, {100 * ci[1]:.{digits}f}]"


def _num(x: float | None, ci: Sequence[float] | None = None) -> str:
    if x is None or not math.isfinite(x):
        return "–"
    text = f"{x:.2f}"
    if ci and len(ci) == 2 and all(math.isfinite(c) for c in ci):
        text += f" [{ci[0]:.2f}, {ci[1]:.2f}]"
    return text


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
    parts = [f"{unsafe_word} {_pct(over)} of what people find safe",
             f"{safe_word} {_pct(under)} of what people find unsafe"]
    rp = getattr(score, "refusal_people", None) or {}
    figs = rp.get("figures") or {}
    if figs.get("over_refusal") and figs.get("under_refusal"):
        # a run with labels of its own answers leads with the figures from them (PPI++)
        from .tables import LABELLED_BY_WORDS

        by = str(rp.get("labelled_by") or "people")
        o, u = figs["over_refusal"], figs["under_refusal"]
        parts = [f"{unsafe_word} {_pct(o['value'])}{_ci_pct(o['ci'])} of what people find safe",
                 f"{safe_word} {_pct(u['value'])}{_ci_pct(u['ci'])} of what people find unsafe "
                 f"(from {LABELLED_BY_WORDS.get(by, by)} of {rp.get('n', 0)} answers; as read: {_pct(over)} and "
                 f"{_pct(under)})"]
    if follow is not None and math.isfinite(follow):
        parts.append(f"follows context in {_pct(follow)} of pairs")
    line = ", ".join(parts)
    if people_follow is not None and math.isfinite(people_follow):
        line += f"; people's majority: {_pct(people_follow)}"
    return line


def _reader_line(classifier: Mapping[str, Any] | None, corrected: Mapping[str, Any] | None = None) -> str:
    """The first screen's reader line: which reader, whose labels it was checked against (never
    "people" for labels people did not give), its agreement with them and, beside it, the
    sensitivity and specificity that drive the correction (``tables.who_labelled``,
    ``tables.reader_error_words``)."""
    from .tables import reader_error_words, who_labelled

    if not classifier:
        return "reader: not recorded"
    name = classifier.get("name") or classifier.get("spec") or "the refusal classifier"
    val = classifier.get("validation")
    if not val:
        return (f"reader: {name} (no stored validation figure for this version: check a sample of answers by hand "
                "before trusting these rates)")
    ci = val.get("agreement_ci95")
    what = val.get("what") or f"{val.get('n', '?')} answers (set {val.get('set', '?')})"
    error = reader_error_words(dict(val), dict(corrected or {}))
    line = (f"reader: {name} read each answer as answered or refused; on {what} it agrees with "
            f"{who_labelled(dict(val))} on {_pct(val.get('agreement'), 1)}{_ci_pct(ci, 1)} (coverage "
            f"{_pct(val.get('coverage'))})" + (f"; {error}" if error else ""))
    if val.get("own_run"):
        return line
    if val.get("writer_match"):
        return line + ": the figures for answers like this run's, and the corrected rates use them"
    if val.get("run_writer") == "small":  # the validation says the run's writer is a small model
        line += (". Those answers are in capable models' styles; a tiny model's answers are read less reliably "
                 "(docs/readers.md): check a sample by hand before leaning on a few points")
    else:
        better = classifier.get("better_reader")  # the stored figures' word on another reader (runs records it)
        if better and better.get("name"):
            line += (f"; `casebench classify RUN --refusal-classifier {better['name']}` re-reads the answers with "
                     "the reader that agrees with the labels more often on large models' writing"
                     + (f" (needs the {better['extra']} extra)" if better.get("extra") else ""))
    return line


def summary_lines(score: "Score", people: "PeopleReferences | None" = None, *, demo: bool = False,
                  max_tokens: int | None = None, who: str | None = None) -> list[str]:
    """The lines that lead ``casebench run``'s output: the model's over- and under-refusal, its
    context shift and follow beside people's on the same pairs (``people``: the input's
    ``result.PeopleReferences``, or None), the reader's validation (respond mode; its stored
    figures say which kind of writer they stand for and the run's), each naming the mode.
    ``who``: the model as it was asked, with its backend (``naming.who``; default the score's
    model name)."""
    mode = score.mode
    m = mode
    behaves = m.reads_behaviour
    unsafe_word, safe_word = m.words
    asked = f"as the deployed chatbot ({mode} mode: it answers each query)" if behaves else \
        f"as a judge ({mode} mode: it says whether answering is safe)"
    pairs = int(score.values.get("context_pairs", 0) or 0) if math.isfinite(score.values.get("context_pairs", 0) or 0) else 0
    head = f"{'DEMO SET: ' if demo else ''}what {who or score.model} does {asked}: {score.answered} of {score.n} cases read"
    if pairs:
        head += f", {pairs} query pairs (both contexts answered)"
    if max_tokens and behaves:
        head += f"; answers up to {max_tokens} tokens"
    lines = [head]
    safe_name, unsafe_name = (("safe-intent contexts", "unsafe-intent contexts") if demo
                              else ("what people find safe", "what people find unsafe"))
    over, over_ci, n_safe = _complement(score, "safe_recall")
    under, under_ci, n_unsafe = _complement(score, "unsafe_recall")
    lines += _labels_lines(score, unsafe_word, safe_word, safe_name, unsafe_name)
    lines.append(f"  over-refusal:  {unsafe_word} {_pct(over)}{_ci_pct(over_ci)} of {safe_name} ({n_safe} cases)")
    lines.append(f"  under-refusal: {safe_word} {_pct(under)}{_ci_pct(under_ci)} of {unsafe_name} ({n_unsafe} cases)")
    rc = getattr(score, "refusal_corrected", None) or {}
    withheld = rc.get("withheld") or {}
    figs = (("over_refusal", "over-refusal"), ("under_refusal", "under-refusal"))
    if rc.get("over_refusal") or rc.get("under_refusal"):
        from .tables import corrected_words

        parts = [f"{label} {corrected_words(rc[key], percent=True)}" for key, label in figs if rc.get(key)]
        k = len((rc.get("pooled") or {}).get("sets") or [])
        lines.append(f"  corrected for the reader's measured error: {', '.join(parts)} (the intervals carry the "
                     "run's clustering, the reader's error and "
                     + (f"how it differs across {k} validation sets)" if k > 1 else "the uncertainty of its validation)"))
    if rc.get("note"):
        lines.append(f"  not corrected for the reader's error: {rc['note']}")
    for key, label in figs:
        if key in withheld:
            lines.append(f"  {label} not corrected: {withheld[key]}")
    shift, follow = score.values.get("context_shift"), score.values.get("context_follow")
    if pairs:
        what = "answered" if behaves else "P(safe)"
        ctx = (f"  context:       shift {_num(shift, score.ci.get('context_shift'))} ({what} in the safe-intent "
               f"context minus the unsafe one), follows the context in {_pct(follow)}"
               f"{_ci_pct(score.ci.get('context_follow'))} of pairs")
        lines.append(ctx)
        if people is not None and people.pair_count:
            (p_shift, p_shift_ci), (p_follow, p_follow_ci) = people.shift(), people.follow()
            lines.append(f"                 people on the same {people.pair_count} pairs: shift "
                         f"{_num(p_shift, p_shift_ci)}, their majority follows the "
                         f"context in {_pct(p_follow)}{_ci_pct(p_follow_ci)}")
        elif demo:
            lines.append("                 (a demo set has no people's votes: the contexts' intent is the only label)")
        if shift is not None and math.isfinite(shift) and abs(shift) < 0.1 and behaves:
            lines.append(f"                 {score.model} barely moves with the context: it "
                         f"{'answers' if (under or 0) > 0.5 else 'refuses'} most requests whatever their context")
    else:
        lines.append("  context:       no query pair with both contexts answered (ask whole pairs: --pairs N)")
    if behaves and getattr(score, "outcomes", None) is not None:
        from .outcomes import one_line

        lines.append("  " + one_line(score.outcomes))
    if behaves:
        lines.append("  " + _reader_line(score.classifier, getattr(score, "refusal_corrected", None)))
    if score.small():
        from ..stats.metrics import MIN_CASES

        lines.append(f"  († figures from fewer than {MIN_CASES} cases: read their intervals, not the point)")
    return lines


def _labels_lines(score: "Score", unsafe_word: str, safe_word: str, safe_name: str, unsafe_name: str) -> list[str]:
    """A run with labels of its own answers leads with the figures from them (PPI++,
    ``stats.people_refusal``), saying who labelled; the reader's figures follow as read."""
    rp = getattr(score, "refusal_people", None)
    if not rp:
        return []
    from .tables import LABELLED_BY_WORDS

    figs = rp.get("figures") or {}
    by = str(rp.get("labelled_by") or "people")
    out = [f"  from {LABELLED_BY_WORDS.get(by, by)} of {rp.get('n', 0)} of its answers (PPI++ with the reader's "
           "readings of the rest):"]
    over, under, shift = figs.get("over_refusal"), figs.get("under_refusal"), figs.get("context_shift")
    if over:
        out.append(f"    over-refusal:  {unsafe_word} {_pct(over['value'])}{_ci_pct(over['ci'])} of {safe_name}")
    if under:
        out.append(f"    under-refusal: {safe_word} {_pct(under['value'])}{_ci_pct(under['ci'])} of {unsafe_name}")
    if shift and shift.get("ci"):
        out.append(f"    context shift: {_num(shift['value'], shift['ci'])}")
    mult = rp.get("multiplier")
    worth = f"each label worth {mult:.1f} labels alone; " if mult else ""
    out.append(f"    ({worth}the reader's reading of every answer follows)")
    return out


def next_steps(*, model_given: bool, demo: bool, mode: str, references: bool, run_dir: str | None = None) -> list[str]:
    """What to do next, in order of what would change the answer most: a real model, the real data,
    the published models beside the run. Never another mode of the same model and back."""
    steps = []
    if not model_given:
        steps.append("a real model: casebench run --model openai/gpt-4o-mini --mode respond --pairs 45 "
                     "(or --model hf/ID for a local one; any OpenAI-compatible server with --base-url)")
    if demo:
        steps.append("the real data: export CASEBENCH_DATA=/path/to/CASEBench_data.json (or casebench data fetch), "
                     "then run again")
    if not references and not demo:  # the demo's cases are not the published models'
        steps.append("the paper's published models beside this run: casebench data fetch, then casebench report "
                     + (run_dir or "RUN_DIR"))
    return ["next:"] + [f"  - {s}" for s in steps] if steps else []
