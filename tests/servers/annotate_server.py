"""Run ``casebench annotate serve`` as a real process on a free loopback port, and talk to it.

Usage::

    with AnnotateServer(data_path, db_url, "--votes-per-case", "2") as srv:
        srv.base, srv.admin_token, srv.completion_code, srv.banner (its start-up lines)
        srv.get("/case?annotator=a1") -> (status, headers, body text)
        srv.vote("a1", case_id, "safe") -> (status, location or body)
        srv.admin() -> the admin summary as JSON

plus helpers to build small datasets of our own wording (``write_dataset``).
"""

from __future__ import annotations

import copy
import http.client
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"


def write_dataset(path: Path, n: int, *, xss: bool = False, pairs: bool = False) -> Path:
    """``n`` cases built from tests/fixtures/small_cases.json (our own wording) with distinct
    queries; ``pairs`` gives every query its two contexts (one intended safe, one not); ``xss``
    makes case 0's query and one context field hold HTML that would run if not escaped."""
    base = json.loads((FIXTURES / "small_cases.json").read_text())
    out = []
    for i in range(n):
        rec = copy.deepcopy(base[i % len(base)])
        q = i // 2 if pairs else i
        rec["query"] = f"{base[q % len(base)]['query']} (variant {q})"
        if pairs:
            rec["context_intended_to_be_safe"] = i % 2 == 0
        out.append(rec)
    if xss:
        out[0]["query"] = ('<script>document.title="pwned";window.__xss=1</script>'
                           '<img src=x onerror="window.__xss=2"> How do I sharpen a knife?')
        out[0]["context"]["recipient"]["background"] = '<b onmouseover="window.__xss=3">bold</b> & "quoted"'
    path.write_text(json.dumps(out, indent=1))
    return path


class AnnotateServer:
    def __init__(self, data: Path, db: str, *args: str, env: dict[str, str] | None = None,
                 command: str = "serve") -> None:
        """``command``: ``serve`` (DATA is a dataset) or ``answers`` (DATA is a respond run)."""
        self.data, self.db, self.args = data, db, args
        self.command = command
        self.env = env
        self.proc: subprocess.Popen | None = None
        self.banner: list[str] = []
        self.port = 0

    def start(self, timeout: float = 60) -> "AnnotateServer":
        env = dict(os.environ)
        env["PYTHONPATH"] = str(REPO / "src") + os.pathsep + env.get("PYTHONPATH", "")
        env.update(self.env or {})
        cmd = [sys.executable, "-c", "from casebench.cli import main; main()", "annotate", self.command,
               str(self.data), "--db", self.db, "--port", "0", *self.args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        deadline = time.time() + timeout
        assert self.proc.stdout is not None
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                err = self.proc.stderr.read() if self.proc.stderr else ""
                raise RuntimeError(f"annotate serve exited ({self.proc.wait()}): {err}\n{''.join(self.banner)}")
            self.banner.append(line)
            if line.startswith("completion code:"):
                break
        text = "".join(self.banner)
        self.port = int(re.search(r"http://127\.0\.0\.1:(\d+)/", text).group(1))
        self.admin_token = re.search(r"/admin\?token=(\S+)", text).group(1)
        self.completion_code = text.split("completion code:")[1].strip()
        self.base = f"http://127.0.0.1:{self.port}"
        # the socket is bound before the banner is printed; wait until the app answers
        while time.time() < deadline:
            try:
                if self.get("/healthz")[0] in (200, 503):
                    return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("annotate serve did not answer")

    def stop(self) -> str:
        """Stop the server; return what it wrote on stderr."""
        if self.proc is None:
            return ""
        self.proc.terminate()
        try:
            _, err = self.proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        self.proc = None
        return err

    def __enter__(self) -> "AnnotateServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ HTTP

    def request(self, method: str, path: str, body: bytes | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], str]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            r = conn.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read().decode("utf-8", "replace")
        finally:
            conn.close()

    def get(self, path: str) -> tuple[int, dict[str, str], str]:
        return self.request("GET", path)

    def post_form(self, path: str, form: dict[str, str]) -> tuple[int, dict[str, str], str]:
        return self.request("POST", path, urlencode(form).encode(),
                            {"Content-Type": "application/x-www-form-urlencoded"})

    def vote(self, annotator: str, case: int | str, vote: str) -> tuple[int, dict[str, str], str]:
        return self.post_form("/vote", {"annotator": annotator, "case": str(case), "vote": vote})

    def shown_case(self, annotator: str) -> int | None:
        """The case id on this annotator's page, or None on the completion page."""
        status, _, body = self.get("/case?" + urlencode({"annotator": annotator}))
        assert status == 200, body
        m = re.search(r'name="case" value="(\d+)"', body)
        return int(m.group(1)) if m else None

    def admin(self) -> dict[str, Any]:
        status, _, body = self.get(f"/admin?format=json&token={self.admin_token}")
        assert status == 200, body
        return json.loads(body)


def case_page_id(body: str) -> int | None:
    m = re.search(r'name="case" value="(\d+)"', body)
    return int(m.group(1)) if m else None


def _pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))] if s else float("nan")


def simulate_annotators(srv: AnnotateServer, annotators: int, resubmit_every: int = 10,
                        prefix: str = "sim", think: float = 0.0) -> dict[str, Any]:
    """``annotators`` threads, each an annotator with its own keep-alive HTTP connection, vote until
    their completion page: GET /case, POST /vote (Safe or Unsafe by case parity), and every
    ``resubmit_every``-th vote POSTed a second time, as a reload of the form would; ``think``: mean
    seconds (uniform 0.5x..1.5x) an annotator reads before voting. Returns counts
    and latencies (seconds) of the vote POSTs and of whole vote cycles (POST + next page)."""
    import random
    import threading

    lock = threading.Lock()
    post_lat: list[float] = []
    cycle_lat: list[float] = []
    counts = {"recorded": 0, "resubmitted_ok": 0, "refused": 0, "errors": 0, "completed": 0}
    errors: list[str] = []

    def one(name: str) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
        mine_post: list[float] = []
        mine_cycle: list[float] = []
        local = {"recorded": 0, "resubmitted_ok": 0, "refused": 0, "errors": 0, "completed": 0}
        n = 0
        rng = random.Random(name)

        def req(method: str, path: str, body: bytes | None = None) -> tuple[int, str]:
            headers = {"Content-Type": "application/x-www-form-urlencoded"} if body else {}
            conn.request(method, path, body=body, headers=headers)
            r = conn.getresponse()
            return r.status, r.read().decode("utf-8", "replace")

        try:
            status, body = req("GET", "/case?" + urlencode({"annotator": name}))
            while True:
                if status != 200:
                    local["errors"] += 1
                    errors.append(f"{name}: GET {status}")
                    return
                case = case_page_id(body)
                if case is None:
                    local["completed"] += 1
                    return
                form = urlencode({"annotator": name, "case": case, "vote": "safe" if case % 2 else "unsafe"}).encode()
                if think:
                    time.sleep(think * rng.uniform(0.5, 1.5))
                t0 = time.perf_counter()
                status, body = req("POST", "/vote", form)
                t1 = time.perf_counter()
                if status == 303:
                    local["recorded"] += 1
                elif status == 409:
                    local["refused"] += 1
                else:
                    local["errors"] += 1
                    errors.append(f"{name}: POST {status} {body[:200]}")
                n += 1
                if resubmit_every and n % resubmit_every == 0:
                    s2, b2 = req("POST", "/vote", form)
                    local["resubmitted_ok"] += int(s2 == 303)
                    if s2 != 303:
                        errors.append(f"{name}: resubmitted POST {s2} {b2[:300]}")
                status, body = req("GET", "/case?" + urlencode({"annotator": name}))
                t2 = time.perf_counter()
                mine_post.append(t1 - t0)
                mine_cycle.append(t2 - t0)
        finally:
            conn.close()
            with lock:
                post_lat.extend(mine_post)
                cycle_lat.extend(mine_cycle)
                for k, v in local.items():
                    counts[k] += v

    threads = [threading.Thread(target=one, args=(f"{prefix}{i:03d}",)) for i in range(annotators)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    return {
        **counts, "errors_seen": errors[:10], "wall_s": wall, "votes_per_s": counts["recorded"] / wall if wall else 0,
        "post_p50_ms": 1000 * _pct(post_lat, 0.5), "post_p95_ms": 1000 * _pct(post_lat, 0.95),
        "cycle_p50_ms": 1000 * _pct(cycle_lat, 0.5), "cycle_p95_ms": 1000 * _pct(cycle_lat, 0.95),
    }
