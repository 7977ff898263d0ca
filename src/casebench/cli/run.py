"""``casebench run`` and ``casebench export``: thin wrappers over ``casebench.runs.execute`` and
``casebench.runs.results``."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any

import click

from typing import Any

from ..modes import MODES, mode_names
from ..prompts import CONTEXT_PLACEMENTS
from ._common import (
    BadInput, RegistryCommand, backend_options, bad_input_errors, batch_backends, call_timeout, classifier_options,
    exit_interrupted, refusal_classifier_options, run_with_signals, setup_logging,
)


@click.command("run", cls=RegistryCommand, backend_flags=True, classifier_flags="prefixed")
@click.option("--model", "model", default=None, metavar="SPEC",
              help="Model spec: PREFIX/MODEL, e.g. openai/NAME, anthropic/NAME, hf/ID-or-path (every backend: "
                   "README, or python -m casebench.cli.registry_tables --list). Default: hf/smollm2-135m-instruct.")
@click.option("--mode", type=click.Choice(mode_names()), default="prob", show_default=True,
              help="How the model is asked: " + "; ".join(f"{m.name}: {m.help}" for m in MODES.values()) + ".")
@click.option("--context-as", "context_as", type=click.Choice(CONTEXT_PLACEMENTS), default=None,
              help="Where the context goes: inside the judge prompt (user, the paper's framing; default of the "
                   "judge modes), rendered as the operator's system prompt (system; default of respond mode), or "
                   "as the conversation before the query (turns; a judge is asked about its final query).")
@click.option("--batch", "batch", is_flag=True, default=False,
              help=batch_backends() + ": ask through the provider's batch API (half price, within 24 h); "
                   "a killed run resumes polling the same batch. Unanswered items are asked again online.")
@click.option("--batch-poll", "batch_poll", type=float, default=10.0, show_default=True, metavar="SECONDS",
              help="With --batch: seconds between status polls (growing by half each time, up to 2 min).")
@click.option("--full-answers", is_flag=True, default=False,
              help="Text modes: generate whole answers (with explanations) instead of stopping at the verdict.")
@click.option("--report/--no-report", "report", default=True, show_default=True,
              help="When the run is complete, print its scores and write report.html into the run directory.")
@click.option("--data", "data", default=None, metavar="PATH", help="Dataset (JSON/JSONL). Default: $CASEBENCH_DATA, else the user cache, else a download of the "
              "pinned published file, else the demo set (the command says which).")
@click.option("--remove", "remove", default="", metavar="PARAMS", help="CI parameters to remove (comma-separated).")
@click.option("--samples", type=int, default=None, help="Samples per case (default: 3 in score mode, else 1).")
@click.option("--limit", type=int, default=None, help="Only the first N cases, in dataset order.")
@click.option("--stratified", type=int, default=None, metavar="N",
              help="A seeded subset of N cases stratified by category x intent.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of --stratified.")
@click.option("--max-connections", type=int, default=8, show_default=True, help="Requests in flight (API models).")
@click.option("--templates", "templates_path", default=None, metavar="FILE",
              help="Template file in the published format (judge, judgescore, judgelogits).")
@click.option("-o", "--out", default=None, metavar="RUN_DIR",
              help="Run directory (default: runs/<model>_<mode>[_<removed>]). Re-running resumes it.")
@click.option("--system", default=None, help="System prompt.")
@click.option("--temperature", type=float, default=None, help="Sampling temperature (default: 1.0 score, 0 else).")
@click.option("--max-tokens", type=int, default=None, help="Answer length limit (default 256; respond mode 512).")
@click.option("--parse-retries", type=int, default=2, show_default=True,
              help="Re-asks of an unparseable answer before it is recorded as missing.")
@click.option("--max-attempts", type=int, default=8, show_default=True,
              help="Transport attempts per request (429, 5xx, timeouts, dropped connections).")
@click.option("--prices", "prices_path", default=None, metavar="FILE.json",
              help="Extra prices, USD per 1M tokens: {\"model\": {\"input\": x, \"output\": y}}.")
@click.option("--max-cost", type=float, default=None, metavar="USD", help="Stop before the run's total cost (all sessions) would pass this.")
@click.option("--progress/--no-progress", default=None, help="Progress bar (default: on a terminal).")
@click.option("--salvage", is_flag=True, default=False,
              help="A damaged run directory: move damaged lines of records.jsonl aside (records.damaged.jsonl) and, "
                   "if manifest.json is lost, rebuild it from this command's settings when every surviving record "
                   "fits them. Says what it did; changes nothing when records do not fit.")
@click.option("-v", "--verbose", count=True, help="Log retries (-v) and details (-vv).")
@refusal_classifier_options
def run_cmd(model: str | None, mode: str, data: str | None, remove: str, samples: int | None, limit: int | None,
            stratified: int | None, seed: int, max_connections: int, templates_path: str | None, out: str | None,
            system: str | None, temperature: float | None, max_tokens: int | None,
            parse_retries: int, max_attempts: int, prices_path: str | None, max_cost: float | None,
            progress: bool | None, verbose: int, report: bool = True, context_as: str | None = None,
            full_answers: bool = False, refusal_classifier: str | None = None, partial_as: str = "unsafe",
            batch: bool = False, batch_poll: float = 10.0, salvage: bool = False, **registry_flags: Any) -> None:
    """Run a model as a judge (or, in respond mode, as the chatbot) over a dataset.
    Re-run the same command to resume a run.

    The backend options (--base-url, --device, ...) and the refusal classifier's (--refusal-labels,
    ...) come from the backends' and classifiers' own descriptions; each applies to the backends
    named in its help."""
    from ..runs.pricing import PriceTable, PricingError
    from ..prompts import load_templates
    from ..runs.execute import DEFAULT_MODEL, RetryPolicy, RunConfig
    from ..runs.record import RunError, RunLocked, RunState
    from ..backends.base import UnsupportedModeError

    setup_logging(verbose)
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
            data, stratified = choose_data(data, model, limit, stratified)
            templates = load_templates(templates_path) if templates_path else None
            prices = PriceTable.load(prices_path)
            config = RunConfig(
                mode=mode, model=model, data=data, out=out, removed=remove, samples=samples,
                temperature=temperature, max_tokens=max_tokens, system=system, templates=templates,
                limit=limit, stratified=stratified, seed=seed, parse_retries=parse_retries,
                max_connections=max_connections, retry=RetryPolicy(max_attempts=max_attempts),
                max_cost=max_cost, prices=prices, call_timeout=call_timeout(model, opts), backend_options=opts,
                progress=progress, context_as=context_as, full_answers=full_answers,
                refusal_classifier=refusal_classifier,
                classifier_options=classifier_opts,
                partial_as_safe=partial_as == "safe", batch=batch, batch_poll_s=batch_poll, salvage=salvage,
            )
            try:
                summary = run_with_signals(config)
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
    if report and summary.status is RunState.COMPLETE:
        score_and_report(Path(summary.run_dir))
    if summary.status is RunState.INTERRUPTED:
        exit_interrupted(summary.exit_code)
    sys.exit(summary.exit_code)


#: The embedded model over the full 900 cases takes longer than the main job's 10-minute budget
#: on 2 CPU cores; without --limit/--stratified it judges a stratified subset of this size.
MAIN_JOB_CASES = 450


def choose_data(data: str | None, model: str, limit: int | None, stratified: int | None) -> tuple[str, int | None]:
    """Resolve the dataset (``--data``, $CASEBENCH_DATA, cache, download, demo set) and say where
    it came from; the embedded default model on CPU gets a stratified subset of a large dataset."""
    from ..data import load_dataset
    from ..sources import resolve_dataset
    from ..runs.execute import DEFAULT_MODEL

    choice = resolve_dataset(data)
    notes = {
        "environment": "from $CASEBENCH_DATA",
        "cache": "from the user cache",
        "download": "downloaded (pinned commit, SHA-256 checked)",
        "demo": "THE DEMO SET shipped with casebench: 12 cases of our own, labelled only by the intent of "
                "their context (no human votes); figures on it say nothing about CASE-Bench. Set "
                "$CASEBENCH_DATA or run `casebench data fetch` for the real dataset",
    }
    if choice.origin in notes:
        click.echo(f"data: {choice.path} ({notes[choice.origin]})", err=True)
    if model == DEFAULT_MODEL and limit is None and stratified is None:
        n = len(load_dataset(choice.path))
        if n > MAIN_JOB_CASES:
            import torch

            if not torch.cuda.is_available():
                stratified = MAIN_JOB_CASES
                click.echo(f"cases: a seeded subset of {MAIN_JOB_CASES} of {n}, stratified by category and intent "
                           f"(--stratified {MAIN_JOB_CASES} --seed 0; pass --stratified N or --limit N to choose); "
                           "the expected duration, measured on this machine, follows the first answers", err=True)
    return str(choice.path), stratified


def score_and_report(run_dir: Path) -> None:
    """The end of the main job: the run's metrics with CIs, and a self-contained HTML report."""
    from ..stats.metrics import score_predictions
    from ..runs.results import load_run
    from ..present.tables import text_table

    pred = load_run(run_dir)
    if not all(c.has_votes for c in pred.cases):
        click.echo("no scores: the dataset has no human votes to score against (collect them with "
                   "casebench annotate)", err=True)
        return
    click.echo("")
    click.echo(text_table([score_predictions(pred, breakdowns=False)]), nl=False)
    try:
        from ..present.report import write_report
    except ImportError as e:  # matplotlib is an optional extra
        click.echo(f"no report: {e} (pip install 'casebench[report]')", err=True)
        return
    refs, root = _cached_references(pred)
    path = write_report(run_dir / "report.html", [pred], references=refs, reference_root=root)
    click.echo(f"report: {path}")
    if refs:
        click.echo(f"the report ranks this run among the {len(refs)} published models (from {root})")
    else:
        click.echo("to see this run among the paper's published models: casebench data fetch (then report again)")


def _cached_references(pred: Any) -> tuple[list[Any], str | None]:
    """The published models cached by ``casebench data fetch`` (none when absent or unreadable:
    the main job never fails for want of a reference)."""
    from ..data import DatasetError
    from ..published import load_references
    from ..sources import cached_outputs

    root = cached_outputs()
    if root is None:
        return [], None
    try:
        refs = load_references(root)
    except (DatasetError, OSError) as e:
        click.echo(f"published models not shown: {e}", err=True)
        return [], None
    return [r for r in refs if (r.model, r.mode) != (pred.model, pred.mode)], str(root)


@click.command("export")
@click.argument("run_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("-o", "--out", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Output file (published exp/ format, e.g. output_binary.json).")
@click.option("--name", default=None, help="Model key in the file (default: the model spec's last component).")
@click.option("--data", default=None, metavar="PATH", help="The run's dataset, if it moved since the run.")
@click.option("--allow-incomplete", is_flag=True, help="Export a run with pending requests (they become \"\").")
def export_cmd(run_dir: Path, out: Path, name: str | None, data: str | None, allow_incomplete: bool) -> None:
    """Export a run directory to the published exp/ file format (the selected cases, in order)."""
    from ..data import load_dataset
    from ..runs.record import RunError
    from ..runs.results import export_run

    with bad_input_errors():
        dataset = load_dataset(data) if data else None
        try:
            path = export_run(run_dir, out, dataset=dataset, name=name, allow_incomplete=allow_incomplete)
        except RunError as e:
            raise BadInput(str(e)) from None
    click.echo(f"wrote {path}")
