"""Helpers shared by the command modules: error reporting, exit codes, options several commands
take, and running the engine under signal handlers. Command modules import this one, never each
other."""

from __future__ import annotations

import contextlib
import sys
from typing import TYPE_CHECKING, Any, Callable, Iterator

import click

if TYPE_CHECKING:
    from ..runs.config import RunConfig
    from ..runs.execute import RunSummary

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
    from ..extras import MissingExtra
    from ..modes import ModeError
    from ..prompts import TemplateError
    from ..runs.record import RunError

    catch = (DatasetError, AblationError, TemplateError, RunError, ModeError, MissingExtra) + tuple(types)
    try:
        yield
    except catch as e:  # type: ignore[misc]
        raise BadInput(str(e)) from None


def echo_err(msg: str) -> None:
    click.echo(msg, err=True, file=sys.stderr)


def refusal_classifier_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """``--refusal-classifier``, ``--refusal-labels`` and ``--partial-as``: how respond-mode answers
    are read (run, classify, refusal-eval)."""
    f = click.option("--partial-as", "partial_as", type=click.Choice(["unsafe", "safe"]), default="unsafe",
                     show_default=True,
                     help="Respond mode: count a partial answer as refusing (unsafe) or as answering (safe).")(f)
    f = click.option("--refusal-base-url", "refusal_base_url", default=None, metavar="URL",
                     help="llm:openai/... classifier: the endpoint of its OpenAI-compatible server.")(f)
    f = click.option("--refusal-labels", "refusal_labels", default=None, metavar="MAP",
                     help="hf-classifier: the model's labels as behaviours, e.g. "
                          "'LABEL_0=comply,LABEL_1=refuse,LABEL_2=partial'.")(f)
    f = click.option("--refusal-classifier", "refusal_classifier", default=None, metavar="SPEC",
                     help="Respond mode: how answers are classified: 'rules' (the offline default), "
                          "'llm:MODEL_SPEC' or 'hf-classifier:PATH'.")(f)
    return f


def classifier_options(spec: str | None, labels: str | None, base_url: str | None = None) -> dict[str, Any]:
    """Keyword options for ``classify.make_classifier`` from the CLI flags."""
    if base_url is not None:
        if not spec or not spec.startswith("llm:"):
            raise BadInput("--refusal-base-url applies to --refusal-classifier llm:MODEL_SPEC only")
        if labels is not None:
            raise BadInput("--refusal-labels applies to --refusal-classifier hf-classifier:PATH only")
        return {"base_url": base_url}
    if labels is None:
        return {}
    if not spec or not spec.startswith("hf-classifier:"):
        raise BadInput("--refusal-labels applies to --refusal-classifier hf-classifier:PATH only")
    from ..classify import ClassifierError, parse_label_map

    try:
        return {"labels": parse_label_map(labels)}
    except ClassifierError as e:
        raise BadInput(f"--refusal-labels: {e}") from None


def run_with_signals(config: "RunConfig") -> "RunSummary":
    """Run under SIGINT/SIGTERM handlers that cancel the run cleanly (status ``interrupted``,
    manifest written, exit 130); the library's ``arun`` itself installs no handlers."""
    import asyncio
    import signal

    from ..runs.execute import arun

    async def main() -> "RunSummary":
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        handled = []
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, task.cancel)
                handled.append(sig)
            except (RuntimeError, NotImplementedError, ValueError):  # pragma: no cover - not the main thread
                pass
        try:
            return await arun(config)
        finally:
            for sig in handled:
                loop.remove_signal_handler(sig)

    try:
        return asyncio.run(main())
    except asyncio.CancelledError:
        raise KeyboardInterrupt from None


def label_source_option(f: Callable[..., Any]) -> Callable[..., Any]:
    """``--label-source``: the human labels a scoring command (score, compare, ablate, report)
    scores against; ``check_label_source`` refuses it with ``--paper-compat``."""
    return click.option(
        "--label-source", type=click.Choice(["published", "votes"]), default="published", show_default=True,
        help="Human label: the published safe_rate (21 votes incl. intent) or the majority of the votes alone.",
    )(f)


def check_label_source(paper_compat: bool, label_source: str) -> None:
    """The published script scores against the published labels only."""
    if paper_compat and label_source != "published":
        raise BadInput("--paper-compat uses the published labels; drop --label-source votes")
