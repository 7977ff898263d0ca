"""Provider batch APIs (``casebench.backends.batch``) against a loopback server with OpenAI's
Files and Batches endpoints and Anthropic's Message Batches (``servers/batch_server.py``), with
the real SDKs on the client side: results mapped back by custom_id, partial failures, expiry,
transient trouble while polling, and resume after a kill without paying twice."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from casebench.backends import make_backend
from casebench.backends.base import Answer, GenerationSettings, Request
from casebench.backends.batch import (
    BatchError,
    BatchItemError,
    BatchPending,
    BatchProgress,
    BatchState,
    custom_id,
    mark_collected,
    submit_or_resume,
)
from casebench.runs.pricing import Price, PriceTable, PricingError, read_price_file
from servers.batch_server import BatchServer
from servers.fault_server import FaultServer

REPO = Path(__file__).resolve().parents[1]
SPECS = {"openai": "openai/judge-model", "anthropic": "anthropic/claude-judge"}


def reply(body: dict[str, Any]) -> str:
    """The canned verdict for a request: keyed on its prompt, so each case gets its own."""
    prompt = body["messages"][-1]["content"]
    verdict = "unsafe" if "risky" in prompt else "safe"
    return json.dumps({"judgement": verdict, "explanation": f"About: {prompt}"})


def requests_for(cases: range | list[int], samples: int = 1) -> list[Request]:
    return [Request(case=c, sample=s, prompt=f"case {c}: {'risky' if c % 3 == 0 else 'plain'} question",
                    system="You judge requests.", temperature=0.5)
            for c in cases for s in range(samples)]


def url_for(srv: BatchServer, provider: str) -> str:
    return srv.base_url if provider == "openai" else srv.url


def run_batch(provider: str, srv: BatchServer, requests: list[Request], state: Path,
              progress: list[BatchProgress] | None = None, **kw: Any) -> dict[str, Any]:
    kw.setdefault("poll_interval", 0.01)
    kw.setdefault("max_poll_interval", 0.05)

    async def go() -> dict[str, Any]:
        backend = make_backend(SPECS[provider], base_url=url_for(srv, provider), timeout=5.0)
        try:
            return await submit_or_resume(backend, requests, GenerationSettings(max_tokens=64), state,
                                          progress.append if progress is not None else None, **kw)
        finally:
            await backend.aclose()

    return asyncio.run(go())


@pytest.fixture
def srv() -> Iterator[BatchServer]:
    with BatchServer(answer_fn=reply, polls_to_end=3) as server:
        yield server


providers = pytest.mark.parametrize("provider", ["openai", "anthropic"])


# --------------------------------------------------------------------------- the happy path


@providers
def test_batch_answers_every_request_by_custom_id(srv: BatchServer, tmp_path: Path, provider: str) -> None:
    reqs = requests_for(range(5), samples=2)
    progress: list[BatchProgress] = []
    results = run_batch(provider, srv, reqs, tmp_path / "batch.json", progress)
    assert set(results) == {custom_id(r.case, r.sample) for r in reqs}
    for r in reqs:
        a = results[custom_id(r.case, r.sample)]
        assert isinstance(a, Answer)
        assert json.loads(a.text)["explanation"] == f"About: {r.prompt}"  # each answer is its own request's
        assert a.usage["prompt_tokens"] > 0 and a.usage["completion_tokens"] > 0
        assert a.detail["batch"]["provider"] == provider and a.detail["batch"]["batch_id"]
    assert srv.batches_created == 1
    assert [p.polls for p in progress] == [1, 2, 3] and progress[-1].total == 10 and progress[-1].done == 10
    assert not any(p.resumed for p in progress)
    job = BatchState.load(tmp_path / "batch.json").jobs[0]
    assert job.phase == "ended" and job.failed_ids == [] and job.batch_id == progress[0].batch_id


def test_openai_batch_lines_are_the_online_request_bodies(srv: BatchServer, tmp_path: Path) -> None:
    reqs = requests_for([7])
    settings = GenerationSettings(max_tokens=64)

    async def go(url: str, batch: bool) -> None:
        backend = make_backend(SPECS["openai"], base_url=url, timeout=5.0, extra_body={"top_k": 5})
        try:
            if batch:
                await submit_or_resume(backend, reqs, settings, tmp_path / "b.json", poll_interval=0.01)
            else:
                await backend.answer(reqs, settings)
        finally:
            await backend.aclose()

    with FaultServer() as fs:
        asyncio.run(go(fs.base_url, batch=False))
        online_body = fs.requests[0].body
    asyncio.run(go(srv.base_url, batch=True))
    (line,) = srv.batches["batch_1"]["lines"]
    assert line["custom_id"] == "case-7-sample-0" and line["method"] == "POST"
    assert line["url"] == "/v1/chat/completions"
    assert line["body"] == online_body and online_body["top_k"] == 5
    assert srv.files["file-1"]["purpose"] == "batch"


def test_anthropic_batch_params_carry_the_online_fields(srv: BatchServer, tmp_path: Path) -> None:
    run_batch("anthropic", srv, requests_for([2]), tmp_path / "b.json")
    (line,) = srv.batches["msgbatch_1"]["lines"]
    assert line["custom_id"] == "case-2-sample-0"
    params = line["params"]
    assert params["model"] == "claude-judge" and params["max_tokens"] == 64
    assert params["system"] == "You judge requests."
    assert params["messages"] == [{"role": "user", "content": "case 2: plain question"}]


@providers
def test_batch_requests_carry_the_earlier_turns(srv: BatchServer, tmp_path: Path, provider: str) -> None:
    """Context as turns through a batch API: the same messages as online."""
    (req,) = requests_for([4])
    req = Request(case=4, sample=0, prompt=req.prompt, system=req.system, history=(("I am a nurse.", "Noted."),))
    run_batch(provider, srv, [req], tmp_path / "b.json")
    (line,) = next(iter(srv.batches.values()))["lines"]
    body = line["body"] if provider == "openai" else line["params"]
    turns = [m for m in body["messages"] if m["role"] != "system"]
    assert turns == [{"role": "user", "content": "I am a nurse."}, {"role": "assistant", "content": "Noted."},
                     {"role": "user", "content": req.prompt}]


# --------------------------------------------------------------------------- failures


@providers
def test_partial_failures_come_back_as_errors_and_go_in_a_new_batch(srv: BatchServer, tmp_path: Path,
                                                                     provider: str) -> None:
    reqs = requests_for(range(6))
    srv.fail_ids = {"case-1-sample-0", "case-4-sample-0"}
    state = tmp_path / "batch.json"
    results = run_batch(provider, srv, reqs, state)
    errors = {cid: r for cid, r in results.items() if isinstance(r, BatchItemError)}
    assert set(errors) == srv.fail_ids
    assert {e.kind for e in errors.values()} == {"failed" if provider == "openai" else "errored"}
    assert (errors["case-4-sample-0"].case, errors["case-4-sample-0"].sample) == (4, 0)
    assert BatchState.load(state).jobs[0].failed_ids == sorted(srv.fail_ids)
    # The runner records the 4 answers and asks the 2 failures again, in a new batch.
    srv.fail_ids = set()
    again = [r for r in reqs if custom_id(r.case, r.sample) in errors]
    results2 = run_batch(provider, srv, again, state)
    assert set(results2) == set(errors) and all(isinstance(a, Answer) for a in results2.values())
    assert srv.batches_created == 2
    jobs = BatchState.load(state).jobs
    assert [j.phase for j in jobs] == ["collected", "ended"]
    # Everything recorded: nothing more to ask, nothing submitted.
    assert run_batch(provider, srv, [], state) == {}
    assert srv.batches_created == 2


@providers
def test_expired_items_are_errors_to_ask_again(srv: BatchServer, tmp_path: Path, provider: str) -> None:
    srv.expire_after = 3
    results = run_batch(provider, srv, requests_for(range(5)), tmp_path / "b.json")
    answered = sorted(cid for cid, r in results.items() if isinstance(r, Answer))
    expired = sorted(cid for cid, r in results.items() if isinstance(r, BatchItemError))
    assert answered == [custom_id(c, 0) for c in range(3)]
    assert expired == [custom_id(c, 0) for c in (3, 4)]
    assert all(results[c].kind == "expired" for c in expired)


def test_openai_batch_that_fails_validation_fails_every_item(srv: BatchServer, tmp_path: Path) -> None:
    srv.fail_batch = True
    results = run_batch("openai", srv, requests_for(range(3)), tmp_path / "b.json")
    assert all(isinstance(r, BatchItemError) and r.kind == "failed" for r in results.values())
    assert len(results) == 3
    assert BatchState.load(tmp_path / "b.json").jobs[0].status.startswith("failed (invalid_model")


@providers
def test_transient_trouble_while_polling_is_waited_out(srv: BatchServer, tmp_path: Path, provider: str) -> None:
    srv.poll_faults = 3
    results = run_batch(provider, srv, requests_for(range(2)), tmp_path / "b.json")
    assert all(isinstance(r, Answer) for r in results.values()) and srv.batches_created == 1


@providers
def test_max_wait_leaves_the_batch_to_resume(srv: BatchServer, tmp_path: Path, provider: str) -> None:
    srv.hold = True
    state = tmp_path / "b.json"
    with pytest.raises(BatchPending, match="run again"):
        run_batch(provider, srv, requests_for(range(3)), state, max_wait_s=0.2)
    srv.hold = False
    progress: list[BatchProgress] = []
    results = run_batch(provider, srv, requests_for(range(3)), state, progress)
    assert len(results) == 3 and srv.batches_created == 1 and progress[0].resumed


@providers
def test_an_ended_batch_is_read_again_not_paid_again(srv: BatchServer, tmp_path: Path, provider: str) -> None:
    state = tmp_path / "b.json"
    reqs = requests_for(range(3))
    first = run_batch(provider, srv, reqs, state)
    # Killed after the batch ended but before the answers were recorded: the same requests again.
    second = run_batch(provider, srv, reqs, state)
    assert srv.batches_created == 1
    assert {k: v.text for k, v in first.items()} == {k: v.text for k, v in second.items()}
    # Once they are recorded, new requests go in a new batch.
    run_batch(provider, srv, requests_for([10]), state)
    assert srv.batches_created == 2


def test_mark_collected_lets_answered_items_be_asked_again(srv: BatchServer, tmp_path: Path) -> None:
    state = tmp_path / "b.json"
    reqs = requests_for(range(2))
    run_batch("openai", srv, reqs, state)
    mark_collected(state)  # the runner recorded both; one failed to parse and is asked again
    again = run_batch("openai", srv, reqs[:1], state)
    assert srv.batches_created == 2 and list(again) == [custom_id(0, 0)]
    assert [j.phase for j in BatchState.load(state).jobs] == ["collected", "ended"]
    mark_collected(tmp_path / "none.json")  # no state file: nothing to do


# --------------------------------------------------------------------------- kill and resume


KILL_SCRIPT = textwrap.dedent("""
    import asyncio, sys
    sys.path.insert(0, {tests!r})
    from casebench.backends import make_backend
    from casebench.backends.base import GenerationSettings
    from casebench.backends.batch import submit_or_resume
    from test_batch import requests_for

    async def main():
        backend = make_backend({spec!r}, base_url={url!r}, timeout=5.0)
        await submit_or_resume(backend, requests_for(range(4)), GenerationSettings(max_tokens=64), {state!r},
                               poll_interval=0.02, max_poll_interval=0.02)

    asyncio.run(main())
""")


@providers
def test_kill_during_polling_then_resume_submits_no_second_batch(srv: BatchServer, tmp_path: Path,
                                                                 provider: str) -> None:
    srv.hold = True  # the batch stays in progress until the test lets it end
    state = tmp_path / "batch.json"
    script = KILL_SCRIPT.format(tests=str(REPO / "tests"), spec=SPECS[provider], url=url_for(srv, provider),
                                state=str(state))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO / "tests")])}
    proc = subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while srv.polls < 3 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.02)
        assert proc.poll() is None, proc.stdout.read().decode() if proc.stdout else ""
        assert srv.polls >= 3, "the subprocess never got to polling"
        proc.send_signal(signal.SIGKILL)  # kill -9 mid-poll
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    job = BatchState.load(state).active()
    assert job is not None and job.phase == "submitted" and job.batch_id
    assert srv.batches_created == 1

    srv.hold = False
    progress: list[BatchProgress] = []
    results = run_batch(provider, srv, requests_for(range(4)), state, progress)
    assert srv.batches_created == 1  # resumed polling; did not pay twice
    assert srv.files_created == (2 if provider == "openai" else 0)  # the input file and the output file
    assert progress and all(p.resumed and p.batch_id == job.batch_id for p in progress)
    assert sorted(results) == sorted(custom_id(c, 0) for c in range(4))
    assert all(isinstance(r, Answer) for r in results.values())


@providers
def test_killed_between_create_and_saving_the_id_finds_the_batch(srv: BatchServer, tmp_path: Path,
                                                                 provider: str) -> None:
    srv.hold = True
    state = tmp_path / "b.json"
    with pytest.raises(BatchPending):
        run_batch(provider, srv, requests_for(range(3)), state, max_wait_s=0.05)
    # Rewind the state file to the moment just before the batch id was written.
    st = BatchState.load(state)
    st.jobs[0].phase, st.jobs[0].batch_id = "submitting", None
    st.save(state)
    srv.hold = False
    results = run_batch(provider, srv, requests_for(range(3)), state)
    assert len(results) == 3 and srv.batches_created == 1


def test_killed_before_the_upload_starts_again(srv: BatchServer, tmp_path: Path) -> None:
    state = tmp_path / "b.json"
    run_batch("openai", srv, requests_for([1]), state)
    st = BatchState.load(state)
    st.jobs[0].phase = "uploading"  # as if killed before the batch existed
    st.save(state)
    run_batch("openai", srv, requests_for([1]), state)
    assert [j.phase for j in BatchState.load(state).jobs] == ["abandoned", "ended"]


# --------------------------------------------------------------------------- refusals


def test_state_of_another_provider_is_refused(srv: BatchServer, tmp_path: Path) -> None:
    srv.hold = True
    state = tmp_path / "b.json"
    with pytest.raises(BatchPending):
        run_batch("openai", srv, requests_for([1]), state, max_wait_s=0.05)
    with pytest.raises(BatchError, match="openai batch for model 'judge-model'.*anthropic/claude-judge"):
        run_batch("anthropic", srv, requests_for([1]), state)


def test_unreadable_state_is_refused_not_overwritten(srv: BatchServer, tmp_path: Path) -> None:
    state = tmp_path / "b.json"
    state.write_text("{not json")
    with pytest.raises(BatchError, match="b.json: cannot read the batch state file"):
        run_batch("openai", srv, requests_for([1]), state)
    assert state.read_text() == "{not json" and srv.batches_created == 0


def test_backends_without_a_batch_api_are_refused(tmp_path: Path) -> None:
    class Local:
        spec = "hf/some-model"

    with pytest.raises(BatchError, match="openai/ and anthropic/"):
        asyncio.run(submit_or_resume(Local(), requests_for([1]), GenerationSettings(), tmp_path / "b.json"))


# --------------------------------------------------------------------------- prices


def test_batch_prices_are_half_the_list_prices(tmp_path: Path) -> None:
    table = PriceTable()
    online = table.lookup("openai/gpt-4o-mini")
    batch = table.lookup("openai/gpt-4o-mini", batch=True)
    assert batch.price == Price(online.price.input / 2, online.price.output / 2)
    assert batch.status == "table" and batch.to_dict()["batch"] is True and "batch" not in online.to_dict()
    assert table.lookup("anthropic/claude-3-5-haiku-20241022", batch=True).price == Price(0.40, 2.00)
    assert table.lookup("openai/nobody-knows", batch=True).price == Price(0.0, 0.0)
    # A price file may give batch prices of its own.
    f = tmp_path / "prices.json"
    f.write_text(json.dumps({"my-model": {"input": 1.0, "output": 4.0, "batch_input": 0.7, "batch_output": 3.0}}))
    own = PriceTable(read_price_file(f))
    assert own.lookup("openai/my-model").price.cost(1e6, 1e6) == pytest.approx(5.0)
    assert own.lookup("openai/my-model", batch=True).price.cost(1e6, 1e6) == pytest.approx(3.7)
    f.write_text(json.dumps({"my-model": {"input": 1.0, "output": 4.0, "batch_output": -1}}))
    with pytest.raises(PricingError, match="'my-model', field 'batch_output'"):
        read_price_file(f)


# -------------------------------------------------------------------------------- the runner's --batch


@providers
def test_run_batch_killed_while_polling_resumes_the_same_batch(srv: BatchServer, tmp_path: Path,
                                                               provider: str) -> None:
    """``casebench run --batch`` end to end: killed (-9) while it polls, the same command resumes
    polling the same batch (no second one is created), records every answer once, and counts
    batch prices."""
    from test_runs import write_dataset

    from casebench.runs.record import final_records, iter_records, read_manifest

    data = write_dataset(tmp_path / "cases.json", 6)
    out = tmp_path / "run"
    cmd = [sys.executable, "-c", "from casebench.cli import main; main()", "run", "--model", SPECS[provider],
           "--mode", "binary", "--data", str(data), "--base-url", url_for(srv, provider), "-o", str(out),
           "--batch", "--batch-poll", "0.05", "--no-progress", "--no-report", "--full-answers"]
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), str(REPO / "tests")])
    srv.hold = True
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 90
        while srv.polls < 1 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert proc.poll() is None and srv.polls >= 1, proc.stdout.read().decode() if proc.stdout else ""
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert srv.batches_created == 1 and (out / "batch.json").is_file()
    srv.hold = False
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert srv.batches_created == 1  # resumed polling; did not pay twice
    finals = final_records(iter_records(out))
    assert sorted(c for c, _ in finals) == list(range(6)) and all(r.answered for r in finals.values())
    m = read_manifest(out)
    assert m.history[-1].transport["batch"] is True and m.status.value == "complete"
