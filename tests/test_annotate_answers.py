"""People label a respond run's answers (``casebench annotate answers``), the labels are exported
into the run, and ``refusal-eval`` and the run's scores (its reader validation and corrected
refusal rates) use them (issue 26, item 6): over HTTP against the real server, and in headless
Chromium."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette", reason="the web extra is not installed: pip install 'casebench[web]'")

from casebench.annotate.answers import AnswerItem, stratified_sample  # noqa: E402
from servers.annotate_server import AnnotateServer  # noqa: E402
from servers.fault_server import FaultServer  # noqa: E402
from test_respond import ANSWER, REFUSAL, case_of, invoke, respond_args  # noqa: E402
from test_annotate_browser import browser  # noqa: E402,F401  (the headless Chromium fixture)
from test_runs import write_dataset  # noqa: E402

def bot(body: Any) -> str:
    """The fixture run's chatbot: cases 0-5 answer, 6-8 refuse."""
    c = case_of(body["messages"][-1]["content"])
    return REFUSAL if c >= 6 else ANSWER


def people_label(record: dict[str, Any]) -> str:
    """How the fixture's people label an answer: what it does, with one disagreement with the
    reader (case 1, an answer people call partial)."""
    if record["case"] == 1:
        return "partial"
    return "refuse" if record["answer"] == REFUSAL else "comply"


@pytest.fixture
def respond_run(tmp_path: Path) -> Path:
    data = write_dataset(tmp_path / "cases.json", 9)
    out = tmp_path / "run"
    with FaultServer(answer_fn=bot, latency=0.0) as srv:
        r = _in_thread(invoke, *respond_args(srv, data, out))
        assert r.exit_code == 0, r.output
    return out


def _in_thread(fn: Any, *args: Any) -> Any:
    """Run a CLI call in a thread of its own: Playwright's sync API keeps an event loop running in
    the test's thread, and a command that runs its own loop cannot start there."""
    import threading

    box: list[Any] = []
    t = threading.Thread(target=lambda: box.append(fn(*args)))
    t.start()
    t.join()
    return box[0]


def test_stratified_sample_is_proportional_and_seeded() -> None:
    items = [AnswerItem(case=i, sample=0, query="q", answer="a", reader=r, intended_safe=i % 2 == 0)
             for i, r in enumerate(["comply"] * 60 + ["refuse"] * 30 + ["partial"] * 10)]
    got = stratified_sample(items, 20, seed=3)
    assert len(got) == 20 and got == stratified_sample(items, 20, seed=3)
    by = {b: sum(1 for it in got if it.reader == b) for b in ("comply", "refuse", "partial")}
    assert by == {"comply": 12, "refuse": 6, "partial": 2}
    assert got != stratified_sample(items, 20, seed=4)
    assert stratified_sample(items, 500) == items


def _export_and_check(run: Path, db: str, labelled: dict[int, str]) -> None:
    """Export into the run; refusal-eval reads the file; the run's scores use the labels."""
    r = _in_thread(invoke, "annotate", "export", "--db", db, "--answers", run)
    assert r.exit_code == 0, r.output
    path = run / "reader_labels.csv"
    rows = list(csv.DictReader(path.open(encoding="utf-8")))
    assert len(rows) == len(labelled)
    names = {"1_full_compliance": "comply", "2_full_refusal": "refuse", "3_partial_refusal": "partial"}
    assert {int(r["case"]): names[r["final_label"]] for r in rows} == labelled
    # refusal-eval reads the exported labels (our classifier re-reads the answers)
    ev = json.loads(_in_thread(invoke, "refusal-eval", path, "--json").output)
    assert ev["n"] == len(labelled)
    assert ev["human_counts"]["partial"] == sum(1 for v in labelled.values() if v == "partial")
    # the run's scores: the labels measure the run's refusals (people's labels, said so) and test
    # the stored validation, which is still the one transported (the labels no longer replace it)
    s = json.loads(_in_thread(invoke, "score", run, "--json", "--bootstrap", "0").output)
    v = s["classifier"]["validation"]
    assert "own_run" not in v
    block = s["people_labels"]
    assert block["labelled_by"] == "people" and block["n"] == len(labelled)
    assert {r["labelled_by"] for r in rows} == {"people"} and all(float(r["weight"]) >= 1 for r in rows)
    recorded = {int(r["case"]): r["reader"] for r in rows}
    t = block["transport"]
    assert t["refusals_labelled"] == sum(1 for lab in labelled.values() if lab != "comply")
    assert t["sensitivity_labels"] == pytest.approx(
        sum(1 for c, lab in labelled.items() if lab != "comply" and recorded[c] != "comply") / t["refusals_labelled"])
    # too few labels for a figure: none, and the note says why
    assert s["refusal_rate_people"] is None and s["ci"]["refusal_rate_people"] is None
    assert any("fewer than 10" in n for n in block["notes"])
    text = _in_thread(invoke, "score", run, "--bootstrap", "0").output
    assert f"from people's labels of {len(labelled)} of its answers" in text


#: the buttons of the four outcomes, by accessible name
BUTTONS = {"comply": "Full compliance", "partial": "Partial compliance", "clarify": "Clarifying question",
           "refuse": "Full refusal"}


def test_answer_study_over_http(respond_run: Path, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'labels.db'}"
    labelled: dict[int, str] = {}
    with AnnotateServer(respond_run, db, "--sample", "6", command="answers") as srv:
        assert any("6 of 9 answers" in line for line in srv.banner)
        status, _, body = srv.get("/case?annotator=p1")
        assert status == 200 and all(w in body for w in BUTTONS.values())
        assert srv.vote("p1", srv.shown_case("p1"), "safe")[0] == 400  # not a label of this study
        while (case_id := srv.shown_case("p1")) is not None:
            record = _record_of(srv, case_id)
            label = people_label(record)
            assert srv.vote("p1", case_id, label)[0] == 303
            labelled[record["case"]] = label
        # the pages speak of the answers they show (issue 37), not of cases
        status, _, body = srv.get("/case?annotator=p1")
        assert status == 200 and "You labelled 6 answers" in body, body
        assert "case" not in body.lower().replace("/case", ""), body
        status, _, body = srv.vote("p1", 10**6, "comply")
        assert status == 404 and "There is no such answer." in body
        status, _, body = srv.get("/case?annotator=p9")  # someone new: the study is full
        assert "Every answer already has all the labels it needs" in body and " case" not in body
    assert len(labelled) == 6
    _export_and_check(respond_run, db, labelled)


def _record_of(srv: AnnotateServer, case_id: int) -> dict[str, Any]:
    """The stored record of a served answer (read from the database the server writes)."""
    from sqlalchemy import create_engine, text

    eng = create_engine(srv.db)
    try:
        with eng.connect() as conn:
            return json.loads(conn.execute(text("SELECT record FROM cases WHERE id = :i"), {"i": case_id}).scalar_one())
    finally:
        eng.dispose()


def test_answer_study_in_chromium(browser, db_url: str, respond_run: Path) -> None:
    """Two people label a sample of the run's answers in the browser (instructions, the answer
    shown as text, the Comply / Partial / Refuse buttons by accessible name, a reload that never
    labels twice); the majority is exported and read by refusal-eval and the run's scores."""
    labelled: dict[int, str] = {}
    with AnnotateServer(respond_run, db_url, "--sample", "5", "--labels-per-answer", "2", command="answers") as srv:
        for person in ("p1", "p2"):
            ctx = browser.new_context()
            page = ctx.new_page()
            problems: list[str] = []
            page.on("pageerror", lambda e: problems.append(str(e)))
            page.goto(f"{srv.base}/?annotator={person}")
            assert page.get_by_text("Partial").first.is_visible()
            page.get_by_role("link", name="Start").click()
            seen = 0
            while page.locator("input[name=case]").count():
                case_id = int(page.locator("input[name=case]").get_attribute("value"))
                record = _record_of(srv, case_id)
                assert page.locator("#answer").inner_text().strip() == record["answer"].strip()
                assert page.locator("#progress").inner_text().startswith("Answer ")
                label = people_label(record)
                page.get_by_role("button", name=BUTTONS[label], exact=True).click()
                page.wait_for_load_state()
                if seen == 0:
                    page.reload()  # a reload shows the next answer, it never labels again
                labelled[record["case"]] = label
                seen += 1
            assert seen == 5 and "completion code" in page.content().lower() and not problems
            ctx.close()
        summary = srv.admin()
        assert summary["votes"] == 10
    _export_and_check(respond_run, db_url, labelled)


def test_schema_1_is_migrated_to_admit_partial(db_url: str) -> None:
    """A database made by schema version 1 (votes 1 or 2 only) is upgraded on opening: its votes
    are kept and a partial label (3) is admitted."""
    from sqlalchemy import text

    from casebench.annotate.db import SCHEMA_VERSION, Settings, VoteStore

    store = VoteStore.open(db_url, Settings(votes_per_case=1))
    store.load_cases([{"query": "q one"}, {"query": "q two"}], study="answers")
    with store.engine.begin() as conn:  # turn it back into a version-1 database
        if store.sqlite:
            conn.execute(text("DROP TABLE votes"))
            conn.execute(text(
                "CREATE TABLE votes (id INTEGER PRIMARY KEY AUTOINCREMENT, case_id INTEGER NOT NULL REFERENCES "
                "cases (id), annotator_id VARCHAR(64) NOT NULL REFERENCES annotators (id), vote SMALLINT NOT NULL, "
                "shown_at FLOAT NOT NULL, voted_at FLOAT NOT NULL, CONSTRAINT uq_votes_case_annotator UNIQUE "
                "(case_id, annotator_id), CONSTRAINT ck_votes_vote CHECK (vote IN (1, 2)))"))
            conn.execute(text("CREATE INDEX ix_votes_annotator ON votes (annotator_id)"))
        else:
            conn.execute(text("ALTER TABLE votes DROP CONSTRAINT ck_votes_vote"))
            conn.execute(text("ALTER TABLE votes ADD CONSTRAINT ck_votes_vote CHECK (vote IN (1, 2))"))
        conn.execute(text("UPDATE casebench_meta SET value = '1' WHERE key = 'schema_version'"))
        conn.execute(text("INSERT INTO annotators (id, first_seen, last_seen) VALUES ('p1', 0, 0)"))
        conn.execute(text("INSERT INTO votes (case_id, annotator_id, vote, shown_at, voted_at) VALUES (0, 'p1', 2, 0, 1)"))
        with pytest.raises(Exception):
            with conn.begin_nested():
                conn.execute(text("INSERT INTO votes (case_id, annotator_id, vote, shown_at, voted_at) "
                                  "VALUES (1, 'p1', 3, 0, 1)"))
    store.close()
    store = VoteStore.open(db_url, Settings(votes_per_case=1))
    try:
        # migrated through version 2 (partial, 3) and 3 (traits) to 4 (a clarifying question, 4)
        assert store.schema_version() == SCHEMA_VERSION == 4 and store.study == "answers"
        with store.engine.begin() as conn:
            conn.execute(text("INSERT INTO votes (case_id, annotator_id, vote, shown_at, voted_at) "
                              "VALUES (1, 'p1', 3, 0, 1)"))
            conn.execute(text("INSERT INTO annotators (id, first_seen, last_seen) VALUES ('p2', 0, 0)"))
            conn.execute(text("INSERT INTO votes (case_id, annotator_id, vote, shown_at, voted_at) "
                              "VALUES (1, 'p2', 4, 0, 1)"))
            assert sorted(conn.execute(text("SELECT vote FROM votes")).scalars()) == [2, 3, 4]
    finally:
        store.close()


def test_a_reveal_runs_answers_are_sampled_by_turn_and_exported_apart(tmp_path: Path) -> None:
    """``annotate answers --turns``: every turn's answer of a reveal run can be served, stratified by
    turn; the export keeps the final answers' labels (what the run's figures use) apart from the
    earlier turns' (reader_turn_labels.csv, with the turn)."""
    from test_reveal import reply, run_args

    data = write_dataset(tmp_path / "cases.json", 4)
    run = tmp_path / "late"
    with FaultServer(answer_fn=reply, latency=0.0) as srv:
        r = _in_thread(invoke, *run_args(srv, data, run, "reveal-late"))
        assert r.exit_code == 0, r.output
    db = f"sqlite:///{tmp_path / 'labels.db'}"
    turns_seen: list[tuple[int, int]] = []
    with AnnotateServer(run, db, "--sample", "16", "--turns", command="answers") as srv:
        assert any("16 of 16 answers" in line for line in srv.banner), srv.banner
        while (case_id := srv.shown_case("p1")) is not None:
            record = _record_of(srv, case_id)
            turns_seen.append((record["case"], record["turn"]))
            assert record["turns"] == 4 and "turn " in record["stratum"]
            assert srv.vote("p1", case_id, "refuse" if record["answer"] == REFUSAL else "comply")[0] == 303
    assert sorted(turns_seen) == [(c, t) for c in range(4) for t in range(1, 5)]
    r = _in_thread(invoke, "annotate", "export", "--db", db, "--answers", run)
    assert r.exit_code == 0, r.output
    finals = list(csv.DictReader((run / "reader_labels.csv").open(encoding="utf-8")))
    earlier = list(csv.DictReader((run / "reader_turn_labels.csv").open(encoding="utf-8")))
    assert len(finals) == 4 and len(earlier) == 12
    assert sorted((int(e["case"]), int(e["turn"])) for e in earlier) == [(c, t) for c in range(4) for t in (1, 2, 3)]
    # the run's scores read the final answers' labels only
    s = json.loads(_in_thread(invoke, "score", run, "--json", "--bootstrap", "0").output.splitlines()[0])
    assert s["people_labels"]["n"] == 4 and len(s["by_turn"]) == 4
