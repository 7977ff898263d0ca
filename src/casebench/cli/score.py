"""``casebench score``: metrics with CIs for runs and published output files."""

from __future__ import annotations

import click

from ..modes import Mode

from typing import Any, TYPE_CHECKING, Sequence

from ._common import (
    HELP, bad_input_errors, check_min_coverage, echo_input_states, explain_option, load_reference_inputs,
    min_coverage_option, reference_option, scored_input_options, scoring_options, warn_low_verdict_mass,
    warn_unreadable_predictions,
)

if TYPE_CHECKING:  # pragma: no cover
    from ..data import Dataset
    from ..predictions import Predictions
    from ..stats.metrics import Score
    from ..stats.options import ScoringOptions


@click.command("score")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--paper-compat", is_flag=True, help=HELP["--paper-compat"])
@click.option("--json", "as_json", is_flag=True, help="One JSON object per input per line (same as --format json).")
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json", "md"]), default="table", show_default=True)
@click.option("--by", "by", type=click.Choice(["category", "intent"]), multiple=True,
              help="Also print a breakdown with CIs (repeatable); every --format carries it (JSON: 'breakdowns').")
@click.option("--bootstrap", "n_boot", type=click.IntRange(min=0), default=2000, show_default=True, help=HELP["--bootstrap"])
@click.option("--bootstrap-seed", "--seed", "bootstrap_seed", type=int, default=0, show_default=True,
              help=HELP["--bootstrap-seed"])
@click.option("--data", type=click.Path(dir_okay=False), default=None,
              help="The dataset of run directories, if their manifest's path is not reachable; published files "
                   "are checked against it record by record (default: the CASEBench_data.json beside their exp/).")
@scored_input_options
@reference_option
@min_coverage_option
@explain_option
def score_cmd(inputs: tuple[str, ...], paper_compat: bool, as_json: bool, fmt: str, by: tuple[str, ...],
              n_boot: int, bootstrap_seed: int, data: str | None, label_source: str, cluster: str, mode: "Mode | None",
              remove: str | None, reference: str | None, no_reference: bool, min_verdict_mass: float = 0.5,
              level: float = 0.95, min_coverage: float | None = None,
              explain: bool = False) -> None:
    """Score INPUTS (run directories or published exp/ files) and print every metric with a CI (95% unless
    --level says otherwise). An unfinished run or inspect log is named first, with what is still to
    ask and the command that resumes it; its figures are marked partial."""
    from ..loader import load_predictions
    from ..stats.metrics import LabelSourceError
    from ..stats.result import score_input, score_predictions
    from ..present.score_formats import FORMATS
    from ..present.score_text import reference_table, text_table

    if as_json:
        fmt = "json"
    options = scoring_options(paper_compat, n_boot, bootstrap_seed, label_source, min_verdict_mass=min_verdict_mass,
                              cluster=cluster, level=level)
    dataset = None
    with bad_input_errors():
        if data:
            from ..data import load_dataset

            dataset = load_dataset(data)
        preds = [load_predictions(p, dataset=dataset, mode=mode, removed=remove) for p in inputs]
    warn_unreadable_predictions(preds)
    echo_input_states(preds, to_stderr=fmt in ("csv", "json"))
    with bad_input_errors(LabelSourceError):
        scores = [score_predictions(p, options, breakdowns=by) for p in preds]
        scored = [score_input(p, options) for p in preds]
        # which inputs' cases hold people's votes: one without (the demo set) says nothing of people
        voted = [r.people.cases is not None for r in scored]
        if not paper_compat:  # people's references beside each input's figures, on its own pairs
            from dataclasses import replace as _with

            scores = [_with(s, people=r.people.pairs if v else None) for s, r, v in zip(scores, scored, voted)]
        ref_scores, ref_root = load_reference_inputs(reference, no_reference, preds, options, dataset, scores_only=True)
    # every input named by what sets it apart from the others shown (naming.display_names); the
    # published models shown for reference marked as such
    from dataclasses import replace

    from ..naming import display_names
    from ..present.layout import title

    scores = [replace(s, name=n) for s, n in zip(scores, display_names(preds))]
    ref_scores = [replace(r, name=f"{title(r)} (published)") for r in ref_scores]
    if fmt in ("csv", "md") and ref_scores:
        # one table: the published models' rows follow the inputs', marked in their name
        scores = scores + ref_scores
        ref_scores = []
    click.echo(text_table(scores, explain=explain, voted=voted) if fmt == "table" else FORMATS[fmt](scores), nl=False)
    warn_low_verdict_mass(scores)
    if ref_scores and fmt == "table":
        click.echo(f"\n{reference_table(ref_scores, ref_root or '')}", nl=False)
    elif ref_scores:
        click.echo(FORMATS[fmt](ref_scores, reference=True), nl=False)
    if fmt == "table" and explain:  # in full (the table's one outcome row says the shares)
        from ..present.outcomes import text_block

        for s in scores:
            if getattr(s, "outcomes", None) is not None:
                click.echo("\n" + (f"{s.name}: " if len(scores) > 1 else "") + "\n".join(text_block(s.outcomes)))
    if fmt == "table":
        from ..present.people import people_line, reference_line
        from ..stats.result import people_by_case_set

        people = people_by_case_set(scored)  # each input's own, at the options' level and clustering
        from ..present.layout import wrap

        line = reference_line if paper_compat else people_line  # the paper-compatible text stays as it was
        for members, ref in people:
            which = "" if len(people) == 1 else " (inputs " + ", ".join(str(i + 1) for i in members) + ")"
            click.echo("")
            click.echo("\n".join(wrap(f"reference{which}: {line(ref)}") if not paper_compat else [f"reference{which}: {line(ref)}"]))
        if any(s.turns is not None for s in scores):  # a reveal run: its figures by turn, briefly
            from ..present.reveal_text import by_turn_lines

            for s in scores:
                if s.turns is not None:
                    click.echo("\n" + "\n".join(by_turn_lines(s.name or s.model, s.turns)))
    check_min_coverage(scores[:len(preds)], min_coverage)

