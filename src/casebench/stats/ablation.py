"""The CI-parameter ablation study: which part of the context moves a judge's verdicts.

A study is one model in one mode under several *conditions*: the full context, and the context
with some CI parameters removed (``data.ablate_context``). This module

* lists the conditions of a study (``ablation_conditions``): each requested parameter alone, then
  every pair, then all of them together (for the default three top-level parameters, that is
  every subset: 1 + 3 + 3 + 1 = 8 conditions);
* runs the missing ones (``run_ablation``), re-using run directories that are already complete
  and resuming those that are not, through ``runs.execute.arun``, with one backend (one loaded
  model, one API client) shared by every condition;
* analyses any set of finished conditions (``analyse_ablation``): run directories or published
  ablation files (``output_<mode>_<params>.json``), the condition being read from each input's
  ``removed``. Each condition's figures are exactly ``metrics.score_predictions`` on that input
  (so ``--paper-compat`` reproduces ``casebench score --paper-compat``), and its paired
  difference from the full context (condition - full) comes from ``compare`` (paired bootstrap
  CI; McNemar for accuracy, Williams' t for PCC; Benjamini-Hochberg over all conditions).
  Any subset of the conditions can be analysed, as long as the full context is among them.

The text of a study is ``present.tables.format_ablation`` (statistics do not format).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from ..data import Dataset, all_parameter_names, validate_parameter_names
from ..jsonutil import json_safe
from ..predictions import Predictions
from .bootstrap import DEFAULT_BOOTSTRAP
from .compare import CompareError, MetricDiff, compare
from .metrics import Score, score_predictions

DEFAULT_PARAMS: tuple[str, ...] = ("sender", "recipient", "transmission_principle")


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
    seed: int = 0, level: float = 0.95, alpha: float = 0.05, label_source: str = "published",
) -> AblationResult:
    """Score every condition and its paired difference from the full-context input.

    The inputs must be one model in one mode over the same cases, with exactly one full-context
    input (``removed == ()``) and no condition twice; ``AblationStudyError`` says what is wrong.
    ``label_source``: the human labels (``metrics.human_rates``), the same for every condition.
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
                      pairs=[(i, 0) for i in range(1, len(preds))], label_source=label_source)
    out = []
    for i, p in enumerate(preds):
        s = score_predictions(p, paper_compat=paper_compat, n_boot=n_boot, seed=seed, level=level,
                              label_source=label_source)
        c = ConditionResult(canonical(p.removed), p.source, s)
        if i and cmp is not None:
            pc = cmp.pairs[i - 1]
            c.n_paired, c.dropped, c.mcnemar, c.diffs = pc.n_paired, pc.dropped, pc.mcnemar, pc.metrics
        out.append(c)
    settings = {"bootstrap": n_boot, "seed": seed, "level": level, "alpha": alpha,
                "difference": "condition - full context",
                "adjustment": "Benjamini-Hochberg over all conditions and metrics",
                "cases": "all cases (paper-compatible)" if paper_compat else "cases both inputs answered",
                "label_source": label_source}
    return AblationResult(models[0], modes[0], paper_compat, out, settings)


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

    ``base`` is a ``runs.execute.RunConfig`` (model, mode, selection, settings); its ``out`` and
    ``removed`` are set per condition. A directory that holds a complete run of the same request
    is re-used without loading the model; a partial one is resumed; one that holds a different
    run stops the study (``ManifestMismatch``, listing the differences) before anything is
    asked. ``on_condition(removed, run_dir, action)`` is called before each condition (progress).
    Stops at the first condition that does not complete (its status is returned last).

    The conditions differ only in the prompt, so they share one backend: it is built (the local
    model loaded, the API client opened) once, before the first condition that needs asking, used
    by every condition in one event loop, and closed at the end.
    """
    import asyncio
    from dataclasses import replace

    from ..data import load_dataset
    from ..runs.execute import check_resumable, prepare, resolve_data_path
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
    return asyncio.run(_run_conditions(base, plans, dataset, on_condition))


async def _run_conditions(
    base: Any, plans: Sequence[tuple[tuple[str, ...], Path, Any, bool]], dataset: Dataset,
    on_condition: Callable[[tuple[str, ...], Path, str], None] | None,
) -> list[ConditionRun]:
    """Run the planned conditions in order with one backend (see ``run_ablation``)."""
    import asyncio

    from ..runs.execute import arun, make_run_backend

    backend = None
    results = []
    try:
        for removed, out, cfg, done in plans:
            if done:
                if on_condition:
                    on_condition(removed, out, "reused")
                results.append(ConditionRun(removed, out, "reused", "complete"))
                continue
            if on_condition:
                on_condition(removed, out, "running")
            if backend is None:
                backend = await asyncio.to_thread(make_run_backend, base)  # loading a local model blocks
            summary = await arun(cfg, backend=backend, dataset=dataset)
            results.append(ConditionRun(removed, out, "ran", summary.status))
            if summary.status != "complete":
                break
    finally:
        if backend is not None:
            try:
                await backend.aclose()
            except Exception:  # closing is best effort, as in arun
                pass
    return results


__all__ = [
    "DEFAULT_PARAMS", "AblationResult", "AblationStudyError", "CompareError", "ConditionResult", "ConditionRun",
    "ablation_conditions", "ablation_run_dir", "analyse_ablation", "canonical", "condition_name", "run_ablation",
]

