"""Helpers shared by the command modules: error reporting, exit codes, options several commands
take, and running the engine under signal handlers. Command modules import this one, never each
other."""

from __future__ import annotations

import contextlib
import json
import logging
import sys
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterator, TypeVar

import click

if TYPE_CHECKING:
    from ..runs.config import RunConfig
    from ..runs.execute import RunSummary

EXIT_BAD_INPUT = 2
T = TypeVar("T")


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


API_PREFIXES = ("openai/", "anthropic/")
LOCAL_PREFIXES = ("hf/",)


class _TqdmHandler(logging.Handler):
    """Log lines that do not tear the progress bar."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            from tqdm import tqdm

            tqdm.write(self.format(record), file=sys.stderr)
        except Exception:  # pragma: no cover - logging must never raise
            self.handleError(record)


def setup_logging(verbose: int) -> None:
    logger = logging.getLogger("casebench")
    if not any(isinstance(h, _TqdmHandler) for h in logger.handlers):
        h = _TqdmHandler()
        h.setFormatter(logging.Formatter("casebench: %(message)s"))
        logger.addHandler(h)
        logger.propagate = False
    logger.setLevel(logging.DEBUG if verbose > 1 else logging.INFO if verbose else logging.WARNING)


def backend_options(model: str, *, base_url: str | None, api_key_env: str | None, timeout: float | None,
                    batch_size: int | None, device: str | None, dtype: str | None,
                    extra_body: str | None = None, prob_method: str | None = None) -> dict[str, Any]:
    """The options a backend takes, from the flags the user gave; refuse flags that do not
    apply to the model's backend instead of silently ignoring them."""
    api: dict[str, Any] = {"base_url": base_url, "api_key_env": api_key_env, "timeout": timeout}
    if extra_body is not None:
        if not model.startswith("openai/"):
            raise BadInput(f"--extra-body applies to openai/ models only, not {model!r}")
        try:
            body = json.loads(extra_body)
        except json.JSONDecodeError as e:
            raise BadInput(f"--extra-body: not valid JSON ({e.msg} at column {e.colno})") from None
        if not isinstance(body, dict):
            raise BadInput("--extra-body: must be a JSON object")
        api["extra_body"] = body
    local = {"batch_size": batch_size, "device": device, "dtype": dtype, "prob_method": prob_method}
    flag = {"base_url": "--base-url", "api_key_env": "--api-key-env", "timeout": "--timeout",
            "batch_size": "--batch-size", "device": "--device", "dtype": "--dtype", "extra_body": "--extra-body",
            "prob_method": "--prob-method"}
    if model.startswith(API_PREFIXES):
        use, other = api, local
    elif model.startswith(LOCAL_PREFIXES):
        use, other = local, api
    else:
        return {}  # make_backend explains what is wrong with the spec
    wrong = [flag[k] for k, v in other.items() if v is not None]
    if wrong:
        raise BadInput(f"{', '.join(wrong)} do(es) not apply to model {model!r}")
    return {k: v for k, v in use.items() if v is not None}


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


def run_under_signals(make: Callable[[], Awaitable[T]]) -> T:
    """Run ``make()`` under SIGINT/SIGTERM handlers that cancel it cleanly (the run engine then
    stops the backend at its next step, records what finished and writes its manifest with
    status ``interrupted``; exit 130); the library itself installs no handlers. A second signal
    exits at once (130): records are whole lines written with one ``write`` each and the
    manifest is replaced atomically, so nothing is left half-written, and the run resumes with
    the same command. A cancellation before the engine took over becomes ``KeyboardInterrupt``."""
    import asyncio
    import os
    import signal

    def exit_now(signum: int, frame: Any) -> None:
        os.write(2, b"\ncasebench: second interrupt: exiting now (what is on disk is kept; "
                    b"re-run the same command to resume)\n")
        os._exit(130)

    async def main() -> T:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        handled = []

        def first(sig: int) -> None:
            # later signals bypass the event loop, so they work even while it is busy
            for s in handled:
                loop.remove_signal_handler(s)
                signal.signal(s, exit_now)
            handled.clear()
            echo_err(f"\ncasebench: {signal.Signals(sig).name}: stopping after the current step, keeping every "
                     "finished answer (press Ctrl-C again to exit at once)")
            task.cancel()

        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, first, sig)
                handled.append(sig)
            except (RuntimeError, NotImplementedError, ValueError):  # pragma: no cover - not the main thread
                pass
        try:
            return await make()
        finally:
            for sig in handled:
                loop.remove_signal_handler(sig)

    try:
        return asyncio.run(main())
    except asyncio.CancelledError:
        raise KeyboardInterrupt from None


def exit_interrupted(code: int = 130) -> None:
    """End an interrupted command at once: flush what was printed, then skip the interpreter's
    teardown (finalising torch and transformers takes seconds on a busy CPU, and a user who
    pressed Ctrl-C is waiting). Everything casebench writes is already on disk by then."""
    import os

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def run_with_signals(config: "RunConfig") -> "RunSummary":
    """``casebench.arun(config)`` under ``run_under_signals``."""
    from ..runs.execute import arun

    return run_under_signals(lambda: arun(config))


def label_source_option(f: Callable[..., Any]) -> Callable[..., Any]:
    """``--label-source``: the human labels a scoring command (score, compare, ablate, report)
    scores against; ``scoring_options`` refuses it with ``--paper-compat``."""
    from ..stats.options import LABEL_SOURCE_HELP, LABEL_SOURCES

    return click.option(
        "--label-source", type=click.Choice(LABEL_SOURCES), default="published", show_default=True,
        help=LABEL_SOURCE_HELP,
    )(f)


#: the help of ``--mode`` and ``--remove`` on the scoring commands (``file_kind_options``)
FILE_MODE_HELP = ("The mode of published INPUTS whose file name does not say it (e.g. output_binary_mine.json); "
                  "a name that says another mode is refused.")
FILE_REMOVE_HELP = ("CI parameters removed in published INPUTS whose file name does not say it, comma-separated "
                    "(e.g. sender,urgency).")


def remove_option(f: Callable[..., Any]) -> Callable[..., Any]:
    """``--remove`` of the scoring commands: what published inputs hold when their name does not say."""
    return click.option("--remove", "remove", default=None, metavar="LIST", help=FILE_REMOVE_HELP)(f)


def file_kind_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """``--mode`` and ``--remove`` of the scoring commands (score, compare, report): what a
    published file holds when its name does not say (``loader.load_predictions``)."""
    from ..modes import mode_names

    f = remove_option(f)
    return click.option("--mode", "mode", type=click.Choice(mode_names()), default=None, help=FILE_MODE_HELP)(f)


def scoring_options(paper_compat: bool, n_boot: int, seed: int, label_source: str) -> "ScoringOptions":
    """The scoring options of a scoring command's flags. The published script scores against
    the published labels only, so ``--paper-compat`` with ``--label-source votes`` is refused."""
    from ..stats.options import ScoringOptions

    if paper_compat and label_source != "published":
        raise BadInput("--paper-compat uses the published labels; drop --label-source votes")
    return ScoringOptions(paper_compat=paper_compat, n_boot=n_boot, seed=seed,
                          label_source=label_source)  # type: ignore[arg-type]
