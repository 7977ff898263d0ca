"""``casebench score``: metrics with CIs for runs and published output files."""

from __future__ import annotations

import click

from ._common import bad_input_errors, file_kind_options, label_source_option, scoring_options


@click.command("score")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--paper-compat", is_flag=True,
              help="Do exactly what the authors' compute_score.py does (missing -> 1.0, unclipped BCE, ...).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per input per line (same as --format json).")
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json", "md"]), default="table", show_default=True)
@click.option("--by", "by", type=click.Choice(["category", "intent"]), multiple=True,
              help="Also print a breakdown (repeatable). JSON output then includes 'breakdowns'.")
@click.option("--bootstrap", "n_boot", type=int, default=2000, show_default=True, help="Bootstrap resamples for CIs (0: none).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--data", type=click.Path(dir_okay=False), default=None,
              help="The dataset of run directories, if their manifest's path is not reachable; published files "
                   "are checked against it record by record (default: the CASEBench_data.json beside their exp/).")
@label_source_option
@file_kind_options
def score_cmd(inputs: tuple[str, ...], paper_compat: bool, as_json: bool, fmt: str, by: tuple[str, ...],
              n_boot: int, seed: int, data: str | None, label_source: str, mode: str | None,
              remove: str | None) -> None:
    """Score INPUTS (run directories or published exp/ files) and print every metric with a 95% CI."""
    from ..loader import load_predictions
    from ..stats.metrics import LabelSourceError, score_predictions
    from ..present.tables import FORMATS, breakdown_table

    if as_json:
        fmt = "json"
    options = scoring_options(paper_compat, n_boot, seed, label_source)
    dataset = None
    with bad_input_errors():
        if data:
            from ..data import load_dataset

            dataset = load_dataset(data)
        preds = [load_predictions(p, dataset=dataset, mode=mode, removed=remove) for p in inputs]
    with bad_input_errors(LabelSourceError):
        scores = [score_predictions(p, options, breakdowns=bool(by)) for p in preds]
    click.echo(FORMATS[fmt](scores), nl=False)
    if fmt == "table":
        for s in scores:
            for kind in by:
                click.echo("\n" + breakdown_table(s, kind), nl=False)
