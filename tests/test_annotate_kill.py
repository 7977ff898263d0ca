"""The annotation app killed mid-study (issue 27, item 6), on SQLite and on a real PostgreSQL
server: annotators vote at once while ``casebench annotate serve`` is killed with SIGKILL and
started again on the same port, three times. A vote whose POST got no answer (the server died
under it) is submitted again, as a browser's retry would. Then:

* no response was a 5xx;
* every acknowledged vote (a 303 to the next case) is in the export exactly once, with its value;
* nothing is in the export that was not acknowledged;
* every case holds exactly the votes it asks for.

A bounded loop on loopback: the kills happen after a number of acknowledged votes, not after a
time, and a deadline only stops a hung test.
"""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from urllib.parse import urlencode

import pytest

pytest.importorskip("uvicorn")
pytest.importorskip("sqlalchemy")

from servers.annotate_server import REPO, AnnotateServer, case_page_id, write_dataset  # noqa: E402

CASES, VOTES_PER_CASE, ANNOTATORS, KILLS = 24, 2, 6, 3
DEADLINE_S = 300  # a hang guard, not a timing assertion


class Study:
    """The annotators' side: who got which vote acknowledged, and every unexpected answer."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.lock = threading.Lock()
        self.acked: list[tuple[str, int, str]] = []
        self.server_errors: list[str] = []
        self.unexpected: list[str] = []
        self.in_doubt_resent = 0
        self.deadline = time.monotonic() + DEADLINE_S

    def request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, str]:
        """One request on a fresh connection; retried while the server is down (refused or cut
        off), so the caller sees only answers."""
        while True:
            if time.monotonic() > self.deadline:
                raise TimeoutError(f"{method} {path}: no answer before the test's deadline")
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
            try:
                headers = {"Content-Type": "application/x-www-form-urlencoded"} if body else {}
                conn.request(method, path, body=body, headers=headers)
                r = conn.getresponse()
                return r.status, r.read().decode("utf-8", "replace")
            except (OSError, http.client.HTTPException):
                if method == "POST":
                    with self.lock:
                        self.in_doubt_resent += 1  # the server died under it: send it again
                time.sleep(0.05)
            finally:
                conn.close()

    def annotator(self, name: str) -> None:
        while True:
            status, body = self.request("GET", "/case?" + urlencode({"annotator": name}))
            if status >= 500:
                self.server_errors.append(f"{name}: GET {status} {body[:200]}")
                time.sleep(0.05)
                continue
            if status != 200:
                self.unexpected.append(f"{name}: GET {status}")
                return
            case = case_page_id(body)
            if case is None:
                return  # the completion page
            vote = "safe" if (case + len(name)) % 2 else "unsafe"
            form = urlencode({"annotator": name, "case": case, "vote": vote}).encode()
            status, body = self.request("POST", "/vote", form)
            if status == 303:
                with self.lock:
                    self.acked.append((name, case, vote))
            elif status >= 500:
                self.server_errors.append(f"{name}: POST {status} {body[:200]}")
            elif status != 409:  # 409: the case filled up meanwhile; nothing stored
                self.unexpected.append(f"{name}: POST {status} {body[:200]}")


def export(db: str, out: Path) -> list[dict]:
    subprocess.run([sys.executable, "-c", "from casebench.cli import main; main()", "annotate", "export",
                    "--db", db, "-o", str(out)], check=True, capture_output=True,
                   env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"})
    return json.loads(out.with_name(out.stem + ".annotations.json").read_text())["votes"]


def positions(db: str) -> dict[int, int]:
    """case id -> dataset position, from the database itself."""
    from sqlalchemy import text

    from casebench.annotate.db import make_engine

    engine = make_engine(db)
    try:
        with engine.connect() as conn:
            return {int(i): int(p) for i, p in conn.execute(text("SELECT id, position FROM cases WHERE kind = 'case'"))}
    finally:
        engine.dispose()


def test_sigkill_and_restart_lose_and_invent_no_vote(db_url, tmp_path):
    data = write_dataset(tmp_path / "cases.json", CASES)
    args = ("--votes-per-case", str(VOTES_PER_CASE), "--admin-token", "t0ken-for-the-test")
    srv = AnnotateServer(data, db_url, *args).start()
    port = srv.port
    study = Study(port)
    threads = [threading.Thread(target=study.annotator, args=(f"ann{i}",), daemon=True) for i in range(ANNOTATORS)]
    for t in threads:
        t.start()
    kills = 0
    try:
        for k in range(KILLS):
            target = (k + 1) * CASES * VOTES_PER_CASE // (KILLS + 2)
            while len(study.acked) < target and any(t.is_alive() for t in threads):
                assert time.monotonic() < study.deadline, "the annotators made no progress"
                time.sleep(0.01)
            if not any(t.is_alive() for t in threads):
                break
            srv.proc.kill()  # SIGKILL: no shutdown, requests in flight are cut
            srv.proc.wait()
            kills += 1
            srv = AnnotateServer(data, db_url, *args, "--port", str(port)).start()
        for t in threads:
            t.join(max(1.0, study.deadline - time.monotonic()))
        assert not any(t.is_alive() for t in threads), "annotators still voting at the deadline"
    finally:
        srv.stop()
    assert kills == KILLS
    assert study.server_errors == [] and study.unexpected == []

    pos = positions(db_url)
    acked = Counter((name, pos[case], vote) for name, case, vote in study.acked)
    exported = Counter((v["annotator"], v["source_position"], "safe" if v["vote"] in (1, "safe") else "unsafe")
                       for v in export(db_url, tmp_path / "export.json"))
    assert max(acked.values()) == 1  # no annotator acknowledged twice on a case
    assert exported == acked  # each acknowledged vote exactly once, nothing unacknowledged
    per_case = Counter(p for _, p, _ in exported)
    assert sorted(per_case) == list(range(CASES)) and set(per_case.values()) == {VOTES_PER_CASE}
