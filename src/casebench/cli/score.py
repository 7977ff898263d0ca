"""``casebench score``: metrics with CIs for runs and published output files."""

from __future__ import annotations

import click

from typing import Any, TYPE_CHECKING, Sequence

from ._common import (
    bad_input_errors, cluster_option, level_option, file_kind_options, label_source_option, min_verdict_mass_option, reference_option,
    scoring_options, warn_low_verdict_mass, warn_unreadable_predictions,
)

if TYPE_CHECKING:  # pragma: no cover
    from ..data import Dataset
    from ..predictions import Predictions
    from ..stats.metrics import Score
    from ..stats.options import ScoringOptions


@click.command("score")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--paper-compat", is_flag=True,
              help="Do exactly what the authors' compute_score.py does (missing -> 1.0, unclipped BCE, ...).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per input per line (same as --format json).")
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json", "md"]), default="table", show_default=True)
@click.option("--by", "by", type=click.Choice(["category", "intent"]), multiple=True,
              help="Also print a breakdown with CIs (repeatable); every --format carries it (JSON: 'breakdowns').")
@click.option("--bootstrap", "n_boot", type=click.IntRange(min=0), default=2000, show_default=True, help="Bootstrap resamples for CIs (0: none).")
@click.option("--bootstrap-seed", "--seed", "bootstrap_seed", type=int, default=0, show_default=True,
              help="Seed of the bootstrap resamples (--seed: the same, the older name).")
@click.option("--data", type=click.Path(dir_okay=False), default=None,
              help="The dataset of run directories, if their manifest's path is not reachable; published files "
                   "are checked against it record by record (default: the CASEBench_data.json beside their exp/).")
@label_source_option
@cluster_option
@level_option
@file_kind_options
@min_verdict_mass_option
@reference_option
def score_cmd(inputs: tuple[str, ...], paper_compat: bool, as_json: bool, fmt: str, by: tuple[str, ...],
              n_boot: int, bootstrap_seed: int, data: str | None, label_source: str, cluster: str, mode: str | None,
              remove: str | None, reference: str | None, no_reference: bool, min_verdict_mass: float = 0.5,
              level: float = 0.95) -> None:
    """Score INPUTS (run directories or published exp/ files) and print every metric with a CI (95% unless
    --level says otherwise)."""
    from ..loader import load_predictions
    from ..stats.metrics import LabelSourceError
    from ..stats.result import score_input, score_predictions
    from ..present.tables import FORMATS, reference_table

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
    with bad_input_errors(LabelSourceError):
        scores = [score_predictions(p, options, breakdowns=by) for p in preds]
        scored = [score_input(p, options) for p in preds]
        if not paper_compat:  # people's references beside each input's figures, on its own pairs
            from dataclasses import replace as _with

            scores = [_with(s, people=r.people.pairs) for s, r in zip(scores, scored)]
        ref_scores, ref_root = _reference_scores(reference, no_reference, preds, dataset, options)
    # every input named by what sets it apart from the others shown (naming.display_names); the
    # published models shown for reference marked as such
    from dataclasses import replace

    from ..naming import display_names
    from ..present.tables import title

    scores = [replace(s, name=n) for s, n in zip(scores, display_names(preds))]
    ref_scores = [replace(r, name=f"{title(r)} (published)") for r in ref_scores]
    if fmt in ("csv", "md") and ref_scores:
        # one table: the published models' rows follow the inputs', marked in their name
        scores = scores + ref_scores
        ref_scores = []
    click.echo(FORMATS[fmt](scores), nl=False)
    warn_low_verdict_mass(scores)
    if ref_scores and fmt == "table":
        click.echo(f"\n{reference_table(ref_scores, ref_root or '')}", nl=False)
    elif ref_scores:
        click.echo(FORMATS[fmt](ref_scores, reference=True), nl=False)
    if fmt == "table":
        from ..present.outcomes import text_block

        for s in scores:
            if getattr(s, "outcomes", None) is not None:
                click.echo("\n" + (f"{s.name}: " if len(scores) > 1 else "") + "\n".join(text_block(s.outcomes)))
    if fmt == "table":
        from ..stats.context import people_line, reference_line
        from ..stats.result import people_by_case_set

        people = people_by_case_set(scored)  # each input's own, at the options' level and clustering
        line = reference_line if paper_compat else people_line  # the paper-compatible text stays as it was
        for members, ref in people:
            which = "" if len(people) == 1 else " (inputs " + ", ".join(str(i + 1) for i in members) + ")"
            click.echo(f"\nreference{which}: {line(ref)}")
        if any(s.turns is not None for s in scores):  # a reveal run: its figures by turn, briefly
            from ..present.reveal_text import by_turn_lines

            for s in scores:
                if s.turns is not None:
                    click.echo("\n" + "\n".join(by_turn_lines(s.name or s.model, s.turns)))


def _reference_scores(reference: str | None, no_reference: bool, preds: Sequence["Predictions"],
                      dataset: "Dataset | None", options: "ScoringOptions") -> tuple[list["Score"], str | None]:
    """The scores of the published models to show beside ``preds`` (those already among the
    inputs left out) and where they came from (None: none shown), on the cases every input
    scored (``reference_rows``: kept on disk, read back without loading the files)."""
    from ..sources import cached_outputs
    from ..reference_rows import reference_scores

    if no_reference:
        return [], None
    root = reference or cached_outputs()
    if root is None:
        return [], None
    with bad_input_errors():
        scores = reference_scores(root, options, cases=_scored_cases(preds, options), dataset=dataset, exclude=preds)
    return scores, str(root)


def _scored_cases(preds: Sequence["Predictions"], options: "ScoringOptions") -> list[Any]:
    """The cases every input scored (answered; every case with --paper-compat), in the first
    input's order: the published models are scored on these, so that a 450-case run stands
    beside them on its 450 cases."""
    def key(c: Any) -> tuple[str, bool, str]:
        return (c.query, bool(c.intended_safe), c.category)

    def scored(p: "Predictions") -> list[Any]:
        return list(p.cases) if options.paper_compat else [c for c, a in zip(p.cases, p.answered) if a]

    first = scored(preds[0]) if preds else []
    common = set.intersection(*[{key(c) for c in scored(p)} for p in preds]) if preds else set()
    return [c for c in first if key(c) in common]
