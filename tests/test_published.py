import json

import numpy as np
import pytest

from casebench.data import DatasetError, load_dataset
from casebench.stats.options import ScoringOptions
from casebench.published import (
    load_published, parse_file_name, published_file_name, published_records, write_published,
)


def _named(path):
    mode, removed = parse_file_name(path)
    return (mode.name if mode else None, removed)


def test_file_names():
    assert _named("output_binary.json") == ("binary", ())
    assert _named("output_logits_sender,recipient.json") == ("prob", ("sender", "recipient"))
    assert _named("output_score_type.json") == ("score", ("type",))
    assert _named("mine.json") == (None, ())
    assert _named("output_respond.json") == (None, ()) or _named("output_respond.json")[0] == "respond"
    with pytest.raises(DatasetError, match="unknown ablation"):  # a mistyped parameter is refused
        parse_file_name("output_score_sendr.json")
    with pytest.raises(DatasetError, match="unknown ablation"):
        parse_file_name("output_score_sender,mine.json")
    # a tail that names no parameter is the user's own label: the mode the name says, full contexts
    assert _named("output_binary_mine.json") == ("binary", ())
    assert _named("output_score_nonsense.json") == ("score", ())
    assert published_file_name("prob", ("sender", "urgency")) == "output_logits_sender,urgency.json"


def _with_model(records, values, key="mymodel"):
    out = []
    for r, v in zip(records, values):
        r = dict(r)
        r[key] = v
        out.append(r)
    return out


def test_detect_model_and_mode_from_values(tmp_path, small_records):
    f = tmp_path / "preds.json"
    f.write_text(json.dumps(_with_model(small_records, [7.0, 2.0, "", 9.5, 6, 1, 3, 4])))
    p = load_published(f)
    assert (p.model, p.mode.name, p.removed) == ("mymodel", "score", ())
    assert np.isnan(p.value[2]) and p.value[0] == 7.0 and p.label[0] == 1.0
    f.write_text(json.dumps(_with_model(small_records, ["safe", "unsafe", "", "safe", "x", "safe", "unsafe", "safe"])))
    p = load_published(f)
    assert p.mode.name == "binary" and p.meta["unrecognised_labels"] == 1 and p.answered.sum() == 6


def test_bad_prediction_values_name_record_and_field(tmp_path, small_records):
    d = tmp_path / "safety_m"
    d.mkdir()
    f = d / "output_logits.json"
    f.write_text(json.dumps(_with_model(small_records, [0.1, 0.2, 1.7, 0.3, "0.4", 0.5, 0.6, 0.7])))
    with pytest.raises(DatasetError) as e:
        load_published(f)
    assert {(2, "mymodel"), (4, "mymodel")} == {(i, fl) for i, fl, _ in e.value.problems}
    f.write_text(json.dumps(small_records))
    with pytest.raises(DatasetError, match="exactly one model key"):
        load_published(f)


def test_write_then_read_round_trip(tmp_path, small_data_path):
    cases = list(load_dataset(small_data_path))
    vals = [0.9, None, 0.1, 0.5, 0.51, 0.2, 0.0, 1.0]
    out = tmp_path / "safety_x" / "output_logits_urgency.json"
    write_published(out, cases, "x", "prob", vals)
    p = load_published(out)
    assert (p.model, p.mode.name, p.removed) == ("x", "prob", ("urgency",))
    assert np.allclose(p.value, [np.nan if v is None else v for v in vals], equal_nan=True)
    recs = json.loads(out.read_text())
    assert recs[1]["x"] == "" and recs[0]["query"] == cases[0].query
    assert not list(out.parent.glob(".*"))  # no temp file left behind


def test_published_records_keep_field_order(small_data_path):
    cases = list(load_dataset(small_data_path))
    rec = published_records(cases[:1], "m", "binary", ["safe"])[0]
    assert list(rec) == ["scores", "query", "context", "safe_rate", "category", "context_intended_to_be_safe", "m"]


def test_published_intent_vote_is_stripped_and_restored(exp_dir, real_dataset):
    p = load_published(exp_dir / "safety_gpt-4o" / "output_binary.json")
    assert [c.votes for c in p.cases] == [c.votes for c in real_dataset]
    rec = published_records(p.cases[:1], "m", "binary", ["safe"])[0]
    assert len(rec["scores"]) == 21 and rec["scores"][-1] == (1 if p.cases[0].intended_safe else 2)


# ------------------------------------------------------------------ ablation files


def _ablation_file(tmp_path, records, removed, values, name=None):
    from casebench.data import ablate_context

    recs = []
    for r, v in zip(records, values):
        r = dict(r)
        r["context"] = ablate_context(r["context"], removed)
        r["judge"] = v
        recs.append(r)
    f = tmp_path / "safety_judge" / (name or published_file_name("score", removed))
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text(json.dumps(recs))
    return f


def test_an_ablation_file_accepts_exactly_the_declared_absences(tmp_path, small_records):
    values = [7.0, 2.0, "", 9.5, 6, 1, 3, 4]
    f = _ablation_file(tmp_path, small_records, ("sender", "urgency"), values)
    p = load_published(f)
    assert p.removed == ("sender", "urgency") and p.mode.name == "score"
    assert all("sender" not in c.context for c in p.cases)
    # the same contexts under a name that declares only "sender": urgency's absence is still fine
    # (it is optional), but a missing recipient is not
    recs = json.loads(f.read_text())
    del recs[3]["context"]["recipient"]
    g = f.parent / "output_score_sender.json"
    g.write_text(json.dumps(recs))
    with pytest.raises(DatasetError) as e:
        load_published(g)
    assert "record 3" in str(e.value) and "context.recipient" in str(e.value)
    assert "context.sender" not in str(e.value)
    # a full-context name does not excuse the absence
    h = f.parent / "output_score.json"
    h.write_text(f.read_text())
    with pytest.raises(DatasetError, match="context.sender"):
        load_published(h)


def test_ablation_and_full_files_are_the_same_cases(tmp_path, small_records):
    full = _ablation_file(tmp_path, small_records, (), [7.0] * 8)
    abl = _ablation_file(tmp_path, small_records, ("recipient",), [3.0] * 8)
    a, b = load_published(full), load_published(abl)
    assert a.dataset_fingerprint != b.fingerprint()  # contexts differ as stored ...
    assert a.fingerprint(b.removed) == b.fingerprint(a.removed)  # ... but they are the same cases


def test_shared_ablation_file_reproduces_the_official_figures(exp_dir):
    from casebench.stats.result import score_predictions

    p = load_published(exp_dir / "safety_gpt-4o-mini-2024-07-18" / "output_score_sender.json")
    assert p.removed == ("sender",) and p.model == "gpt-4o-mini-2024-07-18" and p.n == 900
    s = score_predictions(p, ScoringOptions(paper_compat=True, n_boot=0))
    official = dict(accuracy=0.78111, safe_recall=0.58145, unsafe_recall=0.94012, pcc=65.90899, bce=0.73316,
                    brier=0.06269)
    for metric, expected in official.items():
        got = s.values[metric] * (100 if metric == "pcc" else 1)
        assert round(got, 5) == pytest.approx(expected, abs=1e-9), metric


# ------------------------------------------------------------------ checked against the dataset


def _exp_layout(tmp_path, dataset_records, file_records, name="output_binary.json"):
    """The authors' layout: <root>/CASEBench_data.json beside <root>/exp/safety_m/<name>."""
    (tmp_path / "CASEBench_data.json").write_text(json.dumps(dataset_records))
    folder = tmp_path / "exp" / "safety_m"
    folder.mkdir(parents=True, exist_ok=True)
    f = folder / name
    f.write_text(json.dumps(file_records))
    return f


def test_a_published_file_shorter_or_longer_than_the_dataset_beside_it_is_refused(tmp_path, small_records):
    from casebench.loader import load_predictions

    values = ["safe", "unsafe"] * 4
    ok = _exp_layout(tmp_path, small_records, _with_model(small_records, values))
    assert load_predictions(ok).meta["checked_against"].endswith("CASEBench_data.json")
    short = _exp_layout(tmp_path, small_records, _with_model(small_records[:7], values), "output_score.json")
    with pytest.raises(DatasetError, match=r"record 7: the file has 7 records, the dataset .* has 8"):
        load_predictions(short)
    extra = dict(small_records[0], query="an extra query of our own")
    long = _exp_layout(tmp_path, small_records, _with_model(small_records + [extra], values + ["safe"]),
                       "output_logits.json")
    with pytest.raises(DatasetError, match=r"record 8: the file has 9 records, the dataset .* has 8"):
        load_predictions(long)


def test_a_published_file_out_of_order_names_the_first_record_and_field(tmp_path, small_records):
    from casebench.loader import load_predictions

    swapped = [small_records[0], small_records[2], small_records[1], *small_records[3:]]
    f = _exp_layout(tmp_path, small_records, _with_model(swapped, ["safe"] * 8))
    with pytest.raises(DatasetError, match=r"record 1, field 'query': .* the dataset's record 2: the records are "
                                           r"not in the dataset's order"):
        load_predictions(f)
    edited = [dict(r) for r in small_records]
    edited[5]["category"] = "another category"
    f = _exp_layout(tmp_path, small_records, _with_model(edited, ["safe"] * 8))
    with pytest.raises(DatasetError, match=r"record 5, field 'category'"):
        load_predictions(f)


def test_an_explicit_dataset_is_the_reference_wherever_the_file_lies(tmp_path, small_records, small_data_path):
    from casebench.loader import load_predictions

    f = tmp_path / "output_binary.json"
    f.write_text(json.dumps(_with_model(small_records[1:], ["safe"] * 7)))
    assert load_predictions(f).n == 7  # nothing to check against: a subset export is a valid file
    with pytest.raises(DatasetError, match=r"record 0, field 'context': .*it is the dataset's record 1"):
        load_predictions(f, dataset=load_dataset(small_data_path))


def test_duplicated_records_in_a_published_file_are_refused(tmp_path, small_records):
    recs = _with_model(small_records + [small_records[2]], ["safe"] * 9)
    f = tmp_path / "output_binary.json"
    f.write_text(json.dumps(recs))
    with pytest.raises(DatasetError, match=r"record 2, field 'query\+context': duplicated by record\(s\) 8"):
        load_published(f)


def test_mode_and_remove_name_what_a_file_holds_when_its_name_does_not(tmp_path, small_records):
    from casebench.data import ablate_context

    f = tmp_path / "output_binary_mine.json"
    f.write_text(json.dumps(_with_model(small_records, ["safe", "unsafe"] * 4)))
    assert load_published(f).mode.name == "binary"  # the name says binary; "mine" is a label, not an ablation
    t = tmp_path / "output_binary_sendr.json"
    t.write_text(f.read_text())
    with pytest.raises(DatasetError, match=r"unknown ablation.*name it with --mode \(and --remove\)"):
        load_published(t)
    p = load_published(f, mode="binary")
    assert p.mode.name == "binary" and p.removed == () and p.n == 8
    with pytest.raises(DatasetError, match="the file name says mode 'binary' but --mode says 'score'"):
        load_published(f, mode="score")
    ablated = [dict(r, context=ablate_context(r["context"], ("sender",))) for r in small_records]
    g = tmp_path / "mine.json"
    g.write_text(json.dumps(_with_model(ablated, [0.2, 0.9] * 4)))
    with pytest.raises(DatasetError, match="sender"):  # without --remove, the absent sender is an error
        load_published(g)
    p = load_published(g, mode="prob", removed=["sender"])
    assert p.mode.name == "prob" and p.removed == ("sender",)
    # a name that says its removal keeps it (--remove is for names that do not say)
    h = tmp_path / "output_logits_sender.json"
    h.write_text(g.read_text())
    assert load_published(h, removed=["urgency"]).removed == ("sender",)


def test_files_checked_against_one_dataset_hold_its_contexts_and_fingerprint_as_alone(tmp_path, small_records,
                                                                                      small_data_path):
    """Files checked record for record against a dataset hold the dataset's context objects (so a
    scoring session dumps each context once for every file's fingerprint), and the fingerprint is
    what the plain JSON of each case gives, in a session or not, with or without removals."""
    import hashlib

    from casebench.data import cases_fingerprint
    from casebench.session import scoring_session

    ds = load_dataset(small_data_path)
    files = []
    for k in range(2):
        f = tmp_path / f"safety_m{k}" / "output_binary.json"
        f.parent.mkdir()
        f.write_text(json.dumps(_with_model(small_records, ["safe", "unsafe"] * 4)))
        files.append(f)

    def plain(cases, ignore=()):
        from casebench.data import ablate_context

        h = hashlib.sha256()
        for c in cases:
            ctx = ablate_context(c.context, ignore) if ignore else c.context
            h.update(json.dumps([c.query, ctx, c.category, c.intended_safe, round(c.safe_rate, 12)],
                                sort_keys=True, ensure_ascii=False).encode("utf-8") + b"\n")
        return h.hexdigest()

    with scoring_session():
        a, b = (load_published(f, reference=ds) for f in files)
        assert all(x.context is y.context is z.context for x, y, z in zip(a.cases, b.cases, ds.cases))
        for ignore in ((), ("urgency",), ("sender", "urgency")):
            fps = {cases_fingerprint(a.cases, ignore), cases_fingerprint(b.cases, ignore), a.fingerprint(ignore)}
            assert fps == {plain(a.cases, ignore)}
    assert cases_fingerprint(a.cases, ("urgency",)) == plain(a.cases, ("urgency",))  # outside a session too


def test_a_file_both_duplicated_and_unlike_its_dataset_names_its_duplicates_first(tmp_path, small_records,
                                                                                  small_data_path):
    """Against a dataset without duplicates a file's own duplicate check runs only when the record
    check fails: a file with both problems is refused for its duplicates, as without a dataset."""
    recs = _with_model(small_records[:7] + [small_records[2]], ["safe"] * 8)
    f = tmp_path / "output_binary.json"
    f.write_text(json.dumps(recs))
    with pytest.raises(DatasetError, match=r"record 2, field 'query\+context': duplicated by record\(s\) 7"):
        load_published(f, reference=load_dataset(small_data_path))
