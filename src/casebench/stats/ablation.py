"""The CI-parameter ablation study: which part of the context moves a judge's verdicts.

A study is one model in one mode under several *conditions*: the full context, and the context
with some CI parameters removed (``data.ablate_context``). This module

* lists the conditions of a study (``ablation_conditions``): each requested parameter alone, then
  every pair, then all of them together (for the default three top-level parameters, that is
  every subset: 1 + 3 + 3 + 1 = 8 conditions);
* runs the missing ones (``run_ablation``), re-using run directories that are already complete
  and resuming those that are not, through ``runner.run``;
* analyses any set of finished conditions (``analyse_ablation``): run directories or published
  ablation files (``output_<mode>_<params>.json``), the condition being read from each input's
  ``removed``. Each condition's figures are exactly ``metrics.score_predictions`` on that input
  (so ``--paper-compat`` reproduces ``casebench score --paper-compat``), and its paired
  difference from the full context (condition - full) comes from ``compare`` (paired bootstrap
  CI; McNemar for accuracy, Williams' t for PCC; Benjamini-Hochberg over all conditions).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from .compare import CompareError, MetricDiff, _f, _fp, compare
from ..data import Dataset, all_parameter_names, validate_parameter_names
from .metrics import DEFAULT_BOOTSTRAP, Score, metric_names, score_predictions
from ..predictions import Predictions

DEFAULT_PARAMS: tuple[str, ...] = ("sender", "recipient", "transmission_principle")
#: the metrics a study prints per condition
STUDY_METRICS = ("accuracy", "safe_recall", "unsafe_recall", "pcc", "bce")


class AblationStudyError(ValueError):
    """Inputs that do not form one study (no full context, mixed models or modes, duplicates)."""


def canonical(removed: Sequence[str]) -> tuple[str, ...]:
    """A condition in the canonical parameter order, so ``recipient,sender`` == ``sender,recipient``."""
    order = {n: i for i, n in enumerate(all_parameter_names())}
    return tuple(sorted(dict.fromkeys(removed), key=lambda n: order.get(n, len(order))))


def ablation_conditions(params: Sequence[str] | str = DEFAULT_PARAMS) -> list[tuple[str, ...]]:
    """The full context, each parameter alone, every pair, then all together (deduplicated).

    Sub-parameters (``urgency``, ``confidentiality``, ...) are accepted as well as top-level
    names. With more than three parameters the intermediate sizes (3 .. k-1) are left out on
    purpose: the study grows as 2^k otherwise.
    """
    names = validate_parameter_names(params)
    if not names:
        raise AblationStudyError("name at least one CI parameter to remove")
    k = len(names)
    out: list[tuple[str, ...]] = [()]
    for size in sorted({1, min(2, k), k}):
        for combo in itertools.combinations(names, size):
            c = canonical(combo)
            if c not in out:
                out.append(c)
    return out


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

    @property
    def name(self) -> str:
        return condition_name(self.removed)


@dataclass
class AblationResult:
    model: str
    mode: str
    paper_compat: bool
    conditions: list[ConditionResult]
    settings: dict[str, Any]

    @property
    def full(self) -> ConditionResult:
        return self.conditions[0]

    def to_dict(self) -> dict[str, Any]:
        from ..present.tables import json_safe

        rows = []
        for c in self.conditions:
            rows.append({
                "condition": c.name, "removed": list(c.removed), "source": c.source,
                "score": c.score.to_dict(),
                "difference_from_full": None if not c.removed else {
                    "n_paired": c.n_paired, "dropped": c.dropped, "mcnemar": c.mcnemar,
                    "metrics": {k: dict(vars(m)) for k, m in c.diffs.items()},
                },
            })
        return json_safe({"model": self.model, "mode": self.mode, "paper_compat": self.paper_compat,
                           "settings": self.settings, "conditions": rows})


def _sort_key(removed: tuple[str, ...]) -> tuple[int, list[int]]:
    order = {n: i for i, n in enumerate(all_parameter_names())}
    return (len(removed), [order.get(n, 99) for n in removed])


def analyse_ablation(
    preds: Sequence[Predictions], *, paper_compat: bool = False, n_boot: int = DEFAULT_BOOTSTRAP,
    seed: int = 0, level: float = 0.95, alpha: float = 0.05,
) -> AblationResult:
    """Score every condition and its paired difference from the full-context input.

    The inputs must be one model in one mode over the same cases, with exactly one full-context
    input (``removed == ()``) and no condition twice; ``AblationStudyError`` says what is wrong.
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
        cmp = compare(preds, paper_compat=paper_compat, n_boot=n_boot, seed=seed, level=level, alpha=alpha,
                      pairs=[(i, 0) for i in range(1, len(preds))])
    out = []
    for i, p in enumerate(preds):
        s = score_predictions(p, paper_compat=paper_compat, n_boot=n_boot, seed=seed, level=level)
        c = ConditionResult(canonical(p.removed), p.source, s)
        if i and cmp is not None:
            pc = cmp.pairs[i - 1]
            c.n_paired, c.dropped, c.mcnemar, c.diffs = pc.n_paired, pc.dropped, pc.mcnemar, pc.metrics
        out.append(c)
    settings = {"bootstrap": n_boot, "seed": seed, "level": level, "alpha": alpha,
                "difference": "condition - full context",
                "adjustment": "Benjamini-Hochberg over all conditions and metrics",
                "cases": "all cases (paper-compatible)" if paper_compat else "cases both inputs answered"}
    return AblationResult(models[0], modes[0], paper_compat, out, settings)


def format_ablation(res: AblationResult) -> str:
    """Each condition's figures, then its difference from the full context with a CI."""
    ms = [m for m in STUDY_METRICS if m in metric_names(res.mode)]
    tag = " (paper-compatible)" if res.paper_compat else ""
    s = res.settings
    lines = [f"ablation: {res.model} [{res.mode}]{tag}, {len(res.conditions)} conditions",
             f"difference = condition - full context; {s['level']:.0%} paired-bootstrap CI ({s['bootstrap']} "
             f"resamples); p(BH): Benjamini-Hochberg over all conditions and metrics", ""]
    width = max(len(c.name) for c in res.conditions) + 2
    lines.append(f"{'condition':<{width}}{'coverage':>9}" + "".join(f"{m:>15}" for m in ms))
    for c in res.conditions:
        lines.append(f"{c.name:<{width}}{100 * c.score.coverage:>8.1f}%"
                     + "".join(f"{_f(c.score.values.get(m)):>15}" for m in ms))
    lines.append("")
    if len(res.conditions) == 1:
        lines.append("only the full context was given: add ablation runs or files to see differences")
    for c in res.conditions[1:]:
        lines.append(f"{c.name}  vs  full context ({c.n_paired} paired cases"
                     + (f", {c.dropped} dropped" if c.dropped else "") + ")")
        for m in ms:
            d = c.diffs.get(m)
            if d is None:
                continue
            sig = " *" if d.significant else ""
            lines.append(f"  {m:<14}{_f(d.diff):>9}   [{_f(d.ci[0])}, {_f(d.ci[1])}]   p = {_fp(d.p)} ({d.test})"
                         f"   p(BH) = {_fp(d.p_adjusted)}{sig}")
    lines.append("")
    lines.append("* significant after Benjamini-Hochberg")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------
# Running the missing conditions


@dataclass
class ConditionRun:
    """What ``run_ablation`` did for one condition."""

    removed: tuple[str, ...]
    run_dir: Path
    action: str  # "reused" (already complete), "ran" (new or resumed)
    status: str  # the run's final status


def ablation_run_dir(out_root: str | Path, model: str, mode: str, removed: Sequence[str]) -> Path:
    """Where a condition's run lives: ``<out_root>/<model>_<mode>[_<removed>]``, the same name
    ``casebench run`` gives by default, so runs made by hand are found and re-used."""
    from ..runs.execute import default_out_dir

    return Path(out_root) / default_out_dir(model, mode, tuple(removed)).name


def run_ablation(
    base: "Any", params: Sequence[str] | str = DEFAULT_PARAMS, out_root: str | Path = "runs",
    dataset: Dataset | None = None, on_condition: Callable[[tuple[str, ...], Path, str], None] | None = None,
) -> list[ConditionRun]:
    """Make sure every condition of the study has a complete run, running what is missing.

    ``base`` is a ``runner.RunConfig`` (model, mode, selection, settings); its ``out`` and
    ``removed`` are set per condition. A directory that holds a complete run of the same request
    is re-used without loading the model; a partial one is resumed; one that holds a different
    run stops the study (``runs.ManifestMismatch``, listing the differences) before anything is
    asked. ``on_condition(removed, run_dir, action)`` is called before each condition (progress).
    Stops at the first condition that does not complete (its status is returned last).
    """
    from ..data import load_dataset
    from dataclasses import replace

    from ..runs.execute import check_resumable, prepare, resolve_data_path, run
    from ..runs.results import run_status

    conditions = ablation_conditions(params)
    if dataset is None:
        dataset = load_dataset(resolve_data_path(base.data))
    plans = []
    for removed in conditions:
        out = ablation_run_dir(out_root, base.model, base.mode, removed)
        cfg = replace(base, removed=removed, out=out)
        prep = prepare(cfg, dataset)
        old = check_resumable(prep)  # refuse a directory holding another run, before any work
        done = old is not None and run_status(out)["pending"] == 0
        plans.append((removed, out, cfg, done))
    results = []
    for removed, out, cfg, done in plans:
        if done:
            if on_condition:
                on_condition(removed, out, "reused")
            results.append(ConditionRun(removed, out, "reused", "complete"))
            continue
        if on_condition:
            on_condition(removed, out, "running")
        summary = run(cfg, dataset=dataset)
        results.append(ConditionRun(removed, out, "ran", summary.status))
        if summary.status != "complete":
            break
    return results


__all__ = [
    "DEFAULT_PARAMS", "AblationResult", "AblationStudyError", "CompareError", "ConditionResult", "ConditionRun",
    "ablation_conditions", "ablation_run_dir", "analyse_ablation", "canonical", "condition_name",
    "format_ablation", "run_ablation",
]

