"""``casebench data info|validate|fetch`` and ``casebench prompts``."""

from __future__ import annotations

import json
import sys

import click

from ..modes import mode_names
from ..prompts import CONTEXT_PLACEMENTS
from ._common import BadInput, bad_input_errors, dataset_argument


@click.group("data")
def data_group() -> None:
    """Inspect, validate and fetch CASE-Bench datasets (JSON list or JSONL)."""


@data_group.command("validate")
@click.argument("path", type=click.Path(dir_okay=False), required=False)
def validate_cmd(path: str | None) -> None:
    """Check every record of PATH; list every problem (file, record, field), duplicated records (same
    query and context) included; exit 2 if any. PATH defaults to $CASEBENCH_DATA, else the user cache."""
    from ..data import DatasetError, duplicate_problems, load_dataset

    path = dataset_argument(path, "PATH")
    with bad_input_errors():
        ds = load_dataset(path, allow_duplicates=True)
        dups = duplicate_problems(ds.cases)
        if dups:
            raise DatasetError(path, dups)
    click.echo(f"{path}: {len(ds)} records, all valid, no duplicates (sha256 {ds.sha256})")
    if not ds.has_human_label:
        click.echo("note: this dataset has no human votes ('scores', 'safe_rate'): it can be prompted, run and "
                   "annotated (casebench annotate serve), not scored until votes are collected")


@data_group.command("info")
@click.argument("path", type=click.Path(dir_okay=False), required=False)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def info_cmd(path: str | None, as_json: bool) -> None:
    """Counts by category, intended context safety and human label; CI keys present. PATH defaults
    to $CASEBENCH_DATA, else the user cache."""
    from ..data import dataset_info, load_dataset

    path = dataset_argument(path, "PATH")
    with bad_input_errors():
        ds = load_dataset(path)
    info = dataset_info(ds)
    if as_json:
        click.echo(json.dumps(info, indent=2))
        return
    click.echo(f"{info['path']}  sha256 {info['sha256']}")
    labels = (f"human label safe {info['human_safe']}, unsafe {info['human_unsafe']} "
              "(after the child-related-crimes override)" if info["has_human_label"] else "no human votes yet")
    click.echo(f"{info['cases']} cases: intended safe {info['intended_safe']}, intended unsafe "
               f"{info['intended_unsafe']}; {labels}")
    click.echo(f"votes per case: {', '.join(map(str, info['votes_per_case']))}")
    width = max(len(c) for c in info["categories"])
    click.echo(f"\n{'category':<{width}}  cases  intended_safe  human_safe")
    for cat, row in info["categories"].items():
        human = row["human_safe"] if info["has_human_label"] else "-"
        click.echo(f"{cat:<{width}}  {row['cases']:>5}  {row['intended_safe']:>13}  {human:>10}")
    click.echo("\nCI keys present (cases):")
    for key, n in info["ci_keys"].items():
        click.echo(f"  {key:<45} {n}")


@data_group.command("fetch")
@click.option("--url", default=None,
              help="Download from this URL instead of the pinned published file (file:///path/CASEBench_data.json "
                   "copies a local file into the cache, SHA-256 checked).")
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None,
              help="Where to save it (default: the user cache, where other commands look).")
@click.option("--outputs/--no-outputs", default=True, show_default=True,
              help="Also fetch the authors' published model outputs at the same commit (each SHA-256 checked, "
                   "into the user cache), shown as reference rows by score and report.")
@click.option("--outputs-url", default=None, metavar="BASE",
              help="The folder (URL) that holds the release's exp/ folder, e.g. file:///path/to/CASEBench/ for a "
                   "local clone (a URL ending in exp/ is read as its parent); default: the pinned commit on "
                   "GitHub. Checksums still apply.")
def fetch_cmd(url: str | None, output: str | None, outputs: bool, outputs_url: str | None) -> None:
    """Download the published dataset (pinned commit, SHA-256 checked) into the user cache, and
    the authors' published outputs beside it. Files already there with the right SHA-256 are
    kept and not downloaded again, so a complete cache succeeds offline (and says so)."""
    from pathlib import Path

    from ..sources import (
        PINNED_SHA256, PUBLISHED_OUTPUTS, FetchError, cached_dataset_path, cached_outputs_dir, fetch_dataset,
        fetch_outputs, has_checksum, outputs_to_fetch,
    )

    if outputs_url and outputs_url.rstrip("/").endswith("/exp"):
        outputs_url = outputs_url.rstrip("/")[: -len("exp")]
    target = Path(output) if output else cached_dataset_path()
    had_data = has_checksum(target, PINNED_SHA256)
    try:
        path = fetch_dataset(url=url, dest=output)
        click.echo(str(path))
        if had_data:  # stderr: stdout stays the paths, for scripts
            click.echo("the dataset was already there with its SHA-256 checked: nothing downloaded", err=True)
        if outputs:
            todo = outputs_to_fetch()
            root = fetch_outputs(base_url=outputs_url)
            click.echo(str(root))
            if todo:
                click.echo(f"published outputs: fetched {len(todo)} of {len(PUBLISHED_OUTPUTS)} files "
                           f"(SHA-256 checked) into {cached_outputs_dir()}", err=True)
            else:
                click.echo(f"published outputs: all {len(PUBLISHED_OUTPUTS)} files already there with their "
                           "SHA-256 checked: nothing downloaded", err=True)
    except FetchError as e:
        raise click.ClickException(str(e) + ("" if "checksum" in str(e) else _offline_help())) from None


def _offline_help() -> str:
    """What to do instead when the download cannot reach the network."""
    from ..sources import DATA_ENV, DATA_FILE_NAME, cached_dataset_path, cached_outputs_dir

    return (f"\nNo network? Instead:\n"
            f"  - use a copy you have: casebench run --data /path/to/{DATA_FILE_NAME} (or export {DATA_ENV}=/path/to/"
            f"{DATA_FILE_NAME}); every command looks there first\n"
            f"  - or copy it into the cache, SHA-256 checked: casebench data fetch --url file:///path/to/{DATA_FILE_NAME} "
            f"--outputs-url file:///path/to/CASEBench/ (the folder holding exp/; or --no-outputs)\n"
            f"  - the cache folders: {cached_dataset_path()} (the dataset) and {cached_outputs_dir()} (the published "
            f"outputs, as exp/...)\n"
            f"  - without any of these, `casebench run` runs on the small demo set shipped with casebench and says so")


@click.command("prompts")
@click.argument("data", type=click.Path(dir_okay=False), required=False)
@click.option("--mode", type=click.Choice(mode_names()), required=True)
@click.option("--context-as", "context_as", type=click.Choice(CONTEXT_PLACEMENTS), default=None,
              help="Context inside the judge prompt (user), as the operator's system prompt (system), as "
                   "the conversation before the query (turns); respond mode also concat, reveal-early and "
                   "reveal-late (the user turns of a live conversation); default: the mode's.")
@click.option("--templates", type=click.Path(dir_okay=False), default=None,
              help="A template file in the published format (judge, judgescore, judgelogits).")
@click.option("--remove", default="", help="CI parameters to drop, comma-separated (e.g. sender,urgency).")
@click.option("--system", default=None,
              help="The system prompt of `casebench run --system`: shown where a run sends it, first in the system "
                   "message, before the context when the context is placed there (--context-as system, respond "
                   "mode's default).")
@click.option("--case", "case_indices", type=click.IntRange(min=0), multiple=True, metavar="INDEX",
              help="Only this case (repeatable).")
@click.option("--mutation", default=None, metavar="NAME",
              help="Every query in this SORRY-Bench rewording, as `casebench run --mutation NAME` asks it.")
@click.option("--mutations-from", "mutations_from", default=None, type=click.Path(exists=True, file_okay=False),
              metavar="DIR", help="Your copy of SORRY-Bench's files, where --mutation's rewordings come from.")
def prompts_cmd(data: str | None, mode: str, context_as: str | None, templates: str | None, remove: str,
                system: str | None = None, case_indices: tuple[int, ...] = (), mutation: str | None = None,
                mutations_from: str | None = None) -> None:
    """Print the exact messages a run sends for every case, as JSON lines: {"index", "messages":
    [system?, (user, assistant)*, user], "prompt"}. Every mode and placement (--mode,
    --context-as), --system, --remove and --mutation as `casebench run` takes them.

    DATA defaults to $CASEBENCH_DATA, the user cache, then the demo set (the command says which).
    "prompt" is the last user message, as in earlier versions; with --context-as turns the
    messages before it are the context as the conversation before the query.
    """
    from ..data import load_dataset, validate_parameter_names
    from ..modes import get_mode
    from ..prompts import BUILTIN_TEMPLATES, load_templates
    from ..sources import FetchError

    from ..prompts import CHATBOT_PLACEMENTS, REVEAL_PLACEMENTS, render_reveal

    m = get_mode(mode)
    if context_as in CHATBOT_PLACEMENTS and not m.reads_behaviour:
        raise BadInput(f"--context-as {context_as} is a chatbot's conversation: use it with --mode respond")
    with bad_input_errors(FetchError):
        names = validate_parameter_names(remove)
        tpl = load_templates(templates) if templates else BUILTIN_TEMPLATES
        data = dataset_argument(data, demo=True)
        ds = load_dataset(data)
        if case_indices and max(case_indices) >= len(ds):
            raise BadInput(f"--case {max(case_indices)}: the dataset has cases 0..{len(ds) - 1}")
        texts = None
        if mutation is not None or mutations_from is not None:
            from ..mutations import MutationError, mutated_queries

            if mutation is None:
                raise BadInput("--mutations-from goes with --mutation NAME")
            with bad_input_errors(MutationError):
                texts = mutated_queries(mutation, list(ds), mutations_from).texts
    out = sys.stdout
    for case in ([ds[i] for i in sorted(set(case_indices))] if case_indices else ds):
        asked = case.ablated(names)
        if texts is not None:  # the query reworded, the context untouched (as a run asks it)
            from dataclasses import replace

            asked = replace(asked, query=texts[case.index])
        if context_as in REVEAL_PLACEMENTS:  # a live conversation: the user turns; the model writes the rest
            turns = render_reveal(asked.context, asked.query, context_as)
            out.write(json.dumps({"index": case.index, "system": system, "user_turns": [t.text for t in turns],
                                  "holds": [t.holds for t in turns], "prompt": turns[-1].text}) + "\n")
            continue
        chat = m.conversation(asked, tpl, context_as).with_system(system)
        messages = ([{"role": "system", "content": chat.system}] if chat.system is not None else []) + [
            msg for msg in chat.messages() if msg["role"] != "system"]
        out.write(json.dumps({"index": case.index, "messages": messages, "prompt": chat.prompt}) + "\n")
