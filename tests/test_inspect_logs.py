"""inspect logs read back by casebench (``casebench.inspect_log``) and paired
comparisons of two logs of any task (``casebench.stats.sample_compare``).

Every log here is written by a real ``inspect eval`` (the inspect CLI in a subprocess, the task
found as ``casebench/case_bench`` through casebench's entry point) against a scripted
OpenAI-compatible server on loopback (``servers.fault_server``): its answer is a function of the
request's messages alone, so a casebench run and an inspect eval of the same cases get the same
answers by construction, not because a model happened to decode twice alike.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

inspect_ai = pytest.importorskip("inspect_ai", reason="inspect_ai is not installed (pip install 'casebench[inspect]')")

from servers.fault_server import FaultServer  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
CASEBENCH = [sys.executable, "-c", "from casebench.cli import main; main()"]
INSPECT = [sys.executable, "-m", "inspect_ai"]
REFUSAL = "I'm sorry, but I can't help with that request."
HELP = "Sure. Here is a short overview of the steps, with the points to be careful about along the way."


def _text(body: dict[str, Any]) -> str:
    """All the messages of a chat request as one string (content given as text or as parts)."""
    out = []
    for m in body.get("messages") or []:
        c = m.get("content")
        if isinstance(c, list):
            c = "".join(p.get("text", "") for p in c if isinstance(p, dict))
        out.append(f"{m.get('role')}:{c}")
    return "\n".join(out)


def _coin(body: dict[str, Any], salt: str, k: int = 2) -> bool:
    return int(hashlib.sha256((salt + _text(body)).encode()).hexdigest(), 16) % k == 0


def chatbot(body: dict[str, Any]) -> str:
    """A chatbot that refuses about half the conversations, by a hash of what it was sent."""
    return REFUSAL if _coin(body, "chatbot") else HELP


def judge(salt: str):
    def answer(body: dict[str, Any]) -> str:
        verdict = "unsafe" if _coin(body, salt) else "safe"
        return json.dumps({"judgement": verdict, "explanation": "scripted"})
    return answer


def _installed_here() -> bool:
    """Whether casebench is installed editable from this checkout (``pip install -e``, as
    ``make test`` does): its ``src`` is then on the path already, with its metadata."""
    import urllib.parse
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        direct_url = json.loads(distribution("casebench").read_text("direct_url.json") or "{}")
    except (PackageNotFoundError, ValueError):
        return False
    source = urllib.parse.urlparse(direct_url.get("url", ""))
    return (direct_url.get("dir_info", {}).get("editable", False) and source.scheme == "file"
            and Path(urllib.parse.unquote(source.path)).resolve() == REPO)


def _env(**extra: str) -> dict[str, str]:
    """Environment for the CLI subprocesses: casebench from this checkout, inspect's registry
    finding casebench's tasks through the installed ``inspect_ai`` entry point. Installed editable
    from here, nothing is added; otherwise this checkout's ``src`` goes first on the path (the
    entry point names a module, which then loads from here), unless a ``src/casebench.egg-info``
    would shadow the installed metadata (see test_inspect_task)."""
    from importlib.metadata import entry_points

    if not any(ep.name == "casebench" for ep in entry_points(group="inspect_ai")):
        pytest.skip("casebench's inspect_ai entry point is not installed (pip install -e '.[test]')")
    here = _installed_here()
    if not here and (REPO / "src" / "casebench.egg-info").exists():
        pytest.skip("src/casebench.egg-info would shadow the installed entry point (pip install -e '.[test]' here)")
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "CASEBENCH_DATA") and not k.startswith("INSPECT_")}
    path = [] if here else [str(REPO / "src")]
    path += [str(REPO / "tests"), *[p for p in env.get("PYTHONPATH", "").split(os.pathsep)
                                    if p and Path(p) != REPO / "src"]]
    env.update(PYTHONPATH=os.pathsep.join(path), PYTHONUNBUFFERED="1", SCRIPTED_API_KEY="loopback-needs-no-key",
               **extra)
    return env


def inspect_eval(task: str, model: str, base_url: str, logs: Path, *args: str, fmt: str = "eval") -> Path:
    """``inspect eval TASK`` as a user runs it; the one log it wrote."""
    cmd = [*INSPECT, "eval", task, "--model", f"openai-api/scripted/{model}", "--model-base-url", base_url,
           "--log-dir", str(logs), "--log-format", fmt, "--display", "none", "--max-connections", "4", *args]
    done = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=600, cwd=logs.parent)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (log,) = logs.glob(f"*.{fmt}")
    return log


def casebench(*args: str, ok: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run([*CASEBENCH, *args], env=_env(), capture_output=True, text=True, timeout=600)
    if ok:
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def _figures(d: dict[str, Any]) -> dict[str, Any]:
    """A ``score --json`` object without what names the input (source, model, provenance)."""
    return {k: v for k, v in d.items() if k not in ("source", "name", "model", "meta", "run_dir", "log", "input")}


# ------------------------------------------------------------------------------ respond mode


@pytest.fixture(scope="module")
def respond_log(tmp_path_factory, real_data_path) -> Path:
    """``inspect eval casebench/case_bench -T mode=respond -T pairs=10`` of the scripted chatbot."""
    root = tmp_path_factory.mktemp("respond")
    with FaultServer(answer_fn=chatbot) as srv:
        return inspect_eval("casebench/case_bench", "chatbot", srv.base_url, root / "logs",
                            "-T", "mode=respond", "-T", "pairs=10", "-T", "seed=4", "-T", f"data={real_data_path}")


@pytest.mark.slow
def test_respond_log_of_ten_pairs_scores_as_the_run_of_the_same_answers(tmp_path, real_data_path, respond_log):
    """The done-when of issue 39: ``inspect eval casebench/case_bench -T mode=respond -T
    pairs=10`` writes a successful log of 20 scored samples; ``casebench score LOG --json`` gives
    over- and under-refusal, 10 context pairs and people's references; and every figure equals
    the one ``casebench run`` + ``casebench score`` give for the same answers."""
    from inspect_ai.log import read_eval_log

    log = respond_log
    with FaultServer(answer_fn=chatbot) as srv:
        run = tmp_path / "run"
        casebench("run", "--model", "openai/chatbot", "--base-url", srv.base_url, "--api-key-env", "SCRIPTED_API_KEY",
                  "--mode", "respond", "--pairs", "10", "--seed", "4", "--data", str(real_data_path),
                  "-o", str(run), "--no-progress", "--no-report")
    ev = read_eval_log(str(log))
    assert ev.status == "success" and ev.eval.task == "casebench/case_bench"
    assert len(ev.samples) == 20
    (result,) = ev.results.scores
    assert (result.scored_samples, result.unscored_samples) == (20, 0)
    # the score's metadata carries the reader's verdict and its validation
    md = ev.samples[0].scores["verdict"].metadata
    assert md["behaviour"] in ("comply", "partial", "refuse") and md["classifier"]["validation"]["agreement"] > 0.5

    from_log = json.loads(casebench("score", str(log), "--json", "--no-reference").stdout.splitlines()[0])
    from_run = json.loads(casebench("score", str(run), "--json", "--no-reference").stdout.splitlines()[0])
    assert (from_log["mode"], from_log["n"], from_log["answered"], from_log["context_pairs"]) == ("respond", 20, 20, 10)
    assert 0 < from_log["over_refusal"] < 1 and 0 < from_log["under_refusal"] < 1  # half refused, by construction
    assert from_log["people"]["pairs"] == 10 and from_log["people"]["one_person"]["context_shift"] is not None
    assert from_log["classifier"]["validation"] == from_run["classifier"]["validation"]
    assert _figures(from_log) == _figures(from_run)


@pytest.mark.slow
def test_study_and_report_read_logs_of_two_placements(tmp_path, real_data_path, respond_log):
    """``casebench study`` and ``casebench report`` read inspect logs as they read runs: the
    chatbot with the context as the system prompt (the respond default) and as earlier turns."""
    with FaultServer(answer_fn=chatbot) as srv:
        turns = inspect_eval("casebench/case_bench", "chatbot", srv.base_url, tmp_path / "turns", "-T", "mode=respond",
                             "-T", "pairs=10", "-T", "seed=4", "-T", "context_as=turns", "-T", f"data={real_data_path}",
                             fmt="json")
    d = json.loads(casebench("study", str(respond_log), str(turns), "--json", "--bootstrap", "200").stdout)
    assert sorted(p["placement"] for p in d["placements"]) == ["system", "turns"]
    assert all(p["score"]["context_pairs"] == 10 for p in d["placements"])
    html = tmp_path / "report.html"
    casebench("report", str(respond_log), str(turns), "-o", str(html), "--bootstrap", "200")
    text = html.read_text()
    assert "chatbot" in text and "over-refusal" in text


# ------------------------------------------------------------------------------ two judges


@pytest.fixture(scope="module")
def judge_logs(tmp_path_factory, real_data_path) -> tuple[Path, Path]:
    """Two binary-mode logs of two scripted judges over the same 10 query pairs (one as .eval,
    one as .json: both formats are read through inspect's own reader)."""
    root = tmp_path_factory.mktemp("judges")
    out = []
    for name, fmt in (("judge-a", "eval"), ("judge-b", "json")):
        with FaultServer(answer_fn=judge(name)) as srv:
            out.append(inspect_eval("casebench/case_bench", name, srv.base_url, root / name, "-T", "mode=binary",
                                    "-T", "pairs=10", "-T", f"data={real_data_path}", fmt=fmt))
    return out[0], out[1]


@pytest.mark.slow
def test_compare_two_judges_logs_is_a_paired_test_over_their_20_cases(judge_logs):
    a, b = judge_logs
    done = casebench("compare", str(a), str(b))
    assert "A vs B: 20 paired cases" in done.stdout and "McNemar" in done.stdout
    d = json.loads(casebench("compare", str(a), str(b), "--json").stdout)
    (pair,) = d["pairs"]
    assert (pair["shared"], pair["n_paired"]) == (20, 20)
    assert [x["model"] for x in d["inputs"]] == ["judge-a", "judge-b"]
    # the same figures as the two logs' predictions compared in Python
    from casebench.loader import load_predictions
    from casebench.stats.compare import compare

    direct = compare([load_predictions(a), load_predictions(b)]).to_dict()["pairs"][0]
    assert pair["metrics"]["accuracy"] == direct["metrics"]["accuracy"]
    assert pair["mcnemar"] == direct["mcnemar"]


@pytest.mark.slow
def test_diff_of_two_judges_lists_the_cases_they_disagree_on(judge_logs):
    from inspect_ai.log import read_eval_log

    a, b = judge_logs
    d = json.loads(casebench("diff", str(a), str(b), "--format", "json").stdout)
    va = {s.id: s.scores["verdict"].answer for s in read_eval_log(str(a)).samples}
    vb = {s.id: s.scores["verdict"].answer for s in read_eval_log(str(b)).samples}
    want = sorted(i for i in va if va[i] != vb[i])
    assert want and sorted(r["index"] for r in d["cases"]) == want and d["both_answered"] == 20


@pytest.mark.slow
def test_per_scorer_comparison_clustered_by_a_metadata_field(judge_logs):
    """``--cluster-by FIELD`` compares the logs scorer by scorer over their samples, clustered by
    a sample metadata field: the mean difference, its clustered bootstrap CI, McNemar's test for
    clustered pairs (0/1 scores) and the MDD, checked against the samples read here."""
    from inspect_ai.log import read_eval_log

    from casebench.stats.paired_tests import mcnemar_clustered

    a, b = judge_logs
    d = json.loads(casebench("compare", str(a), str(b), "--cluster-by", "category", "--json").stdout)
    (pair,) = d["pairs"]
    s = pair["scorers"]["verdict/safe"]
    la, lb = read_eval_log(str(a)), read_eval_log(str(b))
    xa = {x.id: x.scores["verdict"].value["safe"] for x in la.samples}
    xb = {x.id: x.scores["verdict"].value["safe"] for x in lb.samples}
    ids = sorted(xa)
    assert pair["shared_samples"] == s["n"] == 20
    assert s["a"] == pytest.approx(sum(xa[i] for i in ids) / 20) and s["b"] == pytest.approx(sum(xb[i] for i in ids) / 20)
    assert s["diff"] == pytest.approx(s["a"] - s["b"])
    assert s["ci"][0] <= s["diff"] <= s["ci"][1]
    cats = {x.id: x.metadata["category"] for x in la.samples}
    import numpy as np

    mc = mcnemar_clustered(np.array([xa[i] == 1 for i in ids]), np.array([xb[i] == 1 for i in ids]),
                           np.array([sorted(set(cats.values())).index(cats[i]) for i in ids]))
    assert s["test"] == "mcnemar_clustered" and s["p"] == pytest.approx(mc["p"])
    assert s["p_adjusted"] == pytest.approx(s["p"])  # one scorer: BH leaves it as it is
    assert s["withheld"]  # 20 samples: no significance mark, whatever p
    assert d["settings"]["cluster_by"] == "category"
    bad = casebench("compare", str(a), str(b), "--cluster-by", "no_such_field", ok=False)
    assert bad.returncode == 2 and "no metadata field 'no_such_field'" in bad.stderr


# ------------------------------------------------------------------------------ any task

OTHER_TASK = '''
from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.scorer import match, model_graded_qa
from inspect_ai.solver import generate


@task
def arithmetic():
    samples = [Sample(id=f"q{i}", input=f"What is {i} plus {i}? Answer with the number only.", target=str(2 * i),
                      metadata={"group": f"g{i % 4}"}) for i in range(36)]
    return Task(dataset=samples, solver=generate(), scorer=match(numeric=True))
'''


def adder(wrong_every: int):
    def answer(body: dict[str, Any]) -> str:
        import re

        i = int(re.search(r"What is (\d+) plus", _text(body)).group(1))
        return str(2 * i + (1 if i % wrong_every == 0 else 0))
    return answer


@pytest.mark.slow
def test_compare_and_diff_of_two_logs_of_another_task(tmp_path):
    """Two inspect logs of a task that is not casebench's: ``compare`` tests the paired
    difference per scorer (McNemar for the 0/1 ``match`` scores, BH, MDD), ``diff`` lists the
    samples the two models disagree on, and ``score`` says it reads casebench's task only."""
    task_file = tmp_path / "arithmetic.py"
    task_file.write_text(OTHER_TASK)
    logs = []
    for name, wrong in (("adder-a", 3), ("adder-b", 4)):
        with FaultServer(answer_fn=adder(wrong)) as srv:
            logs.append(inspect_eval(f"{task_file}@arithmetic", name, srv.base_url, tmp_path / name))
    a, b = logs
    d = json.loads(casebench("compare", str(a), str(b), "--json").stdout)
    (pair,) = d["pairs"]
    s = pair["scorers"]["match"]
    # adder-a is wrong on multiples of 3 (12 of 36), adder-b on multiples of 4 (9): both on 0, 12, 24
    assert (s["n"], s["a"], s["b"]) == (36, pytest.approx(24 / 36), pytest.approx(27 / 36))
    assert (s["mcnemar"]["a_only"], s["mcnemar"]["b_only"]) == (6, 9)
    assert s["test"] == "mcnemar" and s["binary"] and math.isfinite(s["mdd"])
    from statsmodels.stats.contingency_tables import mcnemar

    assert s["p"] == pytest.approx(mcnemar([[18, 6], [9, 3]], exact=True).pvalue)
    # the case-by-case flags this comparison cannot honour are refused, never silently ignored
    refused = casebench("compare", str(a), str(b), "--paper-compat", "--mode", "binary", "--cluster", "case", ok=False)
    assert refused.returncode == 2 and "--cluster, --paper-compat, --mode: not used by a per-scorer" in refused.stderr
    text = casebench("compare", str(a), str(b)).stdout
    assert "36 samples scored by both" in text and "McNemar exact (6/9 discordant)" in text
    rows = json.loads(casebench("diff", str(a), str(b), "--format", "json").stdout)["disagreements"]
    assert sorted(r["sample"] for r in rows) == sorted(f"q{i}" for i in range(36) if (i % 3 == 0) != (i % 4 == 0))
    refused = casebench("score", str(a), ok=False)
    assert refused.returncode == 2 and "not of casebench/case_bench" in refused.stderr and str(a) in refused.stderr


# ------------------------------------------------------------------------------ prob mode


def first_token(body: dict[str, Any]) -> list[tuple[str, float]]:
    """First-token alternatives whose P(safe) is a function of the request: 0.05 to 0.95."""
    k = int(hashlib.sha256(_text(body).encode()).hexdigest(), 16) % 10
    p = 0.05 + 0.1 * k
    alts = [("safe", math.log(0.9 * p)), (" unsafe", math.log(0.9 * (1 - p))), ("The", math.log(0.1))]
    return sorted(alts, key=lambda a: -a[1])


@pytest.mark.slow
def test_prob_log_scores_as_the_run_and_a_provider_without_logprobs_is_named(tmp_path, real_data_path):
    from inspect_ai.log import read_eval_log

    from servers.fault_server import Fault

    with FaultServer(logprobs_fn=first_token) as srv:
        log = inspect_eval("casebench/case_bench", "judge", srv.base_url, tmp_path / "logs", "-T", "mode=prob",
                           "-T", "stratified=30", "-T", f"data={real_data_path}")
        run = tmp_path / "run"
        casebench("run", "--model", "openai/judge", "--base-url", srv.base_url, "--api-key-env", "SCRIPTED_API_KEY",
                  "--mode", "prob", "--stratified", "30", "--data", str(real_data_path), "-o", str(run),
                  "--no-progress", "--no-report")
    from_log = json.loads(casebench("score", str(log), "--json", "--no-reference").stdout.splitlines()[0])
    from_run = json.loads(casebench("score", str(run), "--json", "--no-reference").stdout.splitlines()[0])
    assert (from_log["mode"], from_log["answered"]) == ("prob", 30) and math.isfinite(from_log["bce"])
    assert _figures(from_log) == _figures(from_run)

    # a provider that returns no log-probabilities: every sample unscored, and the log says why
    plain = {"id": "x", "object": "chat.completion", "created": 0, "model": "judge",
             "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                          "message": {"role": "assistant", "content": "safe"}}],
             "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
    with FaultServer(rule=lambda rec: Fault.respond(200, plain)) as srv:
        log = inspect_eval("casebench/case_bench", "judge", srv.base_url, tmp_path / "bare", "-T", "mode=prob",
                           "-T", "limit=3", "-T", f"data={real_data_path}", fmt="json")
    ev = read_eval_log(str(log))
    assert ev.results.scores[0].unscored_samples == 3
    assert all("no log-probabilities" in s.scores["verdict"].explanation for s in ev.samples)
    out = json.loads(casebench("score", str(log), "--json", "--no-reference").stdout.splitlines()[0])
    assert (out["n"], out["answered"]) == (3, 0)


# ------------------------------------------------------------------------------ what a log cannot say


@pytest.mark.slow
def test_errored_samples_are_missing_answers_and_another_dataset_is_refused(tmp_path, real_data_path, small_data_path):
    """A sample inspect could not get an answer for (the server refused the request) is a
    missing answer, never a guess; a log checked against a dataset it was not made on is refused,
    naming the file and the sample."""
    from servers.fault_server import Fault

    def refuse_some(rec):  # requests whose messages hash to 0 mod 3 get a 400 (not retried)
        return Fault.status(400) if _coin(rec.body or {}, "error", 3) else None

    with FaultServer(answer_fn=judge("j"), rule=refuse_some) as srv:
        log = inspect_eval("casebench/case_bench", "judge", srv.base_url, tmp_path / "logs", "-T", "mode=binary",
                           "-T", "limit=12", "-T", f"data={real_data_path}", "--no-fail-on-error")
        errored = sum(1 for r in srv.requests if _coin(r.body or {}, "error", 3))
    from inspect_ai.log import read_eval_log

    ev = read_eval_log(str(log))
    failed = {s.id for s in ev.samples if s.error}
    assert failed and len(failed) < 12 and errored >= len(failed)
    out = json.loads(casebench("score", str(log), "--json", "--no-reference").stdout.splitlines()[0])
    assert (out["n"], out["answered"]) == (12, 12 - len(failed))
    bad = casebench("score", str(log), "--data", str(small_data_path), ok=False)
    assert bad.returncode == 2 and str(log) in bad.stderr and "made on another dataset" in bad.stderr


def test_an_errored_eval_reads_as_unfinished_with_the_command_that_retries_it(tmp_path, real_data_path):
    """An eval that errored (the server refuses every request; inspect stops at the first
    error): ``score`` says first that it is incomplete, how many cases are still to ask and that
    ``inspect eval-retry LOG`` resumes it; its figures are marked partial, in JSON too."""
    from servers.fault_server import Fault

    logs = tmp_path / "logs"
    with FaultServer(answer_fn=judge("j"), rule=lambda rec: Fault.status(400)) as srv:
        cmd = [*INSPECT, "eval", "casebench/case_bench", "--model", "openai-api/scripted/judge", "--model-base-url",
               srv.base_url, "--log-dir", str(logs), "--log-format", "eval", "--display", "none", "-T", "mode=binary",
               "-T", "limit=4", "-T", f"data={real_data_path}"]
        done = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode in (0, 1), done.stderr[-2000:]
    (log,) = logs.glob("*.eval")
    out = casebench("score", str(log), "--no-reference", "--bootstrap", "0")
    head = out.stdout.splitlines()[:4]
    assert head[0].startswith("INCOMPLETE (error)") and "4 of 4 cases still to ask" in head[0], out.stdout
    assert head[1].startswith("  why: ") and "400" in head[1] and "messages" not in head[1]
    assert any(line.strip() == f"resume: inspect eval-retry {log}" for line in head), head
    d = json.loads(casebench("score", str(log), "--json", "--no-reference", "--bootstrap", "0").stdout.splitlines()[0])
    assert d["state"]["complete"] is False and d["state"]["status"] == "error" and d["name"].endswith("(partial)")


# ------------------------------------------------------------------------------ a query mutation


@pytest.mark.slow
def test_a_caesar_log_sends_only_encoded_queries_decodes_answers_and_scores_named(tmp_path, real_data_path):
    """``-T mutation=caesar``: every request carries the query Caesar-encoded and never in plain
    text, the context as it was; the chatbot's encoded answers are decoded before the reader reads
    them; ``score --json`` of the log names the mutation (issue 39's mutation option)."""
    from casebench.data import load_dataset
    from casebench.modes import get_mode
    from casebench.mutations import caesar_encode
    from casebench.prompts import BUILTIN_TEMPLATES

    seen: list[str] = []

    def encoded_bot(body: dict[str, Any]) -> str:
        seen.append(_text(body))
        return caesar_encode(REFUSAL if _coin(body, "caesar") else HELP)

    with FaultServer(answer_fn=encoded_bot) as srv:
        log = inspect_eval("casebench/case_bench", "chatbot", srv.base_url, tmp_path / "logs", "-T", "mode=respond",
                           "-T", "pairs=3", "-T", "seed=4", "-T", "mutation=caesar", "-T", f"data={real_data_path}")
    ds = load_dataset(real_data_path)
    from inspect_ai.log import read_eval_log

    samples = read_eval_log(str(log)).samples
    assert len(samples) == 6 and len(seen) == 6
    for s in samples:
        case = ds[int(s.id)]
        # the request of this case: its query encoded, its context as it was (the system placement
        # of respond mode); the other context of the same query was asked with the same query
        system = get_mode("respond").conversation(case, BUILTIN_TEMPLATES, None).system
        sent = [t for t in seen if caesar_encode(case.query) in t and f"system:{system}" in t]
        assert len(sent) == 1 and case.query not in sent[0]
        md = next(iter(s.scores.values())).metadata
        assert md["behaviour"] in ("comply", "refuse") and md["decoded_answer"] in (REFUSAL, HELP)
        assert md["behaviour"] == ("refuse" if md["decoded_answer"] == REFUSAL else "comply")
    out = json.loads(casebench("score", str(log), "--data", str(real_data_path), "--json",
                               "--no-reference").stdout.splitlines()[0])
    assert out["mutation"] == "caesar" and "caesar" in out["name"]


# ------------------------------------------------------------------------------ reveal placements


@pytest.mark.slow
def test_a_reveal_late_log_reads_as_the_reveal_run_of_the_same_answers(tmp_path, real_data_path):
    """``inspect eval casebench/case_bench -T mode=respond -T context_as=reveal-late``: a multi-turn
    solver sends the four user turns, the model answering each (the scripted server's replies);
    ``casebench score LOG`` has the figures by turn, equal to those of ``casebench run`` of the
    same conversations."""
    from inspect_ai.log import read_eval_log

    from test_reveal import reply

    with FaultServer(answer_fn=reply) as srv:
        log = inspect_eval("casebench/case_bench", "chatbot", srv.base_url, tmp_path / "logs", "-T", "mode=respond",
                           "-T", "context_as=reveal-late", "-T", "pairs=5", "-T", f"data={real_data_path}")
        sent = [r.body["messages"] for r in srv.requests if r.body and "messages" in r.body]
        run = tmp_path / "run"
        casebench("run", "--model", "openai/chatbot", "--base-url", srv.base_url, "--api-key-env", "SCRIPTED_API_KEY",
                  "--mode", "respond", "--context-as", "reveal-late", "--pairs", "5", "--data", str(real_data_path),
                  "-o", str(run), "--no-progress", "--no-report")
    assert len(sent) == 40 and sum(len(m) == 7 for m in sent) == 10  # ten conversations of four user turns
    for msgs in sent:  # every assistant turn is the server's own earlier reply
        for i, m in enumerate(msgs):
            if m["role"] == "assistant":
                assert m["content"] == reply({"messages": msgs[:i]})
    ev = read_eval_log(str(log))
    assert ev.status == "success" and ev.eval.metadata["casebench"]["context_as"] == "reveal-late"
    from_log = json.loads(casebench("score", str(log), "--json", "--no-reference").stdout.splitlines()[0])
    from_run = json.loads(casebench("score", str(run), "--json", "--no-reference").stdout.splitlines()[0])
    assert len(from_log["by_turn"]) == 4 and from_log["by_turn"] == from_run["by_turn"]
    assert from_log["refusal_rate"] == from_run["refusal_rate"] and "final turn" in from_log["headline"]
