"""Studies over one factor, and the placement study: does it matter *where* the context is put?

One machinery (``analyse_factor``) serves every factor (``Factor``): the inputs are one model in
one mode that differ in the factor alone; each level gets its one scoring result, its context
figures beside people's, and the paired tests (every two levels, or each level against the
factor's baseline, with the factor's ``against_baseline`` figure for each: ``Consistency``). The
factors themselves live with their studies: ``PLACEMENT`` here, the query mutations' ``MUTATION``
in ``mutation_effects``, the reveal arms' ``ARM`` in ``reveal``; the machinery knows none of them
by name, so a study's own figures and notes travel on its ``Factor``.

The placement study:

The same model, mode, cases and CI parameters, with the context in different places
(``prompts.CONTEXT_PLACEMENTS``): inside the judge prompt (``user``), as the operator's system
prompt (``system``), or as the conversation before the query (``turns``). Running the placements
is ``runs.study.run_placements``'s job; this module reads the finished runs like any other input
(statistics never start runs) and reports, per placement, from that input's one scoring result
(``result.score_input``: exactly the figures, intervals and counts ``casebench score`` prints):

* the metrics with their CIs;
* the context figures over query pairs (``context_shift``, ``context_follow``,
  ``context_blind``: ``stats.context``) with their CIs (the shift's resamples pairs; follow
  and blind are shares of pairs: Wilson, the bootstrap under ``paper_compat``);
* in respond mode, over-refusal (1 - safe recall) and under-refusal (1 - unsafe recall) with
  the recalls' CIs flipped, and, when a judge run of the same model in the same placement is
  given, the say-do gap (``saydo.say_do``: how often the behaviour matches the model's own
  verdict);

and between every two placements the paired tests of ``compare`` (McNemar's exact test on
per-case correctness over the shared cases, paired-bootstrap CIs of the metric differences,
Benjamini-Hochberg over all pairs and metrics), whose ``context_shift`` row is the paired
difference of the context shift over the query pairs both placements answered (``ShiftDiff``).

The text of a study is ``present.study_text.format_placements``; the report's placement section is
``present.report``'s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence, Mapping

from ..session import in_session
from ..jsonutil import json_safe
from ..modes import Mode
from ..naming import mutation_of
from ..predictions import Predictions
from .case_sets import CompareError
from .compare import Comparison, compare
from .metrics import Score
from .options import DEFAULT_OPTIONS, ScoringOptions
from .result import score_input
from .saydo import SayDo, say_do

__all__ = [
    "Consistency", "ContextFigures", "Factor", "PLACEMENT", "PlacementFigures", "PlacementResult",
    "PlacementStudyError", "ShiftDiff", "StudyResult", "analyse_factor", "analyse_placements", "placement_of",
]


class PlacementStudyError(ValueError):
    """Inputs that do not form one placement study (mixed models, modes or removals; a
    placement twice; fewer than two placements)."""


def placement_of(pred: Predictions) -> str:
    """Where an input put the context (``Predictions.context_as``: a run's recorded placement;
    a published file is the paper's ``user`` placement, the judge modes' default)."""
    return pred.context_as


@dataclass(frozen=True)
class Factor:
    """What a study varies: ``name`` (its word in the output), ``level_of`` (an input's level),
    ``held`` (what every input must share besides the model, mode and removed CI parameters:
    name and reader), and ``baseline`` (the level every other level is compared against, which
    must be among the inputs; None: every two levels are compared)."""

    name: str
    level_of: Callable[[Predictions], str]
    held: tuple[tuple[str, Callable[[Predictions], Any]], ...] = ()
    baseline: str | None = None
    #: a factor with a baseline: each other level's agreement with it (``Consistency``), from
    #: (level input, baseline input, options, level, baseline); None: not measured
    against_baseline: Callable[[Predictions, Predictions, ScoringOptions, str, str], "Consistency"] | None = None
    #: what the study's settings say besides the machinery's own (key, text), e.g. whose votes
    #: a mutated wording is scored against
    notes: tuple[tuple[str, str], ...] = ()


PLACEMENT = Factor("placement", placement_of, (("query mutation", mutation_of),))


# --------------------------------------------------------------------------------------------
# Context figures over query pairs: a view of the input's score


@dataclass
class ContextFigures:
    """How an input's verdicts move with the context, over the query pairs it answered: the
    context figures of its score (``stats.context``; the same numbers ``casebench score``
    prints for the input), gathered for the study's table.

    ``pairs``: the query pairs with both cases answered. ``shift``: mean over pairs of
    v(safe-intent case) - v(unsafe-intent case), v the input's P(safe) as its mode defines it
    (respond: P(answered)). ``follow``: share of pairs labelled safe in the safe-intent context
    and unsafe in the unsafe-intent one. ``blind``: among the ``blind_pairs`` pairs whose human
    labels differ, the share given the same label in both contexts. ``ci``: the score's
    intervals (the shift's from resampling pairs; follow's and blind's Wilson intervals in
    default scoring).
    """

    pairs: int
    shift: float
    follow: float
    blind: float
    blind_pairs: int
    ci: dict[str, list[float]] = field(default_factory=dict)

    @classmethod
    def of(cls, score: Score) -> "ContextFigures":
        """The context figures of a score (NaN and 0 pairs where the input holds no pair)."""
        v, nan = score.values, float("nan")
        return cls(int(v.get("context_pairs", 0) or 0), v.get("context_shift", nan), v.get("context_follow", nan),
                   v.get("context_blind", nan), int(score.cases_of.get("context_blind", 0)),
                   {m: score.ci[m] for m in ("context_shift", "context_follow", "context_blind") if m in score.ci})

    def to_dict(self) -> dict[str, Any]:
        return {"context_pairs": self.pairs, "context_shift": self.shift, "context_follow": self.follow,
                "context_blind": self.blind, "context_blind_pairs": self.blind_pairs, "ci": self.ci}


@dataclass
class ShiftDiff:
    """The paired difference of the context shift between two placements (a - b) over the
    ``pairs`` query pairs both answered both cases of: the ``context_shift`` row of the study's
    paired comparison (``compare``: pairs resampled together; its p is in the Benjamini-Hochberg
    family of the context figures)."""

    a: str
    b: str
    pairs: int
    diff: float
    ci: list[float]
    p_bootstrap: float
    p_adjusted: float | None = None
    significant: bool = False
    #: the context figure differenced (``context_shift``; ``context_follow`` in the follow rows)
    metric: str = "context_shift"


def _shift_diffs(cmp: Comparison | None, names: Sequence[str], metric: str = "context_shift") -> list[ShiftDiff]:
    out = []
    for pc in cmp.pairs if cmp is not None else []:
        d = pc.metrics.get(metric)
        if d is None:
            out.append(ShiftDiff(names[pc.a], names[pc.b], 0, float("nan"), [float("nan")] * 2, float("nan"),
                                 metric=metric))
            continue
        out.append(ShiftDiff(names[pc.a], names[pc.b], pc.context_pairs, d.diff, list(d.ci), d.p_bootstrap,
                             d.p_adjusted, d.significant, metric))
    return out


@dataclass
class Consistency:
    """Wording consistency of one level against the baseline: over the ``n`` cases both
    answered (in ``queries`` queries), the share ``unchanged`` whose verdict (respond mode: read
    behaviour, answered or refused) is the same under both wordings, with a Wilson interval
    widened by the design effect of the query clusters (the two contexts of a query move
    together)."""

    #: the factor level (the wording) whose verdicts are compared with the baseline's
    factor_level: str
    baseline: str
    n: int
    queries: int
    unchanged: int
    share: float
    ci: list[float]
    design_effect: float = 1.0


# --------------------------------------------------------------------------------------------
# The study


@dataclass
class PlacementFigures:
    """One level of a study (a placement, a mutation): its score, context figures, people's
    on the same pairs, and (respond mode) refusal figures and say-do."""

    #: the level of the study's factor (a placement, a wording); not a confidence level
    factor_level: str
    source: str
    score: Score
    context: ContextFigures
    #: respond mode: 1 - safe recall and 1 - unsafe recall, each with its CI (else None)
    over_refusal: float | None = None
    over_refusal_ci: list[float] | None = None
    under_refusal: float | None = None
    under_refusal_ci: list[float] | None = None
    say_do: SayDo | None = None
    #: why a say-do gap that was asked for is missing (the judge gave no readable verdict on any
    #: case the chatbot's answers were read on), else None
    say_do_missing: str | None = None
    #: respond mode: the refusal classifier that read the answers (as the run recorded it)
    classifier: dict[str, Any] | None = None
    #: people's references on the pairs this level answered (``context.people_references``):
    #: voted on the dataset's own wording, whatever the level's wording; None without pairs
    people: Mapping[str, Any] | None = None

    @property
    def placement(self) -> str:
        """The level's name (in a placement study, the placement)."""
        return self.factor_level

    def to_dict(self, key: str = "placement") -> dict[str, Any]:
        d: dict[str, Any] = {key: self.factor_level, "source": self.source, "score": self.score.to_dict(),
                             "context": self.context.to_dict()}
        if self.people is not None:
            d["people"] = self.people
        if self.over_refusal is not None:
            d.update(over_refusal=self.over_refusal, over_refusal_ci=self.over_refusal_ci,
                     under_refusal=self.under_refusal, under_refusal_ci=self.under_refusal_ci,
                     classifier=self.classifier)
        if self.say_do is not None:
            sd = self.say_do
            d["say_do"] = {**sd.to_dict(), "gap": sd.judged_safe - sd.answered}
        elif self.say_do_missing is not None:
            d["say_do"] = None
            d["say_do_missing"] = self.say_do_missing
        return d


@dataclass
class PlacementResult:
    """A study over one factor (``factor``: "placement" or "mutation"); ``placements`` holds its
    levels in order (the baseline first when the factor has one)."""

    model: str
    mode: Mode
    removed: tuple[str, ...]
    paper_compat: bool
    placements: list[PlacementFigures]
    comparison: Comparison | None
    shift_diffs: list[ShiftDiff]
    settings: dict[str, Any]
    factor: str = "placement"
    #: the paired differences of the context follow (same pairs as ``shift_diffs``)
    follow_diffs: list[ShiftDiff] = field(default_factory=list)
    #: a factor with a baseline: each other level's wording consistency against it
    consistency: list[Consistency] = field(default_factory=list)
    #: what every level shares that another study varies (a mutation study: the placement)
    held: dict[str, str] = field(default_factory=dict)

    @property
    def levels(self) -> list[PlacementFigures]:
        return self.placements

    def to_dict(self) -> dict[str, Any]:
        pairs: list[dict[str, Any]] = []
        if self.comparison is not None:
            names = [p.factor_level for p in self.placements]
            for pc, row in zip(self.comparison.pairs, self.comparison.to_dict()["pairs"]):
                pairs.append({**row, "a": names[pc.a], "b": names[pc.b]})
        d: dict[str, Any] = {
            "model": self.model, "mode": str(self.mode), "removed": list(self.removed), "paper_compat": self.paper_compat,
            "settings": self.settings, f"{self.factor}s": [p.to_dict(self.factor) for p in self.placements],
            "pairs": pairs, "context_shift_differences": [dict(vars(s)) for s in self.shift_diffs],
        }
        if self.factor != "placement":
            d = {"study": self.factor, **d, **self.held,
                 "context_follow_differences": [dict(vars(s)) for s in self.follow_diffs],
                 "wording_consistency": [dict(vars(c)) for c in self.consistency]}
        out: dict[str, Any] = json_safe(d)
        return out


#: the result of any one-factor study
StudyResult = PlacementResult


def _flip_ci(ci: Sequence[float] | None) -> list[float] | None:
    """The CI of 1 - x from the CI of x."""
    if ci is None:
        return None
    return [1 - float(ci[1]), 1 - float(ci[0])]


def _classifier_of(pred: Predictions) -> dict[str, Any] | None:
    for key in ("refusal_classifier", "classifier"):
        if pred.meta.get(key) is not None:
            c = pred.meta[key]
            return c if isinstance(c, dict) else {"name": str(c)}
    return None


@in_session
def analyse_placements(
    preds: Sequence[Predictions], options: ScoringOptions = DEFAULT_OPTIONS, *, judges: Sequence[Predictions] = (),
) -> PlacementResult:
    """Figures per placement and paired tests between every two placements (``analyse_factor``
    over ``PLACEMENT``; see the module docstring)."""
    return analyse_factor(preds, PLACEMENT, options, judges=judges)


def analyse_factor(
    preds: Sequence[Predictions], factor: Factor, options: ScoringOptions = DEFAULT_OPTIONS, *,
    judges: Sequence[Predictions] = (),
) -> PlacementResult:
    """Figures per level of ``factor`` and paired tests between levels (see the module docstring).

    ``preds``: one input per level (shown in the order given, the baseline first when the
    factor has one), all of one model in one mode with the same CI parameters removed and the
    same ``factor.held``, over the same cases (``compare`` checks the cases). ``options``: how
    every input is scored (``stats.options.ScoringOptions``). ``judges``: for a respond study,
    judge runs of the same model (one per level at most); each is paired with the respond run
    of its level for the say-do gap. ``PlacementStudyError`` says what does not fit.
    """
    paper_compat = options.paper_compat
    preds = list(preds)
    what = f"a {factor.name} study"
    if len(preds) < 2:
        raise PlacementStudyError(
            f"{what} needs inputs in at least two {factor.name}s, e.g. "
            + ("user,system,turns" if factor.name == "placement" else "a run without --mutation and one with it"))
    models = sorted({p.model for p in preds})
    modes = sorted({p.mode for p in preds})
    removed = sorted({tuple(p.removed) for p in preds})
    if len(models) > 1 or len(modes) > 1 or len(removed) > 1:
        raise PlacementStudyError(
            f"{what} is one model in one mode with the same CI parameters removed; got "
            + "; ".join(f"{p.source}: {p.name} ({factor.name} {factor.level_of(p)})" for p in preds))
    for label, key in factor.held:
        if len({key(p) for p in preds}) > 1:
            raise PlacementStudyError(
                f"{what} holds the {label} fixed; got " + "; ".join(f"{p.source}: {key(p)}" for p in preds))
    seen: dict[str, str] = {}
    for p in preds:
        where = factor.level_of(p)
        if where in seen:
            raise PlacementStudyError(f"{factor.name} '{where}' appears twice: {seen[where]} and {p.source}")
        seen[where] = p.source
    if factor.baseline is not None:
        if factor.baseline not in seen:
            raise PlacementStudyError(
                f"{what} compares every level with '{factor.baseline}', and no input is at it (for a mutation "
                "study: a run without --mutation); the inputs hold: "
                + ", ".join(f"{k} ({v})" for k, v in seen.items()))
        preds.sort(key=lambda p: factor.level_of(p) != factor.baseline)  # the baseline first, the rest as given
    behaviour = preds[0].mode.reads_behaviour
    judge_at: dict[str, Predictions] = {}
    for j in judges:
        if j.mode.reads_behaviour:
            raise PlacementStudyError(f"{j.source} is a respond run; the say-do gap pairs judge runs with respond runs")
        if not behaviour:
            raise PlacementStudyError("judge runs for the say-do gap go with a respond study")
        if j.model != models[0]:
            raise PlacementStudyError(f"{j.source}: say-do compares one model with itself ({j.model} is not {models[0]})")
        where = factor.level_of(j)
        if where in judge_at:
            raise PlacementStudyError(f"two judge runs at {factor.name} '{where}': {judge_at[where].source} and {j.source}")
        judge_at[where] = j

    todo = None if factor.baseline is None else [(i, 0) for i in range(1, len(preds))]
    cmp = compare(preds, options, pairs=todo)
    out = []
    for p in preds:
        r = score_input(p, options)  # the input's one scoring result: what `casebench score` prints
        s = r.score
        f = PlacementFigures(factor.level_of(p), p.source, s, ContextFigures.of(s))
        if not paper_compat:
            f.people = r.people.pairs
        if behaviour:
            # 1 - a recall, with the recall's own interval flipped (Wilson in default scoring,
            # which is symmetric under k -> n - k; the bootstrap under paper_compat)
            f.over_refusal = 1 - s.values["safe_recall"]
            f.under_refusal = 1 - s.values["unsafe_recall"]
            f.over_refusal_ci = _flip_ci(s.ci.get("safe_recall"))
            f.under_refusal_ci = _flip_ci(s.ci.get("unsafe_recall"))
            f.classifier = _classifier_of(p)
            jd = judge_at.get(f.factor_level)
            jr = None if jd is None else jd.at_min_verdict_mass(options.min_verdict_mass)
            if jd is not None and jr is not None and not (jr.answered & r.pred.answered).any():
                # a missing figure, said so, not a failed study: a small judge may write no
                # readable verdict at all (the embedded SmolLM2 rarely writes binary's JSON)
                f.say_do_missing = (f"the judge ({jd.mode}) gave a readable verdict on {int(jd.answered.sum())} of "
                                    f"{len(jd.answered)} cases and none of the chatbot's read answers")
            elif jd is not None:
                try:
                    f.say_do = say_do(jd, p, options)
                except CompareError as e:
                    raise PlacementStudyError(f"say-do at {factor.name} '{f.factor_level}': {e}") from None
        out.append(f)
    names = [f.factor_level for f in out]
    diffs = _shift_diffs(cmp, names)
    follow = _shift_diffs(cmp, names, "context_follow")
    against = factor.against_baseline
    consistency = [] if factor.baseline is None or against is None else [
        against(p, preds[0], options, names[i], names[0]) for i, p in enumerate(preds) if i]
    settings = {"bootstrap": options.n_boot, "seed": options.bootstrap_seed, "level": options.level,
                "alpha": options.alpha,
                "difference": "A - B" if factor.baseline is None else f"{factor.name} - {factor.baseline}",
                "adjustment": (f"Benjamini-Hochberg over all {factor.name} pairs and metrics" if factor.baseline is None
                               else f"Benjamini-Hochberg over all {factor.name}s (each against {factor.baseline}) "
                                    "and metrics"),
                "cases": "all cases (paper-compatible)" if paper_compat else "cases both inputs answered",
                "label_source": options.label_source,
                "context_ci": ("percentile bootstrap over query pairs" if paper_compat else
                               "shift: percentile bootstrap over query pairs; follow, blind: Wilson over pairs")}
    settings.update(factor.notes)
    held = {label.replace(" ", "_"): str(key(preds[0])) for label, key in factor.held}
    return PlacementResult(models[0], modes[0], tuple(removed[0]), paper_compat, out, cmp, diffs, settings,
                           factor.name, follow, consistency, held)
