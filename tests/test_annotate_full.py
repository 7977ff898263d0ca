"""A full study says so: an annotator who arrives after every case has its votes is shown a page
that says the study is full, with no completion code (a crowd-work platform would pay for the
code), and the admin page counts such arrivals. On SQLite and a real PostgreSQL server; the
database rules directly, the real ``casebench annotate serve`` over HTTP, and a real browser.
"""

from __future__ import annotations


import pytest

pytest.importorskip("starlette", reason="the web extra is not installed: pip install 'casebench[web]'")

from servers.annotate_server import AnnotateServer, case_page_id, write_dataset  # noqa: E402

from casebench.annotate.db import Finished, Settings, Shown, VoteOutcome, VoteStore  # noqa: E402
from test_annotate_browser import CHROMIUM, CHROMIUM_ARGS  # noqa: E402
from test_annotate_db import records_of  # noqa: E402

CODE = "PAID-FOR-WORK-9"


def fill(store: VoteStore, annotators: list[str]) -> None:
    """Each annotator votes until nothing is left for them."""
    for a in annotators:
        while isinstance(got := store.next_case(a), Shown):
            assert store.record_vote(a, got.case_id, 1) is VoteOutcome.RECORDED


def test_the_store_tells_a_full_study_from_a_busy_one(db_url, tmp_path):
    data = write_dataset(tmp_path / "d.json", 2)
    store = VoteStore.open(db_url, Settings(votes_per_case=1))
    store.load_cases(records_of(data), dataset_path=str(data))
    a, b = store.next_case("a"), store.next_case("b")
    assert isinstance(a, Shown) and isinstance(b, Shown)
    busy = store.next_case("c")  # both cases held on other screens: not full, they may come back
    assert busy == Finished(0, full=False)
    assert store.admin_summary()["full"] is False and store.admin_summary()["turned_away"] == 0
    assert store.record_vote("a", a.case_id, 1) is VoteOutcome.RECORDED
    assert store.record_vote("b", b.case_id, 2) is VoteOutcome.RECORDED
    assert store.next_case("a") == Finished(1, full=True)  # did work: owed the code
    assert store.next_case("late") == Finished(0, full=True)
    assert store.next_case("c") == Finished(0, full=True)  # came back after it filled: turned away too
    summary = store.admin_summary()
    assert summary["full"] is True and summary["turned_away"] == 2
    store.next_case("late")  # a reload is the same arrival
    assert store.admin_summary()["turned_away"] == 2
    store.close()


def test_a_late_annotator_gets_the_full_page_without_the_code_and_admin_counts_them(db_url, tmp_path):
    data = write_dataset(tmp_path / "d.json", 3)
    with AnnotateServer(data, db_url, "--votes-per-case", "1", "--completion-code", CODE) as srv:
        done = []
        while True:
            status, _, body = srv.get("/case?annotator=early")
            case = case_page_id(body)
            if case is None:
                break
            assert srv.vote("early", case, "safe")[0] == 303
            done.append(case)
        assert len(done) == 3 and CODE in body  # the annotator who did the work gets the code
        assert srv.admin()["full"] is True and srv.admin()["turned_away"] == 0
        for who in ("late1", "late2"):
            status, _, body = srv.get(f"/case?annotator={who}")
            assert status == 200 and "The study is full" in body
            assert CODE not in body and "completion code" in body and "<button" not in body
        srv.get("/case?PROLIFIC_PID=late1")  # the same person again
        admin = srv.admin()
        assert admin["turned_away"] == 2 and admin["votes"] == 3
        status, _, page = srv.get(f"/admin?token={srv.admin_token}")
        assert status == 200 and "The study is full: 2 annotators arrived after that" in page


@pytest.mark.slow
def test_the_full_page_in_chromium(tmp_path):
    if not CHROMIUM.exists():
        pytest.skip("headless Chromium is not installed at /usr/bin/chromium")
    playwright = pytest.importorskip("playwright.sync_api", reason="pip install playwright (the Python package)")
    data = write_dataset(tmp_path / "d.json", 1)
    with AnnotateServer(data, f"sqlite:///{tmp_path / 'v.db'}", "--votes-per-case", "1",
                        "--completion-code", CODE) as srv, playwright.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            first = browser.new_context().new_page()
            first.goto(f"{srv.base}/case?PROLIFIC_PID=first0001")
            first.get_by_role("button", name="Safe", exact=True).click()
            first.wait_for_load_state()
            assert first.locator("#completion-code").inner_text() == CODE
            late = browser.new_context().new_page()
            late.goto(f"{srv.base}/?PROLIFIC_PID=late0002")
            late.get_by_role("link", name="Start").click()
            late.wait_for_load_state()
            assert late.get_by_role("heading", name="The study is full").is_visible()
            assert CODE not in late.content() and late.locator("#completion-code").count() == 0
            assert late.get_by_role("button").count() == 0
        finally:
            browser.close()
        assert srv.admin()["turned_away"] == 1
