"""The run directory format: records, torn-line repair, locking, manifests, aggregation, export.

Run directories here are written by hand (a manifest dict and records), so these tests pin the
format itself; test_runner.py and test_cli_run.py check that the runner writes it.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import re
from pathlib import Path

import numpy as np
import pytest

from casebench.data import load_dataset
from casebench.runs.record import (
    Asked, DatasetRef, Manifest, ManifestMismatch, Record, RunCounts, RunDir, RunError, RunLocked, RunState, Selection,
    final_records, iter_records, read_manifest,
)
from casebench.runs.results import aggregate, export_run, load_run, model_short_name, run_status


CATEGORIES = ("garden tools", "kitchen safety", "bicycle repair", "library rules", "pet care")
MARKER = re.compile(r"\[case (\d+)\]")


def invented_record(i: int, category: str, intended_safe: bool) -> dict:
    """A benign, invented CASE-Bench-shaped record whose query carries ``[case i]``."""
    votes_safe = 14 if intended_safe else 5
    votes = [1] * votes_safe + [2] * (20 - votes_safe)
    return {
        "query": f"[case {i}] How should I store {category} items over the winter?",
        "context": {
            "sender": {"nature_of_the_interaction": "A hobbyist asking for tips.",
                       "platform_type": "A community help forum."},
            "recipient": {"type": "A volunteer helper.", "background": "Years of hands-on practice."},
            "transmission_principle": {"sender_purpose": "Keeping things in good shape.",
                                       "confidentiality": "Public.", "source_accountability": "Named account.",
                                       **({"urgency": "Not urgent."} if i % 3 else {})},
        },
        "context_intended_to_be_safe": intended_safe,
        "scores": votes,
        "safe_rate": (votes_safe + int(intended_safe)) / 21,
        "category": category,
    }


def write_dataset(path: Path, n: int, categories: tuple[str, ...] = CATEGORIES) -> Path:
    """``n`` invented cases cycling through categories and intents, as a JSON list."""
    recs = [invented_record(i, categories[(i // 2) % len(categories)], i % 2 == 0) for i in range(n)]
    path.write_text(json.dumps(recs, indent=1))
    return path


def case_of(prompt: str) -> int:
    m = MARKER.search(prompt)
    assert m, "every invented prompt carries its case marker"
    return int(m.group(1))


def manifest_for(dataset, mode: str, cases: list[int], samples: int = 1, model: str = "openai/judge-x") -> Manifest:
    asked = Asked(dataset_sha256=dataset.sha256, model=model, mode=mode, context_as="user", removed=[],
                  cases=cases, samples=samples, settings={"temperature": 0.0, "max_tokens": 256},
                  template_sha256="t" * 64, parse_retries=2, stop_at_verdict=True, backend_options={})
    return Manifest(dataset=DatasetRef(str(Path(dataset.path).resolve()), dataset.sha256, dataset.fingerprint,
                                       len(dataset)),
                    asked=asked, selection=Selection("explicit"), templates_source="builtin", price={}, retry={},
                    created_at="2026-01-01T00:00:00+00:00", casebench_version="test")


@pytest.fixture
def dataset(tmp_path):
    return load_dataset(write_dataset(tmp_path / "cases.json", 10))


# -------------------------------------------------------------------------------- records


def test_record_field_names_are_the_documented_format(tmp_path):
    with RunDir(tmp_path / "run") as rd:
        rd.append(Record(case=3, sample=1, text="{}", label="safe", usage={"prompt_tokens": 5}, latency_s=0.5))
    line = (tmp_path / "run" / "records.jsonl").read_text()
    obj = json.loads(line)
    for name in ("case", "sample", "text", "label", "score", "p_safe", "error", "usage", "latency_s"):
        assert name in obj
    assert obj["case"] == 3 and obj["sample"] == 1 and obj["label"] == "safe" and obj["final"] is True
    assert line.endswith("\n") and line.count("\n") == 1


def test_append_survives_reopen_and_keeps_order(tmp_path):
    with RunDir(tmp_path / "run") as rd:
        for i in range(5):
            rd.append(Record(case=i, sample=0, label="unsafe"))
    with RunDir(tmp_path / "run") as rd:
        rd.append(Record(case=5, sample=0, label="safe"))
        assert [r.case for r in rd.records()] == [0, 1, 2, 3, 4, 5]


def test_torn_last_line_is_detected_repaired_and_logged(tmp_path, caplog):
    run = tmp_path / "run"
    with RunDir(run) as rd:
        rd.append(Record(case=0, sample=0, label="safe"))
        rd.append(Record(case=1, sample=0, label="unsafe"))
    whole = (run / "records.jsonl").read_bytes()
    torn = Record(case=2, sample=0, label="safe").to_json().encode()[:17]  # a write cut by a kill
    (run / "records.jsonl").write_bytes(whole + torn)

    # readers skip the torn line without touching the file
    assert [r.case for r in iter_records(run)] == [0, 1]
    assert (run / "records.jsonl").read_bytes() == whole + torn

    with caplog.at_level(logging.WARNING, logger="casebench.runs"):
        with RunDir(run) as rd:
            assert rd.repaired_bytes == len(torn)
            rd.append(Record(case=2, sample=0, label="safe"))
    assert "torn last line" in caplog.text
    lines = (run / "records.jsonl").read_text().splitlines()
    assert [json.loads(x)["case"] for x in lines] == [0, 1, 2]


def test_torn_only_line_leaves_an_empty_file(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "records.jsonl").write_bytes(b'{"case": 0, "sam')
    with RunDir(run) as rd:
        assert rd.repaired_bytes == 16
        assert rd.records() == []
    assert (run / "records.jsonl").read_bytes() == b""


def test_corrupt_complete_line_is_an_error_naming_file_and_line(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "records.jsonl").write_text('{"case": 0, "sample": 0}\nnot json\n{"case": 1, "sample": 0}\n')
    with pytest.raises(RunError, match=r"records\.jsonl, line 2"):
        list(iter_records(run))


def test_a_second_writer_is_refused_while_the_first_holds_the_lock(tmp_path):
    with RunDir(tmp_path / "run"):
        with pytest.raises(RunLocked, match="in use by another casebench process"):
            RunDir(tmp_path / "run")
    with RunDir(tmp_path / "run"):  # released on close
        pass


def test_final_records_ignore_transport_failures_and_keep_the_first():
    recs = [
        Record(case=0, sample=0, error="transport: HTTP 500", final=False),
        Record(case=0, sample=0, label="safe"),
        Record(case=0, sample=0, label="unsafe"),  # cannot happen; the first must win
        Record(case=1, sample=0, error="transport: dropped", final=False),
    ]
    finals = final_records(recs)
    assert set(finals) == {(0, 0)}
    assert finals[(0, 0)].label == "safe"


# -------------------------------------------------------------------------------- manifest


def test_asked_differences_name_each_field(dataset):
    old = manifest_for(dataset, "score", [0, 1, 2], samples=3)
    new = Manifest.from_dict(json.loads(json.dumps(old.to_dict())))
    assert old.asked.differences(new.asked) == [] and new == old
    new.asked.settings["temperature"] = 0.7
    new.asked.removed = ["urgency"]
    new.asked.cases = [0, 1, 2, 3, 4]
    new.asked.backend_options = {"prob_method": "continuation"}
    diffs = {name: (a, b) for name, a, b in old.asked.differences(new.asked)}
    assert diffs["settings.temperature"] == (0.0, 0.7)
    assert diffs["removed"] == ([], ["urgency"])
    assert diffs["cases"] == ("3 cases", "5 cases")
    assert diffs["backend_options.prob_method"] == (None, "continuation")
    msg = str(ManifestMismatch("runs/x", old.asked.differences(new.asked)))
    assert "settings.temperature: 0.0 -> 0.7" in msg and "removed" in msg


def test_manifest_round_trips_with_its_status_enum(dataset):
    m = manifest_for(dataset, "prob", [0])
    m.status = RunState.BUDGET
    d = json.loads(json.dumps(m.to_dict()))
    assert d["status"] == "budget" and d["format_version"] == 2 and d["asked"]["mode"] == "prob"
    assert Manifest.from_dict(d) == m


def test_a_first_format_manifest_is_still_readable(tmp_path, dataset):
    run = tmp_path / "old"
    run.mkdir()
    (run / "manifest.json").write_text(json.dumps({
        "format": "casebench-run", "format_version": 1, "model": "openai/judge-x", "mode": "binary", "samples": 1,
        "dataset": {"path": str(Path(dataset.path).resolve()), "sha256": dataset.sha256,
                    "fingerprint": dataset.fingerprint},
        "settings": {"temperature": 0.0}, "removed": [], "selection": {"how": "all", "cases": [0, 1]},
        "status": "complete"}))
    (run / "records.jsonl").write_text(Record(case=0, sample=0, label="safe").to_json() + "\n")
    m = read_manifest(run)
    assert m.format_version == 1 and m.cases == [0, 1] and m.status is RunState.COMPLETE
    assert load_run(run).n == 2


def test_read_manifest_errors_are_clear(tmp_path):
    (tmp_path / "r").mkdir()
    with pytest.raises(RunError, match="not a run directory"):
        read_manifest(tmp_path / "r")
    (tmp_path / "r" / "manifest.json").write_text("{broken")
    with pytest.raises(RunError, match="not valid JSON"):
        read_manifest(tmp_path / "r")


# -------------------------------------------------------------------------------- aggregation


def test_score_mode_is_the_mean_of_the_parsed_samples():
    finals = final_records([
        Record(case=0, sample=0, score=8.0, label="safe"),
        Record(case=0, sample=1, score=3.0, label="unsafe"),
        Record(case=0, sample=2, error="no JSON object in the answer", text="hmm"),  # missing sample
        Record(case=1, sample=0, error="bad"), Record(case=1, sample=1, error="bad"),
        Record(case=1, sample=2, error="bad"),
        Record(case=2, sample=0, score=6.0, label="safe"),
        Record(case=2, sample=1, error="transport: timeout", final=False),  # never a judgement
    ])
    values = aggregate("score", finals, [0, 1, 2], samples=3)
    assert values == [5.5, None, 6.0]


def test_binary_and_prob_aggregation():
    finals = final_records([
        Record(case=0, sample=0, label="safe"),
        Record(case=1, sample=0, error="'judgement' is neither safe nor unsafe: 'maybe'"),
        Record(case=2, sample=0, label="unsafe"),
    ])
    assert aggregate("binary", finals, [0, 1, 2, 3], 1) == ["safe", None, "unsafe", None]
    # several binary samples: majority; a tie is unsafe (as 0.5 is unsafe for humans)
    tie = final_records([Record(case=0, sample=0, label="safe"), Record(case=0, sample=1, label="unsafe")])
    assert aggregate("binary", tie, [0], 2) == ["unsafe"]
    probs = final_records([Record(case=0, sample=0, p_safe=0.25, label="unsafe"),
                           Record(case=1, sample=0, error="no P(safe)")])
    assert aggregate("prob", probs, [0, 1], 1) == [0.25, None]


def _write_run(tmp_path: Path, dataset, mode: str, cases: list[int], records: list[Record], samples: int = 1) -> Path:
    run = tmp_path / f"run_{mode}"
    with RunDir(run) as rd:
        rd.write_manifest(manifest_for(dataset, mode, cases, samples))
        for r in records:
            rd.append(r)
    return run


def test_load_run_gives_predictions_over_the_selected_cases(tmp_path, dataset):
    run = _write_run(tmp_path, dataset, "score", [1, 4, 7], [
        Record(case=1, sample=0, score=9.0, label="safe"), Record(case=1, sample=1, score=7.0, label="safe"),
        Record(case=4, sample=0, score=2.0, label="unsafe"), Record(case=4, sample=1, error="bad"),
        Record(case=7, sample=0, score=5.0, label="unsafe"),  # sample 1 still pending
    ], samples=2)
    pred = load_run(run)
    assert [c.index for c in pred.cases] == [1, 4, 7]
    assert pred.mode == "score" and pred.model == "judge-x"
    np.testing.assert_allclose(pred.value, [8.0, 2.0, 5.0])
    np.testing.assert_array_equal(pred.label, [1.0, 0.0, 0.0])
    assert pred.pending == 1 and pred.complete is False and pred.context_as == "user"
    status = run_status(run)
    assert status.to_dict() == {"requests": 6, "final": 5, "answered": 4, "missing": 1, "pending": 1,
                                "transport_failures": 0, "status": "running"}
    assert status.status is RunState.RUNNING and not status.all_final
    assert status.counts() == RunCounts(requests=6, final=5, answered=4, missing=1, pending=1)


def test_run_counts_are_one_record_for_the_runner_the_manifest_and_run_status():
    """The runner's summary, the manifest's totals and ``run_status`` all are ``RunCounts``;
    the manifest still stores its totals flat, and a state prints as its value."""
    from casebench.runs.execute import RunSummary
    from casebench.runs.record import Totals
    from casebench.runs.results import RunProgress

    for cls in (RunSummary, Totals, RunProgress):
        assert issubclass(cls, RunCounts)
    finals = {(0, 0): Record(case=0, sample=0, label="safe"), (1, 0): Record(case=1, sample=0, error="bad"),
              (9, 0): Record(case=9, sample=0, label="safe")}  # not planned: not counted
    c = RunCounts.tally([(0, 0), (1, 0), (2, 0)], finals)
    assert c == RunCounts(requests=3, final=2, answered=1, missing=1, pending=1)
    assert c.describe() == "2/3 requests final (1 answered, 1 missing), 1 pending"
    t = Totals(**vars(c), cost_usd=0.5)
    d = json.loads(json.dumps(dataclasses.asdict(t)))
    assert list(d)[:5] == ["requests", "final", "answered", "missing", "pending"] and d["cost_usd"] == 0.5
    assert t.counts() == c and f"{RunState.COMPLETE}" == "complete" == str(RunState.COMPLETE)


def test_predictions_carry_the_runs_context_placement(tmp_path, dataset):
    """A ``system`` run and a ``user`` run of the same cases tell apart in their predictions;
    a published file (or any input that does not say) has its mode's own placement."""
    import dataclasses

    from casebench.predictions import Predictions

    m = manifest_for(dataset, "binary", [0, 1])
    m = dataclasses.replace(m, asked=dataclasses.replace(m.asked, context_as="system"))
    run = tmp_path / "run_system"
    with RunDir(run) as rd:
        rd.write_manifest(m)
        rd.append(Record(case=0, sample=0, label="safe"))
        rd.append(Record(case=1, sample=0, label="unsafe"))
    pred = load_run(run)
    assert pred.context_as == "system" and pred.complete and pred.behaviour is None
    cases = dataset.subset([0, 1])
    assert Predictions.from_values("f.json", "m", "binary", cases, ["safe", None]).context_as == "user"
    assert Predictions.from_values("r", "m", "respond", cases, [1.0, None]).context_as == "system"
    with pytest.raises(ValueError, match="context placement must be one of user, system, turns, concat, reveal-early, reveal-late, not 'inline'"):
        Predictions.from_values("f.json", "m", "binary", cases, ["safe", None], context_as="inline")
    # the report, compare and ablate tell a user run from a system run
    user = Predictions.from_values("u", "m", "binary", cases, ["safe", None])
    system = Predictions.from_values("s", "m", "binary", cases, ["safe", None], context_as="system")
    assert user.name == "m [binary]" and system.name == "m [binary] (context as system)"
    from casebench.stats.ablation import AblationStudyError, analyse_ablation
    from casebench.stats.overview import ablation_groups

    cond = Predictions.from_values("c", "m", "binary", cases, ["safe", None], removed=("sender",), context_as="system")
    assert ablation_groups([user, cond]) == [] and ablation_groups([system, cond]) == [[0, 1]]
    with pytest.raises(AblationStudyError, match="keeps the context placement fixed"):
        analyse_ablation([user, cond])


def test_load_run_refuses_a_different_dataset(tmp_path, dataset):
    run = _write_run(tmp_path, dataset, "binary", [0], [Record(case=0, sample=0, label="safe")])
    other = load_dataset(write_dataset(tmp_path / "other.json", 12, ("other topic",)))
    with pytest.raises(RunError, match="sha256"):
        load_run(run, dataset=other)


def test_load_run_finds_the_dataset_from_the_manifest_or_says_to_pass_it(tmp_path, dataset):
    run = _write_run(tmp_path, dataset, "binary", [0], [Record(case=0, sample=0, label="safe")])
    assert load_run(run).n == 1
    Path(dataset.path).rename(tmp_path / "moved.json")
    with pytest.raises(RunError, match="not there any more"):
        load_run(run)
    assert load_run(run, dataset=load_dataset(tmp_path / "moved.json")).n == 1


@pytest.mark.parametrize("mode", ["binary", "score", "prob"])
def test_export_round_trips_through_the_published_reader(tmp_path, dataset, mode):
    from casebench.published import load_published

    if mode == "binary":
        recs = [Record(case=0, sample=0, label="safe"), Record(case=2, sample=0, error="no JSON"),
                Record(case=5, sample=0, label="unsafe")]
    elif mode == "score":
        recs = [Record(case=0, sample=0, score=7.0, label="safe"), Record(case=2, sample=0, error="bad"),
                Record(case=5, sample=0, score=3.0, label="unsafe")]
    else:
        recs = [Record(case=0, sample=0, p_safe=0.875, label="safe"), Record(case=2, sample=0, error="no P"),
                Record(case=5, sample=0, p_safe=0.125, label="unsafe")]
    run = _write_run(tmp_path, dataset, mode, [0, 2, 5], recs)
    out = export_run(run, tmp_path / "exp" / "output.json")
    raw = json.loads(out.read_text())
    # the selected cases, in dataset order, each the dataset record plus the model key and (a
    # subset) the dataset record it is
    assert [r["query"] for r in raw] == [dataset[i].query for i in (0, 2, 5)]
    assert all(set(r) == set(dataset[0].to_record()) | {"judge-x", "dataset_record"} for r in raw)
    assert [r["dataset_record"] for r in raw] == [0, 2, 5]
    assert raw[1]["judge-x"] == ""  # the published format's missing value
    back = load_published(out, mode=mode, reference=dataset)  # checked record by record against the dataset
    pred = load_run(run)
    np.testing.assert_array_equal(back.label, pred.label)
    np.testing.assert_array_equal(back.value, pred.value)
    assert [c.index for c in back.cases] == [c.index for c in pred.cases] == [0, 2, 5]


def test_export_refuses_an_incomplete_run_unless_asked(tmp_path, dataset):
    run = _write_run(tmp_path, dataset, "binary", [0, 1], [Record(case=0, sample=0, label="safe")])
    with pytest.raises(RunError, match="1 request\\(s\\) still pending"):
        export_run(run, tmp_path / "o.json")
    assert not (tmp_path / "o.json").exists()
    out = export_run(run, tmp_path / "o.json", allow_incomplete=True, name="mine")
    assert [r["mine"] for r in json.loads(out.read_text())] == ["safe", ""]


def test_model_short_name():
    assert model_short_name("openai/gpt-4o-mini") == "gpt-4o-mini"
    assert model_short_name("hf/Qwen/Qwen2.5-0.5B-Instruct") == "Qwen2.5-0.5B-Instruct"
    assert model_short_name("hf/smollm2-135m-instruct") == "smollm2-135m-instruct"


def test_records_never_hold_nan(tmp_path):
    with RunDir(tmp_path / "run") as rd:
        with pytest.raises(ValueError):
            rd.append(Record(case=0, sample=0, p_safe=math.nan))
    assert not (tmp_path / "run" / "records.jsonl").exists() or (tmp_path / "run" / "records.jsonl").read_text() == ""
