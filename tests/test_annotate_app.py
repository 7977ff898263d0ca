"""The annotation app over HTTP: the real ``casebench annotate serve`` process on loopback, with
SQLite and with a real PostgreSQL server (started by the ``postgres_server`` fixture).

Bad input gets 4xx and writes nothing; every user text is escaped; the admin page needs its
token; 50 concurrent annotators lose and duplicate nothing; the server outlives a PostgreSQL
restart and says so while the database is down; the export round-trips.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import pytest

pytest.importorskip("starlette", reason="the web extra is not installed: pip install 'casebench[web]'")

from servers.annotate_server import REPO, AnnotateServer, case_page_id, simulate_annotators, write_dataset  # noqa: E402

_n = itertools.count()


def casebench(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    e = {**os.environ, "PYTHONPATH": str(REPO / "src"), **(env or {})}
    return subprocess.run([sys.executable, "-c", "from casebench.cli import main; main()", *args],
                          capture_output=True, text=True, env=e, timeout=120)


def test_pages_escaping_and_refusals(db_url, tmp_path):
    data = write_dataset(tmp_path / "d.json", 3, xss=True)
    with AnnotateServer(data, db_url, "--votes-per-case", "1", "--completion-code", "C0DE-42") as srv:
        assert "votes per case: 1" in "".join(srv.banner)
        status, headers, body = srv.get("/?PROLIFIC_PID=5f2a9c0e1b3d4a6f7e8c9d0a")
        assert status == 200 and "Instructions" in body and "/case?annotator=5f2a9c0e1b3d4a6f7e8c9d0a" in body
        assert "script-src" not in headers["content-security-policy"]  # default-src 'none': no scripts at all
        assert "default-src 'none'" in headers["content-security-policy"]

        # the XSS case is escaped wherever it is shown (case 0 is the only one with votes 0... find it)
        seen = {}
        for a in ("a1", "a2", "a3"):
            status, headers, body = srv.get(f"/case?annotator={a}")
            assert status == 200 and headers["cache-control"] == "no-store"
            seen[a] = (case_page_id(body), body)
        assert len({c for c, _ in seen.values()}) == 3  # three annotators hold three different cases
        xss_body = next(b for c, b in seen.values() if c == 0)
        assert "<script>" not in xss_body and "&lt;script&gt;" in xss_body
        assert "<img src=x" not in xss_body and "&lt;img src=x onerror=" in xss_body
        assert "<b onmouseover" not in xss_body and "&amp; &#34;quoted&#34;" in xss_body
        assert '<dt>Nature of the interaction</dt>' in xss_body and '<h3>Transmission principle</h3>' in xss_body
        assert '<button type="submit" name="vote" value="safe" class="safe">Safe</button>' in xss_body

        before = srv.admin()["votes"]
        a1_case = seen["a1"][0]
        # bad ids, unknown cases, bad votes, somebody else's case: 4xx, nothing written
        for path in ("/case?annotator=" + "x" * 65, "/case?annotator=%3Cscript%3E", "/case?annotator=a%20b",
                     "/case?annotator=a1&PROLIFIC_PID=a2"):
            status, _, body = srv.get(path)
            assert status == 400, path
            assert "<script>" not in body
        assert srv.get("/case")[0] == 400
        assert srv.vote("a1", 999, "safe")[0] == 404
        assert srv.vote("a1", "x1", "safe")[0] == 400
        assert srv.vote("a1", a1_case, "maybe")[0] == 400
        assert srv.vote("<script>", a1_case, "safe")[0] == 400
        assert srv.vote("a1", seen["a2"][0], "safe")[0] == 409  # not the case a1 is shown
        assert srv.request("POST", "/vote", b"x" * 5000, {"Content-Type": "application/x-www-form-urlencoded"})[0] == 413
        assert srv.get("/nowhere")[0] == 404 and srv.request("DELETE", "/vote")[0] == 405
        assert srv.admin()["votes"] == before

        # a vote, then the same POST again (reload), then the other answer: one vote stands
        status, headers, _ = srv.vote("a1", a1_case, "safe")
        assert status == 303 and headers["location"] == "/case?annotator=a1"
        assert srv.vote("a1", a1_case, "safe")[0] == 303
        status, _, body = srv.vote("a1", a1_case, "unsafe")
        assert status == 409 and "first answer stands" in body
        assert srv.admin()["votes"] == before + 1
        # a finished case (N = 1): a2 may not vote on a1's case
        assert srv.vote("a2", a1_case, "safe")[0] == 409
        # a1 has nothing left (a2 and a3 hold the other two): the completion page, no buttons
        status, _, body = srv.get("/case?annotator=a1")
        assert status == 200 and "C0DE-42" in body and "<button" not in body
        # reloading the completion page changes nothing
        assert srv.get("/case?annotator=a1")[0] == 200 and srv.admin()["votes"] == before + 1

        # the admin page: token required; annotators have no way in
        assert srv.get("/admin")[0] == 403
        assert srv.get("/admin?token=wrong")[0] == 403
        assert srv.get("/admin?annotator=a1")[0] == 403
        status, _, body = srv.request("GET", "/admin", headers={"Authorization": f"Bearer {srv.admin_token}"})
        assert status == 200 and "Time per vote" in body and "&lt;script&gt;" in body
        admin = srv.admin()
        assert {a["id"] for a in admin["annotators"]} == {"a1", "a2", "a3"}
        assert admin["time_per_vote"]["median_seconds"] is not None


def test_restart_resumes_and_refuses_other_data(tmp_path):
    data = write_dataset(tmp_path / "d.json", 4)
    db = f"sqlite:///{tmp_path / 'v.db'}"
    with AnnotateServer(data, db) as srv:
        # the default votes per case: the power analysis for the paper's effect size, printed
        from casebench.annotate import PAPER_SAFE_SHARE
        from casebench.stats.human import power_analysis

        n = power_analysis(*PAPER_SAFE_SHARE)["n"]  # the shares unrounded: 25, as `casebench human` says
        banner = "".join(srv.banner)
        assert f"votes per case: {n} (80% power" in banner and "--p1 0.6308 --p2 0.2453" in banner
    with AnnotateServer(data, db, "--votes-per-case", "2") as srv:
        assert f"changed from {n} to 2" in "".join(srv.banner)
        case = srv.shown_case("r1")
        assert srv.vote("r1", case, "unsafe")[0] == 303
        code = srv.completion_code
    with AnnotateServer(data, db, "--votes-per-case", "3") as srv:
        banner = "".join(srv.banner)
        assert "resuming: 1 votes so far" in banner and "changed from 2 to 3" in banner
        assert srv.completion_code == code  # kept in the database
        assert srv.admin()["votes"] == 1
    other = write_dataset(tmp_path / "other.json", 5)
    r = casebench("annotate", "serve", str(other), "--db", db, "--port", "0")
    assert r.returncode == 2 and "another dataset" in r.stderr


def test_cli_errors_exit_2(tmp_path):
    data = write_dataset(tmp_path / "d.json", 2)
    r = casebench("annotate", "serve", str(tmp_path / "missing.json"), "--port", "0")
    assert r.returncode == 2 and "missing.json" in r.stderr
    r = casebench("annotate", "serve", str(data), "--db", "mysql://x@y/z", "--port", "0")
    assert r.returncode == 2 and "unsupported database" in r.stderr
    r = casebench("annotate", "serve", str(data), "--db", "postgresql://u:secretpw@127.0.0.1:1/x", "--port", "0")
    assert r.returncode == 2 and "cannot open the database" in r.stderr and "secretpw" not in r.stderr
    r = casebench("annotate", "export", "--db", f"sqlite:///{tmp_path / 'none.db'}", "-o", str(tmp_path / "o.json"))
    assert r.returncode == 2 and "no such database file" in r.stderr
    bad_checks = tmp_path / "checks.json"
    bad_checks.write_text(json.dumps([{"query": "Press Safe.", "context": {}, "expected": "maybe"}]))
    r = casebench("annotate", "serve", str(data), "--db", f"sqlite:///{tmp_path / 'v.db'}", "--port", "0",
                  "--attention-checks", str(bad_checks))
    assert r.returncode == 2 and "record 0" in r.stderr and "expected" in r.stderr
    # the web extra missing: the message names it, exit 2, no traceback
    blocker = tmp_path / "block"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(
        "import sys\nclass _B:\n    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('starlette', 'uvicorn'):\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, _B())\n")
    r = casebench("annotate", "serve", str(data), "--port", "0",
                  env={"PYTHONPATH": f"{blocker}{os.pathsep}{REPO / 'src'}"})
    assert r.returncode == 2 and "pip install 'casebench[web]'" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.slow
def test_fifty_annotators_lose_and_duplicate_nothing(db_url, tmp_path):
    """50 concurrent annotators (threads, own connections) cast 1,000 votes (the bench casts
    5,000): every vote the clients saw recorded is in the database, none twice, N per case."""
    data = write_dataset(tmp_path / "d.json", 100)
    with AnnotateServer(data, db_url, "--votes-per-case", "10") as srv:
        r = simulate_annotators(srv, 50)
        admin = srv.admin()
    assert r["errors"] == 0, r["errors_seen"]
    assert r["completed"] == 50 and r["recorded"] == 1000 and r["resubmitted_ok"] > 0
    assert admin["votes"] == 1000
    assert all(c["votes"] == 10 for c in admin["case_rows"])
    out = tmp_path / "out.json"
    e = casebench("annotate", "export", "--db", db_url, "-o", str(out))
    assert e.returncode == 0, e.stderr
    side = json.loads(out.with_name("out.annotations.json").read_text())
    pairs = [(v["source_position"], v["annotator"]) for v in side["votes"]]
    assert len(pairs) == len(set(pairs)) == 1000
    assert all(len(rec["scores"]) == 10 for rec in json.loads(out.read_text()))


def test_postgres_restart_and_outage(postgres_server, tmp_path):
    """The server outlives a PostgreSQL restart; while the database is down a vote gets a 503
    page saying it was not recorded, and the same vote goes in once the database is back."""
    db = postgres_server.create_database(f"restart{next(_n)}")
    data = write_dataset(tmp_path / "d.json", 6)
    with AnnotateServer(data, db, "--votes-per-case", "1") as srv:
        c1 = srv.shown_case("p1")
        assert srv.vote("p1", c1, "safe")[0] == 303
        postgres_server.restart()
        c2 = srv.shown_case("p1")  # the pool reconnects (pre-ping)
        assert srv.vote("p1", c2, "unsafe")[0] == 303
        c3 = srv.shown_case("p1")
        postgres_server.stop()
        try:
            status, _, body = srv.vote("p1", c3, "safe")
            assert status == 503 and "nothing was recorded" in body
            assert srv.get("/healthz")[0] == 503
            assert srv.get("/case?annotator=p1")[0] == 503
        finally:
            postgres_server.start()
        assert srv.get("/healthz")[0] == 200
        assert srv.shown_case("p1") == c3
        assert srv.vote("p1", c3, "safe")[0] == 303
        admin = srv.admin()
        err = srv.stop()
    assert admin["votes"] == 3
    assert "database unavailable" in err


def test_context_fields_are_labelled_words_not_json():
    from casebench.annotate.app import context_fields

    ctx = {"recipient": {"background": "A chemistry teacher.", "type": "Teacher"},
           "sender": {"platform_type": {"type": "forum", "description": "A moderated forum.",
                                        "rules": {"minimum_age": 18}},
                      "nature_of_the_interaction": "A question."},
           "notes": "Extra key."}
    groups = context_fields(ctx)
    assert [g["label"] for g in groups] == ["Sender", "Recipient", "Notes"]  # CI order first
    sender = groups[0]["fields"]
    assert [f["label"] for f in sender] == ["Nature of the interaction", "Platform type"]
    assert sender[1]["fields"] == [{"label": "Type", "value": "forum"},
                                   {"label": "Description", "value": "A moderated forum."},
                                   {"label": "Rules", "value": "Minimum age: 18"}]
    assert [f["label"] for f in groups[1]["fields"]] == ["Type", "Background"]


def test_export_cli_and_casebench_human(db_url, tmp_path):
    data = write_dataset(tmp_path / "d.json", 4, pairs=True)
    # a dataset not annotated yet (no scores, no safe_rate), as `contexts generate` writes it
    unvoted = [{k: v for k, v in r.items() if k not in ("scores", "safe_rate")} for r in json.loads(data.read_text())]
    data.write_text(json.dumps(unvoted))
    checks = tmp_path / "checks.json"
    base = json.loads(data.read_text())[0]
    checks.write_text(json.dumps([{"query": "Attention check: press Unsafe.", "context": base["context"],
                                   "expected": "unsafe"}]))
    with AnnotateServer(data, db_url, "--votes-per-case", "2", "--attention-checks", str(checks),
                        "--attention-every", "2") as srv:
        for a, answer in (("h1", "unsafe"), ("h2", "safe")):
            while (case := srv.shown_case(a)) is not None:
                vote = answer if case >= 4 else ("safe" if case % 2 == 0 else "unsafe")
                assert srv.vote(a, case, vote)[0] == 303
        admin = srv.admin()
    assert {a["id"]: a["attention_failed"] for a in admin["annotators"]} == {"h1": 0, "h2": 1}
    out = tmp_path / "mine.json"
    r = casebench("annotate", "export", "--db", db_url, "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert "1 annotators failed an attention check" in r.stderr
    recs = json.loads(out.read_text())
    assert [rec["scores"] for rec in recs] == [[1, 1], [2, 2], [1, 1], [2, 2]]
    assert recs[0]["safe_rate"] == pytest.approx(1.0) and recs[1]["safe_rate"] == pytest.approx(0.0)
    side = json.loads((tmp_path / "mine.annotations.json").read_text())
    assert [a["flagged"] for a in side["annotators"]] == [False, True]
    r = casebench("human", str(out), "--json", "--draws", "10")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["dataset"]["cases"] == 4
    r = casebench("annotate", "export", "--db", db_url, "-o", str(tmp_path / "x.json"), "--exclude-flagged")
    assert r.returncode == 0 and all(len(x["scores"]) == 1 for x in json.loads((tmp_path / "x.json").read_text()))


def test_ids_in_links_are_encoded(tmp_path):
    data = write_dataset(tmp_path / "d.json", 2)
    with AnnotateServer(data, f"sqlite:///{tmp_path / 'v.db'}", "--votes-per-case", "1") as srv:
        status, _, body = srv.get("/?annotator=" + quote("a.b-c_d"))
        assert status == 200 and "/case?annotator=a.b-c_d" in body
