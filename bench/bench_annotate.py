"""Vote collection under load: 60 annotators at once cast 5,000 votes, on SQLite and on PostgreSQL.

The real command (``casebench annotate serve``, one process, uvicorn) serves a dataset of 500
invented cases at 10 votes per case; 60 threads, each an annotator with its own kept-alive HTTP
connection on loopback, vote until their completion page (GET the case, POST the vote; every 10th
vote POSTed twice, as a reload would). Two paces:

* ``flood``: no pause between votes (the server saturated: throughput, and latency that is
  mostly queueing behind the other 59 annotators);
* ``paced``: each annotator pauses ``--think`` seconds (uniform 0.5x..1.5x) before each vote, as
  people do (they take seconds per case), so latency is the server's own time per vote.

Then it checks what the issue asks: 0 votes lost (votes the clients saw recorded == votes in the
database), 0 duplicated (no annotator twice on a case), every case with exactly N votes. Prints
p50/p95 milliseconds of the vote POST (the commit) and of the whole cycle (POST + next page).

    .venv/bin/python bench/bench_annotate.py [--cases 500] [--votes-per-case 10] [--annotators 60]
        [--think 1.0] [--pace flood,paced] [--db sqlite,postgresql]

That a vote survives the server being killed (SIGKILL) and restarted, exactly once, is tested in
tests/test_annotate_kill.py (both databases); this bench measures speed only.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "src"))

from servers.annotate_server import AnnotateServer, simulate_annotators, write_dataset  # noqa: E402


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far (Linux /proc)."""
    import os

    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def check(srv: AnnotateServer, result: dict, n: int, cases: int) -> dict:
    """Lost / duplicated / exactly-N, from the admin figures and from the export."""
    import subprocess

    summary = srv.admin()
    out = Path(tempfile.mkdtemp()) / "export.json"
    subprocess.run([sys.executable, "-c", "from casebench.cli import main; main()", "annotate", "export",
                    "--db", srv.db, "-o", str(out)], check=True, capture_output=True,
                   env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"})
    side = json.loads(out.with_name("export.annotations.json").read_text())
    pairs = Counter((v["source_position"], v["annotator"]) for v in side["votes"])
    per_case = Counter(v["source_position"] for v in side["votes"])
    return {
        "lost": result["recorded"] - summary["votes"],
        "duplicated": sum(c - 1 for c in pairs.values() if c > 1),
        "cases_exactly_n": sum(1 for p in range(cases) if per_case.get(p, 0) == n),
        "cases": cases,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=500)
    ap.add_argument("--votes-per-case", type=int, default=10)
    ap.add_argument("--annotators", type=int, default=60)
    ap.add_argument("--think", type=float, default=1.0, help="mean pause before a vote in the paced run (s)")
    ap.add_argument("--pace", default="flood,paced")
    ap.add_argument("--db", default="sqlite,postgresql")
    ap.add_argument("--sqlite-sync", default="full", choices=["full", "normal"])
    args = ap.parse_args()

    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")), platform.machine())
    print(f"machine: {cpu}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"{args.annotators} annotators, {args.cases} cases x {args.votes_per_case} votes = "
          f"{args.cases * args.votes_per_case} votes per run")
    rows = []
    for db_kind in args.db.split(","):
        pg = None
        if db_kind == "postgresql":
            from servers.postgres_server import PostgresServer, find_bindir

            if find_bindir() is None:
                print("postgresql: skipped (no PostgreSQL binaries; apt-get install postgresql)")
                continue
            pg = PostgresServer().start()
        try:
            for i, pace in enumerate(args.pace.split(",")):
                tmp = Path(tempfile.mkdtemp(prefix="bench-annotate-"))
                data = write_dataset(tmp / "data.json", args.cases)
                db = f"sqlite:///{tmp / 'votes.db'}" if pg is None else pg.create_database(f"bench{i}")
                extra = ("--sqlite-sync", args.sqlite_sync) if pg is None else ()
                with AnnotateServer(data, db, "--votes-per-case", str(args.votes_per_case), *extra) as srv:
                    think = args.think if pace == "paced" else 0.0
                    cpu0 = cpu_seconds(srv.proc.pid)
                    load0 = os.getloadavg()[0]
                    r = simulate_annotators(srv, args.annotators, think=think)
                    r["server_cpu_ms_per_vote"] = 1000 * (cpu_seconds(srv.proc.pid) - cpu0) / max(1, r["recorded"])
                    r["load"] = (load0 + os.getloadavg()[0]) / 2
                    c = check(srv, r, args.votes_per_case, args.cases)
                ok = c["lost"] == 0 and c["duplicated"] == 0 and c["cases_exactly_n"] == c["cases"] and not r["errors"]
                rows.append((db_kind, pace, r, c, ok))
                print(f"{db_kind:<10} {pace:<6} votes {r['recorded']:>5} in {r['wall_s']:6.1f} s "
                      f"({r['votes_per_s']:6.1f}/s); vote POST p50 {r['post_p50_ms']:6.1f} ms, p95 "
                      f"{r['post_p95_ms']:6.1f} ms; cycle p50 {r['cycle_p50_ms']:6.1f} ms, p95 "
                      f"{r['cycle_p95_ms']:6.1f} ms; lost {c['lost']}, duplicated {c['duplicated']}, "
                      f"cases with exactly N {c['cases_exactly_n']}/{c['cases']}, errors {r['errors']}; "
                      f"server CPU {r['server_cpu_ms_per_vote']:.1f} ms/vote; machine load {r['load']:.1f}"
                      f"{'' if ok else '  <-- FAILED'}", flush=True)
        finally:
            if pg is not None:
                pg.close()
    if not all(ok for *_, ok in rows):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
