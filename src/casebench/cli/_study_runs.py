"""Running a study's conditions from the command line: what ``ablate --model`` and ``study --model``
share (the run flags and ``run_study``), apart from ``_common`` because only these two commands run
studies and ``_common`` is what every command reads. Like ``_common`` it is a helper, not a
command: command modules import it, never each other."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Callable

import click

from ._common import (
    HELP, TEMPERATURE, USD, backend_options, bad_input_errors, call_timeout as wall_limit, classifier_options,
    echo_err, exit_interrupted, setup_logging,
)

if TYPE_CHECKING:
    from ..modes import Mode


#: how a study's runs are made (``ablate`` and ``study`` with --model; backend flags come from the registry)
RUN_OPTIONS = [
    click.option("--limit", type=click.IntRange(min=1), default=None, help=HELP["--limit"]),
    click.option("--stratified", type=click.IntRange(min=1), default=None, metavar="N",
                 help=HELP["--stratified"]),
    click.option("--stratified-seed", type=int, default=0, show_default=True, help="Seed of --stratified."),
    click.option("--samples", type=click.IntRange(min=1), default=None, help="Samples per case (default: 3 in score mode, else 1)."),
    click.option("--temperature", type=TEMPERATURE, default=None, help=HELP["--temperature"]),
    click.option("--max-tokens", type=click.IntRange(min=1), default=None, help=HELP["--max-tokens"]),
    click.option("--max-connections", type=click.IntRange(min=1), default=8, show_default=True,
                 help=HELP["--max-connections"]),
    click.option("--max-cost", type=USD, default=None, metavar="USD", help=HELP["--max-cost"]),
    click.option("--progress/--no-progress", default=None, help=HELP["--progress"]),
]


def run_options(f: Any) -> Any:
    """Add ``RUN_OPTIONS`` to a command."""
    for opt in reversed(RUN_OPTIONS):
        f = opt(f)
    return f


def run_study(conditions: Callable[..., list[Any]], label: Callable[[Any], str], model: str, mode: "str | Mode",
              remove: str | None, pairs: int | None, data: str | None, limit: int | None, stratified: int | None,
              stratified_seed: int, samples: int | None, temperature: float | None, max_tokens: int | None,
              max_connections: int, max_cost: float | None, progress: bool | None, refusal_classifier: str | None,
              partial_as: str, registry_flags: dict[str, Any], context_as: str | None = None) -> list[Any]:
    """Run (or re-use) every condition of a study, one loaded backend for all: the base run's
    config from the flags, then ``conditions(base, dataset=..., on_condition=...)`` (a
    ``runs.study`` runner: removed CI parameters, placements or mutations) asks them; ``label(condition)`` names one in
    the progress lines. The study's predictions, or an exit (1: a run stopped; 130: interrupted)."""
    from ..backends.base import UnsupportedModeError
    from ..data import AblationError, load_dataset
    from ..runs.execute import RunConfig, resolve_data_path
    from ..runs.record import RunError, RunLocked, RunState
    from ..runs.results import load_run
    from ..stats.ablation import AblationStudyError

    setup_logging(0)
    opts = backend_options(model, registry_flags)
    classifier_opts = classifier_options(refusal_classifier, registry_flags)

    def note(cond: Any, run_dir: Any, action: str) -> None:
        echo_err(f"casebench: {label(cond)}: {action} {run_dir}")

    try:
        with bad_input_errors(RunError, AblationStudyError, AblationError, UnsupportedModeError):
            dataset = load_dataset(resolve_data_path(data))
            # the selection as `run` takes it, so a study's runs are named as `run` names them
            base = RunConfig(mode=mode, model=model, data=dataset.path, removed=remove or (), limit=limit, pairs=pairs,
                             stratified=stratified, selection_seed=stratified_seed, samples=samples,
                             temperature=temperature, max_tokens=max_tokens, max_connections=max_connections,
                             max_cost=max_cost, call_timeout=wall_limit(model, opts), backend_options=opts,
                             progress=progress, refusal_classifier=refusal_classifier,
                             classifier_options=classifier_opts, partial_as_safe=partial_as == "safe",
                             context_as=context_as, command=("casebench", *sys.argv[1:]))
            try:
                runs = conditions(base, dataset=dataset, on_condition=note)
            except RunLocked as e:
                raise click.ClickException(str(e)) from None
            unfinished = [r for r in runs if r.status is not RunState.COMPLETE]
            if unfinished:
                r = unfinished[0]
                echo_err(f"casebench: {r.run_dir} stopped ({r.status}); re-run the same command to resume the study")
                sys.exit(1)
            return [load_run(r.run_dir, dataset=dataset) for r in runs]
    except KeyboardInterrupt:
        echo_err("casebench: interrupted; re-run the same command to resume the study")
        exit_interrupted(130)
