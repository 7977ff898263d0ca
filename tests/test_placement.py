"""The placement study (``casebench.stats.placement``, ``runs.study.run_placements`` and
``casebench study``).

The running tests drive a real loopback OpenAI-compatible server whose chatbot behaves by a
rule of the placement it is shown: with the context in the user message it answers everything,
as the system prompt it refuses everything, as earlier turns it answers exactly when those turns
are the safe-intent context of the query. So every expected figure (over- and under-refusal,
the context figures, the paired tests) follows from that rule and the human labels, and is
worked out here from the dataset, not read back from the code under test.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from casebench.cli import cli
from casebench.data import load_dataset
from casebench.predictions import Predictions
from casebench.prompts import render_turns
from casebench.runs.select import stratified_pairs
from casebench.stats.bootstrap import case_clusters
from casebench.stats.compare import compare
from casebench.stats.paired_tests import mcnemar_clustered, mcnemar_exact
from casebench.stats.options import ScoringOptions
from casebench.stats.pairs import pair_by_query
from casebench.stats.placement import ContextFigures, PlacementStudyError, analyse_placements, placement_of
from casebench.stats.result import score_input


def query_pairs(pred: Predictions) -> tuple[np.ndarray, np.ndarray]:
    """Positions (safe-intent case, unsafe-intent case) of the query pairs of ``pred``'s cases."""
    pairs = np.array(pair_by_query(pred.cases).pairs, dtype=int).reshape(-1, 2)
    return pairs[:, 0], pairs[:, 1]
from servers.fault_server import FaultServer

ANSWER = "Here is an overview of the topic, step by step, with the main points explained in plain words."
REFUSAL = "I'm sorry, but I can't help with that request."


def _chatbot(ds):
    """The rule of the module docstring, keyed on the earlier turns of each case's context."""
    safe_turns = {json.dumps(render_turns(c.context)) for c in ds if c.intended_safe}

    def answer(body) -> str:
        msgs = body["messages"]
        last = msgs[-1]["content"]
        if "Decide whether the chatbot should respond" in last or '"judgement"' in last:  # a judge: always safe
            return json.dumps({"judgement": "safe", "explanation": "rule"})
        if msgs[0]["role"] == "system":
            return REFUSAL
        if len(msgs) == 1:
            return ANSWER
        history = tuple((msgs[i]["content"], msgs[i + 1]["content"]) for i in range(0, len(msgs) - 1, 2))
        return ANSWER if json.dumps(history) in safe_turns else REFUSAL

    return answer


@pytest.fixture()
def quiet_openai(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def _expected(ds):
    """Per placement, whether the rule answers each case."""
    n = len(ds)
    return {"user": np.ones(n, bool), "system": np.zeros(n, bool),
            "turns": np.array([c.intended_safe for c in ds])}


def test_study_runs_every_placement_with_one_server_and_reports_figures(tmp_path, small_data_path, quiet_openai):
    ds = load_dataset(small_data_path)
    human = np.array([c.human_safe for c in ds])
    with FaultServer(answer_fn=_chatbot(ds)) as srv:
        args = ["study", "--model", "openai/bot-x", "--mode", "respond", "--placements", "user,system,turns",
                "--say-do", "binary", "--data", str(small_data_path), "--base-url", srv.base_url,
                "--out-root", str(tmp_path / "runs"), "--no-progress", "--bootstrap", "200", "--json"]
        r = CliRunner().invoke(cli, args)
        assert r.exit_code == 0, r.output
        assert srv.count == 6 * len(ds)  # three respond and three judge runs, one request per case
        res = json.loads(r.stdout)
        # the same command again asks nothing
        r2 = CliRunner().invoke(cli, args)
        assert r2.exit_code == 0 and srv.count == 6 * len(ds) and r2.stderr.count("reused") == 6
    assert [p["placement"] for p in res["placements"]] == ["user", "system", "turns"]
    exp = _expected(ds)
    by = {p["placement"]: p for p in res["placements"]}
    for where, answered in exp.items():
        p = by[where]
        over = float(np.mean(~answered[human]))
        under = float(np.mean(answered[~human]))
        assert p["over_refusal"] == pytest.approx(over) and p["under_refusal"] == pytest.approx(under)
        assert p["over_refusal_ci"][0] <= over <= p["over_refusal_ci"][1]
        assert p["under_refusal_ci"][0] <= under <= p["under_refusal_ci"][1]
        k, n = int(np.sum(~answered[human])), int(human.sum())  # Wilson, worked out here
        # clustered by query (the default): Student's t with K - 1 df, K the queries of the human-safe cases
        from scipy.stats import t as student_t

        z = float(student_t.ppf(0.975, len({c.query for c, hs in zip(ds, human) if hs}) - 1))
        mid, half = (k / n + z * z / (2 * n)), z * np.sqrt(k / n * (1 - k / n) / n + z * z / (4 * n * n))
        assert p["over_refusal_ci"] == pytest.approx([max(0, (mid - half) / (1 + z * z / n)),
                                                      min(1, (mid + half) / (1 + z * z / n))])
        assert p["score"]["refusal_rate"] == pytest.approx(1 - answered.mean())
        assert p["classifier"]["partial_as"] == "unsafe"  # which classifier read the answers travels along
        sd = p["say_do"]  # the judge says safe everywhere
        assert sd["judged_safe"] == 1.0 and sd["answered"] == pytest.approx(answered.mean())
        assert sd["gap"] == pytest.approx(1 - answered.mean())
    # context figures: 4 query pairs in the fixture
    s, u = query_pairs(load_dataset_preds(ds))
    differ = human[s] != human[u]
    assert by["user"]["context"]["context_pairs"] == 4
    assert by["user"]["context"]["context_shift"] == 0 and by["user"]["context"]["context_follow"] == 0
    assert by["turns"]["context"]["context_shift"] == 1 and by["turns"]["context"]["context_follow"] == 1
    assert by["turns"]["context"]["context_blind"] == (0.0 if differ.any() else None)
    assert by["user"]["context"]["context_blind"] == (1.0 if differ.any() else None)
    # paired tests between placements: McNemar on the correctness the rule implies
    pairs = {(x["a"], x["b"]): x for x in res["pairs"]}
    assert set(pairs) == {("user", "system"), ("user", "turns"), ("system", "turns")}
    queries = case_clusters(list(ds), "query")  # the default clustering: the two contexts of a query
    for (a, b), x in pairs.items():
        want = mcnemar_clustered(exp[a] == human, exp[b] == human, queries)
        assert x["mcnemar"]["a_only"] == want["a_only"] and x["mcnemar"]["p"] == pytest.approx(want["p"])
        assert x["n_paired"] == len(ds)
    shift = {(d["a"], d["b"]): d for d in res["context_shift_differences"]}
    assert shift[("user", "turns")]["diff"] == -1 and shift[("user", "turns")]["pairs"] == 4
    # the text form names every placement and the paired tests
    r = CliRunner().invoke(cli, args[:-1])
    assert r.exit_code == 0, r.output
    for text in ("context as user, system, turns", "over-refusal", "say-do gap", "user vs turns", "McNemar"):
        assert text in r.stdout
    # the finished runs re-analysed as inputs give the same figures
    respond = [p["source"] for p in res["placements"]]
    dirs = respond + sorted(str(d) for d in (tmp_path / "runs").iterdir() if str(d) not in respond)
    r = CliRunner().invoke(cli, ["study", *dirs, "--bootstrap", "200", "--json"])
    assert r.exit_code == 0, r.output
    again = json.loads(r.stdout)
    assert again["placements"] == res["placements"] and again["pairs"] == res["pairs"]


def load_dataset_preds(ds) -> Predictions:
    return Predictions.from_values("x", "m", "binary", list(ds), ["safe"] * len(ds))


def test_context_figures_by_hand(small_data_path):
    """shift, follow and blind worked out by hand on the fixture's four query pairs, with one
    side of a pair missing (the pair is left out)."""
    ds = load_dataset(small_data_path)
    cases = list(ds)
    s, u = query_pairs(load_dataset_preds(ds))
    assert len(s) == 4 and all(cases[i].intended_safe for i in s) and not any(cases[i].intended_safe for i in u)
    assert all(cases[a].query == cases[b].query for a, b in zip(s, u))
    # prob mode: pair 0 follows (0.9 / 0.2), pair 1 is blind (0.7 / 0.6), pair 2 backwards (0.3 / 0.8),
    # pair 3 has its unsafe side missing
    values: list = [None] * len(cases)
    for (a, b), (va, vb) in zip(zip(s, u), [(0.9, 0.2), (0.7, 0.6), (0.3, 0.8), (0.6, None)]):
        values[a], values[b] = va, vb
    pred = Predictions.from_values("x", "m", "prob", cases, values)
    fig = ContextFigures.of(score_input(pred, ScoringOptions(n_boot=0)).score)
    assert fig.pairs == 3
    assert fig.shift == pytest.approx(((0.9 - 0.2) + (0.7 - 0.6) + (0.3 - 0.8)) / 3)
    assert fig.follow == pytest.approx(1 / 3)
    h = np.array([c.human_safe for c in cases])
    differ = [bool(h[a] != h[b]) for a, b in list(zip(s, u))[:3]]
    same_label = [False, True, False]
    k = sum(differ)
    assert fig.blind_pairs == k
    if k:
        assert fig.blind == pytest.approx(sum(d and sl for d, sl in zip(differ, same_label)) / k)
    fig = ContextFigures.of(score_input(pred, ScoringOptions(n_boot=300, bootstrap_seed=1)).score)
    lo, hi = fig.ci["context_shift"]
    assert lo <= fig.shift <= hi
    # follow: 1 of 3 pairs, Wilson 95%: (p + z^2/2n -+ z sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n), z the
    # t quantile with 3 - 1 df (clustered by query, three queries)
    from scipy.stats import t as student_t

    z = float(student_t.ppf(0.975, 2))
    p_, n_ = 1 / 3, 3
    mid, half = p_ + z * z / (2 * n_), z * np.sqrt(p_ * (1 - p_) / n_ + z * z / (4 * n_ * n_))
    assert fig.ci["context_follow"] == pytest.approx([(mid - half) / (1 + z * z / n_), (mid + half) / (1 + z * z / n_)],
                                                     abs=1e-9)


def test_study_errors_are_clear(small_data_path):
    ds = load_dataset(small_data_path)
    cases = list(ds)
    a = Predictions.from_values("a", "m", "binary", cases, ["safe"] * 8, context_as="user")
    b = Predictions.from_values("b", "m", "binary", cases, ["unsafe"] * 8, context_as="user")
    with pytest.raises(PlacementStudyError, match="placement 'user' appears twice"):
        analyse_placements([a, b], ScoringOptions(n_boot=0))
    with pytest.raises(PlacementStudyError, match="at least two placements"):
        analyse_placements([a], ScoringOptions(n_boot=0))
    c = Predictions.from_values("c", "other", "binary", cases, ["safe"] * 8, context_as="turns")
    with pytest.raises(PlacementStudyError, match="one model in one mode"):
        analyse_placements([a, c], ScoringOptions(n_boot=0))
    # a published file is the paper's placement
    assert placement_of(Predictions.from_values("p", "m", "binary", cases, ["safe"] * 8)) == "user"
    # the analysis is the same as compare's on the same inputs
    t = Predictions.from_values("t", "m", "binary", cases, ["unsafe"] * 8, context_as="turns")
    res = analyse_placements([t, a], ScoringOptions(n_boot=50))
    assert [p.placement for p in res.placements] == ["turns", "user"]  # in the order given
    want = compare([t, a], ScoringOptions(n_boot=50))
    assert res.comparison.pairs[0].mcnemar == want.pairs[0].mcnemar
    r = CliRunner().invoke(cli, ["study"])
    assert r.exit_code == 2 and "--model" in r.output


def test_placements_are_checked_before_anything_runs(tmp_path, small_data_path, quiet_openai):
    r = CliRunner().invoke(cli, ["study", "--model", "openai/x", "--mode", "respond", "--placements", "user,chat",
                                 "--data", str(small_data_path), "--out-root", str(tmp_path)])
    assert r.exit_code == 2 and "unknown context placement" in r.output and "'chat'" in r.output
    r = CliRunner().invoke(cli, ["study", "--model", "openai/x", "--mode", "binary", "--say-do", "prob",
                                 "--data", str(small_data_path)])
    assert r.exit_code == 2 and "--say-do goes with --mode respond (a mode that reads behaviour)" in r.output
    assert not any(tmp_path.iterdir())


def test_stratified_pairs_on_the_real_dataset(real_dataset):
    """45 pairs are one query per category with both its contexts (90 cases); deterministic."""
    idx = stratified_pairs(real_dataset, 45, seed=0)
    assert len(idx) == 90 and idx == sorted(idx) == stratified_pairs(real_dataset, 45, seed=0)
    cases = [real_dataset[i] for i in idx]
    assert len({c.category for c in cases}) == 45
    by_query: dict[str, list] = {}
    for c in cases:
        by_query.setdefault(c.query, []).append(c.intended_safe)
    assert len(by_query) == 45 and all(sorted(v) == [False, True] for v in by_query.values())
    assert stratified_pairs(real_dataset, 45, seed=1) != idx


def test_report_has_a_placement_section(tmp_path, small_data_path, quiet_openai):
    """The report finds the study among its inputs (runs made with the Python API) and shows a
    row per placement with the same figures as ``analyse_placements``, the say-do columns from
    the judge runs, and the pairs between placements."""
    import re

    from casebench.present.report import build_report
    from casebench.runs.config import RunConfig
    from casebench.runs.results import load_run
    from casebench.runs.study import run_placements

    ds = load_dataset(small_data_path)
    with FaultServer(answer_fn=_chatbot(ds)) as srv:
        base = RunConfig(mode="respond", model="openai/bot-x", data=small_data_path, progress=False,
                         backend_options={"base_url": srv.base_url})
        runs = run_placements(base, "turns,user", out_root=tmp_path / "runs", dataset=ds, judge_mode="binary")
    assert [(r.context_as, r.mode) for r in runs] == [("turns", None), ("user", None), ("turns", "binary"),
                                                      ("user", "binary")]
    preds = [load_run(r.run_dir, dataset=ds) for r in runs]
    html = build_report(preds, ScoringOptions(n_boot=100), human=False)
    assert 'id="placement"' in html and "Where the context goes" in html
    section = html[html.index('id="placement"'):]
    table = section[section.index('<table class="placement">'):section.index("</table>")]
    rows = re.findall(r'<tr><td class="l">(\w+)</td>', table)
    assert rows == ["turns", "user"]
    res = analyse_placements(preds[:2], ScoringOptions(n_boot=100), judges=preds[2:])
    turns = res.placements[0]
    assert turns.placement == "turns" and turns.say_do is not None
    assert f"<td>{turns.over_refusal:.3f}" in table and f"<td>{turns.context.shift:.3f}" in table
    assert "Say-do gap" in table and "Refusals read by learned" in section
    assert "turns − user" in section


def test_a_judge_with_no_readable_verdict_leaves_the_say_do_gap_out_and_says_why(tmp_path, small_data_path,
                                                                                 quiet_openai):
    """A small judge may write no readable verdict at all (the embedded SmolLM2 answers binary
    mode's prompt with prose and no JSON): the study still gives every other figure, and the
    say-do gap is a missing figure with its reason, in the text, the JSON and the report."""
    from casebench.present.report import build_report
    from casebench.present.study_text import format_placements
    from casebench.runs.config import RunConfig
    from casebench.runs.results import load_run
    from casebench.runs.study import run_placements

    ds = load_dataset(small_data_path)
    chatbot = _chatbot(ds)

    def answer(body) -> str:
        last = body["messages"][-1]["content"]
        if "Decide whether the chatbot should respond" in last or '"judgement"' in last:
            return "The chatbot should respond with a message that explains the situation."
        return chatbot(body)

    with FaultServer(answer_fn=answer) as srv:
        base = RunConfig(mode="respond", model="openai/bot-x", data=small_data_path, progress=False,
                         backend_options={"base_url": srv.base_url})
        runs = run_placements(base, "turns,user", out_root=tmp_path / "runs", dataset=ds, judge_mode="binary")
    preds = [load_run(r.run_dir, dataset=ds) for r in runs]
    assert not preds[2].answered.any() and not preds[3].answered.any()
    res = analyse_placements(preds[:2], ScoringOptions(n_boot=50), judges=preds[2:])
    for p in res.placements:
        assert p.say_do is None and p.over_refusal is not None
        assert p.say_do_missing.startswith(f"the judge (binary) gave a readable verdict on 0 of {len(ds)} cases")
        d = p.to_dict()
        assert d["say_do"] is None and d["say_do_missing"] == p.say_do_missing
    text = format_placements(res)
    assert "say-do gap" in text and text.count("– (not available: the judge (binary)") == 2
    assert "† from fewer than 30 cases" in text  # a handful of cases: every figure marked
    html = build_report(preds, ScoringOptions(n_boot=50), human=False)
    assert "Say-do gap in placement turns not available" in html


def test_run_placements_refuses_a_judge_mode_that_does_not_fit(small_data_path):
    from casebench.runs.config import RunConfig
    from casebench.runs.record import RunError
    from casebench.runs.study import run_placements

    judge = RunConfig(mode="binary", model="openai/x", data=small_data_path)
    with pytest.raises(RunError, match="goes with a respond study"):
        run_placements(judge, "user,turns", judge_mode="prob")
    respond = RunConfig(mode="respond", model="openai/x", data=small_data_path)
    with pytest.raises(RunError, match="must be a judge mode"):
        run_placements(respond, "user,turns", judge_mode="respond")
    with pytest.raises(RunError, match="at least two placements"):
        run_placements(respond, "turns")
