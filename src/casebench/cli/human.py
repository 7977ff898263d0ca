"""``casebench human``: statistics of the human votes, and power analysis.

Two forms, as the issue writes them:

    casebench human DATA [--json] [--alpha A] [--label-source published|votes]
    casebench human power --p1 P --p2 P [--alpha 0.05] [--power 0.8] [--n N]

The first is the ``stats`` subcommand invoked without its name: when the first argument is not
a subcommand (nor a help option), ``stats`` is put in front of the arguments. A data file that
is literally named ``power`` or ``stats`` must be written ``./power``.
"""

from __future__ import annotations

import json

import click

from ..stats.options import LABEL_SOURCES
from ._common import HELP, BadInput, bad_input_errors, dataset_argument, echo_err


class _DefaultStatsGroup(click.Group):
    """A group whose default subcommand is ``stats`` (so ``human DATA`` works)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args or (args[0] not in self.commands and args[0] not in ctx.help_option_names):
            args = ["stats", *args]  # `casebench human` alone: the dataset of $CASEBENCH_DATA
        return super().parse_args(ctx, args)


@click.group(
    "human",
    cls=_DefaultStatsGroup,
    context_settings={"help_option_names": ["-h", "--help"]},
)
def human_group() -> None:
    """Statistics of the human votes (context effect, agreement, power).

    \b
      casebench human [DATA] [--json] [--alpha A] [--label-source published|votes]
      casebench human power --p1 P --p2 P [--alpha 0.05] [--power 0.8] [--n N]
    """


@human_group.command("stats")
@click.argument("data", type=click.Path(dir_okay=False), required=False)
@click.option("--json", "as_json", is_flag=True, help=HELP["--json"])
@click.option("--alpha", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=0.05,
              show_default=True, help="Significance level of the Benjamini-Hochberg decisions (over the queries, over the categories).")
@click.option("--label-source", type=click.Choice(LABEL_SOURCES), default="published",
              show_default=True,
              help="Human label: the published safe_rate rule, or the votes-only majority (tie = unsafe).")
@click.option("--draws", type=click.IntRange(min=1), default=1000, show_default=True,
              help="Random draws per case and k for majority-label stability.")
@click.option("--human-draw-seed", "--seed", "human_draw_seed", type=int, default=0, show_default=True,
              help="Seed of the stability draws of single votes (--seed: the same, the older name).")
def stats_cmd(data: str | None, as_json: bool, alpha: float, label_source: str, draws: int,
              human_draw_seed: int) -> None:
    """Context effect, category differences, agreement, majorities, stability, power of DATA.

    DATA is a dataset file (JSON list or JSONL); the votes in its 'scores' are used as given.
    Default: $CASEBENCH_DATA, else the user cache (casebench data fetch).
    """
    from ..data import load_dataset
    from ..stats.human import HumanStatsError, human_stats

    data = dataset_argument(data)
    with bad_input_errors(HumanStatsError):
        ds = load_dataset(data)
        result = human_stats(
            ds, alpha=alpha, draws=draws, seed=human_draw_seed, label_source=label_source  # type: ignore[arg-type]
        )
    if all(c.extra for c in ds):
        echo_err(
            f"casebench: note: {data} looks like a published output file (every record carries a model's "
            "prediction); there 'scores' ends with the intent vote. Human statistics are meant for the "
            "dataset file."
        )
    result["dataset"]["path"] = ds.path
    result["dataset"]["sha256"] = ds.sha256
    if as_json:
        click.echo(json.dumps(result, indent=2, ensure_ascii=False))
    else:
        from ..present.human import format_stats

        click.echo(format_stats(result))


@human_group.command("power")
@click.option("--p1", type=click.FloatRange(0, 1), required=True, help="Safe share in one context kind.")
@click.option("--p2", type=click.FloatRange(0, 1), required=True, help="Safe share in the other.")
@click.option("--alpha", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=0.05,
              show_default=True)
@click.option("--power", "power_", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=0.8,
              show_default=True, help="Target power (ignored with --n).")
@click.option("--n", type=click.IntRange(min=1), default=None,
              help="Annotators per context: print the power they reach.")
@click.option("--json", "as_json", is_flag=True, help=HELP["--json"])
def power_cmd(p1: float, p2: float, alpha: float, power_: float, n: int | None, as_json: bool) -> None:
    """Annotators per context needed to detect P1 vs P2 (two proportions, Cohen's h), or the
    power N annotators per context reach."""
    from ..stats.human import power_analysis

    try:
        result = power_analysis(p1, p2, alpha=alpha, power=power_, n=n)
    except ValueError as e:
        raise BadInput(str(e)) from None
    if as_json:
        click.echo(json.dumps(result, indent=2))
        return
    from ..present.human import format_power

    click.echo(format_power(result, p1, p2, alpha, power_, n))
