"""Re-asks that can differ, and runs that end below a coverage threshold.

After an unreadable answer, a text mode's re-ask (``--reask repair``, the default) sends the
answer back with a short message quoting the required format, so a model at temperature 0 can
answer differently; ``--reask same`` asks the question again as the paper did. How re-asks are
made is an answer-changing setting (``Asked.reask``). A run whose coverage ends below
``--min-coverage`` exits 3 with advice.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from casebench.modes import get_mode
from casebench.runs.execute import RetryPolicy, RunConfig, run
from casebench.runs.record import (
    Manifest, ManifestMismatch, effective_reask, final_records, iter_records, read_manifest,
)
from casebench.runs.results import EXIT_LOW_COVERAGE, check_run

from servers.fault_server import FaultServer
from test_runs import case_of, write_dataset

CASEBENCH = [sys.executable, "-c", "from casebench.cli import main; main()"]
FAST_RETRY = RetryPolicy(max_attempts=3, base_s=0.02, cap_s=0.2)
CHATTER = "I would rather not say."


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "CASEBENCH_PRICES", "CASEBENCH_DATA")}
    env.update(PYTHONUNBUFFERED="1", **extra)
    return env


def first_user(body: Any) -> str:
    return next(m["content"] for m in body["messages"] if m["role"] == "user")


def stubborn_until_repaired(body: Any) -> str:
    """Chatter to the question (every time: a greedy model repeats itself); the verdict once told
    what was wrong and the format."""
    c = case_of(first_user(body))
    if "could not be read" in body["messages"][-1]["content"]:
        return json.dumps({"judgement": "unsafe" if c % 3 == 0 else "safe"})
    return CHATTER


@pytest.fixture
def data(tmp_path) -> Path:
    return write_dataset(tmp_path / "cases.json", 6)


def config(srv: FaultServer, tmp_path: Path, data: Path, **kw: Any) -> RunConfig:
    base: dict[str, Any] = dict(mode="binary", model="openai/judge-x", data=data, out=tmp_path / "run",
                                backend_options={"base_url": srv.base_url, "timeout": 5.0}, retry=FAST_RETRY,
                                progress=False, max_connections=2)
    base.update(kw)
    return RunConfig(**base)


def test_a_repair_reask_sends_the_answer_back_with_the_format_and_gets_a_verdict(tmp_path, data):
    with FaultServer(answer_fn=stubborn_until_repaired) as srv:
        summary = run(config(srv, tmp_path, data))
        requests = list(srv.requests)
    assert summary.status == "complete" and summary.answered == 6 and summary.missing == 0
    assert len(requests) == 12  # each case: the question, then one repair
    m = read_manifest(tmp_path / "run")
    assert m.asked.reask == "repair"
    finals = final_records(iter_records(tmp_path / "run"))
    assert {c: r.label for (c, _), r in finals.items()} == {c: "unsafe" if c % 3 == 0 else "safe" for c in range(6)}
    assert all(r.attempts == 2 for r in finals.values())
    repairs = [r.body["messages"] for r in requests if "could not be read" in r.body["messages"][-1]["content"]]
    assert len(repairs) == 6
    for msgs in repairs:
        # the question as first asked, the unreadable answer, then the repair message
        assert [x["role"] for x in msgs][-3:] == ["user", "assistant", "user"]
        assert "[case " in msgs[-3]["content"] and msgs[-2]["content"] == CHATTER
        assert "no JSON object in the answer" in msgs[-1]["content"]
        assert '{"judgement": "safe"} or {"judgement": "unsafe"}' in msgs[-1]["content"]


def test_how_reasks_are_made_is_an_answer_changing_setting(tmp_path, data):
    with FaultServer(answer_fn=stubborn_until_repaired) as srv:
        assert run(config(srv, tmp_path, data, limit=2)).status == "complete"
        before = (tmp_path / "run" / "manifest.json").read_bytes()
        with pytest.raises(ManifestMismatch, match="reask"):
            run(config(srv, tmp_path, data, limit=2, reask="same"))
        assert (tmp_path / "run" / "manifest.json").read_bytes() == before
        assert srv.count == 4


def test_effective_reask_and_manifests_written_before_it():
    assert effective_reask("binary", 2, "repair") == "repair"
    assert effective_reask("score", 2, "same") == "same"
    assert effective_reask("prob", 2, "repair") is None  # prob mode reads no text: nothing to re-ask
    assert effective_reask("binary", 0, "repair") is None
    assert effective_reask("respond", 2, "repair") == "same"  # an empty chatbot answer is asked again as it was
    assert "1 (unsafe) to 10 (safe)" in get_mode("score").repair_message("score out of range")
    assert get_mode("respond").repair_message("x") is None

    def manifest(mode: str) -> dict:
        return {"format": "casebench-run", "format_version": 2,
                "dataset": {"path": "x.json", "sha256": "s", "fingerprint": "f", "n": 3},
                "asked": {"dataset_sha256": "s", "model": "openai/m", "mode": mode, "context_as": "user",
                          "removed": [], "cases": [0], "samples": 1, "settings": {}, "template_sha256": None,
                          "parse_retries": 2, "stop_at_verdict": True, "backend_options": {}},
                "selection": {"how": "all"}}

    # a run made before re-asks were recorded asked the same question again
    assert Manifest.from_dict(manifest("binary")).asked.reask == "same"
    assert Manifest.from_dict(manifest("prob")).asked.reask is None


def test_a_run_below_min_coverage_exits_3_with_what_the_model_wrote_and_what_to_try(tmp_path, data):
    calls: list[int] = []
    lock = threading.Lock()

    def always_chatter(body: Any) -> str:
        with lock:
            calls.append(case_of(first_user(body)))
        return CHATTER

    with FaultServer(answer_fn=always_chatter) as srv:
        cmd = [*CASEBENCH, "run", "--model", "openai/judge-x", "--mode", "binary", "--data", str(data),
               "--base-url", srv.base_url, "-o", str(tmp_path / "run"), "--no-progress", "--reask", "same"]
        res = subprocess.run(cmd, env=clean_env(), capture_output=True, text=True, timeout=300)
    assert res.returncode == EXIT_LOW_COVERAGE == 3, res.stderr
    assert len(calls) == 6 * 3  # the question and two identical re-asks per case
    assert "complete: 6/6 requests final (0 answered, 6 missing)" in res.stdout
    err = res.stderr
    assert "only 0 of 6 cases have a readable answer (coverage 0%, below --min-coverage 50%)" in err
    assert "why: no JSON object in the answer (6)" in err
    assert f"wrote: '{CHATTER}'" in err
    assert "try: --reask repair" in err
    check = check_run(tmp_path / "run", min_coverage=0.0)
    assert not check.low_coverage and check.advice == []
    with FaultServer(answer_fn=always_chatter) as srv:  # a lower threshold: the same run ends 0
        cmd = [*CASEBENCH, "run", "--model", "openai/judge-x", "--mode", "binary", "--data", str(data),
               "--base-url", srv.base_url, "-o", str(tmp_path / "run2"), "--no-progress", "--reask", "same",
               "--limit", "1", "--parse-retries", "0", "--min-coverage", "0"]
        assert subprocess.run(cmd, env=clean_env(), capture_output=True, text=True, timeout=300).returncode == 0
