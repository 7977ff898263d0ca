"""``casebench compare``: a thin wrapper over ``casebench.stats.compare`` (and, for inspect logs
scored per sample, ``casebench.stats.sample_compare``)."""

from __future__ import annotations

import json
from typing import Any

import click

from ..modes import Mode
from ._common import (
    BadInput, bad_input_errors, echo_err, echo_input_states, explain_option, file_kind_options, load_inputs,
    scoring_options, stat_options,
)


def _on_pairs(preds: list[Any], n: int, seed: int) -> list[Any]:
    """Every input restricted to the cases of ``n`` query pairs of the first input's cases
    (``runs.select.stratified_pairs``), matched by query, intent and category."""
    from ..published import restrict_to
    from ..runs.record import RunError
    from ..runs.select import stratified_pairs

    with bad_input_errors(RunError):
        chosen = set(stratified_pairs(preds[0].cases, n, seed))
    cases = [c for c in preds[0].cases if c.index in chosen]
    out = [restrict_to(p, cases) for p in preds]
    missing = [p.source for p, r in zip(preds, out) if r is None]
    if missing:
        raise BadInput(f"{missing[0]} holds none of the chosen query pairs' cases")
    return out


@click.command("compare")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(exists=True))
@stat_options
@file_kind_options
@click.option("--pairs", type=click.IntRange(min=1), default=None, metavar="N",
              help="Compare on a seeded subset of N query pairs (both contexts of each query), stratified by "
                   "category, as `casebench run --pairs N` chooses them: what a comparison of that size can detect "
                   "(the MDD column).")
@click.option("--pairs-seed", type=int, default=0, show_default=True, help="Seed of --pairs.")
@explain_option
@click.option("--cluster-by", "cluster_by", default=None, metavar="FIELD",
              help="Inspect logs: compare per scorer over the samples both logs scored, clustered by this sample "
                   "metadata field (logs of tasks other than casebench's are always compared per scorer).")
def compare_cmd(inputs: tuple[str, ...], paper_compat: bool, as_json: bool, n_boot: int, bootstrap_seed: int,
                level: float, alpha: float, data: str | None, label_source: str, cluster: str, mode: "Mode | None",
                remove: str | None, pairs: int | None = None, pairs_seed: int = 0, cluster_by: str | None = None,
                explain: bool = False) -> None:
    """Paired tests between INPUTS (run directories, published exp/ files or inspect logs on the
    same cases).

    Two inspect logs of any task (or any logs with --cluster-by FIELD) are compared per scorer
    over the samples both scored: the paired difference of the mean with a (clustered)
    bootstrap interval, McNemar's test for 0/1 scores, Benjamini-Hochberg over scorers and the
    minimum detectable difference. Logs of casebench's task are compared as runs are:

    For each pair A, B: McNemar's test on per-case correctness; paired-bootstrap CIs for the
    differences A - B in accuracy, safe and unsafe recall, and (both continuous) PCC, BCE and
    Brier; Benjamini-Hochberg over all pairs and metrics; each difference's MDD (the smallest
    difference the paired design had 80% power to detect). Clustered (--cluster query, the
    default, or category): the bootstrap draws whole clusters, accuracy gets McNemar's test for
    clustered pairs and PCC the cluster bootstrap; --cluster case: McNemar's exact test and
    Williams' t for the two PCCs (which share the human safe_rate).
    """
    from ..jsonutil import json_safe
    from ..present.compare_text import format_comparison, format_say_do
    from ..stats.case_sets import CompareError
    from ..stats.compare import compare
    from ..stats.saydo import is_say_do_pair, say_do
    from ..stats.metrics import LabelSourceError

    if len(inputs) < 2:
        raise BadInput("compare needs at least two inputs")
    if _per_sample(inputs, cluster_by):
        _refuse_unhonoured_flags()
        _compare_logs(inputs, cluster_by, as_json, n_boot, bootstrap_seed, level, alpha)
        return
    options = scoring_options(paper_compat, n_boot, bootstrap_seed, label_source, level=level, alpha=alpha, cluster=cluster)
    preds = load_inputs(inputs, data, mode, remove)
    if pairs is not None:
        preds = _on_pairs(preds, pairs, pairs_seed)
    echo_input_states(preds, to_stderr=as_json)
    with bad_input_errors(CompareError, LabelSourceError):
        result = compare(preds, options)
        say = [say_do(a, b, options)
               for i, a in enumerate(preds) for b in preds[i + 1:] if is_say_do_pair(a, b) and a.model == b.model]
    if as_json:
        click.echo(json.dumps({**result.to_dict(), "say_do": [json_safe(x.to_dict()) for x in say]}, indent=2,
                              ensure_ascii=False))
    else:
        click.echo(format_comparison(result, explain=explain), nl=False)
        for x in say:
            click.echo("")
            click.echo(format_say_do(x), nl=False)
        from ..present.people import people_line, reference_line
        from ..stats.result import score_input

        # the inputs hold the same cases: people's references over them are the first input's,
        # at the options' level and clustering
        ref = score_input(preds[0], options).people.cases
        line = reference_line if paper_compat else people_line  # the paper-compatible text stays as it was
        if ref is not None:
            from ..present.layout import wrap

            click.echo("")
            click.echo("\n".join(wrap(f"reference: {line(ref)}") if not paper_compat else [f"reference: {line(ref)}"]))


def _per_sample(inputs: tuple[str, ...], cluster_by: str | None) -> bool:
    """Whether INPUTS are compared per scorer over samples (``stats.sample_compare``): inspect
    logs, with --cluster-by or at least one of another task than casebench's."""
    from ..inspect_log import InspectLogError, all_casebench, is_inspect_log

    logs = [is_inspect_log(p) for p in inputs]
    if cluster_by is not None and not all(logs):
        bad = next(p for p, lg in zip(inputs, logs) if not lg)
        raise BadInput(f"--cluster-by FIELD names a sample metadata field of inspect logs; {bad} is not an inspect log "
                       "(casebench inputs cluster with --cluster)")
    if not all(logs):
        return False
    with bad_input_errors(InspectLogError):
        return cluster_by is not None or not all_casebench(inputs)


#: the flags of the case-by-case comparison that a per-scorer comparison of inspect logs cannot
#: honour (it reads each log's own scores per sample: no cases to cluster, fill, relabel, select
#: or check against a dataset), by their parameter names
_CASE_ONLY_FLAGS = {"cluster": "--cluster", "paper_compat": "--paper-compat", "label_source": "--label-source",
                    "mode": "--mode", "remove": "--remove", "pairs": "--pairs", "pairs_seed": "--pairs-seed",
                    "data": "--data"}


def _refuse_unhonoured_flags() -> None:
    """A per-scorer comparison of inspect logs (``--cluster-by`` or logs of another task) refuses
    the flags it cannot honour, rather than ignoring them silently."""
    ctx = click.get_current_context()
    given = [flag for name, flag in _CASE_ONLY_FLAGS.items()
             if ctx.get_parameter_source(name) not in (None, click.core.ParameterSource.DEFAULT)]
    if given:
        raise BadInput(f"{', '.join(given)}: not used by a per-scorer comparison of inspect logs (it compares each "
                       "scorer over the samples both logs scored, clustered by --cluster-by); leave "
                       + ("it" if len(given) == 1 else "them") + " out")


def _compare_logs(inputs: tuple[str, ...], cluster_by: str | None, as_json: bool, n_boot: int, seed: int,
                  level: float, alpha: float) -> None:
    from ..inspect_log import InspectLogError, load_sample_scores
    from ..present.sample_tables import format_sample_comparison
    from ..stats.sample_compare import SampleCompareError, ScoredSamples, compare_samples

    with bad_input_errors(InspectLogError, SampleCompareError):
        logs = [load_sample_scores(p) for p in inputs]
        result = compare_samples([ScoredSamples(x.name, x.source, x.values, x.metadata) for x in logs], cluster_by=cluster_by, n_boot=n_boot, seed=seed,
                                 level=level, alpha=alpha)
    for x in logs:
        if x.status != "success":
            echo_err(f"casebench: warning: {x.source} is an unfinished log (status {x.status}); "
                     "its missing samples are left out")
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2, ensure_ascii=False))
    else:
        click.echo(format_sample_comparison(result), nl=False)
