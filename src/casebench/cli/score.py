"""``casebench score``: metrics with CIs for runs and published output files."""

from __future__ import annotations

import click

from ._common import BadInput, bad_input_errors


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
              help="The dataset of run directories, if their manifest's path is not reachable.")
@click.option("--label-source", type=click.Choice(["published", "votes"]), default="published", show_default=True,
              help="Human label: the published safe_rate (21 votes incl. intent) or the majority of the votes alone.")
def score_cmd(inputs: tuple[str, ...], paper_compat: bool, as_json: bool, fmt: str, by: tuple[str, ...],
              n_boot: int, seed: int, data: str | None, label_source: str) -> None:
    """Score INPUTS (run directories or published exp/ files) and print every metric with a 95% CI."""
    from ..stats.metrics import score_predictions
    from ..loader import load_predictions
    from ..present.tables import FORMATS, breakdown_table

    if as_json:
        fmt = "json"
    if paper_compat and label_source != "published":
        raise BadInput("--paper-compat uses the published labels; drop --label-source votes")
    dataset = None
    with bad_input_errors():
        if data:
            from ..data import load_dataset

            dataset = load_dataset(data)
        preds = [load_predictions(p, dataset=dataset) for p in inputs]
    scores = []
    for p in preds:
        human_rate = None
        if label_source == "votes":
            import numpy as np

            human_rate = np.array([c.votes_safe_rate for c in p.cases])
        scores.append(score_predictions(p, paper_compat=paper_compat, n_boot=n_boot, seed=seed,
                                        breakdowns=bool(by), human_rate=human_rate))
    click.echo(FORMATS[fmt](scores), nl=False)
    if fmt == "table":
        for s in scores:
            for kind in by:
                click.echo("\n" + breakdown_table(s, kind), nl=False)
