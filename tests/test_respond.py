"""Respond mode: the model answers as the deployed chatbot, a refusal classifier reads what it did,
and the run is scored, resumed, re-classified and compared with the model's own verdicts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from casebench.cli import cli
from casebench.runs.record import final_records, iter_records, read_manifest
from servers.fault_server import FaultServer
from test_cli_run import CASEBENCH, clean_env, record_lines, wait_for_records
from test_runs import case_of, write_dataset

REFUSAL = "I'm sorry, but I can't help with that request."
ANSWER = ("Sure. Keep the blades clean and dry, oil them lightly, and hang the tools on a wall rack "
          "away from damp corners; check the handles for cracks before spring.")


def behaviour_of(case: int) -> str:
    return "refuse" if case % 3 == 0 else "comply"


def chatbot(body: Any) -> str:
    """Answers keyed on the case marker in the user message (the query)."""
    c = case_of(body["messages"][-1]["content"])
    return REFUSAL if behaviour_of(c) == "refuse" else ANSWER


def invoke(*args: Any):
    return CliRunner().invoke(cli, [str(a) for a in args])


@pytest.fixture
def data(tmp_path) -> Path:
    return write_dataset(tmp_path / "cases.json", 9)


def respond_args(srv: FaultServer, data: Path, out: Path, *more: str) -> list[str]:
    return ["run", "--model", "openai/bot-x", "--mode", "respond", "--data", str(data), "--base-url", srv.base_url,
            "-o", str(out), "--no-progress", "--no-report", *more]


def test_respond_run_records_behaviour_and_scores_over_and_under_refusal(tmp_path, data):
    out = tmp_path / "run"
    with FaultServer(answer_fn=chatbot, latency=0.0) as srv:
        r = invoke(*respond_args(srv, data, out))
        assert r.exit_code == 0, r.output
        sent = srv.requests[0].body
    # the context became the operator's system prompt, the query alone is the user message
    assert sent["messages"][0]["role"] == "system" and "Who the user is" in sent["messages"][0]["content"]
    assert sent["messages"][1]["content"].startswith("[case ") and sent["max_tokens"] == 512
    m = read_manifest(out)
    assert m.asked.mode == "respond" and m.asked.context_as == "system" and m.asked.settings["max_tokens"] == 512
    assert m.asked.classifier["name"] == "learned" and m.asked.classifier["version"]
    assert m.asked.classifier["partial_as"] == "unsafe" and m.asked.stop_at_verdict is False
    finals = final_records(iter_records(out))
    assert len(finals) == 9
    for (c, _), rec in finals.items():
        assert rec.behaviour == behaviour_of(c) and rec.text in (REFUSAL, ANSWER)
        assert rec.label == ("safe" if rec.behaviour == "comply" else "unsafe")
    r = invoke("score", out, "--json", "--bootstrap", "200")
    assert r.exit_code == 0, r.output
    s = json.loads(r.output)
    vals = s
    assert vals["refusal_rate"] == pytest.approx(3 / 9)
    assert 0 <= vals["safe_recall"] <= 1 and 0 <= vals["unsafe_recall"] <= 1 and "pcc" in vals


def test_respond_resume_after_kill_9_keeps_each_answer_exactly_once(tmp_path):
    data = write_dataset(tmp_path / "cases.json", 40)
    out = tmp_path / "run"
    with FaultServer(answer_fn=chatbot, latency=0.1) as srv:
        cmd = [*CASEBENCH, *respond_args(srv, data, out, "--max-connections", "2")]
        proc = subprocess.Popen(cmd, env=clean_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_records(out, 6, proc)
        assert proc.poll() is None
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        lines, _ = record_lines(out)
        first = {r["case"] for r in lines}
        n0 = srv.count
        done = subprocess.run(cmd, env=clean_env(), capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        again = [case_of(r.body["messages"][-1]["content"]) for r in srv.requests[n0:]]
    assert not set(again) & first and len(again) == len(set(again))  # never asked twice
    finals = final_records(iter_records(out))
    assert sorted(c for c, _ in finals) == list(range(40))
    lines, _ = record_lines(out)
    assert len([r for r in lines if r.get("final", True)]) == 40  # each answer exactly once


def test_classify_rereads_a_finished_run_into_a_new_directory(tmp_path, data):
    out = tmp_path / "run"
    with FaultServer(answer_fn=chatbot, latency=0.0) as srv:
        assert invoke(*respond_args(srv, data, out)).exit_code == 0
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    new = tmp_path / "run_partial_safe"
    # a classifier that reads the same answers differently: an LLM classifier served by a script
    verdicts = {REFUSAL: "refuse", ANSWER: "partial"}

    def classifier_answer(body: Any) -> str:
        text = json.dumps(body["messages"])
        return next(v for k, v in verdicts.items() if json.dumps(k)[1:-1] in text)

    with FaultServer(answer_fn=classifier_answer, latency=0.0) as cls_srv:
        r = invoke("classify", out, "--refusal-classifier", "llm:openai/judge-cls", "--refusal-base-url",
                   cls_srv.base_url, "--partial-as", "safe", "-o", new)
        assert r.exit_code == 0, r.output
        asked_model = cls_srv.count
    assert asked_model == 9
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before  # original untouched
    old_f, new_f = final_records(iter_records(out)), final_records(iter_records(new))
    assert old_f.keys() == new_f.keys()
    for k in old_f:
        assert new_f[k].text == old_f[k].text and new_f[k].usage == old_f[k].usage
        assert new_f[k].behaviour == verdicts[old_f[k].text]
        assert new_f[k].label == ("unsafe" if new_f[k].behaviour == "refuse" else "safe")  # partial counts as safe
    m = read_manifest(new)
    assert m.asked.classifier["name"].startswith("llm:") and m.asked.classifier["partial_as"] == "safe"
    assert "reclassified_from" in m.history[-1].transport
    # an unfinished or non-respond run is refused, nothing written
    r = invoke("classify", new, "-o", new)
    assert r.exit_code == 2


def test_say_and_do_compares_a_models_verdicts_with_its_behaviour(tmp_path, data):
    judge, respond = tmp_path / "judge", tmp_path / "respond"

    def verdict(body: Any) -> str:  # the judge says unsafe for cases 0 and 1, safe otherwise
        c = case_of(body["messages"][-1]["content"])
        return json.dumps({"judgement": "unsafe" if c in (0, 1) else "safe", "explanation": "-"})

    with FaultServer(answer_fn=verdict, latency=0.0) as srv:
        r = invoke("run", "--model", "openai/bot-x", "--mode", "binary", "--data", data, "--base-url", srv.base_url,
                   "-o", judge, "--no-progress", "--no-report")
        assert r.exit_code == 0, r.output
    with FaultServer(answer_fn=chatbot, latency=0.0) as srv:
        assert invoke(*respond_args(srv, data, respond)).exit_code == 0
    r = invoke("compare", judge, respond, "--bootstrap", "100")
    assert r.exit_code == 0, r.output
    assert "say and do" in r.output
    # refused: 0, 3, 6; judged unsafe: 0, 1 -> judged safe but refused: 3, 6; judged unsafe but answered: 1
    assert "judged safe, refused: 3, 6" in r.output and "judged unsafe, answered: 1" in r.output
    assert "behaviour matches its own verdict: 0.667" in r.output
    r = invoke("compare", judge, respond, "--bootstrap", "100", "--json")
    sd = json.loads(r.output)["say_do"][0]
    assert sd["judged_safe_refused"] == [3, 6] and sd["judged_unsafe_answered"] == [1] and sd["n"] == 9
    # the report shows judgement and behaviour side by side
    r = invoke("report", judge, respond, "-o", tmp_path / "report.html", "--bootstrap", "50")
    assert r.exit_code == 0, r.output
    html = (tmp_path / "report.html").read_text()
    assert "Judgement and behaviour" in html and '<table class="saydo">' in html


@pytest.mark.slow
def test_respond_with_the_embedded_model_offline(tmp_path, data, embedded_model):
    out = tmp_path / "run"
    r = invoke("run", "--mode", "respond", "--data", data, "--limit", "3", "--max-tokens", "24", "-o", out,
               "--no-progress", "--no-report")
    assert r.exit_code == 0, r.output
    finals = final_records(iter_records(out))
    assert len(finals) == 3
    # a behaviour, or the rules' "undetermined" reading (a missing value with its reason, never a guess)
    assert all((f.behaviour in ("comply", "partial", "refuse") or "undetermined" in (f.error or "")) and f.text
               for f in finals.values())
    assert read_manifest(out).asked.settings["max_tokens"] == 24


@pytest.mark.slow
def test_respond_against_the_llama_cpp_server(tmp_path, llama_server, real_data_path):
    out = tmp_path / "run"
    r = invoke("run", "--model", f"openai/{llama_server.model}", "--base-url", llama_server.base_url, "--mode",
               "respond", "--data", real_data_path, "--stratified", "4", "--max-tokens", "32", "-o", out,
               "--no-progress", "--no-report", "--timeout", "120")
    assert r.exit_code == 0, r.output
    finals = final_records(iter_records(out))
    assert len(finals) == 4 and all(f.behaviour in ("comply", "partial", "refuse") or "undetermined" in (f.error or "")
                                    for f in finals.values())


def test_resume_after_the_stored_validation_grew(tmp_path, data):
    """The reader's validated error is recorded in the manifest for the report, and grows between
    casebench versions while the reader stays the same. An unfinished respond run begun with other
    figures (its records naming the fingerprint casebench wrote when the figures were hashed into
    it) resumes: only the unfinished requests are asked, every record proves it fits, and the
    records of a run of another reader are still refused."""
    from casebench.runs.repair import diagnose

    out = tmp_path / "run"
    with FaultServer(answer_fn=chatbot, latency=0.0) as srv:
        assert invoke(*respond_args(srv, data, out)).exit_code == 0
        # as an older casebench left it: other stored figures, records named by the old
        # fingerprint (figures included), and the last three answers not yet written
        mpath = out / "manifest.json"
        manifest = json.loads(mpath.read_text())
        manifest["asked"]["classifier"]["validation"]["agreement"] = 0.5
        manifest["status"] = "interrupted"
        mpath.write_text(json.dumps(manifest))
        asked = read_manifest(out).asked
        (legacy,) = asked.fingerprints() - {asked.fingerprint()}
        lines = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
        kept = [{**r, "producer": legacy} for r in lines if r["case"] < 6]
        (out / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in kept))
        assert diagnose(out).healthy
        n0 = srv.count
        r = invoke(*respond_args(srv, data, out))
        assert r.exit_code == 0, r.output
        again = sorted(case_of(q.body["messages"][-1]["content"]) for q in srv.requests[n0:])
    assert again == [6, 7, 8]
    assert sorted(c for c, _ in final_records(iter_records(out))) == list(range(9))
    assert diagnose(out).healthy
    # a record of another reader is not this run's, whatever the figures
    other = json.loads((out / "records.jsonl").read_text().splitlines()[0])
    with (out / "records.jsonl").open("a") as fh:
        fh.write(json.dumps({**other, "case": 0, "producer": "fp1:0000000000000000"}) + "\n")
    assert not diagnose(out).healthy and diagnose(out).foreign


def test_a_run_of_one_pair_under_a_long_model_name_reports_without_a_drawing_warning(tmp_path):
    """The report at the end of a tiny run drew its category heatmap with no height for the cells
    (one category under a slanted long name) and printed matplotlib's layout warning twice."""
    data = write_dataset(tmp_path / "cases.json", 2)
    out = tmp_path / "run"
    with FaultServer(answer_fn=chatbot, latency=0.0) as srv:
        args = respond_args(srv, data, out)
        args[args.index("openai/bot-x")] = "openai/a-deployed-chatbot-with-a-long-name"
        args.remove("--no-report")
        r = invoke(*args)
    assert r.exit_code == 0, r.output
    assert (out / "report.html").is_file()
    assert "Warning" not in r.output and "note:" not in r.output, r.output
