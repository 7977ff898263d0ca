"""``casebench report``: a thin wrapper over ``casebench.present.report.write_report``."""

from __future__ import annotations

import click

from ..modes import Mode

from ._common import (
    HELP, bad_input_errors, BadInput, echo_input_states, load_reference_inputs, reference_option,
    scored_input_options, scoring_options, warn_unreadable_predictions,
)


@click.command("report")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("-o", "--out", default="report.html", show_default=True, type=click.Path(dir_okay=False),
              help="The HTML file to write (self-contained: open it from disk, no network needed).")
@click.option("--data", type=click.Path(dir_okay=False), default=None,
              help="The dataset: for run directories whose manifest path moved, and for the human-vote section "
                   "(default: the votes carried by the input with the most cases).")
@click.option("--paper-compat", is_flag=True, help=HELP["--paper-compat"])
@click.option("--bootstrap", "n_boot", type=click.IntRange(min=0), default=2000, show_default=True,
              help=HELP["--bootstrap"])
@click.option("--bootstrap-seed", "--seed", "bootstrap_seed", type=int, default=0, show_default=True,
              help=HELP["--bootstrap-seed"])
@click.option("--human-draw-seed", "human_draw_seed", type=int, default=None,
              help="Seed of the human section's random draws of single votes (default: the bootstrap seed, "
                   "--bootstrap-seed).")
@click.option("--title", default=None,
              help="The page's title (default: what it compares, e.g. \"What openai/bot does as a chatbot\").")
@click.option("--no-human", is_flag=True, help="Leave out the human-vote section.")
@click.option("--show-text/--hide-text", "show_text", default=False, show_default=True,
              help="List the context-blind queries with their text (the dataset's licence-gated queries) instead "
                   "of by case index only; hidden by default, so a report can be shared without the data.")
@scored_input_options
@reference_option
def report_cmd(inputs: tuple[str, ...], out: str, data: str | None, paper_compat: bool, n_boot: int, bootstrap_seed: int,
               title: str | None, no_human: bool, show_text: bool, label_source: str, cluster: str, mode: "Mode | None",
               remove: str | None,
               reference: str | None, no_reference: bool, min_verdict_mass: float = 0.5,
               human_draw_seed: int | None = None, level: float = 0.95) -> None:
    """Write one self-contained HTML report over INPUTS (run directories or published exp/ files):
    leaderboard with CIs, over/under-refusal, paired differences, category heat map, P(safe) vs
    the human safe_rate, reliability, ablation (when given), the human votes and context sensitivity."""
    from ..stats.case_sets import CompareError
    from ..data import load_dataset
    from ..loader import load_predictions
    from ..present.report import write_report
    from ..runs.record import RunError
    from ..stats.metrics import LabelSourceError

    options = scoring_options(paper_compat, n_boot, bootstrap_seed, label_source, min_verdict_mass=min_verdict_mass,
                              cluster=cluster, human_draw_seed=human_draw_seed, level=level)
    with bad_input_errors(RunError, CompareError):
        dataset = load_dataset(data) if data else None
        preds = [load_predictions(p, dataset=dataset, mode=mode, removed=remove) for p in inputs]
    warn_unreadable_predictions(preds)
    if not preds:
        raise BadInput("give at least one input")
    echo_input_states(preds)
    with bad_input_errors(LabelSourceError):
        refs, ref_root = load_reference_inputs(reference, no_reference, preds, options, dataset)
        path = write_report(out, preds, options, human_cases=dataset.cases if dataset else None, title=title,
                            human=not no_human, show_text=show_text, references=refs, reference_root=ref_root,
                            progress=lambda line: click.echo(f"casebench: report: {line}", err=True))
    click.echo(f"wrote {path}")
