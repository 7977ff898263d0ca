"""``casebench study``: the placement, query-mutation and reveal studies, a thin wrapper over
``casebench.stats.placement``, ``casebench.stats.mutation_effects`` and ``casebench.stats.reveal``
(analysing) and ``casebench.runs.study`` (running)."""

from __future__ import annotations

import functools
import json
from typing import Any

import click

from ..modes import MODES, Mode, get_mode
from ._common import (
    BadInput, ModeChoice, RegistryCommand, bad_input_errors, echo_input_states, load_inputs, mutator_options,
    refusal_classifier_options, scoring_options, stat_options,
)
from ._study_runs import run_options, run_study


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
@mutator_options(
    "Your copy of SORRY-Bench's released files (question.jsonl, question_<mutation>.jsonl): where the --mutations "
    "rewordings come from.",
    "Without SORRY-Bench's files: this model writes the rewordings of the --mutations that are not built in "
    "(casebench's own prompt; cached, and recorded in each run's manifest).")
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
@run_options
@refusal_classifier_options
@stat_options
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
    from ..stats.case_sets import CompareError
    from ..stats.metrics import LabelSourceError
    from ..naming import mutation_of
    from ..stats.mutation_effects import MUTATION
    from ..stats.placement import PLACEMENT, PlacementStudyError, analyse_factor

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
        preds = load_inputs(inputs, data)
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
        preds = run_study(functools.partial(run_reveal, arms=reveal, out_root=out_root), lambda cond: cond.name(),
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
        preds = run_study(
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

        preds = run_study(
            functools.partial(run_placements, placements=placements or "user,system,turns", out_root=out_root,
                              judge_mode=say_do_mode),
            lambda cond: cond.name(), model, mode, remove, pairs, data, limit, stratified, stratified_seed, samples,
            temperature, max_tokens, max_connections, max_cost, progress, refusal_classifier, partial_as,
            registry_flags)
    echo_input_states(preds, to_stderr=as_json)
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
