"""``casebench compare``, ``casebench ablate`` and ``casebench study``: thin wrappers over
``casebench.stats.compare``, ``casebench.stats.ablation``, ``casebench.stats.placement`` and
(running a study) ``casebench.runs.study``."""

from __future__ import annotations

import functools
import json
import sys
from typing import Any, Callable

import click

from ..modes import MODES, Mode, get_mode
from ..prompts import CONTEXT_PLACEMENTS
from ._common import (
    FILE_MODE_HELP, HELP, TEMPERATURE, URL, USD, BadInput, ModeChoice, RegistryCommand, bad_input_errors, echo_err, echo_input_states,
    exit_interrupted, file_kind_options,
    cluster_option, explain_option, label_source_option, refusal_classifier_options, remove_option, scoring_options, warn_unreadable_predictions,
)


def _load(inputs: tuple[str, ...], data: str | None, mode: "Mode | None" = None, remove: str | None = None) -> list[Any]:
    from ..data import load_dataset
    from ..loader import load_predictions
    from ..runs.record import RunError

    with bad_input_errors(RunError):
        dataset = load_dataset(data) if data else None
        preds = [load_predictions(p, dataset=dataset, mode=mode, removed=remove) for p in inputs]
    warn_unreadable_predictions(preds)
    return preds


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


def _warn_incomplete(preds: list[Any], as_json: bool = False) -> None:
    """The first lines when an input is unfinished (``_common.echo_input_states``): on stdout
    before the figures, on stderr with --json (each input's ``state`` is in the JSON)."""
    echo_input_states(preds, to_stderr=as_json)


_STAT_OPTIONS = [
    click.option("--paper-compat", is_flag=True, help=HELP["--paper-compat"]),
    click.option("--json", "as_json", is_flag=True, help=HELP["--json"]),
    click.option("--bootstrap", "n_boot", type=click.IntRange(min=0), default=2000, show_default=True,
                 help=HELP["--bootstrap"]),
    click.option("--bootstrap-seed", "--seed", "bootstrap_seed", type=int, default=0, show_default=True,
                 help=HELP["--bootstrap-seed"]),
    click.option("--level", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=0.95,
                 show_default=True, help=HELP["--level"]),
    click.option("--alpha", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=0.05,
                 show_default=True, help="False discovery rate of the Benjamini-Hochberg adjustment."),
    click.option("--data", type=click.Path(dir_okay=False), default=None,
                 help="The dataset of run directories, if their manifest's path is not reachable; published files "
                      "are checked against it record by record (default: the CASEBench_data.json beside their exp/)."),
    label_source_option,
    cluster_option,
]


def _stat_options(f: Any) -> Any:
    for opt in reversed(_STAT_OPTIONS):
        f = opt(f)
    return f


#: how a study's runs are made (``ablate`` and ``study`` with --model; backend flags come from the registry)
_RUN_OPTIONS = [
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


def _run_options(f: Any) -> Any:
    for opt in reversed(_RUN_OPTIONS):
        f = opt(f)
    return f


@click.command("compare")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(exists=True))
@_stat_options
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
    from ..stats.compare import CompareError, compare
    from ..stats.saydo import is_say_do_pair, say_do
    from ..stats.metrics import LabelSourceError

    if len(inputs) < 2:
        raise BadInput("compare needs at least two inputs")
    if _per_sample(inputs, cluster_by):
        _refuse_unhonoured_flags()
        _compare_logs(inputs, cluster_by, as_json, n_boot, bootstrap_seed, level, alpha)
        return
    options = scoring_options(paper_compat, n_boot, bootstrap_seed, label_source, level=level, alpha=alpha, cluster=cluster)
    preds = _load(inputs, data, mode, remove)
    if pairs is not None:
        preds = _on_pairs(preds, pairs, pairs_seed)
    _warn_incomplete(preds, as_json)
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
@_run_options
@_stat_options
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
    from ..stats.compare import CompareError
    from ..stats.metrics import LabelSourceError

    options = scoring_options(paper_compat, n_boot, bootstrap_seed, label_source, level=level, alpha=alpha, cluster=cluster)
    if model is None:
        if not inputs:
            raise BadInput("give INPUTS to analyse (run directories or published ablation files), "
                           "or --model and --mode to run a study")
        preds = _load(inputs, data, mode, remove)
    else:
        if inputs:
            raise BadInput("give either --model/--mode (run a study) or INPUTS (analyse finished runs), not both")
        if mode is None:
            raise BadInput("--mode is required with --model")
        if remove is not None:
            raise BadInput("--remove names what published INPUTS hold; a study's conditions are --params")
        from ..runs.study import run_ablation
        from ..stats.ablation import condition_name

        preds = _run_study(functools.partial(run_ablation, params=params, out_root=out_root), condition_name, model,
                           mode, None, None, data, limit, stratified, stratified_seed, samples, temperature, max_tokens,
                           max_connections, max_cost, progress, None, "unsafe", registry_flags, context_as=context_as)
    _warn_incomplete(preds, as_json)
    with bad_input_errors(CompareError, AblationStudyError, LabelSourceError):
        result = analyse_ablation(preds, options)
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2, ensure_ascii=False))
    else:
        click.echo(format_ablation(result), nl=False)


@click.command("study", cls=RegistryCommand, backend_flags=True, classifier_flags="prefixed")
@click.argument("inputs", nargs=-1, type=click.Path(exists=True))
@click.option("--placements", default=None, metavar="LIST",
              help="Context placements to run, comma-separated (user, system, turns; default: all three). With "
                   "--mutations: the one placement every wording is asked in (default: the mode's own).")
@click.option("--reveal", "reveal", default=None, metavar="ARMS",
              help="A reveal study instead (with --model, --mode respond): the arms full (the paper's placement), "
                   "concat (the CI groups as paragraphs of one message), early and late (the groups revealed one per "
                   "turn of a live conversation, before or after the query) and resample (full asked as many times "
                   "as a conversation has turns), comma-separated, on the same pairs.")
@click.option("--mutations", default=None, metavar="LIST",
              help="A mutation study instead (with --model): the base wording and each of these SORRY-Bench "
                   "rewordings of the queries, comma-separated (built in: ascii, caesar, morse, atbash; the others "
                   "with --mutations-from), the contexts untouched.")
@click.option("--mutations-from", "mutations_from", default=None, metavar="DIR",
              type=click.Path(exists=True, file_okay=False),
              help="Your copy of SORRY-Bench's released files (question.jsonl, question_<mutation>.jsonl): where "
                   "the --mutations rewordings come from.")
@click.option("--mutator", "mutator", default=None, metavar="SPEC",
              help="Without SORRY-Bench's files: this model writes the rewordings of the --mutations that are not "
                   "built in (casebench's own prompt; cached, and recorded in each run's manifest).")
@click.option("--mutator-base-url", "mutator_base_url", default=None, metavar="URL", type=URL,
              help="With --mutator: the mutator's OpenAI-compatible server, if not the provider's default.")
@click.option("--model", default=None, metavar="SPEC",
              help="Run the study with this model (hf/ID, openai/NAME, anthropic/NAME). Without it, INPUTS "
                   "(finished runs in different placements) are analysed.")
@click.option("--mode", type=ModeChoice(), default=None, help="Mode of the study to run (with --model).")
@click.option("--remove", default="", metavar="LIST", help="CI parameters removed in every placement (with --model).")
@click.option("--say-do", "say_do_mode", type=click.Choice([m.name for m in MODES.values() if not m.reads_behaviour]), default=None,
              help="Respond studies: also run the model as a judge in this mode in every placement and report the "
                   "say-do gap per placement.")
@click.option("--pairs", type=int, default=None, metavar="N",
              help="A seeded subset of N query pairs (both contexts of each query), stratified by category, so the "
                   "context figures have pairs to read (with --model; seed: --stratified-seed).")
@click.option("--out-root", default="runs", show_default=True, type=click.Path(file_okay=False),
              help="Where the placement runs live (<out-root>/<model>_<mode>[_<removed>][_ctx-<placement>], the names "
                   "`casebench run` gives); existing ones are re-used, partial ones resumed.")
@_run_options
@refusal_classifier_options
@_stat_options
def study_cmd(inputs: tuple[str, ...], placements: str | None, model: str | None, mode: "Mode | None", remove: str,
              say_do_mode: str | None, pairs: int | None, out_root: str, limit: int | None,
              stratified: int | None, stratified_seed: int, samples: int | None, temperature: float | None,
              max_tokens: int | None, max_connections: int, max_cost: float | None, progress: bool | None,
              refusal_classifier: str | None, partial_as: str, paper_compat: bool, as_json: bool, n_boot: int,
              bootstrap_seed: int, level: float, alpha: float, data: str | None, label_source: str, cluster: str,
              mutations: str | None = None, mutations_from: str | None = None, mutator: str | None = None,
              mutator_base_url: str | None = None, reveal: str | None = None, **registry_flags: Any) -> None:
    """Placement study: one model with the context inside the prompt (user), as the system prompt
    (system) and as the conversation before the query (turns). Mutation study: one model with the
    queries in their own wording and in SORRY-Bench's rewordings (--mutations).

    \b
      casebench study --model SPEC --mode MODE [--placements user,system,turns] [--pairs N] [--say-do binary]
      casebench study --model SPEC --mode MODE --mutations caesar,atbash [--pairs N]
      casebench study --model SPEC --mode respond --reveal full,early,late,concat,resample [--pairs N]
      casebench study INPUTS...     (finished runs of one model and mode in different placements, or
                                     its plain run and its runs under --mutation; judge runs among a
                                     respond placement study's inputs give the say-do gap)

    A mutation study prints per wording the metrics and the context figures beside people's
    (people voted on the base wording only), each mutation's paired difference from the base
    wording (context shift and follow among them; clustered intervals, Benjamini-Hochberg) and
    its wording consistency (how often a case's verdict is unchanged).

    Prints per placement the metrics, the context figures over query pairs (shift, follow,
    blind; the shift's CI resamples pairs, the shares have Wilson CIs), in respond mode over- and
    under-refusal and the say-do gap; then the paired tests between placements (McNemar on the
    shared cases, paired-bootstrap CIs, Benjamini-Hochberg) and the paired difference of the
    context shift.
    """
    from ..present.study_text import format_placements
    from ..stats.compare import CompareError
    from ..stats.metrics import LabelSourceError
    from ..stats.placement import MUTATION, PLACEMENT, PlacementStudyError, analyse_factor, mutation_of

    options = scoring_options(paper_compat, n_boot, bootstrap_seed, label_source, level=level, alpha=alpha, cluster=cluster)
    if reveal is not None and (mutations is not None or say_do_mode is not None or placements is not None):
        raise BadInput("--reveal is a study of its own: not with --mutations, --say-do or --placements")
    if mutations_from is not None and mutations is None:
        raise BadInput("--mutations-from goes with --mutations (the rewordings to run)")
    if mutations is not None and say_do_mode is not None:
        raise BadInput("--say-do goes with a placement study, not with --mutations")
    if model is None:
        if not inputs:
            raise BadInput("give INPUTS to analyse (run directories in different placements, or a plain run and "
                           "its runs under --mutation), or --model and --mode to run a study")
        if mutations is not None:
            raise BadInput("--mutations names the mutations to run (with --model); finished runs say their own")
        preds = _load(inputs, data)
    elif reveal is not None:
        if inputs:
            raise BadInput("give either --model/--mode (run a study) or INPUTS (analyse finished runs), not both")
        if mode is None or not get_mode(mode).reads_behaviour:
            raise BadInput("a reveal study asks the model as the chatbot: --mode respond")
        if sum(x is not None for x in (limit, stratified, pairs)) > 1:
            raise BadInput("choose one of --limit, --stratified and --pairs")
        from ..runs.record import RunError
        from ..runs.study import parse_arms, run_reveal

        with bad_input_errors(RunError):  # unknown arms before any data is read
            parse_arms(reveal)
        preds = _run_study(functools.partial(run_reveal, arms=reveal, out_root=out_root), lambda cond: cond.name(),
                           model, mode, remove, pairs, data, limit, stratified, stratified_seed, samples, temperature,
                           max_tokens, max_connections, max_cost, progress, refusal_classifier, partial_as,
                           registry_flags)
    elif mutations is not None:
        if inputs:
            raise BadInput("give either --model/--mode (run a study) or INPUTS (analyse finished runs), not both")
        if mode is None:
            raise BadInput("--mode is required with --model")
        if sum(x is not None for x in (limit, stratified, pairs)) > 1:
            raise BadInput("choose one of --limit, --stratified and --pairs")
        where = [p.strip() for p in (placements or "").split(",") if p.strip()]
        if len(where) > 1:
            raise BadInput("a mutation study asks every wording in one placement; give one with --placements")
        if mutator is not None and mutations_from is not None:
            raise BadInput("choose one source of rewordings: --mutations-from DIR or --mutator SPEC")
        from ..runs.study import run_mutations

        writer = {"base_url": mutator_base_url} if mutator_base_url else {}
        preds = _run_study(
            functools.partial(run_mutations, mutations=mutations, out_root=out_root, mutations_from=mutations_from,
                              mutator=mutator, mutator_options=writer),
            lambda cond: cond.mutation or "base wording", model, mode, remove, pairs, data, limit, stratified,
            stratified_seed, samples, temperature, max_tokens, max_connections, max_cost, progress,
            refusal_classifier, partial_as, registry_flags, context_as=where[0] if where else None)
    else:
        if inputs:
            raise BadInput("give either --model/--mode (run a study) or INPUTS (analyse finished runs), not both")
        if mode is None:
            raise BadInput("--mode is required with --model")
        if say_do_mode is not None and not mode.reads_behaviour:
            raise BadInput("--say-do goes with --mode respond (a mode that reads behaviour)")
        if sum(x is not None for x in (limit, stratified, pairs)) > 1:
            raise BadInput("choose one of --limit, --stratified and --pairs")
        from ..runs.study import run_placements

        preds = _run_study(
            functools.partial(run_placements, placements=placements or "user,system,turns", out_root=out_root,
                              judge_mode=say_do_mode),
            lambda cond: cond.name(), model, mode, remove, pairs, data, limit, stratified, stratified_seed, samples,
            temperature, max_tokens, max_connections, max_cost, progress, refusal_classifier, partial_as,
            registry_flags)
    _warn_incomplete(preds, as_json)
    from ..stats.reveal import analyse_reveal, is_reveal_study

    if reveal is not None or is_reveal_study(preds):
        from ..present.reveal_text import format_reveal

        with bad_input_errors(CompareError, PlacementStudyError, LabelSourceError):
            found = analyse_reveal(preds, options)
        click.echo(json.dumps(found.to_dict(), indent=2, ensure_ascii=False) if as_json else format_reveal(found),
                   nl=as_json)
        return
    factor = MUTATION if len({mutation_of(p) for p in preds}) > 1 else PLACEMENT
    behaviour = [p for p in preds if p.mode.reads_behaviour]
    study, judges = (behaviour, [p for p in preds if not p.mode.reads_behaviour]) if behaviour else (preds, [])
    if factor is MUTATION:
        study, judges = preds, []
    with bad_input_errors(CompareError, PlacementStudyError, LabelSourceError):
        result = analyse_factor(study, factor, options, judges=judges)
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2, ensure_ascii=False))
    else:
        click.echo(format_placements(result), nl=False)


def _run_study(conditions: Callable[..., list[Any]], label: Callable[[Any], str], model: str, mode: "str | Mode",
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
    from ._common import backend_options, call_timeout as wall_limit, classifier_options, setup_logging

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
