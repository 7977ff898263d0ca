"""The main job (README's first command, `casebench run` with no arguments), end to end, offline."""

import json
import os
import subprocess
import sys

import pytest

CASEBENCH = [sys.executable, "-c", "from casebench.cli import main; main()"]


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
    res = subprocess.run([*CASEBENCH, "run", "--no-progress"], cwd=tmp_path, env=env_for(model_cache),
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "THE DEMO SET" in res.stderr
    # SmolLM2-135M puts a few per cent of its first-token probability on the verdict words: every
    # case is left out of default scoring, and the run says what its figures are worth
    assert "cases 12, answered 0" in res.stdout and "verdict mass below 50%" in res.stdout
    assert "accuracy" in res.stdout and "warning: smollm2-135m-instruct puts a median of" in res.stderr
    run_dir = tmp_path / "runs" / "smollm2-135m-instruct_prob"
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["asked"]["mode"] == "prob"
    html = (run_dir / "report.html").read_text()
    assert "<table" in html and "data:image/png;base64," in html
    # running it again resumes: nothing left to ask
    again = subprocess.run([*CASEBENCH, "run", "--no-progress", "--no-report"], cwd=tmp_path,
                           env=env_for(model_cache), capture_output=True, text=True, timeout=600)
    assert again.returncode == 0 and "0 asked now" in again.stdout


def test_main_job_takes_a_stratified_subset_of_the_real_data(monkeypatch, real_data_path, capsys):
    from casebench.cli.run import MAIN_JOB_CASES, choose_data
    from casebench.runs.execute import DEFAULT_MODEL

    monkeypatch.setenv("CASEBENCH_DATA", str(real_data_path))
    path, stratified = choose_data(None, DEFAULT_MODEL, None, None)
    err = capsys.readouterr().err
    assert path == str(real_data_path) and "$CASEBENCH_DATA" in err
    assert stratified == MAIN_JOB_CASES and f"--stratified {MAIN_JOB_CASES}" in err
    # an explicit choice, or another model, is left alone
    assert choose_data(None, DEFAULT_MODEL, 10, None)[1] is None
    assert choose_data(None, "openai/x", None, None)[1] is None
