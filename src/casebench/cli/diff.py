"""``casebench diff A B``: the cases where two inputs disagree, a thin wrapper over
``casebench.stats.diff``."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import click

from ..modes import Mode

from ..present.numbers import fmt_num
from ._common import BadInput, bad_input_errors, echo_input_states, file_kind_options, label_source_option


def _cell(x: Any, digits: int = 3) -> str:
    """A cell of the diff table: blank for nothing, a float with ``digits`` places, else as it is."""
    if x is None:
        return ""
    return fmt_num(x, digits) if isinstance(x, float) else str(x)


@click.command("diff")
@click.argument("a", type=click.Path(exists=True))
@click.argument("b", type=click.Path(exists=True))
@click.option("--sort", "sort", type=click.Choice(["lean", "index", "category"]), default="lean", show_default=True,
              help="Order of the cases: how far people lean (clearest cases first), case index, or category.")
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table", show_default=True)
@click.option("--hide-text", is_flag=True, help="The case index only, without the query (for sharing the list "
                                                "without the data).")
@click.option("--data", type=click.Path(dir_okay=False), default=None,
              help="The dataset of run directories, if their manifest's path is not reachable.")
@label_source_option
@file_kind_options
def diff_cmd(a: str, b: str, sort: str, fmt: str, hide_text: bool, data: str | None, label_source: str,
             mode: "Mode | None", remove: str | None) -> None:
    """The cases where A and B (run directories, published exp/ files or inspect logs over the
    same cases) disagree (two inspect logs of another task: the samples where a scorer's values
    differ): their verdicts (safe / unsafe), or for two respond runs what the chatbot did
    (comply / partial / refuse), with people's share of safe votes and how far people lean
    (|share - 0.5|). Cases only one of them answered are counted, not listed."""
    from ..data import load_dataset
    from ..inspect_log import InspectLogError, all_casebench, is_inspect_log
    from ..loader import load_predictions
    from ..runs.record import RunError
    from ..stats.case_sets import CompareError
    from ..stats.diff import diff_inputs, diff_table_rows

    with bad_input_errors(InspectLogError):
        per_sample = is_inspect_log(a) and is_inspect_log(b) and not all_casebench([a, b])
    if per_sample:
        _diff_logs(a, b, fmt)
        return
    with bad_input_errors(RunError):
        dataset = load_dataset(data) if data else None
        preds = [load_predictions(p, dataset=dataset, mode=mode, removed=remove) for p in (a, b)]
    echo_input_states(preds, to_stderr=fmt != "table")
    with bad_input_errors(CompareError):
        res = diff_inputs(preds[0], preds[1], sort=sort, show_text=not hide_text, label_source=label_source)
    if fmt == "json":
        click.echo(json.dumps(res.to_dict(), indent=2, ensure_ascii=False))
        return
    head, rows = diff_table_rows(res)
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(head)
        for r in rows:
            w.writerow(["" if x is None else x for x in r])
        click.echo(buf.getvalue(), nl=False)
        return
    click.echo(f"A  {res.a['name']}  {res.a['source']}")
    click.echo(f"B  {res.b['name']}  {res.b['source']}")
    click.echo(f"{res.disagree} of the {res.both_answered} cases both answered disagree ({res.what})"
               + (f"; {res.only_one_answered} answered by one only (not listed)" if res.only_one_answered else "")
               + f"; sorted by {sort}")
    flat = res.flat_vs_partial
    if flat:
        by = {w: sum(1 for r in flat if r.flat_vs_partial == w) for w in ("A", "B")}
        click.echo(f"{len(flat)} where one refuses flat what the other partially helps with (A refuses flat: "
                   f"{by['A']}, B: {by['B']}; column flat_vs_partial)")
    if not rows:
        return
    if not hide_text:
        head = head[:-1] + ["query"]
    cells = [[_cell(x) for x in r] for r in rows]
    if not hide_text:
        cells = [c[:-1] + [c[-1][:70] + ("…" if len(c[-1]) > 70 else "")] for c in cells]
    widths = [max(len(h), *(len(c[k]) for c in cells)) for k, h in enumerate(head)]
    click.echo("  ".join(h.ljust(wd) for h, wd in zip(head, widths)).rstrip())
    for c in cells:
        click.echo("  ".join(x.ljust(wd) for x, wd in zip(c, widths)).rstrip())
    click.echo("people_safe_share: the share of safe votes; lean: |share - 0.5|; agrees: the input whose verdict "
               f"matches people's label ({res.label_source} labels)")


def _diff_logs(a: str, b: str, fmt: str) -> None:
    """Two inspect logs of any task: the samples where a scorer's values differ."""
    from ..inspect_log import InspectLogError, load_sample_scores
    from ..present.sample_tables import format_sample_diff
    from ..stats.sample_compare import ScoredSamples, disagreements

    with bad_input_errors(InspectLogError):
        la, lb = load_sample_scores(a), load_sample_scores(b)
    rows = disagreements(*(ScoredSamples(x.name, x.source, x.values, x.metadata) for x in (la, lb)))
    shared = len({s for k in set(la.values) & set(lb.values) for s in la.values[k] if s in lb.values[k]})
    if fmt == "json":
        click.echo(json.dumps({"a": {"name": la.name, "source": la.source}, "b": {"name": lb.name, "source": lb.source},
                               "shared_samples": shared, "disagreements": rows}, indent=2, ensure_ascii=False))
    elif fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["scorer", "sample", "a", "b"])
        for r in rows:
            w.writerow([r["scorer"], r["sample"], r["a"], r["b"]])
        click.echo(buf.getvalue(), nl=False)
    else:
        click.echo(format_sample_diff(rows, f"{la.name}  {la.source}", f"{lb.name}  {lb.source}", shared), nl=False)


__all__ = ["diff_cmd", "BadInput"]
