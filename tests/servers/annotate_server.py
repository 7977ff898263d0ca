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
    def __init__(self, data: Path, db: str, *args: str, env: dict[str, str] | None = None) -> None:
        self.data, self.db, self.args = data, db, args
        self.env = env
        self.proc: subprocess.Popen | None = None
        self.banner: list[str] = []
        self.port = 0

    def start(self, timeout: float = 60) -> "AnnotateServer":
        env = dict(os.environ)
        env["PYTHONPATH"] = str(REPO / "src") + os.pathsep + env.get("PYTHONPATH", "")
        env.update(self.env or {})
        cmd = [sys.executable, "-c", "from casebench.cli import main; main()", "annotate", "serve",
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
