"""``casebench ablate``: the CI-parameter ablation study, a thin wrapper over
``casebench.stats.ablation`` (analysing) and ``casebench.runs.study.run_ablation`` (running)."""

from __future__ import annotations

import functools
import json
from typing import Any

import click

from ..modes import Mode
from ..prompts import CONTEXT_PLACEMENTS
from ._common import (
    FILE_MODE_HELP, BadInput, ModeChoice, RegistryCommand, bad_input_errors, echo_input_states, load_inputs,
    remove_option, scoring_options, stat_options,
)
from ._study_runs import run_options, run_study


@click.command("ablate", cls=RegistryCommand, backend_flags=True)
@click.argument("inputs", nargs=-1, type=click.Path(exists=True))
@click.option("--model", default=None, metavar="SPEC",
              help="Run the study with this model (openai/NAME, anthropic/NAME, hf/ID). Without it, "
                   "INPUTS (finished runs or published ablation files) are analysed.")
@click.option("--mode", type=ModeChoice(), default=None,
              help="Mode: of the study to run (with --model); else " + FILE_MODE_HELP[0].lower() + FILE_MODE_HELP[1:])
@remove_option
@click.option("--params", default="sender,recipient,transmission_principle", show_default=True, metavar="LIST",
              help="CI parameters to remove: each alone, then in pairs, then all (sub-keys such as "
                   "urgency are accepted).")
@click.option("--context-as", "context_as", type=click.Choice(CONTEXT_PLACEMENTS), default=None,
              help="Where the context goes in every condition (default: the mode's own).")
@click.option("--out-root", default="runs", show_default=True, type=click.Path(file_okay=False),
              help="Where condition runs live (<out-root>/<model>_<mode>[_<removed>][_ctx-<placement>], the names "
                   "`casebench run` gives); existing ones are re-used.")
@run_options
@stat_options
def ablate_cmd(inputs: tuple[str, ...], model: str | None, mode: "Mode | None", params: str, context_as: str | None,
               out_root: str,
               limit: int | None, stratified: int | None, stratified_seed: int, samples: int | None,
               temperature: float | None, max_tokens: int | None, max_connections: int,
               max_cost: float | None, progress: bool | None, paper_compat: bool,
               as_json: bool, n_boot: int, bootstrap_seed: int, level: float, alpha: float, data: str | None,
               label_source: str, cluster: str, remove: str | None, **registry_flags: Any) -> None:
    """CI-parameter ablation: run the conditions of a study, or re-analyse finished ones.

    \b
      casebench ablate --model SPEC --mode MODE [--params LIST] [--data PATH]
      casebench ablate INPUTS...      (run dirs or published output_<mode>[_<params>].json)

    Prints each condition's metrics and its paired difference from the full context with a CI.
    """
    from ..present.study_text import format_ablation
    from ..stats.ablation import AblationStudyError, analyse_ablation
    from ..stats.case_sets import CompareError
    from ..stats.metrics import LabelSourceError

    options = scoring_options(paper_compat, n_boot, bootstrap_seed, label_source, level=level, alpha=alpha, cluster=cluster)
    if model is None:
        if not inputs:
            raise BadInput("give INPUTS to analyse (run directories or published ablation files), "
                           "or --model and --mode to run a study")
        preds = load_inputs(inputs, data, mode, remove)
    else:
        if inputs:
            raise BadInput("give either --model/--mode (run a study) or INPUTS (analyse finished runs), not both")
        if mode is None:
            raise BadInput("--mode is required with --model")
        if remove is not None:
            raise BadInput("--remove names what published INPUTS hold; a study's conditions are --params")
        from ..runs.study import run_ablation
        from ..stats.ablation import condition_name

        preds = run_study(functools.partial(run_ablation, params=params, out_root=out_root), condition_name, model,
                          mode, None, None, data, limit, stratified, stratified_seed, samples, temperature, max_tokens,
                          max_connections, max_cost, progress, None, "unsafe", registry_flags, context_as=context_as)
    echo_input_states(preds, to_stderr=as_json)
    with bad_input_errors(CompareError, AblationStudyError, LabelSourceError):
        result = analyse_ablation(preds, options)
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2, ensure_ascii=False))
    else:
        click.echo(format_ablation(result), nl=False)
