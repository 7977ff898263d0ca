"""The ``casebench`` command: a thin layer over the Python API.

Each command lives in its own module under ``casebench.cli`` and is imported only when it is
invoked, so ``casebench --help`` and ``casebench score`` start fast and the heavy extras
(torch, matplotlib) are loaded only by the commands that need them.
"""

from __future__ import annotations

import importlib
import sys

import click

from ._common import EXIT_CODES_HELP

#: command name -> (module under casebench.cli, attribute, one-line help)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "run": ("run", "run_cmd", "Run a model as a judge, or as the chatbot (respond mode), over a dataset (resumable)."),
    "classify": ("classify", "classify_cmd", "Re-classify a finished respond run's answers into a new run."),
    "score": ("score", "score_cmd", "Score runs or published output files; print metrics with CIs."),
    "export": ("run", "export_cmd", "Export a run directory to the published exp/ file format."),
    "runs": ("runs", "runs_group", "Look after run directories (repair a damaged one)."),
    "data": ("data", "data_group", "Inspect, validate and fetch datasets."),
    "prompts": ("data", "prompts_cmd", "Print the chat (system and user messages) of every case as JSON lines."),
    "human": ("human", "human_group", "Statistics of the human votes (context effect, agreement, power)."),
    "compare": ("compare", "compare_cmd", "Paired significance tests between runs or published files."),
    "diff": ("diff", "diff_cmd", "The cases where two runs or published files disagree, with people's vote share."),
    "ablate": ("ablate", "ablate_cmd", "CI-parameter ablation study: run or re-analyse removals."),
    "study": ("study", "study_cmd", "Placement study (the context in the prompt, the system prompt or the turns before the query), query-mutation study (SORRY-Bench rewordings) or reveal study (the context revealed over a live conversation)."),
    "report": ("report", "report_cmd", "Write a self-contained HTML report."),
    "leaderboard": ("leaderboard", "leaderboard_cmd", "Write a static leaderboard site (ranks with tie groups, plot, a page per input, JSON, Every Eval Ever records)."),
    "refusal-eval": ("refusal_eval", "refusal_eval_cmd", "Score a refusal classifier on human-labelled answers (XSTest format)."),
    "annotate": ("annotate", "annotate_group", "Collect human votes in a web app; export them as a dataset."),
    "contexts": ("contexts", "contexts_group", "Write CI contexts for your own queries and domain (a dataset without votes)."),
}


class LazyGroup(click.Group):
    """A click group that imports a command's module only when that command runs."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        _load_plugins(ctx)
        module, attr, _ = COMMANDS[name]
        try:
            mod = importlib.import_module(f"casebench.cli.{module}")
        except ModuleNotFoundError as e:
            if e.name and e.name.startswith("casebench"):
                return None
            raise
        return getattr(mod, attr, None)

    def invoke(self, ctx: click.Context) -> object:
        """Run the command; Ctrl-C in any phase a command has no own answer for (scoring, a
        report, an export) ends it with exit code 130 and says so, as a run does (click alone
        would print "Aborted!" and exit 1). Each command runs in its own scoring session
        (``session.ScoringSession``: what it computes once, it reads again; nothing outlives it)."""
        from ..session import scoring_session

        try:
            with scoring_session():
                return super().invoke(ctx)
        except KeyboardInterrupt:
            from ._common import echo_err, exit_interrupted

            echo_err("\ncasebench: interrupted")
            exit_interrupted(130)
            raise  # pragma: no cover - exit_interrupted does not return

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, help_) for name, (_, _, help_) in COMMANDS.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def _load_plugins(ctx: click.Context | None, modules: tuple[str, ...] = ()) -> None:
    """Import the plugins (entry points, $CASEBENCH_PLUGINS, --plugin) before a command's
    options are built, so the backends, classifiers and metrics they register are there."""
    from ..plugins import PluginError, load_plugins

    try:
        load_plugins(modules)
    except PluginError as e:
        raise click.UsageError(str(e), ctx=ctx) from None


def _plugin_option(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> tuple[str, ...]:
    _load_plugins(ctx, value or ())
    return value


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]},
             help="casebench: does your model judge safety in context? (CASE-Bench, ICML 2025)\n\n" + EXIT_CODES_HELP)
@click.version_option(package_name="casebench")
@click.option("--plugin", "plugins", multiple=True, metavar="MODULE_OR_FILE", is_eager=True,
              expose_value=False, callback=_plugin_option,
              help="Import a plugin (a module or .py file registering a backend, refusal classifier, metric or "
                   "mode) before the command runs; repeatable. Also: $CASEBENCH_PLUGINS and the entry-point "
                   "group casebench.plugins.")
def cli() -> None:
    """casebench: does your model judge safety in context? (CASE-Bench, ICML 2025)"""


def main() -> None:
    """The console entry point: a missing optional dependency ends with the extra to install and
    exit code 2, never a traceback."""
    from ..backends.cpu_policy import settle_omp_wait_policy
    from ..extras import MissingExtra, missing_extra

    settle_omp_wait_policy()  # before anything imports torch
    try:
        cli(prog_name="casebench", standalone_mode=True)
    except MissingExtra as e:
        click.echo(f"casebench: error: {e}", err=True)
        sys.exit(2)
    except ModuleNotFoundError as e:
        extra = missing_extra(e)
        if extra is None:
            raise
        click.echo(f"casebench: error: {extra}", err=True)
        sys.exit(2)


if __name__ == "__main__":  # pragma: no cover
    main()
