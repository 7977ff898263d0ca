"""Every local answer reaches disk the moment its sequence ends, *through the runner* (issue 24).

The registry once dropped ``Capabilities.per_answer`` from the local backend, so the runner wrote
a batch's records only when the whole batch ended, and the backend's own test (which calls the
backend alone) still passed. These tests run ``casebench run`` as a user does: the embedded
SmolLM2, a small ``--stratified`` subset asked as one batch, ``kill -9`` as soon as the first
record is on disk. No timing: the file is polled, then the process is killed. What they check:

* respond mode, over four queries of our own (``fixtures/answer_lengths.json``) of which two
  get a few words from SmolLM2 (greedy: "2 + 2 = 4") and two run to the token limit: the short
  answers are on disk while the long ones of the same batch are still generating (fewer
  records than the batch when the kill lands; a batch recorded as a whole shows all or none);
* prob mode: the finished answers are on disk when the kill lands;
* both: the lines on disk before the kill stay, byte for byte, and a resume asks only the cases
  without a final record, each once;
* Ctrl-C: the message says how many answers this invocation kept, and that is the number of
  records it added.
"""

from __future__ import annotations

import collections
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from casebench.sources import demo_dataset_path  # noqa: E402
from test_local_stop import lines  # noqa: E402  (the complete, valid lines of records.jsonl)

CASEBENCH = [sys.executable, "-c", "from casebench.cli import main; main()"]
N = 4  # the stratified subset, asked as one batch
#: two queries answered in a few tokens, two that run to the limit (greedy SmolLM2)
LENGTHS = Path(__file__).resolve().parent / "fixtures" / "answer_lengths.json"


@pytest.fixture(scope="module")
def embedded(embedded_model) -> Path:
    return embedded_model


def env() -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if k not in ("CASEBENCH_DATA", "OPENAI_API_KEY")}
    e.update(CASEBENCH_OFFLINE="1", HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1")
    return e


def run_cmd(out: Path, mode: str, *more: str, data: Path | None = None) -> list[str]:
    return [*CASEBENCH, "run", "--mode", mode, "--stratified", str(N), "--data", str(data or demo_dataset_path()),
            "--batch-size", str(N), "-o", str(out), "--no-progress", "--no-report", "--min-coverage", "0", *more]


def wait_for(out: Path, n: int, proc: subprocess.Popen, timeout: float = 1200.0) -> None:
    """Poll until ``n`` lines are on disk or the process ends (the bound only keeps a broken run
    from hanging the suite)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None and len(lines(out)) < n:
        time.sleep(0.02)


def finals(out: Path) -> collections.Counter:
    return collections.Counter(json.loads(x)["case"] for x in lines(out) if json.loads(x).get("final", True))


def kill_after_first_record(out: Path, cmd: list[str]) -> list[bytes]:
    proc = subprocess.Popen(cmd, env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(out, 1, proc)
        assert proc.poll() is None, "the run ended before the kill"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return lines(out)


def resume_and_check(out: Path, cmd: list[str], on_disk: list[bytes]) -> None:
    done = subprocess.run(cmd, env=env(), capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    final = lines(out)
    assert final[: len(on_disk)] == on_disk  # unchanged, byte for byte
    cases = set(finals(out))
    assert len(cases) == N and set(finals(out).values()) == {1}  # every case once: none asked again
    asked_now = {json.loads(x)["case"] for x in final[len(on_disk):]}
    assert asked_now == cases - {json.loads(x)["case"] for x in on_disk}


@pytest.mark.slow
def test_respond_answers_reach_disk_one_by_one_and_survive_kill_9(tmp_path, embedded):
    out = tmp_path / "respond"
    cmd = run_cmd(out, "respond", "--max-tokens", "200", data=LENGTHS)
    on_disk = kill_after_first_record(out, cmd)
    # the kill landed while the batch was still generating: its first answers are on disk, the
    # others were not finished (a batch recorded as a whole would show all N or none)
    assert 1 <= len(on_disk) < N
    assert all(json.loads(x).get("final", True) and json.loads(x)["text"] for x in on_disk)
    resume_and_check(out, cmd, on_disk)


@pytest.mark.slow
def test_prob_answers_on_disk_survive_kill_9_and_are_not_asked_again(tmp_path, embedded):
    out = tmp_path / "prob"
    cmd = run_cmd(out, "prob")
    on_disk = kill_after_first_record(out, cmd)
    assert 1 <= len(on_disk) <= N
    resume_and_check(out, cmd, on_disk)


@pytest.mark.slow
def test_ctrl_c_says_how_many_answers_it_kept_and_the_number_is_true(tmp_path, embedded):
    out = tmp_path / "sigint"
    # the short answers end first; the signal lands while the long ones are generating
    cmd = run_cmd(out, "respond", "--max-tokens", "200", data=LENGTHS)
    proc = subprocess.Popen(cmd, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(out, 1, proc)
        assert proc.poll() is None, "the run ended before it could be interrupted"
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=120)  # a bound against a hang, not a timing test
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, stderr[-3000:]
    said = re.search(r"kept (\d+) answer\(s\) finished in this invocation \((\d+) of (\d+) requests final", stderr)
    assert said, stderr[-3000:]
    kept, final, total = map(int, said.groups())
    on_disk = lines(out)
    assert kept == len(on_disk) == final and total == N and 1 <= kept < N
    resume_and_check(out, cmd, on_disk)
