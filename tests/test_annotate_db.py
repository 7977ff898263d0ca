"""The vote database (``casebench.annotate.db``) and the export, on SQLite and a real PostgreSQL.

No web server here: assignment rules, the refusals (each leaving the database unchanged), schema
versioning, and the export's round trip through ``load_dataset`` and ``casebench human``/``run``.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

pytest.importorskip("sqlalchemy", reason="the web extra is not installed: pip install 'casebench[web]'")

from servers.annotate_server import write_dataset  # noqa: E402

from casebench.annotate.db import (  # noqa: E402
    SCHEMA_VERSION, Finished, Settings, Shown, StoreError, VoteOutcome, VoteStore, valid_annotator_id,
)
from casebench.annotate.export import build_export, export_votes, safe_rate  # noqa: E402
from casebench.cli import cli  # noqa: E402
from casebench.data import load_dataset  # noqa: E402


def records_of(path: Path) -> list[dict]:
    out = []
    for c in load_dataset(path):
        rec = c.to_record()
        rec.pop("scores"), rec.pop("safe_rate")
        out.append(rec)
    return out


def open_store(url: str, data: Path, **settings) -> VoteStore:
    store = VoteStore.open(url, Settings(**{"votes_per_case": 2, **settings}))
    store.load_cases(records_of(data), dataset_path=str(data))
    return store


def vote_next(store: VoteStore, annotator: str, vote: int = 1) -> int | None:
    got = store.next_case(annotator)
    if isinstance(got, Finished):
        return None
    assert store.record_vote(annotator, got.case_id, vote) is VoteOutcome.RECORDED
    return got.case_id


def test_schema_is_created_versioned_and_checked(db_url, tmp_path):
    data = write_dataset(tmp_path / "d.json", 4)
    store = open_store(db_url, data)
    assert store.schema_version() == SCHEMA_VERSION
    store.close()
    # reopening keeps the study and its votes; the same data is accepted
    store = open_store(db_url, data)
    vote_next(store, "a1")
    assert store.load_cases(records_of(data)) is False
    # other data is refused, naming what the database holds
    other = write_dataset(tmp_path / "other.json", 5)
    with pytest.raises(StoreError, match="another dataset"):
        store.load_cases(records_of(other))
    # a schema from a newer casebench is refused
    store.set_meta({"schema_version": str(SCHEMA_VERSION + 1)})
    store.close()
    with pytest.raises(StoreError, match="newer than this casebench"):
        VoteStore.open(db_url, Settings(votes_per_case=2))
    # export refuses a database that holds no votes table at all
    if db_url.startswith("sqlite"):
        empty = f"sqlite:///{tmp_path / 'empty.db'}"
        with pytest.raises(StoreError, match="no casebench votes"):
            VoteStore.open(empty, create=False)


def test_assignment_fewest_votes_first_once_per_annotator_n_per_case(db_url, tmp_path):
    data = write_dataset(tmp_path / "d.json", 5)
    store = open_store(db_url, data, votes_per_case=2)
    seen: dict[str, list[int]] = {}
    for a in ("ann1", "ann2", "ann3"):
        seen[a] = []
        while (cid := vote_next(store, a)) is not None:
            seen[a].append(cid)
    # every case got exactly 2 votes, never twice from one annotator, and ann3 got what was left
    summary = store.admin_summary()
    assert [c["votes"] for c in summary["case_rows"]] == [2] * 5
    for a, ids in seen.items():
        assert len(ids) == len(set(ids)), a
    assert len(seen["ann1"]) == 5 and len(seen["ann2"]) == 5 and seen["ann3"] == []
    # fewest votes first: while ann1 works, each new case is one nobody has voted on
    store2 = open_store(db_url.replace("votes.db", "votes2.db"), data, votes_per_case=3) \
        if db_url.startswith("sqlite") else None
    if store2 is not None:
        first = [vote_next(store2, "x")]
        second = store2.next_case("y")
        assert isinstance(second, Shown) and second.case_id != first[0]  # 0 votes beats 1 vote
        store2.close()
    store.close()


def test_refusals_write_nothing(db_url, tmp_path):
    data = write_dataset(tmp_path / "d.json", 3)
    store = open_store(db_url, data, votes_per_case=1)
    got = store.next_case("a1")
    assert isinstance(got, Shown) and got.done == 0 and got.total == 3
    # reloading shows the same case
    assert store.next_case("a1").case_id == got.case_id
    before = store.admin_summary()["votes"]
    assert store.record_vote("a1", 999, 1) is VoteOutcome.UNKNOWN_CASE
    other = (got.case_id + 1) % 3
    assert store.record_vote("a1", other, 1) is VoteOutcome.NOT_ASSIGNED
    assert store.record_vote("nobody", got.case_id, 1) is VoteOutcome.NOT_ASSIGNED
    assert store.admin_summary()["votes"] == before
    assert store.record_vote("a1", got.case_id, 2) is VoteOutcome.RECORDED
    # the same vote again (reload of the POST, back button, double click): nothing new
    assert store.record_vote("a1", got.case_id, 2) is VoteOutcome.REPEATED
    assert store.record_vote("a1", got.case_id, 1) is VoteOutcome.CONFLICT
    # a2 was shown a case, a1 fills it meanwhile (the reservation lapsed): a2's vote is refused
    store.settings = Settings(votes_per_case=1, reserve_seconds=0.0)
    g2 = store.next_case("a2")
    g1 = store.next_case("a1")
    assert g1.case_id == g2.case_id  # lapsed reservation: both hold the same case
    assert store.record_vote("a1", g1.case_id, 1) is VoteOutcome.RECORDED
    n = store.admin_summary()["votes"]
    assert store.record_vote("a2", g2.case_id, 1) is VoteOutcome.FINISHED
    assert store.admin_summary()["votes"] == n
    rows = {c["id"]: c["votes"] for c in store.admin_summary()["case_rows"]}
    assert max(rows.values()) == 1
    with pytest.raises(ValueError):
        store.record_vote("a1", 0, 3)  # partial: only in an answer-labelling study
    store.close()


def test_reservations_keep_two_annotators_off_the_last_slot(db_url, tmp_path):
    data = write_dataset(tmp_path / "d.json", 2)
    store = open_store(db_url, data, votes_per_case=1)
    a, b = store.next_case("a"), store.next_case("b")
    assert isinstance(a, Shown) and isinstance(b, Shown) and a.case_id != b.case_id
    assert isinstance(store.next_case("c"), Finished)  # both cases are held
    store.close()


def test_one_context_per_query_and_cases_per_annotator(db_url, tmp_path):
    data = write_dataset(tmp_path / "d.json", 6, pairs=True)  # 3 queries x 2 contexts
    store = open_store(db_url, data, votes_per_case=5, one_context_per_query=True)
    ids = []
    while (cid := vote_next(store, "solo")) is not None:
        ids.append(cid)
    assert len(ids) == 3 and len({i // 2 for i in ids}) == 3
    store.settings = Settings(votes_per_case=5, cases_per_annotator=2)
    assert vote_next(store, "capped") is not None and vote_next(store, "capped") is not None
    done = store.next_case("capped")
    assert isinstance(done, Finished) and done.done == 2
    store.close()


def test_attention_checks_are_scheduled_and_flagged(db_url, tmp_path):
    data = write_dataset(tmp_path / "d.json", 4)
    recs = records_of(data)
    check = {"query": "Attention check: please press Unsafe.", "context": recs[0]["context"]}
    store = VoteStore.open(db_url, Settings(votes_per_case=2, attention_every=2))
    store.load_cases(recs, attention=[(check, 2)])
    kinds = {}
    for a, answer in (("good", 2), ("careless", 1)):
        kinds[a] = []
        while True:
            got = store.next_case(a)
            if isinstance(got, Finished):
                break
            kinds[a].append(got.kind)
            vote = answer if got.kind == "attention" else 1
            assert store.record_vote(a, got.case_id, vote) is VoteOutcome.RECORDED
    assert kinds["good"] == ["case", "case", "attention", "case", "case"]
    records, side = build_export(store.export_data())
    flags = {x["id"]: x["flagged"] for x in side["annotators"]}
    assert flags == {"good": False, "careless": True}
    assert len(records) == 4 and all(len(r["scores"]) == 2 for r in records)
    records_x, side_x = build_export(store.export_data(), exclude_flagged=True)
    assert all(len(r["scores"]) == 1 for r in records_x)
    store.close()


def test_concurrent_votes_never_duplicate_or_overfill(db_url, tmp_path):
    """16 threads race on 10 cases of 3 votes, some resubmitting: exactly 30 votes, 3 per case."""
    data = write_dataset(tmp_path / "d.json", 10)
    store = open_store(db_url, data, votes_per_case=3)
    results: list[VoteOutcome] = []
    lock = threading.Lock()

    def annotator(name: str) -> None:
        while True:
            got = store.next_case(name)
            if isinstance(got, Finished):
                return
            for _ in range(2):  # every vote sent twice, as a double click would
                out = store.record_vote(name, got.case_id, 1)
                with lock:
                    results.append(out)

    threads = [threading.Thread(target=annotator, args=(f"t{i}",)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    summary = store.admin_summary()
    assert [c["votes"] for c in summary["case_rows"]] == [3] * 10
    assert results.count(VoteOutcome.RECORDED) == 30
    assert results.count(VoteOutcome.REPEATED) == 30
    store.close()


def test_export_round_trip_and_safe_rate_rules(db_url, tmp_path, fault_server):
    data = write_dataset(tmp_path / "d.json", 4)
    original = json.loads(data.read_text())
    original[1]["source_note"] = "kept"  # an extra field of the original survives the export
    data.write_text(json.dumps(original))
    store = open_store(db_url, data, votes_per_case=3)
    for a, v in (("p1", 1), ("p2", 2), ("p3", 1)):
        while vote_next(store, a, v) is not None:
            pass
    out = tmp_path / "out.json"
    doc = export_votes(store, out)
    store.close()
    exported = json.loads(out.read_text())
    for rec, orig in zip(exported, original):
        assert rec["scores"] == [1, 2, 1]
        assert rec["safe_rate"] == pytest.approx((2 + orig["context_intended_to_be_safe"]) / 4)
        for k in ("query", "context", "category", "context_intended_to_be_safe"):
            assert rec[k] == orig[k]
    assert exported[1]["source_note"] == "kept"
    assert Path(doc["side_file"]).is_file() and doc["safe_rate_rule"] == "with-intent"
    ds = load_dataset(out)
    assert len(ds) == 4 and all(len(c.votes) == 3 for c in ds)

    # the CLI: votes-only rule, then the file works with `human` and `run --data` unchanged
    r = CliRunner().invoke(cli, ["annotate", "export", "--db", db_url, "-o", str(tmp_path / "v.json"),
                                 "--safe-rate", "votes-only"])
    assert r.exit_code == 0, r.output
    assert all(x["safe_rate"] == pytest.approx(2 / 3) for x in json.loads((tmp_path / "v.json").read_text()))
    r = CliRunner().invoke(cli, ["human", str(out), "--json", "--draws", "20"])
    assert r.exit_code == 0, r.output
    stats = json.loads(r.output[r.output.index("{"):])
    assert stats["dataset"]["cases"] == 4
    r = CliRunner().invoke(cli, ["run", "--model", "openai/x", "--mode", "binary", "--data", str(out),
                                 "--base-url", fault_server.base_url, "-o", str(tmp_path / "run"), "--no-progress"])
    assert r.exit_code == 0, r.output
    assert fault_server.count == 4


def test_safe_rate_rules_and_ids():
    assert safe_rate([1, 2, 2], True, "with-intent") == pytest.approx(0.5)
    assert safe_rate([1, 2, 2], False, "with-intent") == pytest.approx(0.25)
    assert safe_rate([1, 2, 2], True, "votes-only") == pytest.approx(1 / 3)
    with pytest.raises(ValueError):
        safe_rate([], True, "votes-only")
    assert valid_annotator_id("5f2a9c0e1b3d4a6f7e8c9d0a") and valid_annotator_id("a.b_c-d")
    for bad in ("", "x" * 65, "a b", "a/b", "<script>", "é"):
        assert not valid_annotator_id(bad)
