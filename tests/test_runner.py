"""The runner against a real loopback server through the real OpenAI backend: faults, retries,
parse re-asks, resume, modes, budget, batching, case selection and prices.

The scripted server answers each prompt by the ``[case i]`` marker of its invented query, so
every expected value below follows from the answer rule, not from the runner's output.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import math
import threading
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pytest

from casebench.backends.base import Answer, Capabilities, GenerationSettings, Request
from casebench.data import load_dataset
from casebench.runs.pricing import BUILTIN_PRICES, Price, PriceTable, PricingError, read_price_file
from casebench.runs.execute import RetryPolicy, RunConfig, prepare, run, stratified_indices
from casebench.runs.record import (
    ManifestMismatch, RunDir, RunError, RunLocked, final_records, iter_records, read_manifest, usage_tokens,
)
from casebench.runs.results import load_run

from servers.fault_server import Fault, FaultServer
from test_runs import case_of, write_dataset

FAST_RETRY = RetryPolicy(max_attempts=8, base_s=0.02, cap_s=0.2)


def prompt_of(body: Any) -> str:
    """The question's user message: the last one carrying a case marker (a repair re-ask ends
    with the repair message, after the question and the unreadable answer)."""
    users = [m["content"] for m in body["messages"] if m.get("role") == "user"]
    return next((u for u in reversed(users) if "[case " in u), users[-1])


def expected_label(case: int) -> str:
    return "unsafe" if case % 3 == 0 else "safe"


def binary_answer(body: Any) -> str:
    c = case_of(prompt_of(body))
    return json.dumps({"judgement": expected_label(c), "explanation": f"rule for case {c}"})


@pytest.fixture(autouse=True)
def _no_real_keys(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("CASEBENCH_PRICES", raising=False)


@pytest.fixture
def server():
    with FaultServer(answer_fn=binary_answer, hang_seconds=10) as srv:
        yield srv


@pytest.fixture
def data(tmp_path) -> Path:
    return write_dataset(tmp_path / "cases.json", 12)


def config(srv: FaultServer, tmp_path: Path, data: Path, **kw: Any) -> RunConfig:
    base: dict[str, Any] = dict(
        mode="binary", model="openai/judge-x", data=data, out=tmp_path / "run",
        backend_options={"base_url": srv.base_url, "timeout": 1.0},
        retry=FAST_RETRY, progress=False, max_connections=4,
    )
    base.update(kw)
    return RunConfig(**base)


def asked_cases(srv: FaultServer, since: int = 0) -> collections.Counter:
    return collections.Counter(case_of(r.prompt) for r in srv.requests[since:] if r.prompt)


def records(run: Path):
    return list(iter_records(run))


# -------------------------------------------------------------------------------- faults


def test_every_fault_is_survived_and_none_is_recorded_as_a_judgement(server, tmp_path, data):
    faults = {
        2: Fault.status(429, retry_after="0.4"),
        3: Fault.status(500),
        4: Fault.status(502),
        5: Fault.status(503, retry_after="0"),
        6: Fault.hang(),  # the backend's 1 s timeout ends it
        7: Fault.malformed(),
        8: Fault.respond(200, {"choices": []}),
        9: Fault.drop(),
        10: Fault.status(429),
        12: Fault.respond(200, {"unexpected": "shape"}),
    }
    server.script.update(faults)
    server.latency = 0.05
    waits: list[tuple[float | None, float]] = []

    @dataclasses.dataclass
    class Recording(RetryPolicy):
        """The fast policy, noting each (Retry-After, wait) the runner asks it for."""

        def delay(self, attempt, retry_after, rng):
            wait = super().delay(attempt, retry_after, rng)
            waits.append((retry_after, wait))
            return wait

    retry = Recording(**FAST_RETRY.to_dict())
    summary = run(config(server, tmp_path, data, retry=retry))
    assert summary.status == "complete" and summary.exit_code == 0
    assert server.count == 12 + len(faults)  # each fault cost exactly one extra request
    assert summary.retries == len(faults)
    recs = records(tmp_path / "run")
    assert len(recs) == 12 and all(r.final and r.error is None for r in recs)
    assert {r.case: r.label for r in recs} == {c: expected_label(c) for c in range(12)}
    # Retry-After was honoured: the 429's "0.4" reached the policy, which waited at least that
    # long (the fast policy's own backoff is at most 0.2 s); a "0" changes nothing. (How long the
    # waits take on the clock: bench/bench_timing.py.)
    assert len(waits) == len(faults)
    assert [w for ra, w in waits if ra == 0.4] and all(w >= 0.4 for ra, w in waits if ra == 0.4)
    assert all(w <= FAST_RETRY.cap_s for ra, w in waits if ra != 0.4)
    m = read_manifest(tmp_path / "run")
    assert m.status.value == "complete" and m.history[-1].retries == len(faults)


def test_unparseable_answers_are_reasked_then_recorded_missing_with_their_text(server, tmp_path, data):
    seen: collections.Counter = collections.Counter()
    lock = threading.Lock()

    def answer(body: Any) -> str:
        c = case_of(prompt_of(body))
        with lock:
            seen[c] += 1
            k = seen[c]
        if c == 0:
            return "I would rather not say."
        if c == 1 and k <= 2:
            return '{"judgement": "perhaps"}'
        return binary_answer(body)

    server.answer_fn = answer
    summary = run(config(server, tmp_path, data, parse_retries=2, reask="same"))  # the paper's re-ask
    assert summary.status == "complete"
    assert asked_cases(server)[0] == 3 and asked_cases(server)[1] == 3
    assert server.count == 12 + 2 + 2
    finals = final_records(records(tmp_path / "run"))
    missing = finals[(0, 0)]
    assert missing.label is None and missing.text == "I would rather not say."
    assert missing.error == "no JSON object in the answer" and missing.attempts == 3
    assert finals[(1, 0)].label == expected_label(1) and finals[(1, 0)].attempts == 3
    pred = load_run(tmp_path / "run")
    assert math.isnan(pred.label[0]) and pred.answered.sum() == 11
    # usage counts every ask, re-asks included
    # (the scripted server counts a word or a punctuation mark as a token)
    from servers.stream_server import pieces

    assert usage_tokens(missing.usage)[1] == 3 * len(pieces("I would rather not say."))


def test_spent_transport_retries_leave_a_non_final_record_that_resume_asks_again(server, tmp_path, data):
    server.rule = lambda rec: Fault.status(503) if rec.prompt and case_of(rec.prompt) == 3 else None
    cfg = config(server, tmp_path, data, retry=RetryPolicy(max_attempts=3, base_s=0.01, cap_s=0.05))
    summary = run(cfg)
    assert summary.status == "incomplete" and summary.exit_code == 1 and summary.pending == 1
    assert asked_cases(server)[3] == 3
    recs = records(tmp_path / "run")
    failed = [r for r in recs if r.case == 3]
    assert len(failed) == 1 and failed[0].final is False and failed[0].error.startswith("transport: HTTP 503")
    assert failed[0].label is None
    pred = load_run(tmp_path / "run")
    assert math.isnan(pred.label[3]) and pred.pending == 1

    server.rule = None
    before = server.count
    summary = run(cfg)
    assert summary.status == "complete" and summary.asked_this_session == 1
    assert asked_cases(server, before) == {3: 1}
    finals = [r for r in records(tmp_path / "run") if r.final]
    assert sorted(r.case for r in finals) == list(range(12))
    assert load_run(tmp_path / "run").label[3] == (1.0 if expected_label(3) == "safe" else 0.0)


def test_a_permanent_error_stops_the_run_and_keeps_what_is_done(server, tmp_path, data):
    server.rule = lambda rec: Fault.status(401) if rec.prompt and case_of(rec.prompt) == 2 else None
    cfg = config(server, tmp_path, data, max_connections=1)
    summary = run(cfg)
    assert summary.status == "failed" and summary.exit_code == 1
    assert "401" in summary.message
    assert asked_cases(server)[2] == 1  # not retried
    recs = records(tmp_path / "run")
    assert sorted(r.case for r in recs) == [0, 1]
    assert read_manifest(tmp_path / "run").status.value == "failed"

    server.rule = None
    before = server.count
    summary = run(cfg)
    assert summary.status == "complete"
    assert asked_cases(server, before) == {c: 1 for c in range(2, 12)}


def test_a_dropped_connection_on_every_try_is_never_a_judgement(server, tmp_path, data):
    server.rule = lambda rec: Fault.drop() if rec.prompt and case_of(rec.prompt) == 5 else None
    summary = run(config(server, tmp_path, data, retry=RetryPolicy(max_attempts=2, base_s=0.01, cap_s=0.02)))
    assert summary.status == "incomplete"
    assert summary.answered == 11 and summary.missing == 0  # a transport failure is not "missing"
    assert not [r for r in records(tmp_path / "run") if r.case == 5 and r.final]


# -------------------------------------------------------------------------------- modes


def test_prob_mode_reads_p_safe_and_a_missing_p_is_final(server, tmp_path, data):
    def logprobs(body: Any):
        c = case_of(prompt_of(body))
        if c == 4:
            return [("sure", -0.1), ("maybe", -2.5)]
        if c % 2 == 0:
            return [("safe", math.log(0.8)), ("unsafe", math.log(0.2))]
        return [("unsafe", math.log(0.7)), ("safe", math.log(0.3))]

    server.logprobs_fn = logprobs
    summary = run(config(server, tmp_path, data, mode="prob"))
    assert summary.status == "complete"
    assert asked_cases(server) == {c: 1 for c in range(12)}  # the missing one was not re-asked
    assert all(r.body.get("logprobs") is True for r in server.requests)
    pred = load_run(tmp_path / "run")
    want = [np.nan if c == 4 else 0.8 if c % 2 == 0 else 0.3 for c in range(12)]
    np.testing.assert_allclose(pred.value, want, atol=1e-9)
    miss = final_records(records(tmp_path / "run"))[(4, 0)]
    assert miss.final and miss.p_safe is None and miss.error


def test_score_mode_defaults_to_three_samples_at_temperature_one_and_averages(server, tmp_path, data):
    served: dict[int, int] = collections.defaultdict(int)
    lock = threading.Lock()

    def answer(body: Any) -> str:
        c = case_of(prompt_of(body))
        with lock:
            k = served[c]
            served[c] += 1
        if c == 1:
            value = ["no idea", 4, 6, 10][k]
        else:
            value = [2, 5, 8][k]
        return value if isinstance(value, str) else json.dumps({"judgement": value, "explanation": "-"})

    server.answer_fn = answer
    summary = run(config(server, tmp_path, data, mode="score"))
    assert summary.status == "complete" and summary.requests == 36
    assert server.count == 37
    assert {r.body["temperature"] for r in server.requests} == {1.0}
    m = read_manifest(tmp_path / "run")
    assert m.samples == 3 and m.asked.settings["temperature"] == 1.0 and m.asked.parse_retries == 2
    pred = load_run(tmp_path / "run")
    want = [5.0] * 12
    want[1] = (4 + 6 + 10) / 3
    np.testing.assert_allclose(pred.value, want)
    samples = sorted((r.case, r.sample) for r in records(tmp_path / "run"))
    assert samples == [(c, s) for c in range(12) for s in range(3)]


class BatchEcho:
    """A batched backend implementing the protocol in-process (for the batching logic only):
    it answers by the case marker and records the batches it was given."""

    spec = "local/batch-echo"
    capabilities = Capabilities(generate=True, token_probs=False)
    batch_size = 3

    def __init__(self) -> None:
        self.batches: list[list[Request]] = []

    async def answer(self, requests: Sequence[Request], settings: GenerationSettings) -> list[Answer]:
        self.batches.append(list(requests))
        out = []
        for r in requests:
            c = r.case  # a re-ask's last message is the repair message, without the case marker
            first = sum(1 for b in self.batches for q in b if q.case == c) == 1
            text = "garbled" if c == 2 and first else json.dumps({"judgement": expected_label(c)})
            out.append(Answer(text=text, usage={"prompt_tokens": 10, "completion_tokens": 3}))
        return out

    def describe(self) -> dict[str, Any]:
        return {"backend": "batch-echo"}

    async def aclose(self) -> None:
        pass


def test_a_batched_backend_gets_length_sorted_batches_and_reasks_regrouped(tmp_path, data):
    backend = BatchEcho()
    cfg = RunConfig(mode="binary", model="local/batch-echo", data=data, out=tmp_path / "run", progress=False)
    summary = run(cfg, backend=backend)
    assert summary.status == "complete"
    assert all(1 <= len(b) <= 3 for b in backend.batches)
    first_round = [q for b in backend.batches for q in b][:12]
    lengths = [len(q.prompt) for q in first_round]
    assert lengths == sorted(lengths)
    assert sum(len(b) for b in backend.batches) == 13  # case 2 re-asked once
    assert backend.batches[-1][0].case == 2
    assert {r.case: r.label for r in records(tmp_path / "run")} == {c: expected_label(c) for c in range(12)}


# -------------------------------------------------------------------------------- resume and refusal


def test_resume_of_a_complete_run_asks_nothing_and_a_different_command_is_refused(server, tmp_path, data):
    cfg = config(server, tmp_path, data, limit=5)
    assert run(cfg).status == "complete"
    assert server.count == 5
    again = run(cfg)
    assert again.status == "complete" and again.asked_this_session == 0 and server.count == 5
    # a run grows to a larger nested selection (tests/test_runs_grow.py), never shrinks
    for change, field in [({"limit": 4}, "--limit 4 is smaller than the run's 5"), ({"temperature": 0.3}, "settings.temperature"),
                          ({"removed": "urgency"}, "removed"), ({"model": "openai/other"}, "model"),
                          ({"parse_retries": 1}, "parse_retries")]:
        with pytest.raises(ManifestMismatch) as e:
            run(config(server, tmp_path, data, **{"limit": 5, **change}))
        assert field in str(e.value)
    with pytest.raises(ManifestMismatch, match="dataset.sha256"):
        run(config(server, tmp_path, write_dataset(tmp_path / "other.json", 7), limit=5))
    assert server.count == 5


def test_a_locked_run_directory_is_refused(server, tmp_path, data):
    (tmp_path / "run").mkdir()
    with RunDir(tmp_path / "run"):
        with pytest.raises(RunLocked):
            run(config(server, tmp_path, data))
    assert server.count == 0


def test_max_cost_stops_before_passing_the_limit_and_resume_goes_on(server, tmp_path, data):
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"judge-x": {"input": 1000.0, "output": 1000.0}}))  # $0.001 per token
    table = PriceTable.load(prices)
    cfg = config(server, tmp_path, data, max_cost=1.0, prices=table, max_tokens=40, max_connections=1)
    summary = first = run(cfg)
    assert summary.status == "budget" and summary.exit_code == 1 and "--max-cost" in summary.message
    assert 0 < summary.final < 12 and summary.pending == 12 - summary.final
    # the spend, from the records and the price alone, stays within the limit
    spent = sum(Price(1000.0, 1000.0).cost(*usage_tokens(r.usage)) for r in records(tmp_path / "run"))
    assert spent == pytest.approx(summary.cost_usd) and spent <= 1.0
    assert server.count == summary.final
    m = read_manifest(tmp_path / "run")
    assert m.status.value == "budget" and m.totals.cost_usd == pytest.approx(spent, abs=1e-6)
    assert m.price["status"] == "table"

    before = server.count
    summary = run(config(server, tmp_path, data, max_cost=100.0, prices=table, max_tokens=40, max_connections=1))
    assert summary.status == "complete" and server.count - before == 12 - first.final


def test_every_default_is_recorded_in_the_manifest(server, tmp_path, data):
    run(config(server, tmp_path, data, mode="binary", stratified=6, selection_seed=3))
    m = read_manifest(tmp_path / "run")
    assert m.asked.settings == GenerationSettings(temperature=0.0).to_dict()
    assert m.samples == 1 and m.asked.parse_retries == 2 and m.removed == ()
    assert m.selection.how == "stratified=6 seed=3" and len(m.cases) == 6
    assert m.dataset.sha256 == load_dataset(data).sha256 == m.asked.dataset_sha256
    assert m.templates_source == "builtin" and len(m.asked.template_sha256) == 64
    assert m.asked.context_as == "user" and m.asked.stop_at_verdict is True
    # every answer-changing backend option, defaults resolved; transport options per invocation
    assert m.asked.backend_options["token_limit_field"] == "max_tokens"
    assert "base_url" not in m.asked.backend_options and m.history[0].transport["base_url"] == server.base_url
    assert m.history[0].backend["backend"] == "openai" and m.price["status"] == "local"
    assert m.history[0].host and m.history[0].pid and m.history[0].finished_at
    assert m.retry["max_attempts"] == FAST_RETRY.max_attempts
    assert m.created_at and m.finished_at and m.totals.requests == 6


# -------------------------------------------------------------------------------- selection


def test_stratified_45_of_the_published_data_is_one_per_category(real_dataset):
    idx = stratified_indices(real_dataset, 45, seed=0)
    cats = collections.Counter(real_dataset[i].category for i in idx)
    assert len(idx) == 45 and len(cats) == 45 and set(cats.values()) == {1}
    assert idx == sorted(idx) and idx == stratified_indices(real_dataset, 45, seed=0)
    assert idx != stratified_indices(real_dataset, 45, seed=1)
    idx90 = stratified_indices(real_dataset, 90, seed=7)
    strata = collections.Counter((real_dataset[i].category, real_dataset[i].intended_safe) for i in idx90)
    assert len(strata) == 90 and set(strata.values()) == {1}


def test_stratified_is_proportional_on_uneven_strata(tmp_path):
    recs = json.loads(write_dataset(tmp_path / "a.json", 40, ("big",)).read_text())
    recs += json.loads(write_dataset(tmp_path / "b.json", 10, ("small",)).read_text())
    (tmp_path / "c.json").write_text(json.dumps(recs))
    ds = load_dataset(tmp_path / "c.json")
    idx = stratified_indices(ds, 10, seed=5)
    counts = collections.Counter((ds[i].category, ds[i].intended_safe) for i in idx)
    assert counts[("big", True)] == 4 and counts[("big", False)] == 4
    assert counts[("small", True)] == 1 and counts[("small", False)] == 1
    with pytest.raises(RunError):
        stratified_indices(ds, 51)


def test_selection_options(tmp_path, data):
    ds = load_dataset(data)
    assert prepare(RunConfig(mode="binary", data=data, limit=4)).cases == [0, 1, 2, 3]
    assert prepare(RunConfig(mode="binary", data=data, cases=[7, 2, 2])).cases == [2, 7]
    assert prepare(RunConfig(mode="binary", data=data)).cases == list(range(len(ds)))
    with pytest.raises(RunError, match="choose one of"):
        prepare(RunConfig(mode="binary", data=data, limit=3, stratified=4))
    with pytest.raises(RunError, match="not in the dataset"):
        prepare(RunConfig(mode="binary", data=data, cases=[99]))


def test_data_path_comes_from_the_option_or_the_environment(monkeypatch, data):
    from casebench.runs.execute import resolve_data_path

    monkeypatch.delenv("CASEBENCH_DATA", raising=False)
    with pytest.raises(RunError, match="CASEBENCH_DATA"):
        resolve_data_path(None)
    monkeypatch.setenv("CASEBENCH_DATA", str(data))
    assert resolve_data_path(None) == data
    assert resolve_data_path("x.json") == Path("x.json")


# -------------------------------------------------------------------------------- prices


def test_price_lookup():
    table = PriceTable({"openai/my-tune": Price(0.3, 1.2)})
    assert table.lookup("openai/gpt-4o-mini").price == BUILTIN_PRICES["gpt-4o-mini"]
    dated = table.lookup("openai/gpt-4o-mini-2024-07-18")
    assert dated.key == "gpt-4o-mini" and dated.status == "table"  # not gpt-4o
    assert table.lookup("openai/my-tune").price == Price(0.3, 1.2)
    assert table.lookup("openai/mystery").status == "unknown"
    assert table.lookup("openai/mystery").price.cost(1e6, 1e6) == 0.0
    assert table.lookup("hf/smollm2-135m-instruct").status == "local"
    assert Price(2.0, 8.0).cost(1_000_000, 500_000) == pytest.approx(6.0)


def test_price_files_extend_and_override_and_errors_name_the_entry(tmp_path, monkeypatch):
    f = tmp_path / "p.json"
    f.write_text(json.dumps({"gpt-4o": {"input": 1, "output": 2}, "new-model": {"input": 0.5, "output": 0.5}}))
    monkeypatch.setenv("CASEBENCH_PRICES", str(f))
    t = PriceTable.load()
    assert t.lookup("openai/gpt-4o").price == Price(1.0, 2.0)
    assert t.lookup("anthropic/new-model").price == Price(0.5, 0.5)
    f.write_text(json.dumps({"m": {"input": "cheap", "output": 1}}))
    with pytest.raises(PricingError, match=r"p\.json: model 'm', field 'input'"):
        read_price_file(f)
    with pytest.raises(PricingError, match="not found"):
        read_price_file(tmp_path / "none.json")


# -------------------------------------------------------------------------------- stop at the verdict, shared samples


def test_score_samples_share_one_request_and_answers_stop_at_the_verdict(tmp_path, data):
    """Through an OpenAI-compatible server with ``n``: the 3 score samples of a case are one
    request, each stream is closed once the verdict is in, and the verdicts are those of the
    full answers (``--full-answers``)."""
    from servers.stream_server import StreamServer

    def answer_n(body: Any, index: int) -> str:
        c = case_of(body["messages"][-1]["content"])
        return json.dumps({"judgement": 2 + (c + index) % 8, "explanation": "a long explanation " * 20})

    with StreamServer(answer_n_fn=answer_n, latency=0.0) as srv:
        cfg = config(srv, tmp_path, data, mode="score", limit=4)
        summary = run(cfg)
        assert summary.status == "complete"
        bodies = [r.body for r in srv.requests if r.body and r.path.endswith("/chat/completions")]
        assert len(bodies) == 4 and all(b.get("n") == 3 and b.get("stream") for b in bodies)
        assert all(s.sent < s.total for s in srv.streams)  # every stream closed early
        stopped = {k: r.score for k, r in final_records(iter_records(tmp_path / "run")).items()}
        full = run(config(srv, tmp_path, data, mode="score", limit=4, full_answers=True,
                          out=tmp_path / "full"))
        assert full.status == "complete"
    whole = {k: r.score for k, r in final_records(iter_records(tmp_path / "full")).items()}
    assert stopped == whole and len(stopped) == 12
    assert read_manifest(tmp_path / "run").asked.stop_at_verdict is True
    assert read_manifest(tmp_path / "full").asked.stop_at_verdict is False


def test_the_per_call_time_limit_is_a_run_setting_not_the_clis():
    """Issue 24: the Python API gets the same per-call limit as ``casebench run``: the config's
    own value, else twice a remote backend's transport timeout plus 10 s, none for a local one."""
    from casebench.runs.config import RunConfig

    assert RunConfig(mode="binary", model="openai/m").call_limit_s == 130.0
    assert RunConfig(mode="binary", model="openai/m", backend_options={"timeout": 5}).call_limit_s == 20.0
    assert RunConfig(mode="binary", model="openai/m", call_timeout=3).call_limit_s == 3.0
    assert RunConfig(mode="prob", model="hf/smollm2-135m-instruct").call_limit_s is None


def test_a_run_config_takes_a_mode_object_and_passes_it_along(tmp_path):
    """The mode is resolved once (``RunConfig.mode_spec``) and that object is what the run uses:
    a Mode instance that was never registered (built in a notebook, say) is taken as it is."""
    from dataclasses import replace

    from casebench.modes import BinaryMode
    from casebench.runs.config import RunConfig
    from casebench.runs.execute import prepare

    class Strict(BinaryMode):
        name = file_name = "strict-unregistered"

    mine = Strict()
    cfg = RunConfig(mode=mine, model="openai/m", data=str(Path(__file__).parent / "fixtures" / "small_cases.json"),
                    out=str(tmp_path / "r"))
    assert cfg.mode_spec is mine and replace(cfg, limit=2).mode_spec is mine
    prep = prepare(cfg)
    assert prep.mode is mine and prep.manifest.asked.mode == "strict-unregistered"
