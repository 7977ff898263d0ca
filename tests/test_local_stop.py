"""Local runs (the embedded SmolLM2 through ``hf/``) lose nothing and stop when asked, as a user
runs them: real processes, real signals, the real model, the shipped demo set.

* every answer is on disk as soon as its sequence ends: ``kill -9`` at seeded random moments,
  then a resume, leaves every case answered exactly once, and nothing written before a kill is
  asked again (the lines on disk before each kill stay, byte for byte, at the head of the file);
* SIGINT during generation ends the process with exit 130 (within a generous bound: this is not
  a timing test; bench/bench_local_stop.py measures the time) with the finished answers on disk,
  the manifest interrupted and the resume command printed; the resume asks only what is missing;
* the backend delivers each sequence's answer at the step it ends, and a cancelled call stops
  generating and drops the sequences it had not finished (tiny seeded model, in process).
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from casebench.runs.record import read_manifest  # noqa: E402
from casebench.sources import demo_dataset_path  # noqa: E402

CASEBENCH = [sys.executable, "-c", "from casebench.cli import main; main()"]
LIMIT = 6


@pytest.fixture(scope="module")
def embedded(embedded_model) -> Path:
    return embedded_model


def env() -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if k not in ("CASEBENCH_DATA", "OPENAI_API_KEY")}
    e.update(CASEBENCH_OFFLINE="1", HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1")
    return e


def run_cmd(out: Path, mode: str, *more: str) -> list[str]:
    return [*CASEBENCH, "run", "--mode", mode, "--limit", str(LIMIT), "--data", str(demo_dataset_path()),
            "-o", str(out), "--no-progress", "--no-report", "--min-coverage", "0", *more]


def lines(out: Path) -> list[bytes]:
    """The complete lines of records.jsonl (each must be a valid record: never corrupt)."""
    p = out / "records.jsonl"
    if not p.exists():
        return []
    *whole, _torn = p.read_bytes().split(b"\n")
    for x in whole:
        json.loads(x)
    return whole


def wait_for(out: Path, n: int, proc: subprocess.Popen, timeout: float = 900.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None and len(lines(out)) < n:
        time.sleep(0.05)


def finals(out: Path) -> collections.Counter:
    return collections.Counter(json.loads(x)["case"] for x in lines(out) if json.loads(x).get("final", True))


@pytest.mark.slow
@pytest.mark.parametrize("mode,more,seed", [("prob", (), 3), ("binary", ("--max-tokens", "24"), 4)])
def test_kill_9_of_a_local_run_then_resume_answers_each_case_exactly_once(tmp_path, embedded, mode, more, seed):
    rng = random.Random(seed)
    out = tmp_path / "run"
    cmd = run_cmd(out, mode, *more)
    kills = 0
    for point in range(2):
        before = lines(out)
        proc = subprocess.Popen(cmd, env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            if point == 0:
                time.sleep(rng.uniform(1.0, 12.0))  # anywhere from start-up to the first answers
            else:  # after one or two more answers, at a seeded moment of the next
                wait_for(out, len(before) + rng.randint(1, 2), proc)
                time.sleep(rng.uniform(0.0, 0.5))
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                kills += 1
        finally:
            proc.wait(timeout=60)
        after = lines(out)
        assert after[: len(before)] == before  # what was on disk stays, as it was
        assert max(finals(out).values(), default=0) <= 1
    assert kills >= 1
    on_disk = lines(out)
    missing = LIMIT - len(finals(out))
    done = subprocess.run(cmd, env=env(), capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    final = lines(out)
    assert final[: len(on_disk)] == on_disk
    assert finals(out) == {c: 1 for c in range(LIMIT)}  # every case once: none asked again
    m = read_manifest(out)
    assert m.status.value == "complete" and m.history[-1].asked >= missing
    # the last invocation asked only the cases without a record (re-asks of unreadable answers aside)
    asked_now = {json.loads(x)["case"] for x in final[len(on_disk):]}
    assert asked_now == set(range(LIMIT)) - {json.loads(x)["case"] for x in on_disk}


@pytest.mark.slow
def test_sigint_during_local_generation_exits_130_with_the_finished_answers_on_disk(tmp_path, embedded):
    out = tmp_path / "run"
    # two batches of two long answers: the signal lands while the second batch is generating
    cmd = run_cmd(out, "binary", "--full-answers", "--max-tokens", "96", "--parse-retries", "0",
                  "--batch-size", "2")
    proc = subprocess.Popen(cmd, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(out, 1, proc)
        assert proc.poll() is None, "the run ended before it could be interrupted"
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=15)  # a generous bound, not a timing test
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, stderr[-3000:]
    assert "interrupted" in stdout and "to resume: casebench run" in stderr
    assert "stopping after the current step" in stderr
    on_disk = lines(out)
    assert 1 <= len(on_disk) < LIMIT and (out / "records.jsonl").read_bytes().endswith(b"\n")
    m = read_manifest(out)
    assert m.status.value == "interrupted" and m.totals.final == len(on_disk)
    done = subprocess.run(cmd, env=env(), capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    assert lines(out)[: len(on_disk)] == on_disk
    assert finals(out) == {c: 1 for c in range(LIMIT)}


# ------------------------------------------------------------------ the backend, in process
def test_each_sequence_is_delivered_when_it_ends_and_a_cancel_drops_the_unfinished(tmp_path):
    """Rows of one batch that end at different steps (each row's stop predicate fires after its
    own number of tokens) are delivered one by one, the first while the others still generate;
    cancelling from that first callback stops the batch: only the row that had ended is
    delivered, the call raises CancelledError, and the backend answers the next call as before."""
    import importlib.util

    from casebench.backends.base import GenerationSettings, Request
    from casebench.backends.hf import HFBackend

    builder = Path(__file__).resolve().parent / "fixtures" / "tiny_model" / "build.py"
    spec = importlib.util.spec_from_file_location("tiny_model_build", builder)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    backend = HFBackend(str(module.build_tiny_model(tmp_path / "tiny")), device="cpu", batch_size=4)

    def stop_after(n: int):
        return lambda text: len(backend.tokenizer.encode(text, add_special_tokens=False)) >= n

    reqs = [Request(case=i, sample=0, prompt=f"question {i}", stop=stop_after(3 + 40 * i)) for i in range(3)]
    settings = GenerationSettings(max_tokens=200)

    # uninterrupted: each answer is delivered once, before the call returns, with its own latency
    got: list[tuple[int, float]] = []
    tokens: list[int] = []

    async def whole():
        return await backend.answer(reqs, settings, on_answer=lambda i, a: got.append((i, a.latency_s)),
                                    on_tokens=tokens.append)

    answers = asyncio.run(whole())
    assert sorted(i for i, _ in got) == [0, 1, 2] and got[0][0] == 0
    assert got[0][1] < got[-1][1]  # the short row's answer took less time than the long row's
    assert sum(tokens) >= sum(a.usage["completion_tokens"] for a in answers)

    # cancelled as soon as the first answer is in: the others are dropped, the model is free again
    delivered: list[int] = []

    async def cancelled():
        task = asyncio.current_task()

        def on_answer(i, a):
            delivered.append(i)
            task.cancel()

        await backend.answer(reqs, settings, on_answer=on_answer)

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(cancelled())
    assert delivered == [0]
    again = asyncio.run(backend.answer(reqs[:1], settings))  # the backend still answers
    assert again[0].text == answers[0].text
    asyncio.run(backend.aclose())


def test_prob_batches_grow_to_the_time_target_and_no_further(tmp_path):
    """With the default batch size, the first prob batch is one prompt (nothing measured yet),
    later ones as many as fit in ``prob_batch_seconds`` at the measured pace, capped by
    ``prob_batch_size``; an explicit batch size is taken as is."""
    import importlib.util

    from casebench.backends.base import GenerationSettings, Request
    from casebench.backends.hf import HFBackend

    builder = Path(__file__).resolve().parent / "fixtures" / "tiny_model" / "build.py"
    spec = importlib.util.spec_from_file_location("tiny_model_build", builder)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    folder = module.build_tiny_model(tmp_path / "tiny")
    reqs = [Request(case=i, sample=0, prompt=f"question number {i}", want="p_safe") for i in range(12)]

    def sizes(backend: HFBackend) -> list[int]:
        answers = asyncio.run(backend.answer(reqs, GenerationSettings()))
        return [a.detail["batch_prompts"] for a in answers]

    adaptive = HFBackend(str(folder), device="cpu")
    assert adaptive.prob_batch_seconds is not None
    adaptive.prob_batch_size = 4  # the cap (a GPU's default would be 16)
    got = sizes(adaptive)
    assert got.count(1) >= 1 and max(got) == 4  # a probe of one, then full batches: the tiny model is fast
    adaptive.prob_batch_seconds = 1e-12  # a target no batch meets: one prompt at a time
    assert set(sizes(adaptive)) == {1}
    fixed = HFBackend(str(folder), device="cpu", batch_size=4)
    assert fixed.prob_batch_seconds is None and set(sizes(fixed)) == {4}


def test_generation_batches_are_sized_to_the_time_target(tmp_path):
    """With the default sizes, the first generation batch is ``FIRST_GENERATION_BATCH`` rows
    (nothing measured yet), later ones as many as fit in ``generation_batch_seconds`` at the
    measured step time, capped by ``generation_batch_size``; a target no batch meets gives one
    row at a time; an explicit size is taken as is."""
    import importlib.util

    from casebench.backends.base import GenerationSettings, Request
    from casebench.backends.hf import FIRST_GENERATION_BATCH, HFBackend

    builder = Path(__file__).resolve().parent / "fixtures" / "tiny_model" / "build.py"
    spec = importlib.util.spec_from_file_location("tiny_model_build", builder)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    folder = module.build_tiny_model(tmp_path / "tiny")
    reqs = [Request(case=i, sample=0, prompt=f"question number {i}") for i in range(12)]

    def sizes(backend: HFBackend) -> list[int]:
        answers = asyncio.run(backend.answer(reqs, GenerationSettings(max_tokens=8)))
        return [a.detail["batch_sequences"] for a in answers]

    adaptive = HFBackend(str(folder), device="cpu")
    assert adaptive.generation_batch_seconds is not None
    adaptive.generation_batch_size = 4
    got = sizes(adaptive)
    assert got[:FIRST_GENERATION_BATCH] == [FIRST_GENERATION_BATCH] * FIRST_GENERATION_BATCH and max(got) == 4
    assert "adaptive" in adaptive.describe()["generation_batch"]
    adaptive.generation_batch_seconds = 1e-12  # no batch meets it: one row at a time
    assert set(sizes(adaptive)) == {1}
    fixed = HFBackend(str(folder), device="cpu", generation_batch_size=4)
    assert fixed.generation_batch_seconds is None and set(sizes(fixed)) == {4}
    for b in (adaptive, fixed):
        asyncio.run(b.aclose())


@pytest.mark.slow
def test_a_stopped_embedded_respond_run_keeps_its_finished_batches_and_said_an_eta_from_tokens(tmp_path, embedded):
    """The embedded SmolLM2 answering as the chatbot (the main job's respond mode): the run offers
    an ETA from the token rate before any answer measures it, and a Ctrl-C after the first batches
    keeps every answer of the batches that ended."""
    import threading

    out = tmp_path / "run"
    cmd = [*CASEBENCH, "run", "--limit", "12", "--data", str(demo_dataset_path()), "-o", str(out), "--no-report",
           "--min-coverage", "0", "--max-tokens", "64"]
    proc = subprocess.Popen(cmd, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    said: list[str] = []
    reader = threading.Thread(target=lambda: said.extend(iter(proc.stderr.readline, "")), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 900
        while proc.poll() is None and time.monotonic() < deadline and not (
                len(lines(out)) >= 2 and any("expected duration: " in x for x in said)):
            time.sleep(0.05)
        assert proc.poll() is None, "the run ended before it could be interrupted"
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)  # a generous bound, not a timing test
        reader.join(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, "".join(said)[-3000:]
    # the token rate is on offer before any answer (when the first batch outlasts
    # TOKEN_RATE_AFTER_S of decoding, which rests on the machine's speed: its arithmetic is
    # tested on a clock of its own in test_runs_progress); whichever came first was said once
    assert any("the expected duration follows, measured on this run's token rate, then its first batch" in x
               for x in said), "".join(said)[-3000:]
    etas = [x for x in said if "expected duration: " in x]
    by_tokens = [x for x in etas if "measured on this run's token rate" in x]
    by_answers = [x for x in etas if "measured on this run's first" in x]
    assert len(by_tokens) <= 1 and len(by_answers) <= 1 and len(etas) == len(by_tokens) + len(by_answers)
    assert all("tokens still to generate" in x for x in by_tokens)
    assert not by_tokens or etas[0] == by_tokens[0]  # the token rate only speaks before the answers
    recs = [json.loads(x) for x in lines(out)]
    # whole batches kept: at least the first batch's rows, each with its answer
    assert len(recs) >= recs[0]["detail"]["batch_sequences"] >= 1 and all(r.get("text") for r in recs)
    assert read_manifest(out).totals.final == len(recs)
