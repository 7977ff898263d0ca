"""``casebench contexts generate``: a model writes a safe and an unsafe CI context per query.

Real parts only: a scripted OpenAI-compatible server on loopback (valid answers for some queries,
invalid JSON / missing fields / placeholders for others, some fixed by a re-ask and some never),
real processes killed with SIGKILL and resumed, and a real llama.cpp server over SmolLM2-135M
(which mostly writes invalid contexts: the re-asks and the failure listing are what is checked).

* the queries loader reads JSON, JSONL and CSV and names file, record/line and field on bad input;
* the mode's reading: the dataset validator's findings, placeholders, identical contexts;
* re-asks are bounded by --parse-retries; a query that never gets valid contexts is listed
  (stderr and NEW.failures.json) and left out, never half-written;
* the output is a dataset without votes that ``load_dataset``, ``data validate``, ``prompts``
  and ``run`` accept;
* resume: the same command asks nothing again; another domain is refused before anything is
  asked; kill -9 at random points, then resume, never asks a query that had its final record;
* cost: tracked with a price table, and --max-cost stops the run before passing it.
"""

from __future__ import annotations

import collections
import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from casebench.cli import cli
from casebench.contexts.generate import (
    ContextsMode, QueriesError, answer_schema, failures_path, generation_template, load_queries, queries_dataset,
)
from casebench.data import CI_PARAMETERS, load_dataset
from casebench.runs.record import final_records, iter_records, manifest_bytes, read_manifest
from servers.fault_server import FaultServer

FIXTURES = Path(__file__).resolve().parent / "fixtures"
QUERIES = FIXTURES / "contexts_queries.jsonl"
QUERIES_CSV = FIXTURES / "contexts_queries.csv"
DOMAIN = "a hospital's patient-facing assistant on its public website"
CASEBENCH = [sys.executable, "-c", "from casebench.cli import main; main()"]


# -------------------------------------------------------------------------------- helpers


def context(tag: str, safe: bool, urgency: bool = True) -> dict[str, Any]:
    """A valid CI context of our own wording; ``tag`` makes it unique."""
    who = "a registered patient signed in to the portal" if safe else "an anonymous visitor with no account"
    ctx: dict[str, Any] = {
        "sender": {"nature_of_the_interaction": f"A help assistant answering questions ({tag}).",
                   "platform_type": "The hospital's public website chat window."},
        "recipient": {"type": who, "background": f"Nothing else is known about them ({tag})."},
        "transmission_principle": {
            "sender_purpose": "To help with routine questions." if safe else "To answer whatever is asked.",
            "confidentiality": "Conversations are logged for quality review.",
            "source_accountability": "The hospital's patient services team.",
        },
    }
    if urgency:
        ctx["transmission_principle"]["urgency"] = "Not urgent."
    return ctx


def valid_answer(tag: str) -> str:
    return json.dumps({"safe_context": context(tag, True), "unsafe_context": context(tag, False, urgency=False)})


def bad_answer(kind: str, tag: str) -> str:
    if kind == "badjson":
        return '{"safe_context": {"sender": {"nature_of_the_interaction": "cut off'
    if kind == "missing":
        broken = context(tag, False)
        del broken["recipient"]["background"]
        del broken["transmission_principle"]
        return json.dumps({"safe_context": context(tag, True), "unsafe_context": broken})
    if kind == "placeholder":
        ph = {g: {s: "..." for s in subs} for g, subs in CI_PARAMETERS.items()}
        return json.dumps({"safe_context": ph, "unsafe_context": ph})
    if kind == "identical":
        return json.dumps({"safe_context": context(tag, True), "unsafe_context": context(tag, True)})
    if kind == "nokeys":
        return "Here are two situations: one where it is fine, and one where it is not."
    raise AssertionError(kind)


QUERY_RE = re.compile(r"\nQuery: (.*)\n")


def query_of(body: Any) -> str:
    msgs = body.get("messages") or []
    m = QUERY_RE.search(msgs[-1]["content"])
    assert m, "the prompt holds the query"
    return m.group(1)


class Script:
    """Per query, the answers for the 1st, 2nd, ... ask (the last one repeats)."""

    def __init__(self, plans: dict[str, list[str]]):
        self.plans = plans
        self.asks: collections.Counter[str] = collections.Counter()
        self.lock = threading.Lock()

    def __call__(self, body: Any) -> str:
        q = query_of(body)
        with self.lock:
            k = self.asks[q]
            self.asks[q] += 1
        plan = self.plans.get(q, ["ok"])
        kind = plan[min(k, len(plan) - 1)]
        return valid_answer(f"{q[:20]} #{k}") if kind == "ok" else bad_answer(kind, q[:20])


def asked_queries(srv: FaultServer, since: int) -> collections.Counter[str]:
    """Queries asked since request ``since`` (a request cut off by a kill has no body: it was
    never asked)."""
    return collections.Counter(query_of(r.body) for r in srv.requests[since:] if isinstance(r.body, dict))


def queries_list() -> list[str]:
    return [json.loads(line)["query"] for line in QUERIES.read_text().splitlines() if line.strip()]


def gen_args(srv: FaultServer, out: Path, *more: str, queries: Path = QUERIES, domain: str = DOMAIN) -> list[str]:
    return ["contexts", "generate", "--queries", str(queries), "--domain", domain, "--model", "openai/ctx-writer",
            "--base-url", srv.base_url, "-o", str(out), "--no-progress", *more]


def invoke(args: list[str]) -> Any:
    env = {"OPENAI_API_KEY": None, "OPENAI_BASE_URL": None, "CASEBENCH_PRICES": None}
    return CliRunner().invoke(cli, args, env=env, catch_exceptions=False)


# -------------------------------------------------------------------------------- input


def test_load_queries_json_jsonl_csv(tmp_path: Path) -> None:
    rows = [{"query": "How do I book a flu vaccination?", "category": "appointments", "x": 1},
            {"query": " Where do I park? ", "category": "directions"}]
    (tmp_path / "q.json").write_text(json.dumps(rows))
    (tmp_path / "q.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    want = [("How do I book a flu vaccination?", "appointments"), ("Where do I park?", "directions")]
    assert load_queries(tmp_path / "q.json") == want
    assert load_queries(tmp_path / "q.jsonl") == want
    assert load_queries(QUERIES_CSV) == [("How do I book a flu vaccination?", "appointments"),
                                         ("Where is the pharmacy, and is it open on Sundays?", "general information")]
    ds = queries_dataset(QUERIES)
    assert len(ds) == 6 and not ds.has_votes and all(c.context == {} for c in ds)


@pytest.mark.parametrize("name,text,expect", [
    ("q.csv", "query,topic\nHow?,x\n", ["q.csv", "field 'category'", "no such column", "query, topic"]),
    ("q.csv", "query,category\nHow do I park?,directions\n,directions\n",
     ["q.csv", "record 1", "(line 3)", "field 'query'", "non-empty"]),
    ("q.jsonl", '{"query": "How?", "category": "a"}\n{"query": "Why?"}\n[1]\n',
     ["q.jsonl", "record 1", "field 'category'", "missing", "record 2", "must be an object"]),
    ("q.json", '{"query": "How?"', ["q.json", "not valid JSON"]),
    ("q.json", "[]", ["q.json", "no queries"]),
])
def test_bad_queries_are_named_and_exit_2(tmp_path: Path, name: str, text: str, expect: list[str]) -> None:
    p = tmp_path / name
    p.write_text(text)
    with pytest.raises(QueriesError):
        load_queries(p)
    res = invoke(["contexts", "generate", "--queries", str(p), "--domain", DOMAIN, "--model", "openai/x",
                  "--base-url", "http://127.0.0.1:9/v1", "-o", str(tmp_path / "new.json")])
    assert res.exit_code == 2, res.stderr
    for e in expect:
        assert e in res.stderr, (e, res.stderr)
    assert not (tmp_path / "new.json").exists() and not (tmp_path / "new.json.run").exists()


# -------------------------------------------------------------------------------- reading


def test_mode_reads_valid_contexts_and_names_every_problem() -> None:
    mode = ContextsMode(DOMAIN)
    ok = mode.read_text("Sure!\n```json\n" + valid_answer("a") + "\n```\nAnything else?")
    assert ok.ok and ok.label == "generated"
    ctx = ok.detail["contexts"]
    assert set(ctx) == {"safe_context", "unsafe_context"} and ctx["safe_context"] == context("a", True)
    # keys outside the schema and an empty optional urgency are dropped
    extra = context("b", True)
    extra["notes"] = "ignore me"
    extra["transmission_principle"]["urgency"] = ""
    r = mode.read_text(json.dumps({"contexts": {"safe_context": extra, "unsafe_context": context("b", False)}}))
    assert r.ok and "notes" not in r.detail["contexts"]["safe_context"]
    assert "urgency" not in r.detail["contexts"]["safe_context"]["transmission_principle"]

    missing = mode.read_text(bad_answer("missing", "c"))
    assert not missing.ok and missing.retry
    assert "unsafe_context.recipient.background: missing" in missing.error
    assert "unsafe_context.transmission_principle: missing" in missing.error
    placeholder = mode.read_text(bad_answer("placeholder", "d"))
    assert "safe_context.sender.platform_type: no text, only '...'" in placeholder.error
    assert "identical" in mode.read_text(bad_answer("identical", "e")).error
    assert "lacks 'safe_context' and 'unsafe_context'" in mode.read_text('{"situation": "x"}').error
    assert "no JSON object" in mode.read_text(bad_answer("nokeys", "f")).error
    cut = mode.read_text(bad_answer("badjson", "g"), detail={"finish_reason": "length"})
    assert not cut.ok and "raise --max-tokens" in cut.error
    wrong_type = json.loads(valid_answer("h"))
    wrong_type["safe_context"]["sender"]["platform_type"] = 3
    assert "safe_context.sender.platform_type: must be a string or an object" in mode.read_text(
        json.dumps(wrong_type)).error


def test_answer_schema_follows_the_dataset_schema() -> None:
    """The schema for servers that constrain generation: urgency optional, nothing else."""
    schema = answer_schema()
    assert schema["required"] == ["safe_context", "unsafe_context"]
    ctx = schema["properties"]["safe_context"]
    assert list(ctx["properties"]) == list(CI_PARAMETERS)
    tp = ctx["properties"]["transmission_principle"]
    assert "urgency" in tp["properties"] and "urgency" not in tp["required"]
    assert ContextsMode(DOMAIN).read_text(valid_answer("s")).ok


def test_domain_is_in_the_prompt_and_its_hash() -> None:
    a, b = ContextsMode(DOMAIN), ContextsMode("a bank's {customer} chat")
    case = queries_dataset(QUERIES)[0]
    system, user = b.chat(case, b.templates)
    assert system is None
    assert "a bank's {customer} chat" in user and case.query in user and case.category in user
    assert '"safe_context"' in user and '"urgency"' in user
    assert a.templates.sha256("contexts") != b.templates.sha256("contexts")
    assert generation_template(DOMAIN) == a.prompt_template
    with pytest.raises(ValueError, match="--domain"):
        ContextsMode("  ")


# -------------------------------------------------------------------------------- the command


def test_generate_retries_lists_failures_and_writes_a_dataset_without_votes(tmp_path: Path) -> None:
    qs = queries_list()
    script = Script({qs[2]: ["badjson", "ok"], qs[3]: ["missing", "placeholder", "ok"],
                     qs[4]: ["badjson", "missing", "identical"], qs[5]: ["nokeys"]})
    out = tmp_path / "new.json"
    with FaultServer(answer_fn=script) as srv:
        res = invoke(gen_args(srv, out, "--max-connections", "3"))
        assert res.exit_code == 0, res.stderr
        # bounded re-asks: 1 + --parse-retries (2) at most
        assert [script.asks[q] for q in qs] == [1, 1, 2, 3, 3, 3]
        assert srv.count == 13
        # the failures are listed on stderr and in the failures file, with their reasons
        assert "2 of 6 queries got no valid contexts" in res.stderr
        assert "query 4 (privacy): invalid context: safe_context and unsafe_context are identical" in res.stderr
        assert "query 5 (medication): no JSON object" in res.stderr
        failures = json.loads(failures_path(out).read_text())
        assert [f["index"] for f in failures] == [4, 5]
        assert failures[0]["query"] == qs[4] and failures[0]["attempts"] == 3 and failures[0]["text"]
        assert "contexts: 4 of 6 queries, 8 records (no votes)" in res.stdout

        ds = load_dataset(out)
        assert len(ds) == 8 and not ds.has_votes
        assert [c.query for c in ds] == [q for q in qs[:4] for _ in (0, 1)]
        assert [c.intended_safe for c in ds] == [True, False] * 4
        raw = json.loads(out.read_text())
        assert all(set(r) == {"query", "context", "category", "context_intended_to_be_safe"} for r in raw)
        assert raw[0]["context"] == context(f"{qs[0][:20]} #0", True)
        # query 3's third answer was the one kept
        assert raw[6]["context"] == context(f"{qs[3][:20]} #2", True)
        val = invoke(["data", "validate", str(out)])
        assert val.exit_code == 0 and "8 records" in val.stdout, val.stderr

        # the run directory is a run like any other: one final record per query
        run = tmp_path / "new.json.run"
        finals = final_records(iter_records(run))
        assert sorted(k[0] for k in finals) == list(range(6))
        assert [finals[(i, 0)].attempts for i in range(6)] == [1, 1, 2, 3, 3, 3]
        m = read_manifest(run)
        assert m.status.value == "complete" and m.mode == "contexts" and m.totals.missing == 2
        assert m.totals.prompt_tokens > 0 and m.totals.cost_status == "local"

        # the same command again asks nothing and writes the same file
        before = out.read_bytes()
        again = invoke(gen_args(srv, out, "--max-connections", "3"))
        assert again.exit_code == 0, again.stderr
        assert srv.count == 13 and out.read_bytes() == before

        # another domain on the same run directory is refused before anything is asked or written
        mb = manifest_bytes(run)
        other = invoke(gen_args(srv, out, domain="a bank's customer chat"))
        assert other.exit_code == 2 and "template_sha256" in other.stderr, other.stderr
        assert srv.count == 13 and manifest_bytes(run) == mb and out.read_bytes() == before


def test_every_query_failing_writes_no_dataset(tmp_path: Path) -> None:
    out = tmp_path / "new.json"
    with FaultServer(answer=bad_answer("placeholder", "x")) as srv:
        res = invoke(gen_args(srv, out, "--parse-retries", "1", "--limit", "2"))
    assert res.exit_code == 1
    assert srv.count == 4  # 2 queries x (1 + 1 re-ask)
    assert not out.exists() and "no dataset was written" in res.stderr
    assert len(json.loads(failures_path(out).read_text())) == 2


def test_refuses_to_overwrite_a_file_it_did_not_write(tmp_path: Path) -> None:
    out = tmp_path / "new.json"
    out.write_text("[]")
    with FaultServer(answer_fn=Script({})) as srv:
        res = invoke(gen_args(srv, out))
        assert res.exit_code == 2 and "was not written by this run" in res.stderr
        same = invoke(gen_args(srv, QUERIES))
        assert same.exit_code == 2 and "the queries file itself" in same.stderr
        assert srv.count == 0
    assert out.read_text() == "[]"


def test_a_changed_queries_file_is_refused_on_resume(tmp_path: Path) -> None:
    queries = tmp_path / "q.csv"
    queries.write_text(QUERIES_CSV.read_text())
    out = tmp_path / "new.json"
    with FaultServer(answer_fn=Script({})) as srv:
        assert invoke(gen_args(srv, out, queries=queries)).exit_code == 0
        with open(queries, "a") as f:
            f.write("Can I bring flowers to the ward?,visiting,our own wording\n")
        res = invoke(gen_args(srv, out, queries=queries))
        assert res.exit_code == 2 and "dataset_sha256" in res.stderr, res.stderr
        assert srv.count == 2
    assert len(load_dataset(out)) == 4


def test_cost_is_tracked_and_max_cost_stops_before_passing_it(tmp_path: Path) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"ctx-writer": {"input": 1000.0, "output": 1000.0}}))  # $0.001 per token
    out = tmp_path / "new.json"
    with FaultServer(answer_fn=Script({})) as srv:
        res = invoke(gen_args(srv, out, "--prices", str(prices), "--max-cost", "2.0", "--max-tokens", "300",
                              "--max-connections", "1"))
        assert res.exit_code == 1, res.stderr
        assert "stopped before passing --max-cost" in res.stderr and "to resume" in res.stderr
        assert not out.exists()
        m = read_manifest(tmp_path / "new.json.run")
        assert m.status.value == "budget" and 0 < m.totals.cost_usd <= 2.0 and m.totals.final < 6
        done = invoke(gen_args(srv, out, "--prices", str(prices), "--max-cost", "100", "--max-tokens", "300",
                               "--max-connections", "1"))
        assert done.exit_code == 0, done.stderr
        assert srv.count == 6  # nothing asked twice
    assert len(load_dataset(out)) == 12
    assert read_manifest(tmp_path / "new.json.run").totals.cost_usd > 2.0


# -------------------------------------------------------------------------------- kill -9


def _record_lines(run: Path) -> list[dict]:
    p = run / "records.jsonl"
    if not p.exists():
        return []
    *lines, _tail = p.read_bytes().split(b"\n")
    return [json.loads(x) for x in lines]


def test_kill_9_then_resume_never_asks_a_finished_query(tmp_path: Path) -> None:
    n = 30
    queries = tmp_path / "queries.jsonl"
    qs = [f"Which houseplant number {i} needs the least light?" for i in range(n)]
    queries.write_text("".join(json.dumps({"query": q, "category": "gardening"}) + "\n" for q in qs))
    script = Script({qs[3]: ["badjson", "ok"], qs[17]: ["missing", "missing", "missing"]})
    out = tmp_path / "plants.json"
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "CASEBENCH_PRICES")}
    rng = random.Random(5)
    with FaultServer(answer_fn=script, latency=0.08) as srv:
        cmd = [*CASEBENCH, *gen_args(srv, out, "--max-connections", "3", queries=queries)]
        kills = 0
        for point in range(3):
            finished = {qs[r["case"]] for r in _record_lines(out.with_name("plants.json.run")) if r["final"]}
            n0 = srv.count
            proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            deadline = time.monotonic() + 30
            want = len(finished) + rng.randint(2, 6)
            while time.monotonic() < deadline and proc.poll() is None:
                if len(_record_lines(out.with_name("plants.json.run"))) >= want:
                    break
                time.sleep(0.01)
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                kills += 1
            proc.wait(timeout=30)
            session = asked_queries(srv, n0)
            assert not (set(session) & finished), "a finished query was asked again"
            assert not out.exists()
        assert kills >= 2
        finished = {qs[r["case"]] for r in _record_lines(out.with_name("plants.json.run")) if r["final"]}
        n0 = srv.count
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        session = asked_queries(srv, n0)
        assert not (set(session) & finished)
        assert set(session) == set(qs) - finished
    finals = collections.Counter(r["case"] for r in _record_lines(out.with_name("plants.json.run")) if r["final"])
    assert finals == collections.Counter(range(n))
    ds = load_dataset(out)
    assert len(ds) == 2 * (n - 1) and qs[17] not in {c.query for c in ds}
    assert "query 17 (gardening)" in done.stderr


# -------------------------------------------------------------------------------- other commands accept it


@pytest.fixture
def generated(tmp_path: Path) -> Path:
    out = tmp_path / "new.json"
    with FaultServer(answer_fn=Script({})) as srv:
        res = invoke(gen_args(srv, out, "--limit", "3"))
    assert res.exit_code == 0, res.stderr
    return out


def test_prompts_accepts_the_output(generated: Path) -> None:
    res = invoke(["prompts", "--mode", "respond", str(generated), "--context-as", "system"])
    assert res.exit_code == 0, res.stderr
    lines = [json.loads(x) for x in res.stdout.splitlines()]
    assert len(lines) == 6
    assert lines[0]["messages"][0]["role"] == "system"
    assert "A help assistant answering questions" in lines[0]["messages"][0]["content"]
    assert lines[0]["messages"][1]["content"] == queries_list()[0]


@pytest.mark.slow
def test_run_accepts_the_output(generated: Path, tmp_path: Path) -> None:
    """A judge run with the embedded default model (SmolLM2-135M) over the first 2 cases."""
    out = tmp_path / "judge"
    res = subprocess.run([*CASEBENCH, "run", "--data", str(generated), "--mode", "prob", "--limit", "2",
                          "-o", str(out), "--no-progress", "--no-report"],
                         capture_output=True, text=True, timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert res.returncode == 0, res.stderr
    finals = final_records(iter_records(out))
    assert sorted(finals) == [(0, 0), (1, 0)] and all(r.p_safe is not None for r in finals.values())


# -------------------------------------------------------------------------------- a real small model


@pytest.mark.slow
def test_llama_cpp_small_model(llama_server: Any, tmp_path: Path) -> None:
    """SmolLM2-135M rarely writes two valid contexts: whatever it writes, each query ends either
    in the dataset (both contexts valid) or in the failures list with a reason."""
    queries = tmp_path / "q.json"
    rows = [json.loads(x) for x in QUERIES.read_text().splitlines()[:2]]
    queries.write_text(json.dumps(rows))
    out = tmp_path / "new.json"
    t0 = time.monotonic()
    res = invoke(["contexts", "generate", "--queries", str(queries), "--domain", DOMAIN,
                  "--model", f"openai/{llama_server.model}", "--base-url", llama_server.base_url,
                  "-o", str(out), "--no-progress", "--max-tokens", "48", "--parse-retries", "1",
                  "--max-connections", "1"])
    elapsed = time.monotonic() - t0
    assert res.exit_code in (0, 1), res.stderr
    run = tmp_path / "new.json.run"
    finals = final_records(iter_records(run))
    assert sorted(k[0] for k in finals) == [0, 1]
    failed = [i for i in range(2) if not finals[(i, 0)].answered]
    for i in failed:
        assert finals[(i, 0)].attempts == 2 and finals[(i, 0)].error
        assert f"query {i} ({rows[i]['category']})" in res.stderr
    if failed:
        assert [f["index"] for f in json.loads(failures_path(out).read_text())] == failed
    if len(failed) < 2:
        assert len(load_dataset(out)) == 2 * (2 - len(failed))
    else:
        assert not out.exists()
    print(f"llama.cpp SmolLM2-135M: {2 - len(failed)}/2 queries with valid contexts, {elapsed:.1f}s; "
          f"errors: {[finals[(i, 0)].error[:80] for i in failed]}")
