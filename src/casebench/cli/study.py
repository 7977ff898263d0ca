"""``casebench study``: the placement study, a thin wrapper over ``casebench.runs.study``
(running) and ``casebench.stats.placement`` (analysis)."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from ..modes import mode_names
from ._common import (
    BadInput, bad_input_errors, check_label_source, echo_err, refusal_classifier_options,
)
from .compare import _load, _run_options, _stat_options, _warn_incomplete


@click.command("study")
@click.argument("inputs", nargs=-1, type=click.Path(exists=True))
@click.option("--placements", default="user,system,turns", show_default=True, metavar="LIST",
              help="Context placements to run, comma-separated (user, system, turns).")
@click.option("--model", default=None, metavar="SPEC",
              help="Run the study with this model (hf/ID, openai/NAME, anthropic/NAME). Without it, INPUTS "
                   "(finished runs in different placements) are analysed.")
@click.option("--mode", type=click.Choice(mode_names()), default=None, help="Mode of the study to run (with --model).")
@click.option("--remove", default="", metavar="LIST", help="CI parameters removed in every placement (with --model).")
@click.option("--say-do", "say_do_mode", type=click.Choice([m for m in mode_names() if m != "respond"]), default=None,
              help="Respond studies: also run the model as a judge in this mode in every placement and report the "
                   "say-do gap per placement.")
@click.option("--pairs", type=int, default=None, metavar="N",
              help="A seeded subset of N query pairs (both contexts of each query), stratified by category, so the "
                   "context figures have pairs to read (with --model; seed: --stratified-seed).")
@click.option("--out-root", default="runs", show_default=True, type=click.Path(file_okay=False),
              help="Where the placement runs live (<out-root>/<model>_<mode>[_<removed>][_ctx-<placement>], the names "
                   "`casebench run` gives); existing ones are re-used, partial ones resumed.")
@_run_options
@refusal_classifier_options
@_stat_options
def study_cmd(inputs: tuple[str, ...], placements: str, model: str | None, mode: str | None, remove: str,
              say_do_mode: str | None, pairs: int | None, out_root: str, limit: int | None,
              stratified: int | None, stratified_seed: int, samples: int | None, temperature: float | None,
              max_tokens: int | None, max_connections: int, base_url: str | None, api_key_env: str | None,
              timeout: float | None, batch_size: int | None, device: str | None, dtype: str | None,
              max_cost: float | None, progress: bool | None, refusal_classifier: str | None,
              refusal_labels: str | None, partial_as: str, refusal_base_url: str | None, paper_compat: bool,
              as_json: bool, n_boot: int, seed: int, level: float, alpha: float, data: str | None,
              label_source: str) -> None:
    """Placement study: one model with the context inside the prompt (user), as the system prompt
    (system) and as the conversation before the query (turns).

    \b
      casebench study --model SPEC --mode MODE [--placements user,system,turns] [--pairs N] [--say-do binary]
      casebench study INPUTS...     (finished runs of one model and mode in different placements;
                                     judge runs among a respond study's inputs give the say-do gap)

    Prints per placement the metrics, the context figures over query pairs (shift, follow,
    blind; CIs resample pairs), in respond mode over- and under-refusal and the say-do gap; then
    the paired tests between placements (McNemar on the shared cases, paired-bootstrap CIs,
    Benjamini-Hochberg) and the paired difference of the context shift.
    """
    from ..present.tables import format_placements
    from ..stats.compare import CompareError
    from ..stats.metrics import LabelSourceError
    from ..stats.placement import PlacementStudyError, analyse_placements

    check_label_source(paper_compat, label_source)
    if model is None:
        if not inputs:
            raise BadInput("give INPUTS to analyse (run directories in different placements), "
                           "or --model and --mode to run a study")
        preds = _load(inputs, data)
    else:
        if inputs:
            raise BadInput("give either --model/--mode (run a study) or INPUTS (analyse finished runs), not both")
        if mode is None:
            raise BadInput("--mode is required with --model")
        if say_do_mode is not None and mode != "respond":
            raise BadInput("--say-do goes with --mode respond")
        if sum(x is not None for x in (limit, stratified, pairs)) > 1:
            raise BadInput("choose one of --limit, --stratified and --pairs")
        preds = _run(model, mode, placements, remove, say_do_mode, pairs, data, out_root, limit,
                     stratified, stratified_seed, samples, temperature, max_tokens, max_connections, base_url,
                     api_key_env, timeout, batch_size, device, dtype, max_cost, progress, refusal_classifier,
                     refusal_labels, partial_as, refusal_base_url)
    _warn_incomplete(preds)
    behaviour = [p for p in preds if p.mode_spec.reads_behaviour]
    study, judges = (behaviour, [p for p in preds if not p.mode_spec.reads_behaviour]) if behaviour else (preds, [])
    with bad_input_errors(CompareError, PlacementStudyError, LabelSourceError):
        result = analyse_placements(study, judges=judges, paper_compat=paper_compat, n_boot=n_boot, seed=seed,
                                    level=level, alpha=alpha, label_source=label_source)
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2, ensure_ascii=False))
    else:
        click.echo(format_placements(result), nl=False)


def _run(model: str, mode: str, placements: str, remove: str, say_do_mode: str | None, pairs: int | None,
         data: str | None, out_root: str, limit: int | None, stratified: int | None, stratified_seed: int,
         samples: int | None, temperature: float | None, max_tokens: int | None, max_connections: int,
         base_url: str | None, api_key_env: str | None, timeout: float | None, batch_size: int | None,
         device: str | None, dtype: str | None, max_cost: float | None, progress: bool | None,
         refusal_classifier: str | None, refusal_labels: str | None, partial_as: str,
         refusal_base_url: str | None) -> list[Any]:
    from ..backends.base import UnsupportedModeError
    from ..data import AblationError, load_dataset
    from ..runs.execute import RunConfig, resolve_data_path
    from ..runs.record import RunError, RunLocked
    from ..runs.results import load_run
    from ..runs.select import stratified_pairs
    from ..runs.study import Condition, run_placements
    from ._common import API_PREFIXES, backend_options, classifier_options, setup_logging

    setup_logging(0)
    opts = backend_options(model, base_url=base_url, api_key_env=api_key_env, timeout=timeout,
                           batch_size=batch_size, device=device, dtype=dtype)
    call_timeout = 2 * (timeout or 60.0) + 10 if model.startswith(API_PREFIXES) else None

    def note(cond: Condition, run_dir: Any, action: str) -> None:
        echo_err(f"casebench: {cond.name()}: {action} {run_dir}")

    try:
        with bad_input_errors(RunError, AblationError, UnsupportedModeError):
            dataset = load_dataset(resolve_data_path(data))
            cases = stratified_pairs(dataset, pairs, stratified_seed) if pairs is not None else None
            base = RunConfig(mode=mode, model=model, data=dataset.path, removed=remove, limit=limit, cases=cases,
                             stratified=stratified, seed=stratified_seed, samples=samples, temperature=temperature,
                             max_tokens=max_tokens, max_connections=max_connections, max_cost=max_cost,
                             call_timeout=call_timeout, backend_options=opts, progress=progress,
                             refusal_classifier=refusal_classifier,
                             classifier_options=classifier_options(refusal_classifier, refusal_labels,
                                                                   refusal_base_url),
                             partial_as_safe=partial_as == "safe")
            try:
                runs = run_placements(base, placements, out_root=out_root, dataset=dataset, on_condition=note,
                                      judge_mode=say_do_mode)
            except RunLocked as e:
                raise click.ClickException(str(e)) from None
            unfinished = [r for r in runs if r.status != "complete"]
            if unfinished:
                r = unfinished[0]
                echo_err(f"casebench: {r.run_dir} stopped ({r.status}); re-run the same command to resume the study")
                sys.exit(1)
            return [load_run(r.run_dir, dataset=dataset) for r in runs]
    except KeyboardInterrupt:
        echo_err("casebench: interrupted; re-run the same command to resume the study")
        sys.exit(130)
