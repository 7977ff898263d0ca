"""The run directory format: records, torn-line repair, locking, manifests, aggregation, export.

Run directories here are written by hand (a manifest dict and records), so these tests pin the
format itself; test_runner.py and test_cli_run.py check that the runner writes it.
"""

from __future__ import annotations

import json
import logging
import math
import re
from pathlib import Path

import numpy as np
import pytest

from casebench.data import load_dataset


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


def manifest_for(dataset, mode: str, cases: list[int], samples: int = 1, model: str = "openai/judge-x") -> dict:
    return {
        "model": model, "mode": mode, "samples": samples,
        "dataset": {"path": str(Path(dataset.path).resolve()), "sha256": dataset.sha256,
                    "fingerprint": dataset.fingerprint},
        "settings": {"temperature": 0.0, "max_tokens": 256},
        "templates": {"source": "builtin", "sha256": "t" * 64},
        "removed": [],
        "selection": {"how": "explicit", "cases": cases},
        "parse_retries": 2,
    }


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


def test_manifest_differences_name_each_field(dataset):
    old = manifest_for(dataset, "score", [0, 1, 2], samples=3)
    new = json.loads(json.dumps(old))
    assert manifest_differences(old, new) == []
    new["settings"]["temperature"] = 0.7
    new["removed"] = ["urgency"]
    new["selection"] = {"how": "limit=5", "cases": [0, 1, 2, 3, 4]}
    diffs = {name: (a, b) for name, a, b in manifest_differences(old, new)}
    assert diffs["settings.temperature"] == (0.0, 0.7)
    assert diffs["removed"] == ([], ["urgency"])
    assert diffs["selection.cases"] == ("3 cases (explicit)", "5 cases (limit=5)")
    msg = str(ManifestMismatch("runs/x", manifest_differences(old, new)))
    assert "settings.temperature: 0.0 -> 0.7" in msg and "removed" in msg


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
    assert pred.meta["pending_requests"] == 1 and pred.meta["complete"] is False
    status = run_status(run)
    assert status == {"requests": 6, "final": 5, "answered": 4, "missing": 1, "pending": 1,
                      "transport_failures": 0, "status": None}


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
    # the selected cases, in dataset order, each the dataset record plus the model key
    assert [r["query"] for r in raw] == [dataset[i].query for i in (0, 2, 5)]
    assert all(set(r) == set(dataset[0].to_record()) | {"judge-x"} for r in raw)
    assert raw[1]["judge-x"] == ""  # the published format's missing value
    back = load_published(out, mode=mode)
    pred = load_run(run)
    np.testing.assert_array_equal(back.label, pred.label)
    np.testing.assert_array_equal(back.value, pred.value)


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
