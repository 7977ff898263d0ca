"""``casebench runs repair``: a thin wrapper over ``casebench.runs.repair``."""

from __future__ import annotations

from pathlib import Path

import click

from ._common import BadInput, bad_input_errors


@click.group("runs")
def runs_group() -> None:
    """Look after run directories."""


@runs_group.command("repair")
@click.argument("run_dir", type=click.Path(file_okay=False, path_type=Path))
def repair_cmd(run_dir: Path) -> None:
    """Move damaged lines of RUN_DIR/records.jsonl aside (to records.damaged.jsonl), and records
    another run wrote, keeping every valid record of this run; their requests are asked again
    when the run is resumed. A lost manifest is rebuilt by repeating the run's command with
    --salvage: this command then says so and exits 2, as `casebench run` and `score` do on the
    same directory."""
    from ..runs.record import RunError
    from ..runs.repair import repair_records

    with bad_input_errors():
        try:
            report = repair_records(run_dir)
        except RunError as e:
            raise BadInput(str(e)) from None
    for line in report.lines():
        click.echo(line)
    if report.remaining is not None:
        raise BadInput(report.remaining.story())
