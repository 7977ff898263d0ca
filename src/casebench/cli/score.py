"""``casebench score``: metrics with CIs for runs and published output files."""

from __future__ import annotations

import click

from ._common import (
    apply_min_verdict_mass, bad_input_errors, file_kind_options, label_source_option, load_reference_inputs, reference_option, scoring_options,
    min_verdict_mass_option, warn_low_verdict_mass, warn_unreadable_predictions,
)


@click.command("score")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--paper-compat", is_flag=True,
              help="Do exactly what the authors' compute_score.py does (missing -> 1.0, unclipped BCE, ...).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per input per line (same as --format json).")
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json", "md"]), default="table", show_default=True)
@click.option("--by", "by", type=click.Choice(["category", "intent"]), multiple=True,
              help="Also print a breakdown with CIs (repeatable); every --format carries it (JSON: 'breakdowns').")
@click.option("--bootstrap", "n_boot", type=click.IntRange(min=0), default=2000, show_default=True, help="Bootstrap resamples for CIs (0: none).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--data", type=click.Path(dir_okay=False), default=None,
              help="The dataset of run directories, if their manifest's path is not reachable; published files "
                   "are checked against it record by record (default: the CASEBench_data.json beside their exp/).")
@label_source_option
@file_kind_options
@min_verdict_mass_option
@reference_option
def score_cmd(inputs: tuple[str, ...], paper_compat: bool, as_json: bool, fmt: str, by: tuple[str, ...],
              n_boot: int, seed: int, data: str | None, label_source: str, mode: str | None,
              remove: str | None, reference: str | None, no_reference: bool, min_verdict_mass: float = 0.5) -> None:
    """Score INPUTS (run directories or published exp/ files) and print every metric with a 95% CI."""
    from ..loader import load_predictions
    from ..stats.metrics import LabelSourceError, score_predictions
    from ..present.tables import FORMATS, reference_table

    if as_json:
        fmt = "json"
    options = scoring_options(paper_compat, n_boot, seed, label_source)
    dataset = None
    with bad_input_errors():
        if data:
            from ..data import load_dataset

            dataset = load_dataset(data)
        preds = [load_predictions(p, dataset=dataset, mode=mode, removed=remove) for p in inputs]
    warn_unreadable_predictions(preds)
    apply_min_verdict_mass(preds, min_verdict_mass)
    with bad_input_errors(LabelSourceError):
        scores = [score_predictions(p, options, breakdowns=by) for p in preds]
    refs, ref_root = load_reference_inputs(reference, no_reference, preds, dataset)
    with bad_input_errors(LabelSourceError):
        ref_scores = [score_predictions(p, options) for p in refs]
    if fmt in ("csv", "md") and ref_scores:
        # one table: the published models' rows follow the inputs', marked in their name
        from dataclasses import replace

        scores = scores + [replace(r, model=f"{r.model} (published)") for r in ref_scores]
        ref_scores = []
    click.echo(FORMATS[fmt](scores), nl=False)
    warn_low_verdict_mass(scores)
    if ref_scores and fmt == "table":
        click.echo(f"\n{reference_table(ref_scores, ref_root or '')}", nl=False)
    elif ref_scores:
        click.echo(FORMATS[fmt](ref_scores, reference=True), nl=False)
    if fmt == "table":
        from ..stats.context import reference_line, references_by_dataset

        people = references_by_dataset(preds, n_boot=n_boot, seed=seed)
        for members, ref in people:
            which = "" if len(people) == 1 else " (inputs " + ", ".join(str(i + 1) for i in members) + ")"
            click.echo(f"\nreference{which}: {reference_line(ref)}")
