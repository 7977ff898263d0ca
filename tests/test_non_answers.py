"""Non-answers are not answers (issue 35 item 5): a reply that is not a chatbot's answer (a judge's
JSON verdict, a bare safety label, the request echoed back, empty) is undetermined in every reader
(one screen: ``classify.base.not_an_answer``), and a respond run whose replies are mostly of that
kind says that the endpoint does not answer as a chatbot and exits as for low coverage."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from casebench.classify import Item, make_classifier
from casebench.classify.base import SCREEN_VERSION, not_an_answer
from casebench.classify.evaluate import is_undetermined
from casebench.classify.llm import LLMClassifier
from casebench.cli import cli
from casebench.runs.record import final_records, iter_records, read_manifest
from casebench.runs.results import EXIT_LOW_COVERAGE
from servers.fault_server import FaultServer
from test_runs import case_of, write_dataset

QUESTION = "How should I store garden tools over the winter?"
#: replies a judge or guard model behind the wrong URL writes (our own wording)
NON_ANSWERS = [
    '{"judgement": "unsafe", "explanation": "The request asks for help with something harmful."}',
    '```json\n{"verdict": "safe", "reason": "gardening"}\n```',
    "unsafe",
    "Safe.",
    "unsafe\nS2",
    QUESTION,
    "  how should i store garden tools over the winter  ",
    "",
]
#: real answers that look a little like those and must still be read
ANSWERS = [
    "It is safe to leave them in a dry shed; oil the blades first.",
    'Here is the JSON you asked for: {"tools": ["spade", "rake"]}',
    '{"name": "spade", "care": "oil it"}',
    "No.",
    "I'm sorry, but I can't help with that request.",
]


@pytest.mark.parametrize("text", NON_ANSWERS)
@pytest.mark.parametrize("spec", ["rules", "learned"])
def test_a_non_answer_is_undetermined_in_the_offline_readers(spec: str, text: str) -> None:
    clf = make_classifier(spec)
    v = clf.classify(QUESTION, text)
    assert v.behaviour is None and is_undetermined(v), (spec, text, v)
    assert "not an answer" in (v.reason or "")
    assert clf.describe()["screen"] == SCREEN_VERSION  # the manifest says which screen read the answers


@pytest.mark.parametrize("text", ANSWERS)
def test_answers_that_look_like_verdicts_are_still_read(text: str) -> None:
    assert not_an_answer(text, QUESTION) is None
    assert make_classifier("learned").classify(QUESTION, text).behaviour is not None


def test_an_llm_reader_is_never_asked_about_a_non_answer(fault_server: Any) -> None:
    fault_server.answer = "COMPLY"
    clf = LLMClassifier("openai/reader", base_url=fault_server.base_url)
    items = [Item(QUESTION, t) for t in NON_ANSWERS] + [Item(QUESTION, ANSWERS[0])]
    verdicts = asyncio.run(clf.aclassify(items))
    assert all(v.behaviour is None and "not an answer" in (v.reason or "") for v in verdicts[:-1])
    assert verdicts[-1].behaviour == "comply"
    assert fault_server.count == 1  # only the real answer was sent
    assert clf.describe()["screen"] == SCREEN_VERSION


def _respond(srv: FaultServer, data: Path, out: Path) -> Any:
    return CliRunner().invoke(cli, ["run", "--model", "openai/guard-x", "--mode", "respond", "--data", str(data),
                                    "--base-url", srv.base_url, "-o", str(out), "--no-progress", "--no-report"])


def test_a_respond_run_against_a_judge_says_it_is_not_a_chatbot(tmp_path: Path) -> None:
    """The issue's case: the endpoint answers every request with a JSON verdict."""
    data = write_dataset(tmp_path / "cases.json", 10)
    out = tmp_path / "run"
    verdicts = ['{"judgement": "unsafe", "explanation": "It could cause harm."}',
                '{"judgement": "safe", "explanation": "Harmless in this setting."}']
    with FaultServer(answer_fn=lambda body: verdicts[case_of(body["messages"][-1]["content"]) % 2]) as srv:
        r = _respond(srv, data, out)
    assert r.exit_code == EXIT_LOW_COVERAGE, r.output
    finals = final_records(iter_records(out))
    assert len(finals) == 10 and sum(rec.answered for rec in finals.values()) <= 1
    assert all("judge's verdict as JSON" in (rec.error or "") for rec in finals.values())
    text = r.output + (r.stderr if r.stderr_bytes is not None else "")
    assert "does not answer as a chatbot" in text and "10 of 10 replies" in text
    assert "judge or guard model" in text
    assert read_manifest(out).asked.classifier["screen"] == SCREEN_VERSION
    # score says the same: nothing read, and no figure pretends the chatbot answered
    s = json.loads(CliRunner().invoke(cli, ["score", str(out), "--json", "--bootstrap", "50"]).output)
    assert s["answered"] == 0


def test_most_replies_non_answers_is_low_coverage_even_above_the_threshold(tmp_path: Path) -> None:
    """Two real answers, a bare label, and seven echoes: 2 of 10 read; the run says why even with
    --min-coverage 0.1 (the coverage alone would pass)."""
    data = write_dataset(tmp_path / "cases.json", 10)
    out = tmp_path / "run"

    def reply(body: Any) -> str:
        query = body["messages"][-1]["content"]
        c = case_of(query)
        return ("Sure: dry the blades, oil them, and hang them on a rack." if c < 2 else
                "unsafe" if c == 2 else query)

    with FaultServer(answer_fn=reply) as srv:
        r = CliRunner().invoke(cli, ["run", "--model", "openai/echo-x", "--mode", "respond", "--data", str(data),
                                     "--base-url", srv.base_url, "-o", str(out), "--no-progress", "--no-report",
                                     "--min-coverage", "0.1"])
    assert r.exit_code == EXIT_LOW_COVERAGE, r.output
    finals = final_records(iter_records(out))
    assert sum(rec.answered for rec in finals.values()) == 2
    text = r.output + (r.stderr if r.stderr_bytes is not None else "")
    assert "8 of 10 replies" in text and "the request echoed back (7)" in text
