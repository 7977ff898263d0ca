"""refusal-eval: the XSTest CSV loader, the figures, the command, and the offline rules on the
shared XSTest file (whole file and the held-aside half the rules were not written on)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from casebench.classify import Verdict, make_classifier
from casebench.classify.evaluate import (
    LabelledAnswer,
    RefusalDataError,
    cohens_kappa,
    holdout_split,
    load_labelled_csv,
    refusal_eval,
    score,
    wilson_interval,
)
from casebench.cli import cli

FIXTURES = Path(__file__).resolve().parent / "fixtures"
STYLES = FIXTURES / "refusal_styles.csv"
XSTEST = Path(__file__).resolve().parents[1].parent / "shared" / "xstest" / "xstest_v2_completions_llama2new.csv"

# Measured on the shared file with rules version 1 (see the report in bench/bench_classify.py);
# the thresholds sit a little below the measurements so that a rule change that loses even a
# few answers fails here.
XSTEST_MIN_AGREEMENT = 0.94  # measured 0.949 (427/450)
XSTEST_MIN_KAPPA = 0.88  # measured 0.893
HELD_MIN_AGREEMENT = 0.92  # measured 0.928 (194/209) on the half the rules were not written on


def _write(path: Path, header: list[str], rows: list[list[str]]) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return path


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


# --------------------------------------------------------------------------- loading


def test_load_own_fixture() -> None:
    rows = load_labelled_csv(STYLES)
    assert len(rows) == 49
    assert {r.label for r in rows} == {"comply", "partial", "refuse"}
    assert rows[0].id == "own-1" and rows[0].row == 1 and rows[0].extra == {"style": "gpt4-short"}


def test_load_without_id_column(tmp_path: Path) -> None:
    f = _write(tmp_path / "a.csv", ["prompt", "completion", "final_label"],
               [["Hi?", "Hello! How can I help?", "1_full_compliance"], ["", "", "2_full_refusal"]])
    rows = load_labelled_csv(f)
    assert [r.id for r in rows] == ["row-1", "row-2"]
    assert rows[1].completion == "" and rows[1].label == "refuse"


@pytest.mark.parametrize("header,rows,match", [
    (["prompt", "answer", "final_label"], [["q", "a", "1_full_compliance"]],
     r"row 0 \(header\): missing column 'completion'"),
    (["prompt", "completion"], [["q", "a"]], r"row 0 \(header\): missing column 'final_label'"),
    (["id", "prompt", "completion", "final_label"], [["x1", "q", "a", "1_full_compliance"], ["x2", "q", "a", "full_refusal"]],
     r"row 2 \(line 3\), column 'final_label': unknown label 'full_refusal'; expected one of 1_full_compliance"),
    (["prompt", "completion", "final_label"], [["q", "a", ""]], r"row 1 \(line 2\), column 'final_label': unknown label an empty value"),
    (["prompt", "completion", "final_label"], [["q", "a"]], r"row 1 \(line 2\), column 'final_label': the row has 2 fields"),
    (["prompt", "completion", "final_label"], [["q", "a", "1_full_compliance", "extra"]], r"row 1 \(line 2\): the row has 4 fields"),
    (["prompt", "completion", "final_label", "prompt"], [["q", "a", "1_full_compliance", "q"]], "column 'prompt' appears more than once"),
    (["prompt", "completion", "final_label"], [], "no data rows"),
])
def test_bad_csv_names_file_row_column(tmp_path: Path, header: list[str], rows: list[list[str]], match: str) -> None:
    f = _write(tmp_path / "bad.csv", header, rows)
    with pytest.raises(RefusalDataError, match=match) as e:
        load_labelled_csv(f)
    assert str(f) in str(e.value)


def test_bad_files(tmp_path: Path) -> None:
    with pytest.raises(RefusalDataError, match="no such file"):
        load_labelled_csv(tmp_path / "absent.csv")
    empty = tmp_path / "empty.csv"
    empty.write_text("\n", encoding="utf-8")
    with pytest.raises(RefusalDataError, match="empty"):
        load_labelled_csv(empty)
    latin = tmp_path / "latin.csv"
    latin.write_bytes("prompt,completion,final_label\ncaf\xe9,ok,1_full_compliance\n".encode("latin-1"))
    with pytest.raises(RefusalDataError, match="not UTF-8"):
        load_labelled_csv(latin)


def test_multiline_fields_report_data_row_and_line(tmp_path: Path) -> None:
    f = _write(tmp_path / "m.csv", ["prompt", "completion", "final_label"],
               [["q1", "line one\nline two\nline three", "2_full_refusal"], ["q2", "a", "refusal"]])
    with pytest.raises(RefusalDataError, match=r"row 2 \(line 5\), column 'final_label'"):
        load_labelled_csv(f)


# --------------------------------------------------------------------------- figures


def _rows(labels: list[str]) -> list[LabelledAnswer]:
    return [LabelledAnswer(row=i + 1, id=f"r{i + 1}", prompt="q", completion="a", label=lab) for i, lab in enumerate(labels)]


def test_score_by_hand() -> None:
    human = ["comply", "comply", "comply", "refuse", "refuse", "partial", "partial", "refuse"]
    given = ["comply", "refuse", "comply", "refuse", "partial", "refuse", "comply", None]
    res = score(_rows(human), [Verdict(b) for b in given])  # type: ignore[arg-type]
    assert (res.n, res.n_classified, res.missing) == (8, 7, 1)
    assert res.coverage == pytest.approx(7 / 8)
    # binary over the 7 classified: human C C C R R R R vs C R C R R R C -> 5 agree
    assert res.agreement == pytest.approx(5 / 7)
    # 3 classes: C=C, C!=R, C=C, R=R, R!=P, P!=R, P!=C -> 3 agree
    assert res.agreement_3class == pytest.approx(3 / 7)
    # kappa: po = 5/7; human C 3/7, R 4/7; classifier C 3/7, R 4/7 -> pe = 25/49
    assert res.kappa == pytest.approx((5 / 7 - 25 / 49) / (1 - 25 / 49))
    assert res.confusion["matrix"] == [[2, 0, 1], [1, 0, 1], [0, 1, 1]]
    assert res.confusion["missing"] == {"comply": 0, "partial": 0, "refuse": 1}
    assert res.binary["matrix"] == [[2, 1], [1, 3]]
    assert res.per_class["comply"]["precision"] == pytest.approx(2 / 3)
    assert res.per_class["comply"]["recall"] == pytest.approx(2 / 3)
    assert res.per_class["partial"]["recall"] == 0.0
    missing_row = [d for d in res.disagreements if d["classifier"] is None]
    assert missing_row and missing_row[0]["id"] == "r8" and missing_row[0]["binary_disagrees"] is False


def test_all_missing_gives_no_figures() -> None:
    res = score(_rows(["comply", "refuse"]), [Verdict(None), Verdict(None)])
    assert res.coverage == 0.0 and res.agreement is None and res.kappa is None and res.agreement_ci is None


def test_kappa_and_wilson_edges() -> None:
    assert cohens_kappa([("a", "a"), ("a", "a")], ("a", "b")) is None  # chance agreement 1: undefined
    assert cohens_kappa([("a", "a"), ("b", "b")], ("a", "b")) == pytest.approx(1.0)
    assert cohens_kappa([("a", "b"), ("b", "a")], ("a", "b")) == pytest.approx(-1.0)
    lo, hi = wilson_interval(45, 50)  # type: ignore[misc]
    assert 0.78 < lo < 0.80 and 0.95 < hi < 0.97
    assert wilson_interval(0, 0) is None


def test_holdout_split_is_stable_and_disjoint() -> None:
    rows = load_labelled_csv(STYLES)
    dev, held = holdout_split(rows)
    assert len(dev) + len(held) == len(rows) and not {r.id for r in dev} & {r.id for r in held}
    assert holdout_split(list(reversed(rows)))[0] == list(reversed(dev))


# --------------------------------------------------------------------------- the command


def test_cli_json_default_classifier() -> None:
    code, out, _ = _run("refusal-eval", str(STYLES), "--json")
    assert code == 0
    d = json.loads(out)
    for key in ("n", "agreement", "agreement_3class", "kappa", "confusion"):
        assert key in d
    assert d["n"] == 49 and d["classifier"]["name"] == "learned" and d["coverage"] >= 0.95
    assert d["confusion"]["labels"] == ["comply", "partial", "refuse"]
    assert sum(map(sum, d["confusion"]["matrix"])) == 49 - d["missing"]  # undetermined answers are left out


def test_cli_table() -> None:
    code, out, _ = _run("refusal-eval", str(STYLES))
    assert code == 0
    assert "agreement (binary, partial = refusal)" in out and "confusion (rows: the file's labels, columns: classifier)" in out


@pytest.mark.parametrize("header,rows,match", [
    (["prompt", "response", "final_label"], [["q", "a", "1_full_compliance"]], "row 0 (header): missing column 'completion'"),
    (["prompt", "completion", "final_label"], [["q", "a", "1_full_compliance"], ["q", "a", "4_other"]],
     "row 2 (line 3), column 'final_label': unknown label '4_other'"),
])
def test_cli_bad_csv_exit_2(tmp_path: Path, header: list[str], rows: list[list[str]], match: str) -> None:
    f = _write(tmp_path / "bad.csv", header, rows)
    code, out, err = _run("refusal-eval", str(f), "--json")
    assert code == 2
    assert match in err and str(f) in err
    assert out == ""


def test_cli_bad_classifier_exit_2(tmp_path: Path) -> None:
    code, _, err = _run("refusal-eval", str(STYLES), "--refusal-classifier", "keywords")
    assert code == 2 and "unknown refusal classifier 'keywords'" in err
    code, _, err = _run("refusal-eval", str(STYLES), "--refusal-labels", "LABEL_0=comply")
    assert code == 2 and "--refusal-labels does not apply to the refusal classifier 'learned'" in err
    code, _, err = _run("refusal-eval", str(tmp_path / "none.csv"))
    assert code == 2 and "no such file" in err


# --------------------------------------------------------------------------- the shared XSTest file


@pytest.fixture(scope="module")
def xstest_rows() -> list[LabelledAnswer]:
    if not XSTEST.is_file():
        pytest.skip("the XSTest file is not at ../shared/xstest")
    return load_labelled_csv(XSTEST)


def test_xstest_whole_file(xstest_rows: list[LabelledAnswer]) -> None:
    res = refusal_eval(xstest_rows, make_classifier("rules"))
    assert res.n == 450 and res.coverage == 1.0
    assert res.agreement is not None and res.agreement >= XSTEST_MIN_AGREEMENT  # XSTest's string match: 0.924
    assert res.kappa is not None and res.kappa >= XSTEST_MIN_KAPPA


def test_xstest_held_aside_half(xstest_rows: list[LabelledAnswer]) -> None:
    """The half of the file whose answers were not read while the rules were written."""
    dev, held = holdout_split(xstest_rows)
    assert (len(dev), len(held)) == (241, 209)
    res = refusal_eval(held, make_classifier("rules"))
    assert res.agreement is not None and res.agreement >= HELD_MIN_AGREEMENT


def test_xstest_cli_json(xstest_rows: list[LabelledAnswer]) -> None:
    code, out, _ = _run("refusal-eval", str(XSTEST), "--json")
    assert code == 0
    d = json.loads(out)
    assert d["n"] == 450 and d["agreement"] >= XSTEST_MIN_AGREEMENT and d["human_counts"] == {"comply": 176, "partial": 44, "refuse": 230}
