"""``casebench leaderboard``: a thin wrapper over ``stats.board.build_board`` and
``present.leaderboard.write_leaderboard`` (with ``present.eee`` for the records under eee/)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from ._common import (
    HELP, bad_input_errors, BadInput, scored_input_options, scoring_options, warn_unreadable_predictions,
)


def reference_root(reference: str | None) -> Path | None:
    """The published outputs ``--reference`` names: its directory, or (given bare) the ones
    ``casebench data fetch`` cached; None when not asked. A bare ``--reference`` with nothing
    cached is bad input."""
    from ..sources import cached_outputs

    if reference is None:
        return None
    if reference != "-":
        return Path(reference)
    root = cached_outputs()
    if root is None:
        raise BadInput("--reference without a directory reads the published outputs `casebench data fetch` caches, "
                       "and none are cached: fetch them, or give their directory (--reference DIR)")
    return root


@click.command("leaderboard")
@click.argument("inputs", nargs=-1, type=click.Path(exists=True))
@click.option("-o", "--out", required=True, type=click.Path(file_okay=False),
              help="The folder to write: index.html, plot.svg, inputs/*.html, leaderboard.json (and eee/).")
@click.option("--reference", "reference", is_flag=False, flag_value="-", default=None, metavar="[DIR]",
              help="Add the published models' main files (7 models, 18 files) as rows ranked with the inputs: from "
                   "DIR (holding exp/ or safety_* folders), or given bare, the ones `casebench data fetch` cached.")
@click.option("--eee/--no-eee", "eee", default=True, show_default=True,
              help="Also write every input's Every Eval Ever record (and instance-level sidecar) under DIR/eee/.")
@click.option("--data", type=click.Path(dir_okay=False), default=None,
              help="The dataset: for run directories whose manifest path moved.")
@click.option("--bootstrap", "n_boot", type=click.IntRange(min=0), default=1000, show_default=True,
              help=HELP["--bootstrap"])
@click.option("--bootstrap-seed", "bootstrap_seed", type=int, default=0, show_default=True, help=HELP["--bootstrap-seed"])
@click.option("--title", default=None, help="The board's title.")
@click.option("--show-text/--hide-text", "show_text", default=False, show_default=True,
              help="List the queries' text on the input pages (the dataset's licence-gated text); hidden by default.")
@scored_input_options
def leaderboard_cmd(inputs: tuple[str, ...], out: str, reference: str | None, eee: bool, data: str | None,
                    n_boot: int, bootstrap_seed: int, title: str | None, show_text: bool, label_source: str,
                    cluster: str, mode: str | None, remove: str | None, min_verdict_mass: float = 0.5,
                    level: float = 0.95) -> None:
    """Write a static leaderboard site over INPUTS (run directories, published files, inspect logs),
    with --reference the published models beside them: each kind ranked by accuracy with tie
    groups from paired tests, an over/under-refusal plot, a page per input, leaderboard.json."""
    from ..data import load_dataset
    from ..loader import load_predictions
    from ..naming import display_names
    from ..present.leaderboard import write_leaderboard
    from ..runs.record import RunError
    from ..stats.board import build_board
    from ..stats.case_sets import CompareError, case_set_groups
    from ..stats.options import LabelSourceError

    options = scoring_options(False, n_boot, bootstrap_seed, label_source, min_verdict_mass=min_verdict_mass,
                              cluster=cluster, level=level)
    if not inputs and reference is None:
        raise BadInput("give at least one input, or --reference for the published models")
    with bad_input_errors(RunError, CompareError, LabelSourceError):
        dataset = load_dataset(data) if data else None
        preds = [load_predictions(p, dataset=dataset, mode=mode, removed=remove) for p in inputs]
        warn_unreadable_predictions(preds)
        refs: list[Any] = []
        root = reference_root(reference)
        if root is not None:
            from ..reference_rows import reference_inputs

            cases = preds[0].cases if preds and len(case_set_groups(preds)) == 1 else None
            refs = [f.pred for f in reference_inputs(root, options, cases=cases, dataset=dataset, exclude=preds)]
        every = preds + refs
        board = build_board(every, options, names=display_names(every),
                            references=[False] * len(preds) + [True] * len(refs), show_text=show_text)
        extra: dict[str, str] = {}
        if eee:
            from ..present.eee import eee_files

            extra = {f"eee/{k}": v for k, v in eee_files(board, every).items()}
        path = write_leaderboard(out, board, title=title, extra=extra)
    first = [r for r in board.rows if r.table == 1 and r.tie_group == 1]
    click.echo(f"wrote {path} ({len(board.rows)} inputs; tie group 1 of the first table: "
               + ", ".join(r.name for r in first) + ")")
