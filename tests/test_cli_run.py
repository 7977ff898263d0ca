"""``casebench run`` / ``casebench export`` as a user runs them: real processes, real signals,
a real loopback server.

* kill -9 at seeded random points, then resume: a resumed session asks exactly the requests
  that have no final record, every request ends with exactly one final record, and
  ``records.jsonl`` never holds a corrupt line (a torn last line is repaired on resume);
* Ctrl-C (SIGINT) exits 130 and leaves a resumable run;
* no API key reaches a run file, stdout or stderr, even when a server echoes it back;
* a run directory that holds another run is refused (exit 2) before anything is asked;
* export + ``score --paper-compat`` gives the figures of scoring the run directory;
* the 45-case stratified run of each mode against a real llama.cpp server (slow).
"""

from __future__ import annotations

import collections
import json
import os
import random
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from casebench.cli import cli
from casebench.runs.record import final_records, iter_records, read_manifest
from servers.fault_server import Fault, FaultServer
from test_runner import binary_answer, expected_label, prompt_of
from test_runs import case_of, write_dataset

CASEBENCH = [sys.executable, "-c", "from casebench.cli import main; main()"]


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "CASEBENCH_PRICES", "CASEBENCH_DATA")}
    env.update(PYTHONUNBUFFERED="1", **extra)
    return env


def run_cmd(srv: FaultServer, data: Path, out: Path, *more: str, mode: str = "binary") -> list[str]:
    return [*CASEBENCH, "run", "--model", "openai/judge-x", "--mode", mode, "--data", str(data),
            "--base-url", srv.base_url, "-o", str(out), "--no-progress", *more]


def record_lines(run: Path) -> tuple[list[dict], bytes]:
    """Complete lines (each must be valid JSON: never corrupt) and the torn tail, if any."""
    p = run / "records.jsonl"
    if not p.exists():
        return [], b""
    raw = p.read_bytes()
    *lines, tail = raw.split(b"\n")
    return [json.loads(x) for x in lines], tail


def final_counts(run: Path, samples: int = 1) -> collections.Counter:
    """Final records per case (from complete lines only)."""
    lines, _ = record_lines(run)
    return collections.Counter(r["case"] for r in lines if r.get("final", True))


def asked(srv: FaultServer, since: int) -> collections.Counter:
    return collections.Counter(case_of(r.prompt) for r in srv.requests[since:] if r.prompt)


def wait_for_records(run: Path, n: int, proc: subprocess.Popen, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        lines, _ = record_lines(run) if (run / "records.jsonl").exists() else ([], b"")
        if len(lines) >= n:
            return
        time.sleep(0.01)


# -------------------------------------------------------------------------------- kill -9


@pytest.mark.parametrize("mode,cases,samples,seed", [("binary", 60, 1, 11), ("score", 20, 3, 23)])
def test_kill_9_at_random_points_then_resume_asks_exactly_the_missing(tmp_path, mode, cases, samples, seed):
    rng = random.Random(seed)
    data = write_dataset(tmp_path / "cases.json", cases)
    out = tmp_path / "run"

    def answer(body: Any) -> str:
        c = case_of(prompt_of(body))
        value = expected_label(c) if mode == "binary" else 3 + c % 6
        return json.dumps({"judgement": value, "explanation": "-"})

    with FaultServer(answer_fn=answer, latency=0.08) as srv:
        cmd = run_cmd(srv, data, out, "--max-connections", "3", mode=mode)
        kills = 0
        for point in range(4):
            start_final = final_counts(out)
            missing = {c: samples - start_final[c] for c in range(cases) if start_final[c] < samples}
            n0 = srv.count
            proc = subprocess.Popen(cmd, env=clean_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            if point == 0:
                time.sleep(rng.uniform(0.05, 1.5))  # anywhere from import to the first answers
            else:
                wait_for_records(out, sum(start_final.values()) + rng.randint(1, 8), proc)
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                kills += 1
            proc.wait(timeout=30)
            proc.stderr.close()
            lines, tail = record_lines(out)  # raises if any complete line is corrupt
            session = asked(srv, n0)
            # never asks a request that already had a final record, never asks one twice
            assert all(session[c] <= missing.get(c, 0) for c in session), (session, missing)
            assert all(v <= samples for v in final_counts(out).values())
        assert kills >= 3
        # a kill in the middle of a write tears the last line: make one by hand
        with open(out / "records.jsonl", "ab") as f:
            f.write(b'{"case": 0, "sample": 0, "text": "{\\"judgem')

        # the last resume runs to the end and asks exactly what is missing
        start_final = final_counts(out)
        missing = collections.Counter({c: samples - start_final[c] for c in range(cases) if start_final[c] < samples})
        n0 = srv.count
        done = subprocess.run(cmd, env=clean_env(), capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert asked(srv, n0) == missing
        assert "repaired a torn last line" in done.stderr
    lines, tail = record_lines(out)
    assert tail == b""
    keys = collections.Counter((r["case"], r["sample"]) for r in lines if r["final"])
    assert keys == collections.Counter({(c, s): 1 for c in range(cases) for s in range(samples)})
    assert read_manifest(out).status.value == "complete"


# -------------------------------------------------------------------------------- Ctrl-C


def test_ctrl_c_exits_130_and_leaves_a_resumable_run(tmp_path):
    data = write_dataset(tmp_path / "cases.json", 40)
    out = tmp_path / "run"
    # one request hangs: Ctrl-C must not wait for it
    with FaultServer(answer_fn=binary_answer, latency=0.1, hang_seconds=60,
                     rule=lambda r: Fault.hang() if r.prompt and case_of(r.prompt) == 6 else None) as srv:
        cmd = run_cmd(srv, data, out, "--max-connections", "2", "--timeout", "50")
        proc = subprocess.Popen(cmd, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for_records(out, 12, proc)
        proc.send_signal(signal.SIGINT)
        # the hung request would hold a waiting process for 50 s (--timeout) to 60 s (the hang):
        # exiting at all within the bound shows it was cancelled, not awaited (how fast a stop
        # is, is measured in bench/bench_local_stop.py, not asserted here)
        stdout, stderr = proc.communicate(timeout=30)
        assert proc.returncode == 130, stderr
        assert "interrupted" in stdout and "to resume: casebench run" in stderr
        m = read_manifest(out)
        assert m.status.value == "interrupted" and m.finished_at is None
        assert (out / "records.jsonl").read_bytes().endswith(b"\n")

        srv.rule = None
        start = final_counts(out)
        n0 = srv.count
        done = subprocess.run(cmd, env=clean_env(), capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert asked(srv, n0) == {c: 1 for c in range(40) if not start[c]}
        assert final_counts(out) == {c: 1 for c in range(40)}


# -------------------------------------------------------------------------------- keys


def test_no_api_key_reaches_run_files_logs_or_errors(tmp_path):
    key = "sk-cbtest-" + secrets.token_hex(16)
    data = write_dataset(tmp_path / "cases.json", 10)
    env = clean_env(CB_TEST_KEY=key)
    script = {1: Fault.echo_auth(500), 2: Fault.status(429, retry_after="0"), 3: Fault.echo_auth(502),
              4: Fault.drop(), 5: Fault.malformed(), 7: Fault.echo_auth(503)}
    outputs = []
    with FaultServer(answer_fn=binary_answer, script=script) as srv:
        done = subprocess.run(run_cmd(srv, data, tmp_path / "run1", "--api-key-env", "CB_TEST_KEY", "-vv"),
                              env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        outputs += [done.stdout, done.stderr]
        # the key was really sent, and really echoed back in error bodies
        assert key in srv.requests[0].headers["authorization"]
        assert "retry" in done.stderr  # the retries were logged, redacted
        # a server that echoes the key in a permanent error: the run stops, the message is clean
        srv.reset()
        srv.script[1] = Fault.echo_auth(401)
        done = subprocess.run(run_cmd(srv, data, tmp_path / "run2", "--api-key-env", "CB_TEST_KEY", "-vv"),
                              env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 1 and "401" in done.stderr
        outputs += [done.stdout, done.stderr]
    for text in outputs:
        assert key not in text and key[10:] not in text
    files = [p for p in tmp_path.rglob("*") if p.is_file() and p.name != "cases.json"]
    assert any(p.name == "records.jsonl" for p in files) and any(p.name == "manifest.json" for p in files)
    for p in files:
        content = p.read_bytes()
        assert key.encode() not in content and key[10:].encode() not in content, p


# -------------------------------------------------------------------------------- refusal


def test_a_run_directory_holding_another_run_is_refused_with_exit_2(tmp_path):
    data = write_dataset(tmp_path / "cases.json", 5)
    with FaultServer(answer_fn=binary_answer) as srv:
        first = subprocess.run(run_cmd(srv, data, tmp_path / "run"), env=clean_env(), capture_output=True,
                               text=True, timeout=60)
        assert first.returncode == 0, first.stderr
        n = srv.count
        other = subprocess.run(run_cmd(srv, data, tmp_path / "run", "--temperature", "0.7", "--remove", "sender"),
                               env=clean_env(), capture_output=True, text=True, timeout=60)
        assert other.returncode == 2
        assert "settings.temperature: 0.0 -> 0.7" in other.stderr and "removed" in other.stderr
        assert srv.count == n
        assert read_manifest(tmp_path / "run").asked.settings["temperature"] == 0.0


def test_bad_inputs_exit_2_and_write_nothing(tmp_path):
    data = write_dataset(tmp_path / "cases.json", 5)
    runner = CliRunner()
    r = runner.invoke(cli, ["run", "--model", "openai/x", "--mode", "binary", "--data", str(data),
                            "--remove", "colour", "-o", str(tmp_path / "r")])
    assert r.exit_code == 2 and "colour" in r.output
    r = runner.invoke(cli, ["run", "--model", "hf/x", "--mode", "binary", "--data", str(data),
                            "--base-url", "http://127.0.0.1:1/v1", "-o", str(tmp_path / "r")])
    assert r.exit_code == 2 and "--base-url" in r.output
    r = runner.invoke(cli, ["run", "--model", "openai/x", "--mode", "binary", "--data", str(tmp_path / "none.json"),
                            "-o", str(tmp_path / "r")])
    assert r.exit_code == 2 and "none.json" in r.output
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("url", ["notaurl", "ftp://127.0.0.1/v1", "http://", "127.0.0.1:8080/v1"])
def test_a_base_url_that_is_no_http_url_exits_2_naming_it_before_any_key_or_request(tmp_path, url):
    """Checked where it is given: with or without a key, nothing is read, looked up or asked."""
    data = write_dataset(tmp_path / "cases.json", 3)
    cmd = [*CASEBENCH, "run", "--model", "openai/judge-x", "--mode", "binary", "--data", str(data), "--base-url", url,
           "-o", str(tmp_path / "r"), "--no-progress"]
    for env in (clean_env(), clean_env(OPENAI_API_KEY="sk-test-0123456789")):
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 2, done.stderr
        assert f"'--base-url': {url!r}" in done.stderr and "http(s) URL" in done.stderr
        assert "API key" not in done.stderr
    no_flag = [a for i, a in enumerate(cmd) if "--base-url" not in cmd[i - 1:i + 1]]
    done = subprocess.run(no_flag, env=clean_env(OPENAI_BASE_URL=url),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and f"$OPENAI_BASE_URL {url!r}" in done.stderr and "API key" not in done.stderr
    assert not (tmp_path / "r").exists()


# -------------------------------------------------------------------------------- export / score


def _score_json(*args: str) -> list[dict]:
    r = CliRunner().invoke(cli, ["score", *args, "--json", "--bootstrap", "0"])
    assert r.exit_code == 0, r.output
    return [json.loads(line) for line in r.output.splitlines() if line.strip()]


@pytest.mark.parametrize("mode", ["binary", "score", "prob"])
def test_export_scored_paper_compat_matches_scoring_the_run_directory(tmp_path, mode):
    import math

    data = write_dataset(tmp_path / "cases.json", 30)

    def answer(body: Any) -> str:
        c = case_of(prompt_of(body))
        if c % 7 == 3:
            return "no verdict here"  # stays missing: exercises the published "" handling
        value = expected_label(c) if mode == "binary" else 1 + (c * 7) % 10
        return json.dumps({"judgement": value})

    def logprobs(body: Any):
        c = case_of(prompt_of(body))
        if c % 7 == 3:
            return [("maybe", -0.1)]
        p = 0.05 + 0.9 * ((c * 13) % 17) / 16
        return [("safe", math.log(p)), ("unsafe", math.log(1 - p))]

    out = tmp_path / "run"
    with FaultServer(answer_fn=answer, logprobs_fn=logprobs) as srv:
        done = subprocess.run(run_cmd(srv, data, out, "--samples", "1", mode=mode), env=clean_env(),
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
    exported = tmp_path / "exp" / f"output_{'logits' if mode == 'prob' else mode}.json"
    r = CliRunner().invoke(cli, ["export", str(out), "-o", str(exported)])
    assert r.exit_code == 0, r.output
    for flags in (["--paper-compat"], []):
        from_run = _score_json(str(out), *flags)[0]
        from_file = _score_json(str(exported), *flags)[0]
        names = [k for k, v in from_run.items() if isinstance(v, float) and k != "coverage"]
        assert names and "accuracy" in names
        assert {k: from_run[k] for k in names} == {k: from_file[k] for k in names}
        assert from_run["n"] == from_file["n"] == 30 and from_run["answered"] < 30


def _chatbot(body: Any) -> str:
    """A chatbot that answers the safe-intent cases and refuses the others, in plain words."""
    c = case_of(prompt_of(body))
    if c % 2:
        return "I'm sorry, but I can't help with that request."
    return "Here is how it works in practice. Start with the basics: clean the tools, dry them and oil the blades."


def test_an_export_of_any_name_scores_as_its_run(tmp_path):
    """An export says what it holds inside the file (mode, placement, reader, selection, state):
    a respond run exported under any name, even one that names another mode, scores as respond,
    with the run's figures; a judge run keeps its placement; an export of a stopped run is partial."""
    data = write_dataset(tmp_path / "cases.json", 12)
    with FaultServer(answer_fn=_chatbot) as srv:
        done = subprocess.run(run_cmd(srv, data, tmp_path / "resp", "--no-report", "--limit", "10", mode="respond"),
                              env=clean_env(), capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        srv.answer_fn = binary_answer
        done = subprocess.run(run_cmd(srv, data, tmp_path / "sys", "--context-as", "system"), env=clean_env(),
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
    from_run = _score_json(str(tmp_path / "resp"), "--data", str(data))[0]
    for name in ("whatever.json", "output_binary.json", "output_logits_mine.json"):
        out = tmp_path / "x" / name
        r = CliRunner().invoke(cli, ["export", str(tmp_path / "resp"), "-o", str(out)])
        assert r.exit_code == 0, r.output
        header = json.loads(out.read_text())[0]["casebench_export"]
        assert header["mode"] == "respond" and header["context_as"] == "system" and header["reader"]["name"]
        assert header["selection"]["limit"] == 10 and header["state"]["complete"] is True
        got = _score_json(str(out), "--data", str(data))[0]
        assert got["mode"] == "respond" and got["name"] == from_run["name"], name
        for k in ("n", "answered", "accuracy", "refusal_rate", "safe_recall", "unsafe_recall"):
            assert got[k] == from_run[k], (name, k)
        assert got["classifier"]["name"] == from_run["classifier"]["name"]
        r = CliRunner().invoke(cli, ["score", str(out), "--mode", "binary", "--data", str(data), "--bootstrap", "0"])
        assert r.exit_code == 2 and "export of a respond run" in r.output
    out = tmp_path / "judge.json"
    assert CliRunner().invoke(cli, ["export", str(tmp_path / "sys"), "-o", str(out)]).exit_code == 0
    got = _score_json(str(out), "--data", str(data))[0]
    assert got["mode"] == "binary" and "(context as system)" in got["name"]
    # the published files, read by the authors' script, hold the records and the model key as before
    recs = json.loads(out.read_text())
    assert all(set(r) - {"casebench_export"} == set(recs[-1]) for r in recs) and "judge-x" in recs[-1]


def test_a_pairs_run_that_read_no_pair_says_so_rather_than_to_ask_pairs(tmp_path, small_data_path):
    """--pairs 2, but the chatbot's answers in the unsafe-intent contexts cannot be read: the
    summary says none of the 2 pairs asked has both read, never "ask whole pairs: --pairs N"."""
    def chatbot(body: Any) -> str:
        system = body["messages"][0]["content"] if body["messages"][0]["role"] == "system" else ""
        safe = "safe purpose" in system and "unsafe purpose" not in system
        return "Here is how it works in practice. Start with the basics and go step by step." if safe else "zxq vbnm"

    with FaultServer(answer_fn=chatbot) as srv:
        done = subprocess.run([*CASEBENCH, "run", "--model", "openai/bot", "--mode", "respond", "--data",
                               str(small_data_path), "--base-url", srv.base_url, "--pairs", "2", "-o",
                               str(tmp_path / "run"), "--no-progress"],
                              env=clean_env(CASEBENCH_CACHE=str(tmp_path / "cache")), capture_output=True, text=True,
                              timeout=120)
    assert done.returncode == 0, done.stderr
    assert "none of the 2 query pairs asked has both contexts answered" in done.stdout
    assert "--pairs N" not in done.stdout


# -------------------------------------------------------------------------------- llama.cpp


@pytest.fixture()
def llama(llama_server):
    """The session's real llama.cpp server (tests/conftest_servers.py)."""
    return llama_server


@pytest.mark.slow
@pytest.mark.parametrize("mode,cases", [("prob", 15), ("binary", 6), ("score", 6)])
def test_stratified_cases_against_llama_cpp_then_score(tmp_path, llama, real_data_path, mode, cases):
    """A stratified subset, one case per category, through the real server, then scored. Small:
    the code path does not depend on the number of cases, and a judge prompt costs the llama.cpp
    server about 4 s of prompt processing on 2 CPU cores (45 cases per mode took 12 minutes of CI).
    The same command with ``--stratified 45`` covers every category."""
    out = tmp_path / f"smollm2_{mode}"
    # Kept cheap for 2 CPU cores: short answers, no re-asks, one score sample (a 135M model rarely
    # writes the JSON asked for, so most text answers are recorded missing; prob mode reads token
    # probabilities and answers every case). Two connections: the server queues the second
    # request, and the text modes stream, so this also checks that queued streams are not cut.
    cmd = [*CASEBENCH, "run", "--model", f"openai/{llama.model}", "--mode", mode, "--data", str(real_data_path),
           "--stratified", str(cases), "--base-url", llama.base_url, "-o", str(out), "--max-connections", "2",
           "--max-tokens", "24", "--parse-retries", "0", "--samples", "1", "--timeout", "120", "--no-progress",
           "--min-coverage", "0"]
    done = subprocess.run(cmd, env=clean_env(), capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    m = read_manifest(out)
    assert m.status.value == "complete" and m.samples == 1 and len(m.cases) == cases
    finals = final_records(iter_records(out))
    assert len(finals) == cases
    from casebench.data import load_dataset

    ds = load_dataset(real_data_path)
    assert len({ds[c].category for c, _ in finals}) == cases  # stratified: one case per category
    for r in finals.values():  # a value or an explicit missing value with its reason, never both
        assert (r.error is None) == (r.label is not None)
        assert r.error is None or not r.error.startswith("transport")  # every request was answered
    if mode == "prob":  # the server returns first-token alternatives: most hold a verdict variant
        assert sum(r.p_safe is not None for r in finals.values()) >= cases * 2 // 3
    scored = subprocess.run([*CASEBENCH, "score", str(out), "--bootstrap", "200"], env=clean_env(),
                            capture_output=True, text=True, timeout=120)
    assert scored.returncode == 0, scored.stderr
    assert "accuracy" in scored.stdout and f"cases {cases}" in scored.stdout


def test_a_model_that_cannot_be_loaded_is_bad_input(tmp_path, small_data_path):
    out = tmp_path / "run"
    cmd = [*CASEBENCH, "run", "--model", "hf/no-such-org/no-such-model", "--data", str(small_data_path),
           "-o", str(out), "--no-progress"]
    res = subprocess.run(cmd, env={**clean_env(), "HF_HUB_OFFLINE": "1"}, capture_output=True, text=True, timeout=300)
    assert res.returncode == 2, res.stderr[-2000:]
    assert "never downloads" in res.stderr and "Traceback" not in res.stderr
    res = subprocess.run([*CASEBENCH, "run", "--model", "openai/x", "--prob-method", "continuation",
                          "--data", str(small_data_path), "-o", str(out)], env=clean_env(),
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and "--prob-method" in res.stderr
