"""Helpers shared by the command modules: error reporting, exit codes, options several commands
take, and running the engine under signal handlers. Command modules import this one, never each
other."""

from __future__ import annotations

import contextlib
import logging
import sys
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterator, Mapping, NoReturn, Sequence, TypeVar

import click

if TYPE_CHECKING:
    from ..modes import Mode
    from ..runs.config import RunConfig
    from ..stats.options import ScoringOptions
    from ..runs.execute import RunSummary

#: The exit codes of every command (``casebench --help`` and the README list them).
EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_LOW_COVERAGE, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
EXIT_CODES_HELP = ("Exit codes: 0 success; 1 failure (a run that failed or stayed incomplete, a server that cannot "
                   "be reached); 2 bad input (a message names the file, record and field, or the damaged run "
                   "directory and the command that fixes it); 3 a finished run answered fewer cases than "
                   "--min-coverage (run); 130 interrupted (Ctrl-C or SIGTERM; what is on disk is kept).")
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



def dataset_argument(data: str | None, what: str = "DATA", demo: bool = False) -> str:
    """The dataset a command works on, found the same way by every command that takes one: the
    argument, else ``$CASEBENCH_DATA``, else the user cache (``casebench data fetch``), else, for
    a command that can show something on it (``demo``), the demo set shipped with casebench;
    where it came from is said on stderr when the user did not name it. ``BadInput`` when none
    is known."""
    from ..sources import DATA_ENV, cached_dataset_path, demo_dataset_path

    if data:
        return data
    import os

    env = os.environ.get(DATA_ENV)
    if env:
        echo_err(f"data: {env} (from ${DATA_ENV})")
        return env
    cached = cached_dataset_path()
    if cached.is_file():
        echo_err(f"data: {cached} (from the user cache)")
        return str(cached)
    if demo:
        path = demo_dataset_path()
        echo_err(f"data: {path} (the demo set shipped with casebench: 12 cases of our own; set ${DATA_ENV} or "
                 "run `casebench data fetch` for the real dataset)")
        return str(path)
    raise BadInput(f"no dataset: pass {what}, set ${DATA_ENV}, or run `casebench data fetch`")


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


# --------------------------------------------------------------------------- registry-derived options
#: where the derived options' values arrive among a command's keyword arguments
BACKEND_DEST = "backend_opt__"
CLASSIFIER_DEST = "classifier_opt__"


def _dest(prefix: str, flag: str) -> str:
    return prefix + flag[2:].replace("-", "_")


def _click_option(o: Any, flag: str, dest: str, help_: str) -> click.Option:
    """A click option for a registry ``Option`` (default None: "not given")."""
    if o.type == "bool":
        return click.Option([f"{flag}/--no-{flag[2:]}", dest], default=None, help=help_)
    if o.choices:
        kind: Any = click.Choice(list(o.choices))
    elif o.type == "int":
        kind = click.IntRange(min=None if o.minimum is None else int(o.minimum), min_open=o.above)
    elif o.type == "float":
        kind = Number(min=o.minimum, min_open=o.above)
    elif o.type == "url":
        kind = URL
    else:
        kind = click.STRING
    return click.Option([flag, dest], type=kind, default=None, metavar=o.metavar, help=help_)


class Number(click.FloatRange):
    """A finite number in a range, checked where it is given (click says the flag and the value
    the user wrote): ``click.FloatRange`` without NaN and infinities, which compare as in range."""

    name = "number"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            rv = super().convert(value, param, ctx)
        except click.BadParameter:
            if not _is_number(value):
                raise
            # the value as the user wrote it ("-5"), not as parsed ("-5.0")
            self.fail(f"{value} is not in the range {self._describe_range()}.", param, ctx)
        if rv != rv or rv in (float("inf"), float("-inf")):
            self.fail(f"{value} is not a finite number.", param, ctx)
        return rv


class Url(click.ParamType):
    """An endpoint: an http(s) URL with a host (``backends.http.url_problem``), refused where it
    is given (exit 2, naming the flag and the value) before anything else runs: no dataset read,
    no key looked up, no request sent."""

    name = "url"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from ..backends.urls import url_as_given, url_problem

        problem = url_problem(str(value))
        if problem:
            self.fail(f"{url_as_given(str(value))!r} is {problem}; give the server's address, e.g. "
                      "http://127.0.0.1:8080/v1", param, ctx)
        return str(value)


URL = Url()


def _is_number(value: Any) -> bool:
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


#: the ranges providers accept, checked where given (OpenAI's: temperature 0 to 2, top_p 0 to 1)
TEMPERATURE = Number(0, 2)
TOP_P = Number(0, 1, min_open=True)
POSITIVE_INT = click.IntRange(min=1)
NON_NEGATIVE_INT = click.IntRange(min=0)
SECONDS = Number(min=0, min_open=True)
USD = Number(min=0)


def backend_params() -> list[click.Option]:
    """The backend options of every registered backend as click options (a flag several
    backends share is one option; its help names the backends)."""
    from ..backends.registry import cli_options

    out = []
    for o, infos in cli_options():
        flag = o.cli_flag
        assert flag is not None  # cli_options keeps the options that have a flag
        where = ", ".join(f"{i.prefix}/" for i in infos)
        out.append(_click_option(o, flag, _dest(BACKEND_DEST, flag), f"{o.help} [{where}]"))
    return out


def classifier_params(prefixed: bool) -> list[click.Option]:
    """The options of every registered refusal classifier as click options: ``--refusal-`` +
    the flag where the command also takes backend options (run, classify), as declared in
    ``refusal-eval``."""
    from ..classify.registry import classifiers

    seen: dict[str, list[str]] = {}
    first: dict[str, Any] = {}
    for c in classifiers():
        for o in c.options:
            flag = _classifier_flag(o.cli_flag, prefixed)
            if flag is None:
                continue
            seen.setdefault(flag, []).append(c.kind)
            first.setdefault(flag, o)
    return [_click_option(first[f], f, _dest(CLASSIFIER_DEST, f), f"{first[f].help} [{', '.join(kinds)}]")
            for f, kinds in seen.items()]


def _classifier_flag(flag: str | None, prefixed: bool) -> str | None:
    """A classifier option's flag as a command takes it: ``--refusal-`` + the flag where the
    command also takes backend options (``prefixed``), so the two never collide."""
    if flag is None or not prefixed or flag.startswith("--refusal-"):
        return flag
    return "--refusal-" + flag[2:]


class RegistryCommand(click.Command):
    """A command whose backend and refusal-classifier options are derived from the registries
    when it parses its arguments (so a plugin loaded at start-up adds its flags, and ``--help``
    lists them). ``backend_flags``: add every backend's options; ``classifier_flags``:
    ``"prefixed"`` (``--refusal-...``), ``"plain"`` (as declared) or None."""

    def __init__(self, *args: Any, backend_flags: bool = False, classifier_flags: str | None = None,
                 sections: Sequence[tuple[str, Sequence[str]]] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.backend_flags = backend_flags
        self.classifier_flags = classifier_flags
        self.sections = tuple(sections)

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """``--help`` in titled sections (``sections``: (title, parameter names); click has no
        option groups of its own): the first section's options with their whole help, every other
        option on one line (its help's first sentence; the whole of it in docs/running.md). The
        backend and reader options derived from the registries get sections of their own."""
        if not self.sections:
            return super().format_options(ctx, formatter)
        params = [p for p in self.get_params(ctx) if isinstance(p, click.Option)]
        placed: set[str] = set()
        groups: list[tuple[str, list[click.Option]]] = []
        for title, names in self.sections:
            group = [p for name in names for p in params if p.name == name]
            placed |= {p.name for p in group if p.name}
            groups.append((title, group))
        rest = [p for p in params if p.name not in placed]
        groups.append(("Backend options (each names the backends it applies to)",
                       [p for p in rest if (p.name or "").startswith(BACKEND_DEST)]))
        groups.append(("Refusal reader options", [p for p in rest if (p.name or "").startswith(CLASSIFIER_DEST)]))
        other = [p for p in rest if not (p.name or "").startswith((BACKEND_DEST, CLASSIFIER_DEST))]
        if groups and all("--help" in p.opts for p in other):  # --help alone: the first section ends with it
            groups[0] = (groups[0][0], groups[0][1] + other)
            other = []
        groups.append(("Other options", other))
        for k, (title, group) in enumerate(groups):
            rows = [r for r in (p.get_help_record(ctx) for p in group) if r]
            if not rows:
                continue
            # the first section's help on at most two lines of an 80-column terminal, the rest on one
            rows = [(flags, _first_sentence(text, 70 if k == 0 else 40)) for flags, text in rows]
            with formatter.section(title):
                formatter.write_dl(rows)

    def derived_params(self) -> list[click.Parameter]:
        out: list[click.Parameter] = []
        if self.backend_flags:
            out += backend_params()
        if self.classifier_flags:
            out += classifier_params(self.classifier_flags == "prefixed")
        return out

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        params = super().get_params(ctx)
        help_option = self.get_help_option(ctx)
        own = [p for p in params if p is not help_option]
        taken = {p.name for p in own} | {flag for p in own for flag in getattr(p, "opts", [])}
        extra = [p for p in self.derived_params()
                 if p.name not in taken and not any(flag in taken for flag in getattr(p, "opts", []))]
        return own + extra + ([help_option] if help_option is not None else [])


def _first_sentence(text: str, limit: int = 44) -> str:
    """A help text's first sentence, cut to ``limit`` characters at a word (one line in a
    sectioned help); the bracketed tags at its end kept (its default, the backends it applies
    to: "[openai/, anthropic/]"), its range dropped."""
    import re

    tail = re.search(r"(\s*\[[^\]]*\])+$", text)
    body = text[:tail.start()] if tail else text
    parts = [part for group in re.findall(r"\[([^\]]*)\]", tail.group(0) if tail else "") for part in group.split("; ")]
    kept = [part for part in parts if not re.search(r"x[<>]|[<>]=?x", part)]
    tag = f"  [{'; '.join(kept)}]" if kept else ""
    limit = max(16, limit - len(tag))  # the tag shares the line
    first = re.split(r"(?<=[a-z0-9)]{3}[.;])\s", body, maxsplit=1)[0].rstrip(".;")
    if len(first) > limit:
        first = first[:limit].rsplit(" ", 1)[0].rstrip(",;:(") + " ..."
    if first.count("(") > first.count(")"):  # never an unclosed parenthesis
        first = first[:first.rindex("(")].rstrip(",;: ") + " ..."
    return first + tag


def batch_backends() -> str:
    """The prefixes of the backends with a batch API, e.g. ``openai/ and anthropic/``."""
    from ..backends.registry import backends

    return " and ".join(f"{b.prefix}/" for b in backends() if b.batch_api) or "no backend"


def call_timeout(model: str, options: Mapping[str, Any]) -> float | None:
    """A wall-clock safety net above a remote backend's own (per read) timeout: the one a
    ``RunConfig`` gets by default (``runs.config.default_call_timeout``)."""
    from ..runs.config import default_call_timeout

    return default_call_timeout(model, dict(options))


def backend_options(model: str, flags: Mapping[str, Any]) -> dict[str, Any]:
    """The options a backend takes, from the derived flags the user gave (``flags``: the
    command's keyword arguments); refuse flags that do not apply to the model's backend instead
    of silently ignoring them."""
    from ..backends.registry import info_for

    given = {k: v for k, v in flags.items() if k.startswith(BACKEND_DEST) and v is not None}
    info = info_for(model)
    if info is None or info.cls is None:
        return {}  # make_backend explains what is wrong with the spec
    by_dest = {_dest(BACKEND_DEST, o.cli_flag): o for o in info.options if o.cli_flag}
    return _given_options(given, by_dest, BACKEND_DEST,
                          f"model {model!r} (the {info.prefix}/ backend's options: "
                          f"{', '.join(o.cli_flag for o in info.options if o.cli_flag) or 'none'})")


def _given_options(given: Mapping[str, Any], by_dest: Mapping[str, Any], prefix: str, what: str) -> dict[str, Any]:
    """The flags the user gave (``given``: derived flags' destinations under ``prefix``) as the
    options they name (``by_dest``: destination -> the option's description), each converted by
    its description; a flag that is not among them is refused, naming it and ``what`` it does not
    apply to (a backend's and a classifier's flags are checked alike)."""
    wrong = ["--" + k[len(prefix):].replace("_", "-") for k in given if k not in by_dest]
    if wrong:
        raise BadInput(f"{', '.join(wrong)} do{'es' if len(wrong) == 1 else ''} not apply to {what}")
    out: dict[str, Any] = {}
    for k, v in given.items():
        o = by_dest[k]
        try:
            out[o.name] = o.convert(v)
        except ValueError as e:
            raise BadInput(str(e)) from None
    return out


def echo_err(msg: str) -> None:
    click.echo(msg, err=True, file=sys.stderr)


def refusal_classifier_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """``--refusal-classifier`` and ``--partial-as``: how respond-mode answers are read (run,
    classify); each classifier's own options (``--refusal-labels``, ``--refusal-base-url``, ...)
    come from its description (``RegistryCommand(classifier_flags="prefixed")``)."""
    f = click.option("--partial-as", "partial_as", type=click.Choice(["unsafe", "safe"]), default="unsafe",
                     show_default=True,
                     help="Respond mode: count a partial answer as refusing (unsafe) or as answering (safe).")(f)
    f = click.option("--refusal-classifier", "refusal_classifier", default=None, metavar="SPEC",
                     help=refusal_classifier_help())(f)
    return f


def refusal_classifier_help() -> str:
    """The help of ``--refusal-classifier``, from the registry."""
    from ..classify.registry import classifiers

    return ("Respond mode: how answers are classified: "
            + ", ".join(f"'{c.spec_form}' ({c.summary})" for c in classifiers()) + ".")


def classifier_options(spec: str | None, flags: Mapping[str, Any], prefixed: bool = True) -> dict[str, Any]:
    """Keyword options for ``classify.make_classifier`` from the derived classifier flags the
    user gave; a flag the named classifier does not take is refused, naming it."""
    from ..classify import ClassifierError, DEFAULT_CLASSIFIER
    from ..classify.registry import info_for

    given = {k: v for k, v in flags.items() if k.startswith(CLASSIFIER_DEST) and v is not None}
    if not given:
        return {}
    try:
        info, _ = info_for(spec, DEFAULT_CLASSIFIER)
    except ClassifierError as e:
        raise BadInput(str(e)) from None
    by_dest = {_dest(CLASSIFIER_DEST, f): o for o in info.options
               if (f := _classifier_flag(o.cli_flag, prefixed)) is not None}
    return _given_options(given, by_dest, CLASSIFIER_DEST, f"the refusal classifier {spec or DEFAULT_CLASSIFIER!r}")


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

    interrupted: list[int] = []

    async def main() -> T:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        handled: list[signal.Signals] = []

        def first(sig: int) -> None:
            interrupted.append(sig)
            # later signals bypass the event loop, so they work even while it is busy
            for s in handled:
                loop.remove_signal_handler(s)
                signal.signal(s, exit_now)
            handled.clear()
            echo_err(f"\ncasebench: {signal.Signals(sig).name}: stopping after the current step; every "
                     "finished answer is on disk (press Ctrl-C again to exit at once)")
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

    # asyncio.run, but an interrupted run does not wait for worker threads: a model still loading
    # in one (``asyncio.to_thread``) would hold the exit for as long as the load takes (10 s
    # measured); the caller ends the process with ``exit_interrupted``, which does not wait either
    loop = asyncio.new_event_loop()
    try:
        asyncio.set_event_loop(loop)
        return loop.run_until_complete(main())
    except asyncio.CancelledError:
        raise KeyboardInterrupt from None
    finally:
        try:
            pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for t in pending:
                t.cancel()
            if pending:
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            if not interrupted:
                loop.run_until_complete(loop.shutdown_default_executor())
        finally:
            asyncio.set_event_loop(None)
            loop.close()


def exit_interrupted(code: int = 130) -> NoReturn:
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


def run_with_signals(config: "RunConfig", dataset: Any = None) -> "RunSummary":
    """``casebench.arun(config)`` under ``run_under_signals`` (``dataset``: the run's dataset,
    already loaded, so it is not read again)."""
    from ..runs.execute import arun

    return run_under_signals(lambda: arun(config, dataset=dataset))


def label_source_option(f: Callable[..., Any]) -> Callable[..., Any]:
    """``--label-source``: the human labels a scoring command (score, compare, ablate, report)
    scores against; ``scoring_options`` refuses it with ``--paper-compat``."""
    from ..stats.options import LABEL_SOURCE_HELP, LABEL_SOURCES

    return click.option(
        "--label-source", type=click.Choice(LABEL_SOURCES), default="published", show_default=True,
        help=LABEL_SOURCE_HELP,
    )(f)


#: the help of ``--mode`` and ``--remove`` on the scoring commands (``file_kind_options``)
FILE_MODE_HELP = ("The mode of published INPUTS whose file name does not say it (e.g. mine.json; output_binary_mine.json "
                  "says binary); a name that says another mode is refused. A casebench export says its own mode inside "
                  "the file, whatever its name.")
FILE_REMOVE_HELP = ("CI parameters removed in published INPUTS whose file name does not say it, comma-separated "
                    "(e.g. sender,urgency).")


def remove_option(f: Callable[..., Any]) -> Callable[..., Any]:
    """``--remove`` of the scoring commands: what published inputs hold when their name does not say."""
    return click.option("--remove", "remove", default=None, metavar="LIST", help=FILE_REMOVE_HELP)(f)


class ModeChoice(click.Choice):
    """``--mode``: one of the registered modes' names, handed to the command as the ``Mode``
    object itself (the name is looked up once, here; the object travels to the last line)."""

    def __init__(self) -> None:
        from ..modes import mode_names

        super().__init__(mode_names())

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        from ..modes import Mode, get_mode

        if isinstance(value, Mode):
            return value
        return get_mode(super().convert(value, param, ctx))


def file_kind_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """``--mode`` and ``--remove`` of the scoring commands (score, compare, report): what a
    published file holds when its name does not say (``loader.load_predictions``)."""
    f = remove_option(f)
    return click.option("--mode", "mode", type=ModeChoice(), default=None, help=FILE_MODE_HELP)(f)


#: the help of a flag that means the same in every command that takes it: one home, so that
#: ``--help`` says the same of it everywhere (``tests/test_output_lengths.py`` checks; flags that
#: mean different things in different commands are listed there with why)
HELP: dict[str, str] = {
    "--bootstrap": "Bootstrap resamples for the intervals and paired tests (0: none).",
    "--bootstrap-seed": "Seed of the bootstrap resamples.",
    "--labelled-by": "Who gave the labels, said beside every figure that rests on them: only labels people gave "
                     "are called people's (AI readers' and the answers' own writers' never are).",
    "--min-coverage": "Exit with code 3 when fewer cases are answered than this share (an unfinished run counts its "
                      "cases not yet asked as not answered), after printing every figure.",
    "--level": "Confidence level of every interval.",
    "--json": "Print one JSON object instead of tables.",
    "--paper-compat": "Score exactly as the authors' compute_score.py does (missing answers filled, unclipped "
                      "BCE, ...); default: only the cases every input answered.",
    "--limit": "Only the first N cases, in dataset order.",
    "--stratified": "A seeded subset of N cases stratified by category x intent.",
    "--temperature": "Sampling temperature, 0 to 2 (default: 1.0 score, 0 else).",
    "--max-tokens": "Answer length limit (default 256; respond mode 512; the main job's respond run: see "
                    "docs/running.md, 'The main job').",
    "--max-connections": "Requests in flight (API models).",
    "--max-cost": "Stop a run before its total cost (all its sessions) would pass this; in a study, each "
                  "condition's run.",
    "--progress": "Progress bar (default: on a terminal).",
    "--templates": "A template file in the published format (judge, judgescore, judgelogits).",
    "--db": "SQLAlchemy URL: sqlite:///FILE, or postgresql://USER:PASS@HOST:PORT/DB for a team; one study per "
            "database.",
    "--reserve-minutes": "How long an item (a case or an answer) shown to an annotator is held for them.",
    "--sqlite-sync": "SQLite only. full: every label is on disk before the next page (survives a power cut); "
                     "normal: faster, survives a server crash but not a power cut.",
}


def level_option(f: Callable[..., Any]) -> Callable[..., Any]:
    """``--level``: the confidence level of every interval a scoring command prints (and of the
    words that name it)."""
    return click.option("--level", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=0.95,
                        show_default=True, help=HELP["--level"])(f)


def cluster_option(f: Callable[..., Any]) -> Callable[..., Any]:
    """``--cluster``: what the bootstrap of a scoring command (score, compare, ablate, study,
    report) resamples as one unit (``stats.options.CLUSTERINGS``; default and why:
    ``stats.options.DEFAULT_CLUSTER``)."""
    from ..stats.options import CLUSTER_HELP, CLUSTERINGS, DEFAULT_CLUSTER

    return click.option("--cluster", type=click.Choice(CLUSTERINGS), default=DEFAULT_CLUSTER, show_default=True,
                        help=CLUSTER_HELP)(f)


def scoring_options(paper_compat: bool, n_boot: int, seed: int, label_source: str, *, level: float = 0.95,
                    alpha: float = 0.05, min_verdict_mass: float | None = None,
                    cluster: str | None = None, human_draw_seed: int | None = None) -> "ScoringOptions":
    """The scoring options of a scoring command's flags: ``seed`` is ``--bootstrap-seed`` (the
    bootstrap resamples); ``human_draw_seed`` is ``--human-draw-seed`` (the human section's random
    draws of single votes; None: the bootstrap seed, as the old single ``--seed`` seeded both).
    The published script scores against the published labels only, so ``--paper-compat`` with
    ``--label-source votes`` is refused. ``cluster``: ``--cluster`` (None: the default clustering)."""
    from ..stats.options import DEFAULT_CLUSTER, ScoringOptions

    if paper_compat and label_source != "published":
        raise BadInput("--paper-compat uses the published labels; drop --label-source votes")
    try:
        return ScoringOptions(paper_compat=paper_compat, level=level, alpha=alpha, min_verdict_mass=min_verdict_mass,
                              label_source=label_source, n_boot=n_boot, bootstrap_seed=seed,  # type: ignore[arg-type]
                              human_draw_seed=seed if human_draw_seed is None else human_draw_seed,
                              cluster=cluster or DEFAULT_CLUSTER)  # type: ignore[arg-type]
    except ValueError as e:
        raise BadInput(str(e)) from None


def min_verdict_mass_option(f: Callable[..., Any]) -> Callable[..., Any]:
    """``--min-verdict-mass``: below it a prob-mode case counts as missing in default scoring."""
    from ..predictions import DEFAULT_MIN_VERDICT_MASS

    return click.option(
        "--min-verdict-mass", "min_verdict_mass", type=click.FloatRange(0.0, 1.0),
        default=DEFAULT_MIN_VERDICT_MASS, show_default=True,
        help="Prob mode: a case whose verdict words get less first-token probability than this counts as "
             "missing (coverage says so); --paper-compat scores it anyway, as the authors' script did.",
    )(f)


def scored_input_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """The options that say how every command that scores inputs (``score``, ``report``,
    ``leaderboard``) reads and scores them: ``--label-source``, ``--cluster``, ``--level``, the
    file-kind options and ``--min-verdict-mass``, in that order in ``--help``."""
    for opt in (min_verdict_mass_option, file_kind_options, level_option, cluster_option, label_source_option):
        f = opt(f)
    return f


def warn_unreadable_predictions(preds: Any) -> None:
    """One warning on stderr per published input whose predictions could not all be read (a
    null, "maybe"): they count as missing, and the warning names record and value."""
    from ..published import unreadable_warning

    for p in preds:
        w = unreadable_warning(p)
        if w:
            echo_err(f"casebench: warning: {w}")


def warn_low_verdict_mass(scores: Any) -> None:
    """One warning on stderr per input whose median verdict mass is below the threshold."""
    for s in scores:
        w = s.low_mass_warning
        if w:
            echo_err(f"casebench: warning: {w}")


def reference_option(f: Callable[..., Any]) -> Callable[..., Any]:
    """``--reference DIR`` / ``--no-reference``: the authors' published models shown beside the
    inputs as reference rows (default: the outputs ``casebench data fetch`` cached, if any)."""
    f = click.option("--no-reference", is_flag=True,
                     help="Show no published models, even when `casebench data fetch` cached them.")(f)
    return click.option(
        "--reference", "reference", type=click.Path(exists=True, file_okay=False), default=None,
        help="A directory of the authors' published outputs (holding exp/ or safety_* folders), shown as reference "
             "rows, marked and never paired with the inputs; default: the cached ones (casebench data fetch).",
    )(f)


def load_reference_inputs(reference: str | None, no_reference: bool, preds: Sequence[Any], options: Any,
                          dataset: Any = None, *, scores_only: bool = False) -> tuple[list[Any], str | None]:
    """The published models to show beside ``preds`` as scored inputs (``reference_rows``:
    kept on disk, so a later report does not score them again), or with ``scores_only`` their
    scores alone (read back without loading the files), and where they came from (None: none).
    Published models already among the inputs (same model, mode and removals) are not repeated;
    every command shows them on the same cases (``reference_rows.reference_cases``)."""
    from ..sources import cached_outputs
    from ..reference_rows import reference_cases, reference_inputs, reference_scores

    if no_reference:
        return [], None
    root = reference or cached_outputs()
    if root is None:
        return [], None
    rows = reference_scores if scores_only else reference_inputs
    with bad_input_errors():
        refs: list[Any] = list(rows(root, options, cases=reference_cases(preds, options), dataset=dataset,
                                    exclude=preds))
    return refs, str(root)


def echo_input_states(preds: Sequence[Any], to_stderr: bool = False) -> bool:
    """The first lines of a scoring command when any input is unfinished (``input_state``): per
    such input, how much is still to ask and the exact command that resumes it, and that its
    figures are partial; on stdout (before the figures) unless ``to_stderr`` (a format a program
    reads: CSV, JSON, where each row carries its ``state``). True when any input is unfinished."""
    from ..input_state import state_lines

    lines = state_lines([getattr(p, "state", None) for p in preds])
    for line in lines:
        click.echo(line, err=to_stderr)
    if lines and not to_stderr:
        click.echo("")
    return bool(lines)


def min_coverage_option(f: Callable[..., Any]) -> Callable[..., Any]:
    """``--min-coverage``: an input with fewer cases answered than this share exits with code 3
    (``runs.results.EXIT_LOW_COVERAGE``), as ``casebench run`` does."""
    return click.option(
        "--min-coverage", "min_coverage", type=click.FloatRange(0.0, 1.0), default=None,
        help=HELP["--min-coverage"],
    )(f)


def check_min_coverage(scores: Sequence[Any], min_coverage: float | None) -> None:
    """Exit 3 after the figures when an input's coverage is below ``min_coverage``, naming each
    such input, its coverage and, for an unfinished one, that the rest is still to ask."""
    if min_coverage is None:
        return
    from ..runs.results import EXIT_LOW_COVERAGE

    low = [s for s in scores if s.coverage < min_coverage]
    for s in low:
        state = getattr(s, "state", None)
        why = (f"; {state.cases_to_ask} cases still to ask (resume: {state.resume or state.resume_hint})"
               if state is not None and not state.complete else "")
        echo_err(f"casebench: {s.name or s.source}: coverage {100 * s.coverage:.1f}% ({s.answered} of {s.n} cases "
                 f"answered) is below --min-coverage {100 * min_coverage:.0f}%{why}")
    if low:
        sys.exit(EXIT_LOW_COVERAGE)


#: ``--explain``: the method in full where a command prints figures (``score``, ``compare``)
explain_option = click.option(
    "--explain", is_flag=True, default=False,
    help="Also print how each figure is made: the intervals' method, the reader's validation sets, the "
         "correction for the reader's error and why a figure is not corrected, people's intervals.")


# --------------------------------------------------------------------------------------------
# What ``compare``, ``ablate`` and ``study`` share: reading INPUTS, the statistics flags, and
# (``run`` and ``study``) where a query mutation's rewordings come from


def load_inputs(inputs: tuple[str, ...], data: str | None, mode: "Mode | None" = None,
                remove: str | None = None) -> list[Any]:
    """Every INPUT read as predictions (``loader.load_predictions``: run directories, published
    files, inspect logs), against ``data`` when given; a bad input exits 2 naming it, an input
    with unreadable verdicts is warned about."""
    from ..data import load_dataset
    from ..loader import load_predictions
    from ..runs.record import RunError

    with bad_input_errors(RunError):
        dataset = load_dataset(data) if data else None
        preds = [load_predictions(p, dataset=dataset, mode=mode, removed=remove) for p in inputs]
    warn_unreadable_predictions(preds)
    return preds


#: how the statistics of ``compare``, ``ablate`` and ``study`` are made (one set of flags, so the
#: three say the same thing the same way)
STAT_OPTIONS = [
    click.option("--paper-compat", is_flag=True, help=HELP["--paper-compat"]),
    click.option("--json", "as_json", is_flag=True, help=HELP["--json"]),
    click.option("--bootstrap", "n_boot", type=click.IntRange(min=0), default=2000, show_default=True,
                 help=HELP["--bootstrap"]),
    click.option("--bootstrap-seed", "--seed", "bootstrap_seed", type=int, default=0, show_default=True,
                 help=HELP["--bootstrap-seed"]),
    click.option("--level", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=0.95,
                 show_default=True, help=HELP["--level"]),
    click.option("--alpha", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=0.05,
                 show_default=True, help="False discovery rate of the Benjamini-Hochberg adjustment."),
    click.option("--data", type=click.Path(dir_okay=False), default=None,
                 help="The dataset of run directories, if their manifest's path is not reachable; published files "
                      "are checked against it record by record (default: the CASEBench_data.json beside their exp/)."),
    label_source_option,
    cluster_option,
]


def stat_options(f: Any) -> Any:
    """Add ``STAT_OPTIONS`` to a command."""
    for opt in reversed(STAT_OPTIONS):
        f = opt(f)
    return f


def mutator_options(sources_help: str, mutator_help: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``--mutations-from``, ``--mutator`` and ``--mutator-base-url``: where the rewordings of a
    query mutation come from (``run --mutation``, ``study --mutations``), each command with its
    own words for the first two."""
    opts = [
        click.option("--mutations-from", "mutations_from", default=None, metavar="DIR",
                     type=click.Path(exists=True, file_okay=False), help=sources_help),
        click.option("--mutator", "mutator", default=None, metavar="SPEC", help=mutator_help),
        click.option("--mutator-base-url", "mutator_base_url", default=None, metavar="URL", type=URL,
                     help="With --mutator: the mutator's OpenAI-compatible server, if not the provider's default."),
    ]

    def add(f: Callable[..., Any]) -> Callable[..., Any]:
        for opt in reversed(opts):
            f = opt(f)
        return f
    return add
