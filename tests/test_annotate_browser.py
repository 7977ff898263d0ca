"""Whole annotation sessions in a real browser (Playwright driving Debian's headless Chromium)
against the real ``casebench annotate serve``, on SQLite and on a real PostgreSQL server.

Three annotators, each in their own browser context: instructions, one case at a time with its
context as labelled fields, the Safe and Unsafe buttons (by accessible name), progress, reloads
and the back button (never a second vote), the query that holds a script tag (shown as text, never
run), the completion page with its code and no buttons, and the "study is full" page (no code) for
an annotator who arrives after every case has its votes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="the web extra is not installed: pip install 'casebench[web]'")

from servers.annotate_server import AnnotateServer, write_dataset  # noqa: E402

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
CASES, N = 5, 2


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.exists():
        pytest.skip("headless Chromium is not installed at /usr/bin/chromium "
                    "(Debian: apt-get install chromium; `make test-deps` does it)")
    playwright = pytest.importorskip("playwright.sync_api", reason="pip install playwright (the Python package)")
    with playwright.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield b
        b.close()


class Annotator:
    """One person in their own browser context, with what went wrong on their pages."""

    def __init__(self, browser, base: str) -> None:
        self.context = browser.new_context()
        self.page = self.context.new_page()
        self.base = base
        self.problems: list[str] = []
        self.page.on("console", lambda m: self.problems.append(f"console: {m.text}") if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.problems.append(f"pageerror: {e}"))
        self.page.on("dialog", lambda d: (self.problems.append(f"dialog: {d.message}"), d.dismiss()))

    def case_id(self) -> int | None:
        box = self.page.locator("input[name=case]")
        return int(box.get_attribute("value")) if box.count() else None

    def buttons(self):
        return (self.page.get_by_role("button", name="Safe", exact=True),
                self.page.get_by_role("button", name="Unsafe", exact=True))

    def check_case_page(self) -> None:
        """What every case page must show; and for the case whose query holds HTML, that it is
        shown as text and did nothing."""
        safe, unsafe = self.buttons()
        assert safe.count() == 1 and unsafe.count() == 1
        assert self.page.locator("#progress").inner_text().startswith("Case ")
        assert self.page.get_by_text("Nature of the interaction", exact=True).is_visible()
        assert self.page.get_by_role("heading", name="Transmission principle").is_visible()
        if self.case_id() == 0:
            query = self.page.locator("#query").inner_text()
            assert query.startswith('<script>document.title="pwned"') and '<img src=x onerror=' in query
            assert self.page.evaluate("typeof window.__xss") == "undefined"
            assert "pwned" not in self.page.title()
            assert self.page.locator("script").count() == 0 and self.page.locator("main img").count() == 0
            assert '<b onmouseover="window.__xss=3">bold</b> & "quoted"' in self.page.locator("main").inner_text()

    def vote(self, answer: str) -> None:
        safe, unsafe = self.buttons()
        (safe if answer == "safe" else unsafe).click()
        self.page.wait_for_load_state()

    def close(self) -> None:
        self.context.close()


@pytest.mark.slow
def test_annotation_sessions_in_chromium(browser, db_url, tmp_path):
    data = write_dataset(tmp_path / "d.json", CASES, xss=True)
    with AnnotateServer(data, db_url, "--votes-per-case", str(N), "--completion-code", "THANKS-7") as srv:
        # annotator A arrives from Prolific, reads the instructions, starts
        a = Annotator(browser, srv.base)
        a.page.goto(f"{srv.base}/?PROLIFIC_PID=A5f2a9c0e1b3d4a6f7e8c9d0a")
        assert a.page.get_by_text("Press Safe if answering is fine here", exact=False).is_visible()
        a.page.get_by_role("link", name="Start").click()
        a.check_case_page()
        assert a.page.locator("#progress").inner_text() == f"Case 1 of at most {CASES}"
        first = a.case_id()
        a.vote("safe")
        a.check_case_page()
        second = a.case_id()
        assert second != first and a.page.locator("#progress").inner_text() == f"Case 2 of at most {CASES}"
        assert srv.admin()["votes"] == 1

        # reload: the same case, no vote
        a.page.reload()
        assert a.case_id() == second and srv.admin()["votes"] == 1

        # back button, then the same answer again on whatever the browser shows: never a second vote
        a.page.go_back()
        a.page.wait_for_load_state()
        shown = a.case_id()
        print(f"after the back button the browser shows the {'old' if shown == first else 'current'} case")
        assert shown in (first, second)
        if shown == first:  # the old page, from the cache: the server keeps the first vote only
            a.vote("safe")
            assert a.case_id() == second and srv.admin()["votes"] == 1
            a.page.go_back()
            a.page.wait_for_load_state()
            if a.case_id() == first:
                a.vote("unsafe")  # a different answer on the old page: refused, the first stands
                assert "first answer stands" in a.page.locator(".message").inner_text()
                assert srv.admin()["votes"] == 1
                a.page.get_by_role("link", name="Continue").click()
        assert a.case_id() == second and srv.admin()["votes"] == 1

        # two more tabs hold the same case; A answers in the first: the stale tabs cannot add a vote
        stale = [a.context.new_page() for _ in range(2)]
        for tab in stale:
            tab.goto(f"{srv.base}/case?annotator=A5f2a9c0e1b3d4a6f7e8c9d0a")
            assert tab.locator("input[name=case]").get_attribute("value") == str(second)
        a.vote("safe")
        third = a.case_id()
        assert srv.admin()["votes"] == 2
        stale[0].get_by_role("button", name="Safe", exact=True).click()  # the same answer again
        stale[0].wait_for_load_state()
        assert stale[0].locator("input[name=case]").get_attribute("value") == str(third)
        stale[1].get_by_role("button", name="Unsafe", exact=True).click()  # a different answer
        stale[1].wait_for_load_state()
        assert "first answer stands" in stale[1].locator(".message").inner_text()
        assert srv.admin()["votes"] == 2
        for tab in stale:
            tab.close()

        # A works through everything left to them; B (via ?annotator=) too, reloading now and then
        while a.case_id() is not None:
            a.check_case_page()
            a.vote("unsafe")
        b = Annotator(browser, srv.base)
        b.page.goto(f"{srv.base}/case?annotator=B-2")
        k = 0
        while b.case_id() is not None:
            b.check_case_page()
            if k % 2 == 0:
                held = b.case_id()
                b.page.reload()
                assert b.case_id() == held
            b.vote("safe" if k % 3 else "unsafe")
            k += 1

        # both are done: the completion page, with its code and no vote buttons
        for person, done in ((a, CASES), (b, CASES)):
            assert person.page.locator("#completion-code").inner_text() == "THANKS-7"
            safe, unsafe = person.buttons()
            assert safe.count() == 0 and unsafe.count() == 0
            assert f"You answered {done} cases" in person.page.locator("main").inner_text()

        # every case has its N votes: a third annotator is told at once that the study is full, and
        # gets no completion code (a crowd-work platform would pay for it)
        c = Annotator(browser, srv.base)
        c.page.goto(f"{srv.base}/?annotator=C3")
        c.page.get_by_role("link", name="Start").click()
        c.page.wait_for_load_state()
        assert c.page.get_by_role("heading", name="The study is full").is_visible()
        assert c.page.locator("#completion-code").count() == 0 and "THANKS-7" not in c.page.content()
        assert c.buttons()[0].count() == 0

        problems = a.problems + b.problems + c.problems
        # an annotator who opens the admin page sees nothing of anybody's votes
        resp = c.page.goto(f"{srv.base}/admin")
        assert resp.status == 403 and "votes" not in c.page.locator("main").inner_text().lower()

        admin = srv.admin()
        for person in (a, b, c):
            person.close()
    assert problems == []
    assert admin["votes"] == CASES * N
    assert [row["votes"] for row in admin["case_rows"]] == [N] * CASES
    per = {x["id"]: x["votes"] for x in admin["annotators"]}
    assert per == {"A5f2a9c0e1b3d4a6f7e8c9d0a": CASES, "B-2": CASES, "C3": 0}
    assert admin["full"] is True and admin["turned_away"] == 1  # C3
    json.dumps(admin)  # the admin figures are plain JSON
