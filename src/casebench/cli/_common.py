"""Helpers shared by the command modules: error reporting and exit codes."""

from __future__ import annotations

import contextlib
import sys
from typing import Iterator

import click

EXIT_BAD_INPUT = 2


class BadInput(click.ClickException):
    """Bad user input (file, record, field named in the message): exit code 2."""

    exit_code = EXIT_BAD_INPUT

    def show(self, file=None) -> None:  # type: ignore[override]
        click.echo(f"casebench: error: {self.format_message()}", err=True)


@contextlib.contextmanager
def bad_input_errors(*types: type[BaseException]) -> Iterator[None]:
    """Turn the library's input errors (DatasetError, TemplateError, ...) into exit code 2."""
    from ..data import AblationError, DatasetError
    from ..prompts import TemplateError
    from ..run.rundir import RunError

    catch = (DatasetError, AblationError, TemplateError, RunError) + tuple(types)
    try:
        yield
    except catch as e:  # type: ignore[misc]
        raise BadInput(str(e)) from None


def echo_err(msg: str) -> None:
    click.echo(msg, err=True, file=sys.stderr)
