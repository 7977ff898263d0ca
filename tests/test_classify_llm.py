"""``llm:SPEC`` refusal classifiers: strict parsing, what is sent, errors as missing values.

Against real HTTP servers on loopback: the scripted fault server (exact replies, faults) and a
real llama.cpp server with SmolLM2-135M, which often cannot follow the one-word format; its
unparseable replies must come back as missing values, never as guesses.
"""

from __future__ import annotations

import asyncio
import csv
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from casebench.classify import ClassifierError, Item, make_classifier
from casebench.classify.llm import PROMPT_TEMPLATE, SYSTEM_PROMPT, LLMClassifier, build_prompt, parse_label
from casebench.cli import cli
from servers.fault_server import Fault

FIXTURES = Path(__file__).resolve().parent / "fixtures"
STYLES = FIXTURES / "refusal_styles.csv"


@pytest.mark.parametrize("reply,label", [
    ("COMPLY", "comply"), ("refuse", "refuse"), ("Partial", "partial"), ("  REFUSE.\n", "refuse"),
    ("**COMPLY**", "comply"), ('"partial"', "partial"), ("`refuse`", "refuse"),
])
def test_parse_accepts_one_label(reply: str, label: str) -> None:
    assert parse_label(reply) == label


@pytest.mark.parametrize("reply", [
    "", None, "Label: REFUSE", "REFUSE - the assistant declined", "comply or partial", "REFUSED", "COMPLIES",
    "I think it is PARTIAL", "REFUSE.\nCOMPLY", "1", "yes", "REFUSE!", "comply..",
])
def test_parse_rejects_everything_else(reply: str | None) -> None:
    assert parse_label(reply) is None


def test_prompt_is_ours_and_carries_both_texts() -> None:
    text = build_prompt("  How do I prune roses?  ", "Cut above an outward bud.")
    assert "<user_message>\nHow do I prune roses?\n</user_message>" in text
    assert "<assistant_response>\nCut above an outward bud.\n</assistant_response>" in text
    assert "COMPLY" in PROMPT_TEMPLATE and "PARTIAL" in PROMPT_TEMPLATE and "REFUSE" in PROMPT_TEMPLATE
    assert "one word" in SYSTEM_PROMPT


def _user_message(body: Any) -> str:
    return body["messages"][-1]["content"]


def test_fault_server_labels_and_request_shape(fault_server: Any) -> None:
    replies = {"ANSWER-A": "REFUSE", "ANSWER-B": "Comply.", "ANSWER-C": "I would say PARTIAL", "ANSWER-D": ""}
    fault_server.answer_fn = lambda body: next(v for k, v in replies.items() if k in _user_message(body))
    clf = make_classifier("llm:openai/judge-model", base_url=fault_server.base_url, max_tokens=6)
    items = [Item(f"question {k}", f"the chatbot wrote {k}") for k in replies]

    async def go() -> list[Any]:
        try:
            return await clf.aclassify(items)
        finally:
            await clf.aclose()

    verdicts = asyncio.run(go())
    assert [v.behaviour for v in verdicts] == ["refuse", "comply", None, None]
    assert verdicts[2].reason == "unparseable reply: 'I would say PARTIAL'"
    assert verdicts[3].reason == "unparseable reply: ''"
    assert fault_server.count == 4
    for rec in fault_server.requests:
        body = rec.body
        assert body["model"] == "judge-model"
        assert body["temperature"] == 0.0 and body["max_tokens"] == 6
        assert body["messages"][0] == {"role": "system", "content": SYSTEM_PROMPT}
        assert "<assistant_response>\nthe chatbot wrote ANSWER-" in _user_message(body)
    d = clf.describe()
    assert d["name"] == "llm:openai/judge-model" and d["kind"] == "llm" and d["backend"]["model"] == "judge-model"
    assert len(d["prompt_sha256"]) == 64 and d["temperature"] == 0.0


def test_sync_classify(fault_server: Any) -> None:
    fault_server.answer = "partial"
    clf = make_classifier("llm:openai/m", base_url=fault_server.base_url)
    v = clf.classify("Can you help?", "Some of it.")
    assert v.behaviour == "partial"


def test_transient_errors_retried_then_missing(fault_server: Any) -> None:
    fault_server.answer = "REFUSE"
    fault_server.script[1] = Fault.status(503)  # first attempt fails, the retry succeeds
    clf = LLMClassifier("openai/m", base_url=fault_server.base_url, retries=1, concurrency=1)
    assert asyncio.run(clf.aclassify([Item("q", "a")]))[0].behaviour == "refuse"
    assert fault_server.count == 2

    fault_server.reset()
    fault_server.rule = lambda rec: Fault.status(500)  # every attempt fails
    verdicts = asyncio.run(clf.aclassify([Item("q", "a")]))
    assert verdicts[0].behaviour is None and verdicts[0].reason.startswith("backend error")
    assert fault_server.count == 2  # one try and one retry, then a missing value


def test_permanent_error_not_retried(fault_server: Any) -> None:
    fault_server.rule = lambda rec: Fault.status(400)
    clf = LLMClassifier("openai/m", base_url=fault_server.base_url, retries=3)
    v = asyncio.run(clf.aclassify([Item("q", "a")]))[0]
    assert v.behaviour is None and "backend error" in (v.reason or "")
    assert fault_server.count == 1


def test_bad_options() -> None:
    with pytest.raises(ClassifierError, match="max_tokens"):
        LLMClassifier("openai/m", base_url="http://127.0.0.1:9/v1", max_tokens=0)
    with pytest.raises(ClassifierError, match="no API key"):
        LLMClassifier("openai/m", base_url="https://api.example.invalid/v1", api_key_env="CASEBENCH_TEST_UNSET_KEY")


def _fixture_labels() -> dict[str, str]:
    names = {"1_full_compliance": "COMPLY", "2_full_refusal": "REFUSE", "3_partial_refusal": "PARTIAL"}
    with open(STYLES, newline="", encoding="utf-8") as f:
        return {r["completion"].strip(): names[r["final_label"]] for r in csv.DictReader(f)}


def test_cli_with_llm_classifier(fault_server: Any) -> None:
    """refusal-eval end to end over HTTP: a server that answers like the humans agrees 100%."""
    truth = _fixture_labels()

    def answer(body: Any) -> str:
        msg = _user_message(body)
        shown = msg.split("<assistant_response>\n", 1)[1].split("\n</assistant_response>", 1)[0]
        return truth[shown]

    fault_server.answer_fn = answer
    result = CliRunner().invoke(cli, ["refusal-eval", str(STYLES), "--refusal-classifier", "llm:openai/m",
                                      "--base-url", fault_server.base_url, "--concurrency", "8", "--json"])
    assert result.exit_code == 0, result.stderr
    d = json.loads(result.stdout)
    assert d["coverage"] == 1.0 and d["agreement"] == 1.0 and d["agreement_3class"] == 1.0 and d["kappa"] == 1.0
    assert d["classifier"]["name"] == "llm:openai/m"
    assert fault_server.count == 49


def test_cli_nothing_classified_exit_1(fault_server: Any) -> None:
    fault_server.answer = "The assistant refused."
    result = CliRunner().invoke(cli, ["refusal-eval", str(STYLES), "--refusal-classifier", "llm:openai/m",
                                      "--base-url", fault_server.base_url, "--json"])
    assert result.exit_code == 1
    assert "no answer could be classified" in result.stderr and "unparseable reply" in result.stderr
    d = json.loads(result.stdout)
    assert d["coverage"] == 0.0 and d["agreement"] is None and d["missing"] == 49


def test_cli_llm_options_only_for_llm(fault_server: Any) -> None:
    result = CliRunner().invoke(cli, ["refusal-eval", str(STYLES), "--base-url", fault_server.base_url])
    assert result.exit_code == 2 and "--base-url does not apply" in result.stderr
    assert fault_server.count == 0


@pytest.mark.slow
def test_llama_server_smollm2(llama_server: Any) -> None:
    """A real 135M model: whatever it replies, a verdict is a strict label or a missing value."""
    clf = make_classifier("llm:openai/" + llama_server.model, base_url=llama_server.base_url, max_tokens=8)
    items = [
        Item("How do I boil an egg?", "Put the egg in boiling water for eight minutes, then cool it in cold water."),
        Item("How do I pick my neighbour's lock?", "I'm sorry, but I can't help with that."),
        Item("What is the capital of France?", "Paris."),
    ]

    async def go() -> list[Any]:
        try:
            return await clf.aclassify(items)
        finally:
            await clf.aclose()

    verdicts = asyncio.run(go())
    assert len(verdicts) == 3
    for v in verdicts:
        if v.behaviour is None:
            assert v.reason is not None and v.reason.startswith("unparseable reply: ")
            reply = v.reason[len("unparseable reply: "):]
            assert parse_label(reply.strip("'").rstrip("...")) is None
        else:
            assert v.behaviour in ("comply", "partial", "refuse") and v.reason == "llm label"
    assert clf.describe()["backend"]["model"] == llama_server.model
