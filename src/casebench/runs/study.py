"""Studies: several runs of one model that differ only in how each case is put to it.

A study is one model in one mode under several *conditions*. A condition is a CI-parameter
removal (the ablation study: ``data.ablation_conditions``), a context placement
(the placement study: ``user``, ``system``, ``turns``) and a query mutation (the mutation study:
the base wording and SORRY-Bench's rewordings, ``mutations``). This module owns running them; what the
figures mean is ``stats/``'s business (``stats.ablation.analyse_ablation``,
``stats.placement.analyse_placements``, ``stats.mutation_effects.analyse_mutations``), which reads
the finished runs like any other input.

Why it is built this way:

* **One backend for the whole study.** The conditions differ only in the prompt, so they share
  one backend: it is built (the local model loaded, the API client opened) once, before the
  first condition that needs asking, used by every condition in one event loop, and closed at
  the end. A study with nothing left to ask builds none.
* **Runs are ordinary runs.** Each condition lives in ``<out_root>/<name>``, where ``<name>`` is
  ``config.default_out_dir``, as ``casebench run`` names it (model, mode, removals, the placement
  when it is not the mode's default, the mutation, the dataset's SHA-256 and the selection), so a
  study's runs are found again by the next study, by ``casebench run`` with the same options, and
  can be scored, compared and resumed one by one.
* **Nothing is asked twice, nothing is overwritten.** A directory holding a complete run of the
  same request is re-used without loading the model; a partial one is resumed; one holding a
  different run stops the study (``ManifestMismatch``, listing the differences) before
  anything is asked.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Sequence

from ..data import Dataset, ablation_conditions, load_dataset, validate_parameter_names
from ..modes import Mode, get_mode
from ..prompts import CONTEXT_PLACEMENTS
from .config import RunConfig, default_out_dir, resolve_data_path, selection_tag
from .record import RunError, RunState

__all__ = [
    "Condition", "ConditionRun", "ablation_run_dir", "study_run_dir", "run_conditions", "run_ablation",
    "run_placements", "parse_placements", "run_mutations", "parse_mutations", "REVEAL_ARMS", "parse_arms",
    "run_reveal",
]


@dataclass(frozen=True)
class Condition:
    """One condition of a study: the CI parameters removed, where the context goes and (for the
    judge runs beside a respond study) the mode, when it is not the study's."""

    removed: tuple[str, ...] = ()
    context_as: str | None = None  # None: the mode's default placement
    mode: str | None = None  # None: the study's mode
    mutation: str | None = None  # None: the dataset's own wording
    #: the reveal study's resample arm: each case asked this many times (None: the run's samples)
    samples: int | None = None

    def name(self) -> str:
        parts = ["full context" if not self.removed else "- " + ", ".join(self.removed)]
        if self.context_as:
            parts.append(f"context as {self.context_as}")
        if self.mode:
            parts.append(f"{self.mode} mode")
        if self.mutation:
            parts.append(f"query mutation {self.mutation}")
        if self.samples:
            parts.append(f"asked {self.samples} times")
        return "; ".join(parts)


@dataclass
class ConditionRun:
    """What a study did for one condition."""

    removed: tuple[str, ...]
    run_dir: Path
    action: str  # "reused" (already complete), "ran" (new or resumed)
    status: RunState  # the run's state after the study
    context_as: str | None = None
    mode: str | None = None  # None: the study's mode
    mutation: str | None = None  # None: the dataset's own wording


def study_run_dir(out_root: str | Path, model: str, mode: "str | Mode", removed: Sequence[str] = (),
                  context_as: str | None = None, mutation: str | None = None, samples: int | None = None,
                  dataset_sha256: str | None = None, selection: str | None = None) -> Path:
    """Where a condition's run lives: ``<out_root>/`` + ``casebench run``'s default name
    (``<model>_<mode>[_<removed>][_ctx-<placement>][_mut-<mutation>][_<dataset>][_<selection>]``,
    the placement only when it is not the mode's default), so that a study's run and the same run
    made by ``casebench run`` are named alike, and studies of other datasets or selections never
    share a folder; ``_resample<samples>`` when a condition asks its own number of samples."""
    default = get_mode(mode).default_context_as
    name = default_out_dir(model, mode, tuple(removed), context_as, default, dataset_sha256, selection,
                           mutation=mutation).name
    return Path(out_root) / (name + (f"_resample{samples}" if samples else ""))


def ablation_run_dir(out_root: str | Path, model: str, mode: str, removed: Sequence[str],
                     context_as: str | None = None, dataset_sha256: str | None = None,
                     selection: str | None = None) -> Path:
    """The run directory of one ablation condition (``study_run_dir``)."""
    return study_run_dir(out_root, model, mode, removed, context_as, dataset_sha256=dataset_sha256,
                         selection=selection)


def parse_placements(placements: Sequence[str] | str) -> tuple[str, ...]:
    """``"user,system,turns"`` (or a sequence) -> checked, deduplicated placements."""
    names = [p.strip() for p in placements.split(",")] if isinstance(placements, str) else [str(p).strip() for p in placements]
    names = list(dict.fromkeys(n for n in names if n))
    bad = [n for n in names if n not in CONTEXT_PLACEMENTS]
    if bad:
        raise RunError(f"unknown context placement(s) {', '.join(map(repr, bad))}; "
                       f"choose from {', '.join(CONTEXT_PLACEMENTS)}")
    if len(names) < 2:
        raise RunError("a placement study needs at least two placements, e.g. user,system,turns")
    return tuple(names)


OnCondition = Callable[[Condition, Path, str], None]


def run_conditions(
    base: RunConfig, conditions: Sequence[Condition], out_root: str | Path = "runs",
    dataset: Dataset | None = None, on_condition: OnCondition | None = None,
    mutations_from: str | Path | None = None, mutator: str | None = None,
    mutator_options: dict[str, Any] | None = None,
) -> list[ConditionRun]:
    """Make sure every condition has a complete run, running what is missing, with one backend.

    ``base`` names the model, mode, selection and settings; its ``out``, ``removed``,
    ``context_as`` and ``mutation`` are set per condition (``mutations_from``, the user's copy of
    SORRY-Bench's files, applies to the conditions with a mutation; ``mutator``, a model that
    writes rewordings, to those whose mutation is not built in). Every condition is prepared and its directory checked
    before anything is asked or loaded. ``on_condition(condition, run_dir, action)`` is called
    before each one ("reused" or "running"). Stops at the first condition that does not complete
    (its status is returned last).
    """
    from .execute import check_resumable, prepare
    from .results import run_status

    if dataset is None:
        dataset = load_dataset(resolve_data_path(base.data))
    plans = []
    selection = selection_tag(base.limit, base.stratified, base.pairs, base.selection_seed, base.cases is not None)
    for cond in conditions:
        mode = cond.mode or base.mode
        out = study_run_dir(out_root, base.model, mode, cond.removed, cond.context_as, cond.mutation, cond.samples,
                            dataset.sha256, selection)
        cfg = replace(base, mode=mode, removed=tuple(cond.removed), context_as=cond.context_as, out=out,
                      samples=cond.samples if cond.samples else base.samples,
                      mutation=cond.mutation, mutations_from=mutations_from if cond.mutation else None,
                      **_writer(cond.mutation, mutator, mutator_options))
        if not get_mode(mode).reads_behaviour:  # a judge run beside a respond study reads no answers
            cfg = replace(cfg, refusal_classifier=None, classifier_options={}, partial_as_safe=False)
        prep = prepare(cfg, dataset)
        old = check_resumable(prep)  # refuse a directory holding another run, before any work
        done = old is not None and run_status(out).all_final
        plans.append((cond, out, cfg, done))
    return asyncio.run(_run_planned(base, plans, dataset, on_condition))


async def _run_planned(
    base: RunConfig, plans: Sequence[tuple[Condition, Path, RunConfig, bool]], dataset: Dataset,
    on_condition: OnCondition | None,
) -> list[ConditionRun]:
    """Run the planned conditions in order with one backend (see ``run_conditions``)."""
    from . import execute

    backend = None
    results = []
    try:
        for cond, out, cfg, done in plans:
            if done:
                if on_condition:
                    on_condition(cond, out, "reused")
                results.append(ConditionRun(tuple(cond.removed), out, "reused", RunState.COMPLETE, cond.context_as,
                                            cond.mode, cond.mutation))
                continue
            if on_condition:
                on_condition(cond, out, "running")
            if backend is None:  # loading a local model blocks
                backend = await asyncio.to_thread(execute.make_run_backend, base)
            summary = await execute.arun(cfg, backend=backend, dataset=dataset)
            results.append(ConditionRun(tuple(cond.removed), out, "ran", summary.status, cond.context_as, cond.mode,
                                        cond.mutation))
            if summary.status is not RunState.COMPLETE:
                break
    finally:
        if backend is not None:
            try:
                await backend.aclose()
            except Exception:  # closing is best effort, as in arun
                pass
    return results


def run_ablation(
    base: RunConfig, params: Sequence[str] | str = ("sender", "recipient", "transmission_principle"),
    out_root: str | Path = "runs", dataset: Dataset | None = None,
    on_condition: Callable[[tuple[str, ...], Path, str], None] | None = None,
) -> list[ConditionRun]:
    """Every condition of the ablation study (``data.ablation_conditions``: the full
    context, each parameter alone, every pair, all together) in ``base``'s placement, run with
    one backend (``run_conditions``). ``on_condition(removed, run_dir, action)`` reports progress."""
    conditions = [Condition(removed, base.context_as) for removed in ablation_conditions(params)]
    note = None if on_condition is None else (lambda c, out, action: on_condition(c.removed, out, action))
    return run_conditions(base, conditions, out_root, dataset, note)


def run_placements(
    base: RunConfig, placements: Sequence[str] | str = CONTEXT_PLACEMENTS, out_root: str | Path = "runs",
    dataset: Dataset | None = None, on_condition: OnCondition | None = None, judge_mode: str | None = None,
) -> list[ConditionRun]:
    """The placement study: ``base`` (with its removals) once per context placement, with one
    backend (``run_conditions``). ``judge_mode`` (a respond study only): also run the same model
    as a judge in that mode in every placement, for the say-do gap (those runs come after the
    respond runs, with ``ConditionRun.mode`` set)."""
    removed = validate_parameter_names(base.removed)
    names = parse_placements(placements)
    conditions = [Condition(removed, p) for p in names]
    if judge_mode is not None:
        if not get_mode(base.mode).reads_behaviour:
            raise RunError(f"a judge mode for the say-do gap goes with a respond study, not {base.mode!r}")
        if get_mode(judge_mode).reads_behaviour:
            raise RunError(f"the say-do judge mode must be a judge mode (binary, score, prob), not {judge_mode!r}")
        conditions += [Condition(removed, p, judge_mode) for p in names]
    return run_conditions(base, conditions, out_root, dataset, on_condition)


def parse_mutations(mutations: Sequence[str] | str) -> tuple[str, ...]:
    """``"caesar,atbash"`` (or a sequence) -> checked, deduplicated mutation names (``base``,
    the dataset's own wording, is always run and may be left out)."""
    from ..mutations import MutationError, get_mutation

    names = [p.strip() for p in mutations.split(",")] if isinstance(mutations, str) else [str(p).strip() for p in mutations]
    names = [n for n in dict.fromkeys(n for n in names if n) if n != "base"]
    if not names:
        raise RunError("a mutation study needs at least one mutation, e.g. --mutations caesar,atbash")
    try:
        return tuple(get_mutation(n).name for n in names)
    except MutationError as e:
        raise RunError(f"--mutations: {e}") from None


def _writer(mutation: str | None, mutator: str | None, options: dict[str, Any] | None) -> dict[str, Any]:
    """The mutator settings of a condition: a mutator writes only what casebench cannot reword."""
    from ..mutations import get_mutation

    if mutation is None or mutator is None or get_mutation(mutation).builtin:
        return {"mutator": None, "mutator_options": {}}
    return {"mutator": mutator, "mutator_options": dict(options or {})}


def run_mutations(
    base: RunConfig, mutations: Sequence[str] | str, out_root: str | Path = "runs", dataset: Dataset | None = None,
    on_condition: OnCondition | None = None, mutations_from: str | Path | None = None, mutator: str | None = None,
    mutator_options: dict[str, Any] | None = None,
) -> list[ConditionRun]:
    """The mutation study: ``base`` (its removals and placement) in the dataset's own wording,
    then once per query mutation, with one backend (``run_conditions``); the rewordings come
    from ``mutations_from`` (the user's copy of SORRY-Bench's files) when given, else the
    built-in ones, and ``mutator`` (a model spec) writes those casebench cannot."""
    removed = validate_parameter_names(base.removed)
    names = parse_mutations(mutations)
    plain = replace(base, mutation=None, mutations_from=None, mutator=None, mutator_options={})
    for m in names:  # a mutation without rewordings is refused before anything is asked
        replace(plain, mutation=m, mutations_from=mutations_from, **_writer(m, mutator, mutator_options))
    conditions = [Condition(removed, base.context_as)] + [Condition(removed, base.context_as, mutation=m) for m in names]
    return run_conditions(plain, conditions, out_root, dataset, on_condition, mutations_from, mutator, mutator_options)


#: the reveal study's arms: name -> the placement its run asks in (``resample``: the full
#: placement asked as many times as a reveal conversation has turns)
REVEAL_ARMS: dict[str, str] = {"full": "user", "concat": "concat", "early": "reveal-early", "late": "reveal-late",
                               "resample": "user"}


def parse_arms(arms: Sequence[str] | str) -> tuple[str, ...]:
    """``"full,early,late"`` (or a sequence) -> checked, deduplicated arms, ``full`` first (every
    arm is compared with it, so it is always run)."""
    names = [a.strip() for a in arms.split(",")] if isinstance(arms, str) else [str(a).strip() for a in arms]
    names = list(dict.fromkeys(n for n in names if n))
    bad = [n for n in names if n not in REVEAL_ARMS]
    if bad:
        raise RunError(f"unknown reveal arm(s) {', '.join(map(repr, bad))}; choose from {', '.join(REVEAL_ARMS)}")
    rest = [n for n in names if n != "full"]
    if not rest:
        raise RunError("a reveal study needs at least one arm beside full, e.g. --reveal full,early,late")
    return ("full", *rest)


def conversation_turns(dataset: Dataset, cases: Sequence[int] | None, removed: Sequence[str]) -> int:
    """How many user turns a reveal conversation of these cases has (the most among them): the
    CI groups left after ``removed``, and the query."""
    from ..prompts import render_reveal

    picked = range(len(dataset)) if cases is None else cases
    return max((len(render_reveal(dataset[i].ablated(tuple(removed)).context, dataset[i].query, "reveal-early"))
                for i in picked), default=1)


def run_reveal(
    base: RunConfig, arms: Sequence[str] | str, out_root: str | Path = "runs", dataset: Dataset | None = None,
    on_condition: OnCondition | None = None,
) -> list[ConditionRun]:
    """The reveal study: ``base`` (a respond run, its removals and selection) once per arm, on the
    same cases, with one backend (``run_conditions``): ``full`` (the paper's user placement),
    ``concat`` (the CI groups as paragraphs of one message), ``early`` and ``late`` (live reveal
    conversations), ``resample`` (``full`` asked as many times as a conversation has turns: the
    control for more calls)."""
    names = parse_arms(arms)
    if not get_mode(base.mode).reads_behaviour:
        raise RunError(f"a reveal study asks the model as the chatbot: --mode respond, not {base.mode!r}")
    if base.samples not in (None, 1):
        raise RunError(f"a reveal study asks one conversation per case (the resample arm sets its own count); "
                       f"--samples {base.samples} does not apply")
    removed = validate_parameter_names(base.removed)
    if dataset is None:
        dataset = load_dataset(resolve_data_path(base.data))
    k = conversation_turns(dataset, base.cases, removed)
    conditions = [Condition(removed, REVEAL_ARMS[a], samples=k if a == "resample" else None) for a in names]
    return run_conditions(replace(base, samples=None), conditions, out_root, dataset, on_condition)
