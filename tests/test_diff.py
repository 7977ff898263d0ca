"""``casebench diff``: the cases where two inputs disagree (``stats.diff``)."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest
from click.testing import CliRunner

from casebench.cli import cli
from casebench.data import load_dataset
from casebench.predictions import Predictions
from casebench.published import load_published
from casebench.stats.case_sets import CompareError
from casebench.stats.diff import diff_inputs


@pytest.fixture(scope="module")
def two(exp_dir):
    return (exp_dir / "safety_gpt-4o" / "output_binary.json", exp_dir / "safety_llama370B" / "output_score.json")


def test_diff_of_two_published_files_lists_every_disagreement(two):
    a, b = (load_published(p) for p in two)
    res = diff_inputs(a, b)
    both = a.answered & b.answered
    want = np.flatnonzero(both & ((a.label == 1.0) != (b.label == 1.0)))
    assert res.disagree == len(want) > 0 and res.both_answered == int(both.sum()) and res.shared == 900
    assert sorted(r.index for r in res.rows) == sorted(int(a.case_indices[i]) for i in want)
    # sorted by how far people lean, hardest first; each row's share is the votes as cast
    leans = [r.lean for r in res.rows]
    assert leans == sorted(leans, reverse=True)
    by_index = {c.index: c for c in a.cases}
    for r in res.rows[:20]:
        c = by_index[r.index]
        share = sum(v == 1 for v in c.votes) / len(c.votes)
        assert r.people_safe_share == pytest.approx(share) and r.lean == pytest.approx(abs(share - 0.5))
        assert r.people == ("safe" if c.human_safe else "unsafe")
        assert r.agrees == ("A" if r.a == r.people else "B")
        assert r.b_value is not None and r.a_value is None  # a score input carries its score
    assert [r.index for r in diff_inputs(a, b, sort="index").rows] == sorted(r.index for r in res.rows)
    cats = [r.category for r in diff_inputs(a, b, sort="category").rows]
    assert cats == sorted(cats)


def test_diff_cli_table_csv_and_json(two):
    a, b = (str(p) for p in two)
    r = CliRunner().invoke(cli, ["diff", a, b, "--format", "json", "--hide-text"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["disagree"] == len(d["cases"]) > 0 and all(c["query"] is None for c in d["cases"])
    r = CliRunner().invoke(cli, ["diff", a, b, "--format", "csv", "--sort", "index"])
    rows = list(csv.DictReader(io.StringIO(r.output)))
    assert len(rows) == d["disagree"] and "query" in rows[0] and all(row["query"] for row in rows)
    assert [int(x["case"]) for x in rows] == sorted(int(x["case"]) for x in rows)
    r = CliRunner().invoke(cli, ["diff", a, b, "--hide-text"])
    assert r.exit_code == 0 and f"{d['disagree']} of the 900 cases both answered disagree" in r.output
    assert "query" not in r.output.splitlines()[3]


def test_diff_of_respond_runs_compares_behaviours(small_data_path):
    cases = load_dataset(small_data_path).cases
    n = len(cases)
    beh_a = [["comply"]] * n
    beh_b = [["partial"]] + [["comply"]] * (n - 2) + [["refuse"]]
    a = Predictions.from_values("a", "bot", "respond", cases, [1.0] * n, behaviour=beh_a)
    b = Predictions.from_values("b", "bot", "respond", cases, [1.0] * (n - 1) + [0.0], behaviour=beh_b)
    res = diff_inputs(a, b, sort="index", show_text=False)
    assert res.what == "behaviours" and [(r.a, r.b) for r in res.rows] == [("comply", "partial"), ("comply", "refuse")]
    assert res.rows[0].agrees == "both"  # the verdicts agree (partial counts as answered); the behaviours do not


def test_diff_refuses_inputs_of_different_datasets(two, small_data_path):
    a = load_published(two[0])
    other = Predictions.from_values("x", "x", "binary", load_dataset(small_data_path).cases,
                                    ["safe"] * len(load_dataset(small_data_path).cases))
    with pytest.raises(CompareError):
        diff_inputs(a, other)
    with pytest.raises(ValueError, match="unknown sort"):
        diff_inputs(a, a, sort="votes")
