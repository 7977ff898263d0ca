"""A respond run's refusal figures from people's labels of its own answers (``stats.people_refusal``,
issue 35 items 3 and 4), along the user's path: ``casebench run`` against a scripted chatbot whose
every answer's truth is known, ``annotate answers --sample 50`` (a real server, people labelling
over HTTP), ``annotate export --answers``, then ``score --json`` and the other formats."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
import numpy as np
import pytest

from people_bot import answer, refused, truth_of_case, write_pairs
from servers.fault_server import FaultServer
from test_respond import invoke, respond_args

QUERIES = 60  # 120 answers


@pytest.fixture(scope="module")
def known_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished respond run of 120 answers whose truth is known (people_bot)."""
    tmp = tmp_path_factory.mktemp("people")
    data = write_pairs(tmp / "cases.json", QUERIES)
    out = tmp / "run"
    with FaultServer(answer_fn=answer, latency=0.0) as srv:
        r = invoke(*respond_args(srv, data, out))
        assert r.exit_code == 0, r.output
    return out


def _true_label(case: int) -> str:
    return "refuse" if refused(truth_of_case(case)) else "comply"


def _wilson_width(k: int, n: int, z: float = 1.959963984540054) -> float:
    p = k / n
    return 2 * z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)


@pytest.fixture(scope="module")
def labelled_run(known_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """People label 50 of the run's 120 answers in the app (with the truth), and the labels are
    exported into the run."""
    pytest.importorskip("starlette", reason="the web extra is not installed: pip install 'casebench[web]'")
    from servers.annotate_server import AnnotateServer
    from test_annotate_answers import _record_of

    db = f"sqlite:///{tmp_path_factory.mktemp('labels') / 'labels.db'}"
    with AnnotateServer(known_run, db, "--sample", "50", command="answers") as srv:
        assert any("50 of 120 answers" in line for line in srv.banner)
        while (case_id := srv.shown_case("p1")) is not None:
            record = _record_of(srv, case_id)
            assert record["weight"] >= 1 and "|" in record["stratum"]
            assert srv.vote("p1", case_id, _true_label(record["case"]))[0] == 303
    r = invoke("annotate", "export", "--db", db, "--answers", known_run)
    assert r.exit_code == 0, r.output
    assert "labelled by people" in r.output
    return known_run


def test_people_figures_cover_the_truth_and_beat_the_labels_alone(labelled_run: Path) -> None:
    rows = list(csv.DictReader((labelled_run / "reader_labels.csv").open(encoding="utf-8")))
    assert len(rows) == 50 and {r["labelled_by"] for r in rows} == {"people"}
    # the recorded weights are the draw's: each stratum's answers over its draws
    assert sum(float(r["weight"]) for r in rows) == pytest.approx(120)
    r = invoke("score", labelled_run, "--json", "--bootstrap", "200")
    assert r.exit_code == 0, r.output
    s = json.loads(r.output)
    truth = np.array([refused(truth_of_case(c)) for c in range(2 * QUERIES)], dtype=float)
    true_rate = truth.mean()
    lo, hi = s["ci"]["refusal_rate_people"]
    assert lo <= true_rate <= hi and lo <= s["refusal_rate_people"] <= hi
    k = sum(1 for row in rows if row["final_label"] == "2_full_refusal")
    assert hi - lo <= 1.15 * _wilson_width(k, 50)
    # the reader misreads some answers: its own figure is off the truth
    assert s["refusal_rate"] != pytest.approx(true_rate, abs=0.01)
    # over- and under-refusal and the context shift, each against its own truth
    safe_ctx, unsafe_ctx = truth[0::2], truth[1::2]  # people find the safe-intent contexts safe
    for key, want in (("over_refusal_people", safe_ctx.mean()), ("under_refusal_people", 1 - unsafe_ctx.mean()),
                      ("context_shift_people", unsafe_ctx.mean() - safe_ctx.mean())):
        lo, hi = s["ci"][key]
        assert lo <= want <= hi, key
    block = s["people_labels"]
    assert block["labelled_by"] == "people" and block["n"] == 50 and block["stratified"] is True
    assert "PPI++" in block["estimator"] and "cross-fitting" in block["estimator"]
    fig = block["figures"]["refusal_rate"]
    assert fig["multiplier"] == pytest.approx(fig["labels_only_se"] ** 2 / fig["ppi_se"] ** 2)
    assert block["multiplier"] == fig["multiplier"] > 1
    t = block["transport"]
    assert t["refusals_labelled"] + t["answers_labelled"] == 50 and 0 <= t["p"] <= 1
    assert t["holds"] is (t["p"] >= 0.05)
    # the stored validation is transported as before (the labels no longer replace it)
    assert "own_run" not in s["classifier"]["validation"]


def test_every_format_leads_with_the_people_figures(labelled_run: Path) -> None:
    text = invoke("score", labelled_run, "--bootstrap", "0").output
    i_people = text.index("from people's labels of 50 of its answers")
    assert i_people < text.index("refusal rate (not answered)")
    assert "refusal rate" in text[i_people:i_people + 400] and "PPI++" in text
    md = invoke("score", labelled_run, "--bootstrap", "0", "--format", "md").output
    assert "from people's labels of 50 of its answers" in md
    rows = list(csv.DictReader(invoke("score", labelled_run, "--bootstrap", "0", "--format", "csv")
                               .output.splitlines()))
    assert rows[0]["refusal_rate_people"] and rows[0]["refusal_rate_people_ci_lo"]
    assert rows[0]["labelled_by"] == "people" and rows[0]["people_labels_n"] == "50"


def test_the_report_leads_with_the_people_figures(labelled_run: Path, tmp_path: Path) -> None:
    import html

    out = tmp_path / "report.html"
    r = invoke("report", labelled_run, "-o", out, "--bootstrap", "0", "--no-reference")
    assert r.exit_code == 0, r.output
    page = html.unescape(out.read_text(encoding="utf-8"))
    # the one-line verdict of the model quotes the figures from people's labels, the reading beside
    i = page.index("of what people find unsafe (from people's labels of 50 answers; as read:")
    assert page.index("from people's labels of 50 of its answers") > i  # then the full account


def test_labels_by_ai_are_never_called_peoples(labelled_run: Path, tmp_path: Path) -> None:
    """The same labels exported as AI readers' (``--labelled-by ai``): every figure and line says
    so, none says people's."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(labelled_run, run)
    text = (labelled_run / "reader_labels.csv").read_text(encoding="utf-8").replace(",people,", ",ai,")
    (run / "reader_labels.csv").write_text(text, encoding="utf-8")
    s = json.loads(invoke("score", run, "--json", "--bootstrap", "0").output)
    assert "refusal_rate_people" not in s and "people_labels" not in s
    assert s["refusal_rate_labelled"] is not None and s["run_labels"]["labelled_by"] == "ai"
    out = invoke("score", run, "--bootstrap", "0").output
    assert "from labels by AI readers of 50 of its answers" in out
    assert "people's labels" not in out


def test_correction_is_withheld_where_the_stored_validation_does_not_hold(known_run: Path, tmp_path: Path) -> None:
    """Labels that contradict the stored sensitivity (people call every answer the reader read as
    an answer a refusal): the transport test fails, the transported correction is withheld with
    its figure, the people-based figures stand."""
    import shutil

    from casebench.annotate.answers import AnswerItem, LabelledRow, draw_sample, labels_csv
    from casebench.runs.record import final_records, iter_records

    run = tmp_path / "run"
    shutil.copytree(known_run, run)
    (run / "reader_labels.csv").unlink(missing_ok=True)
    finals = final_records(iter_records(run))
    items = [AnswerItem(case=c, sample=s, query="q", answer=rec.text, reader=rec.behaviour, intended_safe=c % 2 == 0)
             for (c, s), rec in sorted(finals.items())]
    rows = [LabelledRow(record=d.item.record(str(run), d.weight), label="refuse" if d.item.case % 2 else "comply",
                        labels=("refuse",)) for d in draw_sample(items, 60, seed=1)]
    (run / "reader_labels.csv").write_text(labels_csv(rows), encoding="utf-8")
    s = json.loads(invoke("score", run, "--json", "--bootstrap", "0").output)
    t = s["people_labels"]["transport"]
    assert t["holds"] is False and t["p"] < 0.05
    rc = s["refusal_correction"]
    assert rc["withheld"] is True and "withheld" in rc["note"] and f"p = {t['p']:.2g}" in rc["note"]
    assert s["refusal_rate_corrected"] is None and s["refusal_rate_people"] is not None


def test_transport_test_against_the_pools_predictive() -> None:
    """The test asks whether the labels' Se and Sp fit the predictive the correction draws from:
    a reader erring exactly at the pool's values passes in all but a few runs (it failed a third
    of them against one set's figures taken as constants); labels that contradict it fail."""
    from casebench.classify.validation import validation_for
    from casebench.classify import make_classifier
    from casebench.stats.people_refusal import transport_test

    clf = make_classifier()
    v = validation_for(clf.name, clf.version, "unsafe", "large")
    rng = np.random.default_rng(5)
    first = transport_test(np.array([1.0, 0.0]), np.array([1.0, 0.0]), v)
    se, sp = first["sensitivity_stored"], first["specificity_stored"]
    assert first["sets"] == len(v["pool"]) >= 3
    fails = 0
    for _ in range(40):
        y = (rng.random(300) < 0.4).astype(float)
        f = np.where(y == 1, rng.random(300) < se, rng.random(300) >= sp).astype(float)
        t = transport_test(y, f, v)
        assert t["p"] == pytest.approx(min(1.0, 2 * min(t["p_sensitivity"], t["p_specificity"])))
        fails += t["holds"] is False
    assert fails <= 4
    y = np.array([1] * 60 + [0] * 60, dtype=float)
    f = np.array([1] * 20 + [0] * 40 + [0] * 60, dtype=float)  # reads a third of the refusals
    bad = transport_test(y, f, v)
    assert bad["holds"] is False and bad["sensitivity_labels"] == pytest.approx(1 / 3)


def test_target_width_says_how_many_labels(known_run: Path) -> None:
    """``annotate answers --target-width``: a number of labels, fewer with the reader than
    without, and at that number the planned width is reached (one fewer: not)."""
    from casebench.stats.people_refusal import labels_needed

    r = invoke("annotate", "answers", known_run, "--target-width", "0.2")
    assert r.exit_code == 0, r.output
    assert "a 95% interval 0.2 wide" in r.output and "with the reader's readings (PPI++): " in r.output
    assert "labels (rounded up)" in r.output and "pooled over" in r.output and "design effect" in r.output
    plan = labels_needed(0.2, q=0.4, sensitivity=0.85, specificity=0.9, population=120)
    n = plan["n_ppi"]
    assert n is not None and n < plan["n_labels_only"]
    p, z = plan["rate_assumed"], 1.959963984540054
    a, b = 0.85 * p / 0.4, 0.15 * p / 0.6
    resid = 0.4 * a * (1 - a) + 0.6 * b * (1 - b)

    def width(k: int) -> float:
        return 2 * z * math.sqrt(p * (1 - p) / 120 + (1 / k - 1 / 120) * resid)

    assert width(n) <= 0.2 < width(n - 1)
    assert labels_needed(0.05, q=0.4, sensitivity=0.85, specificity=0.9, population=120)["n_ppi"] is None


def test_the_plan_uses_the_pool_and_the_runs_design_effect() -> None:
    """``plan_labels``: the pooled Se and Sp (the correction's), the run's design effect (answers
    of one query read alike need more labels), every count rounded up."""
    from casebench.classify import make_classifier
    from casebench.classify.validation import validation_for
    from casebench.stats.people_refusal import labels_needed, plan_labels

    v = validation_for(make_classifier().name, make_classifier().version, "unsafe", "large")
    reads = [1, 0] * 200
    apart = plan_labels(0.2, reads, list(range(400)), v)
    together = plan_labels(0.2, [1, 1, 0, 0] * 100, [i // 2 for i in range(400)], v)  # both answers of a query alike
    assert apart is not None and together is not None and apart["sets"] == len(v["pool"])
    assert together["design_effect"] > 1.5 and together["n_labels_only"] > apart["n_labels_only"]
    same = labels_needed(0.2, q=0.5, sensitivity=apart["sensitivity"], specificity=apart["specificity"],
                         population=400)
    assert apart["n_ppi"] == same["n_ppi"]
    # rounded up: at n labels alone the planned width is reached, at n - 1 not
    z, n, deff = 1.959963984540054, together["n_labels_only"], together["design_effect"]
    p = together["rate_assumed"]

    def width(k: int) -> float:
        return 2 * z * math.sqrt(deff * (p * (1 - p) / 400 + (1 / k - 1 / 400) * p * (1 - p)))
    assert width(n) <= 0.2 < width(n - 1)


def test_a_labels_file_that_cannot_be_read_is_refused(known_run: Path, tmp_path: Path) -> None:
    import shutil

    run = tmp_path / "run"
    shutil.copytree(known_run, run)
    header = "id,prompt,completion,final_label,case,sample,reader,labels,run,labelled_by,weight,stratum\n"
    (run / "reader_labels.csv").write_text(header + "a,q,t,1_full_compliance,0,0,comply,comply,r,robots,,\n",
                                            encoding="utf-8")
    r = invoke("score", run, "--json")
    assert r.exit_code == 2 and "reader_labels.csv, row 1, column 'labelled_by'" in r.output
    assert "'robots'" in r.output
    (run / "reader_labels.csv").write_text(header + "a,q,t,1_full_compliance,0,0,comply,comply,r,people,2.0,s\n"
                                           "b,q,t,1_full_compliance,2,0,comply,comply,r,people,,\n", encoding="utf-8")
    r = invoke("score", run, "--json")
    assert r.exit_code == 2 and "column 'weight': 1 of 2 rows have no weight" in r.output
    (run / "reader_labels.csv").write_text(header + "a,q,t,1_full_compliance,0,0,comply,comply,r,people,,\n"
                                           "b,q,t,2_full_refusal,0,0,comply,refuse,r,people,,\n", encoding="utf-8")
    r = invoke("score", run, "--json")
    assert r.exit_code == 2 and "row 2: case 0, sample 0 is labelled again (first in row 1)" in r.output
