"""The CI-parameter ablation study: which part of the context moves a judge's verdicts.

A study is one model in one mode under several *conditions*: the full context, and the context
with some CI parameters removed (``data.ablate_context``). This module

* lists the conditions of a study (``ablation_conditions``): each requested parameter alone, then
  every pair, then all of them together (for the default three top-level parameters, that is
  every subset: 1 + 3 + 3 + 1 = 8 conditions);
* (running the missing ones is ``runs.study.run_ablation``'s job: statistics never start runs);
* analyses any set of finished conditions (``analyse_ablation``): run directories or published
  ablation files (``output_<mode>_<params>.json``), the condition being read from each input's
  ``removed``. Each condition's figures are exactly that input's one scoring result (``result.score_input``)
  (so ``--paper-compat`` reproduces ``casebench score --paper-compat``), and its paired
  difference from the full context (condition - full) comes from ``compare`` (paired bootstrap
  CI; McNemar for accuracy, Williams' t for PCC; Benjamini-Hochberg over all conditions).
  Any subset of the conditions can be analysed, as long as the full context is among them.

The text of a study is ``present.study_text.format_ablation`` (statistics do not format).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence, Mapping

from ..session import in_session
from ..data import ablation_conditions, all_parameter_names, canonical_removed
from ..jsonutil import json_safe
from ..modes import Mode
from ..predictions import Predictions
from .case_sets import CompareError
from .compare import MetricDiff, compare
from .metrics import Score
from .options import DEFAULT_OPTIONS, ScoringOptions
from .result import score_input

DEFAULT_PARAMS: tuple[str, ...] = ("sender", "recipient", "transmission_principle")


class AblationStudyError(ValueError):
    """Inputs that do not form one study (no full context, mixed models or modes, duplicates)."""


#: A removal in canonical order, and the conditions of a study: defined with the CI parameter
#: names (``data``), because the runs of a study (``runs.study``) need them too.
canonical = canonical_removed


def condition_name(removed: Sequence[str]) -> str:
    return "full context" if not removed else "- " + ", ".join(removed)


# --------------------------------------------------------------------------------------------
# Analysis


@dataclass
class ConditionResult:
    """One condition: its own score, and (except for the full context) its paired difference
    from the full context, condition - full."""

    removed: tuple[str, ...]
    source: str
    score: Score
    n_paired: int = 0
    dropped: int = 0
    mcnemar: dict[str, Any] | None = None
    diffs: dict[str, MetricDiff] = field(default_factory=dict)
    #: people's references on the pairs this condition answered (``context.people_references``);
    #: None without pairs
    people: Mapping[str, Any] | None = None

    @property
    def name(self) -> str:
        return condition_name(self.removed)


@dataclass
class AblationResult:
    model: str
    mode: Mode
    paper_compat: bool
    conditions: list[ConditionResult]
    settings: dict[str, Any]

    @property
    def full(self) -> ConditionResult:
        return self.conditions[0]

    def to_dict(self) -> dict[str, Any]:
        rows = []
        for c in self.conditions:
            rows.append({
                "condition": c.name, "removed": list(c.removed), "source": c.source,
                "score": c.score.to_dict(),
                "people": c.people,
                "difference_from_full": None if not c.removed else {
                    "n_paired": c.n_paired, "dropped": c.dropped, "mcnemar": c.mcnemar,
                    "metrics": {k: m.to_dict() for k, m in c.diffs.items()},
                },
            })
        return json_safe({"model": self.model, "mode": str(self.mode), "paper_compat": self.paper_compat,
                           "settings": self.settings, "conditions": rows})


def _sort_key(removed: tuple[str, ...]) -> tuple[int, list[int]]:
    order = {n: i for i, n in enumerate(all_parameter_names())}
    return (len(removed), [order.get(n, 99) for n in removed])


@in_session
def analyse_ablation(preds: Sequence[Predictions], options: ScoringOptions = DEFAULT_OPTIONS) -> AblationResult:
    """Score every condition and its paired difference from the full-context input.

    The inputs must be one model in one mode over the same cases, with exactly one full-context
    input (``removed == ()``) and no condition twice; ``AblationStudyError`` says what is wrong.
    ``options``: how every condition is scored and compared (the same human labels, CI level and
    alpha for all).
    """
    preds = list(preds)
    if not preds:
        raise AblationStudyError("no inputs to analyse")
    models = sorted({p.model for p in preds})
    modes = sorted({p.mode for p in preds})
    if len(models) > 1 or len(modes) > 1:
        raise AblationStudyError(
            "an ablation study is one model in one mode; got "
            + "; ".join(f"{p.source}: {p.model} [{p.mode}]" for p in preds)
        )
    if len({p.context_as for p in preds}) > 1:
        raise AblationStudyError(
            "an ablation study keeps the context placement fixed; got "
            + "; ".join(f"{p.source}: context as {p.context_as}" for p in preds)
        )
    seen: dict[tuple[str, ...], str] = {}
    for p in preds:
        key = canonical(p.removed)
        if key in seen:
            raise AblationStudyError(f"condition '{condition_name(key)}' appears twice: {seen[key]} and {p.source}")
        seen[key] = p.source
    if () not in seen:
        raise AblationStudyError(
            "no full-context input (one with nothing removed, e.g. output_<mode>.json or a run without "
            "--remove); the inputs hold: " + "; ".join(f"{condition_name(canonical(p.removed))} ({p.source})" for p in preds)
        )
    preds.sort(key=lambda p: _sort_key(canonical(p.removed)))
    cmp = None
    if len(preds) > 1:
        cmp = compare(preds, options, pairs=[(i, 0) for i in range(1, len(preds))])
    out = []
    for i, p in enumerate(preds):
        r = score_input(p, options)
        c = ConditionResult(canonical(p.removed), p.source, r.score, people=r.people.pairs)
        if i and cmp is not None:
            pc = cmp.pairs[i - 1]
            c.n_paired, c.dropped, c.mcnemar, c.diffs = pc.n_paired, pc.dropped, pc.mcnemar, pc.metrics
        out.append(c)
    settings = {"bootstrap": options.n_boot, "seed": options.bootstrap_seed, "level": options.level,
                "alpha": options.alpha,
                "difference": "condition - full context",
                "adjustment": "Benjamini-Hochberg over all conditions and metrics",
                "cases": "all cases (paper-compatible)" if options.paper_compat else "cases both inputs answered",
                "label_source": options.label_source}
    return AblationResult(models[0], modes[0], options.paper_compat, out, settings)


__all__ = [
    "DEFAULT_PARAMS", "AblationResult", "AblationStudyError", "CompareError", "ConditionResult",
    "ablation_conditions", "analyse_ablation", "canonical", "condition_name",
]

