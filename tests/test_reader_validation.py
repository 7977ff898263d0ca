"""The reader's validation that applies to a run (per --partial-as setting and kind of writer), and
text that is not an answer read as missing by every reader (issue 26, items 2 and 3)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from casebench.classify import Item, make_classifier
from casebench.classify import validation
from casebench.classify.base import not_an_answer
from casebench.classify.evaluate import is_undetermined, load_labelled_csv, refusal_eval
from casebench.classify.llm import LLMClassifier
from casebench.cli import cli

ROOT = Path(__file__).resolve().parent.parent
XSTEST = ROOT.parent / "shared" / "xstest" / "xstest_v2_completions_llama2new.csv"

NOT_ANSWERS = ["", "   \n\t ", "asdf qwer zxcv", "sdfkj wer", "!!! ??? ...", "qwrtz"]
ANSWERS = ["Paris.", "42", "No.", "Apples, oranges and pears.", "def f(x): return x + 1",
           "I can't help with that request."]


@pytest.mark.parametrize("text", NOT_ANSWERS)
@pytest.mark.parametrize("spec", ["rules", "learned"])
def test_not_an_answer_is_undetermined_offline(spec: str, text: str) -> None:
    v = make_classifier(spec).classify("How do I bake bread?", text)
    assert v.behaviour is None and is_undetermined(v) and "not an answer" in (v.reason or "")


@pytest.mark.parametrize("text", ANSWERS)
def test_short_real_answers_are_read(text: str) -> None:
    assert not_an_answer(text) is None
    assert make_classifier("rules").classify("q", text).behaviour is not None


def test_not_an_answer_never_reaches_an_llm_reader(fault_server: Any) -> None:
    fault_server.answer = "COMPLY"
    clf = LLMClassifier("openai/m", base_url=fault_server.base_url)
    items = [Item("q", t) for t in NOT_ANSWERS] + [Item("q", "Here is a recipe: flour, water, salt, yeast.")]
    verdicts = asyncio.run(clf.aclassify(items))
    assert all(v.behaviour is None and is_undetermined(v) for v in verdicts[:-1])
    assert verdicts[-1].behaviour == "comply"
    assert fault_server.count == 1  # only the real answer was sent


def test_refusal_eval_partial_as_safe_on_the_shared_file() -> None:
    if not XSTEST.is_file():
        pytest.skip("the shared XSTest file is not here")
    runner = CliRunner()
    out = {pa: json.loads(runner.invoke(cli, ["refusal-eval", str(XSTEST), "--partial-as", pa, "--json"]).stdout)
           for pa in ("unsafe", "safe")}
    for pa, d in out.items():
        assert d["partial_as"] == pa and d["n"] == 450
        # the binary confusion is the 3x3 one with partial folded into the side the setting names
        m = d["confusion"]["matrix"]  # rows people, columns reader: comply, partial, refuse
        side = {"comply": 0, "partial": 0 if pa == "safe" else 1, "refuse": 1}
        folded = [[0, 0], [0, 0]]
        for i, h in enumerate(("comply", "partial", "refuse")):
            for j, c in enumerate(("comply", "partial", "refuse")):
                folded[side[h]][side[c]] += m[i][j]
        assert d["binary"]["matrix"] == folded
        assert d["agreement"] == pytest.approx((folded[0][0] + folded[1][1]) / d["n_classified"])
    assert out["unsafe"]["agreement_3class"] == out["safe"]["agreement_3class"]
    assert out["unsafe"]["agreement"] != out["safe"]["agreement"]
    text = runner.invoke(cli, ["refusal-eval", str(XSTEST), "--partial-as", "safe", "--show", "0"]).stdout
    assert "agreement (binary, partial = answer" in text and "sensitivity" in text


def test_stored_validation_per_setting_and_writer() -> None:
    clf = make_classifier()
    unsafe = validation.validation_for(clf.name, clf.version, "unsafe")
    safe = validation.validation_for(clf.name, clf.version, "safe")
    assert unsafe["partial_as"] == "unsafe" and safe["partial_as"] == "safe"
    assert unsafe["matrix"] != safe["matrix"] and unsafe["n"] == safe["n"]
    held = load_labelled_csv(ROOT / unsafe["file"])
    assert safe["agreement"] == pytest.approx(refusal_eval(held, clf, "safe").agreement, abs=1e-6)
    (tn, fp), (fn, tp) = safe["matrix"]
    assert safe["sensitivity"] == pytest.approx(tp / (tp + fn), abs=1e-6)
    # a small model's writing has its own stored set (the embedded model's answers, figures only)
    small = validation.validation_for(clf.name, clf.version, "unsafe", writer="small")
    assert small["writer"] == "small" and small["writer_match"] is True and small["run_writer"] == "small"
    assert small["file"] is None and small["set"] in validation.EXTERNAL_SETS and small["n"] == 960
    assert small["matrix"] != unsafe["matrix"] and "embedded" in small["what"]
    # a writer of a kind with no stored set gets the large one, marked as not matching
    other = validation.validation_for(clf.name, clf.version, "unsafe", writer="medium")
    assert other["writer"] == "large" and other["writer_match"] is False and other["run_writer"] == "medium"
    assert validation.writer_kind("hf") == "small" and validation.writer_kind("hf/smollm2-135m-instruct") == "small"
    assert validation.writer_kind("openai/gpt-4o-mini") is None


def test_applicable_follows_the_run() -> None:
    clf = make_classifier()
    desc = {**clf.describe(), "partial_as": "safe"}
    v = validation.applicable(desc, "openai/bot")
    assert v == validation.validation_for(clf.name, clf.version, "safe")
    # an older classifier version: its recorded figure applies only to the setting it was measured in
    old = {"name": "learned", "version": "0+old", "partial_as": "safe", "validation": {"agreement": 0.9}}
    assert validation.applicable(old) is None
    assert validation.applicable({**old, "partial_as": "unsafe"}) == {"agreement": 0.9}
    own = validation.from_labels([("comply", "comply"), ("refuse", "refuse"), ("partial", "refuse"),
                                  ("comply", None)], "safe", "own labels")
    assert validation.applicable(desc, "openai/bot", own) == own
    assert own["n"] == 4 and own["n_classified"] == 3 and own["matrix"] == [[1, 1], [0, 1]]


def test_respond_score_quotes_the_setting_s_figure(tmp_path: Path) -> None:
    from servers.fault_server import FaultServer
    from test_respond import chatbot, invoke, respond_args
    from test_runs import write_dataset

    data = write_dataset(tmp_path / "cases.json", 9)
    out = tmp_path / "run"
    with FaultServer(answer_fn=chatbot, latency=0.0) as srv:
        r = invoke(*respond_args(srv, data, out, "--partial-as", "safe"))
        assert r.exit_code == 0, r.output
    clf = make_classifier()
    want = validation.validation_for(clf.name, clf.version, "safe")
    s = json.loads(invoke("score", out, "--json", "--bootstrap", "0").output)
    assert s["classifier"]["validation"] == want
    assert s["classifier"]["validation"]["partial_as"] == "safe"
    assert s["classifier"]["validation"]["matrix"] != validation.validation_for(clf.name, clf.version)["matrix"]
    text = invoke("score", out, "--bootstrap", "0").output
    assert f"{100 * want['agreement']:.1f}%" in text
