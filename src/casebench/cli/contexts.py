"""``casebench contexts generate``: a thin wrapper over ``casebench.contexts.generate``."""

from __future__ import annotations

import shlex
import sys
from typing import Any

import click

from ._common import (
    HELP, TEMPERATURE, USD, RegistryCommand, backend_options, bad_input_errors, call_timeout as wall_limit, echo_err, exit_interrupted,
    run_under_signals, setup_logging,
)


@click.group("contexts")
def contexts_group() -> None:
    """Write CI contexts for your own queries and domain (a dataset without votes)."""


@contexts_group.command("generate", cls=RegistryCommand, backend_flags=True)
@click.option("--queries", "queries", required=True, type=click.Path(dir_okay=False), metavar="FILE",
              help="Queries: a JSON list, JSON Lines or CSV file with 'query' and 'category' fields.")
@click.option("--domain", required=True, metavar="TEXT",
              help="The deployment the contexts are for, e.g. \"a hospital's patient-facing assistant\".")
@click.option("--model", required=True, metavar="SPEC", help="Model spec: PREFIX/MODEL, e.g. openai/NAME, "
              "anthropic/NAME, hf/ID-or-path.")
@click.option("-o", "--out", required=True, type=click.Path(dir_okay=False), metavar="NEW.json",
              help="The dataset to write (two records per query, no votes), once the run is complete.")
@click.option("--run-dir", default=None, type=click.Path(file_okay=False), metavar="DIR",
              help="The run directory (default: NEW.json.run next to the output). Re-running the same command "
                   "resumes it.")
@click.option("--max-connections", type=click.IntRange(min=1), default=8, show_default=True, help=HELP["--max-connections"])
@click.option("--parse-retries", type=int, default=2, show_default=True,
              help="Re-asks of an answer whose contexts are invalid, before the query is listed and left out.")
@click.option("--max-cost", type=USD, default=None, metavar="USD", help=HELP["--max-cost"])
@click.option("--prices", "prices_path", default=None, metavar="FILE.json",
              help="Extra prices, USD per 1M tokens: {\"model\": {\"input\": x, \"output\": y}}.")
@click.option("--temperature", type=TEMPERATURE, default=None, help="Sampling temperature, 0 to 2 (default 0.7).")
@click.option("--max-tokens", type=click.IntRange(min=1), default=None, help="Answer length limit (default 900).")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Only the first N queries.")
@click.option("--progress/--no-progress", default=None, help=HELP["--progress"])
@click.option("-v", "--verbose", count=True, help="Log retries (-v) and details (-vv).")
def generate_cmd(queries: str, domain: str, model: str, out: str, run_dir: str | None, max_connections: int,
                 parse_retries: int, max_cost: float | None, prices_path: str | None, temperature: float | None,
                 max_tokens: int | None, limit: int | None, progress: bool | None, verbose: int,
                 **registry_flags: Any) -> None:
    """For each query, a model writes one context meant to be safe and one meant to be unsafe
    (CI schema) for the domain. Writes NEW.json, a dataset without votes; queries whose contexts
    stay invalid after the re-asks are listed (stderr, NEW.failures.json) and left out.
    Re-run the same command to resume."""
    from ..backends.base import PermanentError, UnsupportedModeError
    from ..contexts.generate import ContextsError, agenerate, failures_path
    from ..runs.pricing import PriceTable, PricingError
    from ..runs.record import RunLocked, RunState

    setup_logging(verbose)
    opts = backend_options(model, registry_flags)
    call_timeout = wall_limit(model, opts)
    try:
        with bad_input_errors(ContextsError, PricingError, ValueError, UnsupportedModeError, PermanentError):
            prices = PriceTable.load(prices_path)
            try:
                result = run_under_signals(lambda: agenerate(
                    queries, domain, model, out, run_dir, max_connections=max_connections,
                    parse_retries=parse_retries, max_cost=max_cost, prices=prices, temperature=temperature,
                    max_tokens=max_tokens, limit=limit, progress=progress, backend_options=opts,
                    call_timeout=call_timeout))
            except RunLocked as e:
                raise click.ClickException(str(e)) from None
    except KeyboardInterrupt:
        echo_err("casebench: interrupted before the run started; nothing was asked")
        exit_interrupted(130)
    summary = result.summary
    click.echo(summary.line())
    if summary.message:
        echo_err(f"casebench: {summary.message}")
    if summary.status is not RunState.COMPLETE:
        echo_err(f"to resume: casebench {shlex.join(sys.argv[1:])}")
        click.echo(f"run: {summary.run_dir}")
        sys.exit(result.exit_code)
    if result.failures:
        echo_err(f"{len(result.failures)} of {result.queries} queries got no valid contexts after "
                 f"{parse_retries} re-ask(s); left out, listed in {failures_path(out)}:")
        for f in result.failures:
            echo_err(f"  query {f.index} ({f.category}): {f.error}")
    click.echo(f"run: {summary.run_dir}")
    if result.out is None:
        echo_err("casebench: no query got valid contexts; no dataset was written")
        sys.exit(result.exit_code)
    click.echo(f"contexts: {result.generated} of {result.queries} queries, {2 * result.generated} records "
               f"(no votes) -> {result.out}")
