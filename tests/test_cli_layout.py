"""The CLI's shape: command modules import the library and the CLI's helper modules (``cli._common``,
and ``cli._study_runs`` for the two commands that run studies: a name starting with ``_``), never
each other."""

from __future__ import annotations

import ast
from pathlib import Path

CLI = Path(__file__).resolve().parents[1] / "src" / "casebench" / "cli"


def test_command_modules_do_not_import_each_other():
    commands = {p.stem for p in CLI.glob("*.py") if not p.stem.startswith("_")}
    assert {"compare", "ablate", "study", "run"} <= commands
    offenders = []
    for p in CLI.glob("*.py"):
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1 and (node.module or "") in commands:
                offenders.append(f"{p.name} imports .{node.module}")
    assert offenders == []


def test_mode_choices_come_from_the_registry():
    from click.testing import CliRunner

    from casebench.cli import cli
    from casebench.modes import mode_names

    out = " ".join(CliRunner().invoke(cli, ["run", "--help"]).output.split())
    assert "[" + "|".join(mode_names()) + "]" in out and "respond" in mode_names()
