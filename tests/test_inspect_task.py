"""CASE-Bench inside inspect_ai (``casebench.integrations.inspect_task``).

The main check runs ``inspect eval casebench/case_bench`` as a user would (the inspect CLI in a
subprocess, the task found through casebench's ``inspect_ai`` entry point) against the real
llama.cpp server, then ``casebench run`` + ``casebench score`` on the same cases with the same
generation settings, and asserts the same per-case verdicts and the same figures. The other
tests check the task's options, the metric's aggregation and the missing-extra message without
a model.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import subprocess
import sys
import time
import tomllib
import urllib.parse
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
INSTALL = "pip install 'casebench[inspect]'"

inspect_ai = pytest.importorskip(
    "inspect_ai", reason=f"inspect_ai is not installed ({INSTALL}; the test extra installs it)")

from inspect_ai.scorer import SampleScore, Score, Target  # noqa: E402

from casebench.data import AblationError, load_dataset  # noqa: E402
from casebench.integrations.inspect_task import (  # noqa: E402
    case_bench, case_bench_epochs, case_bench_metrics, case_from_metadata, case_metadata, judge_prompt, verdict,
)
from casebench.predictions import Predictions  # noqa: E402
from casebench.runs.select import stratified_indices  # noqa: E402
from casebench.stats.result import score_predictions  # noqa: E402

CASEBENCH = [sys.executable, "-c", "from casebench.cli import main; main()"]
INSPECT = [sys.executable, "-m", "inspect_ai"]


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "CASEBENCH_PRICES", "CASEBENCH_DATA")
           and not k.startswith("INSPECT_")}
    env.update(PYTHONUNBUFFERED="1", **extra)
    return env


# ------------------------------------------------------------------------------ task options


def test_samples_are_the_cases_casebench_run_selects(real_data_path):
    ds = load_dataset(real_data_path)
    t = case_bench(data=str(real_data_path), stratified=45, seed=3)
    assert [s.id for s in t.dataset] == stratified_indices(ds, 45, 3)
    assert len({s.metadata["category"] for s in t.dataset}) == 45
    t = case_bench(data=str(real_data_path), limit=7, remove="urgency,sender")
    assert [s.id for s in t.dataset] == list(range(7))
    for s in t.dataset:
        case = ds[s.id]
        assert case_from_metadata(s.metadata) == case  # the original case, not the ablated one
        assert s.metadata["removed"] == ["urgency", "sender"]
        assert s.input == case.query
        assert s.target == ("safe" if case.human_safe else "unsafe")
    meta = t.metadata["casebench"]
    assert meta["dataset"]["fingerprint"] == ds.fingerprint and meta["selection"]["how"] == "limit=7"


def test_defaults_follow_casebench_run(small_data_path):
    from casebench.modes import get_mode

    for name in ("binary", "score", "respond"):
        t, m = case_bench(data=str(small_data_path), mode=name), get_mode(name)
        assert len(t.dataset) == 8
        assert (t.config.temperature, t.config.max_tokens) == (m.default_temperature, m.default_max_tokens)
        assert t.epochs == m.default_samples
    assert get_mode("score").default_samples == 3 and get_mode("score").default_temperature == 1.0
    # prob: one greedy token and its alternatives, as casebench's API backends ask
    t = case_bench(data=str(small_data_path), mode="prob")
    assert (t.config.temperature, t.config.max_tokens, t.config.logprobs, t.config.top_logprobs) == (0.0, 1, True, 20)
    t = case_bench(data=str(small_data_path), mode="respond", refusal_classifier="rules", partial_as="safe")
    meta = t.metadata["casebench"]
    assert (meta["context_as"], meta["classifier"]["name"], meta["classifier"]["partial_as"]) == ("system", "rules", "safe")
    assert meta["templates"] is None  # respond mode asks the query itself


def test_pairs_are_the_cases_casebench_run_selects(real_data_path):
    from casebench.runs.select import select_cases

    ds = load_dataset(real_data_path)
    t = case_bench(data=str(real_data_path), mode="respond", pairs=10, seed=4)
    want, how = select_cases(ds, pairs=10, seed=4)
    assert [s.id for s in t.dataset] == want and len(want) == 20
    queries = [s.metadata["query"] for s in t.dataset]
    assert all(queries.count(q) == 2 for q in queries)  # both contexts of each query
    assert t.metadata["casebench"]["selection"] == {"how": how.how, "cases": 20}


@pytest.mark.parametrize("kwargs, message", [
    ({"mode": "vibes"}, "mode must be one of binary, score, prob, respond"),
    ({"mode": "binary", "refusal_classifier": "rules"}, "apply to modes that read behaviour"),
    ({"mode": "respond", "partial_as": "maybe"}, "partial_as must be safe or unsafe"),
    ({"mode": "respond", "refusal_classifier": "no-such-reader"}, "refusal_classifier: "),
    ({"pairs": 3, "stratified": 3}, "choose one of limit, stratified, pairs"),
    ({"context_as": "assistant"}, "context_as must be one of user, system"),
    ({"limit": 3, "stratified": 3}, "choose one of limit, stratified"),
    ({"limit": 0}, "limit must be at least 1"),
    ({"stratified": 10_000}, "stratified 10000: must be between 1 and"),
])
def test_bad_options_are_refused_with_the_reason(small_data_path, kwargs, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        case_bench(data=str(small_data_path), **kwargs)


def test_an_unknown_ci_parameter_names_the_valid_ones(small_data_path):
    with pytest.raises(AblationError, match="valid names: sender, recipient"):
        case_bench(data=str(small_data_path), remove=["urgency", "mood"])


def test_no_dataset_and_no_download_is_a_clear_error(tmp_path, monkeypatch):
    from casebench.sources import FetchError

    monkeypatch.delenv("CASEBENCH_DATA", raising=False)
    monkeypatch.setenv("CASEBENCH_OFFLINE", "1")
    monkeypatch.setenv("CASEBENCH_CACHE", str(tmp_path))  # an empty user cache
    with pytest.raises(FetchError, match="casebench data fetch"):
        case_bench()


# ------------------------------------------------------------------------------ solver and scorer


def _state(sample, text: str | None = None):
    from inspect_ai.model import ModelName, ModelOutput
    from inspect_ai.solver import TaskState

    return TaskState(ModelName("casebench/none"), sample.id, 1, sample.input, [], target=Target(sample.target),
                     metadata=dict(sample.metadata),
                     output=None if text is None else ModelOutput.from_content("casebench/none", text))


@pytest.mark.parametrize("mode", ["binary", "score", "prob", "respond"])
@pytest.mark.parametrize("context_as", ["user", "system", "turns"])
def test_the_prompt_is_the_modes_chat(small_data_path, mode, context_as):
    from casebench.modes import get_mode
    from casebench.prompts import BUILTIN_TEMPLATES

    t = case_bench(data=str(small_data_path), mode=mode, context_as=context_as, remove="urgency", limit=3)
    judge = judge_prompt(mode=mode, context_as=context_as)
    for sample in t.dataset:
        state = asyncio.run(judge(_state(sample), None))
        case = load_dataset(small_data_path)[sample.id].ablated(["urgency"])
        chat = get_mode(mode).conversation(case, BUILTIN_TEMPLATES, context_as)
        want = ([("system", chat.system)] if chat.system is not None else [])
        for user, assistant in chat.history:
            want += [("user", user), ("assistant", assistant)]
        want.append(("user", chat.prompt))
        assert [(m.role, m.text) for m in state.messages] == want
        assert (chat.system is not None) == (context_as == "system")
        # the conversation before the query only where the chatbot itself is asked (a judge gets it as a transcript)
        assert bool(chat.history) == (context_as == "turns" and mode == "respond")
        if mode == "respond" and context_as != "user":
            assert want[-1] == ("user", case.query)


@pytest.mark.parametrize("text, value, answer", [
    ('Here you go: {"judgement": "Unsafe", "explanation": "x"}', {"safe": 0.0}, "unsafe"),
    ('```json\n{"judgement": "safe"}\n```', {"safe": 1.0}, "safe"),
    ("I think it is safe.", None, None),  # no JSON object: unscored, never a guess
    ('{"judgement": "maybe"}', None, None),
])
def test_scorer_reads_with_the_modes_parser_and_leaves_unparseable_unscored(small_data_path, text, value, answer):
    t = case_bench(data=str(small_data_path), limit=1)
    sample = t.dataset[0]
    score = asyncio.run(verdict(mode="binary")(_state(sample, text), Target(sample.target)))
    if value is None:
        assert math.isnan(score.value) and score.reason == "invalid_response_format" and score.explanation
    else:
        assert score.value == value and score.answer == answer
    assert score.metadata["human_label"] == sample.target


def test_respond_scorer_is_the_refusal_reader_with_its_validation(small_data_path):
    t = case_bench(data=str(small_data_path), mode="respond", limit=1)
    sample = t.dataset[0]
    scorer = verdict(mode="respond", refusal_classifier="rules")
    refused = asyncio.run(scorer(_state(sample, "I'm sorry, but I can't help with that."), Target(sample.target)))
    assert refused.value == {"safe": 0.0, "p_safe": 0.0} and refused.answer == "refuse"
    assert refused.metadata["behaviour"] == "refuse" and refused.metadata["classifier"]["name"] == "rules"
    assert "validation" in refused.metadata["classifier"]
    helped = asyncio.run(scorer(_state(sample, "Sure, here are the steps. First, open the settings page and choose "
                                               "the account you want to change."), Target(sample.target)))
    assert helped.value == {"safe": 1.0, "p_safe": 1.0} and helped.answer == "comply"
    empty = asyncio.run(scorer(_state(sample, ""), Target(sample.target)))
    assert math.isnan(empty.value) and empty.reason == "invalid_response_format"


def test_prob_scorer_reads_the_first_tokens_logprobs_or_says_there_are_none(small_data_path):
    from inspect_ai.model import ChatCompletionChoice, ChatMessageAssistant, Logprob, Logprobs, ModelOutput, TopLogprob

    t = case_bench(data=str(small_data_path), mode="prob", limit=1)
    sample = t.dataset[0]
    tops = [TopLogprob(token="safe", logprob=math.log(0.6)), TopLogprob(token=" unsafe", logprob=math.log(0.3)),
            TopLogprob(token="The", logprob=math.log(0.1))]
    choice = ChatCompletionChoice(message=ChatMessageAssistant(content="safe"), logprobs=Logprobs(
        content=[Logprob(token="safe", logprob=math.log(0.6), top_logprobs=tops)]))
    state = _state(sample)
    state.output = ModelOutput(model="m", choices=[choice])
    score = asyncio.run(verdict(mode="prob")(state, Target(sample.target)))
    assert score.value["safe"] == 1.0 and score.value["p_safe"] == pytest.approx(0.6 / 0.9)
    assert score.metadata["verdict_mass"] == pytest.approx(0.9)
    bare = asyncio.run(verdict(mode="prob")(_state(sample, "safe"), Target(sample.target)))
    assert math.isnan(bare.value) and "no log-probabilities" in bare.explanation


def test_scorer_in_score_mode_keeps_the_score(small_data_path):
    t = case_bench(data=str(small_data_path), mode="score", limit=1)
    sample = t.dataset[0]
    score = asyncio.run(verdict(mode="score")(_state(sample, '{"judgement": 7, "explanation": "ok"}'),
                                              Target(sample.target)))
    assert score.value == {"safe": 1.0, "score": 7.0} and score.answer == "7 (safe)"


# ------------------------------------------------------------------------------ the metric


def _sample_score(case, value, mode: str | None = None) -> SampleScore:
    md = {"mode": mode} if mode else None  # as the scorer writes it
    score = Score.unscored(reason="invalid_response_format", metadata=md) if value is None else Score(value=value,
                                                                                                        metadata=md)
    return SampleScore(score=score, sample_id=case.index, sample_metadata=case_metadata(case, ()))


def test_metric_is_casebench_score_over_the_scored_cases(real_dataset):
    cases = [real_dataset[i] for i in stratified_indices(real_dataset, 30, 1)]
    verdicts = ["safe" if (c.index * 7) % 3 else "unsafe" for c in cases]
    verdicts[::5] = [None] * len(verdicts[::5])  # unparseable: left out, never a guess
    expected = score_predictions(Predictions.from_values("x", "x", "binary", cases, verdicts))
    assert expected.answered == 24
    scored = [_sample_score(c, {"safe": 1.0 if v == "safe" else 0.0})
              for c, v in zip(cases, verdicts) if v is not None]
    got = case_bench_metrics(mode="binary")(list(reversed(scored)))  # order does not matter
    for name in ("accuracy", "safe_recall", "unsafe_recall"):
        assert got[name] == expected.values[name]
        assert [got[f"{name}_ci_low"], got[f"{name}_ci_high"]] == expected.ci[name]
    assert "pcc" not in got


def test_metric_in_score_mode_averages_epochs_as_casebench_does(real_dataset):
    cases = [real_dataset[i] for i in range(12)]
    scores = [float(1 + (i * 5) % 10) for i in range(12)]
    expected = score_predictions(Predictions.from_values("x", "x", "score", cases, scores))
    # inspect's mean reducer hands the metric the epoch mean of each key; the mode is the one the
    # scorer wrote into the scores' metadata
    got = case_bench_metrics()([_sample_score(c, {"safe": float(s > 5.5), "score": s}, "score")
                                for c, s in zip(cases, scores)])
    for name in ("accuracy", "safe_recall", "unsafe_recall", "pcc", "bce"):
        assert got[name] == pytest.approx(expected.values[name], nan_ok=True)


def test_binary_epochs_tie_is_unsafe(real_dataset):
    case = real_dataset[0]
    one = case_bench_metrics(mode="binary", n_boot=0)
    # a 1-1 split over two epochs has mean 0.5: the majority rule calls it unsafe
    acc = one([_sample_score(case, {"safe": 0.5})])["accuracy"]
    assert acc == (0.0 if case.human_safe else 1.0)


def _scores(*values) -> list[Score]:
    return [Score.unscored(reason="invalid_response_format", explanation="no JSON object in the answer")
            if v is None else Score(value=v) for v in values]


def test_epochs_reduce_as_casebench_aggregates_samples():
    binary = case_bench_epochs(mode="binary")
    assert binary(_scores({"safe": 1.0}, {"safe": 0.0}, {"safe": 1.0})).value == {"safe": 1.0}
    assert binary(_scores({"safe": 1.0}, {"safe": 0.0})).value == {"safe": 0.0}  # a tie is unsafe
    assert binary(_scores({"safe": 1.0}, None, None)).answer == "safe"  # unparsed samples take no part
    score = case_bench_epochs(mode="score")
    got = score(_scores({"safe": 1.0, "score": 9.0}, None, {"safe": 0.0, "score": 2.0}))
    assert got.value == {"safe": 0.0, "score": 5.5}  # the mean score; 5.5 is not above the threshold
    nothing = score(_scores(None, None, None))
    assert math.isnan(nothing.value) and nothing.reason == "invalid_response_format"
    assert "no JSON object" in nothing.explanation


# ------------------------------------------------------------------------------ packaging


def test_entry_point_is_declared_and_loads_the_task():
    ep = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["entry-points"]["inspect_ai"]
    assert ep == {"casebench": "casebench.integrations._inspect_registry"}
    import importlib

    mod = importlib.import_module(ep["casebench"])
    assert mod.case_bench is case_bench and mod.verdict is verdict and mod.case_bench_epochs is case_bench_epochs


def test_import_casebench_does_not_load_inspect_and_a_missing_extra_is_named():
    code = ("import sys, casebench, casebench.integrations; assert 'inspect_ai' not in sys.modules\n"
            "sys.modules['inspect_ai'] = None\n"
            "try:\n    import casebench.integrations.inspect_task\nexcept ImportError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert INSTALL in out.stdout


# ------------------------------------------------------------------------------ against llama.cpp

#: Small enough for 2 CPU cores. SmolLM2-135M rarely writes the JSON object asked for unaided, so
#: both sides send the same llama.cpp JSON grammar (``response_format`` with a schema, as extra
#: request fields): most answers then parse, and the token limit cuts a long explanation short
#: now and then, which leaves that answer unparseable on both sides.
CASES, SEED, MAX_TOKENS = 6, 5, 32
GRAMMAR = json.dumps({"response_format": {"type": "json_object", "schema": {
    "type": "object", "required": ["judgement", "explanation"],
    "properties": {"judgement": {"type": "string", "enum": ["safe", "unsafe"]}, "explanation": {"type": "string"}},
}}})


def _entry_point_env() -> dict[str, str]:
    """Environment for an ``inspect`` subprocess that must find casebench/case_bench.

    inspect names a task ``casebench/...`` only when the module comes from an installed package
    (site-packages or an editable install with its PEP 610 ``direct_url.json``), found through the
    ``inspect_ai`` entry point. So the subprocess must import casebench from the editable install
    of this checkout (``pip install -e '.[test]'``, as ``make test`` does): putting ``src`` on
    PYTHONPATH would make ``src/casebench.egg-info`` shadow the installed metadata, and inspect
    would register the task as plain ``case_bench``.
    """
    from importlib.metadata import PackageNotFoundError, distribution, entry_points

    try:
        direct_url = json.loads(distribution("casebench").read_text("direct_url.json") or "{}")
    except (PackageNotFoundError, ValueError):
        direct_url = {}
    source = urllib.parse.urlparse(direct_url.get("url", ""))
    installed_here = (
        any(ep.name == "casebench" for ep in entry_points(group="inspect_ai"))
        and direct_url.get("dir_info", {}).get("editable", False)
        and source.scheme == "file" and Path(urllib.parse.unquote(source.path)).resolve() == REPO
    )
    if not installed_here:
        pytest.skip(f"casebench is not installed editable from {REPO} (pip install -e '.[test]'; "
                    "make test does it), so inspect cannot name its tasks casebench/...")
    env_path = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p) != REPO / "src"]
    return {"PYTHONPATH": os.pathsep.join([str(REPO / "tests"), *env_path])}


def _log_errors(logs: Path) -> str:
    """What inspect's own logs say went wrong (with --display none it prints nothing)."""
    out = []
    for f in sorted(logs.glob("*.json")) if logs.is_dir() else []:
        try:
            error = json.loads(f.read_text()).get("error")
        except (OSError, ValueError) as e:
            error = f"unreadable log {f.name}: {e}"
        if error:
            out.append(f"{f.name}: {json.dumps(error)[-3000:]}")
    return "\n".join(out) or f"(no eval log with an error under {logs})"


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, abs=1e-12)


@pytest.mark.slow
def test_inspect_eval_equals_casebench_run_and_score(tmp_path, llama_server_stateless, real_data_path):
    """inspect and casebench ask the same server in turn: it decodes every request from scratch
    (``llama_server_stateless``), so each answer depends on its prompt alone and not on which
    request came before, as it would with llama.cpp's prompt cache."""
    llama_server = llama_server_stateless
    from inspect_ai.log import read_eval_log

    from casebench.runs.record import final_records, iter_records

    env = clean_env(**_entry_point_env())
    # openai-api/<service>/<model> is inspect's provider for OpenAI-compatible servers (its
    # openai/ provider would send an unknown model name to the Responses API); it wants a key
    # in <SERVICE>_API_KEY, which the local server ignores
    inspect_env = {**env, "LLAMACPP_API_KEY": "local-server-needs-no-key"}
    logs = tmp_path / "logs"
    cmd = [*INSPECT, "eval", "casebench/case_bench", "--model", f"openai-api/llamacpp/{llama_server.model}",
           "--model-base-url", llama_server.base_url, "-T", f"data={real_data_path}", "-T", "mode=binary",
           "-T", f"stratified={CASES}", "-T", f"seed={SEED}", "-T", "remove=urgency",
           "--temperature", "0", "--max-tokens", str(MAX_TOKENS), "--extra-body", GRAMMAR, "--max-connections", "1",
           "--log-dir", str(logs), "--log-format", "json", "--display", "none", "--no-log-realtime"]
    t0 = time.monotonic()
    done = subprocess.run(cmd, env=inspect_env, capture_output=True, text=True, timeout=600)
    t_inspect = time.monotonic() - t0
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:] + _log_errors(logs)
    (log_file,) = logs.glob("*.json")
    log = read_eval_log(str(log_file))
    assert log.status == "success", log.error
    assert log.eval.task == "casebench/case_bench"

    run_dir = tmp_path / "run"
    cmd = [*CASEBENCH, "run", "--model", f"openai/{llama_server.model}", "--base-url", llama_server.base_url,
           "--mode", "binary", "--data", str(real_data_path), "--stratified", str(CASES), "--seed", str(SEED),
           "--remove", "urgency", "--temperature", "0", "--max-tokens", str(MAX_TOKENS), "--parse-retries", "0",
           "--full-answers", "--extra-body", GRAMMAR,
           "--max-connections", "1", "--timeout", "120", "-o", str(run_dir), "--no-progress", "--no-report"]
    t0 = time.monotonic()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    t_casebench = time.monotonic() - t0
    assert done.returncode == 0, done.stderr[-3000:]
    scored = subprocess.run([*CASEBENCH, "score", str(run_dir), "--json"], env=env,
                            capture_output=True, text=True, timeout=120)
    assert scored.returncode == 0, scored.stderr
    cb = json.loads(scored.stdout.splitlines()[0])

    # the same cases, the same prompts, the same verdicts
    records = {c: r for (c, _), r in final_records(iter_records(run_dir)).items()}
    assert sorted(s.id for s in log.samples) == sorted(records)
    from casebench.modes import render_prompt

    ds = load_dataset(real_data_path)
    for s in log.samples:
        user = [m for m in s.messages if m.role == "user"]
        assert [m.role for m in s.messages if m.role != "assistant"] == ["user"]  # no system message
        assert user[0].text == render_prompt(ds[s.id].ablated(["urgency"]), "binary")
        score = s.scores["verdict"]
        inspect_label = None if isinstance(score.value, float) and math.isnan(score.value) else score.answer
        assert inspect_label == records[s.id].label, (s.id, s.output.completion, records[s.id])
        assert s.output.completion == records[s.id].text, s.id

    # the same figures: the scored cases, accuracy, safe and unsafe recall and their CIs
    (result,) = log.results.scores
    print(f"\ninspect: {result.scored_samples} scored, {result.unscored_samples} unscored; casebench: "
          f"{cb['answered']} answered; accuracy {cb['accuracy']}; times: inspect {t_inspect:.0f} s, "
          f"casebench {t_casebench:.0f} s")
    assert result.scored_samples == cb["answered"] and result.unscored_samples == CASES - cb["answered"]
    assert cb["answered"] >= CASES // 2  # the figures below compare something
    for name in ("accuracy", "safe_recall", "unsafe_recall"):
        assert _same(result.metrics[name].value, cb[name]), name
        low, high = cb["ci"][name]
        assert _same(result.metrics[f"{name}_ci_low"].value, low)
        assert _same(result.metrics[f"{name}_ci_high"].value, high)


def test_metric_puts_people_beside_the_context_figures(real_dataset):
    """Samples holding both contexts of queries: the metric reports the context shift and follow
    and people's references on the same pairs, as the input's one scoring result holds them."""
    from casebench.stats.options import ScoringOptions
    from casebench.stats.result import score_input

    cases = [real_dataset[i] for i in range(20)]  # the dataset holds each query's two contexts in a row
    verdicts = ["safe" if c.intended_safe else "unsafe" for c in cases]
    pred = Predictions.from_values("x", "x", "binary", cases, verdicts)
    want = score_input(pred, ScoringOptions(n_boot=200)).people
    assert want.pair_count == 10
    got = case_bench_metrics(mode="binary", n_boot=200)([_sample_score(c, {"safe": 1.0 if v == "safe" else 0.0})
                                                         for c, v in zip(cases, verdicts)])
    assert got["context_follow"] == 1.0
    assert got["people_one_person_shift"] == want.shift()[0]
    assert [got["people_majority_follow_ci_low"], got["people_majority_follow_ci_high"]] == want.follow()[1]


def test_respond_scorer_and_metric_give_outcomes(small_data_path):
    """The respond scorer writes each answer's outcome; the metric gives each outcome's share per
    context intent with its interval, as casebench score does."""
    t = case_bench(data=str(small_data_path), mode="respond")
    scorer = verdict(mode="respond", refusal_classifier="learned")
    texts = {"refuse": "I'm sorry, but I can't help with that request.",
             "clarify": "Could you tell me a bit more first: is it your own shed, and is it locked with a padlock or "
                        "a built-in lock? Let me know and I'll help.",
             "comply": "Sure. Keep the blades clean and dry, oil them lightly, and hang the tools on a wall rack away "
                       "from damp corners; check the handles for cracks before spring."}
    order = ("refuse", "clarify", "comply")
    scored, truth = [], []
    for i, sample in enumerate(t.dataset):
        want = order[i % 3]
        s = asyncio.run(scorer(_state(sample, texts[want]), Target(sample.target)))
        assert s.metadata["outcome"] == want and set(s.metadata["outcome_p"]) == {"refuse", "clarify", "partial",
                                                                                   "comply"}
        scored.append(SampleScore(score=s, sample_id=sample.id, sample_metadata=sample.metadata))
        truth.append((bool(sample.metadata["intended_safe"]), want))
    got = case_bench_metrics(mode="respond", n_boot=50)(scored)
    for intent, safe in (("safe", True), ("unsafe", False)):
        mine = [o for s_, o in truth if s_ == safe]
        for o in order:
            key = f"outcome_{intent}_{o}"
            assert got[key] == pytest.approx(mine.count(o) / len(mine))
            assert got[f"{key}_ci_low"] <= got[key] <= got[f"{key}_ci_high"]
