"""Verdict mass (prob mode): how much first-token probability a model put on the verdict words.

Recorded per answer by the backends (a real loopback server's logprobs, the embedded model),
carried per case into ``Predictions``, shown by ``score`` and the report; below
``--min-verdict-mass`` a case counts as missing in default scoring, while ``--paper-compat`` scores
it as the authors' script did.
"""

from __future__ import annotations

import json
from dataclasses import replace
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from casebench.predictions import DEFAULT_MIN_VERDICT_MASS, Predictions
from casebench.runs.execute import RetryPolicy, RunConfig, run
from casebench.runs.record import Record, RunDir, final_records, iter_records
from casebench.runs.results import check_run, load_run
from casebench.stats.result import score_predictions
from casebench.stats.options import ScoringOptions

NB0 = ScoringOptions(n_boot=0)
PC0 = ScoringOptions(paper_compat=True, n_boot=0)

from servers.fault_server import FaultServer
from test_runs import case_of, manifest_for, write_dataset

CASEBENCH = [sys.executable, "-c", "from casebench.cli import main; main()"]
FAST_RETRY = RetryPolicy(max_attempts=3, base_s=0.02, cap_s=0.2)


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "CASEBENCH_PRICES", "CASEBENCH_DATA")}
    env.update(PYTHONUNBUFFERED="1", **extra)
    return env


def alternatives(body) -> list[tuple[str, float]]:
    """Even cases answer in the verdict format (95% on the words); odd ones want to write "The"
    (3% on the words, 2:1 for safe)."""
    c = case_of(body["messages"][-1]["content"])
    if c % 2 == 0:
        return [("unsafe" if c % 4 == 0 else "safe", math.log(0.90)), ("safe" if c % 4 == 0 else "unsafe",
                                                                       math.log(0.05)), ("I", math.log(0.03))]
    return [("The", math.log(0.90)), ("safe", math.log(0.02)), ("unsafe", math.log(0.01)), ("I", math.log(0.05))]


@pytest.fixture
def prob_run(tmp_path) -> Path:
    data = write_dataset(tmp_path / "cases.json", 12)
    with FaultServer(logprobs_fn=alternatives) as srv:
        cfg = RunConfig(mode="prob", model="openai/judge-x", data=data, out=tmp_path / "run",
                        backend_options={"base_url": srv.base_url, "timeout": 5.0}, retry=FAST_RETRY, progress=False)
        assert run(cfg).status == "complete"
    return tmp_path / "run"


def test_api_logprobs_record_the_mass_and_low_mass_cases_are_missing_by_default(prob_run):
    finals = final_records(iter_records(prob_run))
    for (c, _), r in finals.items():  # every answer records its mass, worked out from the alternatives
        assert r.detail["verdict_mass"] == pytest.approx(0.95 if c % 2 == 0 else 0.03)
        assert r.p_safe is not None  # the value itself is still recorded as read
    pred = load_run(prob_run)
    assert pred.verdict_mass is not None and pred.min_verdict_mass == DEFAULT_MIN_VERDICT_MASS == 0.5
    assert pred.has_value.all()
    assert pred.low_mass.tolist() == [c % 2 == 1 for c in range(12)]
    assert pred.answered.sum() == 6
    assert pred.verdict_mass_summary() == {"median": pytest.approx((0.03 + 0.95) / 2), "below": 6, "known": 12,
                                           "threshold": 0.5}

    default = score_predictions(pred, NB0)
    assert default.answered == 6 and default.low_mass_missing == 6
    # the same figures as predictions in which the low-mass cases were never answered
    by_hand = Predictions.from_values("x", "judge-x", "prob", pred.cases,
                                      [None if c % 2 else float(pred.value[c]) for c in range(12)])
    assert default.values == pytest.approx(score_predictions(by_hand, NB0).values, nan_ok=True)

    # paper-compatible: every value is scored as recorded, as the authors' script would
    paper = score_predictions(pred, PC0)
    assert paper.answered == 12 and paper.low_mass_missing == 0
    # the threshold is a scoring option, applied through a view: the loaded predictions keep theirs
    at0 = replace(PC0, min_verdict_mass=0.0)
    # (vote_agreement, new from main, reads the answered mask even under --paper-compat: left out here)
    same = {k: v for k, v in score_predictions(pred, at0).values.items() if k != "vote_agreement"}
    assert {k: v for k, v in paper.values.items() if k != "vote_agreement"} == pytest.approx(same, nan_ok=True)
    assert score_predictions(pred, replace(NB0, min_verdict_mass=0.0)).answered == 12  # 0 keeps every case
    assert pred.min_verdict_mass == 0.5 and pred.answered.sum() == 6  # never changed by scoring

    # median 49% is below the threshold: a warning that names the model and what the figures are worth
    assert "judge-x" in default.low_mass_warning and "noise" in default.low_mass_warning
    assert check_run(prob_run).verdict_mass_warning == default.low_mass_warning


def test_score_cli_shows_the_mass_in_every_format_and_warns(prob_run):
    out = subprocess.run([*CASEBENCH, "score", str(prob_run), "--bootstrap", "50"], env=clean_env(),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "answered 6 (coverage 50.0%; 6 left out: verdict mass below 50%)" in out.stdout
    assert "median 49%, 6 of 12 cases below 50%" in out.stdout
    assert "warning: judge-x puts a median of 49.0%" in out.stderr
    js = subprocess.run([*CASEBENCH, "score", str(prob_run), "--bootstrap", "0", "--json", "--min-verdict-mass", "0.02"],
                        env=clean_env(), capture_output=True, text=True, timeout=120)
    row = json.loads(js.stdout)
    assert row["answered"] == 12 and row["verdict_mass"]["below"] == 0 and row["verdict_mass"]["threshold"] == 0.02
    assert "warning" not in js.stderr  # the median is above a threshold of 2%
    for fmt, needle in (("csv", "verdict_mass_median"), ("md", "verdict mass (median, below)")):
        res = subprocess.run([*CASEBENCH, "score", str(prob_run), "--bootstrap", "0", "--format", fmt],
                             env=clean_env(), capture_output=True, text=True, timeout=120)
        assert needle in res.stdout
    paper = subprocess.run([*CASEBENCH, "score", str(prob_run), "--bootstrap", "0", "--paper-compat"],
                           env=clean_env(), capture_output=True, text=True, timeout=120)
    assert "answered 12 (coverage 100.0%)" in paper.stdout and "scored anyway" in paper.stdout


def test_hand_made_records_old_and_new_detail_keys(tmp_path):
    """Runs written before ``verdict_mass`` existed recorded the two masses; a record with none
    (a text answer, a server without alternatives) leaves the case's mass unknown, never low."""
    from casebench.data import load_dataset

    ds = load_dataset(write_dataset(tmp_path / "cases.json", 4))
    run_dir = tmp_path / "run"
    with RunDir(run_dir) as rd:
        rd.write_manifest(manifest_for(ds, "prob", [0, 1, 2, 3], model="hf/some-model"))
        rd.append(Record(case=0, sample=0, p_safe=0.8, label="safe", detail={"p_safe_mass": 0.6, "p_unsafe_mass": 0.3}))
        rd.append(Record(case=1, sample=0, p_safe=0.2, label="unsafe", detail={"safe_mass": 0.01, "unsafe_mass": 0.04}))
        rd.append(Record(case=2, sample=0, p_safe=0.7, label="safe", detail={"verdict_mass": 0.2}))
        rd.append(Record(case=3, sample=0, p_safe=0.4, label="unsafe", detail={}))
    pred = load_run(run_dir)
    assert pred.verdict_mass[:3] == pytest.approx([0.9, 0.05, 0.2]) and np.isnan(pred.verdict_mass[3])
    assert pred.answered.tolist() == [True, False, False, True]
    s = score_predictions(pred, NB0)
    assert s.verdict_mass == {"median": pytest.approx(0.2), "below": 2, "known": 3, "threshold": 0.5}
    assert s.to_dict()["verdict_mass"]["missing"] == 2
    with pytest.raises(ValueError, match="minimum verdict mass"):
        Predictions.from_values("x", "m", "prob", pred.cases, [0.5] * 4).__class__(
            "x", "m", "prob", pred.cases, pred.label, pred.value, min_verdict_mass=1.5)


def test_published_files_and_text_modes_have_no_mass(exp_dir):
    from casebench.loader import load_predictions

    pred = load_predictions(exp_dir / "safety_llama370B" / "output_logits.json")
    assert pred.verdict_mass is None and pred.verdict_mass_summary() is None
    s = score_predictions(pred, NB0)
    assert s.verdict_mass is None and s.low_mass_warning is None and "verdict_mass" not in s.to_dict()


def test_report_shows_the_mass_and_the_warning(prob_run, tmp_path):
    from casebench.present.report import build_report

    pred = load_run(prob_run)
    page = build_report([pred], NB0, human=False)
    assert "mass 49% · 6/12 low" in page and "Warning:" in page and "noise" in page
    # nothing left to score: the report is still written, with dashes
    page = build_report([pred], replace(NB0, min_verdict_mass=0.99), human=False)
    assert "0.0%" in page and "12/12 low" in page


@pytest.mark.slow
def test_the_embedded_model_puts_a_sliver_on_the_verdict_and_the_run_says_so(tmp_path, embedded_model, real_data_path):
    """SmolLM2-135M's first token is mostly "The" or "S": a few per cent on the verdict words."""
    cache = tmp_path / "cache"
    (cache / "models").mkdir(parents=True)
    (cache / "models" / embedded_model.name).symlink_to(embedded_model)
    out = tmp_path / "run"
    env = clean_env(CASEBENCH_CACHE=str(cache), CASEBENCH_OFFLINE="1", HF_HUB_OFFLINE="1")
    res = subprocess.run([*CASEBENCH, "run", "--mode", "prob", "--data", str(real_data_path), "--limit", "3",
                          "-o", str(out), "--no-progress"], env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]  # every case has a value: coverage is fine
    finals = final_records(iter_records(out))
    masses = [r.detail["verdict_mass"] for r in finals.values()]
    assert len(masses) == 3 and all(0.0 < m < 0.5 for m in masses)
    for r in finals.values():
        assert r.detail["verdict_mass"] == pytest.approx(r.detail["p_safe_mass"] + r.detail["p_unsafe_mass"])
    assert "warning: smollm2-135m-instruct puts a median of" in res.stderr
    assert "0 of 3 cases read" in res.stdout  # the first screen; the reason in score's table
    scored = subprocess.run([*CASEBENCH, "score", str(out), "--no-reference"], env=env, capture_output=True, text=True,
                            timeout=600)
    assert "cases 3, answered 0 (coverage 0.0%; 3 left out: verdict mass below 50%)" in scored.stdout, scored.stdout
