"""Every record says who produced it (issue 27, items 1 and 3): a record carries the fingerprint
of the backend, model and answer-changing settings of its run, so ``--salvage``, a resume and
``casebench classify`` refuse another run's records, naming the first; and ``run``, ``score``
and ``runs repair`` tell one story about a damaged directory, with the fixing command and the
same exit code.

Runs ask a real loopback OpenAI-compatible server (tests/servers/fault_server.py) on the
published dataset (../shared) where the test needs real cases, and on invented cases otherwise.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from casebench.cli import cli
from casebench.runs.record import Record, iter_records, read_manifest
from casebench.runs.repair import DAMAGED_RECORDS
from servers.fault_server import FaultServer
from test_runner import binary_answer
from test_runs import write_dataset

CASES = 8


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def run_args(srv: FaultServer, data: Path, out: Path, *more: str, model: str = "openai/judge-x",
             mode: str = "binary") -> list[str]:
    return ["run", "--model", model, "--mode", mode, "--data", str(data), "--base-url", srv.base_url,
            "-o", str(out), "--no-progress", "--no-report", *more]


def prob_logprobs(body) -> list:
    return [("safe", -0.2), ("unsafe", -1.8)]


def test_another_models_records_are_never_adopted_by_salvage(tmp_path, real_data_path):
    """The issue's repro: the manifest of a prob run on the published data is deleted, and
    another model's command with --salvage must not adopt its answers."""
    out = tmp_path / "run"
    with FaultServer(logprobs_fn=prob_logprobs) as srv:
        res = invoke(*run_args(srv, real_data_path, out, "--stratified", "24", model="openai/model-a", mode="prob"))
        assert res.exit_code == 0, res.output
        records = (out / "records.jsonl").read_bytes()
        producers = {r.producer for r in iter_records(out)}
        assert len(producers) == 1 and None not in producers
        assert producers == {read_manifest(out).asked.fingerprint()}
        (out / "manifest.json").unlink()

        n0 = srv.count
        res = invoke(*run_args(srv, real_data_path, out, "--stratified", "24", "--salvage", model="openai/model-b",
                               mode="prob"))
        assert res.exit_code == 2, res.output
        assert "24 of the 24 valid record(s)" in res.output and "line 1 (case" in res.output
        assert "another model or other settings" in res.output and "Nothing was changed" in res.output
        assert not (out / "manifest.json").exists() and (out / "records.jsonl").read_bytes() == records
        # another answer-changing setting (a system prompt, which no record names) is another producer too
        res = invoke(*run_args(srv, real_data_path, out, "--stratified", "24", "--salvage", "--system", "Be brief.",
                               model="openai/model-a", mode="prob"))
        assert res.exit_code == 2 and "another model or other settings" in res.output, res.output
        assert srv.count == n0

        # the command that produced them: rebuilt, nothing asked again
        res = invoke(*run_args(srv, real_data_path, out, "--stratified", "24", "--salvage", model="openai/model-a",
                               mode="prob"))
        assert res.exit_code == 0, res.output
        assert "every one of the 24 records proves it was written by this command's model" in res.output
        assert srv.count == n0
    assert read_manifest(out).model == "openai/model-a"


def test_records_without_a_producer_never_rebuild_a_manifest(tmp_path):
    data = write_dataset(tmp_path / "cases.json", CASES)
    out = tmp_path / "run"
    with FaultServer(answer_fn=binary_answer) as srv:
        assert invoke(*run_args(srv, data, out)).exit_code == 0
        # as an older casebench wrote them: no producer
        old = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
        for r in old:
            del r["producer"]
        (out / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in old))
        (out / "manifest.json").unlink()
        before = (out / "records.jsonl").read_bytes()
        res = invoke(*run_args(srv, data, out, "--salvage"))
    assert res.exit_code == 2, res.output
    assert "names no producer" in res.output and "cannot prove it fits" in res.output
    assert "put the run's manifest.json back" in res.output and "another -o" in res.output
    assert not (out / "manifest.json").exists() and (out / "records.jsonl").read_bytes() == before


def test_a_resume_refuses_records_of_another_run_and_repair_moves_them_aside(tmp_path):
    data = write_dataset(tmp_path / "cases.json", CASES)
    a, b = tmp_path / "a", tmp_path / "b"
    with FaultServer(answer_fn=binary_answer) as srv:
        assert invoke(*run_args(srv, data, a, "--limit", "4")).exit_code == 0
        assert invoke(*run_args(srv, data, b, "--limit", "4", model="openai/judge-y")).exit_code == 0
        # b's records pasted into a (a copy gone wrong): same cases, another model
        a_lines = (a / "records.jsonl").read_bytes().splitlines(keepends=True)
        b_lines = (b / "records.jsonl").read_bytes().splitlines(keepends=True)
        (a / "records.jsonl").write_bytes(b"".join(a_lines[:2] + b_lines[2:]))
        manifest = (a / "manifest.json").read_bytes()

        n0 = srv.count
        res = invoke(*run_args(srv, data, a, "--limit", "4"))
        assert res.exit_code == 2, res.output
        first = json.loads(b_lines[2])
        assert (f"2 record(s) were written by another run (another model or other settings): the first, line 3 "
                f"(case {first['case']}, sample 0)") in res.output
        assert f"casebench runs repair {a}" in res.output and "Nothing was changed" in res.output
        assert srv.count == n0 and (a / "manifest.json").read_bytes() == manifest
        # scoring refuses them with the same story and exit code
        score = invoke("score", str(a), "--bootstrap", "0")
        assert score.exit_code == 2 and "written by another run" in score.output
        assert f"casebench runs repair {a}" in score.output

        rep = invoke("runs", "repair", str(a))
        assert rep.exit_code == 0, rep.output
        assert "moved 2 damaged line(s) (3, 4)" in rep.output
        aside = [json.loads(x) for x in (a / DAMAGED_RECORDS).read_text().splitlines()]
        assert [x["line"] for x in aside] == [3, 4] and "written by another run" in aside[0]["reason"]
        res = invoke(*run_args(srv, data, a, "--limit", "4"))
        assert res.exit_code == 0, res.output
        assert srv.count == n0 + 2  # exactly the two moved requests asked again
    fp = read_manifest(a).asked.fingerprint()
    assert {r.producer for r in iter_records(a)} == {fp}


def test_one_story_for_a_folder_without_its_manifest(tmp_path):
    """`run`, `score` and `runs repair` say the same about the same folder, name the fix, and
    exit 2 alike."""
    data = write_dataset(tmp_path / "cases.json", CASES)
    out = tmp_path / "run"
    with FaultServer(answer_fn=binary_answer) as srv:
        assert invoke(*run_args(srv, data, out)).exit_code == 0
        (out / "manifest.json").unlink()
        ran = invoke(*run_args(srv, data, out))
    scored = invoke("score", str(out), "--bootstrap", "0")
    repaired = invoke("runs", "repair", str(out))
    story = f"{out} holds {CASES} valid record(s) in records.jsonl but no manifest.json"
    for res in (ran, scored, repaired):
        assert res.exit_code == 2, res.output
        assert story in res.output
        assert "repeat the command that started this run with --salvage" in res.output
    assert "nothing to repair" not in repaired.output
    assert not (out / "manifest.json").exists()


def test_classify_refuses_records_of_another_run(tmp_path):
    from casebench.runs.reclassify import reclassify
    from casebench.classify import make_classifier
    from casebench.runs.record import RunError

    data = write_dataset(tmp_path / "cases.json", 4)
    src = tmp_path / "src"
    with FaultServer(answer="I cannot help with that.") as srv:
        args = ["--mode", "respond", "--data", str(data), "--base-url", srv.base_url, "--no-progress", "--no-report"]
        assert invoke("run", "--model", "openai/bot-a", "-o", str(src), *args).exit_code in (0, 3)
        other = tmp_path / "other"
        assert invoke("run", "--model", "openai/bot-b", "-o", str(other), *args).exit_code in (0, 3)
    lines = (src / "records.jsonl").read_bytes().splitlines(keepends=True)
    clean = b"".join(lines)
    pasted = (other / "records.jsonl").read_bytes().splitlines(keepends=True)[3]
    (src / "records.jsonl").write_bytes(b"".join(lines[:3]) + pasted)
    case = json.loads(pasted)["case"]
    with pytest.raises(RunError, match=rf"written by another run .*line 4 \(case {case}, sample 0\)"):
        reclassify(src, tmp_path / "new", make_classifier(None))
    assert not (tmp_path / "new").exists()
    (src / "records.jsonl").write_bytes(clean)
    m = reclassify(src, tmp_path / "new", make_classifier(None))
    assert {r.producer for r in iter_records(tmp_path / "new")} == {m.asked.fingerprint()}


def test_fingerprint_ignores_which_cases_and_how_many_samples_but_not_a_setting(tmp_path):
    from dataclasses import replace

    from casebench.data import load_dataset
    from test_runs import manifest_for

    asked = manifest_for(load_dataset(write_dataset(tmp_path / "d.json", 4)), "binary", [0, 1]).asked
    assert replace(asked, cases=[2], samples=3).fingerprint() == asked.fingerprint()
    assert replace(asked, settings={**asked.settings, "temperature": 0}).fingerprint() == asked.fingerprint()
    for changed in (replace(asked, model="openai/other"), replace(asked, mode="score"),
                    replace(asked, settings={**asked.settings, "temperature": 0.7}),
                    replace(asked, backend_options={"prob_method": "logprobs"})):
        assert changed.fingerprint() != asked.fingerprint()
    assert Record(case=0, sample=0, label="safe").to_json().find("producer") == -1  # old lines stay as they were
