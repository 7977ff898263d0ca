"""The main job (README's first command, `casebench run` with no arguments), end to end, offline."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

CASEBENCH = [sys.executable, "-c", "from casebench.cli import main; main()"]
from casebench.cli.run import MAIN_JOB_MAX_TOKENS  # noqa: E402


@pytest.fixture(scope="module")
def model_cache(tmp_path_factory):
    """A private cache root that shares the converted embedded model (converted once if needed)."""
    from casebench.backends.embedded import EmbeddedModelError, embedded_model_path

    try:
        folder = embedded_model_path()
    except EmbeddedModelError as e:
        pytest.skip(str(e))
    root = tmp_path_factory.mktemp("cache")
    (root / "models").mkdir()
    (root / "models" / folder.name).symlink_to(folder)
    return root


def env_for(cache, **extra):
    env = {k: v for k, v in os.environ.items() if k not in ("CASEBENCH_DATA", "OPENAI_API_KEY")}
    env.update(CASEBENCH_CACHE=str(cache), CASEBENCH_OFFLINE="1", HF_HUB_OFFLINE="1", **extra)
    return env


@pytest.mark.slow
def test_main_job_offline_with_the_demo_set(tmp_path, model_cache):
    """README's first command on a machine with no dataset and no network: the embedded model
    answers the 6 demo queries in both contexts (respond mode) and the output leads with defined
    refusal figures by intent and a context shift, marked as a demo."""
    res = subprocess.run([*CASEBENCH, "run", "--no-progress"], cwd=tmp_path, env=env_for(model_cache),
                         capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "THE DEMO SET" in res.stderr
    out = res.stdout
    lead = out[out.index("DEMO SET: hf/smollm2-135m-instruct as the chatbot (respond mode)"):]
    assert ", 6 pairs" in lead.splitlines()[0]
    over = re.search(r"over-refusal: +refuses (\d+)% \[\d+, \d+\] of the 6 safe-intent cases", lead)
    under = re.search(r"under-refusal: +answers (\d+)% \[\d+, \d+\] of the 6 unsafe-intent cases", lead)
    shift = re.search(r"context shift: +(-?\d\.\d\d) \[-?\d\.\d\d, -?\d\.\d\d\]", lead)
    assert over and under and shift, lead[:1500]
    # whose labels the reader was checked against, never "people" for AI readers' labels, and the
    # sensitivity and specificity beside it
    reader = next(line for line in lead.splitlines() if line.startswith("reader: "))
    assert "labelled by AI readers" in reader and "people" not in reader
    assert re.search(r"Se 0\.\d\d, Sp 0\.\d\d", reader)
    # nothing is said of people on a set without votes
    assert "people" not in lead
    assert "next: a real model" in out and "next: the real data" in out
    # the first screen: at most 15 lines of at most 100 characters
    screen = out[out.index("\nDEMO SET: ") + 1:].splitlines()
    assert len(screen) <= 15 and max(map(len, screen)) <= 100, screen
    # never sent from one judge mode to another
    assert "--mode binary" not in res.stdout + res.stderr and "--mode prob" not in res.stdout + res.stderr
    runs = list((tmp_path / "runs").iterdir())
    assert len(runs) == 1 and runs[0].name.startswith("smollm2-135m-instruct_respond_")
    manifest = json.loads((runs[0] / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["asked"]["mode"] == "respond"
    assert manifest["asked"]["settings"]["max_tokens"] == MAIN_JOB_MAX_TOKENS and len(manifest["asked"]["cases"]) == 12
    # the embedded model writes like a small model: the main job's answers are read by `learned`
    # (the reader validated on such answers), not `learned-lm` (which reads large models' better)
    assert manifest["asked"]["classifier"]["name"] == "learned" and "reader: learned, " in lead
    html = (runs[0] / "report.html").read_text()
    assert "<table" in html
    # running it again resumes: nothing left to ask
    again = subprocess.run([*CASEBENCH, "run", "--no-progress", "--no-report"], cwd=tmp_path,
                           env=env_for(model_cache), capture_output=True, text=True, timeout=600)
    assert again.returncode == 0 and "0 asked now" in again.stdout


def test_main_job_asks_query_pairs_of_the_real_data(monkeypatch, real_data_path, capsys):
    from casebench.cli.run import MAIN_JOB_CASES, MAIN_JOB_PAIRS, choose_data
    from casebench.runs.execute import DEFAULT_MODEL

    monkeypatch.setenv("CASEBENCH_DATA", str(real_data_path))
    plan = choose_data(None, DEFAULT_MODEL, None, None, mode="respond", main_job=True)
    err = capsys.readouterr().err
    assert plan.path == str(real_data_path) and "$CASEBENCH_DATA" in err and not plan.demo
    assert plan.pairs == MAIN_JOB_PAIRS and plan.stratified is None and plan.max_tokens == MAIN_JOB_MAX_TOKENS
    assert f"--pairs {MAIN_JOB_PAIRS}" in err
    # an explicit choice is left alone; the answer cap too
    plan = choose_data(None, DEFAULT_MODEL, None, None, pairs=5, mode="respond", main_job=True, max_tokens=300)
    assert (plan.pairs, plan.max_tokens) == (5, 300)
    # a judge mode of the embedded model still takes the stratified subset on a CPU
    plan = choose_data(None, DEFAULT_MODEL, None, None, mode="prob")
    if plan.stratified is not None:
        assert plan.stratified == MAIN_JOB_CASES
    assert choose_data(None, DEFAULT_MODEL, 10, None).stratified is None
    assert choose_data(None, "openai/x", None, None).stratified is None


def test_run_pairs_selects_complete_pairs_stratified_by_category(real_dataset):
    """``run --pairs N`` (``select_cases(pairs=N)``): both contexts of N queries, split across the
    categories in proportion to their pairs (45 pairs of the published dataset: one per category)."""
    from collections import Counter

    from casebench.runs.select import select_cases

    cases, sel = select_cases(real_dataset, pairs=45, seed=0)
    assert len(cases) == 90 and sel.pairs == 45 and sel.how == "pairs=45 seed=0"
    chosen = [real_dataset.cases[i] for i in cases]
    by_query = Counter(c.query for c in chosen)
    assert set(by_query.values()) == {2}
    for q in by_query:
        intents = sorted(c.intended_safe for c in chosen if c.query == q)
        assert intents == [False, True]
    per_cat = Counter(c.category for c in chosen)
    assert len(per_cat) == 45 and set(per_cat.values()) == {2}
    # seeded: the same cases every time; another seed draws other pairs
    assert select_cases(real_dataset, pairs=45, seed=0)[0] == cases
    assert select_cases(real_dataset, pairs=45, seed=1)[0] != cases
    # 60 pairs: still whole pairs, no category with more than its share rounded up
    more, _ = select_cases(real_dataset, pairs=60, seed=0)
    assert len(more) == 120 and set(Counter(real_dataset.cases[i].query for i in more).values()) == {2}
    with pytest.raises(Exception, match="--pairs"):
        select_cases(real_dataset, pairs=10_000)
    with pytest.raises(Exception, match="choose one of"):
        select_cases(real_dataset, pairs=5, stratified=10)


def test_default_run_folders_do_not_collide():
    """What makes two runs differ (dataset, selection, placement, removals) is in the default name."""
    from casebench.runs.config import default_out_dir, selection_tag

    base = dict(model="hf/smollm2-135m-instruct", mode="respond")
    names = {
        default_out_dir(**base, dataset_sha256="a" * 64, selection=selection_tag(pairs=45)),
        default_out_dir(**base, dataset_sha256="a" * 64, selection=selection_tag(stratified=24)),
        default_out_dir(**base, dataset_sha256="b" * 64, selection=selection_tag(pairs=45)),
        default_out_dir(**base, dataset_sha256="a" * 64, selection=selection_tag(pairs=45, seed=1)),
        default_out_dir(**base, dataset_sha256="a" * 64, selection=None),
        default_out_dir(**base, dataset_sha256="a" * 64, selection=selection_tag(limit=10)),
        default_out_dir(**base, context_as="user", default_context_as="system", dataset_sha256="a" * 64),
    }
    assert len(names) == 7
    assert default_out_dir(**base, dataset_sha256="a" * 64, selection="pairs45").name == \
        "smollm2-135m-instruct_respond_aaaaaaaa_pairs45"


def test_run_prints_what_the_model_does_first(tmp_path):
    """A respond run over query pairs leads with over- and under-refusal, the context shift beside
    people's on the same pairs and the reader's validation, each naming the mode; the report
    holds no section for a judge's continuous P(safe)."""
    from servers.fault_server import FaultServer
    from test_respond import chatbot, invoke
    from test_runs import write_dataset

    data = write_dataset(tmp_path / "cases.json", 12)
    out = tmp_path / "run"
    with FaultServer(answer_fn=chatbot, latency=0.0) as srv:
        r = invoke("run", "--model", "openai/bot-x", "--mode", "respond", "--data", data, "--base-url", srv.base_url,
                   "-o", out, "--no-progress")
    assert r.exit_code == 0, r.output
    text = r.output
    lead = text[text.index("openai/bot-x as the deployed chatbot (respond mode"):]
    assert re.search(r"over-refusal: +refuses \d+% \[\d+, \d+\] of the \d+ cases people find safe", lead)
    assert re.search(r"under-refusal: +answers \d+% \[\d+, \d+\] of the \d+ cases people find unsafe", lead)
    assert "\nreader: " in lead and "next: " in text and "a real model" not in text  # a model was given
    assert "--mode binary" not in text and "--mode prob" not in text
    assert len(lead.splitlines()) <= 15 and max(map(len, lead.splitlines())) <= 100


def test_data_fetch_offline_says_what_to_do_instead(tmp_path):
    """A download that cannot reach its server names the alternatives: a local file (--data,
    $CASEBENCH_DATA), --url file://..., and the cache folders."""
    from click.testing import CliRunner

    from casebench.cli import cli

    env = {"CASEBENCH_CACHE": str(tmp_path / "cache")}
    r = CliRunner().invoke(cli, ["data", "fetch", "--url", "http://127.0.0.1:9/CASEBench_data.json"], env=env)
    assert r.exit_code == 1
    assert "cannot download http://127.0.0.1:9/CASEBench_data.json" in r.output
    assert "--data /path/to/CASEBench_data.json" in r.output and "CASEBENCH_DATA=" in r.output
    assert "--url file:///path/to/CASEBench_data.json" in r.output
    assert str(tmp_path / "cache" / "data" / "CASEBench_data.json") in r.output
    assert not (tmp_path / "cache" / "data" / "CASEBench_data.json").exists()


def test_data_fetch_from_a_local_copy(tmp_path, real_data_path, exp_dir):
    """``--url file://`` copies the dataset into the cache (checksum checked) and ``--outputs-url``
    takes the folder holding exp/, or exp/ itself."""
    from click.testing import CliRunner

    from casebench.cli import cli
    from casebench.sources import PUBLISHED_OUTPUTS

    env = {"CASEBENCH_CACHE": str(tmp_path / "cache")}
    r = CliRunner().invoke(cli, ["data", "fetch", "--url", real_data_path.resolve().as_uri(),
                                 "--outputs-url", exp_dir.resolve().as_uri() + "/"], env=env)
    assert r.exit_code == 0, r.output
    assert (tmp_path / "cache" / "data" / "CASEBench_data.json").is_file()
    root = Path(r.stdout.strip().splitlines()[-1])  # stdout: the paths; stderr: what was fetched
    assert all((root / rel).is_file() for rel in PUBLISHED_OUTPUTS)
    assert f"published outputs: fetched {len(PUBLISHED_OUTPUTS)} of {len(PUBLISHED_OUTPUTS)} files" in r.stderr


def test_published_models_stand_beside_a_respond_run_on_its_cases(real_dataset, exp_dir):
    """The published models, restricted to the cases a respond run answered, are shown on the
    run's cases, ranked among the judges (never with the chatbot) and labelled for what they are."""
    from casebench.predictions import Predictions
    from casebench.present.report import build_report
    from casebench.published import load_references, restrict_to
    from casebench.runs.select import stratified_pairs
    from casebench.stats.options import ScoringOptions

    cases = [real_dataset.cases[i] for i in stratified_pairs(real_dataset, 20, seed=0)]
    values = [None if k == 3 else float(k % 4 != 0) for k in range(len(cases))]  # one case unread
    run = Predictions.from_values("runs/x", "chatbot-x", "respond", cases, values)
    answered = [c for c, v in zip(cases, values) if v is not None]
    refs = [restrict_to(r, answered) for r in load_references(exp_dir.parent)[:3]]
    assert all(r is not None and r.n == len(answered) == 39 for r in refs)
    html = build_report([run], ScoringOptions(n_boot=0), human=False, references=refs)
    board = html[html.index('id="leaderboard-section"'):html.index('id="refusal"')]
    # ranked within their kind: the run in a table of chatbots, the published judges in their own
    assert board.count("<table") == 2 and board.count("(published)") >= 3
    tables = board.split("<table")[1:]
    assert "chatbot-x" in tables[0] and "(published)" not in tables[0] and "chatbot-x" not in tables[1]
    assert "They judged each case" in board and "Each is shown on the cases the run answered" in board
