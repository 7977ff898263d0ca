"""An unfinished run reads as unfinished, everywhere (``casebench.input_state``).

As a user meets it: a judge run stopped with SIGINT part way, and a run whose server refused the
connection, read back by ``score`` (every format, ``--min-coverage``), ``report``, ``compare``,
``diff`` and ``study`` (real processes, a real loopback server). Each says in its first lines that
the run is incomplete, how many cases are still to ask and the exact command that resumes it, and
marks each of the run's figures as partial; the printed command, run as printed, finishes the run.
"""

from __future__ import annotations

import json
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from casebench.input_state import InputState, state_lines
from casebench.runs.record import final_records, iter_records
from servers.fault_server import FaultServer
from test_cli_run import CASEBENCH, clean_env, record_lines, run_cmd, wait_for_records
from test_runner import binary_answer
from test_runs import write_dataset

CASES = 40


def cb(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*CASEBENCH, *args], env=clean_env(), capture_output=True, text=True, timeout=120,
                          cwd=cwd)


@pytest.fixture(scope="module")
def stopped(tmp_path_factory):
    """A judge run over 40 cases stopped with SIGINT after a few answers (``run``), a complete run
    of the same model over the same cases with the context as the system prompt (``whole``), the
    server (still up, for the resume) and the stopped run's command line."""
    tmp = tmp_path_factory.mktemp("stopped")
    data = write_dataset(tmp / "cases.json", CASES)
    with FaultServer(answer_fn=binary_answer) as srv:
        whole = tmp / "whole"
        done = subprocess.run(run_cmd(srv, data, whole, "--context-as", "system"), env=clean_env(),
                              capture_output=True, text=True, timeout=120, cwd=tmp)
        assert done.returncode == 0, done.stderr
        srv.latency = 0.25
        run = tmp / "run"
        cmd = run_cmd(srv, data, run, "--max-connections", "1")
        proc = subprocess.Popen(cmd, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                cwd=tmp)
        wait_for_records(run, 5, proc)
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)
        assert proc.returncode == 130
        srv.latency = 0.0
        yield {"run": run, "whole": whole, "tmp": tmp, "srv": srv, "cmd": cmd}


def _to_ask(run: Path) -> int:
    finals = final_records(iter_records(run))
    return CASES - len(finals)


def test_score_of_a_stopped_run_says_so_first_with_the_cases_to_ask_and_the_command(stopped, tmp_path):
    run = stopped["run"]
    to_ask = _to_ask(run)
    assert 0 < to_ask < CASES
    done = cb("score", str(run), "--bootstrap", "0", "--no-reference", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    head = done.stdout.splitlines()[:5]
    assert head[0].startswith("INCOMPLETE (interrupted)")
    assert f"{to_ask} of {CASES} cases still to ask" in head[0]
    resume = next(line for line in head if line.strip().startswith("resume: ")).split("resume: ", 1)[1]
    # the exact command: from the directory it ran in, the run's own arguments
    assert resume.startswith(f"cd {shlex.quote(str(stopped['tmp']))} && casebench run ")
    assert shlex.split(resume.split(" && ", 1)[1])[1:] == stopped["cmd"][len(CASEBENCH):]
    # every figure of the run is marked: its name, and the block says on how much it rests
    assert "[binary] (partial)" in done.stdout and "partial: " in done.stdout


def test_every_format_marks_the_figures_partial_and_json_carries_the_state(stopped):
    run = str(stopped["run"])
    js = cb("score", run, "--json", "--bootstrap", "0", "--no-reference")
    assert js.returncode == 0
    d = json.loads(js.stdout.splitlines()[0])
    st = d["state"]
    assert st["complete"] is False and st["status"] == "interrupted"
    assert st["pending"] + st["failed"] == _to_ask(stopped["run"]) and st["failed"] == 0
    assert "casebench run" in st["resume"] and d["name"].endswith("(partial)")
    assert "INCOMPLETE" in js.stderr  # the machine's stdout stays one JSON object per line
    csv_out = cb("score", run, "--format", "csv", "--bootstrap", "0", "--no-reference").stdout
    assert csv_out.splitlines()[0].startswith("name,") and "(partial)" in csv_out.splitlines()[1]
    md = cb("score", run, "--format", "md", "--bootstrap", "0", "--no-reference").stdout
    assert md.startswith("INCOMPLETE") and "(partial) |" in md
    whole = json.loads(cb("score", str(stopped["whole"]), "--json", "--bootstrap", "0",
                          "--no-reference").stdout.splitlines()[0])
    assert whole["state"]["complete"] is True and whole["state"]["resume"] is None
    assert not whole["name"].endswith("(partial)")


def test_min_coverage_applies_to_score(stopped):
    low = cb("score", str(stopped["run"]), "--bootstrap", "0", "--no-reference", "--min-coverage", "0.5")
    assert low.returncode == 3
    assert "below --min-coverage 50%" in low.stderr and "still to ask" in low.stderr
    ok = cb("score", str(stopped["whole"]), "--bootstrap", "0", "--no-reference", "--min-coverage", "0.5")
    assert ok.returncode == 0, ok.stderr


def test_report_compare_diff_and_study_say_it_first(stopped, tmp_path):
    run, whole = str(stopped["run"]), str(stopped["whole"])
    rep = cb("report", run, whole, "-o", str(tmp_path / "r.html"), "--bootstrap", "0", "--no-reference",
             "--no-human")
    assert rep.returncode == 0, rep.stderr
    assert rep.stdout.startswith("INCOMPLETE (interrupted)")
    page = (tmp_path / "r.html").read_text()
    assert "partial-note" in page and "(partial)" in page and "casebench run" in page
    for args in (("compare", whole, run, "--bootstrap", "0"), ("diff", whole, run),
                 ("study", whole, run, "--bootstrap", "0")):
        out = cb(*args)
        assert out.returncode == 0, (args, out.stderr)
        first = out.stdout.splitlines()
        assert first[0].startswith("INCOMPLETE (interrupted)") and f"{run}:" in first[0], args
        assert any("resume: cd " in line for line in first[:4]), args
        assert "(partial)" in out.stdout, args
    js = json.loads(cb("compare", whole, run, "--bootstrap", "0", "--json").stdout)
    assert [i.get("state", {}).get("complete") for i in js["inputs"]] == [True, False]


def test_the_printed_command_resumes_the_run(stopped, tmp_path):
    """Run last in this module (it finishes the run the others read)."""
    run = stopped["run"]
    resume = next(line for line in cb("score", str(run), "--bootstrap", "0", "--no-reference").stdout.splitlines()
                  if "resume: " in line).split("resume: ", 1)[1]
    where, command = resume.split(" && ", 1)
    argv = shlex.split(command)
    assert argv[0] == "casebench"
    n0 = stopped["srv"].count
    done = subprocess.run([*CASEBENCH, *argv[1:]], env=clean_env(), capture_output=True, text=True, timeout=120,
                          cwd=shlex.split(where)[1])
    assert done.returncode == 0, done.stderr
    assert stopped["srv"].count - n0 >= 1
    after = cb("score", str(run), "--bootstrap", "0", "--no-reference")
    assert "INCOMPLETE" not in after.stdout and "(partial)" not in after.stdout
    lines, _ = record_lines(run)
    assert len({r["case"] for r in lines if r.get("final", True)}) == CASES


def test_a_run_that_failed_on_a_refused_connection_says_what_stopped_it(tmp_path):
    data = write_dataset(tmp_path / "cases.json", 4)
    with FaultServer(answer_fn=binary_answer) as srv:
        url = srv.base_url
    # the server is gone: the port refuses connections
    cmd = [*CASEBENCH, "run", "--model", "openai/judge-x", "--mode", "binary", "--data", str(data), "--base-url", url,
           "-o", str(tmp_path / "run"), "--no-progress", "--max-attempts", "2"]
    done = subprocess.run(cmd, env=clean_env(), capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 1
    out = cb("score", str(tmp_path / "run"), "--bootstrap", "0", "--no-reference", cwd=tmp_path)
    head = out.stdout.splitlines()[:5]
    assert head[0].startswith("INCOMPLETE (failed)") and "4 of 4 cases still to ask" in head[0]
    assert any("why: " in line and "refused" in line for line in head)
    assert any(line.strip() == "resume: " + shlex.join(["casebench", *cmd[len(CASEBENCH):]]) for line in head)


def test_the_state_reads_back_and_a_complete_input_prints_nothing():
    st = InputState("runs/x", False, "interrupted", 40, 40, pending=30, failed=5, cases_to_ask=35,
                    reason="interrupted: kept 5 answer(s); re-run the same command to resume", resume="casebench run")
    assert InputState.from_dict({"source": "runs/x", **st.to_dict()}) == st
    assert st.why == "kept 5 answer(s)"
    assert state_lines([None, InputState("runs/y", True, "complete", 4, 4)]) == []
    lines = state_lines([st])
    assert lines[0] == "INCOMPLETE (interrupted): runs/x: 35 of 40 cases still to ask (30 requests not asked, 5 failed)"
    assert lines[2] == "  resume: casebench run"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
