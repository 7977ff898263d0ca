"""``casebench run`` and ``casebench export``: thin wrappers over ``casebench.runs.execute`` and
``casebench.runs.results``."""

from __future__ import annotations

import shlex
import sys
from types import SimpleNamespace
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import click


from ..modes import MODES, Mode
from ..prompts import CONTEXT_PLACEMENTS
from ._common import (
    HELP, NON_NEGATIVE_INT, POSITIVE_INT, SECONDS, TEMPERATURE, USD, BadInput, ModeChoice, RegistryCommand, backend_options,
    bad_input_errors, batch_backends, call_timeout, classifier_options,
    exit_interrupted, min_verdict_mass_option, mutator_options, refusal_classifier_options, run_with_signals,
    setup_logging,
)
from ..runs.results import EXIT_LOW_COVERAGE

if TYPE_CHECKING:
    from ..data import Dataset
    from ..predictions import Predictions
    from ..runs.results import RunCheck


def _mutation_names() -> list[str]:
    from ..mutations import mutation_names

    return mutation_names()


def _builtin_mutations() -> list[str]:
    from ..mutations import MUTATIONS

    return [m.name for m in MUTATIONS.values() if m.builtin]


#: ``run --help`` in sections: the flags most runs need first, the rest under their titles
RUN_HELP_SECTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Options most runs need", ("model", "mode", "data", "pairs", "out", "report")),
    ("Which cases", ("limit", "stratified", "selection_seed", "remove")),
    ("How the model is asked", ("context_as", "system", "templates_path", "temperature", "max_tokens", "samples",
                                "full_answers", "parse_retries", "reask", "min_verdict_mass")),
    ("Query rewordings (SORRY-Bench mutations)", ("mutation", "mutations_from", "mutator", "mutator_base_url")),
    ("The refusal reader (respond mode)", ("refusal_classifier", "partial_as")),
    ("Requests, cost and recovery", ("max_connections", "max_attempts", "batch", "batch_poll", "prices_path",
                                     "max_cost", "min_coverage", "salvage", "progress", "verbose")),
)


@click.command("run", cls=RegistryCommand, backend_flags=True, classifier_flags="prefixed", sections=RUN_HELP_SECTIONS)
@click.option("--model", "model", default=None, metavar="SPEC",
              help="Model spec: PREFIX/MODEL, e.g. openai/NAME, anthropic/NAME, hf/ID-or-path (every backend: "
                   "docs/running.md, or python -m casebench.cli.registry_tables --list). Default: hf/smollm2-135m-instruct.")
@click.option("--mode", type=ModeChoice(), default=None,
              help="How the model is asked: " + "; ".join(f"{m.name}: {m.help}" for m in MODES.values()) + ". "
                   "Default: respond with no --model (the main job: the embedded model as the deployed chatbot), "
                   "else prob.")
@click.option("--context-as", "context_as", type=click.Choice(CONTEXT_PLACEMENTS), default=None,
              help="Where the context goes: inside the judge prompt (user, the paper's framing; default of the "
                   "judge modes), rendered as the operator's system prompt (system; default of respond mode), or "
                   "as the conversation before the query (turns; a judge is asked about its final query); respond "
                   "mode also: concat (the CI groups as paragraphs of one message), reveal-early / reveal-late "
                   "(the groups one per turn of a live conversation, before / after the query: docs/reveal.md).")
@click.option("--mutation", "mutation", type=click.Choice(_mutation_names()), default=None, metavar="NAME",
              help="Ask every query in one of SORRY-Bench's twenty rewordings, in both its contexts (the contexts "
                   "untouched): built in, offline: " + ", ".join(_builtin_mutations()) + "; the others from your copy "
                   "of SORRY-Bench's files (--mutations-from). Encodings ask for the answer in the same encoding; "
                   "respond mode decodes the answer before reading it. People voted on the base wording only.")
@mutator_options(
    "Your copy of SORRY-Bench's released files (question.jsonl and question_<mutation>.jsonl): the rewordings of "
    "--mutation, matched to CASE-Bench's queries by the base text.",
    "Without SORRY-Bench's files: this model (any backend spec) writes the rewordings of a --mutation that is not "
    "built in, with casebench's own prompt; the texts are cached and recorded in the manifest, so a resume asks "
    "the mutator nothing.")
@click.option("--batch", "batch", is_flag=True, default=False,
              help=batch_backends() + ": ask through the provider's batch API (half price, within 24 h); "
                   "a killed run resumes polling the same batch. Unanswered items are asked again online.")
@click.option("--batch-poll", "batch_poll", type=SECONDS, default=10.0, show_default=True, metavar="SECONDS",
              help="With --batch: seconds between status polls (growing by half each time, up to 2 min).")
@click.option("--full-answers", is_flag=True, default=False,
              help="Text modes: generate whole answers (with explanations) instead of stopping at the verdict.")
@click.option("--report/--no-report", "report", default=True, show_default=True,
              help="When the run is complete, print its scores and write report.html into the run directory.")
@click.option("--data", "data", default=None, metavar="PATH", help="Dataset (JSON/JSONL). Default: $CASEBENCH_DATA, else the user cache, else a download of the "
              "pinned published file, else the demo set (the command says which).")
@click.option("--remove", "remove", default="", metavar="PARAMS", help="CI parameters to remove (comma-separated).")
@click.option("--samples", type=POSITIVE_INT, default=None, help="Samples per case (default: 3 in score mode, else 1).")
@click.option("--limit", type=POSITIVE_INT, default=None, help=HELP["--limit"])
@click.option("--stratified", type=POSITIVE_INT, default=None, metavar="N",
              help="A seeded subset of N cases stratified by category x intent.")
@click.option("--pairs", type=POSITIVE_INT, default=None, metavar="N",
              help="A seeded subset of N whole query pairs (both contexts of each query), stratified by category, "
                   "so the context figures (shift, follow) have pairs to read. Any model and mode.")
@click.option("--selection-seed", "--seed", "selection_seed", type=int, default=0, show_default=True,
              help="Seed of the case selection (--stratified, --pairs).")
@click.option("--max-connections", type=POSITIVE_INT, default=8, show_default=True, help=HELP["--max-connections"])
@click.option("--templates", "templates_path", default=None, metavar="FILE",
              help=HELP["--templates"])
@click.option("-o", "--out", default=None, metavar="RUN_DIR",
              help="Run directory; re-running resumes it (default: runs/<model>_<mode>[_<removed>][_ctx-<placement>]"
                   "[_mut-<mutation>]_<dataset SHA-256, 8 hex>[_<pairsN|stratN|limitN>]).")
@click.option("--system", default=None, help="System prompt.")
@click.option("--temperature", type=TEMPERATURE, default=None,
              help="Sampling temperature, 0 to 2 (default: 1.0 score, 0 else).")
@click.option("--max-tokens", type=POSITIVE_INT, default=None,
              help="Answer length limit (default 256; respond mode 512; the main job's respond run: "
                   "see docs/running.md, 'The main job').")
@click.option("--parse-retries", type=NON_NEGATIVE_INT, default=2, show_default=True,
              help="Re-asks of an unparseable answer before it is recorded as missing.")
@click.option("--reask", type=click.Choice(["repair", "same"]), default="repair", show_default=True,
              help="How an unreadable answer is asked again: 'repair' sends the answer back with a short message "
                   "quoting the required format; 'same' asks the question again as it was (the paper's way).")
@click.option("--min-coverage", type=click.FloatRange(0.0, 1.0), default=0.5, show_default=True,
              help=HELP["--min-coverage"])
@min_verdict_mass_option
@click.option("--max-attempts", type=POSITIVE_INT, default=8, show_default=True,
              help="Transport attempts per request (429, 5xx, timeouts, dropped connections).")
@click.option("--prices", "prices_path", default=None, metavar="FILE.json",
              help="Extra prices, USD per 1M tokens: {\"model\": {\"input\": x, \"output\": y}}.")
@click.option("--max-cost", type=USD, default=None, metavar="USD", help=HELP["--max-cost"])
@click.option("--progress/--no-progress", default=None, help=HELP["--progress"])
@click.option("--salvage", is_flag=True, default=False,
              help="A damaged run directory: move damaged lines of records.jsonl aside (records.damaged.jsonl) and, "
                   "if manifest.json is lost, rebuild it from this command's settings when every surviving record "
                   "fits them. Says what it did; changes nothing when records do not fit.")
@click.option("-v", "--verbose", count=True, help="Log retries (-v) and details (-vv).")
@refusal_classifier_options
def run_cmd(model: str | None, mode: "Mode | None", data: str | None, remove: str, samples: int | None, limit: int | None,
            stratified: int | None, selection_seed: int, max_connections: int, templates_path: str | None, out: str | None,
            system: str | None, temperature: float | None, max_tokens: int | None,
            parse_retries: int, max_attempts: int, prices_path: str | None, max_cost: float | None,
            progress: bool | None, verbose: int, report: bool = True, context_as: str | None = None,
            full_answers: bool = False, refusal_classifier: str | None = None, partial_as: str = "unsafe",
            batch: bool = False, batch_poll: float = 10.0, salvage: bool = False, reask: str = "repair",
            min_coverage: float = 0.5, min_verdict_mass: float = 0.5, pairs: int | None = None,
            mutation: str | None = None, mutations_from: str | None = None, mutator: str | None = None,
            mutator_base_url: str | None = None, **registry_flags: Any) -> None:
    """Run a model as a judge (or, in respond mode, as the chatbot) over a dataset.
    The same command resumes a run. Each option in full: docs/running.md."""
    from ..runs.pricing import PriceTable, PricingError
    from ..prompts import load_templates
    from ..runs.execute import DEFAULT_MODEL, RetryPolicy, RunConfig
    from ..runs.record import RunError, RunLocked, RunState
    from ..backends.base import UnsupportedModeError

    setup_logging(verbose)
    main_job = model is None and (mode is None or mode == MODES[MAIN_JOB_MODE])
    mode = mode or MODES[MAIN_JOB_MODE if model is None else DEFAULT_JUDGE_MODE]
    model = model or DEFAULT_MODEL
    if max_attempts < 1:
        raise BadInput(f"--max-attempts must be at least 1, got {max_attempts}")
    opts = backend_options(model, registry_flags)
    classifier_opts = classifier_options(refusal_classifier, registry_flags)
    try:
        from ..backends.base import PermanentError
        from ..backends.embedded import EmbeddedModelError

        # a model that cannot be loaded (not on disk, no key for a remote API) is bad input
        with bad_input_errors(PricingError, ValueError, UnsupportedModeError, PermanentError, EmbeddedModelError):
            plan = choose_data(data, model, limit, stratified, pairs=pairs, mode=mode, main_job=main_job,
                               max_tokens=max_tokens)
            data, stratified, pairs, max_tokens = plan.path, plan.stratified, plan.pairs, plan.max_tokens
            dataset = _dataset(data)  # read once: the run, its check and its score use this one
            templates = load_templates(templates_path) if templates_path else None
            prices = PriceTable.load(prices_path)
            config = RunConfig(
                mode=mode, model=model, data=data, out=out, removed=remove, samples=samples,
                temperature=temperature, max_tokens=max_tokens, system=system, templates=templates,
                limit=limit, stratified=stratified, pairs=pairs, selection_seed=selection_seed, parse_retries=parse_retries,
                max_connections=max_connections, retry=RetryPolicy(max_attempts=max_attempts),
                max_cost=max_cost, prices=prices, call_timeout=call_timeout(model, opts), backend_options=opts,
                progress=progress, context_as=context_as, full_answers=full_answers,
                refusal_classifier=refusal_classifier,
                classifier_options=classifier_opts,
                partial_as_safe=partial_as == "safe", batch=batch, batch_poll_s=batch_poll, salvage=salvage, reask=reask,
                mutation=mutation, mutations_from=mutations_from, mutator=mutator,
                mutator_options={"base_url": mutator_base_url} if mutator_base_url else {},
                command=("casebench", *sys.argv[1:]),
            )
            try:
                summary = run_with_signals(config, dataset)
            except RunLocked as e:
                raise click.ClickException(str(e)) from None
            except RunError as e:
                raise BadInput(str(e)) from None
    except KeyboardInterrupt:
        click.echo("casebench: interrupted before the run started; nothing was asked", err=True)
        exit_interrupted(130)
    click.echo(summary.line())
    if summary.repaired_bytes:
        click.echo(f"note: repaired a torn last line of records.jsonl ({summary.repaired_bytes} bytes)", err=True)
    if summary.message:
        click.echo(f"casebench: {summary.message}", err=True)
    if summary.status is not RunState.COMPLETE:
        click.echo(f"to resume: casebench {shlex.join(sys.argv[1:])}", err=True)
    click.echo(f"run: {summary.run_dir}")
    pred = _finished_run(Path(summary.run_dir), dataset) if summary.final else None
    check = end_of_run_check(Path(summary.run_dir), min_coverage, min_verdict_mass, pred) if pred is not None else None
    if report and summary.status is RunState.COMPLETE:
        score_and_report(Path(summary.run_dir), min_verdict_mass, demo=plan.demo, model_given=not main_job,
                         max_tokens=max_tokens, pred=pred, pairs=pairs)
    if check is not None:
        if check.verdict_mass_warning:
            click.echo(f"casebench: warning: {check.verdict_mass_warning}", err=True)
        if check.low_coverage and summary.status is RunState.COMPLETE:
            for line in check.advice:
                click.echo(f"casebench: {line}", err=True)
            sys.exit(EXIT_LOW_COVERAGE)
    if summary.status is RunState.INTERRUPTED:
        exit_interrupted(summary.exit_code)
    sys.exit(summary.exit_code)


def _dataset(path: str) -> "Dataset":
    """The dataset at ``path``, read once per command (its scoring session: ``choose_data`` and the
    run share it); keyed by path, size and mtime so an edited file is re-read."""
    from ..data import load_dataset
    from ..session import memo_by_key

    p = Path(path).resolve()
    if not p.is_file():
        return load_dataset(path)  # its own error, naming the file
    st = p.stat()
    return memo_by_key("dataset", (str(p), st.st_size, st.st_mtime_ns), lambda: load_dataset(path))


def _finished_run(run_dir: Path, dataset: "Dataset | None" = None) -> "Predictions | None":
    """The predictions of the run just made, loaded once for its check, score and report
    (None when they cannot be read, said on stderr)."""
    from ..runs.record import RunError
    from ..runs.results import load_run

    try:
        return load_run(run_dir, dataset)
    except (RunError, OSError) as e:
        click.echo(f"casebench: no coverage check: {e}", err=True)
        return None


def end_of_run_check(run_dir: Path, min_coverage: float, min_verdict_mass: float,
                     pred: "Predictions | None" = None) -> "RunCheck | None":
    """``runs.results.check_run`` of the finished run (None when it cannot be read: no dataset);
    ``pred``: its predictions when already loaded."""
    from ..runs.record import RunError
    from ..runs.results import check_run

    try:
        return check_run(run_dir, min_coverage, min_verdict_mass, pred=pred)
    except (RunError, OSError) as e:
        click.echo(f"casebench: no coverage check: {e}", err=True)
        return None


#: The embedded model over the full 900 cases takes longer than the main job's 10-minute budget
#: on 2 CPU cores; a judge mode without --limit/--stratified/--pairs takes a stratified subset of this size.
MAIN_JOB_CASES = 450
#: The main job: the embedded model as the deployed chatbot (respond mode) over whole query pairs.
MAIN_JOB_MODE = "respond"
#: The mode a given --model is asked in when --mode is not given.
DEFAULT_JUDGE_MODE = "prob"
#: Pairs the main job asks on a CPU (both contexts of each query; bench/bench_main_job.py measures
#: the wall time on 2 cores).
MAIN_JOB_PAIRS = 45
#: The main job's answer-length cap in tokens: long enough for the reader to tell an answer from a
#: refusal (bench/bench_main_job.py caps: on 40 of the model's answers the learned reader gives
#: every answer it reads at 80 tokens its reading at 160; two are undetermined), short enough for
#: the 90 cases to finish within 10 minutes on 2 CPU cores (about 5 s per case at 80 tokens).
MAIN_JOB_MAX_TOKENS = 80


class DataPlan(NamedTuple):
    """What ``choose_data`` settled: the dataset, the selection and the answer length."""

    path: str
    stratified: int | None
    pairs: int | None
    max_tokens: int | None
    #: the shipped demo set (no human votes: figures by the contexts' intent, marked as a demo)
    demo: bool = False


def choose_data(data: str | None, model: str, limit: int | None, stratified: int | None, *,
                pairs: int | None = None, mode: "Mode | str | None" = None, main_job: bool = False,
                max_tokens: int | None = None) -> DataPlan:
    """Resolve the dataset (``--data``, $CASEBENCH_DATA, cache, download, demo set) and say where
    it came from. Returns the plan (path, stratified, pairs, max_tokens): the main job (no --model, respond
    mode) asks ``MAIN_JOB_PAIRS`` query pairs of a larger dataset with answers capped at
    ``MAIN_JOB_MAX_TOKENS`` tokens; the embedded model in a judge mode on a CPU gets a stratified
    subset of ``MAIN_JOB_CASES`` cases. An explicit choice is left alone."""
    from ..sources import resolve_dataset
    from ..runs.execute import DEFAULT_MODEL

    choice = resolve_dataset(data)
    notes = {
        "environment": "from $CASEBENCH_DATA",
        "cache": "from the user cache",
        "download": "downloaded (pinned commit, SHA-256 checked)",
        "demo": "THE DEMO SET shipped with casebench: 12 cases of our own (6 queries, each in a safe-intent and "
                "an unsafe-intent context), labelled only by that intent (no human votes); figures on it say "
                "nothing about CASE-Bench. Set $CASEBENCH_DATA or run `casebench data fetch` for the real dataset",
    }
    if choice.origin in notes:
        click.echo(f"data: {choice.path} ({notes[choice.origin]})", err=True)
    unchosen = limit is None and stratified is None and pairs is None
    if main_job:
        if max_tokens is None:
            max_tokens = MAIN_JOB_MAX_TOKENS
        if unchosen:
            from ..stats.pairs import pair_by_query

            ds = _dataset(str(choice.path))
            n_pairs = len(pair_by_query(list(ds)).pairs)
            if n_pairs > MAIN_JOB_PAIRS:
                pairs = MAIN_JOB_PAIRS
                click.echo(f"cases: {MAIN_JOB_PAIRS} of the dataset's {n_pairs} queries, each in both its contexts "
                           f"({2 * MAIN_JOB_PAIRS} cases), stratified by category (--pairs {MAIN_JOB_PAIRS} --selection-seed 0; "
                           "pass --pairs N, --stratified N or --limit N to choose); answers up to "
                           f"{max_tokens} tokens (--max-tokens)", err=True)
        return DataPlan(str(choice.path), stratified, pairs, max_tokens, choice.is_demo)
    if model == DEFAULT_MODEL and unchosen:
        n = len(_dataset(str(choice.path)))
        if n > MAIN_JOB_CASES:
            import torch

            if not torch.cuda.is_available():
                stratified = MAIN_JOB_CASES
                click.echo(f"cases: a seeded subset of {MAIN_JOB_CASES} of {n}, stratified by category and intent "
                           f"(--stratified {MAIN_JOB_CASES} --selection-seed 0; pass --stratified N, --pairs N or --limit N "
                           "to choose); the expected duration, measured on this machine, follows the first answers",
                           err=True)
    return DataPlan(str(choice.path), stratified, pairs, max_tokens, choice.is_demo)


def score_and_report(run_dir: Path, min_verdict_mass: float | None = None, *, demo: bool = False,
                     model_given: bool = True, max_tokens: int | None = None, pred: "Predictions | None" = None,
                     pairs: int | None = None) -> None:
    """The end of a run, its first screen: what the model does (``present.summary``: over- and
    under-refusal, whether it moves with the context beside people's on the same pairs, and in
    respond mode the reader), a self-contained HTML report with the published models beside it
    on the same cases, and what to do next. Every other figure and the method notes live in
    ``casebench score`` and the report. The run is scored once (``stats.result.score_input``):
    the summary and the report read that one result. ``pred``: the run's predictions when
    already loaded."""
    from ..stats.options import ScoringOptions
    from ..stats.result import score_input
    from ..runs.results import load_run
    from ..present.summary import next_steps, summary_lines

    if pred is None:
        pred = load_run(run_dir)
    options = ScoringOptions(min_verdict_mass=min_verdict_mass)
    pred = pred.at_min_verdict_mass(min_verdict_mass)  # as scored: the threshold is an option, applied as a view
    if not all(c.has_human_label for c in pred.cases):
        click.echo("no scores: the dataset has no human votes to score against (collect them with "
                   "casebench annotate)", err=True)
        return
    scored = score_input(pred, options)
    score = scored.score
    click.echo("")
    from ..naming import who

    if pred.mutation:
        click.echo(f"queries reworded ({pred.mutation}), contexts untouched: people voted on the base wording only")
    for line in summary_lines(score, None if demo else scored.people, demo=demo, max_tokens=max_tokens,
                              who=who(pred), pairs_asked=pairs):
        click.echo(line)
    if score.turns is not None:  # a reveal run: the figures are the final turn's; its path by turn
        from ..naming import display_name
        from ..present.reveal_text import by_turn_lines

        for line in by_turn_lines(display_name(pred), score.turns):
            click.echo(line)
    refs: list[Any] = []
    root = None
    try:
        from ..present.report import write_report
    except ImportError as e:  # matplotlib is an optional extra
        click.echo(f"no report: {e} (pip install 'casebench[report]')", err=True)
    else:
        refs, root = ([], None) if demo else _cached_references(pred, options)
        path = write_report(run_dir / "report.html", [pred], options, references=refs, reference_root=root,
                            show_text=False)
        click.echo("")
        click.echo(f"report: {path}")
        if refs:
            click.echo(f"  with the {len(refs)} published models (judges) beside it on the same "
                       f"{int(pred.answered.sum())} cases")
    for line in next_steps(model_given=model_given, demo=demo, mode=pred.mode, references=bool(refs),
                           run_dir=str(run_dir), labelled=bool(getattr(score, "refusal_people", None))):
        click.echo(line)


def _cached_references(pred: "Predictions", options: Any) -> tuple[list[Any], str | None]:
    """The published models cached by ``casebench data fetch``, scored on the cases the run
    answered (``reference_rows``: kept on disk, so the next run on the same cases reads
    them back), so that they stand beside the run on the same cases (none when absent or
    unreadable: the main job never fails for want of a reference)."""
    from ..data import DatasetError
    from ..sources import cached_outputs
    from ..reference_rows import reference_cases, reference_inputs

    root = cached_outputs()
    if root is None:
        return [], None
    answered = reference_cases([pred], options)  # the one case policy of reference rows
    same_model = [SimpleNamespace(model=pred.model, mode=pred.mode, removed=r) for r in {(), tuple(pred.removed)}]
    try:
        refs = reference_inputs(root, options, cases=answered, exclude=same_model)
    except (DatasetError, OSError) as e:
        click.echo(f"published models not shown: {e}", err=True)
        return [], None
    return refs, str(root)


@click.command("export")
@click.argument("run_dir", metavar="RUN_OR_FILE", type=click.Path(exists=True, path_type=Path))
@click.option("-o", "--out", required=True, type=click.Path(path_type=Path),
              help="Output: a file in the published exp/ format (e.g. output_binary.json), or with --format eee a "
                   "folder for the Every Eval Ever records.")
@click.option("--format", "fmt", type=click.Choice(["exp", "eee"]), default="exp", show_default=True,
              help="exp: the published exp/ file format (a run directory only); eee: an Every Eval Ever aggregate "
                   "record (schema 0.3.0) with its instance-level sidecar, from a run, a published file or an "
                   "inspect log.")
@click.option("--name", default=None, help="Model key in the file (default: the model spec's last component).")
@click.option("--data", default=None, metavar="PATH", help="The run's dataset, if it moved since the run.")
@click.option("--allow-incomplete", is_flag=True, help="Export a run with pending requests (they become \"\").")
@click.option("--bootstrap", "n_boot", type=click.IntRange(min=0), default=1000, show_default=True,
              help="--format eee: bootstrap resamples for the intervals.")
@click.option("--show-text/--hide-text", "show_text", default=False, show_default=True,
              help="--format eee: put the queries' text (the dataset's licence-gated text) in the sidecar.")
def export_cmd(run_dir: Path, out: Path, fmt: str, name: str | None, data: str | None, allow_incomplete: bool,
               n_boot: int = 1000, show_text: bool = False) -> None:
    """Export a run directory to the published exp/ file format (the selected cases, in order), or
    (--format eee) a run, published file or inspect log to Every Eval Ever records."""
    from ..data import load_dataset
    from ..runs.record import RunError
    from ..runs.results import export_run

    with bad_input_errors():
        dataset = load_dataset(data) if data else None
        try:
            if fmt == "eee":
                paths = _export_eee(run_dir, out, dataset, n_boot, show_text)
                click.echo("wrote " + ", ".join(str(p) for p in paths))
                return
            if not run_dir.is_dir():
                raise BadInput(f"{run_dir}: the exp format exports a run directory (a file is already in a format "
                               "casebench reads; --format eee exports it as Every Eval Ever records)")
            path = export_run(run_dir, out, dataset=dataset, name=name, allow_incomplete=allow_incomplete)
        except RunError as e:
            raise BadInput(str(e)) from None
    click.echo(f"wrote {path}")


def _export_eee(src: Path, out: Path, dataset: Any, n_boot: int, show_text: bool) -> list[Path]:
    """The Every Eval Ever records of one input (``present.eee``) under the folder ``out``."""
    from ..atomic import write_text_atomic
    from ..loader import load_predictions
    from ..present.eee import eee_files
    from ..stats.board import build_board
    from ..stats.options import ScoringOptions

    pred = load_predictions(str(src), dataset=dataset)
    board = build_board([pred], ScoringOptions(n_boot=n_boot), show_text=show_text)
    files = eee_files(board, [pred])
    written = []
    for rel, text in files.items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        written.append(write_text_atomic(out / rel, text))
    return [p for p in written if p.suffix == ".json"]
