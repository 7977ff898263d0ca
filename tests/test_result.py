"""One scoring pass per input (issue 24 items 1 and 2): every consumer reads the input's one
``ScoredInput``; every figure knows the cases or pairs it rests on; one interval method per kind
of figure in every command; published reference rows scored once and kept on disk.

Real data where it matters: the published GPT-4o file (counts behind the small-sample mark), the
published files in a report (how often each input's arrays are built, counted by
the ``scoring_counts`` fixture), the CLI on the published outputs (the reference cache).
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from casebench.cli import cli
from casebench.data import Case
from casebench.predictions import Predictions
from casebench.published import reference_files
from casebench.stats.context import contested
from casebench.stats.metrics import wilson_ci
from casebench.stats.options import ScoringOptions
from casebench.stats.pairs import pair_by_query
from casebench.stats.placement import analyse_placements
from casebench.reference_rows import ReferenceCache
from casebench.session import scoring_session
from casebench.stats.result import score_input, score_predictions

SHARED = Path(__file__).resolve().parents[2] / "shared" / "casebench"
GPT4O = "exp/safety_gpt-4o/output_binary.json"


def _votes(safe: int, n: int = 20) -> tuple[int, ...]:
    return (1,) * safe + (2,) * (n - safe)


def _pairs(k: int) -> list[Case]:
    """``k`` queries of our own wording, each in a safe-intent context people call safe (13 to
    19 of 20) and an unsafe-intent one people call unsafe (1 to 5 of 20)."""
    out = []
    for q in range(k):
        s, u = 13 + q % 7, 1 + q % 5
        out.append(Case(2 * q, f"query {q}", {"sender": {"x": "a"}}, True, _votes(s), s / 20, "c"))
        out.append(Case(2 * q + 1, f"query {q}", {"sender": {"x": "b"}}, False, _votes(u), u / 20, "c"))
    return out


def test_counts_behind_each_figure_on_the_published_gpt4o_file(exp_dir):
    """accuracy_contested rests on the 365 contested cases, accuracy_clear on the 535 others,
    context_blind on the 399 pairs whose human labels differ (not 900, 900 and 450)."""
    from casebench.loader import load_predictions

    pred = load_predictions(SHARED / GPT4O)
    s = score_input(pred, ScoringOptions(n_boot=0)).score
    ct = contested(pred.human_rate)
    pairs = np.array(pair_by_query(pred.cases).pairs)
    differ = pred.human_safe[pairs[:, 0]] != pred.human_safe[pairs[:, 1]]
    assert (int(ct.sum()), int((~ct).sum()), int(differ.sum())) == (365, 535, 399)
    assert s.cases_of["accuracy_contested"] == 365 and s.cases_of["accuracy_clear"] == 535
    assert s.cases_of["context_blind"] == 399
    assert s.cases_of["context_follow"] == s.cases_of["context_shift"] == 450
    assert s.cases_of["safe_recall"] + s.cases_of["unsafe_recall"] == s.cases_of["accuracy"] == 900
    # the CSV `_n` columns and JSON cases_of say the same
    r = CliRunner().invoke(cli, ["score", str(SHARED / GPT4O), "--bootstrap", "0", "--no-reference", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["cases_of"]["accuracy_contested"] == 365
    r = CliRunner().invoke(cli, ["score", str(SHARED / GPT4O), "--bootstrap", "0", "--no-reference", "--format", "csv"])
    header, row = r.stdout.splitlines()[:2]
    cells = dict(zip(header.split(","), row.split(",")))
    assert (cells["accuracy_contested_n"], cells["accuracy_clear_n"], cells["context_blind_n"]) == ("365", "535", "399")


def test_a_small_contested_count_carries_the_mark():
    """18 contested cases among 40: accuracy_contested gets the dagger, accuracy does not."""
    from casebench.present.numbers import SMALL
    from casebench.present.score_text import text_table

    cases = [Case(i, f"q{i}", {"sender": {"x": str(i)}}, i % 2 == 0, _votes(10 if i < 18 else 19), 0.5 if i < 18
                  else 0.95, "c") for i in range(40)]
    pred = Predictions.from_values("x", "m", "binary", cases, ["safe"] * 40)
    s = score_input(pred, ScoringOptions(n_boot=20)).score
    assert s.cases_of["accuracy_contested"] == 18 and s.cases_of["accuracy_clear"] == 22
    assert "accuracy_contested" in s.small() and "accuracy" not in s.small()
    line = next(x for x in text_table([s]).splitlines() if "accuracy, contested" in x)
    assert SMALL in line


def test_a_pair_share_at_zero_gets_the_same_wilson_interval_in_score_and_study():
    """10 pairs, none followed: context_follow 0/10 with the Wilson interval [0, 0.278] (not
    [0, 0]), the same in ``score`` and in the placement study, in every format."""
    cases = _pairs(10)
    opts = ScoringOptions(n_boot=200)
    user = Predictions.from_values("u", "m", "binary", cases, ["safe"] * 20, context_as="user")
    turns = Predictions.from_values("t", "m", "binary", cases, ["unsafe"] * 20, context_as="turns")
    s = score_input(user, opts).score
    assert s.values["context_follow"] == 0.0 and s.cases_of["context_follow"] == 10
    want = wilson_ci(0, 10, 0.95, df=9)  # clustered by query: ten queries, t with 9 df
    assert s.ci["context_follow"] == pytest.approx(want) and want[0] == 0.0 and want[1] > 0.25
    # blind: 10 of 10 pairs people split get one label: Wilson at 1, not [1, 1]
    assert s.ci["context_blind"] == pytest.approx(wilson_ci(10, 10, 0.95, df=9)) and s.ci["context_blind"][0] < 0.75
    # the study reads the same numbers from fresh predictions (nothing shared but the data)
    fresh = [replace(user, meta={}), replace(turns, meta={})]
    study = analyse_placements(fresh, opts)
    ctx = study.placements[0].context
    assert ctx.follow == s.values["context_follow"] and ctx.ci["context_follow"] == s.ci["context_follow"]
    assert ctx.blind == s.values["context_blind"] and ctx.ci["context_blind"] == s.ci["context_blind"]
    assert ctx.blind_pairs == s.cases_of["context_blind"] == 10
    assert "interim" not in json.dumps(study.to_dict()) and "placement.py" not in json.dumps(study.to_dict())


def test_partial_answers_at_zero_get_a_wilson_interval():
    cases = _pairs(25)
    pred = Predictions.from_values("r", "m", "respond", cases, [1.0] * 50, behaviour=[["comply"]] * 50)
    s = score_input(pred, ScoringOptions(n_boot=100)).score
    assert s.values["partial_rate"] == 0.0 and s.cases_of["partial_rate"] == 50
    # clustered by query: 25 queries, t with 24 df
    assert s.ci["partial_rate"] == pytest.approx(wilson_ci(0, 50, 0.95, df=24)) and s.ci["partial_rate"][1] > 0.05


def test_study_and_score_print_the_same_figures_for_one_run(tmp_path):
    """The text of ``casebench study`` shows, per placement, exactly what ``casebench score``
    prints for that input (the same values and intervals, at the study's digits)."""
    from casebench.present.study_text import format_placements

    cases = _pairs(40)
    rng = np.random.default_rng(3)
    preds = [Predictions.from_values(w, "m", "prob", cases, rng.uniform(0, 1, 80).tolist(), context_as=w)
             for w in ("user", "turns")]
    opts = ScoringOptions(n_boot=300)
    study = analyse_placements(preds, opts)
    text = format_placements(study)
    for p, f in zip(preds, study.placements):
        own = score_input(replace(p, meta={}), opts).score  # scored afresh
        assert json.dumps(f.score.to_dict()) == json.dumps(own.to_dict())
        for m in ("context_shift", "context_follow", "context_blind"):
            lo, hi = own.ci[m]
            assert f"{own.values[m]:.3f} [{lo:.3f}, {hi:.3f}]" in text


def test_an_input_is_scored_once_and_the_threshold_is_an_option(scoring_counts):
    cases = _pairs(5)
    pred = Predictions.from_values("p", "m", "prob", cases, [0.9, 0.2] * 5, verdict_mass=[0.9, 0.3] * 5)
    opts = ScoringOptions(n_boot=0)
    before = scoring_counts["builds"]["p"]
    with scoring_session():  # what one command does: each input scored once in its session
        a = score_input(pred, opts)
        assert score_input(pred, opts) is a and score_predictions(pred, opts) is a.score
        assert scoring_counts["builds"]["p"] == before + 1
        low = score_input(pred, replace(opts, min_verdict_mass=0.2))
        assert low.scored == 10 and a.scored == 5 and pred.min_verdict_mass == 0.5  # the predictions keep theirs
        assert scoring_counts["builds"]["p"] == before + 2
    # nothing outlives the session: no process-wide cache keyed by the predictions' identity
    again = score_input(pred, opts)
    assert again is not a and json.dumps(again.score.to_dict()) == json.dumps(a.score.to_dict())
    assert scoring_counts["builds"]["p"] == before + 3


def test_scoring_arrays_are_built_once_per_input_in_a_report(exp_dir, scoring_counts):
    """A report over three published inputs (two models and an ablation condition: ranked,
    compared pair by pair, an ablation study) builds each input's scoring arrays once."""
    from casebench.loader import load_predictions
    from casebench.present.report import build_report

    files = ["safety_gpt-4o-mini-2024-07-18/output_score.json", "safety_gpt-4o-mini-2024-07-18/output_score_sender.json",
             "safety_gpt-4o/output_score.json"]
    preds = [load_predictions(exp_dir / f) for f in files]
    before = {p.source: scoring_counts["builds"][p.source] for p in preds}
    page = build_report(preds, ScoringOptions(n_boot=50), human=False)
    assert 'id="ablation"' in page
    assert {p.source: scoring_counts["builds"][p.source] - before[p.source] for p in preds} == {p.source: 1 for p in preds}


def test_reference_rows_are_scored_once_and_kept_until_the_options_change(tmp_path, monkeypatch, scoring_counts):
    """``score --reference``: the first call scores the published files and keeps each row in
    the cache directory (JSON, one file a row); the second reads them without loading or scoring
    any file; other options are other keys."""
    monkeypatch.setenv("CASEBENCH_CACHE", str(tmp_path / "cache"))
    args = ["score", str(SHARED / GPT4O), "--reference", str(SHARED), "--bootstrap", "0", "--json"]
    rows = len(reference_files(SHARED)) - 1  # the input's own published file is not a reference row

    def builds() -> int:  # scoring arrays built so far, every input
        return sum(scoring_counts["builds"].values())

    n = builds()
    first = CliRunner().invoke(cli, args)
    assert first.exit_code == 0, first.output
    assert builds() - n == 1 + rows  # the input and every published file
    kept = list((tmp_path / "cache" / "scores").glob("reference-*.json"))
    assert len(kept) == rows and not list((tmp_path / "cache").rglob("*.pickle"))
    assert all(json.loads(k.read_text())["format"] == 1 for k in kept)
    n = builds()
    second = CliRunner().invoke(cli, args)
    assert second.exit_code == 0 and second.stdout == first.stdout  # the same rows, read back
    assert builds() - n == 1  # the input alone: no published file scored again
    n = builds()
    third = CliRunner().invoke(cli, [*args[:-2], "10", "--json"])  # other options: another key
    assert third.exit_code == 0, third.output
    assert builds() - n > 10 and len(list((tmp_path / "cache" / "scores").glob("reference-*.json"))) == 2 * rows
    rows = [json.loads(x) for x in second.stdout.splitlines()]
    assert len(rows) > 10 and all(math.isfinite(r["accuracy"]) for r in rows)


def test_the_cache_key_follows_file_dataset_options_subset_and_version(tmp_path, monkeypatch):
    import casebench

    a, b, d = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "data.json"
    a.write_text("[1]")
    b.write_text("[2]")
    d.write_text("[]")
    k = ReferenceCache.key(a, ScoringOptions())
    assert k == ReferenceCache.key(a, ScoringOptions())
    assert k != ReferenceCache.key(b, ScoringOptions())
    assert k != ReferenceCache.key(a, ScoringOptions(bootstrap_seed=1))
    assert k != ReferenceCache.key(a, ScoringOptions(level=0.9))
    assert k != ReferenceCache.key(a, ScoringOptions(), cases=[("q", True, "c")])
    assert k != ReferenceCache.key(a, ScoringOptions(), datasets=[d])
    monkeypatch.setattr(casebench, "__version__", "0.0.0-other")
    assert k != ReferenceCache.key(a, ScoringOptions())  # another casebench version
    monkeypatch.undo()
    a.write_text("[3]")  # an edited file is another key
    assert k != ReferenceCache.key(a, ScoringOptions())


def test_reprs_are_short(real_dataset):
    pred = Predictions.from_values("x.json", "m", "binary", list(real_dataset), ["safe"] * len(real_dataset))
    assert len(repr(pred)) < 200 and "900" in repr(pred)
    assert len(repr(real_dataset)) < 200 and "900" in repr(real_dataset)
    assert len(repr(score_input(pred, ScoringOptions(n_boot=0)))) < 200


def test_a_scored_input_is_frozen_and_kept_beside_the_predictions():
    """Nothing changes a scored input, and scoring keeps nothing in the predictions themselves
    (no hidden state in their ``__dict__``): the same input and options still give the same
    result, at any threshold."""
    from dataclasses import FrozenInstanceError, fields

    cases = _pairs(12)
    pred = Predictions.from_values("p", "m", "prob", cases, [0.8, 0.3] * 12, verdict_mass=[0.9, 0.4] * 12)
    before = set(vars(pred))
    with scoring_session():
        r = score_input(pred, ScoringOptions(n_boot=20))
        low = score_input(pred, ScoringOptions(n_boot=20, min_verdict_mass=0.2))
        pred.fingerprint()
        assert set(vars(pred)) == before == {f.name for f in fields(pred)}
        assert score_input(pred, ScoringOptions(n_boot=20)) is r and score_input(
            pred, ScoringOptions(n_boot=20, min_verdict_mass=0.2)) is low
    with pytest.raises(FrozenInstanceError):
        r.score = low.score  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError):
        r.people = low.people  # type: ignore[misc]
    assert not hasattr(r, "attach") and not hasattr(r, "add_figure")
    assert low.people.pair_count == 12 and r.people.pair_count == 0 and r.people.cases is not None


def test_casebench_run_reads_its_dataset_once_and_scores_the_run_once(tmp_path, monkeypatch, scoring_counts):
    """The end of ``casebench run`` (coverage check, summary, table, report) reads the run's
    dataset once and scores the run once (against a local OpenAI-compatible server)."""
    import casebench.data as data_mod
    import casebench.runs.results as results_mod
    from servers.fault_server import FaultServer
    from test_runner import binary_answer
    from test_runs import write_dataset

    monkeypatch.setenv("CASEBENCH_CACHE", str(tmp_path / "cache"))  # no published models: no reference rows
    monkeypatch.delenv("CASEBENCH_DATA", raising=False)
    data = write_dataset(tmp_path / "cases.json", 12)
    reads: list[str] = []
    real = data_mod.load_dataset

    def counted(path, *a, **k):
        reads.append(str(path))
        return real(path, *a, **k)

    monkeypatch.setattr(data_mod, "load_dataset", counted)
    monkeypatch.setattr(results_mod, "load_dataset", counted)
    out = tmp_path / "run"
    before = sum(scoring_counts["builds"].values())
    with FaultServer(answer_fn=binary_answer) as srv:
        r = CliRunner().invoke(cli, ["run", "--model", "openai/judge-x", "--mode", "binary", "--data", str(data),
                                     "--base-url", srv.base_url, "-o", str(out), "--no-progress"])
    assert r.exit_code == 0, r.output
    assert (out / "report.html").is_file()
    assert [p for p in reads if Path(p).name == "cases.json"] == [str(data)]
    assert scoring_counts["builds"][str(out)] == 1 and sum(scoring_counts["builds"].values()) - before == 1


def test_report_reference_rows_are_scored_once_and_kept_until_the_options_change(tmp_path, monkeypatch,
                                                                                 scoring_counts):
    """``casebench report --reference``: the first report scores each published reference input
    and keeps its result in the cache directory; a second report with the same references scores
    none of them (only the report's own input); another label source is another key."""
    monkeypatch.setenv("CASEBENCH_CACHE", str(tmp_path / "cache"))
    refs = tmp_path / "refs"
    (refs / "exp").mkdir(parents=True)
    for model in ("safety_gpt-4o-mini-2024-07-18", "safety_dolphin"):  # two published models, as laid out
        (refs / "exp" / model).symlink_to(SHARED / "exp" / model, target_is_directory=True)
    ref_files = {str(p) for p in reference_files(refs)}
    assert len(ref_files) >= 2
    args = ["report", str(SHARED / GPT4O), "--reference", str(refs), "--bootstrap", "0", "--no-human"]

    def scored(before: dict[str, int]) -> dict[str, int]:  # per source, figures computed since ``before``
        return {s: n - before.get(s, 0) for s, n in scoring_counts["scored"].items() if n - before.get(s, 0)}

    before = dict(scoring_counts["scored"])
    first = CliRunner().invoke(cli, [*args, "-o", str(tmp_path / "a.html")])
    assert first.exit_code == 0, first.output
    got = scored(before)
    assert ref_files <= set(got) and all(got[f] == 1 for f in ref_files)  # each reference scored once
    kept = list((tmp_path / "cache" / "scores").glob("reference-*.json"))
    assert len(kept) == len(ref_files) and not list((tmp_path / "cache").rglob("*.pickle"))

    before = dict(scoring_counts["scored"])
    second = CliRunner().invoke(cli, [*args, "-o", str(tmp_path / "b.html")])
    assert second.exit_code == 0, second.output
    got = scored(before)
    assert not ref_files & set(got) and got  # the input scored, no reference input
    a, b = ((tmp_path / n).read_text() for n in ("a.html", "b.html"))
    assert "(published)" in b
    strip = lambda page: page.split("<main>", 1)[1].split("UTC", 1)[1]  # noqa: E731 - the time stamp aside
    assert strip(a) == strip(b)  # the same report, reference rows read back

    before = dict(scoring_counts["scored"])
    third = CliRunner().invoke(cli, [*args, "--label-source", "votes", "-o", str(tmp_path / "c.html")])
    assert third.exit_code == 0, third.output
    assert ref_files <= set(scored(before))  # other options: scored again
    assert len(list((tmp_path / "cache" / "scores").glob("reference-*.json"))) == 2 * len(ref_files)


@pytest.mark.parametrize("command, name", [
    (["score"], "--bootstrap-seed"), (["compare"], "--bootstrap-seed"), (["ablate"], "--bootstrap-seed"),
    (["study"], "--bootstrap-seed"), (["report"], "--bootstrap-seed"), (["report"], "--human-draw-seed"),
    (["human", "stats"], "--human-draw-seed"), (["annotate", "answers"], "--sample-seed"),
])
def test_each_seed_is_named_for_what_it_seeds(command, name):
    """Every command names its seed for what it seeds; the older ``--seed`` stays an alias."""
    r = CliRunner().invoke(cli, [*command, "--help"], terminal_width=200)
    assert r.exit_code == 0, r.output
    options = r.output.split("Options:", 1)[1]
    after = options.split(f"  {name}", 1)[1]  # the option's own entry
    assert after.startswith((", --seed ", " INTEGER"))
    assert "Seed of the" in after[:200]  # its help says what it seeds
    assert "--seed" in options  # the older name still accepted


def test_the_older_seed_flag_means_the_bootstrap_seed():
    """``score --seed S`` and ``score --bootstrap-seed S`` are the same resamples; another seed differs."""
    base = ["score", str(SHARED / GPT4O), "--bootstrap", "40", "--no-reference", "--json"]
    old = CliRunner().invoke(cli, [*base, "--seed", "3"])
    new = CliRunner().invoke(cli, [*base, "--bootstrap-seed", "3"])
    other = CliRunner().invoke(cli, [*base, "--bootstrap-seed", "4"])
    assert old.exit_code == new.exit_code == other.exit_code == 0, old.output + new.output + other.output
    assert old.stdout == new.stdout
    assert json.loads(old.stdout)["ci"] != json.loads(other.stdout)["ci"]
