"""Modes: one object each, one registry; what a mode reads from an answer and how it aggregates."""

from __future__ import annotations

import json

import numpy as np
import pytest

from casebench.backends.base import Answer
from casebench.classify import Verdict
from casebench.modes import MODES, ModeError, detect_mode, get_mode, mode_from_file_name, mode_names, register
from casebench.runs.record import Record


def test_registry_names_and_published_file_names():
    assert mode_names() == ["binary", "score", "prob", "respond"]
    assert [m.file_name for m in MODES.values()] == ["binary", "score", "logits", "respond"]
    assert mode_from_file_name("logits") is MODES["prob"] and mode_from_file_name("nope") is None
    with pytest.raises(ModeError, match="choose one of binary, score, prob, respond"):
        get_mode("logits")
    with pytest.raises(ModeError, match="already registered"):
        register(MODES["binary"])
    assert get_mode(MODES["score"]) is MODES["score"]


def test_what_each_mode_asks_of_a_backend():
    assert [m.want for m in MODES.values()] == ["text", "text", "p_safe", "text"]
    assert MODES["score"].default_samples == 3 and MODES["score"].default_temperature == 1.0
    assert MODES["respond"].default_context_as == "system" and MODES["respond"].default_max_tokens == 512
    assert MODES["respond"].template_key is None and MODES["respond"].reads_behaviour


@pytest.mark.parametrize("mode, full, value", [
    ("binary", '{"judgement": "unsafe", "explanation": "because the situation says so"}', "unsafe"),
    ("score", '```json\n{"judgement": 7, "explanation": "fine here"}\n```', 7.0),
])
def test_the_stop_test_fires_right_after_the_verdict_and_reads_the_same_verdict(mode, full, value):
    m = get_mode(mode)
    stop = m.stopper()
    cut = next(i for i in range(1, len(full) + 1) if stop(full[:i]))
    assert full[:cut].rstrip().endswith(",")  # the verdict and its terminator, nothing more
    stopped = m.read(Answer(text=full[:cut]), stopped_early=True)
    whole = m.read(Answer(text=full))
    assert stopped.ok and whole.ok and (stopped.label, stopped.score) == (whole.label, whole.score)
    assert (whole.score if mode == "score" else whole.label) == value
    # a number is not complete until it is followed by , or }
    assert not stop('{"judgement": 1') and get_mode("prob").stopper() is None


def test_an_unreadable_text_answer_is_asked_again_a_missing_p_safe_is_final():
    r = get_mode("binary").read(Answer(text="I would rather not say."))
    assert not r.ok and r.retry and "no JSON object" in r.error
    r = get_mode("prob").read(Answer(p_safe=None))
    assert not r.ok and not r.retry
    assert get_mode("prob").read(Answer(p_safe=0.8)).label == "safe"


def test_respond_reads_behaviour_never_guesses():
    m = get_mode("respond")
    ans = Answer(text="Sure, here is how.")
    assert m.read_behaviour(ans, Verdict("comply")).label == "safe"
    r = m.read_behaviour(ans, Verdict("partial"))
    assert (r.label, r.p_safe, r.behaviour) == ("unsafe", 0.0, "partial")
    assert m.read_behaviour(ans, Verdict("partial"), partial_as_safe=True).label == "safe"
    # a classifier's own probability is its reading confidence, kept in the detail, never the value
    r = m.read_behaviour(ans, Verdict("comply", p_comply=0.7))
    assert r.p_safe == 1.0 and r.detail["classifier_p_comply"] == 0.7
    r = m.read_behaviour(ans, Verdict("partial", p_comply=0.3), partial_as_safe=True)
    assert (r.label, r.p_safe) == ("safe", 1.0)
    r = m.read_behaviour(ans, Verdict(None, reason="unparseable"))
    assert not r.ok and not r.retry and "unparseable" in r.error
    assert m.read_behaviour(Answer(text="  "), Verdict("refuse")).retry


def test_aggregation_per_mode():
    recs = [Record(0, 0, label="safe", score=8.0, p_safe=0.75), Record(0, 1, label="unsafe", score=3.0, p_safe=0.25)]
    assert get_mode("binary").aggregate(recs) == "unsafe"  # a tie is unsafe, as 0.5 is for people
    assert get_mode("score").aggregate(recs) == 5.5
    assert get_mode("prob").aggregate(recs) == 0.5
    assert get_mode("respond").aggregate(recs) == 0.5
    assert get_mode("score").aggregate([]) is None


def test_values_labels_and_p_safe():
    s = get_mode("score")
    v = s.numeric([8.0, None, 5.5])
    np.testing.assert_array_equal(s.labels([8.0, None, 5.5]), [1.0, np.nan, 0.0])
    np.testing.assert_allclose(s.p_safe(v, s.labels([8.0, None, 5.5])), [0.75, np.nan, 0.5])
    b = get_mode("binary")
    np.testing.assert_array_equal(b.labels(["safe", "unsafe", None]), [1.0, 0.0, np.nan])
    assert b.check_value("maybe") == (None, None) and b.check_value(3)[1]
    assert get_mode("prob").check_value(1.5)[1] and get_mode("prob").published_value(None) == ""
    assert detect_mode(["safe", ""]).name == "binary" and detect_mode([7.0, ""]).name == "score"
    assert detect_mode([0.3]).name == "prob"


def test_chat_placement_defaults(small_data_path):
    from casebench.data import load_dataset
    from casebench.prompts import BUILTIN_TEMPLATES

    case = load_dataset(small_data_path)[0]
    system, user = get_mode("respond").chat(case, BUILTIN_TEMPLATES)
    assert system and user == case.query
    system, user = get_mode("binary").chat(case, BUILTIN_TEMPLATES)
    assert system is None and json.dumps(case.context) in user
