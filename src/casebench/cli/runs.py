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
    """Move damaged lines of RUN_DIR/records.jsonl aside (to records.damaged.jsonl), keeping every
    valid record; their requests are asked again when the run is resumed. A lost manifest is
    rebuilt by repeating the run's command with --salvage."""
    from ..runs.record import MANIFEST, RunError
    from ..runs.repair import diagnose, repair_records

    with bad_input_errors():
        try:
            report = repair_records(run_dir)
        except RunError as e:
            raise BadInput(str(e)) from None
    for line in report.lines():
        click.echo(line)
    d = diagnose(run_dir)
    if not d.manifest_ok and d.holds_records:
        click.echo(f"{run_dir}: {MANIFEST} is {'unreadable' if d.has_manifest else 'missing'}: repeat the command "
                   "that started this run with --salvage to rebuild it from that command's settings", err=True)
