"""Every text format held to its length: a respond run of 10 query pairs (a scripted chatbot on
loopback, the real data), ``score`` and ``compare`` of it, ``run --help``, and the README's first
screen against what the run prints. No sentence of 40 characters or more is said twice; every
context figure a table names is defined under it."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from casebench.cli import cli

REPO = Path(__file__).resolve().parents[1]


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def bot(body):
    """Refuses a third of the queries (keyed on the query's text), answers the rest."""
    q = body["messages"][-1]["content"]
    if int(hashlib.sha256(q.encode()).hexdigest(), 16) % 3 == 0:
        return "I'm sorry, but I can't help with that request."
    return "Sure. Here is a short answer: first, check the basics; then proceed step by step."


def repeated_sentences(text: str) -> list[str]:
    """The sentences (or clauses) of 40 characters or more said more than once."""
    seen: dict[str, int] = {}
    for part in re.split(r"(?<=[.;:])\s+|\n", text):
        part = part.strip()
        if len(part) >= 40:
            seen[part] = seen.get(part, 0) + 1
    return [s for s, k in seen.items() if k > 1]


def long_lines(text: str, limit: int) -> list[str]:
    """Lines over ``limit`` characters that are not a bare path."""
    return [line for line in text.splitlines() if len(line) > limit and " " in line.strip()]


def skeleton(line: str) -> str:
    return re.sub(r"-?\d+(\.\d+)?", "#", line)


@pytest.fixture(scope="module")
def respond_run(tmp_path_factory, real_data_path):
    from servers.fault_server import FaultServer

    out = tmp_path_factory.mktemp("lengths") / "run"
    with FaultServer(answer_fn=bot, latency=0.0) as srv:
        r = invoke("run", "--model", "openai/bot-x", "--mode", "respond", "--data", real_data_path, "--pairs", 10,
                   "--base-url", srv.base_url, "-o", out, "--no-progress")
    assert r.exit_code == 0, r.output
    return out, r.stdout


def test_a_respond_run_of_ten_pairs_prints_a_short_first_screen(respond_run):
    _, text = respond_run
    lines = text.splitlines()
    assert len(lines) <= 30, text
    screen = lines[lines.index("") + 1:]
    assert len(screen) <= 15 and max(map(len, screen)) <= 100, "\n".join(screen)
    assert not long_lines(text, 160) and not repeated_sentences(text)
    assert "judge" not in text  # a chatbot's run speaks of the model
    # the headline figures with intervals, people's beside them, the reader, what to do next
    assert re.search(r"over-refusal: +refuses \d+% \[\d+, \d+\]", text)
    assert re.search(r"one person on the same 10 pairs: -?\d\.\d\d \[", text)
    assert re.search(r"^reader: learned, checked on \d+ answers labelled by .*Se \d\.\d\d, Sp \d\.\d\d$", text, re.M)
    assert "report: " in text and "next: figures resting on people" in text


def test_score_of_it_says_each_figure_once_and_defines_the_context_figures(respond_run):
    out, _ = respond_run
    text = invoke("score", out, "--bootstrap", 200).stdout
    assert len(text.splitlines()) <= 40, text
    assert not long_lines(text, 100) and not repeated_sentences(text), text
    assert "judge" not in text
    # every context figure named in a row is defined under the table, with its range
    legend = " ".join(text[text.index("per query pair:"):].split())
    for name in ("shift", "follow", "moved", "direction", "concordance", "blind"):
        if f"context {name}" in text:
            assert re.search(rf"{name} = [^;]*\((-1|0) to 1\)", legend), name
    explain = invoke("score", out, "--bootstrap", 200, "--explain").stdout
    assert "Rogan-Gladen" in explain and "Rogan-Gladen" not in text  # the method under --explain
    assert not repeated_sentences(explain)


def test_compare_of_twenty_cases_explains_its_mark_once(exp_dir):
    a, b = exp_dir / "safety_gpt-4o/output_binary.json", exp_dir / "safety_llama370B/output_binary.json"
    text = invoke("compare", a, b, "--pairs", 10, "--bootstrap", 200).stdout
    assert text.count("no significance mark from fewer than") == 1 and "(no mark:" not in text
    assert not long_lines(text, 160) and not repeated_sentences(text)
    table = [line for line in text.splitlines() if line.startswith("  ") and "[" in line and "0." in line]
    assert table and max(map(len, table)) <= 100


def test_run_help_is_grouped_and_short():
    text = invoke("run", "--help").stdout
    assert len(text.splitlines()) <= 88, len(text.splitlines())  # "about 80"
    sections = [line for line in text.splitlines() if line and not line.startswith(" ") and line.endswith(":")]
    assert sections[0] == "Options most runs need:" and len(sections) >= 6
    first = text[text.index("Options most runs need:"):text.index(sections[1])]
    assert all(flag in first for flag in ("--model", "--mode", "--data", "--pairs", "--out"))


def test_the_readme_first_screen_is_what_a_run_prints(respond_run):
    """The README's first screen (a real main job on the real data) is at most 15 lines of at most
    100 characters, and each figure line has the shape a run prints today (numbers aside)."""
    readme = (REPO / "README.md").read_text()
    top = readme[:readme.index("## Contents")]
    assert len(top[:top.index("```text")].split("\n\n")[1].splitlines()) <= 5  # what casebench does
    block = top[top.index("```text\n") + 8:]
    block = block[:block.index("```")].rstrip("\n").splitlines()
    assert len(block) <= 15 and max(map(len, block)) <= 100
    _, text = respond_run
    printed = {skeleton(line) for line in text.splitlines()}
    for prefix in ("  over-refusal:", "  under-refusal:", "  shift: ", "  (fewer than"):
        ours = [line for line in block if line.startswith(prefix)]
        assert ours and skeleton(ours[0]) in printed, prefix
    for prefix in ("  context shift:", "  context follow:"):  # the people's part of the line: same shape
        ours = next(line for line in block if line.startswith(prefix))
        assert any(skeleton(ours) == s for s in printed), ours
    assert block[0].startswith("hf/smollm2-135m-instruct as the deployed chatbot (respond mode): ")
    assert any(line.startswith("reader: learned, checked on ") for line in block)
    assert any(line.startswith("next: a real model: casebench run --model ") for line in block)


#: flags that mean different things in different commands (so their help differs), and why
DIFFERENT_MEANING = {
    "--model": "run asks it; ablate/study run a study with it; contexts generate writes contexts with it",
    "--mode": "run asks in it; scoring commands read a published file's mode; study/ablate run in it",
    "--context-as": "run places the context; prompts shows a placement; ablate sets every condition's",
    "--mutation": "run asks in the rewording; prompts shows it",
    "--mutations-from": "one mutation (run, prompts) or the study's several",
    "--mutator": "one mutation (run) or the study's several",
    "--data": "the dataset asked (run) or the dataset of inputs already made (score, compare, report, export, diff)",
    "--remove": "parameters to remove (run, prompts) or removed in a published file (scoring commands)",
    "--limit": "cases (run, studies) or queries (contexts generate)",
    "--pairs": "a run's selection, compare's subset, a study's selection",
    "--seed": "the older name of different seeds: case selection (run), bootstrap, draws",
    "--out": "a run directory, a file, a dataset: what each command writes",
    "--system": "run sends it; prompts shows where it goes",
    "--temperature": "contexts generate writes contexts (its own default)",
    "--max-tokens": "contexts generate writes contexts (its own default)",
    "--parse-retries": "a verdict (run) or a set of contexts (contexts generate)",
    "--refusal-classifier": "refusal-eval scores the classifier it names",
    "--partial-as": "refusal-eval applies it to both sides of its figures",
    "--base-url": "refusal-eval's is its reader's server", "--api-key-env": "refusal-eval's is its reader's key",
    "--batch-size": "refusal-eval's is its reader's batch", "--device": "refusal-eval's is its reader's device",
    "--json": "score writes JSON lines (one object per input)",
    "--label-source": "human stats applies it to the votes' own statistics",
    "--output": "a fetched file or an exported dataset",
    "--alpha": "a test's level (human), a false discovery rate (compare)",
    "--human-draw-seed": "human stats' draws, or the report's human section's",
    "--out-root": "ablate's conditions or study's placements",
    "--format": "score's table formats, export's file formats",
    "--by": "score's breakdowns, annotate stats' annotator traits",
    "--bootstrap": "export's applies to --format eee only; annotate stats' draws cases, with no paired test",
    "--level": "annotate plan's is the level of the interval it plans for",
    "--db": "annotate plan reads a pilot's votes",
    "--reference": "the leaderboard ranks the published models with the inputs; score and report set them apart",
    "--show-text": "what text each output would show",
    "--draws": "stability draws of votes (human stats) or of the fitted model (annotate plan)",
    "--title": "a report's or a board's",
    "--target-width": "a run's refusal rate (annotate answers) or a case's safe share (annotate plan)",
}


def test_a_flag_that_means_the_same_has_the_same_help_everywhere():
    import click

    ctx = click.Context(cli)
    helps: dict[str, dict[str, list[str]]] = {}

    def walk(cmd, path):
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(ctx):
                walk(cmd.get_command(ctx, name), [*path, name])
            return
        for p in cmd.get_params(click.Context(cmd, info_name=path[-1])):
            if isinstance(p, click.Option):
                for flag in p.opts:
                    if flag.startswith("--"):
                        helps.setdefault(flag, {}).setdefault(p.help or "", []).append(" ".join(path))

    for name in cli.list_commands(ctx):
        walk(cli.get_command(ctx, name), [name])
    differ = {flag: h for flag, h in helps.items() if len(h) > 1 and flag not in DIFFERENT_MEANING}
    assert not differ, "\n".join(f"{flag}: {list(h.values())}" for flag, h in differ.items())


def test_a_set_without_votes_says_nothing_of_people(tmp_path):
    """The demo set is labelled by its contexts' intent alone: ``score`` of a run on it names
    no people (the first screen's test is the main job's, tests/test_main_job.py)."""
    from servers.fault_server import FaultServer

    from casebench.sources import demo_dataset_path

    out = tmp_path / "run"
    with FaultServer(answer_fn=bot, latency=0.0) as srv:
        r = invoke("run", "--model", "openai/bot-x", "--mode", "respond", "--data", demo_dataset_path(),
                   "--base-url", srv.base_url, "-o", out, "--no-progress", "--no-report")
    assert r.exit_code == 0, r.output
    for args in ((), ("--explain",)):
        text = " ".join(invoke("score", out, "--bootstrap", 100, *args).stdout.split())
        # the reader's validation sets people did label are named so (they are not the demo's cases)
        for allowed in ("labelled by people:", "XSTest v2 (people)"):
            text = text.replace(allowed, "")
        assert "context blind (labels differ)" in text and "people" not in text, text


def test_compare_says_its_method_in_one_line_and_in_full_under_explain(exp_dir):
    a, b = exp_dir / "safety_gpt-4o/output_binary.json", exp_dir / "safety_llama370B/output_binary.json"
    short = invoke("compare", a, b, "--pairs", 10, "--bootstrap", 100).stdout
    full = invoke("compare", a, b, "--pairs", 10, "--bootstrap", 100, "--explain").stdout
    assert "--explain: each test and interval" in short and "Newcombe" not in short
    assert "Newcombe's paired interval" in full and "drawn whole" in full and not repeated_sentences(full)
    assert len(short.splitlines()) < len(full.splitlines())
